"""Array tasks are jobs of their own, on the live Grid Engine (issue 15 part 3; docs/array-ids.md).

Slurm gives each task its own SLURM_JOB_ID (= SLURM_JOBID), and every command takes it where it
takes ``G_t`` (doc/html/job_array.shtml: "37" or "36_1" name the same element). Ours: task t >= 1
of Grid Engine job G is t * 10**10 + G. Jobs come through sbatch; each waits for the test's word
(a file) so that the commands meet it running.

Slurm's source: slurmctld gives a task a job id of its own when it splits the task from the
array's record to start it, the array's id staying with the rest (src/slurmctld/job_mgr.c
job_array_split, _set_job_id), and the batch step's SLURM_JOB_ID and SLURM_JOBID are that id,
SLURM_ARRAY_JOB_ID the array's (src/common/env.c env_array_for_batch_job)."""

from __future__ import annotations

import pytest

from conftest import run, wait_until

pytestmark = pytest.mark.gridengine

TASK = 10**10

TASK_SCRIPT = """#!/bin/bash
mkdir -p "results/$SLURM_JOB_ID"
echo "$SLURM_JOB_ID $SLURM_JOBID $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID" > "results/$SLURM_JOB_ID/ids"
srun -v -n1 printenv SLURM_JOB_ID > "results/$SLURM_JOB_ID/step.tmp" 2> "results/$SLURM_JOB_ID/step.err" &&
    mv "results/$SLURM_JOB_ID/step.tmp" "results/$SLURM_JOB_ID/step"
for i in $(seq 1500); do [ -e release ] && exit 0; sleep 0.2; done
exit 3
"""


def sbatch(*argv: str, cwd) -> tuple[int, str]:
    cp = run("sbatch", "--parsable", *argv, cwd=cwd)
    assert cp.returncode == 0, cp.stderr
    return int(cp.stdout.strip()), cp.stderr


def sacct(*argv: str) -> list[str]:
    cp = run("sacct", "-X", "-n", "-P", *argv)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout.splitlines()


def test_each_task_has_its_own_id_and_every_command_takes_it(workdir):
    d = workdir / "own_ids"
    d.mkdir()
    d.chmod(0o777)
    (d / "task.sh").write_text(TASK_SCRIPT)
    job, _ = sbatch("--array=1-3", "-o", "out_%j.txt", "task.sh", cwd=d)
    ids = {t: t * TASK + job for t in (1, 2, 3)}
    try:
        wait_until(lambda: all((d / "results" / str(i) / "step").exists() for i in ids.values()), 90,
                   "every task's results/$SLURM_JOB_ID/ and its srun step")
        for t, own in ids.items():
            assert (d / "results" / str(own) / "ids").read_text() == f"{own} {own} {job} {t}\n"
            assert (d / "results" / str(own) / "step").read_text() == f"{own}\n"  # srun's step: the task's id
            assert f"srun: launching StepId={own}.0 on host " in (d / "results" / str(own) / "step.err").read_text()
            assert (d / f"out_{own}.txt").exists()  # %j
        assert len(set(ids.values())) == 3

        for t, own in ids.items():  # squeue -j <task id>: %i G_t, %A the task's id, %F G, %K t
            out = run("squeue", "-h", "-j", str(own), "-o", "%i %A %F %K %t").stdout
            assert out == f"{job}_{t} {own} {job} {t} R\n"
            head = run("scontrol", "show", "job", str(own)).stdout.splitlines()[0]
            assert head.startswith(f"JobId={own} ArrayJobId={job} ArrayTaskId={t} ")
        assert sacct("-j", str(ids[1]), "-o", "JobID,State") == [f"{job}_1|RUNNING"]

        cp = run("scancel", str(ids[2]))
        assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", "")
        wait_until(lambda: sacct("-j", str(ids[2]), "-o", "JobID,State") == [f"{job}_2|CANCELLED by 0"], 60,
                   "task 2 cancelled by its own id")
        cp = run("scancel", "-b", "-s", "TERM", str(ids[3]))  # the batch shell alone: slurmstepd's line
        assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", "")
        wait_until(lambda: f"*** JOB {ids[3]} ON " in (d / f"out_{ids[3]}.txt").read_text(), 30,
                   "slurmstepd's CANCELLED line with the task's own id")
        wait_until(lambda: run("squeue", "-h", "-j", str(job), "-o", "%i %t").stdout.splitlines() == [f"{job}_1 R"],
                   60, "task 1 alone running (tasks 2 and 3 left the queue)")
        (d / "release").touch()
        want = [f"{job}_1|COMPLETED", f"{job}_2|CANCELLED by 0"]
        wait_until(lambda: sacct("-j", str(job), "-o", "JobID,State")[:2] == want, 90, "the array's rows")
        assert [r.split("|")[0] for r in sacct("-j", str(job), "-o", "JobID,State")] == [f"{job}_{t}" for t in ids]
        assert sacct("-j", f"{ids[3]},{job}_1", "-o", "JobID") == [f"{job}_1", f"{job}_3"]
    finally:
        (d / "release").touch()
        run("scancel", str(job))


def test_hold_and_release_one_pending_task_by_its_id(workdir):
    job, _ = sbatch("-H", "--array=0-2", "--wrap", "true", cwd=workdir)
    try:
        task1, task2 = TASK + job, 2 * TASK + job
        out = run("squeue", "-h", "-r", "-j", str(job), "-o", "%i %A %t").stdout.splitlines()
        assert out == [f"{job}_0 {job} PD", f"{job}_1 {task1} PD", f"{job}_2 {task2} PD"]  # task 0 keeps G
        cp = run("scontrol", "release", str(task1))
        assert (cp.returncode, cp.stderr) == (0, "")
        wait_until(lambda: sacct("-j", str(task1), "-o", "JobID,State") == [f"{job}_1|COMPLETED"], 90,
                   "task 1 released and done")
        wait_until(lambda: run("squeue", "-h", "-r", "-j", str(job), "-o", "%i %t %r").stdout.splitlines() == [
            f"{job}_0 PD JobHeldUser", f"{job}_2 PD JobHeldUser"], 60, "tasks 0 and 2 alone left, still held")
    finally:
        run("scancel", str(job))


def test_dependency_on_one_task(workdir):
    """afterok on a task: Grid Engine holds the job on the whole array (the warning says so), and
    the task's own outcome decides; aftercorr on a task is refused, nothing queued."""
    arr, _ = sbatch("--array=1-2", "--wrap", "exit $((SLURM_ARRAY_TASK_ID - 1))", cwd=workdir)
    ok, err = sbatch(f"--dependency=afterok:{TASK + arr}", "-o", "task_dep_ok.out", "--wrap", "echo ran",
                     cwd=workdir)
    assert f"--dependency afterok on {arr}_1: Grid Engine holds a job on whole arrays only" in err
    bad, _ = sbatch(f"--dependency=afterok:{arr}_2", "-o", "task_dep_bad.out", "--wrap", "echo ran", cwd=workdir)
    wait_until(lambda: (workdir / "task_dep_ok.out").exists() and "ran" in (workdir / "task_dep_ok.out").read_text(),
               120, "the job after task 1's success to run")
    wait_until(lambda: [s.split()[0] for s in sacct("-j", str(bad), "-o", "State")] == ["CANCELLED"], 120,
               "the job after task 2's failure to be cancelled")
    assert not (workdir / "task_dep_bad.out").exists()
    cp = run("sbatch", f"--dependency=aftercorr:{TASK + arr}", "--wrap", "true", cwd=workdir)
    assert (cp.returncode, cp.stdout) == (1, "")
    assert cp.stderr == (f"sbatch: error: --dependency aftercorr:{arr}_1: Grid Engine pairs the tasks of whole "
                         "arrays (-hold_jid_ad); name the array\n")
