"""Pruning the store by time bucket (issue 29): bounded by age and by count per user (the site
config's ``[store]``), at a cost that follows what goes, never dropping a record that a job Grid
Engine still has or a live job's --dependency needs; doctor's line near the bound."""

from __future__ import annotations

import os
import time
from unittest import mock

import pytest

from shim import config
from shim.store import layout, records, state

NOW = time.time()
DAY = 86400.0


def _job(top, job: int, t: float, **submit) -> None:
    """A job's submit record and end event, written at ``t`` (the writer's clock)."""
    with mock.patch("time.time", return_value=t):
        assert state.record_submit(str(top), job, {"name": f"j{job}", **submit})
        assert state.record_event(str(top), job, None, "end", {"exit": 0, "state": "COMPLETED"})
    for kind, name in (("jobs", f"{job}.json"), ("events", f"{job}.x.end.json")):
        os.utime(state.record_file(str(top), kind, name), (t, t))


def _kept(top) -> set[int]:
    reader = records.Reader(str(top))
    return {j for j in reader.submitted(0) if reader.events(j, 0)}


def _cfg(top, **store):
    text = f'[cluster]\nstate_dir = "{top}"\n[store]\n' + "".join(f"{k} = {v}\n" for k, v in store.items())
    return config.plain(config.parse(text, "test.toml"))


def test_the_bounds_are_the_site_configs(top):
    assert state.store_bounds(_cfg(top, max_age_days=30, max_records=1000)) == (30 * DAY, 1000)
    assert state.store_bounds(str(top), 90 * DAY) == (90 * DAY, state.MAX_RECORDS)
    assert config.SiteConfig().store.max_age_days == 90
    with pytest.raises(Exception):
        config.parse("[store]\nmax_records = 0\n", "x.toml")


def test_records_past_the_age_go_whole_buckets_at_a_time_the_rest_stay(top):
    for i in range(10):
        _job(top, 100 + i, NOW - DAY * (i * 10 + 1))  # 1, 11, ..., 91 days old
    gone = state.prune(_cfg(top, max_age_days=45), 90 * DAY, now=NOW)
    assert gone == 2 * 5  # the 51..91-day-old jobs' two records each
    assert _kept(top) == set(range(100, 105))
    home = str(top / "users" / "0")
    assert min(layout.buckets(home, "events")) >= layout.bucket_of(NOW - 45 * DAY)


def test_the_count_bound_drops_the_oldest_buckets_but_never_the_newest(top):
    for i in range(10):
        _job(top, 200 + i, NOW - 3600 * (10 - i))  # one job an hour: 209 the newest
    assert state.prune(_cfg(top, max_records=8), 90 * DAY, now=NOW) == 12
    assert _kept(top) == set(range(206, 210))
    _job(top, 300, NOW - 60)
    _job(top, 301, NOW - 30)  # both in the newest buckets, past the bound: those are never dropped
    os.utime(top / "users" / "0" / ".pruned", (NOW - 7200, NOW - 7200))
    state.prune(_cfg(top, max_records=2), 90 * DAY, now=NOW)
    assert {300, 301} <= _kept(top)


def test_a_prune_lists_only_the_buckets_that_go_or_changed(top, monkeypatch):
    for i in range(40):
        _job(top, 400 + i, NOW - DAY * (i + 0.2))
    cfg = _cfg(top, max_age_days=30)
    assert state.prune(cfg, 90 * DAY, now=NOW) == 2 * 10  # 430..439 go; every bucket counted (the cache)
    later = NOW + 0.9 * DAY  # 429 is now past 30 days
    _job(top, 500, later - 50)
    listed = []
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p=".": listed.append(str(p)) or real(p))
    os.utime(top / "users" / "0" / ".pruned", (NOW, NOW))
    assert state.prune(cfg, 90 * DAY, now=later) == 2
    home = str(top / "users" / "0")
    touched = {(p.split("/records/")[1].split("/")[0], int(p.rsplit("/", 1)[1])) for p in listed
               if "/records/" in p and "/t/" in p and p.count("/") - home.count("/") == 5}
    went = layout.bucket_of(NOW - DAY * 29.2)
    assert touched == {("jobs", layout.bucket_of(later - 50)), ("events", layout.bucket_of(later - 50)),
                       ("jobs", went), ("events", went)}
    assert _kept(top) == set(range(400, 429)) | {500}


def test_a_job_grid_engine_still_has_keeps_its_records_whatever_their_age(top):
    _job(top, 600, NOW - 100 * DAY)  # pending for 100 days
    _job(top, 601, NOW - 100 * DAY)
    asked = []

    def alive(ids):
        asked.append(sorted(ids))
        return {600} & set(ids)

    state.prune(_cfg(top), 90 * DAY, now=NOW, alive=alive)
    assert _kept(top) == {600} and asked
    home = str(top / "users" / "0")
    b = layout.bucket_dir(home, "events", layout.bucket_of(NOW))
    assert os.path.exists(os.path.join(b, "600.x.end.json"))  # linked into the current bucket: looked at again
    assert records.Reader(str(top)).submit(600, 0).name == "j600"
    os.utime(top / "users" / "0" / ".pruned", (NOW - 7200, NOW - 7200))
    state.prune(_cfg(top, max_age_days=1), 90 * DAY, now=NOW + 2 * DAY, alive=lambda ids: set())  # then it ended
    assert _kept(top) == set()


def test_a_live_jobs_dependency_keeps_the_records_it_needs(top):
    _job(top, 700, NOW - 100 * DAY)  # ended long ago
    _job(top, 701, NOW - 100 * DAY)
    _job(top, 702, NOW - 10, dependency="afterok:700")  # pending on it (Grid Engine has it)
    _job(top, 703, NOW - 10, dependency="afterok:701")  # gone from Grid Engine
    state.prune(_cfg(top), 90 * DAY, now=NOW, alive=lambda ids: {702} & set(ids))
    assert _kept(top) == {700, 702, 703}
    assert sorted(os.listdir(top / "users" / "0" / "records" / "deps")) == ["702.json"]


def test_nothing_is_dropped_when_grid_engine_would_not_say(top):
    _job(top, 800, NOW - 100 * DAY)
    assert state.prune(_cfg(top), 90 * DAY, now=NOW, alive=lambda ids: None) == 0
    assert _kept(top) == {800}


def test_doctor_hears_of_a_store_near_its_bound(top):
    for i in range(5):
        _job(top, 900 + i, NOW - 3600 * i)
    assert state.usage(_cfg(top, max_records=100))["records"] == 10
    assert state.near_bound(_cfg(top, max_records=100)) is None
    line = state.near_bound(_cfg(top, max_records=11))
    assert line is not None and "store.max_records = 11" in line and "uid 0" in line
    assert state.near_bound(_cfg(top, max_records=11), 4242) is None  # no store of that user


def test_doctors_store_line_names_each_user_near_the_bound(top):
    """slurm-shim doctor (as root: every user's store) warns of a store near its bound, and says
    nothing of one well inside it."""
    from shim.admin import cluster

    for i in range(5):
        _job(top, 950 + i, NOW - 3600 * i)
    assert cluster.store_findings(_cfg(top, max_records=100)) == []
    [f] = cluster.store_findings(_cfg(top, max_records=11))
    assert f.level == "warn" and f.line().startswith("warn  store: the records of uid 0 hold 10 files"), f.line()
    assert "raise [store] max_records" in f.line()
