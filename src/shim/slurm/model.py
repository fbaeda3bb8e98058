"""Scheduler-neutral records: what a renderer (squeue, scontrol, sacct) needs to know of a job.

Backends fill these from Grid Engine (qstat, qacct) plus the shim's own state records; renderers
never see Grid Engine's vocabulary.
"""

from __future__ import annotations

TYPE_CHECKING = False  # datetime is only an annotation here (typing costs ~9 ms: see gridengine/backends.py)
if TYPE_CHECKING:
    from datetime import datetime


class SlurmState:
    """A Slurm job state: its long name (squeue %T, sacct State), compact code (squeue %t) and
    whether it is an ended job's state (squeue lists only the others by default). (A plain class:
    a frozen dataclass costs a third of a millisecond to define, on every command's start.)"""

    __slots__ = ("long", "compact", "ended")

    def __init__(self, long: str, compact: str, ended: bool):
        self.long, self.compact, self.ended = long, compact, ended

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SlurmState) and (self.long, self.compact, self.ended) == (
            other.long, other.compact, other.ended)

    def __hash__(self) -> int:
        return hash(self.long)

    def __repr__(self) -> str:
        return f"SlurmState({self.long!r}, {self.compact!r}, {self.ended!r})"


def _table(*rows: tuple[str, str, bool]) -> tuple[SlurmState, ...]:
    return tuple(SlurmState(*row) for row in rows)


SLURM_STATES = _table(
    # the base states, in Slurm's enum job_states order (JOB_PENDING .. JOB_OOM)
    ("PENDING", "PD", False), ("RUNNING", "R", False), ("SUSPENDED", "S", False),
    ("COMPLETED", "CD", True), ("CANCELLED", "CA", True), ("FAILED", "F", True), ("TIMEOUT", "TO", True),
    ("NODE_FAIL", "NF", True), ("PREEMPTED", "PR", True), ("BOOT_FAIL", "BF", True),
    ("DEADLINE", "DL", True), ("OUT_OF_MEMORY", "OOM", True),
    # the state flags with a name of their own, in the order squeue lists them
    ("COMPLETING", "CG", False), ("CONFIGURING", "CF", False), ("RESIZING", "RS", False),
    ("RESV_DEL_HOLD", "RD", False), ("REQUEUED", "RQ", False), ("REQUEUE_FED", "RF", False),
    ("REQUEUE_HOLD", "RH", False), ("REVOKED", "RV", True), ("SIGNALING", "SI", False),
    ("SPECIAL_EXIT", "SE", False), ("STAGE_OUT", "SO", False), ("STOPPED", "ST", False),
)
"""Every job state Slurm 22.05 names, in the order Slurm lists them (squeue's "Valid job states
include:", from job_state_string over the enum and then the flags; src/common/slurm_protocol_defs.c
job_state_string/job_state_string_compact). A revoked job (a federation sibling another cluster
runs) is gone from this cluster: it counts as ended."""

STATE_CODES = {s.long: s.compact for s in SLURM_STATES}
"""Long name -> compact code."""
ACTIVE_STATES = frozenset(s.long for s in SLURM_STATES if not s.ended)
"""The states of jobs that have not ended: what squeue lists without ``-t``."""
_BY_NAME = {**{s.long: s for s in SLURM_STATES}, **{s.compact: s for s in SLURM_STATES}}


def state_named(text: str) -> SlurmState | None:
    """Slurm's job_state_num: a long name or compact code, any case (``pd``, ``Running``); None
    when it names no state."""
    return _BY_NAME.get(text.upper()) if text.isascii() else None


def shown_state(rec: JobRecord) -> str:
    """The job's state as squeue (%T, %t, -t) and scontrol (JobState) name it: Slurm's
    job_state_string, where a state flag wins over the base state -- a running job that
    ``scancel -s STOP`` stopped is STOPPED (jobs.mark_stopped). Its base state stays RUNNING
    (``rec.state``: sacct's State, which slurmdbd keeps as the base state, scancel -t, times)."""
    st = rec.state
    return "STOPPED" if st == "RUNNING" and rec.extra.get("stopped") else st


def state_list() -> str:
    """The states' long names, comma separated, in Slurm's order (squeue's error message)."""
    return ",".join(s.long for s in SLURM_STATES)


class JobRecord:
    """One job (or array task) as Slurm sees it. A plain class written out (the dataclass it was
    cost ~10 ms of every command's start: ``dataclasses`` imports ``inspect``): the defaults are
    class attributes, so a record made with ``__new__`` and a ``__dict__`` of the fields it sets
    (gridengine/qstat.py) reads the rest from the class; ``FIELDS`` names the fields in order."""

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

    nodes: list[str]  # a fresh one per record (field(default_factory=list))
    extra: dict  # a fresh one per record (field(default_factory=dict))

    def __init__(self, job_id, array_task=None, array_pending=None, array_max_tasks=None, name="", user="", uid=None,
                 group="", gid=None, state="PENDING", reason="None", partition="", queue="", ge_state="",
                 submit_time=None, eligible_time=None, start_time=None, end_time=None, time_limit=None,
                 nodes=None, num_nodes=1, num_cpus=1, num_tasks=1, cpus_per_task=1, min_memory_mb=None,
                 mem_per_cpu=False, priority=0, nice=0, account="", qos="normal", comment="", work_dir="",
                 command="", std_out="", std_err="", std_in="/dev/null", exit_code=None, exit_signal=0,
                 dependency="", gres="", licenses="", features="", req_nodes="", exc_nodes="", requeue=True,
                 batch_host="", extra=None):
        self.job_id = job_id
        self.array_task = array_task
        self.array_pending = array_pending
        self.array_max_tasks = array_max_tasks
        self.name = name
        self.user = user
        self.uid = uid
        self.group = group
        self.gid = gid
        self.state = state
        self.reason = reason
        self.partition = partition
        self.queue = queue
        self.ge_state = ge_state
        self.submit_time = submit_time
        self.eligible_time = eligible_time
        self.start_time = start_time
        self.end_time = end_time
        self.time_limit = time_limit
        self.nodes = list() if nodes is None else nodes
        self.num_nodes = num_nodes
        self.num_cpus = num_cpus
        self.num_tasks = num_tasks
        self.cpus_per_task = cpus_per_task
        self.min_memory_mb = min_memory_mb
        self.mem_per_cpu = mem_per_cpu
        self.priority = priority
        self.nice = nice
        self.account = account
        self.qos = qos
        self.comment = comment
        self.work_dir = work_dir
        self.command = command
        self.std_out = std_out
        self.std_err = std_err
        self.std_in = std_in
        self.exit_code = exit_code
        self.exit_signal = exit_signal
        self.dependency = dependency
        self.gres = gres
        self.licenses = licenses
        self.features = features
        self.req_nodes = req_nodes
        self.exc_nodes = exc_nodes
        self.requeue = requeue
        self.batch_host = batch_host
        self.extra = dict() if extra is None else extra

    def _values(self) -> tuple:
        return tuple(getattr(self, n) for n in FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None  # mutable, as the dataclass was

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in FIELDS) + ")"

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


FIELDS = (
    'job_id', 'array_task', 'array_pending', 'array_max_tasks', 'name', 'user', 'uid', 'group', 'gid',
    'state', 'reason', 'partition', 'queue', 'ge_state', 'submit_time', 'eligible_time', 'start_time',
    'end_time', 'time_limit', 'nodes', 'num_nodes', 'num_cpus', 'num_tasks', 'cpus_per_task', 'min_memory_mb',
    'mem_per_cpu', 'priority', 'nice', 'account', 'qos', 'comment', 'work_dir', 'command', 'std_out',
    'std_err', 'std_in', 'exit_code', 'exit_signal', 'dependency', 'gres', 'licenses', 'features',
    'req_nodes', 'exc_nodes', 'requeue', 'batch_host', 'extra',
)
"""JobRecord's fields in order (its __init__ parameters; what the dataclass's fields were)."""


PRIO_SCALE = 0xFFFFFFFF  # Slurm's %p is priority / 2^32-1


def run_seconds(rec: JobRecord, now: float) -> int:
    """Slurm's TIME: seconds the job has run (0 while pending)."""
    if "run_seconds" in rec.extra:
        return rec.extra["run_seconds"]
    if rec.state in ("PENDING", "CANCELLED") or rec.start_time is None:
        return 0
    st = rec.extra.get("start_ts") or rec.start_time.timestamp()
    return max(0, int(now - st))
