"""Plumbing for the real-client tests: the clients run unmodified, in this process (submitit,
dask-jobqueue) or as a subprocess (snakemake), with the shim's commands first on PATH, and their jobs
run on the live Grid Engine with the venv's python (which has the clients installed).

Every job a test leaves behind (a failure half-way, a timeout) is cancelled at teardown: by id for
jobs whose id the test saw, by name for the ones only the client knows (snakemake's run id)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cell_env, command_dir, run, shim_env

CLIENTS = {  # import name -> the PyPI requirement that provides it (pyproject extra "clients")
    "submitit": "submitit",
    "dask_jobqueue": "dask-jobqueue",
    "distributed": "dask-jobqueue",
    "snakemake": "snakemake",
    "snakemake_executor_plugin_slurm": "snakemake-executor-plugin-slurm",
    "snakemake_executor_plugin_slurm_jobstep": "snakemake-executor-plugin-slurm",
}


def job_python() -> str:
    """The python that jobs run: the venv's (same as the commands'), which has the clients."""
    p = command_dir() / "python"
    return str(p) if p.exists() else sys.executable


def require(*modules: str) -> None:
    """Fail (never skip: CI installs the clients) when a client is missing from the job python."""
    code = "import importlib.util, sys; sys.exit([m for m in sys.argv[1:] if importlib.util.find_spec(m) is None] or 0)"
    cp = subprocess.run([job_python(), "-c", code, *modules], capture_output=True, text=True, timeout=60)
    if cp.returncode != 0:
        missing = sorted({CLIENTS.get(m, m) for m in modules})
        pytest.fail(f"{job_python()} lacks {cp.stderr.strip() or modules}: "
                    f"{job_python()} -m pip install {' '.join(missing)}  (or: pip install -e '.[clients]')")


@pytest.fixture
def client_env(monkeypatch) -> dict[str, str]:
    """This process's environment as a user's login shell on the submit host: the shim's commands
    first on PATH, Grid Engine's location (the selected cell's: its site config and ports too, as
    conftest.cell_env gives them), no Slurm variables inherited from an outer job."""
    env = shim_env()
    for k in list(os.environ):
        if k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "SQUEUE_", "SACCT_", "SINFO_", "SCANCEL_")) \
                and not k.startswith("SLURM_SHIM_"):  # (the shim's own settings stay: the cell's site config)
            monkeypatch.delenv(k)
            env.pop(k, None)
    for k in ("PATH", "SGE_ROOT", "SGE_CELL", *cell_env()):
        monkeypatch.setenv(k, env[k])
    return {k: v for k, v in env.items() if not k.startswith("SLURM_") or k.startswith("SLURM_SHIM_")}


class Reaper:
    """Jobs to cancel at teardown if they are still queued or running."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.names: list[str] = []

    def add(self, job_id: str | int) -> str:
        self.ids.append(str(job_id))
        return str(job_id)

    def add_name(self, name: str) -> None:
        self.names.append(name)

    def live(self, job_id: str) -> bool:
        cp = run("squeue", "-h", "-o", "%i", "-j", job_id)
        return cp.returncode == 0 and bool(cp.stdout.strip())

    def reap(self) -> list[str]:
        left = [j for j in dict.fromkeys(self.ids) if self.live(j)]
        if left:
            run("scancel", *left)
        for name in dict.fromkeys(self.names):
            run("scancel", "-n", name)
        return left


@pytest.fixture
def reaper():
    r = Reaper()
    yield r
    r.reap()


def squeue_active(job_id: str) -> str:
    """What default squeue (pending, running, completing, suspended jobs) shows for a job: its
    compact state, or "" once the job has left the queue."""
    cp = run("squeue", "-h", "-o", "%t", "-j", job_id)
    return cp.stdout.strip() if cp.returncode == 0 else ""


def sacct_rows(*argv: str) -> list[dict[str, str]]:
    """`sacct --parsable2` rows as dicts keyed by the header."""
    cp = run("sacct", "--parsable2", *argv)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    if not lines:
        return []
    keys = lines[0].split("|")
    return [dict(zip(keys, line.split("|"))) for line in lines[1:]]


def tail(path: Path, n: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError as e:
        return f"({path}: {e.strerror})"
