"""sacct's collection: every row the selection asks for, from Grid Engine's accounting file, the
shim's records and events, and the live queue, in Slurm's order.

The steps, in the order ``collect`` takes them:

1. ``read_accounting``: Grid Engine's accounting file (``gridengine.qacct``), filtered while it is
   read (``-f FILE`` or ``$SLURM_SHIM_ACCOUNTING`` name another file; ``qacct`` answers when the
   file cannot be read here);
2. ``group_records``: the records per job or array task, each with sbatch's submit record (Slurm
   name, partition, account, time limit, memory, array indices), earlier runs first;
3. ``live_jobs``: the live queue (one qstat listing, ``jobs.list_jobs``), asked only when the
   selection can contain a pending, running or suspended job (``need_live``): not for -j of jobs
   that have ended. A Grid Engine array that sbatch did not submit, or an id nothing here knows,
   is first asked about alone (``qstat -j``). The qstat is started before the file is read
   (``start_early``, the backend's one early-qstat mechanism) and stopped if its answer is not
   needed;
4. the rows: ``rows_of_records`` (accounting records, with the job wrapper's end events and
   scancel's cancel events), ``rows_of_live`` (the live jobs), ``rows_of_events`` (jobs only the
   shim's events know: cancelled while pending, or ended before Grid Engine wrote the record),
   with array tasks that never ran folded into one row as Slurm keeps them (``fold_never_ran``).

Output is made job by job as the rows are complete (only text is kept), then sorted by job id.
"""

from __future__ import annotations

import os
import sys

from ...gridengine import names as jobnames
from ... import siteconf
from ...gridengine import qacct
from ...errors import ShimError
from .events import Events
from .query import LIVE_STATES, error, match, step_selected
from .rows import Lookups, _slurm_task, derived_exit, fresh_submit, rows_from_events, rows_from_live, rows_from_record, step_rows

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ...store.records import Submitted
    from ...slurm.render.sacct import Row
    from .query import Selection


def collect(qy: Selection, *, accounting: str | None = None, cfg: Any = None, backend: Any = None,
            emit: Any = None) -> list:
    """Every matching job with its step rows, in job order: ``(job, steps)`` pairs (``job`` None when
    only steps were asked for). With ``emit``, each pair is handed to ``emit`` as soon as it is
    complete and its results are returned instead, in the same order (the rows themselves are not
    kept). ``backend`` is the Grid Engine to ask (``backends.get(cfg)`` unless given)."""
    cfg = cfg if cfg is not None else siteconf.get()
    ctx = Lookups(cfg, qy.now)
    path = accounting or qacct.accounting_path(cfg)
    job_ids = {s.job for s in qy.jobs} if qy.jobs is not None else None
    # the shim's end and cancel events (one directory listing), and the qstat this will likely
    # need, started now to run while the file is read (-j looks at the events first)
    # (a job shown ended at or after the window's start: its end or cancel event was written since
    # then, give or take the writers' clocks; its older events are read by its id, events.py)
    from ...store.state import SKEW

    since = (qy.start - SKEW) if (qy.window and qy.start) else None
    uids = _uids_of(qy.users)
    # -j: the caller's and root's events first, others' as their owners become known
    ev = Events(cfg, job_ids, since, uids, first=(ctx.me, 0)) if job_ids is not None else None
    source = _Source(cfg, backend)
    early = start_early(qy, ctx, job_ids, source, ev)
    try:
        if ev is None:
            ev = Events(cfg, job_ids, since, uids)
        # a listing reads most users' records: each directory is listed once instead
        ctx.eager = job_ids is None
        records = read_accounting(qy, path, cfg, job_ids, source)
        by_key = group_records(records, ctx)
        del records
        live = live_jobs(qy, ctx, by_key, ev, source, early)
        live_keys = index_live(live, job_ids, ev, ctx)
        del live
        out: list = []
        finish = _keeper(qy, emit, out)
        seen = rows_of_records(qy, ctx, by_key, live_keys, ev, finish)
        del by_key
        pending_tasks = rows_of_live(ctx, live_keys, seen, finish, array=qy.array, ev=ev)
        never_ran = rows_of_events(qy, ctx, job_ids, ev, seen, pending_tasks, finish)
        fold_never_ran(never_ran, finish, array=qy.array)
    finally:
        if early is not None:
            early.close()
    if emit is None:
        out.sort(key=_order)
        return out
    out.sort(key=_first)
    return [text for _key, text in out]


class _Source:
    """The Grid Engine to ask, made at first use (a question the file and the shim's records
    answer asks nothing)."""

    __slots__ = ("cfg", "given")

    def __init__(self, cfg: Any, backend: Any):
        self.cfg, self.given = cfg, backend

    def get(self) -> Any:
        if self.given is None:
            from ...gridengine import backends

            self.given = backends.get(self.cfg)
        return self.given


def _user_name(uid: int) -> str:
    from ...store.records import user_name

    return user_name(uid)


def _uids_of(users: set[str] | None) -> set[int] | None:
    """Whose directories can hold events of these users' jobs: theirs and root's (None: all)."""
    if users is None:
        return None
    from ...store import state

    return {u for u in map(state.uid_of, users) if u is not None} | {0}


# ---------------------------------------------------------------------------------------------
# 1. Grid Engine's accounting file


def read_accounting(qy: Selection, path: str, cfg: Any, job_ids: set[int] | None, source: _Source
                    ) -> list[qacct.Record]:
    """The accounting records the selection can use, filtered while the file is read: the -j ids,
    the users, the names (as given and as sbatch encodes them for Grid Engine), and the window
    (Slurm's sacct selects by the window's end only, and by its start too when a state is asked:
    what happened inside the window)."""
    ge_names = None
    if qy.names is not None:
        ge_names = {jobnames.encode(n) for n in qy.names} | set(qy.names)
    not_before = qy.start if (qy.window and not qy.states and qy.start) else None
    if qy.window and qy.states and qy.start:
        # a state filter looks at what happened inside the window: nothing that ended before it
        not_before = qy.start
    return _read_accounting(path, cfg, job_ids, qy.users, ge_names, not_before,
                            qy.end if qy.window else None, source)


def _read_accounting(path: str, cfg: Any, job_ids: set[int] | None, users: set[str] | None,
                     ge_names: set[str] | None, not_before: int | None, not_after: int | None,
                     source: _Source) -> list[qacct.Record]:
    # the colon file, and OCS 9's accounting.jsonl beside it (its default; a cell that switched
    # has both, each with the jobs of its time)
    out: list[qacct.Record] = []
    found = False
    for p in (path, qacct.jsonl_path(path)):
        try:
            f = open(p, "rb")
        except FileNotFoundError:
            continue
        except (PermissionError, IsADirectoryError):
            return _qacct_fallback(job_ids, users, source)
        found = True
        with f:  # read block by block, never whole
            out += qacct.scan(f, jobs=job_ids, owners=users, ge_names=ge_names, not_before=not_before,
                              not_after=not_after)
    if not found:
        if os.environ.get(qacct.ENV):
            raise error(f"{path}: no such file") from None
        return _qacct_fallback(job_ids, users, source)
    return out


def _qacct_fallback(job_ids: set[int] | None, users: set[str] | None, source: _Source) -> list[qacct.Record]:
    """The accounting file is not readable here: ask qacct (slower, same data), once per -j id, or
    for the one user, or for everything."""
    out: list[qacct.Record] = []
    if job_ids is not None:
        calls = [qacct.qacct_args(j) for j in sorted(job_ids)]
    elif users is not None and len(users) == 1:
        calls = [qacct.qacct_args(owner=next(iter(users)))]
    else:
        calls = [qacct.qacct_args()]
    b = source.get()
    for args in calls:
        try:
            res = b.accounting(args, timeout=120)
        except ShimError:
            return out
        if res.returncode == 0:
            out.extend(qacct.parse_qacct(res.stdout))
    return out


# ---------------------------------------------------------------------------------------------
# 2. the records per job or task, with sbatch's submit records


def group_records(records: list[qacct.Record], ctx: Lookups) -> dict[tuple[int, int | None], list[qacct.Record]]:
    """The records per (job, Slurm array index), each list in the order the records were written
    (a requeued job has one record per run, the last is the latest). A Grid Engine task number
    becomes sbatch's array index through its submit record, unless that record is of an earlier
    job with the same number. Notes each job's owner as Grid Engine reported it."""
    by_key: dict[tuple[int, int | None], list[qacct.Record]] = {}
    submit = ctx.submit
    owners = ctx.owners
    for r in records:
        owners[r.job] = r.owner
        s = submit(r.job, r.owner, r.submit or None)
        if s is not None:
            s = fresh_submit(s, r)
        t = r.task
        key = (r.job, (t or None) if s is None else _slurm_task(t, s))
        same = by_key.get(key)
        if same is None:
            by_key[key] = [r]
        else:
            same.append(r)
    for recs in by_key.values():
        if len(recs) > 1:
            recs.sort(key=_written)
    return by_key


def _written(rec: qacct.Record) -> int:
    return rec.end or rec.submit


def _first(item: tuple) -> Any:
    return item[0]


_NEVER = float("inf")


def _order(item: tuple[Row | None, list[Row]]) -> tuple:
    """Output order: job id, array index (a pending array's first), run (-D), end."""
    job, steps = item
    r = job if job is not None else steps[0]
    t = r.task
    if t is None:
        indices = r.extra.get("indices")
        t = min(indices) if indices else -1
    return (r.job_id, t, r.order or 0, r.end or _NEVER)


# ---------------------------------------------------------------------------------------------
# 3. the live queue


# Grid Engine's failed codes after which the same job can run again (rescheduled): its accounting
# record is not its end.
_RUNS_AGAIN = qacct.RESCHEDULED_CODES


def need_live(qy: Selection, by_key: dict, ev: Events, ctx: Lookups) -> bool | set[int]:
    """Whether a qstat call can add anything: not when the state filter asks only for ended states,
    nor when every requested job has ended.

    True: list the queue. A set: the ids (of jobs that sbatch did not submit) that only Grid Engine
    can tell about -- an array whose tasks in the file may not be all of them, a job the file and the
    shim's records do not know; asking qstat about them alone says whether to list the queue.
    ``by_key``'s lists must be in the order the records were written (the last is the latest)."""
    if qy.states is not None and not (qy.states & LIVE_STATES):
        return False
    if qy.jobs is None:
        return True
    ask: set[int] = set()
    of_job: dict[int, dict[tuple[int, int | None], list[qacct.Record]]] = {}
    for k, recs in by_key.items():
        of_job.setdefault(k[0], {})[k] = recs
    for job_id in sorted({s.job for s in qy.jobs}):
        keys = of_job.get(job_id, {})
        last = max((recs[-1] for recs in keys.values()), key=_written, default=None)
        owner = last.owner if last is not None else ctx.owner(job_id)
        s = ctx.submit(job_id, owner, (last.submit or None) if last is not None else None)
        if s is not None:
            # sbatch's record names every task; records of an older job with the same number do not count
            done = {k for k, recs in keys.items() if fresh_submit(s, recs[-1]) is not None
                    and recs[-1].failed not in _RUNS_AGAIN}
            tasks_needed: set[int | None] = set(s.array) if s.array else {None}
            for t in tasks_needed:
                if (job_id, t) in done:
                    continue
                if ev.get(job_id, t, "end", owner) is not None:
                    continue
                c = ev.get(job_id, t, "cancel", owner)
                if c is not None and c.get("was") in ("PENDING", None):
                    continue
                return True
            continue
        if not keys or any(k[1] is not None for k in keys):
            ask.add(job_id)  # unknown here, or a Grid Engine array whose size only qstat knows
            continue
        if any(recs[-1].failed in _RUNS_AGAIN for recs in keys.values()):
            ask.add(job_id)
    return ask or False


_PROBE_MAX = 500  # more ids than this: list the queue instead of naming them all to qstat -j


class Early:
    """The qstat started before the accounting file is read (a ``gridengine.qstat.Query``): the
    queue listing, or, with ``probe``, ``qstat -j`` about those ids (do they still exist?)."""

    __slots__ = ("query", "probe")

    def __init__(self, query: Any, probe: set[int] | None = None):
        self.query, self.probe = query, probe

    def close(self) -> None:
        """Stop it if it still runs (its answer is not needed)."""
        self.query.close()


def start_early(qy: Selection, ctx: Lookups, job_ids: set[int] | None, source: _Source,
                ev: Events | None) -> Early | None:
    """Start the qstat that the live part will likely need, to run while the file is read: the
    listing of the queue (a time window; or -j of an sbatch job the job wrapper has not yet seen
    end), else for -j ``qstat -j`` about the ids sbatch did not submit. Whether it is needed is
    decided afterwards (need_live); one not needed is stopped. Nothing when only ended states are
    asked for, nor when the backend's calls do not run alongside (a recorded one)."""
    if qy.states is not None and not (qy.states & LIVE_STATES):
        return None
    if not source.get().concurrent:
        return None
    if job_ids is None or any(_running_maybe(ctx.submit(j), j, ev, ctx.owner(j))  # type: ignore[arg-type]
                              for j in job_ids):
        return Early(source.get().list_jobs())
    unsure = sorted(j for j in job_ids if ctx.submit(j) is None)
    if not unsure or len(unsure) > _PROBE_MAX:
        return None
    return Early(source.get().find_jobs(unsure), probe=set(unsure))


def _running_maybe(s: Submitted | None, job_id: int, ev: Events, owner: Any) -> bool:
    """An sbatch job (of ``owner``) with a task that has neither ended nor been cancelled, as far
    as the shim's events tell: most likely still pending or running."""
    if s is None:
        return False
    for t in (set(s.array) if s.array else {None}):
        if ev.get(job_id, t, "end", owner) is None and ev.get(job_id, t, "cancel", owner) is None:
            return True
    return False


def live_jobs(qy: Selection, ctx: Lookups, by_key: dict, ev: Events, source: _Source, early: Early | None) -> list:
    """The live jobs that can add rows (``jobs.JobRecord``s): none when need_live says nothing live
    can match; when only some ids are in doubt and ``qstat -j`` was asked about them, the listing
    only if Grid Engine still has one of them."""
    need = need_live(qy, by_key, ev, ctx)
    if not need:
        return []
    if need is not True and early is not None and early.probe is not None and need <= early.probe:
        try:
            found = early.query.found()
        except ShimError as e:  # no answer in time: the listing would not answer either
            _warn(e)
            return []
        if found is not None and not (found & need):
            return []
        return _listing(ctx.cfg, source, None)
    return _listing(ctx.cfg, source, early.query if early is not None and early.probe is None else None)


def _listing(cfg: Any, source: _Source, started: Any) -> list:
    """The queue, as ``jobs.list_jobs`` reads it (from the listing ``started`` earlier, if one was);
    when qmaster does not answer, a warning and nothing: accounting still answers."""
    from .. import jobs

    try:
        return jobs.list_jobs(cfg, backend=source.get(), started=started).records
    except ShimError as e:
        _warn(e)
        return []


def _warn(e: ShimError) -> None:
    for line in e.lines:
        print(line, file=sys.stderr)


def index_live(live: list, job_ids: set[int] | None, ev: Events, ctx: Lookups) -> dict:
    """The live jobs per (job, task), a pending array's not yet split tasks under (job,
    ("pending",)); a job whose script the job wrapper has seen end is left out (Grid Engine is
    still cleaning up: the end event tells). Notes each job's owner."""
    owners = ctx.owners
    live_keys: dict[tuple[int, int | None], Any] = {}
    for lr in live:
        if job_ids is not None and lr.job_id not in job_ids:
            continue
        owners.setdefault(lr.job_id, lr.user)
        if lr.array_pending is None and lr.state != "PENDING":
            end_ev = ev.get(lr.job_id, lr.array_task, "end", lr.user, lr.extra.get("submit_ts"))
            started = lr.start_time.timestamp() if lr.start_time else 0
            if end_ev is not None and float(end_ev.get("t") or 0) >= started - 1:
                continue  # the script has ended (Grid Engine is still cleaning up): the end event tells
        if lr.array_pending is not None:
            live_keys[(lr.job_id, ("pending",))] = lr  # type: ignore[index]
        else:
            live_keys[(lr.job_id, lr.array_task)] = lr
    return live_keys


# ---------------------------------------------------------------------------------------------
# 4. the rows


def _keeper(qy: Selection, emit: Any, out: list) -> Any:
    """``finish(job, steps)``: keep a job that matches, with the steps asked for (Slurm's sacct
    shows only the steps named when -j names steps of a job, and neither with -X), in ``out`` (as
    ``(order, emit(item))`` with ``emit``)."""
    from ...slurm import releases

    add = out.append
    no_steps = qy.no_steps
    step_jobs = {s.job for s in qy.jobs if s.step} if qy.jobs is not None else set()
    # ExitCode of 128 or more less 128, as 22.05's and 24.11's sacct print it (releases.SACCT_EXIT_AS_IS)
    wrap = not releases.current().has(releases.SACCT_EXIT_AS_IS)
    expand = qy.expand  # --expand-patterns: StdOut, StdErr, StdIn expanded (render.sacct.expand_path)

    def finish(job: Row, steps: list[Row]) -> None:
        if not match(job, qy):
            return
        if wrap:
            for r in (job, *steps):
                if (r.exit or 0) >= 128:
                    r.exit_wrap = True
        if expand:
            for r in (job, *steps):
                r.expand = True
        if no_steps:
            shown_steps: list[Row] = []
        elif qy.jobs is None:
            shown_steps = steps  # a list of its own
        else:
            shown_steps = [st for st in steps if step_selected(st, qy.sels(st.job_id)) is not False]
        item: tuple[Row | None, list[Row]] = (job, shown_steps)
        if job.job_id in step_jobs:
            sels = qy.sels(job.job_id)
            if all(s.step for s in sels if s.task is None or s.task == job.task):
                if not shown_steps:
                    return
                item = (None, shown_steps)
        if emit is None:
            add(item)
        else:
            add((_order(item), emit(item)))

    return finish


def rows_of_records(qy: Selection, ctx: Lookups, by_key: dict, live_keys: dict, ev: Events, finish: Any
                    ) -> set[tuple[int, int | None]]:
    """The rows of the accounting records: a job's last record is its end, earlier runs of a
    requeued job are REQUEUED rows shown with -D (Slurm's duplicates). Not the end when Grid Engine
    still lists the job (requeued and queued again: the live row tells, unless it is an Eqw after
    a failed start), nor when it was cancelled while pending after its last run (the events tell).
    Returns the keys whose end has been told."""
    seen: set[tuple[int, int | None]] = set()
    seen_requeued: set[tuple[int, int | None]] = set()
    steps_too = not qy.no_steps
    submit = ctx.submit
    for key, recs in by_key.items():
        final = recs[-1]
        s = submit(key[0], final.owner, final.submit or None)
        if s is not None:
            s = fresh_submit(s, final)
        lr = live_keys.get(key) if live_keys else None
        if lr is not None and "E" in (lr.ge_state or "") and lr.state == "PENDING":
            live_keys.pop(key)  # Eqw after a failed start: the accounting record tells what happened
            lr = None
        if lr is not None:
            final = None
        last = recs[-1]
        c = ev.get(key[0], key[1], "cancel", last.owner, last.submit or None) if ev.knows(key[0], last.owner) else None
        if final is not None and c is not None and c.get("was") == "PENDING" and float(c.get("t") or 0) > (
                final.end or final.submit) + 1:
            final = None  # requeued, then cancelled while pending again: the events tell the end
            seen_requeued.add(key)
        for i, rec in enumerate(recs):
            earlier = rec is not final
            if earlier and not qy.duplicates:
                continue
            job, batch = rows_from_record(ctx, rec, s, ev, requeued=earlier, order=i, steps=steps_too)
            finish(job, with_steps(ctx, ev, job, batch, rec.owner, steps_too))
        if key not in seen_requeued:
            seen.add(key)
    return seen


def with_steps(ctx: Lookups, ev: Events | None, job: Row, batch: Row | None, owner: Any, steps: bool) -> list[Row]:
    """The job's step rows: its ``.batch`` (when there is one), then its srun steps from their end
    events in the owner's records (Events.steps: the job's id shard, listed with its other
    events), which also give the job its DerivedExitCode (rows.derived_exit); ``steps`` False
    (-X): the DerivedExitCode alone."""
    out = [batch] if batch else []
    if ev is None or not ev.knows(job.job_id, owner):
        return out
    ends = ev.steps(job.job_id, job.task, owner, job.submit or None)
    if ends:
        job.derived = derived_exit(ends)
        if steps:
            out += step_rows(ctx, job, ends)
    return out


def rows_of_live(ctx: Lookups, live_keys: dict, seen: set, finish: Any, *, array: bool = False,
                 ev: Events | None = None) -> dict[int, set[int]]:
    """The rows of the live jobs (a pending array's not yet split tasks one row, as squeue and
    Slurm's sacct show them; with --array, 24.11's, a row each). Returns those pending tasks per job."""
    pending_tasks: dict[int, set[int]] = {}
    for key, lr in live_keys.items():
        job, batch = rows_from_live(ctx, lr)
        if key[1] == ("pending",):
            job.extra["indices"] = lr.extra.get("pending_indices") or []
            pending_tasks.setdefault(key[0], set()).update(lr.extra.get("pending_indices") or ())
            if array and job.extra["indices"]:
                for task in split_tasks(job):
                    finish(task, [])
                seen.add(key)
                continue
        finish(job, with_steps(ctx, ev, job, batch, lr.user, True))
        seen.add(key)
    return pending_tasks


def rows_of_events(qy: Selection, ctx: Lookups, job_ids: set[int] | None, ev: Events, seen: set,
                   pending_tasks: dict[int, set[int]], finish: Any) -> dict[int, list[tuple[Row, list[Row]]]]:
    """The rows of jobs with events but without a Grid Engine record or live job: cancelled while
    pending, or the record is not there yet. Whose job it is: Grid Engine's owner where it knows
    the job, else whoever's events speak for it (records.candidates). Array tasks cancelled
    before they ran are returned per job, for fold_never_ran."""
    owners = ctx.owners
    never_ran: dict[int, list[tuple[Row, list[Row]]]] = {}
    if job_ids is not None:
        from ...store import state

        ev.scan({u for u in map(state.uid_of, {owners[j] for j in job_ids if j in owners}) if u is not None})
        if not job_ids <= {k[0] for k in seen}:
            ev.complete()  # a job no accounting record or live job names an owner for: anyone's
    beyond = _beyond_bound(ev, {k[0] for k in seen} | set(owners))
    for job_id in sorted(ev.index):
        if (job_ids is not None and job_id not in job_ids) or job_id in beyond:
            continue
        known = owners.get(job_id)
        cands: list[Any] = [known] if known else ev.owners(job_id, ctx.me)
        for owner in cands:
            name = owner if isinstance(owner, str) else _user_name(owner)
            if qy.users is not None and name not in qy.users:
                continue  # none of its rows could match
            tasks = ev.tasks(job_id, owner)
            if any(t is not None for t in tasks):
                tasks.discard(None)
            todo = [t for t in tasks if (job_id, t) not in seen and t not in pending_tasks.get(job_id, ())]
            if not todo:
                continue
            s = ctx.submit(job_id, owner)
            made_any = False
            for t in sorted(todo, key=lambda x: -1 if x is None else x):
                made = rows_from_events(ctx, job_id, t, s, ev, name)
                if made is None:
                    continue
                made_any = True
                job, batch = made
                if t is not None and batch is None and job.state == "CANCELLED":
                    never_ran.setdefault(job_id, []).append((job, []))
                else:
                    finish(job, with_steps(ctx, ev, job, batch, name, True))
            if made_any:
                break
    return never_ran


def _beyond_bound(ev: Events, known: set[int]) -> set[int]:
    """The jobs with events only (no Grid Engine record, no live job: ``known`` are the others)
    that only other users' directories hold, beyond state.ENDED_MAX of each such user, the
    highest ids kept: what one user's records add to anyone else's sacct is bounded (F-26).
    Nothing is read here."""
    from ...store import state

    count: dict[int, int] = {}
    beyond: set[int] = set()
    for job_id in sorted(ev.index, reverse=True):
        if job_id in known:
            continue
        uids = {u for by in ev.index[job_id].values() for u in by}
        if not uids or not all(map(state.bounded, uids)):
            continue
        over = True
        for u in uids:
            count[u] = count.get(u, 0) + 1
            over = over and count[u] > state.ENDED_MAX
        if over:
            beyond.add(job_id)
    return beyond


def split_tasks(job: Row) -> list[Row]:
    """A pending array's one row as a row per task (sacct --array, 24.11 and 26.05: ``N_1``,
    ``N_2``... where ``N_[1-4]`` was)."""
    from ...slurm.render.sacct import Row

    out = []
    for i in job.extra.get("indices") or ():
        d = dict(job.__dict__)
        d.update(task=i, array_text=None, extra={**job.extra, "indices": [i]})
        out.append(Row(**d))
    return out


def fold_never_ran(never_ran: dict[int, list[tuple[Row, list[Row]]]], finish: Any, *, array: bool = False) -> None:
    """Array tasks cancelled before they ran stay one row, ``<job>_[<indices>[%<throttle>]]``, as
    Slurm keeps an array's record until a task starts (and as squeue shows them:
    jobs.pending_text); with --array (24.11's), a row each."""
    for items in never_ran.values():
        if len(items) == 1 or array:
            for item in items:
                finish(*item)
            continue
        from ..jobs import pending_text

        first = min(items, key=lambda x: x[0].task)[0]
        idx = sorted(x[0].task for x in items)
        first.array_text = f"[{pending_text(idx, first.extra.get('throttle'))}]"
        first.extra["indices"] = idx
        first.task = None
        finish(first, [])
