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
from typing import Any, Callable, Iterable

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
FIELD_NAMES = list(FIELD_WIDTHS)

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

SLURM_VERSION = "22.05.8"


class FieldError(ValueError):
    """A field name that matches nothing; ``name`` is the text as given."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class Column:
    __slots__ = ("name", "width", "get")

    def __init__(self, name: str, width: int, get: Callable[["Row"], str]):
        self.name = name
        self.width = width
        self.get = get


def parse_fields(spec: str) -> list[Column]:
    """A ``--format`` list: comma-separated names, case-insensitive, any prefix of a name (the first
    field in --helpformat order whose name starts with it), each with an optional ``%width``;
    ``ALL`` is every field. Raises FieldError."""
    cols: list[Column] = []
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
            for name in FIELD_NAMES:
                cols.append(Column(name, width if width is not None else FIELD_WIDTHS[name], GETTERS[name]))
            continue
        name = next((n for n in FIELD_NAMES if n.lower().startswith(low)), None)
        if name is None:
            raise FieldError(item)
        cols.append(Column(name, width if width is not None else FIELD_WIDTHS[name], GETTERS[name]))
    return cols


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
    """Elapsed-style time: [D-]HH:MM:SS."""
    if secs is None:
        return ""
    secs = max(0, int(secs))
    days, rem = divmod(secs, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, seconds = divmod(rem, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}"


def cpu_text(secs: float | None) -> str:
    """TotalCPU/UserCPU/SystemCPU: MM:SS.mmm under an hour, else [DD-]HH:MM:SS."""
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
    return time_text(minutes * 60)


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


def convert_units(value: float, unit: int = 0, exact: bool = True) -> str:
    """Slurm's convert_num_unit: a value in unit K/M/G/... (0 = none, 1 = K, 2 = M) scaled up while
    it stays a multiple of 512 (exact mode), printed as an integer or with two decimals."""
    units = ["", "K", "M", "G", "T", "P"]
    v = float(value)
    if exact:
        while v >= 1024 and v % 512 == 0 and unit < len(units) - 1:
            v /= 1024
            unit += 1
    if v == int(v):
        return f"{int(v)}{units[unit]}"
    return f"{v:.2f}{units[unit]}"


def mem_mb_text(mb: int | float | None) -> str:
    if mb is None:
        return ""
    return convert_units(mb, 2)


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
    workdir = ""
    qos = ""
    priority = None
    cluster = ""
    submit_line = ""
    constraints = ""
    flags = ""
    order = 0

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
        base = self.raw_id if self.raw_id is not None else (
            f"{self.job_id}_{self.task}" if self.task is not None else str(self.job_id))
        return f"{base}.{self.step}" if self.step else base

    @property
    def state_text(self) -> str:
        if self.state == "CANCELLED" and self.cancel_uid is not None and not self.step:
            return f"CANCELLED by {self.cancel_uid}"
        return self.state or ""

    @property
    def elapsed(self) -> int:
        if not self.start:
            return 0
        end = self.end if self.end else (self.now or time.time())
        return max(0, int(end - self.start))


def _blank(_r: Row) -> str:
    return ""


def _job_only(f: Callable[[Row], str]) -> Callable[[Row], str]:
    return lambda r: "" if r.step else f(r)


def _num(v: Any) -> str:
    return "" if v is None else str(v)


def _start(r: Row) -> str:
    if r.start:
        return date_text(r.start)
    return "None" if r.end else "Unknown"


def _end(r: Row) -> str:
    return date_text(r.end) if r.end else "Unknown"


def _date(attr: str) -> Callable[[Row], str]:
    def get(r: Row) -> str:
        v = getattr(r, attr)
        return date_text(v) if v else "Unknown"
    return get


def _cputime(r: Row) -> str:
    return time_text(r.elapsed * (r.ncpus or 0))


def _nodelist(r: Row) -> str:
    if not r.nodes:
        return "None assigned"
    from ..hostlist import compress

    return compress(list(r.nodes))


def _exit(r: Row) -> str:
    return f"{r.exit or 0}:{r.signal or 0}"


def _mem_kb(attr: str) -> Callable[[Row], str]:
    def get(r: Row) -> str:
        v = getattr(r, attr)
        if not v or not r.step:  # never sampled: Slurm leaves it empty
            return ""
        return convert_units(v, 1)
    return get


def _cpu(attr: str) -> Callable[[Row], str]:
    def get(r: Row) -> str:
        v = getattr(r, attr)
        return cpu_text(v if v is not None else 0.0)
    return get


def _limit(r: Row) -> str:
    if r.step:
        return ""
    return limit_text(r.time_limit)


def _limit_raw(r: Row) -> str:
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


def _trunc_extra(key: str) -> Callable[[Row], str]:
    return lambda r: str(r.extra.get(key, ""))


GETTERS: dict[str, Callable[[Row], str]] = {name: _blank for name in FIELD_NAMES}
GETTERS.update({
    "Account": lambda r: r.account or "",
    "AllocCPUS": lambda r: _num(r.ncpus),
    "AllocNodes": lambda r: "" if r.step else _num(r.nnodes if r.start else 0),
    "AllocTRES": lambda r: r.alloc_tres or "",
    "Cluster": lambda r: r.cluster or "",
    "Comment": _job_only(lambda r: r.comment or ""),
    "Constraints": _job_only(lambda r: r.constraints or ""),
    "CPUTime": _cputime,
    "CPUTimeRAW": lambda r: str(r.elapsed * (r.ncpus or 0)),
    "DerivedExitCode": _job_only(lambda r: "0:0"),
    "Elapsed": lambda r: time_text(r.elapsed),
    "ElapsedRaw": lambda r: str(r.elapsed),
    "Eligible": _date("eligible"),
    "End": _end,
    "ExitCode": _exit,
    "Flags": _job_only(lambda r: r.flags or ""),
    "GID": _job_only(lambda r: _num(r.gid)),
    "Group": _job_only(lambda r: r.group or ""),
    "JobID": lambda r: r.job_text,
    "JobIDRaw": lambda r: r.raw_text,
    "JobName": lambda r: "batch" if r.step == "batch" else (r.name or ""),
    "MaxRSS": _mem_kb("maxrss_kb"),
    "MaxRSSNode": lambda r: (r.nodes[0] if r.nodes else "") if r.step and r.maxrss_kb is not None else "",
    "MaxRSSTask": lambda r: "0" if r.step and r.maxrss_kb is not None else "",
    "MaxVMSize": _mem_kb("maxvmem_kb"),
    "MaxVMSizeNode": lambda r: (r.nodes[0] if r.nodes else "") if r.step and r.maxvmem_kb is not None else "",
    "MaxVMSizeTask": lambda r: "0" if r.step and r.maxvmem_kb is not None else "",
    "NCPUS": lambda r: _num(r.ncpus),
    "NNodes": lambda r: _num(r.nnodes),
    "NodeList": _nodelist,
    "NTasks": lambda r: _num(r.ntasks) if r.step else "",
    "Partition": _job_only(lambda r: r.partition or ""),
    "Priority": _job_only(lambda r: _num(r.priority)),
    "QOS": _job_only(lambda r: r.qos or ""),
    "Reason": _job_only(lambda r: r.reason or "None"),
    "ReqCPUS": _job_only(lambda r: _num(r.ncpus)),
    "ReqMem": _job_only(lambda r: mem_mb_text(r.req_mem_mb) if r.req_mem_mb else ""),
    "ReqNodes": _job_only(lambda r: _num(r.nnodes)),
    "ReqTRES": _job_only(lambda r: r.req_tres or ""),
    "Reserved": _job_only(lambda r: time_text(_reserved(r))),
    "ResvCPU": _job_only(lambda r: time_text(_reserved(r) * (r.ncpus or 0))),
    "ResvCPURAW": _job_only(lambda r: str(_reserved(r) * (r.ncpus or 0))),
    "Start": _start,
    "State": lambda r: r.state_text,
    "Submit": _date("submit"),
    "SubmitLine": _job_only(lambda r: r.submit_line or ""),
    "Suspended": lambda r: "00:00:00",
    "SystemCPU": _cpu("sys_cpu"),
    "Timelimit": _limit,
    "TimelimitRaw": _limit_raw,
    "TotalCPU": _cpu("total_cpu"),
    "UID": _job_only(lambda r: _num(r.uid)),
    "User": _job_only(lambda r: r.user or ""),
    "UserCPU": _cpu("user_cpu"),
    "WorkDir": _job_only(lambda r: r.workdir or ""),
})


# ---------------------------------------------------------------------------------------------
# layouts


def header_lines(cols: list[Column], *, parsable: str | None = None, delimiter: str = "|") -> list[str]:
    """The header: the names (and, in the fixed-width layout, a line of dashes)."""
    if parsable:
        line = delimiter.join(c.name for c in cols)
        return [line + delimiter if parsable == "ending" else line]
    return ["".join((c.name[:abs(c.width)].ljust(abs(c.width)) if c.width < 0
                     else c.name[:abs(c.width)].rjust(abs(c.width))) + " " for c in cols),
            "".join("-" * abs(c.width) + " " for c in cols)]


# The commonest fields written out in the compiled layout (each the same as its GETTERS function).
_INLINE = {
    "JobID": "r.job_text",
    "JobIDRaw": "r.raw_text",
    "JobName": '"batch" if r.step == "batch" else (r.name or "")',
    "Partition": '"" if r.step else (r.partition or "")',
    "Account": 'r.account or ""',
    "AllocCPUS": '"" if r.ncpus is None else str(r.ncpus)',
    "NCPUS": '"" if r.ncpus is None else str(r.ncpus)',
    "State": "r.state_text",
    "ExitCode": 'f"{r.exit or 0}:{r.signal or 0}"',
    "User": '"" if r.step else (r.user or "")',
    "Group": '"" if r.step else (r.group or "")',
    "Cluster": 'r.cluster or ""',
}


def line_function(cols: list[Column], *, parsable: str | None = None, delimiter: str = "|") -> Callable[[Row], str]:
    """The layout of one row, compiled once: a function of the row that returns its line (no newline).

    Fixed width: a value longer than its column is cut to ``width - 1`` characters and ``+`` (not a
    number: those are printed in full), then padded. -p/-P: the values joined by the delimiter.
    Every value first goes through fmt.printable (names, paths and comments are users' text)."""
    from .fmt import printable

    ns: dict[str, Any] = {"D": delimiter, "E": printable}
    body: list[str] = []
    fmt: list[str] = []
    for i, c in enumerate(cols):
        if c.name in _INLINE and c.get is GETTERS.get(c.name):
            body.append(f"    v{i} = {_INLINE[c.name]}\n")
        else:
            ns[f"g{i}"] = c.get
            body.append(f"    v{i} = g{i}(r)\n")
        body.append(f"    if not v{i}.isprintable():\n        v{i} = E(v{i})\n")
        if parsable:
            fmt.append(("{D}" if i else "") + f"{{v{i}}}")
            continue
        w = abs(c.width)
        if c.name not in NUMERIC:
            if w > 0:
                body.append(f"    if len(v{i}) > {w}:\n        v{i} = v{i}[:{w - 1}] + '+'\n")
            else:
                body.append(f"    if v{i}:\n        v{i} = ''\n")
        fmt.append(f"{{v{i}:{'<' if c.width < 0 else '>'}{w}}} " if w else f"{{v{i}}} ")
    if parsable == "ending":
        fmt.append("{D}")
    code = "def line(r):\n" + "".join(body) + "    return f" + repr("".join(fmt)) + "\n"
    exec(compile(code, "<sacct layout>", "exec"), ns)
    return ns["line"]


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
        "comment": {"administrator": None, "job": job.comment or None, "system": None},
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
        "derived_exit_code": {"status": "SUCCESS", "return_code": 0},
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
            "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": SLURM_VERSION},
        },
        "errors": [],
        "jobs": [job_json(j, steps) for j, steps in groups],
    }
    return json.dumps(doc, indent=2).replace("/", "\\/") + "\n"


def yaml_document(groups: list[tuple[Row, list[Row]]]) -> str:
    """--yaml: the same document as --json, in block YAML."""
    doc = json.loads(json_document(groups))
    lines = ["---"]
    _yaml(doc, 0, lines)
    return "\n".join(lines) + "\n"


def _yaml_scalar(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return str(v)
    s = str(v)
    if s == "" or any(c in s for c in ":#{}[],&*!|>'\"%@`") or s.strip() != s:
        return json.dumps(s)
    return s


def _yaml(v: Any, indent: int, lines: list[str]) -> None:
    pad = "  " * indent
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, (dict, list)) and x:
                lines.append(f"{pad}{k}:")
                _yaml(x, indent + 1, lines)
            elif isinstance(x, (dict, list)):
                lines.append(f"{pad}{k}: {'{}' if isinstance(x, dict) else '[]'}")
            else:
                lines.append(f"{pad}{k}: {_yaml_scalar(x)}")
    elif isinstance(v, list):
        for x in v:
            if isinstance(x, (dict, list)) and x:
                sub: list[str] = []
                _yaml(x, indent + 1, sub)
                first = sub[0].lstrip()
                lines.append(f"{pad}- {first}")
                lines.extend(sub[1:])
            else:
                lines.append(f"{pad}- {_yaml_scalar(x)}")
