"""scancel's selection and delivery: which jobs and array tasks a ``scancel`` acts on, and how.

The ids given (``Target``: a whole job, some array tasks, a step) and the filters (``Filters``:
``-t -u -n -p -A -q -w -R --wckey``, one value each, ``--me`` a ``-u``) are matched against the job list
squeue and scontrol share (``jobs.list_jobs``): ``select`` makes one ``Plan`` per job to act on, and
says for each id given why it names none (Slurm's "Invalid job id specified" or "Job/step
already completing or completed"). ``refresh`` reads the plans' jobs again (scancel's retries of
a job in a transitional state). ``told`` is what scancel says of the ids before acting;
``deliver`` acts on the plans (a cancel through Grid Engine, a signal through the shim's channel
to the job wrapper, with slurmctld's owner check and scancel.c's retries) and writes the shim's
events of it. Both give Slurm's lines for stderr as ``Note``s, in Slurm's order, each with the
exit status it makes the command's: ``cli/scancel.py`` parses the command line, calls these and
prints the notes. Nothing here prints.
"""

from __future__ import annotations

import os
import signal as _signal

from . import jobs
from ..plain import factory, record  # dataclasses costs ~10 ms of scancel's start

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Iterator

    from ..slurm.model import JobRecord

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


ACTS_ON = ("PENDING", "RUNNING", "SUSPENDED")  # the base states scancel acts on (_filter_job_records)


class Filters:
    """scancel's filters as given (None: not given), one value each as Slurm's scancel takes it
    (opt.c keeps each option's last value): ``state`` a Slurm state's long name (any job state
    _xlate_state_name takes: only PENDING, RUNNING and SUSPENDED can match), ``user`` a user name
    (``-u`` or ``--me``, whichever came last), the others the option's text. Each is compared whole
    as scancel.c's _filter_job_records does with xstrcmp: ``-n a,b`` is the one name "a,b", no
    list (squeue's lists are its own), and a value given empty matches no job rather than every
    job. ``-A`` and ``-q`` are lowercased (opt.c xstrtolower), compared with squeue's readings of
    the job's account and QOS (jobqueue.account_of, qos_of); ``-w`` is a hostlist, as Slurm's
    hostset_intersects reads it."""

    def __init__(self, state: str | None = None, user: str | None = None, name: str | None = None,
                 partition: str | None = None, account: str | None = None, qos: str | None = None,
                 nodelist: str | None = None, reservation: str | None = None, wckey: str | None = None,
                 user_text: str | None = None):
        self.state, self.user, self.name, self.partition = state, user, name, partition
        self.account, self.qos, self.nodelist, self.reservation, self.wckey = account, qos, nodelist, reservation, wckey
        self.user_text = user if user_text is None else user_text  # as given (--me: the uid's digits)
        self._nodes: set[str] | None = None
        self.errors: list[str] = []  # slurm_read_hostfile's error() lines (told prints them first)

    def summary(self) -> str:
        """The filters as scancel.c's "No active jobs match ALL job filters, including: " names
        them, in its order, each ``key=value `` (``-A`` and ``-q`` lowercased, as opt.c keeps them)."""
        pairs = (("account", self.account and self.account.lower()), ("job_name", self.name),
                 ("nodelist", self.nodelist), ("partition", self.partition), ("qos", self.qos and self.qos.lower()),
                 ("reservation", self.reservation), ("state", self.state), ("user_name", self.user_text),
                 ("wckey", self.wckey))
        return "".join(f"{k}={v} " for k, v in pairs if v)

    @property
    def given(self) -> bool:
        return any(x is not None for x in (self.state, self.user, self.name, self.partition, self.account,
                                           self.qos, self.nodelist, self.reservation, self.wckey))

    def keep(self, r: JobRecord, cfg) -> bool:
        """Does the job pass the filters? A reservation is compared once ``prepare`` has read them."""
        from . import jobqueue as q

        # cheap comparisons first (account_of and qos_of may read a job's detail); the order changes nothing
        # -t: the job's base state (JOB_STATE_BASE: a STOPPED job is RUNNING), where squeue's -t
        # compares the state it shows (squeue/print.c _filter_job); a state flag (STOPPED,
        # COMPLETING...) or an ended state never equals the base state of a job scancel acts on
        if self.state is not None and (self.state not in ACTS_ON or r.state != self.state):
            return False
        if self.user is not None and r.user != self.user:
            return False
        if self.name is not None and r.name != self.name:
            return False
        if self.partition is not None and r.partition != self.partition:
            return False
        if self.reservation is not None and r.extra.get("reservation") != self.reservation:
            return False
        if self.account is not None:  # a job with no account (''): Slurm's NULL, which xstrcmp finds equal to no value
            account = q.account_of(r, cfg)
            if not account or account != self.account.lower():
                return False
        if self.qos is not None and q.qos_of(r, cfg) != self.qos.lower():
            return False
        if self.nodelist is not None:
            nodes = self._nodes if self._nodes is not None else self._node_set()
            if not q.on_hosts(r, nodes):
                return False
        return self.wckey is None  # no job has a wckey (squeue shows none): scancel.c's xstrcmp(NULL, wckey) fails

    def _node_set(self) -> set[str]:
        """-w's hosts (no localhost: scancel/opt.c passes -w to hostset_intersects as given). A
        list with a ``/`` names a hostfile (scancel.c: slurm_read_hostfile, job by job until one
        read succeeds): where it cannot be read, its error is said and the text is the list."""
        from . import jobqueue as q
        from ..slurm.hostlist import hostfile

        text = self.nodelist or ""
        if "/" in text:
            hosts, why = None, ""
            try:
                data = _read_hostfile(text)
                hosts, why = hostfile(data.decode("utf-8", "replace"), text) if data is not None else \
                    (None, "Hostlist is too long for the allocate RPC!")
            except OSError as e:
                why = f"slurm_allocate_resources error opening file {text}, {os.strerror(e.errno or 0)}"
            if hosts is not None:
                self._nodes = set(hosts)
                return self._nodes
            self.errors.append(f"{PROG}: error: {why}")
            try:
                return q.hosts_named(text, localhost=False)
            except ValueError:
                return set()
        self._nodes = q.hosts_named(text, localhost=False)
        return self._nodes

    def prepare(self, records: list[JobRecord], cfg) -> None:
        """Read what ``keep`` compares that the job list does not hold: the jobs' reservations,
        with -R only (jobqueue.in_reservation's reading)."""
        if self.reservation is not None:
            jobs.fill_reservations(records, cfg)


def _read_hostfile(path: str) -> bytes | None:
    """A hostfile's bytes, None past MAX_CHARS (then the list is too long). Opened without
    blocking: a FIFO or any other file that is not a regular one reads as empty (Slurm's fopen
    would wait on a FIFO for ever; a directory gives it "Hostlist is empty!"). OSError as open's."""
    import stat

    from ..slurm.hostlist import MAX_CHARS

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        data = os.read(fd, MAX_CHARS + 1)
        return data if len(data) <= MAX_CHARS else None
    finally:
        os.close(fd)


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
    filters.prepare(active(jl.records), cfg)
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
    from ..store import state
    from ..store.records import action

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
    from ..store import state
    from ..store.records import action

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
    from ..store import state
    from ..store.records import action

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


# ---------------------------------------------------------------------------------------------
# delivery: what scancel does to the plans, and Slurm's lines about it

PROG = "scancel"
ACCESS_DENIED_RC = 210  # ESLURM_ACCESS_DENIED (2002) as an exit status
SCRIPT_MISSING_RC = 2009 & 0xFF  # ESLURM_JOB_SCRIPT_MISSING: scancel exits with the error code
NOT_NOW_RC = 2020 & 0xFF  # ESLURM_TRANSITION_STATE_NO_UPDATE
MAX_CANCEL_RETRY = 10  # scancel.c: tries of a job in a transitional state, sleeping 5+i seconds after each
JOB_CONTROL = frozenset({_signal.SIGSTOP, _signal.SIGTSTP, _signal.SIGCONT})  # what Grid Engine's qmod does


@record
class Note:
    """One of scancel's lines for stderr, in the order Slurm prints it: the exit status it makes
    the command's at least (0: none), and whether ``-Q`` hides it (errors and the signal
    channel's warning: yes; ``-v``'s lines and what Grid Engine did but the shim could not
    record: no). ``rc`` counts even when the line is hidden."""

    text: str
    rc: int = 0
    quiet_hides: bool = True


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)


def signal_name(n: int) -> str:
    try:
        return _signal.Signals(n).name[3:]
    except ValueError:
        return str(n)


def _kill_error(label: str, why: str, rc: int, quiet_hides: bool = True) -> Note:
    return Note(f"{PROG}: error: Kill job error on job id {label}: {why}", rc, quiet_hides)


def _verbose_line(sig: int | None, batch: bool, full: bool, label: str) -> str:
    """scancel.c's verbose line: "Terminating job X" without -s, else "Signal N to [batch |full ]job X"."""
    if sig is None:
        return f"{PROG}: Terminating job {label}"
    kind = "full " if full else "batch " if batch else ""
    return f"{PROG}: Signal {sig} to {kind}job {label}"


def told(selection: Selection, sig: int | None, *, batch: bool, full: bool, verbose: bool,
         strict: bool, filters: Filters | None = None) -> list[Note]:
    """What scancel says of each id given before acting (scancel.c's verbose lines, and the ids
    that name no job to act on: an error that fails the command only where ``strict``, i.e. with
    ``-s`` or ``-b``; said only then or with ``-v``). Without ids, ``-v`` names each job the
    filters chose, and says so when they chose none (_filter_job_records' error, exit status 0)."""
    out: list[Note] = [Note(e) for e in (filters.errors if filters is not None else ())]
    if verbose and not selection.picked and filters is not None and filters.given:
        for p in selection.plans:  # one line a job record, as scancel.c's _build_jobid_str names it
            for r in p.records:
                out.append(Note(_verbose_line(sig, batch, full, _record_label(r)), quiet_hides=False))
        if not selection.plans and filters.summary():
            out.append(Note(f"{PROG}: error: No active jobs match ALL job filters, including: {filters.summary()}"))
    for picked in selection.picked:
        t = picked.target
        if t.step is not None:
            if verbose:
                out.append(Note(f"{PROG}: Terminating StepId={t.job_id}.{t.step}", quiet_hides=False))
            continue
        if verbose:
            out.append(Note(_verbose_line(sig, batch, full, picked.label), quiet_hides=False))
        if picked.why is not None and (verbose or strict):
            out.append(_kill_error(picked.label, picked.why, 1 if strict else 0))
    return out


def _record_label(r: JobRecord) -> str:
    """A job record's id as scancel.c's _build_jobid_str writes it: ``N_[a-b]`` for an array's
    pending tasks, ``N_k`` for one task, else ``N``."""
    if r.array_task is not None:
        return f"{r.job_id}_{r.array_task}"
    pending = r.extra.get("pending_indices")
    if pending:
        from ..slurm.jobids import compress

        return f"{r.job_id}_[{compress(list(pending))}]"
    return str(r.job_id)


def through_channel(sig: int | None) -> bool:
    """Does the signal go through the shim's channel to the job wrapper (not Grid Engine)? Not
    without -s or for KILL (a cancel: job_signal deallocates the job; with -b the batch shell's
    SIGKILL ends the job all the same); every other signal is delivered as a signal, STOP, TSTP
    and CONT too (Slurm 22.05's _signal_job: to the steps, the batch shell keeps running; deliver
    leaves a job not submitted through the shim, which has no wrapper, to Grid Engine's qmod)."""
    return sig is not None and sig != _signal.SIGKILL


def deliver(cfg, plans: list[Plan], sig: int | None, *, batch: bool = False, full: bool = False,
            verbose: bool = False, strict: bool = False, sleep=None) -> Iterator[Note]:
    """Act on the plans as scancel does, yielding Slurm's lines as they happen (the caller prints
    each at once: ``-v``'s "Job is in transitional state, retrying" comes out before each retry's
    sleep). ``sig``: None without ``-s``; ``strict``: an id of a job that has gone counts as an
    error (with ``-s`` or ``-b``); ``sleep``: the wait between retries (time.sleep).

    A cancel (no ``-s``, or KILL) goes through Grid Engine (the backend's signal: qdel), with a
    "cancel" event per job or array task; any other signal through the shim's channel to the job
    wrapper (signal_plans), except STOP, TSTP and CONT without ``-b``/``-f`` to a job not
    submitted through the shim, which Grid Engine suspends or resumes (qmod), with a "suspend"
    event."""
    for p in plans:
        p.ge_ids = jobs.ge_ids(cfg, p.job_id, p.tasks, p.records[0])
    if through_channel(sig):
        raw: list[Plan] = []
        if sig in JOB_CONTROL and not batch and not full:
            # no job wrapper to deliver it: Grid Engine suspends or resumes the whole job, as it can
            raw = [p for p in plans if jobs.submit_record(cfg, p.records[0]) is None]
            plans = [p for p in plans if jobs.submit_record(cfg, p.records[0]) is not None]
        if plans:
            yield from signal_plans(cfg, plans, sig, batch, full, verbose=verbose, sleep=sleep)
        if not raw:
            return
        plans = raw
    yield from _through_grid_engine(cfg, plans, sig, verbose=verbose, strict=strict)


def _through_grid_engine(cfg, plans: list[Plan], sig: int | None, *, verbose: bool, strict: bool
                         ) -> Iterator[Note]:
    """One backend call for every plan; Grid Engine's refusals in Slurm's words (refusal.py):
    Access/permission denied (210) for a job the caller may not touch, a job that has gone as an
    id that names none; the shim's events of what it did."""
    import os

    from ..gridengine import backends
    from ..gridengine import ops, refusal
    from ..slurm.users import current

    op = ops.signal_operation(sig)
    if op is None:
        for p in plans:
            yield _kill_error(p.label, f"Grid Engine cannot deliver signal {signal_name(sig)} (only KILL, TERM, "
                                       "INT, HUP, QUIT, STOP and CONT)", 1, quiet_hides=False)
        return
    outcome = backends.get(cfg).signal([g for p in plans for g in p.ge_ids], sig)
    # Grid Engine failed without naming a job (an error of its own): nothing was done
    failed = refusal.slurm_error(refusal.OTHER, outcome.text, "Grid Engine refused") \
        if not outcome.ok and not outcome.jobs else ""
    me, uid = current(), os.getuid()
    unrecorded: list[str] = []
    for p in plans:
        what = outcome.of(p.job_id)
        if failed:
            yield _kill_error(p.label, failed, 1)
            continue
        if what == refusal.DENIED:
            yield _kill_error(p.label, refusal.slurm_error(what, ""), ACCESS_DENIED_RC)
            continue
        if what == refusal.GONE:
            if verbose or strict:
                yield _kill_error(p.label, refusal.slurm_error(what, ""), 1 if strict else 0)
            continue
        written = True
        if op == ops.CANCEL:
            written = record_cancels(cfg, p, me, uid)
        elif op == ops.SUSPEND:
            written = record_suspends(cfg, p, me, uid)
        if not written:
            unrecorded.append(p.label)
    if unrecorded:  # Grid Engine has acted: the command succeeded, only the shim's note is missing
        yield Note(f"{PROG}: warning: could not record the {'cancel' if op == ops.CANCEL else 'suspend'} of job "
                   f"{', '.join(unrecorded)} in {cfg.cluster.state_dir}", quiet_hides=False)


def signal_plans(cfg, plans: list[Plan], sig: int, batch: bool, full: bool, *, verbose: bool = False,
                 sleep=None) -> Iterator[Note]:
    """Signal the jobs of ``plans`` through the channel, as slurmctld's job_signal answers scancel:
    ESLURM_ACCESS_DENIED (210) unless the caller is the job's owner or root (job_signal_id);
    "Job script not specified" for ``-b`` on a job with no batch script (salloc, srun: job_signal's
    ESLURM_JOB_SCRIPT_MISSING, exit 217); a job that is not running (pending, suspended) is
    ESLURM_TRANSITION_STATE_NO_UPDATE, which scancel.c's _cancel_job_id retries MAX_CANCEL_RETRY
    times, 5+i seconds apart ("Job is in transitional state, retrying" with -v), before "Job can
    not be altered now, try again later" (exit 228: scancel exits with the error code, as for
    Access/permission denied's 210); a job that ended meanwhile is Slurm's
    "Job/step already completing or completed" or "Invalid job id specified" (exit 1, as for
    every signal)."""
    import os

    from ..store import state
    from ..slurm.users import current

    if full:
        batch = False  # scancel.1: -b is ignored with -f
    me, uid = current(), os.getuid()
    waiting: list[Plan] = []
    sent: set[str] = set()
    unrecorded: list[str] = []
    for p in plans:
        owner_uid = state.uid_of(p.owner)
        if uid != 0 and uid != owner_uid:
            yield _kill_error(p.label, "Access/permission denied", ACCESS_DENIED_RC)
            continue
        waiting.append(p)
    for attempt in range(MAX_CANCEL_RETRY):
        if not waiting:
            break
        later: list[Plan] = []
        for p in waiting:
            running = [r for r in p.records if r.state == "RUNNING"]
            rest = [r for r in p.records if r.state != "RUNNING"]  # pending or suspended: try again
            rec = jobs.submit_record(cfg, p.records[0])
            if rec is None and running:  # not submitted through the shim: no wrapper to deliver it
                yield _kill_error(p.label, f"Grid Engine cannot deliver signal {signal_name(sig)} to a job not "
                                           "submitted through slurm-shim (only KILL, TERM, INT, HUP, QUIT, STOP "
                                           "and CONT)", 1)
                continue
            if rec is not None and rec.get("interactive") and batch:
                yield _kill_error(p.label, "Job script not specified", SCRIPT_MISSING_RC)
                continue
            if rest:
                later.append(Plan(p.job_id, p.label, rest, p.tasks, owner=p.owner))
            if rec is not None and rec.get("interactive") and full:
                # no batch step: slurmd signals nothing (_kill_all_active_steps), and succeeds
                if not record_stops(cfg, p, running, sig, me, uid):
                    unrecorded.append(p.label)
                continue
            for r in running:
                key = state.signal_key(p.job_id, r.array_task)
                if key in sent:
                    continue  # an array task signalled at an earlier try
                sent.add(key)
                data = {"sig": sig, "batch": batch, "full": full, "owner": p.owner, "uid": uid, "user": me}
                if r.extra.get("submit_ts"):
                    data["sub"] = r.extra["submit_ts"]
                if r.start_time is not None:
                    data["start"] = r.start_time.timestamp()  # ties it to this run of the job (ids wrap)
                if not state.send_signal(cfg, key, data):
                    yield _kill_error(p.label, f"cannot write the signal request in {cfg.cluster.state_dir}", 1)
                    break
                if not record_stops(cfg, p, [r], sig, me, uid):
                    unrecorded.append(p.label)
        waiting = later
        if not waiting:
            break
        if verbose:
            for _p in waiting:
                yield Note(f"{PROG}: Job is in transitional state, retrying", quiet_hides=False)
        (sleep or _sleep)(5 + attempt)
        for p, why in refresh(cfg, waiting):  # a job that is gone keeps no records: Slurm's error for one that ended
            yield _kill_error(p.label, why, 1)
        waiting = [p for p in waiting if p.records]
    for p in waiting:
        yield _kill_error(p.label, "Job can not be altered now, try again later", NOT_NOW_RC)
    if unrecorded:  # the signal is on its way: only the shim's note of it is missing
        yield Note(f"{PROG}: warning: could not record the {STOP_EVENTS[sig]} of job "
                   f"{', '.join(dict.fromkeys(unrecorded))} in {cfg.cluster.state_dir}")
