"""scancel against the live Grid Engine: what it deletes, suspends and refuses, its messages and exit
codes, and the cancel records squeue and sacct read afterwards. Jobs come from raw qsub."""

from __future__ import annotations

import json

import pytest

from conftest import STATE_DIR, run, wait_until

pytestmark = pytest.mark.gridengine

SLEEP = ["-b", "y", "/bin/sleep"]




def scancel(*argv: str, user: str | None = None):
    return run("scancel", *argv, user=user)


def cancel_event(jid: str, task: str = "x", user: str = "root") -> dict:
    """The cancel event ``user``'s scancel wrote (in that user's own record directory)."""
    import pwd

    home = STATE_DIR / "users" / str(pwd.getpwnam(user).pw_uid)
    path = home / "records" / "events" / str(int(jid) // 100) / f"{jid}.{task}.cancel.json"  # its id shard
    return json.loads(path.read_text())


def test_cancel_pending_and_running_by_id(jobs):
    pend = jobs.qsub("pend", "-q", "debug", "-h", *SLEEP, "300")
    runj = jobs.qsub("run", "-q", "debug", *SLEEP, "300")
    wait_until(lambda: jobs.ge(runj) == ["r"], 60, "running")
    cp = scancel(pend, runj)
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", "")
    wait_until(lambda: jobs.gone(pend) and jobs.gone(runj), 60, "both gone")
    assert cancel_event(pend)["was"] == "PENDING"
    assert cancel_event(runj)["was"] == "RUNNING" and cancel_event(runj)["user"] == "root"
    out = run("squeue", "-h", "-t", "all", "-j", f"{pend},{runj}", "-o", "%i %t %N").stdout
    assert sorted(out.splitlines()) == sorted([f"{pend} CA ", f"{runj} CA vm"])


def test_array_tasks_ranges_and_whole_array(jobs):
    arr = jobs.qsub("arr", "-q", "debug", "-h", "-t", "1-6", *SLEEP, "300")
    cp = scancel(f"{arr}_2", f"{arr}_[4-5]")
    assert cp.returncode == 0, cp.stderr
    wait_until(lambda: run("squeue", "-h", "-j", arr, "-o", "%i").stdout.strip() == f"{arr}_[1,3,6]", 30, "tasks")
    for t in ("2", "4", "5"):
        assert cancel_event(arr, t)["was"] == "PENDING"
    assert scancel(arr).returncode == 0
    wait_until(lambda: jobs.gone(arr), 30, "array gone")
    out = run("squeue", "-h", "-t", "all", "-j", arr, "-o", "%i %t").stdout
    # the tasks cancelled before they ran: one record, by its first index, which -t all shows as Slurm
    # keeps an array's record (every release: fixtures/slurm-*/cases.json squeue_array_after_whole_cancel)
    assert out == f"{arr}_1 CA\n"


def test_filters(jobs):
    a = jobs.qsub("a", "-q", "debug", "-h", *SLEEP, "300")
    b = jobs.qsub("b", "-q", "gpu", "-h", *SLEEP, "300")
    c = jobs.qsub("c", "-q", "debug", "-h", *SLEEP, "300", user="alice")
    assert scancel("-n", jobs.name("b"), "-p", "debug").returncode == 0  # b is in gpu: untouched
    assert not jobs.gone(b)
    assert scancel("-n", jobs.name("b"), "-t", "PENDING", "-p", "gpu").returncode == 0
    wait_until(lambda: jobs.gone(b), 30, "b gone")
    assert scancel("--me", "-n", jobs.name("a"), user="alice").returncode == 0  # not alice's
    assert not jobs.gone(a)
    assert scancel("--me", "-n", jobs.name("c"), user="alice").returncode == 0
    wait_until(lambda: jobs.gone(c), 30, "c gone")
    assert cancel_event(c, user="alice")["user"] == "alice"
    assert scancel("-u", "root", "-n", jobs.name("a")).returncode == 0
    wait_until(lambda: jobs.gone(a), 30, "a gone")


def test_permission_denied_unknown_and_verbose(jobs):
    a = jobs.qsub("root", "-q", "debug", "-h", *SLEEP, "300")
    cp = scancel(a, user="alice")
    assert (cp.returncode, cp.stderr) == (210, f"scancel: error: Kill job error on job id {a}: Access/permission denied\n")
    assert not jobs.gone(a)
    cp = scancel("999999")
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", "")
    cp = scancel("-v", "999999")
    assert (cp.returncode, cp.stderr) == (0, "scancel: Terminating job 999999\n"
                                             "scancel: error: Kill job error on job id 999999: Invalid job id specified\n")
    cp = scancel("-s", "KILL", "999999")
    assert cp.returncode == 1
    cp = scancel("-v", a)
    assert (cp.returncode, cp.stderr) == (0, f"scancel: Terminating job {a}\n")
    wait_until(lambda: jobs.gone(a), 30, "gone")


def test_stop_and_continue(jobs):
    """A job not submitted through the shim has no job wrapper to take scancel's request: STOP and
    CONT stay Grid Engine's qmod -sj/-usj (the whole job: squeue shows it SUSPENDED)."""
    jid = jobs.qsub("stop", "-q", "debug", *SLEEP, "300")
    wait_until(lambda: jobs.ge(jid) == ["r"], 60, "running")
    assert scancel("-s", "STOP", jid).returncode == 0
    wait_until(lambda: jobs.ge(jid) == ["s"], 30, "suspended")
    assert run("squeue", "-h", "-j", jid, "-o", "%t").stdout == "S\n"
    assert scancel("--signal=CONT", jid).returncode == 0
    wait_until(lambda: jobs.ge(jid) == ["r"], 30, "resumed")
    cp = scancel("-s", "USR1", jid)
    assert cp.returncode == 1 and "USR1" in cp.stderr
    assert jobs.ge(jid) == ["r"]


def test_stop_and_continue_a_shim_job_stops_it_as_slurm_does(jobs):
    """Slurm 22.05: scancel -s STOP signals the job's steps (the batch shell runs on), and once it
    was delivered slurmctld flags the job STOPPED (agent.c): squeue %t ST, %T STOPPED, -t ST
    lists it and -t R does not (print.c _filter_job compares the whole state), scontrol's
    JobState=STOPPED; slurmdbd keeps the base state, so sacct says RUNNING. TSTP is delivered
    and changes nothing; CONT clears the flag. Grid Engine's job runs on throughout (no qmod)."""
    cp = run("sbatch", "--parsable", "-J", jobs.name("stopme"), "-p", "debug", "-o", "/dev/null",
             "--wrap", "sleep 300", cwd="/tmp")
    assert cp.returncode == 0, cp.stderr
    jid = cp.stdout.strip()
    jobs.ids.append(jid)
    wait_until(lambda: jobs.ge(jid) == ["r"], 60, "running")

    def shown() -> str:
        return run("squeue", "-h", "-j", jid, "-o", "%t %T").stdout

    assert shown() == "R RUNNING\n"
    cp = scancel("-s", "STOP", jid)
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", "")
    assert shown() == "ST STOPPED\n"  # scancel recorded the STOP it sent: no wait
    assert jobs.ge(jid) == ["r"]  # not suspended: Grid Engine's job (and its time limit) runs on
    assert run("squeue", "-h", "-t", "ST", "-o", "%i").stdout.split().count(jid) == 1
    assert jid not in run("squeue", "-h", "-t", "R", "-o", "%i").stdout.split()
    assert f"{jid} ST" in run("squeue", "-h", "-o", "%i %t").stdout.splitlines()  # the whole listing
    out = run("scontrol", "show", "job", jid).stdout
    assert " JobState=STOPPED Reason=None " in out, out
    cp = run("sacct", "-n", "-X", "-j", jid, "-o", "JobID,State")
    assert cp.stdout.split() == [jid, "RUNNING"], (cp.stdout, cp.stderr)
    assert scancel("-s", "TSTP", jid).returncode == 0
    assert shown() == "ST STOPPED\n"
    cp = scancel("--signal=CONT", jid)
    assert (cp.returncode, cp.stderr) == (0, "")
    assert shown() == "R RUNNING\n"
    assert " JobState=RUNNING " in run("scontrol", "show", "job", jid).stdout
    assert jobs.ge(jid) == ["r"]
    assert scancel("-b", "-s", "STOP", jid).returncode == 0  # the batch shell: flagged the same
    assert shown() == "ST STOPPED\n"
    assert scancel("-b", "-s", "CONT", jid).returncode == 0
    assert shown() == "R RUNNING\n"
