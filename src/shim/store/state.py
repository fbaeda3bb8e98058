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
EVENT_NAME = re.compile(r"([0-9]{1,12})\.([0-9]{1,12}|x)\.([a-z]{1,16})\.json")  # <job>.<index|x>.<kind>.json
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


def record_submit(cfg: Where, job_id: int, data: dict[str, Any]) -> bool:
    data = {"t": time.time(), **data}
    return write_own(cfg, "jobs", f"{int(job_id)}.json", data)


def record_event(cfg: Where, job_id: int, task: int | None, kind: str, data: dict[str, Any]) -> bool:
    """kind: "start", "end" (job wrapper), "cancel" (scancel), "suspend", "stop"/"cont" (scancel -s
    STOP/CONT sent: Slurm's STOPPED flag). task: Slurm's array index or None. False when it could
    not be written (the caller warns or carries on)."""
    t = "x" if task is None else str(int(task))
    data = {"t": time.time(), **data}
    return write_own(cfg, "events", f"{int(job_id)}.{t}.{kind}.json", data)


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
                listing: Callable[[int], list[str]] | None = None) -> Iterator[tuple[int, int, int | None, str]]:
    """(uid, job, task, kind) of events of the given kinds written in [since, now + 60], and of the
    kinds ``always`` whenever written (in the same listing): the directory listing only (each file
    is checked when it is read); ``jobs``: of these job ids only (the others' files are not even
    stat'ed, their names not parsed); ``uids``: in these users' directories only. ``listing``:
    where ``jobs`` is given, the names of a user's events/ (a records.Reader's event_listing,
    which keeps them for its own reads of the same directories). Another user's directory gives
    at most ENDED_MAX jobs' events of ``kinds``, the newest (list_events, newest_tasks)."""
    any_age = set(always)
    want = set(kinds) | any_age
    for uid, d in user_dirs(cfg):
        if uids is not None and uid not in uids:
            continue
        events = os.path.join(d, "events")
        if jobs is not None:
            found = list(_scan_named(uid, events, jobs, want, any_age, since, now, listing))
        else:
            try:
                names = list_events(events, uid)
            except OSError:
                continue
            found = []
            for n in names:
                m = EVENT_NAME.fullmatch(n)
                if m is None or m[3] not in want:
                    continue
                try:
                    st = os.lstat(os.path.join(events, n))
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode) or (m[3] not in any_age and not since <= st.st_mtime <= now + 60):
                    continue
                found.append((st.st_mtime, int(m[1]), None if m[2] == "x" else int(m[2]), m[3]))
        if bounded(uid):
            timed = [f for f in found if f[3] not in any_age]
            kept = {id(f) for f in newest_tasks(timed, ENDED_MAX, events)}
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
        prefixes = tuple(f"{j}." for j in jobs)  # (as the pattern reads them: leading zeros are no part of a number)
        names = [n for n in names if n.lstrip("0").startswith(prefixes)]
    for n in names:
        m = match(n)
        if m is not None:
            j = int(m[1])
            if jobs is None or j in jobs:
                out.setdefault(j, {})[(None if m[2] == "x" else int(m[2]), m[3])] = n
    return out


def _scan_named(uid: int, events: str, jobs: set[int], want: set[str], any_age: set[str], since: float, now: float,
                listing: Callable[[int], list[str]] | None) -> Iterator[tuple[float, int, int | None, str]]:
    """scan_events in one directory for some jobs: the names listed, those of the jobs picked by
    their prefix (parse_event_names), only those lstat'ed: (mtime, job, task, kind)."""
    if listing is not None:
        names = listing(uid)
    else:
        try:
            names = list_events(events, uid)
        except OSError:
            return
    for job, keys in parse_event_names(names, jobs).items():
        for (task, kind), name in keys.items():
            if kind not in want:
                continue
            try:
                st = os.lstat(os.path.join(events, name))
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or (kind not in any_age and not since <= st.st_mtime <= now + 60):
                continue
            yield st.st_mtime, job, task, kind


def named_events(d: str, jobs: set[int], kinds: Iterable[str], min_mtime: float | None = None, uid: int | None = None
                 ) -> Iterator[tuple[int, tuple[int | None, str], str]]:
    """(job, (task, kind), path) of the events of ``jobs`` of the given kinds in the user
    directory ``d`` (written since ``min_mtime``): one listing, the names of these jobs picked by
    their prefix before they are parsed (parse_event_names), only those stat'ed (and only
    with ``min_mtime``). Nothing is read here."""
    events = os.path.join(d, "events")
    try:
        names = os.listdir(events) if uid is None else list_events(events, uid)
    except OSError:
        return
    for job, keys in parse_event_names(names, jobs).items():
        for key, name in keys.items():
            if key[1] not in kinds:
                continue
            path = os.path.join(events, name)
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
    submit agent's lookup of a job that ended before it looked (agent.resolve)."""
    d = user_dir(cfg, None)
    if d is None:
        return None
    uid = os.getuid()
    try:
        it = os.scandir(os.path.join(d, "events"))
    except OSError:
        return None
    with it:
        for e in it:
            m = EVENT_NAME.fullmatch(e.name)
            if m is None or m[3] not in ("start", "end"):
                continue
            try:
                if e.stat(follow_symlinks=False).st_mtime < since:
                    continue
            except OSError:
                continue
            data = read_json(e.path, uid)
            if data is not None and data.get("sub") == sub:
                return int(m[1])
    return None


EVENT_KINDS = ("start", "end", "cancel", "suspend", "stop", "cont")


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


def next_step_id(cfg: Where, key: str, wait: float) -> int:
    """The next step id of a job: 0, 1, 2, ... A counter file in the user's private ``steps/``
    under an exclusive lock, so that concurrent sruns of one job (``srun a & srun b &``) get
    distinct ids. The file must be the user's own regular file (opened without following a link
    or blocking), and the lock is waited for at most ``wait`` seconds: OSError when either fails."""
    import errno
    import fcntl

    if not _KEY.fullmatch(key):
        raise OSError(errno.EINVAL, "not a job key", key)
    d = own_dir(cfg, "steps")
    if d is None:
        raise OSError(errno.EACCES, "no private directory in the state directory", os.path.join(root_of(cfg), "users"))
    path = os.path.join(d, key)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise OSError(errno.EPERM, "step counter is not the user's own file", path)
        deadline = time.monotonic() + wait
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise OSError(errno.EWOULDBLOCK, "step counter locked too long", path) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
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
    handed the id out again): the job's own and those of ``tasks`` (its array indices), by name,
    so the cost does not grow with the directory. With ``before``, only files last written before
    that time (the new job may already have started and written its own). Readers also tie every
    event to the job by its ``sub`` stamp; this keeps the user's directory from speaking of two jobs."""
    d = user_dir(cfg, None)
    if d is None:
        return
    ev = os.path.join(d, "events")
    for t in ("x", *(str(int(i)) for i in tasks)):
        for kind in EVENT_KINDS:
            path = os.path.join(ev, f"{int(job_id)}.{t}.{kind}.json")
            try:
                if before is None or os.lstat(path).st_mtime < before:
                    os.unlink(path)
            except OSError:
                pass


# ---------------------------------------------------------------------------------------------
# pruning

PRUNE_EVERY = 3600


def prune(cfg: Where, max_age: float, now: float | None = None,
          alive: Callable[[list[int]], set[int] | None] | None = None) -> int:
    """Remove the calling user's records older than ``max_age`` seconds, and the oldest beyond
    PRUNE_KEEP files of a directory, and (with ``alive``,
    prune_env) the private files of jobs Grid Engine no longer has, at most once an hour (a stamp
    file's mtime says when it last ran). Returns how many files went."""
    now = time.time() if now is None else now
    d = user_dir(cfg, None)
    if d is None:
        return 0
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
    gone = 0
    for sub in PUBLIC + PRIVATE:
        p = os.path.join(d, sub)
        try:
            it = os.scandir(p)
        except OSError:
            continue
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
        if sub in PUBLIC and len(kept) > PRUNE_KEEP:  # and the count: other users' commands list at most LIST_MAX (F-26)
            kept.sort()
            for _m, path in kept[:len(kept) - PRUNE_KEEP]:
                try:
                    os.unlink(path)
                    gone += 1
                except OSError:
                    pass
    if alive is not None:
        gone += prune_env(cfg, alive, now)
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
