"""F-26 and F-28 (security review 3), the rules themselves (the live replays are in
tests/security/test_owner_and_bounds.py):

- another user's events cost a command at most state.LIST_MAX names and give a listing of ended
  jobs at most state.ENDED_MAX jobs (array tasks), her newest; the caller's own and root's are
  read whole; prune keeps at most PRUNE_KEEP files of a public directory;
- a job Grid Engine has forgotten is nobody's to a third party when two users' directories
  claim it and no authority (root's event) names one: nobody is picked by uid order.
"""

from __future__ import annotations

import json
import os

import pytest

from shim.store import records, state

OTHER = 4242  # a plain user's uid (the tests run as root, and chown her directory to her)
NOW = 1_800_000_000.0


@pytest.fixture
def top(tmp_path, monkeypatch):
    if os.getuid() != 0:
        pytest.skip("needs root (a directory of another uid)")
    monkeypatch.setattr(state, "LIST_MAX", 40)
    monkeypatch.setattr(state, "ENDED_MAX", 10)
    users = tmp_path / "users"
    users.mkdir()
    users.chmod(0o1777)
    return tmp_path


def _dir_of(top, uid: int):
    d = top / "users" / str(uid)
    (d / "events").mkdir(parents=True, exist_ok=True)
    for p in (d, d / "events"):
        p.chmod(0o755)
        os.chown(p, uid, uid)
    return d / "events"


def _end(events, job: int, t: float, task: str = "x", uid: int = OTHER, kind: str = "end"):
    p = events / f"{job}.{task}.{kind}.json"
    p.write_text(json.dumps({"t": t, "exit": 0, "signal": 0, "state": "COMPLETED"}))
    os.chown(p, uid, uid)
    os.utime(p, (t, t))


def test_another_users_ended_jobs_are_her_newest_at_most_ended_max(top, monkeypatch):
    monkeypatch.setattr(state, "LIST_MAX", 100)  # (all listed: which ones are taken is the point here)
    ev = _dir_of(top, OTHER)
    for i in range(30):
        _end(ev, 1000 + i, NOW - 100 + i)  # 1029 the newest
    mine = _dir_of(top, 0)
    for i in range(25):
        _end(mine, 5000 + i, NOW - 100 + i, uid=0)
    got = list(state.scan_events(str(top), ("end", "cancel"), NOW - 300, NOW))
    hers = sorted(j for u, j, _t, _k in got if u == OTHER)
    assert hers == list(range(1020, 1030))  # ENDED_MAX, the newest
    assert len([1 for u, *_ in got if u == 0]) == 25  # the caller's own: all
    # the same bound where a command asks about some ids (squeue -j of forgotten jobs)
    got = list(state.scan_events(str(top), ("end",), NOW - 300, NOW, jobs={1001}))
    assert got == [(OTHER, 1001, None, "end")]
    for i in range(15):  # one id, many array tasks
        _end(ev, 777, NOW - 50 + i, task=str(i))
    got = list(state.scan_events(str(top), ("end",), NOW - 300, NOW, jobs={777}))
    assert sorted(t for _u, _j, t, _k in got) == list(range(5, 15))


def test_another_users_listing_stops_at_list_max(top):
    ev = _dir_of(top, OTHER)
    for i in range(100):
        (ev / f"junk{i}").write_text("")
    assert len(state.list_events(str(ev), OTHER)) == 40
    mine = _dir_of(top, 0)
    for i in range(100):
        (mine / f"junk{i}").write_text("")
    assert len(state.list_events(str(mine), 0)) == 100
    shard = top / "users" / str(OTHER) / "records" / "events" / "0"  # the new layout's id shard: the same bound
    shard.mkdir(parents=True)
    for i in range(100):
        (shard / f"{i}.x.end.json").write_text("")
    assert len(state.shard_event_paths(str(top / "users" / str(OTHER)), OTHER, "0")) == 40
    assert len(state.shard_event_paths(str(top / "users" / str(OTHER)), 0, "0")) == 100


def test_prune_bounds_the_count_not_only_the_age(top, monkeypatch):
    monkeypatch.setattr(state, "MAX_RECORDS", 5)  # (the site config's store.max_records)
    ev = _dir_of(top, 0)
    for i in range(8):  # the old flat layout, one record a 10-minute bucket: migrated, then cut
        _end(ev, 100 + i, NOW - 6000 + 600 * i, uid=0)
    assert state.prune(str(top), 90 * 86400, now=NOW) == 3
    assert not ev.exists()
    assert sorted(p.name for p in (top / "users" / "0" / "records" / "events" / str(100 // 100)).iterdir()) == [
        f"{j}.x.end.json" for j in range(103, 108)]


VICTIM, MALLORY, BYSTANDER = 1012, 1011, 1020


def test_a_contested_forgotten_job_is_nobodys_to_a_third_party():
    both = {MALLORY, VICTIM}
    assert records.candidates(both, [], BYSTANDER) == []  # was: mallory, the lower uid
    assert records.candidates(both, [], 0) == []  # root too
    assert records.candidates(both, [], VICTIM) == [VICTIM]  # each sees her own
    assert records.candidates(both, [], MALLORY) == [MALLORY]
    assert records.candidates({MALLORY}, [], BYSTANDER) == [MALLORY]  # one claimant: hers
    # an authority names the owner: root's event about the job
    assert records.candidates(both | {0}, [{"t": NOW, "owner": VICTIM}], BYSTANDER) == [VICTIM]
    assert records.candidates({0}, [{"t": NOW}], 0) == [0]  # root's own job


def test_the_job_wrappers_events_carry_the_owner():
    from shim.runtime import jobwrap

    got = jobwrap._stamp({"sub": 12.5})
    import pwd

    assert got == {"sub": 12.5, "owner": pwd.getpwuid(os.getuid()).pw_name}


def test_sacct_takes_at_most_ended_max_event_only_jobs_of_another_user(monkeypatch):
    from types import SimpleNamespace

    from shim.operations.accounting import collect

    monkeypatch.setattr(state, "ENDED_MAX", 3)
    end = (None, "end")
    index = {j: {end: {OTHER: "p"}} for j in range(10, 20)}  # hers: ten jobs with events only
    index[5] = {end: {0: "p"}}  # root's (read whole)
    index[6] = {end: {os.getuid(): "p"}, (None, "cancel"): {OTHER: "p"}}  # the caller's too
    index[12] = {end: {OTHER: "p"}}
    ev = SimpleNamespace(index=index)
    assert collect._beyond_bound(ev, known={19}) == set(range(10, 16))  # 18, 17, 16 kept; 19 has a record


def test_a_directory_whose_events_name_someone_else_claims_nothing():
    both = {MALLORY, VICTIM}
    # mallory's plant names the victim as the owner: it speaks for nobody, the victim's job stays hers
    assert records.candidates(both, [], BYSTANDER, lambda u: u == VICTIM) == [VICTIM]
    assert records.candidates(both, [], BYSTANDER, lambda u: True) == []
