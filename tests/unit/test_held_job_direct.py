"""Issue 29, "a big queue": ``scontrol show job N`` of a held job (OCS 9: a hold list holds it; no
array, no task enrolled, no predecessors) reads the job from Grid Engine's detail alone
(jobs.held_rows, gridengine/onejob.py ``answer(held=True)``), not from the owner's listing; every
other job as before. ``squeue -j N`` does not ask the detail: it is what pollers call (Parsl's
``squeue -j N -h -o '%i %t'``), and a second qstat for every poll would double their requests at
qmaster to spare a listing that only a big queue makes dear.

Exactness: each captured held job of fixtures/gridengine/ocs-9.1.4/onejob-* (the listing and the
detail captured one right after the other: onejob-INDEX.tsv) is printed byte for byte the same
both ways, with and without root's record of an admin hold (store/holds.py: JobHeldAdmin)."""

from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURES
from listing_replay import ListingReplay
from shim import siteconf
from shim.__main__ import dispatch
from shim.gridengine import backends
from shim.operations import jobs
from shim.store import holds
from shim_records import captured_site

OCS = FIXTURES / "gridengine" / "ocs-9.1.4"
SGE = FIXTURES / "gridengine" / "sge-8.1.9"
WHOLE = ("qstat", "-u", "*", "-r", "-xml")
MINE = ("qstat", "-u", "root", "-r", "-xml")


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    yield from captured_site(monkeypatch, tmp_path)


def captured(folder) -> dict[int, str]:
    """{job number: what it was} of a release's onejob capture (onejob-INDEX.tsv)."""
    out = {}
    for line in (folder / "onejob-INDEX.tsv").read_text().splitlines():
        if line.startswith("# ") and "\t" in line:
            num, what = line[2:].split("\t", 1)
            out[int(num)] = what
    return out


OCS_JOBS = captured(OCS)
SGE_JOBS = captured(SGE)
# held by a hold list (-h, qhold -h o, qhold -h s; one with -pe), no array, no -hold_jid
HELD = sorted(j for j, what in OCS_JOBS.items() if what.startswith("hqw") and "hold_jid" not in what)
OTHERS = sorted(j for j in OCS_JOBS if j not in HELD)


def replay(folder) -> ListingReplay:
    """The capture's listing (all its jobs are root's) and its detail, the answer to qstat -j -xml
    about any of its jobs (the reader takes the asked ones only)."""
    b = ListingReplay()
    b.add(WHOLE[0], list(WHOLE[1:]), stdout=(folder / "onejob-qstat-u-root-r-xml.xml").read_text())
    detail = (folder / "onejob-qstat-j-xml.xml").read_text()
    for j in captured(folder):
        b.add("qstat", ["-j", str(j), "-xml"], stdout=detail)
    b.add("qrstat", [], stdout="")
    return b


def run(capsys, folder, *argv):
    b = replay(folder)
    backends.use(b)
    rc = dispatch(argv[0], list(argv[1:]))
    out, err = capsys.readouterr()
    return (rc, out, err), [c for c, _ in b.calls]


def as_before(monkeypatch):
    """The listing's way: no held job's rows from the detail (the answer still read and used)."""
    real = jobs.held_rows
    monkeypatch.setattr(jobs, "held_rows", lambda ids, started: (None, real(ids, started)[1]))


COMMANDS = [("scontrol", "show", "job"), ("squeue", "-j"), ("squeue", "-o", "%all", "-j")]
SHOW = [("scontrol", "show", "job")]


def both(capsys, monkeypatch, folder, cmd, job):
    fast, fast_calls = run(capsys, folder, *cmd, str(job))
    with monkeypatch.context() as m:
        as_before(m)
        slow, slow_calls = run(capsys, folder, *cmd, str(job))
    return fast, fast_calls, slow, slow_calls


def admin_hold(state_dir, job: int, submitted: float) -> None:
    """Root's record of its hold of ``job`` (store/holds.py's form), as root's scontrol hold writes it."""
    sub = os.path.join(str(state_dir), "users", "0", holds.SUB)
    os.makedirs(sub, mode=0o755, exist_ok=True)
    with open(os.path.join(sub, holds.NAME), "w") as f:
        json.dump({"jobs": {str(job): None}, "submitted": {str(job): submitted}}, f)


@pytest.mark.parametrize("cmd", SHOW, ids=["show-job"])
@pytest.mark.parametrize("job", HELD)
def test_a_held_job_prints_the_same_from_the_detail_alone(capsys, monkeypatch, cmd, job):
    fast, fast_calls, slow, slow_calls = both(capsys, monkeypatch, OCS, cmd, job)
    assert fast[0] == 0 and fast[1] and fast == slow, OCS_JOBS[job]
    assert MINE not in fast_calls and ("qstat", "-j", str(job), "-xml") in fast_calls
    assert MINE in slow_calls
    assert "JobHeld" in fast[1] and ("Priority=0 " in fast[1] if cmd[0] == "scontrol" else True)


@pytest.mark.parametrize("cmd", SHOW, ids=["show-job"])
def test_an_admin_hold_prints_the_same_from_the_detail_alone(capsys, monkeypatch, site, cmd):
    """511268: held by the operator (qhold -h o), root's record says it was root's: JobHeldAdmin."""
    job = 511268
    b = replay(OCS)
    backends.use(b)
    jl = jobs.list_jobs(siteconf.get(), only={job}, reasons=False, quotas=False)
    (rec,) = [r for r in jl.records if r.job_id == job]
    admin_hold(site, job, rec.extra["submit_ts"])
    fast, fast_calls, slow, slow_calls = both(capsys, monkeypatch, OCS, cmd, job)
    assert fast[0] == 0 and "JobHeldAdmin" in fast[1] and fast == slow
    assert MINE not in fast_calls and MINE in slow_calls


@pytest.mark.parametrize("cmd", COMMANDS, ids=["show-job", "squeue-j", "squeue-all"])
@pytest.mark.parametrize("job", OTHERS)
def test_other_ocs_jobs_take_the_listing(capsys, monkeypatch, cmd, job):
    """Waiting (qw), -hold_jid, an array, running, suspended, Eqw, dr: the owner's listing, the
    output as before."""
    fast, fast_calls, slow, slow_calls = both(capsys, monkeypatch, OCS, cmd, job)
    assert MINE in fast_calls, OCS_JOBS[job]
    assert fast == slow and fast_calls == slow_calls, OCS_JOBS[job]


@pytest.mark.parametrize("cmd", COMMANDS, ids=["show-job", "squeue-j", "squeue-all"])
@pytest.mark.parametrize("job", sorted(SGE_JOBS))
def test_every_sge_job_takes_the_listing(capsys, monkeypatch, cmd, job):
    """SGE 8.1.9's detail has no hold lists: a held job is not told from a waiting one there."""
    fast, fast_calls, slow, slow_calls = both(capsys, monkeypatch, SGE, cmd, job)
    assert MINE in fast_calls, SGE_JOBS[job]
    assert fast == slow and fast_calls == slow_calls, SGE_JOBS[job]


def test_several_jobs_one_not_held_take_the_listing(capsys, monkeypatch):
    ids = f"{HELD[0]},{OTHERS[0]}"
    fast, fast_calls = run(capsys, OCS, "squeue", "-j", ids)
    assert MINE in fast_calls and fast[0] == 0


@pytest.mark.parametrize("cmd", COMMANDS[1:], ids=["squeue-j", "squeue-all"])
@pytest.mark.parametrize("job", HELD)
def test_squeue_j_of_a_held_job_asks_no_detail(capsys, monkeypatch, cmd, job):
    """squeue -j N of a held job: the owner's listing alone, as before (no qstat -j beside it)."""
    out, calls = run(capsys, OCS, *cmd, str(job))
    assert out[0] == 0 and "JobHeld" in out[1]
    assert calls[0] == MINE and not any(c[:2] == ("qstat", "-j") for c in calls), calls
