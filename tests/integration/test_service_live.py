"""Real commands through the warm service's thin C client (docs/service.md) against the live Grid
Engine, each compared byte for byte with the same command run in-process (the same client with
``SLURM_SHIM_SERVICE=off``, which execs the Python command); the service's request count shows
that it ran each warm call. Submissions through the service happen once each."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from conftest import REPO, as_foreground, command_dir, run, shim_env, wait_until
from shim.service import server as service

pytestmark = pytest.mark.gridengine
ON = {"SLURM_SHIM_SERVICE": ""}  # the service on, even in CI's pass that turns it off for the rest


@pytest.fixture(scope="module")
def warm(live_cluster):
    """(bin dir of compiled clients, agent/service dir); the service is started and stopped here."""
    top = Path(tempfile.mkdtemp(prefix="shim-service-live-"))
    top.chmod(0o755)
    py_bin = command_dir()
    if (py_bin / "squeue").read_bytes()[:4] == b"\x7fELF":  # scripts/setup installed the client: its fallback
        py_bin = py_bin.parent / "libexec" / "slurm-shim"
    cbin = top / "bin"
    cbin.mkdir()
    python = command_dir() / "python3"
    subprocess.run(["cc", "-O2", f'-DSHIM_FALLBACK="{py_bin}"', f'-DSHIM_PYTHON="{python}"', "-o",
                    str(cbin / "squeue"), str(REPO / "src" / "shim" / "client" / "client.c")], check=True)
    for c in service.SERVED:
        if c != "squeue":
            shutil.copy2(cbin / "squeue", cbin / c)
    d = top / "agent"
    d.mkdir(mode=0o700)
    env = {"SLURM_SHIM_AGENT_DIR": str(d), **ON}
    cp = run(str(cbin / "squeue"), "--version", env=env)  # no service yet: in-process, and one starts
    assert cp.returncode == 0, cp.stderr
    wait_until(lambda: service.info(str(d)), 60, "the warm service to start")
    yield cbin, d
    pid = service.pid_of(str(d))
    if pid:
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: service.info(str(d)) is None, 30, "the service to exit")
    shutil.rmtree(top, ignore_errors=True)


def both(warm, *argv, input=None, cwd=None, env=None, timeout=60):
    """(through the service, in-process, requests the service ran for the first)."""
    cbin, d = warm
    e = {"SLURM_SHIM_AGENT_DIR": str(d), **ON, **(env or {})}
    before = service.info(str(d))
    hot = _run(cbin, argv, e, input, cwd, timeout)
    after = service.info(str(d))
    cold = _run(cbin, argv, {**e, "SLURM_SHIM_SERVICE": "off"}, input, cwd, timeout)
    ran = after[1] - before[1] if before and after and before[0] == after[0] else None
    return hot, cold, ran


def _run(cbin, argv, env, input, cwd, timeout):
    cp = subprocess.run([str(cbin / argv[0]), *argv[1:]], input=input, capture_output=True, cwd=cwd,
                        env=shim_env(env), timeout=timeout)
    return cp.returncode, cp.stdout, cp.stderr


def same(warm, *argv, tries=3, **kw):
    """The warm and the in-process call say the same bytes (a queue others change between the two
    calls gets up to three tries); the service ran the warm one."""
    for _ in range(tries):
        hot, cold, ran = both(warm, *argv, **kw)
        if ran == 1 and hot == cold:
            return hot
    assert ran == 1, "the service did not run the warm call (refused or restarted: see its log)"
    assert hot == cold
    return hot


@pytest.fixture(scope="module")
def held(warm, tmp_path_factory):
    """A held job of ours, submitted through the service."""
    cbin, d = warm
    work = tmp_path_factory.mktemp("held")
    name = f"svc-{uuid.uuid4().hex[:6]}"
    cp = run(str(cbin / "sbatch"), "-H", "-J", name, "--wrap", "true", cwd=work,
             env={"SLURM_SHIM_AGENT_DIR": str(d), **ON})
    assert cp.returncode == 0, cp.stderr
    job = int(re.fullmatch(r"Submitted batch job (\d+)\n", cp.stdout).group(1))
    yield job
    run("qdel", str(job))


def test_queries_say_the_same_bytes_warm_and_in_process(warm, held):
    for argv in (["squeue", "-j", str(held)], ["squeue", "-j", str(held), "-o", "%i %j %u %T %r"],
                 ["scontrol", "show", "job", str(held)], ["squeue", "-j", "999999999"],
                 ["sacct", "-j", str(held), "-X", "-o", "JobID,JobName,State"], ["sinfo", "-h", "-o", "%P %a %D"],
                 ["squeue", "--bogus"], ["scontrol", "show", "partition"], ["sprio", "-j", str(held)]):
        rc, out, err = same(warm, *argv)
        assert out or err, argv


def test_sbatch_through_the_service_submits_once(warm, tmp_path):
    cbin, d = warm
    name = f"svc-{uuid.uuid4().hex[:6]}"
    (tmp_path / "job.sh").write_text(f"#!/bin/bash\n#SBATCH -J {name}\ntrue\n")
    before = service.info(str(d))
    # the script on stdin (sbatch < job.sh), SBATCH_* input, the client's directory
    cp = subprocess.run([str(cbin / "sbatch"), "-H", "--parsable"], stdin=open(tmp_path / "job.sh", "rb"),
                        capture_output=True, text=True, cwd=tmp_path, timeout=60,
                        env=shim_env({"SLURM_SHIM_AGENT_DIR": str(d), "SBATCH_TIMELIMIT": "7", **ON}))
    assert cp.returncode == 0, cp.stderr
    after = service.info(str(d))
    assert after[0] == before[0] and after[1] == before[1] + 1
    job = int(cp.stdout.strip())
    try:
        out = run("scontrol", "show", "job", str(job)).stdout
        assert f"JobName={name}" in out and f"WorkDir={tmp_path}" in out and "TimeLimit=00:07:00" in out, out
        listed = run("qstat", "-u", "*", "-xml").stdout
        assert len(re.findall(rf"<JB_name>{re.escape(name)}</JB_name>", listed)) == 1  # once
        rc, out_, err = same(warm, "squeue", "-j", str(job), "-h", "-o", "%j %T")
        assert out_.decode() == f"{name} PENDING\n"
    finally:
        run("qdel", str(job))


def test_scancel_interactive_prompt_and_cancel(warm, tmp_path):
    cbin, d = warm
    cp = run(str(cbin / "sbatch"), "-H", "--parsable", "--wrap", "true", cwd=tmp_path,
             env={"SLURM_SHIM_AGENT_DIR": str(d), **ON})
    assert cp.returncode == 0, cp.stderr
    job = int(cp.stdout.strip())
    try:
        rc, out, err = same(warm, "scancel", "-i", str(job), input=b"n\n")  # the prompt, declined
        assert str(job) in (out + err).decode()
        assert run("qstat", "-j", str(job)).returncode == 0  # still there
        hot, _, ran = both(warm, "scancel", str(job))
        assert hot[0] == 0 and ran == 1
        wait_until(lambda: run("qstat", "-j", str(job)).returncode != 0, 30, "the job to go")
    finally:
        run("qdel", str(job))


def test_squeue_iterate_stops_on_ctrl_c_as_in_process(warm, held):
    cbin, d = warm
    codes = []
    for off in ("", "off"):
        env = shim_env({"SLURM_SHIM_AGENT_DIR": str(d), "SLURM_SHIM_SERVICE": off})
        p = subprocess.Popen([str(cbin / "squeue"), "-i", "1", "-j", str(held)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, preexec_fn=as_foreground)
        first = p.stdout.readline() + p.stdout.readline()  # the first block's date and header lines
        out = [b""]

        def listed() -> bool:
            out[0] += p.stdout.readline()  # (a block a second)
            return str(held).encode() in out[0]

        wait_until(listed, 30, f"squeue -i to list job {held}", delay=0, cap=0)
        p.send_signal(signal.SIGINT)
        rest, err = p.communicate(timeout=30)
        codes.append((p.returncode, err))
        assert first
    assert codes[0] == codes[1]
