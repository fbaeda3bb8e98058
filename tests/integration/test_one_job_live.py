"""Issue 19 on the live Grid Engine: squeue -j N, scontrol show job N and scancel N ask about N
(the caller's own jobs' listing, qstat -j for another user's job, that owner's listing), never
``qstat -u '*'``; what they print is the whole listing's row of N. The Grid Engine commands each
runs are read from SLURM_SHIM_DEBUG's log. Jobs come from raw qsub, held."""

from __future__ import annotations

import os

import pytest

from conftest import run, wait_until

pytestmark = pytest.mark.gridengine

SLEEP = ["-b", "y", "/bin/sleep", "300"]


def ge_calls(cp) -> list[list[str]]:
    """The Grid Engine commands a run made (SLURM_SHIM_DEBUG=1's lines), each as [tool, args...]."""
    out = []
    for line in cp.stderr.splitlines():
        if line.startswith("slurm-shim: debug: ") and "  (" in line:
            words = line[len("slurm-shim: debug: "):].split("  (")[0].split()
            out.append([os.path.basename(words[0]), *words[1:]])
    return out


def debug(*argv, user=None):
    return run("env", "SLURM_SHIM_DEBUG=1", *argv, user=user)


def test_another_users_job_is_asked_about_not_the_whole_queue(jobs, plain_user):
    job = jobs.qsub("other", "-q", "debug", "-h", *SLEEP, user=plain_user)
    cp = debug("squeue", "-j", job)
    assert cp.returncode == 0, cp.stderr
    calls = ge_calls(cp)
    assert ["qstat", "-u", "*", "-r", "-xml"] not in calls
    assert calls[:3] == [["qstat", "-u", "root", "-r", "-xml"], ["qstat", "-j", job],
                         ["qstat", "-u", plain_user, "-r", "-xml"]]
    row = [ln for ln in cp.stdout.splitlines()[1:]]
    whole = run("squeue", "-t", "all").stdout.splitlines()
    assert row == [ln for ln in whole if ln.split()[0] == job]  # the whole listing's row of the job
    cp = debug("scontrol", "show", "job", job)
    assert cp.returncode == 0 and f"JobId={job} " in cp.stdout
    assert ["qstat", "-u", "*", "-r", "-xml"] not in ge_calls(cp)


def test_the_callers_own_job_is_one_listing_of_the_callers_jobs(jobs, plain_user):
    job = jobs.qsub("mine", "-q", "debug", "-h", *SLEEP, user=plain_user)
    cp = debug("squeue", "-j", job, "-h", "-o", "%i %u", user=plain_user)
    assert (cp.returncode, cp.stdout) == (0, f"{job} {plain_user}\n"), cp.stderr
    assert ge_calls(cp) == [["qstat", "-u", plain_user, "-r", "-xml"]]
    cp = debug("scancel", job, user=plain_user)  # a held job: its record from qstat -j -xml alone (issue 29)
    assert cp.returncode == 0, cp.stderr
    assert ge_calls(cp) == [["qstat", "-j", job, "-xml"], ["qdel", job]]
    wait_until(lambda: jobs.gone(job), 60, "the job to go")


def test_a_forgotten_job_is_one_question_more(jobs):
    cp = debug("squeue", "-j", "999999999")
    assert (cp.returncode, cp.stdout) == (1, "")
    assert "slurm_load_jobs error: Invalid job id specified" in cp.stderr
    assert ge_calls(cp) == [["qstat", "-u", "root", "-r", "-xml"], ["qstat", "-j", "999999999"]]
