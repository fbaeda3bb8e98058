"""GPU types on the installed commands (issue 15 part 5): a type is never dropped. The site config
form that needs no change to the cell: ``[gres.gpu] select``, a host complex that names the model,
here Grid Engine's own ``arch`` (every host has it), with type a100 = this host's arch and v100 =
an arch no host has. A typed request asks Grid Engine for the GPU count and that host value, and
runs where it holds; a type no host has, or one the site config does not list, is refused before
Grid Engine sees it, as Slurm refuses a gres type no node has: select_nodes finds no node set for
it (src/slurmctld/node_scheduler.c _pick_best_nodes: ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE,
"Requested node configuration is not available"), nothing queued. The unit tests of every form:
tests/unit/test_gres_types.py."""

from __future__ import annotations

import re
import uuid

import pytest

from conftest import SITE_CONFIG, run, wait_until

pytestmark = pytest.mark.gridengine

REFUSED = "sbatch: error: Batch job submission failed: Requested node configuration is not available\n"


def host_arch() -> str:
    m = re.search(r"hl:arch=(\S+)", run("qhost", "-F", "arch").stdout)
    assert m, "qhost -F arch shows the host's arch"
    return m.group(1)


@pytest.fixture
def typed(tmp_path) -> dict[str, str]:
    text, n = re.subn(r'(?m)^(\[gres\.gpu\]\n(?:[a-z_]+ = .*\n)*)', r'\1select = "arch"\n', SITE_CONFIG.read_text(),
                      count=1)
    assert n == 1, "the cell's site config has [gres.gpu]"
    text += f'\n[gres.gpu.types.a100]\nvalue = "{host_arch()}"\n\n[gres.gpu.types.v100]\nvalue = "no-such-arch"\n'
    conf = tmp_path / "config.toml"
    conf.write_text(text)
    return {"SLURM_SHIM_CONFIG": str(conf)}


def test_a_type_selects_its_hosts_and_one_no_host_has_is_refused(typed, workdir):
    name = "gt" + uuid.uuid4().hex[:6]
    cp = run("sbatch", "--parsable", "-H", "-J", name, "-p", "gpu", "--gres=gpu:a100:1", "-o", "/dev/null",
             "--wrap", "true", env=typed, cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    job = cp.stdout.strip()
    try:
        asked = re.search(r"(?m)^hard[ _]resource_list:\s+(\S+)", run("qstat", "-j", job).stdout)
        assert asked, run("qstat", "-j", job).stdout
        request = dict(kv.split("=", 1) for kv in asked.group(1).split(","))
        assert (request.get("gpu"), request.get("arch")) == ("1", host_arch())  # the count and the model
        # and the type is shown as asked (Slurm's tres_per_node: src/api/job_info.c slurm_sprint_job_info)
        assert run("squeue", "-h", "-j", job, "-o", "%b", env=typed).stdout == "gres:gpu:a100:1\n"
        assert "TresPerNode=gres:gpu:a100:1" in run("scontrol", "show", "job", job, env=typed).stdout
        assert run("scontrol", "release", job, env=typed).returncode == 0
        wait_until(lambda: run("sacct", "-X", "-n", "-j", job, "-o", "State").stdout.split() == ["COMPLETED"], 90,
                   "the a100 job to run on this host")
    finally:
        run("scancel", job)
    for gres in ("gpu:v100:1", "gpu:h100:1"):  # no host has v100's arch; h100 is no type of the site's
        cp = run("sbatch", "-J", name + "x", "-p", "gpu", f"--gres={gres}", "--wrap", "true", env=typed, cwd=workdir)
        assert (cp.returncode, cp.stdout, cp.stderr) == (1, "", REFUSED), gres
    assert name + "x" not in run("qstat", "-u", "*", "-r").stdout  # nothing queued
