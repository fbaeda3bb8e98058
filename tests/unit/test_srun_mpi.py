"""srun's MPI side without Grid Engine: --mpi's types and messages, rank placement (block, cyclic,
--nodelist/--exclude, --overcommit), Open MPI's daemons, and the Open MPI rank trampoline."""

from __future__ import annotations

import os
import subprocess

import pytest

from shim.cli import srun
from shim.errors import ShimError
from shim.runtime import steps
from shim.runtime.steps import ompi, plan


def test_mpi_list_is_slurms_format():
    assert srun.mpi_list() == "MPI plugin types are...\n\tnone\n\tpmi2\n\tpmix\n"


def test_mpi_types_and_slurms_error_for_an_unknown_one():
    assert srun.mpi_type("pmi2") == "pmi2"
    assert srun.mpi_type("openmpi") == "none"  # Slurm's alias
    with pytest.raises(ShimError) as e:
        srun.mpi_type("pmi3")
    assert e.value.code == 1 and e.value.lines == [
        "srun: error: Couldn't find the specified plugin name for mpi/pmi3 looking at all files",
        "srun: error: cannot find mpi plugin for mpi/pmi3",
        "srun: error: MPI: Cannot create context for mpi/pmi3",
        "srun: error: MPI: Unable to load any plugin",
        "srun: error: Invalid MPI type 'pmi3', --mpi=list for acceptable types",
    ]


def test_mpi_default_comes_from_the_site_config(tmp_path, monkeypatch):
    from shim import siteconf

    conf = tmp_path / "config.toml"
    conf.write_text('[cluster]\nmpi_default = "pmi2"\n')
    monkeypatch.setenv("SLURM_SHIM_CONFIG", str(conf))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    siteconf.reset()
    try:
        assert srun.mpi_type(None) == "pmi2"
        assert srun.mpi_type("none") == "none"
        conf.write_text('[cluster]\nname = "c"\n')
        siteconf.reset()
        assert srun.mpi_type(None) == "none"  # Slurm's own default
    finally:
        siteconf.reset()


def test_layout_block_and_cyclic():
    hosts = [("a", 4), ("b", 4)]
    assert steps.layout(hosts, 4, 1, 2) == [("a", 4, [0, 1]), ("b", 4, [2, 3])]
    assert steps.layout(hosts, 4, 1, 2, distribution="cyclic") == [("a", 4, [0, 2]), ("b", 4, [1, 3])]
    assert steps.layout(hosts, 5, 1, 2, distribution="cyclic:block") == [("a", 4, [0, 2, 4]), ("b", 4, [1, 3])]
    assert steps.layout([("a", 1), ("b", 3)], 4, 1, 2, distribution="cyclic") == [("a", 1, [0]), ("b", 3, [1, 2, 3])]


def test_layout_overcommit():
    with pytest.raises(steps.StepError, match="More processors requested than permitted"):
        steps.layout([("a", 2), ("b", 2)], 16, 1, 2)
    got = steps.layout([("a", 2), ("b", 2)], 16, 1, 2, overcommit=True)
    assert [len(t) for _, _, t in got] == [8, 8] and got[0][2] == list(range(8))


def test_nodelist_and_exclude_choose_among_the_allocations_hosts():
    alloc = steps.Allocation(7, [("vm", 2), ("node2", 2), ("node3", 2)])
    got = steps.plan_step(steps.StepRequest(ntasks=2, nodelist="node[2-3]"), alloc)
    assert [h for h, _, _ in got] == ["node2", "node3"]
    got = steps.plan_step(steps.StepRequest(ntasks=1, ntasks_per_node=1, exclude="vm"), alloc)
    assert [h for h, _, _ in got] == ["node2"]
    with pytest.raises(steps.StepError, match="Requested node configuration is not available"):
        steps.plan_step(steps.StepRequest(ntasks=1, nodelist="elsewhere"), alloc)


def test_open_mpis_daemons_leave_out_srun_s_own_host():
    orted = ["orted", "-mca", "ess", "slurm", "-mca", "orte_hnp_uri", "1.0;tcp://10.0.0.1:1"]
    assert srun.orted_exclude(orted, None) == steps.short_host()
    assert srun.orted_exclude(orted, "node2") is None  # a node list says where
    assert srun.orted_exclude(["./orted"], None) is None and srun.orted_exclude(["hostname"], None) is None


def test_process_placement_reaches_mpirun():
    layout = [("vm", 4, [0, 1]), ("node2", 4, [2, 3])]
    argv = ompi.mpirun_argv("/usr/bin/mpirun.openmpi", layout, ["./app", "x y"], cyclic=False,
                            environ={"JOB_ID": "5", "PE_HOSTFILE": "/p", "SGE_ROOT": "/s", "ARC": "lx-amd64"})
    cut = argv.index("/bin/sh")
    assert argv[:9] == ["/usr/bin/mpirun.openmpi", "--host", "vm:2,node2:2", "-np", "4", "--map-by", "slot",
                        "--bind-to", "none"]
    assert argv[argv.index("--mca") + 1:argv.index("--mca") + 3] == ["plm", "rsh"]
    assert argv[cut:] == ["/bin/sh", "-c", ompi.RANK_LAUNCH, "./app", "x y"]
    assert "node" == ompi.mpirun_argv("m", layout, ["a"], cyclic=True, environ={})[6]
    assert "--mca" not in ompi.mpirun_argv("m", layout, ["a"], cyclic=False, environ={})  # no Grid Engine job


def test_rank_trampoline_sets_slurms_variables_and_records_the_status(tmp_path):
    layout = [("vm", 4, [0, 2]), ("node2", 3, [1, 3])]
    env = {"PATH": os.environ["PATH"], "OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           **ompi.rank_env(layout, str(tmp_path))}
    cp = subprocess.run(["/bin/sh", "-c", ompi.RANK_LAUNCH, "sh", "-c", "env; exit 5"], env=env,
                        capture_output=True, text=True, timeout=10)
    assert cp.returncode == 5
    got = dict(line.split("=", 1) for line in cp.stdout.splitlines() if "=" in line)
    assert (got["SLURM_PROCID"], got["SLURM_LOCALID"], got["SLURM_NODEID"], got["SLURMD_NODENAME"],
            got["SLURM_GTIDS"], got["SLURM_CPUS_ON_NODE"]) == ("3", "1", "1", "node2", "1,3", "3")
    assert not any(k.startswith("SHIM_OMPI_") for k in got)
    assert ompi.rank_statuses(str(tmp_path), 4) == {3: (5, 0)} and not tmp_path.exists()


def test_open_mpi_programs_are_told_by_their_libraries():
    assert not ompi.is_open_mpi("sh", os.environ.get("PATH"), "/")
    assert not ompi.is_open_mpi("/nonexistent", None, "/")
    assert ompi._needed("/bin/sh")  # an ELF file's DT_NEEDED list is read (libc at least)
    assert any(n.startswith(b"libc.so") for n in ompi._needed("/bin/sh"))


def test_mapping_for_the_pmi_service_follows_the_layout():
    layout = plan.layout([("a", 2), ("b", 2)], 4, 1, 2, distribution="cyclic")
    node_of = [0] * 4
    for node, (_, _, tids) in enumerate(layout):
        for t in tids:
            node_of[t] = node
    from shim.runtime import pmi

    assert pmi.process_mapping(node_of) == "(vector,(0,2,1))"
