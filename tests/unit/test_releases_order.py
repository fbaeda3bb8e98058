"""squeue's order of jobs of equal priority, per release (issue 30, releases.EQUAL_PRIORITIES): the
jobs of each release's ``squeue -o %all`` capture, sorted by the shim, list as that release's
plain ``squeue`` listed them (fixtures/slurm-*/cases.json, squeue_o_all and squeue_default,
captured moments apart on the same queue)."""

from __future__ import annotations

import random
from datetime import datetime

import pytest

from conftest import release_cases
from shim.operations import jobqueue
from shim.slurm import releases
from shim.slurm.model import JobRecord

NAMES = ("22.05", "24.11", "26.05")


cases = release_cases


@pytest.fixture
def site(release_site):
    """set(release): the unit-test site config with ``[slurm] release``; returns a squeue Ctx."""
    return release_site


def _time(text: str) -> datetime | None:
    return None if text in ("N/A", "NONE", "Unknown") else datetime.fromisoformat(text)


def queue_of(name: str) -> list[JobRecord]:
    """The capture's jobs as records: id, array index or pending indices, partition, state, the
    priority (%Q), start (running, or --begin's) and submission times."""
    lines = cases(name)["squeue_o_all"]["stdout"].splitlines()
    head = lines[0].split("|")
    out = []
    for line in lines[1:]:
        row = line.split("|")
        col = {h: row[i] for i, h in reversed(list(enumerate(head)))}  # the first of a repeated column
        prio = [row[i] for i, h in enumerate(head) if h == "PRIORITY" and row[i].isdigit()][0]
        job, _, index = col["JOBID"].partition("_")
        pending = index[1:-1] if index.startswith("[") else None
        out.append(JobRecord(
            int(job), array_task=int(index) if index and pending is None else None, array_pending=pending,
            state=col["STATE"], partition=col["PARTITION"], priority=int(prio),
            start_time=_time(col["START_TIME"]), submit_time=_time(col["SUBMIT_TIME"])))
    return out


def listed_ids(name: str) -> list[str]:
    return [line.split()[0] for line in cases(name)["squeue_default"]["stdout"].splitlines()[1:]]


def test_only_the_newer_releases_follow_the_rule():
    assert [releases.get(n).has(releases.EQUAL_PRIORITIES) for n in NAMES] == [False, True, True]


@pytest.mark.parametrize("name", ["24.11", "26.05"])
def test_equal_priorities_list_as_the_release(site, name):
    """Every job's priority is 1 (0 held): waiting ones with --begin first, the rest newest first;
    running jobs latest start first (26.05's 297 started a second before the others), whatever
    order the listing came in. (Running jobs started within one second keep the controller's
    order, whose sub-second times the captures do not tell: their order among themselves is
    created_key's, tested in test_squeue*.)"""
    ctx = site(name)
    recs = queue_of(name)
    assert {r.priority for r in recs} == {0, 1}
    by_id = {r.display_id: r for r in recs}
    want = listed_ids(name)
    for seed in range(5):
        random.Random(seed).shuffle(recs)
        got = [r.display_id for r in jobqueue.sort_records(list(recs), jobqueue.Query(), ctx)]
        assert [x for x in got if by_id[x].state == "PENDING"] == [x for x in want if by_id[x].state == "PENDING"]
        assert [(by_id[x].state, by_id[x].partition, by_id[x].start_time) for x in got] == \
            [(by_id[x].state, by_id[x].partition, by_id[x].start_time) for x in want]
    if name == "26.05":
        assert [x for x in want if by_id[x].state == "RUNNING" and by_id[x].partition == "debug"][-1] == "297"


def test_22_05s_priorities_decide_and_equal_ones_keep_the_submission_order(site):
    """22.05 (priority/basic): each job's own priority, decreasing with submission, decides; the
    rule leaves equal ones in the controller's order, as before."""
    ctx = site("22.05")
    recs = queue_of("22.05")
    got = [r.display_id for r in jobqueue.sort_records(recs, jobqueue.Query(), ctx)]
    want = listed_ids("22.05")
    held = {"120", "121", "131", "132"}  # priority 0 (the only equal ones): not this rule's
    assert [x for x in got if x not in held] == [x for x in want if x not in held]


def test_the_start_time_sort_takes_started_jobs_latest_first_and_the_rest_backwards():
    t = [datetime(2026, 12, 7, 3, 0, s) for s in range(3)]
    recs = [JobRecord(i, start_time=s) for i, s in enumerate([None, t[1], None, t[2], t[1], None])]
    assert [r.job_id for r in jobqueue.start_time_order(recs)] == [3, 1, 4, 5, 2, 0]
