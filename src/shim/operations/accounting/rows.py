"""sacct's rows: one job row and its ``.batch`` step row, built from each of the three sources:

* ``rows_from_record``: a Grid Engine accounting record (a job or array task that ended), with the
  shim's end and cancel events deciding what Slurm would say of it (``qacct.outcome``);
* ``rows_from_events``: a job Grid Engine has no record of (cancelled while pending), or whose
  record is not written yet, rebuilt from the shim's events;
* ``rows_from_live``: a pending, running or suspended job from the live queue (``jobs.JobRecord``).

What many rows share (users' ids and groups, sbatch's submit records, names, geometry, limits) is
looked up once per sacct run in ``Lookups``.
"""

from __future__ import annotations

import os

from ...gridengine import names as jobnames
from ...gridengine import qacct
from ...gridengine.units import ge_memory_bytes, ge_seconds
from ...store.records import NO_RECORD, ended_reason, group_id, memory_request, primary_group, user_ids
from ...slurm.render import sacct as view
from ...slurm.request import MISSING

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ...store.records import Submitted
    from .events import Events

_UNREAD = object()


class Lookups:
    """What one sacct run looks up many times, each once: user and group ids, primary groups,
    sbatch's submit records (through ``records.Reader``), job identities, geometries, time
    limits, outcomes and row templates; the owners Grid Engine reported for jobs so far."""

    def __init__(self, cfg: Any, now: float):
        self.cfg = cfg
        self.now = now
        self.cluster = cfg.cluster.name
        self._queues: Any = None  # gridengine.qstat.QueueMap, made at first use
        self.default_partition = cfg.default_partition
        self._submit: dict[tuple, Submitted | None] = {}
        self._ident: dict[tuple, dict[str, Any]] = {}
        self._geom: dict[tuple, tuple] = {}
        self._limits: dict[str, int] = {}
        self._limit_cache: dict[tuple, int | None] = {}
        self._outcomes: dict[tuple[int, int], qacct.Outcome] = {}
        self._templates: dict[tuple, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.reader: Any = None  # records.Reader, made at first use
        self.eager = False  # list each user's records at first use (a listing that reads most of them)
        self.owners: dict[int, str] = {}  # job -> its owner, as Grid Engine reported it
        self.me = os.getuid()
        from ...slurm import releases

        self.style = view.StdStyle.of(releases.current())  # what the release does with output paths

    def outcome(self, rec: qacct.Record) -> qacct.Outcome:
        """qacct.outcome of a record without shim events; shared by the records with the same
        failed/exit_status pair when nothing else of the record decides it."""
        f = rec.failed
        if f == qacct.KILLED_CODE or f == qacct.LIMIT_CODE:
            return qacct.outcome(rec)
        key = (f, rec.exit_status)
        oc = self._outcomes.get(key)
        if oc is None:
            oc = self._outcomes[key] = qacct.outcome(rec)
        return oc

    def records(self) -> Any:
        if self.reader is None:
            from ...store.records import Reader

            self.reader = Reader(self.cfg, eager=self.eager)
        return self.reader

    def owner(self, job: int, owner: Any = None) -> Any:
        """The owner to read a job's records for: the one given (Grid Engine's), else the one
        Grid Engine reported for the job earlier in this command, else the caller."""
        if owner not in (None, ""):
            return owner
        return self.owners.get(job, self.me)

    def submit(self, job: int, owner: Any = None, ge_submit: float | None = None) -> Submitted | None:
        """sbatch's record of a job of ``owner`` (see Lookups.owner) submitted at ``ge_submit`` (when
        known): records.Reader.submit, cached."""
        owner = self.owner(job, owner)
        key = (job, owner, ge_submit)
        s = self._submit.get(key, _UNREAD)  # type: ignore[call-overload]
        if s is not _UNREAD:
            return s
        s = self._submit[key] = self.records().submit(job, owner, ge_submit)  # type: ignore[index]
        return s  # (the Reader reads each job's files once, whatever the submission time asked)

    def ident(self, job: int, s: Submitted | None, ge_name: str, owner: str, group: str, queue: str,
              ge_account: str) -> dict[str, Any]:
        key = (id(s) if s else None, ge_name, owner, group, queue, ge_account)
        v = self._ident.get(key)
        if v is None:
            v = self._ident[key] = _ident(self, job, s, ge_name, owner, group, queue, ge_account)
        return v

    def geometry(self, job: int, s: Submitted | None, ncpus: int, category: str) -> tuple:
        key = (job if s else None, ncpus, category)
        v = self._geom.get(key)
        if v is None:
            v = self._geom[key] = _geometry(self, s, ncpus, category)
        return v

    @staticmethod
    def gres_only(extra: dict[str, int]) -> dict[str, int]:
        return {k: v for k, v in extra.items() if k.startswith("gres/")} if extra else extra

    def partition_of(self, queue: str) -> str:
        """A Grid Engine queue (or queue instance ``q@host``) as its partition, by squeue's rule
        (``gridengine.qstat.QueueMap``: the first partition of the queue; another queue by its name)."""
        qm = self._queues
        if qm is None:
            from ...gridengine.qstat import QueueMap

            qm = self._queues = QueueMap(self.cfg)
        return qm.partition(queue)

    def partition_limit(self, partition: str) -> int:
        """The time limit a job without -t gets in this partition (minutes, -1 unlimited)."""
        if partition in self._limits:
            return self._limits[partition]
        self._limits[partition] = v = self._partition_limit(partition)
        return v

    def _partition_limit(self, partition: str) -> int:
        from ...slurm.options.values import time_minutes

        p = self.cfg.partitions.get(partition)
        if p is None:
            return -1
        for text in (p.get("default_time"), p.get("max_time")):
            if text:
                v = time_minutes(str(text))
                if v is not None:
                    return v
        return -1


STALE = 3600  # seconds between Grid Engine's and the shim's times beyond which they are different jobs


def fresh_submit(s: Submitted | None, rec: qacct.Record) -> Submitted | None:
    """The submit record, unless it belongs to an earlier job that had the same number."""
    if s and s.submit_time and rec.submit and abs(float(s.submit_time) - rec.submit) > STALE:
        return None
    return s


def _slurm_task(ge_task: int, submit: Submitted | None) -> int | None:
    if not ge_task:
        return None
    array = (submit or NO_RECORD).array
    if array and 1 <= ge_task <= len(array):
        return array[ge_task - 1]
    return ge_task


def _mem_mb(text: str | None) -> float | None:
    """A Grid Engine memory request in MB (units.ge_memory_bytes: sge_types' k/m/g are powers of
    1000, K/M/G of 1024); None for none, INFINITY or text it cannot read."""
    b = ge_memory_bytes(text)
    return None if b is None or b == float("inf") else b / (1024 * 1024)


def _geometry(ctx: Lookups, s: Submitted | None, ncpus: int, category: str = "") -> tuple[int, float | None, dict[str, int]]:
    """(nodes, requested memory in MB for the whole job, extra TRES) from the submit record, else
    from the Grid Engine request (category)."""
    extra: dict[str, int] = {}
    if s:
        nodes = s.nodes or 1
        asked = memory_request(s)
        mem = None if asked is None else float(asked[0]) * (ncpus if asked[1] else nodes)
        if s.gpus:
            extra["gres/gpu"] = s.gpus
        if s.licenses:
            for item in s.licenses.split(","):
                name, _, cnt = item.partition(":")
                if name:
                    extra[f"license/{name}"] = int(cnt) if cnt.isdigit() else 1
        return nodes, mem, extra
    req = qacct.category_requests(category) if category else {}
    cfg = ctx.cfg
    mem = None
    mc = cfg.memory.complex
    if req.get(mc):
        per = _mem_mb(req[mc])
        if per is not None:
            mem = per * (ncpus if cfg.memory.scope == "slot" else 1)
    for gname, c in cfg.gres.items():
        if req.get(c.complex, "").isdigit():
            extra[f"gres/{gname}"] = int(req[c.complex])
    for lname, c in cfg.licenses.items():
        if req.get(c.complex, "").isdigit():
            extra[f"license/{lname}"] = int(req[c.complex])
    return 1, mem, extra


def _limit(ctx: Lookups, s: Submitted | None, category: str, partition: str, started: bool) -> int | None:
    key = (id(s) if s else None, category, partition, started)
    if key not in ctx._limit_cache:
        ctx._limit_cache[key] = _limit_of(ctx, s, category, partition, started)
    return ctx._limit_cache[key]


def _limit_of(ctx: Lookups, s: Submitted | None, category: str, partition: str, started: bool) -> int | None:
    t = None
    if s and s.time is not MISSING:
        t = s.time
    elif category:
        h = qacct.category_requests(category).get("h_rt")
        if h:
            secs = ge_seconds(h)
            if secs is not None and secs >= 0:  # (-1: INFINITY, no limit of the job's own)
                t = (secs + 59) // 60
    if t is None or t < 0:
        if not started:
            return None  # Partition_Limit until the job starts
        return ctx.partition_limit(partition)
    return t


def _ident(ctx: Lookups, job: int, s: Submitted | None, ge_name: str, owner: str, group: str, queue: str,
           ge_account: str) -> dict[str, Any]:
    s = s or NO_RECORD
    name = s.name or jobnames.decode(ge_name)
    partition = s.partition or (ctx.partition_of(queue) if queue else ctx.default_partition)
    account = s.account or (jobnames.decode(ge_account) if ge_account not in ("", "sge", "NONE") else "")
    user = owner or s.user or ""
    uid = user_ids(user)[0] if user else None  # (records.py: the one lookup of users and groups)
    if uid is None and s.uid is not MISSING:
        uid = s.uid
    if not group and uid is not None:
        group = primary_group(uid) or ""  # sacct's Group of an unknown gid: nothing (print.c PRINT_GROUP)
    return {
        "name": name, "partition": partition, "account": account, "user": user, "uid": uid,
        "group": group, "gid": group_id(group) if group else None,
        "comment": s.comment or "", "workdir": s.workdir or "", "submit_line": s.submit_line or "",
        "qos": s.qos or "normal", "cluster": ctx.cluster, **job_marks(s),
        "std": job_std(ctx, s, s.workdir or ""),
    }


def job_std(ctx: Lookups, s: Submitted | None, workdir: str) -> view.Stdio | None:
    """A job's output paths from sbatch's record (-o, -e, -i as written, its working directory):
    render.sacct.job_stdio. None (StdOut, StdErr, StdIn empty) for a job without one (not
    submitted by sbatch: Grid Engine's accounting keeps no paths) and for srun's and salloc's own
    jobs, whose rows Slurm leaves empty too."""
    if not s or s.get("interactive"):
        return None
    return view.job_stdio(s.stdout or None, s.stderr or None, s.stdin or None, workdir, bool(s.array), ctx.style)


def job_marks(s: Submitted | None) -> dict[str, Any]:
    """What the submit record says of a job for 24.11's and 26.05's fields: its creation in ms
    (SLUID, as the job wrapper made SLURM_JOB_SLUID), and -exclusive/--oversubscribe as asked
    (26.05's Exclusive, OverSubscribe)."""
    if not s:
        return {"sluid_ms": None, "exclusive": "", "oversubscribe": ""}
    made = s.get("sub")
    asked = s.get("asked")
    asked = asked if isinstance(asked, dict) else {}
    return {"sluid_ms": int(made * 1000) if isinstance(made, (int, float)) and not isinstance(made, bool) else None,
            "exclusive": str(asked.get("exclusive") or ""), "oversubscribe": str(asked.get("oversubscribe") or "")}


_REQUEUED = qacct.Outcome("REQUEUED", 0, 0, "CANCELLED", 0, 9)
_new_row = object.__new__


def _row(d: dict[str, Any]) -> view.Row:
    """A Row holding exactly the attributes of ``d`` (as ``view.Row(**d)``, without the copy)."""
    r = _new_row(view.Row)
    r.__dict__ = d
    return r


def _templates(ctx: Lookups, rec: qacct.Record, s: Submitted | None, ncpus: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the job row and the batch row of a record share with every record of the same submit
    record, names, owner, queue, slots and request: (job attributes, batch attributes)."""
    ident = ctx.ident(rec.job, s, rec.jobname, rec.owner, rec.group, rec.qname, rec.account)
    nodes, mem, extra = ctx.geometry(rec.job, s, ncpus, rec.category)
    limit = _limit(ctx, s, rec.category, ident["partition"], True)
    job = dict(ident)
    job.update(now=ctx.now, ncpus=ncpus, nnodes=nodes, time_limit=limit, req_mem_mb=mem,
               tres=(ncpus, mem, nodes, extra), reason="None")
    batch = {"step": "batch", "now": ctx.now, "ncpus": ncpus, "nnodes": 1, "ntasks": 1,
             "tres": (ncpus, mem, 1, ctx.gres_only(extra), False), "cluster": ctx.cluster, "name": "batch",
             "partition": ident["partition"], "account": ident["account"], "user": ident["user"],
             "uid": ident["uid"], "group": ident["group"], "sluid_ms": ident["sluid_ms"]}
    return job, batch


def rows_from_record(ctx: Lookups, rec: qacct.Record, s: Submitted | None, ev: Events, *, requeued: bool = False,
                     order: int = 0, steps: bool = True) -> tuple[view.Row, view.Row | None]:
    """A finished job or array task (one accounting record) -> its job row and .batch row."""
    task = _slurm_task(rec.task, s)
    end_ev = cancel_ev = None
    if not requeued and ev.knows(rec.job, rec.owner):
        end_ev = ev.get(rec.job, task, "end", rec.owner, rec.submit or None)
        cancel_ev = ev.get(rec.job, task, "cancel", rec.owner, rec.submit or None)
        if end_ev is not None and rec.end and abs(float(end_ev.get("t") or 0) - rec.end) > STALE:
            end_ev = None  # a record of an earlier job with the same number (Grid Engine reinstalled)
        if cancel_ev is not None and abs(float(cancel_ev.get("t") or 0) - (rec.end or rec.submit)) > STALE:
            cancel_ev = None
    if requeued:
        oc = _REQUEUED
    elif end_ev is None and cancel_ev is None:
        oc = ctx.outcome(rec)
    else:
        oc = qacct.outcome(rec, end_ev, cancel_ev)
    ncpus = rec.slots or 1
    key = (id(s) if s else None, rec.jobname, rec.owner, rec.group, rec.qname, rec.account, ncpus, rec.category)
    tmpl = ctx._templates.get(key)
    if tmpl is None:
        tmpl = ctx._templates[key] = _templates(ctx, rec, s, ncpus)
    start, end = rec.start, rec.end
    if not start:  # never started (Grid Engine could not launch it): Slurm shows the launch moment
        start = end = end or rec.submit
    host = [rec.hostname] if rec.hostname else []
    utime, stime = rec.utime, rec.stime
    cpu = utime + stime
    d = tmpl[0].copy()
    d["job_id"] = rec.job
    d["task"] = task
    d["state"] = oc.state
    d["cancel_uid"] = oc.cancel_uid
    d["exit"] = oc.exit
    d["signal"] = oc.signal
    d["submit"] = d["eligible"] = rec.submit
    d["start"] = start
    d["end"] = end
    d["nodes"] = host
    d["total_cpu"] = cpu
    d["user_cpu"] = utime
    d["sys_cpu"] = stime
    d["priority"] = rec.priority
    d["order"] = order
    d["extra"] = {"throttle": s.get("throttle") if s else None}
    if rec.metrics:  # the job's own metrics, from usage patterns (gridengine/metrics.py)
        from ...gridengine.metrics import text

        d["admin_comment"] = text(rec.metrics)
    job = _row(d)
    if not steps:
        return job, None
    d = tmpl[1].copy()
    d["job_id"] = rec.job
    d["task"] = task
    d["state"] = oc.batch_state
    d["exit"] = oc.batch_exit
    d["signal"] = oc.batch_signal
    d["submit"] = d["eligible"] = d["start"] = start
    d["end"] = end
    d["nodes"] = host
    d["maxrss_kb"] = rec.maxrss_kb
    d["maxvmem_kb"] = int(rec.maxvmem // 1024)
    d["total_cpu"] = cpu
    d["user_cpu"] = utime
    d["sys_cpu"] = stime
    d["order"] = order
    d["extra"] = {}
    return job, _row(d)


def rows_from_events(ctx: Lookups, job_id: int, task: int | None, s: Submitted | None, ev: Events, owner: str
                     ) -> tuple[view.Row, view.Row | None] | None:
    """A job of ``owner`` Grid Engine has no record of (cancelled while pending) or whose record
    is not there (yet): rebuilt from the shim's end and cancel events."""
    end_ev = ev.get(job_id, task, "end", owner)
    cancel_ev = ev.get(job_id, task, "cancel", owner)
    start_ev = ev.get(job_id, task, "start", owner)
    if end_ev is None and cancel_ev is None:
        return None
    info = cancel_ev or {}
    ident = _ident(ctx, job_id, s, info.get("name", ""), owner, "", "", "")
    if not s and info.get("partition"):
        ident["partition"] = info["partition"]
    ncpus = (s.ntasks or 1) * (s.cpus_per_task or 1) if s else int(info.get("cpus") or 1)
    nodes, mem, extra = _geometry(ctx, s, ncpus)
    submit = int(float((s or NO_RECORD).submit_time or info.get("t") or 0)) or None
    if end_ev is None and info.get("was") == "PENDING":
        ran = False
    else:
        ran = end_ev is not None or start_ev is not None or info.get("was") in ("RUNNING", "SUSPENDED", "COMPLETING")
    if end_ev is not None:
        oc = qacct._from_end_event(end_ev, cancel_ev)
        start = int(float(end_ev.get("start") or (start_ev or {}).get("t") or 0)) or None
        end = int(float(end_ev.get("t") or 0)) or None
        node = end_ev.get("node") or (start_ev or {}).get("node") or ""
    else:
        oc = qacct.Outcome("CANCELLED", 0, 0, "CANCELLED", 0, 9, reason=info.get("reason") or "None",
                           cancel_uid=qacct._opt_int(info.get("uid")))
        start = (int(float(info.get("start") or (start_ev or {}).get("t") or 0)) or None) if ran else None
        end = int(float(info.get("t") or 0)) or None
        node = info.get("node") or (start_ev or {}).get("node") or ""
    limit = _limit(ctx, s, "", ident["partition"], bool(start))
    reason = ended_reason(oc.reason) if not start else "None"
    host = [node] if node and start else []
    job = view.Row(
        job_id=job_id, task=task, step=None, state=oc.state, cancel_uid=oc.cancel_uid, exit=oc.exit,
        signal=oc.signal, submit=submit, eligible=submit, start=start, end=end, now=ctx.now, ncpus=ncpus,
        nnodes=nodes, nodes=host, time_limit=limit, req_mem_mb=mem, tres=(ncpus, mem, nodes, extra),
        allocated=bool(start), total_cpu=0.0, user_cpu=0.0, sys_cpu=0.0, reason=reason,
        priority=0, order=0, extra={"throttle": (s or NO_RECORD).get("throttle")}, **ident)
    if not start:
        return job, None
    batch = view.Row(
        job_id=job_id, task=task, step="batch", state=oc.batch_state, exit=oc.batch_exit,
        signal=oc.batch_signal, submit=start, eligible=start, start=start, end=end, now=ctx.now,
        ncpus=ncpus, nnodes=1, nodes=host, ntasks=1,
        tres=(ncpus, mem, 1, ctx.gres_only(extra), False), total_cpu=0.0, user_cpu=0.0, sys_cpu=0.0,
        cluster=ctx.cluster, name="batch", partition=ident["partition"], account=ident["account"],
        user=ident["user"], uid=ident["uid"], group=ident["group"], sluid_ms=ident["sluid_ms"])
    return job, batch


def rows_from_live(ctx: Lookups, rec: Any) -> tuple[view.Row, view.Row | None]:
    """A pending, running or suspended job from the live queue (a shim.operations.jobs JobRecord)."""
    from .. import jobs

    jobs.detail(rec, ctx.cfg)
    s = rec.extra.get("submit")
    ncpus = rec.num_cpus or 1
    nodes, mem, extra = _geometry(ctx, s, ncpus)
    if not s and rec.min_memory_mb:
        mem = rec.min_memory_mb * (ncpus if rec.mem_per_cpu else 1)
    submit = int(rec.submit_time.timestamp()) if rec.submit_time else None
    start = int(rec.start_time.timestamp()) if rec.start_time and rec.state != "PENDING" else None
    held = rec.state == "PENDING" and rec.reason in ("JobHeldUser", "JobHeldAdmin", "Dependency")
    limit = rec.time_limit if rec.time_limit not in (None, -1) else (
        (ctx.partition_limit(rec.partition) if start else None))
    if s and s.time is not MISSING and s.time >= 0:
        limit = s.time
    state_ = rec.state if rec.state in ("PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "REQUEUED") else rec.state
    # pending tasks not yet split out: one row, <id>_[<indices>[%<throttle>]] as Slurm prints it
    array_text = f"[{rec.array_pending}]" if rec.array_pending is not None else None
    job = view.Row(
        job_id=rec.job_id, task=rec.array_task, array_text=array_text, step=None, state=state_,
        exit=0, signal=0, submit=submit, eligible=None if held else submit, start=start, end=None,
        now=ctx.now, ncpus=ncpus, nnodes=nodes, nodes=list(rec.nodes) if start else [], time_limit=limit,
        req_mem_mb=mem, tres=(ncpus, mem, nodes, extra), allocated=bool(start), total_cpu=0.0,
        user_cpu=0.0, sys_cpu=0.0, reason=rec.reason if rec.state == "PENDING" else "None",
        name=rec.name, partition=rec.partition, account=rec.account or "", user=rec.user, uid=rec.uid,
        group=rec.group or (jobs.group_name(rec.gid) if rec.gid is not None else ""), gid=rec.gid,
        comment=rec.comment, workdir=rec.work_dir, qos=rec.qos or "normal", cluster=ctx.cluster,
        priority=rec.priority, extra={"throttle": rec.array_max_tasks, "live": True}, **job_marks(s),
        std=job_std(ctx, s, (s.workdir if s else "") or rec.work_dir or ""))
    if not start:
        return job, None
    batch = view.Row(
        job_id=rec.job_id, task=rec.array_task, step="batch", state=state_, exit=0, signal=0, submit=start,
        eligible=start, start=start, end=None, now=ctx.now, ncpus=ncpus, nnodes=1, nodes=list(rec.nodes[:1]),
        ntasks=1, tres=(ncpus, mem, 1, ctx.gres_only(extra), False), total_cpu=0.0, user_cpu=0.0,
        sys_cpu=0.0, cluster=ctx.cluster, name="batch", partition=rec.partition, account=rec.account or "",
        user=rec.user, uid=rec.uid, group=job.group, sluid_ms=job.sluid_ms)
    return job, batch


def step_rows(ctx: Lookups, job: view.Row, ends: list[dict[str, Any]]) -> list[view.Row]:
    """The job's srun steps (``N.0``, ``N.1``, ...) from their end events (Events.steps), as Slurm's
    accounting shows them: the command's name, the step's tasks, nodes and the job's CPUs on them,
    its own start and end, exit code and signal, State (run.step_end), srun's command line; the
    job's account and memory (AllocTRES). A pending or requeued run has none."""
    if job.state == "REQUEUED" or not job.start:
        return []
    from ...slurm.hostlist import expand

    tres = job.tres or (job.ncpus, None, job.nnodes, {})
    out = []
    paths = ctx.style.steps  # (26.05: a step's own -o, -e, -i on its row)
    for e in ends:
        try:
            nodes = expand(e.get("node") or "") if e.get("node") else list(job.nodes)
        except ValueError:
            nodes = list(job.nodes)
        cpus = e.get("cpus") or job.ncpus
        nnodes = e.get("nodes") or len(nodes) or 1
        start = int(e["start"])
        end = int(e["t"])
        out.append(view.Row(
            job_id=job.job_id, task=job.task, step=str(e["step"]), state=e["state"], exit=e.get("exit") or 0,
            signal=e.get("signal") or 0, submit=start, eligible=start, start=start, end=max(start, end),
            now=ctx.now, ncpus=cpus, nnodes=nnodes, nodes=nodes, ntasks=e.get("ntasks"),
            tres=(cpus, tres[1], nnodes, ctx.gres_only(tres[3]), False), total_cpu=0.0, user_cpu=0.0,
            sys_cpu=0.0, cluster=ctx.cluster, name=e.get("name") or "", partition=job.partition,
            account=job.account, user=job.user, uid=job.uid, group=job.group, sluid_ms=job.sluid_ms,
            submit_line=e.get("submit_line") or "", order=job.order,
            std=_step_std(ctx, job, e) if paths else None))
    return out


def _step_std(ctx: Lookups, job: view.Row, e: dict[str, Any]) -> view.Stdio | None:
    """A srun step's output paths, from its end event's ``stdout``, ``stderr``, ``stdin`` (srun's
    -o, -e, -i as written) and ``cwd`` (its working directory; else the job's): where the release
    shows them (render.sacct.step_stdio); text only, anything else is no path."""
    def text(key: str) -> str | None:
        v = e.get(key)
        return v if isinstance(v, str) and v else None

    return view.step_stdio(text("stdout"), text("stderr"), text("stdin"), text("cwd") or job.workdir or "",
                           e.get("step"), job.name or "", bool(job.std and job.std.array), ctx.style)


def derived_exit(ends: list[dict[str, Any]]) -> tuple[int, int] | None:
    """DerivedExitCode: the highest of the steps' wait statuses (exit code << 8 | signal, as Slurm
    compares them: exit 3 outweighs signal 15), as (exit code, signal); None without steps."""
    best = None
    for e in ends:
        code, sig = (e.get("exit") or 0) & 0xFF, (e.get("signal") or 0) & 0x7F
        if best is None or (code << 8 | sig) > (best[0] << 8 | best[1]):
            best = (code, sig)
    return best
