"""The environment a Slurm batch job sees, computed from the submission payload and what Grid
Engine tells the job at run time. Pure functions: the job wrapper, ``srun`` and
``slurm-shim explain`` all use them."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Mapping, Union

    from ..slurm.request import SubmitRecord
    from ..store.records import Submitted

    Record = Union[Mapping[str, Any], SubmitRecord, Submitted]
    """A submit record as batch_env reads it, by ``get`` (which each of these has): the job
    wrapper's payload, the typed record the job srun makes carries, or the one srun read."""

from ..slurm.jobids import NO_VAL  # noqa: F401  (Slurm's constant; jobenv.NO_VAL as before)
from ..slurm.patterns import MAX_PAD, expand, expand_pattern  # noqa: F401  (the file name patterns)

TASK_LAUNCH = 'SLURM_TASK_PID=$$; export SLURM_TASK_PID; exec "$0" "$@"'
"""The task trampoline of batch scripts and step tasks: a fixed sh program that sets SLURM_TASK_PID
to its own pid and execs the task in place. No user text is part of it; the command and its
arguments are plain argv."""


def tasks_per_node_str(counts: list[int]) -> str:
    """Slurm's compressed count list: [2, 2, 1] -> "2(x2),1"."""
    out: list[str] = []
    i = 0
    while i < len(counts):
        j = i
        while j + 1 < len(counts) and counts[j + 1] == counts[i]:
            j += 1
        n = j - i + 1
        out.append(f"{counts[i]}(x{n})" if n > 1 else str(counts[i]))
        i = j + 1
    return ",".join(out)


def read_pe_hostfile(text: str) -> list[tuple[str, int]]:
    """Grid Engine's PE_HOSTFILE lines ``host slots queue processors`` -> [(short host, slots)]."""
    hosts: list[tuple[str, int]] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            hosts.append((parts[0].split(".")[0], int(parts[1])))
    return hosts


def gpu_env(ids: list[int]) -> dict[str, str]:
    s = ",".join(str(i) for i in ids)
    return {
        "CUDA_VISIBLE_DEVICES": s,
        "GPU_DEVICE_ORDINAL": s,
        "ROCR_VISIBLE_DEVICES": s,
        "ZE_AFFINITY_MASK": s,
        "SLURM_JOB_GPUS": s,
        "SLURM_GPUS_ON_NODE": str(len(ids)),
    }


def batch_env(
    p: Record,
    *,
    job_id: int,
    task: int | None,
    hosts: list[tuple[str, int]],
    this_host: str,
    user: str,
    uid: int,
    gid: int,
    task_pid: int | None = None,
    gpu_ids: list[int] | None = None,
    start: float | None = None,
    release: Any = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """SLURM_* variables of the batch step. ``hosts`` is [(host, slots)] of the allocation;
    ``job_id`` is Grid Engine's job, ``task`` Slurm's array index (None outside an array).

    ``release`` (a releases.Release; None: the site's, releases.current) decides the variables
    that differ between Slurm releases (releases.py): 24.11's SLURM_JOB_START_TIME and
    SLURM_JOB_END_TIME (with ``start``, the job's start in epoch seconds: without it neither),
    SLURM_OOM_KILL_STEP, SLURM_TRES_PER_TASK, SLURM_JOB_LICENSES; 26.05's SLURM_JOB_EXCLUSIVE,
    SLURM_JOB_OVERSUBSCRIBE, SLURM_JOB_SLUID and the batch step's SLURM_STEP_ID=-5 (a step's own
    id replaces it, steps.plan.step_env); 22.05's SLURM_NODE_ALIASES; 24.11's MPI launcher
    variables (launcher_env: those of a launcher the job's own ``environ`` names are left out).

    An array task is a job of its own, as in Slurm: SLURM_JOB_ID and SLURM_JOBID are the task's
    id (``jobids.task_job_id``: ``t * 10**10 + job``, task 0 keeps ``job``), SLURM_ARRAY_JOB_ID the
    array's. SLURM_ARRAY_TASK_COUNT/_MIN/_MAX are the count, lowest and highest index, and
    SLURM_ARRAY_TASK_STEP what slurmctld's ``_create_job_array`` (src/slurmctld/job_mgr.c) sets:
    ``atoi`` of the ``--array`` text after its first ``:``, else 1 (``array_step`` in the request,
    absent when 1; comma lists and throttles do not change it)."""
    from ..slurm.hostlist import compress
    from ..slurm.jobids import task_job_id

    nodes = [h for h, _ in hosts] or [this_host]
    slots = {h: s for h, s in hosts}
    cpt = int(p.get("cpus_per_task") or 1)
    here = slots.get(this_host, int(p.get("ntasks", 1)) * cpt)
    cpus_per_node = [slots.get(h, here) for h in nodes]
    nodelist = compress(nodes)
    tpn = p.get("tasks_per_node") or [int(p.get("ntasks", 1))]
    if len(tpn) != len(nodes):
        per = max(1, sum(tpn) // max(1, len(nodes)))
        tpn = [per] * len(nodes)
    array = p.get("array")
    own_id = task_job_id(job_id, task) if array and task is not None else job_id
    env = {
        "ENVIRONMENT": "BATCH",
        "HOSTNAME": this_host,
        "SLURMD_NODENAME": this_host,
        "SLURM_CLUSTER_NAME": str(p.get("cluster", "cluster")),
        "SLURM_CPUS_ON_NODE": str(here),
        "SLURM_GTIDS": "0",
        "SLURM_JOBID": str(own_id),
        "SLURM_JOB_ID": str(own_id),
        "SLURM_JOB_CPUS_PER_NODE": tasks_per_node_str(cpus_per_node),
        "SLURM_JOB_GID": str(gid),
        "SLURM_JOB_NAME": str(p.get("name", "")),
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": str(len(nodes)),
        "SLURM_JOB_PARTITION": str(p.get("partition", "")),
        "SLURM_JOB_QOS": str(p.get("qos") or "normal"),
        "SLURM_JOB_UID": str(uid),
        "SLURM_JOB_USER": user,
        "SLURM_LOCALID": "0",
        "SLURM_NNODES": str(len(nodes)),
        "SLURM_NODEID": "0",
        "SLURM_NODELIST": nodelist,
        "SLURM_NODE_ALIASES": "(null)",
        "SLURM_PRIO_PROCESS": str(p.get("prio_process", 0)),
        "SLURM_PROCID": "0",
        "SLURM_SUBMIT_DIR": str(p.get("submit_dir", "")),
        "SLURM_SUBMIT_HOST": str(p.get("submit_host", "")),
        "SLURM_TASKS_PER_NODE": tasks_per_node_str(tpn),
        "SLURM_TOPOLOGY_ADDR": this_host,
        "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
    }
    _asked_env(env, p, cpt, task_pid, gpu_ids)
    if array and task is not None:
        _array_env(env, p, job_id, task, array)
    env.update(release_env(p, job_id=job_id, task=task, start=start, cpus_per_task=cpt))
    env.update(launcher_env(environ or {}))
    if release is None:
        from ..slurm import releases

        release = releases.current()
    return release.job_env(env)


def group_name(gid: Any) -> str:
    """SLURM_JOB_GROUP: the name of the group ``gid`` (the number where it has none)."""
    import grp

    try:
        return grp.getgrgid(int(gid)).gr_name
    except (KeyError, ValueError, OverflowError):
        return str(gid)


def _asked_env(env: dict[str, str], p: Record, cpt: int, task_pid: int | None,
               gpu_ids: list[int] | None) -> None:
    """The batch step's variables of what the job asked for (batch_env): only those given, as
    Slurm sets them (tasks, CPUs, memory, dependency, open mode, GPUs, distribution, hint)."""
    if task_pid is not None:
        env["SLURM_TASK_PID"] = str(task_pid)
    if p.get("account"):
        env["SLURM_JOB_ACCOUNT"] = str(p.get("account"))
    if p.get("ntasks_set"):
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(p.get("ntasks", 1))
    if p.get("cpus_per_task_set"):
        env["SLURM_CPUS_PER_TASK"] = str(cpt)
    if p.get("ntasks_per_node"):
        env["SLURM_NTASKS_PER_NODE"] = str(p.get("ntasks_per_node"))
    if p.get("mem_mb"):
        env["SLURM_MEM_PER_NODE"] = str(p.get("mem_mb"))
    elif p.get("mem_per_cpu_mb"):
        env["SLURM_MEM_PER_CPU"] = str(p.get("mem_per_cpu_mb"))
    elif p.get("mem_per_gpu_mb"):
        env["SLURM_MEM_PER_GPU"] = str(p.get("mem_per_gpu_mb"))
    elif p.get("default_mem_per_cpu"):
        env["SLURM_MEM_PER_CPU"] = str(p.get("default_mem_per_cpu"))
    if p.get("dependency"):
        env["SLURM_JOB_DEPENDENCY"] = str(p.get("dependency"))
    if p.get("open_mode"):
        env["SLURM_OPEN_MODE"] = "a" if str(p.get("open_mode")).startswith("a") else "t"
    if p.get("gpus_per_task"):
        gpt = p.get("gpus_per_task")
        env["SLURM_GPUS_PER_TASK"] = str(gpt[-1] if isinstance(gpt, (list, tuple)) else gpt)
    gpus = int(p.get("gpus") or 0)
    if gpus:
        env.update(gpu_env(list(gpu_ids) if gpu_ids is not None else list(range(gpus))))
    for key, var in (("gpus_opt", "SLURM_GPUS"), ("gpus_per_node_opt", "SLURM_GPUS_PER_NODE")):
        if p.get(key):
            env[var] = str(p.get(key))
    if p.get("distribution"):
        env["SLURM_DISTRIBUTION"] = str(p.get("distribution"))
    if p.get("hint"):
        env["SLURM_HINT"] = str(p.get("hint"))
        if p.get("hint") == "nomultithread":
            env["SLURM_THREADS_PER_CORE"] = "1"


def _array_env(env: dict[str, str], p: Record, job_id: int, task: int, array: list[int]) -> None:
    """An array task's SLURM_ARRAY_* variables (batch_env's docstring says how each is made)."""
    env["SLURM_ARRAY_JOB_ID"] = str(job_id)
    env["SLURM_ARRAY_TASK_ID"] = str(task)
    env["SLURM_ARRAY_TASK_COUNT"] = str(len(array))
    env["SLURM_ARRAY_TASK_MIN"] = str(min(array))
    env["SLURM_ARRAY_TASK_MAX"] = str(max(array))
    step = p.get("array_step")
    env["SLURM_ARRAY_TASK_STEP"] = str(step if isinstance(step, int) and not isinstance(step, bool) else 1)


def release_env(p: Record, *, job_id: int, task: int | None, start: float | None,
                cpus_per_task: int) -> dict[str, str]:
    """The values of the variables only some releases set (releases.VARYING_ENV), for every
    release: batch_env keeps those of the site's."""
    from ..slurm import releases

    env: dict[str, str] = {"SLURM_OOM_KILL_STEP": "0", "SLURM_STEP_ID": "-5", "SLURM_STEPID": "-5",
                           "SLURM_JOB_EXCLUSIVE": str((p.get("asked") or {}).get("exclusive") or "NO"),
                           "SLURM_JOB_OVERSUBSCRIBE": str((p.get("asked") or {}).get("oversubscribe") or "NO")}
    if start is not None:
        limit = p.get("time")
        limit = limit if isinstance(limit, int) and not isinstance(limit, bool) else None
        env["SLURM_JOB_START_TIME"] = str(int(start))
        env["SLURM_JOB_END_TIME"] = str(releases.end_time(int(start), limit))
    gpt = p.get("gpus_per_task")  # (type or None, count), as values.gpu_spec reads it
    if isinstance(gpt, (list, tuple)):
        gpt = f"{gpt[0]}:{gpt[-1]}" if len(gpt) > 1 and gpt[0] else str(gpt[-1])
    tres = releases.tres_per_task(cpus_per_task if p.get("cpus_per_task_set") else None, str(gpt) if gpt else None)
    if tres:
        env["SLURM_TRES_PER_TASK"] = tres
    if p.get("licenses"):
        env["SLURM_JOB_LICENSES"] = releases.licenses(str(p.get("licenses")))
    sub = p.get("sub")
    created = sub if isinstance(sub, (int, float)) and not isinstance(sub, bool) else start
    if created is not None:
        env["SLURM_JOB_SLUID"] = releases.sluid(str(p.get("cluster", "cluster")), int(created * 1000), job_id, task)
    return env


# The MPI launchers' variables 24.11 and 26.05 put in a job's environment (batch script, srun's
# own job, salloc), so that mpirun starts its daemons with ``srun --external-launcher``: MPICH's
# and Intel MPI's Hydra, Open MPI's plm/slurm (4.x) and PRRTE's (5.x). A group whose first variable
# the job's environment already has is left as the user set it, its other variable unset (as asked
# of 24.11.5 and 26.05.5: HYDRA_BOOTSTRAP=ssh kept, no HYDRA_LAUNCHER_EXTRA_ARGS;
# fixtures/slurm-*/oracle-rest.txt M1)
LAUNCHERS = (
    (("HYDRA_BOOTSTRAP", "slurm"), ("HYDRA_LAUNCHER_EXTRA_ARGS", "--external-launcher")),
    (("I_MPI_HYDRA_BOOTSTRAP", "slurm"), ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "--external-launcher")),
    (("OMPI_MCA_plm_slurm_args", "--external-launcher"),),
    (("PRTE_MCA_plm_slurm_args", "--external-launcher"),),
)
LAUNCHER_VARS = tuple(name for group in LAUNCHERS for name, _ in group)


def launcher_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The MPI launcher variables (LAUNCHERS) of a job whose own environment is ``environ``: each
    group whose first variable ``environ`` lacks (the release decides whether any is set:
    releases.Release.job_env)."""
    return {name: value for group in LAUNCHERS if group[0][0] not in environ for name, value in group}


GE_PREFIXES = ("SGE_", "PE", "JOB_")
GE_NAMES = ("NSLOTS", "NHOSTS", "NQUEUES", "QUEUE", "RESTARTED", "REQUEST", "ARC", "TMP")


def keep_ge(env: dict[str, str], ge_environ: Mapping[str, str], here: tuple[str, ...] = ("TMPDIR",)) -> None:
    """Grid Engine's own variables of the job on this host (JOB_ID, SGE_TASK_ID, PE_HOSTFILE,
    NSLOTS, ...) stay visible where the environment does not set them: an srun inside the job
    needs them to find it (``qrsh -inherit``). The variables in ``here`` are always this host's
    (TMPDIR, Grid Engine's per-job directory, ``/tmp`` without one; a step's host launcher adds
    TMP, since its environment was made on another host)."""
    for k, v in ge_environ.items():
        if k.startswith(GE_PREFIXES) or k in GE_NAMES:
            env.setdefault(k, v)
    for k in here:
        if k in ge_environ or k == "TMPDIR":
            env[k] = ge_environ.get(k, "/tmp")


def pe_hosts(ge_environ: Mapping[str, str], this_host: str) -> list[tuple[str, int]]:
    """The job's hosts and slots from Grid Engine's PE_HOSTFILE (``localhost`` read as this host),
    else this host with NSLOTS slots (1 when NSLOTS is missing or not a number)."""
    path = ge_environ.get("PE_HOSTFILE")
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                hosts = read_pe_hostfile(f.read())
        except OSError:
            hosts = []
        if hosts:
            return [(this_host if h == "localhost" else h, s) for h, s in hosts]
    try:
        slots = int(ge_environ.get("NSLOTS", "1"))
    except ValueError:
        slots = 1
    return [(this_host, slots)]
