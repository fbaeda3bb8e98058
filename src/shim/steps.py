"""Job steps: how srun starts tasks inside an allocation, on Grid Engine.

Slurm runs a step by asking one slurmstepd per node to start that node's tasks. Here:

* srun plans the step: which hosts of the allocation (Grid Engine's PE_HOSTFILE) get which task
  ranks, by Slurm's block rule, and the environment every task gets (``SLURM_STEP_*``,
  ``SLURM_PROCID``, ...);
* the tasks of the host srun itself runs on, when srun runs inside the job (an sbatch script, or
  a job made by srun), are started by srun directly: no Grid Engine round trip;
* every other host gets one ``qrsh -inherit <host>`` that runs this module's host launcher
  (``remote_main``) there, which starts that host's tasks. ``qrsh -inherit`` makes them part of
  the job: Grid Engine accounts for them and kills them with it. It needs the job's id in JOB_ID
  and SGE_TASK_ID, and a parallel environment with ``control_slaves TRUE``; it works from any
  host (that is how srun inside salloc, which runs outside the job, reaches the allocation).

The host launcher (``HostLaunch``) is the slurmstepd part: labels (``-l``), output files with
their patterns, stdin to every task, SLURM_TASK_PID, exec errors worded as slurmstepd's, signal
forwarding, exit statuses. Step ids count up per job in the user's private ``steps/<job>`` (a
counter file under an exclusive lock); each step leaves ``steps/<job>.<step>.json`` there. What
srun hands to a launcher on another host (the step's environment included) travels in a 0600 file
of the user's private ``srun/`` directory, never on a command line (``/proc/*/cmdline`` is
world-readable); the launcher reads it, checks it is its own, and removes it.

Imports only the standard library and light shim modules (it also runs on the far side of qrsh).
"""

from __future__ import annotations

import errno
import fcntl
import os
import queue
import re
import shlex
import shutil
import signal
import socket
import stat
import sys
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import jobenv, proc, state

NO_VAL = 4294967294  # Slurm's %a outside an array
KILL_WAIT = 30  # Slurm's default KillWait: seconds between SIGTERM and SIGKILL
TASK_LAUNCH = 'SLURM_TASK_PID=$$; export SLURM_TASK_PID; exec "$0" "$@"'
"""The task trampoline: a fixed sh program that sets SLURM_TASK_PID to its own pid and execs the
task in place. No user text is part of it; the command and its arguments are plain argv."""
FORWARDED = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGCONT)
"""The signals srun passes on to its tasks, as Slurm's srun does."""
GE_TASK_VARS = ("JOB_ID", "SGE_TASK_ID", "PE_HOSTFILE", "NSLOTS", "PE")


class StepError(Exception):
    """The step cannot be created (Slurm: ``Unable to create step for job N: <reason>``)."""


def short_host() -> str:
    return os.uname().nodename.split(".")[0]


# ---------------------------------------------------------------------------------------------
# The allocation: which Grid Engine job, which hosts, and whether srun runs inside it


class Allocation:
    """A running Grid Engine job seen as a Slurm allocation.

    ``hosts`` is [(host, slots)] in PE_HOSTFILE order; ``task`` is Slurm's array index (None
    outside arrays), ``ge_task`` Grid Engine's SGE_TASK_ID; ``inside`` says srun is a descendant
    of the job on one of its hosts (so that host's tasks may be started directly); ``job_env``
    holds the SLURM_* variables the job's own processes saw, when they could be recovered."""

    def __init__(self, job_id: int, hosts: list[tuple[str, int]], *, task: int | None = None,
                 ge_task: str = "undefined", record: dict | None = None, inside: bool = False,
                 job_env: dict[str, str] | None = None):
        self.job_id = job_id
        self.hosts = hosts
        self.task = task
        self.ge_task = ge_task
        self.record = record or {}
        self.inside = inside
        self.job_env = job_env or {}

    @property
    def key(self) -> str:
        """The name of the job's step counter: ``<job>``, ``<job>_<index>`` for an array task."""
        return str(self.job_id) if self.task is None else f"{self.job_id}_{self.task}"

    @property
    def slots(self) -> int:
        return sum(s for _, s in self.hosts)


def _own_path(state_dir: str, sub: str, name: str) -> str | None:
    return state.own_path(state_dir, sub, name)


def alloc_name(key: str) -> str:
    return f"{key}.alloc.json"


def alloc_path(state_dir: str, key: str) -> str | None:
    """The calling user's allocation record of ``key`` (in the private ``steps/``), or None when
    the state directory offers the user no private place."""
    return _own_path(state_dir, "steps", alloc_name(key))


def release_path(state_dir: str, key: str) -> str | None:
    return _own_path(state_dir, "steps", f"{key}.release")


def save_allocation(state_dir: str, key: str, data: dict[str, Any]) -> bool:
    """Only a convenience for later sruns from outside the job: False when it cannot be written."""
    return state.write_own(state_dir, "steps", alloc_name(key), data)


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
    data = state.read_from(state_dir, owner, "steps", alloc_name(key))
    if data is None:
        return None
    hosts = _hosts_of(data.get("hosts"))
    if hosts is None:
        return None
    data["hosts"] = hosts
    data["env"] = allocation_env(data.get("env"))
    return data


def read_hostfile(path: str | None) -> list[tuple[str, int]] | None:
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            hosts = jobenv.read_pe_hostfile(f.read())
    except OSError:
        return None
    return hosts or None


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


def _parent(pid: int) -> int:
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
        pid = _parent(pid)
        seen += 1
    return None


def hosts_from_ge_env(env: Mapping[str, str], this_host: str) -> list[tuple[str, int]]:
    hosts = read_hostfile(env.get("PE_HOSTFILE"))
    if hosts:
        return [(this_host if h == "localhost" else h, s) for h, s in hosts]
    try:
        slots = int(env.get("NSLOTS", "1"))
    except ValueError:
        slots = 1
    return [(this_host, slots)]


def hosts_from_qstat(xml: str, job_id: int, ge_task: str, total: int | None) -> list[tuple[str, int]]:
    """Hosts and slots of a running job from ``qstat -g t -s r -u '*' -xml``: one line per slot
    (MASTER and SLAVE); a parallel environment with job_is_first_task FALSE adds a MASTER line
    that holds no slot, which the job's known slot count (``total``) tells apart."""
    import xml.etree.ElementTree as ET

    counts: dict[str, int] = {}
    master = None
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return []
    for jl in root.iter("job_list"):
        if (jl.findtext("JB_job_number") or "").strip() != str(job_id):
            continue
        tasks = (jl.findtext("tasks") or "").strip()
        if ge_task.isdigit() and tasks and tasks != ge_task:
            continue
        host = (jl.findtext("queue_name") or "").rpartition("@")[2].split(".")[0]
        if not host:
            continue
        counts[host] = counts.get(host, 0) + 1
        if (jl.findtext("master") or "").strip() == "MASTER" and master is None:
            master = host
    if total is not None and master is not None and sum(counts.values()) == total + 1:
        counts[master] -= 1
        if counts[master] == 0:
            del counts[master]
    order = [master] if master in counts else []
    order += [h for h in counts if h != master]
    return [(h, counts[h]) for h in order]


def find_allocation(state_dir: str, job_id: int, environ: Mapping[str, str], *,
                    record: dict | None = None, qstat: Callable[[], str] | None = None) -> Allocation | None:
    """The allocation of job ``job_id`` as srun sees it from here, or None.

    In order: srun's own environment (inside the job: JOB_ID is the job); its ancestors'
    environments (inside the job, environment stripped); the allocation record a salloc holder or
    an earlier srun wrote; Grid Engine's view (``qstat -g t``)."""
    this_host = short_host()
    idx = environ.get("SLURM_ARRAY_TASK_ID", "")
    task = int(idx) if idx.isdigit() else None
    array = (record or {}).get("array") or None
    ge = dict(environ) if environ.get("JOB_ID") == str(job_id) else ancestor_job_env(job_id)
    if ge is not None:
        ge_task = ge.get("SGE_TASK_ID", "undefined")
        if task is None and array and ge_task.isdigit() and int(ge_task) <= len(array):
            task = int(array[int(ge_task) - 1])
        job_env = {k: v for k, v in ge.items() if k.startswith(("SLURM_", "SLURMD_")) or k in (
            "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK")}
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
    if qstat is not None:
        ge_task = "undefined"
        if task is not None and array and task in array:
            ge_task = str(array.index(task) + 1)
        total = None
        if record:
            total = int(record.get("ntasks") or 1) * int(record.get("cpus_per_task") or 1)
        hosts = hosts_from_qstat(qstat(), job_id, ge_task, total)
        if hosts:
            return Allocation(job_id, hosts, task=task, ge_task=ge_task, record=record, inside=False)
    return None


# ---------------------------------------------------------------------------------------------
# Step ids


STEP_LOCK_WAIT = 10.0  # seconds srun waits for the step counter before it says so


def next_step_id(state_dir: str, key: str) -> int:
    """The next step id of a job: 0, 1, 2, ... A counter file in the user's private ``steps/``
    under an exclusive lock, so that concurrent sruns of one job (``srun a & srun b &``) get
    distinct ids. The file must be the user's own regular file, and the lock is waited for a
    bounded time: OSError when either fails (srun then warns and carries on)."""
    d = state.own_dir(state_dir, "steps")
    if d is None:
        raise OSError(errno.EACCES, "no private directory in the state directory", os.path.join(state_dir, "users"))
    path = os.path.join(d, key)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise OSError(errno.EPERM, "step counter is not the user's own file", path)
        deadline = time.monotonic() + STEP_LOCK_WAIT
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise OSError(errno.EWOULDBLOCK, "step counter locked too long", path) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        raw = os.read(fd, 64).strip()
        n = int(raw) if raw.isascii() and raw.isdigit() else 0
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, str(n + 1).encode())
        return n
    finally:
        os.close(fd)  # closing drops the lock


def step_record_name(key: str, step_id: int) -> str:
    return f"{key}.{int(step_id)}.json"


def record_step(state_dir: str, key: str, step_id: int, data: dict[str, Any]) -> bool:
    """The step's record (the user's private ``steps/``): name, tasks, nodes, start; at the end,
    its state and exit code."""
    return state.write_own(state_dir, "steps", step_record_name(key, step_id), data)


def load_step(state_dir: str, key: str, step_id: int) -> dict[str, Any] | None:
    return state.read_from(state_dir, None, "steps", step_record_name(key, step_id))


# ---------------------------------------------------------------------------------------------
# Layout: which host runs which task ranks


def layout(hosts: Sequence[tuple[str, int]], ntasks: int, cpus_per_task: int, nnodes: int,
           ntasks_per_node: int | None = None, relative: int = 0) -> list[tuple[str, int, list[int]]]:
    """[(host, slots, [task ranks])] for a step, by Slurm's block distribution: task counts go
    round the nodes one at a time while a node has CPUs left (so -n4 on two nodes is 2+2), then
    ranks are numbered node by node (0,1 on the first node, 2,3 on the second)."""
    usable = list(hosts[relative:])
    if relative >= len(hosts) or nnodes > len(usable):
        raise StepError("Requested node configuration is not available")
    use = usable[:nnodes]
    if ntasks * cpus_per_task > sum(s for _, s in use):
        raise StepError("More processors requested than permitted")
    cap = [s // cpus_per_task for _, s in use]
    if ntasks_per_node:
        cap = [min(c, ntasks_per_node) for c in cap]
    counts = [0] * len(use)
    assigned = 0
    over = False
    j = 0
    while assigned < ntasks:
        space = False
        for i in range(len(use)):
            if assigned >= ntasks:
                break
            if j < cap[i] or over:
                counts[i] += 1
                assigned += 1
                if j + 1 < cap[i]:
                    space = True
        if not space:
            over = True
        j += 1
    out: list[tuple[str, int, list[int]]] = []
    rank = 0
    for (host, slots), c in zip(use, counts):
        if c:
            out.append((host, slots, list(range(rank, rank + c))))
            rank += c
    return out


def ranges(ids: Iterable[int]) -> str:
    """Task ids as Slurm lists them: 0-1,3."""
    ids = sorted(set(ids))
    out: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


# ---------------------------------------------------------------------------------------------
# Environment


def launch_address() -> str:
    try:
        return socket.gethostbyname(os.uname().nodename)
    except OSError:
        return "127.0.0.1"


def step_env(base: Mapping[str, str], *, job_id: int, step_id: int, plan: list[tuple[str, int, list[int]]],
             cpus_per_task: int | None, in_allocation: bool, distribution: str | None = None,
             umask: int = 0o022, debug: int = 3, port: int | None = None, address: str | None = None,
             gpu_ids: str | None = None) -> dict[str, str]:
    """What every task of the step sees (before its host's and its own variables): the job's
    environment plus srun's step variables, as Slurm's srun sets them."""
    from .hostlist import compress

    nodes = [h for h, _, _ in plan]
    counts = [len(t) for _, _, t in plan]
    ntasks = sum(counts)
    nodelist = compress(nodes, sort=False)
    tpn = jobenv.tasks_per_node_str(counts)
    port = port if port is not None else 32768 + (os.getpid() * 7 + step_id) % 28000
    address = address or launch_address()
    env = dict(base)
    env.update({
        "SLURM_JOB_ID": str(job_id),
        "SLURM_JOBID": str(job_id),
        "SLURM_STEP_ID": str(step_id),
        "SLURM_STEPID": str(step_id),
        "SLURM_STEP_NODELIST": nodelist,
        "SLURM_STEP_NUM_NODES": str(len(nodes)),
        "SLURM_STEP_NUM_TASKS": str(ntasks),
        "SLURM_STEP_TASKS_PER_NODE": tpn,
        "SLURM_STEP_LAUNCHER_PORT": str(port),
        "SLURM_SRUN_COMM_HOST": address,
        "SLURM_SRUN_COMM_PORT": str(port),
        "SLURM_LAUNCH_NODE_IPADDR": address,
        "SLURM_UMASK": f"{umask:04o}",
        "SRUN_DEBUG": str(debug),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_NPROCS": str(ntasks),
        "SLURM_TASKS_PER_NODE": tpn,
        "SLURM_NNODES": str(len(nodes)),
        "SLURM_NODELIST": nodelist,
    })
    if cpus_per_task is not None:
        env["SLURM_CPUS_PER_TASK"] = str(cpus_per_task)
    if in_allocation:
        env["SLURM_DISTRIBUTION"] = distribution or ("block" if ntasks > len(nodes) else "cyclic")
        if "SLURM_JOB_CPUS_PER_NODE" in env:
            env["SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0"] = env["SLURM_JOB_CPUS_PER_NODE"]
    elif distribution:
        env["SLURM_DISTRIBUTION"] = distribution
    gpus = gpu_ids if gpu_ids is not None else env.get("SLURM_JOB_GPUS")
    if gpus:
        env["SLURM_STEP_GPUS"] = gpus
    return env


def host_env(common: Mapping[str, str], host: str, node_index: int, slots: int, tids: Sequence[int]) -> dict[str, str]:
    env = dict(common)
    env.update({
        "SLURMD_NODENAME": host,
        "SLURM_TOPOLOGY_ADDR": host,
        "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
        "SLURM_NODEID": str(node_index),
        "SLURM_GTIDS": ",".join(str(t) for t in tids),
        "SLURM_CPUS_ON_NODE": str(slots),
    })
    return env


def task_env(host: Mapping[str, str], tid: int, local_id: int) -> dict[str, str]:
    env = dict(host)
    env["SLURM_PROCID"] = str(tid)
    env["SLURM_LOCALID"] = str(local_id)
    return env


def export_env(environ: Mapping[str, str], mode: Mapping[str, Any] | None) -> dict[str, str]:
    """srun --export: ALL (default) passes srun's environment; NONE passes only the SLURM_*
    variables; a list passes SLURM_* and the listed ones (``ALL,X=1`` adds to everything)."""
    mode = mode or {"all": True, "vars": {}}
    if mode.get("all"):
        env = dict(environ)
    else:
        env = {k: v for k, v in environ.items() if k.startswith(("SLURM_", "SLURMD_", "SRUN_"))}
    env.update(mode.get("vars") or {})
    return env


# ---------------------------------------------------------------------------------------------
# Output file patterns


def expand_io(pattern: str, vals: Mapping[str, Any], *, tid: int = 0, node: int = 0, host: str = "") -> str:
    """srun's file name patterns: %j %J %s %t %n %N %A %a %x %u %%, with zero padding (%3t)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch != "%" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        start = i
        j = i + 1
        while j < n and pattern[j].isdigit():
            j += 1
        if j >= n:
            out.append(pattern[i:])
            break
        width = int(pattern[i + 1:j]) if j > i + 1 else 0
        key = pattern[j]
        i = j + 1
        if key == "%":
            out.append("%")
            continue
        value: Any
        if key == "j":
            value = vals.get("j")
        elif key == "J":
            value = f"{vals.get('j')}.{vals.get('s')}"
        elif key == "s":
            value = vals.get("s")
        elif key == "t":
            value = tid
        elif key == "n":
            value = node
        elif key == "N":
            value = host
        elif key == "A":
            value = vals.get("A", vals.get("j"))
        elif key == "a":
            value = vals.get("a", NO_VAL)
        elif key == "x":
            value = vals.get("x", "")
        elif key == "u":
            value = vals.get("u", "")
        else:
            out.append(pattern[start:i])  # not a pattern letter: kept as written
            continue
        text = str(value)
        out.append(text.zfill(width) if width and text.isdigit() else text)
    return "".join(out)


def varies_per_task(pattern: str | None) -> bool:
    """Whether a pattern names a different file per task or node (%t, %n, %N)."""
    if not pattern:
        return False
    i = 0
    while i < len(pattern) - 1:
        if pattern[i] == "%":
            j = i + 1
            while j < len(pattern) and pattern[j].isdigit():
                j += 1
            if j < len(pattern):
                if pattern[j] in "tnN":
                    return True
                if pattern[j] == "%":
                    i = j + 1
                    continue
            i = j
        else:
            i += 1
    return False


def io_mode(value: str | None) -> tuple[str, Any]:
    """srun's --output/--error/--input values: ("inherit", None), ("none", None), ("task", N),
    ("all", None) or ("file", pattern)."""
    if value is None or value == "":
        return "inherit", None
    low = value.lower()
    if low == "none":
        return "none", None
    if low == "all":
        return "inherit", None
    if value.isdigit():
        return "task", int(value)
    return "file", value


# ---------------------------------------------------------------------------------------------
# Exit statuses and srun's messages


def outcome(code: int | None, sig: int | None) -> int:
    """A task's contribution to srun's exit code: its exit code, or 128+signal."""
    return 128 + sig if sig else (code or 0)


def global_rc(results: Iterable[tuple[int, int]]) -> int:
    """srun's exit code from its tasks' (exit code, signal) pairs, by Slurm's rule: a task killed
    by a signal outweighs every exit code (the highest signal wins, as 128+signal); otherwise the
    highest exit code."""
    results = list(results)
    sigs = [s for _, s in results if s]
    if sigs:
        return 128 + max(sigs)
    return max((c for c, _ in results), default=0)


def from_rc(rc: int) -> tuple[int, int]:
    """A launcher's exit code back as (exit code, signal): above 128 reads as 128+signal."""
    return (0, rc - 128) if 128 < rc < 160 else (rc, 0)


def _signame(sig: int) -> str:
    try:
        return signal.strsignal(sig) or f"Signal {sig}"
    except ValueError:
        return f"Signal {sig}"


def summary_lines(host: str, statuses: Mapping[int, tuple[int, int]], prog: str = "srun",
                  signals: bool = True) -> list[str]:
    """srun's lines for tasks that failed on one host, one line per distinct outcome:
    ``srun: error: vm: tasks 0-1: Exited with exit code 1``, ``srun: error: vm: task 0: Killed``.
    Tasks killed after srun itself was interrupted are not reported (``signals=False``), as in
    Slurm, where those lines are verbose-only."""
    groups: dict[tuple[int, int], list[int]] = {}
    for tid in sorted(statuses):
        code, sig = statuses[tid]
        if (sig and signals) or (code and not sig):
            groups.setdefault((code, sig), []).append(tid)
    lines = []
    for (code, sig), tids in groups.items():
        what = _signame(sig) if sig else f"Exited with exit code {code}"
        word = "task" if len(tids) == 1 else "tasks"
        lines.append(f"{prog}: error: {host}: {word} {ranges(tids)}: {what}")
    return lines


# ---------------------------------------------------------------------------------------------
# Moving bytes: stdin to every task, task output with labels


def _write_all(fd: int, data: bytes) -> bool:
    try:
        while data:
            n = os.write(fd, data)
            data = data[n:]
        return True
    except OSError:
        return False


class Broadcast(threading.Thread):
    """srun's default stdin: every byte read goes to every task (and every remote launcher);
    end of input closes them all."""

    def __init__(self, src: int, sinks: list[int]):
        super().__init__(daemon=True)
        self.src = src
        self.sinks = list(sinks)

    def run(self) -> None:
        try:
            while self.sinks:
                try:
                    data = os.read(self.src, 65536)
                except OSError:
                    break
                if not data:
                    break
                self.sinks = [fd for fd in self.sinks if _write_all(fd, data) or _close(fd)]
        finally:
            for fd in self.sinks:
                _close(fd)


def _close(fd: int) -> bool:
    try:
        os.close(fd)
    except OSError:
        pass
    return False


class LabelPump(threading.Thread):
    """Copies one task stream to its destination, each line prefixed with the task's rank
    (``-l``). Lines go out whole, so that lines of different tasks never mix; with -u, bytes go
    out as they come (a label still starts each line)."""

    def __init__(self, src: int, dst: int, label: bytes, unbuffered: bool = False):
        super().__init__(daemon=True)
        self.src, self.dst, self.label, self.unbuffered = src, dst, label, unbuffered

    def run(self) -> None:
        pending = b""
        at_start = True
        try:
            while True:
                try:
                    data = os.read(self.src, 65536)
                except OSError:
                    data = b""
                if not data:
                    break
                if self.unbuffered:
                    out = bytearray()
                    for line in data.splitlines(keepends=True):
                        if at_start:
                            out += self.label
                        out += line
                        at_start = line.endswith(b"\n")
                    _write_all(self.dst, bytes(out))
                    continue
                pending += data
                if b"\n" in pending:
                    head, _, pending = pending.rpartition(b"\n")
                    _write_all(self.dst, b"".join(self.label + ln + b"\n" for ln in head.split(b"\n")))
            if pending:
                _write_all(self.dst, self.label + pending)
        finally:
            _close(self.src)


# ---------------------------------------------------------------------------------------------
# The host launcher: this host's tasks of one step


def resolve(cmd: str, path: str | None, cwd: str) -> int:
    """0 if argv[0] can be executed, else the errno execve would give (ENOENT, EACCES)."""
    if "/" in cmd:
        full = cmd if os.path.isabs(cmd) else os.path.join(cwd, cmd)
        if not os.path.exists(full):
            return errno.ENOENT
        if os.path.isdir(full) or not os.access(full, os.X_OK):
            return errno.EACCES
        return 0
    return 0 if shutil.which(cmd, path=path if path is not None else os.defpath) else errno.ENOENT


def parse_multi_prog(text: str, ntasks: int) -> dict[int, list[str]]:
    """--multi-prog's file: lines ``ranks program args``; ranks ``*``, ``N``, ``N-M`` or lists;
    ``%t`` is the task's rank and ``%o`` its offset within the line's range."""
    out: dict[int, list[str]] = {}
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if len(words) < 2:
            continue
        spec, argv = words[0], words[1:]
        if spec == "*":
            ids = [t for t in range(ntasks) if t not in out]
        else:
            ids = []
            for part in spec.split(","):
                lo, _, hi = part.partition("-")
                ids += list(range(int(lo), int(hi or lo) + 1))
        for off, t in enumerate(ids):
            if t not in out and t < ntasks:
                out[t] = [w.replace("%t", str(t)).replace("%o", str(off)) for w in argv]
    return out


class HostLaunch:
    """The tasks of one step on this host (slurmstepd's part).

    ``spec`` keys: argv (or argv_per_task), cwd, env (the host's environment), tasks (ranks),
    ntasks, host, node (index in the step), label, width, unbuffered, stdout/stderr/stdin (io_mode
    pairs), append, shared (file names written by several hosts: opened for append), vals
    (pattern values), own_group (each task in its own process group; srun forwards signals),
    pty (task 0 keeps this process's terminal), emulate_pty (task 0 gets a new pseudo-terminal,
    relayed to this process's stdin/stdout), winsize, umask."""

    def __init__(self, spec: Mapping[str, Any], events: queue.Queue, *, stdin: int = 0, stdout: int = 1,
                 stderr: int = 2, stdin_direct: bool = True):
        self.spec = spec
        self.events = events
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.stdin_direct = stdin_direct
        self.procs: dict[int, proc.Popen] = {}  # type: ignore[name-defined]
        self.statuses: dict[int, tuple[int, int]] = {}
        self.late_errors: list[str] = []
        self.pumps: list[threading.Thread] = []
        self.stdin_sinks: list[int] = []
        self.host = spec.get("host") or short_host()
        self._files: dict[str, int] = {}

    # -- files
    def _open(self, path: str, write: bool, shared: bool) -> int:
        if not write:
            return os.open(path, os.O_RDONLY)
        if path in self._files:
            return self._files[path]
        append = self.spec.get("append") or shared
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        fd = os.open(path, flags, 0o644)
        self._files[path] = fd
        return fd

    def _target(self, which: str, tid: int, cwd: str, default_fd: int) -> int:
        mode, arg = self.spec.get(which) or ("inherit", None)
        if mode == "inherit":
            return default_fd
        if mode == "none":
            return self._devnull(True)
        if mode == "task":
            return default_fd if tid == arg else self._devnull(True)
        path = expand_io(arg, self.spec.get("vals") or {}, tid=tid, node=int(self.spec.get("node", 0)),
                         host=self.host)
        if not os.path.isabs(path):
            path = os.path.join(cwd, path)
        return self._open(path, True, bool(self.spec.get("shared", {}).get(which)))

    def _devnull(self, write: bool) -> int:
        key = "/dev/null" + ("w" if write else "r")
        if key not in self._files:
            self._files[key] = os.open(os.devnull, os.O_WRONLY if write else os.O_RDONLY)
        return self._files[key]

    # -- launch
    def start(self) -> None:
        spec = self.spec
        tids: list[int] = list(spec["tasks"])
        cwd = spec.get("cwd") or os.getcwd()
        if not os.path.isdir(cwd):
            _write_all(self.stderr, f"slurmstepd-{self.host}: error: couldn't chdir to `{cwd}': "
                                    f"No such file or directory: going to /tmp instead\n".encode())
            cwd = "/tmp"
        if spec.get("umask") is not None:
            os.umask(int(spec["umask"]))
        width = int(spec.get("width") or 1)
        label = bool(spec.get("label"))
        in_mode, in_arg = spec.get("stdin") or ("inherit", None)
        pty_task = tids[0] if (spec.get("pty") or spec.get("emulate_pty")) and 0 in tids else None
        per_task = {int(k): v for k, v in (spec.get("argv_per_task") or {}).items()}
        for local_id, tid in enumerate(tids):
            env = task_env(spec["env"], tid, local_id)
            argv = per_task.get(tid) or list(spec["argv"])
            try:
                if tid == pty_task:
                    out_fd = err_fd = in_fd = None
                else:
                    out_fd = self._target("stdout", tid, cwd, self.stdout)
                    err_mode = (spec.get("stderr") or ("inherit", None))[0]
                    if err_mode == "inherit" and (spec.get("stdout") or ("inherit",))[0] == "file":
                        err_fd = out_fd  # srun: -o without -e sends stderr to the same file
                    else:
                        err_fd = self._target("stderr", tid, cwd, self.stderr)
                    in_fd = self._stdin_for(tid, tids, in_mode, in_arg, cwd)
            except OSError as e:
                self._launch_failed(tid, f"slurmstepd-{self.host}: error: Could not open stdio file "
                                         f"{getattr(e, 'filename', '')}: {e.strerror}", e.errno or errno.EIO,
                                    self.stderr)
                continue
            err = resolve(argv[0], env.get("PATH"), cwd) if argv else errno.ENOENT
            if err:
                msg = f"slurmstepd-{self.host}: error: execve(): {argv[0] if argv else ''}: {os.strerror(err)}"
                self._launch_failed(tid, msg, err, err_fd if err_fd is not None else self.stderr)
                continue
            self._spawn(tid, argv, env, cwd, in_fd, out_fd, err_fd, label, width, tid == pty_task)

    def _stdin_for(self, tid: int, tids: list[int], mode: str, arg: Any, cwd: str) -> int:
        if mode == "none" or (mode == "task" and tid != arg):
            return self._devnull(False)
        if mode == "file":
            path = expand_io(arg, self.spec.get("vals") or {}, tid=tid, node=int(self.spec.get("node", 0)),
                             host=self.host)
            return os.open(path if os.path.isabs(path) else os.path.join(cwd, path), os.O_RDONLY)
        if mode == "task" or (len(tids) == 1 and self.stdin_direct):
            return self.stdin
        r, w = os.pipe()
        self.stdin_sinks.append(w)
        return r

    def _launch_failed(self, tid: int, message: str, code: int, err_fd: int) -> None:
        if err_fd == self.stderr:
            self.late_errors.append(message)  # after srun's own line, as Slurm's output shows
        else:
            _write_all(err_fd, (message + "\n").encode())
        self.statuses[tid] = (code, 0)
        self.events.put(("task", tid, code, 0))

    def _spawn(self, tid: int, argv: list[str], env: dict[str, str], cwd: str, in_fd: int | None,
               out_fd: int | None, err_fd: int | None, label: bool, width: int, pty: bool) -> None:
        kwargs: dict[str, Any] = {"env": env, "cwd": cwd, "close_fds": True}
        pipes_to_close: list[int] = []
        pumps: list[threading.Thread] = []
        master = None
        if pty and self.spec.get("emulate_pty"):
            import pty as ptymod
            import termios

            master, slave = ptymod.openpty()
            _set_winsize(slave, self.spec.get("winsize"))
            kwargs.update(stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                          preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
            pipes_to_close.append(slave)
        elif pty:
            kwargs.update(stdin=self.stdin, stdout=self.stdout, stderr=self.stderr)
        else:
            if label:
                text = f"{tid:>{width}}: ".encode()
                r_out, w_out = os.pipe()
                pumps.append(LabelPump(r_out, out_fd, text, bool(self.spec.get("unbuffered"))))
                if err_fd == out_fd:
                    w_err = w_out
                else:
                    r_err, w_err = os.pipe()
                    pumps.append(LabelPump(r_err, err_fd, text, bool(self.spec.get("unbuffered"))))
                    pipes_to_close.append(w_err)
                pipes_to_close.append(w_out)
                out_fd, err_fd = w_out, w_err
            kwargs.update(stdin=in_fd, stdout=out_fd, stderr=err_fd)
            if in_fd is not None and in_fd not in (self.stdin,) and in_fd not in self._files.values():
                pipes_to_close.append(in_fd)
            if self.spec.get("own_group"):
                kwargs["process_group"] = 0
        try:
            p = proc.popen(["/bin/sh", "-c", TASK_LAUNCH, *argv], **kwargs)
        except (proc.SpawnError, OSError) as e:
            for fd in pipes_to_close:
                _close(fd)
            for t in pumps:
                _close(t.src)  # type: ignore[attr-defined]
            self._launch_failed(tid, f"slurmstepd-{self.host}: error: execve(): {argv[0]}: {e}", 1, self.stderr)
            return
        for fd in pipes_to_close:
            _close(fd)
        for t in pumps:
            t.start()
            self.pumps.append(t)
        self.procs[tid] = p
        if master is not None:
            relay = PtyRelay(master, self.stdin, self.stdout)
            relay.start()
            self.pumps.append(relay)
        threading.Thread(target=self._wait, args=(tid, p), daemon=True).start()

    def _wait(self, tid: int, p) -> None:
        status = p.wait()
        sig = -status if status < 0 else 0
        code = status if status >= 0 else 0
        self.events.put(("task", tid, code, sig))

    def start_stdin(self, extra_sinks: Iterable[int] = ()) -> None:
        sinks = self.stdin_sinks + list(extra_sinks)
        if sinks:
            Broadcast(self.stdin, sinks).start()

    def done(self, tid: int, code: int, sig: int) -> None:
        self.statuses[tid] = (code, sig)

    def running(self) -> list[int]:
        return [t for t in self.procs if t not in self.statuses]

    def kill(self, sig: int) -> None:
        for tid in self.running():
            p = self.procs[tid]
            try:
                if self.spec.get("own_group") or self.spec.get("emulate_pty"):
                    os.killpg(p.pid, sig)
                else:
                    os.kill(p.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def finish(self, timeout: float = 2.0) -> None:
        """Let the output pumps drain (a task's background child may hold a pipe open: bounded)."""
        deadline = time.monotonic() + timeout
        for t in self.pumps:
            t.join(max(0.0, deadline - time.monotonic()))
        for fd in set(self._files.values()):
            _close(fd)
        self._files.clear()


def _set_winsize(fd: int, winsize: Sequence[int] | None) -> None:
    if not winsize:
        return
    import struct
    import termios

    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", int(winsize[0]), int(winsize[1]), 0, 0))
    except OSError:
        pass


def get_winsize(fd: int) -> list[int] | None:
    import struct
    import termios

    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
        return [rows, cols]
    except OSError:
        return None


class PtyRelay(threading.Thread):
    """--pty on a host reached through qrsh -inherit (which gives no terminal): task 0 runs on a
    new pseudo-terminal whose other end is relayed to the launcher's stdin and stdout, which qrsh
    connects to srun's terminal (srun puts it in raw mode)."""

    def __init__(self, master: int, src: int, dst: int):
        super().__init__(daemon=True)
        self.master, self.src, self.dst = master, src, dst

    def run(self) -> None:
        feeder = threading.Thread(target=self._feed, daemon=True)
        feeder.start()
        try:
            while True:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    break  # EIO: the task and every holder of the terminal are gone
                if not data:
                    break
                _write_all(self.dst, data)
        finally:
            _close(self.master)

    def _feed(self) -> None:
        while True:
            try:
                data = os.read(self.src, 4096)
            except OSError:
                return
            if not data or not _write_all(self.master, data):
                return


# ---------------------------------------------------------------------------------------------
# The far side of qrsh -inherit


PAYLOAD_NAME = re.compile(r"[0-9a-f]{32}\.[a-z_]{1,20}\.json")


def boot_argv(state_dir: str, payload: Mapping[str, Any], entry: str = "remote_main") -> list[str]:
    """The command that runs ``shim.steps.<entry>`` with a payload, on any host of the cluster
    (the shim is installed at the same path everywhere, as for the job wrapper). The payload
    goes to a 0600 file in the user's private ``srun/`` directory; the command line carries only
    the state directory and the file's name (StepError when the file cannot be written)."""
    name = f"{os.urandom(16).hex()}.{entry}.json"
    if not state.write_own(state_dir, "srun", name, dict(payload)):
        raise StepError(f"cannot write the launch file in {os.path.join(state_dir, 'users')}")
    return [*proc.shim_python("steps", entry), state_dir, name]


def drop_payload(state_dir: str, name: str) -> None:
    """Remove a launch file the far side did not take (it never started)."""
    if PAYLOAD_NAME.fullmatch(name):
        state.remove_own(state_dir, "srun", name)


def quoted(words: Sequence[str]) -> list[str]:
    """qrsh joins its command words with blanks and a shell splits them again on the far side:
    each word is quoted on its own, so each arrives as it was."""
    return [shlex.quote(str(w)) for w in words]


def read_payload(state_dir: str, name: str) -> dict[str, Any]:
    """A launch file of boot_argv: only from the calling user's own ``srun/`` directory, only the
    user's own regular file; removed once read. ValueError for anything else."""
    if not PAYLOAD_NAME.fullmatch(name):
        raise ValueError(f"not a launch file name: {name!r}")
    d = state.own_dir(state_dir, "srun")
    if d is None:
        raise ValueError(f"no private directory under {state_dir}")
    path = os.path.join(d, name)
    data = state.read_json(path, os.getuid())
    try:
        os.unlink(path)
    except OSError:
        pass
    if data is None:
        raise ValueError(f"{path}: missing, or not the user's own launch file")
    return data


def _payload_or_exit(entry: str) -> dict[str, Any]:
    try:
        if len(sys.argv) < 3:
            raise ValueError("no launch file given")
        return read_payload(sys.argv[1], sys.argv[2])
    except ValueError as e:
        _write_all(2, f"slurm-shim: {entry}: {e}\n".encode())
        os._exit(1)


def remote_main() -> None:
    """One host of a step, started by srun through ``qrsh -inherit``: start this host's tasks,
    print srun's lines for the ones that failed, exit with the highest task outcome."""
    spec = _payload_or_exit("remote_main")
    keep_ge_vars(spec["env"], os.environ)
    events: queue.Queue = queue.Queue()
    launch = HostLaunch(spec, events)
    handlers = _forward_signals(lambda sig: launch.kill(sig))
    launch.start()
    launch.start_stdin()
    deadline = spec.get("deadline")
    pending = set(spec["tasks"])
    killed_at = None
    while pending:
        timeout = None
        if deadline and killed_at is None:
            timeout = max(0.0, deadline - time.time())
        elif killed_at is not None:
            timeout = max(0.0, killed_at + KILL_WAIT - time.time())
        try:
            ev = events.get(timeout=timeout)
        except queue.Empty:
            if killed_at is None:
                killed_at = time.time()
                launch.kill(signal.SIGTERM)
            else:
                launch.kill(signal.SIGKILL)
            continue
        if ev[0] == "task":
            _, tid, code, sig = ev
            launch.done(tid, code, sig)
            pending.discard(tid)
            if (code or sig) and spec.get("kill_on_bad_exit") and killed_at is None and pending:
                killed_at = time.time()
                launch.kill(signal.SIGTERM)
    launch.finish()
    _restore(handlers)
    lines = summary_lines(launch.host, launch.statuses) + launch.late_errors
    if lines:
        _write_all(2, ("\n".join(lines) + "\n").encode())
    rc = global_rc(launch.statuses.values())
    name = spec.get("status_name")
    if isinstance(name, str) and STATUS_NAME.fullmatch(name) and isinstance(spec.get("state_dir"), str):
        # tells srun the launcher ran, and how each task ended (the user's private steps/)
        state.write_own(spec["state_dir"], "steps", name,
                        {"rc": rc, "statuses": {str(t): list(v) for t, v in launch.statuses.items()}})
    sys.stdout.flush()
    os._exit(rc)


GE_PREFIXES = ("SGE_", "PE", "JOB_")
GE_NAMES = ("NSLOTS", "NHOSTS", "NQUEUES", "QUEUE", "RESTARTED", "TMP", "TMPDIR")


def keep_ge_vars(env: dict[str, str], ge_environ: Mapping[str, str]) -> None:
    """Grid Engine's variables of the job on this host (JOB_ID, PE_HOSTFILE, TMPDIR, ...): tasks
    started through qrsh -inherit are part of the job, and an srun inside them finds it so."""
    for k, v in ge_environ.items():
        if k.startswith(GE_PREFIXES) or k in GE_NAMES:
            if k in ("TMP", "TMPDIR") or k not in env:
                env[k] = v


def _forward_signals(action: Callable[[int], None]) -> dict[int, Any]:
    old = {}
    for sig in FORWARDED:
        try:
            old[sig] = signal.signal(sig, lambda s, f: action(s))
        except (ValueError, OSError):
            pass
    return old


def _restore(handlers: Mapping[int, Any]) -> None:
    for sig, h in handlers.items():
        try:
            signal.signal(sig, h)
        except (ValueError, OSError, TypeError):
            pass


# ---------------------------------------------------------------------------------------------
# Running a step (srun inside an allocation, or the job srun made)


class StepRequest(dict):
    """What srun was asked for, as plain data (it also travels in qrsh payloads). Keys: argv,
    argv_per_task, ntasks, ntasks_set, cpus_per_task, cpus_per_task_set, nodes, nodes_set,
    ntasks_per_node, relative, label, unbuffered, output, error, input, append, kill_on_bad_exit,
    wait, pty, time (minutes), chdir, export, distribution, name, quiet, verbose, prog."""

    def __getattr__(self, name: str) -> Any:
        return self.get(name)


class StepResult:
    def __init__(self, rc: int, statuses: dict[int, tuple[int, int]], timed_out: bool, cancelled: bool):
        self.rc, self.statuses, self.timed_out, self.cancelled = rc, statuses, timed_out, cancelled


def plan_step(req: Mapping[str, Any], alloc: Allocation) -> list[tuple[str, int, list[int]]]:
    """The step's layout over the allocation (StepError when it cannot be made)."""
    cpt = int(req.get("cpus_per_task") or 1)
    nodes = req.get("nodes")
    nnodes = int(nodes) if nodes else len(alloc.hosts)
    if req.get("ntasks"):
        ntasks = int(req["ntasks"])
    elif req.get("ntasks_per_node"):
        ntasks = int(req["ntasks_per_node"]) * nnodes
    else:
        ntasks = nnodes
    if nnodes > len(alloc.hosts) - int(req.get("relative") or 0):
        raise StepError("Requested node configuration is not available")
    nnodes = max(1, min(nnodes, ntasks))
    return layout(alloc.hosts, ntasks, cpt, nnodes, req.get("ntasks_per_node"), int(req.get("relative") or 0))


def run_step(req: StepRequest, alloc: Allocation, *, base_env: Mapping[str, str], state_dir: str,
             qrsh: Callable[[list[str]], list[str]] | None = None, qrsh_env: Mapping[str, str] | None = None,
             step_id: int | None = None, deadline: float | None = None, gpu_ids: str | None = None,
             job_mode: bool = False, on_start: Callable[[int], None] | None = None,
             cancelled: Callable[[], bool] | None = None) -> StepResult:
    """Run one step of an allocation and wait for it: srun's whole life inside an allocation.

    ``qrsh(args)`` gives the argv of a Grid Engine command (``backends.argv``); ``deadline`` is a
    time limit (epoch seconds); ``job_mode`` marks the step a job srun made for itself."""
    prog = req.get("prog") or "srun"
    plan = plan_step(req, alloc)
    if step_id is None:
        try:
            step_id = next_step_id(state_dir, alloc.key)
        except OSError as e:  # the shim's bookkeeping must not fail the user's step
            print(f"{prog}: warning: step ids unavailable ({e.strerror}: {getattr(e, 'filename', '')}); "
                  "using step 0", file=sys.stderr)
            step_id = 0
    this_host = short_host()
    local_here = alloc.inside and any(h == this_host for h, _, _ in plan)
    cpt_env = int(req["cpus_per_task"]) if req.get("cpus_per_task_set") else None
    umask = os.umask(0o022)
    os.umask(umask)
    common = step_env(base_env, job_id=alloc.job_id, step_id=step_id, plan=plan, cpus_per_task=cpt_env,
                      in_allocation=not job_mode, distribution=req.get("distribution"), umask=umask,
                      debug=3 + int(req.get("verbose") or 0) - (1 if req.get("quiet") else 0), gpu_ids=gpu_ids)
    ntasks = sum(len(t) for _, _, t in plan)
    width = len(str(ntasks - 1))
    cwd = req.get("chdir") or os.getcwd()
    user = common.get("USER") or common.get("SLURM_JOB_USER") or ""
    vals = {"j": alloc.job_id, "s": step_id, "A": base_env.get("SLURM_ARRAY_JOB_ID", alloc.job_id),
            "a": base_env.get("SLURM_ARRAY_TASK_ID", NO_VAL), "x": base_env.get("SLURM_JOB_NAME", req.get("name") or ""),
            "u": user}
    out_mode, err_mode, in_mode = io_mode(req.get("output")), io_mode(req.get("error")), io_mode(req.get("input"))
    if req.get("pty"):  # Slurm: only task 0 talks to the terminal
        out_mode = out_mode if out_mode[0] != "inherit" else ("task", 0)
        err_mode = err_mode if err_mode[0] != "inherit" else ("task", 0)
        in_mode = in_mode if in_mode[0] != "inherit" else ("task", 0)
    shared = {}
    for which, (mode, pattern) in (("stdout", out_mode), ("stderr", err_mode)):
        if mode == "file" and not varies_per_task(pattern):
            shared[which] = True
            if not req.get("append"):
                _truncate(expand_io(pattern, vals), cwd)
    spec_base: dict[str, Any] = {
        "argv": list(req["argv"]), "argv_per_task": req.get("argv_per_task"), "cwd": cwd, "ntasks": ntasks,
        "label": bool(req.get("label")), "width": width, "unbuffered": bool(req.get("unbuffered")),
        "stdout": out_mode, "stderr": err_mode, "stdin": in_mode, "append": bool(req.get("append")),
        "shared": shared, "vals": vals, "umask": umask, "deadline": deadline,
    }
    record_step(state_dir, alloc.key, step_id, {
        "job_id": alloc.job_id, "task": alloc.task, "step_id": step_id, "name": req.get("name") or
        os.path.basename(str(req["argv"][0])), "ntasks": ntasks, "nodelist": common["SLURM_STEP_NODELIST"],
        "nodes": len(plan), "cpus": ntasks * int(req.get("cpus_per_task") or 1), "start": time.time(),
        "state": "RUNNING", "user": user,
    })
    if on_start:
        on_start(step_id)
    if req.get("verbose"):
        for host, slots, tids in plan:
            print(f"{prog}: launching StepId={alloc.job_id}.{step_id} on host {host}, {len(tids)} tasks: "
                  f"{ranges(tids)}", file=sys.stderr)
    events: queue.Queue = queue.Queue()
    stdin_tty = _isatty(0)
    local: HostLaunch | None = None
    remotes: dict[str, Any] = {}
    remote_tasks: dict[str, list[int]] = {}
    stdin_consumers = 0
    for host, _, tids in plan:
        if local_here and host == this_host:
            stdin_consumers += len(tids)
        else:
            stdin_consumers += 1
    in_direct = in_mode[0] == "inherit" and stdin_consumers == 1
    extra_sinks: list[int] = []
    launch_files: list[str] = []
    for node, (host, slots, tids) in enumerate(plan):
        henv = host_env(common, host, node, slots, tids)
        spec = dict(spec_base, env=henv, tasks=tids, host=host, node=node,
                    kill_on_bad_exit=bool(req.get("kill_on_bad_exit")))
        if local_here and host == this_host:
            spec["own_group"] = not stdin_tty and not req.get("pty")
            spec["pty"] = bool(req.get("pty"))
            local = HostLaunch(spec, events, stdin_direct=in_direct)
            continue
        if qrsh is None:
            raise StepError("Requested node configuration is not available")
        spec["own_group"] = True
        spec["state_dir"] = state_dir
        spec["status_name"] = status_name(alloc.key, step_id, host)
        if req.get("pty") and 0 in tids:
            spec["emulate_pty"] = True
            spec["winsize"] = get_winsize(0)
        boot = boot_argv(state_dir, spec)
        launch_files.append(boot[-1])
        words = ["-inherit", host, *quoted(boot)]
        env = dict(qrsh_env or os.environ)
        env["JOB_ID"] = str(alloc.job_id)
        env["SGE_TASK_ID"] = alloc.ge_task
        wants_stdin = (in_mode[0] == "inherit") or (in_mode[0] == "task" and in_mode[1] in tids) \
            or (req.get("pty") and 0 in tids)
        feed = None
        if not wants_stdin:
            stdin = proc.DEVNULL
        elif in_direct or req.get("pty"):
            stdin = 0
        else:
            stdin, feed = os.pipe()
        try:
            # its own session: a hangup or Ctrl-C of srun's terminal reaches the remote tasks
            # through srun (which ends the qrsh), never half of them directly
            p = proc.popen(qrsh(words), env=env, stdin=stdin, close_fds=True, start_new_session=True)
        finally:
            if feed is not None:
                os.close(stdin)
        if feed is not None:
            extra_sinks.append(feed)  # the broadcaster writes srun's stdin there, and closes it
        remotes[host] = p
        remote_tasks[host] = tids
        threading.Thread(target=lambda h=host, pp=p: events.put(("remote", h, pp.wait(), 0)), daemon=True).start()
    raw_tty = None
    if req.get("pty") and remotes and stdin_tty:
        raw_tty = _raw_mode(0)
    state_flags = {"timed_out": False, "cancel": False, "killed_at": None, "signaled": 0}

    def kill_all(sig: int) -> None:
        if local is not None:
            local.kill(sig)
        for h, p in remotes.items():
            if p.returncode is None:
                try:
                    p.send_signal(signal.SIGTERM if sig != signal.SIGKILL else signal.SIGKILL)
                except (ProcessLookupError, OSError):
                    pass

    def on_signal(sig: int) -> None:
        if job_mode and sig == signal.SIGUSR1:
            return  # Grid Engine's notice of a coming suspension: nothing for the tasks
        if job_mode and sig == signal.SIGUSR2:
            # qdel (scancel) of the job srun made: Grid Engine's notice before its SIGKILL
            if not state_flags["cancel"]:
                _step_cancelled_line(alloc.job_id, step_id, this_host, None)
            sig = signal.SIGTERM
        if local is not None and (local.spec.get("own_group") or job_mode):
            local.kill(sig)
        if sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            state_flags["cancel"] = True
            if state_flags["killed_at"] is None:
                state_flags["killed_at"] = time.time()
            for h, p in remotes.items():
                if p.returncode is None:
                    try:
                        p.send_signal(signal.SIGTERM)
                    except (ProcessLookupError, OSError):
                        pass

    handlers = _forward_signals(on_signal)
    try:
        if local is not None:
            local.start()
            local.start_stdin(extra_sinks)
        elif extra_sinks:
            Broadcast(0, extra_sinks).start()
        pending_tasks = set(local.procs) if local is not None else set()
        if local is not None:
            pending_tasks |= {t for t in local.statuses}  # launch failures already queued
        pending_remote = set(remotes)
        remote_rc: dict[str, int] = {}
        bad_exit_seen = False
        first_end = None
        while pending_tasks or pending_remote:
            timeout = None
            now = time.time()
            if state_flags["killed_at"] is not None:
                timeout = max(0.0, state_flags["killed_at"] + KILL_WAIT - now)
            elif deadline:
                timeout = max(0.0, deadline - now)
            if req.get("wait") and first_end is not None and state_flags["killed_at"] is None:
                t2 = max(0.0, first_end + int(req["wait"]) - now)
                timeout = t2 if timeout is None else min(timeout, t2)
            if cancelled is not None:
                timeout = 0.5 if timeout is None else min(timeout, 0.5)
            try:
                ev = events.get(timeout=timeout)
            except queue.Empty:
                now = time.time()
                if cancelled is not None and cancelled() and not state_flags["cancel"]:
                    state_flags["cancel"] = True
                    _step_cancelled_line(alloc.job_id, step_id, this_host, None)
                    kill_all(signal.SIGTERM)
                    state_flags["killed_at"] = now
                    continue
                if state_flags["killed_at"] is not None and now >= state_flags["killed_at"] + KILL_WAIT:
                    kill_all(signal.SIGKILL)
                    state_flags["killed_at"] = now + 3600
                elif deadline and now >= deadline and state_flags["killed_at"] is None:
                    state_flags["timed_out"] = True
                    _step_cancelled_line(alloc.job_id, step_id, this_host, "TIME LIMIT")
                    print(f"{prog}: Job step aborted: Waiting up to {KILL_WAIT + 2} seconds for job step to finish.",
                          file=sys.stderr)
                    kill_all(signal.SIGTERM)
                    state_flags["killed_at"] = now
                elif req.get("wait") and first_end is not None and state_flags["killed_at"] is None \
                        and now >= first_end + int(req["wait"]):
                    print(f"{prog}: error: Timed out waiting for job step to complete", file=sys.stderr)
                    kill_all(signal.SIGTERM)
                    state_flags["killed_at"] = now
                continue
            kind, who, code, sig = ev
            if kind == "task":
                if local is not None:
                    local.done(who, code, sig)
                pending_tasks.discard(who)
                if local is not None and who not in local.procs:
                    pass
                bad = code != 0 or sig != 0
            else:
                remote_rc[who] = code if code >= 0 else 128 - code
                pending_remote.discard(who)
                bad = code != 0
            if first_end is None:
                first_end = time.time()
            if bad and req.get("kill_on_bad_exit") and not bad_exit_seen:
                bad_exit_seen = True
                if (pending_tasks or pending_remote) and not req.get("quiet"):
                    print(f"{prog}: Terminating StepId={alloc.job_id}.{step_id}", file=sys.stderr, flush=True)
                kill_all(signal.SIGTERM)
                state_flags["killed_at"] = time.time()
            if local is not None:
                pending_tasks |= {t for t in local.procs if t not in local.statuses}
        if local is not None:
            local.finish()
    finally:
        _restore(handlers)
        if raw_tty is not None:
            _restore_tty(0, raw_tty)
    statuses = dict(local.statuses) if local is not None else {}
    lines = summary_lines(this_host, statuses, prog, signals=not state_flags["cancel"])
    lines += local.late_errors if local is not None else []
    if lines:
        sys.stderr.write("\n".join(lines) + "\n")
        sys.stderr.flush()
    for name in launch_files:  # a launcher that never started left its file
        drop_payload(state_dir, name)
    remote_results: list[tuple[int, int]] = []
    for host, rrc in remote_rc.items():
        got = _remote_statuses(state_dir, status_name(alloc.key, step_id, host))
        if got is not None:
            remote_results += got
        elif state_flags["cancel"] or state_flags["timed_out"] or bad_exit_seen:
            remote_results.append(from_rc(rrc))
        else:  # qrsh -inherit did not start the launcher (the job ended, no free task slot, ...)
            print(f"{prog}: error: Task launch for StepId={alloc.job_id}.{step_id} failed on node {host}: "
                  f"Grid Engine did not start the tasks (qrsh -inherit exit code {rrc})", file=sys.stderr)
            remote_results.append((max(rrc, 1), 0))
    results = list(statuses.values()) + remote_results
    rc = global_rc(results)
    signaled = any(s for _, s in results) and not bad_exit_seen
    if signaled and not state_flags["timed_out"] and not state_flags["cancel"] and not req.get("quiet"):
        print(f"{prog}: Force Terminated StepId={alloc.job_id}.{step_id}", file=sys.stderr)
    st = "TIMEOUT" if state_flags["timed_out"] else "CANCELLED" if state_flags["cancel"] else \
        "COMPLETED" if rc == 0 else "FAILED"
    rec = load_step(state_dir, alloc.key, step_id) or {}
    rec.update({"end": time.time(), "state": st, "exit": rc})
    record_step(state_dir, alloc.key, step_id, rec)
    return StepResult(rc, statuses, state_flags["timed_out"], state_flags["cancel"])


STATUS_NAME = re.compile(r"[0-9A-Za-z_]{1,40}\.[0-9]{1,9}\.[0-9A-Za-z._-]{1,255}\.status\.json")


def status_name(key: str, step_id: int, host: str) -> str:
    return f"{key}.{int(step_id)}.{host}.status.json"


def _remote_statuses(state_dir: str, name: str) -> list[tuple[int, int]] | None:
    """A remote launcher's (exit code, signal) per task, from the user's own ``steps/``; the file
    is removed. None when there is none (the launcher never ran) or it is not well formed."""
    got = state.read_from(state_dir, None, "steps", name)
    state.remove_own(state_dir, "steps", name)
    if got is None or not isinstance(got.get("statuses"), dict):
        return None
    out = []
    for v in got["statuses"].values():
        if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
            return None
        out.append((v[0], v[1]))
    return out


def _step_cancelled_line(job_id: int, step_id: int, host: str, why: str | None) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    due = f" DUE TO {why}" if why else ""
    sys.stderr.write(f"slurmstepd-{host}: error: *** STEP {job_id}.{step_id} ON {host} CANCELLED AT {stamp}{due} ***\n")
    sys.stderr.flush()


def _truncate(path: str, cwd: str) -> None:
    full = path if os.path.isabs(path) else os.path.join(cwd, path)
    try:
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.close(fd)
    except OSError:
        pass


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _raw_mode(fd: int):
    import termios
    import tty

    try:
        old = termios.tcgetattr(fd)
        tty.setraw(fd)
        return old
    except termios.error:
        return None


def _restore_tty(fd: int, old) -> None:
    import termios

    try:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)
    except termios.error:
        pass


# ---------------------------------------------------------------------------------------------
# salloc's allocation holder: the batch "script" of an allocation job


def hold_main() -> None:
    """The body of a salloc allocation: runs as the job's batch script (under the job wrapper),
    records where the allocation is (hosts, Grid Engine task) for salloc and srun, and waits until
    salloc releases it (a file whose content is the exit code to end with), or until salloc is
    gone from this host. Exits with salloc's command's exit code."""
    args = sys.argv[1:]
    state_dir = args[0]
    origin_host = args[1] if len(args) > 1 else ""
    origin_pid = int(args[2]) if len(args) > 2 and args[2].isdigit() else 0
    job_id = int(os.environ.get("JOB_ID", "0"))
    host = short_host()
    hosts = hosts_from_ge_env(os.environ, host)
    key = str(job_id)
    job_env = {k: v for k, v in os.environ.items() if k.startswith(("SLURM_", "SLURMD_"))}
    rel = release_path(state_dir, key)
    if rel is not None:
        try:
            os.unlink(rel)  # a stale release (a reused job id) must not end this one
        except OSError:
            pass
    if rel is None or not save_allocation(state_dir, key, {
            "job_id": job_id, "task": None, "ge_task": os.environ.get("SGE_TASK_ID", "undefined"), "hosts": hosts,
            "env": job_env, "holder_host": host, "holder_pid": os.getpid(), "start": time.time()}):
        _write_all(2, f"slurm-shim: cannot record the allocation in {state_dir}\n".encode())
        os._exit(1)
    stop: dict[str, Any] = {"rc": None}

    def on_term(sig, frame):
        stop["rc"] = 128 + sig

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    while stop["rc"] is None:
        if os.path.lexists(rel):  # salloc's release (in the user's own private directory)
            got = state.read_json(rel, os.getuid()) or {}
            code = got.get("rc")
            stop["rc"] = code if isinstance(code, int) and not isinstance(code, bool) else 0
            break
        if origin_pid and origin_host == host and not _alive(origin_pid):
            stop["rc"] = 0
            break
        time.sleep(0.25)
    for path in (rel, alloc_path(state_dir, key)):
        try:
            os.unlink(path)
        except (OSError, TypeError):
            pass
    os._exit(max(0, min(255, int(stop["rc"] or 0))))


def descendants(pid: int) -> list[int]:
    """pid and every process below it (one pass over /proc), parents first."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return [pid]
    for name in names:
        if name.isdigit():
            children.setdefault(_parent(int(name)), []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def signal_tree(pid: int, sig: int) -> None:
    for p in descendants(pid):
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# ---------------------------------------------------------------------------------------------
# The job srun makes outside an allocation: its one process, started by qrsh -now no


def job_main() -> None:
    """The job srun made for itself (``qrsh -now no``): record it as sbatch's wrapper records a
    batch job (submit record, start, end with the real exit code), give the step the job's SLURM_*
    variables, run step 0 over the job's hosts, and pass the exit code back to srun through the
    state directory (Grid Engine would park a job that exits 100 in an error state, so such codes
    leave as 1 and srun takes the real one from there)."""
    from . import jobwrap

    pl = _payload_or_exit("job_main")
    sdir = sys.argv[1]
    job_id = int(os.environ.get("JOB_ID", "0"))
    host = short_host()
    start = time.time()
    record = dict(pl["record"])
    sub = record.get("sub")
    stamp = {"sub": sub} if isinstance(sub, (int, float)) and not isinstance(sub, bool) else {}
    req = StepRequest(pl["req"])
    token = str(pl.get("token") or "")
    token_name = f"{token}.json" if re.fullmatch(r"[0-9a-f]{32}", token) else None
    state.record_submit(sdir, job_id, record)
    state.record_event(sdir, job_id, None, "start", {"node": host, **stamp})
    if token_name:
        state.write_own(sdir, "srun", token_name, {"job_id": job_id, "start": start})
    hosts = hosts_from_ge_env(os.environ, host)
    user = pwd_entry()
    gpus = int(record.get("gpus") or 0)
    rc, sig, st, reason = 1, 0, "FAILED", "None"
    gpu_ids = None
    try:
        gpu_ids = jobwrap.claim_gpus(sdir, host, gpus, job_id) if gpus else None
    except jobwrap.NoGpu as e:
        sys.stderr.write(f"{req.get('prog') or 'srun'}: error: Unable to create step for job {job_id}: {e}\n")
        sig, reason = jobwrap.LAUNCH_FAILED_SIGNAL, "JobLaunchFailure"
    if not reason == "JobLaunchFailure":
        env = new_job_env(pl["environ"], record, job_id=job_id, hosts=hosts, host=host, user=user[0], uid=user[1],
                          gid=os.getgid(), gpu_ids=gpu_ids, ge_environ=os.environ)
        alloc = Allocation(job_id, hosts, ge_task=os.environ.get("SGE_TASK_ID", "undefined"), record=record,
                           inside=True)
        limit = int(record.get("time") or -1)
        deadline = start + limit * 60 if limit > 0 else None
        qrsh_cmd = list(pl.get("qrsh") or ["qrsh"])
        try:
            res = run_step(req, alloc, base_env=env, state_dir=sdir, qrsh=lambda words: [*qrsh_cmd, *words],
                           qrsh_env=os.environ, deadline=deadline, job_mode=True,
                           gpu_ids=",".join(str(i) for i in gpu_ids) if gpu_ids else None)
            rc = res.rc
            worst = max(res.statuses.values(), key=lambda cs: outcome(*cs), default=(rc, 0))
            sig = worst[1] if outcome(*worst) == rc else 0
            st = "TIMEOUT" if res.timed_out else "CANCELLED" if res.cancelled else "COMPLETED" if rc == 0 else "FAILED"
        except StepError as e:
            sys.stderr.write(f"{req.get('prog') or 'srun'}: error: Unable to create step for job {job_id}: {e}\n")
        finally:
            if gpu_ids:
                jobwrap.release_gpus(sdir, host, gpu_ids)
    state.record_event(sdir, job_id, None, "end", {"exit": 0 if sig else rc, "signal": sig, "state": st,
                                                  "reason": reason, "node": host, "start": start, **stamp})
    if token_name:
        state.write_own(sdir, "srun", token_name, {"job_id": job_id, "start": start, "rc": rc})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if rc in (99, 100) else rc)


def new_job_env(environ: Mapping[str, str], record: Mapping[str, Any], *, job_id: int, hosts: list[tuple[str, int]],
                host: str, user: str, uid: int, gid: int, gpu_ids: list[int] | None = None,
                ge_environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment (before step and task variables) of the tasks of a job srun made: srun's
    exported environment and the job's SLURM_* variables as Slurm's srun gives them, which are
    a batch job's minus the batch-only ones (ENVIRONMENT, HOSTNAME, SLURM_NODE_ALIASES,
    SLURM_JOB_GPUS, the default SLURM_MEM_PER_CPU); Grid Engine's own variables stay, so that an
    srun inside a task finds the job."""
    env = dict(environ)
    job = jobenv.batch_env(record, job_id=job_id, task=None, hosts=hosts, this_host=host, user=user,
                           uid=uid, gid=gid, gpu_ids=gpu_ids)
    for k in ("ENVIRONMENT", "HOSTNAME", "SLURM_NODE_ALIASES", "SLURM_JOB_GPUS", "SLURM_TASK_PID"):
        job.pop(k, None)
    if not record.get("mem_per_cpu_mb"):
        job.pop("SLURM_MEM_PER_CPU", None)  # srun's tasks see only an explicit memory request
    env.update(job)
    for k, v in (ge_environ or {}).items():
        if k.startswith(("SGE_", "PE", "JOB_")) or k in ("NSLOTS", "NHOSTS", "NQUEUES", "QUEUE", "RESTARTED"):
            env.setdefault(k, v)
    env["TMPDIR"] = (ge_environ or {}).get("TMPDIR", "/tmp")
    return env


def pwd_entry() -> tuple[str, int]:
    import pwd

    try:
        pw = pwd.getpwuid(os.getuid())
        return pw.pw_name, pw.pw_uid
    except KeyError:
        return str(os.getuid()), os.getuid()
