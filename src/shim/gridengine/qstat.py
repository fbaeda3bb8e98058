"""Grid Engine's ``qstat -xml`` read into scheduler-neutral JobRecords.

``parse_jobs`` reads the job list of ``qstat -u '*' -r -xml`` (SGE 8.1.9 and OCS 9: both
``JB_submission_time`` and ``JAT_submission_time``, timestamps with or without microseconds);
``map_state`` turns a Grid Engine state string into a Slurm state and reason; ``parse_detail``
reads ``qstat -j <ids> -xml``. Only Grid Engine facts go into the records here: the shim's own
records (Slurm names of array indices, throttles, comments) are merged by ``shim.operations.jobs``.

For a long queue the job list is read while qstat writes it: ``start`` spawns the call,
``Query.chunks`` yields its output as it arrives, ``RowReader`` turns each run of complete job
elements into rows (one regex for qstat's own layout, element by element otherwise), and
``record_from_match`` builds a record from a matched element without an intermediate row.
"""

from __future__ import annotations

import re

from .names import decode
from .units import ge_memory_mb, ge_seconds, ge_time

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Iterable, Iterator

    import xml.etree.ElementTree as ET

    from ..config import SiteConfig
    from ..slurm.model import JobRecord

# ElementTree, html, datetime and the record class are imported where they are used: squeue starts
# its qstat as soon as it can, and only this module stands between its start and the process.

# The one qstat call squeue, scancel and scontrol make: every user's jobs, with requests (-r)
# for hard queue requests (partition of pending jobs), resource requests (time limit, gres,
# licenses, memory), the parallel environment (CPUs) and predecessor jobs (dependencies).
QSTAT_ARGS = ["-u", "*", "-r", "-xml"]


def listing_args(users: Iterable[str]) -> list[str]:
    """QSTAT_ARGS for these users' jobs only: the same rows, in the same form, as the whole
    listing has for them (qstat's -u selects whole jobs by owner)."""
    return ["-u", ",".join(users), *QSTAT_ARGS[2:]]

_RUNNING = frozenset("rt")
_SUSPENDED = frozenset("sST")


def map_state(letters: str) -> tuple[str, str]:
    """Grid Engine state letters -> (Slurm state, Slurm reason).

    The letters are a set, read by precedence: d (deletion) > E (error) > s/S/T (suspended by job,
    queue or threshold) > r/t (running, transferring) > h (hold) > q/w (waiting). Precedence
    matters: ``dr`` is a running job being killed (COMPLETING), ``hr`` a held job that already
    runs (RUNNING), ``Eqw`` a job that failed to start and waits for ``qmod -cj`` (PENDING).
    A plain pending job gets reason "None" here; ``shim.operations.jobs`` refines it (Priority, Resources,
    Licenses, Dependency, JobArrayTaskLimit) with the whole queue in view.
    """
    s = set(letters)
    if "d" in s:
        if s & (_RUNNING | _SUSPENDED):
            return "COMPLETING", "None"
        return "CANCELLED", "None"
    if "E" in s:
        # The job could not be started (missing output directory, shepherd failure, exit 100)
        # and Grid Engine holds it until an operator clears the error: Slurm's launch failure
        # that is requeued and held.
        return "PENDING", "launch failed requeued held"
    if s & _SUSPENDED:
        return "SUSPENDED", "None"
    if s & _RUNNING:
        return "RUNNING", "None"
    if "h" in s:
        return "PENDING", "JobHeldUser"
    if "z" in s:
        return "COMPLETED", "None"
    return "PENDING", "None"


def parse_task_ranges(text: str) -> list[int]:
    """Grid Engine task ids: ``3``, ``3-5:1``, ``1-9:2``, or comma lists of those (jobids.expand);
    nothing for text Grid Engine would not write."""
    from ..slurm.jobids import JobIdError, expand  # (only pending arrays need it: not on qstat's start)

    try:
        return expand(text)
    except JobIdError:
        return []


class QueueMap:
    """Grid Engine queue name -> Slurm partition, from the site config."""

    def __init__(self, cfg: SiteConfig):
        self.default = cfg.default_partition
        self.by_queue: dict[str, str] = {}
        self.shared: set[str] = set()
        for name, p in cfg.partitions.items():
            if p.queue in self.by_queue:
                self.shared.add(p.queue)
            else:
                self.by_queue[p.queue] = name

    def partition(self, queue: str) -> str:
        """A queue (or queue instance ``q@host``, or a wildcard request) as a partition name."""
        q = queue.split("@", 1)[0]
        return self.by_queue.get(q, q)

    def ambiguous(self, queue: str) -> bool:
        return queue.split("@", 1)[0] in self.shared

    def of_request(self, hard_queues) -> str:
        """The partition of a job not running yet, by its hard queue request (-q queue[@host],...):
        its first queue's (an unmapped queue shows as itself, as for a running job); the default
        partition when it asked for no queue. squeue, sprio and sacct show this one."""
        return self.partition(hard_queues[0]) if hard_queues else self.default


def _text(e: ET.Element | None) -> str:
    return (e.text or "") if e is not None else ""


def iter_job_elements(xml: str | bytes) -> Iterable[ET.Element]:
    """Every ``job_list`` element of a ``qstat -xml`` document, running ones first."""
    import xml.etree.ElementTree as ET

    if isinstance(xml, str):
        xml = xml.encode("utf-8", "replace")
    root = ET.fromstring(xml)
    return root.iter("job_list")


class _Lazy:
    """A module regex compiled on first use, when it takes the place of this placeholder:
    compiling them all at import would cost squeue ~10 ms before its qstat can start."""

    def __init__(self, name: str, pattern: str, flags: int = 0):
        self.name, self.pattern, self.flags = name, pattern, flags

    def __getattr__(self, attr: str) -> Any:
        rx = globals()[self.name] = re.compile(self.pattern, self.flags)
        return getattr(rx, attr)


# qstat's job lists are flat (<tag attr="...">text</tag> children only), so a tokenizer reads them
# about twice as fast as a tree; anything unusual (CDATA, nesting) falls back to ElementTree.
_JOB_RE: Any = _Lazy("_JOB_RE", r'<job_list\s+state="([^"]*)"\s*>(.*?)</job_list\s*>', re.S)
_FIELD_RE: Any = _Lazy("_FIELD_RE", r'<(\w+)((?:\s+\w+="[^"]*")*)\s*(?:/>|>([^<]*)</\1\s*>)')
_NAME_RE: Any = _Lazy("_NAME_RE", r'name="([^"]*)"')


def _unescape(text: str) -> str:
    import html

    return html.unescape(text)


def _row(section: str, items: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    row: dict[str, Any] = {"section": section}
    return _row_into(row, items)


def _row_into(row: dict[str, Any], items: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    hard: dict[str, str] = {}
    queues: list[str] = []
    preds: list[str] = []
    _items_into(row, items, hard, queues, preds)
    row["hard"] = hard
    row["hard_queues"] = queues
    row["predecessors"] = preds
    return row


def _items_into(row: dict[str, Any], items: Iterable[tuple[str, str, str]], hard: dict[str, str],
                queues: list[str], preds: list[str]) -> None:
    for tag, attrs, text in items:
        if "&" in text:
            text = _unescape(text)
        if tag == "hard_request":
            m = _NAME_RE.search(attrs)
            name = m.group(1) if m else ""
            hard[_unescape(name) if "&" in name else name] = text
        elif tag == "hard_req_queue":
            queues.append(text)
        elif tag == "predecessor_jobs":
            preds.extend(text.replace(",", " ").split())
        elif tag == "requested_pe":
            m = _NAME_RE.search(attrs)
            row["pe"] = m.group(1) if m else ""
            row["pe_slots"] = text
        else:
            row[tag] = text


# The fast reading. Grid Engine 8.1.9 writes every job element in one layout: the same elements in
# the same order, one per line, then those of -r (full name, PE, hard requests, hard queue,
# predecessors, ..., binding). One regex over a run of complete job elements reads them all in C
# (about 2 us a job). OCS 9 writes the same layout, its pending rows' time as JAT_submission_time.
# Elements beyond the usual ones are the "rest" group, read by _FIELD_RE. If a
# job element of the text does not match at all, the text is read element by element as before.
_LAYOUT = (
    r'<job_list state="([^"<>&]*)">\s*'
    r'<JB_job_number>([^<&]*)</JB_job_number>\s*'
    r'<JAT_prio>([^<&]*)</JAT_prio>\s*'
    r'<JB_name>([^<]*)</JB_name>\s*'
    r'<JB_owner>([^<&]*)</JB_owner>\s*'
    r'<state>([^<&]*)</state>\s*'
    r'<(JB_submission_time|JAT_start_time|JAT_submission_time)>([^<&]*)</\7>\s*'
    r'<queue_name>([^<&]*)</queue_name>\s*'
    r'<slots>([^<&]*)</slots>\s*'
    r'(?:<(tasks)>([^<&]*)</tasks>\s*)?'
    r'(?:<(full_job_name)>([^<]*)</full_job_name>\s*)?'
    r'(?:(<requested_pe) name="([^"<>&]*)">([^<&]*)</requested_pe>\s*)?'
    r'(?:(<granted_pe) name="[^"<>&]*">([^<&]*)</granted_pe>\s*)?'
    r'((?:<hard_request\s[^<]*</hard_request>\s*)*)'
    r'(?:<(hard_req_queue)>([^<&]*)</hard_req_queue>\s*)?'
    r'((?:<predecessor_jobs(?:_req)?>[^<]*</predecessor_jobs(?:_req)?>\s*)*)'
    r'((?:<(?![/!?]|binding>)[^<]*</\w+\s*>\s*)*)'
    r'(?:<(binding)>([^<&]*)</binding>\s*)?'
    r'</job_list>')
_LAYOUT_RE: Any = _Lazy("_LAYOUT_RE", _LAYOUT)
# the same for a text without "&" (no entities to keep out of the fields): a quarter faster
_LAYOUT_PLAIN_RE: Any = _Lazy("_LAYOUT_PLAIN_RE",
                              _LAYOUT.replace("[^<&]*", "[^<]*").replace('[^"<>&]*', '[^"<>]*'))


def _head(m: tuple[str, ...]) -> dict[str, Any]:
    """The row's plain fields from a _LAYOUT_RE match (both readings of a match start with it)."""
    (section, num, prio, name, owner, letters, ttag, ttext, qname, slots, tasks, tasks_text, fjn, fjn_text,
     rpe, rpe_name, rpe_text, gpe, gpe_text) = m[:19]
    row = {"section": section, "JB_job_number": num, "JAT_prio": prio,
           "JB_name": _unescape(name) if "&" in name else name, "JB_owner": owner, "state": letters,
           ttag: ttext, "queue_name": qname, "slots": slots}
    if tasks:
        row["tasks"] = tasks_text
    if fjn:
        row["full_job_name"] = _unescape(fjn_text) if "&" in fjn_text else fjn_text
    if rpe:
        row["pe"] = rpe_name
        row["pe_slots"] = rpe_text
    if gpe:
        row["granted_pe"] = gpe_text
    return row


def _layout_row(m: tuple[str, ...], cache: RowCache | None = None) -> dict[str, Any]:
    """The row of one _LAYOUT_RE match: the same dict as _row over _FIELD_RE's reading of the element.
    With a cache, a run of hard requests seen before in the listing is not read again."""
    hard_run, hrq, hrq_text, deps, rest, binding, binding_text = m[19:]
    row = _head(m)
    hard: dict[str, str] = {}
    queues: list[str] = []
    preds: list[str] = []
    if hard_run:
        if cache is not None:
            hard = cache.hard_run(hard_run)  # only hard_request elements: nothing else to fill
        else:
            _items_into(row, _FIELD_RE.findall(hard_run), hard, queues, preds)
    if hrq:
        queues.append(hrq_text)
    if deps:
        _items_into(row, _FIELD_RE.findall(deps), hard, queues, preds)
    if rest:
        _items_into(row, _FIELD_RE.findall(rest), hard, queues, preds)
    if binding:
        row["binding"] = binding_text
    row["hard"] = hard
    row["hard_queues"] = queues
    row["predecessors"] = preds
    return row


_JOB_OPEN = '<job_list state="'
_JOB_CLOSE = "</job_list>"


class RowReader:
    """``parse_rows`` over a document that arrives in pieces (qstat's stdout while it runs).

    ``feed(data)`` returns the job elements completed so far, in order: each a _LAYOUT_RE match
    (a tuple; ``_layout_row`` makes it a row, ``record_from_match`` a record) or a row (a dict). A
    document that is not plain (CDATA, nesting, an odd job element) is read again whole at
    ``finish()``, which returns (rows, again): with ``again`` the earlier items are void and these
    rows replace them."""

    def __init__(self):
        self.seen: list[bytes | str] = []  # everything fed, for a whole-document reading if needed
        self.rest: bytes | str = b""
        self.plain = True
        self.blank = True  # nothing but white space so far

    def feed(self, data: bytes | str) -> list[tuple[str, ...] | dict[str, Any]]:
        self.seen.append(data)
        if self.blank and data.strip():
            self.blank = False
        if not self.plain:
            return []
        if self.rest:
            data = self.rest + data
        close = _JOB_CLOSE if isinstance(data, str) else b"</job_list>"
        cut = data.rfind(close)
        if cut < 0:
            self.rest = data
            return []
        cut += len(close)
        self.rest = data[cut:]
        text = data[:cut] if isinstance(data, str) else data[:cut].decode("utf-8", "replace")
        items = _plain_items(text)
        if items is None:
            self.plain = False
            return []
        return items

    def finish(self) -> tuple[list[dict[str, Any]], bool]:
        rest = self.rest if isinstance(self.rest, str) else self.rest.decode("utf-8", "replace")
        if self.plain and "<job_list" not in rest and "<![CDATA[" not in rest:
            return [], False
        if self.seen and isinstance(self.seen[0], str):
            whole = "".join(self.seen)
        else:
            whole = b"".join(self.seen).decode("utf-8", "replace")
        return _parse_rows_reference(whole), True


def _plain_items(text: str) -> list[tuple[str, ...] | dict[str, Any]] | None:
    """The job elements of a text that ends with a job element's end tag (see RowReader.feed);
    None unless every one is plain (then the whole document goes to _parse_rows_reference)."""
    if "<![CDATA[" in text:
        return None
    items: list[Any] = (_LAYOUT_RE if "&" in text else _LAYOUT_PLAIN_RE).findall(text)
    if len(items) == text.count("<job_list"):
        return items
    items = []
    pieces = text.split(_JOB_CLOSE)
    if "<job_list" in pieces.pop():
        return None
    for p in pieces:
        i = p.find(_JOB_OPEN)
        if i < 0 or p.find("<job_list", i + 1) >= 0 or p.find("<job_list", 0, i) >= 0:
            return None
        j = p.find('">', i)
        section = p[i + 17:j]
        if j < 0 or '"' in section or ">" in section:
            return None
        body = p[j + 2:]
        m = _LAYOUT_RE.fullmatch(p + _JOB_CLOSE, i)
        items.append(m.groups() if m else _row(section, _FIELD_RE.findall(body)))
    return items


def parse_rows(xml: str | bytes) -> list[dict[str, Any]]:
    """The rows of ``qstat [-r] -xml`` as plain dicts (one per job_list element)."""
    text = xml.decode("utf-8", "replace") if isinstance(xml, bytes) else xml
    r = RowReader()
    items = r.feed(text)
    more, again = r.finish()
    if again:
        return more
    return [_layout_row(x) if type(x) is tuple else x for x in items] + more


def _parse_rows_reference(text: str) -> list[dict[str, Any]]:
    """parse_rows element by element (_JOB_RE, _FIELD_RE), or through ElementTree when irregular."""
    if "<![CDATA[" not in text:
        rows = []
        for m in _JOB_RE.finditer(text):
            body = m.group(2)
            if "<job_list" in body:
                break
            rows.append(_row(m.group(1), _FIELD_RE.findall(body)))
        else:
            if len(rows) == text.count("<job_list"):
                return rows
    return parse_rows_tree(text)


def parse_rows_tree(xml: str | bytes) -> list[dict[str, Any]]:
    """parse_rows through ElementTree (the reference reading, and the fallback)."""
    import html

    return [_row(el.get("state", ""), ((c.tag, "".join(f' {k}="{html.escape(v)}"' for k, v in c.attrib.items()),
                                        html.escape(c.text or "", quote=False)) for c in el))
            for el in iter_job_elements(xml)]


class RowCache:
    """What the rows of one listing share, computed once: state letters, queue instances, times,
    priorities, decoded names, and the site's complexes."""

    def __init__(self, qmap: QueueMap, cfg: SiteConfig):
        from ..slurm.model import JobRecord

        self.cls = JobRecord
        self.qmap = qmap
        self.cfg = cfg
        self.states: dict[str, tuple[str, str]] = {}
        self.insts: dict[str, tuple[str, str]] = {}
        self.parts: dict[str, str] = {}
        self.times: dict[str | None, float | None] = {}
        self.prios: dict[str | None, float] = {}
        self.names: dict[str, str] = {}
        self.hard: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
        self.runs: dict[str, dict[str, str]] = {}
        self.run_res: dict[str, dict[str, Any]] = {}
        self.templates: dict[tuple[str, ...], tuple] = {}  # rows by all but their number (record_from_match)
        self.strs: dict[str, str] = {}  # one string of each text of the listing's rows (record_from_match)
        self.dts: dict[float | None, Any] = {}  # datetimes of timestamps, for shim.operations.jobs
        self.gres = [(f"gres:{name}:", c.complex) for name, c in cfg.gres.items()]
        self.lics = [(f"{name}:", c.complex) for name, c in cfg.licenses.items()]
        self.mem = cfg.memory.complex
        self.mem_per_slot = cfg.memory.scope == "slot"

    def time(self, text: str | None) -> float | None:
        try:
            return self.times[text]
        except KeyError:
            v = self.times[text] = ge_time(text)
            return v

    def place(self, queue_inst: str, hard_queues: list[str] | None) -> tuple[str, str, str]:
        """A job's (queue, host, partition): its queue instance's ("queue@host", split once per
        listing), else the queue of its first hard queue request (-q queue[@host]) and no host;
        the partition of the queue, the default one when there is no queue."""
        if queue_inst:
            try:
                queue, host = self.insts[queue_inst]
            except KeyError:
                queue, _, host = queue_inst.partition("@")
                self.insts[queue_inst] = (queue, host)
        else:
            queue = host = ""
        if not queue and hard_queues:
            queue = hard_queues[0].split("@", 1)[0]
        if not queue:
            return queue, host, self.qmap.default
        try:
            return queue, host, self.parts[queue]
        except KeyError:
            return queue, host, self.partition(queue)

    def partition(self, queue: str) -> str:
        try:
            return self.parts[queue]
        except KeyError:
            v = self.parts[queue] = self.qmap.partition(queue)
            return v

    def state(self, letters: str) -> tuple[str, str]:
        try:
            return self.states[letters]
        except KeyError:
            v = self.states[letters] = map_state(letters)
            return v

    def prio(self, text: str | None) -> float:
        try:
            return self.prios[text]
        except KeyError:
            try:
                v = float(text or 0.0)
            except ValueError:
                v = 0.0
            self.prios[text] = v
            return v

    def name(self, ge_name: str) -> str:
        """The Slurm name of an (escaped) JB_name."""
        try:
            return self.names[ge_name]
        except KeyError:
            v = self.names[ge_name] = self.decoded(_unescape(ge_name) if "&" in ge_name else ge_name)
            return v

    def decoded(self, ge_name: str) -> str:
        key = "\0" + ge_name  # apart from the escaped names
        try:
            return self.names[key]
        except KeyError:
            v = self.names[key] = decode(ge_name)
            return v

    def resources(self, hard: dict[str, str]) -> dict[str, Any]:
        """The record fields of hard resource requests (time limit, gres, licenses, memory)."""
        key = tuple(hard.items())
        try:
            return self.hard[key]
        except KeyError:
            pass
        out: dict[str, Any] = {}
        if "h_rt" in hard:
            secs = ge_seconds(hard["h_rt"])
            if secs is not None:
                out["time_limit"] = -1 if secs < 0 else (secs + 59) // 60
        out["gres"] = ",".join(f"{prefix}{hard[cx]}" for prefix, cx in self.gres if cx in hard)
        out["licenses"] = ",".join(f"{prefix}{hard[cx]}" for prefix, cx in self.lics if cx in hard)
        mem = hard.get(self.mem)
        if mem:
            mb = ge_memory_mb(mem)
            if mb is not None:
                out["min_memory_mb"] = mb
                out["mem_per_cpu"] = self.mem_per_slot
        self.hard[key] = out
        return out

    def run_resources(self, run: str) -> dict[str, Any]:
        """resources() of a run of hard_request elements (the record fields it gives)."""
        try:
            return self.run_res[run]
        except KeyError:
            hard = self.hard_run(run)
            v = self.run_res[run] = self.resources(hard) if hard else {}
            return v

    def hard_run(self, run: str) -> dict[str, str]:
        """The hard requests of a run of hard_request elements (each caller gets its own dict)."""
        try:
            return dict(self.runs[run])
        except KeyError:
            hard: dict[str, str] = {}
            _items_into({}, _FIELD_RE.findall(run), hard, [], [])
            self.runs[run] = hard
            return dict(hard)


_NOT_PLACED = ("PENDING", "CANCELLED")


def record_from_row(row: dict[str, Any], qmap: QueueMap, cfg: SiteConfig, cache: RowCache | None = None) -> JobRecord:
    """One qstat row -> a JobRecord with what Grid Engine knows (Slurm-side fields left default).

    The record is built without JobRecord.__init__ (some fifty defaults): only the fields set here
    are in its __dict__, the rest read the dataclass's class defaults, which is the same record."""
    c = cache if cache is not None else RowCache(qmap, cfg)
    get = row.get
    letters = get("state", "")
    state, reason = c.state(letters)
    queue, host, partition = c.place(get("queue_name", ""), get("hard_queues"))
    slots = _slots(get("slots"), get("pe_slots"))
    placed = host and state not in _NOT_PLACED
    rec = c.cls.__new__(c.cls)
    extra = {"submit_ts": c.time(get("JB_submission_time") or get("JAT_submission_time")),
             "start_ts": c.time(get("JAT_start_time")) if state != "PENDING" else None,
             "ge_row": row}
    rec.__dict__ = {"job_id": int(get("JB_job_number") or 0), "name": c.decoded(get("JB_name", "")),
                    "user": get("JB_owner", ""), "state": state, "reason": reason, "partition": partition,
                    "queue": queue, "ge_state": letters, "num_cpus": slots, "num_tasks": slots,
                    "priority": c.prio(get("JAT_prio")),  # 0..1, Slurm's %p
                    "nodes": [host] if placed else [], "batch_host": host if placed else "", "extra": extra}
    tasks = get("tasks", "")
    if tasks:
        _tasks(extra, state, tasks)
    hard: dict[str, str] = get("hard") or {}
    if hard:
        rec.__dict__.update(c.resources(hard))
    preds = get("predecessors")
    if preds:
        extra["predecessors"] = [int(p) for p in preds if p.isdigit()]
    return rec


def _slots(text: str | None, pe_slots: str | None) -> int:
    """A job's CPU count: the lower end of its parallel environment's slot range (-pe name 4-8),
    else its slots field; 1 when neither reads as a number."""
    if pe_slots:
        try:
            return int(pe_slots.split("-")[0])
        except ValueError:
            pass
    if text == "1":
        return 1
    try:
        return int(text or 1)
    except ValueError:
        return 1


def _tasks(extra: dict[str, Any], state: str, tasks: str) -> None:
    ids = parse_task_ranges(tasks)
    if state == "PENDING" or state == "CANCELLED" or len(ids) != 1 or ":" in tasks or "-" in tasks:
        extra["ge_tasks"] = ids
    else:
        extra["ge_task"] = ids[0]


TEMPLATES = 8192  # rows of a listing kept as templates (RowCache.templates) at most


def record_from_match(m: tuple[str, ...], cache: RowCache) -> JobRecord:
    """record_from_row(_layout_row(m)), built straight from the match: the row itself
    (``extra["ge_row"]``) is made only if it is read (``MatchRow``). A row that differs from an
    earlier one of the listing in its job number alone (a swarm's jobs: the same name, owner,
    state, second, requests) is the earlier record's copy with its own number and lists."""
    c = cache
    key = m[2:7] + m[8:]  # (all but the section, the number and the time)
    t = c.templates.get(key)
    if t is not None and t[0] == m[0]:
        section, fields, extra_t, host, placed = t
        num, ttext = m[1], m[7]
        d = fields.copy()
        d["job_id"] = int(num or 0)
        d["nodes"] = [host] if placed else []
        extra = d["extra"] = extra_t.copy()
        if ttext != extra_t["ge_row"].m[7]:  # (OCS 9's times are to the microsecond: a job's own)
            if m[6] != "JAT_start_time":
                extra["submit_ts"] = c.time(ttext)
            elif d["state"] != "PENDING":
                extra["start_ts"] = c.time(ttext)
        extra["ge_row"] = MatchRow(extra_t["ge_row"].m, c, num, ttext)
        for k in _LISTS:
            if k in extra:
                extra[k] = list(extra[k])
        rec = c.cls.__new__(c.cls)
        rec.__dict__ = d
        return rec
    rec = _record_from_match(m, c)
    if rec is not None and len(c.templates) < TEMPLATES:
        d = rec.__dict__
        fields, extra_t = d.copy(), d["extra"].copy()
        fields["extra"] = fields["nodes"] = None  # (each copy's own)
        c.templates[key] = (m[0], fields, extra_t, d["batch_host"] or (d["nodes"] or [""])[0], bool(d["nodes"]))
        for k in _LISTS:  # (each record gets its own copies: no list is shared)
            if k in extra_t:
                extra_t[k] = list(extra_t[k])
    return rec if rec is not None else record_from_row(_layout_row(m), c.qmap, c.cfg, c)


_LISTS = ("ge_tasks", "predecessors")  # the lists of a record's extra (record_from_match)


def _record_from_match(m: tuple[str, ...], c: RowCache) -> JobRecord | None:
    """record_from_match's record made anew; None where the row has elements beyond the usual
    ones (``rest``: the general way)."""
    (section, num, prio_text, ge_name, owner, letters, ttag, ttext, queue_inst, slots_text, tasks, tasks_text,
     fjn, fjn_text, rpe, rpe_name, rpe_text, gpe, gpe_text, hard_run, hrq, hrq_text, deps, rest, binding,
     binding_text) = m
    if rest:
        return None
    try:
        state, reason = c.states[letters]
    except KeyError:
        state, reason = c.state(letters)
    queue, host, partition = c.place(queue_inst, (hrq_text,) if hrq else None)
    slots = _slots(slots_text, rpe_text if rpe else None)
    try:
        prio = c.prios[prio_text]
    except KeyError:
        prio = c.prio(prio_text)
    try:
        name = c.names[ge_name]
    except KeyError:
        name = c.name(ge_name)
    if ttag != "JAT_start_time":  # JB_submission_time (SGE 8.1.9's pending rows), JAT_submission_time (OCS 9's)
        submit_ts, start_ts = c.time(ttext), None
    else:
        submit_ts, start_ts = None, c.time(ttext) if state != "PENDING" else None
    placed = host and state not in _NOT_PLACED
    rec = c.cls.__new__(c.cls)
    # (the row's texts, one string each of those that repeat: most of a listing's do, and a
    # record keeps its row)
    strs = c.strs.setdefault
    extra = {"submit_ts": submit_ts, "start_ts": start_ts, "ge_row": MatchRow(tuple(map(strs, m, m)), c)}
    d = rec.__dict__ = {"job_id": int(num or 0), "name": name, "user": owner, "state": state, "reason": reason,
                        "partition": partition, "queue": queue, "ge_state": letters, "num_cpus": slots,
                        "num_tasks": slots, "priority": prio, "nodes": [host] if placed else [],
                        "batch_host": host if placed else "", "extra": extra}
    if tasks and tasks_text:
        _tasks(extra, state, tasks_text)
    if hard_run:
        res = c.run_resources(hard_run)
        if res:
            d.update(res)
    if deps:
        preds: list[str] = []
        _items_into({}, _FIELD_RE.findall(deps), {}, [], preds)
        if preds:
            extra["predecessors"] = [int(p) for p in preds if p.isdigit()]
    return rec


class MatchRow:
    """A record's qstat row (``extra["ge_row"]``) kept as its _LAYOUT_RE match: the dict
    ``_layout_row`` makes of it is made on first use (most listings never read it), and reads as
    that dict (``get``, ``[]``, ``in``, iteration, ``items``, equality with a dict). ``get("pe")``,
    what every record's finishing asks, is answered from the match."""

    __slots__ = ("m", "c", "row", "num", "time")

    def __init__(self, m: tuple[str, ...], cache: RowCache | None = None, num: str | None = None,
                 time: str | None = None):
        self.m, self.c, self.row = m, cache, None
        self.num, self.time = num, time  # the job's number and time, where m is another job's match

    def dict(self) -> dict[str, Any]:
        row = self.row
        if row is None:
            m = self.m if self.num is None else (self.m[0], self.num, *self.m[2:7], self.time, *self.m[8:])
            row = self.row = _layout_row(m, self.c)
        return row

    def get(self, key: str, default: Any = None) -> Any:
        if key == "pe" and self.row is None:
            return self.m[15] if self.m[14] else default
        return self.dict().get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.dict()

    def __iter__(self) -> Iterator[str]:
        return iter(self.dict())

    def __len__(self) -> int:
        return len(self.dict())

    def keys(self):
        return self.dict().keys()

    def items(self):
        return self.dict().items()

    def values(self):
        return self.dict().values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MatchRow):
            other = other.dict()
        return self.dict() == other if isinstance(other, dict) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self.dict())


def parse_jobs(xml: str | bytes, cfg: SiteConfig) -> list[JobRecord]:
    """``qstat -u '*' -r -xml`` -> one JobRecord per row (pending array ranges stay one row)."""
    qmap = QueueMap(cfg)
    cache = RowCache(qmap, cfg)
    return [record_from_row(r, qmap, cfg, cache) for r in parse_rows(xml)]


# ---------------------------------------------------------------------------------------------
# running the one qstat call


class Query:
    """The qstat call, started at once (``start``) and read while it runs (``chunks``).

    With the real Grid Engine backend, qstat's stdout is streamed through ``proc.stream``; any
    other backend (replay, tests) answers through its ``run``. Failures surface when the output
    is read, where ``jobs.query`` used to raise them: unreachable qmaster or a missing or hung
    qstat is Slurm's "Unable to contact slurm controller"."""

    def __init__(self, backend: Any, args: list[str]):
        self.backend = backend
        self.args = list(args)
        self.stream: Any = None
        self.error: Exception | None = None
        self.returncode = 0
        self.stderr = ""
        from .calls import streams

        if streams(backend):
            from .. import proc

            try:
                self.stream = proc.stream(backend.argv("qstat", self.args), env=backend.env,
                                          timeout=backend.timeout)
            except proc.SpawnError as e:
                self.error = e

    def chunks(self) -> Iterator[bytes | str]:
        from .. import proc
        from ..errors import BackendUnavailable

        if self.error is not None:
            raise BackendUnavailable(f"slurm_load_jobs error: Unable to contact slurm controller ({self.error})") \
                from self.error
        if self.stream is None:
            res = self.backend.run("qstat", self.args)
            self.returncode, self.stderr = res.returncode, res.stderr
            yield res.stdout
            return
        try:
            yield from self.stream.chunks()
        except proc.SpawnError as e:
            raise BackendUnavailable(f"slurm_load_jobs error: Unable to contact slurm controller ({e})") from e
        self.returncode, self.stderr = self.stream.returncode, self.stream.stderr

    def check(self, blank: bool) -> None:
        """Slurm's error for a qstat that failed without a job list (``blank``: no output but white space)."""
        if self.returncode != 0 and blank:
            from ..errors import ShimError

            msg = self.stderr.strip().splitlines()
            detail_ = msg[-1] if msg else f"qstat exited {self.returncode}"
            raise ShimError(f"slurm_load_jobs error: Unable to contact slurm controller (connect failure): {detail_}")

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


# ---------------------------------------------------------------------------------------------
# qstat -j <ids> -xml: the detailed view (working directory, paths, script, begin time, ...)


def _find_texts(el: ET.Element, path: str) -> list[str]:
    return [e.text or "" for e in el.iterfind(path)]


def parse_detail(xml: str | bytes) -> dict[int, dict[str, Any]]:
    """``qstat -j <ids> -xml`` -> {job number: facts}; unknown ids are simply absent.

    Reads SGE 8.1.9 (``JB_hard_resource_list``, ``JB_hard_queue_list``) and OCS 9
    (``JB_request_set_list/*/JRS_hard_resource_list``) layouts alike.
    """
    import xml.etree.ElementTree as ET

    if isinstance(xml, str):
        xml = xml.encode("utf-8", "replace")
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return {}
    out: dict[int, dict[str, Any]] = {}
    for el in root.iter("element"):
        num = el.find("JB_job_number")
        if num is None or not (num.text or "").strip().isdigit():
            continue
        d: dict[str, Any] = {}
        for tag in ("JB_job_name", "JB_owner", "JB_uid", "JB_group", "JB_gid", "JB_cwd",
                    "JB_script_file", "JB_account", "JB_project", "JB_submission_time",
                    "JB_execution_time", "JB_merge_stderr", "JB_ja_task_concurrency", "JB_ar"):
            e = el.find(tag)
            if e is not None:
                d[tag] = e.text or ""
        d["stdout"] = _find_texts(el, "JB_stdout_path_list/path_list/PN_path")
        d["stderr"] = _find_texts(el, "JB_stderr_path_list/path_list/PN_path")
        d["args"] = _find_texts(el, "JB_job_args/ST_name") or _find_texts(el, "JB_job_args/element/ST_name")
        hard: dict[str, str] = {}
        for req in list(el.iterfind("JB_hard_resource_list/qstat_l_requests")) + list(
                el.iterfind("JB_request_set_list/*/JRS_hard_resource_list/qstat_l_requests")) + list(
                el.iterfind("JB_hard_resource_list/element")):
            name = _text(req.find("CE_name"))
            if name:
                hard[name] = _text(req.find("CE_stringval"))
        d["hard"] = hard
        d["hard_queues"] = (_find_texts(el, "JB_hard_queue_list/destin_ident_list/QR_name")
                            or _find_texts(el, "JB_request_set_list/*/JRS_hard_queue_list/destin_ident_list/QR_name")
                            or _find_texts(el, "JB_hard_queue_list/element/QR_name"))
        d["pe"] = _text(el.find("JB_pe"))
        pe_min = _find_texts(el, "JB_pe_range/ranges/RN_min") or _find_texts(el, "JB_pe_range/element/RN_min")
        d["pe_slots"] = pe_min[0] if pe_min else ""
        d["predecessors"] = _find_texts(el, "JB_jid_predecessor_list/job_predecessors/JRE_job_number") or \
            _find_texts(el, "JB_jid_predecessor_list/element/JRE_job_number")
        tasks = []
        for t in list(el.iterfind("JB_ja_tasks/ulong_sublist")) + list(el.iterfind("JB_ja_tasks/element")) + \
                list(el.iterfind("JB_ja_tasks/task")):
            tn = _text(t.find("JAT_task_number"))
            if not tn:
                continue
            hosts = _find_texts(t, "JAT_granted_destin_identifier_list/element/JG_qhostname") or \
                _find_texts(t, "JAT_granted_destin_identifier_list/JG_qhostname")
            tasks.append({"task": int(tn), "status": _text(t.find("JAT_status")),
                          "start": ge_time(_text(t.find("JAT_start_time"))), "hosts": hosts})
        d["tasks"] = tasks
        d["submit_ts"] = ge_time(d.get("JB_submission_time"))
        out[int(num.text.strip())] = d
    return out
