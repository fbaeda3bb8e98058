"""Array tasks are jobs of their own (issue 15 part 3; docs/array-ids.md).

Slurm gives each array task its own job id: SLURM_JOB_ID = SLURM_JOBID distinct per task,
SLURM_ARRAY_JOB_ID the array's (doc/html/job_array.shtml; the reference capture
fixtures/slurm-22.05/env-sbatch-array_task{1..4}.txt: tasks 1-3 got 73-75, task 4 kept the array's
72), and every command takes that id where it takes ``array_task`` form ("37" or "36_1" name the
same element). The shim's ids: task t >= 1 of Grid Engine job G is t * 10**10 + G, task 0 keeps G.

SLURM_ARRAY_TASK_STEP/_MIN/_MAX/_COUNT follow slurmctld's ``_create_job_array``
(src/slurmctld/job_mgr.c, 22.05 and the newest release alike): COUNT the indices set, MIN/MAX the
first and last, STEP ``atoi`` of the --array text after its first ':' (1 without one). %j/%J in
file patterns are the task's id, %A the array's (``expand_stdio_fields``, src/common/print_fields.c).
"""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import SLURM_REF, use_site_config
from shim.slurm import jobids
from shim import siteconf
from shim.errors import ShimError
from shim.slurm.jobids import JobId
from shim.runtime import jobenv

OCS_MAX = 2**32 - 1  # OCS 9.x MAX_SEQNUM (U_LONG32_MAX); SGE 8.1.9 wraps at 9,999,999


# --- the scheme ---------------------------------------------------------------------------------


def test_the_documented_example():
    assert jobids.task_job_id(29140, 4) == 40000029140
    assert jobids.split_task_id(40000029140) == (29140, 4)
    assert jobids.task_job_id(29140, 0) == jobids.task_job_id(29140, None) == 29140  # task 0 keeps G
    assert jobids.split_task_id(29140) == (29140, None)
    assert jobids.split_task_id(10**10) == (10**10, None)  # low ten digits 0: no Grid Engine job


@given(st.integers(1, OCS_MAX), st.integers(1, 4_000_001))  # Slurm's MaxArraySize is at most 4000001
def test_ids_are_unique_computable_both_ways_and_never_a_grid_engine_id(job, task):
    own = jobids.task_job_id(job, task)
    assert own > OCS_MAX and own < 2**63  # above every Grid Engine id; a C long (strtol) holds it
    assert jobids.split_task_id(own) == (job, task)
    assert str(own).endswith(str(job).rjust(10, "0"))  # the low ten digits are the Grid Engine job


# --- every command's reader takes a task's id where it takes G_t -------------------------------

READERS = {
    "squeue -j": jobids.squeue_jobs,
    "scancel": lambda t: jobids.scancel_ids([t]),
    "sacct -j": lambda t: [jobids.sacct_step(t)],
    "scontrol show job": lambda t: [jobids.scontrol_job(t)],
    "scontrol hold/release/requeue": jobids.scontrol_job_list,
    "sprio -j": lambda t: [jobids.xlate_job_id(t)],
    "scontrol show step": lambda t: [jobids.scontrol_step(t)],
}


@pytest.mark.parametrize("command", sorted(READERS))
def test_a_task_id_reads_as_g_underscore_t(command):
    read = READERS[command]
    assert read("40000029140") == read("29140_4") == [JobId(29140, 4)]
    assert read("29140") == [JobId(29140)]  # the array itself (Slurm: the array job id names every task)


def test_a_task_id_with_steps_and_lists():
    assert jobids.sacct_step("40000029140.batch") == JobId(29140, 4, "batch")
    assert jobids.squeue_steps("40000029140.0") == [JobId(29140, 4, "0")]
    assert jobids.scancel_ids(["40000029140.1,7"]) == [JobId(29140, 4, "1"), JobId(7)]
    assert jobids.scontrol_job_list("40000029140,10000029140 7") == [JobId(29140, 4), JobId(29140, 1), JobId(7)]
    # a task's id with an index names no array (in Slurm a task's job id is no array's id): kept as given
    assert jobids.squeue_jobs("40000029140_2") == [JobId(40000029140, 2)]
    assert jobids.scontrol_job("40000029140+1") == JobId(40000029140, het=1)


# --- the environment -----------------------------------------------------------------------------


def _reference(task: int) -> dict[str, str]:
    text = (SLURM_REF / f"env-sbatch-array_task{task}.txt").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if line.startswith("SLURM_"))


def _env(job: int, task: int, array: list[int], **extra) -> dict[str, str]:
    return jobenv.batch_env({"array": array, **extra}, job_id=job, task=task, hosts=[("vm", 1)], this_host="vm",
                            user="root", uid=0, gid=0)


def test_batch_environment_of_the_reference_array():
    """--array=1-4 on Slurm 22.05: each task its own SLURM_JOB_ID = SLURM_JOBID, the array's
    SLURM_ARRAY_JOB_ID, and the same COUNT/MIN/MAX/STEP; ours are t * 10**10 + G instead of the
    controller's next free numbers (Slurm's task 4 kept the array's id; ours task 0 would)."""
    ids = set()
    for task in range(1, 5):
        ref = _reference(task)
        got = _env(72, task, [1, 2, 3, 4])
        for k in ("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
                  "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP"):
            assert got[k] == ref[k], (task, k)
        assert ref["SLURM_JOB_ID"] == ref["SLURM_JOBID"] and got["SLURM_JOB_ID"] == got["SLURM_JOBID"]
        assert got["SLURM_JOB_ID"] == str(task * 10**10 + 72)
        ids.add(got["SLURM_JOB_ID"])
    assert len(ids) == 4
    assert _env(72, 0, [0, 1])["SLURM_JOB_ID"] == "72"  # task 0 keeps the array's id
    plain = jobenv.batch_env({}, job_id=72, task=None, hosts=[("vm", 1)], this_host="vm", user="root", uid=0, gid=0)
    assert plain["SLURM_JOB_ID"] == "72" and "SLURM_ARRAY_JOB_ID" not in plain


@pytest.mark.parametrize("text, indices, step", [
    ("1-7:3", [1, 4, 7], 3),            # a stepped range
    ("0,5,10", [0, 5, 10], 1),          # a comma list: no ':' so 1, though the list is evenly spaced
    ("1-9:4,20", [1, 5, 9, 20], 4),     # the first ':' decides, whatever follows
    ("1,3-9:2", [1, 3, 5, 7, 9], 2),
    ("1-3,10-20:5", [1, 2, 3, 10, 15, 20], 5),
    ("1-5%2", [1, 2, 3, 4, 5], 1),      # a throttle changes nothing
    ("1-7:2%3", [1, 3, 5, 7], 2),       # atoi("2%3")
    ("4", [4], 1),
])
def test_array_task_variables_follow_slurmctld(monkeypatch, tmp_path, text, indices, step):
    """Through sbatch's own path (the request's array_step), then the job's environment."""
    use_site_config(monkeypatch, tmp_path)
    siteconf.reset()
    from shim.cli import sbatch

    try:
        _o, sub, _cfg = sbatch.prepare([f"--array={text}", "--wrap", "true"], {}, stdin=io.StringIO(""), cwd="/srv/x")
    finally:
        siteconf.reset()
    assert jobids.array_step(text) == step
    p = sub.payload
    assert p["array"] == indices and p.get("array_step", 1) == step
    assert ("array_step" in p) == (step != 1)  # absent when 1: records of other arrays unchanged
    env = jobenv.batch_env(p, job_id=9, task=indices[-1], hosts=[("vm", 1)], this_host="vm", user="root",
                           uid=0, gid=0)
    assert (env["SLURM_ARRAY_TASK_COUNT"], env["SLURM_ARRAY_TASK_MIN"], env["SLURM_ARRAY_TASK_MAX"],
            env["SLURM_ARRAY_TASK_STEP"]) == (str(len(indices)), str(indices[0]), str(indices[-1]), str(step))


def test_file_patterns():
    """%j and %J: the running job's own id (an array task's); %A the array's; %a the index."""
    got = jobenv.expand_pattern("%j|%J|%A|%a|%12j", job_id=29140, task=4, name="n", user="u", host="h", array_job=True)
    assert got == "40000029140|40000029140|29140|4|40000029140"  # (padding stops at ten digits)
    assert jobenv.expand_pattern("%j|%A|%a", job_id=29140, task=0, name="n", user="u", host="h",
                                 array_job=True) == "29140|29140|0"
    assert jobenv.expand_pattern("%j|%A|%a", job_id=29140, task=None, name="n", user="u", host="h",
                                 array_job=False) == f"29140|29140|{jobenv.NO_VAL}"


# --- what the commands show ---------------------------------------------------------------------


def test_displays():
    """squeue %i G_t, %A (JobID) the task's id, %F G, %K t; a pending array's record keeps G. sacct's
    JobID and JobIDRaw are G_t (Slurm's JobIDRaw is the task's own id, but snakemake's slurm plugin
    then needs one task to have G's: docs/array-ids.md)."""
    from shim.slurm.model import JobRecord
    from shim.slurm.render import sacct as sacct_view
    from shim.slurm.render import squeue as view

    task = JobRecord(110, array_task=2, state="RUNNING")
    pending = JobRecord(110, array_pending="3-5")
    get = {letter: view.REGISTRY.by_letter[letter].get for letter in "iAFK"}
    assert [get[k](task, None) for k in "iAFK"] == ["110_2", "20000000110", "110", "2"]
    assert [get[k](pending, None) for k in "iAF"] == ["110_[3-5]", "110", "110"]
    row = sacct_view.Row(job_id=110, task=2, step=None)
    assert (row.job_text, row.raw_text) == ("110_2", "110_2")
    step = sacct_view.Row(job_id=110, task=2, step="batch")
    assert (step.job_text, step.raw_text) == ("110_2.batch", "110_2.batch")
    assert sacct_view.Row(job_id=110, task=None, array_text="[3-5]", step=None).raw_text == "110"


# --- --dependency on a task ---------------------------------------------------------------------


@pytest.fixture
def prep(monkeypatch, tmp_path):
    use_site_config(monkeypatch, tmp_path)
    siteconf.reset()
    from shim.cli import sbatch

    def run(*argv):
        return sbatch.prepare([*argv, "--wrap", "true"], {}, stdin=io.StringIO(""), cwd="/srv/x")[1]

    yield run
    siteconf.reset()


def test_dependency_on_a_task_holds_on_its_array_and_checks_the_task(prep):
    """Grid Engine holds a job only on whole jobs (-hold_jid) or pairs two arrays' tasks
    (-hold_jid_ad): afterok/afternotok/afterany on a task (G_t or its own id) hold on the whole
    array, say so, and afterok/afternotok check that task alone when the job starts."""
    from shim.gridengine.translate import qsub

    for text in ("afterok:40000029140", "afterok:29140_4"):
        sub = prep(f"--dependency={text}")
        assert sub.argv[sub.argv.index("-hold_jid") + 1] == "29140"
        assert sub.payload["dep_checks"] == [("afterok", ["29140_4"])]
    holds, holds_ad, checks, warnings = qsub._dependencies(
        ("and", [("afterany", ["40000029140", "29140_5", "7"]), ("afternotok", ["8"])]), "sbatch", "x", None)
    assert (holds, holds_ad, checks) == (["29140", "7", "8"], [], [("afternotok", ["8"])])
    assert warnings == ["sbatch: warning: --dependency afterany on 29140_[4-5]: Grid Engine holds a job on whole "
                        "arrays only: this job waits for every task of 29140"]
    assert qsub._dependencies(("and", [("afterok", ["7"])]), "sbatch", "x", None)[3] == []  # whole jobs: no word
    _, _, checks, warnings = qsub._dependencies(("and", [("afterok", ["7_3"])]), "sbatch", "x", None)
    assert checks == [("afterok", ["7_3"])]
    assert warnings == ["sbatch: warning: --dependency afterok on 7_3: Grid Engine holds a job on whole arrays "
                        "only: this job waits for every task of 7 (afterok is checked on the tasks named)"]


def test_dependency_on_a_whole_array_and_aftercorr(prep):
    sub = prep("--dependency=afterok:7_*")  # Slurm: _* is every task of the array
    assert sub.argv[sub.argv.index("-hold_jid") + 1] == "7" and sub.payload["dep_checks"] == [("afterok", ["7"])]
    sub = prep("--dependency=aftercorr:7")
    assert sub.argv[sub.argv.index("-hold_jid_ad") + 1] == "7"
    with pytest.raises(ShimError) as e:
        prep("--dependency=aftercorr:30000000007")
    assert (e.value.code, str(e.value)) == (1, "sbatch: error: --dependency aftercorr:7_3: Grid Engine pairs the "
                                               "tasks of whole arrays (-hold_jid_ad); name the array")
