"""squeue's order is Slurm's (issue 15 part 4): the default keys "P,t,-p" (squeue/sort.c
sort_job_list, from the last key to the first), and ties in the order of the controller's job list
(each key is one list_sort: glibc's qsort, a stable merge sort in Debian 12's glibc 2.36; the list
is pack_all_jobs's walk of job_list, to which job_mgr.c _create_job_record appends). An array
task's record is created when it is split from the array's own record as it starts; the task that
starts last is the array's own record and keeps its place."""

from __future__ import annotations

from datetime import datetime

from shim.operations import jobqueue
from shim.slurm import releases
from shim.slurm.model import JobRecord


def at(s: int) -> datetime:
    return datetime.fromtimestamp(1_700_000_000 + s)


def rec(job, task=None, state="RUNNING", submit=0, start=None, prio=100, part="debug", pending=None):
    return JobRecord(job, array_task=task, array_pending=pending, state=state, partition=part, priority=prio,
                     submit_time=at(submit), start_time=at(start) if start is not None else None)


def ids(recs):
    return [r.job_id if r.array_task is None and r.array_pending is None else
            f"{r.job_id}_{r.array_task if r.array_task is not None else '[' + r.array_pending + ']'}" for r in recs]


class Ctx:
    """What sort_records reads of squeue's context: the release (22.05 here: priority/basic's
    order, which these tests are about; the newer releases' start-time rule: test_releases_order.py)."""

    release = releases.get("22.05")


def order(recs, listed=None, qy=None):
    return ids(jobqueue.sort_records(recs, qy or jobqueue.Query(), Ctx(), listed=listed))


def listed(recs, every=None):
    """The controller's job list order the shim models (jobqueue.created_key), which squeue's
    sorts keep for ties on 24.11 and 26.05."""
    return ids(sorted(recs, key=jobqueue.created_key(recs, every)))


def test_the_first_task_to_start_keeps_the_arrays_place():
    """Array 100 (submitted at 0, tasks 1 and 2 started at 30, 3-4 waiting) and job 200
    (submitted at 10, started at 20): task 1 is the array's own record (job_array_split gives the
    started task the array's record), task 2 was split at 30, after 200's creation, and the
    waiting remainder is the copy of the last split (as 24.11's and 26.05's squeue -t R captures
    show: 320_1 at the array's place, 320_2 after the jobs submitted before it started)."""
    recs = [rec(100, 1, start=30), rec(100, 2, start=30), rec(100, state="PENDING", pending="3-4"),
            rec(200, submit=10, start=20)]
    assert listed(recs) == ["100_1", 200, "100_2", "100_[3-4]"]
    # 22.05 (priority/basic): each job's priority decreases with its submission, the tasks share
    # the array's: by job id (22.05's squeue -t R capture: 112_1 112_2 before 113)
    assert order(recs) == ["100_[3-4]", "100_1", "100_2", 200]


def test_the_last_task_to_start_with_none_waiting_is_the_previous_splits_copy():
    """No task waits: the first to start keeps the array's place, a later one is created at its
    start, and the last is the copy made at the split before it."""
    recs = [rec(100, 1, start=30), rec(100, 2, start=40), rec(200, submit=10, start=20), rec(100, 3, start=35)]
    assert listed(recs) == ["100_1", 200, "100_3", "100_2"]
    assert order(recs) == ["100_2", "100_3", "100_1", 200]  # (22.05: the array's tasks by id, latest start first)


def test_keys_before_ties():
    """P then t (compact state text: CD < PD < R) then priority down; ties as above."""
    recs = [rec(1, submit=1, start=2, prio=5), rec(2, submit=2, start=3, prio=9), rec(3, submit=3, state="PENDING"),
            rec(4, submit=4, start=5, prio=9, part="gpu"), rec(5, submit=5, start=6, prio=9)]
    assert order(recs) == [3, 2, 5, 1, 4]


def test_order_is_decided_on_the_whole_listing():
    """-t R keeps the running tasks where the whole list put them: the waiting remainder (filtered
    away) still makes task 2 a record split at its start (40, after job 200's at 35), not the copy
    of the split before it (at 30)."""
    every = [rec(100, 1, start=30), rec(100, 2, start=40), rec(100, state="PENDING", pending="3"),
             rec(200, submit=35, start=36)]
    running = [r for r in every if r.state == "RUNNING"]
    assert listed(running, every) == ["100_1", 200, "100_2"]
    assert listed(running) == ["100_1", "100_2", 200]  # without the whole list it could not tell


def norec(job, task=None, start=0, prio=100):
    """A running record as qstat's listing gives it: its start, no submission time."""
    r = rec(job, task, start=start, prio=prio)
    r.submit_time = None
    return r


def test_running_jobs_without_their_submission_time_keep_the_id_order():
    """qstat lists a running job's start, not its submission. Job 10 (submitted first, started at
    50) and job 11 (started at 20): the controller created 10's record first (ids grow with
    submission), whatever their starts."""
    assert order([norec(11, start=20), norec(10, start=50)]) == [10, 11]


def test_an_array_released_after_a_later_job_keeps_its_place():
    """Array 100 held, job 104 submitted (at 45) and started; array released: its tasks start at
    46. Task 1 is the array's own record (created at 100's submission, before 104's); tasks 2
    and 3 were made at 46, after it. qstat gives none of the running jobs' submission times; the
    pending job 101 (submitted at 45) bounds 100's."""
    running = [norec(100, 1, start=46), norec(100, 2, start=46), norec(100, 3, start=46), norec(104, start=45)]
    every = running + [rec(101, state="PENDING", submit=45)]
    assert listed(running, every) == ["100_1", 104, "100_2", "100_3"]


def test_one_job_named_lists_the_arrays_newest_record_first():
    """squeue -j 100 asks the controller about job 100 alone: the array's own record (the pending
    remainder), then its other records the last made first; -j 100,200 lists as the whole queue."""
    recs = [rec(100, 1, start=30), rec(100, 2, start=30), rec(100, state="PENDING", pending="3-4")]
    assert order(recs, qy=jobqueue.Query(job_ids=[(100, None)])) == ["100_[3-4]", "100_2", "100_1"]
    assert order(recs, qy=jobqueue.Query(job_ids=[(100, None), (200, None)])) == ["100_[3-4]", "100_1", "100_2"]


def test_held_jobs_come_last_on_22_05_in_the_start_time_sorts_order():
    """22.05's priority/basic gives a held job priority 0, below every other: held jobs come after
    the others whatever Grid Engine's priority, and tie in the start-time sort's order (without a
    start: the controller's order backwards, as 22.05's squeue -t PD lists 132 131 120)."""
    recs = [rec(118, state="PENDING", submit=0, prio=50), rec(120, state="PENDING", submit=1, prio=0),
            rec(121, state="PENDING", submit=2, prio=50), rec(131, state="PENDING", submit=3, prio=0),
            rec(132, state="PENDING", submit=4, prio=0)]
    for r in recs:
        r.reason = "JobHeldUser" if r.job_id in (120, 131, 132) else "Priority"
    assert order(recs) == [118, 121, 132, 131, 120]  # (24.11's start-time rule would put 121 before 118)
