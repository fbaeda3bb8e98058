"""scontrol's job verbs and the words they take (brief S5-X items 2 and 3), on the recorded mixed
listing of test_scontrol (105 fx_run1 running; 110 fx_arr, an array with running and pending tasks;
112 fx_held, held).

Slurm 22.05, src/scontrol/update_job.c:
- scontrol_hold (hold, holdu, uhold, release): a word that _is_job_id accepts is a job list; else
  only ``Name=NAME`` / ``JobName=NAME`` (after an optional JobID=/Job=) names jobs, and any other
  word is ESLURM_INVALID_JOB_ID ("Invalid job id specified for job WORD"; scontrol.c's dispatch
  then adds slurm_perror("slurm_suspend error")). With a name, every job of that name is updated:
  a task that is not pending is skipped, another job that is not pending is updated but makes the
  word fail with ESLURM_JOB_NOT_PENDING; a name no job has updates nothing and is no error.
- scontrol_requeue / scontrol_requeue_hold / scontrol_suspend: ids only, each failure
  "<slurm_strerror> for job <id>".
- src/scontrol/info_job.c scontrol_print_job: the id is strtol'd and loaded (slurm_load_job); an
  id the controller does not know is "slurm_load_jobs error: Invalid job id specified" (stderr);
  "Job N_k not found" (stdout) only for a task index ``N_k`` the loaded job has not. A task named
  by its own job id (t*10^10+G, docs/array-ids.md) is a job id in Slurm, so one the array has not
  is an unknown job id."""

from __future__ import annotations

from test_scontrol import CASES, scontrol, site  # noqa: F401  (the fixture)

INVALID = "Invalid job id specified for job {}\nslurm_suspend error: Invalid job id specified\n"


def test_hold_and_release_take_name_and_jobname_only(capsys):
    assert scontrol(capsys, "hold", "Name=fx_held") == (0, "", "", [["qhold", "-h", "o", "112"]])  # root's
    assert scontrol(capsys, "release", "jobname=fx_held") == (0, "", "", [["qrls", "-h", "uo", "112"]])
    assert scontrol(capsys, "uhold", "JobId=Name=fx_held")[3] == [["qhold", "112"]]
    # a bare word that is no id list is an invalid job id, even when a job has that name
    assert scontrol(capsys, "hold", "fx_held") == (1, "", INVALID.format("fx_held"), [])
    assert scontrol(capsys, "release", "fx_held", "112") == (1, "", INVALID.format("fx_held"), [["qrls", "-h", "uo", "112"]])
    # the reference's own unknown id, unchanged
    ref = CASES["scontrol_hold_unknown"]
    assert scontrol(capsys, "hold", "999999")[:3] == (ref["rc"], ref["stdout"], ref["stderr"])


def test_a_name_no_job_has_is_no_error(capsys):
    assert scontrol(capsys, "hold", "Name=nosuchjob") == (0, "", "", [])


def test_a_name_acts_on_pending_jobs_and_tasks_only(capsys):
    # a running job of that name is updated, and the word fails: ESLURM_JOB_NOT_PENDING
    assert scontrol(capsys, "hold", "Name=fx_run1") == (
        1, "", "slurm_suspend error: Job is no longer pending execution\n", [["qhold", "-h", "o", "105"]])
    # an array: its pending tasks; its running tasks are left alone, silently
    rc, out, err, calls = scontrol(capsys, "hold", "Name=fx_arr")
    assert (rc, out, err) == (0, "", "") and calls == [["qhold", "-h", "o", "110.3-5"]]


def test_requeue_and_suspend_take_ids_only(capsys):
    assert scontrol(capsys, "requeue", "fx_run1") == (1, "", "Invalid job id specified for job fx_run1\n", [])
    assert scontrol(capsys, "requeue", "Name=fx_run1") == (
        1, "", "Invalid job id specified for job Name=fx_run1\n", [])
    assert scontrol(capsys, "requeue", "999999") == (1, "", "Invalid job id specified for job 999999\n", [])
    assert scontrol(capsys, "requeuehold", "JobName=fx_run1")[::3] == (1, [])
    assert scontrol(capsys, "suspend", "fx_run1")[::3] == (1, [])
    assert scontrol(capsys, "suspend", "Name=fx_run1")[::3] == (1, [])
    assert scontrol(capsys, "requeue", "105")[::3] == (0, [["qmod", "-rj", "105"]])


def test_a_task_id_the_array_has_not_is_an_unknown_job_id(capsys):
    missing = str(99 * 10**10 + 110)  # task 99 of array 110, by its own job id
    assert scontrol(capsys, "show", "job", missing)[:3] == (
        1, "", "slurm_load_jobs error: Invalid job id specified\n")
    assert scontrol(capsys, "-Q", "show", "job", missing)[:3] == (1, "", "")
    # named as G_t it stays scontrol_print_job's "Job G_t not found" on stdout
    assert scontrol(capsys, "show", "job", "110_99")[:3] == (1, "Job 110_99 not found\n", "")
    # the job verbs name it as it was typed, as Slurm's "%s for job %s" does
    assert scontrol(capsys, "hold", missing) == (1, "", INVALID.format(missing), [])
    assert scontrol(capsys, "hold", "110_99") == (1, "", INVALID.format("110_99"), [])
    assert scontrol(capsys, "requeue", missing) == (1, "", f"Invalid job id specified for job {missing}\n", [])
    # an existing task by its own id still works
    assert scontrol(capsys, "hold", str(4 * 10**10 + 110))[3] == [["qhold", "-h", "o", "110.4"]]


def test_update_names_the_job_as_scontrol_update_job_does(capsys):
    """scontrol_update_job prints "<slurm_strerror> for job <id>" and scontrol.c's _update_it adds
    no slurm_perror for a job update (jerror_code only sets the exit code)."""
    missing = str(99 * 10**10 + 110)
    assert scontrol(capsys, "update", f"JobId={missing}", "Comment=x")[:3] == (
        1, "", f"Invalid job id specified for job {missing}\n")
    assert scontrol(capsys, "update", "JobId=110_99", "Comment=x")[:3] == (
        1, "", "Invalid job id specified for job 110_99\n")
