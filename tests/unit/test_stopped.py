"""scancel -s STOP/TSTP/CONT through the shim's channel, and Slurm 22.05's STOPPED flag.

Slurm (src/slurmctld/job_mgr.c job_signal, _signal_job, _signal_batch_job; src/slurmctld/agent.c):
STOP, TSTP and CONT to a running job go to its steps (KILL_STEPS_ONLY: the batch shell keeps
running), to the batch shell alone with -b; when slurmd delivered a STOP, slurmctld sets the
JOB_STOPPED flag, and a CONT clears it; TSTP changes nothing. The flag is what squeue (%t ST, %T
STOPPED, -t ST) and scontrol (JobState=STOPPED) print (job_state_string: a flag wins over the
base state); ``squeue -t R`` compares the whole state and leaves a stopped job out (print.c
_filter_job). slurmdbd stores the base state (as_mysql_job.c: job_state & JOB_STATE_BASE), so
sacct shows RUNNING, and scancel -t compares the base state too (scancel.c). Here, on recorded
qstat output: the requests and the "stop"/"cont" events scancel writes, and how the listing reads
them (jobs.mark_stopped), with the events' trust rules.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime

import pytest

from conftest import FIXTURES, use_site_config
from listing_replay import ListingReplay
from shim.gridengine import backends
from shim.operations import jobs
from shim import siteconf
from shim.store import layout, records, state
from shim.__main__ import dispatch
from shim.slurm.model import JobRecord, shown_state

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
MIXED = SGE / "live-qstat-u-all-r-xml.mixed.xml"  # 105, 108 root's running; 106 alice's; 107 root's suspended
NOW = datetime(2026, 11, 30, 9, 20, 0).timestamp()
START_105 = datetime(2026, 11, 30, 9, 10, 19).timestamp()  # Grid Engine's start of job 105 in MIXED
OTHER = 4243


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    use_site_config(monkeypatch, tmp_path)
    for var in list(os.environ):
        if var.startswith(("SCANCEL_", "SQUEUE_")):
            monkeypatch.delenv(var)
    clock = [NOW]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    siteconf.reset()
    yield tmp_path / "state"
    siteconf.reset()
    backends.use(None)


def run(capsys, cmd: str, *argv):
    b = ListingReplay()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=MIXED.read_text())
    b.add("qmod", [], stdout="")
    backends.use(b)
    rc = dispatch(cmd, list(argv))
    out, err = capsys.readouterr()
    return rc, out, err, [list(k) for k, _ in b.calls if k[0] not in ("qstat",)]


def shim_job(site, job: int = 105) -> None:
    state.record_submit(str(site), job, {"name": "fx_run1", "user": "root"})


def own_events(site) -> dict[str, dict]:
    d = site / "users" / str(os.getuid()) / "records" / "events"  # (by id shard)
    return {p.name: json.loads(p.read_text()) for p in sorted(d.glob("[0-9]*/*.json"), key=lambda p: p.name)}


def requests(site, job: str = "105") -> list[tuple[int, bool, bool]]:
    return [(r["sig"], r["batch"], r["full"]) for _, r in records.signal_requests(str(site), None, job, set())]


def shown(capsys, *argv) -> str:
    rc, out, err, _ = run(capsys, "squeue", "-h", *argv)
    assert (rc, err) == (0, ""), err
    return out


def test_stop_tstp_and_cont_are_signals_to_the_steps_not_a_suspend(capsys, site):
    """No qmod: the requests carry no -b/-f (the steps, not the batch shell); STOP and CONT each
    write their event in the caller's own directory, stamped for the run; TSTP writes none."""
    shim_job(site)
    for sig in ("STOP", "TSTP", "CONT"):
        assert run(capsys, "scancel", "-s", sig, "105") == (0, "", "", []), sig
    assert requests(site) == [(19, False, False), (20, False, False), (18, False, False)]
    ev = own_events(site)
    assert set(ev) == {"105.x.stop.json", "105.x.cont.json"}
    stop = ev["105.x.stop.json"]
    assert set(stop) == {"t", "uid", "user", "owner", "start"}  # (no "sub": qstat -r shows no submit time here)
    assert (stop["t"], stop["uid"], stop["owner"], stop["start"]) == (NOW, os.getuid(), "root", START_105)


def test_batch_stop_signals_the_batch_shell_and_stops_the_job(capsys, site):
    shim_job(site)
    assert run(capsys, "scancel", "-b", "-s", "STOP", "105") == (0, "", "", [])
    assert requests(site) == [(19, True, False)]
    assert "105.x.stop.json" in own_events(site)
    assert shown(capsys, "-j", "105", "-o", "%t %T") == "ST STOPPED\n"


def test_a_job_not_submitted_through_the_shim_is_suspended_by_grid_engine(capsys, site):
    """No job wrapper to deliver it: STOP/TSTP/CONT without -b/-f stay Grid Engine's qmod (the
    whole job), with the suspend event, and no stop event; a shim job beside it gets a request."""
    shim_job(site, 105)
    rc, out, err, calls = run(capsys, "scancel", "-s", "STOP", "105", "108")
    assert (rc, out, err, calls) == (0, "", "", [["qmod", "-sj", "108"]])
    assert requests(site) == [(19, False, False)] and requests(site, "108") == []
    assert set(own_events(site)) == {"105.x.stop.json", "108.x.suspend.json"}
    assert run(capsys, "scancel", "-s", "TSTP", "108")[3] == [["qmod", "-sj", "108"]]
    assert run(capsys, "scancel", "-s", "CONT", "108")[3] == [["qmod", "-usj", "108"]]
    rc, out, err, calls = run(capsys, "scancel", "-b", "-s", "STOP", "108")  # -b: only a wrapper can
    assert rc == 1 and calls == [] and "STOP" in err


def test_squeue_and_scontrol_show_stopped_until_cont(capsys, site, monkeypatch):
    shim_job(site)
    assert shown(capsys, "-j", "105", "-o", "%i %t %T") == "105 R RUNNING\n"
    run(capsys, "scancel", "-s", "STOP", "105")
    assert shown(capsys, "-j", "105", "-o", "%i %t %T") == "105 ST STOPPED\n"
    assert "105 ST STOPPED\n" in shown(capsys, "-o", "%i %t %T")  # the whole listing (ended jobs' scan)
    assert "105" not in shown(capsys, "-t", "R", "-o", "%i")  # Slurm's -t R: the whole state is compared
    assert shown(capsys, "-t", "ST", "-o", "%i") == "105\n"
    assert "105 ST\n" in shown(capsys, "-t", "STOPPED,PD", "-o", "%i %t")
    doc = json.loads(run(capsys, "squeue", "--json")[1])
    assert [j["job_state"] for j in doc["jobs"] if j["job_id"] == 105] == ["STOPPED"]
    rc, out, err, _ = run(capsys, "scontrol", "show", "job", "105")
    assert rc == 0 and "   JobState=STOPPED Reason=None " in out
    monkeypatch.setattr(time, "time", lambda: NOW + 1)  # CONT a second later
    run(capsys, "scancel", "-s", "CONT", "105")
    assert shown(capsys, "-j", "105", "-o", "%i %t %T") == "105 R RUNNING\n"
    assert "JobState=RUNNING " in run(capsys, "scontrol", "show", "job", "105")[1]
    assert shown(capsys, "-t", "R", "-o", "%i").split().count("105") == 1


def test_tstp_changes_no_state(capsys, site):
    shim_job(site)
    run(capsys, "scancel", "-s", "TSTP", "105")
    assert shown(capsys, "-j", "105", "-o", "%T") == "RUNNING\n"


def test_scancel_t_running_still_names_a_stopped_job(capsys, site):
    """scancel.c compares the base state: -t RUNNING signals (here: continues) a stopped job."""
    shim_job(site)
    run(capsys, "scancel", "-s", "STOP", "105")
    assert run(capsys, "scancel", "-t", "RUNNING", "-u", "root", "-s", "CONT")[:3] == (0, "", "")
    assert requests(site)[-1] == (18, False, False)


def test_another_users_denied_stop_writes_nothing(capsys, site, monkeypatch):
    shim_job(site)
    monkeypatch.setattr(os, "getuid", lambda: OTHER)
    rc, out, err, calls = run(capsys, "scancel", "-s", "STOP", "105")
    assert (rc, calls) == (210, []) and err.endswith("Access/permission denied\n")
    monkeypatch.undo()
    assert not (site / "users" / str(OTHER)).exists()


# ---------------------------------------------------------------------------------------------
# jobs.mark_stopped: which events count


def plant(site, uid: int, name: str, data: dict) -> None:
    from test_squeue import plant as plant_file

    plant_file(site, "events", name, json.dumps(data), uid=uid)


def stopped_105(capsys) -> str:
    return shown(capsys, "-j", "105", "-o", "%T")


def test_only_the_owners_or_roots_word_stops_a_job(capsys, site):
    """A stop event in another user's directory, even naming the owner, stops nothing; one in the
    owner's own directory does; root's (an admin's scancel) does when it names the owner, and not
    when it names nobody (root's own job)."""
    alice = state.uid_of("alice")  # the owner of 106 in MIXED
    assert alice is not None and alice != 0

    def shows() -> str:
        return shown(capsys, "-j", "106", "-o", "%T")

    stop = {"t": NOW, "owner": "alice", "start": START_105}
    plant(site, OTHER, "106.x.stop.json", {**stop, "uid": OTHER})
    assert shows() == "RUNNING\n"
    plant(site, alice, "106.x.stop.json", {**stop, "uid": alice})
    assert shows() == "STOPPED\n"
    (site / "users" / str(alice) / "events" / "106.x.stop.json").unlink()
    state.record_event(str(site), 106, None, "stop", {"start": START_105})  # root's, naming nobody
    assert shows() == "RUNNING\n"
    state.record_event(str(site), 106, None, "stop", {"owner": "alice", "start": START_105})
    assert shows() == "STOPPED\n"


def test_a_stop_of_an_earlier_run_or_an_unreadable_event_counts_not(capsys, site):
    shim_job(site)
    me = os.getuid()
    ev = site / "users" / str(me) / "records" / "events" / layout.shard(105)  # (job 105's id shard)
    state.record_event(str(site), 105, None, "stop", {"owner": "root", "start": START_105 - 600})
    assert stopped_105(capsys) == "RUNNING\n"  # stamped for another run (a requeued job's first)
    (ev / "105.x.stop.json").unlink()
    state.record_event(str(site), 105, None, "stop", {"owner": "alice", "start": START_105})
    assert stopped_105(capsys) == "RUNNING\n"  # names another owner
    (ev / "105.x.stop.json").unlink()
    (ev / "105.x.stop.json").write_text("[1]")
    assert stopped_105(capsys) == "RUNNING\n"  # not an object
    (ev / "105.x.stop.json").unlink()
    os.symlink(ev / "elsewhere.json", ev / "105.x.stop.json")
    (ev / "elsewhere.json").write_text(json.dumps({"t": NOW, "owner": "root", "start": START_105}))
    assert stopped_105(capsys) == "RUNNING\n"  # a link is never followed
    (ev / "105.x.stop.json").unlink()
    state.record_event(str(site), 105, None, "stop", {"owner": "root", "start": START_105})
    assert stopped_105(capsys) == "STOPPED\n"


def test_the_latest_of_stop_and_cont_wins_across_the_owners_and_roots_directories(site):
    """The owner's stop and root's later cont: running; and a cont as late as the stop: running."""
    cfg = siteconf.get()
    recs = [JobRecord(106, user="alice", uid=state.uid_of("alice"), state="RUNNING",
                      extra={"start_ts": START_105})]

    def stopped(stops) -> bool:
        recs[0].extra.pop("stopped", None)
        jobs.mark_stopped(recs, stops, jobs.SubmitRecords(cfg, 1))
        return shown_state(recs[0]) == "STOPPED"

    plant(site, recs[0].uid, "106.x.stop.json", {"t": NOW, "owner": "alice", "start": START_105})
    assert stopped(jobs.stop_events(cfg, recs))
    state.record_event(str(site), 106, None, "cont", {"owner": "alice", "start": START_105})  # root's, NOW
    assert not stopped(jobs.stop_events(cfg, recs))  # a CONT as late as the STOP
    assert not stopped({})
    assert not stopped({106: {OTHER: {(None, "stop")}}})  # a name where no such file is
    assert jobs.stop_events(cfg, [JobRecord(105, user="root", uid=0, state="RUNNING")]) == {}


def test_shown_state_is_the_flag_over_the_base_state():
    r = JobRecord(1, state="RUNNING")
    assert shown_state(r) == "RUNNING"
    r.extra["stopped"] = True
    assert shown_state(r) == "STOPPED"
    r.state = "SUSPENDED"  # Grid Engine's suspend wins: only a running job is stopped
    assert shown_state(r) == "SUSPENDED"



def test_stop_names_looked_up_one_by_one_or_listed_are_the_same(site, monkeypatch):
    """stop_events: a few running jobs' names are looked up (lstat), many jobs' listed; both find
    the owner's and root's stop/cont names of exactly those jobs and array tasks, and nobody else's."""
    cfg = siteconf.get()
    alice = state.uid_of("alice")
    running = [JobRecord(106, user="alice", uid=alice, state="RUNNING"),
               JobRecord(110, array_task=3, user="root", uid=0, state="RUNNING")]
    plant(site, alice, "106.x.stop.json", {"t": NOW, "owner": "alice"})
    plant(site, OTHER, "106.x.cont.json", {"t": NOW, "owner": "alice"})  # not a directory that speaks for 106
    state.record_event(str(site), 106, None, "cont", {"owner": "alice"})
    state.record_event(str(site), 110, 3, "stop", {})
    state.record_event(str(site), 110, 4, "stop", {})  # another task
    state.record_event(str(site), 111, None, "stop", {})  # another job
    state.record_event(str(site), 110, 3, "cancel", {})  # another kind
    want = {106: {alice: {(None, "stop")}, 0: {(None, "cont")}}, 110: {0: {(3, "stop")}}}
    assert jobs.stop_events(cfg, running) == want
    monkeypatch.setattr(jobs, "STOP_LOOKUPS", 0)
    assert jobs.stop_events(cfg, running) == want
