"""GPU and gres types (issue 15 part 5): a type is never dropped. The site config lists the types
its cluster has (``[gres.<name>.types]``): each is its own consumable, or the value of a host
complex that selects the model (``select``). A type the cluster does not have is refused as Slurm
refuses a type no node has (gres.conf Type= is a node property; select_nodes finds no node:
ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, src/slurmctld/node_scheduler.c _pick_best_nodes)."""

from __future__ import annotations

import io

import pytest

from shim import config, siteconf
from shim.cli import sbatch
from shim.errors import ShimError

SCRIPT = "#!/bin/sh\ntrue\n"
NODE_CONFIG = "sbatch: error: Batch job submission failed: Requested node configuration is not available"

PER_TYPE = """
[gres.gpu.types.a100]
complex = "gpu_a100"

[gres.gpu.types.v100]
complex = "gpu_v100"

[gres.gpu.types.h100]
complex = "gpu_h100"

[gres.nvme]
complex = "nvme"
"""

SELECT = """
[gres.gpu]
complex = "gpu"
scope = "job"
select = "gpu_model"

[gres.gpu.types.a100]
[gres.gpu.types.v100]
value = "V100-SXM2"
"""


pytestmark = pytest.mark.usefixtures("unit_site")


def with_config(tmp_path, text: str, drop_gpu: bool = False) -> None:
    conf = tmp_path / "config.toml"
    body = conf.read_text()
    if drop_gpu:
        body = body.replace('[gres.gpu]\ncomplex = "gpu"\nscope = "job"\n', "")
    conf.write_text(body + text)
    siteconf.reset()


def translate(argv):
    _o, sub, _cfg = sbatch.prepare(argv, {}, stdin=io.StringIO(SCRIPT), cwd="/srv/x")
    a = sub.argv
    return dict(kv.split("=", 1) for kv in a[a.index("-l") + 1].split(",")), sub


def refused(argv):
    with pytest.raises(ShimError) as e:
        sbatch.prepare(argv, {}, stdin=io.StringIO(SCRIPT), cwd="/srv/x")
    assert e.value.code == 1
    return e.value.lines


@pytest.mark.parametrize("argv, complex_, count", [
    (["--gres=gpu:a100:2"], "gpu_a100", "2"),
    (["--gpus=v100:1"], "gpu_v100", "1"),
    (["--gpus-per-node=h100:4"], "gpu_h100", "4"),
    (["-N", "2", "--gpus-per-node=h100:4"], "gpu_h100", "8"),
    (["-n", "2", "--gpus-per-task=a100:1"], "gpu_a100", "2"),
])
def test_a_type_becomes_its_own_consumable(tmp_path, argv, complex_, count):
    with_config(tmp_path, PER_TYPE)
    res, sub = translate(argv)
    assert res[complex_] == count
    assert "gpu" not in res  # the typed complex takes the count
    assert "-w" in sub.argv  # Grid Engine checks a node could ever hold it


def test_untyped_request_keeps_the_plain_complex(tmp_path):
    with_config(tmp_path, PER_TYPE)
    res, _ = translate(["--gres=gpu:2"])
    assert res == {"gpu": "2"}
    res, _ = translate(["--gres=nvme:1"])
    assert res == {"nvme": "1"}


def test_a_type_the_cluster_does_not_have_is_refused(tmp_path):
    with_config(tmp_path, PER_TYPE)
    assert refused(["--gres=gpu:k80:1"]) == [NODE_CONFIG]
    assert refused(["--gpus=k80:1"]) == [NODE_CONFIG]
    assert refused(["--gres=nvme:fast:1"]) == [NODE_CONFIG]


def test_without_types_every_type_is_refused_not_dropped():
    """The unit site config lists no types: before, --gres=gpu:a100:2 became -l gpu=2."""
    assert refused(["--gres=gpu:a100:2"]) == [NODE_CONFIG]
    assert refused(["--gpus=v100:1"]) == [NODE_CONFIG]


def test_select_complex_names_the_model(tmp_path):
    with_config(tmp_path, SELECT, drop_gpu=True)
    res, _ = translate(["--gres=gpu:a100:2"])
    assert res == {"gpu": "2", "gpu_model": "a100"}
    res, _ = translate(["--gpus=v100:1"])
    assert res == {"gpu": "1", "gpu_model": "V100-SXM2"}
    res, _ = translate(["--gpus=1"])
    assert res == {"gpu": "1"}
    assert refused(["--gpus=h100:1"]) == [NODE_CONFIG]


def test_select_complex_cannot_name_two_models(tmp_path):
    """One host complex has one value: a request for two models on one host has no node."""
    with_config(tmp_path, SELECT, drop_gpu=True)
    assert refused(["--gres=gpu:a100:1,gpu:v100:1"]) == [NODE_CONFIG]


def test_explain_notes_the_type(tmp_path):
    with_config(tmp_path, PER_TYPE)
    _res, sub = translate(["--gres=gpu:a100:2"])
    assert ("--gres", "-l gpu_a100=2", "2 gpu of type a100 in all") in sub.notes


def test_config_refuses_a_type_without_a_target():
    with pytest.raises(ShimError) as e:
        config.parse('[gres.gpu]\ncomplex = "gpu"\n[gres.gpu.types.a100]\n', "site.toml")
    assert "gres.gpu" in e.value.lines[0] and "a100" in e.value.lines[0]


@pytest.mark.parametrize("asked, listed, shown", [
    ("gpu:a100:1", "gres:gpu:1", "gres:gpu:a100:1"),  # select form: Grid Engine's request has the count only
    ("gpu:a100", "gres:gpu:1", "gres:gpu:a100"),
    ("gpu:2", "gres:gpu:2", "gres:gpu:2"),
    ("gpu:a100:1", "gres:gpu:3", "gres:gpu:3"),  # changed in Grid Engine since (qalter): its count holds
])
def test_a_type_stays_in_the_jobs_gres(asked, listed, shown, monkeypatch):
    """squeue %b and scontrol's TresPerNode keep the type the job asked for, as Slurm's tres_per_node
    does (src/api/job_info.c slurm_sprint_job_info "TresPerNode=%s"). Before, with the select form,
    the listing's untyped gres:gpu:1 (from -l gpu=1,arch=...) won over the record's gpu:a100:1."""
    from shim.operations import jobs
    from shim.slurm.model import JobRecord
    from shim.store.records import Submitted

    rec = JobRecord(7, state="PENDING")
    rec.gres = listed
    monkeypatch.setattr(jobs, "submit_record", lambda cfg, r: Submitted({"gres": asked}))
    assert jobs.detail(rec, siteconf.get()).gres == shown
