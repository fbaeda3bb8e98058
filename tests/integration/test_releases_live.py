"""A site that names a newer Slurm release (issue 30): on the live cell, with a private copy of the
site config that adds ``[slurm] release``, a job's environment carries SLURM_JOB_START_TIME and
SLURM_JOB_END_TIME as that release sets them, and ``squeue --only-job-state`` answers. The
cell's own config (22.05 by default) is never changed: only the commands given the copy follow it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import run, shim_env, wait_until

pytestmark = pytest.mark.gridengine


@pytest.fixture
def release_config(tmp_path):
    """make(release): a copy of the cell's site config with ``[slurm] release``, in a 0755
    directory (the job's wrapper, run by Grid Engine, reads it too); returns its environment."""
    active = Path(shim_env().get("SLURM_SHIM_CONFIG") or "/etc/slurm-shim/config.toml")
    base = active.read_text()
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)

    def make(release: str) -> dict[str, str]:
        path = conf_dir / f"config-{release}.toml"
        path.write_text(base + f'\n[slurm]\nrelease = "{release}"\n')
        path.chmod(0o644)
        return {"SLURM_SHIM_CONFIG": str(path)}

    return make


def env_of(out: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)


@pytest.mark.parametrize("release, version", [("24.11", "24.11.5"), ("26.05", "26.05.5")])
def test_a_job_of_a_newer_release_sees_its_end_time_and_squeue_answers_only_states(
        release_config, tmp_path, release, version):
    env = release_config(release)
    assert run("sbatch", "--version", env=env).stdout == f"slurm-wlm {version}\n"
    out = tmp_path / "job.out"
    go = tmp_path / "go"  # the job runs until the test has asked squeue about it
    cp = run("sbatch", "--parsable", "-t", "10", "-c", "2", "-o", str(out), "--wrap",
             f"env | sort; echo == end; while [ ! -e {go} ]; do sleep 0.2; done", cwd=tmp_path, env=env)
    assert cp.returncode == 0, cp.stderr
    job = cp.stdout.strip()
    try:
        wait_until(lambda: out.exists() and "== end" in out.read_text(), 90, f"job {job}'s environment")
        states = run("squeue", "--only-job-state", "-h", "-j", job, env=env)
        assert states.returncode == 0 and re.fullmatch(rf" +{job} +R\n", states.stdout), states
        go.touch()
        got = env_of(out)
        start = int(got["SLURM_JOB_START_TIME"])
        assert int(got["SLURM_JOB_END_TIME"]) == start + 600  # the 10-minute limit
        assert got["SLURM_TRES_PER_TASK"] == "cpu=2" and got["SLURM_OOM_KILL_STEP"] == "0"
        assert "SLURM_NODE_ALIASES" not in got
        assert ("SLURM_JOB_SLUID" in got) == (release == "26.05")
        assert (got.get("SLURM_STEP_ID"), got.get("SLURM_JOB_EXCLUSIVE")) == (
            ("-5", "NO") if release == "26.05" else (None, None))
    finally:
        run("scancel", job, env=env)


def test_the_cells_own_config_stays_22_05():
    """Without the key (the cell's config): 22.05's answers."""
    assert run("squeue", "--version").stdout == "slurm-wlm 22.05.8\n"
    cp = run("squeue", "--only-job-state")
    assert (cp.returncode, cp.stdout, cp.stderr) == (
        1, "", "squeue: unrecognized option '--only-job-state'\nTry \"squeue --help\" for more information\n")
