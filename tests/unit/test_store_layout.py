"""The store's layout (issue 29, docs/store-scale.md): records by id in id shards, hard-linked into
10-minute time buckets. Reads by id and by window, concurrent writers, writers on hosts whose
clocks differ, the owner/type/size checks on the new paths, and the migration of the old flat
layout. (The tests run as root: root's own directory is the caller's; uid 4242 stands for
another user.)"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from unittest import mock

from shim.store import layout, records, state

NOW = time.time()
OTHER = 4242


def _home(top) -> str:
    return str(top / "users" / str(os.getuid()))


def _end(top, job: int, t: float, task: int | None = None, kind: str = "end", **data) -> str:
    """An event as the job wrapper writes it at time ``t`` (its clock, and the file's mtime)."""
    with mock.patch("time.time", return_value=t):
        assert state.record_event(str(top), job, task, kind, {"exit": 0, "state": "COMPLETED", **data})
    path = state.record_file(str(top), "events", f"{job}.{'x' if task is None else task}.{kind}.json")
    os.utime(path, (t, t))
    return path


def _window(top, since: float, until: float = NOW) -> set[tuple[int, int | None, str]]:
    return {(j, t, k) for _u, j, t, k in state.scan_events(str(top), ("end", "cancel"), since, until)}


# ---------------------------------------------------------------------------------------------
# by id, by window


def test_a_record_lives_in_its_id_shard_and_is_linked_into_its_time_bucket(top):
    path = _end(top, 12345, NOW - 30)
    home = _home(top)
    assert path == os.path.join(home, "records", "events", str(12345 // layout.SHARD), "12345.x.end.json")
    b = layout.bucket_of(NOW - 30)
    linked = os.path.join(layout.bucket_dir(home, "events", b), "12345.x.end.json")
    assert os.path.samefile(path, linked)
    with mock.patch("time.time", return_value=NOW - 40):
        assert state.record_submit(str(top), 12345, {"name": "a"})
    sub = os.path.join(home, "records", "jobs", str(12345 // layout.SHARD), "12345.json")
    assert os.path.samefile(sub, os.path.join(layout.bucket_dir(home, "jobs", layout.bucket_of(NOW - 40)), "12345.json"))
    assert records.Reader(str(top)).submit(12345, 0).name == "a"


def test_reads_by_id_find_a_job_and_its_array_tasks_among_others(top):
    for j in range(1000, 1300):
        _end(top, j, NOW - 3600 + j)
    for task in (1, 2, 3):
        _end(top, 1100, NOW - 100, task=task)
    _end(top, 1100, NOW - 50, kind="cancel")
    reader = records.Reader(str(top))
    got = reader.events(1100, 0)
    assert set(got) == {(None, "end"), (1, "end"), (2, "end"), (3, "end"), (None, "cancel")}
    assert set(reader.events(2100, 0)) == set()  # another shard: nothing
    only = {(j, t, k) for _u, j, t, k in state.scan_events(str(top), ("end", "cancel"), 0, NOW, jobs={1100, 1299})}
    assert only == {(1100, None, "end"), (1100, 1, "end"), (1100, 2, "end"), (1100, 3, "end"), (1100, None, "cancel"),
                    (1299, None, "end")}


def test_a_window_reads_the_buckets_it_overlaps_and_checks_each_files_own_time(top, monkeypatch):
    for i in range(48):  # one end every 30 minutes over a day
        _end(top, 5000 + i, NOW - 86400 + 1800 * i)
    assert _window(top, NOW - 3600 - 1) == {(5000 + i, None, "end") for i in (46, 47)}
    assert len(_window(top, NOW - 86400 - 1)) == 48
    listed = []
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p=".": listed.append(str(p)) or real(p))
    _window(top, NOW - 3600)
    buckets = [p for p in listed if "/t/" in p and p.rsplit("/", 1)[-1].isdigit() and p.count("/t/") == 1
               and len(os.path.relpath(p, os.path.join(_home(top), "records", "events", "t")).split("/")) == 2]
    # (scan_events reads [since, now + 60], each end widened by SKEW for the writers' clocks)
    lo, hi = layout.bucket_of(NOW - 3600 - layout.SKEW), layout.bucket_of(NOW + 60 + layout.SKEW)
    assert buckets and all(lo <= int(p.rsplit("/", 1)[-1]) <= hi for p in buckets)  # never a bucket outside


def test_a_rewritten_record_is_read_as_it_is_now_and_its_old_bucket_name_is_stale(top):
    _end(top, 77, NOW - 7200, state="FAILED")
    _end(top, 77, NOW - 10, state="COMPLETED")  # the same name written again (a reused id)
    assert _window(top, NOW - 60) == {(77, None, "end")}
    assert _window(top, NOW - 7300, NOW - 7000) == set()  # the old bucket's name: the record is newer now
    assert records.Reader(str(top)).events(77, 0)[(None, "end")]["state"] == "COMPLETED"


def test_forget_removes_a_reused_ids_events_by_name(top):
    _end(top, 88, NOW - 500)
    _end(top, 88, NOW - 500, task=4)
    state.forget(str(top), 88, before=NOW - 100, tasks=[4])
    assert records.Reader(str(top)).events(88, 0) == {}
    assert _window(top, NOW - 3600) == set()


# ---------------------------------------------------------------------------------------------
# what another user planted is ignored on the new paths too


def _plant(path: str, data: str | bytes = "{}", uid: int = OTHER, kind: str = "file", t: float = NOW - 5) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if kind == "symlink":
        os.symlink(data, path)
        return
    if kind == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
    os.chown(path, uid, uid)
    os.utime(path, (t, t))


def test_a_foreign_file_a_link_or_a_huge_file_in_a_shard_or_a_bucket_is_ignored(top, tmp_path):
    home = _home(top)
    b = layout.bucket_dir(home, "events", layout.bucket_of(NOW))
    good = json.dumps({"t": NOW - 5, "exit": 0, "state": "COMPLETED"})
    shard = os.path.join(home, "records", "events", "0")
    _plant(os.path.join(shard, "1.x.end.json"), good)  # another uid's file in the caller's shard
    _plant(os.path.join(b, "1.x.end.json"), good)
    target = tmp_path / "elsewhere.json"
    target.write_text(good)
    _plant(os.path.join(shard, "2.x.end.json"), str(target), kind="symlink")
    _plant(os.path.join(b, "2.x.end.json"), str(target), kind="symlink")
    _plant(os.path.join(shard, "3.x.end.json"), b"{" + b" " * (2 << 20) + b"}", uid=0)
    _plant(os.path.join(b, "3.x.end.json"), "{}", uid=0)
    _plant(os.path.join(shard, "4.x.end.json"), kind="fifo", uid=0)
    os.link(str(target), os.path.join(b, "5.x.end.json"))  # a bucket's name with no record in the shard
    reader = records.Reader(str(top))
    for j in (1, 2, 3, 4, 5):
        assert reader.events(j, 0) == {}, j
    assert _window(top, NOW - 60) <= {(1, None, "end"), (3, None, "end")}  # named, never read (each read is checked)
    assert state.job_of_submission(str(top), 1.5, NOW - 60) is None


# ---------------------------------------------------------------------------------------------
# several writers at once, on hosts whose clocks differ


def _writer(top: str, first: int, n: int, skew: float) -> None:
    real = time.time
    time.time = lambda: real() + skew  # this "host's" clock
    for j in range(first, first + n):
        assert state.record_submit(top, j, {"name": f"j{j}", "pad": "x" * (j % 50)})
        assert state.record_event(top, j, None, "end", {"exit": j % 7, "state": "COMPLETED", "pad": "y" * (j % 90)})
        assert state.record_event(top, 1, None, "cancel", {"by": j})  # every writer rewrites one name
    os._exit(0)


def _run_writers(top, specs) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(top), first, n, skew)) for first, n, skew in specs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0


def test_concurrent_writers_of_one_users_store_lose_nothing_and_tear_nothing(top):
    _run_writers(top, [(10_000 + 400 * k, 400, 0.0) for k in range(4)])
    reader = records.Reader(str(top))
    for j in range(10_000, 11_600):
        s = reader.submit(j, 0)
        assert s is not None and s.name == f"j{j}" and s.get("pad") == "x" * (j % 50)
        assert reader.events(j, 0)[(None, "end")]["pad"] == "y" * (j % 90)
    assert "by" in reader.events(1, 0)[(None, "cancel")]  # one whole record, whoever wrote last
    assert len(_window(top, NOW - 60, time.time())) == 1600 + 1
    leftovers = [n for _d, _s, files in os.walk(_home(top)) for n in files if n.endswith(".tmp")]
    assert leftovers == []


def test_writers_with_clocks_minutes_apart_are_all_in_the_window(top):
    start = time.time()
    _run_writers(top, [(20_000, 50, -240.0), (30_000, 50, 0.0), (40_000, 50, 240.0)])  # a shared directory, 3 hosts
    got = _window(top, start - 1, time.time())
    assert {j for j, _t, k in got if k == "end"} == set(range(20_000, 20_050)) | set(range(30_000, 30_050)) | set(
        range(40_000, 40_050))
    home = _home(top)
    spread = {b for b in layout.buckets(home, "events")}
    assert min(spread) <= layout.bucket_of(start - 200) and max(spread) >= layout.bucket_of(start + 200)


# ---------------------------------------------------------------------------------------------
# the old flat layout: read while it exists, migrated a batch at a time


def _seed_old(top, n: int) -> dict[int, float]:
    """The old layout, through its own file names: users/<uid>/jobs/<id>.json, events/<name>."""
    home = _home(top)
    os.makedirs(os.path.join(home, "jobs"), exist_ok=True)
    os.makedirs(os.path.join(home, "events"), exist_ok=True)
    times = {}
    for i in range(n):
        j, t = 700 + i * 37, NOW - 86400 * (i % 5) - 60 * i
        times[j] = t
        for name, data in ((f"jobs/{j}.json", {"t": t, "name": f"old{j}"}),
                           (f"events/{j}.x.end.json", {"t": t, "exit": 0, "state": "COMPLETED"})):
            p = os.path.join(home, name)
            with open(p, "w") as f:
                json.dump(data, f)
            os.utime(p, (t, t))
    return times


def _all_found(top, times: dict[int, float]) -> None:
    reader = records.Reader(str(top))
    for j, t in times.items():
        s = reader.submit(j, 0)
        assert s is not None and s.name == f"old{j}", j
        assert reader.events(j, 0)[(None, "end")]["t"] == t, j
    assert {j for j, _t, _k in _window(top, NOW - 6 * 86400)} == set(times)
    assert {j for j, _t, _k in _window(top, NOW - 3600)} == {j for j, t in times.items() if t >= NOW - 3600}
    from shim.operations.accounting.events import Events

    ev = Events(str(top), None, NOW - 6 * 86400)
    assert set(ev.index) == set(times)
    ev = Events(str(top), set(times), None, first=(0,))
    assert all(ev.get(j, None, "end", 0) is not None for j in times)


def test_the_old_layout_is_read_before_during_and_after_its_migration(top):
    times = _seed_old(top, 60)
    home = _home(top)
    _all_found(top, times)  # before
    assert state.migrate(str(top), budget=45) == 45  # during: 45 of 120 files moved
    assert os.path.isdir(os.path.join(home, "jobs")) or os.path.isdir(os.path.join(home, "events"))
    _all_found(top, times)
    assert state.migrate(str(top), budget=1000) == 75
    assert not os.path.exists(os.path.join(home, "jobs")) and not os.path.exists(os.path.join(home, "events"))
    _all_found(top, times)  # after
    assert state.migrate(str(top)) == 0  # idempotent: nothing left
    for j, t in times.items():  # each in the time bucket of its own mtime
        b = layout.bucket_dir(home, "events", layout.bucket_of(t))
        assert os.path.exists(os.path.join(b, f"{j}.x.end.json"))


def test_a_migration_interrupted_between_its_link_and_its_unlink_is_finished_by_the_next(top):
    times = _seed_old(top, 4)
    home = _home(top)
    j = next(iter(times))
    old = os.path.join(home, "events", f"{j}.x.end.json")
    new = os.path.join(home, "records", "events", layout.shard(j), f"{j}.x.end.json")
    os.makedirs(os.path.dirname(new))
    os.link(old, new)  # the first half of a move, as a migration that died would leave it
    _all_found(top, times)
    assert state.migrate(str(top)) == 8
    _all_found(top, times)
    assert not os.path.exists(old)


def test_a_record_an_old_shim_wrote_after_the_new_one_wins_the_move(top):
    home = _home(top)
    _end(top, 9, NOW - 300, state="FAILED")
    os.makedirs(os.path.join(home, "events"))
    p = os.path.join(home, "events", "9.x.end.json")  # another host's older shim, later
    with open(p, "w") as f:
        json.dump({"t": NOW - 5, "exit": 0, "state": "COMPLETED"}, f)
    os.utime(p, (NOW - 5, NOW - 5))
    assert records.Reader(str(top)).events(9, 0)[(None, "end")]["state"] == "FAILED"  # the shard's first
    state.migrate(str(top))
    assert records.Reader(str(top)).events(9, 0)[(None, "end")]["state"] == "COMPLETED"


def test_squeue_t_all_lists_the_events_once(top, monkeypatch):
    """The window's listing is the only one: no second listing of the same directories for the
    records of the jobs it found."""
    from shim.operations import jobs

    for j in range(300, 310):
        _end(top, j, NOW - 20)
    listed = []
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p=".": listed.append(str(p)) or real(p))
    from types import SimpleNamespace

    cfg = SimpleNamespace(cluster=SimpleNamespace(state_dir=str(top), min_job_age=300))
    got = jobs.recent_events(cfg, NOW)
    assert set(got) == set(range(300, 310))
    assert not any(p.endswith("/events") or p.endswith(f"/events/{layout.shard(300)}") for p in listed)
