"""sacct's output: every field name of Slurm 22.05, its default width, and the three layouts.

Fixed width (the default): each field right-justified in its width (JobID and JobIDRaw
left-justified), one blank after every field, a line of dashes under the header, text longer
than the width cut with ``+`` at the end (numbers are never cut). ``Name%N`` sets the width and
right-justifies, ``Name%-N`` left-justifies. ``-p``: fields joined by ``|`` (or --delimiter) with
one after the last; ``-P``: without it.

A ``Row`` is one line: a job (or array task) or one of its steps (``.batch``). Values a Grid Engine
cluster cannot know print empty, as Slurm prints fields its plugins did not fill.
"""

from __future__ import annotations

import json
import time

from ... import SLURM_VERSION
from .text import UNIT_KILO, UNIT_MEGA, convert_num_unit, mins2time_str, secs2time_str, version_json

# name -> default width (negative: left-justified), in the order of ``sacct --helpformat``
FIELD_WIDTHS: dict[str, int] = {
    "Account": 10, "AdminComment": 15, "AllocCPUS": 10, "AllocNodes": 10,
    "AllocTRES": 10, "AssocID": 7, "AveCPU": 10, "AveCPUFreq": 10,
    "AveDiskRead": 14, "AveDiskWrite": 14, "AvePages": 10, "AveRSS": 10,
    "AveVMSize": 10, "BlockID": 16, "Cluster": 10, "Comment": 14,
    "Constraints": 19, "ConsumedEnergy": 14, "ConsumedEnergyRaw": 17, "Container": 19,
    "CPUTime": 10, "CPUTimeRAW": 10, "DBIndex": 10, "DerivedExitCode": 15,
    "Elapsed": 10, "ElapsedRaw": 10, "Eligible": 19, "End": 19,
    "ExitCode": 8, "Flags": 19, "GID": 6, "Group": 9,
    "JobID": -12, "JobIDRaw": -12, "JobName": 10, "Layout": 9,
    "MaxDiskRead": 12, "MaxDiskReadNode": 15, "MaxDiskReadTask": 15, "MaxDiskWrite": 12,
    "MaxDiskWriteNode": 16, "MaxDiskWriteTask": 16, "MaxPages": 8, "MaxPagesNode": 12,
    "MaxPagesTask": 14, "MaxRSS": 10, "MaxRSSNode": 10, "MaxRSSTask": 10,
    "MaxVMSize": 10, "MaxVMSizeNode": 14, "MaxVMSizeTask": 14, "McsLabel": 12,
    "MinCPU": 10, "MinCPUNode": 10, "MinCPUTask": 10, "NCPUS": 10,
    "NNodes": 8, "NodeList": 15, "NTasks": 8, "Partition": 10,
    "Priority": 10, "QOS": 10, "QOSRAW": 6, "Reason": 22,
    "ReqCPUFreq": 10, "ReqCPUFreqGov": 13, "ReqCPUFreqMax": 13, "ReqCPUFreqMin": 13,
    "ReqCPUS": 8, "ReqMem": 10, "ReqNodes": 8, "ReqTRES": 10,
    "Reservation": 20, "ReservationId": 8, "Reserved": 10, "ResvCPU": 10,
    "ResvCPURAW": 10, "Start": 19, "State": 10, "Submit": 19,
    "SubmitLine": 20, "Suspended": 10, "SystemComment": 15, "SystemCPU": 10,
    "Timelimit": 10, "TimelimitRaw": 10, "TotalCPU": 10, "TRESUsageInAve": 14,
    "TRESUsageInMax": 14, "TRESUsageInMaxNode": 18, "TRESUsageInMaxTask": 18, "TRESUsageInMin": 14,
    "TRESUsageInMinNode": 18, "TRESUsageInMinTask": 18, "TRESUsageInTot": 14, "TRESUsageOutAve": 15,
    "TRESUsageOutMax": 15, "TRESUsageOutMaxNode": 19, "TRESUsageOutMaxTask": 19, "TRESUsageOutMin": 15,
    "TRESUsageOutMinNode": 19, "TRESUsageOutMinTask": 19, "TRESUsageOutTot": 15, "UID": 6,
    "User": 9, "UserCPU": 10, "WCKey": 10, "WCKeyID": 10,
    "WorkDir": 20,
}
FIELD_NAMES = list(FIELD_WIDTHS)  # 22.05's; a newer release's are in its table (releases.py, sacct --helpformat)
# the newer releases' fields, with the default widths 24.11.5 and 26.05.5 print them
# (fixtures/slurm-*/oracle-sacct.json); 22.05's Reserved, ResvCPU and ResvCPURAW became Planned...
NEWER_WIDTHS: dict[str, int] = {
    "Extra": 14, "FailedNode": 8, "Licenses": 10, "Planned": 10, "PlannedCPU": 10, "PlannedCPURAW": 13,
    "QOSREQ": 10, "Restarts": 8, "SLUID": 14, "StdErr": 20, "StdIn": 20, "StdOut": 20,
    "Exclusive": 14, "OriginalSLUID": 14, "OverSubscribe": 14, "ReqReservation": 20, "SegmentSize": 11,
}
FIELD_WIDTHS.update(NEWER_WIDTHS)

# numbers: printed in full even when wider than the column, blank when unknown
NUMERIC = frozenset({
    "AllocCPUS", "AllocNodes", "AssocID", "ConsumedEnergyRaw", "CPUTimeRAW", "DBIndex", "ElapsedRaw", "GID",
    "MaxDiskReadTask", "MaxDiskWriteTask", "MaxPagesTask", "MaxRSSTask", "MaxVMSizeTask", "MinCPUTask", "NCPUS",
    "NNodes", "NTasks", "Priority", "QOSRAW", "ReqCPUS", "ReservationId", "ResvCPURAW", "UID", "WCKeyID",
})

DEFAULT_FIELDS = "jobid,jobname,partition,account,alloccpus,state,exitcode"
BRIEF_FIELDS = "jobid,state,exitcode"
LONG_FIELDS = ("jobid,jobidraw,jobname,partition,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,"
               "maxrssnode,maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,"
               "mincputask,avecpu,ntasks,alloccpus,elapsed,state,exitcode,avecpufreq,reqcpufreqmin,"
               "reqcpufreqmax,reqcpufreqgov,reqmem,consumedenergy,maxdiskread,maxdiskreadnode,"
               "maxdiskreadtask,avediskread,maxdiskwrite,maxdiskwritenode,maxdiskwritetask,avediskwrite,"
               "reqtres,alloctres,tresusageinave,tresusageinmax,tresusageinmaxn,tresusageinmaxt,"
               "tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot,tresusageoutmax,"
               "tresusageoutmaxn,tresusageoutmaxt,tresusageoutave,tresusageouttot")



class FieldError(ValueError):
    """A field name that matches nothing; ``name`` is the text as given."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable

    from .fmt import Column, FieldSpec, Format


def _field(name: str) -> FieldSpec:
    from .fmt import FieldSpec

    return FieldSpec(None, name, name, GETTERS[name], cut=name not in NUMERIC)


def field_names(spec: str, names: list[str] | None = None) -> list[tuple[str, int | None]]:
    """A ``--format`` list, read: ``(field name, width or None)`` per item. Comma-separated names,
    case-insensitive, any prefix of a name (the first field in --helpformat order whose name
    starts with it), each with an optional ``%width`` (negative: left-justified); ``ALL`` is every
    field. ``names``: the release's fields in its --helpformat order (default: 22.05's). Raises
    FieldError. (The grammar alone: --json checks the fields without the engine.)"""
    names = FIELD_NAMES if names is None else names
    out: list[tuple[str, int | None]] = []
    for raw in spec.split(","):
        item = raw.lstrip()
        if not item:
            continue
        width: int | None = None
        if "%" in item:
            item, _, w = item.partition("%")
            width = _atoi(w)
        low = item.lower()
        if low and "all".startswith(low):
            out.extend((name, width) for name in names)
            continue
        name = next((n for n in names if n.lower().startswith(low)), None)
        if name is None:
            raise FieldError(item)
        out.append((name, width))
    return out


def columns(names: list[tuple[str, int | None]]) -> list[Column]:
    """Fields read by field_names as ``fmt.Column``s of the registry's fields, each as wide as its
    field's default or the width given."""
    reg = registry()
    return [_column(reg.named(name) or _field(name), width) for name, width in names]


def parse_fields(spec: str) -> list[Column]:
    """A ``--format`` list as columns (field_names, then columns)."""
    return columns(field_names(spec))


def _column(f: FieldSpec, width: int | None) -> Column:
    """sacct's column policy on fmt: right-justified unless the width is negative (JobID's default),
    one blank after it, a longer value cut with ``+`` (numbers printed in full)."""
    from .fmt import FULL, PLUS, Column

    w = width if width is not None else FIELD_WIDTHS[f.name]
    return Column(f, abs(w), w >= 0, " ", PLUS if f.cut else FULL)


def _atoi(text: str) -> int:
    """C's atoi: optional sign and leading digits, 0 if none."""
    text = text.strip()
    sign = 1
    if text[:1] in "+-":
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    n = 0
    for ch in text:
        if not ch.isdigit():
            break
        n = n * 10 + ord(ch) - 48
    return sign * n


def helpformat() -> str:
    """``sacct --helpformat``: the names, four to a line, each padded to 19."""
    parts: list[str] = []
    for i, name in enumerate(FIELD_NAMES):
        if i & 3:
            parts.append(" ")
        elif i:
            parts.append("\n")
        parts.append(f"{name:<19}")
    return "".join(parts) + "\n"


# ---------------------------------------------------------------------------------------------
# value formatting, as Slurm prints it


def time_text(secs: int | None) -> str:
    """Elapsed-style time, ``[D-]HH:MM:SS`` (text.secs2time_str; never below 0, blank if unknown)."""
    if secs is None:
        return ""
    return secs2time_str(max(0, int(secs)))


def cpu_text(secs: float | None) -> str:
    """TotalCPU/UserCPU/SystemCPU as sacct's own _elapsed_time prints them (src/sacct/print.c):
    MM:SS.mmm under an hour, else [DD-]HH:MM:SS."""
    if secs is None:
        return ""
    whole = int(secs)
    usec = int(round((secs - whole) * 1_000_000))
    if usec >= 1_000_000:
        whole += 1
        usec -= 1_000_000
    msec = usec // 1000
    days, rem = divmod(whole, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, seconds = divmod(rem, 60)
    if days:
        return f"{days:02d}-{hours:02d}:{minutes:02d}:{seconds:02d}"
    if hours:
        return f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if msec:
        return f"{minutes:02d}:{seconds:02d}.{msec:03d}"
    return f"00:{minutes:02d}:{seconds:02d}"


def limit_text(minutes: int | None) -> str:
    """Timelimit: UNLIMITED, Partition_Limit (not yet known), [D-]HH:MM:SS."""
    if minutes is None:
        return "Partition_Limit"
    if minutes < 0:
        return "UNLIMITED"
    return mins2time_str(minutes)


_TIME_FORMAT: str | None = None
_DATES: dict[float | int, str] = {}  # time stamp -> text: a job's times recur on its step's row


def reset() -> None:
    """Forget the dates already formatted (the time zone may have changed since)."""
    _DATES.clear()


def date_text(ts: float | int | None) -> str:
    """A date as sacct prints it (SLURM_TIME_FORMAT honoured); callers handle None/0."""
    text = _DATES.get(ts)  # type: ignore[arg-type]
    if text is not None:
        return text
    global _TIME_FORMAT
    if _TIME_FORMAT is None:
        import os

        f = os.environ.get("SLURM_TIME_FORMAT", "")
        _TIME_FORMAT = "%Y-%m-%dT%H:%M:%S" if f in ("", "standard", "iso8601", "relative") else f
    text = time.strftime(_TIME_FORMAT, time.localtime(ts))
    if len(_DATES) < 65536:
        _DATES[ts] = text  # type: ignore[index]
    return text


def mem_mb_text(mb: int | float | None) -> str:
    if mb is None:
        return ""
    return convert_num_unit(mb, UNIT_MEGA)


def tres_text(cpus: int | None, mem_mb: float | None, nodes: int | None, extra: dict[str, int] | None = None,
              billing: bool = True) -> str:
    """``billing=1,cpu=1,mem=100M,node=1`` (alphabetical, as sacct prints TRES)."""
    items: dict[str, str] = {}
    if cpus:
        items["cpu"] = str(cpus)
        if billing:
            items["billing"] = str(cpus)
    if mem_mb:
        items["mem"] = mem_mb_text(mem_mb)
    if nodes:
        items["node"] = str(nodes)
    for k, v in (extra or {}).items():
        items[k] = str(v)
    return ",".join(f"{k}={items[k]}" for k in sorted(items))


# ---------------------------------------------------------------------------------------------
# rows


class Row:
    """One output line. Times are epoch seconds (None when unknown); ``step`` is None for the job
    row, else the step name (``batch``). Only the given attributes are stored; the rest read as
    the class defaults below (rows are made by the ten thousand)."""

    job_id = 0
    task = None
    array_text = None
    step = None
    raw_id = None
    name = ""
    partition = ""
    account = ""
    user = ""
    uid = None
    group = ""
    gid = None
    state = ""
    cancel_uid = None
    exit = 0
    signal = 0
    submit = None
    eligible = None
    start = None
    end = None
    now = None
    ncpus = None
    nnodes = None
    nodes: list = []
    ntasks = None
    time_limit = None
    req_mem_mb = None
    tres = None  # (cpus, mem MB, nodes, extra TRES, billing) -> ReqTRES/AllocTRES text on demand
    allocated = True  # AllocTRES only for jobs that got an allocation
    maxrss_kb = None
    maxvmem_kb = None
    total_cpu = None
    user_cpu = None
    sys_cpu = None
    reason = None
    comment = ""
    admin_comment = ""  # a job's own metrics (gridengine/metrics.py: name=value,name=value)
    workdir = ""
    qos = ""
    priority = None
    cluster = ""
    submit_line = ""
    constraints = ""
    flags = ""
    order = 0
    sluid_ms = None  # the job's creation in ms (its submit record's), for SLUID; None: its submit time
    exclusive = ""  # 26.05's Exclusive (NO, NODE, USER, ...) and OverSubscribe (NO, YES), as asked
    oversubscribe = ""
    derived = None  # DerivedExitCode: (exit code, signal) of the job's worst srun step; None: 0:0
    exit_wrap = False  # ExitCode of 128 or more printed less 128 (22.05's, 24.11's sacct: releases.SACCT_EXIT_AS_IS)
    std = None  # the output paths (Stdio), None where sacct knows none: StdOut, StdErr, StdIn print empty
    expand = False  # --expand-patterns: StdOut, StdErr, StdIn expanded

    def __init__(self, **kw: Any):
        self.__dict__.update(kw)
        if "extra" not in kw:
            self.extra = {}

    @property
    def req_tres(self) -> str:
        return tres_text(*self.tres) if self.tres else ""

    @property
    def alloc_tres(self) -> str:
        return tres_text(*self.tres) if self.tres and self.allocated else ""

    # -- derived values
    @property
    def job_text(self) -> str:
        if self.array_text is not None:
            base = f"{self.job_id}_{self.array_text}"
        elif self.task is not None:
            base = f"{self.job_id}_{self.task}"
        else:
            base = str(self.job_id)
        return f"{base}.{self.step}" if self.step else base

    @property
    def raw_text(self) -> str:
        """JobIDRaw: ``G_t`` for an array task. Slurm prints the task's own job id, and one of an
        array's tasks (the last split off) has the array's: snakemake's slurm plugin finds an
        array task's state by ``G_t``, else by ``G`` (sacct -X --format=JobIdRaw,State), so with
        our ids (task 0 keeps G, docs/array-ids.md) the task's own id would leave it waiting
        forever. ``sacct -j`` takes the task's own id all the same."""
        base = self.raw_id if self.raw_id is not None else (
            f"{self.job_id}_{self.task}" if self.task is not None else str(self.job_id))
        return f"{base}.{self.step}" if self.step else base

    @property
    def state_text(self) -> str:
        if self.state == "CANCELLED" and self.cancel_uid is not None and not self.step:
            return f"CANCELLED by {self.cancel_uid}"
        return self.state or ""

    @property
    def exit_text(self) -> str:
        """ExitCode: ``<exit code>:<signal>``; with ``exit_wrap`` an exit code of 128 or more less
        128 (real 22.05.8 and 24.11.5: exit 143 is 15:0, 200 is 72:0; 26.05.5 prints it as it is)."""
        code = self.exit or 0
        if self.exit_wrap and code >= 128:
            code -= 128
        return f"{code}:{self.signal or 0}"

    @property
    def elapsed(self) -> int:
        if not self.start:
            return 0
        end = self.end if self.end else (self.now or time.time())
        return max(0, int(end - self.start))


# ---------------------------------------------------------------------------------------------
# output paths: StdOut, StdErr, StdIn (24.11 on) and --json's stdout, stderr, stdin (*_expanded)


class StdStyle:
    """What a release does with output paths in sacct (releases.SACCT_DEFAULT_OUT_AS_IS,
    SACCT_NODE_NONE, SACCT_PATTERN_KEEPS_UNKNOWN, SACCT_STEP_STDIO): the default pattern printed
    as it is (else under the working directory), %N's text for a job without a node, a width
    before a letter that is no pattern kept as written, srun steps' own paths on their rows."""

    __slots__ = ("default_as_is", "null_node", "keep_unknown", "steps")

    def __init__(self, default_as_is: bool = False, null_node: str = "(null)", keep_unknown: bool = False,
                 steps: bool = False):
        self.default_as_is, self.null_node, self.keep_unknown, self.steps = default_as_is, null_node, keep_unknown, steps

    @classmethod
    def of(cls, release: Any) -> StdStyle:
        from .. import releases

        return cls(release.has(releases.SACCT_DEFAULT_OUT_AS_IS),
                   "None" if release.has(releases.SACCT_NODE_NONE) else "(null)",
                   release.has(releases.SACCT_PATTERN_KEEPS_UNKNOWN), release.has(releases.SACCT_STEP_STDIO))


class Stdio:
    """A row's streams as sacct shows them, each a triple (stdout, stderr, stdin): ``shown`` what
    StdOut, StdErr and StdIn print, ``written`` what --json's stdout, stderr and stdin hold,
    ``paths`` the patterns --expand-patterns and the ``*_expanded`` keys expand; ``array`` (%A,
    %a), ``step`` (%s: ``batch`` on the job's row, else the srun step's id), ``name`` (%x where it
    is not the row's: a step's job), ``style`` (the release's StdStyle). Made once per job and
    shared by its rows; expanded only when a field asks."""

    __slots__ = ("shown", "written", "paths", "array", "step", "name", "style")

    def __init__(self, shown: tuple[str, str, str], written: tuple[str, str, str], paths: tuple[str, str, str],
                 array: bool, step: str, name: str | None, style: StdStyle):
        self.shown, self.written, self.paths = shown, written, paths
        self.array, self.step, self.name, self.style = array, step, name, style

    def expanded(self, i: int, r: Row) -> str:
        """Stream ``i`` (0 stdout, 1 stderr, 2 stdin) of row ``r`` with its patterns replaced."""
        return expand_path(self.paths[i], r, self)


def _under(path: str, cwd: str) -> str:
    """A relative path under the working directory, as sbatch and sacct make it absolute."""
    if not path or path.startswith("/") or not cwd:
        return path
    return cwd + path if cwd.endswith("/") else f"{cwd}/{path}"


def job_stdio(out: str | None, err: str | None, inp: str | None, workdir: str, array: bool,
              style: StdStyle) -> Stdio:
    """A batch job's streams from sbatch's -o, -e, -i as written (None where not given) and its
    working directory, as 24.11.5 and 26.05.5 print them (fixtures/slurm-*/oracle-sacct-stdio.json):
    a relative path under the working directory; without -o Slurm's default slurm-%j.out
    (slurm-%A_%a.out in an array) under it, or as it is (StdStyle.default_as_is); StdErr empty
    unless -e was given (merged with stdout), even where -e names the stdout's file; StdIn
    /dev/null unless -i. --json's fields hold the same."""
    default = "slurm-%A_%a.out" if array else "slurm-%j.out"
    out_path = _under(out or default, workdir)
    shown = (default if not out and style.default_as_is else out_path,
             _under(err, workdir) if err else "", _under(inp, workdir) if inp else "/dev/null")
    return Stdio(shown, shown, (out_path, shown[1], shown[2]), array, "batch", None, style)


def step_stdio(out: str | None, err: str | None, inp: str | None, cwd: str, step: Any, job_name: str,
               array: bool, style: StdStyle) -> Stdio | None:
    """A srun step's streams from srun's -o, -e, -i as written and its working directory, where
    the release shows them (StdStyle.steps: 26.05): the fields under the working directory,
    --json's as written, empty where not given (no /dev/null); None where it shows none."""
    if not style.steps or not (out or err or inp):
        return None
    written = (out or "", err or "", inp or "")
    paths = (_under(written[0], cwd), _under(written[1], cwd), _under(written[2], cwd))
    return Stdio(paths, written, paths, array, str(step), job_name, style)


def expand_path(pattern: str, r: Row, std: Stdio) -> str:
    """A stream's pattern as sacct --expand-patterns prints it (slurm/patterns.expand): %j the
    job's own id (an array task's, jobids.task_job_id, as its job wrapper named the file), %J
    the same (a step's: ``<id>.<step>``), %A the array's, %a the task (NO_VAL outside an array),
    %x the job's name, %u its user, %N its first node (StdStyle.null_node without one), %n and
    %t 0, %s ``batch`` or the step, %% one %."""
    if not pattern:
        return ""
    from ..jobids import NO_VAL, task_job_id
    from ..patterns import expand

    task = r.task if std.array else None
    own = task_job_id(r.job_id, task) if task is not None else r.job_id
    fields = {"j": own, "J": own if std.step == "batch" else f"{own}.{std.step}", "A": r.job_id,
              "a": task if task is not None else NO_VAL, "n": 0, "t": 0, "s": std.step,
              "x": std.name if std.name is not None else (r.name or ""), "u": r.user or "",
              "N": r.nodes[0] if r.nodes else std.style.null_node}
    return expand(pattern, fields, keep_unknown=std.style.keep_unknown)


def _std(i: int) -> Callable[..., str]:
    """StdOut (0), StdErr (1), StdIn (2): as shown, or expanded with --expand-patterns."""
    def get(r: Row, _c: Any = None) -> str:
        std = r.std
        if std is None:
            return ""
        return std.expanded(i, r) if r.expand else std.shown[i]
    return get


def _blank(_r: Row, _c: Any = None) -> str:
    return ""


def _job_only(f: Callable[..., str]) -> Callable[..., str]:
    return lambda r, c=None: "" if r.step else f(r)


def _num(v: Any) -> str:
    return "" if v is None else str(v)


def _start(r: Row, _c: Any = None) -> str:
    if r.start:
        return date_text(r.start)
    return "None" if r.end else "Unknown"


def _end(r: Row, _c: Any = None) -> str:
    return date_text(r.end) if r.end else "Unknown"


def _date(attr: str) -> Callable[..., str]:
    def get(r: Row, _c: Any = None) -> str:
        v = getattr(r, attr)
        return date_text(v) if v else "Unknown"
    return get


def _sluid(r: Row, _c: Any = None) -> str:
    """SLUID (and OriginalSLUID, the same for a job never requeued): the job's, as its job wrapper
    made SLURM_JOB_SLUID (releases.sluid), on the job's row and each of its steps'."""
    from .. import releases

    ms = r.sluid_ms if r.sluid_ms is not None else int((r.submit or 0) * 1000)
    return releases.sluid(r.cluster or "cluster", ms, r.job_id, r.task)


def _cputime(r: Row, _c: Any = None) -> str:
    return time_text(r.elapsed * (r.ncpus or 0))


def _nodelist(r: Row, _c: Any = None) -> str:
    if not r.nodes:
        return "None assigned"
    from ..hostlist import compress

    return compress(list(r.nodes))


def _exit(r: Row, _c: Any = None) -> str:
    return r.exit_text


def _derived(r: Row, _c: Any = None) -> str:
    d = r.derived
    return f"{d[0]}:{d[1]}" if d else "0:0"


def _mem_kb(attr: str) -> Callable[..., str]:
    def get(r: Row, _c: Any = None) -> str:
        v = getattr(r, attr)
        if not v or not r.step:  # never sampled: Slurm leaves it empty
            return ""
        return convert_num_unit(v, UNIT_KILO)
    return get


def _cpu(attr: str) -> Callable[..., str]:
    def get(r: Row, _c: Any = None) -> str:
        v = getattr(r, attr)
        return cpu_text(v if v is not None else 0.0)
    return get


def _limit(r: Row, _c: Any = None) -> str:
    if r.step:
        return ""
    return limit_text(r.time_limit)


def _limit_raw(r: Row, _c: Any = None) -> str:
    if r.step:
        return ""
    if r.time_limit is None:
        return "Partition_Limit"
    if r.time_limit < 0:
        return "UNLIMITED"
    return str(r.time_limit)


def _reserved(r: Row) -> int:
    if r.start and r.eligible:
        return max(0, int(r.start - r.eligible))
    return 0


GETTERS: dict[str, Callable[..., str]] = {name: _blank for name in FIELD_WIDTHS}
GETTERS.update({
    "Account": lambda r, c=None: r.account or "",
    "AdminComment": _job_only(lambda r, c=None: r.admin_comment or ""),
    "AllocCPUS": lambda r, c=None: _num(r.ncpus),
    "AllocNodes": lambda r, c=None: "" if r.step else _num(r.nnodes if r.start else 0),
    "AllocTRES": lambda r, c=None: r.alloc_tres or "",
    "Cluster": lambda r, c=None: r.cluster or "",
    "Comment": _job_only(lambda r, c=None: r.comment or ""),
    "Constraints": _job_only(lambda r, c=None: r.constraints or ""),
    "CPUTime": _cputime,
    "CPUTimeRAW": lambda r, c=None: str(r.elapsed * (r.ncpus or 0)),
    "DerivedExitCode": _job_only(_derived),
    "Elapsed": lambda r, c=None: time_text(r.elapsed),
    "ElapsedRaw": lambda r, c=None: str(r.elapsed),
    "Eligible": _date("eligible"),
    "End": _end,
    "ExitCode": _exit,
    "Flags": _job_only(lambda r, c=None: r.flags or ""),
    "GID": _job_only(lambda r, c=None: _num(r.gid)),
    "Group": _job_only(lambda r, c=None: r.group or ""),
    "JobID": lambda r, c=None: r.job_text,
    "JobIDRaw": lambda r, c=None: r.raw_text,
    "JobName": lambda r, c=None: "batch" if r.step == "batch" else (r.name or ""),
    "MaxRSS": _mem_kb("maxrss_kb"),
    "MaxRSSNode": lambda r, c=None: (r.nodes[0] if r.nodes else "") if r.step and r.maxrss_kb is not None else "",
    "MaxRSSTask": lambda r, c=None: "0" if r.step and r.maxrss_kb is not None else "",
    "MaxVMSize": _mem_kb("maxvmem_kb"),
    "MaxVMSizeNode": lambda r, c=None: (r.nodes[0] if r.nodes else "") if r.step and r.maxvmem_kb is not None else "",
    "MaxVMSizeTask": lambda r, c=None: "0" if r.step and r.maxvmem_kb is not None else "",
    "NCPUS": lambda r, c=None: _num(r.ncpus),
    "NNodes": lambda r, c=None: _num(r.nnodes),
    "NodeList": _nodelist,
    "NTasks": lambda r, c=None: _num(r.ntasks) if r.step else "",
    "Partition": _job_only(lambda r, c=None: r.partition or ""),
    "Priority": _job_only(lambda r, c=None: _num(r.priority)),
    "QOS": _job_only(lambda r, c=None: r.qos or ""),
    "Reason": _job_only(lambda r, c=None: r.reason or "None"),
    "ReqCPUS": _job_only(lambda r, c=None: _num(r.ncpus)),
    "ReqMem": _job_only(lambda r, c=None: mem_mb_text(r.req_mem_mb) if r.req_mem_mb else ""),
    "ReqNodes": _job_only(lambda r, c=None: _num(r.nnodes)),
    "ReqTRES": _job_only(lambda r, c=None: r.req_tres or ""),
    "Reserved": _job_only(lambda r, c=None: time_text(_reserved(r))),
    "ResvCPU": _job_only(lambda r, c=None: time_text(_reserved(r) * (r.ncpus or 0))),
    "ResvCPURAW": _job_only(lambda r, c=None: str(_reserved(r) * (r.ncpus or 0))),
    # 24.11's names of the three above
    "Planned": _job_only(lambda r, c=None: time_text(_reserved(r))),
    "PlannedCPU": _job_only(lambda r, c=None: time_text(_reserved(r) * (r.ncpus or 0))),
    "PlannedCPURAW": _job_only(lambda r, c=None: str(_reserved(r) * (r.ncpus or 0))),
    "SLUID": _sluid,
    "StdOut": _std(0),
    "StdErr": _std(1),
    "StdIn": _std(2),
    "OriginalSLUID": _sluid,
    "Exclusive": _job_only(lambda r, c=None: r.exclusive or "NO"),
    "OverSubscribe": _job_only(lambda r, c=None: r.oversubscribe or "NO"),
    "Start": _start,
    "State": lambda r, c=None: r.state_text,
    "Submit": _date("submit"),
    "SubmitLine": lambda r, c=None: r.submit_line or "",  # (a step's: srun's line; the batch step has none)
    "Suspended": lambda r, c=None: "00:00:00",
    "SystemCPU": _cpu("sys_cpu"),
    "Timelimit": _limit,
    "TimelimitRaw": _limit_raw,
    "TotalCPU": _cpu("total_cpu"),
    "UID": _job_only(lambda r, c=None: _num(r.uid)),
    "User": _job_only(lambda r, c=None: r.user or ""),
    "UserCPU": _cpu("user_cpu"),
    "WorkDir": _job_only(lambda r, c=None: r.workdir or ""),
})


# ---------------------------------------------------------------------------------------------
# layouts


# The commonest fields as expressions (fmt.getter, the same values as the functions they replace):
# a compiled line inlines them.
_INLINE = {
    "JobID": "r.job_text",
    "JobIDRaw": "r.raw_text",
    "JobName": '"batch" if r.step == "batch" else (r.name or "")',
    "Partition": '"" if r.step else (r.partition or "")',
    "Account": 'r.account or ""',
    "AllocCPUS": '"" if r.ncpus is None else str(r.ncpus)',
    "NCPUS": '"" if r.ncpus is None else str(r.ncpus)',
    "State": "r.state_text",
    "ExitCode": "r.exit_text",
    "User": '"" if r.step else (r.user or "")',
    "Group": '"" if r.step else (r.group or "")',
    "Cluster": 'r.cluster or ""',
}
_REGISTRY: Any = None


def registry() -> Any:
    """sacct's fields in ``--helpformat`` order, on the shared format engine (a fmt.Registry; made
    at first use, with the _INLINE getters: --json and --version do not load the engine)."""
    global _REGISTRY
    if _REGISTRY is None:
        from .fmt import Registry, getter

        GETTERS.update({name: getter(expr, globals()) for name, expr in _INLINE.items()})
        _REGISTRY = Registry(_field(name) for name in FIELD_NAMES)  # (a newer release's own: columns)
    return _REGISTRY


def __getattr__(name: str) -> Any:
    if name == "REGISTRY":
        return registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---------------------------------------------------------------------------------------------
# layouts


def layout(cols: list[Column], *, parsable: str | None = None, delimiter: str = "|") -> Format:
    """The columns as a line: fixed width (as parsed), or -p/-P (values as they are, joined by the
    delimiter, -p with one after the last)."""
    from .fmt import Column, Format

    if not parsable:
        return Format(list(cols))
    out = [Column(c.field, 0, False, delimiter) for c in cols]
    if not out:
        return Format(prefix=delimiter if parsable == "ending" else "")
    if parsable != "ending":
        out[-1].suffix = ""
    return Format(out)


def header_lines(cols: list[Column], *, parsable: str | None = None, delimiter: str = "|") -> list[str]:
    """The header: the names (and, in the fixed-width layout, a line of dashes). A name is cut to
    its column, without ``+``."""
    if parsable:
        line = delimiter.join(c.field.header for c in cols)
        return [line + delimiter if parsable == "ending" else line]
    from .fmt import cell

    return ["".join(cell(c.field.header[:c.width], c.width, c.right) + " " for c in cols),
            "".join("-" * c.width + " " for c in cols)]


def line_function(cols: list[Column], *, parsable: str | None = None, delimiter: str = "|") -> Callable[..., str]:
    """The layout of one row, compiled once (fmt.compile_row): a function of the row that returns
    its line (no newline). Fixed width: a value longer than its column is cut to ``width - 1``
    characters and ``+`` (not a number: those are printed in full), then padded. -p/-P: the
    values joined by the delimiter. Every value first goes through fmt.printable (names, paths
    and comments are users' text)."""
    from .fmt import compile_row

    return compile_row(layout(cols, parsable=parsable, delimiter=delimiter))


def render(rows: Iterable[Row], cols: list[Column], *, header: bool = True, parsable: str | None = None,
           delimiter: str = "|") -> str:
    """The whole output. parsable: None (fixed width), "ending" (-p) or "no_ending" (-P)."""
    out = header_lines(cols, parsable=parsable, delimiter=delimiter) if header else []
    line = line_function(cols, parsable=parsable, delimiter=delimiter)
    out.extend(line(r) for r in rows)
    return "\n".join(out) + "\n" if out else ""


# ---------------------------------------------------------------------------------------------
# --json (OpenAPI dbv0.0.38, the parts a Grid Engine cluster can fill)


def _exit_json(code: int, sig: int) -> dict[str, Any]:
    if sig:
        return {"status": "SIGNALED", "return_code": 0, "signal": {"signal_id": sig}}
    return {"status": "SUCCESS" if not code else "FAILED", "return_code": code}


def _tres_list(text: str) -> list[dict[str, Any]]:
    ids = {"cpu": 1, "mem": 2, "energy": 3, "node": 4, "billing": 5}
    out = []
    for item in filter(None, (text or "").split(",")):
        k, _, v = item.partition("=")
        typ, _, name = k.partition("/")
        count: Any = v
        if typ == "mem":
            count = _mem_to_mb(v)
        else:
            try:
                count = int(v)
            except ValueError:
                pass
        out.append({"type": typ, "name": name or None, "id": ids.get(typ, 1000), "count": count})
    return out


def _mem_to_mb(v: str) -> int:
    mult = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 ** 2}
    try:
        if v and v[-1] in mult:
            return int(float(v[:-1]) * mult[v[-1]])
        return int(float(v))
    except ValueError:
        return 0


def job_json(job: Row, steps: list[Row]) -> dict[str, Any]:
    st = job.state
    return {
        "account": job.account or "",
        "comment": {"administrator": job.admin_comment or None, "job": job.comment or None, "system": None},
        "allocation_nodes": job.nnodes if job.start else 0,
        "array": {
            "job_id": job.job_id if job.task is not None or job.array_text is not None else 0,
            "limits": {"max": {"running": {"tasks": int(job.extra.get("throttle") or 0)}}},
            "task": job.array_text,
            "task_id": job.task,
        },
        "association": {"account": job.account or "", "cluster": job.cluster or "", "partition": None,
                        "user": job.user or ""},
        "cluster": job.cluster or "",
        "constraints": job.constraints or "",
        "container": None,
        "derived_exit_code": _exit_json(*(job.derived or (0, 0))),
        "time": {
            "elapsed": job.elapsed,
            "eligible": int(job.eligible or 0),
            "end": int(job.end or 0),
            "start": int(job.start or 0),
            "submission": int(job.submit or 0),
            "suspended": 0,
            "system": _secs_usecs(job.sys_cpu),
            "limit": None if job.time_limit is None or job.time_limit < 0 else job.time_limit,
            "total": _secs_usecs(job.total_cpu),
            "user": _secs_usecs(job.user_cpu),
        },
        "exit_code": _exit_json(job.exit or 0, job.signal or 0),
        "flags": [],
        "group": job.group or "",
        "het": {"job_id": 0, "job_offset": None},
        "job_id": job.job_id,
        "name": job.name or "",
        "mcs": {"label": ""},
        "nodes": _nodelist(job),
        "partition": job.partition or "",
        "priority": job.priority or 0,
        "qos": job.qos or "",
        "required": {"CPUs": job.ncpus or 0, "memory": int(job.req_mem_mb or 0)},
        "kill_request_user": None if job.cancel_uid is None else str(job.cancel_uid),
        "reservation": {"id": 0, "name": 0},
        "state": {"current": st, "reason": job.reason or "None"},
        "steps": [step_json(s) for s in steps],
        "tres": {"allocated": _tres_list(job.alloc_tres or ""), "requested": _tres_list(job.req_tres or "")},
        "user": job.user or "",
        "wckey": {"wckey": "", "flags": []},
        "working_directory": job.workdir or "",
    }


def _secs_usecs(v: float | None) -> dict[str, int]:
    v = v or 0.0
    s = int(v)
    return {"seconds": s, "microseconds": int(round((v - s) * 1_000_000))}


def step_json(s: Row) -> dict[str, Any]:
    nodes = list(s.nodes or [])
    return {
        "nodes": {"list": nodes, "count": len(nodes), "range": _nodelist(s) if nodes else ""},
        "tres": {"requested": {"max": [], "min": [], "average": [], "total": []},
                 "consumed": {"max": [], "min": [], "average": [], "total": []},
                 "allocated": _tres_list(s.alloc_tres or "")},
        "time": {
            "elapsed": s.elapsed, "end": int(s.end or 0), "start": int(s.start or 0), "suspended": 0,
            "system": _secs_usecs(s.sys_cpu), "total": _secs_usecs(s.total_cpu), "user": _secs_usecs(s.user_cpu),
        },
        "exit_code": _exit_json(s.exit or 0, s.signal or 0),
        "tasks": {"count": s.ntasks or 1},
        "pid": None,
        "CPU": {"requested_frequency": {"min": 0, "max": 0}, "governor": []},
        "kill_request_user": None,
        "state": s.state,
        "statistics": {"CPU": {"actual_frequency": 0}, "energy": {"consumed": 0}},
        "step": {"job_id": s.job_id, "het": {"component": None}, "id": s.step, "name": s.step},
        "task": {"distribution": "Unknown"},
    }


def json_document(groups: list[tuple[Row, list[Row]]]) -> str:
    doc = {
        "meta": {
            "plugin": {"type": "openapi/dbv0.0.38", "name": "Slurm OpenAPI DB v0.0.38"},
            "Slurm": {"version": version_json(), "release": SLURM_VERSION},
        },
        "errors": [],
        "jobs": [job_json(j, steps) for j, steps in groups],
    }
    return json.dumps(doc, indent=2).replace("/", "\\/") + "\n"


def yaml_document(groups: list[tuple[Row, list[Row]]]) -> str:
    """--yaml: the --json document in Slurm's YAML (render/yaml.py, the one writer squeue uses too)."""
    from .yaml import document

    return document(json.loads(json_document(groups))) + "\n"
