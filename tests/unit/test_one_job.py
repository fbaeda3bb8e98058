"""Issue 19: one job, one question. ``squeue -j N``, ``scontrol show job N``, ``scontrol hold N``
and ``scancel N`` ask Grid Engine about N (the caller's own jobs' listing, ``qstat -j`` for ids
not among them, their owners' listing), never the whole queue, except where a named job's
pending reason depends on the other users' jobs (Resources/Priority, Licenses, a quota) and the
command shows reasons. The Grid Engine calls are asserted exactly, and every output (stdout,
stderr, exit code) is compared with the one the whole listing gives.

Recorded answers: fixtures/gridengine/sge-8.1.9 (live-qstat-u-all-r-xml.mixed.xml: root's jobs
105-119 in every state and alice's running 106; live-qstat-j-text.*: ``qstat -j`` found / none
found on the local cluster); the narrower answers are derived from the recorded listing as Grid
Engine selects (tests/unit/listing_replay.py)."""

from __future__ import annotations


import pytest

from conftest import FIXTURES
from listing_replay import ListingReplay, owners_of
from shim.gridengine import backends
from shim.operations import jobs
from shim import siteconf
from shim.__main__ import dispatch
from shim.gridengine import ops
from shim_records import frozen_site  # noqa: E402

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
MIXED = SGE / "live-qstat-u-all-r-xml.mixed.xml"
WHOLE = ("qstat", "-u", "*", "-r", "-xml")
MINE = ("qstat", "-u", "root", "-r", "-xml")
WAITING = {110, 111, 115, 116, 117}  # pending, no hold, dependency or error: a reason of the whole queue


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    state_dir = frozen_site(monkeypatch, tmp_path)
    monkeypatch.setattr(jobs, "own_name", lambda: "root")  # the caller, as the fixture's jobs are root's
    yield state_dir
    siteconf.reset()
    backends.use(None)


class _Backend(ListingReplay):
    """Also answers qstat -j -xml (the detail of non-shim jobs) with the recorded document, and
    qdel/qhold/qrls/qmod with nothing."""

    def run(self, tool, args, *, input=None, timeout=None):
        if tool == "qstat" and "-xml" in args and args[0] == "-j":
            from shim.proc import Result

            self.calls.append(((tool, *args), input))
            return Result((tool, *args), 0, (SGE / "live-qstat-j-xml.mixed.xml").read_text(), "")
        return super().run(tool, args, input=input, timeout=timeout)


def run(capsys, cmd, *argv, listing=MIXED):
    b = _Backend()
    b.add(WHOLE[0], list(WHOLE[1:]), stdout=listing.read_text())
    b.add("qconf", ["-se", "global"], stdout=(SGE / "live-qconf-se-global.txt").read_text())
    for tool in ("qdel", "qhold", "qrls", "qmod"):
        b.add(tool, [], stdout="")
    backends.use(b)
    rc = dispatch(cmd, list(argv))
    out, err = capsys.readouterr()
    return (rc, out, err), [c for c, _ in b.calls]


def whole(monkeypatch, capsys, cmd, *argv, listing=MIXED):
    """The same command as it ran before: the whole listing (list_jobs without ``only``)."""
    real = jobs.list_jobs

    def full(cfg, **kw):
        kw["only"] = None
        return real(cfg, **kw)

    with monkeypatch.context() as m:
        m.setattr(jobs, "list_jobs", full)
        m.setattr(jobs, "own_name", lambda: None)  # (squeue starts the whole listing then)
        return run(capsys, cmd, *argv, listing=listing)


def listings(calls):
    return [c for c in calls if c[0] == "qstat" and c[1] == "-u"]


# ---------------------------------------------------------------------------------------------
# which questions each path asks


def test_squeue_j_of_an_own_job_lists_the_callers_jobs_only(capsys):
    out, calls = run(capsys, "squeue", "-j", "105")
    assert out[0] == 0 and "fx_run1" in out[1]
    assert calls == [MINE]


def test_squeue_j_of_another_users_job_asks_about_it_then_lists_its_owners_jobs(capsys):
    out, calls = run(capsys, "squeue", "-j", "106")
    assert out[0] == 0 and "fx_alice" in out[1]
    assert calls == [MINE, ("qstat", "-j", "106"), ("qstat", "-u", "alice", "-r", "-xml")]


def test_squeue_j_of_a_forgotten_job_lists_no_other_users_jobs(capsys):
    out, calls = run(capsys, "squeue", "-j", "999999")
    assert out == (1, "", "slurm_load_jobs error: Invalid job id specified\n")
    assert calls == [MINE, ("qstat", "-j", "999999")]


def test_scancel_acts_on_one_job_without_the_whole_queue(capsys):
    """(Issue 29: scancel asks ``qstat -j N -xml`` first, test_one_job_detail.py; where its answer
    does not make the records, a running job's or an array's on SGE 8.1.9, it lists as here.)"""
    for job in ("105", "115", "110_4"):  # running, waiting (its reason is not scancel's business), a task
        out, calls = run(capsys, "scancel", job)
        assert out == (0, "", "")
        n = job.split("_")[0]
        assert WHOLE not in calls and calls[0] == ("qstat", "-j", n, "-xml") and calls[-1][0] == "qdel"
        assert calls[1] == (MINE if job != "115" else ("qdel", "115"))  # 115 waits: qstat -j made its record
    out, calls = run(capsys, "scancel", "106")  # alice's, by root: qstat -j -xml said whose
    assert calls == [("qstat", "-j", "106", "-xml"), ("qstat", "-u", "alice", "-r", "-xml"), ("qdel", "106")]
    out, calls = run(capsys, "scancel", "-v", "999999")
    assert out[0] == 0 and "Invalid job id specified" in out[2]
    assert calls == [("qstat", "-j", "999999", "-xml"), MINE, ("qstat", "-j", "999999")]


def test_scontrol_job_control_and_show_job_without_the_whole_queue(capsys):
    out, calls = run(capsys, "scontrol", "hold", "115")  # waiting: hold shows no reason (its record: qstat -j)
    assert out[0] == 0 and calls == [("qstat", "-j", "115", "-xml"), ("qhold", "-h", "o", "115")]  # root's hold
    out, calls = run(capsys, "scontrol", "show", "job", "112")  # held: JobHeldUser is the job's own
    assert out[0] == 0 and "Reason=JobHeldUser" in out[1]
    assert listings(calls) == [MINE]


def test_a_waiting_jobs_reason_is_read_from_the_whole_queue(capsys):
    out, calls = run(capsys, "squeue", "-j", "115")
    assert "(Priority)" in out[1]
    assert listings(calls) == [MINE, WHOLE]
    out, calls = run(capsys, "scontrol", "show", "job", "111")
    assert "Reason=Resources" in out[1] and listings(calls) == [MINE, WHOLE]


def test_a_caller_without_a_passwd_entry_asks_about_the_ids_first(capsys, monkeypatch):
    monkeypatch.setattr(jobs, "own_name", lambda: None)
    out, calls = run(capsys, "scancel", "105")
    assert out == (0, "", "")
    assert calls == [("qstat", "-j", "105", "-xml"), MINE, ("qdel", "105")]  # (its owner's listing: root's)


def test_an_answer_about_the_ids_that_cannot_be_read_lists_the_whole_queue(capsys, monkeypatch, site):
    from shim.gridengine.engine import GridEngine

    monkeypatch.setattr(GridEngine, "job_owners", lambda self, ids: None)
    out, calls = run(capsys, "squeue", "-j", "106")
    assert listings(calls) == [MINE, WHOLE]
    assert out == whole(monkeypatch, capsys, "squeue", "-j", "106")[0]


def test_many_other_users_ids_are_read_from_the_whole_listing(capsys, monkeypatch):
    monkeypatch.setattr(jobs, "OWNER_LOOKUPS", 1)
    out, calls = run(capsys, "squeue", "-j", "106,999999", "-h", "-o", "%i")
    assert out == (0, "106\n", "") and calls == [MINE, WHOLE]
    out, calls = run(capsys, "squeue", "-j", "106,105", "-h", "-o", "%i")
    assert calls == [MINE, ("qstat", "-j", "106"), ("qstat", "-u", "alice", "-r", "-xml")]


def test_a_job_gone_between_the_two_questions_is_unknown_as_in_the_whole_listing(capsys, monkeypatch):
    """qstat -j still found alice's job; her listing a moment later no longer has it."""
    real = ListingReplay.run

    def later(self, tool, args, *, input=None, timeout=None):
        if list(args[:2]) == ["-u", "alice"]:
            self.calls.append(((tool, *args), input))
            from shim.proc import Result

            return Result((tool, *args), 0, EMPTY_DOC, "")
        return real(self, tool, args, input=input, timeout=timeout)

    monkeypatch.setattr(ListingReplay, "run", later)
    out, calls = run(capsys, "squeue", "-j", "106")
    assert out == (1, "", "slurm_load_jobs error: Invalid job id specified\n")


EMPTY_DOC = (SGE / "live-qstat-u-all-r-xml.empty.xml").read_text()


# ---------------------------------------------------------------------------------------------
# every byte as the whole listing gave it


IDS = sorted(owners_of(MIXED.read_text())) + [999999]
FORMS = ["110_3", "110_[1-3]", "110_9", "119_2", "105,106", "106,999999", "111,115,117", "113,112"]


@pytest.mark.parametrize("ids", [str(j) for j in IDS] + FORMS)
def test_squeue_j_prints_what_the_whole_listing_printed(capsys, monkeypatch, ids):
    for extra in ([], ["-t", "all", "-o", "%i %t %r %p %Q %C %D %R %j %u %P"], ["-u", "alice"], ["-t", "PD"]):
        fast, calls = run(capsys, "squeue", "-j", ids, *extra)
        slow, _ = whole(monkeypatch, capsys, "squeue", "-j", ids, *extra)
        assert fast == slow, (ids, extra)
        named = {int(x.split("_")[0]) for x in ids.split(",")}
        assert (WHOLE in calls) == bool(named & WAITING), calls


@pytest.mark.parametrize("argv", [["--steps", "105.0"], ["--steps", "110_1.batch,106.0"], ["-j", "110", "-r"],
                                  ["-j", "119", "-r", "-t", "all"], ["-j", "110", "-l"], ["-j", "112", "--start"],
                                  ["-j", "105", "-M", "cluster"]])
def test_other_views_of_named_jobs_print_what_the_whole_listing_printed(capsys, monkeypatch, argv):
    fast, calls = run(capsys, "squeue", *argv)
    slow, _ = whole(monkeypatch, capsys, "squeue", *argv)
    assert fast == slow and fast[0] == 0
    assert calls[0] == MINE


@pytest.mark.parametrize("job", [str(j) for j in IDS] + ["110_3", "110_9", "119_2"])
def test_scontrol_show_job_prints_what_the_whole_listing_printed(capsys, monkeypatch, job):
    fast, calls = run(capsys, "scontrol", "show", "job", job)
    slow, _ = whole(monkeypatch, capsys, "scontrol", "show", "job", job)
    assert fast == slow
    assert (WHOLE in calls) == (int(job.split("_")[0]) in WAITING)


@pytest.mark.parametrize("argv", [[str(j)] for j in IDS] + [["-v", "110_[3-4]"], ["-v", "106", "105"],
                                                               ["-s", "STOP", "105"], ["-t", "PD", "-v", "105"],
                                                               ["-v", "999999", "110_9"]])
def test_scancel_does_what_it_did_with_the_whole_listing(capsys, monkeypatch, site, argv):
    fast, calls = run(capsys, "scancel", *argv)
    acted = [c for c in calls if c[0] != "qstat"]
    events = sorted(p.name for p in site.rglob("*.cancel.json"))
    for p in site.rglob("*.cancel.json"):
        p.unlink()
    slow, slow_calls = whole(monkeypatch, capsys, "scancel", *argv)
    assert fast == slow
    assert acted == [c for c in slow_calls if c[0] != "qstat"]
    assert events == sorted(p.name for p in site.rglob("*.cancel.json"))
    assert WHOLE not in calls


# ---------------------------------------------------------------------------------------------
# the answer's reader


def test_job_owners_of_qstat_j_as_grid_engine_answers():
    found = (SGE / "live-qstat-j-text.found.txt").read_text()
    assert ops.parse_job_owners(0, found, "") == {29326: "root"}  # 29326 and a missing 99999999: rc 0
    gone = (SGE / "live-qstat-j-text.gone.stderr.txt").read_text()
    assert ops.parse_job_owners(1, "", gone) == {}
    assert ops.parse_job_owners(1, "", "error: commlib error: got select error\n") is None
    assert ops.parse_job_owners(0, "", "") is None
    from shim.gridengine import qstat

    assert qstat.listing_args(["alice", "bob"]) == ["-u", "alice,bob", "-r", "-xml"]


# ---------------------------------------------------------------------------------------------
# the quota lookup (qstat -j: the scheduler's messages) only where reasons are shown


SCHEDULER = ("qstat", "-j")


def test_a_format_without_reasons_asks_no_quota_and_lists_no_whole_queue(capsys):
    out, calls = run(capsys, "squeue", "-j", "115", "-h", "-o", "%i %t")  # Parsl's poll
    assert out == (0, "115 PD\n", "") and calls == [MINE]
    out, calls = run(capsys, "squeue", "-h", "-o", "%i %t")  # Nextflow's
    assert calls == [WHOLE]
    out, calls = run(capsys, "squeue")  # the default format shows reasons: jobs wait, so it asks
    assert calls == [WHOLE, SCHEDULER]
    out, calls = run(capsys, "squeue", "-o", "%i %S")  # a --begin job's StartTime is decided with the reasons
    assert SCHEDULER in calls


@pytest.mark.parametrize("argv,asks", [
    (["-h", "-o", "%i %t"], False), (["-o", "%i %T %P %j %u %M %D %C %l %p"], False),
    (["-O", "JobID,State,Partition"], False), (["-h", "-o", "%i %t", "-S", "-p"], False), (["-s"], False),
    (["-h", "-o", "%A %t", "-j", "115,110,106"], False),
    (["-o", "%i %r"], True), (["-O", "JobID,ReasonList"], True), (["-S", "r", "-o", "%i"], True),
    (["--start"], True), (["-o", "%all"], True), (["--json"], True),
])
def test_without_the_quota_lookup_the_output_is_the_same(capsys, monkeypatch, argv, asks):
    from shim.operations import jobqueue

    fast, calls = run(capsys, "squeue", *argv)
    with monkeypatch.context() as m:
        m.setattr(jobqueue, "shows_reasons", lambda *a: True)  # as before: the reasons always decided
        slow, slow_calls = run(capsys, "squeue", *argv)
    assert fast == slow
    assert SCHEDULER in slow_calls
    assert (SCHEDULER in calls) == asks
