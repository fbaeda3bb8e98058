"""Grid Engine accounting: the accounting file read directly, and ``qacct -j`` text as a fallback.

The accounting file (``$SGE_ROOT/$SGE_CELL/common/accounting``, see accounting(5)) has one
colon-separated line per finished job or array task, appended by qmaster when the job ends.
Reading it directly is much faster than running qacct, which builds an object for every line:
``scan`` keeps the file as bytes, jumps over old records by bisecting on the end time (the file is
in end-time order), lets one compiled regular expression pick the lines whose owner, job name or
job number match, and builds a ``Record`` only for those.

``outcome`` turns Grid Engine's ``failed``/``exit_status`` pair (plus the shim's own end and cancel
events) into Slurm's job state and ``ExitCode``, for the job row and its ``.batch`` step.

``$SLURM_SHIM_ACCOUNTING`` names another accounting file (benchmarks, archived files).
"""

from __future__ import annotations

import os
import re

from .units import ge_memory_bytes, ge_seconds, ge_time

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Iterable, Iterator

    from ..config import SiteConfig

ENV = "SLURM_SHIM_ACCOUNTING"

# The file is in end-time order only roughly (a late report from an execution host is appended when
# it arrives), so bisecting starts this far before the wanted time.
SLACK = 86400
_BISECT_MIN = 1 << 16


def accounting_path(cfg: "SiteConfig") -> str:
    p = os.environ.get(ENV)
    if p:
        return p
    ge = cfg.gridengine
    return os.path.join(ge.sge_root, ge.sge_cell, "common", "accounting")


class Record:
    """One accounting line (one job, or one array task). Times are epoch seconds, 0 for none."""

    __slots__ = ("qname", "hostname", "group", "owner", "jobname", "job", "account", "priority",
                 "submit", "start", "end", "failed", "exit_status", "wallclock", "utime", "stime",
                 "maxrss_kb", "project", "department", "granted_pe", "slots", "task", "cpu", "mem",
                 "io", "category", "iow", "maxvmem", "arid", "deleted_by", "metrics")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    def __repr__(self) -> str:
        t = f".{self.task}" if self.task else ""
        return f"<Record {self.job}{t} {self.owner} {self.jobname} failed={self.failed} exit={self.exit_status}>"

    @property
    def key(self) -> int:
        """The time the record was written, roughly: its end, or its submission if it never ran."""
        return self.end or self.submit

    def request(self, name: str) -> str | None:
        """A ``-l name=value`` request from the category string, or None."""
        return _requests(self.category or "").get(name)


def _f(b: bytes) -> float:
    try:
        return float(b)
    except ValueError:
        return 0.0


def _i(b: bytes) -> int:
    try:
        return int(b)
    except ValueError:
        try:
            return int(float(b))
        except ValueError:
            return 0


def _s(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _t(b: bytes) -> int:
    """A time stamp: seconds (SGE 8.1) or milliseconds (OCS/UGE 8.2 and later)."""
    v = _i(b)
    return v // 1000 if v > 100_000_000_000 else v


def parse_line(line: bytes | str) -> Record | None:
    """One accounting line -> Record; None for comments and malformed lines.

    Only the category (field 40) is free text that might hold a colon; a line with more than 45
    fields is split from the left up to the category and from the right after it.
    """
    if isinstance(line, str):
        line = line.encode("utf-8", "replace")
    if line[-1:] in (b"\n", b"\r"):
        line = line.rstrip(b"\r\n")
    if not line or line[:1] == b"#":
        return None
    p = line.split(b":")
    if len(p) != 45:
        if len(p) < 45:
            return None
        p = p[:39] + [b":".join(p[39:len(p) - 5])] + p[len(p) - 5:]
    try:
        return _record(p)
    except (ValueError, UnicodeDecodeError):
        return _record_slow(p)


def _record(p: list[bytes], text: dict[bytes, str] | None = None) -> Record:
    """A Record from the 45 fields of a well-formed line (raises ValueError/UnicodeDecodeError
    otherwise). ``text``: a cache of decoded field values shared by the lines of one scan (queue,
    host, user, group, job name, account and category repeat from line to line)."""
    if text is None:
        text = {}
    r = _new_record(Record)
    (q, h, g, o, n, job, acct, _prio, sub, st, en, failed, status, wall, ut, stime, rss) = p[:17]
    pe, slots, task, cpu = p[33:37]
    cat = p[39]
    v = text.get(q)
    r.qname = v if v is not None else text.setdefault(q, q.decode())
    v = text.get(h)
    r.hostname = v if v is not None else text.setdefault(h, h.decode())
    v = text.get(g)
    r.group = v if v is not None else text.setdefault(g, g.decode())
    v = text.get(o)
    r.owner = v if v is not None else text.setdefault(o, o.decode())
    v = text.get(n)
    r.jobname = v if v is not None else text.setdefault(n, n.decode())
    r.job = int(job)
    v = text.get(acct)
    r.account = v if v is not None else text.setdefault(acct, acct.decode())
    r.priority = 0
    sub = int(sub)
    if sub > 100_000_000_000:  # milliseconds (OCS/UGE 8.2 and later)
        r.submit, r.start, r.end = sub // 1000, int(st) // 1000, int(en) // 1000
    else:
        r.submit, r.start, r.end = sub, int(st), int(en)
    r.failed = int(failed)
    r.exit_status = int(status)
    r.wallclock = int(float(wall))
    r.utime = float(ut)
    r.stime = float(stime)
    r.maxrss_kb = int(float(rss))
    r.project = ""
    r.department = ""
    v = text.get(pe)
    r.granted_pe = v if v is not None else text.setdefault(pe, pe.decode())
    r.slots = int(slots) or 1
    r.task = int(task)
    r.cpu = float(cpu)
    r.mem = 0.0
    r.io = 0.0
    v = text.get(cat)
    r.category = v if v is not None else text.setdefault(cat, cat.decode())
    r.iow = 0.0
    r.maxvmem = float(p[42])
    r.arid = ""
    r.deleted_by = ""
    r.metrics = None  # the colon file has no usage patterns' values
    return r


_new_record = object.__new__


def _record_slow(p: list[bytes]) -> Record:
    r = Record.__new__(Record)
    r.qname, r.hostname, r.group, r.owner, r.jobname = (_s(x) for x in p[:5])
    r.job = _i(p[5])
    r.account = _s(p[6])
    r.priority = _i(p[7])
    r.submit, r.start, r.end = _t(p[8]), _t(p[9]), _t(p[10])
    r.failed = _i(p[11])
    r.exit_status = _i(p[12])
    r.wallclock = _i(p[13])
    r.utime = _f(p[14])
    r.stime = _f(p[15])
    r.maxrss_kb = _i(p[16])
    r.project = _s(p[31])
    r.department = _s(p[32])
    r.granted_pe = _s(p[33])
    r.slots = _i(p[34]) or 1
    r.task = _i(p[35])
    r.cpu = _f(p[36])
    r.mem = _f(p[37])
    r.io = _f(p[38])
    r.category = _s(p[39])
    r.iow = _f(p[40])
    r.maxvmem = _f(p[42])
    r.arid = _s(p[43])
    r.deleted_by = ""
    r.metrics = None
    return r


def _alt(values: Iterable[bytes]) -> bytes:
    return b"(?:" + b"|".join(re.escape(v) for v in sorted(set(values))) + b")"


def _line_key(data: bytes, start: int) -> int | None:
    """end (or submit) time of the line at ``start``, without building a Record."""
    end = data.find(b"\n", start)
    line = data[start:end if end >= 0 else len(data)]
    if line[:1] == b"#" or not line:
        return None
    parts = line.split(b":", 12)
    if len(parts) < 12:
        return None
    e = _t(parts[10])
    return e or _t(parts[8])


def _first_offset(data: bytes, lo: int, not_before: int) -> int:
    """The offset of a line start at or before the first record written at ``not_before``."""
    target = not_before - SLACK
    hi = len(data)
    while hi - lo > _BISECT_MIN:
        mid = (lo + hi) // 2
        s = data.find(b"\n", mid)
        if s < 0:
            hi = mid
            continue
        s += 1
        k = None
        probe = s
        while k is None and probe < hi:  # skip comment or broken lines
            k = _line_key(data, probe)
            if k is None:
                nxt = data.find(b"\n", probe)
                if nxt < 0:
                    break
                probe = nxt + 1
        if k is None or k >= target:
            hi = mid
        else:
            lo = s
    return lo


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# The file is read in blocks of whole lines, so that a 100,000-line file never sits in memory at once.
_BLOCK = 1 << 20


def _blocks(src, start: int) -> Iterator[tuple[bytes, int, int]]:
    """The text from offset ``start`` (a line start) as ``(buf, pos, end)`` pieces: ``buf[pos]`` is a
    newline (the one before the piece's first line) and ``buf[pos + 1:end]`` holds whole lines only.
    ``src``: the file's bytes, or the file open in binary mode."""
    if isinstance(src, (bytes, bytearray)):
        if start == 0:
            buf = b"\n" + src
            yield buf, 0, len(buf)
        else:
            yield src, start - 1, len(src)
        return
    src.seek(start)
    carry = b"\n"  # the newline before the line that the last read cut, and its start
    while True:
        chunk = src.read(_BLOCK)
        if not chunk:
            if len(carry) > 1:
                yield carry, 0, len(carry)
            return
        first = chunk.find(b"\n")
        if first < 0:  # no line ends in this chunk
            carry += chunk
            continue
        if len(carry) > 1 or first > 0:  # the line that straddles the two reads
            head = carry + chunk[:first]
            yield head, 0, len(head)
        last = chunk.rfind(b"\n")
        if last > first:
            yield chunk, first, last
        carry = chunk[last:]


def _line_regex(jobs_b, owners_b, names_b) -> "re.Pattern[bytes]":
    any_field = b"[^:\n]*"
    # a leading '\n' literal lets the regex engine jump from line start to line start
    return re.compile(b"\n((?:[^:\n]*:){3}" + (_alt(owners_b) if owners_b is not None else any_field) + b":"
                      + (_alt(names_b) if names_b is not None else any_field) + b":"
                      + (_alt(jobs_b) if jobs_b is not None else any_field) + b":[^\n]*)")


def _job_lines(buf: bytes, pos: int, end: int, needles: list[bytes]) -> list[bytes] | None:
    """Lines of one piece whose job number is one of the ``:N:`` needles: a substring search checked
    against the field position. None when a number is too common elsewhere on the lines (then the
    regular expression is faster)."""
    hits: list[tuple[int, bytes]] = []
    for needle in needles:
        i = pos
        misses = 0
        while True:
            i = buf.find(needle, i, end)
            if i < 0:
                break
            ls = buf.rfind(b"\n", pos, i) + 1
            if buf.count(b":", ls, i) == 4:
                le = buf.find(b"\n", i, end)
                if le < 0:
                    le = end
                hits.append((ls, buf[ls:le]))
                i = le
            else:
                misses += 1
                if misses > 256:
                    return None
                i += 1
    hits.sort()
    return [line for _pos, line in hits]


def _pick(buf: bytes, pos: int, end: int, jobs_b, owners_b, names_b, rx: list) -> list[bytes]:
    """The candidate lines of one piece (``rx``: a one-item list caching the compiled regex)."""
    if jobs_b is None and owners_b is None and names_b is None:
        return buf[pos + 1:end].split(b"\n")
    if rx[0] is None and jobs_b is not None and owners_b is None and names_b is None and len(jobs_b) <= 8:
        lines = _job_lines(buf, pos, end, [b":" + j + b":" for j in sorted(jobs_b)])
        if lines is not None:
            return lines
    if rx[0] is None:
        rx[0] = _line_regex(jobs_b, owners_b, names_b)
    return rx[0].findall(buf, pos, end)


def _start_offset(src, not_before: int | None) -> int:
    if not not_before:
        return 0
    if isinstance(src, (bytes, bytearray)):
        return _first_offset(src, 0, not_before)
    import mmap

    try:
        mm = mmap.mmap(src.fileno(), 0, access=mmap.ACCESS_READ)
    except (ValueError, OSError):  # an empty file, or one that cannot be mapped: read it all
        return 0
    try:
        return _first_offset(mm, 0, not_before)  # touches a few pages only
    finally:
        mm.close()


def scan(path_or_data: Any, *, jobs: Iterable[int] | None = None, owners: Iterable[str] | None = None,
         ge_names: Iterable[str] | None = None, not_before: int | None = None,
         not_after: int | None = None) -> list[Record]:
    """The records that can match, in file order.

    jobs / owners / ge_names: exact job numbers, owner names, Grid Engine job names (None = any).
    not_before: drop records written (ended) before this time; never-started records count by
    their submission time. not_after: drop records submitted after this time.
    A path (or a file open in binary mode) is read block by block (OSError when it cannot be opened);
    bytes are the file's text. A text whose first line is a JSON object is OCS 9's accounting.jsonl.
    """
    if isinstance(path_or_data, str):
        with open(path_or_data, "rb") as f:
            return scan(f, jobs=jobs, owners=owners, ge_names=ge_names, not_before=not_before,
                        not_after=not_after)
    if _is_jsonl(path_or_data):
        return _scan_jsonl(path_or_data, jobs, owners, ge_names, not_before, not_after)
    return _scan(path_or_data, jobs, owners, ge_names, not_before, not_after)


def _scan(src, jobs, owners, ge_names, not_before, not_after) -> list[Record]:
    jobs_b = {str(int(j)).encode() for j in jobs} if jobs is not None else None
    owners_b = {o.encode() for o in owners} if owners is not None else None
    names_b = {n.encode() for n in ge_names} if ge_names is not None else None
    if (jobs_b is not None and not jobs_b) or (owners_b is not None and not owners_b) or (
            names_b is not None and not names_b):
        return []
    start = _start_offset(src, not_before)
    out: list[Record] = []
    append = out.append
    text: dict[bytes, str] = {}
    rx: list = [None]
    for buf, pos, end in _blocks(src, start):
        for line in _pick(buf, pos, end, jobs_b, owners_b, names_b, rx):
            if not line or line[:1] == b"#":
                continue
            p = line.split(b":")
            if len(p) == 45 and line[-1:] != b"\r":
                try:
                    r = _record(p, text)
                except (ValueError, UnicodeDecodeError):
                    r = _record_slow(p)
            else:
                r = parse_line(line)
                if r is None:
                    continue
            if not_before and (r.end or r.submit) < not_before:
                continue
            if not_after and r.submit > not_after:
                continue
            append(r)
    return out


def scan_file(path: str, **kw) -> list[Record]:
    """scan() of the accounting file and of the JSONL file beside it (``jsonl_path``: OCS 9 writes
    one or the other, and a cell that changed its mind has both, each with its own jobs); a missing
    or unreadable file reads as no records."""
    out: list[Record] = []
    for p in (path, jsonl_path(path)):
        try:
            out += scan(p, **kw)
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            pass
    return out


# ---------------------------------------------------------------------------------------------
# accounting.jsonl: Open Cluster Scheduler 9's default accounting (``old_accounting=true`` in
# reporting_params brings back the colon file): one JSON object a line, in end order, times in
# microseconds, usage in ``usage.rusage`` (getrusage's names) and ``usage.eusage`` (Grid Engine's
# own: cpu, mem, io, iow, maxvmem), keys left out when unset (granted_pe, project, deleted_by).

JSONL_SUFFIX = ".jsonl"


def jsonl_path(path: str) -> str:
    """The JSONL accounting beside a colon accounting file (``.../common/accounting.jsonl``)."""
    return path + JSONL_SUFFIX


def _is_jsonl(src) -> bool:
    if isinstance(src, (bytes, bytearray)):
        return src.lstrip()[:1] == b"{"
    peek = getattr(src, "peek", None)
    if peek is not None:
        return peek(1)[:1] == b"{"
    pos = src.tell()
    head = src.read(1)
    src.seek(pos)
    return head == b"{"


def _us(v: Any) -> int:
    """A JSONL time stamp (microseconds since the epoch; 0 when unset) as epoch seconds."""
    try:
        v = int(v)
    except (TypeError, ValueError):
        return 0
    if v > 100_000_000_000_000:  # microseconds
        return v // 1_000_000
    if v > 100_000_000_000:  # milliseconds
        return v // 1000
    return v


def _num(d: dict, key: str) -> float:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def jsonl_record(obj: dict) -> Record | None:
    """One accounting.jsonl object -> Record; None when it is not a job's record."""
    job = obj.get("job_number")
    if not isinstance(job, int) or isinstance(job, bool):
        return None
    usage = obj.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    ru = usage.get("rusage")
    ru = ru if isinstance(ru, dict) else {}
    eu = usage.get("eusage")
    eu = eu if isinstance(eu, dict) else {}

    def s(key: str, default: str = "") -> str:
        v = obj.get(key)
        return v if isinstance(v, str) else default

    def i(key: str) -> int:
        v = obj.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else 0

    r = _new_record(Record)
    r.qname, r.hostname, r.group, r.owner = s("qname"), s("hostname"), s("group"), s("owner")
    r.jobname = s("job_name")
    r.job = job
    r.account = s("account")
    r.priority = i("priority")
    r.submit, r.start, r.end = _us(obj.get("submission_time")), _us(obj.get("start_time")), _us(obj.get("end_time"))
    r.failed = i("failed")
    r.exit_status = i("exit_status")
    r.wallclock = int(_num(ru, "ru_wallclock"))
    r.utime = _num(ru, "ru_utime")
    r.stime = _num(ru, "ru_stime")
    r.maxrss_kb = int(_num(ru, "ru_maxrss"))
    r.project = s("project", "NONE")
    r.department = s("department")
    r.granted_pe = s("granted_pe", "NONE")
    r.slots = i("slots") or 1
    r.task = i("task_number")
    r.cpu = _num(eu, "cpu")
    r.mem = _num(eu, "mem")
    r.io = _num(eu, "io")
    r.category = s("category", "NONE")
    r.iow = _num(eu, "iow")
    r.maxvmem = _num(eu, "maxvmem")
    r.arid = str(obj["ar_number"]) if isinstance(obj.get("ar_number"), int) else ""
    r.deleted_by = s("deleted_by")
    # usage patterns' values (reporting_params usage_patterns): containers beside rusage/eusage
    r.metrics = _metrics(usage) if len(usage) > 2 else None
    return r


_from_usage: Any = None


def _metrics(usage: dict) -> dict[str, float] | None:
    """gridengine.metrics.from_usage (imported at the first record that has usage patterns: once a
    cell sets one, every record has its container, most of them empty)."""
    global _from_usage
    if _from_usage is None:
        from .metrics import from_usage

        _from_usage = from_usage
    return _from_usage(usage)


def parse_jsonl_line(line: bytes | str) -> Record | None:
    """One accounting.jsonl line -> Record; None for blank and malformed lines."""
    import json

    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return jsonl_record(obj) if isinstance(obj, dict) else None


def _json_needles(key: str, values: Iterable[Any]) -> list[bytes]:
    import json

    return [b'"' + key.encode() + b'":' + json.dumps(v).encode() for v in values]


def _lines_with(buf: bytes, pos: int, end: int, needles: list[bytes]) -> list[bytes]:
    """The lines of one piece that hold one of the needles (in file order, each once)."""
    hits: dict[int, bytes] = {}
    for needle in needles:
        i = pos
        while True:
            i = buf.find(needle, i, end)
            if i < 0:
                break
            ls = buf.rfind(b"\n", pos, i) + 1
            le = buf.find(b"\n", i, end)
            if le < 0:
                le = end
            hits.setdefault(ls, buf[ls:le])
            i = le
    return [hits[k] for k in sorted(hits)]


def _scan_jsonl(src, jobs, owners, ge_names, not_before, not_after) -> list[Record]:
    """scan() of accounting.jsonl: the lines that can match are found by their ``"key":value``
    text (the job numbers, else the names, else the owners: as OCS writes them, compact JSON), and
    only those are decoded and checked in full (parse_jsonl_line)."""
    jobs_s = {int(j) for j in jobs} if jobs is not None else None
    owners_s = set(owners) if owners is not None else None
    names_s = set(ge_names) if ge_names is not None else None
    if (jobs_s is not None and not jobs_s) or (owners_s is not None and not owners_s) or (
            names_s is not None and not names_s):
        return []
    needles = None
    if jobs_s is not None:
        needles = [n + t for n in _json_needles("job_number", sorted(jobs_s)) for t in (b",", b"}")]
    elif names_s is not None and all(n.isascii() for n in names_s):
        needles = _json_needles("job_name", sorted(names_s))
    elif owners_s is not None and all(o.isascii() for o in owners_s):
        needles = _json_needles("owner", sorted(owners_s))
    out: list[Record] = []
    for buf, pos, end in _blocks(src, 0):
        lines = buf[pos + 1:end].split(b"\n") if needles is None else _lines_with(buf, pos, end, needles)
        for line in lines:
            r = parse_jsonl_line(line) if line.strip() else None
            if r is None:
                continue
            if jobs_s is not None and r.job not in jobs_s:
                continue
            if owners_s is not None and r.owner not in owners_s:
                continue
            if names_s is not None and r.jobname not in names_s:
                continue
            if not_before and (r.end or r.submit) < not_before:
                continue
            if not_after and r.submit > not_after:
                continue
            out.append(r)
    return out


# ---------------------------------------------------------------------------------------------
# qacct -j text (the fallback when the file itself cannot be read, and a cross-check in tests)

_UNITS = {"B": 1, "KB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3, "TB": 1024 ** 4}
_SIZE_RE = re.compile(r"^([0-9.]+)([KMGT]?B)s?$")


def _qacct_size(text: str) -> float:
    """qacct prints sizes divided by 1024 per unit step: "4.527KB" is 4636 of the raw value."""
    m = _SIZE_RE.match(text.strip())
    if not m:
        return _f(text.encode())
    return float(m.group(1)) * _UNITS[m.group(2)]


def _ge_stamp(text: str) -> int:
    """qacct's ``Mon Nov 30 08:15:55 2026`` (``-/-`` when unset) as epoch seconds; 0 when unset."""
    return int(ge_time(text) or 0)


def _lead_int(text: str) -> int:
    m = re.match(r"\s*(-?\d+)", text)
    return int(m.group(1)) if m else 0


def parse_qacct(text: str) -> list[Record]:
    """``qacct -j ...`` output -> Records (the blocks between ``=====`` lines)."""
    out: list[Record] = []
    for block in re.split(r"^=+\s*$", text, flags=re.M):
        kv: dict[str, str] = {}
        for line in block.splitlines():
            if not line.strip():
                continue
            key, _, value = line.partition(" ")
            kv[key] = value.strip()
        if "jobnumber" not in kv:
            continue
        r = Record.__new__(Record)
        r.qname = kv.get("qname", "")
        r.hostname = kv.get("hostname", "")
        r.group = kv.get("group", "")
        r.owner = kv.get("owner", "")
        r.jobname = kv.get("jobname", "")
        r.job = _lead_int(kv.get("jobnumber", "0"))
        r.account = kv.get("account", "")
        r.priority = _lead_int(kv.get("priority", "0"))
        r.submit = _ge_stamp(kv.get("qsub_time", ""))
        r.start = _ge_stamp(kv.get("start_time", ""))
        r.end = _ge_stamp(kv.get("end_time", ""))
        r.failed = _lead_int(kv.get("failed", "0"))
        r.exit_status = _lead_int(kv.get("exit_status", "0"))
        r.wallclock = _lead_int(kv.get("ru_wallclock", "0"))
        r.utime = _f(kv.get("ru_utime", "0").rstrip("s").encode())
        r.stime = _f(kv.get("ru_stime", "0").rstrip("s").encode())
        r.maxrss_kb = int(round(_qacct_size(kv.get("ru_maxrss", "0"))))
        r.project = kv.get("project", "")
        r.department = kv.get("department", "")
        r.granted_pe = kv.get("granted_pe", "NONE")
        r.slots = _lead_int(kv.get("slots", "1")) or 1
        t = kv.get("taskid", "undefined")
        r.task = int(t) if t.isdigit() else 0
        r.cpu = _f(kv.get("cpu", "0").rstrip("s").encode())
        r.mem = _qacct_size(kv.get("mem", "0").rstrip("s"))
        r.io = _qacct_size(kv.get("io", "0"))
        r.category = kv.get("category", "NONE")
        r.iow = _f(kv.get("iow", "0").rstrip("s").encode())
        r.maxvmem = _qacct_size(kv.get("maxvmem", "0"))
        r.arid = kv.get("arid", "undefined")
        r.deleted_by = kv.get("deleted_by", "")  # OCS 9: user@host of the qdel
        # OCS 9's qacct prints usage patterns' values as more "name value" lines (without the
        # pattern's name): this shim's, metric_<name>, are known by their prefix
        r.metrics = _qacct_metrics(kv)
        out.append(r)
    return out


def _qacct_metrics(kv: dict[str, str]) -> dict[str, float] | None:
    from .metrics import PREFIX, number, valid_name

    out = {k[len(PREFIX):]: number(v) for k, v in kv.items() if k.startswith(PREFIX) and valid_name(k[len(PREFIX):])}
    return {k: v for k, v in out.items() if v is not None} or None


def qacct_args(job: str | int | None = None, *, owner: str | None = None, path: str | None = None) -> list[str]:
    """argv (after ``qacct``) for the fallback: every record of a job, or of all jobs."""
    args: list[str] = []
    if path:
        args += ["-f", path]
    if owner:
        args += ["-o", owner]
    args += ["-j"] + ([str(job)] if job is not None else [])
    return args


# ---------------------------------------------------------------------------------------------
# what a record means in Slurm's words

_REQ_RE = re.compile(r"-l\s+(\S+)")


def category_requests(category: str) -> dict[str, str]:
    """``-l a=1,b=2 -l c=x`` in a category string -> {"a": "1", "b": "2", "c": "x"}."""
    return dict(_requests(category))


_REQUESTS: dict[str, dict[str, str]] = {}


def _requests(category: str) -> dict[str, str]:
    """category_requests, shared by the records of one category (the caller must not change it)."""
    out = _REQUESTS.get(category)
    if out is not None:
        return out
    out = {}
    for m in _REQ_RE.finditer(category):
        for item in m.group(1).split(","):
            k, _, v = item.partition("=")
            if k:
                out[k] = v
    if len(_REQUESTS) < 4096:
        _REQUESTS[category] = out
    return out


# Grid Engine's failed codes that mean the execution host failed the job (not the job itself).
NODE_FAIL_CODES = frozenset({19, 20, 21})
# ... before the job could start: output file, shell, working directory (Slurm: launch failure).
LAUNCH_FAIL_CODES = frozenset({26, 27, 28, 29})
RESCHEDULED_CODES = frozenset({24, 25})
LIMIT_CODE = 37
KILLED_CODE = 100
DEPENDENCY_CANCEL = "DependencyNeverSatisfied"  # the reason of the job wrapper's own cancel event


class Outcome:
    """Slurm's view of an ended job: state and ExitCode of the job row and of its batch step."""

    __slots__ = ("state", "exit", "signal", "batch_state", "batch_exit", "batch_signal", "reason", "cancel_uid")

    def __init__(self, state: str, exit: int = 0, signal: int = 0, batch_state: str | None = None,
                 batch_exit: int | None = None, batch_signal: int | None = None, reason: str = "None",
                 cancel_uid: int | None = None):
        self.state = state
        self.exit = exit
        self.signal = signal
        self.batch_state = batch_state or state
        self.batch_exit = exit if batch_exit is None else batch_exit
        self.batch_signal = signal if batch_signal is None else batch_signal
        self.reason = reason
        self.cancel_uid = cancel_uid

    def __repr__(self) -> str:
        return (f"<Outcome {self.state} {self.exit}:{self.signal} batch {self.batch_state} "
                f"{self.batch_exit}:{self.batch_signal}>")


# Slurm's own cancel of a job whose dependency can never be satisfied names no canceller (plain
# "CANCELLED" in sacct, not "CANCELLED by <uid>")
_DEPENDENCY = Outcome("CANCELLED", 0, 0, "CANCELLED", 0, 0, reason=DEPENDENCY_CANCEL)


def _from_end_event(end: dict, cancel: dict | None) -> Outcome:
    st = end.get("state") or ""
    code = int(end.get("exit") or 0)
    sig = int(end.get("signal") or 0)
    if st == "CANCELLED" and DEPENDENCY_CANCEL in (end.get("reason"), (cancel or {}).get("reason")):
        return _DEPENDENCY
    from ..store.records import cancel_ended

    if st == "CANCELLED" or cancel_ended(end, cancel):
        uid = cancel.get("uid") if cancel else None
        return Outcome("CANCELLED", 0, 0, "CANCELLED", 0, sig or 15, cancel_uid=_opt_int(uid))
    if st == "TIMEOUT":
        return Outcome("TIMEOUT", 0, 0, "CANCELLED", 0, sig or 15, reason="TimeLimit")
    if st == "OUT_OF_MEMORY":
        return Outcome("OUT_OF_MEMORY", 0, 125, "OUT_OF_MEMORY", 0, 125, reason="OutOfMemory")
    if st == "NODE_FAIL":
        return Outcome("NODE_FAIL", 0, 0, "CANCELLED", 0, 9, reason="NodeDown")
    if st == "FAILED" and end.get("reason") == "JobLaunchFailure":
        return Outcome("FAILED", 0, sig or 53, "CANCELLED", 0, sig or 53, reason="JobLaunchFailure")
    if sig:
        return Outcome("FAILED", 0, sig, "CANCELLED", 0, sig, reason="NonZeroExitCode")
    if code:
        return Outcome("FAILED", code, 0, reason="NonZeroExitCode")
    return Outcome(st if st in ("COMPLETED", "FAILED") else "COMPLETED", 0, 0)


def _opt_int(v) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def outcome(rec: Record, end: dict | None = None, cancel: dict | None = None) -> Outcome:
    """Slurm's state for an accounting record, preferring the shim's own end/cancel events.

    A cancel event the job wrapper wrote (reason DependencyNeverSatisfied: an afterok/afternotok
    dependency failed, so the script never ran) -> CANCELLED, whatever Grid Engine saw.
    Grid Engine alone:  failed 0 exit 0 -> COMPLETED 0:0;  exit N -> FAILED N:0 (N > 128: killed
    by signal N-128 -> FAILED 0:sig, step CANCELLED);  failed 37 (h_rt/h_cpu enforced) -> TIMEOUT
    (OUT_OF_MEMORY when the job asked for h_vmem and reached it);  failed 100 (qdel) -> CANCELLED;
    failed 26-29 (could not start) -> FAILED 0:53 as Slurm's launch failure;  failed 19-21 ->
    NODE_FAIL;  failed 24/25 (rescheduled) -> REQUEUED;  any other failure -> FAILED.
    """
    if end is not None:
        return _from_end_event(end, cancel)
    f = rec.failed
    status = rec.exit_status
    if cancel is not None and cancel.get("reason") == DEPENDENCY_CANCEL and f not in RESCHEDULED_CODES:
        # the job wrapper found the job's afterok/afternotok dependency unmet and ended it before
        # its script ran (Grid Engine saw a wrapper that exited 0): Slurm's CANCELLED
        return _DEPENDENCY
    if f == 0:
        if status == 0:
            return Outcome("COMPLETED")
        if status > 128 and status - 128 < 65:
            sig = status - 128
            return Outcome("FAILED", 0, sig, "CANCELLED", 0, sig, reason="NonZeroExitCode")
        return Outcome("FAILED", status, 0, reason="NonZeroExitCode")
    if f == KILLED_CODE:
        uid = _opt_int((cancel or {}).get("uid"))
        deleted_by = getattr(rec, "deleted_by", None)
        if deleted_by and deleted_by.partition("@")[0] not in _DAEMONS:
            # OCS 9 names who deleted the job: a user's cancel, never the time limit (the execd
            # that enforced h_rt signs as execd@<host>: the time limit, read below)
            return Outcome("CANCELLED", 0, 0, "CANCELLED", 0, 9,
                           cancel_uid=uid if uid is not None else _uid_of(deleted_by))
        if cancel is None and rec.category and _hit_limit(rec):
            return Outcome("TIMEOUT", 0, 0, "CANCELLED", 0, 9, reason="TimeLimit")
        return Outcome("CANCELLED", 0, 0, "CANCELLED", 0, 9, cancel_uid=uid)
    if f == LIMIT_CODE:
        if _over_memory(rec):
            return Outcome("OUT_OF_MEMORY", 0, 125, "OUT_OF_MEMORY", 0, 125, reason="OutOfMemory")
        return Outcome("TIMEOUT", 0, 0, "CANCELLED", 0, 9, reason="TimeLimit")
    if f in LAUNCH_FAIL_CODES:
        return Outcome("FAILED", 0, 53, "CANCELLED", 0, 53, reason="JobLaunchFailure")
    if f in NODE_FAIL_CODES:
        return Outcome("NODE_FAIL", 0, 0, "CANCELLED", 0, 9, reason="NodeDown")
    if f in RESCHEDULED_CODES:
        return Outcome("REQUEUED", 0, 0, "CANCELLED", 0, 9, reason="None")
    if status > 128 and status - 128 < 65:
        return Outcome("FAILED", 0, status - 128, "CANCELLED", 0, status - 128, reason="NonZeroExitCode")
    return Outcome("FAILED", status or 1, 0, reason="NonZeroExitCode")


# who deletes a job on OCS 9 without a user asking (deleted_by "execd@vm": h_rt enforced)
_DAEMONS = frozenset({"execd", "qmaster", "schedd"})


def _uid_of(deleted_by: str) -> int | None:
    """OCS's ``deleted_by`` (``user@host``) as the user's uid; None for a user this host lacks."""
    import pwd

    try:
        return pwd.getpwnam(deleted_by.rpartition("@")[0] or deleted_by).pw_uid
    except (KeyError, ValueError):
        return None


def _hit_limit(rec: Record) -> bool:
    """A qdel'd record whose run reached its h_rt (execd kills at the limit before qmaster)."""
    h_rt = rec.request("h_rt")
    if not h_rt:
        return False
    secs = ge_seconds(h_rt)
    return secs is not None and secs > 0 and rec.wallclock >= secs


def _over_memory(rec: Record) -> bool:
    limit = rec.request("h_vmem")
    if not limit:
        return False
    b = ge_memory_bytes(limit)  # sge_types: 4g is 4e9 bytes, 4G 4 GiB; INFINITY is no limit
    return b is not None and 0 < b < float("inf") and rec.maxvmem >= b * 0.95
