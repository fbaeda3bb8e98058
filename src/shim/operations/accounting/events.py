"""The shim's own end, cancel and start events of jobs, as sacct reads them.

Only the state layer reads them: directories are listed through ``state.user_dir``/``user_dirs``,
files read through ``state.read_json`` (which opens them as their owner's, refusing links and
foreign files), and ``records`` decides whose events speak for a job (``speaks_for``, ``of_job``,
``candidates``): an event counts for a job of user U when it is in U's directory, or in root's
and names U. Nothing else of sacct opens a file in the state directory.
"""

from __future__ import annotations

import os


TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable


def _scan_events(d: str, uid: int, jobs: set[int] | None, min_mtime: float | None,
                 out: dict[int, dict[tuple[int | None, str], dict[int, str]]]) -> None:
    """Add one user's end, cancel and start events to ``out`` ({job: {(task, kind): {uid:
    path}}}): with ``jobs``, by their id shards (state.event_paths: one listing a shard); else
    the jobs with an event in the time buckets since ``min_mtime`` (state.window_events: the
    cost follows the window's events, not the store's; at most state.LIST_MAX names of another
    user's: what her records cost root's sacct is bounded, F-26). With ``min_mtime``, the jobs
    with an event written since then, each with all its events (its older start or cancel read
    by its id). Nothing is read here: Events.get reads and checks a file when it is needed."""
    from ...store import state

    kinds = ("end", "cancel", "start", state.STEPS)  # (STEPS: each srun step's end, step<id>)
    found: list[tuple[int, tuple[int | None, str], str]] = []
    if jobs is not None:  # (-j: these jobs' events by id; with a window, of those with one written in it)
        found = list(state.named_events(d, jobs, kinds, None, uid))
        if min_mtime is not None:
            recent = {job for job, _key, path in found if _since(path, min_mtime)}
            found = [f for f in found if f[0] in recent]
    else:
        found = [(job, (task, kind), path) for _t, job, task, kind, path in
                 state.window_events(d, uid, kinds, min_mtime, None)]
        if found and min_mtime is not None:  # the window's jobs' older events (a start, a cancel), by id
            have = {(job, key) for job, key, _p in found}
            for job, keys in state.event_paths(d, uid, {job for job, _k, _p in found}).items():
                found += [(job, key, path) for key, path in keys.items()
                          if state.wanted(key[1], kinds) and (job, key) not in have]
    for job, key, path in found:
        out.setdefault(job, {}).setdefault(key, {})[uid] = path


def _since(path: str, t: float) -> bool:
    try:
        return os.lstat(path).st_mtime >= t
    except OSError:
        return False


class Events:
    """The shim's end/cancel/start events, read lazily. An event counts for a job of user U
    when it is in U's directory, or in root's and names U (records.speaks_for), and when it can
    be about the Grid Engine job submitted at ``ge_submit`` (records.of_job).

    The directories are listed as they are needed: for -j, the caller's and root's first, a job
    owner's when Grid Engine names the owner, and every user's only when a job is left that
    nobody has named (``complete``); without -j, all of them (of ``uids`` only, when the query
    is about those users' jobs) at once."""

    def __init__(self, cfg: Any, jobs: set[int] | None, min_mtime: float | None = None,
                 uids: set[int] | None = None, first: Iterable[int] | None = None):
        self.cfg = cfg
        self.jobs = jobs
        self.min_mtime = min_mtime
        self.allowed = uids
        self.index: dict[int, dict[tuple[int | None, str], dict[int, str]]] = {}
        self.cache: dict[str, dict | None] = {}
        self.scanned: set[int] = set()
        self.all = False
        if first is None:
            self.complete()
        else:
            self.scan(first)

    def scan(self, uids: Iterable[int]) -> None:
        from ...store import state

        for uid in uids:
            if uid in self.scanned or self.all or (self.allowed is not None and uid not in self.allowed):
                continue
            self.scanned.add(uid)
            d = state.user_dir(self.cfg, uid)
            if d is not None:
                _scan_events(d, uid, self.jobs, self.min_mtime, self.index)

    def complete(self) -> None:
        """Every user's directory (of ``uids``) listed."""
        if self.all:
            return
        from ...store import state

        for uid, d in state.user_dirs(self.cfg):
            if uid not in self.scanned and (self.allowed is None or uid in self.allowed):
                self.scanned.add(uid)
                _scan_events(d, uid, self.jobs, self.min_mtime, self.index)
        self.all = True

    def knows(self, job: int, owner: Any) -> bool:
        """Are there events of ``job`` in the owner's or root's directory (listing them if need be)?"""
        from ...store import state

        uid = state.uid_of(owner) if owner not in (None, "") else None
        if uid is not None and not self.all and uid not in self.scanned:
            self.scan((uid, 0))
        return job in self.index

    def _load(self, path: str, uid: int) -> dict | None:
        if path not in self.cache:
            from ...store import state
            from ...store.records import clean_event

            self.cache[path] = clean_event(state.read_json(path, uid))
        return self.cache[path]

    def get(self, job: int, task: int | None, kind: str, owner: Any, ge_submit: float | None = None) -> dict | None:
        if not self.knows(job, owner):
            return None
        paths = self.index[job]
        from ...store import state
        from ...store.records import of_job, speaks_for

        uid = state.uid_of(owner) if owner not in (None, "") else None
        if uid is None:
            return None
        keys = [(task, kind)]
        if kind == "cancel" and task is not None:
            keys.append((None, kind))
        for key in keys:
            by = paths.get(key)
            if not by:
                continue
            for u in dict.fromkeys((uid, 0)):
                p = by.get(u)
                if p is None:
                    continue
                data = self._load(p, u)
                if data is not None and speaks_for(data, u, uid, "owner") and of_job(data, ge_submit, True):
                    return data
        return None

    def steps(self, job: int, task: int | None, owner: Any, ge_submit: float | None = None) -> list[dict]:
        """The ends of the job's srun steps (events ``step<id>``) that speak for this job of
        ``owner`` (the owner's own, else root's naming the owner), by step id; each with a valid
        ``step`` id and times (``records.clean_step``)."""
        if not self.knows(job, owner):
            return []
        from ...store import state
        from ...store.records import clean_step, of_job, speaks_for

        uid = state.uid_of(owner) if owner not in (None, "") else None
        if uid is None:
            return []
        out: dict[int, dict] = {}
        for (t, kind), by in self.index[job].items():
            m = state.STEP_KIND.fullmatch(kind) if t == task else None
            if m is None:
                continue
            for u in dict.fromkeys((uid, 0)):
                p = by.get(u)
                if p is None:
                    continue
                if p not in self.cache:
                    self.cache[p] = clean_step(state.read_json(p, u))
                data = self.cache[p]
                if data is not None and data.get("step") == int(m[1]) and speaks_for(data, u, uid, "owner") \
                        and of_job(data, ge_submit, True):
                    out[int(m[1])] = data
                    break
        return [out[k] for k in sorted(out)]

    def tasks(self, job: int, owner: Any = None) -> set[int | None]:
        """The tasks with events in the owner's or root's directory (all, without an owner)."""
        paths = self.index.get(job, {})
        if owner is None:
            return {t for t, _k in paths}
        from ...store import state

        uid = state.uid_of(owner)
        return {t for (t, _k), by in paths.items() if uid in by or 0 in by}

    def owners(self, job: int, me: int) -> list[int]:
        """Whose job this may be when Grid Engine has no record of it (records.candidates)."""
        from ...store.records import candidates

        from ...store.records import speaks_for

        paths = self.index.get(job, {})
        uids = {u for by in paths.values() for u in by}
        root = [self._load(by[0], 0) for (_t, k), by in paths.items() if 0 in by and k != "start"]

        def speaks(u: int) -> bool:  # one of its events in u's directory speaks for a job of u's
            return any(u in by and (d := self._load(by[u], u)) is not None and speaks_for(d, u, u, "owner")
                       for by in paths.values())

        return candidates(uids, root, me, speaks)

