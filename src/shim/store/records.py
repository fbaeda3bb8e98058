"""The shim's records of a job as its readers take them (squeue, scancel, scontrol, sacct, sbatch
--wait): whose records speak for a job, and only values of the types the readers use.

Where records live and how a file is checked is state.py's business. On top of that:

- A record about a job of user U counts when it sits in U's directory, or in root's and names U
  (``owner`` in an event, ``user`` in a submit record): root's directory also holds root's own
  jobs, and an old job of root's with the same number is not U's. An event in U's directory that
  names another owner is not believed either (nobody but root may act on another user's job).
- A record stamped ``sub`` (the submitting command's clock), or an event stamped ``t``, that
  cannot belong to the Grid Engine job submitted at ``ge_submit`` is another job's (ids wrap).
- Every value a reader uses is checked for its type and range (``clean``); anything else is
  dropped, as if the record did not say it. A record is its writer's free text: it may make that
  writer's own jobs look odd, never crash or hang a command of anyone's.
- A submit record is read typed: a ``Submitted`` (a frozen ``request.Frozen``), whose fields are
  ``SUBMIT_TYPES``' keys holding the checked values (MISSING where the record says nothing valid);
  ``get`` and ``to_dict`` still give the whole cleaned record by key. Events stay plain dicts
  (``clean_event``): their few readers take them by key.

A ``Reader`` is one command's view: it verifies each user's directory once and lists a directory
instead of opening one file per job once that is cheaper, as the single shared directory did.
"""

from __future__ import annotations

import math
import os
import re
import stat
from datetime import datetime

from . import layout, state
from ..slurm.request import MISSING, Frozen

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable

    from ..config import SiteConfig
    from .state import Owner, Where

TS_MAX = 32503680000.0  # the year 3000: later is no time the shim ever wrote
INT_MAX = 1 << 53
STATE_WORD = re.compile(r"[A-Z][A-Z_]{0,31}")
EVENT_NAME = state.EVENT_NAME  # (the one grammar of event file names)
parse_event_names = state.parse_event_names  # (read with it, in state: the file protocol)
JOB_NAME = re.compile(r"([0-9]{1,12})\.json")
# Every kind of event the shim writes but an srun step's end (step<id>): what a job's events are
# looked up by name as (Reader._direct). A writer of a new kind adds it here
# (tests/unit/test_store_direct.py checks the writers' literal kinds against it).
NAMED_KINDS = (*state.EVENT_KINDS, "resume", "requeue")
_NAMED = frozenset(NAMED_KINDS)


# ---------------------------------------------------------------------------------------------
# values


def _int(v: Any) -> int | None:
    if type(v) is int and -INT_MAX <= v <= INT_MAX:
        return v
    if type(v) is float and v.is_integer() and -INT_MAX <= v <= INT_MAX:
        return int(v)
    return None


def _num(v: Any) -> float | int | None:
    if type(v) is int and -INT_MAX <= v <= INT_MAX:
        return v
    if type(v) is float and math.isfinite(v) and -1e18 <= v <= 1e18:
        return v
    return None


def _ts(v: Any) -> float | int | None:
    if type(v) in (int, float) and math.isfinite(v) and 0 <= v <= TS_MAX:
        return v
    return None


def _str(v: Any) -> str | None:
    return v if type(v) is str else None


def _word(v: Any) -> str | None:
    return v if type(v) is str and STATE_WORD.fullmatch(v) else None


def _bool(v: Any) -> bool | None:
    return v if type(v) is bool else None


def _ar(v: Any) -> str | None:
    """An advance reservation's id as Grid Engine numbers them, or "" for none."""
    return v if type(v) is str and (v == "" or (v.isdigit() and len(v) <= 12)) else None


def _begin(v: Any) -> float | int | None:
    """--begin: a timestamp (or, in old records, an ISO time)."""
    if type(v) is str:
        try:
            v = datetime.fromisoformat(v).timestamp()
        except (ValueError, OverflowError, OSError):
            return None
    return _ts(v)


def _indices(v: Any) -> list[int] | None:
    if type(v) is not list:
        return None
    out = [_int(x) for x in v]
    return out if all(x is not None and x >= 0 for x in out) else None  # type: ignore[misc]


SUBMIT_TYPES: dict[str, Callable[[Any], Any]] = {
    "t": _ts, "sub": _ts, "submit_time": _ts, "begin": _begin,
    "name": _str, "user": _str, "uid": _int, "partition": _str, "comment": _str, "account": _str,
    "qos": _str, "workdir": _str, "work_dir": _str, "submit_dir": _str, "submit_host": _str,
    "dependency": _str, "stdout": _str, "stderr": _str, "stdin": _str, "command": _str,
    "script_path": _str, "submit_line": _str, "licenses": _str, "gres": _str, "features": _str, "cluster": _str,
    "ntasks": _int, "cpus_per_task": _int, "nodes": _int, "time": _int, "nice": _int, "gpus": _int,
    "throttle": _int, "mem_mb": _num, "mem_per_cpu_mb": _num, "mem_per_gpu_mb": _num,
    "default_mem_per_cpu": _num, "requeue": _bool, "array": _indices, "ar": _ar,
}
EVENT_TYPES: dict[str, Callable[[Any], Any]] = {
    "t": _ts, "sub": _ts, "start": _ts, "exit": _int, "signal": _int, "uid": _int, "cpus": _int,
    "state": _word, "was": _word, "reason": _str, "node": _str, "user": _str, "owner": _str,
    "name": _str, "partition": _str,
}


def clean(data: dict[str, Any] | None, types: dict[str, Callable[[Any], Any]]) -> dict[str, Any] | None:
    """``data`` with every known key that is null or of a wrong type or range left out (the
    readers take a missing key as "not set"). Keys the readers do not use pass as they are."""
    if data is None:
        return None
    out = {}
    for k, v in data.items():
        check = types.get(k)
        if check is None:
            out[k] = v
        elif v is not None:
            v = check(v)
            if v is not None:
                out[k] = v
    return out


SUBMITTED = tuple(SUBMIT_TYPES)


class Submitted(Frozen):
    """A submit record as its readers take it: each field of ``SUBMIT_TYPES`` is the value the
    record holds when that passes its check (``clean``), else MISSING, as if the record did not say
    it. ``get`` is the readers' dict idiom over the whole cleaned record: keys that are no field
    (``interactive``, ``export``, the geometry srun's steps read) pass as stored, as ``clean``
    leaves them. ``to_dict`` is that cleaned record key for key (what scontrol
    update writes back), and a record that keeps nothing is false, as its empty dict was.

    A field's value is in the instance's ``__dict__`` when the record holds one, else it is the
    class's MISSING (one small dict a record, no per-field loop: a listing reads thousands).
    ``MISSING`` is false, so ``s.comment or x`` reads as ``s.get("comment") or x`` did."""

    __slots__ = ("__dict__", "_kept")
    FIELDS = SUBMITTED

    def __init__(self, data: dict[str, Any]) -> None:
        kept = clean(data, SUBMIT_TYPES)
        set_ = object.__setattr__
        set_(self, "__dict__", {k: v for k, v in kept.items() if k in SUBMIT_TYPES})  # type: ignore[union-attr]
        set_(self, "_kept", kept)

    def __bool__(self) -> bool:
        return bool(self._kept)

    def get(self, name: str, default: Any = None) -> Any:
        return self._kept.get(name, default)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._kept)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Submitted:
        return cls(data)

    def replace(self, **changes: Any) -> Submitted:
        data = {**self._kept, **changes}
        return type(self)({k: v for k, v in data.items() if v is not MISSING})


for _name in SUBMITTED:
    setattr(Submitted, _name, MISSING)
del _name
NO_RECORD = Submitted({})  # what a job without a submit record reads as: every field MISSING, false


def clean_submit(data: dict[str, Any] | None) -> Submitted | None:
    return None if data is None else Submitted(data)


def clean_event(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """An event, or None when it has no valid time (state.record_event always writes one)."""
    data = clean(data, EVENT_TYPES)
    return data if data is not None and "t" in data else None


def _count(v: Any) -> int | None:
    v = _int(v)
    return v if v is not None and 0 <= v <= 1 << 24 else None


STEP_TYPES: dict[str, Callable[[Any], Any]] = {
    **EVENT_TYPES, "step": _count, "ntasks": _count, "nodes": _count, "cpus": _count, "submit_line": _str,
}


def clean_step(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """A step's end event (kind step<id>: runtime/steps/run.py), or None without a valid time,
    step id, state and start."""
    data = clean(data, STEP_TYPES)
    if data is None or not all(k in data for k in ("t", "step", "state", "start")):
        return None
    return data


# ---------------------------------------------------------------------------------------------
# whose records


def names_user(v: Any, uid: int) -> bool:
    """Does a record's ``owner``/``user`` field name the user ``uid``?"""
    if type(v) is int:
        return v == uid
    return type(v) is str and bool(v) and state.uid_of(v) == uid


def action(uid: int, user: str, owner: str | None, submit_ts: float | None) -> dict[str, Any]:
    """What an event of a caller's action on a job (scancel's cancel, suspend, stop/cont;
    scontrol's suspend/resume) says of whose it is: the caller (``uid``, ``user``), the job's
    ``owner`` (what ``speaks_for`` checks of a record in root's directory) and Grid Engine's
    submission time (``sub``: what ``of_job`` ties it to this job with), where known."""
    data: dict[str, Any] = {"uid": uid, "user": user, "owner": owner}
    if submit_ts:
        data["sub"] = submit_ts
    return data


def speaks_for(data: dict[str, Any] | Submitted, dir_uid: int, owner: int, field: str) -> bool:
    """May a record found in ``dir_uid``'s directory speak about a job of ``owner``?"""
    claimed = data.get(field)
    if dir_uid == owner:
        return claimed is None or names_user(claimed, owner)
    return dir_uid == 0 and names_user(claimed, owner)


def of_job(data: dict[str, Any] | Submitted, ge_submit: float | None, event: bool = False) -> bool:
    """Can a record belong to the Grid Engine job submitted at ``ge_submit`` (None: unknown)?"""
    if ge_submit is None:
        return True
    sub = data.get("sub")
    if sub is not None:
        return abs(sub - ge_submit) <= state.SKEW
    t = data.get("t")
    return not event or t is None or t >= ge_submit - state.SKEW  # nothing happens to a job before it exists


def cancel_ended(end: dict[str, Any] | None, cancel: dict[str, Any] | None) -> bool:
    """Does the job's cancel event tell its end, rather than its end event? Slurm's rule: a job is
    CANCELLED from the moment scancel reaches it, whatever its script does afterwards (the job
    wrapper says so too: an end it writes after a cancel is CANCELLED); a cancel that came after
    the end changes nothing. Whichever came first decides (squeue's recent jobs, sacct)."""
    if cancel is None:
        return False
    if end is None or end.get("state") == "CANCELLED":
        return True
    return (cancel.get("t") or 0) <= (end.get("t") or 0)


def ended_reason(reason: str) -> str:
    """The reason a job shows once a cancel ended it (squeue's recent jobs, sacct): the recorded
    one, except DependencyNeverSatisfied (why it waited, and why it was cancelled: no reason of an
    ended job): None."""
    return "None" if reason == "DependencyNeverSatisfied" else reason


def memory_request(s: Submitted) -> tuple[Any, bool, bool] | None:
    """The memory sbatch asked for, from its submit record, as Slurm keeps one figure for it:
    ``(MB, per CPU, the partition's default)`` from --mem (per node), else --mem-per-cpu, else
    the partition's DefMemPerCPU; None when there is none. (squeue's job detail and sacct's
    ReqMem and TRES; MB as recorded.)"""
    if s.mem_mb:
        return s.mem_mb, False, False
    if s.mem_per_cpu_mb:
        return s.mem_per_cpu_mb, True, False
    if s.default_mem_per_cpu:
        return s.default_mem_per_cpu, True, True
    return None


def user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return str(uid)


# Users and groups: the one place the job readers (jobs.py for squeue/scontrol/scancel, accounting
# for sacct) look them up, cached for a command's life. An unknown id is None here: each command
# prints it its own Slurm way (squeue %g and scontrol the number, sacct's Group nothing).
USER_IDS: dict[str, tuple[int | None, int | None]] = {}  # user_ids' cache (hot loops look here first)
_group_names: dict[int, str | None] = {}
_group_ids: dict[str, int | None] = {}
_primary_gids: dict[int, int | None] = {}


def user_ids(user: str) -> tuple[int | None, int | None]:
    """(uid, primary gid) of a user name; (None, None) if unknown."""
    v = USER_IDS.get(user)
    if v is None:
        import pwd

        try:
            pw = pwd.getpwnam(user)
            v = (pw.pw_uid, pw.pw_gid)
        except KeyError:
            v = (None, None)
        USER_IDS[user] = v
    return v


def group_of(gid: int) -> str | None:
    """A group's name; None if the system does not know the gid."""
    if gid not in _group_names:
        import grp

        try:
            _group_names[gid] = grp.getgrgid(gid).gr_name
        except (KeyError, OverflowError):
            _group_names[gid] = None
    return _group_names[gid]


def group_id(group: str) -> int | None:
    """A group name's gid; None if unknown."""
    if group not in _group_ids:
        import grp

        try:
            _group_ids[group] = grp.getgrnam(group).gr_gid
        except KeyError:
            _group_ids[group] = None
    return _group_ids[group]


def primary_group(uid: int) -> str | None:
    """The name of a uid's primary group; None when the user or the group is unknown."""
    if uid not in _primary_gids:
        import pwd

        try:
            _primary_gids[uid] = pwd.getpwuid(uid).pw_gid
        except (KeyError, OverflowError):
            _primary_gids[uid] = None
    gid = _primary_gids[uid]
    return None if gid is None else group_of(gid)


# ---------------------------------------------------------------------------------------------
# one command's reads


class Reader:
    """The submit records and events one command reads. A job without a record (not submitted
    by the shim) costs a failed open (~5 us); once ``MISSES`` lookups have failed (or at once,
    ``eager``, for a command that reads most records, and for root's directory, which can only
    add to another user's record: an admin's scontrol update), the id shard of each job looked
    up is listed instead, once, and the listing answers for the rest of its ids. A job's events
    are looked up by name where its names are known (``_direct``: the job's submit record says
    which array indices it has, and the event kinds are ``NAMED_KINDS``), else found by one
    listing of their job's id shard (layout.py), kept for the command. The old flat layout is
    read too while it exists (one listing a user and kind; state.migrate empties it)."""

    MISSES = 32
    DIRECT = 48  # a job's event names lstat'ed one by one (~1.5 us each) rather than its shard
                 # (~300 names, ~60 us) listed: its own and up to 5 array tasks' (docs/store-scale.md)

    def __init__(self, cfg: SiteConfig | str, jobs: int = 0, eager: bool = False):
        self.cfg = cfg
        self.jobs = jobs  # how many jobs the command looks at (kept for its callers)
        self.eager = eager  # list each id shard at first use (a command that reads most records)
        self._dirs: dict[int, str | None] = {}
        self._ids: dict[tuple[int, str], set[int]] = {}  # (uid, shard) -> ids with a submit record
        self._old_ids: dict[int, set[int] | None] = {}  # uid -> the old jobs/'s ids (None: no old jobs/)
        self._misses = 0
        self._found: dict[tuple[int, int], list[Submitted]] = {}  # (job, owner) -> records read
        self._shards: dict[tuple[int, str], list[str]] = {}  # (uid, shard) -> the names of its events
        self._parsed: dict[tuple[int, int], dict[tuple[int | None, str], str]] = {}  # (uid, job) -> {key: path}
        self._old_events: dict[int, dict[int, dict[tuple[int | None, str], str]]] = {}
        self._records: dict[tuple[int, int], Submitted | None] = {}  # (dir uid, job) -> its submit record there
        self.narrow: set[int] | None = None  # (kept for its callers: every lookup is by id now)

    def dir(self, uid: int) -> str | None:
        try:
            return self._dirs[uid]
        except KeyError:
            d = self._dirs[uid] = state.user_dir(self.cfg, uid)
            return d

    # submit records

    def submit(self, job_id: int, owner: state.Owner, ge_submit: float | None = None) -> Submitted | None:
        """sbatch's record of a job of ``owner``; root's copy of it wins when newer."""
        uid = state.uid_of(owner)
        if uid is None:
            return None
        key = (job_id, uid)
        found = self._found.get(key)
        if found is None:
            found = [self._submit_in(uid, job_id, uid)]
            if uid != 0:
                found.append(self._submit_in(0, job_id, uid))
            found = self._found[key] = [d for d in found if d is not None]
        best = None
        for data in found:
            if of_job(data, ge_submit) and (best is None or (data.t or 0) > (best.t or 0)):
                best = data
        return best

    def _old_jobs(self, d_uid: int, d: str) -> set[int] | None:
        if d_uid not in self._old_ids:
            ids = None
            if layout.has_old(d, "jobs"):
                try:
                    names = layout.listing(layout.old_dir(d, "jobs"), state._limit(d_uid))
                except OSError:
                    names = []
                ids = {int(m[1]) for m in map(JOB_NAME.fullmatch, names) if m}
            self._old_ids[d_uid] = ids
        return self._old_ids[d_uid]

    def _submit_in(self, d_uid: int, job_id: int, owner: int) -> Submitted | None:
        d = self.dir(d_uid)
        if d is None:
            return None
        sh = layout.shard(job_id)
        ids = self._ids.get((d_uid, sh))
        if ids is None and (self.eager or d_uid != owner or self._misses >= self.MISSES):
            ids = self._list_jobs(d_uid, d, sh)
        old = self._old_jobs(d_uid, d)
        data = None
        if ids is None or job_id in ids:
            data = self._record(d_uid, d, job_id)
        if data is None and old and job_id in old:
            data = clean_submit(state.read_json(os.path.join(layout.old_dir(d, "jobs"), f"{job_id}.json"), d_uid))
        if data is None:
            self._misses += 1
            return None
        return data if speaks_for(data, d_uid, owner, "user") else None

    def _record(self, d_uid: int, d: str, job_id: int) -> Submitted | None:
        """The submit record of ``job_id`` in ``d_uid``'s id shard, read once a command (checked
        as every record: state.read_json, clean; whose it is is the caller's business)."""
        key = (d_uid, job_id)
        if key not in self._records:
            self._records[key] = clean_submit(state.read_json(layout.id_path(d, "jobs", job_id, f"{job_id}.json"), d_uid))
        return self._records[key]

    def _list_jobs(self, d_uid: int, d: str, sh: str) -> set[int]:
        """The ids of one id shard's submit records (one listing; another user's: bounded)."""
        names = layout.shard_names(d, "jobs", sh, state._limit(d_uid))
        ids = self._ids[(d_uid, sh)] = {int(m[1]) for m in map(JOB_NAME.fullmatch, names) if m}
        return ids

    def submitted(self, owner: state.Owner) -> set[int]:
        """Every id with a record in ``owner``'s directory (a listing of every id shard)."""
        uid = state.uid_of(owner)
        d = None if uid is None else self.dir(uid)
        if d is None or uid is None:
            return set()
        out = set(self._old_jobs(uid, d) or ())
        try:
            shards = [n for n in os.listdir(layout.kind_dir(d, "jobs")) if n.isdigit()]
        except OSError:
            shards = []
        for sh in shards:
            out |= self._ids.get((uid, sh)) or self._list_jobs(uid, d, sh)
        return out

    # events

    def event_paths(self, uid: int, jobs: set[int]) -> dict[int, dict[tuple[int | None, str], str]]:
        """{job: {(task, kind): path}} of the events of ``jobs`` in a user's directory: one
        listing of each id shard per command (and of the old flat events/ while it exists)."""
        out: dict[int, dict[tuple[int | None, str], str]] = {}
        for j in jobs:
            got = self._names_of(uid, j)
            if got:
                out[j] = got
        return out

    def _names_of(self, uid: int, job_id: int, owner: int | None = None, ge_submit: float | None = None
                  ) -> dict[tuple[int | None, str], str]:
        """A job's events in a user's directory: {(task, kind): path}. By name where the job's
        submit record (in ``uid``'s directory, else ``owner``'s) tells its array indices and, with
        ``ge_submit``, is of this Grid Engine job (``_direct``); else from one listing of its id
        shard (every kind, every index there)."""
        d = self.dir(uid)
        if d is None:
            return {}
        parsed = self._parsed.get((uid, job_id))
        if parsed is None:
            parsed = self._direct(uid, d, job_id, owner, ge_submit)
        if parsed is None:  # (this job's names only, picked by their prefix: a shard holds 100 ids')
            sh = layout.shard(job_id)
            names = self._shards.get((uid, sh))
            if names is None:
                names = self._shards[(uid, sh)] = layout.shard_names(d, "events", sh, state._limit(uid))
            base = os.path.join(layout.kind_dir(d, "events"), sh)
            parsed = {k: os.path.join(base, n) for k, n in parse_event_names(names, {job_id}).get(job_id, {}).items()}
        self._parsed[(uid, job_id)] = parsed
        old = self._old_events.get(uid)
        if old is None:
            old = self._old_events[uid] = state.old_event_paths(d, uid, None)
        got = parsed
        if job_id in old:
            return {**old[job_id], **(got or {})}
        return got or {}

    def _direct(self, uid: int, d: str, job_id: int, owner: int | None, ge_submit: float | None
                ) -> dict[tuple[int | None, str], str] | None:
        """A job's events in ``d`` by name, without listing its shard: each name its job can have
        (``<id>.<x|index>.<kind>.json``: its own and each array index its submit record names,
        each kind of ``NAMED_KINDS``) lstat'ed; a regular file there counts (it is checked again
        when read). Only for a caller that names the submission (``ge_submit``: an older job's
        events of this id, which only the listing finds, are then no answer of either path).
        None where the names are not known: no submit record (in ``uid``'s directory
        or ``owner``'s) that sbatch or srun wrote (their ``sub`` stamp), one of an older job with this id (``ge_submit``), more than ``DIRECT``
        names (a bigger array), and the srun steps' ends (kind step<id>: sacct lists them)."""
        rec = self._record(uid, d, job_id)
        if rec is None and owner is not None and owner != uid:
            od = self.dir(owner)
            rec = None if od is None else self._record(owner, od, job_id)
        if ge_submit is None or rec is None or rec.sub is MISSING or not of_job(rec, ge_submit):
            return None  # (a record without sbatch's or srun's ``sub`` stamp is no submitting command's)
        tasks = ("x", *map(str, rec.array or ()))
        if len(tasks) * len(NAMED_KINDS) > self.DIRECT:
            return None
        base = os.path.join(layout.kind_dir(d, "events"), layout.shard(job_id))
        out: dict[tuple[int | None, str], str] = {}
        for t in tasks:
            for kind in NAMED_KINDS:
                path = os.path.join(base, f"{job_id}.{t}.{kind}.json")
                try:
                    if not stat.S_ISREG(os.lstat(path).st_mode):
                        continue
                except OSError:
                    continue
                out[(None if t == "x" else int(t), kind)] = path
        return out

    def event(self, d_uid: int, name: str) -> dict[str, Any] | None:
        """An event of ``d_uid``'s directory by its path (``_names_of``) or its file name (its id
        shard's, else the old flat directory's)."""
        d = self.dir(d_uid)
        if d is None:
            return None
        if "/" in name:
            return clean_event(state.read_json(name, d_uid))
        path = layout.path_of(d, "events", name)
        data = None if path is None else state.read_json(path, d_uid)
        if data is None and layout.has_old(d, "events"):
            data = state.read_json(os.path.join(layout.old_dir(d, "events"), name), d_uid)
        return clean_event(data)

    def events(self, job_id: int, owner: state.Owner, ge_submit: float | None = None
               ) -> dict[tuple[int | None, str], dict[str, Any]]:
        """All events of a job of ``owner`` that speak for it: {(task, kind): data}; the owner's
        own win over root's. The kinds of ``NAMED_KINDS`` only, on either path of ``_names_of``
        (an srun step's end is sacct's: it lists them)."""
        uid = state.uid_of(owner)
        out: dict[tuple[int | None, str], dict[str, Any]] = {}
        if uid is None:
            return out
        for d_uid in ((0, uid) if uid != 0 else (0,)):
            for key, path in self._names_of(d_uid, job_id, uid, ge_submit).items():
                if key[1] not in _NAMED:
                    continue
                data = self.event(d_uid, path)
                if data is not None and speaks_for(data, d_uid, uid, "owner") and of_job(data, ge_submit, True):
                    out[key] = data
        return out

    def ended_owner(self, job_id: int, uids: Iterable[int], me: int | None = None) -> list[int]:
        """Whose job ``job_id`` may be when Grid Engine no longer knows it and the directories of
        ``uids`` hold its events (see ``candidates``)."""
        root = [self.event(0, p) for p in self._names_of(0, job_id).values()] if 0 in uids else []
        return candidates(uids, root, me, lambda u: self._own_word(job_id, u))

    def _own_word(self, job_id: int, uid: int) -> bool:
        """Does one of the job's events in ``uid``'s directory speak for a job of ``uid``'s?"""
        for path in self._names_of(uid, job_id).values():
            data = self.event(uid, path)
            if data is not None and speaks_for(data, uid, uid, "owner"):
                return True
        return False


def candidates(uids: Iterable[int], root_events: Iterable[dict[str, Any] | None], me: int | None,
               speaks: Callable[[int], bool] | None = None) -> list[int]:
    """The possible owners of a job Grid Engine no longer knows: the users whose directories hold
    its events (``uids``), and those that root's events about it name (a root event naming nobody
    is about root's own job). The caller's own first, then those root names; another user's
    directory alone only when it is the one claimant (``speaks(uid)``: do that directory's
    events speak for a job of its user's; a directory whose events name someone else claims
    nothing). A reader takes the first whose events speak for the job: two users claiming one
    id that no authority (Grid Engine, root) names can only be a reused id or a plant, so each
    of them sees their own and anyone else sees neither: nobody is picked by uid order (F-28)."""
    cands = {u for u in uids if u != 0}
    named: set[int] = set()
    for data in root_events:
        if data is not None:
            o = data.get("owner")
            ou = 0 if o is None else state.uid_of(o)
            if ou is not None:
                named.add(ou)
    out = [me] if me in cands else []
    out += sorted(named - set(out))
    if not named and not out:
        if len(cands) > 1 and speaks is not None:
            cands = {u for u in cands if speaks(u)}
        if len(cands) == 1:
            out = list(cands)
    return out


def signal_requests(cfg: Where, owner: Owner, key: str, seen: set[str], ge_submit: float | None = None,
                    started: float | None = None) -> list[tuple[str, dict[str, Any]]]:
    """New signal requests for job ``key`` of ``owner``, oldest first: from the owner's directory
    (the owner's own word) and root's (only those naming the owner), tied to this Grid Engine job
    by their ``sub`` stamp (its submission time) when ``ge_submit`` is known and their ``start``
    stamp (Grid Engine's start time of the running job scancel saw) when ``started`` is. ``seen`` holds the names already taken
    (updated here); a name that was looked at and found wanting is not read again."""
    uid = state.uid_of(owner)
    if uid is None or not state._KEY.fullmatch(key):
        return []
    found: list[tuple[int, str, dict[str, Any]]] = []
    budget = state.SIGNAL_BATCH
    for d_uid, sd, n, m in state._signal_files(cfg, dict.fromkeys((uid, 0)), key):
        tag = f"{d_uid}/{n}"
        if tag in seen:
            continue
        if budget <= 0:
            break
        budget -= 1
        seen.add(tag)
        data = state._signal_request(state._read_small(os.path.join(sd, n), d_uid))
        if data is None or not speaks_for(data, d_uid, uid, "owner"):
            state.debug(f"ignoring {sd}/{n}: not a request that speaks for uid {uid}'s job {key}")
            continue
        if ge_submit is not None and data["sub"] is not None and abs(data["sub"] - ge_submit) > state.SKEW:
            continue  # a request to an older job with the same id
        if started is not None and data["start"] is not None and abs(data["start"] - started) > state.SKEW:
            continue  # the same: a job that started at another time
        found.append((int(m[2]), tag, data))
    return [(tag, data) for _, tag, data in sorted(found)]
