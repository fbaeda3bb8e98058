"""Issue 19's work-avoiding paths keep the output as it was: ``squeue -j N`` reads the ended-job
records of N only (the other jobs' event files are not even stat'ed), and prints what the full
scan printed. Recorded qstat answers (fixtures/gridengine/sge-8.1.9), a frozen clock."""

from __future__ import annotations

import os

import pytest

from conftest import FIXTURES
from shim.gridengine import backends
from shim.operations import jobs
from shim import siteconf
from shim.store import layout, state
from shim.__main__ import dispatch
from listing_replay import ListingReplay
from shim.gridengine.replay import ReplayBackend

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
MIXED = SGE / "live-qstat-u-all-r-xml.mixed.xml"
EMPTY = SGE / "live-qstat-u-all-r-xml.empty.xml"
from shim_records import NOW  # noqa: E402
from shim_records import frozen_site  # noqa: E402
from test_squeue import squeue as _squeue  # noqa: E402  (squeue on a recorded listing)
from shim_records import event as _event  # noqa: E402
from shim_records import submit as _submit  # noqa: E402


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    yield frozen_site(monkeypatch, tmp_path)
    siteconf.reset()
    backends.use(None)


def _ended(site):
    _submit(site, 200, name="okjob")
    _event(site, 200, None, "end", exit=0, signal=0, state="COMPLETED", node="vm", start=NOW - 70, age=10)
    _submit(site, 204, name="arr", array=[1, 2, 3, 4])
    _event(site, 204, 3, "end", exit=0, signal=0, state="COMPLETED", node="vm", start=NOW - 40, age=30)
    for t in (1, 2, 4):
        _event(site, 204, t, "cancel", uid=0, user="root", was="PENDING", age=3)
    for n in range(300, 340):  # other jobs' records, which -j 200 never needs
        _submit(site, n, name=f"other{n}")
        _event(site, n, None, "end", exit=0, signal=0, state="COMPLETED", node="vm", start=NOW - 50, age=20)


def test_scan_events_of_some_jobs_yields_only_theirs(site):
    _ended(site)
    cfg = siteconf.get()
    every = sorted(state.scan_events(cfg, ("end", "cancel"), NOW - 300, NOW))
    some = sorted(state.scan_events(cfg, ("end", "cancel"), NOW - 300, NOW, {204, 999}))
    assert some == [e for e in every if e[1] == 204] and len(some) == 4


@pytest.mark.parametrize("argv", [
    ("-j", "200"), ("-j", "200", "-t", "all", "-h", "-o", "%i %T %r"), ("-j", "204", "-t", "all"),
    ("-j", "204_2", "-t", "all", "-o", "%i %t %r"), ("-j", "200,204", "-t", "all", "-l"), ("-j", "206"),
    ("-j", "110", "-t", "all"), ("-j", "110_40,200", "-t", "all", "-o", "%i %t"),
])
def test_squeue_j_prints_what_the_full_scan_printed(capsys, site, monkeypatch, argv):
    _ended(site)
    fixture = MIXED if "110" in " ".join(argv) else EMPTY
    fast = _squeue(capsys, fixture, *argv)
    real = jobs.list_jobs

    def full(cfg, **kw):
        kw["only"] = None  # the scan of every job's records, as before
        return real(cfg, **kw)

    monkeypatch.setattr(jobs, "list_jobs", full)
    assert _squeue(capsys, fixture, *argv) == fast
    assert fast[0] in (0, 1)


def test_squeue_j_reads_no_other_jobs_records(capsys, site, monkeypatch):
    _ended(site)
    seen = []
    real = jobs.recent_events

    def spy(cfg, now, max_age=None, only=None, **kw):
        out = real(cfg, now, max_age, only, **kw)
        seen.append(sorted(out))
        return out

    monkeypatch.setattr(jobs, "recent_events", spy)
    rc, out, err = _squeue(capsys, EMPTY, "-j", "200", "-t", "all", "-h", "-o", "%i %T")
    assert (rc, out, err) == (0, "200 COMPLETED\n", "")
    assert seen == [[200]]
    _squeue(capsys, EMPTY, "-t", "all", "-h")
    assert len(seen[-1]) == 42  # without -j: every recent job (200, 204 and the 40 others)


# ---------------------------------------------------------------------------------------------
# shim.plain.record: the classes dataclasses made, without dataclasses


def test_plain_records_behave_as_the_dataclasses_they_replace():
    import dataclasses

    from shim import plain

    def pair(frozen):
        @dataclasses.dataclass(frozen=frozen)
        class D:
            a: int
            b: str = "x"
            c: list = dataclasses.field(default_factory=list)

        @plain.record(frozen=frozen)
        class P:
            a: int
            b: str = "x"
            c: list = plain.factory(list)

        return D, P

    for frozen in (False, True):
        D, P = pair(frozen)
        for args, kw in [((1,), {}), ((1, "y"), {}), ((), {"a": 2, "c": [3]}), ((1,), {"b": "z"})]:
            d, p = D(*args, **kw), P(*args, **kw)
            assert [getattr(p, n) for n in "abc"] == [getattr(d, n) for n in "abc"]
            assert repr(p).replace(".P(", ".D(") == repr(d)
            assert p == P(*args, **kw) and p != P(99) and (p == d) is False
            assert P.b == D.b == "x" and P(1).c is not P(1).c  # class default kept, a fresh list each
            if frozen:
                object.__setattr__(p, "c", tuple(p.c))  # (a list field is unhashable in both)
                q = P(*args, **kw)
                object.__setattr__(q, "c", tuple(q.c))
                assert hash(p) == hash(q)
                with pytest.raises(AttributeError):
                    p.a = 5
            else:
                assert P.__hash__ is None
                p.a = 5
                assert p.a == 5
            assert plain.replace(p, b="q").b == "q" and plain.replace(p, b="q").a == p.a
        for bad_args, bad_kw in [((), {}), ((1, "y", [], 4), {}), ((1,), {"a": 1}), ((1,), {"nope": 1})]:
            with pytest.raises(TypeError):
                D(*bad_args, **bad_kw)
            with pytest.raises(TypeError):
                P(*bad_args, **bad_kw)


def test_quota_records_are_plain_and_compare_as_before():
    from shim.gridengine import policy

    h = policy.QuotaHold(5, "max_slots", "1", "bob/////")
    assert h == policy.QuotaHold(job=5, quota_set="max_slots", rule="1", limit="bob/////", requested=())
    assert hash(h) == hash(policy.QuotaHold(5, "max_slots", "1", "bob/////")) and h.requested == ()
    s = policy.QuotaSet("q", True)
    assert s.rules == () and s.rule("1") is None
    with pytest.raises(AttributeError):
        h.job = 6


# ---------------------------------------------------------------------------------------------
# scontrol show job N: the ended records of N only


class _DetailBackend(ListingReplay):
    """Every ``qstat -j <ids> -xml`` answered with the recorded detail document."""

    def run(self, tool, args, *, input=None, timeout=None):
        if tool == "qstat" and args and args[0] == "-j" and "-xml" in args:
            from shim.proc import Result

            self.calls.append(((tool, *args), input))
            return Result((tool, *args), 0, (SGE / "live-qstat-j-xml.mixed.xml").read_text(), "")
        return super().run(tool, args, input=input, timeout=timeout)


def _scontrol(capsys, fixture, *argv):
    b = _DetailBackend()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=fixture.read_text())
    backends.use(b)
    rc = dispatch("scontrol", list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def spy_on_recent_events(monkeypatch) -> list:
    """jobs.recent_events, recording the ``only`` of each call (None: every job's records)."""
    seen = []
    real_events = jobs.recent_events

    def spy(cfg, now, max_age=None, only=None, **kw):
        seen.append(only)
        return real_events(cfg, now, max_age, only, **kw)

    monkeypatch.setattr(jobs, "recent_events", spy)
    return seen


@pytest.mark.parametrize("argv", [
    ("show", "job", "200"), ("show", "job", "204"), ("show", "job", "204_3"), ("show", "job", "204_9"),
    ("show", "job", "206"), ("show", "job", "x1"), ("-o", "show", "job", "200"), ("show", "job", "110"),
    ("show", "job", "110_40"),
])
def test_scontrol_show_job_prints_what_the_full_scan_printed(capsys, site, monkeypatch, argv):
    _ended(site)
    fixture = MIXED if "110" in " ".join(argv) else EMPTY
    seen = spy_on_recent_events(monkeypatch)
    fast = _scontrol(capsys, fixture, *argv)
    real = jobs.list_jobs

    def full(cfg, **kw):
        kw["only"] = None
        return real(cfg, **kw)

    monkeypatch.setattr(jobs, "list_jobs", full)
    assert _scontrol(capsys, fixture, *argv) == fast
    job = argv[-1].split("_")[0]
    assert seen[0] == ({int(job)} if job.isdigit() else None) and seen[1] is None


# ---------------------------------------------------------------------------------------------
# scancel N: the ended records of the ids given only


@pytest.mark.parametrize("argv", [("200",), ("204_3",), ("206",), ("200", "204"), ("-v", "204_2"), ("-v", "200", "206"),
                                  ("-s", "USR1", "200")])
def test_scancel_reads_the_given_ids_records_only(capsys, site, monkeypatch, argv):
    _ended(site)
    seen = spy_on_recent_events(monkeypatch)

    def run():
        b = ListingReplay()
        b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=EMPTY.read_text())
        backends.use(b)
        rc = dispatch("scancel", list(argv))
        out, err = capsys.readouterr()
        return rc, out, err, [c for c, _ in b.calls if c[0] != "qstat"]

    fast = run()
    real = jobs.list_jobs

    def full(cfg, **kw):
        kw["only"] = None
        return real(cfg, **kw)

    monkeypatch.setattr(jobs, "list_jobs", full)
    assert run() == fast
    # an ended job's records only where the message needs them (-v: "already completing or completed")
    needs = "-v" in argv or "-s" in argv  # (-s: every error counts)
    assert seen == ([{int(a.split("_")[0]) for a in argv if a[0].isdigit()}, None] if needs else [])
    assert fast[3] == []  # nothing to cancel: every id is ended or forgotten


# ---------------------------------------------------------------------------------------------
# state.atomic_write without tempfile


def test_atomic_write_replaces_with_a_fresh_exclusive_name(tmp_path, monkeypatch):
    tmp_path = tmp_path / "d"
    tmp_path.mkdir()
    target = tmp_path / "rec.json"
    target.write_text("old")
    state.atomic_write(str(target), "new", 0o640)
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.json"]  # no temporary left
    # a name already taken (planted, or a link) is never opened: another name is made
    names = iter(["aaaaaaaaaaaa", "aaaaaaaaaaaa", "bbbbbbbbbbbb"])
    monkeypatch.setattr(os, "urandom", lambda n: bytes.fromhex(next(names)))
    (tmp_path / ".rec.json.aaaaaaaaaaaa.tmp").symlink_to(tmp_path / "elsewhere")
    state.atomic_write(str(target), "newer")
    assert target.read_text() == "newer" and not (tmp_path / "elsewhere").exists()
    assert (tmp_path / ".rec.json.aaaaaaaaaaaa.tmp").is_symlink()
    # a failed write removes its temporary and leaves the old content
    monkeypatch.setattr(os, "urandom", lambda n: b"\x01" * n)
    with pytest.raises(TypeError):
        state.atomic_write(str(target), b"bytes are no text")  # type: ignore[arg-type]
    assert target.read_text() == "newer" and not (tmp_path / ".rec.json.010101010101.tmp").exists()


# ---------------------------------------------------------------------------------------------
# S5: a job Grid Engine lists whole (no array) needs none of the event listings


def _listed_event_dirs(monkeypatch):
    """The directories of events listed (os.listdir, os.scandir) while the spy is on: the old
    flat events/, an id shard (records/events/<shard>), a time bucket or day (records/events/t/...)."""
    listed = []
    real_listdir, real_scandir = os.listdir, os.scandir

    def listdir(p="."):
        if str(p).endswith("/events") or "/records/events/" in str(p):
            listed.append(str(p))
        return real_listdir(p)

    def scandir(p="."):
        if str(p).endswith("/events") or "/records/events/" in str(p):
            listed.append(str(p))
        return real_scandir(p)

    monkeypatch.setattr(os, "listdir", listdir)
    monkeypatch.setattr(os, "scandir", scandir)
    return listed


def _whole_listing(monkeypatch):
    real = jobs.list_jobs

    def full(cfg, **kw):
        kw["only"] = None
        return real(cfg, **kw)

    monkeypatch.setattr(jobs, "list_jobs", full)


def _run(capsys, cmd, *argv):
    b = ListingReplay()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=MIXED.read_text())
    for tool in ("qdel", "qhold", "qrls", "qmod"):
        b.add(tool, [], stdout="")
    backends.use(b)
    rc = dispatch(cmd, list(argv))
    out, err = capsys.readouterr()
    return rc, out, err, [c for c, _ in b.calls if c[0] != "qstat"]


@pytest.mark.parametrize("cmd,argv", [
    ("squeue", ("-j", "105", "-t", "all", "-o", "%i %T %t %r")), ("squeue", ("-j", "105,112", "-t", "all")),
    ("squeue", ("-j", "112", "-t", "all", "-l")), ("scontrol", ("show", "job", "105")),
    ("scontrol", ("show", "job", "112")), ("scancel", ("-v", "112")), ("scancel", ("105", "112")),
])
def test_a_job_grid_engine_lists_whole_lists_no_events(capsys, site, monkeypatch, cmd, argv):
    """Ended records of other jobs, an end event of a listed job (Grid Engine's word wins: "dr"),
    a STOP of a running one: the output is the full scan's, and no events/ is listed at all."""
    _ended(site)
    _event(site, 112, None, "end", exit=0, signal=0, state="COMPLETED", node="vm", start=NOW - 70, age=10)
    _event(site, 105, None, "stop", age=5)
    with monkeypatch.context() as m:
        listed = _listed_event_dirs(m)
        fast = _run(capsys, cmd, *argv)
    assert listed == []

    def cancels():  # scancel's cancel events of the named jobs (204's are _ended's)
        return sorted(p.name for p in site.rglob("*.cancel.json") if p.name.startswith(("105.", "112.")))

    events = cancels()
    for p in site.rglob("*.cancel.json"):
        if p.name in events:
            p.unlink()
    _whole_listing(monkeypatch)
    assert _run(capsys, cmd, *argv) == fast
    assert events == cancels() and (events != []) == (cmd == "scancel")
    if argv == ("-j", "105", "-t", "all", "-o", "%i %T %t %r"):
        assert fast[1].splitlines()[1].split()[1] == "STOPPED"  # the stop event was found by its name


@pytest.mark.parametrize("argv", [("-j", "110", "-t", "all"), ("-j", "110_3,112", "-t", "all", "-o", "%i %t %r")])
def test_an_array_grid_engine_lists_lists_its_owners_and_roots_events_only(capsys, site, monkeypatch, argv):
    _ended(site)
    _event(site, 110, 40, "end", exit=0, signal=0, state="COMPLETED", node="vm", start=NOW - 70, age=10)
    other = site / "users" / "4242" / "events"
    other.mkdir(parents=True)
    os.chown(other.parent, 4242, 4242)
    os.chown(other, 4242, 4242)
    with monkeypatch.context() as m:
        listed = _listed_event_dirs(m)
        fast = _run(capsys, "squeue", *argv)
    assert listed == [str(site / "users" / "0" / "records" / "events" / layout.shard(110))]  # root's id shard of 110: once
    _whole_listing(monkeypatch)
    assert _run(capsys, "squeue", *argv) == fast
    assert ("110_40 " in fast[1]) == (argv[1] == "110")  # the ended task, from root's events


def test_an_id_grid_engine_does_not_report_lists_every_users_events_once(capsys, site, monkeypatch):
    _ended(site)
    other = site / "users" / "4242" / "events"
    other.mkdir(parents=True)
    os.chown(other.parent, 4242, 4242)
    os.chown(other, 4242, 4242)
    with monkeypatch.context() as m:
        listed = _listed_event_dirs(m)
        fast = _squeue(capsys, EMPTY, "-j", "204", "-t", "all")
    assert sorted(listed) == sorted({str(site / "users" / "0" / "records" / "events" / layout.shard(204)), str(other),
                                     str(site / "users" / "4242" / "records" / "events" / layout.shard(204))})  # once
    _whole_listing(monkeypatch)
    assert _squeue(capsys, EMPTY, "-j", "204", "-t", "all") == fast
    assert "204_3" in fast[1]


def test_the_named_parse_of_event_names_is_the_whole_parse_of_those_jobs():
    from shim.store.records import parse_event_names

    names = ["12.x.end.json", "012.x.cancel.json", "12.07.end.json", "120.x.end.json", "1.x.end.json",
             "12.x.end.json.tmp", "junk", "12.x.END.json", "3.4.cancel.json"]
    whole = parse_event_names(names)
    for jobs_ in ({12}, {1, 3}, {120, 999}, set()):
        assert parse_event_names(names, jobs_) == {j: v for j, v in whole.items() if j in jobs_}


def test_sacct_j_reads_the_named_jobs_events_as_the_whole_listing_did(site):
    """accounting.events for sacct -j: the named jobs' entries are those of the whole directory's
    scan (state.named_events picks them by name), with and without the time window."""
    from shim.operations.accounting.events import _scan_events

    _ended(site)
    _event(site, 204, 2, "start", node="vm", age=200)
    d = str(site / "users" / str(os.getuid()))
    for since in (None, NOW - 100):
        every: dict = {}
        _scan_events(d, 0, None, since, every)
        for named in ({204}, {200, 999}, {300, 204}):
            some: dict = {}
            _scan_events(d, 0, named, since, some)
            assert some == {j: v for j, v in every.items() if j in named}
            if 204 in named:  # the old start event is outside the window, but its job's end is in it: read by id
                assert (2, "start") in some[204]


# ---------------------------------------------------------------------------------------------
# S5: squeue -u U / --me lists U's jobs, the whole queue only where one of them waits


def _squeue_calls(capsys, monkeypatch, *argv, me="root"):
    b = ListingReplay()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=MIXED.read_text())
    b.add("qconf", ["-se", "global"], stdout=(SGE / "live-qconf-se-global.txt").read_text())
    backends.use(b)
    monkeypatch.setattr("shim.slurm.users.current", lambda: me)
    rc = dispatch("squeue", list(argv))
    out, err = capsys.readouterr()
    return (rc, out, err), [c for c, _ in b.calls if c[0] == "qstat"]


@pytest.mark.parametrize("argv,listings", [
    (("-u", "alice"), [("qstat", "-u", "alice", "-r", "-xml")]),
    (("-u", "alice", "-o", "%i %t %r %u"), [("qstat", "-u", "alice", "-r", "-xml")]),
    (("--me", "-t", "all", "-o", "%i %t %u"), [("qstat", "-u", "alice", "-r", "-xml")]),
    (("-u", "alice,root", "-h", "-o", "%i %t"), [("qstat", "-u", "alice,root", "-r", "-xml")]),  # no reason shown
    (("-u", "root",), [("qstat", "-u", "root", "-r", "-xml"), ("qstat", "-u", "*", "-r", "-xml")]),  # 110 waits
    (("-u", "root", "-l"), [("qstat", "-u", "root", "-r", "-xml"), ("qstat", "-u", "*", "-r", "-xml")]),
    (("-u", "nobody,alice", "-t", "R"), [("qstat", "-u", "alice,nobody", "-r", "-xml")]),
    (("-u", "alice", "--json"), [("qstat", "-u", "*", "-r", "-xml")]),
])
def test_squeue_u_lists_those_users_jobs_and_prints_what_the_whole_listing_printed(capsys, monkeypatch, argv,
                                                                                    listings):
    fast, calls = _squeue_calls(capsys, monkeypatch, *argv, me="alice")
    assert [c for c in calls if c[1] == "-u"] == listings
    real = jobs.list_jobs

    def whole(cfg, **kw):
        kw["users"] = None
        if kw.get("started") is not None:
            kw["started"].close()
            kw["started"] = None
        return real(cfg, **kw)

    monkeypatch.setattr(jobs, "list_jobs", whole)
    slow, slow_calls = _squeue_calls(capsys, monkeypatch, *argv, me="alice")
    assert ("qstat", "-u", "*", "-r", "-xml") in slow_calls
    assert fast == slow and fast[0] == 0 and fast[1]


# ---------------------------------------------------------------------------------------------
# S5: scontrol show job N starts Grid Engine's detail of a job the shim did not submit beside the listing


def test_start_details_only_for_ids_without_any_users_submit_record(site):
    cfg = siteconf.get()
    b = ReplayBackend()
    qy = jobs.start_details(cfg, {112}, b)
    assert qy is not None and qy.args == ["-j", "112", "-xml"]
    _submit(site, 112, name="mine")
    assert jobs.start_details(cfg, {112}, b) is None  # a shim job: its record has the detail
    assert jobs.start_details(cfg, set(), b) is None


@pytest.mark.parametrize("job", ["105", "106", "112", "110", "110_3", "119_2", "999999"])
def test_scontrol_show_job_with_the_detail_started_early_prints_the_same(capsys, site, monkeypatch, job):
    class Detail(ListingReplay):
        def run(self, tool, args, *, input=None, timeout=None):
            if tool == "qstat" and args[0] == "-j" and "-xml" in args:
                from shim.proc import Result

                self.calls.append(((tool, *args), input))
                return Result((tool, *args), 0, (SGE / "live-qstat-j-xml.mixed.xml").read_text(), "")
            return super().run(tool, args, input=input, timeout=timeout)

    def run():
        b = Detail()
        b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=MIXED.read_text())
        b.add("qconf", ["-se", "global"], stdout=(SGE / "live-qconf-se-global.txt").read_text())
        b.add("qrstat", [], stdout="")
        backends.use(b)
        rc = dispatch("scontrol", ["show", "job", job])
        out, err = capsys.readouterr()
        return (rc, out, err), [c for c, _ in b.calls if c[:2] == ("qstat", "-j") and "-xml" in c]

    monkeypatch.setattr(jobs, "own_name", lambda: "root")
    early, asked = run()
    started = []
    real = jobs.start_details
    monkeypatch.setattr(jobs, "start_details", lambda *a, **k: started.append(a) or None)
    late, asked_late = run()
    assert early == late and len(asked) <= 1
    # (a job Grid Engine does not know: the early detail, read first for a held job's row alone
    # (jobs.held_rows, test_held_job_direct.py), is asked once; without it, nothing is)
    assert asked == asked_late or (job == "999999" and asked_late == [] and len(asked) == 1)
    assert started and real(siteconf.get(), {int(job.split("_")[0])}) is not None
