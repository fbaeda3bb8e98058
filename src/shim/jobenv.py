"""The environment a Slurm batch job sees, computed from the submission payload and what Grid
Engine tells the job at run time. Pure functions: the job wrapper, ``srun`` and
``slurm-shim explain`` all use them."""

from __future__ import annotations

from typing import Any, Mapping

NO_VAL_TASK = 4294967294  # what Slurm's %a expands to outside an array


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
    p: Mapping[str, Any],
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
) -> dict[str, str]:
    """SLURM_* variables of the batch step. ``hosts`` is [(host, slots)] of the allocation."""
    from .hostlist import compress

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
    env = {
        "ENVIRONMENT": "BATCH",
        "HOSTNAME": this_host,
        "SLURMD_NODENAME": this_host,
        "SLURM_CLUSTER_NAME": str(p.get("cluster", "cluster")),
        "SLURM_CPUS_ON_NODE": str(here),
        "SLURM_GTIDS": "0",
        "SLURM_JOBID": str(job_id),
        "SLURM_JOB_ID": str(job_id),
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
    if task_pid is not None:
        env["SLURM_TASK_PID"] = str(task_pid)
    if p.get("account"):
        env["SLURM_JOB_ACCOUNT"] = str(p["account"])
    if p.get("ntasks_set"):
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(p.get("ntasks", 1))
    if p.get("cpus_per_task_set"):
        env["SLURM_CPUS_PER_TASK"] = str(cpt)
    if p.get("ntasks_per_node"):
        env["SLURM_NTASKS_PER_NODE"] = str(p["ntasks_per_node"])
    if p.get("mem_mb"):
        env["SLURM_MEM_PER_NODE"] = str(p["mem_mb"])
    elif p.get("mem_per_cpu_mb"):
        env["SLURM_MEM_PER_CPU"] = str(p["mem_per_cpu_mb"])
    elif p.get("mem_per_gpu_mb"):
        env["SLURM_MEM_PER_GPU"] = str(p["mem_per_gpu_mb"])
    elif p.get("default_mem_per_cpu"):
        env["SLURM_MEM_PER_CPU"] = str(p["default_mem_per_cpu"])
    if p.get("dependency"):
        env["SLURM_JOB_DEPENDENCY"] = str(p["dependency"])
    if p.get("open_mode"):
        env["SLURM_OPEN_MODE"] = "a" if str(p["open_mode"]).startswith("a") else "t"
    if p.get("gpus_per_task"):
        gpt = p["gpus_per_task"]
        env["SLURM_GPUS_PER_TASK"] = str(gpt[-1] if isinstance(gpt, (list, tuple)) else gpt)
    gpus = int(p.get("gpus") or 0)
    if gpus:
        env.update(gpu_env(list(gpu_ids) if gpu_ids is not None else list(range(gpus))))
    for key, var in (("gpus_opt", "SLURM_GPUS"), ("gpus_per_node_opt", "SLURM_GPUS_PER_NODE")):
        if p.get(key):
            env[var] = str(p[key])
    if p.get("distribution"):
        env["SLURM_DISTRIBUTION"] = str(p["distribution"])
    if p.get("hint"):
        env["SLURM_HINT"] = str(p["hint"])
        if p["hint"] == "nomultithread":
            env["SLURM_THREADS_PER_CORE"] = "1"
    array = p.get("array")
    if array and task is not None:
        env["SLURM_ARRAY_JOB_ID"] = str(job_id)
        env["SLURM_ARRAY_TASK_ID"] = str(task)
        env["SLURM_ARRAY_TASK_COUNT"] = str(len(array))
        env["SLURM_ARRAY_TASK_MIN"] = str(min(array))
        env["SLURM_ARRAY_TASK_MAX"] = str(max(array))
        step = _step(array)
        env["SLURM_ARRAY_TASK_STEP"] = str(step)
    return env


def _step(indices: list[int]) -> int:
    if len(indices) < 2:
        return 1
    diffs = {b - a for a, b in zip(indices, indices[1:])}
    return diffs.pop() if len(diffs) == 1 else 1


def expand_pattern(pattern: str, *, job_id: int, task: int | None, name: str, user: str, host: str,
                   array_job: bool) -> str:
    """Slurm's output file name patterns: %j %J %A %a %x %u %N %n %t %s %%, with zero padding (%4a)."""
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch != "%" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        j = i + 1
        while j < n and pattern[j].isdigit():
            j += 1
        width = int(pattern[i + 1:j]) if j > i + 1 else 0
        if j >= n:
            out.append(pattern[i:])
            break
        key = pattern[j]
        i = j + 1
        if key == "%":
            out.append("%")
            continue
        numeric = {
            "j": job_id,
            "A": job_id,
            "a": task if (array_job and task is not None) else NO_VAL_TASK,
            "n": 0,
            "t": 0,
        }
        if key in ("j", "A", "a", "n", "t"):
            out.append(str(numeric[key]).zfill(width) if width else str(numeric[key]))
        elif key == "J":
            out.append(str(job_id))
        elif key == "s":
            out.append("batch")
        elif key == "x":
            out.append(name)
        elif key == "u":
            out.append(user)
        elif key == "N":
            out.append(host)
        else:
            out.append("%" + key)
    return "".join(out)
