"""``qstat -j <ids> -xml`` read as the job list's rows of those jobs (issue 29, "a big queue").

Grid Engine's job list selects by owner, never by job: a caller who acts on job N of a queue of
100,000 would read all of them to make N's record. ``rows`` makes, from the detail of the named
jobs alone, the same row dicts ``qstat.RowReader`` gives for them (``qstat.record_from_row`` then
makes the same records), for the jobs whose rows the detail determines, and None for any answer
it cannot read whole: then the caller lists the jobs as before. Never a guess:

- only jobs with no task enrolled (``JB_ja_tasks`` empty: none dispatched, none in error or being
  rescheduled) and no array (``JB_type``'s array bit clear, one task in ``JB_ja_structure``): the
  listing's one pending row. Enrolled tasks carry their state and host in ``JAT_state`` and
  ``JAT_granted_destin_identifier_list`` on OCS 9 only (SGE 8.1.9's detail has neither), and a
  task running in a suspended queue is ``S`` in the listing from the queue's state, which the
  detail does not carry; arrays need the hold lists per task (SGE 8.1.9's detail has none);
- every id asked about is either a job of the answer or one it names unknown (``unknown_jobs``);
- the document is the one Grid Engine writes (``detailed_job_info`` with ``djob_info`` and
  ``messages``; ``unknown_jobs``), each job element with its number, owner, name and type.

Where the rows are not determined but the answer reads, ``answer`` still gives each job's owner
(or none, for a job Grid Engine names unknown): the caller reads those owners' listing only.

The state letters are ``qw``, with ``h`` before them where the job waits for predecessors
(``-hold_jid``, ``-hold_jid_ad``) or one of the hold lists (``JB_ja_[uosa]_h_ids``, OCS 9) holds
its task, as qstat's listing writes them. SGE 8.1.9's detail has no hold lists, and nothing else
in it tells a held job from a waiting one (fixtures/gridengine/sge-8.1.9/onejob-qstat-j-xml.xml):
a job held with ``qhold``/``-h`` reads ``qw`` there, and then a waiting job's reason, not
JobHeldUser. The callers of this path (scancel N, scontrol's job-control verbs: jobs.list_jobs'
``direct``) read the state (PENDING either way), never the letters, reason or priority;
``JAT_prio`` is not in the detail and reads 0.

``answer(..., held=True)`` (scontrol show job N: jobs.held_rows) gives rows only
where every job named is held by a hold list (OCS 9) and waits for no predecessor: there the row
is the listing's in every field those commands print. The listing gives a held job (``hqw``)
JAT_prio 0 (onejob-qstat-u-root-r-xml.xml), as Slurm prints Priority=0 for a held job; its
reason (JobHeldUser, or JobHeldAdmin from root's record: store/holds.mark, applied to these rows
as to the listing's) depends on no other job. SGE 8.1.9's detail has no hold lists: never there.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any

    import xml.etree.ElementTree as ET

ARRAY_BIT = 0x80  # JB_type's JOB_TYPE_ARRAY (qsub -t): 192 for the recorded arrays, 64 for -b y jobs
HOLD_LISTS = ("JB_ja_u_h_ids", "JB_ja_o_h_ids", "JB_ja_s_h_ids", "JB_ja_a_h_ids")
ID_LISTS = ("JB_ja_n_h_ids", *HOLD_LISTS)
PREDECESSORS = ("JB_jid_predecessor_list", "JB_ja_ad_predecessor_list")
TOP = frozenset({"djob_info", "messages"})


def _text(el: ET.Element | None) -> str:
    return (el.text or "").strip() if el is not None else ""


def _items(el: ET.Element | None) -> list[ET.Element]:
    """The entries of a list element (SGE 8.1.9 names them by type, OCS 9 ``element``)."""
    return list(el) if el is not None else []


def _ranges(el: ET.Element | None) -> list[tuple[int, int, int]] | None:
    """A task id range list's (min, max, step) ranges; None where one does not read."""
    out = []
    for r in _items(el):
        lo, hi, step = _text(r.find("RN_min")), _text(r.find("RN_max")), _text(r.find("RN_step"))
        if not (lo.isdigit() and hi.isdigit() and step.isdigit()):
            return None
        out.append((int(lo), int(hi), int(step)))
    return out


def _holds(ranges: list[tuple[int, int, int]], task: int) -> bool:
    return any(lo <= task <= hi and (step == 0 or (task - lo) % step == 0) for lo, hi, step in ranges)


def rows(returncode: int, text: str | bytes, ids: list[int]) -> list[dict[str, Any]] | None:
    """The listing's rows of the jobs ``ids`` from ``qstat -j <ids> -xml``'s answer (rc, stdout):
    one per job found, none for a job Grid Engine names unknown; None where the answer is not one
    to read whole (see the module's doc: the caller then lists the jobs)."""
    return answer(returncode, text, ids)[0]


def answer(returncode: int, text: str | bytes, ids: list[int], held: bool = False
           ) -> tuple[list[dict[str, Any]] | None, dict[int, str] | None]:
    """(rows, owners) of ``qstat -j <ids> -xml``'s answer: ``rows`` as ``rows`` gives them;
    ``owners`` {job number: owner} of the jobs found (none for those Grid Engine names unknown),
    where the answer reads and accounts for every id, else None. With rows None and owners given,
    the owners' listing has the named jobs' rows (the caller lists them, and no one else's).

    ``held``: rows only where every job named is found and a hold list holds it (OCS 9's
    ``JB_ja_[uosa]_h_ids``) with no predecessors, else None: the rows whose every field scontrol
    show job prints is the listing's."""
    import xml.etree.ElementTree as ET

    if returncode not in (0, 1) or not text or not ids:
        return None, None
    if isinstance(text, str):
        text = text.encode("utf-8", "replace")
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None, None
    wanted = set(ids)
    if root.tag == "unknown_jobs":
        gone = {_text(e) for e in root}
        if all(e.tag == "ST_name" for e in root) and gone == {str(j) for j in wanted}:
            return (None if held else []), {}
        return None, None
    if root.tag != "detailed_job_info" or returncode != 0 or any(c.tag not in TOP for c in root):
        return None, None
    out: list[dict[str, Any]] | None = []
    owners: dict[int, str] = {}
    for info in root.findall("djob_info"):
        for el in info:
            num = _text(el.find("JB_job_number"))
            if not num.isdigit() or int(num) not in wanted:
                continue  # (not asked about: no part of the answer)
            owner = _text(el.find("JB_owner"))
            if not owner:
                return None, None
            owners[int(num)] = owner
            row = _row(el) if out is not None and (not held or _held_by_list(el)) else None
            if row is None:
                out = None  # (the owners still count: the caller lists theirs)
            else:
                out.append(row)
    if set(owners) != wanted:
        return None, None  # an id neither found nor named unknown
    return out, owners


def _held_by_list(el: ET.Element) -> bool:
    """Does one of the hold lists (OCS 9) hold the job's one task, with no predecessors to wait for?"""
    if any(_items(el.find(t)) for t in PREDECESSORS):
        return False
    return any(_holds(_ranges(el.find(t)) or [], 1) for t in HOLD_LISTS)


def _row(el: ET.Element) -> dict[str, Any] | None:
    """One job element as the listing's pending row of it (qstat.RowReader's keys), None where
    the element is not one of a job whose row it determines."""
    num, owner, name, kind = (_text(el.find(t)) for t in ("JB_job_number", "JB_owner", "JB_job_name", "JB_type"))
    if not (num.isdigit() and owner and el.find("JB_job_name") is not None and kind.isdigit()):
        return None
    if int(kind) & ARRAY_BIT or _items(el.find("JB_ja_tasks")):
        return None  # an array, or a task enrolled (running, in error, rescheduled, being deleted)
    structure = _ranges(el.find("JB_ja_structure"))
    if structure != [(1, 1, 1)] and structure != [(1, 1, 0)]:
        return None
    held = False
    listed = False
    for tag in ID_LISTS:
        ranges = _ranges(el.find(tag))
        if ranges is None:
            return None
        if _holds(ranges, 1):
            listed = True
            held = held or tag in HOLD_LISTS
    if not listed and any(el.find(t) is not None for t in ID_LISTS):
        return None  # OCS 9 lists its pending task: a job whose lists lack it is no plain pending job
    preds = [_text(e.find("JRE_job_number")) for e in _items(el.find("JB_jid_predecessor_list"))]
    if any(_items(el.find(t)) for t in PREDECESSORS):
        held = True
    submitted = _text(el.find("JB_submission_time"))
    if not submitted:
        return None
    pe = _text(el.find("JB_pe"))
    pe_range = _ranges(el.find("JB_pe_range"))
    if pe and not pe_range:
        return None
    row: dict[str, Any] = {"section": "pending", "JB_job_number": num, "JAT_prio": "0", "JB_name": name,
                           "JB_owner": owner, "state": "hqw" if held else "qw", "JB_submission_time": submitted,
                           "queue_name": "", "slots": str(pe_range[0][0]) if pe and pe_range else "1"}
    if pe and pe_range:
        lo, hi, _step = pe_range[0]
        row["pe"] = pe
        row["pe_slots"] = str(lo) if lo == hi else f"{lo}-{hi}"
    row["hard"] = _requests(el)
    row["hard_queues"] = [q for q in (_text(d.find("QR_name")) for d in _queues(el)) if q]
    row["predecessors"] = [p for p in preds if p]
    return row


def _requests(el: ET.Element) -> dict[str, str]:
    """The hard resource requests, as the listing's ``hard_request`` elements give them: name -> value."""
    hard: dict[str, str] = {}
    reqs = _items(el.find("JB_hard_resource_list"))
    for rs in _items(el.find("JB_request_set_list")):  # OCS 9: the request sets' hard lists
        reqs.extend(_items(rs.find("JRS_hard_resource_list")))
    for req in reqs:
        name = _text(req.find("CE_name"))
        if name:
            hard[name] = _text(req.find("CE_stringval"))
    return hard


def _queues(el: ET.Element) -> list[ET.Element]:
    qs = _items(el.find("JB_hard_queue_list"))
    for rs in _items(el.find("JB_request_set_list")):
        qs.extend(_items(rs.find("JRS_hard_queue_list")))
    return qs
