"""The job wrapper's GPU device claims with typed GPUs (issue 15 part 5): where the site config gives
each type its own consumable (``[gres.gpu.types.<type>] complex``), sbatch asks ``-l gpu_a100=1``,
not ``-l gpu=1``. The claims must count those complexes too: a host's GPU count is the sum of its
GPU complexes' values, and another job's typed request holds devices. Before, only
``[gres.gpu].complex`` was read: a host with ``gpu_a100=2,gpu_v100=2`` had 0 GPUs (a second claim
failed with NoGpu) and another user's a100 job held none (its device could be claimed again)."""

from __future__ import annotations

import os

import pytest

from shim import siteconf
from shim.gridengine.engine import GridEngine
from shim.runtime import jobwrap

PER_TYPE = """
[gres.gpu.types.a100]
complex = "gpu_a100"

[gres.gpu.types.v100]
complex = "gpu_v100"
"""

SELECT_WITH_OWN = """
[gres.gpu]
complex = "gpu"
scope = "job"
select = "gpu_model"

[gres.gpu.types.a100]
[gres.gpu.types.h100]
complex = "gpu_h100"
"""


@pytest.fixture
def typed(unit_site, tmp_path):
    """The unit-test site config with per-type GPU complexes; yields the state directory."""
    conf = tmp_path / "config.toml"
    conf.write_text(conf.read_text() + PER_TYPE)
    siteconf.reset()
    jobwrap._held.clear()
    yield unit_site
    jobwrap._held.clear()


class TypedGE(GridEngine):
    """Grid Engine's answers to the claims: a host h1 with 2 A100s and 2 V100s, each type its own
    consumable (qconf -se), and the running jobs' hard requests (qstat -r -xml)."""

    def __init__(self, running=(), complex_values="gpu_a100=2,gpu_v100=2"):
        self.running, self.complex_values, self.calls = list(running), complex_values, []

    def run(self, tool, args, **kw):
        from shim.proc import Result

        self.calls.append(tool)
        if tool == "qconf":
            return Result((tool,), 0, "hostname h1\nload_scaling NONE\ncomplex_values        exclusive=true, \\\n"
                          f"   {self.complex_values}\nuser_lists NONE\n", "")
        rows = "".join(f"<job_list><JB_job_number>{j}</JB_job_number><JB_owner>{o}</JB_owner>"
                       f"<queue_name>gpu@h1</queue_name><hard_request name=\"h_rt\">3600</hard_request>"
                       + "".join(f"<hard_request name=\"{cx}\">{n}</hard_request>" for cx, n in req.items())
                       + "</job_list>"
                       for o, j, req in self.running)
        return Result((tool,), 0, f"<job_info><queue_info>{rows}</queue_info></job_info>", "")


def test_the_gpu_complexes_are_the_untyped_one_and_each_types():
    assert jobwrap.gpu_complexes(siteconf.get()) == ("gpu",)
    cfg = {"gres": {"gpu": {"complex": "gpu", "types": {"a100": {"complex": "gpu_a100"},
                                                          "v100": {"complex": "gpu_v100", "value": ""}}}}}
    assert jobwrap.gpu_complexes(cfg) == ("gpu", "gpu_a100", "gpu_v100")
    # select: the model's host complex is no count; a type with a complex of its own still counts
    cfg = {"gres": {"gpu": {"complex": "gpu", "select": "gpu_model",
                            "types": {"a100": {"complex": "", "value": ""}, "h100": {"complex": "gpu_h100"}}}}}
    assert jobwrap.gpu_complexes(cfg) == ("gpu", "gpu_h100")
    assert jobwrap.gpu_complexes({}) == ("gpu",)


def test_the_site_configs_types_are_read(typed, tmp_path):
    assert jobwrap.gpu_complexes(siteconf.get()) == ("gpu", "gpu_a100", "gpu_v100")
    conf = tmp_path / "config.toml"
    conf.write_text(conf.read_text().replace(PER_TYPE, "").replace(
        '[gres.gpu]\ncomplex = "gpu"\nscope = "job"\n', "") + SELECT_WITH_OWN)
    siteconf.reset()
    assert jobwrap.gpu_complexes(siteconf.get()) == ("gpu", "gpu_h100")


@pytest.mark.parametrize("values, want", [
    ({"gpu_a100": "1.000000", "h_rt": "3600"}, 1),         # a job's hard requests
    ({"gpu_a100": "2", "gpu_v100": "2", "exclusive": "true"}, 4),  # a host's complex_values
    ({"gpu": "1", "gpu_v100": "2"}, 3),
    ({"gpu_h100": "4"}, 0),                                  # not a complex of this site's GPUs
    ({"gpu_a100": "junk", "gpu_v100": "1"}, 1),
    ({"gpu_a100": "-1"}, 0),
    ({}, 0),
])
def test_gpus_in_counts_every_gpu_complex(values, want):
    assert jobwrap.gpus_in(values, ("gpu", "gpu_a100", "gpu_v100")) == want


def test_gpus_in_untyped_is_the_one_complex():
    assert jobwrap.gpus_in({"gpu": "2", "gpu_a100": "2"}, "gpu") == 2


def test_a_hosts_capacity_counts_each_types_complex(typed):
    ge = TypedGE()
    assert jobwrap._gpu_capacity("h1", ge) == 4  # was 0: only "gpu" was looked for
    assert jobwrap._gpu_capacity("h1", TypedGE(complex_values="gpu_a100=2")) == 2
    assert jobwrap._gpu_capacity("h1", TypedGE(complex_values="gpu=1,gpu_v100=2")) == 3


def test_a_jobs_typed_request_holds_gpus(typed):
    ge = TypedGE(running=[("nobody", 4242, {"gpu_a100": "1.000000"}), ("alice", 7, {"gpu_v100": "2"}),
                          ("bob", 8, {"mem_free": "1G"})])
    assert jobwrap._running_gpu_jobs("h1", ge) == {("nobody", 4242): 1, ("alice", 7): 2}


def test_a_new_a100_job_gets_the_free_a100_not_the_one_another_job_holds(typed):
    """Another user's job holds one A100 (``-l gpu_a100=1``, its claim on device 0): a new a100
    job gets device 1. Before, Grid Engine's answer showed that job with no GPU, so its claim was
    judged not live and device 0 was claimed a second time."""
    import fcntl

    d = typed / "gpus"
    ge = TypedGE(running=[("nobody", 4242, {"gpu_a100": "1"})])
    (d / "h1.0").write_text("4242 4242\n")
    os.chown(d / "h1.0", 65534, 65534)
    claimant = open(d / "h1.0", "rb")  # its claimant's lock (an open file of its own)
    fcntl.flock(claimant, fcntl.LOCK_EX)
    try:
        assert jobwrap.claim_gpus(str(typed), "h1", 1, 77, backend=ge) == [1]
        assert "qstat" in ge.calls
        jobwrap.release_gpus(str(typed), "h1", [1])
        ge.running = []  # no such GPU job: the claim is not live, device 0 is free
        assert jobwrap.claim_gpus(str(typed), "h1", 1, 78, backend=ge) == [0]
        jobwrap.release_gpus(str(typed), "h1", [0])
    finally:
        claimant.close()


def test_typed_claims_reach_the_hosts_whole_count_and_no_further(typed):
    """A host of 2 a100 + 2 v100 has 4 devices: with one held, three more can be claimed (before,
    its capacity read 0 and any claim past the lowest free indices failed with NoGpu), a fifth not."""
    ge = TypedGE()
    assert jobwrap.claim_gpus(str(typed), "h1", 1, 77, backend=ge) == [0]
    assert jobwrap.claim_gpus(str(typed), "h1", 3, 78, backend=ge) == [1, 2, 3]
    with pytest.raises(jobwrap.NoGpu, match="no free GPU on h1 .1 requested, 4 of 4 in use"):
        jobwrap.claim_gpus(str(typed), "h1", 1, 79, backend=ge)
    jobwrap.release_gpus(str(typed), "h1", [0, 1, 2, 3])


@pytest.mark.parametrize("environ, count, want", [
    ({"SGE_HGR_gpu_a100": "1"}, 1, [1]),                         # RSMAP on a type's own complex
    ({"SGE_HGR_gpu_v100": "2 3"}, 2, [2, 3]),
    ({"SGE_HGR_gpu_a100": "0", "SGE_HGR_gpu_v100": "3"}, 2, [0, 3]),  # --gres=gpu:a100:1,gpu:v100:1
    ({"SGE_HGR_gpu": "1"}, 1, [1]),                              # untyped, as before
    ({"SGE_HGR_gpu_h100": "0"}, 1, None),                        # not a GPU complex of this site
    ({"SGE_HGR_gpu_a100": "1.000000"}, 1, None),                 # a plain consumable's amount
    ({"SGE_HGR_gpu_a100": "0", "SGE_HGR_gpu_v100": "0"}, 2, None),  # one id twice
])
def test_rsmap_grants_of_every_gpu_complex(typed, environ, count, want):
    assert jobwrap.granted_gpus(environ, count) == want
