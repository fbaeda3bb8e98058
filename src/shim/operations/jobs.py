"""The job list squeue, scancel, scontrol and sacct share: one ``qstat`` call, merged with the
shim's own records.

Grid Engine supplies what is queued or running; the shim's state directory supplies the Slurm
side (array indices, throttles, comments, accounts) and the jobs that ended or were cancelled
recently (``cluster.min_job_age``), which Grid Engine forgets at once. Submit records are read
only where qstat cannot answer: array jobs, jobs whose partition is ambiguous, ended jobs, and
fields a format asks for (``detail``). Only the records of a job's owner (as Grid Engine reports
the owner), or root's naming that owner, speak for it; see records.py.
"""

from __future__ import annotations

import gc
import os
import pwd
import time
from datetime import datetime

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)

from ..store import state
from ..store.records import NO_RECORD, USER_IDS, Reader, Submitted, cancel_ended, ended_reason, group_of, memory_request, user_ids
from ..slurm.request import MISSING
from ..slurm.users import own_name  # (tests replace jobs.own_name)
from ..gridengine import backends, qstat as q
from ..gridengine.units import ge_time
from ..slurm.model import ACTIVE_STATES, FIELDS, JobRecord  # noqa: F401  (ACTIVE_STATES: cli/scancel and squeue read it from here)
from ..slurm.model import PRIO_SCALE, run_seconds  # noqa: F401  (Slurm's, read as jobs.X too)

if TYPE_CHECKING:
    from typing import Any, Iterable

    from ..config import SiteConfig

ENDED_REASONS = {"TIMEOUT": "TimeLimit", "OUT_OF_MEMORY": "OutOfMemory", "NODE_FAIL": "NodeDown",
                 "FAILED": "NonZeroExitCode", "BOOT_FAIL": "NodeDown", "DEADLINE": "DeadLine"}


class JobList:
    """A listing: its records, the job ids that exist (queued, running, or ended recently), the
    time it was taken and the Reader it read the shim's records with. (A plain class: a dataclass
    costs ``dataclasses``'s import, ~10 ms of the start of every command that lists jobs.)"""

    __slots__ = ("records", "known", "now", "reader")

    def __init__(self, records: list[JobRecord], known: set[int] | None = None, now: float = 0.0,
                 reader: Any = None):
        self.records = records
        self.known = set() if known is None else known
        self.now = now
        self.reader = reader

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.records, self.known, self.now, self.reader) == (other.records, other.known, other.now,
                                                                     other.reader)

    __hash__ = None

    def __repr__(self) -> str:
        return f"JobList(records={self.records!r}, known={self.known!r}, now={self.now!r}, reader={self.reader!r})"


# ---------------------------------------------------------------------------------------------
# small helpers


def group_name(gid: int | None) -> str:
    """A job's group as squeue's %g and scontrol's GroupId print it: the name, else the number
    (records.group_of, the one lookup; sacct's Group prints nothing for an unknown gid)."""
    if gid is None:
        return ""
    return group_of(gid) or str(gid)


def pending_text(indices: Iterable[int], throttle: int | None) -> str:
    """A pending array's indices as Slurm lists them (jobids.compress), ``%throttle`` after
    (jobids loads when a listing has an array: not on every squeue's start)."""
    from ..slurm.jobids import compress

    s = compress(indices)
    return f"{s}%{throttle}" if throttle else s


def _dt(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(ts) if ts else None


def _int(v: Any, default: int) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


# ---------------------------------------------------------------------------------------------
# the submit record, read on demand


def submit_record(cfg: SiteConfig, rec: JobRecord) -> Submitted | None:
    """The shim's submit record of the job (cached on the record); None for non-shim jobs. Only
    the record of the job's owner as Grid Engine reports it (or root's copy of it) counts, and
    only one stamped for the Grid Engine job with this number (see records.py)."""
    extra = rec.extra
    if "submit" not in extra:
        reader = extra.get("submit_records")
        if reader is None:
            reader = extra["submit_records"] = Reader(cfg, 1)
        owner = rec.uid if rec.uid is not None else rec.user
        extra["submit"] = reader.submit(rec.job_id, owner, extra.get("submit_ts")) if owner not in (None, "") else None
    return extra["submit"]


def start_details(cfg: SiteConfig, ids: set[int], backend: Any = None) -> q.Query | None:
    """``qstat -j <ids> -xml`` started now, for ``add_grid_engine_detail`` (``started``), so that
    it runs beside the job listing (scontrol show job N); None where no id lacks a submit record
    in every user's directory (a job submitted through the shim needs no detail of Grid Engine's:
    an lstat per user, nothing read)."""
    if not ids or _first_record(cfg, ids) is not None:
        return None
    from ..gridengine import ops

    return q.Query(backend if backend is not None else _backend(cfg), ops.detail(sorted(ids))[1])


def _first_record(cfg: SiteConfig, ids: set[int]) -> tuple[int, str] | None:
    """(uid, path) of the first submit record of any of ``ids`` in any user's directory: an lstat
    per user and id, nothing read (whose job it is, the listing says later)."""
    from ..store import layout

    for uid, d in state.user_dirs(cfg):
        for j in ids:
            name = f"{int(j)}.json"
            for path in (layout.id_path(d, "jobs", j, name), os.path.join(layout.old_dir(d, "jobs"), name)):
                try:
                    os.lstat(path)
                except OSError:
                    continue
                return uid, path
    return None


def recorded_ar(cfg: SiteConfig, job: int) -> str | None:
    """A hint taken before the job list is read: the ``ar`` of the first submit record of ``job``
    found in any user's directory ("" none), None where none says. Whose record it is is not
    known yet, so it only decides whether to start qrstat early (show.jobs_shown);
    fill_reservations reads the owner's record itself."""
    found = _first_record(cfg, {job})
    data = state.read_json(found[1], found[0]) if found else None
    ar = data.get("ar") if data else None
    return ar if isinstance(ar, str) else None


def add_grid_engine_detail(cfg: SiteConfig, recs: list[JobRecord], backend, started: q.Query | None = None) -> None:
    """A detail source for jobs not submitted through the shim (no submit record): working
    directory, command, output paths, throttle, account, submission and begin times, from Grid
    Engine's own job detail (one ``GridEngine.details`` call for all of them; ``started``'s
    answer, ``start_details``, where it asked about these jobs)."""
    todo = sorted({r.job_id for r in recs if not r.extra.get("ended") and not submit_record(cfg, r)})
    if started is not None and (not todo or started.args[1] != ",".join(map(str, todo))):
        started.close()
        started = None
    if not todo:
        return
    if started is not None:
        from ..gridengine.qstat import parse_detail

        try:
            text = b"".join(c if isinstance(c, bytes) else c.encode() for c in started.chunks())
        finally:
            started.close()
        details = parse_detail(text)
    else:
        details = backend.details(todo)
    for r in recs:
        d = details.get(r.job_id)
        if not d:
            continue
        cwd = d.get("JB_cwd") or _home(r.user)  # without -cwd a Grid Engine job runs in $HOME
        r.work_dir = r.work_dir or cwd
        script = d.get("JB_script_file") or ""
        if script:
            r.command = script if os.path.isabs(script) or not cwd else os.path.join(cwd, script)
            if d.get("args"):
                r.command += " " + " ".join(d["args"])
        # Grid Engine's default files: <name>.o<job>[.<task>] and .e in the working directory
        task = f".{r.array_task}" if r.array_task is not None else ""
        ge_name = d.get("JB_job_name") or r.name
        out = d["stdout"][0] if d.get("stdout") else f"{ge_name}.o{r.job_id}{task}"
        err = d["stderr"][0] if d.get("stderr") else f"{ge_name}.e{r.job_id}{task}"
        if d.get("JB_merge_stderr") in ("true", "TRUE", "1"):
            err = out
        r.std_out = out if os.path.isabs(out) or not cwd else os.path.join(cwd, out)
        r.std_err = err if os.path.isabs(err) or not cwd else os.path.join(cwd, err)
        tc = d.get("JB_ja_task_concurrency") or "0"
        if r.is_array and not r.array_max_tasks and tc.isdigit() and int(tc):
            r.array_max_tasks = int(tc)
        if d.get("JB_account") and d["JB_account"] != "sge":
            from ..gridengine.names import decode  # accounts Grid Engine refuses are stored as names are

            r.account = decode(d["JB_account"])
        if r.submit_time is None and d.get("submit_ts"):
            r.submit_time = datetime.fromtimestamp(d["submit_ts"])
        r.extra["ar"] = (d.get("JB_ar") or "").strip()  # its advance reservation (fill_reservations)
        begin = ge_time(d.get("JB_execution_time"))
        if begin and begin > time.time() and r.state == "PENDING" and r.reason in ("Resources", "Priority"):
            r.reason = "BeginTime"
            r.start_time = datetime.fromtimestamp(begin)


def _home(user: str) -> str:
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return ""


def ge_ids(cfg: SiteConfig, job_id: int, tasks: list[int] | None, rec: JobRecord | None) -> list[str]:
    """Grid Engine's ids for a job (``tasks`` None) or some of its array tasks, given as Slurm
    indices: each index is mapped to its Grid Engine task number through the index list of the
    submit record of the job's owner as Grid Engine reports the owner (nobody else's record maps
    the tasks; without a record the index is the task number), then runs become ranges."""
    if tasks is None:
        return [str(job_id)]
    from ..gridengine.ops import task_ids

    array = ((submit_record(cfg, rec) if rec is not None else None) or NO_RECORD).array or []
    if array:
        pos = {int(v): i + 1 for i, v in enumerate(array)}
        tasks = [pos[i] for i in tasks if i in pos]
    return task_ids(job_id, tasks)


SubmitRecords = Reader  # the submit records of one listing's jobs (read as records.Reader reads them)


def _untyped(gres: str) -> str:
    """A submit record's gres ("gpu:a100:1") as Grid Engine's request gives it back ("gres:gpu:1"):
    where a type is a host value (``select``), the request's count carries no type."""
    out = []
    for x in gres.split(","):
        parts = x.removeprefix("gres:").split(":")
        if len(parts) > 1 and not parts[-1].isdigit():
            parts.append("1")  # gpu:a100: one
        out.append("gres:" + ":".join([parts[0], parts[-1]]))
    return ",".join(out)


def detail(rec: JobRecord, cfg: SiteConfig) -> JobRecord:
    """Fill the fields only the submit record knows (once): comment, account, paths, geometry."""
    if rec.extra.get("detailed"):
        return rec
    rec.extra["detailed"] = True
    s = submit_record(cfg, rec)
    if not s:
        if not rec.work_dir:
            rec.work_dir = ""
        return rec
    rec.comment = s.comment or rec.comment
    rec.account = s.account or rec.account
    rec.qos = s.qos or rec.qos
    rec.work_dir = s.workdir or s.work_dir or rec.work_dir
    rec.dependency = s.dependency or rec.dependency
    default_out = "slurm-%A_%a.out" if s.array else "slurm-%j.out"
    out = s.stdout or default_out
    err = s.stderr or out
    base = rec.work_dir or ""
    rec.std_out = out if os.path.isabs(out) or not base else os.path.join(base, out)
    rec.std_err = err if os.path.isabs(err) or not base else os.path.join(base, err)
    if s.stdin:
        rec.std_in = s.stdin
    if s.submit_line:  # scontrol show job's SubmitLine (26.05), the JSON's submit_line
        rec.extra["submit_line"] = s.submit_line
    if s.command:
        rec.command = s.command
    elif s.script_path:
        rec.command = s.script_path
    ntasks = s.get("ntasks", rec.num_tasks)
    cpt = s.get("cpus_per_task", 1)
    rec.num_tasks = ntasks
    rec.cpus_per_task = cpt
    if rec.state == "PENDING" or not rec.num_cpus:
        rec.num_cpus = max(rec.num_cpus, ntasks * cpt)
    rec.num_nodes = s.get("nodes", rec.num_nodes)
    asked = memory_request(s)  # (the partition's default only where Grid Engine's request had none)
    if asked is not None and not (asked[2] and rec.min_memory_mb is not None):
        rec.min_memory_mb, rec.mem_per_cpu = int(asked[0]), asked[1]
    if s.time is not MISSING:
        rec.time_limit = s.time
    if s.licenses:
        rec.licenses = s.licenses
    if s.gres and (not rec.gres or _untyped(s.gres) == rec.gres):  # the record's keeps the types
        rec.gres = ",".join(x if x.startswith("gres:") else f"gres:{x}" for x in s.gres.split(","))
    if s.nice is not MISSING:
        rec.nice = s.nice
    if s.requeue is not MISSING:
        rec.requeue = s.requeue
    if s.submit_time and rec.submit_time is None:
        rec.submit_time = _dt(float(s.submit_time))
    if s.features:
        rec.features = s.features
    return rec


# ---------------------------------------------------------------------------------------------
# listing


def list_jobs(cfg: SiteConfig, *, ended: bool = False, backend=None, now: float | None = None,
              xml: str | None = None, started: q.Query | None = None, quotas: bool | None = None,
              only: set[int] | None = None, reasons: bool | None = None, stopped: bool | None = None,
              users: list[str] | None = None, direct: bool | None = None,
              rows: list[dict[str, Any]] | None = None) -> JobList:
    """Every job Grid Engine knows, as Slurm sees it; with ``ended``, also those that ended or were
    cancelled within ``cluster.min_job_age`` seconds (from the shim's event records).

    ``only``: the caller acts on these job ids alone (squeue -j N, scontrol show job N, scancel N):
    Grid Engine is asked about them, not about the whole queue (``_named``: the caller's own jobs'
    listing, then ``qstat -j`` for the ids it lacks and their owners' listing), and the ended
    jobs' records read are theirs. The records of the named jobs are exactly those of the whole
    listing; other jobs' records may be missing. Where a named job's reason depends on the whole
    queue (a waiting job: Resources or Priority, Licenses, a quota; with ``reasons``, by default
    for the commands that show reasons, ``QUOTA_COMMANDS``) the whole queue is listed after all.

    The qstat call (``started`` if the caller started it already, see ``backends.start_qstat``; a listing of
    one user's jobs, ``q.listing_args``, where ``only`` is given) is read while it runs: each
    completed job element becomes a record at once, so the parse overlaps qstat's own output,
    and the document is never held as a tree.

    ``users``: the caller shows these users' jobs only (squeue -u U, --me): their listing
    (``q.listing_args``; ``started`` if it is that), whose records of their jobs are those of the
    whole listing; the whole queue is listed after all where one of their jobs waits with no
    reason of its own and reasons are shown (as for ``only``). Other jobs' records are missing.

    ``direct``: the ``only`` jobs' records from ``qstat -j <ids> -xml`` where it can (``_direct``);
    by default for ``DIRECT_COMMANDS``. ``rows``: the ``only`` jobs' rows, read from that answer
    already (``held_rows``: held jobs, for scontrol show job N); nothing is listed.

    ``quotas``: look up which waiting jobs a resource quota holds (``_refine_reasons``); by
    default only for the commands that show reasons (``QUOTA_COMMANDS``).

    ``stopped``: mark the running jobs ``scancel -s STOP`` stopped (``mark_stopped``: Slurm's
    STOPPED flag); by default with ``ended`` (the same listing of the events finds them) or for
    the commands that show a job's state (``STOPPED_COMMANDS``)."""
    now = time.time() if now is None else now
    qmap = q.QueueMap(cfg)
    cache = q.RowCache(qmap, cfg)
    records: list[JobRecord] = []
    by_job: dict[int, list[JobRecord]] = {}

    submits = SubmitRecords(cfg, 0)
    submits.narrow = only  # (its reads of events parse the names of these jobs only)

    wanted = {str(j) for j in only} if only is not None else set()

    def take(items: list[Any], into: list[JobRecord], named: bool = False) -> None:
        append = into.append
        from_match, from_row = q.record_from_match, q.record_from_row
        for x in items:
            if named and (x[1] if type(x) is tuple else x.get("JB_job_number")) not in wanted:
                continue  # another job of those owners: no part of the answer (nor of its reasons)
            rec = from_match(x, cache) if type(x) is tuple else from_row(x, qmap, cfg, cache)
            rec.extra["submit_records"] = submits
            _finish_active(rec, cfg, qmap, cache)
            append(rec)
        submits.jobs = len(records) + len(into)

    def read(qy: q.Query | None, text: str | None = None, named: bool = False,
             given: list[dict[str, Any]] | None = None) -> None:
        """One listing's records, added to ``records`` and ``by_job``; ``named``: only those of
        the jobs ``only`` names (the rows of the others are not made records at all); ``given``:
        rows read already (``_direct``; the reader is fed nothing and finishes with none)."""
        got: list[JobRecord] = []
        reader = q.RowReader()
        if given is not None:
            take(given, got, named)
        elif text is not None:
            take(reader.feed(text), got, named)
        else:
            assert qy is not None
            try:
                for data in qy.chunks():
                    take(reader.feed(data), got, named)
            finally:
                qy.close()
            qy.check(reader.blank)
        rows, again = reader.finish()
        if again:
            got.clear()
        take(rows, got, named)
        records.extend(got)
        for rec in got:
            same = by_job.get(rec.job_id)
            if same is None:
                by_job[rec.job_id] = [rec]
            else:
                same.append(rec)

    if quotas is None or reasons is None or stopped is None or direct is None:
        from ..gridengine import calls

        shows = calls.command in QUOTA_COMMANDS
        quotas = shows if quotas is None else quotas
        reasons = shows if reasons is None else reasons
        stopped = (ended or calls.command in STOPPED_COMMANDS) if stopped is None else stopped
        direct = calls.command in DIRECT_COMMANDS if direct is None else direct
    # Tens of thousands of small containers, none in a cycle: the cyclic collector would only
    # walk the growing heap again and again (a third of the time). It is off while they are made.
    collecting = gc.isenabled()
    gc.disable()
    try:
        _listings(cfg, read, records, by_job, xml=xml, only=only, users=users, started=started, backend=backend,
                  reasons=reasons, direct=direct, rows=rows)
    finally:
        if collecting:
            gc.enable()
    _refine_reasons(records, by_job, cfg, now, backend if quotas else None, quotas)
    out = JobList(records, set(by_job), now, submits)
    running = [r for r in records if r.state == "RUNNING"] if stopped else []
    stops: dict[int, dict[int, set[tuple[int | None, str]]]] | None = {} if running else None
    if ended:
        _add_ended(out, by_job, cfg, now, only)
    if running:
        stops = stop_events(cfg, running)  # (by the running jobs' ids: no listing of a window's events)
    if stops:
        mark_stopped(running, stops, submits)
    return out


def _listings(cfg: SiteConfig, read: Any, records: list[JobRecord], by_job: dict[int, list[JobRecord]], *,
              xml: str | None, only: set[int] | None, users: list[str] | None, started: q.Query | None,
              backend: Any, reasons: bool | None, direct: bool = False,
              rows: list[dict[str, Any]] | None = None) -> None:
    """list_jobs' qstat listings, read (``read``) into ``records`` and ``by_job``: the given text;
    the named jobs' (``rows`` given; ``_direct`` with ``direct``, else ``_named``), or the whole
    queue where a named job waits and reasons are shown; some users' jobs, or the whole queue
    likewise; else the whole queue. ``started`` is used where it lists what is asked, and closed where it does not."""
    if xml is not None:
        read(None, xml)
    elif only is not None and rows is not None:  # (held_rows: the named jobs' rows, read already)
        read(None, given=rows, named=True)
    elif only is not None and direct and started is None and _direct(cfg, only, backend, read):
        pass
    elif only is not None:
        listed = _named(cfg, only, started, backend, read, by_job)
        if listed is None or (listed == NAMED and reasons and
                              any(_waits(r) for j in only for r in by_job.get(j, ()))):
            records.clear()
            by_job.clear()
            read(backends.start_qstat(cfg, backend=backend))
    elif users:
        if started is not None and listed_users(started) != list(users):
            started.close()  # (a listing of other jobs)
            started = None
        read(started if started is not None else backends.start_qstat(cfg, q.listing_args(users), backend=backend))
        if reasons and any(_waits(r) for r in records):
            records.clear()
            by_job.clear()
            read(backends.start_qstat(cfg, backend=backend))
    else:
        if started is not None and listed_users(started) is not None:
            started.close()  # a listing of some users' jobs cannot answer for every job
            started = None
        read(started if started is not None else backends.start_qstat(cfg, backend=backend))


def listed_users(qy: q.Query) -> list[str] | None:
    """The users a started listing asks about, None for every user's jobs."""
    args = qy.args
    if "-u" not in args:
        return None
    users = args[args.index("-u") + 1].split(",")
    return None if "*" in users else users


OWNER_LOOKUPS = 50  # ids not among the caller's own jobs asked about with qstat -j (its answer is long per job)
WHOLE, NAMED = "whole", "named"  # what _named listed: the whole queue, or the named jobs' owners' jobs


def _named(cfg: SiteConfig, only: set[int], started: q.Query | None, backend: Any, read: Any,
           by_job: dict[int, list[JobRecord]]) -> str | None:
    """List the jobs ``only`` names, and as few others as Grid Engine allows: Grid Engine's job
    list selects by owner, not by job (``qstat -j`` has neither the priority nor the hold
    states of the list), so the caller's own jobs are listed (``started``, else now), then the
    ids not among them are asked about (``qstat -j``: gone, or whose), and their owners' jobs are
    listed: NAMED. WHOLE when ``started`` listed the whole queue already; None when Grid Engine's
    answer about the ids was not one to read (the caller lists the whole queue instead)."""
    users: list[str] | None = None
    if started is not None:
        users = listed_users(started)
        read(started, named=users is not None)
        if users is None:
            return WHOLE
    else:
        me = own_name()
        if me:
            users = [me]
            read(backends.start_qstat(cfg, q.listing_args(users), backend=backend), named=True)
    missing = sorted(j for j in only if j not in by_job)
    if not missing:
        return NAMED
    if len(missing) > OWNER_LOOKUPS:
        return None  # qstat -j's detail of that many jobs costs more than the whole listing
    owners = (backend if backend is not None else _backend(cfg)).job_owners(missing)
    if owners is None:
        return None
    more = sorted({o for o in owners.values() if o not in (users or ())})
    if more:
        read(backends.start_qstat(cfg, q.listing_args(more), backend=backend), named=True)
    return NAMED


def _direct(cfg: SiteConfig, only: set[int], backend: Any, read: Any) -> bool:
    """The named jobs' rows from one ``qstat -j <ids> -xml`` (gridengine/onejob.py), read into the
    listing (``read``): True. Where the answer does not determine every named job's row (a job
    with a task enrolled or an array) but says whose each is (or that it is gone), their owners'
    listing is read instead (the rows ``_named`` reads, without its questions): True. False,
    nothing read, where there are more than OWNER_LOOKUPS ids or the answer does not read: the
    caller lists them as before (``_named``).

    For callers that act on the named jobs and read neither their priority (not in the detail) nor
    their reasons (the whole queue's): scancel N (``DIRECT_COMMANDS``), scontrol's
    hold/uhold/release/suspend/resume/requeue/update N (cli/scontrol.py); not squeue -j N or
    scontrol show job N, which print both (they take the detail's rows of held jobs only:
    ``held_rows``). Issue 29: on a 100,000-job queue the owner's listing
    was 97% of scancel N."""
    if not only or len(only) > OWNER_LOOKUPS:
        return False
    from ..gridengine import onejob

    ids = sorted(only)
    # (a qmaster that does not answer is the command's error now, as the listing's would be: not a
    # second wait for the listing)
    res = (backend if backend is not None else _backend(cfg)).detail_xml(ids)
    rows, owners = onejob.answer(res.returncode, res.stdout, ids)
    if rows is not None:
        read(None, given=rows, named=True)
    elif owners is None:
        return False
    elif owners:  # rows the detail does not determine: its owners' listing has them (as _named's)
        read(backends.start_qstat(cfg, q.listing_args(sorted(set(owners.values()))), backend=backend), named=True)
    return True


def held_rows(ids: set[int], started: q.Query | None) -> tuple[list[dict[str, Any]] | None, Answer | None]:
    """(rows, answer) of a started ``qstat -j <ids> -xml`` (``start_details``: scontrol show job N),
    read whole: ``rows`` the named jobs' rows where every one of them is held by a hold list (OCS
    9) with no predecessors and no task enrolled, no array (onejob.answer's ``held``): then every
    field scontrol show job prints of them is the listing's (its JAT_prio is 0 for a held
    job, as Slurm's priority of a held job; its reason JobHeldUser or root's JobHeldAdmin depends
    on no other job), and the caller reads them instead of the owner's listing; else None (the
    listing as before). ``answer``: the answer as read, for ``add_grid_engine_detail`` (not asked
    twice); None where nothing was started."""
    if started is None:
        return None, None
    from ..errors import ShimError

    try:
        text = b"".join(c if isinstance(c, bytes) else c.encode() for c in started.chunks())
    except ShimError:
        return None, None  # (the listing's error is the command's: asked as before)
    finally:
        started.close()
    got = Answer(started.args, text)
    if not ids or len(ids) > OWNER_LOOKUPS:
        return None, got
    from ..gridengine import onejob

    return onejob.answer(started.returncode, text, sorted(ids), held=True)[0], got


class Answer:
    """A ``qstat -j`` answer read already, given where a started one is taken (``chunks``,
    ``close``, ``args``: add_grid_engine_detail)."""

    __slots__ = ("args", "text")

    def __init__(self, args: list[str], text: bytes):
        self.args, self.text = list(args), text

    def chunks(self):
        yield self.text

    def close(self) -> None:
        pass


def _waits(r: JobRecord) -> bool:
    """Would the job's reason be decided by other jobs (``_refine_reasons``: Licenses, BeginTime
    within BEGIN_LOOKUPS, a quota, Resources vs Priority)? A pending job with no reason of its
    own yet (a hold, a dependency, an error)."""
    return r.state == "PENDING" and r.reason == "None" and not r.extra.get("predecessors")


_prio_cache: dict[float, int] = {}  # Slurm's priority of a qstat priority (many jobs share one)


def _finish_active(rec: JobRecord, cfg: SiteConfig, qmap: q.QueueMap, cache: q.RowCache | None = None) -> None:
    """What qstat alone leaves open: ids, times, priority, and array indices from the record."""
    extra = rec.extra
    row = extra["ge_row"]
    ids = USER_IDS.get(rec.user)
    rec.uid, rec.gid = ids if ids is not None else user_ids(rec.user)
    prio = float(rec.priority)
    extra["prio"] = prio
    try:
        rec.priority = _prio_cache[prio]
    except KeyError:
        rec.priority = _prio_cache[prio] = int(round(prio * PRIO_SCALE))
    # one datetime per second of a listing serves all its jobs (datetimes are immutable)
    dts = cache.dts if cache is not None else {}
    ts = extra.get("submit_ts")
    try:
        rec.submit_time = dts[ts]
    except KeyError:
        rec.submit_time = dts[ts] = _dt(ts)
    ts = extra.get("start_ts")
    try:
        rec.start_time = dts[ts]
    except KeyError:
        rec.start_time = dts[ts] = _dt(ts)
    if rec.queue and qmap.shared and qmap.ambiguous(rec.queue):
        s = submit_record(cfg, rec)
        if s and s.partition:
            rec.partition = s.partition
    pe = row.get("pe")
    if pe and any(pe == p.pe_multinode for p in cfg.partitions.values()):
        detail(rec, cfg)
    if "ge_tasks" in extra or "ge_task" in extra:
        s = submit_record(cfg, rec) or NO_RECORD
        array = s.array or []
        rec.array_max_tasks = s.throttle or None

        def idx(t: int) -> int:
            return int(array[t - 1]) if array and 1 <= t <= len(array) else t

        if "ge_task" in extra:
            rec.array_task = idx(extra["ge_task"])
        else:
            indices = [idx(t) for t in extra["ge_tasks"]]
            extra["pending_indices"] = indices
            if len(indices) == 1 and rec.state != "PENDING":
                rec.array_task = indices[0]
            else:
                rec.array_pending = pending_text(indices, rec.array_max_tasks)
    if rec.state in ("SUSPENDED", "COMPLETING"):
        # TIME stops where the job stopped running: its suspension, or (dr: being killed) its cancel
        kind = "suspend" if rec.state == "SUSPENDED" else "cancel"
        reader = extra.get("submit_records") or Reader(cfg, 1)
        ev = reader.events(rec.job_id, rec.uid if rec.uid is not None else rec.user, extra.get("submit_ts"))
        sus = ev.get((rec.array_task, kind)) or (ev.get((None, kind)) if kind == "cancel" else None)
        if sus and kind == "cancel" and sus.get("start") is not None and extra.get("start_ts") \
                and abs(sus["start"] - extra["start_ts"]) >= 1:
            sus = None  # a cancel of another run of the job (scancel stamps the run it cancelled)
        if sus and sus.get("t") and extra.get("start_ts"):
            extra["run_seconds"] = max(0, int(sus["t"] - extra["start_ts"]))


BEGIN_LOOKUPS = 200  # submit records read per listing to find jobs waiting for --begin


def _begin_ts(s: Submitted | None) -> float | None:
    v = (s or NO_RECORD).begin  # (records._begin: a timestamp, an old record's ISO time read as one)
    return None if v is MISSING else float(v)


QUOTA_COMMANDS = frozenset({"squeue", "scontrol"})  # list_jobs asks which jobs a quota holds for these
STOPPED_COMMANDS = frozenset({"squeue", "scontrol"})  # list_jobs marks the stopped jobs for these
DIRECT_COMMANDS = frozenset({"scancel"})  # list_jobs reads named jobs from qstat -j for these (``direct``)


def _refine_reasons(records: list[JobRecord], by_job: dict[int, list[JobRecord]], cfg: SiteConfig,
                    now: float, backend: Any = None, quotas: bool = False) -> None:
    """Reasons that need the whole queue: Dependency vs JobHeldUser, JobArrayTaskLimit, Licenses,
    BeginTime, a resource quota's limit (``quotas``: gridengine/policy.py, one qstat -j
    when jobs wait, two calls more when a quota holds some), and Slurm's Resources (the first job
    in line) vs Priority (the others).

    Grid Engine's job list does not show ``qsub -a``; the shim's submit record does ("begin"), so
    it is read for waiting jobs -- for at most BEGIN_LOOKUPS of them, to keep a long queue fast."""
    lic_in_use: set[str] = set()
    for r in records:
        if r.state in ("RUNNING", "SUSPENDED", "COMPLETING") and r.licenses:
            lic_in_use.update(x.split(":")[0] for x in r.licenses.split(","))
    waiting: dict[str, list[JobRecord]] = {}
    licensed: list[JobRecord] = []  # "Licenses" is a guess (a running job holds one); a quota's word wins
    for r in records:
        if r.state != "PENDING":
            continue
        if r.extra.get("predecessors"):
            # -hold_jid shows as a hold (hqw) too; a job with unfinished predecessors waits for them
            if r.reason in ("JobHeldUser", "None"):
                r.reason = "Dependency"
            continue
        if r.reason != "None":
            continue
        if r.array_max_tasks and r.array_pending is not None:
            running = sum(1 for x in by_job.get(r.job_id, ()) if x.array_task is not None and x.state in (
                "RUNNING", "SUSPENDED", "COMPLETING"))
            if running >= r.array_max_tasks:
                r.reason = "JobArrayTaskLimit"
                continue
        if r.licenses and any(x.split(":")[0] in lic_in_use for x in r.licenses.split(",")):
            r.reason = "Licenses"
            licensed.append(r)
            continue
        waiting.setdefault(r.partition, []).append(r)
    if sum(len(v) for v in waiting.values()) <= BEGIN_LOOKUPS:
        for recs in waiting.values():
            for r in list(recs):
                begin = _begin_ts(submit_record(cfg, r))
                if begin is not None and begin > now:
                    r.reason = "BeginTime"
                    r.start_time = datetime.fromtimestamp(begin)
                    recs.remove(r)
    if quotas and (waiting or licensed):
        from ..gridengine import policy

        held = policy.reasons_for(backend if backend is not None else _backend(cfg), cfg,
                                  {r.job_id for recs in waiting.values() for r in recs} | {r.job_id for r in licensed})
        for r in licensed:
            r.reason = held.get(r.job_id, r.reason)
        for part, recs in waiting.items():
            for r in recs:
                if r.job_id in held:
                    r.reason = held[r.job_id]
            waiting[part] = [r for r in recs if r.job_id not in held]
    for recs in waiting.values():
        recs.sort(key=lambda r: (-r.priority, r.job_id))
        for i, r in enumerate(recs):
            r.reason = "Resources" if i == 0 else "Priority"
    from ..store.holds import mark

    mark(cfg, records, _split_pending)  # a job root held: JobHeldAdmin (root's record, read only when one is held)


def _split_pending(r: JobRecord, indices: list[int]) -> JobRecord:
    """A copy of a pending array's record for some of its pending tasks (store/holds.mark)."""
    import copy

    c = copy.copy(r)
    c.extra = dict(r.extra, pending_indices=list(indices))
    c.array_pending = pending_text(indices, r.array_max_tasks)
    return c


def _backend(cfg: SiteConfig) -> Any:
    from ..gridengine import backends

    return backends.get(cfg)


# ---------------------------------------------------------------------------------------------
# ended jobs, from the shim's event records


STOP_KINDS = ("stop", "cont")  # scancel's events of a STOP and a CONT it sent (any age: a job stays stopped)
STOP_ENDINGS = tuple(f".{k}.json" for k in STOP_KINDS)


def recent_events(cfg: SiteConfig, now: float, max_age: int | None = None, only: set[int] | None = None,
                  stops: dict[int, dict[int, set[tuple[int | None, str]]]] | None = None,
                  uids: set[int] | None = None, reader: Any = None
                  ) -> dict[int, dict[int, set[tuple[int | None, str]]]]:
    """{job id: {uid: {(task, kind)}}} of the end/cancel events written within ``max_age``
    seconds, by the directory (uid) they are in (a listing of each user's events: nothing read);
    ``only``: of these job ids only; ``uids``: in these users' directories only. ``stops``:
    filled the same way with the stop/cont events of any age, from the same listing (for
    ``mark_stopped``). ``reader``: the records.Reader whose listings serve (with ``only``), so
    that its reads of the same directories list none again."""
    max_age = cfg.cluster.min_job_age if max_age is None else max_age
    out: dict[int, dict[int, set[tuple[int | None, str]]]] = {}
    always = STOP_KINDS if stops is not None else ()
    listing = reader.event_paths if reader is not None and only is not None else None
    for uid, job, task, kind in state.scan_events(cfg, ("end", "cancel"), now - max_age, now, only, always, uids,
                                                  listing):
        into = stops if kind in always else out
        into.setdefault(job, {}).setdefault(uid, set()).add((task, kind))  # type: ignore[union-attr]
    return out


STOP_LOOKUPS = 100  # running jobs whose stop/cont names are looked up one by one (else: listed)


def stop_events(cfg: SiteConfig, running: list[JobRecord]) -> dict[int, dict[int, set[tuple[int | None, str]]]]:
    """The stop/cont events of the ``running`` jobs: {job: {uid: {(task, kind)}}}, in the
    directories of their owners and root only (who may speak for them); up to STOP_LOOKUPS jobs
    by name in their id shards (an lstat of a missing file costs ~2 us), more from one listing of
    each id shard they fall in (state.event_paths; and of the old flat events/ while it exists).
    Nothing is read here."""
    from ..store import layout

    out: dict[int, dict[int, set[tuple[int | None, str]]]] = {}
    dirs: dict[int, str | None] = {}

    def user(uid: int) -> str | None:
        if uid not in dirs:
            dirs[uid] = state.user_dir(cfg, uid)
        return dirs[uid]

    def owner(r: JobRecord) -> int | None:
        return r.uid if r.uid is not None else state.uid_of(r.user)

    if len(running) <= STOP_LOOKUPS:
        for r in running:
            o = owner(r)
            if o is None:
                continue
            t = "x" if r.array_task is None else str(r.array_task)
            for uid in dict.fromkeys((o, 0)):
                d = user(uid)
                if d is None:
                    continue
                old = layout.old_dir(d, "events") if layout.has_old(d, "events") else None
                for kind in STOP_KINDS:
                    name = f"{r.job_id}.{t}.{kind}.json"
                    for path in (layout.id_path(d, "events", r.job_id, name), *((os.path.join(old, name),) if old else ())):
                        try:
                            os.lstat(path)
                        except OSError:
                            continue
                        out.setdefault(r.job_id, {}).setdefault(uid, set()).add((r.array_task, kind))
                        break
        return out
    wanted = {(r.job_id, r.array_task) for r in running}
    owners = {0} | {owner(r) for r in running}
    ids = {r.job_id for r in running}
    for uid in sorted(u for u in owners if u is not None):
        d = user(uid)
        if d is None:
            continue
        for job, keys in state.event_paths(d, uid, ids).items():  # (another user's: at most state.LIST_MAX, F-26)
            for task, kind in keys:
                if kind in STOP_KINDS and (job, task) in wanted:
                    out.setdefault(job, {}).setdefault(uid, set()).add((task, kind))
    return out


def mark_stopped(running: list[JobRecord], stops: dict[int, dict[int, set[tuple[int | None, str]]]],
                 reader: Any) -> None:
    """Slurm's STOPPED flag on running jobs: a job (array task) whose latest STOP that scancel sent
    came after its latest CONT is stopped (``extra["stopped"]``; its state stays RUNNING, as in
    slurmctld's job_state, where JOB_STOPPED is a flag: squeue and scontrol name it, sacct does
    not: see model.shown_state). An event counts as every event does (its owner's directory, or
    root's naming the owner; stamped for this Grid Engine job) and only when written during this
    run of the job (not before Grid Engine started it: an older run of a requeued job)."""
    from ..store.records import of_job, speaks_for

    for r in running:
        by_uid = stops.get(r.job_id)
        if not by_uid:
            continue
        extra = r.extra
        owner = r.uid if r.uid is not None else state.uid_of(r.user)
        if owner is None:
            continue
        task = r.array_task
        ge_submit, started = extra.get("submit_ts"), extra.get("start_ts")
        last = {"stop": 0.0, "cont": 0.0}
        for d_uid in dict.fromkeys((owner, 0)):
            keys = by_uid.get(d_uid)
            if not keys:
                continue
            for kind in STOP_KINDS:
                if (task, kind) not in keys:
                    continue
                data = reader.event(d_uid, f"{r.job_id}.{'x' if task is None else task}.{kind}.json")
                if data is None or not speaks_for(data, d_uid, owner, "owner") or not of_job(data, ge_submit, True):
                    continue
                t, run = data["t"], data.get("start")
                if started and (abs(run - started) >= 1 if run is not None else t < started - state.SKEW):
                    continue  # scancel stamps Grid Engine's start of the run it stopped
                last[kind] = max(last[kind], t)
        if last["stop"] > last["cont"]:
            extra["stopped"] = True


def _add_ended(out: JobList, by_job: dict[int, list[JobRecord]], cfg: SiteConfig, now: float,
               only: set[int] | None = None,
               stops: dict[int, dict[int, set[tuple[int | None, str]]]] | None = None) -> None:
    """Jobs and array tasks that ended recently. A job Grid Engine still lists (an array with
    tasks left) is its owner's as Grid Engine says; one it has forgotten is whoever's events speak
    for it (records.Reader.ended_owner). ``stops``: filled with the stop/cont events (recent_events).

    With ``only``, the events are looked for where they can change the answer (issue 19): a job
    Grid Engine lists that is no array is shown as Grid Engine has it, so none of its events is
    listed (its stop/cont events are looked up by name, ``stop_events``); an array Grid Engine
    lists is its owner's, so only the owner's and root's directories are listed; every user's
    only for an id Grid Engine did not report (a job that ended: whose it was is in the events)."""
    uids: set[int] | None = None
    if only is not None:
        whole = {j for j in only if j in by_job and not _is_array(by_job[j])}
        if whole and stops is not None:
            stops.update(stop_events(cfg, [r for j in sorted(whole) for r in by_job[j] if r.state == "RUNNING"]))
        only = only - whole
        if not only:
            return
        if all(j in by_job for j in only):
            uids = {0}
            for j in only:
                r = by_job[j][0]
                o = r.uid if r.uid is not None else state.uid_of(r.user)
                if o is not None:
                    uids.add(o)
    recent = recent_events(cfg, now, only=only, stops=stops, uids=uids, reader=out.reader)
    if not recent:
        return
    reader = out.reader if out.reader is not None else Reader(cfg, len(recent))
    me = os.getuid()
    for job_id, by_uid in recent.items():
        active = by_job.get(job_id, [])
        if active and not _is_array(active):
            continue  # still in Grid Engine (e.g. "dr" while being killed): shown as it is there
        if active:
            owner = active[0].uid if active[0].uid is not None else state.uid_of(active[0].user)
            owners = [] if owner is None else [owner]
            ge_submit = active[0].extra.get("submit_ts")
        else:
            owners = reader.ended_owner(job_id, by_uid, me)
            ge_submit = None
        for owner in owners:
            if owner not in by_uid and 0 not in by_uid:
                continue
            events = reader.events(job_id, owner, ge_submit)
            keys = {k for u in dict.fromkeys((owner, 0)) for k in by_uid.get(u, ()) if k in events}
            if not keys:
                continue
            made = _ended_of(cfg, job_id, keys, active, events, reader.submit(job_id, owner, ge_submit), now, owner)
            out.records.extend(made)
            if made:
                out.known.add(job_id)
                break


def _is_array(active: list[JobRecord]) -> bool:
    """Do Grid Engine's records of a job show an array (whose ended tasks only the events know)?"""
    return any(r.array_task is not None or r.array_pending is not None for r in active)


def _ended_of(cfg: SiteConfig, job_id: int, keys: set[tuple[int | None, str]], active: list[JobRecord],
              events: dict, submit: Submitted | None, now: float, owner: int) -> list[JobRecord]:
    active_tasks: set[int] = set()
    for r in active:
        if r.array_task is not None:
            active_tasks.add(r.array_task)
        active_tasks.update(r.extra.get("pending_indices", ()))
    made: list[JobRecord] = []
    for task in {t for t, _k in keys}:
        if task is not None and task in active_tasks:
            continue
        rec = ended_record(cfg, job_id, task, events, submit, now, owner=owner)
        if rec is not None:
            made.append(rec)
    # array tasks cancelled before they ran stay one record, as Slurm keeps the array's meta job:
    # by its first index, which -r does not expand (squeue -r -t all after scancel of an array, in
    # every release: 112_4 CA for the remainder 4-6; fixtures/slurm-*/cases.json)
    never_ran = [r for r in made if r.array_task is not None and r.state == "CANCELLED" and not r.nodes]
    if len(never_ran) > 1:
        first = min(never_ran, key=lambda r: r.array_task)
        made = [r for r in made if r not in never_ran] + [first]
    made.sort(key=lambda r: -1 if r.array_task is None else r.array_task)
    return made


def ended_record(cfg: SiteConfig, job_id: int, task: int | None, events: dict, submit: Submitted | None,
                 now: float, owner: int | None = None) -> JobRecord | None:
    """A job (or array task) Grid Engine no longer lists, rebuilt from the shim's records (read
    and checked by records.Reader); ``owner``: whose job it is (its records' directory)."""
    end = events.get((task, "end"))
    cancel = events.get((task, "cancel")) or (events.get((None, "cancel")) if task is not None else None)
    start = events.get((task, "start"))
    if end is None and cancel is None:
        return None
    s = submit or NO_RECORD
    info = cancel or {}
    rec = JobRecord(job_id=job_id, array_task=task)
    rec.name = s.name or info.get("name") or ""
    if owner is not None:
        from ..store.records import user_name

        rec.user = user_name(owner)
        rec.uid, rec.gid = owner, user_ids(rec.user)[1]
    else:
        rec.user = s.user or info.get("owner") or info.get("user") or ""
        rec.uid, rec.gid = user_ids(rec.user) if rec.user else (None, None)
        if s.uid is not MISSING:
            rec.uid = s.uid
    rec.partition = s.partition or info.get("partition") or cfg.default_partition
    rec.array_max_tasks = s.throttle or None
    if cancel_ended(end, cancel):
        assert cancel is not None
        rec.state = "CANCELLED"
        rec.reason = ended_reason(cancel.get("reason") or "None")
        ran = cancel.get("was") in ("RUNNING", "SUSPENDED", "COMPLETING") or start is not None
        node = (end or {}).get("node") or (start or {}).get("node") or cancel.get("node") or ""
        rec.nodes = [node] if ran and node else []
        rec.end_time = _dt((end or cancel).get("t"))
        st = (end or {}).get("start") or (start or {}).get("t") or cancel.get("start")
        rec.start_time = _dt(st) if ran and st else None
    else:
        assert end is not None
        rec.state = end.get("state") or ("COMPLETED" if not end.get("exit") and not end.get("signal") else "FAILED")
        reason = end.get("reason")
        if not reason or reason == "None":
            reason = ENDED_REASONS.get(rec.state, "None")
        rec.reason = reason
        rec.exit_code = _int(end.get("exit"), 0)
        rec.exit_signal = _int(end.get("signal"), 0)
        node = end.get("node") or (start or {}).get("node") or ""
        rec.nodes = [node] if node else []
        rec.end_time = _dt(end.get("t"))
        st = end.get("start") or (start or {}).get("t")
        rec.start_time = _dt(st)
    rec.batch_host = rec.nodes[0] if rec.nodes else ""
    if s.submit_time:
        rec.submit_time = _dt(float(s.submit_time))
    rec.extra["submit"] = submit
    rec.extra["ended"] = True
    if rec.start_time and rec.end_time:
        rec.extra["run_seconds"] = max(0, int(rec.end_time.timestamp() - rec.start_time.timestamp()))
    else:
        rec.extra["run_seconds"] = 0
    detail(rec, cfg)
    if s:
        rec.num_cpus = max(1, rec.num_tasks * rec.cpus_per_task)
    else:
        rec.num_cpus = _int(info.get("cpus"), 1)
    return rec


def expand_array(records: Iterable[JobRecord]) -> list[JobRecord]:
    """``-r``: one record per pending array task instead of one per pending range."""
    out: list[JobRecord] = []
    for r in records:
        idxs = r.extra.get("pending_indices")
        if r.array_pending is None or not idxs:
            out.append(r)
            continue
        for i in idxs:
            c = JobRecord(**{k: getattr(r, k) for k in FIELDS})
            c.extra = dict(r.extra)
            c.array_pending = None
            c.array_task = i
            out.append(c)
    return out


# ---------------------------------------------------------------------------------------------
# what squeue and scontrol share: a job's reservation


def fill_reservations(recs: list, cfg, backend=None, started=None) -> None:
    """The name of each job's reservation (``rec.extra["reservation"]``, None for none): Slurm's
    ``--reservation=NAME`` is submitted as Grid Engine's ``-ar <id>`` (submit.reservation_flags),
    so a job's reservation is its advance reservation (``JB_ar`` of ``qstat -j -xml``) by the name
    ``qrsub -N`` gave it (qrstat). One qrstat call for the listing (``started``: the one begun
    earlier); qstat -j for its jobs only when Grid Engine has any advance reservation. A job
    whose Grid Engine detail was read already (``extra["ar"]``, add_grid_engine_detail) is asked
    about no more, and needs no qrstat without an advance reservation; nor is a job whose submit
    record names the advance reservation it was submitted into (``ar``, "" for none: the shim
    gives a job its reservation at submission only; a raw ``qalter -ar`` later is not seen). An
    advance reservation without a name shows its id; a job of one that has gone shows none. Jobs
    that have ended show none (their record does not keep it)."""
    todo = [r for r in recs if "reservation" not in r.extra]
    if not todo:
        return
    from ..gridengine import backends

    for r in todo:
        r.extra["reservation"] = None
        if "ar" not in r.extra and not r.extra.get("ended"):
            ar = (submit_record(cfg, r) or NO_RECORD).ar
            if isinstance(ar, str):
                r.extra["ar"] = ar
    todo = [r for r in todo if not r.extra.get("ended") and r.extra.get("ar") not in ("", "0")]
    if not todo:
        return
    b = backend or backends.get(cfg)
    names = (started or b.reservation_names()).read()
    if not names:
        return
    ask = sorted({r.job_id for r in todo if "ar" not in r.extra})
    try:
        details = b.details(ask) if ask else {}
    except Exception:  # noqa: BLE001
        return
    for r in todo:
        ar = r.extra["ar"] if "ar" in r.extra else ((details.get(r.job_id) or {}).get("JB_ar") or "").strip()
        r.extra["reservation"] = names.get(ar) if ar not in ("", "0") else None
