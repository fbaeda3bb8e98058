"""squeue's selection and order: which jobs (or steps) a ``squeue`` shows, in which order.

``query`` makes the ``Query`` of squeue's options (its states, job ids and users read by the
command before its qstat starts: model.state_named, jobids, users.name_of); ``listing`` reads the
job list squeue, scancel and scontrol share (jobs.list_jobs) for it; ``select`` keeps the jobs
its filters keep (Slurm's _filter_job); ``fill_detail`` reads what the shown and sorted fields
need and ``sort_records`` puts the records in Slurm's order (squeue/sort.c, ties in the
controller's list order: ``created_key``). ``cli/squeue.py`` parses the command line, starts the
qstat call, calls these while it runs and renders. Imported once qstat has started (and the job
list's module with it: squeue's start before its qstat loads neither)."""

from __future__ import annotations

import os
import time

from . import jobs
from ..errors import ShimError, for_command

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from ..gridengine.qstat import Query as Started
    from ..slurm.options.sources import Options
    from ..slurm.render.squeue import Ctx

PROG = "squeue"


error = for_command(PROG)  # Slurm's "<prog>: error: ..." (errors.command_error)


class Query:
    """What a squeue shows: the jobs' states (None: every state), ids (job, array index or None),
    users (names) and the other filters (None: not given), the users named that name nobody, what
    the listing holds (``only`` these jobs, else the jobs of the users ``listed``; None: all), and
    how: one array task per line (``-r``), steps (``-s``), ``--json``/``--yaml`` (every job), the
    ``-S`` keys as given, ``--start``. (A plain class: ``dataclasses`` costs ~10 ms of a start.)"""

    __slots__ = ("states", "job_ids", "users", "bad_users", "only", "listed", "names", "partitions", "accounts",
                 "qos", "licenses", "nodelist", "reservation", "array", "steps", "whole", "sort", "start",
                 "state_only", "running")

    def __init__(self, states: set[str] | None = None, job_ids: list[tuple[int, int | None]] | None = None,
                 users: set[str] | None = None, bad_users: list[str] | None = None, only: set[int] | None = None,
                 listed: list[str] | None = None, names: set[str] | None = None,
                 partitions: set[str] | None = None, accounts: set[str] | None = None, qos: set[str] | None = None,
                 licenses: set[str] | None = None, nodelist: str | None = None, reservation: str | None = None,
                 array: bool = False, steps: bool = False, whole: bool = False, sort: str | None = None,
                 start: bool = False, state_only: bool = False, running: tuple | None = None):
        self.states, self.job_ids, self.users = states, job_ids, users
        self.bad_users = [] if bad_users is None else bad_users
        self.only, self.listed = only, listed
        self.names, self.partitions, self.accounts, self.qos, self.licenses = names, partitions, accounts, qos, licenses
        self.nodelist, self.reservation = nodelist, reservation
        self.array, self.steps, self.whole, self.sort, self.start = array, steps, whole, sort, start
        self.state_only = state_only  # --only-job-state: the records carry ids and states alone (state_only)
        # 26.05's --running-over and --running-under: (at least, less than) seconds run, either None;
        # None: no such filter (then only running jobs are shown)
        self.running = running


def query(opts: Options, states: set[str] | None, job_ids: list[tuple[int, int | None]] | None,
          users: set[str] | None, bad_users: list[str], *, only: set[int] | None = None,
          listed: list[str] | None = None) -> Query:
    """The query of squeue's options, with what the command read before its qstat started: the
    states of ``-t`` (None: all; without ``-t``, those of the jobs that have not ended), the ids of
    ``-j`` and ``--steps``, the users of ``-u`` and ``--me``, the words of ``-u`` that name none,
    and what the listing holds (the jobs of ``only``, else of the users ``listed``; None: all)."""
    if states is None and not opts.states:
        states = set(jobs.ACTIVE_STATES)
    return Query(states, job_ids, users, bad_users, only=only, listed=listed,
                 names=set(opts.name.split(",")) if opts.name else None,
                 partitions=set(opts.partitions.split(",")) if opts.partitions else None,
                 accounts={a.lower() for a in opts.account.split(",")} if opts.account else None,
                 qos={a.lower() for a in opts.qos.split(",")} if opts.qos else None,
                 licenses=set(opts.licenses.split(",")) if opts.licenses else None,
                 nodelist=opts.nodelist or None, reservation=opts.reservation or None, array=bool(opts.array),
                 steps=opts.steps is not None, whole=bool(opts.json or opts.yaml), sort=opts.sort or None,
                 start=bool(opts.start), state_only=bool(opts.get("only_job_state")),
                 running=_running(opts))


def _running(opts: Options) -> tuple | None:
    over, under = opts.get("running_over"), opts.get("running_under")
    return None if over is None and under is None else (over, under)


def sort_keys(qy: Query) -> list:
    """-S: the fields to sort by, with their direction (empty without -S)."""
    from ..slurm.render import fmt
    from ..slurm.render import squeue as view

    if not qy.sort:
        return []
    try:
        return fmt.parse_sort(qy.sort, view.REGISTRY)
    except fmt.FormatError as e:
        raise error(f"Invalid sort specification: {e.spec}")


# the fields whose text the pending reasons decide: Reason, ReasonList, and StartTime (a job
# waiting for --begin shows its begin time, decided with the reasons: jobs._refine_reasons)
REASON_FIELDS = frozenset({"Reason", "ReasonList", "StartTime"})


def shows_reasons(qy: Query, kind: str, ftext: str) -> bool:
    """Does the output show or sort by what the pending reasons decide? Without, no resource
    quota is asked about (policy.reasons_for: ~10 ms) and ``-j``'s jobs need no whole-queue
    listing for their reasons (jobs.list_jobs' ``reasons``): e.g. Parsl's and Nextflow's
    ``squeue -h -o '%i %t'`` polls. --json, --yaml and anything unreadable: True."""
    if qy.whole:
        return True
    if qy.steps:
        return False  # a step's view shows no job reason (steps belong to running jobs)
    from ..slurm.render import fmt
    from ..slurm.render import squeue as view

    try:
        f = fmt.parse_long(ftext, view.REGISTRY, errors=[]) if kind == "long" else \
            fmt.parse_percent(ftext, view.REGISTRY, all_letters=view.ALL_LETTERS, errors=[])
        fields = [c.field for c in f.columns]
        if qy.sort:
            fields += [spec for spec, _ in fmt.parse_sort(qy.sort, view.REGISTRY)]
    except Exception:  # noqa: BLE001 - the real parse reports it; until then, assume reasons are shown
        return True
    return any(getattr(x, "name", None) in REASON_FIELDS for x in fields)


# ---------------------------------------------------------------------------------------------
# the listing


def listing(cfg, qy: Query, *, now: float, started: Started | None, reasons: bool) -> jobs.JobList:
    """The job list the query reads (jobs.list_jobs): the ended jobs' records where ended states
    may be shown (of the ids given only, with ``-j``); the pending reasons and quotas only where
    ``reasons`` (shows_reasons). ``started``: the listing the command started for the query."""
    states = qy.states
    want_ended = bool(qy.whole or qy.job_ids or states is None or any(s not in jobs.ACTIVE_STATES for s in states))
    return jobs.list_jobs(cfg, ended=want_ended, now=now, started=started, only=qy.only, reasons=reasons,
                          quotas=reasons, users=qy.listed)


def every_job(jl: jobs.JobList, cfg, qy: Query, ctx: Ctx) -> list:
    """``--json``/``--yaml``: every job of the listing with every field read, in squeue's order."""
    from .jobs import fill_reservations

    for r in jl.records:
        jobs.detail(r, cfg)
        r.group = r.group or jobs.group_name(r.gid)
    fill_reservations(jl.records, cfg)
    return sort_records(jl.records, qy, ctx)


def select(jl: jobs.JobList, qy: Query, cfg) -> list:
    """The records the query shows (Slurm's _filter_job), one per array task with ``-r``. A
    single job id that names no job is Slurm's "Invalid job id specified"."""
    job_ids = qy.job_ids
    if job_ids is not None and len(job_ids) == 1 and job_ids[0][0] not in jl.known and not qy.state_only:
        raise ShimError("slurm_load_jobs error: Invalid job id specified", code=1)
    if qy.state_only and (qy.accounts or qy.qos or qy.licenses or qy.reservation):
        return []  # fields the state-only records do not carry match no value (state_only)
    recs = jl.records
    if job_ids:
        want_jobs = {j for j, t in job_ids if t is None}
        want_tasks: dict[int, set[int]] = {}
        for j, t in job_ids:
            if t is not None:
                want_tasks.setdefault(j, set()).add(t)
        out = []
        for r in recs:
            if r.job_id in want_jobs:
                out.append(r)
            elif r.job_id in want_tasks:
                ts = want_tasks[r.job_id]
                if r.array_task is not None and r.array_task in ts:
                    out.append(r)
                elif r.array_pending is not None:
                    hit = [i for i in r.extra.get("pending_indices", ()) if i in ts]
                    for i in hit:
                        c = jobs.expand_array([r])
                        out.extend(x for x in c if x.array_task == i)
        recs = out
    states = qy.states
    if states is not None:
        from ..slurm.model import shown_state  # -t R is not a stopped job, -t ST is (Slurm's _filter_job)

        recs = [r for r in recs if shown_state(r) in states]
    if qy.users is not None:
        recs = [r for r in recs if r.user in qy.users]
    if qy.names:
        recs = [r for r in recs if r.name in qy.names]
    if qy.partitions:
        recs = [r for r in recs if r.partition in qy.partitions]
    if qy.accounts:
        recs = [r for r in recs if account_of(r, cfg) in qy.accounts]
    if qy.qos:
        recs = [r for r in recs if qos_of(r, cfg) in qy.qos]
    if qy.licenses:  # (squeue's alone: scancel has no -L)
        recs = [r for r in recs
                if {x.split(":")[0] for x in filter(None, jobs.detail(r, cfg).licenses.split(","))} & qy.licenses]
    if qy.nodelist:
        hosts = hosts_named(qy.nodelist, localhost=True)  # squeue/opts.c _map_node_name: localhost is this host
        recs = [r for r in recs if on_hosts(r, hosts)]
    if qy.reservation:
        recs = in_reservation(recs, cfg, qy.reservation)
    if qy.running is not None:
        recs = running_for(recs, qy.running, jl.now or time.time())
    if qy.array:
        recs = jobs.expand_array(recs)
    return recs


def running_for(recs: list, running: tuple, now: float) -> list:
    """26.05's --running-over=T (run at least T seconds) and --running-under=T (less than T): the
    running jobs alone, by the time squeue's TIME column shows (as asked of 26.05.5: pending and
    held jobs never match, whatever -t says)."""
    from ..slurm.model import run_seconds

    over, under = running
    out = []
    for r in recs:
        if r.state != "RUNNING":
            continue
        ran = run_seconds(r, now)
        if (over is None or ran >= over) and (under is None or ran < under):
            out.append(r)
    return out


def state_only(jl: jobs.JobList) -> None:
    """--only-job-state (24.11, 26.05): the controller sends each job's id, array fields and state
    alone (REQUEST_JOB_STATE), and squeue filters, sorts and prints those records as any other.
    So every other field is unset: the user is uid 0 (``-u root`` and root's ``--me`` keep every
    job, any other user none), and ``-n``, ``-p``, ``-A``, ``-q``, ``-L``, ``-w``, ``-R`` keep
    nothing (as measured on 24.11.5 and 26.05.5); ``-t``, ``-j`` and ``-r`` work."""
    from ..slurm.model import JobRecord

    kept = ("stopped", "pending_indices")  # what -t ST and -j N_k read of a record's extra
    jl.records = [JobRecord(r.job_id, array_task=r.array_task, array_pending=r.array_pending,
                            array_max_tasks=r.array_max_tasks, state=r.state, user="root", uid=0, qos="",
                            std_in="", requeue=False, extra={k: r.extra[k] for k in kept if k in r.extra},
                            submit_time=r.submit_time, start_time=r.start_time)  # (the order: sort_records)
                  for r in jl.records]


# ---------------------------------------------------------------------------------------------
# the filter rules squeue's select and scancel's (cancel.Filters) share


def account_of(r, cfg) -> str:
    """A job's account as ``-A`` compares it: lowercased ('' for none), as Slurm lowercases the
    option's (squeue/opts.c, scancel/opt.c xstrtolower) and keeps accounts in lowercase."""
    return (jobs.detail(r, cfg).account or "").lower()


def qos_of(r, cfg) -> str:
    """A job's QOS as ``-q`` compares it: lowercased, "normal" for a job that names none."""
    return (jobs.detail(r, cfg).qos or "normal").lower()


def hosts_named(nodelist: str, *, localhost: bool) -> set[str]:
    """The hosts of ``-w``'s hostlist (one expand: one cap on the whole list, F-11); ``localhost``:
    that word also names this host (squeue's rule, not scancel's)."""
    from ..slurm.hostlist import expand

    hosts = set(expand(nodelist))
    if localhost and "localhost" in hosts:
        hosts.add(os.uname().nodename.split(".")[0])
    return hosts


def on_hosts(r, hosts: set[str]) -> bool:
    """Does the job run on any of these hosts (Slurm's hostset_intersects)?"""
    return bool(set(r.nodes) & hosts)


def in_reservation(recs: list, cfg, name: str) -> list:
    """The jobs whose reservation is the one named (squeue's _filter_job, scancel.c's
    _filter_job_records: the job's resv_name compared whole); their reservations are read first
    (jobs.fill_reservations: one qrstat, a qstat -j only where Grid Engine has any). scancel's
    Filters compare the same, job by job, once Filters.prepare has read them."""
    jobs.fill_reservations(recs, cfg)
    return [r for r in recs if r.extra.get("reservation") == name]


def fill_detail(recs: list, cfg, fields: list) -> None:
    """Read the submit-record detail (jobs.detail) of the records whose shown or sorted fields
    need it, and the group's name where it is shown, before sorting and rendering: the renderer
    reads no file."""
    from ..slurm.render import squeue as view

    if view.shows_group(fields):
        for r in recs:
            r.group = r.group or jobs.group_name(r.gid)
    if view.shows_reservation(fields):
        from .jobs import fill_reservations

        fill_reservations(recs, cfg)
    wanted = view.detail_wanted(fields)
    if wanted is None:
        return
    for r in recs:
        if wanted(r):
            jobs.detail(r, cfg)


# ---------------------------------------------------------------------------------------------
# the order


def sort_records(recs: list, qy: Query, ctx: Ctx, keys: list | None = None, listed: list | None = None) -> list:
    """``recs`` in squeue's order; ``keys``: the -S keys read (sort_keys), read here when None;
    ``listed``: every job of the listing, before -t/-u/... chose ``recs`` (where an array's
    records were created depends on its other tasks)."""
    if not recs:
        return []
    created = created_key(recs, listed)
    if qy.job_ids and len(qy.job_ids) == 1 and qy.job_ids[0][1] is None and not (qy.steps or qy.whole or qy.state_only):
        created = one_job_order(recs, created)
    if qy.sort or qy.start:
        base = sorted(recs, key=created)
        if qy.sort:
            if _start_time_first(ctx):
                base = start_time_order(base)
            from ..slurm.render import fmt

            return fmt.sort_rows(base, sort_keys(qy) if keys is None else keys, ctx)
        return sorted(base, key=lambda r: (r.start_time is None, r.start_time.timestamp() if r.start_time else 0))
    # Slurm's default "P,t,-p" (partition, compact state, priority down); ties keep the job list's
    # order (one sort on both: the same order as the stable sorts one after the other)
    from ..slurm.model import STATE_CODES as codes

    if qy.state_only:  # no partition or priority: by state, ties newest record first (state_only_order)
        return state_only_order(recs, created, listed)
    if _start_time_first(ctx):  # (releases.EQUAL_PRIORITIES) the start-time sort, then P,t,-p (stable)
        base = start_time_order(sorted(recs, key=created))
        return sorted(base, key=lambda r: (r.partition, codes.get(r.state, r.state), -r.priority))
    # 22.05's priority/basic: each job's priority decreases with its submission, an array's tasks
    # share the array's: ties of Grid Engine's priority in job id order. A held job's priority is
    # 0, below every other, so held jobs come last and tie in Slurm too, in the start-time sort's
    # order (latest start first, the rest in the controller's order backwards: 22.05's squeue -r -j
    # 1172,1173,1174 lists the held arrays 1174 1173 1172; its squeue -t PD 132 131 120)
    base = start_time_order(sorted(recs, key=created))

    def basic(r) -> tuple:
        held = r.state == "PENDING" and r.reason in HELD_AT_ZERO
        return (r.partition, codes.get(r.state, r.state), held, -r.priority, 0 if held else r.job_id)

    return sorted(base, key=basic)


HELD_AT_ZERO = ("JobHeldUser", "JobHeldAdmin")  # (Slurm's hold sets a job's priority to 0)


def one_job_order(recs: list, created):
    """The ties' order where squeue names one job (``-j N``): squeue asks the controller about that
    job alone (slurm_load_job), whose answer (pack_one_job) is the job's own record (an array's:
    the pending remainder), then the array's other records as its hash chain holds them, the
    last made first (each is put at the chain's head): the running tasks newest record first (the
    release captures' squeue -j <array>, all three releases: 112_2 before 112_1)."""
    rank = {id(r): i for i, r in enumerate(sorted(recs, key=created))}

    def key(r) -> tuple:
        if r.array_task is not None and r.start_time is not None:
            return (1, -rank[id(r)])
        return (0, rank[id(r)])

    return key


def _start_time_first(ctx: Ctx | None) -> bool:
    from ..slurm import releases

    return (ctx.release if ctx is not None else releases.current()).has(releases.EQUAL_PRIORITIES)


def start_time_order(recs: list) -> list:
    """squeue's sort by start time before its -S keys (squeue/sort.c sort_jobs_by_start_time), of
    ``recs`` in the controller's order: those with a start time latest first (ties keep their
    order), then those without in reverse order (its comparator calls a job without a start time
    the greater of any two, and glibc's merge sort then takes the later one first every time)."""
    started = [r for r in recs if r.start_time is not None]
    started.sort(key=lambda r: r.start_time, reverse=True)  # (stable: equal times keep their order)
    groups: list[list] = []  # the records without a start, each -r's rows of one pending record together
    for r in recs:
        if r.start_time is not None:
            continue
        if (groups and r.array_task is not None and groups[-1][-1].array_task is not None
                and groups[-1][-1].job_id == r.job_id and groups[-1][-1].start_time is None):
            groups[-1].append(r)
        else:
            groups.append([r])
    return started + [r for g in groups[::-1] for r in g]


def state_only_order(recs: list, created, listed: list | None = None) -> list:
    """--only-job-state's order without -S: "P,t,-p" sorts by state alone (no partition or
    priority came), and ties keep the order of the controller's job state reply, which is its job
    list backwards, newest record first (measured on 24.11.5 and 26.05.5). In that list an array's
    first task to start keeps the array's place; each later one is split off at its start
    (job_array_split copies the array's record for the tasks still pending, the copy appended),
    and the pending remainder is the copy made at the last split; when none waits, the last task
    is that copy."""
    from ..slurm.model import STATE_CODES as codes

    every = recs if listed is None else listed
    started: dict[int, list] = {}
    waiting: set[int] = set()
    born: dict[int, tuple] = {}  # array -> its creation (the submission's)
    for r in every:
        if r.array_task is None and r.array_pending is None:
            continue
        if r.array_task is not None and r.start_time is not None:
            started.setdefault(r.job_id, []).append((r.start_time, r.array_task))
        else:
            waiting.add(r.job_id)
        mark = (r.submit_time or r.start_time, 0, r.job_id, -1)
        if mark[0] is not None and (r.job_id not in born or mark < born[r.job_id]):
            born[r.job_id] = mark
    place: dict[tuple, tuple] = {}  # (array, index or None) -> its record's creation
    for job, marks in started.items():
        marks.sort()
        for i, (t, task) in enumerate(marks):
            if i == 0:
                place[(job, task)] = born.get(job) or (t, 0, job, -1)
            elif i == len(marks) - 1 and job not in waiting:
                place[(job, task)] = (marks[i - 1][0], 2, job, task)  # the copy of the previous split
            else:
                place[(job, task)] = (t, 1, job, task)
        if job in waiting:
            place[(job, None)] = (marks[-1][0], 2, job, -1)

    def made(r) -> tuple:  # -r's pending tasks are the remainder's record, printed in index order
        pending = r.array_pending is not None or (r.array_task is not None and r.start_time is None)
        key = place.get((r.job_id, None if pending else r.array_task)) or created(r)
        return (*key[:3], -(r.array_task or 0) if pending else key[3])

    newest_first = sorted(recs, key=made, reverse=True)
    return sorted(newest_first, key=lambda r: codes.get(r.state, r.state))


def created_key(recs: list, listed: list | None = None):
    """A sort key that puts records in the order Slurm's controller lists them, which squeue's sorts keep for ties
    (squeue/sort.c: each key is one list_sort, from the last key to the first, and list_sort is
    glibc's qsort, a stable merge sort on Debian 12's glibc 2.36). slurmctld appends a job's
    record to its job list when it is created (job_mgr.c _create_job_record, list_append) and
    pack_all_jobs walks the list in that order: a job at its submission; an array's first task to
    start keeps the array's place (job_array_split gives the started task the array's record and
    appends a copy for the tasks still pending), each later task is created at its start, the
    last one when none waits is the copy of the previous split, and the pending remainder is the
    copy made at the last split (as state_only_order; measured on 24.11.5 and 26.05.5: the
    captures' squeue -t R puts 320_1 at the array's place, 320_2 after the jobs submitted before
    its start). So: by the time the record was created (submission, or a split), then job id and
    index. The rows -r makes of a pending record's tasks are that record's, in index order.

    A running job's submission time is not in qstat's listing (only its start) and is read only
    where a field needs it. Job ids grow with submission, so a record created at submission was
    created no later than any record of a later id: its time is the earliest known (submission,
    else start) of its own id and every later one. That keeps records created at submission in id
    order whatever is known of their times, and places a split task after every job submitted
    before the earliest time known of the jobs that follow."""
    every = recs if listed is None else listed
    waiting: set[int] = set()
    started: dict[int, list] = {}  # array -> (start, index) of its started tasks, in the order they started
    known: dict[int, object] = {}  # job id -> the earliest time known of its record created at submission
    for r in every:
        if r.array_pending is not None or (r.array_task is not None and r.start_time is None and r.state == "PENDING"):
            waiting.add(r.job_id)
        elif r.array_task is not None and r.start_time is not None:
            started.setdefault(r.job_id, []).append((r.start_time, r.array_task))
    for marks in started.values():
        marks.sort()
    for r in every:
        marks = started.get(r.job_id)
        if marks and (r.start_time is None or (r.start_time, r.array_task) != marks[0]):
            continue  # a split task or the pending remainder: created at a split
        t = r.submit_time or r.start_time
        if t is not None and (r.job_id not in known or t < known[r.job_id]):
            known[r.job_id] = t
    created_at: dict[int, object] = {}
    bound = None
    for job in sorted(known, reverse=True):
        t = known[job]
        bound = t if bound is None or t < bound else bound
        created_at[job] = bound
    from datetime import datetime  # (loaded already when a record has a time)

    epoch = datetime.min  # naive local datetimes throughout, as qstat's and the records' times are

    def created(r) -> tuple:
        task = r.array_task
        base = (created_at.get(r.job_id) or r.submit_time or r.start_time or epoch, 0, r.job_id)
        marks = started.get(r.job_id)
        if not marks:
            return (*base, -1 if task is None else task)
        start = r.start_time
        if start is None or task is None:  # the pending remainder: the copy made at the last split
            return (marks[-1][0], 2, r.job_id, -1 if task is None else task)
        if (start, task) == marks[0]:
            return (*base, task)  # the first to start: the array's own record
        if (start, task) == marks[-1] and r.job_id not in waiting:
            return (marks[-2][0], 2, r.job_id, task)  # the last, none waiting: the previous split's copy
        return (start, 1, r.job_id, task)  # split from the array when it started

    return created
