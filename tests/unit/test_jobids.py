"""shim.slurm.jobids: index lists and job ids, with each command's own Slurm 22.05 rules.

Expected values follow the C parsers named in the module (src/squeue/opts.c _build_job_list and
_build_step_list, src/scancel/opt.c _xlate_job_step_ids, src/common/slurm_protocol_defs.c
slurm_parse_step_str, src/scontrol/info_job.c scontrol_print_job)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shim.slurm import jobids
from shim.slurm.jobids import JobId, JobIdError


def test_compress_and_expand():
    assert jobids.compress([7, 1, 3, 5, 6, 5]) == "1,3,5-7"
    assert jobids.compress([]) == ""
    assert jobids.runs([7, 1, 3, 5, 6, 5]) == [(1, 1), (3, 3), (5, 7)]  # (Grid Engine's task ids too: ops.task_ids)
    assert jobids.expand("3") == [3]
    assert jobids.expand("3-5:1") == [3, 4, 5]
    assert jobids.expand("1-9:4, 12,,") == [1, 5, 9, 12]
    for bad in ("x", "1-", "1:2", "1-5:0", "1-5:x", "-3", "٣"):
        with pytest.raises(JobIdError):
            jobids.expand(bad)
    with pytest.raises(JobIdError):
        jobids.expand("0-99999999", limit=1001)


@given(st.sets(st.integers(0, 300), max_size=60))
def test_compress_expand_round_trip(indices):
    assert jobids.expand(jobids.compress(indices)) == sorted(indices)


def test_the_old_index_printers_are_this_one():
    from shim.operations import jobs
    from shim.gridengine import qstat

    assert jobs.pending_text([5, 1, 2, 3], None) == jobids.compress([5, 1, 2, 3]) == "1-3,5"
    assert jobs.pending_text([5, 1, 2, 3], 2) == "1-3,5%2"
    assert qstat.parse_task_ranges("1-9:4") == [1, 5, 9] and qstat.parse_task_ranges("junk") == []


def _all(text: str) -> dict[str, object]:
    """What each command makes of one job id: its JobIds, or its message."""
    out: dict[str, object] = {}
    for name, parse in (("squeue", jobids.squeue_jobs), ("scancel", lambda t: jobids.scancel_ids([t])),
                        ("sacct", lambda t: [jobids.sacct_step(t)]), ("scontrol", lambda t: [jobids.scontrol_job(t)]),
                        ("scontrol hold", jobids.scontrol_job_list), ("sprio", lambda t: [jobids.xlate_job_id(t)])):
        try:
            out[name] = parse(text)
        except JobIdError as e:
            out[name] = str(e)
    return out


def test_a_plain_job_and_an_index_read_alike():
    for text, want in (("7", JobId(7)), ("7_3", JobId(7, 3))):
        assert set(map(str, _all(text).values())) == {str([want])}, text


def test_an_index_range_per_command():
    """7_[1-5:2]: squeue reads index 0 (strtol of '['); scancel's hostlist has no ':step'; sacct and
    scontrol take no brackets at all."""
    assert _all("7_[1-5:2]") == {
        "squeue": [JobId(7, 0)],
        "scancel": "Invalid job id 7_[1-5:2]",
        "sacct": "Bad job array element specified: 7",
        "scontrol": "Invalid job id specified",
        "scontrol hold": None,  # no id list (a ":"): a job name
        "sprio": [JobId(0)],
    }
    assert jobids.scancel_ids(["7_[1-3,5]"]) == [JobId(7, tasks=(1, 2, 3, 5))]
    assert jobids.squeue_jobs("7_[1-3,5]") == [JobId(7, 0), JobId(5)]  # squeue splits at every comma


def test_steps_hetjobs_and_junk_per_command():
    assert _all("7.batch") == {"squeue": [JobId(7)], "scancel": "Invalid job id 7.batch",
                               "sacct": [JobId(7, step="batch")], "scontrol": "Invalid job id specified",
                               "scontrol hold": None, "sprio": [JobId(0)]}
    assert _all("7.2") == {"squeue": [JobId(7)], "scancel": [JobId(7, step="2")],
                           "sacct": [JobId(7, step="2")], "scontrol": "Invalid job id specified",
                           "scontrol hold": None, "sprio": [JobId(0)]}
    assert _all("7+1") == {"squeue": [JobId(7)], "scancel": [JobId(7, het=1)],
                           "sacct": [JobId(7, het=1)], "scontrol": [JobId(7, het=1)],
                           "scontrol hold": [JobId(7, het=1)], "sprio": [JobId(8, het=1)]}  # (sprio: job 7 + 1)
    assert _all("7x") == {"squeue": [JobId(7)], "scancel": "Invalid job id 7x",
                          "sacct": [JobId(7)], "scontrol": "Invalid job id specified",
                          "scontrol hold": None, "sprio": [JobId(0)]}
    assert _all("abc") == {"squeue": "Invalid job id: abc", "scancel": "Invalid job id abc",
                           "sacct": "Bad job/step specified: abc", "scontrol": "Invalid job id specified",
                           "scontrol hold": None, "sprio": [JobId(0)]}
    assert _all("0")["squeue"] == "Invalid job id: 0" and _all("0")["scancel"] == "Invalid job id 0"
    with pytest.raises(JobIdError, match="^Bad step specified: 7$"):
        jobids.sacct_step("7.x")
    with pytest.raises(JobIdError, match="^Bad hetjob offset specified: 7$"):
        jobids.sacct_step("7+x")


def test_scancel_lists_and_all_indices():
    assert jobids.scancel_ids(["7,8_2", "9_*"]) == [JobId(7), JobId(8, 2), JobId(9, all_tasks=True)]
    with pytest.raises(JobIdError, match="^Invalid job id 7_\\[1-2\\],8$"):  # ']' must end the id
        jobids.scancel_ids(["7_[1-2],8"])


def test_squeue_steps():
    assert jobids.squeue_steps("7.0,8_2.batch") == [JobId(7, None, "0"), JobId(8, 2, "0")]
    with pytest.raises(JobIdError, match=r"^Invalid job_step id: 7\.\?\?$"):
        jobids.squeue_steps("7")
    with pytest.raises(JobIdError, match=r"^Invalid job_step id: 0\.1$"):
        jobids.squeue_steps("0.1")


def test_strtol_is_cs():
    assert jobids.strtol("  -12x") == (-12, 5)
    assert jobids.strtol("x") == (0, 0) and jobids.strtol("7_3", 2) == (3, 3)
    assert jobids.strtol("9" * 5000)[0] == 2**63 - 1  # saturates, no 5000-digit int
