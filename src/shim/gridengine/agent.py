"""The per-user submit agent, a transport of the Grid Engine backend for ``submit`` only: one
long-lived process per user holding a DRMAA session behind a private unix socket (SO_PEERCRED
checked both ways), so a submission costs a socket round trip (~1.5 ms runJob) instead of a qsub
process (~50-80 ms). ``GridEngineBackend.submit(..., agent=True)`` calls ``submit`` here when the
site says ``[submit] method = "agent"``, and qsub whenever the agent KNOWS it did not submit.

No job lost or doubled: every job carries its request's token in its context, the agent journals
``tokens/T`` before it replies, and a client that lost the reply resolves the token (journal,
then the user's jobs in Grid Engine) before it may fall back to qsub. Where the agent lives, the
protocol, and what the lookup cannot see: docs/agent.md.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import sys
import time

from ..store.rundir import service_dir

TOKEN_KEY = "slurm_shim_token"
SOCKET = "agent.sock"
LOCK = "agent.lock"
LOG = "agent.log"
STARTING = "agent.starting"  # a client is starting an agent: others do not start one too
DISABLED = "agent.disabled"  # DRMAA could not start: clients use qsub until the time inside
STARTING_FRESH = 10.0
PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
FRAME = struct.Struct("!I")
MAX_HEADER = 1 << 20
MAX_SCRIPT = 256 << 20
MAX_CONNECTIONS = 64  # connection threads at once (submissions are serial anyway)
# Variables qsub copies into the job as SGE_O_*: the agent takes them from each request.
ORIGIN_ENV = ("HOME", "LOGNAME", "PATH", "MAIL", "SHELL", "TZ")
# Options a DRMAA template cannot carry as they are (the agent refuses; sbatch uses qsub).
UNSUPPORTED = frozenset({"-sync", "-b", "-shell", "-C", "-@", "-terse", "-verify", "-clear", "-now", "-js"})
DRMAA_LIBRARIES = ("/usr/lib/gridengine-drmaa/lib/libdrmaa.so.1.0",)
STATIC_TLS = "glibc.rtld.optional_static_tls=4096"


# --------------------------------------------------------------------------------------------
# Where the agent lives


# One rule for the user's private directory, the warm service's too (store/rundir.py imports only os
# and sys, so it costs the agent's clients nothing).
agent_dir = service_dir


# --------------------------------------------------------------------------------------------
# Frames


def _send(sock: socket.socket, obj: dict, data: bytes = b"") -> None:
    body = json.dumps(obj, separators=(",", ":")).encode()
    sock.sendall(FRAME.pack(len(body)) + body + data)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket) -> dict:
    (n,) = FRAME.unpack(_recv_exact(sock, FRAME.size))
    if n > MAX_HEADER:
        raise ValueError("frame too large")
    obj = json.loads(_recv_exact(sock, n))
    if not isinstance(obj, dict):
        raise ValueError("frame is not an object")
    return obj


def peer(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end."""
    return PEERCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEERCRED.size))


# --------------------------------------------------------------------------------------------
# Client: what sbatch calls


class Unresolved(Exception):
    """The agent may have submitted the job and Grid Engine cannot tell: no fallback is safe."""


def submit(argv: list[str], script: bytes, cfg, backend, environ=None, user: str | None = None,
           seen=None) -> int | None:
    """Submit through the agent: the job id, or None when the agent did NOT submit (use qsub).
    ``seen``: () -> the job's id once its job wrapper has recorded itself, else None (see resolve).

    Raises errors.BackendUnavailable when the outcome cannot be known (see the module doc)."""
    env = os.environ if environ is None else environ
    d = agent_dir(env)
    if d is None:
        return None
    budget = float(getattr(cfg.gridengine, "timeout", 10.0) or 10.0)
    started, timeout = time.monotonic(), budget * 0.8  # the rest: the lookup after a silent agent
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(os.path.join(d, SOCKET))
        except (FileNotFoundError, ConnectionRefusedError):
            start(d, cfg, env)
            return None
        except OSError:
            return None
        try:
            pid, uid, _ = peer(sock)
        except OSError:
            return None
        if uid != os.getuid():
            return None
        token = os.urandom(12).hex()
        ge = cfg.gridengine
        request = {
            "op": "submit", "token": token, "argv": list(argv), "cwd": os.getcwd(),
            "env": {k: env[k] for k in ORIGIN_ENV if k in env},
            # the cell the site config names (engine.ge_env); an agent of another cell refuses
            "sge_root": ge.sge_root, "sge_cell": ge.sge_cell, "sge_port": str(getattr(ge, "qmaster_port", 0) or ""),
            "script_len": len(script),
        }
        try:
            _send(sock, request, script)
        except OSError:
            return None  # the agent never got the whole request, and acts only on whole requests
        try:
            reply = _recv(sock)
        except socket.timeout:
            _kill(pid)  # nothing may stay in flight before we look
            reply = {"status": "uncertain", "reason": f"no answer from the submit agent within {timeout:g} s"}
        except (OSError, EOFError, ValueError) as e:
            reply = {"status": "uncertain", "reason": f"submit agent lost: {e}"}
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


def _kill(pid: int) -> None:
    """SIGKILL the agent and wait (2 s at most) until it is gone or a zombie."""
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
    """Did the agent submit token's job? Its id, or None (it did not). Raises BackendUnavailable.

    Where it looks: the agent's journal; the user's jobs in Grid Engine whose context holds the
    token; and ``seen()``, the job wrapper's own record of this submission, for a job that already
    ran and left qstat (a runJob whose answer was lost can return long after qmaster stored the
    job: CI saw a ``true`` job doubled so). Not found: one more look of both after SETTLE seconds,
    for a request qmaster was still processing when the agent died; then None."""
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


def start(d: str, cfg, environ) -> bool:
    """Start an agent for directory d, detached, unless one is starting or DRMAA was found wanting.

    Not from inside a Grid Engine job: the execd kills what a job leaves behind when it ends."""
    if "JOB_ID" in environ and environ.get("ENVIRONMENT") == "BATCH":
        return False
    now = time.time()
    try:
        with open(os.path.join(d, DISABLED), encoding="ascii") as f:
            if float(f.read().split()[0]) > now:
                return False
    except (OSError, ValueError, IndexError):
        pass
    from .. import proc

    from .engine import ge_env

    ge = cfg.gridengine
    env = ge_env(cfg, dict(environ))  # the agent serves the site's cell, whatever the caller's environment says
    if getattr(ge, "drmaa_library", ""):
        env["DRMAA_LIBRARY_PATH"] = ge.drmaa_library  # the cell's own libdrmaa
    env["SLURM_SHIM_AGENT_DIR"] = d
    idle = getattr(getattr(cfg, "submit", None), "agent_idle_minutes", None)
    if idle is not None and "SLURM_SHIM_AGENT_IDLE" not in env:
        env["SLURM_SHIM_AGENT_IDLE"] = str(float(idle) * 60)
    _tls(env)
    return proc.start_once(d, STARTING, STARTING_FRESH, serve_argv(), env, LOG)


def serve_argv() -> list[str]:
    """The command that runs an agent, with this checkout's package on the path (as the job wrapper)."""
    from .. import proc

    return proc.shim_python("gridengine.agent", "main", "sys.exit(main(['serve']))")


def _tls(env: dict) -> None:
    """libdrmaa pulls in libjemalloc, whose TLS needs static TLS room glibc only gives on request."""
    tun = env.get("GLIBC_TUNABLES", "")
    if "optional_static_tls" not in tun:
        env["GLIBC_TUNABLES"] = f"{tun}:{STATIC_TLS}" if tun else STATIC_TLS


def request(d: str, obj: dict, timeout: float = 10.0) -> dict:
    """One request (ping, stop) to the agent of d; raises OSError when none answers."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(os.path.join(d, SOCKET))
        if peer(sock)[1] != os.getuid():
            raise PermissionError("the agent socket belongs to another user")
        _send(sock, obj)
        try:
            return _recv(sock)
        except EOFError as e:
            raise ConnectionResetError(str(e)) from None
    finally:
        sock.close()


# --------------------------------------------------------------------------------------------
# Server: the agent


def native_spec(argv: list[str], token: str, cwd: str | None = None) -> tuple[str, tuple[int, int, int] | None]:
    """sbatch's qsub argv as a DRMAA native specification (+ the -t range for runBulkJobs).

    The agent never changes into the client's directory (qsub would read a ``./.sge_request``
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


class Agent:
    def __init__(self, d: str, idle: float, serial: bool):
        import threading

        self.d, self.idle, self.serial = d, idle, serial
        self.lock = threading.Lock()  # one submission at a time: os.environ is per process
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)  # connection threads at once
        self.count_lock = threading.Lock()
        self.active = 0
        self.served = 0
        self.run_seconds = 0.0  # time inside runJob, for the benchmark
        self.last = time.monotonic()
        self.started = time.time()
        self.stopping = False
        self.session = None
        self.drmaa = None
        self.sge = (os.environ.get("SGE_ROOT", ""), os.environ.get("SGE_CELL", "default"),
                    os.environ.get("SGE_QMASTER_PORT", ""))

    def log(self, msg: str) -> None:
        sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} agent[{os.getpid()}]: {msg}\n")
        sys.stderr.flush()

    # -- DRMAA
    def open_session(self) -> None:
        os.environ.setdefault("DRMAA_LIBRARY_PATH", find_library())
        import drmaa

        self.drmaa = drmaa
        s = drmaa.Session()
        s.initialize()
        self.session = s

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

    # -- requests
    def handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(30)
            if peer(conn)[1] != os.getuid():
                return
            req = _recv(conn)
            op = req.get("op")
            if op == "submit":
                n = int(req.get("script_len", 0))
                if not 0 < n <= MAX_SCRIPT:
                    _send(conn, {"status": "refused", "reason": "bad script length"})
                    return
                script = _recv_exact(conn, n)
                self.submit(conn, req, script)
            elif op == "ping":
                _send(conn, {"status": "ok", "pid": os.getpid(), "served": self.served, "serial": self.serial,
                             "run_seconds": round(self.run_seconds, 6),
                             "started": self.started, "idle": self.idle})
            elif op == "stop":
                self.stopping = True
                _send(conn, {"status": "ok", "pid": os.getpid()})
            else:
                _send(conn, {"status": "refused", "reason": f"unknown op {op!r}"})
        except (OSError, EOFError, ValueError) as e:
            if not isinstance(e, EOFError):
                self.log(f"request dropped: {e}")
        except Exception as e:  # a malformed request must never take the agent down
            self.log(f"request dropped: {type(e).__name__}: {e}")
        finally:
            conn.close()
            with self.count_lock:
                self.active -= 1
                self.last = time.monotonic()

    def submit(self, conn: socket.socket, req: dict, script: bytes) -> None:
        token = req.get("token")
        if not isinstance(token, str) or not token.isascii() or not token.isalnum() or len(token) > 64:
            _send(conn, {"status": "refused", "reason": "bad token"})
            return
        if (req.get("sge_root"), req.get("sge_cell"), req.get("sge_port") or "") != self.sge:
            _send(conn, {"status": "refused", "reason": "another Grid Engine cell"})
            return
        argv, env, cwd = req.get("argv", []), req.get("env") or {}, req.get("cwd")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or not isinstance(env, dict) \
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()) \
                or not (cwd is None or isinstance(cwd, str)):
            _send(conn, {"status": "refused", "reason": "malformed request"})  # checked before any state
            return
        try:
            native, bulk = native_spec(argv, token, cwd)
        except ValueError as e:
            _send(conn, {"status": "refused", "reason": str(e)})
            return
        path = os.path.join(self.d, "spool", token)
        journal = os.path.join(self.d, "tokens", token)
        with self.lock:
            # No chdir into the client's directory: the agent stays in "/" (a ./.sge_request in a
            # directory others can write must not add options; the job's directory is explicit).
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(script)
            except OSError as e:
                _unlink(path)
                _send(conn, {"status": "refused", "reason": str(e)})
                return
            for k in ORIGIN_ENV:  # what qsub would record as sge_o_home, sge_o_path, ...
                if k in env:
                    os.environ[k] = env[k]
                else:
                    os.environ.pop(k, None)
            t0 = time.perf_counter()
            try:
                job = self.run_job(native, bulk, path)
                error = None
            except Exception as e:  # DRMAA's errors, and whatever else: classified below
                job, error = None, e
            finally:
                self.run_seconds += time.perf_counter() - t0
                _unlink(path)  # with -b n Grid Engine spooled the script inside runJob
            if job is not None:
                with open(journal, "w", encoding="ascii") as f:
                    f.write(f"{job}\n")
        if error is not None:
            definite = self.drmaa is not None and self.definite(error)
            self.log(f"runJob failed ({'rejected' if definite else 'outcome unknown'}): "
                     f"{type(error).__name__}: {error}")
            _send(conn, {"status": "refused" if definite else "uncertain", "reason": str(error)})
            if not definite or isinstance(error, self.drmaa.errors.NoActiveSessionException):
                self.stopping = True  # an answer lost on its way (a qmaster restarted under the
                # session, ...): the next request gets a fresh agent and session
            return
        self.served += 1
        _send(conn, {"status": "ok", "job": job})  # if this fails the journal stays for sbatch to read
        _unlink(journal)

    # -- main loop
    def serve(self) -> int:
        """The submit agent's loop, from start to exit. Start: take the directory's lock (another
        agent holds it: exit 0), keep the log small, sweep old spool and token files, open the
        DRMAA session (when it cannot: record until when clients use qsub, exit 1), bind the 0600
        socket. Loop: accept a client at a time and dispatch its submission (a thread each, or in
        turn when ``serial``), until idle for ``idle`` s, a ``stop`` request, a submission whose
        answer may be lost (the next gets a fresh agent), or the socket is no longer its own. Leave: unlink the socket first so that new clients start another agent, serve those
        already connected, release the lock, wait for the running submissions, and close the
        DRMAA session within 5 s before the process ends (os._exit)."""
        import fcntl
        import threading

        lockf = os.open(os.path.join(self.d, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            _unlink(os.path.join(self.d, STARTING))
            return 0  # another agent serves this directory
        try:
            if os.fstat(2).st_size > (1 << 20) and stat.S_ISREG(os.fstat(2).st_mode):
                os.ftruncate(2, 0)  # the log: a line per start and exit, and errors; kept small
        except OSError:
            pass
        for sub in ("spool", "tokens"):
            os.makedirs(os.path.join(self.d, sub), mode=0o700, exist_ok=True)
        _sweep(os.path.join(self.d, "spool"), 0)
        _sweep(os.path.join(self.d, "tokens"), 86400)
        try:
            self.open_session()
        except BaseException as e:  # no library, no qmaster, ...: clients use qsub for a while
            retry = 600 if isinstance(e, (ImportError, RuntimeError, OSError)) else 30
            self.log(f"DRMAA unavailable ({type(e).__name__}: {e}); qsub for {retry} s")
            with open(os.path.join(self.d, DISABLED), "w", encoding="ascii") as f:
                f.write(f"{time.time() + retry}\n{e}\n")
            _unlink(os.path.join(self.d, STARTING))
            return 1
        _unlink(os.path.join(self.d, DISABLED))
        path = os.path.join(self.d, SOCKET)
        _unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen(256)
        ino = os.stat(path).st_ino
        _unlink(os.path.join(self.d, STARTING))
        self.log(f"serving {path} ({'serial' if self.serial else 'threaded'}, idle exit {self.idle:g} s)")
        threads: list[threading.Thread] = []
        while not self.stopping:
            with self.count_lock:
                idle_for = time.monotonic() - self.last if self.active == 0 else 0.0
            if idle_for >= self.idle:
                break
            sock.settimeout(max(0.05, min(self.idle - idle_for, 1.0)))
            try:
                conn, _ = sock.accept()
            except socket.timeout:
                try:
                    if os.stat(path).st_ino != ino:
                        self.log("socket replaced: exiting")
                        ino = None
                        break
                except OSError:
                    self.log("socket removed: exiting")
                    ino = None
                    break
                continue
            self.dispatch(conn, threads)
            threads = [t for t in threads if t.is_alive()]
        # Leave: first stop new clients from finding us, then serve whoever already connected.
        if ino is not None:
            try:
                if os.stat(path).st_ino == ino:
                    os.unlink(path)
            except OSError:
                pass
        sock.setblocking(False)
        while True:
            try:
                conn, _ = sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            conn.setblocking(True)
            with self.count_lock:
                self.active += 1
            self.handle(conn)
        sock.close()
        os.close(lockf)  # a new agent may start now; this one only finishes what it has
        for t in threads:
            t.join(30)
        self.log(f"exit after {self.served} submissions")
        # drmaa_exit deregisters the session's event client at qmaster; with qmaster gone it can
        # block forever (seen), so it gets 5 s, and the process ends without libdrmaa's atexit.
        closer = threading.Thread(target=self._close_session, daemon=True)
        closer.start()
        closer.join(5)
        os._exit(0)

    def _close_session(self) -> None:
        try:
            self.session.exit()
        except Exception:
            pass

    def dispatch(self, conn: socket.socket, threads: list) -> None:
        import threading

        with self.count_lock:
            self.active += 1
            self.last = time.monotonic()
        if self.serial:
            self.handle(conn)
            return
        self.slots.acquire()  # at most MAX_CONNECTIONS at once; the others wait in the backlog

        def run() -> None:
            try:
                self.handle(conn)
            finally:
                self.slots.release()

        t = threading.Thread(target=run, daemon=True)
        t.start()
        threads.append(t)


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


def main(argv: list[str] | None = None) -> int:
    """python -m shim.agent serve|ping|stop (shim/agent.py keeps the old name): serve is what
    sbatch starts; the others are for admins and tests."""
    args = sys.argv[1:] if argv is None else argv
    cmd = args[0] if args else "ping"
    d = agent_dir()
    if d is None:
        print("slurm-shim agent: no private directory for the agent", file=sys.stderr)
        return 1
    if cmd == "serve":
        if "optional_static_tls" not in os.environ.get("GLIBC_TUNABLES", "") and \
                "jemalloc" not in os.environ.get("LD_PRELOAD", ""):
            from .. import proc

            env = dict(os.environ)
            _tls(env)
            proc.execvpe(serve_argv(), env)
        os.chdir("/")
        idle = float(os.environ.get("SLURM_SHIM_AGENT_IDLE") or 600)
        serial = os.environ.get("SLURM_SHIM_AGENT_SERIAL", "") not in ("", "0")
        return Agent(d, idle, serial).serve()
    if cmd in ("ping", "stop"):
        try:
            reply = request(d, {"op": cmd})
        except OSError as e:
            print(f"slurm-shim agent: not running ({e})", file=sys.stderr)
            return 1
        print(json.dumps(reply))
        return 0
    print("usage: python -m shim.agent serve|ping|stop", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
