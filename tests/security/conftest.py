"""Attacks as a plain user: two users the tests create, ``shimvictim`` and ``shimmallory``
(mallory attacks the victim and root). The kernel's own defences are switched off for the run
(fs.protected_symlinks/regular/fifos = 0), so what is tested is the shim's."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from conftest import open_dir, run, test_user  # noqa: F401  (run is re-exported for the tests)

VICTIM = "shimvictim"
MALLORY = "shimmallory"


_user = test_user


@pytest.fixture(scope="session", autouse=True)
def kernel_protections_off():
    """fs.protected_* = 0 while the security tests run, restored afterwards."""
    keys = ("fs.protected_symlinks", "fs.protected_regular", "fs.protected_fifos")
    old = {}
    for k in keys:
        path = Path("/proc/sys") / k.replace(".", "/")
        try:
            old[k] = path.read_text().strip()
            path.write_text("0")
        except OSError:
            pass  # a container that keeps /proc/sys read-only: the value the host set stays
    yield {k: (Path("/proc/sys") / k.replace(".", "/")).read_text().strip() for k in old}
    for k, v in old.items():
        try:
            (Path("/proc/sys") / k.replace(".", "/")).write_text(v)
        except OSError:
            pass


# .ci/run runs the Debian and the OCS cells' suites side by side. The cells share the machine's
# users and /tmp, and an attack module squats and clears names of its own test users there (F-29's
# /tmp/slurm-shim-<uid>, their services): the security modules of two sessions take turns, each
# holding this lock (in root's /run, not in a directory others can write) while its tests run.
TURN_LOCK = "/run/slurm-shim-tests-security.lock"


@pytest.fixture(scope="module", autouse=True)
def one_attack_module_at_a_time():
    fd = os.open(TURN_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (the lock goes with the descriptor)


@pytest.fixture(scope="session")
def victim() -> str:
    return _user(VICTIM)


@pytest.fixture(scope="session")
def mallory() -> str:
    return _user(MALLORY)


def uid(name: str) -> int:
    import pwd

    return pwd.getpwnam(name).pw_uid


def as_user(user: str, *argv: str, **kw) -> subprocess.CompletedProcess:
    """Run argv (no shell) as ``user``, from a directory the user owns unless cwd= is given."""
    import pwd

    kw.setdefault("cwd", pwd.getpwnam(user).pw_dir)
    return run(*argv, user=user, **kw)


def mallory_python(code: str, **kw) -> subprocess.CompletedProcess:
    """A Python program run as mallory (her attack tools)."""
    return as_user(MALLORY, "/usr/bin/python3", "-I", "-c", code, **kw)


@pytest.fixture
def shared_dir():
    """A directory like a shared project directory: mode 1777, root's."""
    return open_dir("shared", 0o1777)
