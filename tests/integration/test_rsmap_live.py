"""GPU ids granted by Grid Engine itself: where the GPU complex is a resource map (RSMAP, Open
Cluster Scheduler and Gridware), execd hands each job its device ids in ``SGE_HGR_<complex>``, and
the job wrapper binds exactly those (CUDA_VISIBLE_DEVICES, SLURM_JOB_GPUS, ...), as Slurm's gres
plugin binds what slurmctld allocated. Son of Grid Engine 8.1.9 has no RSMAP (its qconf refuses
the type): there the shim's own claims pick the devices (tests/integration/test_job_env_live.py).

The OCS test adds a map complex ``gpumap`` (two devices on the host) for its own run and removes it
after; a site config that differs from the cell's by ``[gres.gpu] complex`` points sbatch at it."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest

from conftest import CELL, SITE_CONFIG, run, wait_until

pytestmark = pytest.mark.gridengine

MAP = "gpumap"


def host() -> str:
    """This execution host (the gpu queue's; the two-host tests' second host may be up too)."""
    cp = run("qconf", "-sel")
    assert cp.returncode == 0, cp.stderr
    here = os.uname().nodename.split(".")[0]
    hosts = [h for h in cp.stdout.split() if h.split(".")[0] == here]
    assert len(hosts) == 1, (here, cp.stdout)
    return hosts[0]


def complexes() -> str:
    cp = run("qconf", "-sc")
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


@pytest.fixture
def resource_map(tmp_path):
    """The map complex and two device ids on the host, 2 and 3 (not the lowest free indices the
    shim's own claims would pick); removed again afterwards."""
    h = host()
    text = complexes()
    f = tmp_path / "complexes"
    f.write_text(text.rstrip("\n") + f"\n{MAP} {MAP} RSMAP <= YES JOB 0 0\n")
    cp = run("qconf", "-Mc", str(f))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    try:
        cp = run("qconf", "-aattr", "exechost", "complex_values", f"{MAP}=2(2 3)", h)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        yield h
    finally:
        run("qconf", "-dattr", "exechost", "complex_values", MAP, h)
        lines = [ln for ln in complexes().splitlines() if not ln.startswith(f"{MAP} ")]
        f.write_text("\n".join(lines) + "\n")
        run("qconf", "-Mc", str(f))


def map_config(d: Path) -> Path:
    text = SITE_CONFIG.read_text()
    text, n = re.subn(r'(?ms)(^\[gres\.gpu\]\n.*?^complex = )"[^"]*"', rf'\1"{MAP}"', text, count=1)
    assert n == 1, "the cell's site config has a [gres.gpu] complex"
    p = d / "config-rsmap.toml"
    p.write_text(text)
    p.chmod(0o644)
    return p


@pytest.mark.skipif(CELL != "ocs", reason="RSMAP is Open Cluster Scheduler's; the Debian cell's test is below")
def test_the_job_binds_the_devices_grid_engine_granted(resource_map, workdir):
    env = {"SLURM_SHIM_CONFIG": str(map_config(workdir))}
    name = f"map-{uuid.uuid4().hex[:6]}"
    jobs = []
    for i in range(2):  # two one-device jobs at once: Grid Engine gives them different ids
        out = workdir / f"map-{i}.out"
        cp = run("sbatch", "--parsable", "-J", name, "-p", "gpu", "--gres=gpu:1", "-o", str(out), "--wrap",
                 'echo "$SGE_HGR_gpumap|$CUDA_VISIBLE_DEVICES|$SLURM_JOB_GPUS|$SLURM_GPUS_ON_NODE"; sleep 3',
                 cwd=workdir, env=env)
        assert cp.returncode == 0, cp.stderr
        jobs.append((int(cp.stdout.split(";")[0]), out))
    seen = []
    for job, out in jobs:
        text = wait_until(lambda: out.exists() and out.read_text().strip(), 90, f"the output of job {job}")
        granted, cuda, slurm, count = text.split("|")
        assert granted in ("2", "3") and cuda == slurm == granted and count == "1", text
        seen.append(granted)
    assert sorted(seen) == ["2", "3"]


@pytest.mark.skipif(CELL == "ocs", reason="the OCS cell's test is above")
def test_sge_8_1_9_has_no_resource_maps(tmp_path):
    """Why the Debian cell binds GPUs through the shim's own claims: its qconf refuses the type."""
    f = tmp_path / "complexes"
    f.write_text(complexes().rstrip("\n") + f"\n{MAP} {MAP} RSMAP <= YES JOB 0 0\n")
    cp = run("qconf", "-Mc", str(f))
    assert cp.returncode != 0 or MAP not in complexes(), cp.stdout + cp.stderr
    assert f"{MAP} " not in complexes()
