"""What Slurm 22.05's controller (and its client-side gres check) refuses, the shim refuses before
Grid Engine sees it: one test per rule, each citing the Slurm function that decides it. Nothing is
queued: a fake backend fails the test if anything is submitted. The reference captures
(fixtures/slurm-22.05/cases.json) decide where they hold the case."""

from __future__ import annotations

import io
import json

import pytest

from conftest import FIXTURES, use_site_config
from shim.gridengine import backends
from shim import siteconf
from shim.__main__ import dispatch
from shim.cli import sbatch
from shim.errors import ShimError

SCRIPT = "#!/bin/sh\ntrue\n"
CASES = json.loads((FIXTURES / "slurm-22.05" / "cases.json").read_text())
BATCH_FAILED = "sbatch: error: Batch job submission failed: "
GRES_BAD = "sbatch: error: Invalid generic resource (gres) specification"


class NoSubmit:
    """A backend that fails the test if a job reaches Grid Engine."""

    def submit(self, *a, **kw):
        raise AssertionError("a refused job reached Grid Engine")

    class capabilities:  # SGE 8.1.9's: no per-job allocation rule (-par)
        par = False

    def exec_hosts(self):
        return {"vm", "vm2", "vm3"}

    def __getattr__(self, name):
        raise AssertionError(f"no Grid Engine call expected ({name})")


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    use_site_config(monkeypatch, tmp_path)
    backends.use(NoSubmit())
    yield
    siteconf.reset()
    backends.use(None)


def extra_config(tmp_path, text: str, replace: tuple[str, str] | None = None) -> None:
    conf = tmp_path / "config.toml"
    body = conf.read_text()
    if replace:
        body = body.replace(*replace)
    conf.write_text(body + "\n" + text)
    siteconf.reset()


def refused(argv: list[str]) -> list[str]:
    with pytest.raises(ShimError) as e:
        sbatch.prepare(argv, {}, stdin=io.StringIO(SCRIPT), cwd="/srv/x")
    assert e.value.code == 1
    return e.value.lines


def accepted(argv: list[str]):
    _o, sub, _cfg = sbatch.prepare(argv, {}, stdin=io.StringIO(SCRIPT), cwd="/srv/x")
    return sub.argv


def resources(argv: list[str]) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in argv[argv.index("-l") + 1].split(",")) if "-l" in argv else {}


# --- node counts -------------------------------------------------------------------------------


def test_zero_nodes_refused():
    """select_nodes (node_scheduler.c): min_nodes = max_nodes = 0 without a burst buffer is
    ESLURM_INVALID_NODE_COUNT; job_allocate treats it as a flaw in the request (refused)."""
    assert refused(["-N", "0"]) == [BATCH_FAILED + "Node count specification invalid"]


def test_zero_minimum_with_a_maximum_is_a_batch_job_but_not_an_array():
    """_job_create (job_mgr.c): a zero min_nodes is refused for an array or a job without a script;
    a batch job with -N 0-2 has a maximum and passes."""
    assert "-q" in accepted(["-N", "0-2"])
    assert refused(["-N", "0-2", "--array=1-2"]) == [BATCH_FAILED + "Node count specification invalid"]


def test_zero_minimum_for_srun_and_salloc(capsys):
    """_job_create: srun's and salloc's jobs carry no script, so -N 0-2 is refused for them, in
    their own lead-ins (srun: "Unable to allocate resources", salloc: "Job submit/allocate failed")."""
    assert dispatch("srun", ["-N", "0-2", "true"]) == 1
    assert capsys.readouterr().err == "srun: error: Unable to allocate resources: Node count specification invalid\n"
    assert dispatch("salloc", ["-N", "0", "true"]) == 1
    assert capsys.readouterr().err == "salloc: error: Job submit/allocate failed: Node count specification invalid\n"


def test_nodelist_longer_than_the_node_maximum():
    """_job_create: the -w list raises min_nodes; above -N's maximum it is ESLURM_INVALID_NODE_COUNT."""
    assert refused(["-N", "1", "-w", "vm,vm2"]) == [BATCH_FAILED + "Node count specification invalid"]
    assert "-q" in accepted(["-N", "1-2", "-w", "vm,vm2"])


def test_more_nodes_than_the_partition_has_waits_without_enforce_part_limits(tmp_path):
    """EnforcePartLimits=NO (Slurm's default): _valid_job_part lets a job over the partition's
    total nodes wait; the reference cluster accepted `sbatch -N 2` on its one node."""
    case = CASES["sbatch_accepted_too_many_nodes"]
    assert case["cmd"] == "sbatch -N 2 job.sh" and case["rc"] == 0
    extra_config(tmp_path, "", replace=('[partitions.debug]\n', '[partitions.debug]\nnodes = ["vm"]\n'))
    assert "-pe" in accepted(["-N", "2"])


@pytest.mark.parametrize("mode", ["ALL", "ANY"])
def test_more_nodes_than_the_partition_has_with_enforce_part_limits(tmp_path, mode):
    """_part_access_check (job_mgr.c): min_nodes above the partition's total_nodes is
    ESLURM_INVALID_NODE_COUNT, fatal when EnforcePartLimits is set."""
    extra_config(tmp_path, "", replace=("max_array_size = 1001\n", f'max_array_size = 1001\nenforce_part_limits = "{mode}"\n'))
    extra_config(tmp_path, "", replace=('[partitions.debug]\n', '[partitions.debug]\nnodes = ["vm"]\n'))
    assert refused(["-N", "2"]) == [BATCH_FAILED + "Node count specification invalid"]
    assert "-q" in accepted(["-N", "1"])


def test_enforce_part_limits_any_and_all_over_a_partition_list(tmp_path):
    """_valid_job_part: with a partition list, ANY refuses only when no partition fits, ALL when
    one does not. Partition gpu lists no nodes (unknown: it fits)."""
    extra_config(tmp_path, "", replace=('[partitions.debug]\n', '[partitions.debug]\nnodes = ["vm"]\n'))
    extra_config(tmp_path, "", replace=("max_array_size = 1001\n", 'max_array_size = 1001\nenforce_part_limits = "ANY"\n'))
    a = accepted(["-N", "2", "-p", "debug,gpu"])
    assert a[a.index("-q") + 1] == "gpu"  # the job goes to the partition that fits
    a = accepted(["-N", "1", "-p", "debug,gpu"])
    assert a[a.index("-q") + 1] == "debug"
    extra_config(tmp_path, "", replace=('enforce_part_limits = "ANY"', 'enforce_part_limits = "ALL"'))
    assert refused(["-N", "2", "-p", "debug,gpu"]) == [BATCH_FAILED + "Node count specification invalid"]


def test_time_over_the_partition_limit(tmp_path):
    """_part_access_check: a time limit over the partition's MaxTime is ESLURM_INVALID_TIME_LIMIT,
    fatal only with EnforcePartLimits (the reference, NO, accepted `-p gpu -t 3-00:00:00`)."""
    case = CASES["sbatch_accepted_time_over_partition"]
    assert case["rc"] == 0
    assert "-q" in accepted(["-p", "gpu", "-t", "3-00:00:00"])
    extra_config(tmp_path, "", replace=("max_array_size = 1001\n", 'max_array_size = 1001\nenforce_part_limits = "ALL"\n'))
    assert refused(["-p", "gpu", "-t", "3-00:00:00"]) == [
        BATCH_FAILED + "Requested time limit is invalid (missing or exceeds some limit)"]
    assert "-q" in accepted(["-p", "gpu", "-t", "2-00:00:00"])


# --- partitions --------------------------------------------------------------------------------


def test_every_member_of_a_partition_list_must_exist():
    """_get_job_parts / get_part_list (partition_mgr.c): the first name that is not a partition is
    named, then ESLURM_INVALID_PARTITION_NAME; the reference's single bad name reads the same."""
    case = CASES["sbatch_err_invalid_partition"]
    assert refused(["-p", "nope"]) == case["stderr"].splitlines()
    assert refused(["-p", "debug,nope"]) == ["sbatch: error: invalid partition specified: nope",
                                              BATCH_FAILED + "Invalid partition name specified"]
    assert refused(["-p", "gpu,nope,worse"])[0] == "sbatch: error: invalid partition specified: nope"


def test_partition_list_goes_to_its_first_member():
    """get_part_list skips empty words (strtok_r); the job's queue is the first partition's."""
    a = accepted(["-p", ",gpu,debug"])
    assert a[a.index("-q") + 1] == "gpu"
    assert refused(["-p", ","])[0] == "sbatch: error: invalid partition specified: (null)"


# --- memory ------------------------------------------------------------------------------------


def test_memory_beyond_the_partitions_nodes(tmp_path):
    """select_nodes finds no node with the memory (node_scheduler.c _set_err_msg): the reference's
    `--mem=100G` lines, decided from the partition's node_memory_mb without asking Grid Engine."""
    case = CASES["sbatch_err_too_much_mem"]
    extra_config(tmp_path, "", replace=('[partitions.debug]\n', '[partitions.debug]\nnode_memory_mb = 8000\n'))
    assert refused(["--mem=100G"]) == case["stderr"].splitlines()
    assert refused(["--mem-per-cpu=3000", "-c", "3"]) == case["stderr"].splitlines()
    assert "mem_free" in resources(accepted(["--mem=8000"]))
    # no node_memory_mb: Grid Engine's -w e decides, as before
    assert "-w" in accepted(["-p", "gpu", "--mem=100G"])


# --- CPUs on one host ---------------------------------------------------------------------------


@pytest.mark.parametrize("argv, verify", [
    (["-c", "64"], True),                        # one task's CPUs: a task never spans nodes
    (["-N", "1", "-n", "64"], True),             # -N 1: every task on the one node
    (["-N", "1-1", "--ntasks-per-node=4"], True),
    (["-n", "64"], False),                       # Slurm may spread the tasks over nodes
    (["-N", "2", "-n", "4"], False),             # more nodes than exist: Slurm pends (PartitionNodeLimit)
    (["-n", "4", "-c", "2"], False),
    ([], False),                                 # one CPU: nothing to verify
    (["-c", "1"], False),
])
@pytest.mark.parametrize("release", ["22.05", "24.11", "26.05"])
def test_cpus_that_must_share_one_host_are_verified(monkeypatch, release, argv, verify):
    """24.11's select_nodes (node_scheduler.c) refuses at submission a job whose one node would
    need more CPUs than any node of the partition has (ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE):
    besides submit.check_fits (test_releases_sizes.py, bypassed here), the shim submits such a job
    with -w e (Grid Engine refuses what no host can give its single-host PE; submit.refusal puts
    that in Slurm's words), and only such a job: a larger node count than the partition has pends
    in Slurm, and -w e would refuse it. 22.05 and 26.05 take it and it pends (PartitionConfig:
    fixtures/slurm-*/oracle-rest.txt): no -w e, Grid Engine keeps it waiting."""
    from shim.operations import submit
    from shim.slurm import releases

    monkeypatch.setattr(releases, "current", lambda: releases.get(release))
    monkeypatch.setattr(submit, "check_fits", lambda *a: None)
    got = accepted(argv)
    assert (got[got.index("-w") + 1] == "e" if "-w" in got else False) == (verify and release == "24.11"), got


# --- gres --------------------------------------------------------------------------------------


def test_unknown_gres_name_is_the_clients_message():
    """gres_job_state_validate in the client (slurm_opt.c slurm_opt_create_job_desc): error("%s",
    slurm_strerror(rc)) without the submission lead-in, as the reference's --gres=fpga:1."""
    case = CASES["sbatch_err_bad_gres"]
    assert refused(["--gres=fpga:1"]) == case["stderr"].splitlines() == [GRES_BAD]
    assert refused(["--gres=nvme:1"]) == [GRES_BAD]


@pytest.mark.parametrize("argv", [
    ["--mem-per-gpu=1G"],                               # mem_per_tres without a GPU
    ["--ntasks-per-gpu=2"],                             # needs GPUs or a task count
    ["--cpus-per-gpu=2", "-c", "2", "--gpus=1"],        # --cpus-per-gpu with --cpus-per-task
    ["--gpus=1", "--gpus-per-node=2"],                  # gres_per_node > gres_per_job
    ["--gpus=3", "--gpus-per-node=2"],                  # gres_per_job not a multiple of per node
    ["--gpus=4", "--gpus-per-node=1", "-N", "2"],       # needs 4 nodes, -N allows 2
    ["--gpus-per-task=1"],                              # per task without --gpus or -n
    ["--gpus=3", "--gpus-per-task=2", "-n", "1"],       # not a multiple
    ["--gpus=4", "--gpus-per-task=2", "-n", "3"],       # tasks differ from gpus/per task
    ["--gres=gpu:3", "--gpus-per-task=2", "-n", "1"],   # per node not a multiple of per task
    ["--gpus=1", "-N", "2"],                            # fewer GPUs than nodes
    ["--gpus=4", "--ntasks-per-gpu=3", "-n", "4"],      # -n not a multiple of --ntasks-per-gpu
])
def test_contradictory_gpu_requests(argv):
    """_test_gres_cnt and gres_job_state_validate (gres.c), each case one of its checks."""
    assert refused(argv) == [GRES_BAD]


@pytest.mark.parametrize("argv", [
    ["--gpus=2", "--gpus-per-node=1", "-N", "2"],
    ["-n", "2", "--gpus-per-task=1"],
    ["--gpus=4", "--gpus-per-task=2", "-n", "2"],
    ["--ntasks-per-gpu=2", "-n", "4"],
    ["--mem-per-gpu=1G", "--gpus=1"],
])
def test_consistent_gpu_requests_pass(argv):
    assert "gpu" in resources(accepted(argv))


def test_gres_name_asked_twice_with_types_counts_both(tmp_path):
    """Two types of one gres are two requests (a dict keyed by name dropped the first)."""
    extra_config(tmp_path, '[gres.gpu.types.a100]\ncomplex = "gpu_a100"\n[gres.gpu.types.v100]\ncomplex = "gpu_v100"\n')
    r = resources(accepted(["--gres=gpu:a100:1,gpu:v100:2"]))
    assert r["gpu_a100"] == "1" and r["gpu_v100"] == "2" and "gpu" not in r


# --- arrays ------------------------------------------------------------------------------------


def test_site_max_array_size_is_the_array_limit(tmp_path):
    """_valid_array_inx (job_mgr.c): every index below MaxArraySize (cluster.max_array_size, the
    value scontrol show config prints), else ESLURM_INVALID_ARRAY; 1001 is only the default."""
    case = CASES["sbatch_err_array_too_big"]
    assert refused(["--array=1-5000"]) == case["stderr"].splitlines()
    assert "-t" in accepted(["--array=1000"])
    extra_config(tmp_path, "", replace=("max_array_size = 1001\n", "max_array_size = 11\n"))
    a = accepted(["--array=0-10"])
    assert a[a.index("-t") + 1] == "1-11"
    assert refused(["--array=11"]) == [BATCH_FAILED + "Invalid job array specification"]
    assert refused(["--array=1000"]) == [BATCH_FAILED + "Invalid job array specification"]
    extra_config(tmp_path, "", replace=("max_array_size = 11\n", "max_array_size = 5000\n"))
    a = accepted(["--array=1-4999"])
    assert a[a.index("-t") + 1] == "1-4999"


def test_scontrol_show_config_prints_the_sites_enforce_part_limits(tmp_path, capsys):
    """scontrol show config's EnforcePartLimits is the value the submission checks use."""
    from shim.__main__ import dispatch as run

    assert run("scontrol", ["show", "config"]) == 0
    assert "EnforcePartLimits       = NO\n" in capsys.readouterr().out
    extra_config(tmp_path, "", replace=("max_array_size = 1001\n", 'max_array_size = 1001\nenforce_part_limits = "ANY"\n'))
    assert run("scontrol", ["show", "config"]) == 0
    assert "EnforcePartLimits       = ANY\n" in capsys.readouterr().out


def test_unknown_license_and_feature_in_each_commands_lead_in(capsys):
    """A license or feature the site config has not, and a node count over the maximum, are the
    controller's refusals in each command's own lead-in (translate/qsub.refused; they were
    "Batch job submission failed" for srun and salloc too)."""
    for prog, lead in (("srun", "Unable to allocate resources"), ("salloc", "Job submit/allocate failed")):
        assert dispatch(prog, ["-L", "nosuchlicense:1", "true"]) == 1
        assert capsys.readouterr().err == f"{prog}: error: {lead}: Invalid license specification\n"
        assert dispatch(prog, ["-C", "nosuchfeature", "true"]) == 1
        assert capsys.readouterr().err == f"{prog}: error: {lead}: Invalid feature specification\n"
