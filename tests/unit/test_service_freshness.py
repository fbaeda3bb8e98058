"""F-33 (security review 3): the warm service never runs stale native code, never serves forever,
and never keeps its first caller's environment.

- code_stamp covers the interpreter and every native file the service has mapped
  (/proc/self/maps): a replaced libpython, libc or extension module makes it stale, as a
  changed .py file does;
- a service leaves after service.LIFETIME however busy it is;
- the C client and service.start start it with service.start_env of the caller's environment:
  LD_PRELOAD, LD_LIBRARY_PATH, PYTHON* and the rest stay out of the process every later
  request of the user forks from (each request runs with its own environment, as before).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys

from shim.service import server as service
from test_service import _dead, cbin, client, start_service, wait_for, world  # noqa: F401 (fixtures)

LIBM = "/lib/x86_64-linux-gnu/libm.so.6"


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        items = [e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e]
    return {k.decode(): v.decode() for k, v in items}


def test_the_stamp_covers_the_interpreter_and_mapped_native_code(tmp_path):
    lib = tmp_path / "libshimstamp.so"
    shutil.copy2(LIBM, lib)
    ctypes.CDLL(str(lib))  # mapped now, as an extension module or libdrmaa is once loaded
    mapped = service.mapped_files()
    assert str(lib) in mapped and os.path.realpath("/proc/self/exe") in mapped
    root = tmp_path / "pkg"
    root.mkdir()
    before = service.code_stamp(str(root), mapped)
    assert service.code_stamp(str(root), mapped) == before
    st = lib.stat()
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a security update, in place
    assert service.code_stamp(str(root), mapped) != before
    changed = service.code_stamp(str(root), mapped)
    lib.unlink()
    shutil.copy2(LIBM, lib)  # replaced by a new file (a new inode)
    assert service.code_stamp(str(root), mapped) != changed


def test_a_service_leaves_after_its_lifetime_however_busy(world):  # noqa: F811
    d = world / "lifetime"
    d.mkdir(mode=0o700)
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(str(d / "service.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(fd, 2)
            sys.stderr = open(2, "w", closefd=False)  # (not pytest's capture)
            os.environ["SLURM_SHIM_AGENT_DIR"] = str(d)
            service.Service(str(d), idle=3600.0, lifetime=2.0).serve()
        finally:
            os._exit(0)
    try:
        wait_for(lambda: service.info(str(d)) is not None or _dead(pid), what="the service to answer")
        # an hour's idle time, and asked all the while (each info() is a connection): only its lifetime ends it
        wait_for(lambda: service.info(str(d)) is None and _dead(pid), timeout=30,
                 what="the service to leave at the end of its lifetime")
        assert "served 2 s: leaving" in (d / "service.log").read_text()
    finally:
        if not _dead(pid):
            os.kill(pid, signal.SIGKILL)


def test_the_c_client_starts_a_service_without_its_callers_preload(cbin, world):  # noqa: F811
    d = world / "clean-env"
    d.mkdir(mode=0o700)
    planted = {"LD_PRELOAD": LIBM, "LD_LIBRARY_PATH": "/var/tmp/evil", "PYTHONINSPECT": "1", "W1_SECRET": "x",
               "TZ": "Asia/Tokyo"}
    cp = client(cbin, d, "exit", "0", env=planted)
    assert (cp.returncode, cp.stdout) == (42, b"fallback squeue exit 0\n")  # in-process; starts one
    pid = wait_for(lambda: (service.info(str(d)) or (None,))[0], timeout=60, what="the started service")
    try:
        env = _environ(pid)
        for k in ("LD_PRELOAD", "LD_LIBRARY_PATH", "PYTHONINSPECT", "W1_SECRET"):
            assert k not in env, k
        assert env["SLURM_SHIM_AGENT_DIR"] == str(d) and env["TZ"] == "Asia/Tokyo" and env["PATH"] == "/usr/bin:/bin"
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: service.info(str(d)) is None, what="its exit")


def test_service_start_passes_only_the_start_environment(world):  # noqa: F811
    d = world / "clean-env-py"
    d.mkdir(mode=0o700)
    caller = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": LIBM, "PYTHONPATH": "/var/tmp/evil", "W1_SECRET": "x",
              "LANG": os.environ.get("LANG", "C.UTF-8"), "SLURM_SHIM_SERVICE_IDLE": "30"}
    assert service.start_env(caller) == {"PATH": "/usr/bin:/bin", "LANG": caller["LANG"], "SLURM_SHIM_SERVICE_IDLE": "30",
                                         "GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=4096"}  # (libdrmaa's)
    assert service.start(str(d), caller)
    pid = wait_for(lambda: (service.info(str(d)) or (None,))[0], timeout=60, what="the started service")
    try:
        env = _environ(pid)
        assert not {"LD_PRELOAD", "PYTHONPATH", "W1_SECRET"} & set(env)
        assert env["SLURM_SHIM_AGENT_DIR"] == str(d)
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: service.info(str(d)) is None, what="its exit")


def test_a_service_started_with_more_restarts_itself_with_the_start_environment(world):  # noqa: F811
    """A client installed before this change passes its whole environment: the service execs
    itself again with start_env's part of it, before it serves anyone."""
    d = world / "clean-env-exec"
    d.mkdir(mode=0o700)
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": LIBM, "W1_SECRET": "x", "SLURM_SHIM_AGENT_DIR": str(d),
           "SLURM_SHIM_SERVICE_IDLE": "30"}
    p = subprocess.Popen(service.serve_argv(), env=env, cwd="/", stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        got = wait_for(lambda: service.info(str(d)), timeout=60, what="the service")
        assert got[0] == p.pid  # the same process, exec'd again
        e = _environ(p.pid)
        assert not {"LD_PRELOAD", "W1_SECRET"} & set(e) and e["SLURM_SHIM_AGENT_DIR"] == str(d)
    finally:
        p.terminate()
        p.wait(timeout=30)
