"""squeue's fields: every ``%`` letter and ``-O`` name of Slurm 22.05, their headers and values,
default formats, sort keys and the ``--json`` document (OpenAPI v0.0.38 shape)."""

from __future__ import annotations

import os
import time
from datetime import datetime

from ... import SLURM_VERSION
from ..jobids import task_job_id
from ..model import PRIO_SCALE, STATE_CODES, JobRecord, run_seconds, shown_state
from .fmt import FieldSpec, Registry, getter
from .text import UNIT_MEGA, convert_num_unit, print_secs, version_json

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable

    from ...config import SiteConfig

DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
LONG_FORMAT = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
START_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
STEPS_FORMAT = "%.15i %.8j %.9P %.8u %.9M %N"
ONLY_STATE_FORMAT = "%.18i %.2t"  # --only-job-state (24.11, 26.05)
ALL_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


class Ctx:
    """What getters need besides the record: the time, the site config, unit conversion. (A plain
    class: ``dataclasses`` costs ~10 ms of squeue's start.)"""

    __slots__ = ("cfg", "now", "convert", "time_format", "_release", "client")

    def __init__(self, cfg: SiteConfig, now: float | None = None, convert: bool = True, time_format: str = ""):
        self.cfg = cfg
        self.now = time.time() if now is None else now
        self.convert = convert
        self.time_format = time_format or os.environ.get("SLURM_TIME_FORMAT", "standard")
        self._release = None
        self.client = None  # who asks (openapi.Client: --json's and --yaml's meta block), set by the command

    @property
    def release(self):
        """The site's Slurm release (releases.current), asked once."""
        if self._release is None:
            from .. import releases

            self._release = releases.current()
        return self._release

    def __repr__(self) -> str:
        return f"Ctx(cfg={self.cfg!r}, now={self.now!r}, convert={self.convert!r}, time_format={self.time_format!r})"


# ---------------------------------------------------------------------------------------------
# value formatting, as Slurm prints it


def limit_text(minutes: int | None) -> str:
    """%l: UNLIMITED, else _print_secs of the minutes."""
    if minutes is None or minutes < 0:
        return "UNLIMITED"
    return print_secs(minutes * 60)


def time_text(dt: datetime | None, ctx: Ctx, none: str = "N/A") -> str:
    if dt is None:
        return none
    f = ctx.time_format
    if f in ("standard", "", "iso8601"):
        return dt.strftime("%Y-%m-%dT%H:%M:%S")
    if f == "relative":
        now = datetime.fromtimestamp(ctx.now)
        if dt.date() == now.date():
            return dt.strftime("%H:%M:%S")
        if dt.year == now.year:
            delta = (dt.date() - now.date()).days
            if delta == 1:
                return "Tomorr " + dt.strftime("%H:%M")
            if delta == -1:
                return "Ystday " + dt.strftime("%H:%M")
            if 1 < delta < 7:
                return dt.strftime("%a %H:%M")
            return dt.strftime("%-d %b")
        return dt.strftime("%-d %b %Y")
    if f == "iso8601_ms":
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}"
    try:
        return dt.strftime(f)
    except ValueError:
        return dt.strftime("%Y-%m-%dT%H:%M:%S")


def mem_text(mb: int | None, convert: bool = True) -> str:
    """A size in MB as squeue's %m and the TRES strings print it: convert_num_unit from UNIT_MEGA,
    exact unless --noconvert (100 -> 100M, 2048 -> 2G, 1536 -> 1.50G)."""
    return convert_num_unit(mb or 0, UNIT_MEGA, exact=convert)


_NODES_TEXT: dict[tuple[str, ...], str] = {}


def nodes_text(rec: JobRecord) -> str:
    if not rec.nodes:
        return ""
    key = tuple(rec.nodes)
    text = _NODES_TEXT.get(key)
    if text is None:
        from ..hostlist import compress

        text = _NODES_TEXT[key] = compress(list(rec.nodes))
    return text


def reason_list(rec: JobRecord, ctx: Ctx) -> str:
    """%R: "(Reason)" for pending and failed jobs, the node list otherwise (Slurm's rule)."""
    if rec.state in ("PENDING", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "DEADLINE", "BOOT_FAIL", "NODE_FAIL"):
        return f"({rec.reason})"
    return nodes_text(rec)


def dependency_text(rec: JobRecord, ctx: Ctx) -> str:
    preds = set(rec.extra.get("predecessors") or ())
    if rec.dependency:
        parts = []
        for item in rec.dependency.replace("?", ",").split(","):
            kind, _, ids = item.partition(":")
            if not ids:
                if rec.state == "PENDING" and kind and preds:
                    parts.append(f"{kind}(unfulfilled)")
                continue
            for jid in ids.split(":"):
                base = jid.split("_", 1)[0].split("+", 1)[0]
                if rec.state == "PENDING" and (not preds or (base.isdigit() and int(base) in preds)):
                    parts.append(f"{kind}:{jid}(unfulfilled)")
        return ",".join(parts) or "(null)"
    if preds and rec.state == "PENDING":
        return ",".join(f"afterany:{p}(unfulfilled)" for p in sorted(preds))
    return "(null)"


def run_secs(rec: JobRecord, ctx: Ctx) -> int:
    return run_seconds(rec, ctx.now)


def time_left(rec: JobRecord, ctx: Ctx) -> str:
    if rec.time_limit is None or rec.time_limit < 0:
        return "UNLIMITED"
    return print_secs(rec.time_limit * 60 - run_secs(rec, ctx))


def time_limit(rec: JobRecord, ctx: Ctx) -> str:
    return limit_text(rec.time_limit)


def end_time(rec: JobRecord, ctx: Ctx) -> str:
    end = rec.end_time
    if end is None and rec.start_time is not None and rec.state in ("RUNNING", "SUSPENDED"):
        if rec.time_limit is not None and rec.time_limit >= 0:
            end = datetime.fromtimestamp(rec.start_time.timestamp() + rec.time_limit * 60)
    if end is not None:
        return time_text(end, ctx)
    return "NONE" if rec.start_time is not None else "N/A"


def submit_time(rec: JobRecord, ctx: Ctx) -> str:
    return time_text(rec.submit_time or rec.start_time, ctx)


def _d(attr: str, default: str = "(null)") -> Callable[[JobRecord, Ctx], str]:
    """A getter for a field only the submit record knows."""

    def get(rec: JobRecord, ctx: Ctx) -> str:
        v = getattr(rec, attr)
        return str(v) if v not in (None, "") else default

    return get


def tres_per_node(rec: JobRecord, ctx: Ctx, none: str = "N/A") -> str:
    """%b (tres-per-node), scontrol's TresPerNode: the record's ``gres:gpu:N``, as ``gres/gpu:N``
    where the release spells it so (releases.TRES_SLASH)."""
    from ..releases import TRES_SLASH

    if not rec.gres:
        return none
    return rec.gres.replace("gres:", "gres/") if ctx.release.has(TRES_SLASH) else rec.gres


def oversubscribe(rec: JobRecord, ctx: Ctx) -> str:
    """%h, scontrol's OverSubscribe: OK, or NO where the release says so (releases.OVERSUBSCRIBE_NO)."""
    from ..releases import OVERSUBSCRIBE_NO

    return "NO" if ctx.release.has(OVERSUBSCRIBE_NO) else "OK"


def _cpus(rec: JobRecord, ctx: Ctx) -> str:
    return str(rec.num_cpus)


def _min_mem(rec: JobRecord, ctx: Ctx) -> str:
    return mem_text(rec.min_memory_mb, ctx.convert)


def tres_text(rec: JobRecord, ctx: Ctx, *, billing: bool = True) -> str:
    parts = [f"cpu={rec.num_cpus}"]
    if rec.min_memory_mb:
        total = rec.min_memory_mb * (rec.num_cpus if rec.mem_per_cpu else max(1, rec.num_nodes))
        parts.append(f"mem={mem_text(total)}")
    parts.append(f"node={rec.num_nodes}")
    if billing:
        parts.append(f"billing={rec.num_cpus}")
    for g in filter(None, rec.gres.split(",")):
        bits = g.split(":")
        if len(bits) >= 3:
            parts.append(f"gres/{bits[1]}={bits[-1]}")
    for lic in filter(None, rec.licenses.split(",")):
        n, _, c = lic.partition(":")
        parts.append(f"license/{n}={c or 1}")
    return ",".join(parts)


def array_task_text(rec: JobRecord) -> str:
    if rec.array_task is not None:
        return str(rec.array_task)
    if rec.array_pending is not None:
        return rec.array_pending
    return "N/A"


def _std(kind: str) -> Callable[[JobRecord, Ctx], str]:
    def get(rec: JobRecord, ctx: Ctx) -> str:
        v = {"out": rec.std_out, "err": rec.std_err, "in": rec.std_in}[kind]
        return v or ("/dev/null" if kind == "in" else "")

    return get


def _c(text: str) -> Callable[[JobRecord, Ctx], str]:
    return lambda rec, ctx: text


def _id_key(rec: JobRecord, ctx: Any) -> tuple:
    return (rec.job_id, rec.array_task if rec.array_task is not None else float("inf"))


def _ts(attr: str) -> Callable[[JobRecord, Any], float]:
    def key(rec: JobRecord, ctx: Any) -> float:
        v = getattr(rec, attr)
        return v.timestamp() if v is not None else 0.0

    return key


_SECS: dict[int, str] = {}  # print_secs of the seconds a listing's jobs have run (most share a few)


def secs_text(secs: int) -> str:
    """print_secs(secs), kept for the next job that has run as long (a bounded memo: squeue -i
    runs on)."""
    if len(_SECS) >= 65536:
        _SECS.clear()
    text = _SECS[secs] = print_secs(secs)
    return text


# Getters of the busiest fields as expressions (fmt.getter): a compiled line inlines them.
_XNS = {"STATE_CODES": STATE_CODES, "print_secs": print_secs, "run_secs": run_secs, "reason_list": reason_list,
        "task_job_id": task_job_id, "SECS": _SECS, "secs_text": secs_text}


def _x(expr: str) -> Callable[[JobRecord, Ctx], str]:
    return getter(expr, _XNS)


F = FieldSpec
SQUEUE_FIELDS: tuple[FieldSpec, ...] = (
    F("a", "Account", "ACCOUNT", _d("account")),
    F("b", "tres-per-node", "TRES_PER_NODE", tres_per_node, aliases=("gres",)),
    F("c", "MinCpus", "MIN_CPUS", _d("cpus_per_task", "1"), key=lambda r, c: r.cpus_per_task),
    F("d", "MinTmpDisk", "MIN_TMP_DISK", _c("0")),
    F("e", "EndTime", "END_TIME", end_time, key=_ts("end_time")),
    F("f", "Feature", "FEATURES", _d("features"), aliases=("features",)),
    F("g", "GroupName", "GROUP", lambda r, c: r.group or "(null)"),
    F("h", "OverSubscribe", "OVER_SUBSCRIBE", oversubscribe, aliases=("shared",)),
    F("i", "JobArrayID", "JOBID", _x("r.display_id"), key=_id_key),
    F("j", "Name", "NAME", _x("r.name")),
    F("k", "Comment", "COMMENT", _d("comment")),
    F("l", "TimeLimit", "TIME_LIMIT", time_limit, key=lambda r, c: _limit_key(r, c), cut=False),
    F("m", "MinMemory", "MIN_MEMORY", _min_mem, key=lambda r, c: r.min_memory_mb or 0),
    F("n", "ReqNodes", "REQ_NODES", _d("req_nodes", "")),
    F("o", "Command", "COMMAND", _d("command")),
    F("p", "Priority", "PRIORITY", lambda r, c: f"{r.extra.get('prio', r.priority / PRIO_SCALE):.14f}",
      key=lambda r, c: r.priority),
    F("q", "QOS", "QOS", _d("qos", "normal")),
    F("r", "Reason", "REASON", _x("r.reason")),
    F("s", "SelectJobInfo", "", _c("")),
    F("t", "StateCompact", "ST", _x("('ST' if r.state == 'RUNNING' and r.extra.get('stopped') "
                                        "else STATE_CODES.get(r.state, r.state[:2]))")),
    F("u", "UserName", "USER", _x("r.user"), aliases=("user",)),
    F("v", "Reservation", "RESERVATION", lambda r, c: r.extra.get("reservation") or "(null)"),  # jobs.fill_reservations
    F("w", "WCKey", "WCKEY", _c("(null)")),
    F("x", "ExcNodes", "EXC_NODES", _d("exc_nodes", "")),
    F("y", "Nice", "NICE", _d("nice", "0"), key=lambda r, c: r.nice),
    F("z", "SCT", "S:C:T", _c("*:*:*")),
    F("A", "JobID", "JOBID", _x("str(task_job_id(r.job_id, r.array_task))"), key=_id_key),  # a task's own id
    F("B", "BatchHost", "EXEC_HOST", lambda r, c: r.batch_host or "n/a"),
    F("C", "NumCPUs", "CPUS", _cpus, key=lambda r, c: r.num_cpus),
    F("D", "NumNodes", "NODES", _x("str(r.num_nodes)"), key=lambda r, c: r.num_nodes),
    F("E", "Dependency", "DEPENDENCY", dependency_text),
    F("F", "ArrayJobID", "ARRAY_JOB_ID", lambda r, c: str(r.job_id), key=lambda r, c: r.job_id),
    F("G", "GroupID", "GROUP", lambda r, c: "" if r.gid is None else str(r.gid), key=lambda r, c: r.gid or 0),
    F("H", "Sockets", "SOCKETS_PER_NODE", _c("*")),
    F("I", "Cores", "CORES_PER_SOCKET", _c("*")),
    F("J", "Threads", "THREADS_PER_CORE", _c("*")),
    F("K", "ArrayTaskID", "ARRAY_TASK_ID", lambda r, c: array_task_text(r)),
    F("L", "TimeLeft", "TIME_LEFT", time_left, cut=False),
    F("M", "TimeUsed", "TIME", _x("(SECS.get(u_ := run_secs(r, c)) or secs_text(u_))"), key=lambda r, c: run_secs(r, c), cut=False),
    F("N", "NodeList", "NODELIST", lambda r, c: nodes_text(r), aliases=("nodes",), cut=False),
    F("O", "Contiguous", "CONTIGUOUS", _c("0")),
    F("P", "Partition", "PARTITION", _x("r.partition")),
    F("Q", "PriorityLong", "PRIORITY", lambda r, c: str(r.priority), key=lambda r, c: r.priority),
    F("R", "ReasonList", "NODELIST(REASON)", _x("reason_list(r, c)")),
    F("S", "StartTime", "START_TIME", lambda r, c: time_text(r.start_time, c), key=_ts("start_time")),
    F("T", "State", "STATE", _x("('STOPPED' if r.state == 'RUNNING' and r.extra.get('stopped') else r.state)")),
    F("U", "UserID", "UID", lambda r, c: "" if r.uid is None else str(r.uid), key=lambda r, c: r.uid or 0),
    F("V", "SubmitTime", "SUBMIT_TIME", submit_time, key=_ts("submit_time")),
    F("W", "Licenses", "LICENSES", _d("licenses")),
    F("X", "CoreSpec", "CORE_SPEC", _c("N/A")),
    F("Y", "SchedNodes", "SCHEDNODES", _c("(null)")),
    F("Z", "WorkDir", "WORK_DIR", _d("work_dir")),
    # -O only
    F(None, "AccrueTime", "ACCRUE_TIME", lambda r, c: time_text(r.submit_time, c, "Unknown")),
    F(None, "admin_comment", "ADMIN_COMMENT", _c("(null)")),
    F(None, "AllocNodes", "ALLOC_NODES", _c("")),
    F(None, "AllocSID", "ALLOC_SID", _c("0")),
    F(None, "AssocID", "ASSOC_ID", _c("0")),
    F(None, "BatchFlag", "BATCH_FLAG", _c("1")),
    F(None, "BoardsPerNode", "BOARDS_PER_NODE", _c("0")),
    F(None, "BurstBuffer", "BURST_BUFFER", _c("(null)")),
    F(None, "BurstBufferState", "BURST_BUFFER_STATE", _c("(null)")),
    F(None, "Cluster", "CLUSTER", lambda r, c: c.cfg.cluster.name),
    F(None, "ClusterFeature", "CLUSTER_FEATURE", _c("(null)")),
    F(None, "Container", "CONTAINER", _c("(null)")),
    F(None, "CPUFreq", "CPU_FREQ", _c("Unknown")),
    F(None, "cpus-per-task", "CPUS_PER_TASK", _d("cpus_per_task", "1"), aliases=("cpuspertask",)),
    F(None, "cpus-per-tres", "CPUS_PER_TRES", _c("N/A")),
    F(None, "Deadline", "DEADLINE", _c("N/A")),
    F(None, "DelayBoot", "DELAY_BOOT", _c("0:00")),
    F(None, "DerivedEC", "DERIVED_EC", _c("0:0")),
    F(None, "EligibleTime", "ELIGIBLE_TIME", lambda r, c: time_text(r.eligible_time or r.submit_time, c)),
    F(None, "exit_code", "EXIT_CODE", lambda r, c: f"{r.exit_code or 0}:{r.exit_signal or 0}"),
    F(None, "HetJobID", "HET_JOB_ID", _c("0")),
    F(None, "HetJobIDSet", "HET_JOB_ID_SET", _c("(null)")),
    F(None, "HetJobOffset", "HET_JOB_OFFSET", _c("0")),
    F(None, "LastSchedEval", "LAST_SCHED_EVAL", lambda r, c: time_text(r.start_time or r.submit_time, c)),
    F(None, "MaxCPUs", "MAX_CPUS", _c("0")),
    F(None, "MaxNodes", "MAX_NODES", _c("0")),
    F(None, "MCSLabel", "MCSLABEL", _c("N/A")),
    F(None, "mem-per-tres", "MEM_PER_TRES", _c("N/A")),
    F(None, "MinTime", "MIN_TIME", _c("0:00")),
    F(None, "Network", "NETWORK", _c("(null)")),
    F(None, "NTPerBoard", "NTASKS_PER_BOARD", _c("0")),
    F(None, "NTPerCore", "NTASKS_PER_CORE", _c("0")),
    F(None, "NTPerNode", "NTASKS_PER_NODE", _c("0")),
    F(None, "NTPerSocket", "NTASKS_PER_SOCKET", _c("0")),
    F(None, "NumTasks", "TASKS", _d("num_tasks", "1")),
    F(None, "Origin", "ORIGIN", _c("")),
    F(None, "OriginRaw", "ORIGIN_RAW", _c("")),
    F(None, "PendingTime", "PENDING_TIME", lambda r, c: str(_pending_secs(r, c))),
    F(None, "PreemptTime", "PREEMPT_TIME", _c("N/A")),
    F(None, "Prefer", "PREFER", _c("(null)")),
    F(None, "Profile", "PROFILE", _c("NotSet")),
    F(None, "Reboot", "REBOOT", _c("0")),
    F(None, "ReqSwitch", "REQ_SWITCH", _c("0")),
    F(None, "Requeue", "REQUEUE", lambda r, c: "1" if r.requeue else "0"),
    F(None, "ResizeTime", "RESIZE_TIME", _c("N/A")),
    F(None, "RestartCnt", "RESTART_COUNT", _c("0")),
    F(None, "ResvPort", "RESV_PORT", _c("")),
    F(None, "SiblingsActive", "CLUSTERS_ACTIVE", _c("")),
    F(None, "SiblingsActiveRaw", "CLUSTER_IDS_ACTIVE", _c("")),
    F(None, "SiblingsViable", "CLUSTERS_VIABLE", _c("")),
    F(None, "SiblingsViableRaw", "CLUSTER_IDS_VIABLE", _c("")),
    F(None, "SPerBoard", "SOCKETS_PER_BOARD", _c("0")),
    F(None, "STDERR", "STDERR", _std("err"), aliases=("StdErr",)),
    F(None, "STDIN", "STDIN", _std("in"), aliases=("StdIn",)),
    F(None, "STDOUT", "STDOUT", _std("out"), aliases=("StdOut",)),
    F(None, "StepID", "STEPID", lambda r, c: r.display_id),
    F(None, "StepName", "STEPNAME", lambda r, c: r.name),
    F(None, "StepState", "STEPSTATE", lambda r, c: r.state),
    F(None, "system_comment", "SYSTEM_COMMENT", _c("(null)")),
    F(None, "tres-alloc", "TRES_ALLOC", lambda r, c: tres_text(r, c)),
    F(None, "tres-bind", "TRES_BIND", _c("N/A")),
    F(None, "tres-freq", "TRES_FREQ", _c("N/A")),
    F(None, "tres-per-job", "TRES_PER_JOB", _c("N/A")),
    F(None, "tres-per-socket", "TRES_PER_SOCKET", _c("N/A")),
    F(None, "tres-per-step", "TRES_PER_STEP", _c("N/A")),
    F(None, "tres-per-task", "TRES_PER_TASK", _c("N/A")),
    F(None, "UserID", "UID", lambda r, c: "" if r.uid is None else str(r.uid)),
    F(None, "Wait4Switch", "WAIT4SWITCH", _c("0")),
)

REGISTRY = Registry(SQUEUE_FIELDS)


# Which fields show what only the submit record knows (jobs.detail), and for which records: the
# command fills that detail (and the group's name, shows_group) before it sorts and renders, so
# that no getter reads a file or asks the name service.
def _always(rec: JobRecord) -> bool:
    return True


def _pending(rec: JobRecord) -> bool:
    return rec.state == "PENDING"


def _no_submit_time(rec: JobRecord) -> bool:
    return rec.submit_time is None


def _open_end(rec: JobRecord) -> bool:
    return rec.end_time is None and rec.start_time is not None and rec.state in ("RUNNING", "SUSPENDED")


_DETAIL_WHEN: dict[str, Callable[[JobRecord], bool]] = {
    **dict.fromkeys(("Account", "tres-per-node", "MinCpus", "Feature", "Comment", "TimeLimit", "MinMemory",
                     "ReqNodes", "Command", "QOS", "ExcNodes", "Nice", "Dependency", "TimeLeft", "Licenses",
                     "WorkDir", "cpus-per-task", "NumTasks", "Requeue", "STDERR", "STDIN", "STDOUT",
                     "tres-alloc"), _always),
    "NumCPUs": _pending, "SubmitTime": _no_submit_time, "EndTime": _open_end,
}
DETAIL: dict[FieldSpec, Callable[[JobRecord], bool]] = {
    f: _DETAIL_WHEN[f.name] for f in SQUEUE_FIELDS if f.name in _DETAIL_WHEN}


def shows_group(fields: Iterable[FieldSpec]) -> bool:
    """Whether the fields show the group's name (the command looks it up: rec.group)."""
    return any(f.name == "GroupName" for f in fields)


def shows_reservation(fields: Iterable[FieldSpec]) -> bool:
    """Does the listing show or sort by the job's reservation (``%v``, ``-O reservation``)? Only
    then is it read (jobs.fill_reservations: one qrstat call, and qstat -j when Grid Engine
    has advance reservations)."""
    return any(f.name == "Reservation" for f in fields)


def detail_wanted(fields: Iterable[FieldSpec]) -> Callable[[JobRecord], bool] | None:
    """For the fields a listing shows or sorts by: which records need their detail filled
    (jobs.detail) first; None when none does."""
    whens = {DETAIL[f] for f in fields if f in DETAIL}
    if not whens:
        return None
    if _always in whens:
        return _always
    return lambda rec: any(when(rec) for when in whens)


def _limit_key(rec: JobRecord, ctx: Ctx) -> int:
    return rec.time_limit if rec.time_limit is not None and rec.time_limit >= 0 else 1 << 40


def _pending_secs(rec: JobRecord, ctx: Ctx) -> int:
    if rec.submit_time is None:
        return 0
    end = rec.start_time.timestamp() if rec.start_time else ctx.now
    return max(0, int(end - rec.submit_time.timestamp()))


# ---------------------------------------------------------------------------------------------
# --json (OpenAPI v0.0.38, as squeue 22.05 prints it)


def _epoch(dt: datetime | None) -> int:
    return int(dt.timestamp()) if dt else 0


def job_json(rec: JobRecord, ctx: Ctx) -> dict[str, Any]:
    running = rec.state not in ("PENDING",) and bool(rec.nodes)
    mem = rec.min_memory_mb
    return {
        "account": rec.account or "",
        "accrue_time": _epoch(rec.submit_time),
        "admin_comment": "",
        "array_job_id": rec.job_id if rec.is_array else 0,
        "array_task_id": rec.array_task,
        "array_max_tasks": rec.array_max_tasks or 0,
        "array_task_string": rec.array_pending or "",
        "association_id": 0,
        "batch_features": "",
        "batch_flag": True,
        "batch_host": rec.batch_host,
        "flags": ["JOB_WAS_RUNNING"] if running else [],
        "burst_buffer": "",
        "burst_buffer_state": "",
        "cluster": ctx.cfg.cluster.name,
        "cluster_features": "",
        "command": rec.command,
        "comment": rec.comment,
        "container": "",
        "contiguous": False,
        "core_spec": None,
        "thread_spec": None,
        "cores_per_socket": None,
        "billable_tres": float(rec.num_cpus),
        "cpus_per_task": rec.cpus_per_task if rec.cpus_per_task > 1 else None,
        "cpu_frequency_minimum": None,
        "cpu_frequency_maximum": None,
        "cpu_frequency_governor": None,
        "cpus_per_tres": "",
        "deadline": 0,
        "delay_boot": 0,
        "dependency": rec.dependency,
        "derived_exit_code": 0,
        "eligible_time": _epoch(rec.eligible_time or rec.submit_time),
        "end_time": _epoch(rec.end_time),
        "excluded_nodes": rec.exc_nodes,
        "exit_code": ((rec.exit_code or 0) << 8) | (rec.exit_signal or 0),
        "features": rec.features,
        "federation_origin": "",
        "federation_siblings_active": "",
        "federation_siblings_viable": "",
        "gres_detail": [],
        "group_id": rec.gid if rec.gid is not None else 0,
        "group_name": rec.group,
        "job_id": task_job_id(rec.job_id, rec.array_task),
        "job_resources": ({"nodes": nodes_text(rec), "allocated_cores": rec.num_cpus,
                           "allocated_hosts": len(rec.nodes), "allocated_nodes": []} if running else {}),
        "job_state": shown_state(rec),
        "last_sched_evaluation": _epoch(rec.start_time or rec.submit_time),
        "licenses": rec.licenses,
        "max_cpus": 0,
        "max_nodes": 0,
        "mcs_label": "",
        "memory_per_tres": "",
        "name": rec.name,
        "nodes": nodes_text(rec),
        "nice": rec.nice or None,
        "tasks_per_core": None,
        "tasks_per_node": 0,
        "tasks_per_socket": None,
        "tasks_per_board": 0,
        "cpus": rec.num_cpus,
        "node_count": rec.num_nodes,
        "tasks": rec.num_tasks,
        "het_job_id": 0,
        "het_job_id_set": "",
        "het_job_offset": 0,
        "partition": rec.partition,
        "prefer": "",
        "memory_per_node": mem if mem and not rec.mem_per_cpu else None,
        "memory_per_cpu": mem if mem and rec.mem_per_cpu else None,
        "minimum_cpus_per_node": rec.cpus_per_task,
        "minimum_tmp_disk_per_node": 0,
        "preempt_time": 0,
        "pre_sus_time": 0,
        "priority": rec.priority,
        "profile": None,
        "qos": rec.qos or "normal",
        "reboot": False,
        "required_nodes": rec.req_nodes,
        "requeue": rec.requeue,
        "resize_time": 0,
        "restart_cnt": 0,
        "resv_name": rec.extra.get("reservation") or "",
        "shared": None,
        "show_flags": ["SHOW_ALL", "SHOW_DETAIL", "SHOW_LOCAL"],
        "sockets_per_board": 0,
        "sockets_per_node": None,
        "start_time": _epoch(rec.start_time),
        "state_description": "",
        "state_reason": rec.reason,
        "standard_error": rec.std_err if rec.std_err != rec.std_out else "",
        "standard_input": rec.std_in or "/dev/null",
        "standard_output": rec.std_out,
        "submit_time": _epoch(rec.submit_time),
        "suspend_time": 0,
        "system_comment": "",
        "time_limit": rec.time_limit if rec.time_limit is not None and rec.time_limit >= 0 else None,
        "time_minimum": 0,
        "threads_per_core": None,
        "tres_bind": "",
        "tres_freq": "",
        "tres_per_job": "",
        "tres_per_node": rec.gres,
        "tres_per_socket": "",
        "tres_per_task": "",
        "tres_req_str": tres_text(rec, ctx),
        "tres_alloc_str": tres_text(rec, ctx) if running else "",
        "user_id": rec.uid if rec.uid is not None else 0,
        "user_name": rec.user,
        "wckey": "",
        "current_working_directory": rec.work_dir,
    }


def json_document(records: list[JobRecord], ctx: Ctx) -> str:
    """The whole ``squeue --json`` text: 2-space indent and ``\\/`` escapes, as Slurm's serializer
    (22.05's OpenAPI v0.0.38; 24.11's and 26.05's layouts: render/openapi.py)."""
    doc = {
        "meta": {
            "plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
            "Slurm": {"version": version_json(), "release": SLURM_VERSION},
        },
        "errors": [],
        "jobs": [job_json(r, ctx) for r in records],
    }
    import json

    return json.dumps(doc, indent=2).replace("/", "\\/")


def yaml_document(records: list[JobRecord], ctx: Ctx) -> str:
    """``--yaml``: the ``--json`` document in Slurm's YAML dialect (render/yaml.py, shared with sacct)."""
    import json

    from .yaml import document

    return document(json.loads(json_document(records, ctx)))


# ---------------------------------------------------------------------------------------------
# -s/--steps: Grid Engine has no steps; a running batch job shows its batch step, as in Slurm


class StepRow:
    __slots__ = ("job",)

    def __init__(self, job: JobRecord):
        self.job = job

    @property
    def step_id(self) -> str:
        return f"{self.job.display_id}.batch"


def steps_rows(records: list[JobRecord]) -> list[StepRow]:
    return [StepRow(r) for r in records if r.state in ("RUNNING", "SUSPENDED", "COMPLETING") and r.nodes]


STEP_FIELDS: tuple[FieldSpec, ...] = (
    F("i", "StepID", "STEPID", lambda s, c: s.step_id),
    F("j", "StepName", "NAME", lambda s, c: "batch"),
    F("P", "Partition", "PARTITION", lambda s, c: s.job.partition),
    F("u", "UserName", "USER", lambda s, c: s.job.user),
    F("U", "UserID", "UID", lambda s, c: "" if s.job.uid is None else str(s.job.uid)),
    F("M", "TimeUsed", "TIME", lambda s, c: print_secs(run_secs(s.job, c))),
    F("N", "NodeList", "NODELIST", lambda s, c: nodes_text(s.job)),
    F("A", "NumTasks", "TASKS", lambda s, c: "1"),
    F("l", "TimeLimit", "TIME_LIMIT", lambda s, c: time_limit(s.job, c)),
    F("S", "StartTime", "START_TIME", lambda s, c: time_text(s.job.start_time, c)),
    F("T", "StepState", "STATE", lambda s, c: s.job.state),
)
STEP_REGISTRY = Registry(STEP_FIELDS)
DETAIL.update({f: _always for f in STEP_FIELDS if f.name == "TimeLimit"})
