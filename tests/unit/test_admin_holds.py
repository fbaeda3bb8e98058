"""Root's ``scontrol hold`` is an admin hold, as real Slurm 22.05.8, 24.11.5 and 26.05.5 make it
(fixtures/slurm-*/oracle-hold.txt): the listing says JobHeldAdmin with priority 0, the job's owner
may hold or uhold it but not release it ("Access/permission denied for job N", exit 1), root's
uhold turns it into a user hold and root's release lifts either. On Grid Engine it is an operator
hold (``qhold -h o``), and root's own record (store/holds.py) tells the listing which holds are
root's; that record is believed only from root's verified directory."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from conftest import FIXTURES, release_setter, use_site_config
from listing_replay import ListingReplay
from shim import siteconf
from shim.__main__ import dispatch
from shim.gridengine import backends
from shim.store import holds, state
from shim.slurm.model import JobRecord

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
RELEASES = ("22.05", "24.11", "26.05")
NOW = 1796030400.0  # 2026-12-01 (any fixed time: nothing here reads the clock's value)
OWNER = 4321  # the held job's owner in these tests: a uid with no passwd entry (a name of digits is that uid)
LISTING = (SGE / "live-qstat-u-all-r-xml.mixed.xml").read_text()


def oracle(release: str) -> dict[str, list[str]]:
    """The oracle's answer per '### X:' section (the output's lines, the script left out)."""
    text = (FIXTURES / f"slurm-{release}" / "oracle-hold.txt").read_text()
    out: dict[str, list[str]] = {}
    key = None
    for line in text.split("## output\n", 1)[1].splitlines():
        if line.startswith("### "):
            key = line[4:].split(":", 1)[0]
            out[key] = []
        elif key:
            out[key].append(line)
    return out


def owned_by(owner: int, job: int = 112) -> str:
    """The recorded listing, with job ``job`` (fx_held, hqw) owned by uid ``owner``."""
    return re.sub(rf"(<JB_job_number>{job}</JB_job_number>.*?<JB_owner>)root(</JB_owner>)", rf"\g<1>{owner}\2",
                  LISTING, count=1, flags=re.S)


@pytest.fixture
def site(monkeypatch, tmp_path):
    """set(release): the unit-test site on that release; yields (set, the state directory)."""
    d = use_site_config(monkeypatch, tmp_path)
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    monkeypatch.setattr(time, "time", lambda: NOW)
    conf = tmp_path / "config.toml"

    set_release = release_setter(conf)

    yield set_release, d
    siteconf.reset()
    backends.use(None)


def run(capsys, monkeypatch, uid: int, prog: str, *argv: str, listing: str = LISTING) -> tuple[int, str, str, list]:
    """(exit code, stdout, stderr, Grid Engine's action calls) of a command run as ``uid``."""
    b = ListingReplay()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=listing)
    b.add("qhost", ["-q", "-xml"], stdout=(SGE / "qhost-q-xml-debug-gpu.xml").read_text())
    b.add("qconf", ["-se", "global"], stdout=(SGE / "live-qconf-se-global.txt").read_text())
    for tool in ("qhold", "qrls"):
        b.add(tool, [], stdout="")
    backends.use(b)
    monkeypatch.setattr(os, "getuid", lambda: uid)
    try:
        rc = dispatch(prog, list(argv))
    finally:
        monkeypatch.setattr(os, "getuid", lambda: 0)
    out, err = capsys.readouterr()
    return rc, out, err, [list(k) for k, _ in b.calls if k[0] in ("qhold", "qrls")]


def shown(capsys, monkeypatch, uid: int, listing: str = LISTING) -> tuple[str, list[str]]:
    """squeue's '%T|%r|%R|%Q' line of job 112, and scontrol show job 112's Priority and JobState lines."""
    rc, out, err, _ = run(capsys, monkeypatch, uid, "squeue", "-h", "-j", "112", "-o", "%T|%r|%R|%Q", listing=listing)
    assert (rc, err) == (0, "")
    rc, job, err, _ = run(capsys, monkeypatch, uid, "scontrol", "show", "job", "112", listing=listing)
    assert (rc, err) == (0, "")
    lines = [ln for ln in job.splitlines() if re.match(r"   (Priority|JobState)=", ln)]
    return out.rstrip("\n"), lines


def fields(lines: list[str]) -> list[str]:
    """The oracle's or the shim's Priority and JobState lines, to the Nice=/Dependency= they share."""
    return [" ".join(ln.split()[:2]) if "Priority=" in ln else ln for ln in lines]


@pytest.mark.parametrize("release", RELEASES)
def test_roots_hold_lists_as_jobheldadmin_at_priority_0(release, site, capsys, monkeypatch):
    set_release, d = site
    set_release(release)
    want = oracle(release)["A"]  # rc=0, squeue's line, scontrol's Priority and JobState lines
    listing = owned_by(OWNER)
    rc, out, err, calls = run(capsys, monkeypatch, 0, "scontrol", "hold", "112", listing=listing)
    assert [f"rc={rc}", out + err] == [want[0], ""] and calls == [["qhold", "-h", "o", "112"]]
    assert holds.read(str(d)) == {112: None}
    line, job = shown(capsys, monkeypatch, OWNER, listing)
    assert line == want[1] == "PENDING|JobHeldAdmin|(JobHeldAdmin)|0"
    assert fields(job) == fields(want[2:4]) == ["Priority=0 Nice=0", "   JobState=PENDING Reason=JobHeldAdmin Dependency=(null)"]


@pytest.mark.parametrize("release", RELEASES)
def test_a_users_own_hold_stays_jobhelduser(release, site, capsys, monkeypatch):
    set_release, d = site
    set_release(release)
    want = oracle(release)["U"]
    listing = owned_by(OWNER)
    rc, out, err, calls = run(capsys, monkeypatch, OWNER, "scontrol", "hold", "112", listing=listing)
    assert (f"rc={rc}", out + err, calls) == (want[0], "", [["qhold", "112"]])
    rc, out, err, calls = run(capsys, monkeypatch, OWNER, "scontrol", "uhold", "112", listing=listing)
    assert (rc, out + err, calls) == (0, "", [["qhold", "112"]])
    assert holds.read(str(d)) == {}
    line, job = shown(capsys, monkeypatch, OWNER, listing)
    assert line == want[1] == "PENDING|JobHeldUser|(JobHeldUser)|0"
    assert fields(job) == fields(want[2:4])
    rc, out, err, calls = run(capsys, monkeypatch, OWNER, "scontrol", "release", "112", listing=listing)
    assert (f"rc={rc}", out + err, calls) == (want[4], "", [["qrls", "112"]])


@pytest.mark.parametrize("release", RELEASES)
def test_the_owner_may_not_release_roots_hold(release, site, capsys, monkeypatch):
    set_release, d = site
    set_release(release)
    answers = oracle(release)
    listing = owned_by(OWNER)
    run(capsys, monkeypatch, 0, "scontrol", "hold", "112", listing=listing)
    refused = answers["A2"]  # "Access/permission denied for job N", slurm_suspend error (26.05: no space), rc=1
    job = re.search(r"for job (\d+)", refused[0]).group(1)
    rc, out, err, calls = run(capsys, monkeypatch, OWNER, "scontrol", "release", "112", listing=listing)
    assert (out, err.replace("112", job), f"rc={rc}") == ("", "\n".join(refused[:2]) + "\n", refused[2])
    assert calls == []  # (Grid Engine's qrls would leave the operator hold and say nothing)
    # also by name, and with a job of the owner's own that root did not hold beside it
    rc, out, err, calls = run(capsys, monkeypatch, OWNER, "scontrol", "release", "Name=fx_held", listing=listing)
    assert (rc, err.replace("112", job)) == (1, "\n".join(refused[:2]) + "\n") and calls == []
    # the owner's hold and uhold of it succeed and leave it root's (section A3)
    assert answers["A3"][:2] == ["rc=0", "rc=0"]
    for verb in ("uhold", "hold"):
        assert run(capsys, monkeypatch, OWNER, "scontrol", verb, "112", listing=listing) == (0, "", "", [["qhold", "112"]])
    assert holds.read(str(d)) == {112: None}
    assert shown(capsys, monkeypatch, OWNER, listing)[0] == answers["A3"][2] == "PENDING|JobHeldAdmin|(JobHeldAdmin)|0"


@pytest.mark.parametrize("release", RELEASES)
def test_roots_release_and_uhold_end_roots_hold(release, site, capsys, monkeypatch):
    set_release, d = site
    set_release(release)
    answers = oracle(release)
    listing = owned_by(OWNER)
    run(capsys, monkeypatch, 0, "scontrol", "hold", "112", listing=listing)
    # root's release: both holds lifted (A4: rc=0, Reason=None)
    rc, out, err, calls = run(capsys, monkeypatch, 0, "scontrol", "release", "112", listing=listing)
    assert (f"rc={rc}", out + err, calls) == (answers["A4"][0], "", [["qrls", "-h", "uo", "112"]])
    assert holds.read(str(d)) == {}
    # root's uhold of a job root held: a user hold in its place (X: JobHeldUser), which its owner may release (W)
    run(capsys, monkeypatch, 0, "scontrol", "hold", "112", listing=listing)
    rc, out, err, calls = run(capsys, monkeypatch, 0, "scontrol", "uhold", "112", listing=listing)
    assert (rc, out + err, calls) == (0, "", [["qrls", "-h", "o", "112"], ["qhold", "112"]])
    assert holds.read(str(d)) == {}
    assert shown(capsys, monkeypatch, OWNER, listing)[0] == answers["X"][1] == "PENDING|JobHeldUser|(JobHeldUser)|0"
    rc, out, err, calls = run(capsys, monkeypatch, OWNER, "scontrol", "release", "112", listing=listing)
    assert (rc, out + err, calls) == (0, "", [["qrls", "112"]]) and answers["W"][4] == "rc=0"
    # root's uhold of a job root did not hold: the user hold alone
    assert run(capsys, monkeypatch, 0, "scontrol", "uhold", "112", listing=listing)[3] == [["qhold", "112"]]


def test_roots_hold_of_array_tasks_marks_those_tasks(site, capsys, monkeypatch):
    set_release, d = site
    set_release("22.05")
    rc, out, err, calls = run(capsys, monkeypatch, 0, "scontrol", "hold", "119_3")
    assert (rc, calls) == (0, [["qhold", "-h", "o", "119.3"]])
    assert holds.read(str(d)) == {119: frozenset({3})}
    rc, out, err, _ = run(capsys, monkeypatch, 0, "squeue", "-h", "-r", "-j", "119", "-t", "PD", "-o", "%i|%r")
    assert out.splitlines() == ["119_1|JobHeldUser", "119_3|JobHeldAdmin", "119_4|JobHeldUser"]
    rc, out, err, _ = run(capsys, monkeypatch, 0, "squeue", "-h", "-j", "119", "-t", "PD", "-o", "%i|%r|%Q")
    assert sorted(out.splitlines()) == ["119_3|JobHeldAdmin|0", "119_[1,4]|JobHeldUser|0"]  # (Slurm splits a held task off)
    run(capsys, monkeypatch, 0, "scontrol", "release", "119_3")
    assert holds.read(str(d)) == {}


# ---------------------------------------------------------------------------------------------
# the record: believed from root's own directory only, read only when a held job is listed, bounded


def write_raw(d, text: str | bytes, name: str = holds.NAME) -> str:
    sub = os.path.join(str(d), "users", "0", holds.SUB)
    os.makedirs(sub, mode=0o755, exist_ok=True)
    p = os.path.join(sub, name)
    with open(p, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())
    return p


def test_the_record_is_believed_from_roots_own_directory_only(site, tmp_path):
    _set, d = site
    p = write_raw(d, json.dumps({"jobs": {"112": None, "119": [1, 3]}}))
    assert holds.read(str(d)) == {112: None, 119: frozenset({1, 3})}
    os.chown(p, OWNER, OWNER)  # not root's file
    assert holds.read(str(d)) == {}
    os.chown(p, 0, 0)
    os.chmod(os.path.dirname(p), 0o777)  # a directory others may write to
    assert holds.read(str(d)) == {}
    os.chmod(os.path.dirname(p), 0o755)
    os.chown(os.path.dirname(p), OWNER, OWNER)  # not root's directory
    assert holds.read(str(d)) == {}
    os.chown(os.path.dirname(p), 0, 0)
    real = tmp_path / "elsewhere.json"
    real.write_text(json.dumps({"jobs": {"5": None}}))
    os.unlink(p)
    os.symlink(real, p)  # a link: never followed
    assert holds.read(str(d)) == {}
    os.unlink(p)
    write_raw(d, b" " * (holds.LIMIT + 1))  # too large
    assert holds.read(str(d)) == {}
    os.unlink(p)
    os.mkfifo(p)  # no regular file: never blocks
    assert holds.read(str(d)) == {}
    os.unlink(p)
    assert holds.read(str(d)) == {}  # absent


def test_a_record_not_of_its_form_names_nothing_it_cannot_read():
    assert holds.parse(b"[1, 2]") == {} and holds.parse(b"\xff") == {} and holds.parse(b"{") == {}
    assert holds.parse(json.dumps({"jobs": {"x": None, "12": "all", "13": [1, -2], "14": [True], "15": [2],
                                            "1" * 13: None, "16": None}}).encode()) == {15: frozenset({2}), 16: None}


def record(job: int, reason: str, task: int | None = None, state_: str = "PENDING") -> JobRecord:
    r = JobRecord(job_id=job, name="x", user="root", partition="debug", state=state_)
    r.reason, r.array_task = reason, task
    return r


def test_the_listing_reads_the_record_only_when_a_held_job_is_listed(site, monkeypatch):
    _set, d = site
    asked: list[str] = []
    monkeypatch.setattr(holds, "read_all", lambda cfg: asked.append(cfg) or ({7: None, 8: frozenset({2})}, {}))
    waiting = [record(5, "Priority"), record(6, "None", state_="RUNNING")]
    assert holds.mark(str(d), waiting) == 0 and asked == []
    listed = [record(7, "JobHeldUser"), record(8, "JobHeldUser", 1), record(8, "JobHeldUser", 2), record(9, "JobHeldUser"),
              record(7, "Dependency")]
    assert holds.mark(str(d), waiting + listed) == 2 and len(asked) == 1
    assert [r.reason for r in listed] == ["JobHeldAdmin", "JobHeldUser", "JobHeldAdmin", "JobHeldUser", "Dependency"]


def test_a_reused_job_id_is_not_the_job_root_held(site, monkeypatch):
    """Root held job 7 (submitted at T), which ended unreleased; Grid Engine later gives id 7 to
    another job, whose owner holds it: JobHeldUser, and its owner's release goes ahead. Root's
    new hold of that job replaces the old entry with its own submission time."""
    from datetime import datetime, timezone

    _set, d = site
    monkeypatch.setattr(os, "getuid", lambda: 0)
    assert holds.update(str(d), [(7, None)], [], None, {7: 1000.0})
    assert holds.read_all(str(d)) == ({7: None}, {7: 1000.0})
    old, new = record(7, "JobHeldUser"), record(7, "JobHeldUser")
    old.submit_time = datetime.fromtimestamp(1000.0, timezone.utc)
    new.submit_time = datetime.fromtimestamp(2_000_000.0, timezone.utc)
    assert holds.mark(str(d), [new]) == 0 and new.reason == "JobHeldUser"
    assert holds.mark(str(d), [old]) == 1 and old.reason == "JobHeldAdmin"
    assert holds.current({7: None}, {7: 1000.0}, [new]) == {} and holds.current({7: None}, {}, [new]) == {7: None}
    assert holds.update(str(d), [(7, [3])], [], None, {7: 2_000_000.0})
    assert holds.read_all(str(d)) == ({7: frozenset({3})}, {7: 2_000_000.0})


def test_the_record_is_written_by_root_alone_and_bounded(site, monkeypatch):
    _set, d = site
    monkeypatch.setattr(os, "getuid", lambda: OWNER)
    assert holds.update(str(d), [(5, None)], []) is False and holds.read(str(d)) == {}
    monkeypatch.setattr(os, "getuid", lambda: 0)
    monkeypatch.setattr(holds, "PRUNE_AT", 3)
    monkeypatch.setattr(holds, "MAX_JOBS", 4)
    asked: list[list[int]] = []

    def alive(ids: list[int]) -> set[int]:
        asked.append(ids)
        return {i for i in ids if i % 2}

    assert holds.update(str(d), [(1, None), (2, None), (3, [4])], [], alive) and asked == []
    assert holds.read(str(d)) == {1: None, 2: None, 3: frozenset({4})}
    assert holds.update(str(d), [(4, None), (5, None)], [(1, None)], alive)  # 4 jobs > 3: the gone ones dropped
    assert asked == [[2, 3, 4, 5]] and holds.read(str(d)) == {3: frozenset({4}), 5: None}
    assert holds.update(str(d), [(i, None) for i in range(11, 21, 2)], [])  # all alive, more than 4: the newest kept
    assert sorted(holds.read(str(d))) == [13, 15, 17, 19]
    p = os.path.join(str(d), "users", "0", holds.SUB, holds.NAME)
    st = os.lstat(p)
    assert (st.st_uid, oct(st.st_mode & 0o777)) == (0, "0o644")
    assert [n for n in os.listdir(os.path.dirname(p)) if n != holds.NAME] == []  # (atomic: no temporary left)
    assert state.user_dir(str(d), 0) == os.path.dirname(os.path.dirname(p))


def test_release_of_some_tasks_keeps_the_others():
    h: holds.Holds = {}
    holds.change(h, 7, [1, 2], True)
    holds.change(h, 7, [3], True)
    assert h == {7: frozenset({1, 2, 3})}
    holds.change(h, 7, [1, 2], False)
    assert h == {7: frozenset({3})} and holds.held(h, 7, [3]) and not holds.held(h, 7, [1]) and not holds.held(h, 7, None)
    holds.change(h, 7, None, True)
    assert h == {7: None} and holds.held(h, 7, None) and holds.held(h, 7, [9])
    holds.change(h, 7, None, False)
    assert h == {}
