"""Fixtures of the integration tests shared by several files: the two-host cluster.

``two_hosts``: a second execution host beside this one (scripts/multihost: an sge_execd in its own
network and UTS namespaces) in the selected cell (tests/conftest.py: CELL), reachable only through
queue/partition "twohost". The fixture's value is the environment that sends a command there (a
site config of its own, the selected cell's as its base) and names the second host (``.node``)."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import CELL, REPO, SITE_CONFIG, run, shim_env, wait_until, with_release

# scripts/multihost's second host of each cell (each its own name: both cells' can be up at once)
SECOND_HOST = "ocsnode2" if CELL == "ocs" else "node2"
LOCK_DIR = "/run/slurm-shim-multihost"  # root's (scripts/multihost makes it too)
TWOHOST_PARTITION = '[partitions.twohost]\nqueue = "twohost"\npe = "smp"\npe_multinode = "mpi"\n'


class TwoHosts(dict):
    """The environment of a command meant for partition "twohost" ({"SLURM_SHIM_CONFIG": ...}),
    and the name of the second host (``node``; this host is ``os.uname().nodename``)."""

    node = SECOND_HOST


def twohost_config(base: str) -> str:
    """A site config: ``base`` with partition "twohost", and MpiDefault pmi2 as cluster up writes it."""
    lines = [ln for ln in base.splitlines() if not ln.startswith("mpi_default")]
    at = lines.index("[cluster]") + 1
    lines[at:at] = ['mpi_default = "pmi2"']
    return "\n".join(lines) + "\n\n" + TWOHOST_PARTITION


def multihost(action: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "scripts" / "multihost"), action], capture_output=True, text=True,
                          timeout=timeout, env=shim_env({"SLURM_SHIM_CELL": CELL}))


def _hold(lock, how: int, timeout: float = 0) -> bool:
    """flock ``how`` on ``lock``: one try (False: another session holds it), or with ``timeout``
    waited for (wait_until: the test fails when it is not had by then)."""
    import fcntl

    def take() -> bool:
        try:
            fcntl.flock(lock, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    return take() if not timeout else wait_until(
        take, timeout, f"another test session to stop taking the {CELL} cell's second host down", delay=0.2, cap=1.0)


@pytest.fixture(scope="session")
def two_hosts():
    """The second host, up for the session, and a site config with partition "twohost" in a
    directory every user can read (pytest's own root is 0700, and is reset so whenever another
    pytest starts). Sessions that overlap (several test runs on one machine) share it: each holds
    a shared lock on LOCK_DIR/<cell>.users while it runs; the one that brought the host up takes
    it down at its end only if no other session holds it then."""
    import fcntl

    os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
    users = open(os.path.join(LOCK_DIR, f"{CELL}.users"), "a")
    _hold(users, fcntl.LOCK_SH, 300)
    was_up = multihost("status", timeout=60).returncode == 0
    setup = multihost("up")
    if setup.returncode != 0:
        users.close()
        pytest.fail(f"scripts/multihost up failed ({CELL} cell): {setup.stderr}")
    d = Path(tempfile.mkdtemp(prefix="shim-twohost-", dir="/tmp"))
    d.chmod(0o755)
    conf = d / "config.toml"
    conf.write_text(twohost_config(SITE_CONFIG.read_text()))
    conf.chmod(0o644)
    yield TwoHosts(SLURM_SHIM_CONFIG=str(conf))
    if not was_up and _hold(users, fcntl.LOCK_EX):  # no other session uses it now
        multihost("down")
    users.close()
    shutil.rmtree(d, ignore_errors=True)


_SERIAL = itertools.count()


@pytest.fixture
def reservation(plain_user):
    """An advance reservation of its own (qrsub -N, for root and the plain user, on debug): (name,
    id); removed after.
    """
    # a name of its own per test: a job of the test before (an srun's, still ending) keeps its name
    name = f"w7resv{os.getpid()}x{next(_SERIAL)}"
    # A reservation from now is granted only where its slot is free for all its 600 s, and qmaster's
    # resource schedule counts a running job without h_rt as holding what it holds for ever: right
    # after a test whose jobs are still ending (qmaster has yet to take their end reports, as CI run
    # 11 saw on the OCS cell under both cells' load: "advance_reservation: no suitable queues") it is
    # refused. What is waited for is those jobs' end, a real state change: until qrsub grants it.
    said = []

    def granted():
        cp = run("qrsub", "-N", name, "-d", "600", "-q", "debug", "-u", f"root,{plain_user}")
        said[:] = [cp.stdout + cp.stderr]
        return cp if cp.returncode == 0 and "granted" in cp.stdout else None

    cp = wait_until(granted, 120, lambda: f"an advance reservation on debug ({said[0].strip()}); running: "
                                          + run("qstat", "-u", "*", "-s", "r").stdout, delay=1.0)
    ar = re.search(r"advance reservation (\d+)", cp.stdout).group(1)
    try:
        yield name, ar
    finally:
        run("qrdel", ar)


@pytest.fixture
def release_config(tmp_path):
    """make(release): a copy of the cell's site config with ``[slurm] release``, in a 0755
    directory (the job's wrapper, run by Grid Engine, reads it too); returns its environment."""
    base = Path(shim_env().get("SLURM_SHIM_CONFIG") or "/etc/slurm-shim/config.toml").read_text()
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)

    def make(release: str) -> dict[str, str]:
        path = conf_dir / f"config-{release}.toml"
        path.write_text(with_release(base, release))
        path.chmod(0o644)
        return {"SLURM_SHIM_CONFIG": str(path)}

    return make
