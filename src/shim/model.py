"""Scheduler-neutral records: what a renderer (squeue, scontrol, sacct) needs to know of a job.

Backends fill these from Grid Engine (qstat, qacct) plus the shim's own state records; renderers
never see Grid Engine's vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class JobRecord:
    job_id: int  # Grid Engine's job number == Slurm's job id (array parent id for tasks)
    array_task: int | None = None  # Slurm's index (not Grid Engine's task number)
    array_pending: str | None = None  # pending tasks not yet split out, Slurm style "3-6%2" / "0,2,4"
    array_max_tasks: int | None = None  # the %throttle
    name: str = ""
    user: str = ""
    uid: int | None = None
    group: str = ""
    gid: int | None = None
    state: str = "PENDING"  # Slurm's long state name: PENDING RUNNING SUSPENDED COMPLETING COMPLETED ...
    reason: str = "None"  # Slurm's reason for pending/ended jobs
    partition: str = ""
    queue: str = ""  # Grid Engine queue (instance) name, for the backend's own use
    ge_state: str = ""  # raw Grid Engine state letters, e.g. "hqw"
    submit_time: datetime | None = None
    eligible_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    time_limit: int | None = None  # minutes; -1 unlimited; None unknown
    nodes: list[str] = field(default_factory=list)
    num_nodes: int = 1
    num_cpus: int = 1
    num_tasks: int = 1
    cpus_per_task: int = 1
    min_memory_mb: int | None = None
    mem_per_cpu: bool = False
    priority: int = 0
    nice: int = 0
    account: str = ""
    qos: str = "normal"
    comment: str = ""
    work_dir: str = ""
    command: str = ""
    std_out: str = ""
    std_err: str = ""
    std_in: str = "/dev/null"
    exit_code: int | None = None
    exit_signal: int = 0
    dependency: str = ""
    gres: str = ""  # e.g. "gpu:2"
    licenses: str = ""  # e.g. "matlab:1"
    features: str = ""
    req_nodes: str = ""
    exc_nodes: str = ""
    requeue: bool = True
    batch_host: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def is_array(self) -> bool:
        return self.array_task is not None or self.array_pending is not None

    @property
    def display_id(self) -> str:
        """Slurm's JOBID column: N, N_k, or N_[a-b%p]."""
        if self.array_task is not None:
            return f"{self.job_id}_{self.array_task}"
        if self.array_pending is not None:
            return f"{self.job_id}_[{self.array_pending}]"
        return str(self.job_id)
