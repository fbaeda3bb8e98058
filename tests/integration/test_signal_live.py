"""scancel -s on the live Grid Engine: any signal reaches the running job as in Slurm (issue 15
part 6), through the shim's signal channel to the job wrapper and srun's launchers.

What Slurm does, from its source (22.05) and the reference capture
(``reference/slurm-22.05/scancel-signal-joboutput.txt``, jobs 133 and 134):
- slurmctld's job_signal (src/slurmctld/job_mgr.c): a signal other than SIGKILL signals a running
  job and does not cancel it; without flags _signal_job sends KILL_STEPS_ONLY, and slurmd's
  _kill_all_active_steps (src/slurmd/slurmd/req.c) signals every step but the batch step: a job
  without steps gets nothing (job 133 printed nothing for ``scancel --signal=USR1``);
- ``-b`` (KILL_JOB_BATCH): slurmstepd's _handle_signal_container kill()s the batch shell alone;
- ``-f`` (KILL_FULL_JOB): it killpg()s the batch shell's group, srun included, which passes the
  signal on to its step (job 134: "batch shell got USR1" and "step got USR1").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import run, wait_until

pytestmark = pytest.mark.gridengine

NO_STEPS = """#!/bin/bash
trap 'echo "batch got USR1"' USR1
trap 'echo "batch got USR2"' USR2
trap 'echo "batch got TERM"; exit 7' TERM
echo started
for i in $(seq 1200); do sleep 0.1; done
"""

WITH_STEP = """#!/bin/bash
trap 'echo "batch got USR1"' USR1
trap 'echo "batch got USR2"' USR2
srun bash -c 'trap "echo step got USR1" USR1; trap "echo step got USR2" USR2; echo step started; \
for i in $(seq 1200); do sleep 0.1; done' &
for i in $(seq 1200); do sleep 0.1; done
"""


@pytest.fixture
def jobs():
    ids: list[int] = []
    yield ids
    for j in ids:
        run("scancel", str(j))


def submit(workdir: Path, script: str, jobs: list[int], user: str | None = None) -> tuple[int, Path]:
    path = workdir / f"sig{len(jobs)}-{user or 'root'}.sh"
    path.write_text(script)
    path.chmod(0o755)
    cp = run("sbatch", "--parsable", "-t", "10", str(path), cwd=workdir, user=user)
    assert cp.returncode == 0, cp.stderr
    job = int(cp.stdout.strip())
    jobs.append(job)
    return job, workdir / f"slurm-{job}.out"


def output_has(out: Path, *markers: str, timeout: float = 60) -> str:
    wait_until(lambda: out.exists() and all(m in out.read_text() for m in markers), timeout,
               f"{markers} in {out}")
    return out.read_text()


def scancel_ok(*argv: str, user: str | None = None) -> None:
    cp = run("scancel", *argv, user=user)
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", ""), cp.stderr


def test_a_job_without_steps_gets_steps_signals_nowhere_and_b_reaches_the_shell(workdir, jobs):
    job, out = submit(workdir, NO_STEPS, jobs)
    output_has(out, "started")
    scancel_ok("-s", "USR1", str(job))    # for the steps: this job has none (job 133)
    scancel_ok("-b", "-s", "USR2", str(job))
    text = output_has(out, "batch got USR2")  # requests are taken oldest first: USR1 was seen before
    assert "batch got USR1" not in text
    scancel_ok("--batch", "--signal=USR1", str(job))
    output_has(out, "batch got USR1")
    cp = run("squeue", "-h", "-j", str(job), "-o", "%t")
    assert cp.stdout == "R\n"  # signalled, not cancelled


def test_term_signals_the_batch_shell_and_does_not_cancel(workdir, jobs):
    """scancel -b -s TERM: the shell's trap runs (it exits 7 here) and slurmstepd's line is in the
    output; the job ends by its script, not by a cancel (no qdel, no cancel event)."""
    job, out = submit(workdir, NO_STEPS, jobs)
    output_has(out, "started")
    scancel_ok("-s", "TERM", str(job))  # steps only: nothing here, the job keeps running
    scancel_ok("-b", "-s", "USR2", str(job))
    assert "batch got TERM" not in output_has(out, "batch got USR2")
    scancel_ok("-b", "-s", "TERM", str(job))
    text = output_has(out, "batch got TERM")
    assert re.search(rf"slurmstepd-\S+: error: \*\*\* JOB {job} ON \S+ CANCELLED AT \S+ \*\*\*", text)
    wait_until(lambda: run("sacct", "-n", "-X", "-P", "-j", str(job), "-o", "ExitCode").stdout.strip() == "7:0",
               90, "the script's own exit code in sacct")


def test_steps_b_and_f_reach_what_slurm_reaches(workdir, jobs):
    job, out = submit(workdir, WITH_STEP, jobs)
    output_has(out, "step started")
    scancel_ok("-s", "USR1", str(job))                 # the steps, not the batch shell
    output_has(out, "step got USR1")
    scancel_ok("-b", "-s", "USR2", str(job))           # the batch shell, not the step
    text = output_has(out, "batch got USR2")
    assert "batch got USR1" not in text
    scancel_ok("-s", "USR2", str(job))
    text = output_has(out, "step got USR2")            # srun took the -b request before this one
    assert text.count("step got USR2") == 1 and text.count("step got USR1") == 1
    scancel_ok("-f", "-s", "USR1", str(job))           # both: srun passes it on to its step
    text = output_has(out, "batch got USR1")
    wait_until(lambda: out.read_text().count("step got USR1") == 2, 30, "the step's second USR1")


def test_root_signals_a_users_job_and_the_request_names_the_owner(workdir, jobs):
    job, out = submit(workdir, NO_STEPS, jobs, user="alice")
    output_has(out, "started")
    scancel_ok("-b", "-s", "USR1", str(job))
    output_has(out, "batch got USR1")
    scancel_ok("-b", "-s", "USR2", str(job), user="alice")  # and its owner, from her own directory
    output_has(out, "batch got USR2")



def test_an_array_task_is_signalled_alone(workdir, jobs):
    """scancel -b -s USR1 J_2 reaches task 2's batch shell, not task 1's (each task its own job
    in Slurm); J alone reaches every running task."""
    path = workdir / "sigarray.sh"
    path.write_text(NO_STEPS)
    path.chmod(0o755)
    cp = run("sbatch", "--parsable", "-t", "10", "--array=1-2", str(path), cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    job = int(cp.stdout.strip())
    jobs.append(job)
    out1, out2 = workdir / f"slurm-{job}_1.out", workdir / f"slurm-{job}_2.out"
    output_has(out1, "started")
    output_has(out2, "started")
    scancel_ok("-b", "-s", "USR1", f"{job}_2")
    output_has(out2, "batch got USR1")
    scancel_ok("-b", "-s", "USR2", str(job))
    output_has(out1, "batch got USR2")
    output_has(out2, "batch got USR2")
    assert "batch got USR1" not in out1.read_text()


def test_a_job_srun_made_gets_steps_signals_and_has_no_batch_script(workdir, jobs):
    """srun outside an allocation makes a job whose only step is its tasks: plain -s reaches them;
    -b is job_signal's ESLURM_JOB_SCRIPT_MISSING, "Job script not specified" (exit 2009 & 0xFF)."""
    import subprocess
    import uuid

    from conftest import shim_env

    name = f"sig{uuid.uuid4().hex[:6]}"
    out = workdir / f"{name}.out"
    p = subprocess.Popen(["srun", "-J", name, "-o", str(out), "bash", "-c",
                          'trap "echo task got USR1" USR1; echo task started; for i in $(seq 1200); do sleep 0.1; done'],
                         cwd=workdir, env=shim_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        output_has(out, "task started")
        job = int(wait_until(lambda: run("squeue", "-h", "-n", name, "-o", "%i").stdout.strip(), 30, "its id"))
        jobs.append(job)
        cp = run("scancel", "-b", "-s", "USR1", str(job))
        assert (cp.returncode, cp.stderr) == (
            217, f"scancel: error: Kill job error on job id {job}: Job script not specified\n")
        scancel_ok("-s", "USR1", str(job))
        output_has(out, "task got USR1")
    finally:
        p.kill()
        p.wait()


def test_steps_of_an_allocation_get_it_on_the_far_side_of_qrsh(workdir, jobs):
    """srun inside salloc runs outside the job: its tasks start through qrsh -inherit and the host
    launcher there (launch.remote_main) takes the request itself, as each node's slurmstepd does."""
    import subprocess
    import uuid

    from conftest import shim_env

    name = f"sig{uuid.uuid4().hex[:6]}"
    out = workdir / f"{name}.out"
    p = subprocess.Popen(["salloc", "-J", name, "srun", "-o", str(out), "bash", "-c",
                          'trap "echo task got USR2" USR2; echo task started; for i in $(seq 1200); do sleep 0.1; done'],
                         cwd=workdir, env=shim_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        output_has(out, "task started", timeout=90)
        job = int(wait_until(lambda: run("squeue", "-h", "-n", name, "-o", "%i").stdout.strip(), 30, "its id"))
        jobs.append(job)
        scancel_ok("-f", "-s", "URG", str(job))  # no batch step: -f reaches nothing (and URG is no trap's)
        scancel_ok("-s", "USR2", str(job))
        text = output_has(out, "task got USR2")
        assert text.count("task got USR2") == 1
    finally:
        p.kill()
        p.wait()


COUNTERS = """#!/bin/bash
srun bash -c 'i=0; while :; do i=$((i+1)); echo $i > step-$SLURM_JOB_ID.count; sleep 0.05; done' &
i=0; while :; do i=$((i+1)); echo $i > batch-$SLURM_JOB_ID.count; sleep 0.05; done
"""


def _count(path: Path) -> int:
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def _still_while_other_moves(still: Path, moving: Path, moves: int = 10, timeout: float = 30) -> None:
    """``still``'s counter does not change while ``moving``'s goes on by ``moves`` (bounded waits)."""
    def check() -> bool:
        a, b = _count(still), _count(moving)
        wait_until(lambda: _count(moving) >= b + moves, timeout, f"{moving.name} to go on")
        return _count(still) == a
    wait_until(check, timeout, f"{still.name} to stand still")


def _state(job: int) -> str:
    return run("squeue", "-h", "-j", str(job), "-o", "%t").stdout


def test_stop_and_cont_for_the_steps_leave_the_batch_shell_running(workdir, jobs):
    """Slurm 22.05's scancel -s STOP without -b/-f: job_signal's _signal_job sends KILL_STEPS_ONLY,
    slurmd's _kill_all_active_steps stops every step but the batch step (the script goes on), and
    CONT resumes them; slurmctld flags the job STOPPED (squeue ST) until the CONT. Through the
    shim's channel the runtime does the same: the step's task stops, the batch shell counts on,
    and CONT lets the task count again. -s TSTP reaches the step too and changes no state."""
    job, _out = submit(workdir, COUNTERS, jobs)
    step, batch = workdir / f"step-{job}.count", workdir / f"batch-{job}.count"
    wait_until(lambda: _count(step) > 5 and _count(batch) > 5, 90, "both counters")
    scancel_ok("-s", "STOP", str(job))
    _still_while_other_moves(step, batch)
    assert _state(job) == "ST\n"  # Slurm's STOPPED; Grid Engine's job runs on
    scancel_ok("-s", "CONT", str(job))
    assert _state(job) == "R\n"
    n = _count(step)
    wait_until(lambda: _count(step) >= n + 10, 30, "the step to count again")
    scancel_ok("-s", "TSTP", str(job))  # bash's task does not catch TSTP: it stops, the state does not change
    _still_while_other_moves(step, batch)
    assert _state(job) == "R\n"
    scancel_ok("-s", "CONT", str(job))
    n = _count(step)
    wait_until(lambda: _count(step) >= n + 10, 30, "the step to count again after TSTP")
    scancel_ok("-b", "-s", "STOP", str(job))  # -b: the batch shell alone (KILL_JOB_BATCH)
    _still_while_other_moves(batch, step)
    assert _state(job) == "ST\n"
    scancel_ok("-b", "-s", "CONT", str(job))
    n = _count(batch)
    wait_until(lambda: _count(batch) >= n + 10, 30, "the batch shell to count again")
    assert _state(job) == "R\n"


def test_stop_and_cont_for_the_steps_of_an_allocation(workdir, jobs):
    """The same on the far side of qrsh -inherit: salloc's srun step, whose host launcher takes the
    request (launch.remote_main), stops and resumes its task; the allocation shows STOPPED between."""
    import subprocess
    import uuid

    from conftest import shim_env

    name = f"stop{uuid.uuid4().hex[:6]}"
    step, ref = workdir / f"{name}.count", workdir / f"{name}.clock"
    p = subprocess.Popen(["salloc", "-J", name, "srun", "bash", "-c",
                          f'i=0; while :; do i=$((i+1)); echo $i > {step}; sleep 0.05; done'],
                         cwd=workdir, env=shim_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _count(step) > 5, 90, "the task to count")
        job = int(wait_until(lambda: run("squeue", "-h", "-n", name, "-o", "%i").stdout.strip(), 30, "its id"))
        jobs.append(job)
        scancel_ok("-s", "STOP", str(job))
        # a counter outside the job is the clock the task's counter is held against
        clock = subprocess.Popen(["bash", "-c", f'i=0; while :; do i=$((i+1)); echo $i > {ref}; sleep 0.05; done'])
        try:
            _still_while_other_moves(step, ref)
        finally:
            clock.kill()
            clock.wait()
        assert _state(job) == "ST\n"
        scancel_ok("-s", "CONT", str(job))
        assert _state(job) == "R\n"
        n = _count(step)
        wait_until(lambda: _count(step) >= n + 10, 30, "the task to count again")
    finally:
        p.kill()
        p.wait()
