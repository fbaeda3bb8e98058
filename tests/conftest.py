"""Shared test plumbing: where the commands are, how to run them (as root or as a plain user),
and bounded waiting on real Grid Engine state changes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
# the reference captures the tests compare with, copied into the project (each directory's README.md
# says where every file came from): a real Slurm 22.05.8 cluster and a real SGE 8.1.9 cluster
SLURM_REF = FIXTURES / "slurm-22.05"
SGE_REF = FIXTURES / "gridengine" / "sge-8.1.9"

sys.path.insert(0, str(REPO / "src"))


def command_dir() -> Path:
    """The directory whose sbatch/squeue/... the integration tests run: $SLURM_SHIM_BIN, else the
    installed venv (/opt/slurm-shim/bin, as CI and the README set up), else the checkout's bin/."""
    if os.environ.get("SLURM_SHIM_BIN"):
        return Path(os.environ["SLURM_SHIM_BIN"])
    if Path("/opt/slurm-shim/bin/sbatch").exists():
        return Path("/opt/slurm-shim/bin")
    return REPO / "bin"


def shim_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{command_dir()}:{env.get('PATH', '/usr/bin:/bin')}"
    env.setdefault("SGE_ROOT", "/var/lib/gridengine")
    env.setdefault("SGE_CELL", "default")
    env.pop("SLURM_JOB_ID", None)
    if extra:
        env.update(extra)
    return env


def run(*argv: str, user: str | None = None, input: str | bytes | None = None, cwd: str | Path | None = None,
        env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run a command (text mode) as root or, with user=, as that user through runuser."""
    e = shim_env(env)
    args = list(argv)
    if user:
        args = ["runuser", "-u", user, "--", "env", f"PATH={e['PATH']}", f"SGE_ROOT={e['SGE_ROOT']}",
                f"SGE_CELL={e['SGE_CELL']}", *args]
    data = input.encode() if isinstance(input, str) else input
    cp = subprocess.run(args, input=data, capture_output=True, cwd=cwd, env=e, timeout=timeout)
    return subprocess.CompletedProcess(args, cp.returncode, cp.stdout.decode("utf-8", "replace"),
                                       cp.stderr.decode("utf-8", "replace"))


def wait_until(predicate, timeout: float = 60, what: str = "condition"):
    """Poll predicate (with back-off) until it returns a truthy value; fail after timeout seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.1
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)


@pytest.fixture(scope="session")
def live_cluster():
    """The live Grid Engine; a test that needs it fails (never skips) when it is not there."""
    if not shutil.which("qstat", path=shim_env()["PATH"]):
        pytest.fail("Grid Engine commands not found: run scripts/setup (slurm-shim cluster up) first")
    cp = run("qstat", "-u", "*")
    if cp.returncode != 0:
        pytest.fail(f"Grid Engine is not answering: {cp.stderr.strip()}")
    return True


@pytest.fixture(scope="session")
def plain_user() -> str:
    """A non-root user of the tests' own, created if missing (real users are not root)."""
    name = "shimtester"
    if subprocess.run(["id", "-u", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True, capture_output=True)
    return name


def open_dir(tmp_path_factory, name: str, mode: int) -> Path:
    """A fresh directory of ``mode`` that every user can reach (its parents made traversable)."""
    d = Path(tmp_path_factory.mktemp(name, numbered=True))
    d.chmod(mode)
    for parent in d.parents:
        if str(parent) in ("/", "/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o755)
    return d


@pytest.fixture
def workdir(tmp_path_factory):
    """A submit directory every user can write (jobs of a plain user write their output there)."""
    return open_dir(tmp_path_factory, "submit", 0o777)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("gridengine") or item.get_closest_marker("interactive"):
            item.fixturenames.insert(0, "live_cluster") if "live_cluster" not in item.fixturenames else None


def use_site_config(monkeypatch, tmp_path: Path) -> Path:
    """Point the shim at the unit-test site config (fixtures/site/config.toml) with a private
    state directory and config cache under tmp_path; returns the state directory."""
    from shim import siteconf

    text = (FIXTURES / "site" / "config.toml").read_text()
    conf = tmp_path / "config.toml"
    conf.write_text(text.replace("/tmp/slurm-shim-unit-state", str(tmp_path / "state")))
    monkeypatch.setenv("SLURM_SHIM_CONFIG", str(conf))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    siteconf.reset()
    from shim import state

    assert state.make_layout(str(tmp_path / "state")) == []  # as cluster up does (the tests run as root)
    return tmp_path / "state"


class RawJobs:
    """Jobs a test submits with raw qsub (names tagged per test), deleted at teardown."""

    def __init__(self, prefix: str = "it"):
        import uuid

        self.tag = prefix + uuid.uuid4().hex[:6]
        self.ids: list[str] = []

    def qsub(self, name: str, *args: str, user: str | None = None) -> str:
        cp = run("qsub", "-terse", "-N", f"{self.tag}_{name}", *args, user=user, cwd="/tmp")
        assert cp.returncode == 0, cp.stderr
        jid = cp.stdout.strip().split(".")[0]
        self.ids.append(jid)
        return jid

    def name(self, short: str) -> str:
        return f"{self.tag}_{short}"

    def ge(self, jid: str) -> list[str]:
        """The Grid Engine state of each qstat row of a job."""
        out = run("qstat", "-u", "*").stdout
        return [ln.split()[4] for ln in out.splitlines()[2:] if ln.split() and ln.split()[0] == jid]

    def ge_state(self, jid: str) -> str:
        return ",".join(self.ge(jid))

    def gone(self, jid: str) -> bool:
        return not self.ge(jid)

    def cleanup(self):
        if self.ids:
            run("qdel", *self.ids)
            wait_until(lambda: all(self.gone(j) for j in self.ids), 60, "test jobs to go")


@pytest.fixture
def jobs():
    j = RawJobs()
    yield j
    j.cleanup()
