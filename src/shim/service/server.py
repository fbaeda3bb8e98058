"""The per-user daemon: one process per user and cell that answers the user's commands over one
socket (store/rundir.py: the directory, the start, the framing, the peer check). Its requests:

* ``run`` (tag ``SHM1``): a served command, run in a forked child with the caller's process
  state, so a command costs a socket round trip and a fork instead of an interpreter start and
  its imports (issue 19);
* ``submit`` (a JSON request): a DRMAA submission of sbatch's (gridengine/submitter.py), in a
  thread of this process, where the one DRMAA session lives (issue 28: the former submit agent);
* ``ping``, ``info``, ``stop`` (JSON): its state, and a stop.

docs/service.md has the design; the run request in short:

* A thin client (``src/shim/client/client.c``, compiled at install; ``client()`` below is the same
  protocol in Python, for measurement) connects to ``service.sock`` in the user's private
  directory (rundir.service_dir: the user's own, mode 0700, no link), checks
  the service's uid with SO_PEERCRED and sends one request: argv, environment, umask, its open
  file descriptors (SCM_RIGHTS, each with its number) and its working directory as a descriptor.
* The service (same uid, checked with SO_PEERCRED) answers ``O`` (will run it) or ``R`` (refused:
  the client runs the command in-process, nothing was started). Only after the client's ``G``
  (go) does the service fork: before ``G`` a client may still fall back; after it, never (a
  submission is never doubled), and a lost service is reported as the command would report an
  unreachable controller, exit 1.
* The child puts the client's descriptors at their numbers, changes into its directory, takes its
  umask, signal dispositions and mask, environment and argv, makes sys.stdin/stdout/stderr as a
  fresh interpreter does, and runs ``shim.__main__.dispatch``. Its exit status goes back
  (``X`` code, or ``K`` signal: the client dies of the same signal); the client forwards the
  signals it receives (``S``); a client that disappears kills its child.
* A plain sbatch (``reusable``) runs in a reused worker instead (issue 29): the spare that took
  one stays and takes the next, up to ``WORKERS`` at once, a queue waiting for them; after each
  request it gives the caller's descriptors back and puts back what the request changed
  (``Pristine``), or exits where that cannot be done (docs/service.md, "Reused workers").
* The service exits after ``[submit] service_idle_minutes`` without requests, and refuses (then
  exits) as soon as a file of the package it runs changed (an upgrade, an edit of src/shim).

Frames are native-endian (client and service are on one host). Request: HEADER, then
``nfds`` int32 target numbers, ``ngroups`` uint32 gids, ``NLIMITS`` (soft, hard) uint64 pairs,
then NUL-terminated strings: the command, ``argc`` argv words, ``envc`` "K=V" entries, the mount
namespace (readlink /proc/self/ns/mnt). The first passed descriptor is the working directory.
Replies and client messages: RECORD (a type byte as uint32, an int32 value).
"""

from __future__ import annotations

import os
import sys

SERVED = ("sbatch", "squeue", "scancel", "sacct", "sinfo", "scontrol", "sprio", "sshare", "sacctmgr", "sreport")
MAGIC = TAG_RUN = b"SHM1"  # (rundir.TAG_RUN)
HEADER = "=4sIIIIIIIIIQQ"  # magic, body length, argc, envc, nfds, ngroups, umask, uid, gid, flags, ignored, blocked
NLIMITS = 16  # RLIMIT_CPU .. RLIMIT_RTTIME
MAX_BODY = 8 << 20  # argv + environment: Linux's own default ARG_MAX is 2 MiB
MAX_FDS = 250  # SCM_RIGHTS carries at most 253 per message
MAX_CHILDREN = 512  # more at once: refused (the client runs the command itself)
REQUEST_TIMEOUT = 5.0  # a client has this long to send its request and its go
UNREACHABLE = "Unable to contact slurm controller (connect failure)"
# Refusal reasons (R's value): the client falls back for each alike; they are for logs and tests.
R_BAD, R_STALE, R_IDENTITY, R_LIMITS, R_LOCALE, R_BUSY, R_STOPPING = 1, 2, 3, 4, 5, 6, 7
REFUSAL_WORDS = {R_BAD: "a bad request", R_STALE: "the package changed",
                 R_IDENTITY: "another identity, mount namespace or site config",
                 R_LIMITS: "other resource limits", R_LOCALE: "another locale", R_BUSY: "too many at once",
                 R_STOPPING: "stopping"}
# submission threads at once (more: refused, qsub); runJob is one at a time anyway, so each waits
# its turn. As many as the socket's backlog: a swarm's 256 concurrent sbatch all queue here rather
# than 64 of them and the rest forking qsub (issue 29's swarm goal)
MAX_SUBMITTING = 256
SUBMIT_TIMEOUT = 30.0  # a submission's client has this long to send its script
# Reused workers (issue 29: a warm sbatch without a fork each): a plain sbatch runs in a worker that
# then takes the next plain sbatch, its process state put back as a freshly forked child's
# (``Pristine``), instead of a child forked and torn down for each. Everything else still forks.
WORKERS = 2  # workers at once (the machine's cores); more plain sbatch wait in a queue for one
WORKERS_MAX = 8  # with those busy longer than WORKER_STUCK (a script's own --wait) not counted
WORKER_STUCK = 2.0
WORKER_REQUESTS = 100  # a worker runs at most this many requests, and lives at most WORKER_SECONDS
WORKER_SECONDS = 60.0


# Where it lives, how it starts, how one talks to it: store/rundir.py (one rule for every caller)
from ..store.rundir import (LOCALE_VARS, LOCK, LOG, SOCKET, SOCKET_ROOM, START_ENV,  # noqa: F401
                            START_ENV_PREFIXES, STARTING, STARTING_FRESH, SUN_PATH, TAG_JSON, _fallback_base,
                            _owned, _private, cell_name, peer, recv_exact, serve_argv, service_dir, squatted_tmp,
                            start, start_env)


def reusable(r: "Request") -> bool:
    """Whether r may run in a reused worker: an sbatch whose argv and environment ask nothing that
    blocks or stays (no --wait/-W, no --test-only, no SBATCH_WAIT; any long option that could
    abbreviate either, and any short option word holding a W, counts as asking). Conservative:
    what a script's own ``#SBATCH`` lines ask is not seen here; such a request runs in the worker
    as any other, its state put back after it (docs/service.md)."""
    if r.cmd != "sbatch":
        return False
    for w in r.argv[1:]:
        if w[:2] == b"--":
            name = w[2:].partition(b"=")[0]
            if name and (b"wait".startswith(name) or b"test-only".startswith(name)
                         or name.startswith((b"wait", b"test"))):
                return False
        elif w[:1] == b"-" and b"W" in w:
            return False
    return not any(e.startswith((b"SBATCH_WAIT=", b"SBATCH_TEST")) for e in r.env)


def enabled(environ=None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("SLURM_SHIM_SERVICE", "") not in ("off", "0", "no", "false")


# --------------------------------------------------------------------------------------------
# The code it runs: a stamp of the package's files


def package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # src/shim, above service/


def mapped_files() -> list[str]:
    """The files this process has mapped (/proc/self/maps): the interpreter, libpython, libc,
    every extension module and shared library loaded so far (libdrmaa included, once loaded)."""
    out: set[str] = set()
    try:
        with open("/proc/self/maps", "rb") as f:
            for line in f:
                parts = line.rstrip(b"\n").split(None, 5)
                if len(parts) == 6 and parts[5].startswith(b"/") and not parts[5].endswith(b" (deleted)"):
                    out.add(os.fsdecode(parts[5]))
    except OSError:
        pass
    return sorted(out)


def package_files(root: str, before=None):
    """The ``.py`` files (os.DirEntry) of the package under ``root``: its directories walked
    without following a symbolic link, ``__pycache__`` left out; ``before(d)`` called for each
    directory before it is listed (CodeWatch: watched first). An unreadable directory is skipped."""
    stack = [root]
    while stack:
        d = stack.pop()
        if before is not None:
            before(d)
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                name = e.name
                if name.endswith(".py"):
                    yield e
                elif name != "__pycache__" and e.is_dir(follow_symlinks=False):
                    stack.append(e.path)


def code_stamp(root: str | None = None, mapped: list[str] | None = None) -> int:
    """A hash of (path, size, mtime) of every .py file of the package and of the interpreter's
    path entries: it changes with an upgrade (pip replaces the files), with an edit of the working
    tree, and with a reinstall that changes where the package is imported from. And of (inode,
    size, mtime) of the interpreter and of the native files in ``mapped`` (the service's
    mapped_files() at its start; now's when None): a security update of python, libc or an
    extension module replaces one of them (F-33)."""
    root = package_root() if root is None else root
    items: list = []
    for path in (sys.executable, *(mapped_files() if mapped is None else mapped)):
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            continue
        items.append((path, st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns))
    for e in package_files(root):
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        items.append((e.path, st.st_size, st.st_mtime_ns, st.st_ino))
    for d in sys.path:  # and what `import shim` would find: a (re)install or an editable switch in
        try:  # site-packages changes its directory even where the package's files stay the same
            st = os.stat(d or ".")
        except OSError:
            continue
        items.append((d, st.st_mtime_ns, st.st_ino))
    items.sort()
    return hash(tuple(items))


# --------------------------------------------------------------------------------------------
# The code it runs: a watch of what the stamp covers, asked at one system call a request (issue 29)
#
# The daemon refuses and leaves as soon as ``code_stamp`` differs from its start's (F-33): a
# hash of every ``.py`` file of the package (path, size, mtime, inode), of each ``sys.path`` entry
# and of the interpreter and the native files it mapped. Taking that stamp walks the package (~0.6
# ms, most of the daemon's own CPU a request). ``CodeWatch`` lets the daemon take it only when
# something it covers may have changed: one inotify instance watches every inode whose change can
# change the stamp, and a request asks it with one ``poll`` (no event: nothing changed). Any event
# that may matter, a lost event (``IN_Q_OVERFLOW``), a change of the mount table or a changed
# ``sys.path`` list makes the daemon watch again (``arm``) and take the whole stamp once, which it
# compares as before: an event never makes it leave by itself (a ``__pycache__`` written is not a
# change of the code).
#
# What is watched, each directory before it is read, so that nothing changes unseen between a look
# and its watch (a change before the watch is in what the look sees; one after it is an event):
#
# * the package's directories (every event: a ``.py`` file created, written, renamed, removed, or
#   its times changed), found as ``code_stamp`` finds them (no symbolic link followed, no
#   ``__pycache__``), and each ``.py`` file itself (written or touched through a hard link in
#   another directory, its directory's watch sees nothing);
# * each ``sys.path`` entry (its directory's entries and times: the stamp holds its mtime and
#   inode), the interpreter and every mapped file (written, its times changed, removed, renamed:
#   ``IN_ATTRIB``, ``IN_MODIFY``, ``IN_DELETE_SELF``, ``IN_MOVE_SELF``);
# * every directory entry the kernel looks up to reach each of them (``lookups``: each component of
#   the path and of every symbolic link on the way, from ``/``), for that name: a directory above
#   the install renamed or replaced, a symbolic link switched, a missing ``sys.path`` entry created.
#   Events of other names in those directories (``/tmp``'s, a home directory's) are read and passed
#   over;
# * the mount table (``/proc/self/mountinfo``, ``POLLPRI``): a file system mounted over a path.
#
# Where that cannot be (no inotify, its limits reached, a watch refused, a path on a file system
# whose changes another host may make unseen: anything but a local one in ``LOCAL_FS``), the caller
# takes the whole stamp on every request, as before. Not seen by inotify, so not here: a write
# through a shared writable mapping of a package file (the stamp sees its mtime at writeback).

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
IN_DONT_FOLLOW, IN_MASK_ADD = 0x02000000, 0x20000000
W_SELF = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_Q_OVERFLOW | IN_IGNORED  # always count
# a directory on the way to a watched path: its entries (by name) and its own removal or move
W_ENTRY = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF
W_PACKAGE = W_ENTRY | IN_MODIFY | IN_CLOSE_WRITE  # a directory of the package: every file in it
W_FILE = IN_ATTRIB | IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF  # the interpreter, a mapped file
ANY_NAME = None  # a watch whose every event counts (a directory's names: a set of those that count)
MAX_LINKS = 40  # symbolic links followed on one path (the kernel's own bound)
# statfs f_type of file systems only this host changes, so inotify sees every change: ext2/3/4,
# xfs, btrfs, tmpfs, ramfs, overlayfs, squashfs, erofs, zfs, f2fs, bcachefs, jfs, reiserfs, vfat,
# exfat. Anything else (NFS, CIFS, FUSE, Ceph, Lustre, GPFS, 9p, ...): the stamp on every request.
LOCAL_FS = frozenset({0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x858458F6, 0x794C7630, 0x73717368,
                      0xE0F5E1E2, 0x2FC12FC1, 0xF2F52010, 0xCA451A4E, 0x3153464A, 0x52654973, 0x4D44, 0x2011BAB0})


class CodeWatch:
    """The watch of what ``code_stamp(root, mapped)`` covers. ``changed()`` per request (one
    ``poll``); after it said True, ``arm()`` again, then take the stamp. Every method raises
    OSError where the watch cannot be kept (the caller then stamps every request)."""

    def __init__(self, root: str, mapped: list[str]):
        import ctypes
        import select

        self.root, self.mapped = root, list(mapped)
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._statfs_buf = ctypes.create_string_buffer(256)  # (struct statfs: f_type first, a long)
        self._ctypes = ctypes
        self.fd = self._check(self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC), "inotify_init1")
        self.mounts = -1
        self.rel: dict[int, set | None] = {}  # wd -> the names whose events count (ANY_NAME: every event)
        self.paths: tuple = ()
        try:
            self.mounts = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
            self.poll = select.poll()
            self.poll.register(self.fd, select.POLLIN)
            self.poll.register(self.mounts, select.POLLPRI)
            self.arm()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for fd in (self.fd, self.mounts):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.fd = self.mounts = -1

    def _check(self, ret: int, what: str) -> int:
        if ret < 0:
            err = self._ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")
        return ret

    # ------------------------------------------------------------------------------------
    # Per request

    def changed(self) -> bool:
        """Whether something the stamp covers may have changed since the last ``arm``: an event
        that counts (read and passed over otherwise), a lost one, the mount table, sys.path."""
        if tuple(sys.path) != self.paths:
            return True
        ready = self.poll.poll(0)
        if not ready:
            return False
        hit = False
        for fd, _ev in ready:
            if fd == self.mounts:
                hit = True
            elif fd == self.fd:
                hit = self._drain() or hit
        return hit

    def _drain(self) -> bool:
        """Read every queued event (all of them: what is read now is not read again); whether one counts."""
        import struct

        hit = False
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return hit
            if not buf:
                return True
            off = 0
            while off + 16 <= len(buf):
                wd, mask, _cookie, n = struct.unpack_from("=iIII", buf, off)
                name = buf[off + 16:off + 16 + n].rstrip(b"\0")
                off += 16 + n
                if hit:
                    continue
                if mask & W_SELF or not name:
                    hit = True
                    continue
                names = self.rel.get(wd, ANY_NAME)  # (a watch not ours: counts)
                if names is ANY_NAME or name in names:
                    hit = True

    # ------------------------------------------------------------------------------------
    # Setting the watches

    def arm(self) -> None:
        """Watch everything the stamp covers as it is now (watches already there stay: a watch
        that no longer matters only costs a stamp when its directory changes)."""
        self._done: dict[str, int] = {}  # path -> mask watched in this pass
        self._wds: dict[str, int] = {}  # path -> its watch, this pass
        self._seen: dict[tuple, tuple] = {}  # (dir, name) -> what lookups found, this pass
        self.paths = tuple(sys.path)
        top = self.lookups(self.root)
        if top is not None and os.path.isdir(top):
            self._tree(top)
        for entry in self.paths:
            leaf = self.lookups(os.path.abspath(entry or "."))
            if leaf is not None:
                self._watch(leaf, W_ENTRY if os.path.isdir(leaf) else W_FILE, ANY_NAME)
        for path in (sys.executable, *self.mapped):
            if path:
                leaf = self.lookups(os.path.abspath(path))
                if leaf is not None:
                    self._watch(leaf, W_FILE, ANY_NAME)

    def _tree(self, top: str) -> None:
        """The package's directories, each watched before it is listed (as code_stamp walks them)."""
        for e in package_files(top, before=lambda d: self._watch(d, W_PACKAGE, ANY_NAME)):
            # each .py itself too: written through a hard link elsewhere, its directory's watch sees
            # nothing; a link: the link, on its directory's file system
            self._watch(e.path, W_FILE | IN_DONT_FOLLOW, ANY_NAME, local=e.is_symlink())

    def lookups(self, path: str) -> str | None:
        """Resolve path (absolute) as the kernel does, one component at a time, each directory
        watched for that component's name before it is looked at, every symbolic link followed
        (its target's components too). The path it reaches, or None (a component missing, not
        a directory, not allowed, too many links: its directory is watched for its coming)."""
        import stat

        todo = [p for p in reversed(path.split("/")) if p not in ("", ".")]
        cur = "/"
        links = 0
        while todo:
            name = todo.pop()
            if name == "..":
                cur = os.path.dirname(cur)  # (cur is a real path: its parent's name is its parent)
                continue
            self._watch(cur, W_ENTRY, os.fsencode(name))
            full = os.path.join(cur, name)
            key = (cur, name)
            got = self._seen.get(key)
            if got is None:
                try:
                    st = os.lstat(full)
                    got = (os.readlink(full),) if stat.S_ISLNK(st.st_mode) else ()
                except OSError:
                    got = (None,)
                self._seen[key] = got
            if not got:
                cur = full
                continue
            target = got[0]
            links += 1
            if target is None or links > MAX_LINKS:
                return None
            if target.startswith("/"):
                cur = "/"
            todo.extend(p for p in reversed(target.split("/")) if p not in ("", "."))
        return cur

    def _watch(self, path: str, mask: int, name, local: bool = False) -> None:
        """path watched for mask's events (added to what it has), and name (ANY_NAME: every name)
        counted; its file system checked (``_local``) unless said to be local already."""
        had = self._done.get(path, 0)
        if mask & ~had & ~IN_DONT_FOLLOW:
            if not had and not local:
                self._local(path)
            p = os.fsencode(path)
            wd = self._check(self._libc.inotify_add_watch(self.fd, p, mask | IN_MASK_ADD),
                             f"inotify_add_watch {path}")
            self._done[path] = had | mask
            self._wds[path] = wd
        wd = self._wds[path]
        if name is ANY_NAME:
            self.rel[wd] = ANY_NAME
        elif wd not in self.rel:
            self.rel[wd] = {name}
        elif self.rel[wd] is not ANY_NAME:
            self.rel[wd].add(name)

    def _local(self, path: str) -> None:
        """OSError unless path is on a file system in LOCAL_FS."""
        buf = self._statfs_buf
        self._check(self._libc.statfs(os.fsencode(path), buf), f"statfs {path}")
        kind = self._ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF
        if kind not in LOCAL_FS:
            raise OSError(f"{path} is on a file system of type {kind:#x}, whose changes may not be notified")


LIFETIME = 24 * 3600.0  # seconds a service serves at most (then it leaves after its current requests)


# --------------------------------------------------------------------------------------------
# The service


class Request:
    __slots__ = ("cmd", "argv", "env", "targets", "fds", "cwd_fd", "umask", "uid", "gid", "groups", "limits",
                 "ignored", "blocked", "mntns")


def read_request(sock) -> tuple[Request | None, int]:
    """The request on sock and its descriptors, or (None, reason). Descriptors received are closed
    on every refusal."""
    import socket
    import struct

    hsize = struct.calcsize(HEADER)
    fds: list[int] = []
    try:
        msg, anc, _flags, _addr = sock.recvmsg(hsize, socket.CMSG_SPACE((MAX_FDS + 1) * 4))
        for level, typ, data in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds += struct.unpack(f"={len(data) // 4}i", data[: len(data) - len(data) % 4])
        if len(msg) < hsize:
            msg += recv_exact(sock, hsize - len(msg))
        magic, blen, argc, envc, nfds, ngroups, umask, uid, gid, _flags2, ignored, blocked = struct.unpack(HEADER, msg)
        if magic != MAGIC or blen > MAX_BODY or nfds > MAX_FDS or ngroups > 65536 or len(fds) != nfds + 1:
            raise ValueError("bad header")
        body = recv_exact(sock, blen)
        r = Request()
        off = 0
        r.targets = list(struct.unpack_from(f"={nfds}i", body, off))
        off += 4 * nfds
        r.groups = sorted(struct.unpack_from(f"={ngroups}I", body, off))
        off += 4 * ngroups
        lim = struct.unpack_from(f"={2 * NLIMITS}Q", body, off)
        off += 16 * NLIMITS
        r.limits = [(lim[2 * i], lim[2 * i + 1]) for i in range(NLIMITS)]
        words = body[off:].split(b"\0")
        if len(words) != 1 + argc + envc + 1 + 1 or words[-1] != b"" or argc < 1:
            raise ValueError("bad strings")
        r.cmd = words[0].decode("ascii", "replace")
        r.argv = words[1:1 + argc]
        r.env = words[1 + argc:1 + argc + envc]
        r.mntns = words[1 + argc + envc]
        if any(t < 0 or t >= 1 << 20 for t in r.targets) or len(set(r.targets)) != nfds:
            raise ValueError("bad descriptor numbers")
        r.cwd_fd, r.fds = fds[0], fds[1:]
        r.umask, r.uid, r.gid, r.ignored, r.blocked = umask & 0o777, uid, gid, ignored, blocked
        return r, 0
    except (OSError, EOFError, ValueError, struct.error, UnicodeError):
        for fd in fds:
            _close(fd)
        return None, R_BAD


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _limits() -> list[tuple[int, int]]:
    import resource

    out = []
    for i in range(NLIMITS):
        try:
            soft, hard = resource.getrlimit(i)
        except (ValueError, OSError):
            soft = hard = 0
        out.append((soft & 0xFFFFFFFFFFFFFFFF, hard & 0xFFFFFFFFFFFFFFFF))
    return out


def _mntns() -> bytes:
    """Where a command runs: its mount namespace, and the installation (its interpreter; the C
    client sends its compiled-in SHIM_PYTHON). A service serves only callers of its own
    installation: a client of another prefix (a second install, a pipx one beside a site's) is
    refused and runs its own code in-process, never the other installation's."""
    try:
        ns = os.fsencode(os.readlink("/proc/self/ns/mnt"))
    except OSError:
        ns = b""
    return ns + b"\n" + os.fsencode(sys.executable)


def preload() -> None:
    """Import what the served commands use, once, so that no child pays for it."""
    import importlib

    for name in ("json", "subprocess", "signal", "selectors", "threading", "pwd", "grp", "socket", "struct",
                 "fcntl", "errno", "shlex", "locale", "resource", "time", "datetime", "calendar", "math",
                 "base64", "hashlib", "stat", "io", "collections", "functools", "itertools", "heapq",
                 "bisect", "textwrap", "string", "re", "contextlib", "xml.etree.ElementTree",
                 "xml.parsers.expat", "tomllib", "uuid", "random", "glob", "fnmatch", "select", "errno", "atexit",
                 "_sha256", "_sha2"):  # (store/state.sha256_hex's)
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    import pkgutil

    import shim

    skip = ("shim.runtime", "shim.__main__.", "shim.admin", "shim.service.__main__", "shim.slurm.render.manpage")
    # not served (SERVED): slurm-shim's own commands (click, tabulate) and the config's validation
    # (pydantic: siteconf's cache serves the children; one validates only a changed file), ~12 MB
    # of heap that every fork would copy the page tables of and every child's exit free again
    unserved = ("shim.agent", "shim.cli.srun", "shim.cli.salloc", "shim.cli.admin", "shim.cli.explain", "shim.config")
    for info in pkgutil.walk_packages(shim.__path__, "shim."):
        name = info.name
        if name.startswith(skip) or name in unserved:
            continue
        try:
            importlib.import_module(name)
        except Exception:  # an optional dependency missing: the child imports what it needs
            pass
    warm()
    rehearse()


REHEARSAL = (b"#!/bin/sh\n#SBATCH -J rehearsal\n#SBATCH -o /dev/null\n#SBATCH -t 10\n#SBATCH --mem=1G\n"
             b"#SBATCH -n 2\ntrue\n")


def rehearse(times: int = 12) -> None:
    """Go through sbatch's path up to Grid Engine a few times on the site config, with nothing
    written, no Grid Engine asked and no file read (operations/submit.batch over a script given
    as its stdin and over --wrap, an empty environment, from "/"; then the job script and the
    records' JSON, as submit_batch makes them): each served sbatch then starts from code the
    interpreter has already specialised and from the regexes and tables it built, which a forked
    child would otherwise build again, with pages of its own (the warm path's CPU, issue 29).
    Nothing of it outlives it: the config is forgotten, the parsers' site limit set back."""
    import io
    import json

    from .. import siteconf
    from ..operations import submit
    from ..slurm.options import values

    try:
        for _ in range(times):
            for argv, script in ((["-o", "/dev/null", "--wrap=true"], b""), ([], REHEARSAL)):
                _o, sub, _cfg = submit.batch(argv, {}, stdin=io.BytesIO(script), cwd="/")
                rec = sub.record.replace(sub=0.0)
                submit.job_script(rec.without_secrets("/", "0" * 64).to_dict())
                json.dumps(rec.public().to_dict())
                json.dumps(rec.secrets())
    except Exception:  # (a config the children will report on: nothing to rehearse with)
        pass
    finally:
        values.use_site(values.MAX_ARRAY_SIZE)  # (the value before: only a command sets it)
        siteconf.reset()


def warm() -> None:
    """Build the pure tables the commands otherwise build at first use (regexes, sacct's field
    registry): nothing here reads the environment, the config or the clock."""
    for name, mod in list(sys.modules.items()):
        if not name.startswith("shim.") or mod is None:
            continue
        for value in list(vars(mod).values()):
            if type(value).__name__ == "_Lazy" and hasattr(value, "pattern"):
                try:
                    getattr(value, "match")  # compiles it into the module in its place
                except Exception:
                    pass
    for mod, fn in (("shim.gridengine.refusal", "_patterns"), ("shim.slurm.render.sacct", "registry")):
        m = sys.modules.get(mod)
        if m is not None:
            try:
                getattr(m, fn)()
            except Exception:
                pass
    table, releases = sys.modules.get("shim.slurm.options.table"), sys.modules.get("shim.slurm.releases")
    if table is not None and releases is not None:  # every release's submission tables (options/table.py)
        for release in releases.RELEASES.values():
            for prog in ("sbatch", "srun", "salloc"):
                try:
                    table.command_table(prog, release)
                except Exception:
                    pass


class Service:
    """The daemon: ``serve`` is its life, ``accept`` reads each connection's kind, ``go``/``hand``/
    ``child`` run a served command, ``submit`` a DRMAA submission (``self.submitter``)."""

    def __init__(self, d: str, idle: float, lifetime: float = LIFETIME):
        import threading
        import time

        self.d, self.idle, self.lifetime = d, idle, lifetime
        self.path = os.path.join(d, SOCKET)
        self.last = self.born = time.monotonic()
        self.started = time.time()
        self.stopping = False
        self.jobs: dict[int, list] = {}  # pidfd -> [conn, pid]
        self.conns: dict[int, int] = {}  # conn fd -> pidfd
        self.pending: dict[int, tuple] = {}  # conn fd -> (conn, request, deadline): answered O, no go yet
        self.served = 0
        self.refused: dict[int, int] = {}  # refusals by reason (the first of each is logged)
        self.watch = None  # what tells a request whether the package may have changed (_watch_code)
        self.spare = None
        self.spare_after = 0.0
        self.workers: dict[int, Worker] = {}  # pidfd -> a reused worker (reusable())
        self.wsocks: dict[int, Worker] = {}  # its socket's fd -> it
        self.queue: list = []  # (conn, request): plain sbatch that said go, waiting for a worker
        self.queued: dict[int, object] = {}  # a queued conn's fd -> conn (watched for its client's end)
        self.guard = threading.Lock()  # held around a fork, and by threads while they change process state
        self.submitting: list = []  # the submission threads
        self.submitter = None  # gridengine.submitter.Submitter, made by the first submission
        loc = os.environ.get("SLURM_SHIM_SERVICE_LOCALE")
        self.locale = tuple(loc.split("\x1f")) if loc is not None else tuple(os.environ.get(k, "") for k in LOCALE_VARS)
        self.coerced = os.environ.get("LC_CTYPE") if self.locale[1] != os.environ.get("LC_CTYPE", "") else None
        self.site = os.environ.get("SLURM_SHIM_CONFIG", "")  # the site config (the cell) it was started for

    def log(self, msg: str) -> None:
        import time

        try:
            with self.guard:  # (a thread's line is never half-written when the main thread forks)
                sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} service[{os.getpid()}]: {msg}\n")
                sys.stderr.flush()
        except (OSError, ValueError):
            pass

    def serve(self) -> int:
        """The daemon's life, from start to exit (0). ``_begin``: take the directory's lock (an old
        daemon whose code went stale has 5 s to leave; another live one keeps it, and this one
        exits), preload every served command, stamp the code and the caller-visible process state
        requests must match, bind the 0600 socket, freeze the preloaded heap. ``_loop``: one poll
        over the socket, the served commands' connections and their children, until it leaves.
        ``_end``: wait for the submissions still running, close the DRMAA session (5 s at most: with
        qmaster gone drmaa_exit can block), log what it served and refused."""
        begun = self._begin()
        if begun is None:
            return 0  # another daemon serves this directory
        self._loop(*begun)
        return self._end()

    def _begin(self):
        """(the socket's inode, the lock's descriptor), or None when another daemon holds the lock."""
        import fcntl
        import gc
        import select
        import signal
        import socket
        import time

        lockf = os.open(os.path.join(self.d, LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + 5  # an old daemon that found its code stale is leaving
        while True:
            try:
                fcntl.flock(lockf, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    _unlink(os.path.join(self.d, STARTING))
                    os.close(lockf)
                    return None
                time.sleep(0.02)
        try:
            if os.fstat(2).st_size > (1 << 20):
                os.ftruncate(2, 0)
        except OSError:
            pass
        preload()
        self.watch = self._watch_code()  # (first: a change from here on is an event, or in the stamp)
        self.stamp = code_stamp(mapped=self.mapped)
        self.uid, self.gid = os.getuid(), os.getgid()
        self.groups = sorted(os.getgroups())
        self.limits = _limits()
        self.mntns = _mntns()
        _unlink(self.path)
        lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lsock.bind(self.path)
        os.chmod(self.path, 0o600)
        lsock.listen(256)
        ino = os.stat(self.path).st_ino
        os.ftruncate(lockf, 0)
        os.write(lockf, f"{os.getpid()}\n".encode())
        _unlink(os.path.join(self.d, STARTING))
        self.lsock = lsock
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.log(f"serving {self.path} (idle exit {self.idle:g} s)")
        gc.collect()
        gc.freeze()  # the children do not walk (and so copy) the preloaded objects
        self.poll = select.poll()
        self.poll.register(lsock.fileno(), select.POLLIN)
        return ino, lockf

    def _watch_code(self):
        """Set self.mapped (the native code it runs: what later stamps look at again) and watch
        what the stamp covers (CodeWatch: a request then stamps the package only after a
        change); None where that cannot be, said once in the log: every request stamps it."""
        try:
            import ctypes  # noqa: F401 (the watch's, loaded before the list of what is mapped is made)
        except ImportError:
            pass
        self.mapped = mapped_files()
        try:
            return CodeWatch(package_root(), self.mapped)
        except Exception as e:  # (OSError: no inotify, its limits, a watch refused; no inotify in libc...)
            self.log(f"the code is not watched ({e}): every request stamps the package")
            return None

    def current_stamp(self) -> int:
        """The package's stamp now: the start's while the watch saw nothing that counts, else
        taken again after the watch was set again; taken every time without a watch."""
        w = self.watch
        if w is not None:
            try:
                if not w.changed():
                    return self.stamp
                w.arm()
            except Exception as e:  # (a watch half set again is no watch: never trusted again)
                self.watch = None
                w.close()
                self.log(f"the code is no longer watched ({e}): every request stamps the package")
        return code_stamp(mapped=self.mapped)

    def busy(self) -> bool:
        """A served command or a submission is under way."""
        self.submitting = [t for t in self.submitting if t.is_alive()]
        return bool(self.jobs or self.pending or self.submitting or self.working())

    def working(self) -> bool:
        """A plain sbatch is queued or running in a worker."""
        return bool(self.queue) or any(w.conn is not None for w in self.workers.values())

    def _loop(self, ino, lockf) -> None:
        """Accept every waiting connection with one code stamp, start each accepted command's
        forked child on its go, reap ended children, fork a spare child while nothing waits. Leave
        (``_leave``: stop listening, refuse who already connected, free the lock) when idle for
        ``idle`` s, after ``lifetime`` s, on SIGTERM or a ``stop``, after a submission whose answer
        may be lost, or when the socket is no longer its own; return once the commands already
        taken have ended."""
        import time

        listening = True
        while True:
            now = time.monotonic()
            if listening:
                if now - self.born >= self.lifetime and not self.stopping:
                    self.log(f"served {self.lifetime:g} s: leaving")  # (a busy user's daemon too)
                    self.stopping = True
                if self.stopping or (not self.busy() and now - self.last >= self.idle):
                    listening = False
                    self._leave(ino, lockf)
                    continue
                ino = self._still_ours(ino)
                if ino is None:
                    continue
            elif not self.jobs and not self.pending and not self.working():
                return
            if self.queue:
                self.dispatch()  # (a worker stuck in a long request no longer counts: another may start)
            for w in list(self.workers.values()):
                if w.conn is None and now - w.born >= WORKER_SECONDS:
                    self.retire_worker(w)  # (an idle worker past its age: it exits, reaped on its pidfd)
            busy = self.jobs or self.pending or self.submitting or not listening or self.working()
            wait = 1000 if busy else max(50, min(1000, int((self.idle - (now - self.last)) * 1000)))
            if self.queue:
                wait = 100
            try:
                events = self._wait(listening, now, wait)
            except InterruptedError:
                continue
            if self.pending:
                self.expire()
            for fd, _ev in events:
                try:
                    if listening and fd == self.lsock.fileno():
                        self._accept_all()
                    elif fd in self.pending:
                        self.go(fd)
                    elif fd in self.jobs:
                        self.reap(fd)
                    elif fd in self.wsocks:
                        self.worker_done(self.wsocks[fd])
                    elif fd in self.workers:
                        self.worker_died(fd)
                    elif fd in self.conns:
                        self.message(fd)
                    elif fd in self.queued:
                        self.unqueue(fd)
                except Exception as e:  # a bad request or a failed fork must never take the daemon down
                    self.log(f"request dropped: {type(e).__name__}: {e}")

    def _still_ours(self, ino):
        """The socket's inode while the socket file is still the one it bound; else stop (None)."""
        try:
            if os.stat(self.path).st_ino == ino:
                return ino
            self.log("socket replaced: leaving")
        except OSError:
            self.log("socket removed: leaving")
        self.stopping = True
        return None

    def _wait(self, listening: bool, now: float, wait: int) -> list:
        """The poll's events; a spare child is forked first when nothing is waiting."""
        import time

        want_spare = listening and self.spare is None and now >= self.spare_after
        events = self.poll.poll(0 if want_spare else wait)
        if not events and want_spare:
            try:
                self.fork_spare()  # nothing waiting: now the fork costs no one anything
            except OSError as e:
                self.log(f"no spare child ({e}); again in 1 s")
                self.spare_after = time.monotonic() + 1
            events = self.poll.poll(wait)
        return events

    def _accept_all(self) -> None:
        """Every connection waiting now, one stamp of the package for them all."""
        import time

        self.lsock.setblocking(False)
        stamp = None
        for _ in range(64):
            try:
                conn, _ = self.lsock.accept()
            except OSError:
                break
            conn.setblocking(True)
            self.last = time.monotonic()
            stamp = self.accept(conn, stamp)
            if self.stopping:
                break

    def _end(self) -> int:
        for w in list(self.workers.values()):  # (idle, or retired: each runs nothing now)
            self.retire_worker(w)
            try:
                os.kill(w.pid, 9)
                os.waitpid(w.pid, 0)
            except OSError:
                pass
        for t in self.submitting:
            t.join(30)
        sub = self.submitter
        refused = ", ".join(f"{REFUSAL_WORDS.get(k, k)} {n}" for k, n in sorted(self.refused.items()))
        self.log(f"exit after {self.served} requests" + (f", {sub.served} submissions" if sub else "")
                 + (f" (refused: {refused})" if refused else ""))
        if sub is None or sub.session is None:
            return 0
        sub.close(5.0)
        try:
            sys.stderr.flush()
        finally:
            os._exit(0)  # not libdrmaa's atexit, which may block on a qmaster that is gone

    def _leave(self, ino, lockf) -> None:
        """Stop being found, refuse whoever already connected, let a new service start."""
        if ino is not None:
            try:
                if os.stat(self.path).st_ino == ino:
                    os.unlink(self.path)
            except OSError:
                pass
        self.lsock.setblocking(False)
        while True:
            try:
                conn, _ = self.lsock.accept()
            except (BlockingIOError, InterruptedError, OSError):
                break
            conn.setblocking(True)
            self._turn_away(conn)
        self.poll.unregister(self.lsock.fileno())
        self.lsock.close()
        self.drop_spare()
        for w in list(self.workers.values()):
            if w.conn is None:
                self.retire_worker(w)
        os.close(lockf)

    def _turn_away(self, conn) -> None:
        """A connection that came while the daemon was leaving: refused in its own kind's words."""
        import socket

        from ..store.rundir import send_json

        conn.settimeout(REQUEST_TIMEOUT)
        try:
            if conn.recv(4, socket.MSG_PEEK) == TAG_JSON:
                send_json(conn, {"status": "refused", "reason": "stopping"}, tag=b"")
                conn.close()
                return
        except OSError:
            conn.close()
            return
        self.refuse(conn, R_STOPPING)

    def refuse(self, conn, reason: int) -> None:
        import struct

        if reason not in self.refused:  # the first refusal of each kind is logged (then counted)
            self.log(f"refusing a request: {REFUSAL_WORDS.get(reason, reason)} (the client runs it in-process)")
        self.refused[reason] = self.refused.get(reason, 0) + 1
        try:
            conn.sendall(struct.pack("=Ii", ord("R"), reason))
        except OSError:
            pass
        conn.close()

    def check(self, r: Request, peer_uid: int, peer_gid: int) -> int:
        if r.cmd not in SERVED:
            return R_BAD
        if (r.uid, r.gid, peer_uid, peer_gid) != (self.uid, self.gid, self.uid, self.gid) or r.groups != self.groups:
            return R_IDENTITY
        if r.mntns != self.mntns:
            return R_IDENTITY
        if r.limits != self.limits:
            return R_LIMITS
        loc = {}
        site = ""
        for e in r.env:
            k, _, v = e.partition(b"=")
            if k in (b"LC_ALL", b"LC_CTYPE", b"LANG"):
                loc[k.decode()] = v.decode("utf-8", "surrogateescape")
            elif k == b"SLURM_SHIM_CONFIG":
                site = v.decode("utf-8", "surrogateescape")
        if tuple(loc.get(k, "") for k in LOCALE_VARS) != self.locale:
            return R_LOCALE
        if site != self.site:  # another cell's commands (the OCS cell beside Debian's): in-process,
            return R_IDENTITY  # never through a service whose preloaded state was made for another
        if len(self.jobs) + len(self.queue) + len(self.workers) >= MAX_CHILDREN:
            return R_BUSY
        return 0

    def accept(self, conn, stamp: int | None) -> int | None:
        """The one peer check (another uid's process: closed without a word), then the request's
        kind by its tag: a JSON request (``json_request``), else a served command, answered O or R
        (an O waits, in the poll, not here, for the go). stamp: the package's stamp taken for this
        batch of connections (None: not yet taken); returns it."""
        import select
        import socket
        import struct

        conn.settimeout(REQUEST_TIMEOUT)
        try:
            _pid, uid, gid = peer(conn)
            if uid != os.getuid():
                conn.close()  # another user's process: not a word
                return stamp
            tag = conn.recv(4, socket.MSG_PEEK)
        except OSError:
            conn.close()
            return stamp
        if tag == TAG_JSON:
            conn.recv(4)
            self.json_request(conn)
            return stamp
        if stamp is None:
            stamp = self.current_stamp()
        if stamp != self.stamp:  # first: a stale daemon may not even read today's frames
            self.log("the package changed: refusing, leaving")
            self.stopping = True
            self.refuse(conn, R_STALE)
            return stamp
        r, why = read_request(conn)
        if r is None:
            self.refuse(conn, why)
            return stamp
        why = self.check(r, uid, gid)
        if why == 0 and self.stopping:
            why = R_STOPPING
        if why:
            for fd in (r.cwd_fd, *r.fds):
                _close(fd)
            self.refuse(conn, why)
            return stamp
        try:
            conn.sendall(struct.pack("=Ii", ord("O"), os.getpid()))
        except OSError:
            for fd in (r.cwd_fd, *r.fds):
                _close(fd)
            conn.close()
            return stamp
        # the go comes in the poll: meanwhile other clients are read and answered
        import time

        self.pending[conn.fileno()] = (conn, r, time.monotonic() + REQUEST_TIMEOUT)
        self.poll.register(conn.fileno(), select.POLLIN)
        return stamp

    def json_request(self, conn) -> None:
        """ping, info, stop: answered at once; submit: handed to a thread of its own (the session's
        calls never hold up the poll). A malformed request is closed without an answer."""
        import threading

        from ..store.rundir import recv_json, send_json

        try:
            req = recv_json(conn)
        except (OSError, EOFError, ValueError) as e:
            if not isinstance(e, EOFError):
                self.log(f"request dropped: {e}")
            conn.close()
            return
        kind = req.get("kind")
        if kind == "submit" and not self.stopping and len([t for t in self.submitting if t.is_alive()]) < MAX_SUBMITTING:
            t = threading.Thread(target=self.submit, args=(conn, req), daemon=True)
            self.submitting.append(t)
            t.start()
            return
        sub = self.submitter
        if kind in ("ping", "info"):
            reply = {"status": "ok", "pid": os.getpid(), "served": self.served, "started": self.started,
                     "idle": self.idle, "submitted": sub.served if sub else 0,
                     "run_seconds": round(sub.run_seconds, 6) if sub else 0.0,
                     "drmaa": bool(sub and sub.session is not None)}
        elif kind == "stop":
            self.stopping = True
            reply = {"status": "ok", "pid": os.getpid()}
        elif kind == "submit":  # (leaving, or too many at once): not submitted, the client uses qsub
            reply = {"status": "refused", "reason": "stopping" if self.stopping else "too many at once"}
        else:
            reply = {"status": "refused", "reason": f"unknown kind {kind!r}"}
        try:
            send_json(conn, reply, tag=b"")
        except OSError:
            pass
        conn.close()

    def submit(self, conn, req: dict) -> None:
        """A submission, in its own thread: gridengine/submitter.py's Submitter holds the session."""
        import time

        try:
            conn.settimeout(SUBMIT_TIMEOUT)
            if self.submitter is None:
                with self.guard:  # (made once; the guard orders the first two submissions)
                    if self.submitter is None:
                        from ..gridengine.submitter import Submitter

                        self.submitter = Submitter(self.d, self.guard, self.log, self.retire)
            self.submitter.handle(conn, req)
        except (OSError, EOFError, ValueError) as e:
            if not isinstance(e, EOFError):
                self.log(f"submission dropped: {e}")
        except Exception as e:  # a malformed request must never take the daemon down
            self.log(f"submission dropped: {type(e).__name__}: {e}")
        finally:
            conn.close()
            self.last = time.monotonic()

    def retire(self) -> None:
        """A submission's answer may have been lost (a qmaster restarted under the session): this
        daemon leaves once its work is done, and the next call starts a fresh one."""
        self.stopping = True

    def go(self, fd: int) -> None:
        """The client's answer to O: G (run it) or anything else, an end of file included (not)."""
        import struct

        conn, r, _deadline = self.pending.pop(fd)
        self.poll.unregister(fd)
        try:
            data = conn.recv(8)
            ok = len(data) == 8 and struct.unpack("=Ii", data)[0] == ord("G")
        except OSError:
            ok = False
        if not ok:  # no go: nothing runs, and the client (if alive) runs it itself
            for f in (r.cwd_fd, *r.fds):
                _close(f)
            conn.close()
            return
        self.served += 1
        if reusable(r):  # a plain sbatch: a reused worker runs it (and says P when it starts)
            self.enqueue(conn, r)
            return
        self.run_once(conn, r)

    def run_once(self, conn, r: Request) -> None:
        """r in a child of its own (the spare, or one forked now), which exits after it."""
        import select
        import struct

        try:
            pid, pidfd = self.hand(r, conn)
        finally:
            for f in (r.cwd_fd, *r.fds):
                _close(f)
        conn.setblocking(True)
        try:
            conn.sendall(struct.pack("=Ii", ord("P"), pid))
        except OSError:
            pass
        if pidfd is None:  # (a kernel without pidfds: wait here)
            _, status = os.waitpid(pid, 0)
            self.report(conn, status)
            conn.close()
            return
        self.jobs[pidfd] = [conn, pid]
        self.conns[conn.fileno()] = pidfd
        self.poll.register(pidfd, select.POLLIN)
        self.poll.register(conn.fileno(), select.POLLIN)

    # -- reused workers (the daemon's side): a queue of plain sbatch, up to WORKERS taking from it
    def enqueue(self, conn, r: Request) -> None:
        import select

        self.queue.append((conn, r))
        self.dispatch()
        if self.queue and self.queue[-1][0] is conn:  # waiting: its client's end is watched meanwhile
            self.queued[conn.fileno()] = conn
            self.poll.register(conn.fileno(), select.POLLRDHUP)

    def dispatch(self) -> None:
        """Give queued requests to idle workers (a new one while fewer than WORKERS are busy and
        not stuck); with WORKERS_MAX workers all busy, a request gets a child of its own."""
        while self.queue:
            w = self.free_worker()
            if w is None:
                return
            conn, r = self.queue.pop(0)
            if self.queued.pop(conn.fileno(), None) is not None:
                self.poll.unregister(conn.fileno())
                if _gone(conn):  # (its client left while it waited: never run)
                    for f in (r.cwd_fd, *r.fds):
                        _close(f)
                    conn.close()
                    continue
            if w is False or not self.give(w, conn, r):
                self.run_once(conn, r)

    def free_worker(self):
        """An idle worker within its bounds, a new one, None (wait for one) or False (none will do)."""
        import time

        now = time.monotonic()
        fresh = 0
        for w in list(self.workers.values()):
            if w.sock is None:
                continue  # (retired: leaving)
            if w.conn is None:
                if w.n < WORKER_REQUESTS and now - w.born < WORKER_SECONDS:
                    return w
                self.retire_worker(w)
            elif now - w.since < WORKER_STUCK:
                fresh += 1
        if fresh >= WORKERS:
            return None
        if sum(w.sock is not None for w in self.workers.values()) >= WORKERS_MAX:
            return False  # (retired ones, not yet reaped, do not count)
        return self.new_worker(now)

    def new_worker(self, now: float):
        """The spare (forked ahead), else one forked now, as a worker; False when none can be."""
        import select

        try:
            if self.spare is None:
                self.fork_spare()
        except OSError as e:
            self.log(f"no worker ({e})")
            return False
        pid, pidfd, sock = self.spare
        if pidfd is None:  # (a kernel without pidfds: children of their own)
            return False
        self.spare = None
        w = Worker()
        w.pid, w.pidfd, w.sock, w.conn, w.n, w.born, w.since, w.signalled = pid, pidfd, sock, None, 0, now, now, False
        self.workers[pidfd] = w
        self.wsocks[sock.fileno()] = w
        self.poll.register(pidfd, select.POLLIN)
        self.poll.register(sock.fileno(), select.POLLIN)
        return w

    def give(self, w: "Worker", conn, r: Request) -> bool:
        """Hand r to worker w; False when w could not take it (gone: retired, r not run)."""
        import select
        import struct
        import time

        try:
            _send_request(w.sock, r, conn, True)
        except OSError:
            self.retire_worker(w)
            return False
        finally:
            for f in (r.cwd_fd, *r.fds):
                _close(f)
        w.conn, w.since, w.signalled = conn, time.monotonic(), False
        w.n += 1
        self.conns[conn.fileno()] = w.pidfd
        conn.setblocking(True)
        try:
            conn.sendall(struct.pack("=Ii", ord("P"), w.pid))
        except OSError:
            pass
        self.poll.register(conn.fileno(), select.POLLIN)
        return True

    def worker_done(self, w: "Worker") -> None:
        """The worker's D record: its request ended (it wrote the client's X itself); it takes the
        next request, or leaves (it said so, its bounds, the daemon is leaving)."""
        import signal
        import socket
        import struct
        import time

        try:
            data = w.sock.recv(8, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if len(data) != 8:  # the worker is gone or going: its pidfd tells (worker_died)
            self.retire_worker(w)
            return
        self._drop_conn(w)
        if w.signalled:  # (a stop the client forwarded after the command's end must not stay)
            try:
                signal.pidfd_send_signal(w.pidfd, signal.SIGCONT)
            except OSError:
                pass
        self.last = now = time.monotonic()
        stay = struct.unpack("=Ii", data)[1]
        if not stay or self.stopping or w.n >= WORKER_REQUESTS or now - w.born >= WORKER_SECONDS:
            self.retire_worker(w)
        self.dispatch()

    def _drop_conn(self, w: "Worker") -> None:
        conn, w.conn = w.conn, None
        if conn is not None:
            if self.conns.pop(conn.fileno(), None) is not None:
                self.poll.unregister(conn.fileno())
            conn.close()

    def retire_worker(self, w: "Worker") -> None:
        """Close w's socket: it reads an end of file and exits (reaped by worker_died or _end)."""
        if w.sock is not None:
            self.wsocks.pop(w.sock.fileno(), None)
            try:
                self.poll.unregister(w.sock.fileno())
            except KeyError:
                pass
            w.sock.close()
            w.sock = None

    def worker_died(self, pidfd: int) -> None:
        """A worker exited: reaped; a request it still held gets the status (as a child's)."""
        import time

        w = self.workers.pop(pidfd)
        try:
            _, status = os.waitpid(w.pid, 0)
        except ChildProcessError:
            status = 1 << 8
        if w.conn is not None:
            self.report(w.conn, status)
            self._drop_conn(w)
        self.retire_worker(w)
        self.poll.unregister(pidfd)
        os.close(pidfd)
        self.last = time.monotonic()
        self.dispatch()

    def unqueue(self, fd: int) -> None:
        """A queued request's client is gone: nothing was run, nothing runs."""
        conn = self.queued.pop(fd)
        self.poll.unregister(fd)
        for i, (c, r) in enumerate(self.queue):
            if c is conn:
                del self.queue[i]
                for f in (r.cwd_fd, *r.fds):
                    _close(f)
                break
        conn.close()

    def expire(self) -> None:
        """Clients that were answered O and never said go in time: nothing runs for them."""
        import time

        now = time.monotonic()
        for fd, (conn, r, deadline) in list(self.pending.items()):
            if now > deadline:
                del self.pending[fd]
                self.poll.unregister(fd)
                for f in (r.cwd_fd, *r.fds):
                    _close(f)
                conn.close()

    def hand(self, r: Request, conn) -> tuple[int, int | None]:
        """Give the request to the spare child (forked ahead, while the service had nothing to do),
        else to a child forked now: (its pid, its pidfd)."""
        spare, self.spare = self.spare, None
        if spare is not None:
            pid, pidfd, sock = spare
            try:
                _send_request(sock, r, conn, False)
                sock.close()
                return pid, pidfd
            except OSError:  # (the spare is gone): a child of its own
                sock.close()
                if pidfd is not None:
                    os.close(pidfd)
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        from .. import proc

        with self.guard:  # no submission thread is halfway through a change of the process's state
            pid = proc.fork()
        if pid == 0:
            try:
                self.child(r, conn.fileno())
            finally:
                os._exit(1)
        try:
            return pid, os.pidfd_open(pid)
        except OSError:
            return pid, None

    def fork_spare(self) -> None:
        """A child that waits, forked, for the next request: the fork is off the next call's path."""
        import socket

        from .. import proc

        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with self.guard:  # (as hand's)
            pid = proc.fork()
        if pid == 0:
            try:
                import signal

                a.close()  # (the service's end: this process must see it close)
                keep = b.fileno()
                for name in os.listdir("/proc/self/fd"):  # nothing of the service's: not its lock
                    fd = int(name)  # (a spare holding it kept every later service out), nor its
                    if fd > 2 and fd != keep:  # socket, another spare's end or a waiting client
                        _close(fd)
                for sig in (signal.SIGTERM, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_DFL)
                self.spare_wait(b)
            finally:
                os._exit(1)
        b.close()
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            pidfd = None
        self.spare = (pid, pidfd, a)

    def drop_spare(self) -> None:
        if self.spare is not None:
            pid, pidfd, sock = self.spare
            self.spare = None
            sock.close()  # it reads an end of file and exits
            if pidfd is not None:
                os.close(pidfd)
            try:
                os.kill(pid, 9)  # and if it does not, it has run nothing: a service that leaves never waits on it
            except OSError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass

    def spare_wait(self, sock) -> None:
        """The spare's wait: the request it is handed runs once (``child``), or, handed as a plain
        sbatch, starts this process's life as a reused worker (``worker``)."""
        fd = sock.detach()
        got = _receive(fd)
        if got is None:
            os._exit(0)  # the service left (or never sent): nothing to run
        r, conn_fd, keep = got
        if keep:
            self.worker(fd, r, conn_fd)
        else:
            self.child(r, conn_fd)

    def report(self, conn, status: int) -> None:
        import struct

        if os.WIFSIGNALED(status):
            rec = struct.pack("=Ii", ord("K"), os.WTERMSIG(status))
        else:
            rec = struct.pack("=Ii", ord("X"), os.waitstatus_to_exitcode(status))
        try:
            conn.sendall(rec)
        except OSError:
            pass

    def reap(self, pidfd: int) -> None:
        import time

        conn, pid = self.jobs.pop(pidfd)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = 1 << 8
        self.report(conn, status)
        self.poll.unregister(pidfd)
        os.close(pidfd)
        fd = conn.fileno()
        if fd in self.conns:
            del self.conns[fd]
            self.poll.unregister(fd)
        conn.close()
        self.last = time.monotonic()

    def message(self, fd: int) -> None:
        import signal
        import struct

        pidfd = self.conns[fd]
        w = self.workers.get(pidfd)
        conn = w.conn if w is not None else self.jobs[pidfd][0]
        try:
            data = conn.recv(8)
        except OSError:
            data = b""
        if len(data) == 8 and struct.unpack("=Ii", data)[0] == ord("S"):
            sig = struct.unpack("=Ii", data)[1]
            if 0 < sig < 65:
                try:
                    signal.pidfd_send_signal(pidfd, sig)
                except OSError:
                    pass
                if w is not None:
                    w.signalled = True
            return
        if w is not None and w.sock is not None and _waiting(w.sock):
            self.worker_done(w)  # (it said D before its X: the client read the X and left)
            return
        # the client is gone (killed): so is its command, as an in-process command would be
        try:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        except OSError:
            pass
        del self.conns[fd]
        self.poll.unregister(fd)

    # -- the child: one request, in the client's process state
    def child(self, r: Request, conn: int) -> None:
        """Run r in this (forked) process; conn: the client's connection, for the exit report."""
        import struct

        code = 1
        try:
            report = self.setup(r, conn)
        except BaseException as e:  # the request was handed over: fail as the command, once
            _write(2, f"{r.cmd}: error: internal error: {type(e).__name__}: {e}\n")
            os._exit(1)
        try:
            code = _run(r.cmd, sys.argv[1:])
        finally:
            try:  # the exit code straight to the client: it need not wait for this process's teardown
                os.write(report, struct.pack("=Ii", ord("X"), code))
            except OSError:
                pass
            os._exit(code)

    def setup(self, r: Request, conn: int, keep: list[int] | None = None) -> int:
        """This process in r's state: the client's descriptors at their numbers (every other closed
        but conn and keep's, moved above them: keep's numbers are updated in place), its directory,
        umask, signals, environment, TZ, argv, fresh sys.std*. The report descriptor (conn's)."""
        import signal
        import time

        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.lsock.detach()
        report = _place_fds(r.fds, r.targets, r.cwd_fd, conn, keep)
        os.umask(r.umask)
        for sig in range(1, 65):
            if r.ignored & (1 << (sig - 1)) and sig not in (signal.SIGKILL, signal.SIGSTOP):
                try:
                    signal.signal(sig, signal.SIG_IGN)
                except (OSError, ValueError):
                    pass
        signal.pthread_sigmask(signal.SIG_SETMASK, [s for s in range(1, 65) if r.blocked & (1 << (s - 1))])
        env = os.environb
        env.clear()
        for e in r.env:
            k, sep, v = e.partition(b"=")
            if sep and k:
                env[k] = v
        if self.coerced is not None and "LC_ALL" not in os.environ:
            os.environ["LC_CTYPE"] = self.coerced  # what the interpreter's start does (PEP 538)
        time.tzset()  # TZ as the client has it
        sys.argv = [os.fsdecode(a) for a in r.argv]
        _stdio()
        return report

    def worker(self, sock: int, r: Request, conn: int) -> None:
        """A reused worker's life (the spare that took a plain sbatch): run r as ``child`` does;
        then give the client's descriptors back (0-2 become the daemon's again, every other is
        closed, the directory is "/"), tell the daemon D (and whether it stays), write the client's
        X, and unless it leaves, put back what the request changed (``Pristine``) and take the next
        request from sock. It leaves (exits) when the request left what cannot be put back (an
        import, a thread, a child process, an exit function), or when the daemon closes sock (its
        bounds: WORKER_REQUESTS, WORKER_SECONDS; the daemon leaving or gone)."""
        import struct

        pristine = Pristine()
        keep = [sock]
        log = os.path.join(self.d, LOG)
        while True:
            code, report = 1, None
            try:
                pristine.enter()
                report = self.setup(r, conn, keep)
                code = _run(r.cmd, sys.argv[1:], pristine)
            except BaseException as e:  # the request was handed over: fail as the command, once
                _write(2, f"{r.cmd}: error: internal error: {type(e).__name__}: {e}\n")
            stay = _release(keep[0], report, log) and report is not None and pristine.clean()
            try:
                os.write(keep[0], struct.pack("=Ii", ord("D"), int(stay)))
            except OSError:
                stay = False
            if report is not None:
                try:
                    os.write(report, struct.pack("=Ii", ord("X"), code))
                except OSError:
                    pass
                _close(report)
            if not stay:
                os._exit(code)
            pristine.restore()
            got = _receive(keep[0])
            if got is None:
                os._exit(0)
            r, conn, _keep = got


class Worker:
    """A reused worker as the daemon sees it: its process, socket, the client it serves (None:
    idle), requests taken, when it was born and when its request started, whether it was sent a
    signal for its request."""

    __slots__ = ("pid", "pidfd", "sock", "conn", "n", "born", "since", "signalled")


def _send_request(sock, r: Request, conn, keep: bool) -> None:
    """r (its fields, its descriptors and the client's connection) to a spare or worker."""
    import marshal
    import socket
    import struct

    data = marshal.dumps((r.cmd, r.argv, r.env, r.targets, r.umask, r.ignored, r.blocked, keep))
    sock.settimeout(REQUEST_TIMEOUT)
    sent = sock.sendmsg([struct.pack("=Q", len(data)), data], [
        (socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"={len(r.fds) + 2}i", r.cwd_fd, conn.fileno(), *r.fds))])
    if sent < 8 + len(data):
        sock.sendall((struct.pack("=Q", len(data)) + data)[sent:])


def _receive(fd: int):
    """(request, the client's connection, keep) from the daemon on fd; None at its end. A
    malformed message: exit."""
    import marshal
    import socket
    import struct

    sock = socket.socket(fileno=fd)
    fds: list[int] = []
    try:
        msg, anc, _f, _a = sock.recvmsg(1 << 16, socket.CMSG_SPACE((MAX_FDS + 2) * 4))
        for level, typ, data in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds += struct.unpack(f"={len(data) // 4}i", data[: len(data) - len(data) % 4])
        if len(msg) < 8:
            return None  # the service left (or never sent): nothing to run
        (n,) = struct.unpack_from("=Q", msg)
        data = bytearray(msg[8:])
        while len(data) < n:
            chunk = sock.recv(min(n - len(data), 1 << 20))
            if not chunk:
                os._exit(1)
            data += chunk
        r = Request()
        r.cmd, r.argv, r.env, r.targets, r.umask, r.ignored, r.blocked, keep = marshal.loads(bytes(data))
        r.cwd_fd, conn_fd, r.fds = fds[0], fds[1], fds[2:]
    except BaseException:
        os._exit(1)
    finally:
        sock.detach()
    return r, conn_fd, keep


def _gone(conn) -> bool:
    """conn's client has closed its end."""
    import select

    p = select.poll()
    p.register(conn.fileno(), select.POLLRDHUP)
    return bool(p.poll(0))


def _waiting(sock) -> bool:
    """A record is waiting on sock (without reading it)."""
    import socket

    try:
        return len(sock.recv(8, socket.MSG_PEEK | socket.MSG_DONTWAIT)) == 8
    except OSError:
        return False


FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH", "SIGCONT", "SIGTSTP")


def _release(sock: int, report: int | None, log: str) -> bool:
    """A worker's request ended: the signals the client forwards ignored (one that comes late is
    lost, not the next request's), none blocked, descriptor 0 /dev/null and 1 and 2 the daemon's
    log again, every other one closed but sock and report, the directory "/"."""
    import signal

    for name in FORWARDED:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    null = os.open(os.devnull, os.O_RDWR)
    try:
        out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    except OSError:
        out = null
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    wanted = {0, 1, 2, sock, report}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in wanted:
            _close(fd)
    os.chdir("/")
    return True


class Pristine:
    """A worker's state as a freshly forked child has it, taken before its first request, and put
    back after each (``restore``): the environment (replaced, not merged), TZ, umask, signal
    dispositions (``enter``, at the next request's start), sys.argv, sys.std*, sys's hooks and
    recursion limit, warnings' filters, the default socket timeout, and every ``shim`` module's
    globals (each name's object, and the contents of its module-level dicts, lists and sets:
    siteconf's config, calls.command, the parsers' site limits, the caches of ids and listings).
    ``clean`` says whether the request left what cannot be put back: a module imported (its
    import-time reads of the environment), a thread, a child process, an exit function, another
    sys.path. Then the worker exits instead of taking another request."""

    def __init__(self):
        import atexit
        import signal
        import socket
        import warnings

        self.env = dict(os.environb)
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        self.signals = {}
        for sig in range(1, 65):
            if sig in (signal.SIGKILL, signal.SIGSTOP):
                continue
            try:
                self.signals[sig] = signal.getsignal(sig)
            except (ValueError, OSError):
                pass
        self.argv = list(sys.argv)
        self.std = (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__)
        self.paths = (list(sys.path), list(sys.meta_path), list(sys.path_hooks))
        self.hooks = (sys.excepthook, sys.displayhook, sys.getrecursionlimit())
        self.nmodules = len(sys.modules)
        self.atexits = atexit._ncallbacks()
        self.filters = list(warnings.filters)
        self.timeout = socket.getdefaulttimeout()
        self.modules = []
        for name, mod in list(sys.modules.items()):
            if mod is None or name == __name__ or not (name == "shim" or name.startswith("shim.")):
                continue
            d = vars(mod)
            saved = dict(d)
            boxes = [(k, v, v.copy()) for k, v in saved.items() if type(v) in (dict, list, set)]
            self.modules.append((d, saved, boxes))

    def enter(self) -> None:
        """Every signal's disposition as the fresh child had it (the request's own come after)."""
        import signal

        for sig, h in self.signals.items():
            if signal.getsignal(sig) is not h:
                try:
                    signal.signal(sig, h)
                except (OSError, ValueError, TypeError):
                    pass

    def clean(self) -> bool:
        import atexit
        import threading

        if len(sys.modules) != self.nmodules or threading.active_count() != 1:
            return False
        if atexit._ncallbacks() != self.atexits or (sys.path, sys.meta_path, sys.path_hooks) != self.paths:
            return False
        while True:  # the request's children: reaped; one still running keeps the worker from staying
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return True
            if pid == 0:
                return False

    def restore(self) -> None:
        import socket
        import time
        import warnings

        env = os.environb
        if env != self.env:
            env.clear()
            env.update(self.env)
        time.tzset()
        os.umask(self.umask)
        sys.argv = list(self.argv)
        sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__ = self.std
        sys.excepthook, sys.displayhook = self.hooks[:2]
        sys.setrecursionlimit(self.hooks[2])
        if warnings.filters != self.filters:
            warnings.filters[:] = self.filters
            warnings._filters_mutated()
        socket.setdefaulttimeout(self.timeout)
        for d, saved, boxes in self.modules:
            if d != saved:
                for k in [k for k in d if k not in saved]:
                    del d[k]
                d.update(saved)
            for _k, box, copy in boxes:
                if box != copy:
                    if type(box) is list:
                        box[:] = copy
                    else:
                        box.clear()
                        box.update(copy)


def _write(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode(errors="replace"))
    except OSError:
        pass


def _place_fds(fds: list[int], targets: list[int], cwd: int, conn: int, keep: list[int] | None = None) -> int:
    """Change into the directory cwd names; put received descriptor fds[i] at number targets[i];
    close every other descriptor (the service's socket, log, other requests') but conn, which
    moves above them, close-on-exec: its new number. keep's descriptors (a worker's own) move
    above them too, close-on-exec, their new numbers in keep."""
    import fcntl

    os.fchdir(cwd)
    base = max([*targets, 2]) + 1
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, base) for fd in fds]
    report = fcntl.fcntl(conn, fcntl.F_DUPFD_CLOEXEC, base + len(fds) + 8)
    if keep:
        keep[:] = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, report + 1) for fd in keep]
    wanted = set(high) | {report} | set(keep or ())
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in wanted:
            _close(fd)
    for h, t in zip(high, targets):
        os.dup2(h, t, inheritable=True)
        os.close(h)
    return report


def _stdio() -> None:
    """sys.stdin/stdout/stderr as a fresh interpreter makes them over descriptors 0, 1, 2."""
    import io

    keep = (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__)
    _kept.append(keep)  # never collected, so never closing descriptors that are the client's now
    first = sys.__stdout__ or sys.__stderr__  # the interpreter's own: its locale's encoding and handler
    errors = first.errors if first is not None else "strict"
    enc = first.encoding if first is not None else "utf-8"
    streams = []
    for fd, mode in ((0, "rb"), (1, "wb"), (2, "wb")):
        try:
            os.fstat(fd)
        except OSError:
            streams.append(None)
            continue
        raw = io.FileIO(fd, mode, closefd=False)
        raw.name = ("<stdin>", "<stdout>", "<stderr>")[fd]  # as the interpreter names them
        tty = raw.isatty()
        if fd == 0:
            buf = io.BufferedReader(raw)
        else:
            buf = io.BufferedWriter(raw)
        text = io.TextIOWrapper(buf, encoding=enc, errors="backslashreplace" if fd == 2 else errors,
                                newline="\n", line_buffering=(fd == 2 or tty), write_through=fd == 2)
        text.mode = "r" if fd == 0 else "w"
        streams.append(text)
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams


_kept: list = []


def _run(cmd: str, argv: list[str], pristine: Pristine | None = None) -> int:
    """What the console script does, and the interpreter's exit after it: the exit code. In a
    reused worker (pristine): the exit functions run only where the request registered one (the
    worker then leaves), and its threads are waited for without ending the main one."""
    from ..__main__ import dispatch

    try:
        code = dispatch(cmd, argv)
        try:
            if sys.stdout is not None:
                sys.stdout.flush()
        except BrokenPipeError:
            pass
    except SystemExit as e:
        code = e.code
    except KeyboardInterrupt:
        code = 130
    if code is None:
        code = 0
    elif not isinstance(code, int):
        try:
            print(code, file=sys.stderr)
        except Exception:
            pass
        code = 1
    import atexit

    if pristine is None or atexit._ncallbacks() != pristine.atexits:
        atexit._run_exitfuncs()
    th = sys.modules.get("threading")
    if th is not None:
        try:
            if pristine is None:
                th._shutdown()
            else:
                for t in th.enumerate():
                    if t is not th.current_thread() and not t.daemon:
                        t.join()
        except Exception:
            pass
    for s in (sys.stdout, sys.stderr):
        if s is None:
            continue
        try:
            s.flush()
        except Exception as e:
            if s is sys.stdout:  # as the interpreter's exit says and does when stdout cannot be flushed
                try:
                    # (3.13 words it "on flushing sys.stdout:"; 3.11 and 3.12 name the stream)
                    head = ("Exception ignored on flushing sys.stdout:" if sys.version_info >= (3, 13)
                            else f"Exception ignored in: {s!r}")
                    sys.stderr.write(f"{head}\n{type(e).__name__}: {e}\n")
                    sys.stderr.flush()
                except Exception:
                    pass
                code = 120
    return code & 0xFF


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def install_client(prefix: str) -> list[str]:
    """What scripts/setup does, for `slurm-shim install --apply` (install.client_action): compile the thin
    client (shipped as package data) with cc -O2 and put it over each served command of
    prefix/bin, the Python script moving to prefix/libexec/slurm-shim. The commands it replaced;
    [] where there is no compiler or no source (then nothing changes)."""
    import shutil

    from .. import proc

    src = os.path.join(package_root(), "client", "client.c")
    cc = shutil.which("cc")
    if cc is None or not os.path.exists(src):
        return []
    lx = os.path.join(prefix, "libexec", "slurm-shim")
    os.makedirs(lx, exist_ok=True)
    built = os.path.join(lx, ".client.new")
    defs = [f'-DSHIM_FALLBACK="{lx}"', f'-DSHIM_PYTHON="{os.path.join(prefix, "bin", "python3")}"']
    for static in (["-static"], []):  # static where libc.a exists: no dynamic loader per call
        res = proc.run([cc, "-O2", *static, *defs, "-o", built, src], timeout=120)
        if res.returncode == 0:
            break
    else:
        return []
    done = []
    for cmd in SERVED:
        b, py = os.path.join(prefix, "bin", cmd), os.path.join(lx, cmd)
        try:
            with open(b, "rb") as f:
                if f.read(2) == b"#!":  # pip's script: it becomes the fallback
                    shutil.copy2(b, py + ".new")
                    os.replace(py + ".new", py)
        except OSError:
            continue
        if not os.access(py, os.X_OK):
            continue
        shutil.copy2(built, b + ".new")
        os.chmod(b + ".new", 0o755)
        os.replace(b + ".new", b)
        done.append(cmd)
    _unlink(built)
    return done


def pid_of(d: str) -> int | None:
    """The pid of the service serving d (its lock holds it), or None."""
    import fcntl

    try:
        fd = os.open(os.path.join(d, LOCK), os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None  # nobody holds it
        except OSError:
            pass
        data = os.pread(fd, 32, 0).split()
        return int(data[0]) if data else None
    finally:
        os.close(fd)


def info(d: str, timeout: float = 5.0) -> tuple[int, int] | None:
    """(pid, commands run) of the daemon of d, or None when none answers (tests, bench)."""
    from ..store.rundir import ask

    try:
        got = ask(d, "info", timeout)
        return int(got["pid"]), int(got["served"])
    except (OSError, KeyError, TypeError, ValueError):
        return None


def serve(d: str) -> int:
    """Be the daemon of d in this process (``main(['serve'])`` after its checks of the environment)."""
    import faulthandler

    faulthandler.enable()  # a crash in native code (libdrmaa) leaves its stack in service.log
    os.chdir("/")
    idle = os.environ.get("SLURM_SHIM_SERVICE_IDLE")
    if not idle:
        from .. import siteconf

        try:
            idle = float(siteconf.get().submit.service_idle_minutes) * 60
        except Exception:  # no config, or one without the key: the default
            idle = 600
        finally:
            siteconf.reset()  # each child reads the config as a fresh process does
    return Service(d, float(idle)).serve()


USAGE = "usage: python -m shim.service serve|ping|info|status|stop"


def main(argv: list[str] | None = None) -> int:
    """``python -m shim.service serve|ping|info|status|stop`` (``python -m shim.agent`` too): serve
    is what a client starts; ping prints the daemon's state as JSON, info its pid and commands run,
    status its pid (from its lock), stop asks it to leave (SIGTERM when it does not answer)."""
    args = sys.argv[1:] if argv is None else argv
    cmd = args[0] if args else "status"
    d = service_dir()
    if d is None:
        print("slurm-shim service: no private directory", file=sys.stderr)
        return 1
    if cmd == "serve":
        clean = start_env(os.environ)
        if clean != dict(os.environ) and getattr(sys, "orig_argv", None):
            # started with more than start_env (by a client installed before F-33), or without
            # the static TLS room libdrmaa needs: again, with exactly that
            from .. import proc

            proc.reexec(sys.orig_argv, clean)
        return serve(d)
    if cmd in ("ping", "info"):
        import json

        from ..store.rundir import ask

        try:
            got = ask(d, "ping")
        except OSError as e:
            print(f"slurm-shim service: not running ({e})", file=sys.stderr)
            return 1
        print(json.dumps(got) if cmd == "ping" else f"pid {got['pid']} served {got['served']}")
        return 0
    if cmd in ("status", "stop"):
        return _status(d, cmd)
    print(USAGE, file=sys.stderr)
    return 2


def _status(d: str, cmd: str) -> int:
    import json

    from ..store.rundir import ask

    if cmd == "stop":
        try:
            print(json.dumps(ask(d, "stop")))
            return 0
        except OSError:
            pass
    pid = pid_of(d)
    if pid is None:
        print("slurm-shim service: not running", file=sys.stderr)
        return 1
    if cmd == "stop":  # (no answer: SIGTERM, and the same JSON as an answered stop)
        import signal

        os.kill(pid, signal.SIGTERM)
        print(json.dumps({"status": "ok", "pid": pid}))
        return 0
    print(pid)
    return 0


# --------------------------------------------------------------------------------------------
# The Python thin client (the C client's protocol; measured in bench/RESULTS.md)


def client(cmd: str, argv: list[str] | None = None) -> None:
    """Run cmd through the service, or in this process when there is none (starting one)."""
    args = sys.argv if argv is None else argv
    if enabled() and cmd in SERVED:
        code = _through(cmd, args)
        if code is not None:
            sys.exit(code)
    from ..__main__ import _entry

    _entry(cmd)()


def _through(cmd: str, args: list[str]) -> int | None:
    """The exit code of cmd run by the service; None: not handed over (run it here)."""
    import _socket
    import struct

    d = service_dir()
    if d is None:
        return None
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.settimeout(REQUEST_TIMEOUT)
        try:
            s.connect(os.path.join(d, SOCKET))
        except (FileNotFoundError, ConnectionRefusedError):
            start(d)
            return None
        except OSError:
            return None
        try:
            _pid, uid, _gid = peer(s)
        except OSError:
            return None
        if uid != os.getuid():
            return None
        for fd in (0, 1, 2):  # in the background of its terminal: job control is the terminal's
            try:
                if os.isatty(fd) and os.tcgetpgrp(fd) != os.getpgrp():
                    return None
            except OSError:
                pass
        try:
            cwd = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            fds = [fd for fd in (0, 1, 2) if _valid(fd)]
            words = [cmd.encode(), *(os.fsencode(a) for a in args), *(k + b"=" + v for k, v in os.environb.items()),
                     _mntns()]
            groups = os.getgroups()
            import resource

            lim = []
            for i in range(NLIMITS):
                soft, hard = resource.getrlimit(i)
                lim += [soft & 0xFFFFFFFFFFFFFFFF, hard & 0xFFFFFFFFFFFFFFFF]
            body = (struct.pack(f"={len(fds)}i", *fds) + struct.pack(f"={len(groups)}I", *groups)
                    + struct.pack(f"={2 * NLIMITS}Q", *lim) + b"\0".join(words) + b"\0")
            if len(body) > MAX_BODY:
                return None
            umask = os.umask(0)
            os.umask(umask)
            import signal

            ignored = 0
            for sig in range(1, 65):
                try:
                    if signal.getsignal(sig) == signal.SIG_IGN:
                        ignored |= 1 << (sig - 1)
                except (ValueError, OSError):
                    pass
            blocked = 0
            for sig in signal.pthread_sigmask(signal.SIG_BLOCK, []):
                blocked |= 1 << (int(sig) - 1)
            head = struct.pack(HEADER, MAGIC, len(body), len(args), len(os.environb), len(fds), len(groups), umask,
                               os.getuid(), os.getgid(), 0, ignored, blocked)
            anc = [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack(f"={len(fds) + 1}i", cwd, *fds))]
            sent = s.sendmsg([head, body], anc)
            if sent < len(head) + len(body):
                s.sendall((head + body)[sent:])
            rec = recv_exact(s, 8)
        except (OSError, EOFError):
            return None
        finally:
            os.close(cwd)
        kind, value = struct.unpack("=Ii", rec)
        if kind != ord("O"):
            return None
        try:
            s.sendall(struct.pack("=Ii", ord("G"), 0))
        except OSError:
            return None  # the service never read the go: it does not run the command
        # Handed over: from here the command is the service's, run once.
        s.settimeout(None)
        forward = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)

        def relay(sig, _frame):
            try:
                s.sendall(struct.pack("=Ii", ord("S"), sig))
            except OSError:
                pass

        for sig in forward:
            if signal.getsignal(sig) != signal.SIG_IGN:
                signal.signal(sig, relay)
        while True:
            try:
                rec = recv_exact(s, 8)
            except InterruptedError:
                continue
            except (OSError, EOFError):
                from ..gridengine.calls import _prefix

                _write(2, f"{_prefix(cmd)}{UNREACHABLE}\n")
                return 1
            kind, value = struct.unpack("=Ii", rec)
            if kind == ord("X"):
                return value
            if kind == ord("K"):
                signal.signal(value, signal.SIG_DFL)
                os.kill(os.getpid(), value)
                return 128 + value
    finally:
        s.close()


def _valid(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
