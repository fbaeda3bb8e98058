"""The allocation a step runs in: which Grid Engine job, which hosts with how many slots, and
whether srun runs inside it (found from srun's environment, its ancestors' ``/proc`` environments,
the allocation record a salloc holder or an earlier srun wrote, or ``qstat -g t``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ...store import state
from ...slurm.hostlist import this_host
from .. import jobenv

if TYPE_CHECKING:
    from ...slurm.request import SubmitRecord
    from ...store.records import Submitted

short_host = this_host  # (the name the steps modules know it by)


# ---------------------------------------------------------------------------------------------
# The allocation: which Grid Engine job, which hosts, and whether srun runs inside it


class Allocation:
    """A running Grid Engine job seen as a Slurm allocation.

    ``hosts`` is [(host, slots)] in PE_HOSTFILE order; ``task`` is Slurm's array index (None
    outside arrays), ``ge_task`` Grid Engine's SGE_TASK_ID; ``inside`` says srun is a descendant
    of the job on one of its hosts (so that host's tasks may be started directly); ``job_env``
    holds the SLURM_* variables the job's own processes saw, when they could be recovered.
    ``record`` is the job's submit record, typed: the ``Submitted`` srun read from the user's
    records, or the ``SubmitRecord`` the job srun made carries (None: none known)."""

    def __init__(self, job_id: int, hosts: list[tuple[str, int]], *, task: int | None = None,
                 ge_task: str = "undefined", record: Submitted | SubmitRecord | None = None, inside: bool = False,
                 job_env: dict[str, str] | None = None):
        self.job_id = job_id
        self.hosts = hosts
        self.task = task
        self.ge_task = ge_task
        self.record = record
        self.inside = inside
        self.job_env = job_env or {}

    @property
    def key(self) -> str:
        """The name of the job's step counter: ``<job>``, ``<job>_<index>`` for an array task."""
        return str(self.job_id) if self.task is None else f"{self.job_id}_{self.task}"

    @property
    def slots(self) -> int:
        return sum(s for _, s in self.hosts)


alloc_path = state.alloc_path
release_path = state.release_path


def save_allocation(state_dir: str, key: str, data: dict[str, Any]) -> bool:
    """Only a convenience for later sruns from outside the job: False when it cannot be written."""
    return state.write_allocation(state_dir, key, data)


ALLOC_ENV = ("CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK")


def allocation_env(env: Any) -> dict[str, str]:
    """What an allocation record's ``env`` may give srun: Slurm's variables (and the GPU
    visibility ones), as strings; nothing else (no LD_PRELOAD, PATH, ...)."""
    if not isinstance(env, dict):
        return {}
    out = {}
    for k, v in env.items():
        if not isinstance(k, str) or not isinstance(v, str):
            continue
        if k.startswith(("SLURM_", "SLURMD_")) or k in ALLOC_ENV:
            out[k] = v
    return out


def _hosts_of(value: Any) -> list[tuple[str, int]] | None:
    if not isinstance(value, list) or not value:
        return None
    out = []
    for item in value:
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)
                and isinstance(item[1], int) and not isinstance(item[1], bool) and item[1] > 0):
            return None
        out.append((item[0], item[1]))
    return out


def load_allocation(state_dir: str, key: str, owner: Any = None) -> dict[str, Any] | None:
    """The allocation record of ``key`` from the owner's (by default the caller's) private
    directory, checked: hosts a list of [host, slots], env only Slurm's variables."""
    data = state.read_allocation(state_dir, key, owner)
    if data is None:
        return None
    hosts = _hosts_of(data.get("hosts"))
    if hosts is None:
        return None
    data["hosts"] = hosts
    data["env"] = allocation_env(data.get("env"))
    return data


def _proc_environ(pid: int) -> dict[str, str] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return None
    env = {}
    for item in data.split(b"\0"):
        k, eq, v = item.partition(b"=")
        if eq:
            env[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return env


def parent_pid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            data = f.read()
        return int(data.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def ancestor_job_env(job_id: int, start: int | None = None, limit: int = 64) -> dict[str, str] | None:
    """The environment of the nearest ancestor process that runs in Grid Engine job ``job_id``.

    Tools such as snakemake strip the environment before calling srun, leaving only SLURM_JOB_ID.
    The processes above srun still carry what Grid Engine and the job wrapper gave the job (JOB_ID,
    PE_HOSTFILE, SGE_TASK_ID and the SLURM_* variables): ``/proc/<pid>/environ`` of one's own
    processes is readable, and finding the job there also proves srun runs inside it."""
    pid = start if start is not None else os.getppid()
    seen = 0
    while pid > 1 and seen < limit:
        env = _proc_environ(pid)
        if env is not None and env.get("JOB_ID") == str(job_id):
            return env
        pid = parent_pid(pid)
        seen += 1
    return None


hosts_from_ge_env = jobenv.pe_hosts


def find_allocation(state_dir: str, job_id: int, environ: Mapping[str, str], *,
                    record: Submitted | SubmitRecord | None = None,
                    granted: Callable[[int, str, int | None], list[tuple[str, int]]] | None = None) -> Allocation | None:
    """The allocation of job ``job_id`` as srun sees it from here, or None.

    In order: srun's own environment (inside the job: JOB_ID is the job); its ancestors'
    environments (inside the job, environment stripped); the allocation record a salloc holder or
    an earlier srun wrote; Grid Engine's view (``granted``: the backend's running_job_hosts, qstat -g t)."""
    this_host = short_host()
    idx = environ.get("SLURM_ARRAY_TASK_ID", "")
    task = int(idx) if idx.isdigit() else None
    array = (record.array if record is not None else None) or None
    ge = dict(environ) if environ.get("JOB_ID") == str(job_id) else ancestor_job_env(job_id)
    if ge is not None:
        ge_task = ge.get("SGE_TASK_ID", "undefined")
        if task is None and array and ge_task.isdigit() and int(ge_task) <= len(array):
            task = int(array[int(ge_task) - 1])
        job_env = {k: v for k, v in ge.items() if k.startswith(("SLURM_", "SLURMD_")) or k in ALLOC_ENV}
        alloc = Allocation(job_id, hosts_from_ge_env(ge, this_host), task=task, ge_task=ge_task, record=record,
                           inside=True, job_env=job_env)
        path = alloc_path(state_dir, alloc.key)
        if path is not None and not os.path.lexists(path):
            save_allocation(state_dir, alloc.key, {"job_id": job_id, "task": task, "ge_task": ge_task,
                                                   "hosts": alloc.hosts, "env": job_env})
        return alloc
    key = str(job_id) if task is None else f"{job_id}_{task}"
    data = load_allocation(state_dir, key)
    if data:
        ge_task = data.get("ge_task")
        ge_task = ge_task if isinstance(ge_task, str) and (ge_task.isascii() and ge_task.isdigit()) else "undefined"
        return Allocation(job_id, data["hosts"], task=task, ge_task=ge_task, record=record, inside=False,
                          job_env=data["env"])
    if granted is not None:
        ge_task = "undefined"
        if task is not None and array and task in array:
            ge_task = str(array.index(task) + 1)
        total = None
        if record:
            total = int(record.ntasks or 1) * int(record.cpus_per_task or 1)
        hosts = granted(job_id, ge_task, total)
        if hosts:
            return Allocation(job_id, hosts, task=task, ge_task=ge_task, record=record, inside=False)
    return None
