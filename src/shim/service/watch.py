"""Whether the code the daemon runs may have changed, at one system call a request (issue 29).

The daemon refuses and leaves as soon as ``server.code_stamp`` differs from its start's (F-33): a
hash of every ``.py`` file of the package (path, size, mtime, inode), of each ``sys.path`` entry
and of the interpreter and the native files it mapped. Taking that stamp walks the package (~0.6
ms, most of the daemon's own CPU a request). ``CodeWatch`` lets the daemon take it only when
something it covers may have changed: one inotify instance watches every inode whose change can
change the stamp, and a request asks it with one ``poll`` (no event: nothing changed). Any event
that may matter, a lost event (``IN_Q_OVERFLOW``), a change of the mount table or a changed
``sys.path`` list makes the daemon watch again (``arm``) and take the whole stamp once, which it
compares as before: an event never makes it leave by itself (a ``__pycache__`` written is not a
change of the code).

What is watched, each directory before it is read, so that nothing changes unseen between a look
and its watch (a change before the watch is in what the look sees; one after it is an event):

* the package's directories (every event: a ``.py`` file created, written, renamed, removed, or
  its times changed), found as ``code_stamp`` finds them (no symbolic link followed, no
  ``__pycache__``), and each ``.py`` file itself (written or touched through a hard link in
  another directory, its directory's watch sees nothing);
* each ``sys.path`` entry (its directory's entries and times: the stamp holds its mtime and
  inode), the interpreter and every mapped file (written, its times changed, removed, renamed:
  ``IN_ATTRIB``, ``IN_MODIFY``, ``IN_DELETE_SELF``, ``IN_MOVE_SELF``);
* every directory entry the kernel looks up to reach each of them (``lookups``: each component of
  the path and of every symbolic link on the way, from ``/``), for that name: a directory above
  the install renamed or replaced, a symbolic link switched, a missing ``sys.path`` entry created.
  Events of other names in those directories (``/tmp``'s, a home directory's) are read and passed
  over;
* the mount table (``/proc/self/mountinfo``, ``POLLPRI``): a file system mounted over a path.

Where that cannot be (no inotify, its limits reached, a watch refused, a path on a file system
whose changes another host may make unseen: anything but a local one in ``LOCAL``), the caller
takes the whole stamp on every request, as before. Not seen by inotify, so not here: a write
through a shared writable mapping of a package file (the stamp sees its mtime at writeback).
"""

from __future__ import annotations

import os
import sys

IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
IN_DONT_FOLLOW, IN_MASK_ADD = 0x02000000, 0x20000000
SELF = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_Q_OVERFLOW | IN_IGNORED  # always count
# a directory on the way to a watched path: its entries (by name) and its own removal or move
ENTRY = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF
PACKAGE = ENTRY | IN_MODIFY | IN_CLOSE_WRITE  # a directory of the package: every file in it
FILE = IN_ATTRIB | IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF  # the interpreter, a mapped file
ANY = None  # a watch whose every event counts (a directory's names: a set of those that count)
MAX_LINKS = 40  # symbolic links followed on one path (the kernel's own bound)
# statfs f_type of file systems only this host changes, so inotify sees every change: ext2/3/4,
# xfs, btrfs, tmpfs, ramfs, overlayfs, squashfs, erofs, zfs, f2fs, bcachefs, jfs, reiserfs, vfat,
# exfat. Anything else (NFS, CIFS, FUSE, Ceph, Lustre, GPFS, 9p, ...): the stamp on every request.
LOCAL = frozenset({0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0x858458F6, 0x794C7630, 0x73717368, 0xE0F5E1E2,
                   0x2FC12FC1, 0xF2F52010, 0xCA451A4E, 0x3153464A, 0x52654973, 0x4D44, 0x2011BAB0})


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
        self.rel: dict[int, set | None] = {}  # wd -> the names whose events count (ANY: every event)
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
                if mask & SELF or not name:
                    hit = True
                    continue
                names = self.rel.get(wd, ANY)  # (a watch not ours: counts)
                if names is ANY or name in names:
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
                self._watch(leaf, ENTRY if os.path.isdir(leaf) else FILE, ANY)
        for path in (sys.executable, *self.mapped):
            if path:
                leaf = self.lookups(os.path.abspath(path))
                if leaf is not None:
                    self._watch(leaf, FILE, ANY)

    def _tree(self, top: str) -> None:
        """The package's directories, each watched before it is listed (as code_stamp walks them)."""
        stack = [top]
        while stack:
            d = stack.pop()
            self._watch(d, PACKAGE, ANY)
            try:
                it = os.scandir(d)
            except OSError:
                continue
            with it:
                for e in it:
                    if e.name.endswith(".py"):  # (itself too: written through a hard link elsewhere, its
                        # directory's watch sees nothing; a link: the link, on its directory's file system)
                        self._watch(e.path, FILE | IN_DONT_FOLLOW, ANY, local=e.is_symlink())
                    elif e.name != "__pycache__" and e.is_dir(follow_symlinks=False):
                        stack.append(e.path)

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
            self._watch(cur, ENTRY, os.fsencode(name))
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
        """path watched for mask's events (added to what it has), and name (ANY: every name)
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
        if name is ANY:
            self.rel[wd] = ANY
        elif wd not in self.rel:
            self.rel[wd] = {name}
        elif self.rel[wd] is not ANY:
            self.rel[wd].add(name)

    def _local(self, path: str) -> None:
        """OSError unless path is on a file system in LOCAL."""
        buf = self._statfs_buf
        self._check(self._libc.statfs(os.fsencode(path), buf), f"statfs {path}")
        kind = self._ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF
        if kind not in LOCAL:
            raise OSError(f"{path} is on a file system of type {kind:#x}, whose changes may not be notified")
