"""scancel's selection: which jobs and array tasks a ``scancel`` acts on.

The ids given (``Target``: a whole job, some array tasks, a step) and the filters (``Filters``:
``-t -u -n -p -A -q -w -R --wckey``, ``--me`` folded into ``-u``) are matched against the job list
squeue and scontrol share (``jobs.list_jobs``): ``select`` makes one ``Plan`` per job to act on, and
says for each id given why it names none (Slurm's "Invalid job id specified" or "Job/step
already completing or completed"). ``refresh`` reads the plans' jobs again (scancel's retries of
a job in a transitional state). ``cli/scancel.py`` parses the command line, acts on the plans
through the backend and prints Slurm's messages.
"""

from __future__ import annotations

import signal as _signal

from . import jobs
from .plain import factory, record  # dataclasses costs ~10 ms of scancel's start

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (backends/__init__.py)
if TYPE_CHECKING:
    from .model import JobRecord

INVALID = "Invalid job id specified"
ENDED = "Job/step already completing or completed"


@record
class Target:
    """One job id as given: a whole job, some array tasks (Slurm indices), or a step."""

    text: str
    job_id: int
    tasks: list[int] | None = None  # None: the whole job
    step: str | None = None


@record
class Plan:
    """What to do to one job: the records hit and the Grid Engine ids to name."""

    job_id: int
    label: str  # Slurm id as shown in messages
    records: list[JobRecord] = factory(list)
    tasks: list[int] | None = None  # Slurm indices, None: the whole job
    ge_ids: list[str] = factory(list)
    owner: str = ""


@record
class Picked:
    """What one id given came to: its label in messages, and why it names no job to act on (None
    when it does, when a filter left its job out, or for a step)."""

    target: Target
    label: str = ""
    why: str | None = None


@record
class Selection:
    plans: list[Plan] = factory(list)
    picked: list[Picked] = factory(list)  # one per id given, in order


class Filters:
    """scancel's filters as given (None: not given): states and users resolved (Slurm state names,
    user names), the others the option's text (comma lists)."""

    def __init__(self, states: set[str] | None = None, users: set[str] | None = None, name: str | None = None,
                 partition: str | None = None, account: str | None = None, qos: str | None = None,
                 nodelist: str | None = None, reservation: str | None = None, wckey: str | None = None):
        self.states, self.users, self.name, self.partition = states, users, name, partition
        self.account, self.qos, self.nodelist, self.reservation, self.wckey = account, qos, nodelist, reservation, wckey
        self._nodes: set[str] | None = None

    @property
    def given(self) -> bool:
        return any(x is not None for x in (self.states, self.users, self.name, self.partition, self.account,
                                           self.qos, self.nodelist, self.reservation, self.wckey))

    def keep(self, r: JobRecord, cfg) -> bool:
        if self.states is not None and r.state not in self.states:
            return False
        if self.users is not None and r.user not in self.users:
            return False
        if self.name and r.name not in self.name.split(","):
            return False
        if self.partition and r.partition not in self.partition.split(","):
            return False
        if self.account and (jobs.detail(r, cfg).account or "").lower() not in self.account.lower().split(","):
            return False
        if self.qos and (jobs.detail(r, cfg).qos or "normal").lower() not in self.qos.lower().split(","):
            return False
        if self.nodelist:
            if self._nodes is None:
                from .hostlist import expand

                self._nodes = set(expand(self.nodelist))
            if not set(r.nodes) & self._nodes:
                return False
        return not (self.reservation or self.wckey)  # Grid Engine jobs have neither


def active(rs: list[JobRecord]) -> list[JobRecord]:
    """The records of jobs (tasks) that have not ended."""
    return [r for r in rs if not r.extra.get("ended") and r.state in jobs.ACTIVE_STATES]


def of_tasks(rs: list[JobRecord], tasks: list[int]) -> list[JobRecord]:
    """The records holding any of these array tasks: a task's own, or the array's pending rest."""
    return [r for r in rs if (r.array_task is not None and r.array_task in tasks) or
            (r.array_pending is not None and set(r.extra.get("pending_indices", ())) & set(tasks))]


def _by_job(records: list[JobRecord]) -> dict[int, list[JobRecord]]:
    by_job: dict[int, list[JobRecord]] = {}
    for r in records:
        by_job.setdefault(r.job_id, []).append(r)
    return by_job


def select(cfg, targets: list[Target], filters: Filters, *, tell_ended: bool) -> Selection:
    """The plans of a scancel: with ids, one per id that names an active job (its records the
    filters keep; some array tasks only where the id names them); without, one per job with a
    record the filters keep, just the tasks kept where they are some of an array's.
    ``tell_ended``: an ended job must be told from an unknown one (only then are the ended jobs'
    records read, of the ids given only: issue 19)."""
    jl = jobs.list_jobs(cfg, ended=bool(targets) and tell_ended,
                        only={t.job_id for t in targets} if targets else None)
    by_job = _by_job(jl.records)
    out = Selection()
    if targets:
        for t in targets:
            if t.step is not None:  # Grid Engine has no job steps: nothing smaller than the job to act on
                out.picked.append(Picked(t))
                continue
            rs = by_job.get(t.job_id, [])
            live = [r for r in active(rs) if filters.keep(r, cfg)]
            label = t.text if t.tasks is None or len(t.tasks) != 1 or t.text.isdigit() else f"{t.job_id}_{t.tasks[0]}"
            picked = Picked(t, label)
            out.picked.append(picked)
            if t.tasks is not None:
                live = of_tasks(live, t.tasks)
            if not live:
                if not (filters.given and rs and active(rs)):  # (filtered out: not an error in Slurm)
                    picked.why = ENDED if t.job_id in jl.known and rs else INVALID
                continue
            out.plans.append(Plan(t.job_id, label, live, t.tasks, owner=live[0].user))
        return out
    seen: dict[int, Plan] = {}
    for r in jl.records:
        if r.extra.get("ended") or r.state not in jobs.ACTIVE_STATES or not filters.keep(r, cfg):
            continue
        p = seen.get(r.job_id)
        if p is None:
            p = seen[r.job_id] = Plan(r.job_id, str(r.job_id), [], None, owner=r.user)
            out.plans.append(p)
        p.records.append(r)
    # a filter that hits only some tasks of an array cancels just those tasks
    for p in out.plans:
        whole = by_job.get(p.job_id, [])
        if len(active(whole)) != len(p.records) and any(r.is_array for r in p.records):
            idx: list[int] = []
            for r in p.records:
                idx.extend([r.array_task] if r.array_task is not None else r.extra.get("pending_indices", []))
            p.tasks = idx
    return out


def refresh(cfg, plans: list[Plan]) -> list[tuple[Plan, str]]:
    """The plans' jobs as Grid Engine shows them now (one listing, of these jobs only: issue 19):
    each plan's records replaced by its active ones; the plans of jobs that are gone (no records
    left), each with Slurm's reason."""
    jl = jobs.list_jobs(cfg, ended=True, only={p.job_id for p in plans})
    by_job = _by_job(jl.records)
    gone = []
    for p in plans:
        rs = active(by_job.get(p.job_id, []))
        if p.tasks is not None:
            rs = of_tasks(rs, p.tasks)
        if not rs:
            gone.append((p, ENDED if p.job_id in jl.known else INVALID))
        p.records = rs
    return gone


# ---------------------------------------------------------------------------------------------
# the shim's events of what scancel did (readers: squeue, sacct, scontrol; records.py's rules)

STOP_EVENTS = {_signal.SIGSTOP: "stop", _signal.SIGCONT: "cont"}  # the signals that set/clear JOB_STOPPED


def record_cancels(cfg, p: Plan, user: str, uid: int) -> bool:
    """One "cancel" event per job, or per array task (Slurm index), with the state it was in, in
    the caller's own directory (root's for an admin: readers take it as root's word). False when
    one could not be written."""
    from . import state
    from .records import action

    wanted = set(p.tasks) if p.tasks is not None else None
    ok = True
    for r in p.records:
        base = action(uid, user, r.user, r.extra.get("submit_ts"))  # (sub ties it to this Grid Engine job)
        base.update({"was": r.state, "name": r.name, "partition": r.partition, "cpus": r.num_cpus})
        if r.nodes:
            base["node"] = r.nodes[0]
        if r.start_time is not None:
            base["start"] = r.start_time.timestamp()
        if r.array_task is not None:
            if wanted is None or r.array_task in wanted:
                ok = state.record_event(cfg, p.job_id, r.array_task, "cancel", base) and ok
        elif r.array_pending is not None:
            for i in r.extra.get("pending_indices", ()):
                if wanted is None or i in wanted:
                    ok = state.record_event(cfg, p.job_id, i, "cancel", base) and ok
        else:
            ok = state.record_event(cfg, p.job_id, None, "cancel", base) and ok
    return ok


def record_suspends(cfg, p: Plan, user: str, uid: int) -> bool:
    """A "suspend" event per job or named array task (Grid Engine suspended the whole job: qmod -sj)."""
    from . import state
    from .records import action

    ev = action(uid, user, p.owner, p.records[0].extra.get("submit_ts") if p.records else None)
    ok = True
    for t in (p.tasks or [None]):
        ok = state.record_event(cfg, p.job_id, t, "suspend", ev) and ok
    return ok


def record_stops(cfg, p: Plan, running: list, sig: int, user: str, uid: int) -> bool:
    """A "stop" or "cont" event for each running job (array task) a STOP or CONT was sent to, for
    squeue's and scontrol's STOPPED (slurmctld sets JOB_STOPPED when slurmd delivered a STOP, and
    clears it at CONT: agent.c). Like a cancel event, it is written in the caller's own directory:
    the owner's, or root's naming the owner (the only callers signal_plans lets through), stamped
    with Grid Engine's submission and start times of the run it stopped. Any other signal: no event.
    False when one could not be written."""
    from . import state
    from .records import action

    kind = STOP_EVENTS.get(sig)
    if kind is None:
        return True
    ok = True
    for r in running:
        ev = action(uid, user, p.owner, r.extra.get("submit_ts"))
        if r.start_time is not None:
            ev["start"] = r.start_time.timestamp()
        ok = state.record_event(cfg, p.job_id, r.array_task, kind, ev) and ok
    return ok
