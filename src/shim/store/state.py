"""What the shim remembers that Grid Engine does not: the Slurm side of each job.

Layout under the site config's ``cluster.state_dir`` (made by ``cluster up``/``install`` as root)::

    <state_dir>/                 root, 0755
    <state_dir>/users/           root, 1777 (sticky): each user makes their own directory here
    <state_dir>/users/<uid>/     that user, 0755: nobody else can add, replace or remove a file
                                 (users/<uid>@<random>/ where someone else holds that name: _home)
        jobs/<id>.json           sbatch's record of the job (name, array index map, geometry, ...)
        events/<id>.<task>.<kind>.json   start/end (job wrapper), cancel/suspend/stop/cont (scancel, scontrol)
        signals/<key>.<n>.<rand>.json    scancel's signal requests to a running job (send_signal)
        steps/, srun/, env/      0700: step counters and records, allocations, srun tokens and
                                 payloads, a job's private file: its environment, --export's
                                 values, script and arguments (files 0600)
    <state_dir>/gpus/            root, 1777: GPU device claims (see runtime/jobwrap.claim_gpus)

This module is the file protocol: a directory is trusted only when it is owned by its uid and
writable by nobody else, and a file only when it is a regular file of that uid (or root),
opened without following links or blocking, at most ``MAX_BYTES``, holding a JSON object.
Anything else is treated as absent (with a debug line when ``SLURM_SHIM_DEBUG`` is set). Which
records speak for which job (the owner's directory, or root's naming the owner; the ``sub``
stamp against Grid Engine's submission time) is ``records.py``'s rule, the one every reader uses.

Writes are atomic: ``mkstemp`` in the target directory, ``fchmod``, then ``os.replace``. Writers
report failure by returning False; bookkeeping never fails a job or a submission.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time

from . import layout

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Iterator, Union

    from ..config import SiteConfig

    Where = Union["SiteConfig", str]  # a site config, or the state directory itself
    Owner = Union[int, str, None]     # a uid, a user name, or None for the calling user

MAX_BYTES = 1 << 20
PUBLIC = ("jobs", "events", "signals")  # other users' squeue/sacct (and, for signals/, root's) read these
PRIVATE = ("steps", "srun", "env")  # only the owner's own commands and jobs read these (0700/0600)
SKEW = 300                        # seconds a record's "sub" may differ from Grid Engine's time
EVENT_NAME = re.compile(r"([0-9]{1,12})\.([0-9]{1,12}|x)\.([a-z]{1,16}|step[0-9]{1,9})\.json")  # <job>.<index|x>.<kind>.json
STEP_KIND = re.compile(r"step([0-9]{1,9})")  # an srun step's end: kind step<id> (runtime/steps/run.py)
_DIGITS = re.compile(r"[0-9]{1,12}")


def debug(msg: str) -> None:
    if os.environ.get("SLURM_SHIM_DEBUG"):
        print(f"slurm-shim: state: {msg}", file=sys.stderr)


def root_of(cfg: Where) -> str:
    return cfg if isinstance(cfg, str) else cfg.cluster.state_dir


_uids: dict[str, int | None] = {}


def uid_of(owner: Owner) -> int | None:
    """A uid for a uid, a user name or None (the calling user). A string is a user name first,
    as Slurm's uid_from_string reads one (src/common/uid.c): digits are a uid only when no user
    has that name (a user named "4000" is not uid 4000, whose directory would speak for her);
    None when it is neither."""
    if owner is None:
        return os.getuid()
    if isinstance(owner, int):
        return owner
    if owner not in _uids:
        import pwd

        try:
            _uids[owner] = pwd.getpwnam(owner).pw_uid
        except (KeyError, OverflowError, ValueError):
            digits = owner.isascii() and owner.isdigit() and len(owner) <= 10
            _uids[owner] = int(owner) if digits and int(owner) < 1 << 32 else None
    return _uids[owner]


def _trusted_dir(path: str, uid: int) -> bool:
    """A real directory owned by ``uid`` that nobody else may write to."""
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022:
        debug(f"ignoring {path}: not a directory of uid {uid} closed to others")
        return False
    return True


def _shared_parent(path: str) -> bool:
    """``users/`` or ``gpus/``: root's, and sticky where others may write (so nobody can remove
    or rename what another user made there)."""
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return False
    ok = stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and (not st.st_mode & 0o002 or st.st_mode & stat.S_ISVTX)
    if not ok:
        debug(f"ignoring {path}: not root's sticky directory")
    return bool(ok)


ALT_SUFFIX = re.compile(r"[0-9a-f]{16}")  # users/<uid>@<suffix>: a user's own directory where users/<uid> is squatted
_alt_listing: dict[str, tuple[int, dict[int, list[str]]]] = {}


def _alternates(users: str, fresh: bool = False) -> dict[int, list[str]]:
    """uid -> the names ``<uid>@<suffix>`` in ``users/`` (anyone's: owners are checked by the
    caller). One listing per process while ``users/``'s mtime stays the same (``fresh``: list again)."""
    try:
        mtime = os.lstat(users).st_mtime_ns
    except (OSError, ValueError):
        return {}
    got = _alt_listing.get(users)
    if got is not None and got[0] == mtime and not fresh:
        return got[1]
    alts: dict[int, list[str]] = {}
    try:
        with os.scandir(users) as it:
            for e in it:
                u, at, rest = e.name.partition("@")
                if at and _DIGITS.fullmatch(u) and ALT_SUFFIX.fullmatch(rest):
                    alts.setdefault(int(u), []).append(e.name)
    except OSError:
        return {}
    _alt_listing[users] = (mtime, alts)
    return alts


def _home(users: str, uid: int, fresh: bool = False) -> str | None:
    """The user's directory in ``users/`` (root's sticky directory): ``users/<uid>`` when it is
    the user's own (lstat: a real directory of uid, closed to others); else, where someone else
    squats that name (or it is gone), the first by name of ``users/<uid>@<suffix>`` that is the
    user's own. Nobody but the user can make a directory the user owns, so a squatter's names are
    never taken; only this rare path lists ``users/``."""
    d = os.path.join(users, str(uid))
    if _trusted_dir(d, uid):
        return d
    for name in sorted(_alternates(users, fresh).get(uid, ())):
        alt = os.path.join(users, name)
        if _trusted_dir(alt, uid):
            return alt
    return None


def user_dir(cfg: Where, owner: Owner) -> str | None:
    """The verified directory of a user's records, or None (absent, or not to be trusted)."""
    uid = uid_of(owner)
    if uid is None:
        return None
    users = os.path.join(root_of(cfg), "users")
    return _home(users, uid) if _shared_parent(users) else None


def _make_home(users: str, uid: int) -> str | None:
    """The calling user's directory (``_home``), made on first use: ``users/<uid>``, or where
    someone else holds that name, a fresh ``users/<uid>@<random>``. Two first uses at once may
    both make one: both look again, the first by name is kept, the other removed while empty."""
    d = _home(users, uid)
    if d is not None:
        return d
    primary = os.path.join(users, str(uid))
    try:
        os.mkdir(primary, 0o755)
    except FileExistsError:
        pass
    except OSError as e:
        debug(f"cannot make {primary}: {e}")
        return None
    if _trusted_dir(primary, uid):
        return primary
    debug(f"{primary} is not the user's own: the user's records go to a {primary}@<random> of the user's own")
    mine = None
    for _ in range(16):
        cand = f"{primary}@{os.urandom(8).hex()}"
        try:
            os.mkdir(cand, 0o755)
            mine = cand
            break
        except FileExistsError:
            continue
        except OSError as e:
            debug(f"cannot make {cand}: {e}")
            return None
    got = _home(users, uid, fresh=True)
    if mine is not None and got != mine:
        try:
            os.rmdir(mine)  # another first use won (its name sorts first): ours is still empty
        except OSError:
            pass
    return got


def own_dir(cfg: Where, sub: str) -> str | None:
    """The calling user's ``<sub>`` directory, made on first use (``_make_home``); None if the
    state directory was not set up by an admin, or no directory of the user's own can be had
    there (a full disk, NFS squashing every owner to nobody)."""
    uid = os.getuid()
    users = os.path.join(root_of(cfg), "users")
    if not _shared_parent(users):
        return None
    d = _make_home(users, uid)
    if d is None:
        return None
    s = os.path.join(d, sub)
    try:
        os.mkdir(s, 0o700 if sub in PRIVATE else 0o755)
    except FileExistsError:
        pass
    except OSError as e:
        debug(f"cannot make {s}: {e}")
        return None
    return s if _trusted_dir(s, uid) else None


def read_small_file(path: str, limit: int, owners: tuple[int, ...] | None = None) -> tuple[bytes, int] | None:
    """(the bytes, the owner's uid) of a regular file of at most ``limit`` bytes, owned by one of
    ``owners`` (None: anyone); None for anything else. Never follows a link, never blocks on a
    FIFO, never raises: every reader of a file another user may have planted goes through here."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            debug(f"ignoring {path}: not a regular file of at most {limit} bytes")
            return None
        if owners is not None and st.st_uid not in owners:
            debug(f"ignoring {path}: owned by uid {st.st_uid}, not {' or '.join(map(str, owners))}")
            return None
        raw = os.read(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return (raw, st.st_uid) if len(raw) <= limit else None


def read_json(path: str, uid: int | None = None) -> dict[str, Any] | None:
    """A JSON object from a regular file of ``uid`` (or root) no larger than MAX_BYTES; None for
    anything else (read_small_file)."""
    got = read_small_file(path, MAX_BYTES, None if uid is None else (uid, 0))
    if got is None:
        return None
    raw = got[0]
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def atomic_write(path: str, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` atomically and safely in a shared directory: a fresh name
    made exclusively beside it, ``fchmod``, then ``os.replace``. Raises OSError.

    The fresh name is made as ``tempfile.mkstemp`` makes it (a random name, opened with
    O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, another name while one exists), without importing
    tempfile: it pulls in shutil, random and weakref (~12 M instructions of every sbatch)."""
    d, base = os.path.split(path)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = os.path.join(d or ".", f".{base}.{os.urandom(6).hex()}.tmp")
        try:
            fd = os.open(tmp, flags, 0o600)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"no fresh temporary name beside {path}")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            os.fchmod(f.fileno(), mode)
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_json(path: str, data: dict[str, Any], mode: int = 0o644) -> bool:
    """Atomically replace ``path`` (in a directory of the caller's own) with ``data``."""
    try:
        atomic_write(path, json.dumps(data, separators=(",", ":")), mode)
        return True
    except (OSError, TypeError, ValueError) as e:
        debug(f"cannot write {path}: {e}")
        return False


def own_path(cfg: Where, sub: str, name: str) -> str | None:
    d = own_dir(cfg, sub)
    return None if d is None else os.path.join(d, name)


def write_own(cfg: Where, sub: str, name: str, data: dict[str, Any]) -> bool:
    path = own_path(cfg, sub, name)
    return path is not None and write_json(path, data, 0o600 if sub in PRIVATE else 0o644)


def remove_own(cfg: Where, sub: str, name: str) -> None:
    """Remove ``<sub>/<name>`` from the calling user's own directory, if it is there."""
    path = own_path(cfg, sub, name)
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass


def read_from(cfg: Where, owner: Owner, sub: str, name: str) -> dict[str, Any] | None:
    """``<sub>/<name>`` from the owner's directory (not root's: for per-user files such as steps)."""
    uid = uid_of(owner)
    d = user_dir(cfg, uid)
    return None if d is None else read_json(os.path.join(d, sub, name), uid)


# ---------------------------------------------------------------------------------------------
# submit records and events


def write_record(cfg: Where, kind: str, job_id: int, name: str, data: dict[str, Any]) -> bool:
    """A submit record or an event into the calling user's ``records/`` (layout.py): one atomic
    write into its id shard, then one link into the time bucket of the writer's clock. False when the
    record could not be written; a link that cannot be made only hides it from windows (debug)."""
    rec = own_dir(cfg, layout.ROOT)
    if rec is None:
        return False
    home = os.path.dirname(rec)
    path = layout.id_path(home, kind, job_id, name)
    try:
        text = json.dumps(data, separators=(",", ":"))
        try:
            atomic_write(path, text, 0o644)
        except FileNotFoundError:
            layout.ensure_dir(os.path.dirname(path), rec)
            atomic_write(path, text, 0o644)
    except (OSError, TypeError, ValueError) as e:
        debug(f"cannot write {path}: {e}")
        return False
    if not layout.link_into(path, home, kind, layout.bucket_of(time.time()), name):
        debug(f"cannot link {path} into its time bucket")
    if kind == "jobs" and data.get("dependency"):  # prune keeps what a pending dependency needs (deps/)
        deps = os.path.join(rec, layout.DEPS)
        layout.ensure_dir(deps, rec)
        try:
            os.link(path, os.path.join(deps, name), follow_symlinks=False)
        except OSError:
            pass
    return True


def record_submit(cfg: Where, job_id: int, data: dict[str, Any]) -> bool:
    data = {"t": time.time(), **data}
    return write_record(cfg, "jobs", int(job_id), f"{int(job_id)}.json", data)


def record_event(cfg: Where, job_id: int, task: int | None, kind: str, data: dict[str, Any]) -> bool:
    """kind: "start", "end" (job wrapper), "cancel" (scancel), "suspend", "stop"/"cont" (scancel -s
    STOP/CONT sent: Slurm's STOPPED flag). task: Slurm's array index or None. False when it could
    not be written (the caller warns or carries on)."""
    t = "x" if task is None else str(int(task))
    data = {"t": time.time(), **data}
    return write_record(cfg, "events", int(job_id), f"{int(job_id)}.{t}.{kind}.json", data)


def record_file(cfg: Where, kind: str, name: str, owner: Owner = None) -> str | None:
    """The file that holds record ``name`` ("jobs": ``<id>.json``, "events": an event's name) of
    a user (None: the caller) as readers take it: its id shard's (layout.py), else the old flat
    directory's while that holds it; its id shard's path when neither does. None without the
    user's directory or for a name that is no record's."""
    d = user_dir(cfg, owner)
    if d is None:
        return None
    path = layout.path_of(d, kind, name)
    if path is not None and not os.path.lexists(path) and layout.has_old(d, kind):
        old = os.path.join(layout.old_dir(d, kind), name)
        if os.path.lexists(old):
            return old
    return path


def user_dirs(cfg: Where) -> Iterator[tuple[int, str]]:
    """(uid, directory) of every user with trusted records (``_home``'s rule: ``users/<uid>``,
    else the user's first own ``users/<uid>@<suffix>``)."""
    users = os.path.join(root_of(cfg), "users")
    if not _shared_parent(users):
        return
    try:
        names = os.listdir(users)
    except OSError:
        return
    alts: dict[int, list[str]] = {}
    for n in names:
        if _DIGITS.fullmatch(n):
            d = os.path.join(users, n)
            if _trusted_dir(d, int(n)):
                yield int(n), d
            continue
        u, at, rest = n.partition("@")
        if at and _DIGITS.fullmatch(u) and ALT_SUFFIX.fullmatch(rest):
            alts.setdefault(int(u), []).append(n)
    for u, found in alts.items():  # only where users/<uid> is not the user's own (squatted)
        if not _trusted_dir(os.path.join(users, str(u)), u):
            d = next((os.path.join(users, n) for n in sorted(found) if _trusted_dir(os.path.join(users, n), u)), None)
            if d is not None:
                yield u, d


# What one user's records may cost everyone else's commands (F-26). A command lists at most
# LIST_MAX names of another user's events/ (sbatch's prune keeps a user's own below that:
# PRUNE_KEEP), and takes at most ENDED_MAX of another user's jobs (array tasks) from a listing of
# ended jobs, the newest; the rest are counted (a debug line). The caller's own and root's
# directories are read whole: a user's records slow or fill only her own view.
LIST_MAX = 50_000
ENDED_MAX = 5_000
PRUNE_KEEP = 40_000


def bounded(uid: int) -> bool:
    """Are ``uid``'s records read within LIST_MAX/ENDED_MAX (another plain user's)?"""
    return uid not in (0, os.getuid())


def list_events(events: str, uid: int) -> list[str]:
    """The names in ``uid``'s events/ directory ``events``: all of the caller's own and root's, at
    most LIST_MAX of anyone else's (the listing stops there). OSError as os.listdir."""
    if not bounded(uid):
        return os.listdir(events)
    names: list[str] = []
    with os.scandir(events) as it:
        for e in it:
            if len(names) >= LIST_MAX:
                debug(f"{events}: more than {LIST_MAX} names: the rest are not looked at")
                break
            names.append(e.name)
    return names


def newest_tasks(found: list, limit: int = ENDED_MAX, where: str = "") -> list:
    """Of ``found`` ((mtime, job, task, ...) tuples), those of the ``limit`` (job, task) pairs
    written last (all when there are no more)."""
    last: dict[tuple[int, int], float] = {}
    for f in found:
        k = (f[1], -1 if f[2] is None else f[2])
        if f[0] > last.get(k, -1.0):
            last[k] = f[0]
    if len(last) <= limit:
        return found
    keep = set(sorted(last, key=lambda k: (last[k], k), reverse=True)[:limit])
    debug(f"{where}: {len(last) - limit} more ended jobs than {limit}: not shown")
    return [f for f in found if (f[1], -1 if f[2] is None else f[2]) in keep]


def scan_events(cfg: Where, kinds: Iterable[str], since: float, now: float, jobs: set[int] | None = None,
                always: Iterable[str] = (), uids: set[int] | None = None,
                listing: Callable[[int, set[int]], dict[int, dict[tuple[int | None, str], str]]] | None = None
                ) -> Iterator[tuple[int, int, int | None, str]]:
    """(uid, job, task, kind) of events of the given kinds written in [since, now + 60]: nothing
    read, each file lstat'ed (a regular file, its mtime in the window; each file is checked again
    when it is read). ``jobs``: of these job ids only, by their id shards (``event_paths``), and
    then also of the kinds ``always`` whenever written; without ``jobs``, the time buckets the
    window overlaps (``window_events``). ``uids``: in these users' directories only.
    ``listing``: where ``jobs`` is given, a records.Reader's ``event_paths`` (which keeps the
    shards' names for its own reads). Another user's directory gives at most ENDED_MAX jobs'
    events of ``kinds``, the newest (LIST_MAX names listed, newest_tasks)."""
    any_age = set(always) if jobs is not None else set()
    want = set(kinds) | any_age
    for uid, d in user_dirs(cfg):
        if uids is not None and uid not in uids:
            continue
        found: list[tuple[float, int, int | None, str]] = []
        if jobs is not None:
            paths = listing(uid, jobs) if listing is not None else event_paths(d, uid, jobs)
            for job, keys in paths.items():
                for (task, kind), path in keys.items():
                    if kind not in want:
                        continue
                    try:
                        st = os.lstat(path)
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode) and (kind in any_age or since <= st.st_mtime <= now + 60):
                        found.append((st.st_mtime, job, task, kind))
        else:
            found = [f[:4] for f in window_events(d, uid, want, since, now + 60)]
        if bounded(uid):
            timed = [f for f in found if f[3] not in any_age]
            kept = {id(f) for f in newest_tasks(timed, ENDED_MAX, d)}
            found = [f for f in found if f[3] in any_age or id(f) in kept]
        for _t, job, task, kind in found:
            yield uid, job, task, kind


def parse_event_names(names: Iterable[str], jobs: set[int] | None = None
                      ) -> dict[int, dict[tuple[int | None, str], str]]:
    """{job: {(task, kind): file name}} of the event file names among ``names``; ``jobs``: of
    these jobs only (a name not starting with "<job>." of one of them is not even parsed: the same
    names as the whole parse gives for them)."""
    out: dict[int, dict[tuple[int | None, str], str]] = {}
    match = EVENT_NAME.fullmatch
    if jobs is not None:
        if not jobs:
            return out
        if len(jobs) <= 16:  # (a few jobs: their names picked by prefix; many: each name parsed once)
            prefixes = tuple(f"{j}." for j in jobs)  # (as the pattern reads them: leading zeros are no part of a number)
            names = [n for n in names if n.lstrip("0").startswith(prefixes)]
    for n in names:
        m = match(n)
        if m is not None:
            j = int(m[1])
            if jobs is None or j in jobs:
                out.setdefault(j, {})[(None if m[2] == "x" else int(m[2]), m[3])] = n
    return out


def _limit(uid: int) -> int | None:
    return LIST_MAX if bounded(uid) else None


def old_event_paths(d: str, uid: int, jobs: set[int] | None) -> dict[int, dict[tuple[int | None, str], str]]:
    """The old flat layout's events (``events/<name>``) of ``jobs`` (None: all): {job: {(task,
    kind): path}}, from one listing (another user's: at most LIST_MAX names); {} once migrated."""
    if not layout.has_old(d, "events"):
        return {}
    old = layout.old_dir(d, "events")
    try:
        names = layout.listing(old, _limit(uid))
    except OSError:
        return {}
    return {j: {k: os.path.join(old, n) for k, n in keys.items()} for j, keys in parse_event_names(names, jobs).items()}


def shard_event_paths(d: str, uid: int, shard: str, jobs: set[int] | None = None
                      ) -> dict[int, dict[tuple[int | None, str], str]]:
    """{job: {(task, kind): path}} of the events in one id shard of ``d``'s records (one listing;
    another user's at most LIST_MAX names); ``jobs``: of these only."""
    names = layout.shard_names(d, "events", shard, _limit(uid))
    base = os.path.join(layout.kind_dir(d, "events"), shard)
    return {j: {k: os.path.join(base, n) for k, n in keys.items()} for j, keys in parse_event_names(names, jobs).items()}


def event_paths(d: str, uid: int, jobs: set[int]) -> dict[int, dict[tuple[int | None, str], str]]:
    """{job: {(task, kind): path}} of the events of ``jobs`` in the user directory ``d``: one
    listing of each id shard they fall in (and of the old flat directory while it exists; a name
    in both is the shard's). Nothing is stat'ed or read here."""
    out = old_event_paths(d, uid, jobs)
    by_shard: dict[str, set[int]] = {}
    for j in jobs:
        by_shard.setdefault(layout.shard(j), set()).add(j)
    for sh, some in sorted(by_shard.items()):
        for j, keys in shard_event_paths(d, uid, sh, some).items():
            out.setdefault(j, {}).update(keys)
    return out


def window_events(d: str, uid: int, kinds: Iterable[str], since: float | None, until: float | None
                  ) -> list[tuple[float, int, int | None, str, str]]:
    """(mtime, job, task, kind, path) of the events of ``kinds`` in the user directory ``d``
    whose file was last written in [since, until] (None: open): the names of the time buckets
    the window overlaps (layout.window: widened by SKEW for the writers' clocks), each one's
    shard file lstat'ed (a regular file, its own mtime in the window); and the old flat
    directory's while it exists. Another user's: at most LIST_MAX names in all, the newest
    buckets first (F-26). Nothing is read here."""
    kinds = set(kinds)
    limit = _limit(uid)
    seen: set[str] = set()
    found: list[tuple[float, int, int | None, str, str]] = []

    def take(n: str, path: str) -> None:
        m = EVENT_NAME.fullmatch(n)
        if m is None or not wanted(m[3], kinds):
            return
        try:
            st = os.lstat(path)
        except OSError:
            return
        if not stat.S_ISREG(st.st_mode) or (since is not None and st.st_mtime < since) or (
                until is not None and st.st_mtime > until):
            return
        found.append((st.st_mtime, int(m[1]), None if m[2] == "x" else int(m[2]), m[3], path))

    listed = 0
    for _b, n in layout.window(d, "events", since, until, limit):
        listed += 1
        if n not in seen:
            seen.add(n)
            path = layout.path_of(d, "events", n)
            if path is not None:
                take(n, path)
    if layout.has_old(d, "events"):
        old = layout.old_dir(d, "events")
        try:
            names = layout.listing(old, None if limit is None else max(0, limit - listed))
        except OSError:
            names = []
        for n in names:
            if n not in seen:
                take(n, os.path.join(old, n))
    return found


def named_events(d: str, jobs: set[int], kinds: Iterable[str], min_mtime: float | None = None, uid: int | None = None
                 ) -> Iterator[tuple[int, tuple[int | None, str], str]]:
    """(job, (task, kind), path) of the events of ``jobs`` of the given kinds in the user
    directory ``d`` (written since ``min_mtime``): ``event_paths``, only those stat'ed (and only
    with ``min_mtime``). Nothing is read here."""
    for job, keys in event_paths(d, os.getuid() if uid is None else uid, jobs).items():
        for key, path in keys.items():
            if not wanted(key[1], kinds):
                continue
            if min_mtime is not None:
                try:
                    if os.lstat(path).st_mtime < min_mtime:
                        continue
                except OSError:
                    continue
            yield job, key, path


def job_of_submission(cfg: Where, sub: float, since: float) -> int | None:
    """The id of the calling user's job whose job wrapper recorded sbatch's clock ``sub`` (every
    event carries it as "sub") in an event written since ``since``; None if none did. For the
    daemon's lookup of a submission's job that ended before it looked (submitter.resolve): the time buckets
    since then only."""
    d = user_dir(cfg, None)
    if d is None:
        return None
    uid = os.getuid()
    for _mtime, job, _task, _kind, path in window_events(d, uid, ("start", "end"), since, None):
        data = read_json(path, uid)
        if data is not None and data.get("sub") == sub:
            return job
    return None


EVENT_KINDS = ("start", "end", "cancel", "suspend", "stop", "cont")
STEPS = "step"  # in a reader's kinds: every step's end event (step<id>: STEP_KIND)


def step_kind(step_id: int) -> str:
    """The event kind of srun step ``step_id``'s end: ``step<id>`` (<job>.<index|x>.step<id>.json,
    in the job's id shard beside its other events)."""
    return f"step{int(step_id)}"


def wanted(kind: str, kinds: Iterable[str]) -> bool:
    """Is an event of ``kind`` one of ``kinds`` (STEPS there: any step's)?"""
    return kind in kinds or (STEPS in kinds and STEP_KIND.fullmatch(kind) is not None)


# ---------------------------------------------------------------------------------------------
# the runtime's private records (steps/, srun/, env/ of the calling user): one function per kind
#
#   steps/<key>                         step counter (next step id), under an exclusive lock
#   steps/<key>.<step>.json             a step's record
#   steps/<key>.alloc.json              where an allocation is (salloc's holder, or srun)
#   steps/<key>.release                 salloc's release of its allocation (the exit code)
#   steps/<key>.<step>.<host>.status.json   a remote launcher's task statuses
#   srun/<hex32>.<entry>.json           a launch payload (read once by the far side, then removed)
#   srun/<hex32>.json                   the token of a job srun made (its id, then its exit code)
#   env/<name>                          a batch job's submission environment (sbatch writes it)
#
# <key> is the job id, or <job>_<index> for an array task.

_KEY = re.compile(r"[0-9]{1,12}(?:_[0-9]{1,12})?")
LAUNCH_NAME = re.compile(r"[0-9a-f]{32}\.[a-z_]{1,20}\.json")
STATUS_NAME = re.compile(r"[0-9A-Za-z_]{1,40}\.[0-9]{1,9}\.[0-9A-Za-z._-]{1,255}\.status\.json")
_TOKEN = re.compile(r"[0-9a-f]{32}")


def alloc_path(cfg: Where, key: str) -> str | None:
    """The calling user's allocation record of ``key``, or None when the state directory offers
    the user no private place."""
    return own_path(cfg, "steps", f"{key}.alloc.json")


def write_allocation(cfg: Where, key: str, data: dict[str, Any]) -> bool:
    return write_own(cfg, "steps", f"{key}.alloc.json", data)


def read_allocation(cfg: Where, key: str, owner: Owner = None) -> dict[str, Any] | None:
    """The allocation record of ``key`` as stored (its content is checked by the runtime)."""
    return read_from(cfg, owner, "steps", f"{key}.alloc.json")


def release_path(cfg: Where, key: str) -> str | None:
    """Where salloc releases allocation ``key`` (the holder waits for this file)."""
    return own_path(cfg, "steps", f"{key}.release")


def lock_own_file(path: str, wait: float, clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> int:
    """An exclusive lock on ``path`` (made 0600 if absent): its fd, held until closed. The file
    must be the user's own regular file (opened without following a link or blocking), and the
    lock is waited for at most ``wait`` seconds: OSError when either fails (the fd closed)."""
    import errno
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise OSError(errno.EPERM, "not the user's own regular file", path)
        deadline = clock() + wait
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if clock() >= deadline:
                    raise OSError(errno.EWOULDBLOCK, "locked too long", path) from None
                sleep(delay)
                delay = min(delay * 2, 0.1)
    except BaseException:
        os.close(fd)
        raise


def next_step_id(cfg: Where, key: str, wait: float) -> int:
    """The next step id of a job: 0, 1, 2, ... A counter file in the user's private ``steps/``
    under an exclusive lock, so that concurrent sruns of one job (``srun a & srun b &``) get
    distinct ids. The file must be the user's own regular file (opened without following a link
    or blocking), and the lock is waited for at most ``wait`` seconds: OSError when either fails."""
    import errno

    if not _KEY.fullmatch(key):
        raise OSError(errno.EINVAL, "not a job key", key)
    d = own_dir(cfg, "steps")
    if d is None:
        raise OSError(errno.EACCES, "no private directory in the state directory", os.path.join(root_of(cfg), "users"))
    fd = lock_own_file(os.path.join(d, key), wait)
    try:
        raw = os.read(fd, 64).strip()
        n = int(raw) if raw.isascii() and raw.isdigit() else 0
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, str(n + 1).encode())
        return n
    finally:
        os.close(fd)  # closing drops the lock


def write_step(cfg: Where, key: str, step_id: int, data: dict[str, Any]) -> bool:
    return write_own(cfg, "steps", f"{key}.{int(step_id)}.json", data)


def read_step(cfg: Where, key: str, step_id: int) -> dict[str, Any] | None:
    return read_from(cfg, None, "steps", f"{key}.{int(step_id)}.json")


def status_name(key: str, step_id: int, host: str) -> str:
    return f"{key}.{int(step_id)}.{host}.status.json"


def write_status(cfg: Where, name: str, data: dict[str, Any]) -> bool:
    """A remote launcher's statuses, under a name srun chose (checked: STATUS_NAME)."""
    return bool(STATUS_NAME.fullmatch(name)) and write_own(cfg, "steps", name, data)


def take_status(cfg: Where, name: str) -> dict[str, Any] | None:
    """A remote launcher's statuses, removed once read; None when absent or not to be trusted."""
    if not STATUS_NAME.fullmatch(name):
        return None
    got = read_from(cfg, None, "steps", name)
    remove_own(cfg, "steps", name)
    return got


def write_launch(cfg: Where, entry: str, data: dict[str, Any]) -> str | None:
    """A launch payload for far-side entry point ``entry`` under a fresh random name (returned),
    0600 in the user's private ``srun/``; None when it cannot be written."""
    name = f"{os.urandom(16).hex()}.{entry}.json"
    if not LAUNCH_NAME.fullmatch(name):
        return None
    return name if write_own(cfg, "srun", name, data) else None


def take_launch(cfg: Where, name: str) -> dict[str, Any]:
    """A launch payload: only from the calling user's own ``srun/`` directory, only the user's own
    regular file; removed once read. ValueError for anything else."""
    if not LAUNCH_NAME.fullmatch(name):
        raise ValueError(f"not a launch file name: {name!r}")
    d = own_dir(cfg, "srun")
    if d is None:
        raise ValueError(f"no private directory under {root_of(cfg)}")
    path = os.path.join(d, name)
    data = read_json(path, os.getuid())
    try:
        os.unlink(path)
    except OSError:
        pass
    if data is None:
        raise ValueError(f"{path}: missing, or not the user's own launch file")
    return data


def drop_launch(cfg: Where, name: str) -> None:
    """Remove a launch payload the far side did not take (it never started)."""
    if LAUNCH_NAME.fullmatch(name):
        remove_own(cfg, "srun", name)


def write_token(cfg: Where, token: str, data: dict[str, Any]) -> bool:
    """The token file of a job srun made (``token``: 32 hex digits, else nothing is written)."""
    return bool(_TOKEN.fullmatch(token)) and write_own(cfg, "srun", f"{token}.json", data)


def read_token(cfg: Where, token: str) -> dict[str, Any] | None:
    return read_from(cfg, None, "srun", f"{token}.json") if _TOKEN.fullmatch(token) else None


def remove_token(cfg: Where, token: str) -> None:
    if _TOKEN.fullmatch(token):
        remove_own(cfg, "srun", f"{token}.json")


def sha256_hex(data: bytes) -> str:
    """SHA-256 in hex, from the interpreter's built-in module where it has one (hashlib loads
    OpenSSL: ~4 ms of every sbatch)."""
    try:
        from _sha256 import sha256  # Python 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # 3.12 and later
        except ImportError:
            from hashlib import sha256
    return sha256(data).hexdigest()


def write_private(cfg: Where, sub: str, name: str, data: dict[str, Any]) -> str | None:
    """``data`` as a 0600 file in the calling user's private ``<sub>`` (0700); its path, or None
    when no private directory of the user's own can be had."""
    d = own_dir(cfg, sub) if sub in PRIVATE else None
    if d is None:
        return None
    path = os.path.join(d, name)
    return path if write_json(path, data, 0o600) else None


def _env_path(cfg: Where, path: str) -> bool:
    """``path`` names a file in the ``env/`` of a directory of the calling user's own in ``users/``
    (``users/<uid>`` or ``users/<uid>@<suffix>``, each checked with lstat): the job reads the
    file sbatch wrote even where the user's directory was made anew in between."""
    uid = os.getuid()
    users = os.path.abspath(os.path.join(root_of(cfg), "users"))
    env = os.path.dirname(os.path.abspath(path))
    home = os.path.dirname(env)
    u, at, rest = os.path.basename(home).partition("@")
    return (os.path.basename(env) == "env" and os.path.dirname(home) == users and u == str(uid)
            and (not at or bool(ALT_SUFFIX.fullmatch(rest))) and _shared_parent(users)
            and _trusted_dir(home, uid) and _trusted_dir(env, uid))


def read_env_file(cfg: Where, path: str, digest: str | None = None) -> dict[str, Any] | None:
    """A job's private file (its environment, --export's values, the script and its arguments):
    only when ``path`` is in an ``env/`` directory of the calling user's own (``_env_path``) and
    the user's own regular file; with ``digest``, only when its bytes have that SHA-256."""
    if not _env_path(cfg, path):
        return None
    got = read_small_file(path, MAX_BYTES, (os.getuid(),))
    if got is None:
        return None
    if digest is not None:
        if sha256_hex(got[0]) != digest:
            debug(f"ignoring {path}: not the file the job was submitted with")
            return None
    try:
        data = json.loads(got[0])
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


ENV_TASKS = ".tasks"  # beside an array job's private file: how many of its tasks have yet to end


def drop_env_file(cfg: Where, path: str, task: bool = False) -> None:
    """A job's private file, once the job has ended: removed (``task``: an array task's end,
    counted in ``<name>.tasks``; the file goes with the last). Only a file of the calling user's
    own ``env/`` is touched; a count that cannot be read leaves the file to ``prune``."""
    import errno
    import fcntl

    if not path.endswith(".json") or not _env_path(cfg, path):
        return
    count = path[:-5] + ENV_TASKS
    if task:
        try:
            fd = os.open(count, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                raise OSError(errno.EPERM, "not the user's own count", count)
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.read(fd, 32).strip()
            left = (int(raw) if raw.isascii() and raw.isdigit() else 1) - 1
            if left > 0:
                os.lseek(fd, 0, os.SEEK_SET)
                os.ftruncate(fd, 0)
                os.write(fd, str(left).encode())
                return
        except OSError:
            return
        finally:
            os.close(fd)
    for f in (path, count, path[:-5] + ".job"):
        try:
            os.unlink(f)
        except OSError:
            pass


def prune_env(cfg: Where, alive: Callable[[list[int]], set[int] | None], now: float | None = None,
              grace: float = 600) -> int:
    """Remove the calling user's private files of jobs Grid Engine no longer has (``alive``: the
    ids of these it still has, None when it would not say). A file whose job id was never noted
    (``<name>.job``: sbatch died between) goes after a day. Returns how many files went."""
    now = time.time() if now is None else now
    d = user_dir(cfg, None)
    if d is None:
        return 0
    env = os.path.join(d, "env")
    jobs: dict[str, int] = {}
    gone = 0
    try:
        with os.scandir(env) as it:
            entries = [(e.name, e.stat(follow_symlinks=False).st_mtime) for e in it if e.name.endswith(".json")]
    except OSError:
        return 0
    for name, mtime in entries:
        if now - mtime < grace:
            continue  # a submission under way
        got = read_small_file(os.path.join(env, name[:-5] + ".job"), 64, (os.getuid(),))
        raw = got[0].strip() if got else b""
        if raw.isascii() and raw.isdigit():
            jobs[name] = int(raw)
        elif now - mtime > 86400:
            drop_env_file(cfg, os.path.join(env, name))
            gone += 1
    if jobs:
        known = alive(sorted(set(jobs.values())))
        if known is not None:
            for name, job in jobs.items():
                if job not in known:
                    drop_env_file(cfg, os.path.join(env, name))
                    gone += 1
    return gone


def gpu_dir(cfg: Where) -> str | None:
    """``<state_dir>/gpus`` when it is root's sticky directory (made at install), else None."""
    d = os.path.join(root_of(cfg), "gpus")
    return d if _shared_parent(d) else None


def forget(cfg: Where, job_id: int, before: float | None = None, tasks: Iterable[int] = ()) -> None:
    """Remove the calling user's events of an older job with this id (sbatch, after Grid Engine
    handed the id out again): the job's own and those of ``tasks`` (its array indices), by name
    in its id shard (and in the old flat directory while it exists), so the cost does not grow
    with the store. With ``before``, only files last written before that time (the new job may
    already have started and written its own). Their names in the time buckets stay until prune
    (a reader reads the shard's file, and finds none). Readers also tie every event to the job by
    its ``sub`` stamp; this keeps the user's directory from speaking of two jobs."""
    d = user_dir(cfg, None)
    if d is None:
        return
    dirs = [os.path.join(layout.kind_dir(d, "events"), layout.shard(job_id))]
    if layout.has_old(d, "events"):
        dirs.append(layout.old_dir(d, "events"))
    for ev in dirs:
        for t in ("x", *(str(int(i)) for i in tasks)):
            for kind in EVENT_KINDS:
                path = os.path.join(ev, f"{int(job_id)}.{t}.{kind}.json")
                try:
                    if before is None or os.lstat(path).st_mtime < before:
                        os.unlink(path)
                except OSError:
                    pass


# ---------------------------------------------------------------------------------------------
# migration of the old flat layout (jobs/<id>.json, events/<name>) into records/ (layout.py)

MIGRATE_BATCH = 2000  # old files moved per sbatch (each: a link, a link, an unlink; ~30 us)
OLD_NAMES = {"jobs": re.compile(r"[0-9]{1,12}\.json"), "events": EVENT_NAME}


def migrate(cfg: Where, budget: int = MIGRATE_BATCH) -> int:
    """Move up to ``budget`` of the calling user's records from the old flat directories into
    ``records/``: each linked to its id shard's name (a newer record already there is kept),
    linked into the time bucket of its mtime, then unlinked from the old directory; an old
    directory left empty is removed. Idempotent and safe while commands run (readers read both
    layouts; at every moment one of the two names holds the record; two migrations at once
    each find the other's links there). Returns how many files were moved."""
    d = user_dir(cfg, None)
    if d is None:
        return 0
    moved = 0
    if not (layout.has_old(d, "jobs") or layout.has_old(d, "events")) or own_dir(cfg, layout.ROOT) is None:
        return 0
    for kind in layout.KINDS:
        if moved >= budget or not layout.has_old(d, kind):
            continue
        old = layout.old_dir(d, kind)
        try:
            names = layout.listing(old, budget - moved + 64)
        except OSError:
            continue
        for n in names:
            if moved >= budget:
                break
            moved += _move_old(d, kind, old, n)
        try:
            os.rmdir(old)  # (only once empty)
        except OSError:
            pass
    return moved


def _move_old(d: str, kind: str, old: str, n: str) -> int:
    src = os.path.join(old, n)
    try:
        st = os.lstat(src)
    except OSError:
        return 0
    if not OLD_NAMES[kind].fullmatch(n) or not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        if time.time() - st.st_mtime > 86400 and not stat.S_ISDIR(st.st_mode):
            try:
                os.unlink(src)  # a temporary name of a writer that died, or nothing of the store's
            except OSError:
                pass
        return 0
    dst = layout.path_of(d, kind, n)
    if dst is None:
        return 0
    rec = layout.records_dir(d)
    for _ in range(2):
        try:
            os.link(src, dst, follow_symlinks=False)
            break
        except FileExistsError:
            try:
                if os.lstat(dst).st_mtime < st.st_mtime:
                    os.rename(src, dst)  # the old one is newer (an old shim wrote it since): it wins
            except OSError:
                pass
            break
        except FileNotFoundError:
            layout.ensure_dir(os.path.dirname(dst), rec)
        except OSError:
            return 0
    layout.link_into(dst, d, kind, layout.bucket_of(st.st_mtime), n)
    try:
        os.unlink(src)
    except FileNotFoundError:
        pass
    except OSError:
        return 0
    return 1


# ---------------------------------------------------------------------------------------------
# pruning

PRUNE_EVERY = 3600
MAX_RECORDS = 5_000_000   # store.max_records' default: records (files) a user keeps (docs/store-scale.md)
MAX_AGE_DAYS = 90         # store.max_age_days' default: sacct's documented horizon
NEAR = 0.9                # doctor warns from this fraction of the bound on
FLOOR_BUCKETS = 2         # the newest buckets are never dropped for the count (min_job_age's jobs)
ALIVE_BATCH = 5000        # ids a prune asks Grid Engine about at once


def store_bounds(cfg: Where, max_age: float | None = None) -> tuple[float, int]:
    """(seconds, records): what a user's store may hold, from the site config's ``[store]``
    (``max_age_days``, ``max_records``), else ``max_age`` and the defaults."""
    st = None if isinstance(cfg, str) else getattr(cfg, "store", None)
    days = getattr(st, "max_age_days", None)
    count = getattr(st, "max_records", None)
    age = days * 86400 if type(days) in (int, float) and days > 0 else (
        max_age if max_age is not None else MAX_AGE_DAYS * 86400)
    return float(age), int(count) if type(count) is int and count > 0 else MAX_RECORDS


SEALED = 3  # buckets: one older than the current bucket by this many gets no new names (clocks within SKEW)


def bucket_counts(d: str, uid: int, write: bool = False, now: float | None = None,
                  dropped: Iterable[tuple[str, int]] = ()) -> dict[tuple[str, int], int]:
    """{(kind, bucket): names in it} of a user's records, from the owner's count cache
    (``records/.counts.<kind>.json``: [bucket, mtime_ns, count] each; another user's is read as
    hers, checked) where a bucket is sealed (SEALED buckets old: no writer adds to it; prune
    removes it whole) and no old flat layout is being migrated into the buckets; the days of the
    rest listed, each of their buckets lstat'ed and listed only where its mtime changed since the
    count, and once a day all of them. ``write``: the owner's cache written anew; ``dropped``:
    buckets prune has just removed."""
    out: dict[tuple[str, int], int] = {}
    now = time.time() if now is None else now
    migrating = layout.has_old(d, "jobs") or layout.has_old(d, "events")
    now_b = layout.bucket_of(now)
    gone = set(dropped)
    for kind in layout.KINDS:
        cache_path = os.path.join(layout.records_dir(d), f".counts.{kind}.json")
        got = read_json(cache_path, uid) or {}
        cached = {}
        rows = got.get("b")
        if type(rows) is list:
            for row in rows:
                if type(row) is list and len(row) == 3 and all(type(x) is int for x in row):
                    cached[row[0]] = (row[1], row[2])
        fresh = []
        at, full = got.get("at"), got.get("full")
        whole = migrating or not cached or type(at) is not int or type(full) is not int or now_b - full > layout.PER_DAY
        sealed = -1 if whole else min(now_b, at) - SEALED  # (at: the bucket the cache was counted in)
        for b in sorted(b for b in cached if b < sealed and (kind, b) not in gone):
            out[(kind, b)] = cached[b][1]
            fresh.append([b, *cached[b]])
        for b in layout.buckets(d, kind, None if whole else sealed, None):
            p = layout.bucket_dir(d, kind, b)
            try:
                mt = os.lstat(p).st_mtime_ns
            except OSError:
                continue
            hit = cached.get(b)
            if hit is not None and hit[0] == mt:
                n = hit[1]
            else:
                try:
                    n = len(os.listdir(p))
                except OSError:
                    continue
            out[(kind, b)] = n
            fresh.append([b, mt, n])
        if write and (fresh != rows or whole or at != now_b):
            write_json(cache_path, {"at": now_b, "full": now_b if whole else full, "b": fresh}, 0o644)
    return out


def _needed_by_deps(d: str, uid: int, alive: Callable[[list[int]], set[int] | None] | None) -> set[int] | None:
    """The job ids a live job of the user's depends on (``records/deps/``: the submit records of
    jobs submitted with --dependency, read from their id shard); the entries of jobs Grid Engine
    no longer has are removed. None when Grid Engine would not say."""
    deps = os.path.join(layout.records_dir(d), layout.DEPS)
    try:
        names = [n for n in os.listdir(deps) if OLD_NAMES["jobs"].fullmatch(n)]
    except OSError:
        return set()
    if not names:
        return set()
    ids = sorted({int(n[:-5]) for n in names})
    live = alive(ids) if alive is not None else set()
    if live is None:
        return None
    needed: set[int] = set()
    for n in names:
        j = int(n[:-5])
        if j not in live:
            try:
                os.unlink(os.path.join(deps, n))
            except OSError:
                pass
            continue
        data = read_json(layout.id_path(d, "jobs", j, n), uid)
        dep = data.get("dependency") if data else None
        if type(dep) is str:
            needed.update(int(x) for x in re.findall(r":([0-9]{1,12})", dep))
    return needed


def _drop_bucket(d: str, kind: str, b: int, names: list[str], kept: set[int], now: float) -> int:
    """Remove one time bucket (its ``names``, as listed): each name's shard file where it is
    still the same record (not rewritten since), unless its job is one of ``kept`` (then it is
    linked into the current bucket, to be looked at again later), the bucket's names, the
    bucket. Returns the records removed."""
    bd = layout.bucket_dir(d, kind, b)
    gone = 0
    emptied: set[str] = set()
    now_b = layout.bucket_of(now)
    for n in names:
        bp = os.path.join(bd, n)
        ip = layout.path_of(d, kind, n)
        try:
            bst = os.lstat(bp)
            ist = os.lstat(ip) if ip is not None else None
        except OSError:
            ist = None
        m = layout.ID_OF.match(n)
        if ist is not None and layout.same_file(bst, ist) and m is not None:
            if int(m[1]) in kept:
                layout.link_into(ip, d, kind, now_b, n)
            else:
                try:
                    os.unlink(ip)
                    gone += 1
                    emptied.add(os.path.dirname(ip))
                except OSError:
                    pass
        try:
            os.unlink(bp)
        except OSError:
            pass
    for p in (*sorted(emptied), bd, os.path.dirname(bd)):  # (an id shard only once empty)
        if p in emptied:
            try:
                os.rmdir(p)
            except OSError:
                pass
            continue
        try:
            os.rmdir(p)
        except OSError:
            break
    return gone


def prune_records(cfg: Where, now: float, max_age: float, max_records: int,
                  alive: Callable[[list[int]], set[int] | None] | None = None) -> int:
    """Drop the calling user's records by time bucket: every bucket older than ``max_age``, then
    the oldest while the user holds more than ``max_records`` (never the newest FLOOR_BUCKETS).
    The cost is what goes (and an lstat a bucket, for the count). A record whose job Grid Engine
    still has (``alive``), or that a live job's --dependency names (``records/deps/``), is kept
    whatever its age; when Grid Engine would not say, nothing is dropped. Returns how many
    records went."""
    d = user_dir(cfg, None)
    if d is None or not os.path.isdir(layout.records_dir(d)):
        return 0
    uid = os.getuid()
    needed = _needed_by_deps(d, uid, alive)
    if needed is None:
        return 0

    def keep(ids: list[int]) -> set[int] | None:
        live = alive(ids) if alive is not None and ids else set()
        return None if live is None else set(live) | needed

    counts = bucket_counts(d, uid, write=True, now=now)
    cutoff = layout.bucket_of(now - max_age)
    floor = layout.bucket_of(now) - FLOOR_BUCKETS + 1
    order = sorted(counts, key=lambda k: (k[1], k[0]))
    total = sum(counts.values())
    drop = []
    for k in order:
        if k[1] < cutoff or (total > max_records and k[1] < floor):
            drop.append(k)
            total -= counts[k]
    listed: dict[tuple[str, int], list[str]] = {}
    for kind, b in drop:
        try:
            listed[(kind, b)] = os.listdir(layout.bucket_dir(d, kind, b))
        except OSError:
            pass
    ids = sorted({int(m[1]) for names in listed.values() for m in map(layout.ID_OF.match, names) if m})
    kept: set[int] = set()
    for i in range(0, len(ids), ALIVE_BATCH):  # (one qstat for thousands of ids, not one a bucket)
        got = keep(ids[i:i + ALIVE_BATCH])
        if got is None:
            return 0
        kept |= got
    gone = sum(_drop_bucket(d, kind, b, names, kept, now) for (kind, b), names in listed.items())
    if drop:
        bucket_counts(d, uid, write=True, now=now, dropped=drop)
    return gone


def usage(cfg: Where, owner: Owner = None) -> dict[str, Any] | None:
    """What a user's store holds against its bounds: {"uid", "records", "max_records",
    "oldest" (seconds ago), "max_age"}; None without a store. Counts as prune does
    (``bucket_counts``); the owner's own count cache is brought up to date."""
    uid = uid_of(owner)
    d = None if uid is None else user_dir(cfg, uid)
    if d is None:
        return None
    counts = bucket_counts(d, uid, write=uid == os.getuid())  # type: ignore[arg-type]
    max_age, max_records = store_bounds(cfg)
    oldest = min((b for _k, b in counts), default=None)
    return {"uid": uid, "records": sum(counts.values()), "max_records": max_records, "max_age": max_age,
            "oldest": None if oldest is None else max(0.0, time.time() - oldest * layout.BUCKET)}


def near_bound(cfg: Where, owner: Owner = None, fraction: float = NEAR) -> str | None:
    """doctor's line when a user's store is near its count bound (``fraction`` of
    ``store.max_records``), else None: past the bound, prune drops the oldest records and sacct
    no longer reaches back ``store.max_age_days``."""
    u = usage(cfg, owner)
    if u is None or u["records"] < fraction * u["max_records"]:
        return None
    days = (u["oldest"] or 0) / 86400
    return (f"the records of uid {u['uid']} hold {u['records']:,} files, {100 * u['records'] / u['max_records']:.0f}% "
            f"of store.max_records = {u['max_records']:,}: past it, prune drops the oldest (now {days:.1f} days "
            f"old; store.max_age_days keeps {u['max_age'] / 86400:.0f})")


def prune(cfg: Where, max_age: float, now: float | None = None,
          alive: Callable[[list[int]], set[int] | None] | None = None) -> int:
    """Every sbatch: a batch of the old layout migrated (``migrate``, while it exists). At most
    once an hour (a stamp file's mtime says when it last ran): the calling user's records
    dropped by time bucket (``prune_records``: the site config's ``[store]`` bounds, else
    ``max_age``), the other directories' files older than the age bound (signals/ at most
    PRUNE_KEEP), and (with ``alive``, prune_env) the private files of jobs Grid Engine no longer
    has. Returns how many files went."""
    now = time.time() if now is None else now
    d = user_dir(cfg, None)
    if d is None:
        return 0
    if layout.has_old(d, "jobs") or layout.has_old(d, "events"):
        migrate(cfg)
    stamp = os.path.join(d, ".pruned")
    try:
        if now - os.lstat(stamp).st_mtime < PRUNE_EVERY:
            return 0
    except OSError:
        pass
    try:
        fd = os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        os.close(fd)
        os.utime(stamp, (now, now), follow_symlinks=False)
    except OSError:
        return 0
    max_age, max_records = store_bounds(cfg, max_age)
    gone = prune_records(cfg, now, max_age, max_records, alive)
    for sub in ("signals",) + PRIVATE:
        gone += _prune_flat(os.path.join(d, sub), now, max_age, sub in PUBLIC)
    if alive is not None:
        gone += prune_env(cfg, alive, now)
    return gone


def _prune_flat(p: str, now: float, max_age: float, public: bool) -> int:
    """A flat directory's files older than ``max_age``; a public one's oldest beyond PRUNE_KEEP."""
    gone = 0
    try:
        it = os.scandir(p)
    except OSError:
        return 0
    kept: list[tuple[float, str]] = []
    with it:
        for e in it:
            try:
                mtime = e.stat(follow_symlinks=False).st_mtime
                if now - mtime > max_age:
                    os.unlink(e.path)
                    gone += 1
                else:
                    kept.append((mtime, e.path))
            except OSError:
                pass
    if public and len(kept) > PRUNE_KEEP:  # and the count: other users' commands list at most LIST_MAX (F-26)
        kept.sort()
        for _m, path in kept[:len(kept) - PRUNE_KEEP]:
            try:
                os.unlink(path)
                gone += 1
            except OSError:
                pass
    return gone


# ---------------------------------------------------------------------------------------------
# install time


def make_layout(state_dir: str) -> list[str]:
    """Create (as root, at install time) the directories no user may be first to make: the top
    (0755), ``users/`` and ``gpus/`` (1777). An existing path that is not root's directory is
    never reused: it is reported and left alone. Returns what is wrong (empty when all is well)."""
    problems: list[str] = []
    for path, mode in ((state_dir, 0o755), (os.path.join(state_dir, "users"), 0o1777),
                       (os.path.join(state_dir, "gpus"), 0o1777)):
        try:
            os.mkdir(path, mode)
        except FileExistsError:
            pass
        except OSError as e:
            problems.append(f"cannot create {path}: {e}")
            continue
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0:
            problems.append(f"{path} exists and is not a directory of root's: remove it and run again")
            continue
        os.chmod(path, mode)  # checked above: root's own directory, not a link
    return problems


def ownership_problem(state_dir: str) -> str | None:
    """doctor's round trip (F-35): a file made in the calling user's directory under ``users/``
    must show the caller as its owner (lstat). NFS with all_squash, an idmap that does not match or
    root_squash (for root) give every file to another uid: then no directory there is the user's
    own, and sbatch, salloc and srun refuse rather than put secrets where others may read them.
    None when all is well."""
    uid = os.getuid()
    users = os.path.join(state_dir, "users")
    try:
        d = os.path.join(users, f".doctor-{uid}-{os.urandom(6).hex()}")
        os.mkdir(d, 0o700)
    except OSError as e:
        return f"cannot make a directory in {users}: {e.strerror}"
    try:
        owner = os.lstat(d).st_uid
    except OSError as e:
        return f"cannot lstat {d}: {e.strerror}"
    finally:
        try:
            os.rmdir(d)
        except OSError:
            pass
    if owner != uid:
        return (f"a directory uid {uid} makes in {users} is owned by uid {owner}: the file system does not keep "
                f"owners (NFS all_squash, an idmap mismatch, or root_squash for root), so no user has a private "
                f"directory there and sbatch, salloc and srun refuse")
    return None


def squatted_home(state_dir: str, uid: int | None = None) -> tuple[str, str | None] | None:
    """(users/<uid>, the user's directory in its place or None) when someone else holds
    ``users/<uid>`` (F-21: the user's records then live in a ``users/<uid>@<suffix>``); else None."""
    uid = os.getuid() if uid is None else uid
    users = os.path.join(state_dir, "users")
    d = os.path.join(users, str(uid))
    try:
        os.lstat(d)
    except OSError:
        return None
    if _trusted_dir(d, uid):
        return None
    return d, _home(users, uid, fresh=True)


def layout_problems(state_dir: str) -> list[str]:
    """What doctor reports: the layout make_layout makes, checked without changing anything."""
    problems: list[str] = []
    for path, mode in ((state_dir, 0o755), (os.path.join(state_dir, "users"), 0o1777),
                       (os.path.join(state_dir, "gpus"), 0o1777)):
        try:
            st = os.lstat(path)
        except OSError:
            problems.append(f"{path} does not exist")
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0:
            problems.append(f"{path} is not a directory of root's")
        elif stat.S_IMODE(st.st_mode) != mode:
            problems.append(f"{path} is mode {stat.S_IMODE(st.st_mode):o}, not {mode:o}")
    return problems


# ---------------------------------------------------------------------------------------------
# signal requests: scancel -s on any host -> the job wrapper and srun's launchers of the job
#
#   signals/<key>.<ns>.<hex8>.json     one request: {"t", "sig", "batch", "full", "owner", "uid", "sub", "start"}
#
# The sender writes into its own directory (0755, files 0644, like events: a request says no more
# than a cancel event does), so only the job's owner, or root naming the owner, can speak to a
# job: readers look in the owner's directory and root's, and nowhere else. Names are unique
# (a clock and random digits), each written atomically; readers list one directory, match names
# by the job's key, read at most SIGNAL_BATCH new ones per look, each a small regular file of
# that directory's uid. The job wrapper removes its job's requests (in the owner's directory)
# when the job ends; the rest go with the owner's other records (prune).

SIGNAL_NAME = re.compile(r"([0-9]{1,12}(?:_[0-9]{1,12})?)\.([0-9]{1,20})\.([0-9a-f]{8})\.json")
SIGNAL_BATCH = 64      # requests read per look: a flood of the owner's own costs bounded work
SIGNAL_BYTES = 4096    # a request is ~150 bytes; anything larger is not one
SIGNAL_MAX = 64        # Linux's highest signal number (SIGRTMAX)


def signal_key(job_id: int, task: int | None = None) -> str:
    """The key a job's requests are filed under: ``<job>``, or ``<job>_<index>`` for an array task."""
    return f"{int(job_id)}" if task is None else f"{int(job_id)}_{int(task)}"


def send_signal(cfg: Where, key: str, data: dict[str, Any]) -> bool:
    """Write one signal request for job ``key`` into the caller's own ``signals/`` (root's for an
    admin: the request must then name the job's ``owner``). False when it could not be written."""
    if not _KEY.fullmatch(key):
        return False
    name = f"{key}.{time.time_ns()}.{os.urandom(4).hex()}.json"
    return write_own(cfg, "signals", name, {"t": time.time(), **data})


def _signal_request(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """A request with every field of the right type and range, else None."""
    if data is None:
        return None
    sig, t, sub, start = data.get("sig"), data.get("t"), data.get("sub"), data.get("start")
    if type(sig) is not int or not 0 < sig <= SIGNAL_MAX:
        return None
    if type(t) not in (int, float) or not 0 <= t < 32503680000.0:
        return None
    for v in (sub, start):
        if v is not None and (type(v) not in (int, float) or not 0 <= v < 32503680000.0):
            return None
    if type(data.get("batch", False)) is not bool or type(data.get("full", False)) is not bool:
        return None
    return {"sig": sig, "t": t, "sub": sub, "start": start, "batch": bool(data.get("batch")), "full": bool(data.get("full")),
            "owner": data.get("owner"), "uid": data.get("uid") if type(data.get("uid")) is int else None}


def _read_small(path: str, uid: int) -> dict[str, Any] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > SIGNAL_BYTES or st.st_uid not in (uid, 0):
        debug(f"ignoring {path}: not a small regular file of uid {uid}")
        return None
    return read_json(path, uid)  # checks again on the open file: a swap in between gains nothing


def _signal_files(cfg: Where, uids, key: str):
    """(uid, signals directory, name, SIGNAL_NAME match) of every request file for job ``key`` in
    these users' directories (None: the caller's own), each directory's names in order."""
    for d_uid in uids:
        d = user_dir(cfg, d_uid)
        if d is None:
            continue
        sd = os.path.join(d, "signals")
        try:
            names = os.listdir(sd)
        except OSError:
            continue
        for n in sorted(names):
            m = SIGNAL_NAME.fullmatch(n)
            if m is not None and m[1] == key:
                yield d_uid, sd, n, m




def seen_signals(cfg: Where, owner: Owner, key: str) -> set[str]:
    """The names of the requests job ``key`` of ``owner`` already has: what a step that starts now
    must not take for its own (Slurm signals the steps that exist when the signal is sent)."""
    uid = uid_of(owner)
    if uid is None:
        return set()
    return {f"{d_uid}/{n}" for d_uid, _sd, n, _m in _signal_files(cfg, dict.fromkeys((uid, 0)), key)}


def drop_signals(cfg: Where, key: str) -> None:
    """Remove the calling user's own requests to job ``key`` (the job wrapper, at the job's end)."""
    if not _KEY.fullmatch(key):
        return
    for _uid, sd, n, _m in list(_signal_files(cfg, (None,), key)):
        try:
            os.unlink(os.path.join(sd, n))
        except OSError:
            pass
