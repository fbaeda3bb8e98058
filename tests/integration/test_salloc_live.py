"""salloc against the live Grid Engine: the allocation job, Slurm's messages, the command's
environment and exit code, srun inside (outside the job's process tree), release and revocation."""

from __future__ import annotations

import json
import os
import re

import pytest

from conftest import SLURM_REF, STATE_DIR, run, wait_until

pytestmark = pytest.mark.gridengine

HOST = os.uname().nodename.split(".")[0]
STATE = STATE_DIR  # the selected cell's (conftest.SITE_CONFIG)
MINE = STATE / "users" / str(os.getuid())  # the records of the tests' own (root's) jobs
PENDING = r"(salloc: Pending job allocation \d+\nsalloc: job \d+ queued and waiting for resources\n" \
          r"salloc: job \d+ has been allocated resources\n)?"


def env_of(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", line))


def ref_case(name: str) -> tuple[str, str]:
    text = (SLURM_REF / f"{name}.txt").read_text()
    out = text.split("# --- stdout", 1)[1].split("\n", 1)[1].split("# --- stderr", 1)[0]
    err = text.split("# --- stderr", 1)[1].split("\n", 1)[1]
    return out, err


def granted(stderr: str) -> int:
    m = re.fullmatch(PENDING + r"salloc: Granted job allocation (\d+)\n(?:.*\n)*salloc: Relinquishing job allocation "
                     r"\2\n", stderr)
    assert m, stderr
    return int(m.group(2))


def gone(job: int) -> bool:
    return run("qstat", "-j", str(job)).returncode != 0


def test_env_and_messages_equal_slurms(workdir):
    cp = run("salloc", "-n1", "env", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    job = granted(cp.stderr)
    ref_out, ref_err = ref_case("salloc_env")
    assert re.sub(r"\d+", "N", ref_err) == re.sub(r"\d+", "N", cp.stderr)
    got, want = env_of(cp.stdout), env_of(ref_out)
    config = {"SLURM_CONF", "SLURM_JOB_ACCOUNT"}
    ours = {k for k in got if k.startswith("SLURM") and not k.startswith("SLURM_SHIM_")}  # the shim's own settings
    assert ours == {k for k in want if k.startswith("SLURM")} - config
    for k in ("SLURM_JOB_NAME", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_JOB_NUM_NODES", "SLURM_TASKS_PER_NODE",
              "SLURM_JOB_CPUS_PER_NODE", "SLURM_JOB_PARTITION", "SLURM_JOB_QOS", "SLURM_NODE_ALIASES",
              "SLURM_CLUSTER_NAME", "SLURM_NNODES"):
        assert got[k] == want[k], k
    assert got["SLURM_JOB_ID"] == got["SLURM_JOBID"] == str(job) and got["SLURM_JOB_NODELIST"] == HOST
    assert got["SLURM_SUBMIT_DIR"] == str(workdir)
    wait_until(lambda: gone(job), 30, "the allocation to be released")
    end = json.loads((MINE / "records" / "events" / str(job // 100) / f"{job}.x.end.json").read_text())
    assert (end["exit"], end["state"]) == (0, "COMPLETED")


def test_srun_inside_uses_the_allocation(workdir):
    cp = run("salloc", "-n2", "srun", "-l", "hostname", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    granted(cp.stderr)
    assert sorted(cp.stdout.splitlines()) == [f"0: {HOST}", f"1: {HOST}"]
    ref_out, _ = ref_case("salloc_srun")
    assert sorted(ref_out.splitlines()) == ["0: vm", "1: vm"]


def test_steps_of_an_allocation(workdir):
    script = ('srun true; srun -n1 bash -c "echo \\$SLURM_STEP_ID \\$SLURM_NTASKS \\$SLURM_DISTRIBUTION"; '
              'srun bash -c "echo \\$SLURM_STEP_ID \\$SLURM_PROCID \\$SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0 \\$JOB_ID"; '
              'srun -n3 true; echo rc=$?')
    cp = run("salloc", "-n2", "bash", "-c", script, cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    job = granted(cp.stderr)
    lines = cp.stdout.splitlines()
    assert lines[0] == "1 1 cyclic"
    assert sorted(lines[1:3]) == [f"2 0 2 {job}", f"2 1 2 {job}"]
    assert lines[3] == "rc=1"
    assert f"srun: error: Unable to create step for job {job}: More processors requested than permitted" in cp.stderr


def test_exit_code_and_release(workdir):
    cp = run("salloc", "-N1", "bash", "-c", "srun bash -c 'exit 3'; echo step=$?; exit 7", cwd=workdir)
    assert cp.returncode == 7
    job = granted(cp.stderr)
    assert cp.stdout == "step=3\n"
    assert f"srun: error: {HOST}: task 0: Exited with exit code 3" in cp.stderr
    wait_until(lambda: gone(job), 30, "the allocation to be released")
    end = json.loads((MINE / "records" / "events" / str(job // 100) / f"{job}.x.end.json").read_text())
    assert end["exit"] == 7


def test_no_shell_and_srun_from_outside(workdir):
    cp = run("salloc", "--no-shell", "-n1", "-J", "keepme", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    job = int(re.search(r"Granted job allocation (\d+)", cp.stderr).group(1))
    try:
        assert not gone(job)
        cp = run("srun", f"--jobid={job}", "bash", "-c", "echo $SLURM_JOB_ID $SLURM_STEP_ID", cwd=workdir)
        assert (cp.returncode, cp.stdout) == (0, f"{job} 0\n"), cp.stderr
        cp = run("srun", "bash", "-c", "echo $SLURM_STEP_ID", cwd=workdir, env={"SLURM_JOB_ID": str(job)})
        assert (cp.returncode, cp.stdout) == (0, "1\n"), cp.stderr
    finally:
        run("qdel", str(job))
    wait_until(lambda: gone(job), 30, "the allocation to end")


def test_revoked_allocation_signals_the_command(workdir):
    cp = run("salloc", "-K", "bash", "-c", "qdel $SLURM_JOB_ID >/dev/null; sleep 60; echo survived", cwd=workdir)
    assert "survived" not in cp.stdout  # signalled before its sleep ended
    assert re.search(r"salloc: Job allocation \d+ has been revoked\.", cp.stderr), cp.stderr
    assert cp.returncode == 143


def test_plain_user(workdir):
    cp = run("salloc", "-n2", "srun", "-l", "id", "-un", user="alice", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.splitlines()) == ["0: alice", "1: alice"]


def test_unsatisfiable_request(workdir):
    cp = run("salloc", "--gres=gpu:5", "-p", "gpu", "true", cwd=workdir)
    assert cp.returncode == 1
    assert cp.stderr == "salloc: error: Job submit/allocate failed: Requested node configuration is not available\n"
