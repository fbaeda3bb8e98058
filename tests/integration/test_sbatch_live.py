"""sbatch against the live Grid Engine: real submissions, real jobs, Slurm's files and variables."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import REPO, run, wait_until

pytestmark = pytest.mark.gridengine


def submit(*argv, cwd, user=None, input=None, env=None) -> int:
    cp = run("sbatch", *argv, cwd=cwd, user=user, input=input, env=env)
    assert cp.returncode == 0, cp.stderr
    m = re.fullmatch(r"Submitted batch job (\d+)\n", cp.stdout)
    assert m, cp.stdout
    return int(m.group(1))


def wait_output(path: Path, marker: str, timeout: float = 60) -> str:
    def done():
        return path.exists() and marker in path.read_text()

    wait_until(done, timeout, f"{marker!r} in {path}")
    return path.read_text()


def env_of(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if re.match(r"^[A-Z_][A-Z0-9_]*=", line))


def test_example_script_runs_unchanged(workdir):
    shutil.copy(REPO / "examples" / "hello.sh", workdir)
    job = submit("hello.sh", "first", "second arg", cwd=workdir)
    text = wait_output(workdir / f"slurm-{job}.out", "done")
    assert f"Hello from job {job} (hello-shim)" in text
    assert "ntasks=2 cpus_per_task=1" in text
    assert f"submitted from {workdir}, running in {workdir}" in text
    assert "arguments: 2 (first second arg)" in text


ENVDUMP = """#!/bin/bash
echo "argv0=$0"
echo "args=$*"
echo "pwd=$(pwd)"
env | sort
echo "to-stderr" >&2
echo END
"""


def test_job_sees_slurm_variables(workdir):
    (workdir / "env.sh").write_text(ENVDUMP)
    job = submit("-J", "envjob", "-n", "2", "-c", "1", "--mem=100M", "-t", "5", "env.sh", "a", "b c", cwd=workdir)
    text = wait_output(workdir / f"slurm-{job}.out", "END")
    env = env_of(text)
    host = run("hostname").stdout.strip().split(".")[0]
    assert env["SLURM_JOB_ID"] == str(job) == env["SLURM_JOBID"]
    assert env["SLURM_JOB_NAME"] == "envjob"
    assert env["SLURM_SUBMIT_DIR"] == str(workdir)
    assert env["SLURM_NTASKS"] == "2" and env["SLURM_NPROCS"] == "2"
    assert env["SLURM_CPUS_PER_TASK"] == "1"
    assert env["SLURM_CPUS_ON_NODE"] == "2"
    assert env["SLURM_JOB_PARTITION"] == "debug"
    assert env["SLURM_JOB_NODELIST"] == host == env["SLURMD_NODENAME"]
    assert env["SLURM_MEM_PER_NODE"] == "100"
    assert env["ENVIRONMENT"] == "BATCH"
    assert "args=a b c" in text
    assert "to-stderr" in text  # stderr merged into stdout, as Slurm does by default
    assert f"pwd={workdir}" in text


def test_unknown_option_is_refused_and_nothing_submitted(workdir):
    (workdir / "x.sh").write_text("#!/bin/sh\n#SBATCH -J bogustest\ntrue\n")
    cp = run("sbatch", "--bogus-option", "x.sh", cwd=workdir)
    assert cp.returncode == 255
    assert cp.stderr == "sbatch: unrecognized option '--bogus-option'\nTry \"sbatch --help\" for more information\n"
    assert cp.stdout == ""
    assert "<JB_name>bogustest</JB_name>" not in run("qstat", "-u", "*", "-xml").stdout


def test_parsable_and_stdin_script(workdir):
    cp = run("sbatch", "--parsable", "-o", "out-%j.txt", input="#!/bin/sh\necho from-stdin\n", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    job = int(cp.stdout.strip())
    assert "from-stdin" in wait_output(workdir / f"out-{job}.txt", "from-stdin")


def test_plain_user_submits_sees_and_owns_only_their_jobs(workdir, plain_user):
    (workdir / "me.sh").write_text("#!/bin/sh\nid -un\necho \"$SLURM_JOB_USER $SLURM_JOB_UID\"\necho END\n")
    job = submit("me.sh", cwd=workdir, user=plain_user)
    out = workdir / f"slurm-{job}.out"
    text = wait_output(out, "END")
    assert text.splitlines()[0] == plain_user
    uid = run("id", "-u", plain_user).stdout.strip()
    assert f"{plain_user} {uid}" in text
    assert out.owner() == plain_user
    # another user's job: visible as in Slurm (no PrivateData), not cancellable
    held = submit("-H", "--wrap", "true", cwd=workdir)
    try:
        cp = run("scancel", str(held), user=plain_user)
        assert (cp.returncode, cp.stderr) == (
            210, f"scancel: error: Kill job error on job id {held}: Access/permission denied\n")
        assert run("squeue", "-h", "-j", str(held), "-o", "%i %T", user=plain_user).stdout.split() == [
            str(held), "PENDING"]
    finally:
        run("scancel", str(held))


def test_hostile_text_is_never_interpreted(workdir):
    canary = workdir / "pwned"
    evil = f"$(touch {canary})`touch {canary}`;touch {canary}"
    wrap = "printf '%s\\n' \"$SLURM_JOB_NAME\" \"$EVIL\"; echo END"
    job = submit("-J", evil, "--export", f"ALL,EVIL={evil}", "-o", "out %j 'q'.txt", "--wrap", wrap, cwd=workdir,
                 env={"EVIL": "x"})
    text = wait_output(workdir / f"out {job} 'q'.txt", "END")
    assert text.splitlines()[:2] == [evil, evil]
    assert not canary.exists()
    squeue = run("squeue", "-h", "-j", str(job), "-t", "all", "-o", "%j")
    # %j has no width: the whole name, byte for byte, as Slurm prints it
    assert (squeue.returncode, squeue.stdout, squeue.stderr) == (0, evil + "\n", "")
