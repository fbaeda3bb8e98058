"""CPU binding: --hint, --threads-per-core and srun's --cpu-bind as OCS 9.1's binding request
(-btype/-bunit/-bamount, the capability "btype", probed from `qsub -help`), on the unit-test site
config with Grid Engine's help texts replayed (fixtures/gridengine/*/qsub-help.txt)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from conftest import FIXTURES
from test_srun_steps import _launch
from shim.gridengine import backends
from shim.__main__ import dispatch
from shim.gridengine.replay import ReplayBackend
from shim.cli import sbatch, srun
from shim.runtime.steps import launch
from shim.slurm.options import sources, table
from shim.gridengine.translate import qsub

OCS_HELP = FIXTURES / "gridengine" / "ocs-9.1.4" / "qsub-help.txt"
SGE_HELP = FIXTURES / "gridengine" / "sge-8.1.9" / "qsub-help.txt"
SCRIPT = "#!/bin/sh\ntrue\n"


pytestmark = pytest.mark.usefixtures("unit_site")


def _grid_engine(help_file: Path) -> ReplayBackend:
    b = ReplayBackend()
    b.add("qsub", ["-help"], help_file.read_text())
    backends.use(b)
    return b


def prep(argv: list[str], env: dict[str, str] | None = None, script: str = SCRIPT):
    _o, sub, _cfg = sbatch.prepare(argv, env or {}, stdin=io.StringIO(script), cwd="/srv/x")
    return sub


def binding_flags(argv: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        if argv[i] in ("-btype", "-bunit", "-bamount", "-bfilter", "-binstance", "-bstrategy", "-binding"):
            out += argv[i:i + 2]
            i += 2
        else:
            i += 1
    return out


def srun_options(argv: list[str], env: dict[str, str] | None = None) -> sources.Options:
    return sources.collect(table.command_table("srun"), argv + ["hostname"], environ=env or {})


class Caps:
    def __init__(self, btype: bool):
        self.btype = btype
        self.asked = 0

    def __getattr__(self, name):
        raise AttributeError(name)

    def __getattribute__(self, name):
        if name == "btype":
            object.__setattr__(self, "asked", object.__getattribute__(self, "asked") + 1)
        return object.__getattribute__(self, name)


CORE = ["-btype", "slot", "-bunit", "C", "-bamount", "1"]
THREAD = ["-btype", "slot", "-bunit", "T", "-bamount", "1"]


# --- sbatch on OCS 9.1 (qsub -help lists -btype) ----------------------------------------------------

@pytest.mark.parametrize("argv, flags, slots", [
    (["--hint=nomultithread"], CORE, None),
    (["--hint=multithread", "-n", "2"], THREAD, "2"),
    (["--threads-per-core=1", "-n", "2", "-c", "2"], CORE, "4"),  # one unit per slot: slots are the CPUs
    (["--hint=nomultithread", "-N", "2", "--ntasks-per-node=1"], CORE, "2"),
])
def test_ocs_binds_one_unit_per_cpu_and_the_warning_goes(argv, flags, slots):
    b = _grid_engine(OCS_HELP)
    sub = prep(argv)
    assert binding_flags(sub.argv) == flags
    if slots:
        assert sub.argv[sub.argv.index("-pe") + 2] == slots
    assert not [w for w in sub.warnings if "--hint" in w or "--threads-per-core" in w]
    assert ("qsub", "-help") in [k for k, _ in b.calls]
    assert any(n[1] == " ".join(flags) for n in sub.notes)  # slurm-shim explain shows it


@pytest.mark.parametrize("argv, option", [
    (["--hint=compute_bound"], "--hint"),
    (["--hint=memory_bound"], "--hint"),
    (["--threads-per-core=2"], "--threads-per-core"),
])
def test_ocs_keeps_the_warning_where_binding_is_not_slurms(argv, option):
    _grid_engine(OCS_HELP)
    sub = prep(argv)
    assert binding_flags(sub.argv) == []
    assert [w for w in sub.warnings if w.startswith(f"sbatch: warning: {option} has no effect on Grid Engine (")]


def test_hint_from_a_directive_counts_as_the_command_line():
    _grid_engine(OCS_HELP)
    sub = prep([], script="#!/bin/sh\n#SBATCH --hint=nomultithread\ntrue\n")
    assert binding_flags(sub.argv) == CORE and sub.warnings == []


def test_a_rival_on_the_command_line_drops_the_hint_as_slurm_does():
    """Slurm's validate_hint_option: --threads-per-core on the command line overrides --hint."""
    _grid_engine(OCS_HELP)
    sub = prep(["--hint=multithread", "--threads-per-core=1"])
    assert binding_flags(sub.argv) == CORE  # threads-per-core's one core per CPU, not hint's threads
    assert [w for w in sub.warnings if w.startswith("sbatch: warning: --hint has no effect")]
    assert not [w for w in sub.warnings if "--threads-per-core" in w]


def test_hint_on_the_command_line_beats_a_rival_from_the_environment():
    _grid_engine(OCS_HELP)
    sub = prep(["--hint=multithread"], env={"SBATCH_THREADS_PER_CORE": "1"})
    assert binding_flags(sub.argv) == THREAD
    assert not [w for w in sub.warnings if "--hint" in w]


def test_hint_from_the_environment_yields_to_a_rival_from_the_environment():
    _grid_engine(OCS_HELP)
    sub = prep([], env={"SBATCH_HINT": "multithread", "SBATCH_THREADS_PER_CORE": "1"})
    assert binding_flags(sub.argv) == CORE


# --- Grid Engines without -btype: nothing changes ----------------------------------------------------

@pytest.mark.parametrize("argv", [["--hint=nomultithread"], ["--threads-per-core=1"], ["--hint=multithread"]])
def test_sge_819_binds_nothing_and_keeps_the_warning(argv):
    b = _grid_engine(SGE_HELP)  # lists the old -binding (a hint to execd), not -btype
    sub = prep(argv)
    assert binding_flags(sub.argv) == []
    assert len(sub.warnings) == 1 and sub.warnings[0].startswith(f"sbatch: warning: {argv[0].split('=')[0]} has no effect")
    assert [k for k, _ in b.calls] == [("qsub", "-help")]


def test_no_binding_option_asks_grid_engine_nothing():
    b = _grid_engine(OCS_HELP)
    sub = prep(["-n", "2", "-c", "2"])
    assert binding_flags(sub.argv) == [] and b.calls == []


def test_an_unmapped_binding_option_asks_grid_engine_nothing():
    b = _grid_engine(OCS_HELP)
    prep(["--hint=compute_bound"])
    assert b.calls == []


# --- srun's --cpu-bind (srun's own job) ---------------------------------------------------------------

@pytest.mark.parametrize("text, parsed", [
    ("cores", ("cores", None, False)),
    ("verbose,threads", ("threads", None, True)),
    ("q,core", ("cores", None, False)),
    ("none", (None, "none", False)),
    ("NO", (None, "none", False)),
    ("map_cpu:0,1", (None, "map", False)),  # the comma before a digit belongs to the list
    ("mask_cpu:0x1,0x2,verbose", (None, "mask", True)),
    ("sockets", ("sockets", None, False)),
    ("ldoms", ("ldoms", None, False)),
    ("rank_ldom", (None, "ldom", False)),
    ("verbose", (None, None, True)),
    ("bogus", (None, "?", False)),
])
def test_cpu_bind_is_read_as_slurm_reads_it(text, parsed):
    assert qsub.cpu_bind_type(text) == parsed


@pytest.mark.parametrize("argv, flags, honoured", [
    (["--cpu-bind=cores"], CORE, ("cpu-bind",)),
    (["--cpu-bind=threads", "-c", "2"], THREAD, ("cpu-bind",)),
    (["--cpu_bind=verbose,cores"], CORE, ("cpu-bind",)),
    (["--cpu-bind=cores", "-N", "2", "--ntasks-per-node=1"], CORE, ("cpu-bind",)),
    (["--cpu-bind=cores", "-n", "2"], CORE, ("cpu-bind",)),  # the launcher gives each task its share
    (["--cpu-bind=none"], ["-bamount", "0"], ("cpu-bind",)),
    (["--cpu-bind=none", "-n", "2"], ["-bamount", "0"], ("cpu-bind",)),
    (["--threads-per-core=1", "--cpu-bind=threads"], CORE, ("threads-per-core", "cpu-bind")),
])
def test_cpu_bind_maps_where_the_hosts_set_is_the_tasks(argv, flags, honoured):
    o = srun_options(argv)
    got = qsub.binding(o, qsub.geometry(o, "srun"))
    assert got is not None and got[0] == flags and got[1] == honoured


@pytest.mark.parametrize("argv", [
    ["--cpu-bind=sockets"],
    ["--cpu-bind=ldoms"],
    ["--cpu-bind=map_cpu:0"],
    ["--cpu-bind=mask_cpu:0x1"],
    ["--cpu-bind=verbose"],
    ["--cpu-bind=rank_ldom"],
])
def test_cpu_bind_keeps_its_warning_elsewhere(argv):
    o = srun_options(argv)
    assert qsub.binding(o, qsub.geometry(o, "srun")) is None
    warnings = sources.fates(o, table.command_table("srun"), "srun")
    assert qsub.bound_warnings(warnings, o, "srun", Caps(True)) == warnings
    assert warnings == [f"srun: warning: --cpu-bind has no effect on Grid Engine ({table.BIND_TASKS})"]


def test_bound_warnings_drop_only_the_honoured_options_and_ask_only_then():
    o = srun_options(["--cpu-bind=cores", "--hint=compute_bound", "--acctg-freq=30"])
    t = table.command_table("srun")
    warnings = sources.fates(o, t, "srun")
    # --hint's rival --cpu-bind is on the command line too: Slurm drops the hint, cores stay
    caps = Caps(True)
    left = qsub.bound_warnings(warnings, o, "srun", caps)
    assert [w.split()[2] for w in left] == ["--acctg-freq", "--hint"] and caps.asked == 1
    assert qsub.bound_warnings(warnings, o, "srun", Caps(False)) == warnings
    plain = srun_options(["--acctg-freq=30"])
    caps = Caps(True)
    assert qsub.bound_warnings(sources.fates(plain, t, "srun"), plain, "srun", caps) and caps.asked == 0


def test_srun_step_of_an_unbound_job_keeps_the_cpu_bind_warning(capsys, monkeypatch):
    """A step's tasks of a job Grid Engine did not bind share the host's CPUs: nothing is bound."""
    _grid_engine(OCS_HELP)
    monkeypatch.setenv("SLURM_JOB_ID", "999999")
    monkeypatch.delenv("SGE_BINDING_INSTANCE", raising=False)
    dispatch("srun", ["--cpu-bind=cores", "true"])
    assert f"srun: warning: --cpu-bind has no effect on Grid Engine ({table.BIND_TASKS})" in capsys.readouterr().err


@pytest.mark.parametrize("help_file, warned", [(OCS_HELP, False), (SGE_HELP, True)])
def test_srun_new_job_warns_only_without_the_capability(capsys, monkeypatch, help_file, warned):
    _grid_engine(help_file)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    dispatch("srun", ["--cpu-bind=cores", "true"])  # the job itself fails here: no qrsh recorded
    err = capsys.readouterr().err
    assert ("srun: warning: --cpu-bind has no effect" in err) is warned


@pytest.mark.parametrize("help_file, warned", [(OCS_HELP, False), (SGE_HELP, True)])
def test_salloc_warns_only_without_the_capability(capsys, help_file, warned):
    _grid_engine(help_file)
    dispatch("salloc", ["--hint=nomultithread", "true"])  # the allocation itself fails here: no qsub recorded
    err = capsys.readouterr().err
    assert ("salloc: warning: --hint has no effect" in err) is warned


def test_qrsh_keeps_the_binding_flags():
    """srun's own job goes through qrsh, which takes -btype/-bunit/-bamount as qsub does."""
    flags = qsub.qrsh_flags(["-terse", "-q", "debug", "-btype", "slot", "-bunit", "C", "-bamount", "1", "-w", "e"])
    assert binding_flags(flags) == CORE


# --- each task's share on its host (the step launcher, real processes, no Grid Engine) -------------

def test_task_cpus_gives_each_local_task_its_run_of_cpus(monkeypatch):
    monkeypatch.setattr(launch, "_core_of", lambda c: ("0", str(c // 2)))  # two threads per core
    assert launch.task_cpus("threads", 4, 1, [3, 1, 0, 2]) == [[0], [1], [2], [3]]
    assert launch.task_cpus("threads", 2, 2, range(4)) == [[0, 1], [2, 3]]
    assert launch.task_cpus("cores", 2, 1, range(4)) == [[0, 1], [2, 3]]  # a core: both its threads
    assert launch.task_cpus("cores", 1, 4, range(4)) == [[0, 1, 2, 3]]
    assert launch.task_cpus("threads", 3, 1, [4, 5]) == [[4], [5], [4]]  # more tasks than CPUs: round again
    monkeypatch.setattr(launch, "_core_of", lambda c: ("0", str(c)))
    assert launch.task_cpus("cores", 2, 1, [6, 7]) == [[6], [7]]


def test_cpu_bind_env_is_slurmstepds(monkeypatch):
    monkeypatch.setattr(launch.os, "cpu_count", lambda: 2)
    assert launch.cpu_bind_env("cores", False, [[0], [1]]) == {
        "SLURM_CPU_BIND_VERBOSE": "quiet", "SLURM_CPU_BIND_TYPE": "cores,mask_cpu:",
        "SLURM_CPU_BIND_LIST": "0x1,0x2", "SLURM_CPU_BIND": "quiet,cores,mask_cpu:0x1,0x2"}
    monkeypatch.setattr(launch.os, "cpu_count", lambda: 16)
    assert launch.cpu_bind_env("threads", True, [[0, 1, 10]])["SLURM_CPU_BIND"] == "verbose,threads,mask_cpu:0x0403"
    # a nested srun reads its task's SLURM_CPU_BIND as masks: it binds nothing itself
    assert qsub.cpu_bind_type("quiet,cores,mask_cpu:0x1,0x2") == ("cores", "mask", False)


def _run_tasks(tmp_path, unit, tasks=(0, 1), verbose=False):
    _launch_, out, err = _launch(tmp_path, ["sh", "-c", 'echo "$SLURM_PROCID $(grep Cpus_allowed_list /proc/self/status '
                                           '| cut -f2) $SLURM_CPU_BIND"'], tasks, label=False, cpu_bind=unit,
                                 cpu_bind_verbose=verbose, cpus_per_task=1)
    return sorted(out.splitlines()), err


def grant(monkeypatch, cpus) -> None:
    """The job's environment as OCS's execd makes it for a binding it scheduled."""
    monkeypatch.setenv("SGE_BINDING_INSTANCE", "set")
    monkeypatch.setenv("SGE_BINDING_CPUSET", f"0x{sum(1 << c for c in cpus):08x}")


def _one_cpu_each_possible() -> list[int]:
    cpus = sorted(os.sched_getaffinity(0))
    assert len(cpus) >= 2, "the test host has 2 CPUs"
    return cpus


def test_a_bound_jobs_tasks_each_get_their_share(tmp_path, monkeypatch):
    cpus = _one_cpu_each_possible()
    grant(monkeypatch, cpus)  # as OCS's execd says of a job it bound
    before = os.sched_getaffinity(0)
    out, err = _run_tasks(tmp_path, "threads")
    assert [line.split()[:2] for line in out] == [["0", str(cpus[0])], ["1", str(cpus[1])]]
    assert all(line.split()[2].startswith("quiet,threads,mask_cpu:0x") for line in out)
    assert os.sched_getaffinity(0) == before and err == ""  # the launcher's own thread is as it was


def test_verbose_prints_slurmstepds_line(tmp_path, monkeypatch):
    cpus = _one_cpu_each_possible()
    grant(monkeypatch, cpus)
    _out, err = _run_tasks(tmp_path, "threads", tasks=(0,), verbose=True)
    assert err.startswith("cpu-bind-threads=MASK - h, task  0  0 [")
    assert err.endswith(f"]: mask 0x{1 << cpus[0]:x} set\n")


def test_an_unbound_jobs_tasks_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("SGE_BINDING_INSTANCE", raising=False)  # SGE 8.1.9, or OCS without a binding
    allowed = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    out, _err = _run_tasks(tmp_path, "cores")
    for line in out:
        words = line.split()
        assert len(words) == 2  # no SLURM_CPU_BIND
        got = set()
        for part in words[1].split(","):
            a, _, b = part.partition("-")
            got |= set(range(int(a), int(b or a) + 1))
        assert ",".join(map(str, sorted(got))) == allowed


def test_srun_step_request_carries_the_binding():
    o = srun_options(["--cpu-bind=v,cores"])
    assert srun.step_binding(o) == ("cores", True)
    assert srun.step_binding(srun_options(["--cpu-bind=sockets"])) == (None, False)
    assert srun.step_binding(srun_options([], {"SLURM_CPU_BIND": "quiet,cores,mask_cpu:0x1"})) == (None, False)
    assert srun.request(o, ["true"], {}).cpu_bind == "cores"


def test_srun_step_of_a_bound_job_drops_the_warning(capsys, monkeypatch):
    _grid_engine(OCS_HELP)
    monkeypatch.setenv("SLURM_JOB_ID", "999999")
    grant(monkeypatch, [0])
    dispatch("srun", ["--cpu-bind=cores", "true"])  # the step itself fails here: no such job
    assert "--cpu-bind has no effect" not in capsys.readouterr().err


@pytest.mark.parametrize("env, cpus", [
    ({"SGE_BINDING_INSTANCE": "set", "SGE_BINDING_CPUSET": "0x00000001"}, {0}),
    ({"SGE_BINDING_INSTANCE": "set", "SGE_BINDING_CPUSET": "0x00000006"}, {1, 2}),
    ({"SGE_BINDING_INSTANCE": "set", "SGE_BINDING_CPUSET": "0x00000001,0x80000000"}, {31, 32}),  # hwloc's words
    ({"SGE_BINDING_INSTANCE": "set", "SGE_BINDING_CPUSET": "0x0"}, None),
    ({"SGE_BINDING_INSTANCE": "set", "SGE_BINDING_CPUSET": "0xf...f"}, None),
    ({"SGE_BINDING_INSTANCE": "env", "SGE_BINDING_CPUSET": "0x00000001"}, None),  # the job binds itself
    ({"SGE_BINDING_INSTANCE": "NONE"}, None),
    ({}, None),
])
def test_granted_cpus_reads_execds_cpuset(env, cpus):
    assert launch.granted_cpus(env) == cpus


def test_a_grant_without_cpu_bind_keeps_every_task_on_the_jobs_cpus(tmp_path, monkeypatch):
    """OCS 9.1.4 without systemd exports the binding but does not apply it: the launcher does."""
    cpus = _one_cpu_each_possible()
    grant(monkeypatch, [cpus[1]])
    out, _err = _run_tasks(tmp_path, None)
    assert [line.split("|")[:2] if "|" in line else line.split()[:2] for line in out] == [
        ["0", str(cpus[1])], ["1", str(cpus[1])]]
    assert all(len(line.split()) == 2 for line in out)  # no SLURM_CPU_BIND without --cpu-bind


def test_apply_grant_binds_this_process_to_the_grant(monkeypatch):
    cpus = _one_cpu_each_possible()
    grant(monkeypatch, [cpus[0]])
    before = os.sched_getaffinity(0)
    try:
        launch.apply_grant()
        assert os.sched_getaffinity(0) == {cpus[0]}
    finally:
        os.sched_setaffinity(0, before)
    monkeypatch.delenv("SGE_BINDING_INSTANCE")
    launch.apply_grant()
    assert os.sched_getaffinity(0) == before
