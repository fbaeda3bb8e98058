"""Issue 29: the daemon checks that its code is unchanged at one system call a request
(server.CodeWatch), and still refuses as stale (R_STALE) on every change the whole
stamp (server.code_stamp) detects: a package file edited in place, added, renamed over; a
directory added and then a file in it; a directory above the package swapped; a sys.path
directory changed; a mapped native file replaced. A __pycache__ write is not a change. Where
the watch cannot be set up, every request takes the stamp as before, and a stale request is still
refused. A request with nothing changed neither walks nor stats the package.

Driven over a real socket with a real daemon (forked from this process, test_service.py's probe
as its command), and the watch object on its own."""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import shim.__main__ as shim_main
from shim.service import server as service
from test_service import _dead, _probe, cbin, client, log_to, stop_service, wait_for, world  # noqa: F401

SERVES_THE_MACHINES_CONFIG = True  # (conftest._unit_site_config; test_service.py's)
LIBM = "/lib/x86_64-linux-gnu/libm.so.6"


@pytest.fixture
def tree(tmp_path):
    """A package (inst/pkg: a module and a subpackage), a sys.path directory and a native library
    for the daemon to map, each in tmp_path."""
    root = tmp_path / "inst" / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "top.py").write_text("x = 1\n")
    (root / "sub" / "mod.py").write_text("y = 1\n")
    sp = tmp_path / "sp"
    sp.mkdir()
    lib = tmp_path / "lib" / "libshimwatch.so"
    lib.parent.mkdir()
    shutil.copy2(LIBM, lib)
    return {"root": root, "sp": sp, "lib": lib, "tmp": tmp_path}


def _counting(root: Path, out: Path) -> None:
    """In the daemon: each os.scandir, os.stat and os.lstat of a path under root, and each
    code_stamp, appends a line to out."""
    top = os.fsencode(root)

    def note(what: str) -> None:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(fd, what.encode() + b"\n")
        os.close(fd)

    def counted(fn, name):
        def call(path=".", *a, **kw):
            p = path if isinstance(path, int) else os.fsencode(os.fspath(path))
            if not isinstance(p, int) and (p == top or p.startswith(top + b"/")):
                note(name)
            return fn(path, *a, **kw)
        return call

    for name in ("scandir", "stat", "lstat"):
        setattr(os, name, counted(getattr(os, name), name))
    stamp = service.code_stamp

    def stamped(*a, **kw):
        note("code_stamp")
        return stamp(*a, **kw)

    service.code_stamp = stamped


def stdlib() -> list[str]:
    """sys.path's entries of the interpreter's own library (what a process of these tests imports
    from them is imported already)."""
    return [p for p in sys.path if p.startswith(os.path.join(sys.base_prefix, "lib", ""))]


def start(d: Path, t: dict, fail: bool = False, count: Path | None = None) -> int:
    """A daemon for d serving the probe, its package t's root, t's sys.path directory on its
    sys.path, t's library mapped; fail: its code watch cannot be set up (ENOSYS); count: the
    calls _counting counts go to this file."""
    d.mkdir(mode=0o700)
    pid = os.fork()
    if pid == 0:
        try:
            log_to(d)
            shim_main.dispatch = _probe
            service.package_root = lambda: str(t["root"])
            sys.path[:] = [*stdlib(), str(t["sp"])]  # (not this tree's directories, which others may edit)
            ctypes.CDLL(str(t["lib"]))  # mapped, as an extension module or libdrmaa is once loaded
            if fail:
                def no_inotify(*_a):
                    raise OSError(errno.ENOSYS, "inotify_init1: Function not implemented")
                service.CodeWatch = no_inotify
            if count is not None:
                _counting(t["root"], count)
            os.chdir("/")
            service.Service(str(d), 60.0).serve()
        finally:
            os._exit(0)
    wait_for(lambda: service.info(str(d)) is not None or _dead(pid), what="the daemon to answer")
    assert not _dead(pid), (d / "service.log").read_text()
    return pid


@pytest.fixture
def daemon(world, tree, request):
    d = world / f"cw-{request.node.name[-48:].replace('[', '-').replace(']', '')}"
    pid = start(d, tree, **getattr(request, "param", {}))
    yield d
    stop_service(pid)


def refusal(d: Path) -> tuple[int, int]:
    """What the daemon answers a run request's tag: a stale daemon refuses it (R, R_STALE) before
    it reads anything more. (Only for a daemon that refuses: any other waits for the frame.)"""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)  # (a bound, as the client's: a loaded machine answers late, never wrongly)
    s.connect(str(d / "service.sock"))
    s.sendall(service.MAGIC)
    got = struct.unpack("=Ii", s.recv(8))
    s.close()
    return got


def is_served(cbin, d: Path) -> bool:
    cp = client(cbin, d, "exit", "0")
    assert cp.returncode in (0, 42), cp
    return cp.returncode == 0


def _edit_in_place(t):  # same size, a new mtime, the same inode
    mod = t["root"] / "sub" / "mod.py"
    st = mod.stat()
    with open(mod, "r+") as f:
        f.write("y = 2\n")
    os.utime(mod, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert (mod.stat().st_size, mod.stat().st_ino) == (st.st_size, st.st_ino)


def _new_file(t):
    (t["root"] / "sub" / "new.py").write_text("z = 1\n")


def _renamed_over(t):
    tmp = t["root"] / "sub" / ".mod.py.tmp"
    tmp.write_text("y = 1\n")  # the same text, a new file
    os.replace(tmp, t["root"] / "sub" / "mod.py")


def _sys_path_dir(t):
    (t["sp"] / "added.pth").write_text("")


def _mapped_replaced(t):
    new = t["lib"].with_name("libshimwatch.so.new")
    shutil.copy2(LIBM, new)
    os.replace(new, t["lib"])  # a security update: the same bytes, a new inode


def _above_swapped(t):
    inst = t["root"].parent
    new = inst.with_name("inst.new")
    shutil.copytree(inst, new)  # the same tree, new inodes (an install switched by renames)
    os.rename(inst, inst.with_name("inst.old"))
    os.rename(new, inst)


@pytest.mark.parametrize("change", [_edit_in_place, _new_file, _renamed_over, _sys_path_dir, _mapped_replaced,
                                    _above_swapped], ids=lambda f: f.__name__.strip("_"))
def test_each_change_the_stamp_sees_makes_the_next_request_stale(cbin, daemon, tree, change):
    # (what the daemon logged, should either step fail: it failed once, edit_in_place, in a unit
    # run beside CI and a fresh venv's install, and its message was not kept)
    assert is_served(cbin, daemon), (daemon / "service.log").read_text()
    change(tree)
    assert refusal(daemon) == (ord("R"), service.R_STALE), (daemon / "service.log").read_text()
    assert "the package changed: refusing, leaving" in (daemon / "service.log").read_text()


def test_a_new_directory_is_watched_from_then_on(cbin, daemon, tree):
    """A new subpackage directory with no .py yet changes nothing (served); a file in it later does."""
    (tree["root"] / "later").mkdir()
    assert is_served(cbin, daemon)
    (tree["root"] / "later" / "m.py").write_text("")
    assert refusal(daemon) == (ord("R"), service.R_STALE)


def test_a_pycache_write_is_no_change(cbin, daemon, tree):
    cache = tree["root"] / "sub" / "__pycache__"
    cache.mkdir()  # an event in a package directory: the stamp is taken again, and is the same
    assert is_served(cbin, daemon)
    (cache / f"mod.{sys.implementation.cache_tag}.pyc").write_bytes(b"\0" * 16)
    (tree["root"] / "sub" / "notes.txt").write_text("not code")  # (and nor is a file that is not .py)
    assert is_served(cbin, daemon) and is_served(cbin, daemon)
    assert "the package changed" not in (daemon / "service.log").read_text()


@pytest.mark.parametrize("daemon", [{"fail": True}], indirect=True)
def test_without_a_watch_every_request_stamps_and_a_stale_one_is_refused(cbin, daemon, tree):
    assert is_served(cbin, daemon) and is_served(cbin, daemon)
    log = (daemon / "service.log").read_text()
    assert log.count("the code is not watched") == 1 and "Function not implemented" in log
    _edit_in_place(tree)
    assert refusal(daemon) == (ord("R"), service.R_STALE)


@pytest.fixture
def counted(world, tree):
    count = tree["tmp"] / "calls"
    d = world / "cw-counted"
    pid = start(d, tree, count=count)
    yield d, count
    stop_service(pid)


def _lines(p: Path) -> list[str]:
    return p.read_text().split() if p.exists() else []


def test_a_request_with_nothing_changed_neither_walks_nor_stats_the_package(cbin, counted, tree):
    d, count = counted
    assert is_served(cbin, d)
    before = _lines(count)
    assert before.count("code_stamp") == 1 and "scandir" in before  # the start's stamp, and its watch
    for _ in range(3):
        assert is_served(cbin, d)
    assert _lines(count) == before
    _edit_in_place(tree)  # and the counter counts: a change is walked, stamped, and refused
    assert refusal(d) == (ord("R"), service.R_STALE)
    after = _lines(count)
    assert after.count("code_stamp") == 2 and after.count("scandir") > before.count("scandir")


# --------------------------------------------------------------------------------------------
# The watch on its own


@pytest.fixture(autouse=True)
def _still_path(monkeypatch, request):
    """The watch's own tests: sys.path the interpreter's library only (this tree's directories,
    which others may edit while they run, are not what they look at)."""
    if "daemon" not in request.fixturenames and "counted" not in request.fixturenames:
        monkeypatch.setattr(sys, "path", stdlib())


def _watch(t) -> service.CodeWatch:
    return service.CodeWatch(str(t["root"]), [str(t["lib"])])


def test_asking_the_watch_costs_no_look_at_the_files(tree, monkeypatch):
    w = _watch(tree)
    try:
        def no(*_a, **_kw):
            raise AssertionError("looked at the files")

        with monkeypatch.context() as m:
            for name in ("scandir", "stat", "lstat", "listdir"):
                m.setattr(os, name, no)
            assert [w.changed() for _ in range(3)] == [False] * 3
        (tree["root"] / "top.py").write_text("x = 2\n")
        assert w.changed() and not w.changed()  # (each event is read once)
    finally:
        w.close()


def test_events_of_other_names_above_the_package_do_not_count(tree):
    w = _watch(tree)
    try:
        (tree["tmp"] / "unrelated").write_text("")  # beside inst/, in a directory on the package's way
        (tree["root"].parent / "README").write_text("")  # beside pkg/
        (tree["lib"].parent / "libother.so").write_text("")  # beside the mapped file
        assert not w.changed()
        (tree["tmp"] / "inst").rename(tree["tmp"] / "inst.old")
        assert w.changed()
    finally:
        w.close()


def test_a_write_through_a_hard_link_elsewhere_counts(tree):
    """A package file written through another name in another directory: no event of its
    directory's, one of the file's own."""
    other = tree["tmp"] / "elsewhere"
    other.mkdir()
    os.link(tree["root"] / "sub" / "mod.py", other / "alias.py")
    (tree["root"] / "sub" / "dangling.py").symlink_to(tree["tmp"] / "nowhere.py")  # (watched as a link)
    w = _watch(tree)
    try:
        assert not w.changed()
        with open(other / "alias.py", "r+") as f:
            f.write("y = 3\n")
        assert w.changed()
    finally:
        w.close()


def test_a_switched_symbolic_link_on_the_way_counts(tree):
    """The package reached through a link (current -> inst): switching the link is a change."""
    link = tree["tmp"] / "current"
    link.symlink_to("inst")
    t = dict(tree, root=link / "pkg")
    shutil.copytree(tree["tmp"] / "inst", tree["tmp"] / "inst2")
    w = _watch(t)
    try:
        assert not w.changed()
        (tree["tmp"] / "inst2" / "pkg" / "top.py").write_text("x = 3\n")  # not (yet) on the way
        assert not w.changed()
        new = tree["tmp"] / "current.new"
        new.symlink_to("inst2")
        os.replace(new, link)
        assert w.changed()
        w.arm()  # watched again: now the new target's files count
        (tree["tmp"] / "inst2" / "pkg" / "top.py").write_text("x = 4\n")
        assert w.changed()
    finally:
        w.close()


def test_a_changed_sys_path_list_counts(tree, monkeypatch):
    w = _watch(tree)
    try:
        monkeypatch.setattr(sys, "path", [*sys.path, str(tree["sp"])])
        assert w.changed()
        w.arm()
        assert not w.changed()
        (tree["sp"] / "x.pth").write_text("")
        assert w.changed()
    finally:
        w.close()


def test_a_path_on_a_file_system_another_host_may_change_is_not_watched(tree, monkeypatch):
    monkeypatch.setattr(service, "LOCAL_FS", frozenset())
    with pytest.raises(OSError, match="may not be notified"):
        _watch(tree)


MOUNTED = """
import os, subprocess, sys
sys.path[:0] = sys.argv[1:3]
from shim.service import server
w = server.CodeWatch(sys.argv[3], [])
before = w.changed()
subprocess.run(["mount", "--bind", sys.argv[4], os.path.join(sys.argv[3], "sub")], check=True)
print(before, w.changed(), w.changed())
"""


def test_a_mount_over_the_package_counts(tree):
    """In a private mount namespace (unshare -m): a bind mount over the package's subdirectory."""
    other = tree["tmp"] / "other"
    other.mkdir()
    (other / "mod.py").write_text("y = 1\n")
    src = str(Path(service.__file__).resolve().parents[2])
    cp = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, "-c", MOUNTED, src,
                         str(Path(__file__).parent), str(tree["root"]), str(other)],
                        capture_output=True, text=True, timeout=60)
    assert (cp.returncode, cp.stdout) == (0, "False True False\n"), cp.stderr


def test_a_watch_that_fails_later_falls_back_to_the_stamp_once(tmp_path, capsys):
    class Broken:
        closed = False

        def changed(self):
            raise OSError(errno.EBADF, "read")

        def close(self):
            Broken.closed = True

    s = service.Service(str(tmp_path), 60.0)
    s.mapped, s.stamp, s.watch = [], 12345, Broken()
    assert s.current_stamp() == service.code_stamp(mapped=[]) != 12345
    assert s.watch is None and Broken.closed
    assert s.current_stamp() == service.code_stamp(mapped=[])
    assert capsys.readouterr().err.count("the code is no longer watched") == 1
