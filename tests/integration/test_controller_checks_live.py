"""What Slurm's controller refuses, refused by the installed commands on the live cluster before
Grid Engine sees it (issue 15 part 2 and 5): Slurm's lines and exit code, and no job queued (each
refused submission carries a name of its own, which qstat must not list). The unit tests hold one
test per rule with its Slurm function; these run the real commands on the site config that
cluster up wrote (partitions debug and gpu, [gres.gpu] without types)."""

from __future__ import annotations

import os

import pytest

from conftest import run

pytestmark = pytest.mark.gridengine

FAILED = "sbatch: error: Batch job submission failed: "


@pytest.mark.parametrize("argv, err", [
    (["-N", "0"], FAILED + "Node count specification invalid\n"),
    (["-N", "1", "-w", "vm,vm"], None),  # one host twice is one node: accepted (checked below)
    (["-p", "debug,nope"], "sbatch: error: invalid partition specified: nope\n" + FAILED + "Invalid partition name specified\n"),
    (["--gres=gpu:a100:1"], FAILED + "Requested node configuration is not available\n"),
    (["--gpus=v100:1"], FAILED + "Requested node configuration is not available\n"),
    (["--gres=nvme:1"], "sbatch: error: Invalid generic resource (gres) specification\n"),
    (["--gpus=3", "--gpus-per-node=2"], "sbatch: error: Invalid generic resource (gres) specification\n"),
    (["--mem-per-gpu=1G"], "sbatch: error: Invalid generic resource (gres) specification\n"),
    (["-c", "2"], None),
])
def test_refused_before_grid_engine(workdir, argv, err):
    if err is None:
        cp = run("sbatch", "--test-only", *argv, "--wrap", "true", cwd=workdir)
        assert cp.returncode == 0, cp.stderr
        return
    tag = f"w7ctl{os.getpid()}"
    cp = run("sbatch", *argv, "-J", tag, "--wrap", "true", cwd=workdir)
    assert (cp.returncode, cp.stdout, cp.stderr) == (1, "", err)
    assert f"<JB_name>{tag}</JB_name>" not in run("qstat", "-u", "*", "-xml").stdout


@pytest.mark.parametrize("argv", [["-c", "512"], ["-N", "1", "-n", "512"]])
def test_cpus_beyond_every_host_pend_on_22_05_and_are_refused_on_24_11(workdir, tmp_path, argv):
    """More CPUs on one host than any host has: the cell's own release (22.05, as 26.05) takes the
    job and it pends (Grid Engine keeps it waiting: no -w e); 24.11 refuses it at submission
    (select_nodes; submit.check_fits from qhost's CPUs). fixtures/slurm-*/oracle-rest.txt."""
    from conftest import SITE_CONFIG, with_release

    tag = f"s6cpu{os.getpid()}"
    cp = run("sbatch", "--parsable", *argv, "-J", tag, "--wrap", "true", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    job = cp.stdout.strip()
    try:
        state = run("squeue", "-h", "-j", job, "-o", "%T")
        assert state.stdout == "PENDING\n", state
    finally:
        run("scancel", job)
    conf = tmp_path / "config-24.11.toml"
    conf.write_text(with_release(SITE_CONFIG.read_text(), "24.11"))
    conf.chmod(0o644)
    cp = run("sbatch", *argv, "-J", tag + "r", "--wrap", "true", cwd=workdir, env={"SLURM_SHIM_CONFIG": str(conf)})
    lead = "sbatch: error: CPU count per node can not be satisfied\n" if argv[0] == "-c" else ""
    assert (cp.returncode, cp.stdout, cp.stderr) == (1, "", lead + FAILED + "Requested node configuration is not available\n")
    assert f"<JB_name>{tag}r</JB_name>" not in run("qstat", "-u", "*", "-xml").stdout


def test_srun_zero_nodes(workdir):
    cp = run("srun", "-N", "0-1", "true", cwd=workdir)
    assert (cp.returncode, cp.stderr) == (1, "srun: error: Unable to allocate resources: Node count specification invalid\n")


def test_the_sites_max_array_size_is_the_array_limit(workdir, tmp_path):
    """_valid_array_inx (job_mgr.c): every index below MaxArraySize. The site's
    cluster.max_array_size is that limit for the real commands, and scontrol show config prints it."""
    import re

    from conftest import SITE_CONFIG

    text, n = re.subn(r"(?m)^max_array_size = \d+$", "max_array_size = 11", SITE_CONFIG.read_text())
    assert n == 1, "the cell's site config names cluster.max_array_size"
    conf = workdir / "config-max-array.toml"
    conf.write_text(text)
    conf.chmod(0o644)
    env = {"SLURM_SHIM_CONFIG": str(conf)}
    assert "MaxArraySize            = 11\n" in run("scontrol", "show", "config", env=env).stdout
    tag = f"w7arr{os.getpid()}"
    cp = run("sbatch", "--array=0-11", "-J", tag, "--wrap", "true", cwd=workdir, env=env)
    assert (cp.returncode, cp.stdout, cp.stderr) == (1, "", FAILED + "Invalid job array specification\n")
    assert f"<JB_name>{tag}</JB_name>" not in run("qstat", "-u", "*", "-xml").stdout
    cp = run("sbatch", "--test-only", "--array=0-10", "--wrap", "true", cwd=workdir, env=env)
    assert cp.returncode == 0, cp.stderr
