"""CPU binding on the live Open Cluster Scheduler 9.1 cell: the mapped Slurm options become OCS's
binding request (-btype slot -bunit C|T -bamount 1, capability "btype"), the job runs on the CPUs
OCS granted (qstat -j's exec_binding_list; the job's own /proc/self/status Cpus_allowed_list and
SGE_BINDING_*), and srun binds each task to its share with Slurm's SLURM_CPU_BIND* variables.

OCS only (SGE 8.1.9 has no -btype: there the options keep their warning, tests/unit/test_binding.py).
The test host has 2 cores of 1 thread (m_topology SCC): every request stays within them. Every wait
is a bounded poll on Grid Engine's state or on the job's own files.
"""

from __future__ import annotations

import os
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import run, wait_until

pytestmark = [pytest.mark.gridengine, pytest.mark.ocs]

REPORT = ('echo "$SLURM_PROCID|$(grep Cpus_allowed_list /proc/self/status | cut -f2)|'
          '${SGE_BINDING_INSTANCE-unset}|${SLURM_CPU_BIND-unset}|${SLURM_CPU_BIND_TYPE-unset}|'
          '${SLURM_CPU_BIND_LIST-unset}|${SLURM_CPU_BIND_VERBOSE-unset}"')


def cpus_of(text: str) -> set[int]:
    """A Cpus_allowed_list (0-1,4) as a set."""
    out: set[int] = set()
    for part in text.split(","):
        a, _, b = part.partition("-")
        out |= set(range(int(a), int(b or a) + 1))
    return out


def host_cpus() -> set[int]:
    return set(range(os.cpu_count() or 1))


def granted_cores(job: str) -> list[int] | None:
    """The cores (their positions among the host's cores) OCS bound the running job to: the
    lower-case c's of the topology tree qstat -j -xml gives for the job's granted queue
    (JG_binding_to_use: ``(N(S(X(y(c(t)))(Y(C(T))))))``, the first core bound); None until then."""
    cp = run("qstat", "-j", job, "-xml")
    if cp.returncode != 0:
        return None
    for el in ET.fromstring(cp.stdout).iter("JG_binding_to_use"):
        for name in el.iter("ST_name"):
            cores = [ch for ch in (name.text or "") if ch in "Cc"]
            bound = [i for i, ch in enumerate(cores) if ch == "c"]
            if bound:
                return bound
    return None


def job_dir(workdir) -> Path:
    d = Path(workdir) / f"b{uuid.uuid4().hex[:8]}"
    d.mkdir(mode=0o777)
    return d


def test_sbatch_nomultithread_runs_on_the_core_ocs_granted(workdir):
    d = job_dir(workdir)
    go = d / "go"
    (d / "job.sh").write_text(
        "#!/bin/sh\n" + REPORT.replace("$SLURM_PROCID", "batch") + "\n"
        'echo "hint=$SLURM_HINT tpc=$SLURM_THREADS_PER_CORE cpuset=$SGE_BINDING_CPUSET"\n'
        f"i=0; while [ ! -e {go} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n")
    cp = run("sbatch", "--parsable", "--hint=nomultithread", "-o", str(d / "out.txt"), str(d / "job.sh"), cwd=d)
    assert cp.returncode == 0, cp.stderr
    assert "--hint" not in cp.stderr  # mapped: no "has no effect" warning
    job = cp.stdout.strip().split(";")[0]
    try:
        cores = wait_until(lambda: granted_cores(job), 60, f"job {job}'s exec binding")
        lines = wait_until(lambda: (d / "out.txt").exists() and len((d / "out.txt").read_text().splitlines()) >= 2
                           and (d / "out.txt").read_text().splitlines(), 60, f"job {job}'s report")
    finally:
        go.touch()
    _, allowed, instance, bind, *_ = lines[0].split("|")
    assert len(cores) == 1 and instance == "set" and bind == "unset"  # a batch step: no SLURM_CPU_BIND
    assert cpus_of(allowed) == set(cores)  # one thread per core here: the core's index is its CPU
    assert lines[1].startswith("hint=nomultithread tpc=1 cpuset=0x")


def test_srun_own_job_binds_each_task_to_its_core():
    cp = run("srun", "-n", "2", "--cpu-bind=cores", "sh", "-c", REPORT, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert "--cpu-bind" not in cp.stderr
    rows = sorted(line.split("|") for line in cp.stdout.splitlines())
    assert [r[0] for r in rows] == ["0", "1"]
    task_sets = [cpus_of(r[1]) for r in rows]
    assert all(len(s) == 1 for s in task_sets) and task_sets[0] != task_sets[1]
    masks = ",".join(f"0x{1 << min(s):X}" for s in task_sets)
    for r in rows:
        assert r[2:] == ["set", f"quiet,cores,mask_cpu:{masks}", "cores,mask_cpu:", masks, "quiet"]


def test_srun_verbose_prints_slurmstepds_line():
    cp = run("srun", "--cpu-bind=verbose,threads", "sh", "-c", REPORT, timeout=120)
    assert cp.returncode == 0, cp.stderr
    row = cp.stdout.strip().split("|")
    cpu = min(cpus_of(row[1]))
    assert len(cpus_of(row[1])) == 1 and row[3] == f"verbose,threads,mask_cpu:0x{1 << cpu:X}"
    assert [line for line in cp.stderr.splitlines() if line.startswith("cpu-bind-threads=MASK - ")
            and ", task  0  0 [" in line and line.endswith(f"]: mask 0x{1 << cpu:x} set")]


def test_srun_cpu_bind_none_runs_unbound():
    cp = run("srun", "--cpu-bind=none", "sh", "-c", REPORT, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert "--cpu-bind" not in cp.stderr
    row = cp.stdout.strip().split("|")
    assert cpus_of(row[1]) == host_cpus() and row[3] == "unset"
    cp = run("srun", "--cpu-bind=none", "sh", "-c", 'echo "$SGE_BINDING_CPUSET $SGE_BINDING_TOPOLOGY"', timeout=120)
    assert cp.returncode == 0 and cp.stdout.split() == ["0x0", "NONE"], cp.stdout + cp.stderr  # OCS: no binding


def test_steps_of_a_bound_batch_job_share_its_cores_task_by_task(workdir):
    d = job_dir(workdir)
    (d / "job.sh").write_text("#!/bin/sh\n" + REPORT.replace("$SLURM_PROCID", "batch") + "\n"
                              f"srun --cpu-bind=threads sh -c '{REPORT}'\n")
    cp = run("sbatch", "--parsable", "-n", "2", "--hint=nomultithread", "-o", str(d / "out.txt"),
             str(d / "job.sh"), cwd=d)
    assert cp.returncode == 0, cp.stderr
    job = cp.stdout.strip().split(";")[0]
    lines = wait_until(lambda: (d / "out.txt").exists() and len((d / "out.txt").read_text().splitlines()) >= 3
                       and (d / "out.txt").read_text().splitlines(), 90, f"job {job}'s report")
    rows = {r[0]: r for r in (line.split("|") for line in lines if "|" in line)}
    assert cpus_of(rows["batch"][1]) == host_cpus()  # both cores, the job's own
    t0, t1 = cpus_of(rows["0"][1]), cpus_of(rows["1"][1])
    assert len(t0) == len(t1) == 1 and t0 | t1 == host_cpus()
    assert rows["0"][3].startswith("quiet,threads,mask_cpu:") and "--cpu-bind" not in "".join(lines)
