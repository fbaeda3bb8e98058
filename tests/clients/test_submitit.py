"""submitit (its PyPI release, unmodified) on the shim: `sbatch <file>`, `sacct -o JobID,State,NodeList
--parsable2 -j ...` for the state, `scancel`, and inside the job `srun ... python -m
submitit.core._submit <folder>` with per-task `%j_%t` output files.

The functions a job runs are defined inside each test, so cloudpickle ships them by value: the
job's python imports submitit, not this test module."""

from __future__ import annotations

import re
import warnings

import pytest

from conftest import run, wait_until

from .conftest import job_python, require, sacct_rows, squeue_active

pytestmark = pytest.mark.gridengine

DONE = 180  # seconds for a small job to be scheduled, run and be seen by sacct on a busy 2-core host


@pytest.fixture
def executor(client_env, workdir):
    require("submitit")
    import submitit

    ex = submitit.AutoExecutor(folder=str(workdir / "log_%j"), slurm_python=job_python())
    assert ex.cluster == "slurm", "AutoExecutor picks slurm only when srun is on PATH"
    ex.update_parameters(timeout_min=5, slurm_partition="debug", mem_gb=1, cpus_per_task=1)
    return ex


def finished(job, timeout: float = DONE):
    wait_until(job.done, timeout, f"submitit job {job.job_id} to finish (state {job.state})")
    return job


def final_state(job, timeout: float = 60) -> str:
    """submitit's own view of the state (its sacct poll, rate-limited by submitit) once terminal:
    a job can write its result a moment before the batch script ends."""
    return wait_until(lambda: job.state if job.state not in ("RUNNING", "COMPLETING", "UNKNOWN", "PENDING") else None,
                      timeout, f"sacct to show job {job.job_id} ended (state {job.state})")


def test_submit_function_and_get_result(executor, workdir, reaper):
    def add(a, b):
        import os
        import socket

        import submitit

        env = submitit.JobEnvironment()
        return a + b, os.environ["SLURM_JOB_ID"], env.job_id, env.num_tasks, socket.gethostname(), os.getcwd()

    job = executor.submit(add, 2, 3)
    reaper.add(job.job_id)
    assert re.fullmatch(r"\d+", job.job_id)
    total, slurm_job_id, env_job_id, ntasks, host, cwd = finished(job).result()
    assert total == 5
    assert slurm_job_id == env_job_id == job.job_id  # the id sbatch printed is the job's own id
    assert ntasks == 1
    assert final_state(job) == "COMPLETED"
    # log_%j/ was created by submitit after sbatch returned; the job still wrote its output there
    assert job.paths.stdout.parent == workdir / f"log_{job.job_id}"
    assert job.paths.stdout.exists() and job.paths.stderr.exists()
    rows = sacct_rows("-X", "-j", job.job_id, "-o", "JobID,State,ExitCode,Partition")
    assert rows == [{"JobID": job.job_id, "State": "COMPLETED", "ExitCode": "0:0", "Partition": "debug"}]


def test_map_array(executor, recwarn, reaper):
    def square(x):
        import os

        import submitit

        return x * x, submitit.JobEnvironment().job_id, os.environ["SLURM_ARRAY_TASK_ID"]

    executor.update_parameters(slurm_array_parallelism=2)  # --array=0-3%2
    jobs = executor.map_array(square, [1, 2, 3, 4])
    for j in jobs:
        reaper.add(j.job_id)
    base = jobs[0].job_id.split("_")[0]
    assert [j.job_id for j in jobs] == [f"{base}_{i}" for i in range(4)]
    results = [finished(j).result() for j in jobs]
    assert results == [(x * x, f"{base}_{i}", str(i)) for i, x in enumerate([1, 2, 3, 4])]
    assert {final_state(j) for j in jobs} == {"COMPLETED"}
    # tasks still pending behind the %2 throttle were read from sacct's <id>_[2-3%2] row
    assert not [w for w in recwarn if "Could not interpret" in str(w.message)]


def test_two_tasks_per_node_both_ranks_run(executor, workdir, reaper):
    def rank():
        import os

        import submitit

        env = submitit.JobEnvironment()
        return (env.global_rank, env.local_rank, env.num_tasks, env.num_nodes, env.node,
                os.environ["SLURM_PROCID"], env.job_id)

    executor.update_parameters(tasks_per_node=2)  # --ntasks-per-node=2; the job runs `srun ... _submit`
    job = executor.submit(rank)
    reaper.add(job.job_id)
    results = finished(job).results()
    assert sorted(results) == [(0, 0, 2, 1, 0, "0", job.job_id), (1, 1, 2, 1, 0, "1", job.job_id)]
    # srun's --output <folder>/%j_%t_log.out: one file per task
    folder = workdir / f"log_{job.job_id}"
    assert (folder / f"{job.job_id}_0_log.out").exists() and (folder / f"{job.job_id}_1_log.out").exists()


def test_cancel_running_job(executor, reaper):
    def sleeper():
        import time

        time.sleep(600)

    job = executor.submit(sleeper)
    reaper.add(job.job_id)
    wait_until(lambda: job.state == "RUNNING", DONE, f"job {job.job_id} to run (state {job.state})")
    job.cancel()  # scancel <id>
    finished(job, 60)
    assert job.state.startswith("CANCELLED")  # real Slurm's sacct says "CANCELLED by <uid>"
    import submitit

    with pytest.raises(submitit.core.utils.UncompletedJobError):
        job.result()
    wait_until(lambda: squeue_active(job.job_id) == "", 60, f"job {job.job_id} to leave the queue")


def test_exception_in_job_comes_back(executor, reaper):
    def boom():
        raise ValueError("kaboom 42")

    job = executor.submit(boom)
    reaper.add(job.job_id)
    finished(job)
    import submitit

    with pytest.raises(submitit.core.utils.FailedJobError) as err:
        job.result()
    assert "ValueError: kaboom 42" in str(err.value)
    assert isinstance(job.exception(), submitit.core.utils.FailedJobError)
    assert final_state(job) == "FAILED"
    rows = sacct_rows("-X", "-j", job.job_id, "-o", "JobID,State,ExitCode")
    assert rows == [{"JobID": job.job_id, "State": "FAILED", "ExitCode": "1:0"}]


def test_pending_array_row_is_read_by_submitit(client_env, workdir, reaper):
    """sacct shows an array's tasks that have not started as one row `<id>_[<indices>%<throttle>]`,
    as Slurm does; submitit expands that row to every pending task (shim fix: the brackets were
    missing, and submitit warned and lost the pending tasks' state)."""
    require("submitit")
    from submitit.slurm.slurm import SlurmInfoWatcher

    cp = run("sbatch", "--parsable", "--hold", "--array=0-3%2", "-o", "/dev/null", "--wrap=true", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    job = reaper.add(cp.stdout.strip())
    cp = run("sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j", job)
    assert cp.stdout == f"JobID|State|NodeList\n{job}_[0-3%2]|PENDING|None assigned\n"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        info = SlurmInfoWatcher().read_info(cp.stdout)
    assert {k: v["State"] for k, v in info.items()} == {f"{job}_{i}": "PENDING" for i in range(4)}
    run("scancel", job)
