"""What the shim remembers that Grid Engine does not: the Slurm side of each job.

Layout under the site config's ``cluster.state_dir`` (made by ``cluster up``/``install`` as root)::

    <state_dir>/                 root, 0755
    <state_dir>/users/           root, 1777 (sticky): each user makes their own directory here
    <state_dir>/users/<uid>/     that user, 0755: nobody else can add, replace or remove a file
        jobs/<id>.json           sbatch's record of the job (name, array index map, geometry, ...)
        events/<id>.<task>.<kind>.json   start/end (job wrapper), cancel/suspend (scancel, scontrol)
        steps/, srun/, env/      0700: step counters and records, allocations, srun tokens and
                                 payloads, a job's environment (files 0600)
    <state_dir>/gpus/            root, 1777: GPU device claims (see jobwrap.claim_gpus)

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
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Union

if TYPE_CHECKING:
    from .config import SiteConfig

Where = Union["SiteConfig", str]  # a site config, or the state directory itself
Owner = Union[int, str, None]     # a uid, a user name, or None for the calling user

MAX_BYTES = 1 << 20
PUBLIC = ("jobs", "events")       # other users' squeue/sacct read these
PRIVATE = ("steps", "srun", "env")  # only the owner's own commands and jobs read these (0700/0600)
SKEW = 300                        # seconds a record's "sub" may differ from Grid Engine's time
_NAME = re.compile(r"([0-9]{1,12})\.([0-9]{1,12}|x)\.([a-z]{1,16})\.json")
_DIGITS = re.compile(r"[0-9]{1,12}")


def debug(msg: str) -> None:
    if os.environ.get("SLURM_SHIM_DEBUG"):
        print(f"slurm-shim: state: {msg}", file=sys.stderr)


def root_of(cfg: Where) -> str:
    return cfg if isinstance(cfg, str) else cfg.cluster.state_dir


_uids: dict[str, int | None] = {}


def uid_of(owner: Owner) -> int | None:
    """A uid for a uid, a user name (None when unknown) or None (the calling user)."""
    if owner is None:
        return os.getuid()
    if isinstance(owner, int):
        return owner
    if owner.isascii() and owner.isdigit():
        return int(owner)
    if owner not in _uids:
        import pwd

        try:
            _uids[owner] = pwd.getpwnam(owner).pw_uid
        except (KeyError, OverflowError, ValueError):
            _uids[owner] = None
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


def user_dir(cfg: Where, owner: Owner) -> str | None:
    """The verified directory of a user's records, or None (absent, or not to be trusted)."""
    uid = uid_of(owner)
    if uid is None:
        return None
    users = os.path.join(root_of(cfg), "users")
    d = os.path.join(users, str(uid))
    return d if _shared_parent(users) and _trusted_dir(d, uid) else None


def own_dir(cfg: Where, sub: str) -> str | None:
    """The calling user's ``<sub>`` directory, made on first use; None if the state directory was
    not set up by an admin or someone else squats the user's name in it."""
    uid = os.getuid()
    users = os.path.join(root_of(cfg), "users")
    if not _shared_parent(users):
        return None
    d = os.path.join(users, str(uid))
    try:
        os.mkdir(d, 0o755)
    except FileExistsError:
        pass
    except OSError as e:
        debug(f"cannot make {d}: {e}")
        return None
    if not _trusted_dir(d, uid):
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


def read_json(path: str, uid: int | None = None) -> dict[str, Any] | None:
    """A JSON object from a regular file of ``uid`` (or root) no larger than MAX_BYTES; None for
    anything else. Never follows a link, never blocks on a FIFO, never raises."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
            debug(f"ignoring {path}: not a regular file of at most {MAX_BYTES} bytes")
            return None
        if uid is not None and st.st_uid not in (uid, 0):
            debug(f"ignoring {path}: owned by uid {st.st_uid}, not {uid}")
            return None
        raw = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def atomic_write(path: str, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` atomically and safely in a shared directory: a fresh name
    made exclusively (``mkstemp``) beside it, ``fchmod``, then ``os.replace``. Raises OSError."""
    import tempfile  # here, not at the top: it pulls in shutil (~3 ms), and most commands never write

    d, base = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=d or ".")
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
    """kind: "start", "end" (job wrapper), "cancel" (scancel), "suspend". task: Slurm's array
    index or None. False when it could not be written (the caller warns or carries on)."""
    t = "x" if task is None else str(int(task))
    data = {"t": time.time(), **data}
    return write_own(cfg, "events", f"{int(job_id)}.{t}.{kind}.json", data)


def user_dirs(cfg: Where) -> Iterator[tuple[int, str]]:
    """(uid, directory) of every user with trusted records."""
    users = os.path.join(root_of(cfg), "users")
    if not _shared_parent(users):
        return
    try:
        names = os.listdir(users)
    except OSError:
        return
    for n in names:
        if _DIGITS.fullmatch(n):
            d = os.path.join(users, n)
            if _trusted_dir(d, int(n)):
                yield int(n), d


def scan_events(cfg: Where, kinds: Iterable[str], since: float, now: float) -> Iterator[tuple[int, int, int | None, str]]:
    """(uid, job, task, kind) of events of the given kinds written in [since, now + 60]: the
    directory listing only (each file is checked when it is read)."""
    want = set(kinds)
    for uid, d in user_dirs(cfg):
        try:
            it = os.scandir(os.path.join(d, "events"))
        except OSError:
            continue
        with it:
            for e in it:
                m = _NAME.fullmatch(e.name)
                if m is None or m[3] not in want:
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode) or not since <= st.st_mtime <= now + 60:
                    continue
                yield uid, int(m[1]), None if m[2] == "x" else int(m[2]), m[3]


def list_submitted(cfg: Where, owner: Owner = None) -> list[int]:
    """Ids with a submit record of ``owner`` (the calling user by default)."""
    d = user_dir(cfg, owner)
    if d is None:
        return []
    try:
        names = os.listdir(os.path.join(d, "jobs"))
    except OSError:
        return []
    return sorted(int(n[:-5]) for n in names if n.endswith(".json") and _DIGITS.fullmatch(n[:-5]))


EVENT_KINDS = ("start", "end", "cancel", "suspend")


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


def prune(cfg: Where, max_age: float, now: float | None = None) -> int:
    """Remove the calling user's records older than ``max_age`` seconds, at most once an hour
    (a stamp file's mtime says when it last ran). Returns how many files went."""
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
        with it:
            for e in it:
                try:
                    if now - e.stat(follow_symlinks=False).st_mtime > max_age:
                        os.unlink(e.path)
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
