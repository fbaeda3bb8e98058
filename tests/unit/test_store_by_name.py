"""A job's events looked up by name (records.Reader._direct, docs/store-scale.md §3): the calls
that want one job's events of a known submission (sbatch --wait, scontrol show job, the job
wrapper's dependency check where Grid Engine still knows the job) lstat the names the job can have, which its submit record tells (its
array indices; the kinds are records.NAMED_KINDS), instead of listing the job's whole id shard.
Each test compares the by-name answer with the shard listing's (the same Reader with
``DIRECT = -1``: every lookup lists) on real files in a tmp state directory, and checks that the
shard was not listed. By name only for a caller that names the submission (``ge_submit``): one
that does not (squeue -t all of a job Grid Engine forgot) gets the listing's answer, an older
job's events of the id included, as before. (The tests run as root: root's own directory is the caller's; uid 4242
stands for another user.)"""

from __future__ import annotations

import ast
import json
import os
import time
from pathlib import Path
from unittest import mock

import pytest

from shim.store import layout, records, state
from test_store_layout import _plant

NOW = time.time()
OTHER = 4242
SRC = Path(__file__).resolve().parents[2] / "src" / "shim"


def _home(top) -> str:
    return str(top / "users" / str(os.getuid()))


def _submit(top, job: int, t: float, **data) -> None:
    with mock.patch("time.time", return_value=t):
        assert state.record_submit(str(top), job, {"sub": t, "name": f"j{job}", **data})


def _event(top, job: int, kind: str, t: float, task: int | None = None, **data) -> str:
    with mock.patch("time.time", return_value=t):
        assert state.record_event(str(top), job, task, kind, {"exit": 0, "state": "COMPLETED", **data})
    path = state.record_file(str(top), "events", f"{job}.{'x' if task is None else task}.{kind}.json")
    os.utime(path, (t, t))
    return path


def _neighbours(top, job: int) -> None:
    """Other jobs of the same id shard, each with a submit record, a start and an end (what a swarm's
    shard holds), and one array among them."""
    base = job - job % layout.SHARD
    for j in range(base, base + layout.SHARD):
        if j != job:
            _submit(top, j, NOW - 900)
            _event(top, j, "start", NOW - 800, sub=NOW - 900)
            _event(top, j, "end", NOW - 700, sub=NOW - 900)
    _event(top, base + 1 if job != base + 1 else base + 2, "end", NOW - 600, task=3)


def _both(top, job: int, owner: int = 0, ge_submit: float | None = None, monkeypatch=None) -> dict:
    """The job's events by name (asserting no id shard of events was listed) and by the listing:
    the two must be equal; returns them."""
    listed: list[str] = []
    real = layout.shard_names

    def counted(home, kind, shard_name, limit=None):
        listed.append(kind)
        return real(home, kind, shard_name, limit)

    monkeypatch.setattr(layout, "shard_names", counted)
    direct = records.Reader(str(top)).events(job, owner, ge_submit)
    assert "events" not in listed, "the job's events were found by a listing of its shard"
    monkeypatch.setattr(records.Reader, "DIRECT", -1)
    full = records.Reader(str(top)).events(job, owner, ge_submit)
    assert "events" in listed
    monkeypatch.undo()
    assert direct == full
    return direct


def test_a_plain_jobs_events_by_name_are_those_of_the_shard_listing(top, monkeypatch):
    _neighbours(top, 1234)
    _submit(top, 1234, NOW - 300)
    _event(top, 1234, "start", NOW - 200, sub=NOW - 300)
    _event(top, 1234, "end", NOW - 100, sub=NOW - 300)
    got = _both(top, 1234, 0, NOW - 300, monkeypatch)
    assert set(got) == {(None, "start"), (None, "end")}
    assert records.Reader(str(top)).events(1234, 0) == got  # (no submission named: the listing)


def test_an_arrays_tasks_by_name_are_those_of_the_shard_listing(top, monkeypatch):
    _neighbours(top, 2250)
    _submit(top, 2250, NOW - 300, array=[1, 2, 5])
    for task in (1, 2, 5):
        _event(top, 2250, "start", NOW - 250, task=task)
        _event(top, 2250, "end", NOW - 200 + task, task=task)
    got = _both(top, 2250, 0, NOW - 300, monkeypatch)
    assert set(got) == {(t, k) for t in (1, 2, 5) for k in ("start", "end")}
    assert got[(5, "end")]["t"] == NOW - 195


def test_a_bigger_array_lists_its_shard_once(top, monkeypatch):
    _submit(top, 3300, NOW - 300, array=list(range(1, 41)))
    for task in range(1, 41):
        _event(top, 3300, "end", NOW - 200, task=task)
    listed: list[str] = []
    real = layout.shard_names
    monkeypatch.setattr(layout, "shard_names", lambda *a: listed.append(a[1]) or real(*a))
    got = records.Reader(str(top)).events(3300, 0, NOW - 300)
    assert set(got) == {(t, "end") for t in range(1, 41)}
    assert listed == ["events"]


def test_a_requeued_and_a_cancelled_job_by_name(top, monkeypatch):
    _neighbours(top, 4410)
    _neighbours(top, 4520)
    _submit(top, 4410, NOW - 900)
    _event(top, 4410, "start", NOW - 800)
    _event(top, 4410, "requeue", NOW - 700, uid=0, user="root", owner="root")
    _event(top, 4410, "start", NOW - 600)
    _event(top, 4410, "end", NOW - 500)
    assert set(_both(top, 4410, 0, NOW - 900, monkeypatch)) == {(None, "start"), (None, "requeue"), (None, "end")}
    _submit(top, 4520, NOW - 900, array=[0, 1])
    _event(top, 4520, "start", NOW - 800, task=0)
    _event(top, 4520, "cancel", NOW - 700, uid=0, user="root", owner="root")
    _event(top, 4520, "cancel", NOW - 690, task=1, uid=0, user="root", owner="root")
    _event(top, 4520, "suspend", NOW - 750, task=0)
    _event(top, 4520, "resume", NOW - 740, task=0)
    got = _both(top, 4520, 0, NOW - 900, monkeypatch)
    assert set(got) == {(0, "start"), (None, "cancel"), (1, "cancel"), (0, "suspend"), (0, "resume")}


def test_a_reused_ids_older_events_read_by_name_as_by_the_listing(top, monkeypatch):
    _neighbours(top, 5510)
    _submit(top, 5510, NOW - 86400)  # the older job with this id, and its events
    _event(top, 5510, "start", NOW - 86300, sub=NOW - 86400)
    _event(top, 5510, "end", NOW - 86200, sub=NOW - 86400)
    _event(top, 5510, "cancel", NOW - 86100, sub=NOW - 86400)
    _submit(top, 5510, NOW - 60)  # the new one: sbatch rewrote the submit record
    _event(top, 5510, "start", NOW - 30, sub=NOW - 60)
    # no submission named (squeue -t all of a job Grid Engine forgot): the listing, with the older
    # job's events, as before
    assert set(records.Reader(str(top)).events(5510, 0)) == {(None, "start"), (None, "end"), (None, "cancel")}
    now = _both(top, 5510, 0, NOW - 60, monkeypatch)  # tied to the new submission: its start alone
    assert set(now) == {(None, "start")} and now[(None, "start")]["t"] == NOW - 30
    # asked for the older job (its Grid Engine submission time): the record is the new job's, so
    # the names are not known from it: the shard is listed, and the old job's events are found
    listed: list[str] = []
    real = layout.shard_names
    monkeypatch.setattr(layout, "shard_names", lambda *a: listed.append(a[1]) or real(*a))
    old = records.Reader(str(top)).events(5510, 0, NOW - 86400)
    assert listed == ["events"] and set(old) == {(None, "end"), (None, "cancel")}


def test_a_jobs_srun_step_ends_are_no_event_of_either_path(top, monkeypatch):
    _submit(top, 6600, NOW - 300)
    _event(top, 6600, "start", NOW - 200)
    _event(top, 6600, state.step_kind(0), NOW - 150, step=0, ntasks=1, start=NOW - 190)
    assert set(_both(top, 6600, 0, NOW - 300, monkeypatch)) == {(None, "start")}
    only = {(j, t, k) for _u, j, t, k in state.scan_events(str(top), (state.step_kind(0),), 0, NOW + 1, jobs={6600})}
    assert only == {(6600, None, "step0")}  # (sacct's: listed with its id shard)


def test_a_job_without_a_submit_record_of_sbatchs_is_found_by_the_listing(top):
    _event(top, 7700, "end", NOW - 100, task=9)
    _event(top, 7700, "start", NOW - 200, task=9)
    assert set(records.Reader(str(top)).events(7700, 0)) == {(9, "start"), (9, "end")}
    with mock.patch("time.time", return_value=NOW - 300):  # a record with no sbatch stamp ("sub"): no
        assert state.record_submit(str(top), 7710, {"name": "w"})  # word on the job's array indices
    _event(top, 7710, "end", NOW - 100, task=2)
    assert set(records.Reader(str(top)).events(7710, 0)) == {(2, "end")}


def test_the_old_flat_layout_is_read_with_the_new_lookups(top, monkeypatch):
    """A store the old code wrote (users/<uid>/jobs/<id>.json, events/<name>), one the current code
    writes (the id shards: what the lookups by name read), and both at once (a migration under way)."""
    home = _home(top)
    os.makedirs(os.path.join(home, "jobs"))
    os.makedirs(os.path.join(home, "events"))
    for name, data in (("jobs/800.json", {"t": NOW - 90, "sub": NOW - 90, "name": "old"}),
                       ("events/800.x.end.json", {"t": NOW - 60, "exit": 3, "state": "FAILED"}),
                       ("events/801.x.start.json", {"t": NOW - 70})):
        with open(os.path.join(home, name), "w") as f:
            json.dump(data, f)
    _submit(top, 801, NOW - 80)  # the current layout's submit record, an old-layout start
    _event(top, 801, "end", NOW - 50)
    reader = records.Reader(str(top))
    assert reader.events(800, 0)[(None, "end")]["exit"] == 3
    assert set(reader.events(801, 0)) == {(None, "start"), (None, "end")}
    assert state.migrate(str(top), budget=1000) == 3
    assert not os.path.exists(os.path.join(home, "events"))
    after = _both(top, 800, 0, NOW - 90, monkeypatch)
    assert after[(None, "end")]["exit"] == 3
    assert set(_both(top, 801, 0, NOW - 80, monkeypatch)) == {(None, "start"), (None, "end")}


def test_a_foreign_file_a_link_a_fifo_or_a_huge_file_at_a_looked_up_name_is_ignored(top, tmp_path, monkeypatch):
    home = _home(top)
    shard = os.path.join(home, "records", "events", str(9900 // layout.SHARD))
    good = json.dumps({"t": NOW - 5, "exit": 0, "state": "COMPLETED"})
    target = tmp_path / "elsewhere.json"
    target.write_text(good)
    _submit(top, 9901, NOW - 60, array=[1, 2])
    _event(top, 9901, "start", NOW - 50, task=1)
    _plant(os.path.join(shard, "9901.1.end.json"), good)  # another uid's file
    _plant(os.path.join(shard, "9901.2.end.json"), str(target), kind="symlink")
    _plant(os.path.join(shard, "9901.x.cancel.json"), b"{" + b" " * (2 << 20) + b"}", uid=0)
    _plant(os.path.join(shard, "9901.2.start.json"), kind="fifo", uid=0)
    assert set(_both(top, 9901, 0, NOW - 60, monkeypatch)) == {(1, "start")}
    # a submit record planted by another uid names no tasks: the shard is listed, as before, and
    # what is planted there is ignored the same way
    jobs = os.path.join(home, "records", "jobs", str(9900 // layout.SHARD))
    _plant(os.path.join(jobs, "9950.json"), json.dumps({"t": NOW, "array": [7]}))
    _plant(os.path.join(shard, "9950.7.end.json"), good)
    assert records.Reader(str(top)).events(9950, 0) == {}


def test_another_users_directory_is_read_by_name_for_her_job(top, monkeypatch):
    """squeue -t all's ended job of another user (and root's events about it): by name in her
    directory, her records checked as hers."""
    her = top / "users" / str(OTHER)
    rec = her / "records"
    for sub, name, data in (("jobs", "1500.json", {"t": NOW - 60, "sub": NOW - 60, "user": str(OTHER)}),
                            ("events", "1500.x.end.json", {"t": NOW - 20, "exit": 0, "state": "COMPLETED"})):
        _plant(str(rec / sub / str(1500 // layout.SHARD) / name), json.dumps(data))  # her files, as hers
    for d in (her, rec, rec / "jobs", rec / "events", rec / "jobs" / "15", rec / "events" / "15"):
        os.chown(d, OTHER, OTHER)
        d.chmod(0o755)
    _event(top, 1500, "cancel", NOW - 10, owner=str(OTHER))  # root's event about her job
    got = _both(top, 1500, OTHER, NOW - 60, monkeypatch)
    assert set(got) == {(None, "end"), (None, "cancel")}


def _kinds_written() -> set[str]:
    """The literal event kinds the shim's writers pass: state.record_event's 4th argument, the
    job wrapper's ``event(kind, ...)``, control.record_event's 3rd, and, where that argument is a
    variable ``kind``, the constants its function assigns it (``a if x else b``) or a module's
    ``*_EVENTS`` table gives (cancel's STOP_EVENTS)."""
    out: set[str] = set()

    def consts(node) -> set[str]:
        return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}

    def kind_arg(node) -> ast.AST | None:
        if not isinstance(node, ast.Call):
            return None
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        at = 3 if name == "record_event" and isinstance(f, ast.Attribute) else 2 if name == "record_event" else (
            0 if name == "event" else None)
        return node.args[at] if at is not None and len(node.args) > at else None

    for path in SRC.rglob("*.py"):
        text = path.read_text()
        if "record_event" not in text:
            continue
        tree = ast.parse(text)
        for node in ast.walk(tree):
            arg = kind_arg(node)
            if arg is not None:
                out |= consts(arg)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
                    isinstance(t, ast.Name) and t.id.endswith("_EVENTS") for t in node.targets):
                out |= {v.value for v in node.value.values if isinstance(v, ast.Constant)}
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    isinstance(a, ast.Name) and a.id == "kind" for a in map(kind_arg, ast.walk(node))):
                for a in ast.walk(node):
                    if isinstance(a, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "kind" for t in a.targets) \
                            and isinstance(a.value, (ast.IfExp, ast.Constant)):
                        out |= consts(a.value)
    return out


def test_every_kind_the_writers_record_is_looked_up_by_name():
    kinds = _kinds_written()
    assert {"start", "end", "cancel", "suspend", "resume", "requeue", "stop", "cont"} <= kinds
    assert kinds <= set(records.NAMED_KINDS), kinds - set(records.NAMED_KINDS)


@pytest.mark.parametrize("tasks", [0, 5])
def test_the_names_looked_up_stay_within_the_budget(top, tasks):
    _submit(top, 10100, NOW - 60, array=list(range(tasks)) or None)
    seen: list[str] = []
    real = os.lstat
    with mock.patch("os.lstat", side_effect=lambda p, *a, **k: seen.append(str(p)) or real(p, *a, **k)):
        records.Reader(str(top)).events(10100, 0, NOW - 60)
    named = [p for p in seen if "/records/events/" in p]
    assert len(named) == (1 + tasks) * len(records.NAMED_KINDS) <= records.Reader.DIRECT
