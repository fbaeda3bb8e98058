"""scancel on recorded qstat output: which qdel/qmod calls it makes, the cancel events it writes, and
Slurm 22.05's messages and exit codes."""

from __future__ import annotations

import io
import json
import os
import time
from datetime import datetime

import pytest

from conftest import FIXTURES, SLURM_REF, use_site_config
from shim import backends, siteconf, state
from shim.__main__ import dispatch
from shim.backends.replay import ReplayBackend

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
MIXED = SGE / "live-qstat-u-all-r-xml.mixed.xml"
CASES = json.loads((SLURM_REF / "cases.json").read_text())
NOW = datetime(2026, 11, 30, 9, 20, 0).timestamp()


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    use_site_config(monkeypatch, tmp_path)
    for var in list(os.environ):
        if var.startswith("SCANCEL_"):
            monkeypatch.delenv(var)
    monkeypatch.setattr(time, "time", lambda: NOW)
    siteconf.reset()
    yield tmp_path / "state"
    siteconf.reset()
    backends.use(None)


def scancel(capsys, *argv, qstat=MIXED, qdel="", qmod=""):
    b = ReplayBackend()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=qstat.read_text() if hasattr(qstat, "read_text") else qstat)
    b.add("qdel", [], stdout=qdel)
    b.add("qmod", [], stdout=qmod)
    backends.use(b)
    rc = dispatch("scancel", list(argv))
    out, err = capsys.readouterr()
    calls = [list(k) for k, _ in b.calls if k[0] != "qstat"]
    return rc, out, err, calls


def events(state_dir) -> dict[str, dict]:
    d = state_dir / "users" / str(os.getuid()) / "events"  # the caller's own records
    return {p.name: json.loads(p.read_text()) for p in sorted(d.glob("*.json"))} if d.exists() else {}


def same_as(case: str, rc, out, err):
    ref = CASES[case]
    assert (rc, out, err) == (ref["rc"], ref["stdout"], ref["stderr"])


def test_argument_errors_are_slurms(capsys):
    same_as("scancel_no_args", *scancel(capsys)[:3])
    same_as("scancel_bad_id", *scancel(capsys, "abc")[:3])
    same_as("scancel_u_unknown", *scancel(capsys, "-u", "nosuchuser")[:3])
    rc, out, err, _ = scancel(capsys, "-t", "DONE", "105")
    assert rc == 1 and err.startswith("scancel: error: Invalid job state specified: DONE\n")
    rc, out, err, _ = scancel(capsys, "-s", "NOSUCH", "105")
    assert (rc, err) == (1, "scancel: error: Unknown job signal: NOSUCH\n")
    rc, out, err, _ = scancel(capsys, "--bogus")
    assert (rc, err) == (1, "scancel: unrecognized option '--bogus'\nTry \"scancel --help\" for more information\n")


def test_unknown_job_is_silent_unless_verbose_or_signalling(capsys):
    rc, out, err, calls = scancel(capsys, "999999")
    assert (rc, out, err, calls) == (0, "", "", [])
    same_as("scancel_unknown_verbose", *scancel(capsys, "-v", "999999")[:3])
    same_as("scancel_signal_unknown", *scancel(capsys, "-s", "USR1", "999999")[:3])
    same_as("scancel_batch_unknown", *scancel(capsys, "-b", "999999")[:3])
    rc, out, err, calls = scancel(capsys, "110_99")  # an array task that does not exist
    assert (rc, err, calls) == (0, "", [])


def test_cancel_pending_and_running_in_one_qdel(capsys, site):
    rc, out, err, calls = scancel(capsys, "112", "105", qdel="root has deleted job 112\n"
                                                            "root has registered the job 105 for deletion\n")
    assert (rc, out, err) == (0, "", "")
    assert calls == [["qdel", "112", "105"]]
    ev = events(site)
    assert ev["112.x.cancel.json"]["was"] == "PENDING" and ev["112.x.cancel.json"]["user"] == "root"
    assert ev["112.x.cancel.json"]["uid"] == os.getuid() and ev["112.x.cancel.json"]["t"] == NOW
    assert ev["105.x.cancel.json"]["was"] == "RUNNING" and ev["105.x.cancel.json"]["node"] == "vm"


def test_verbose_prints_terminating(capsys):
    rc, out, err, _ = scancel(capsys, "-v", "112", qdel="root has deleted job 112\n")
    assert (rc, out, err) == (0, "", "scancel: Terminating job 112\n")


def test_array_tasks_by_slurm_index(capsys, site):
    rc, _, err, calls = scancel(capsys, "110_4", "110_1")
    assert (rc, err, calls) == (0, "", [["qdel", "110.4", "110.1"]])
    assert {"110.4.cancel.json", "110.1.cancel.json"} <= set(events(site))
    assert events(site)["110.4.cancel.json"]["was"] == "PENDING"
    rc, _, _, calls = scancel(capsys, "110_[3-5]")
    assert calls == [["qdel", "110.3-5"]]


def test_array_indices_map_to_grid_engine_task_numbers(capsys, site):
    state.record_submit(str(site), 110, {"name": "fx_arr", "array": [10, 20, 30, 40, 50], "throttle": 2})
    rc, _, err, calls = scancel(capsys, "110_40", "110_[20,50]")
    assert (rc, err) == (0, "")
    assert calls == [["qdel", "110.4", "110.2", "110.5"]]
    assert {"110.40.cancel.json", "110.20.cancel.json", "110.50.cancel.json"} <= set(events(site))


def test_array_index_map_is_only_the_owners(capsys, site):
    """F-3e: another user's record of the job does not map the victim's tasks (a reversed map
    would cancel the wrong one), whether or not the owner has a record."""
    from test_squeue import plant

    plant(site, "jobs", "110.json", json.dumps({"array": [50, 40, 30, 20, 10], "user": "root"}))
    assert scancel(capsys, "110_2")[3] == [["qdel", "110.2"]]  # no record of the owner's: as Grid Engine numbers
    state.record_submit(str(site), 110, {"name": "fx_arr", "array": [10, 20, 30, 40, 50], "throttle": 2})
    assert scancel(capsys, "110_40")[3] == [["qdel", "110.4"]]


def test_planted_records_never_crash_or_hang_scancel(capsys, site):
    from test_squeue import no_hang, plant_everything

    plant_everything(site, NOW, 105)
    with no_hang("scancel"):
        rc, _, err, calls = scancel(capsys, "-s", "CONT", "105")
        assert (rc, err, calls) == (0, "", [["qmod", "-usj", "105"]])
        rc, _, err, calls = scancel(capsys, "105", "888888")  # her invented job of the victim's is unknown
        assert (rc, calls) == (0, [["qdel", "105"]])
        rc, _, err, calls = scancel(capsys, "-v", "888888")
        assert "Invalid job id specified" in err


def test_a_record_that_cannot_be_written_is_a_warning(capsys, site):
    os.rename(site / "users", site / "users.off")  # a state directory nobody set up
    try:
        rc, _, err, calls = scancel(capsys, "105")
    finally:
        os.rename(site / "users.off", site / "users")
    assert (rc, calls) == (0, [["qdel", "105"]])
    assert err.startswith("scancel: warning: could not record the cancel of job 105 in ")


def test_whole_array_records_every_task(capsys, site):
    rc, _, _, calls = scancel(capsys, "110")
    assert calls == [["qdel", "110"]]
    assert sorted(n for n in events(site) if n.startswith("110.")) == \
        [f"110.{t}.cancel.json" for t in (1, 2, 3, 4, 5)]


def test_filters(capsys):
    assert scancel(capsys, "-u", "alice")[3] == [["qdel", "106"]]
    assert scancel(capsys, "-t", "PENDING", "-p", "gpu")[3] == [["qdel", "117"]]
    assert scancel(capsys, "-n", "fx_held")[3] == [["qdel", "112"]]
    assert scancel(capsys, "--name=fx_arr", "-t", "R")[3] == [["qdel", "110.1-2"]]
    assert scancel(capsys, "-w", "vm", "-p", "gpu")[3] == [["qdel", "108"]]
    assert scancel(capsys, "-t", "SUSPENDED")[3] == [["qdel", "107"]]
    assert scancel(capsys, "-u", "alice", "105")[3] == []  # an id outside the filter is left alone
    assert scancel(capsys, "-A", "nosuchaccount")[3] == []
    rc, out, err, calls = scancel(capsys, "--me", "-u", "alice", "-t", "PD", "-p", "gpu")
    assert calls == [["qdel", "117"]]


def test_permission_denied_is_210(capsys):
    denied = (SGE / "live-qdel-permission-denied.txt").read_text()
    rc, out, err, _ = scancel(capsys, "105", qdel=denied)
    ref = CASES["scancel_bob_on_root_job"]
    assert (rc, out, err) == (ref["rc"], "", ref["stderr"].replace("109", "105"))


def test_signals(capsys, site):
    rc, _, err, calls = scancel(capsys, "-s", "STOP", "105")
    assert (rc, err, calls) == (0, "", [["qmod", "-sj", "105"]])
    assert "105.x.suspend.json" in events(site)
    assert scancel(capsys, "--signal=CONT", "107")[3] == [["qmod", "-usj", "107"]]
    assert scancel(capsys, "-s", "9", "105")[3] == [["qdel", "105"]]
    assert scancel(capsys, "-s", "SIGTERM", "105")[3] == [["qdel", "105"]]
    rc, out, err, calls = scancel(capsys, "--signal=USR1", "105")
    assert rc == 1 and calls == [] and err.startswith("scancel: error: Kill job error on job id 105: ")
    assert "USR1" in err


def test_steps_are_not_jobs(capsys):
    rc, out, err, calls = scancel(capsys, "105.0")
    assert (rc, out, err, calls) == (0, "", "", [])


def test_ended_job(capsys, site):
    state.record_submit(str(site), 300, {"name": "done", "partition": "debug", "user": "root"})
    state.record_event(str(site), 300, None, "end", {"exit": 0, "signal": 0, "state": "COMPLETED", "node": "vm"})
    os.utime(site / "users" / str(os.getuid()) / "events" / "300.x.end.json", (NOW - 5, NOW - 5))
    rc, out, err, calls = scancel(capsys, "300")
    assert (rc, err, calls) == (0, "", [])
    rc, out, err, calls = scancel(capsys, "-v", "300")
    ref = CASES["scancel_done_verbose"]
    assert (rc, err) == (ref["rc"], ref["stderr"].replace("job 1", "job 300").replace("id 1:", "id 300:"))


def test_quiet_hides_errors(capsys):
    denied = (SGE / "live-qdel-permission-denied.txt").read_text()
    rc, out, err, _ = scancel(capsys, "-Q", "105", qdel=denied)
    assert (rc, err) == (210, "")


def test_interactive_asks_for_each_job(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("y\nn\n"))
    rc, out, err, calls = scancel(capsys, "-i", "112", "105")
    assert calls == [["qdel", "112"]]
    assert out == ("Cancel job_id=112 name=fx_held partition=debug [y/n]? "
                   "Cancel job_id=105 name=fx_run1 partition=debug [y/n]? ")


def test_many_jobs_take_few_qdel_calls(capsys, site):
    rows = "".join(f"""<job_list state="pending"><JB_job_number>{i}</JB_job_number><JAT_prio>0.5</JAT_prio>
<JB_name>many</JB_name><JB_owner>root</JB_owner><state>qw</state>
<JB_submission_time>2026-11-30T09:00:00</JB_submission_time><queue_name></queue_name><slots>1</slots>
<hard_req_queue>debug</hard_req_queue></job_list>
""" for i in range(1000, 2000))
    doc = f"<?xml version='1.0'?>\n<job_info><queue_info></queue_info><job_info>\n{rows}</job_info></job_info>\n"
    rc, out, err, calls = scancel(capsys, "-n", "many", qstat=doc)
    assert rc == 0 and len(calls) == 3
    assert sum(len(c) - 1 for c in calls) == 1000
    assert len(events(site)) == 1000
