"""One shared answer per user for ``sbatch --wait`` (issue 29: a swarm's waiters).

Every waiting ``sbatch --wait`` of one user on one host shares one answer about which of the
user's waited jobs Grid Engine still has. Under the user's directory (``state.user_dir``)::

    waits/                     0700
      <host>/                  0700, one per host: a pid, the clock and the lock mean something on one host only
        <job>.<pid>            a waiter's registration (0600): its process's start time; removed when it returns
        answer.json            the last answer (0600): {"boot", "at", "asked": [ids], "gone": [ids] or null}
        lock                   flock'ed by the one waiter that is asking Grid Engine

A waiter whose ask is due (``Waiter.ask``) reads ``answer.json``: the user's own regular file of
at most ``state.MAX_BYTES``, opened without following a link (``state.read_small_file``);
anything else is no answer. An answer of this boot younger than ``share`` seconds that asked
about the waiter's job is its answer. One as young that did not (it was asked before the waiter
registered) is waited out: the waiter asks again when it turns ``share`` old. Otherwise the
waiter takes the lock (a holder is waited for at most LOCK_WAIT seconds), reads the answer again
(the holder has just written it), and only if it is still no answer, asks Grid Engine about every
registered job at once (``ask``: one ``qstat -j id,id,...`` per ASK_BATCH ids), dropping the
registrations of waiters that are gone (no process of that pid and start time, or older than
HORIZON), writes the answer atomically and lets go of the lock.

So N waiters of one user on one host cost qmaster at most one question per ``share`` seconds
together, not N; and a registration costs only while its waiter lives (the next asker drops a
dead one). Where no private directory of the user's own can be had, ``register`` says None and
the caller asks for its job alone, as before: never through a file others could write.

Nothing here asks Grid Engine: the caller passes ``ask`` (``operations/submit.wait_for``).
"""

from __future__ import annotations

import os
import re
import stat
import time

from . import state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

    Ask = Callable[[list[int]], "set[int] | None"]  # job ids -> those Grid Engine has (None: it would not say)

LOCK_WAIT = 20.0  # seconds a waiter waits for the asker's lock (its qstat is bounded by gridengine.timeout, 10 s)
ASK_BATCH = 2000  # job ids per question (one argument of at most ~22 KB)
HORIZON = 90 * 86400  # a registration older than this is dropped, live or not (submit.RECORD_MAX_AGE)
ANSWER = "answer.json"
LOCK = "lock"
_REGISTRATION = re.compile(r"([0-9]{1,12})\.([0-9]{1,10})")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def host_name() -> str:
    """This host's name as a directory name (a name it cannot be: a digest of it)."""
    name = os.uname().nodename
    return name if _HOST.fullmatch(name) else "host-" + state.sha256_hex(name.encode())[:16]


def _private_dir(path: str) -> bool:
    """``path`` made if absent, and a real directory of the calling user's closed to everyone else."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        state.debug(f"cannot make {path}: {e}")
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        state.debug(f"ignoring {path}: not a directory of uid {os.getuid()} closed to others")
        return False
    return True


_boot: list[str] = []


def boot_id() -> str:
    """This boot of the host (the monotonic clock starts again at each)."""
    if not _boot:
        got = state.read_small_file("/proc/sys/kernel/random/boot_id", 64)
        _boot.append(got[0].decode("ascii", "replace").strip() if got else "")
    return _boot[0]


def start_time(pid: int) -> str | None:
    """A process's start time (field 22 of /proc/<pid>/stat): with the pid, it names the process
    (a pid is used again); None when there is no such process. "" where /proc cannot say."""
    got = state.read_small_file(f"/proc/{pid}/stat", 4096)
    if got is None:
        if os.path.isdir("/proc/self"):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return None  # another user's process now: not the user's waiter
        except OSError:
            return ""
        return ""
    fields = got[0].rpartition(b")")[2].split()
    return fields[19].decode("ascii", "replace") if len(fields) > 19 else ""


def register(cfg: state.Where, job: int, share: float, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> Waiter | None:
    """Register a waiter of ``job``: a ``Waiter`` (``close`` it when it returns, whatever the
    path out), or None where no private directory of the user's own can be had (the caller then
    asks for its job alone)."""
    home = state.user_dir(cfg, None)
    if home is None:
        return None
    d = os.path.join(home, "waits")
    if not _private_dir(d):
        return None
    d = os.path.join(d, host_name())
    if not _private_dir(d):
        return None
    w = Waiter(d, int(job), share, clock, sleep)
    return w if w.enroll() else None


class Waiter:
    """One waiting command's registration and its use of the shared answer."""

    def __init__(self, d: str, job: int, share: float, clock: Callable[[], float], sleep: Callable[[float], None]):
        self.dir, self.job, self.share, self.clock, self.sleep = d, job, share, clock, sleep
        self.pid = os.getpid()
        self.path = os.path.join(d, f"{job}.{self.pid}")

    def enroll(self) -> bool:
        me = start_time(self.pid)
        try:
            state.atomic_write(self.path, me or "", 0o600)
            return True
        except OSError as e:
            state.debug(f"cannot write {self.path}: {e}")
            return False

    def close(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def _keep(self) -> None:
        """The registration stays young while its waiter lives (HORIZON), and is made again if an
        asker dropped it."""
        try:
            os.utime(self.path, follow_symlinks=False)
        except FileNotFoundError:
            self.enroll()
        except OSError:
            pass

    def answer(self) -> dict | None:
        """The shared answer, if it is one to trust and of this boot: the user's own regular file."""
        path = os.path.join(self.dir, ANSWER)
        got = state.read_small_file(path, state.MAX_BYTES, (os.getuid(),))
        if got is None:
            return None
        import json

        try:
            data = json.loads(got[0])
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None
        ok = (isinstance(data, dict) and data.get("boot") == boot_id() and type(data.get("at")) in (int, float)
              and _ids(data.get("asked")) and (data.get("gone") is None or _ids(data.get("gone"))))
        if not ok:
            state.debug(f"ignoring {path}: not an answer of this boot")
        return data if ok else None

    def _use(self, data: dict | None) -> tuple[bool | None, float | None] | None:
        """What a young answer says of this job (see ``ask``); None when it is old or absent."""
        if data is None:
            return None
        now = self.clock()
        if not 0 <= now - data["at"] < self.share:
            return None
        if self.job not in data["asked"]:
            return None, data["at"] + self.share  # asked before this waiter came: wait it out
        gone = data["gone"]
        return (None if gone is None else self.job not in gone), None

    def ask(self, ask: Ask) -> tuple[bool | None, float | None]:
        """(there, again): does Grid Engine still have the job (True, False; None when it would
        not say, or not yet), and when to ask again where that is not the usual next ask (None)."""
        self._keep()
        got = self._use(self.answer())
        if got is not None:
            return got
        fd = self._lock()
        if fd is None:  # the lock is held too long (or cannot be had): this waiter asks for itself
            found = ask([self.job])
            return (None if found is None else self.job in found), None
        try:
            got = self._use(self.answer())  # the holder we waited for has just answered
            if got is not None:
                return got
            jobs = self.registered()
            found = _ask_all(ask, jobs)
            gone = None if found is None else [j for j in jobs if j not in found]
            data = {"boot": boot_id(), "at": self.clock(), "asked": jobs, "gone": gone}
            state.write_json(os.path.join(self.dir, ANSWER), data, 0o600)
            return (None if found is None else self.job in found), None
        finally:
            os.close(fd)  # closing lets go of the lock

    def _lock(self) -> int | None:
        """The asker's lock, held (its fd; closing it lets go), waited for at most LOCK_WAIT;
        None when it is held longer or the file is not the user's own regular file."""
        path = os.path.join(self.dir, LOCK)
        try:
            return state.lock_own_file(path, LOCK_WAIT, self.clock, self.sleep)
        except OSError as e:
            state.debug(f"no lock {path}: {e}")
            return None

    def registered(self) -> list[int]:
        """The job ids of the live registrations (this waiter's always), sorted; the dead ones
        (no process of that pid and start time, or older than HORIZON) removed."""
        jobs = {self.job}
        now = time.time()
        try:
            with os.scandir(self.dir) as it:
                names = [(e.name, e.path) for e in it]
        except OSError:
            return [self.job]
        for name, path in names:
            m = _REGISTRATION.fullmatch(name)
            if m is None:
                continue
            job, pid = int(m[1]), int(m[2])
            if self._alive(path, pid, now):
                jobs.add(job)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass
        return sorted(jobs)

    def _alive(self, path: str, pid: int, now: float) -> bool:
        got = state.read_small_file(path, 64, (os.getuid(),))
        if got is None:
            return False
        try:
            if now - os.lstat(path).st_mtime > HORIZON:
                return False
        except OSError:
            return False
        started = start_time(pid)
        return started is not None and (started == "" or got[0].decode("ascii", "replace").strip() == started)


def _ids(v) -> bool:
    return isinstance(v, list) and all(type(x) is int for x in v)


def _ask_all(ask: Ask, jobs: list[int]) -> set[int] | None:
    """The jobs Grid Engine has, asked ASK_BATCH at a time; None when it would not say of any batch."""
    found: set[int] = set()
    for i in range(0, len(jobs), ASK_BATCH):
        got = ask(jobs[i:i + ASK_BATCH])
        if got is None:
            return None
        found |= got
    return found
