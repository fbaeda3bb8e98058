"""dask-jobqueue (its PyPI release, unmodified) on the shim: `SLURMCluster` writes a job script with
`#SBATCH -J/-e/-o (%J)/-p/-n/--cpus-per-task/--mem/-t`, submits it with `sbatch <file>` (the job id
is the first integer on stdout), and cancels it with `scancel <id>` on close. The worker inside the
job connects back to the scheduler in this process over TCP."""

from __future__ import annotations

import pytest

from conftest import run, wait_until

from .conftest import job_python, require, sacct_rows, squeue_active, tail

pytestmark = pytest.mark.gridengine

WORKER_UP = 180  # seconds for the worker job to be scheduled and connect, on a busy 2-core host


def test_slurm_cluster_scale_compute_close(client_env, workdir, reaper):
    require("dask_jobqueue", "distributed")
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    logs = workdir / "dask-logs"
    cluster = SLURMCluster(cores=1, processes=1, memory="1GB", queue="debug", walltime="00:05:00",
                           python=job_python(), log_directory=str(logs), death_timeout=60)
    script = cluster.job_script()
    assert "#SBATCH -p debug" in script and "#SBATCH -t 00:05:00" in script
    client = None
    job_id = None
    try:
        cluster.scale(1)
        client = Client(cluster)
        try:
            client.wait_for_workers(1, timeout=WORKER_UP)
        except TimeoutError:
            ids = [j.job_id for j in cluster.workers.values()]
            pytest.fail(f"no worker after {WORKER_UP} s; jobs {ids}; squeue: {run('squeue').stdout}\n"
                        + "\n".join(tail(p) for p in sorted(logs.glob("*"))))
        [job_id] = [reaper.add(j.job_id) for j in cluster.workers.values()]
        assert squeue_active(job_id) == "R"

        def work(n):
            import os

            return sum(i * i for i in range(n)), os.environ.get("SLURM_JOB_ID")

        total, seen_job = client.submit(work, 10).result(timeout=60)
        assert total == 285
        assert seen_job == job_id  # the computation ran inside the batch job sbatch reported
        assert client.submit(lambda x, y: x + y, 40, 2).result(timeout=60) == 42
        assert (logs / f"dask-worker-{job_id}.err").exists()  # -e .../dask-worker-%J.err
    finally:
        if client is not None:
            client.close()
        cluster.close()  # scancel <id>
    assert job_id is not None
    wait_until(lambda: squeue_active(job_id) == "", 60, f"worker job {job_id} to leave the queue")
    ge = run("qstat", "-u", "*")
    assert f" {job_id} " not in f" {ge.stdout} ".replace("\n", " "), ge.stdout  # gone from Grid Engine too
    [row] = wait_until(lambda: [r for r in sacct_rows("-X", "-j", job_id, "-o", "JobID,State")
                                if r["State"] not in ("RUNNING", "PENDING")], 60,
                       f"sacct to show job {job_id} ended")
    # close() cancels the job; a worker that already exited after the scheduler went away ends COMPLETED
    assert row["State"].startswith("CANCELLED") or row["State"] == "COMPLETED", row
