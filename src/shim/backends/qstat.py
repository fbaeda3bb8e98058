"""Grid Engine's ``qstat -xml`` read into scheduler-neutral JobRecords.

``parse_jobs`` reads the job list of ``qstat -u '*' -r -xml`` (SGE 8.1.9 and OCS 9: both
``JB_submission_time`` and ``JAT_submission_time``, timestamps with or without microseconds);
``map_state`` turns a Grid Engine state string into a Slurm state and reason; ``parse_detail``
reads ``qstat -j <ids> -xml``. Only Grid Engine facts go into the records here: the shim's own
records (Slurm names of array indices, throttles, comments) are merged by ``shim.jobs``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import SiteConfig

import html
import re
import xml.etree.ElementTree as ET
from datetime import datetime
from typing import Any, Iterable

from ..model import JobRecord
from ..names import decode

# The one qstat call squeue, scancel and scontrol make: every user's jobs, with requests (-r)
# for hard queue requests (partition of pending jobs), resource requests (time limit, gres,
# licenses, memory), the parallel environment (CPUs) and predecessor jobs (dependencies).
QSTAT_ARGS = ["-u", "*", "-r", "-xml"]

_RUNNING = frozenset("rt")
_SUSPENDED = frozenset("sST")


def map_state(letters: str) -> tuple[str, str]:
    """Grid Engine state letters -> (Slurm state, Slurm reason).

    The letters are a set, read by precedence: d (deletion) > E (error) > s/S/T (suspended by job,
    queue or threshold) > r/t (running, transferring) > h (hold) > q/w (waiting). Precedence
    matters: ``dr`` is a running job being killed (COMPLETING), ``hr`` a held job that already
    runs (RUNNING), ``Eqw`` a job that failed to start and waits for ``qmod -cj`` (PENDING).
    A plain pending job gets reason "None" here; ``shim.jobs`` refines it (Priority, Resources,
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


STATE_CODES = {
    "PENDING": "PD", "RUNNING": "R", "SUSPENDED": "S", "COMPLETING": "CG", "COMPLETED": "CD",
    "CANCELLED": "CA", "FAILED": "F", "TIMEOUT": "TO", "NODE_FAIL": "NF", "PREEMPTED": "PR",
    "BOOT_FAIL": "BF", "DEADLINE": "DL", "OUT_OF_MEMORY": "OOM", "CONFIGURING": "CF",
    "RESIZING": "RS", "RESV_DEL_HOLD": "RD", "REQUEUED": "RQ", "REQUEUE_FED": "RF",
    "REQUEUE_HOLD": "RH", "REVOKED": "RV", "SIGNALING": "SI", "SPECIAL_EXIT": "SE",
    "STAGE_OUT": "SO", "STOPPED": "ST",
}


def parse_time(text: str | None) -> float | None:
    """A qstat timestamp as epoch seconds: ISO local time with optional microseconds (``-xml``
    lists, OCS 9 ``-j``), or epoch seconds (SGE 8.1.9 ``-j -xml``); 0 means unset."""
    if not text:
        return None
    t = text.strip()
    if t.isdigit():
        v = int(t)
        return float(v) if v else None
    try:
        return datetime.fromisoformat(t).timestamp()
    except ValueError:
        return None


def parse_duration(text: str) -> int | None:
    """A Grid Engine time value (seconds, or [[H:]M:]S; INFINITY) as seconds; -1 for infinity."""
    t = text.strip()
    if not t:
        return None
    if t.upper() in ("INFINITY", "INFINITE", "UNLIMITED"):
        return -1
    try:
        parts = [int(p) if p else 0 for p in t.split(":")]
    except ValueError:
        try:
            return int(float(t))
        except ValueError:
            return None
    secs = 0
    for p in parts:
        secs = secs * 60 + p
    return secs


_MB = 1024 * 1024
# Grid Engine memory suffixes: upper case are powers of 1024, lower case powers of 1000
_MEM_UNITS = {"": 1 / _MB, "K": 1024 / _MB, "M": 1, "G": 1024, "T": 1024 * 1024,
              "k": 1e3 / _MB, "m": 1e6 / _MB, "g": 1e9 / _MB, "t": 1e12 / _MB}


def parse_memory_mb(text: str) -> int | None:
    """A Grid Engine memory value (``1G``, ``512M``, bytes) in MB (binary units for K/M/G/T)."""
    t = text.strip()
    if not t:
        return None
    unit = t[-1] if t[-1].isalpha() else ""
    num = t[:-1] if unit else t
    try:
        v = float(num)
    except ValueError:
        return None
    scale = _MEM_UNITS.get(unit)
    if scale is None:
        return None
    return int(round(v * scale))


def parse_task_ranges(text: str) -> list[int]:
    """Grid Engine task ids: ``3``, ``3-5:1``, ``1-9:2``, or comma lists of those."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        rng, _, step = part.partition(":")
        a, dash, b = rng.partition("-")
        try:
            lo = int(a)
            hi = int(b) if dash else lo
            st = int(step) if step else 1
        except ValueError:
            continue
        out.extend(range(lo, hi + 1, max(st, 1)))
    return out


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


def _text(e: ET.Element | None) -> str:
    return (e.text or "") if e is not None else ""


def iter_job_elements(xml: str | bytes) -> Iterable[ET.Element]:
    """Every ``job_list`` element of a ``qstat -xml`` document, running ones first."""
    if isinstance(xml, str):
        xml = xml.encode("utf-8", "replace")
    root = ET.fromstring(xml)
    return root.iter("job_list")


# qstat's job lists are flat (<tag attr="...">text</tag> children only), so a tokenizer reads them
# about twice as fast as a tree; anything unusual (CDATA, nesting) falls back to ElementTree.
_JOB_RE = re.compile(r'<job_list\s+state="([^"]*)"\s*>(.*?)</job_list\s*>', re.S)
_FIELD_RE = re.compile(r'<(\w+)((?:\s+\w+="[^"]*")*)\s*(?:/>|>([^<]*)</\1\s*>)')
_NAME_RE = re.compile(r'name="([^"]*)"')


def _row(section: str, items: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    row: dict[str, Any] = {"section": section}
    hard: dict[str, str] = {}
    queues: list[str] = []
    preds: list[str] = []
    for tag, attrs, text in items:
        if "&" in text:
            text = html.unescape(text)
        if tag == "hard_request":
            m = _NAME_RE.search(attrs)
            hard[html.unescape(m.group(1)) if m else ""] = text
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
    row["hard"] = hard
    row["hard_queues"] = queues
    row["predecessors"] = preds
    return row


def parse_rows(xml: str | bytes) -> list[dict[str, Any]]:
    """The rows of ``qstat [-r] -xml`` as plain dicts (one per job_list element)."""
    text = xml.decode("utf-8", "replace") if isinstance(xml, bytes) else xml
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
    return [_row(el.get("state", ""), ((c.tag, "".join(f' {k}="{html.escape(v)}"' for k, v in c.attrib.items()),
                                        html.escape(c.text or "", quote=False)) for c in el))
            for el in iter_job_elements(xml)]


def record_from_row(row: dict[str, Any], qmap: QueueMap, cfg: SiteConfig) -> JobRecord:
    """One qstat row -> a JobRecord with what Grid Engine knows (Slurm-side fields left default)."""
    letters = row.get("state", "")
    state, reason = map_state(letters)
    queue_inst = row.get("queue_name", "")
    hard: dict[str, str] = row.get("hard", {})
    queue = queue_inst.split("@", 1)[0] if queue_inst else ""
    if not queue and row.get("hard_queues"):
        queue = row["hard_queues"][0].split("@", 1)[0]
    partition = qmap.partition(queue) if queue else qmap.default
    host = queue_inst.split("@", 1)[1] if "@" in queue_inst else ""
    try:
        slots = int(row.get("slots") or 1)
    except ValueError:
        slots = 1
    if row.get("pe_slots"):
        try:
            slots = int(row["pe_slots"].split("-")[0])
        except ValueError:
            pass
    try:
        prio = float(row.get("JAT_prio") or 0.0)
    except ValueError:
        prio = 0.0
    submit = parse_time(row.get("JB_submission_time") or row.get("JAT_submission_time"))
    start = parse_time(row.get("JAT_start_time")) if state != "PENDING" else None
    rec = JobRecord(
        job_id=int(row.get("JB_job_number") or 0),
        name=decode(row.get("JB_name", "")),
        user=row.get("JB_owner", ""),
        state=state,
        reason=reason,
        partition=partition,
        queue=queue,
        ge_state=letters,
        num_cpus=slots,
        num_tasks=slots,
        priority=prio,  # type: ignore[arg-type]  # 0..1, Slurm's %p
        nodes=[host] if host and state not in ("PENDING", "CANCELLED") else [],
        batch_host=host if state not in ("PENDING", "CANCELLED") else "",
    )
    rec.extra["submit_ts"] = submit
    rec.extra["start_ts"] = start
    rec.extra["ge_row"] = row
    tasks = row.get("tasks", "")
    if tasks:
        ids = parse_task_ranges(tasks)
        if state == "PENDING" or state == "CANCELLED" or len(ids) != 1 or ":" in tasks or "-" in tasks:
            rec.extra["ge_tasks"] = ids
        else:
            rec.extra["ge_task"] = ids[0]
    if "h_rt" in hard:
        secs = parse_duration(hard["h_rt"])
        if secs is not None:
            rec.time_limit = -1 if secs < 0 else (secs + 59) // 60
    gres = []
    for name, c in cfg.gres.items():
        if c.complex in hard:
            gres.append(f"gres:{name}:{hard[c.complex]}")
    rec.gres = ",".join(gres)
    lic = []
    for name, c in cfg.licenses.items():
        if c.complex in hard:
            lic.append(f"{name}:{hard[c.complex]}")
    rec.licenses = ",".join(lic)
    mem = hard.get(cfg.memory.complex)
    if mem:
        mb = parse_memory_mb(mem)
        if mb is not None:
            rec.min_memory_mb = mb
            rec.mem_per_cpu = cfg.memory.scope == "slot"
    if row.get("predecessors"):
        rec.extra["predecessors"] = [int(p) for p in row["predecessors"] if p.isdigit()]
    return rec


def parse_jobs(xml: str | bytes, cfg: SiteConfig) -> list[JobRecord]:
    """``qstat -u '*' -r -xml`` -> one JobRecord per row (pending array ranges stay one row)."""
    qmap = QueueMap(cfg)
    return [record_from_row(r, qmap, cfg) for r in parse_rows(xml)]


# ---------------------------------------------------------------------------------------------
# qstat -j <ids> -xml: the detailed view (working directory, paths, script, begin time, ...)


def _find_texts(el: ET.Element, path: str) -> list[str]:
    return [e.text or "" for e in el.iterfind(path)]


def parse_detail(xml: str | bytes) -> dict[int, dict[str, Any]]:
    """``qstat -j <ids> -xml`` -> {job number: facts}; unknown ids are simply absent.

    Reads SGE 8.1.9 (``JB_hard_resource_list``, ``JB_hard_queue_list``) and OCS 9
    (``JB_request_set_list/*/JRS_hard_resource_list``) layouts alike.
    """
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
                    "JB_execution_time", "JB_merge_stderr", "JB_ja_task_concurrency"):
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
                          "start": parse_time(_text(t.find("JAT_start_time"))), "hosts": hosts})
        d["tasks"] = tasks
        d["submit_ts"] = parse_time(d.get("JB_submission_time"))
        out[int(num.text.strip())] = d
    return out


# ---------------------------------------------------------------------------------------------
# qstat -f -xml: queue instances (hosts, slots, states), for scontrol show partition/node


def parse_queues(xml: str | bytes) -> list[dict[str, Any]]:
    """``qstat -f -xml`` -> [{queue, host, slots_used, slots_total, state, load_avg, arch}]."""
    if isinstance(xml, str):
        xml = xml.encode("utf-8", "replace")
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return []
    out = []
    for ql in root.iter("Queue-List"):
        name = _text(ql.find("name"))
        queue, _, host = name.partition("@")

        def num(tag: str) -> int:
            try:
                return int(_text(ql.find(tag)) or 0)
            except ValueError:
                return 0

        out.append({"queue": queue, "host": host, "slots_used": num("slots_used"),
                    "slots_total": num("slots_total"), "state": _text(ql.find("state")),
                    "load_avg": _text(ql.find("load_avg")), "arch": _text(ql.find("arch"))})
    return out


def parse_hosts(xml: str | bytes) -> dict[str, dict[str, str]]:
    """``qhost -xml`` -> {host: {arch_string, num_proc, m_socket, m_core, m_thread, mem_total, ...}}."""
    if isinstance(xml, str):
        xml = xml.encode("utf-8", "replace")
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return {}
    out: dict[str, dict[str, str]] = {}
    for h in root.iter("host"):
        name = h.get("name", "")
        if not name or name == "global":
            continue
        out[name] = {v.get("name", ""): (v.text or "") for v in h.iter("hostvalue")}
    return out
