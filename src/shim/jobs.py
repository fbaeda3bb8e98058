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
import grp
import os
import pwd
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable

from . import state
from .records import Reader
from .backends import qstat as q
from .model import JobRecord

if TYPE_CHECKING:
    from .config import SiteConfig

ACTIVE_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "STAGE_OUT",
                           "RESIZING", "SIGNALING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "STOPPED",
                           "RESV_DEL_HOLD", "SPECIAL_EXIT"})
ENDED_REASONS = {"TIMEOUT": "TimeLimit", "OUT_OF_MEMORY": "OutOfMemory", "NODE_FAIL": "NodeDown",
                 "FAILED": "NonZeroExitCode", "BOOT_FAIL": "NodeDown", "DEADLINE": "DeadLine"}
PRIO_SCALE = 0xFFFFFFFF  # Slurm's %p is priority / 2^32-1


@dataclass
class JobList:
    records: list[JobRecord]
    known: set[int] = field(default_factory=set)  # job ids that exist (queued, running, or ended recently)
    now: float = 0.0
    reader: Any = None  # the Reader the listing read the shim's records with


# ---------------------------------------------------------------------------------------------
# small helpers


_uid_cache: dict[str, tuple[int | None, int | None]] = {}
_group_cache: dict[int, str] = {}


def user_ids(user: str) -> tuple[int | None, int | None]:
    """(uid, gid) of a user name, cached; (None, None) if unknown."""
    v = _uid_cache.get(user)
    if v is None:
        try:
            pw = pwd.getpwnam(user)
            v = (pw.pw_uid, pw.pw_gid)
        except KeyError:
            v = (None, None)
        _uid_cache[user] = v
    return v


def group_name(gid: int | None) -> str:
    if gid is None:
        return ""
    v = _group_cache.get(gid)
    if v is None:
        try:
            v = grp.getgrgid(gid).gr_name
        except KeyError:
            v = str(gid)
        _group_cache[gid] = v
    return v


def compress_indices(indices: Iterable[int]) -> str:
    """Slurm's array index list: sorted, runs as ``a-b``: [1,3,5,6,7] -> "1,3,5-7"."""
    xs = sorted(set(indices))
    out: list[str] = []
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ",".join(out)


def pending_text(indices: Iterable[int], throttle: int | None) -> str:
    s = compress_indices(indices)
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


def submit_record(cfg: SiteConfig, rec: JobRecord) -> dict[str, Any] | None:
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


SubmitRecords = Reader  # the submit records of one listing's jobs (read as records.Reader reads them)


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
    rec.comment = s.get("comment") or rec.comment
    rec.account = s.get("account") or rec.account
    rec.qos = s.get("qos") or rec.qos
    rec.work_dir = s.get("workdir") or s.get("work_dir") or rec.work_dir
    rec.dependency = s.get("dependency") or rec.dependency
    array = bool(s.get("array"))
    default_out = "slurm-%A_%a.out" if array else "slurm-%j.out"
    out = s.get("stdout") or default_out
    err = s.get("stderr") or out
    base = rec.work_dir or ""
    rec.std_out = out if os.path.isabs(out) or not base else os.path.join(base, out)
    rec.std_err = err if os.path.isabs(err) or not base else os.path.join(base, err)
    if s.get("stdin"):
        rec.std_in = s["stdin"]
    if s.get("command"):
        rec.command = s["command"]
    elif s.get("script_path"):
        rec.command = s["script_path"]
    ntasks = _int(s.get("ntasks"), rec.num_tasks)
    cpt = _int(s.get("cpus_per_task"), 1)
    rec.num_tasks = ntasks
    rec.cpus_per_task = cpt
    if rec.state == "PENDING" or not rec.num_cpus:
        rec.num_cpus = max(rec.num_cpus, ntasks * cpt)
    rec.num_nodes = _int(s.get("nodes"), rec.num_nodes)
    if s.get("mem_mb"):
        rec.min_memory_mb, rec.mem_per_cpu = int(s["mem_mb"]), False
    elif s.get("mem_per_cpu_mb"):
        rec.min_memory_mb, rec.mem_per_cpu = int(s["mem_per_cpu_mb"]), True
    elif s.get("default_mem_per_cpu") and rec.min_memory_mb is None:
        rec.min_memory_mb, rec.mem_per_cpu = int(s["default_mem_per_cpu"]), True
    t = s.get("time")
    if t is not None:
        rec.time_limit = int(t)
    if s.get("licenses"):
        rec.licenses = s["licenses"]
    if s.get("gres") and not rec.gres:
        g = s["gres"]
        rec.gres = ",".join(x if x.startswith("gres:") else f"gres:{x}" for x in str(g).split(","))
    if s.get("nice") is not None:
        rec.nice = _int(s.get("nice"), 0)
    if s.get("requeue") is not None:
        rec.requeue = bool(s["requeue"])
    if s.get("submit_time") and rec.submit_time is None:
        rec.submit_time = _dt(float(s["submit_time"]))
    if s.get("features"):
        rec.features = s["features"]
    return rec


# ---------------------------------------------------------------------------------------------
# listing


def query(cfg: SiteConfig, backend=None):
    """Run the one qstat call; a failure is Slurm's "Unable to contact slurm controller"."""
    from . import backends
    from .errors import ShimError

    b = backend or backends.get(cfg)
    res = b.run("qstat", q.QSTAT_ARGS)
    if res.returncode != 0 and not res.stdout.strip():
        msg = (res.stderr or res.stdout).strip().splitlines()
        detail_ = msg[-1] if msg else f"qstat exited {res.returncode}"
        raise ShimError(f"slurm_load_jobs error: Unable to contact slurm controller (connect failure): {detail_}")
    return res.stdout


def list_jobs(cfg: SiteConfig, *, ended: bool = False, backend=None, now: float | None = None,
              xml: str | None = None, started: q.Query | None = None) -> JobList:
    """Every job Grid Engine knows, as Slurm sees it; with ``ended``, also those that ended or were
    cancelled within ``cluster.min_job_age`` seconds (from the shim's event records).

    The qstat call (``started`` if the caller started it already, see ``q.start``) is read while
    it runs: each completed job element becomes a record at once, so the parse overlaps qstat's
    own output, and the document is never held as a tree."""
    now = time.time() if now is None else now
    qmap = q.QueueMap(cfg)
    cache = q.RowCache(qmap, cfg)
    records: list[JobRecord] = []
    by_job: dict[int, list[JobRecord]] = {}

    submits = SubmitRecords(cfg, 0)

    def take(items: list[Any]) -> None:
        append = records.append
        from_match, from_row = q.record_from_match, q.record_from_row
        for x in items:
            rec = from_match(x, cache) if type(x) is tuple else from_row(x, qmap, cfg, cache)
            rec.extra["submit_records"] = submits
            _finish_active(rec, cfg, qmap, cache)
            append(rec)
            same = by_job.get(rec.job_id)
            if same is None:
                by_job[rec.job_id] = [rec]
            else:
                same.append(rec)
        submits.jobs = len(records)

    # Tens of thousands of small containers, none in a cycle: the cyclic collector would only
    # walk the growing heap again and again (a third of the time). It is off while they are made.
    collecting = gc.isenabled()
    gc.disable()
    try:
        reader = q.RowReader()
        if xml is not None:
            take(reader.feed(xml))
        else:
            qy = started if started is not None else q.start(cfg, backend=backend)
            try:
                for data in qy.chunks():
                    take(reader.feed(data))
            finally:
                qy.close()
            qy.check(reader.blank)
        rows, again = reader.finish()
        if again:
            records.clear()
            by_job.clear()
        take(rows)
    finally:
        if collecting:
            gc.enable()
    _refine_reasons(records, by_job, cfg, now)
    out = JobList(records, set(by_job), now, submits)
    if ended:
        _add_ended(out, by_job, cfg, now)
    return out


_prio_cache: dict[float, int] = {}  # Slurm's priority of a qstat priority (many jobs share one)


def _finish_active(rec: JobRecord, cfg: SiteConfig, qmap: q.QueueMap, cache: q.RowCache | None = None) -> None:
    """What qstat alone leaves open: ids, times, priority, and array indices from the record."""
    extra = rec.extra
    row = extra["ge_row"]
    ids = _uid_cache.get(rec.user)
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
        if s and s.get("partition"):
            rec.partition = s["partition"]
    pe = row.get("pe")
    if pe and any(pe == p.pe_multinode for p in cfg.partitions.values()):
        detail(rec, cfg)
    if "ge_tasks" in extra or "ge_task" in extra:
        s = submit_record(cfg, rec)
        array = (s or {}).get("array") or []
        throttle = (s or {}).get("throttle")
        rec.array_max_tasks = int(throttle) if throttle else None

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
    if rec.state == "SUSPENDED":
        reader = extra.get("submit_records") or Reader(cfg, 1)
        ev = reader.events(rec.job_id, rec.uid if rec.uid is not None else rec.user, extra.get("submit_ts"))
        sus = ev.get((rec.array_task, "suspend"))
        if sus and sus.get("t") and extra.get("start_ts"):
            extra["run_seconds"] = max(0, int(sus["t"] - extra["start_ts"]))


BEGIN_LOOKUPS = 200  # submit records read per listing to find jobs waiting for --begin


def _begin_ts(s: dict[str, Any] | None) -> float | None:
    v = (s or {}).get("begin")
    if v in (None, ""):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        try:
            return datetime.fromisoformat(str(v)).timestamp()
        except ValueError:
            return None


def _refine_reasons(records: list[JobRecord], by_job: dict[int, list[JobRecord]], cfg: SiteConfig,
                    now: float) -> None:
    """Reasons that need the whole queue: Dependency vs JobHeldUser, JobArrayTaskLimit, Licenses,
    BeginTime, and Slurm's Resources (the first job in line) vs Priority (the others).

    Grid Engine's job list does not show ``qsub -a``; the shim's submit record does ("begin"), so
    it is read for waiting jobs -- for at most BEGIN_LOOKUPS of them, to keep a long queue fast."""
    lic_in_use: set[str] = set()
    for r in records:
        if r.state in ("RUNNING", "SUSPENDED", "COMPLETING") and r.licenses:
            lic_in_use.update(x.split(":")[0] for x in r.licenses.split(","))
    waiting: dict[str, list[JobRecord]] = {}
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
    for recs in waiting.values():
        recs.sort(key=lambda r: (-r.priority, r.job_id))
        for i, r in enumerate(recs):
            r.reason = "Resources" if i == 0 else "Priority"


# ---------------------------------------------------------------------------------------------
# ended jobs, from the shim's event records


def recent_events(cfg: SiteConfig, now: float, max_age: int | None = None
                  ) -> dict[int, dict[int, set[tuple[int | None, str]]]]:
    """{job id: {uid: {(task, kind)}}} of the end/cancel events written within ``max_age``
    seconds, by the directory (uid) they are in (a listing of each user's events: nothing read)."""
    max_age = cfg.cluster.min_job_age if max_age is None else max_age
    out: dict[int, dict[int, set[tuple[int | None, str]]]] = {}
    for uid, job, task, kind in state.scan_events(cfg, ("end", "cancel"), now - max_age, now):
        out.setdefault(job, {}).setdefault(uid, set()).add((task, kind))
    return out


def _add_ended(out: JobList, by_job: dict[int, list[JobRecord]], cfg: SiteConfig, now: float) -> None:
    """Jobs and array tasks that ended recently. A job Grid Engine still lists (an array with
    tasks left) is its owner's as Grid Engine says; one it has forgotten is whoever's events speak
    for it (records.Reader.ended_owner)."""
    recent = recent_events(cfg, now)
    if not recent:
        return
    reader = out.reader if out.reader is not None else Reader(cfg, len(recent))
    me = os.getuid()
    for job_id, by_uid in recent.items():
        active = by_job.get(job_id, [])
        if active and not any(r.array_task is not None or r.array_pending is not None for r in active):
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


def _ended_of(cfg: SiteConfig, job_id: int, keys: set[tuple[int | None, str]], active: list[JobRecord],
              events: dict, submit: dict | None, now: float, owner: int) -> list[JobRecord]:
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
    # array tasks cancelled before they ran stay one record, as in Slurm's array meta job
    never_ran = [r for r in made if r.array_task is not None and r.state == "CANCELLED" and not r.nodes]
    if len(never_ran) > 1:
        first = min(never_ran, key=lambda r: r.array_task)
        idxs = sorted(r.array_task for r in never_ran)
        made = [r for r in made if r not in never_ran] + [first]
        first.array_task = None
        first.extra["pending_indices"] = idxs
        first.array_pending = pending_text(idxs, first.array_max_tasks)
    made.sort(key=lambda r: -1 if r.array_task is None else r.array_task)
    return made


def ended_record(cfg: SiteConfig, job_id: int, task: int | None, events: dict, submit: dict | None,
                 now: float, owner: int | None = None) -> JobRecord | None:
    """A job (or array task) Grid Engine no longer lists, rebuilt from the shim's records (read
    and checked by records.Reader); ``owner``: whose job it is (its records' directory)."""
    end = events.get((task, "end"))
    cancel = events.get((task, "cancel")) or (events.get((None, "cancel")) if task is not None else None)
    start = events.get((task, "start"))
    if end is None and cancel is None:
        return None
    s = submit or {}
    info = cancel or {}
    rec = JobRecord(job_id=job_id, array_task=task)
    rec.name = s.get("name") or info.get("name") or ""
    if owner is not None:
        from .records import user_name

        rec.user = user_name(owner)
        rec.uid, rec.gid = owner, user_ids(rec.user)[1]
    else:
        rec.user = s.get("user") or info.get("owner") or info.get("user") or ""
        rec.uid, rec.gid = user_ids(rec.user) if rec.user else (None, None)
        if s.get("uid") is not None:
            rec.uid = int(s["uid"])
    rec.partition = s.get("partition") or info.get("partition") or cfg.default_partition
    rec.array_max_tasks = int(s["throttle"]) if s.get("throttle") else None
    if cancel is not None and (end is None or end.get("state") == "CANCELLED" or cancel.get("t", 0) <= end.get("t", 0)):
        rec.state = "CANCELLED"
        rec.reason = cancel.get("reason") or "None"
        if rec.reason == "DependencyNeverSatisfied":
            rec.reason = "None"
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
    if s.get("submit_time"):
        rec.submit_time = _dt(float(s["submit_time"]))
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
            c = JobRecord(**{k: getattr(r, k) for k in r.__dataclass_fields__})
            c.extra = dict(r.extra)
            c.array_pending = None
            c.array_task = i
            out.append(c)
    return out


def run_seconds(rec: JobRecord, now: float) -> int:
    """Slurm's TIME: seconds the job has run (0 while pending)."""
    if "run_seconds" in rec.extra:
        return rec.extra["run_seconds"]
    if rec.state in ("PENDING", "CANCELLED") or rec.start_time is None:
        return 0
    st = rec.extra.get("start_ts") or rec.start_time.timestamp()
    return max(0, int(now - st))
