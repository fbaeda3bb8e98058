"""DRMAA submissions, a transport of the Grid Engine backend for ``submit`` only: sbatch hands its
qsub argv and job script to the user's daemon (service/server.py), whose one DRMAA session
submits it (~1.5 ms runJob) instead of a qsub process (~50-80 ms).
``GridEngineBackend.submit(..., agent=True)`` calls ``submit`` here when the site says ``[submit]
method = "agent"``, and qsub whenever the daemon KNOWS it did not submit. The daemon's side is
``Submitter``: the session lives in the daemon's own long-lived process, opened by its first
submission, never in a forked child (libdrmaa is not fork-safe).

No job lost or doubled: every job carries its request's token in its context, the daemon journals
``tokens/T`` before it replies, and a client that lost the reply resolves the token (journal,
then the user's jobs in Grid Engine, then the job wrapper's own record) before it may fall back to
qsub. Where the daemon lives, the protocol, and what the lookup cannot see: docs/service.md.
"""

from __future__ import annotations

import os
import sys
import time

from ..store import rundir
from ..store.rundir import service_dir

TOKEN_KEY = "slurm_shim_token"
MAX_SCRIPT = 256 << 20
# Variables qsub copies into the job as SGE_O_*: the daemon takes them from each request.
ORIGIN_ENV = ("HOME", "LOGNAME", "PATH", "MAIL", "SHELL", "TZ")
# Options a DRMAA template cannot carry as they are (refused; sbatch uses qsub).
UNSUPPORTED = frozenset({"-sync", "-b", "-shell", "-C", "-@", "-terse", "-verify", "-clear", "-now", "-js"})
DRMAA_LIBRARIES = ("/usr/lib/gridengine-drmaa/lib/libdrmaa.so.1.0",)
OPEN_WAIT = 2.0  # seconds a submission waits for the session to open when its client does not say
DISABLED_FOR = (600, 30)  # seconds of qsub after DRMAA could not start: no library / anything else


def _send(sock, obj: dict, data: bytes = b"") -> None:
    """The daemon's answer to a submission (one untagged JSON frame)."""
    rundir.send_json(sock, obj, data, tag=b"")


# --------------------------------------------------------------------------------------------
# Client: what sbatch calls


class Unresolved(Exception):
    """The daemon may have submitted the job and Grid Engine cannot tell: no fallback is safe."""


def submit(argv: list[str], script: bytes, cfg, backend, environ=None, user: str | None = None,
           seen=None) -> int | None:
    """Submit through the user's daemon: the job id, or None when it did NOT submit (use qsub).
    ``seen``: () -> the job's id once its job wrapper has recorded itself, else None (see resolve).

    Raises errors.BackendUnavailable when the outcome cannot be known (see the module doc)."""
    env = os.environ if environ is None else environ
    d = service_dir(env)
    if d is None or disabled(d):
        return None
    budget = float(getattr(cfg.gridengine, "timeout", 10.0) or 10.0)
    started, timeout = time.monotonic(), budget * 0.8  # the rest: the lookup after a silent daemon
    try:
        sock, pid = rundir.connect(d, timeout)
    except (FileNotFoundError, ConnectionRefusedError):
        rundir.start(d, env)
        return None
    except OSError:
        return None  # (another uid's socket: nothing was sent to it)
    try:
        token = os.urandom(12).hex()
        try:
            rundir.send_json(sock, request(argv, token, cfg, env, len(script), timeout * 0.6), script)
        except OSError:
            return None  # the daemon never got the whole request, and acts only on whole requests
        try:
            reply = rundir.recv_json(sock)
        except TimeoutError:
            _kill(pid)  # nothing may stay in flight before we look
            reply = {"status": "uncertain", "reason": f"no answer from the daemon within {timeout:g} s"}
        except (OSError, EOFError, ValueError) as e:
            reply = {"status": "uncertain", "reason": f"daemon lost: {e}"}
    finally:
        sock.close()
    status = reply.get("status")
    if status == "ok":
        return int(reply["job"])
    if status == "refused":
        return None
    from . import calls

    with calls.within(started + budget):  # one wait in all, as a qsub that does not answer
        return resolve(d, token, backend, user, reply.get("reason", ""), seen)


def request(argv: list[str], token: str, cfg, env, script_len: int, open_wait: float = 0.0) -> dict:
    """The submission's JSON header: the qsub argv, the client's directory and SGE_O_* variables,
    and the cell the site config names (engine.ge_env): the daemon's session is opened for the
    first cell it is asked for, and refuses another's."""
    ge = cfg.gridengine
    return {
        "kind": "submit", "token": token, "argv": list(argv), "cwd": os.getcwd(),
        "env": {k: env[k] for k in ORIGIN_ENV if k in env},
        "sge_root": ge.sge_root, "sge_cell": ge.sge_cell, "sge_port": str(getattr(ge, "qmaster_port", 0) or ""),
        "sge_execd_port": str(getattr(ge, "execd_port", 0) or ""),
        "drmaa_library": str(getattr(ge, "drmaa_library", "") or ""), "script_len": script_len,
        # how long the client lets the daemon wait for its session to open (the rest of its wait is
        # runJob's and the reply's): past it, not submitted (Submitter.open_within)
        "open_wait": round(open_wait, 3) if open_wait > 0 else OPEN_WAIT,
    }


def disabled(d: str) -> bool:
    """DRMAA could not start in d's daemon a moment ago: qsub until the time it wrote."""
    try:
        with open(os.path.join(d, rundir.DISABLED), encoding="ascii") as f:
            return float(f.read().split()[0]) > time.time()
    except (OSError, ValueError, IndexError):
        return False


def _kill(pid: int) -> None:
    """SIGKILL the daemon and wait (2 s at most) until it is gone or a zombie."""
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return
        except (OSError, IndexError):
            return
        time.sleep(0.01)


SETTLE = 1.0  # seconds between the two looks of resolve


def resolve(d: str, token: str, backend, user: str | None, why: str = "", seen=None) -> int | None:
    """Did the daemon submit token's job? Its id, or None (it did not). Raises BackendUnavailable.

    Where it looks: the daemon's journal; the user's jobs in Grid Engine whose context holds the
    token; and ``seen()``, the job wrapper's own record of this submission, for a job that already
    ran and left qstat (a runJob whose answer was lost can return long after qmaster stored the
    job: CI saw a ``true`` job doubled so). Not found: one more look of both after SETTLE seconds,
    for a request qmaster was still processing when the daemon died; then None."""
    from ..errors import BackendUnavailable

    path = os.path.join(d, "tokens", token)
    try:
        with open(path, encoding="ascii") as f:
            job = int(f.read().split()[0])
        os.unlink(path)
        return job
    except (OSError, ValueError, IndexError):
        pass
    try:
        for look in range(2):
            if look:
                time.sleep(SETTLE)
            job = find_token(token, backend, user)
            if job is None and seen is not None:
                job = seen()
            if job is not None:
                return job
        return None
    except Unresolved as e:
        raise BackendUnavailable(
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
            f"sbatch: error: ({why}; {e})" if why else f"sbatch: error: ({e})",
        ) from None


def find_token(token: str, backend, user: str | None = None) -> int | None:
    """The job of user whose context holds slurm_shim_token=token, or None. Raises Unresolved."""
    if user is None:
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
    from .engine import Refused

    try:
        ids = backend.user_job_ids(user)[::-1]
    except Refused as e:
        raise Unresolved(f"qstat: {e.text}") from None
    want = f"{TOKEN_KEY}={token}"
    start, size = 0, 20  # newest first: the job sought was submitted a moment ago
    while start < len(ids):
        chunk = ids[start:start + size]
        res = backend.detail_text(chunk)
        for job, context in parse_contexts(res.stdout):
            if want in context:
                return job
        start, size = start + size, 500
    return None


def parse_contexts(text: str) -> list[tuple[int, list[str]]]:
    """(job id, context items) for each job of ``qstat -j`` text output."""
    out: list[tuple[int, list[str]]] = []
    job = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "job_number":
            job = int(value.strip())
            out.append((job, []))
        elif key == "context" and job is not None:
            out[-1] = (job, value.strip().split(","))
    return out


# --------------------------------------------------------------------------------------------
# The daemon's side: Submitter (service/server.py runs it in a thread of its own process)


def native_spec(argv: list[str], token: str, cwd: str | None = None) -> tuple[str, tuple[int, int, int] | None]:
    """sbatch's qsub argv as a DRMAA native specification (+ the -t range for runBulkJobs).

    The daemon never changes into the client's directory (qsub would read a ``./.sge_request``
    planted there), so ``-cwd`` becomes ``-wd <the client's directory>``.
    Raises ValueError for what a native specification cannot carry as qsub would read it."""
    out = ["-w", "n", "-shell", "yes"]  # qsub's defaults where DRMAA's differ (-w w, -shell no)
    bulk = None
    it = iter(argv)
    for a in it:
        if a == "-terse":
            continue
        if a == "-cwd":
            if not cwd or not os.path.isabs(cwd):
                raise ValueError("-cwd without the client's directory")
            a, more = "-wd", cwd
        else:
            more = None
        for w in (a,) if more is None else (a, more):
            if not w or any(c.isspace() or c in "\"'\\" for c in w):
                raise ValueError(f"argument {w!r} cannot be passed in a native specification")
        if more is not None:
            out += [a, more]
            continue
        if a in UNSUPPORTED:
            raise ValueError(f"{a} is not for DRMAA")
        if a == "-t":
            spec = next(it, "")
            bulk = _task_range(spec)
            continue
        out.append(a)
    out += ["-b", "n", "-ac", f"{TOKEN_KEY}={token}"]
    return " ".join(out), bulk


def _task_range(spec: str) -> tuple[int, int, int]:
    rng, _, step = spec.partition(":")
    lo, _, hi = rng.partition("-")
    first = int(lo)
    last = int(hi) if hi else first
    incr = int(step) if step else 1
    if first < 1 or last < first or incr < 1:
        raise ValueError(f"bad task range {spec!r}")
    return first, last, incr


class Submitter:
    """The daemon's DRMAA side. Its session lives in the daemon's own long-lived process and is
    used only from its submission threads, never from a forked child: the children that run served
    commands are forked by the daemon's main thread, which never touches the session, and a served
    sbatch reaches it back over the socket like any other client. One submission at a time
    (``lock``: the SGE_O_* variables are the process's). ``guard`` is the daemon's fork lock: held
    while this changes os.environ, so no child is forked halfway through a change. ``retire``: called
    after an answer that may have been lost (the daemon then leaves, and the next submission gets a
    fresh process and session)."""

    def __init__(self, d: str, guard, log, retire):
        import threading

        self.d, self.guard, self.log, self.retire = d, guard, log, retire
        self.lock = threading.Lock()
        self.session = None
        self.drmaa = None
        self.opener = None  # the thread opening the session, while it takes longer than OPEN_WAIT
        self.opened: dict = {}
        self.cell: tuple | None = None  # (sge_root, sge_cell, qmaster port) of the open session
        self.served = 0
        self.run_seconds = 0.0  # time inside runJob, for the benchmark
        for sub in ("spool", "tokens"):
            os.makedirs(os.path.join(d, sub), mode=0o700, exist_ok=True)
        _sweep(os.path.join(d, "spool"), 0)
        _sweep(os.path.join(d, "tokens"), 86400)

    def _setenv(self, values: dict) -> None:
        with self.guard:
            for k, v in values.items():
                if v:
                    os.environ[k] = v
                else:
                    os.environ.pop(k, None)

    def open_within(self, req: dict, wait: float) -> str | None:
        """``open_session``, but a submission waits at most ``wait`` seconds for it: a session that
        takes longer (a qmaster slow to register its event client, as Open Cluster Scheduler's can be
        right after a killed client's) goes on opening in its thread, and this submission is refused
        (not submitted: the client uses qsub) rather than left to time out uncertain. Under ``lock``."""
        import threading

        if self.session is not None:
            return self.open_session(req)  # (the cell check)
        if self.opener is None:
            opened: dict = {}
            self.opener, self.opened = threading.Thread(
                target=lambda: opened.setdefault("why", self.open_session(req)), daemon=True), opened
            self.opener.start()
        self.opener.join(wait)
        if self.opener.is_alive():
            return "the DRMAA session is still opening"
        self.opener = None
        return self.opened.get("why") if self.session is None else self.open_session(req)

    def open_session(self, req: dict) -> str | None:
        """Open the session for the request's cell (the first submission's); None, or why not. When
        DRMAA cannot start, submissions go to qsub for a while (``rundir.DISABLED``)."""
        cell = (req.get("sge_root"), req.get("sge_cell"), req.get("sge_port") or "")
        if self.session is not None:
            return None if cell == self.cell else "another Grid Engine cell"
        if not all(isinstance(v, str) for v in (*cell, req.get("sge_execd_port", ""), req.get("drmaa_library", ""))):
            return "malformed request"
        self._setenv({"SGE_ROOT": cell[0], "SGE_CELL": cell[1], "SGE_QMASTER_PORT": cell[2],
                      "SGE_EXECD_PORT": req.get("sge_execd_port", ""),
                      "DRMAA_LIBRARY_PATH": req.get("drmaa_library") or os.environ.get("DRMAA_LIBRARY_PATH", "")})
        try:
            if not os.path.exists(os.environ.get("DRMAA_LIBRARY_PATH", "")):
                self._setenv({"DRMAA_LIBRARY_PATH": find_library()})
            import drmaa

            session = drmaa.Session()
            session.initialize()
        except BaseException as e:  # no library, no qmaster, ...: clients use qsub for a while
            retry = DISABLED_FOR[0] if isinstance(e, (ImportError, RuntimeError, OSError)) else DISABLED_FOR[1]
            self.log(f"DRMAA unavailable ({type(e).__name__}: {e}); qsub for {retry} s")
            tmp = os.path.join(self.d, rundir.DISABLED + ".new")
            _unlink(tmp)
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="ascii") as f:
                f.write(f"{time.time() + retry}\n{e}\n")
            os.replace(tmp, os.path.join(self.d, rundir.DISABLED))
            return f"DRMAA unavailable: {e}"
        _unlink(os.path.join(self.d, rundir.DISABLED))
        self.drmaa, self.session, self.cell = drmaa, session, cell
        self.log(f"DRMAA session open for {cell[0]} {cell[1]}")
        return None

    def run_job(self, native: str, bulk, script_path: str) -> int:
        s = self.session
        jt = s.createJobTemplate()
        try:
            jt.remoteCommand = script_path
            jt.nativeSpecification = native
            if bulk:
                ids = s.runBulkJobs(jt, *bulk)
                return int(str(ids[0]).split(".")[0])
            return int(str(s.runJob(jt)).split(".")[0])
        finally:
            try:
                s.deleteJobTemplate(jt)
            except Exception:
                pass

    def definite(self, e: Exception) -> bool:
        """DRMAA errors that mean: rejected before qmaster stored anything."""
        d = self.drmaa.errors
        return isinstance(e, (d.DeniedByDrmException, d.InvalidArgumentException, d.InvalidAttributeValueException,
                              d.InvalidAttributeFormatException, d.ConflictingAttributeValuesException,
                              d.UnsupportedAttributeException, d.InvalidJobTemplateException,
                              d.AuthorizationException, d.TryLaterException, d.NoActiveSessionException))

    def handle(self, conn, req: dict) -> None:
        """One submission whose JSON header the daemon has read: check it, read the script, submit."""
        token, n = req.get("token"), req.get("script_len")
        if not isinstance(token, str) or not token.isascii() or not token.isalnum() or len(token) > 64:
            return _send(conn, {"status": "refused", "reason": "bad token"})
        if not isinstance(n, int) or not 0 < n <= MAX_SCRIPT:
            return _send(conn, {"status": "refused", "reason": "bad script length"})
        argv, env, cwd = req.get("argv", []), req.get("env") or {}, req.get("cwd")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or not isinstance(env, dict) \
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()) \
                or not (cwd is None or isinstance(cwd, str)):
            return _send(conn, {"status": "refused", "reason": "malformed request"})  # checked before any state
        try:
            native, bulk = native_spec(argv, token, cwd)
        except ValueError as e:
            return _send(conn, {"status": "refused", "reason": str(e)})
        script = rundir.recv_exact(conn, n)  # the whole request, or nothing is done
        wait = req.get("open_wait")
        wait = float(wait) if type(wait) in (int, float) and 0 < wait <= 60 else OPEN_WAIT
        with self.lock:
            why = self.open_within(req, wait)
            if why:
                return _send(conn, {"status": "refused", "reason": why})
            job, error = self._submit(native, bulk, script, token, env)
            self.served += error is None
        if error is not None:
            definite = isinstance(error, OSError) or self.definite(error)
            self.log(f"runJob failed ({'rejected' if definite else 'outcome unknown'}): {type(error).__name__}: {error}")
            _send(conn, {"status": "refused" if definite else "uncertain", "reason": str(error)})
            if not definite or isinstance(error, self.drmaa.errors.NoActiveSessionException):
                self.retire()  # an answer lost on its way (a qmaster restarted under the session, ...)
            return None
        _send(conn, {"status": "ok", "job": job})  # if this fails the journal stays for sbatch to read
        _unlink(os.path.join(self.d, "tokens", token))
        return None

    def _submit(self, native: str, bulk, script: bytes, token: str, env: dict):
        """(job id, None) once runJob returned and the journal holds the id; (None, error) else (an
        OSError: the script could not be spooled, nothing was submitted). From "/", never the
        client's directory (a ./.sge_request there must add nothing; the job's directory is explicit)."""
        path = os.path.join(self.d, "spool", token)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(script)
        except OSError as e:
            _unlink(path)
            return None, e
        self._setenv({k: env.get(k, "") for k in ORIGIN_ENV})  # what qsub records as sge_o_home, ...
        t0 = time.perf_counter()
        try:
            job = self.run_job(native, bulk, path)
        except Exception as e:  # DRMAA's errors, and whatever else: the caller classifies them
            return None, e
        finally:
            self.run_seconds += time.perf_counter() - t0
            _unlink(path)  # with -b n Grid Engine spooled the script inside runJob
        with open(os.path.join(self.d, "tokens", token), "w", encoding="ascii") as f:
            f.write(f"{job}\n")
        return job, None

    def close(self, within: float = 5.0) -> None:
        """drmaa_exit deregisters the session's event client at qmaster; with qmaster gone it can
        block forever (seen), so it gets ``within`` seconds in a thread of its own."""
        import threading

        if self.session is None:
            return
        session, self.session = self.session, None

        def close() -> None:
            try:
                session.exit()
            except Exception:
                pass

        t = threading.Thread(target=close, daemon=True)
        t.start()
        t.join(within)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _sweep(d: str, age: float) -> None:
    now = time.time()
    try:
        names = os.listdir(d)
    except OSError:
        return
    for n in names:
        p = os.path.join(d, n)
        try:
            if now - os.stat(p).st_mtime >= age:
                os.unlink(p)
        except OSError:
            pass


def find_library() -> str:
    """libdrmaa: $DRMAA_LIBRARY_PATH, Debian's package, or under $SGE_ROOT/lib."""
    import glob

    env = os.environ.get("DRMAA_LIBRARY_PATH")
    if env and os.path.exists(env):
        return env
    root = os.environ.get("SGE_ROOT", "/var/lib/gridengine")
    for p in (*DRMAA_LIBRARIES, *sorted(glob.glob(os.path.join(root, "lib", "*", "libdrmaa.so*"))),
              *sorted(glob.glob("/usr/lib/*/libdrmaa.so*"))):
        if os.path.exists(p):
            return p
    raise OSError("libdrmaa not found (install gridengine-drmaa1.0 or set DRMAA_LIBRARY_PATH)")


