"""The per-user daemon's rendezvous (docs/service.md): where it lives, how it is started and how one
talks to it. One rule for every caller: the compiled client (client.c's fallback_base and
start_service follow it), the Python client, sbatch's DRMAA submissions (gridengine/submitter.py)
and the daemon itself (service/server.py). ``service_dir`` is the directory, ``_private`` the check
that it is the user's own and nobody else's, ``_fallback_base`` where it goes when
/tmp/slurm-shim-<uid> is someone else's (F-29); ``start`` starts the daemon; ``connect`` is the one
SO_PEERCRED check of a client; ``send_json``/``recv_json`` the framing of the JSON kinds.

The protocol: one socket (``service.sock``), one request per connection, and its first four bytes
name the kind of request. ``SHM1`` (TAG_RUN) is a served command (the binary frame client.c sends,
with its descriptors: service/server.py's docstring). ``SHMJ`` (TAG_JSON) is followed by a 4-byte
big-endian length and a JSON object whose ``kind`` is ``submit`` (then ``script_len`` bytes of job
script), ``ping``, ``info`` or ``stop``; the answer is one such frame (no tag). It imports only os
and sys at module level, so it costs sbatch's submissions nothing."""

from __future__ import annotations

import os
import sys

SOCKET = "service.sock"
LOCK = "service.lock"  # one daemon per directory; it holds the daemon's pid
LOG = "service.log"
STARTING = "service.starting"  # a caller is starting a daemon: others do not start one too
STARTING_FRESH = 10.0
DISABLED = "submit.disabled"  # DRMAA could not start: submissions go to qsub until the time inside
TAG_RUN = b"SHM1"
TAG_JSON = b"SHMJ"
MAX_HEADER = 1 << 20
STATIC_TLS = "glibc.rtld.optional_static_tls=4096"  # libdrmaa's libjemalloc needs static TLS room


def _private(path: str, create: bool) -> bool:
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (st.st_mode & 0o170000) == 0o040000 and st.st_uid == os.getuid() and not st.st_mode & 0o077


def cell_name(config_path: str) -> str:
    """The per-site-config subdirectory's name: ``cell-`` and the 64-bit FNV-1a hash of the config's
    path, in hex (client.c computes the same)."""
    h = 0xCBF29CE484222325
    for b in config_path.encode("utf-8", "surrogateescape"):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"cell-{h:016x}"


SOCKET_ROOM = len("/cell-0123456789abcdef/service.sock")  # what goes below the base directory
SUN_PATH = 108  # sockaddr_un.sun_path, its NUL included


def _owned(path: str, uid: int, follow: bool = False) -> bool:
    """A directory of ``uid`` that nobody else may write to (``follow``: the home, which may be a link)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return False
    return (st.st_mode & 0o170000) == 0o040000 and st.st_uid == uid and not st.st_mode & 0o022


def squatted_tmp(uid: int | None = None) -> str | None:
    """/tmp/slurm-shim-<uid> when it exists and is not the user's own private directory (someone
    else made it first: F-29), else None. For doctor and SLURM_SHIM_DEBUG."""
    d = f"/tmp/slurm-shim-{os.getuid() if uid is None else uid}"
    try:
        os.lstat(d)
    except OSError:
        return None
    return None if _private(d, False) else d


def _fallback_base(env, uid: int, create: bool) -> str | None:
    """Where $XDG_RUNTIME_DIR offers nothing: /tmp/slurm-shim-<uid>; where someone else holds that
    name, /run/user/<uid>/slurm-shim (when /run/user/<uid> is the user's), else
    $HOME/.cache/slurm-shim/run (in a home and a .cache of the user's own that others cannot
    write, and short enough for a socket path); None when none of these can be had. client.c's
    service_dir is the same rule."""
    d = f"/tmp/slurm-shim-{uid}"
    if _private(d, create):
        return d
    if env.get("SLURM_SHIM_DEBUG"):
        print(f"slurm-shim: service: {d} is not your own private directory (someone else made it?): "
              "using another one", file=sys.stderr)
    run = f"/run/user/{uid}"
    if _owned(run, uid) and _private(run + "/slurm-shim", create):
        return run + "/slurm-shim"
    home = env.get("HOME") or ""
    if not home.startswith("/") or not _owned(home, uid, follow=True):
        return None
    cache = home.rstrip("/") + "/.cache"
    if create:
        try:
            os.mkdir(cache, 0o700)
        except OSError:
            pass
    d = cache + "/slurm-shim/run"
    if len(d) + SOCKET_ROOM >= SUN_PATH or not _owned(cache, uid):
        return None
    return d if _private(cache + "/slurm-shim", create) and _private(d, create) else None


def service_dir(environ=None, create: bool = True) -> str | None:
    """The user's private directory for the daemon, or None when no safe one exists (then:
    in-process, and qsub): $SLURM_SHIM_AGENT_DIR as it is, else
    $XDG_RUNTIME_DIR/slurm-shim, else /tmp/slurm-shim-<uid> (or, where someone else holds that,
    ``_fallback_base``'s); each must be this user's directory with no access for others. A daemon serves one site
    config (one cell): with $SLURM_SHIM_CONFIG set, its directory is a subdirectory of its own
    (cell_name), so a user who works with two cells has a daemon for each."""
    env = os.environ if environ is None else environ
    uid = os.getuid()
    if env.get("SLURM_SHIM_AGENT_DIR"):
        d = env["SLURM_SHIM_AGENT_DIR"]
        return d if _private(d, create) else None
    base = None
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        try:
            st = os.stat(runtime)
            if (st.st_mode & 0o170000) == 0o040000 and st.st_uid == uid:
                d = os.path.join(runtime, "slurm-shim")
                if _private(d, create):
                    base = d
        except OSError:
            pass
    if base is None:
        base = _fallback_base(env, uid, create)
        if base is None:
            return None
    conf = env.get("SLURM_SHIM_CONFIG")
    if not conf:
        return base
    d = os.path.join(base, cell_name(conf))
    return d if _private(d, create) else None


# --------------------------------------------------------------------------------------------
# Starting the daemon (a caller that found none)


# What a daemon starts with of its first caller's environment (client.c's start_service keeps the
# same): the shim's and the cell's settings, the locale, who and where the user is. Never
# LD_PRELOAD, LD_LIBRARY_PATH, PYTHON* or anything else that would stay in the one process every
# later request of the user forks from (each request runs with its own environment). And the
# static TLS room libdrmaa needs, so a daemon can always open a DRMAA session.
START_ENV = ("PATH", "HOME", "USER", "LOGNAME", "TZ", "LANG", "LANGUAGE", "SGE_ROOT", "SGE_CELL",
             "SGE_QMASTER_PORT", "SGE_EXECD_PORT")
START_ENV_PREFIXES = ("LC_", "SLURM_SHIM_")
LOCALE_VARS = ("LC_ALL", "LC_CTYPE", "LANG")


def start_env(environ) -> dict:
    """The environment a daemon starts with: START_ENV's variables of ``environ``, and GLIBC_TUNABLES."""
    env = {k: v for k, v in environ.items() if k in START_ENV or k.startswith(START_ENV_PREFIXES)}
    env["GLIBC_TUNABLES"] = STATIC_TLS
    return env


def serve_argv() -> list[str]:
    """The command that runs a daemon (``shim.service.main(['serve'])``: the name client.c execs too)."""
    from .. import proc

    return proc.shim_python("service", "main", "sys.exit(main(['serve']))")


def start(d: str, environ=None) -> bool:
    """Start a daemon for directory d, detached, unless one is starting; never from inside a Grid
    Engine job (its execd kills what a job leaves behind). The caller does its work itself this
    time. The daemon gets ``start_env`` of the caller's environment, nothing else."""
    env = dict(os.environ if environ is None else environ)
    if "JOB_ID" in env and env.get("ENVIRONMENT") == "BATCH":
        return False
    env = start_env(env)
    env["SLURM_SHIM_AGENT_DIR"] = d
    env["SLURM_SHIM_SERVICE_LOCALE"] = "\x1f".join(env.get(k, "") for k in LOCALE_VARS)
    from .. import proc

    return proc.start_once(d, STARTING, STARTING_FRESH, serve_argv(), env, LOG)


# --------------------------------------------------------------------------------------------
# Talking to it


def peer(sock) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end (SO_PEERCRED): the one peer check's reading,
    for every client and the daemon. (``_socket``: the Python thin client does without ``socket``.)"""
    import _socket
    import struct

    return struct.unpack("3i", sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12))


def connect(d: str, timeout: float):
    """A connection to the daemon of d whose peer is this user, and the daemon's pid. Raises
    FileNotFoundError/ConnectionRefusedError (no daemon), PermissionError (another uid's socket:
    nothing was sent to it) or another OSError."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(os.path.join(d, SOCKET))
        pid, uid, _gid = peer(sock)
        if uid != os.getuid():
            raise PermissionError("the daemon's socket belongs to another user")
    except BaseException:
        sock.close()
        raise
    return sock, pid


def send_json(sock, obj: dict, data: bytes = b"", tag: bytes = TAG_JSON) -> None:
    """One JSON frame (a request carries the tag; the daemon's answers pass tag=b"")."""
    import json

    body = json.dumps(obj, separators=(",", ":")).encode()
    sock.sendall(tag + len(body).to_bytes(4, "big") + body + data)


def recv_exact(sock, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv_json(sock) -> dict:
    """One JSON frame's object (after its tag, for a request). Raises EOFError, ValueError, OSError."""
    import json

    n = int.from_bytes(recv_exact(sock, 4), "big")
    if n > MAX_HEADER:
        raise ValueError("frame too large")
    obj = json.loads(recv_exact(sock, n))
    if not isinstance(obj, dict):
        raise ValueError("frame is not an object")
    return obj


def ask(d: str, kind: str, timeout: float = 10.0) -> dict:
    """One small request (ping, info, stop) to the daemon of d; raises OSError when none answers."""
    sock, _pid = connect(d, timeout)
    try:
        send_json(sock, {"kind": kind})
        try:
            return recv_json(sock)
        except (EOFError, ValueError) as e:
            raise ConnectionResetError(str(e)) from None
    finally:
        sock.close()
