"""scontrol's job control: hold, uhold, release, suspend, resume, requeue, requeuehold and update.

``targets`` reads a verb's words (job ids by the one grammar, jobids.scontrol_job_list; job names
where the verb takes them) into the jobs and array tasks they name, from the job list squeue and
scancel share (jobs.list_jobs; an array task is matched as scancel matches it, cancel.of_tasks).
Each verb then checks the caller against the jobs' owners, names them to Grid Engine
(jobs.ge_ids), acts through the backend, reads Grid Engine's refusals in Slurm's words
(refusal.slurm_error) and writes the shim's records (a suspend or resume event; update's changed
submit record). A verb is a generator of ``Note``s: Slurm's lines for stderr, in the order Slurm
prints them, each saying whether it fails the command; an error that ends the command is a
ShimError. ``cli/scontrol.py`` parses the words, calls a verb and prints its notes.

``s`` is the command's session: its site config (``cfg``), backend (``backend()``) and job list
(``job_list()``, kept between the commands of an interactive scontrol).

What Grid Engine cannot do is said, not faked: ``update`` changes only what ``qalter`` can (and
the shim's own record for Comment/JobName/TimeLimit/Partition), anything else is refused.
"""

from __future__ import annotations

import os

from . import jobs
from ..store import state
from .cancel import INVALID, of_tasks
from ..errors import ShimError
from ..plain import record  # dataclasses costs ~10 ms of a start

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Iterable, Iterator

    from ..slurm.model import JobRecord

PROG = "scontrol"
UPDATABLE = ("timelimit", "partition", "jobname", "name", "comment", "nice", "account", "qos", "starttime",
             "begintime")


@record
class Note:
    """One of Slurm's lines on stderr ('': none) and whether it makes the command fail (exit 1)."""

    text: str
    fails: bool = True


@record
class Named:
    """What one word names (or, for a job name, one job of that name): its label in messages, the
    records of its active jobs (None: the word is no job id), the Slurm array indices it names
    (None: the whole job)."""

    label: str
    records: list[JobRecord] | None
    tasks: list[int] | None = None



def caller() -> tuple[str, int]:
    """The calling user's name (its uid in digits without a passwd entry) and uid."""
    from ..slurm.users import current

    return current(), os.getuid()


def owns(recs: list[JobRecord]) -> bool:
    """May the caller act on these jobs: root, or their owner, by uid, as Slurm's controller
    decides (job_mgr.c, update_job's ``job_ptr->user_id != uid`` check; scancel's rule too)."""
    uid = caller()[1]
    return uid == 0 or all((r.uid if r.uid is not None else state.uid_of(r.user)) == uid for r in recs)


def refused(res, fallback: str = "") -> str:
    """Grid Engine's refusal (a backend Outcome) in Slurm's words (refusal.slurm_error)."""
    from ..gridengine.refusal import slurm_error

    return slurm_error(res.kind, res.text, fallback)


def record_event(cfg, r: JobRecord, kind: str, uid: int, me: str) -> bool:
    """A suspend/resume event in the caller's own directory (root's for an admin), naming the
    job's owner and Grid Engine's submission time so that readers tie it to this job."""
    from ..store.records import action

    return state.record_event(cfg, r.job_id, r.array_task, kind, action(uid, me, r.user, r.extra.get("submit_ts")))


# ---------------------------------------------------------------------------------------------
# the jobs a verb's words name


def targets(s, words: Iterable[str], names: str = "any") -> tuple[jobs.JobList, list[Named]]:
    """The listing read, and job ids or names -> [Named] (the active records of each). A word is
    read by the one grammar (jobids.scontrol_job_list: update_job.c's _is_job_id/_next_job_id,
    after an optional JobId=/Job=). A word that is no job list is read by ``names``:

    - ``"slurm"`` (hold, uhold, release: update_job.c scontrol_hold): only ``Name=NAME`` or
      ``JobName=NAME`` (case-insensitive) names jobs; any other word is an invalid id;
    - ``"none"`` (requeue, requeuehold, suspend, resume: scontrol_requeue, scontrol_suspend take
      ids only): every such word is an invalid id;
    - ``"any"`` (update's JobId=): a bare word is a job name too, as before.

    A word that is an invalid id comes back with the records None. Job names come back with a
    label ``Name=NAME`` entry per matching job (records of that job) or one with no records.
    A task named by its own job id (``t*10^10+G``, docs/array-ids.md) is labelled by that id, as
    typed, as Slurm names the job it was given. Grid Engine has no hetjobs: N+h names no job."""
    from ..slurm.jobids import JobIdError, compress, scontrol_job_list, task_job_id

    read: list[tuple[str, list | None | JobIdError]] = []
    for w in words:
        low = w.lower()
        w = w[6:] if low.startswith("jobid=") else w[4:] if low.startswith("job=") else w
        try:
            ids = scontrol_job_list(w)
        except JobIdError as e:
            ids = e
        if ids is None and (names == "none" or (names == "slurm" and not w.lower().startswith(("name=", "jobname=")))):
            ids = JobIdError(INVALID)
        read.append((w, ids))
    # job ids only: a listing of those jobs (issue 19: not the whole queue to act on one job); a
    # job name needs every job
    named = [x for _w, x in read if not isinstance(x, JobIdError)]
    only = {j.job for x in named for j in x} if all(x is not None for x in named) else None
    jl = s.job_list(only=only, reasons=False) if only is not None else s.job_list()
    out: list[Named] = []
    for w, ids in read:
        if isinstance(ids, JobIdError):
            out.append(Named(w, None))
            continue
        typed = set(w.replace(",", " ").split())
        for j in ids or ():
            recs = [r for r in jl.records if r.job_id == j.job and not r.extra.get("ended")]
            tasks = list(j.tasks) if j.tasks is not None else [j.task] if j.task is not None else None
            if tasks is not None:
                recs = of_tasks(recs, tasks)
            if j.het is not None:
                recs = []
            own = str(task_job_id(j.job, j.task)) if j.task is not None and j.tasks is None else ""
            label = (f"{j.job}+{j.het}" if j.het is not None else own if own in typed
                     else f"{j.job}_{j.task}" if j.task is not None
                     else f"{j.job}_{compress(tasks)}" if tasks else str(j.job))
            out.append(Named(label, recs, tasks))
        if ids is None:  # a job name
            name = w.split("=", 1)[1] if w.lower().startswith(("name=", "jobname=")) else w
            recs = [r for r in jl.records if r.name == name and not r.extra.get("ended")]
            found = sorted({r.job_id for r in recs})
            if names == "slurm":
                out.append(Named(f"Name={name}", recs))
                continue
            out.extend(Named(str(j), [r for r in recs if r.job_id == j]) for j in found)
            if not found:
                out.append(Named(name, []))
    return jl, out


# ---------------------------------------------------------------------------------------------
# the verbs


def hold(s, words: list[str], release: bool = False, user: bool = False) -> Iterator[Note]:
    """hold, uhold (``user``), release (update_job.c scontrol_hold): job ids, or ``Name=``/``JobName=``
    and a job name (any other word: "Invalid job id specified for job WORD"). A name selects every
    job of that name: a task that is not pending is left alone, another job that is not pending is
    acted on but makes the word fail with "Job is no longer pending execution"; a name no job has is
    no error (Slurm's loop finds nothing to update). scontrol.c then prints "slurm_suspend error:
    ..." after each word that failed. One Grid Engine call (qhold or qrls) for every job named.

    Who holds matters, as in every release (fixtures/slurm-*/oracle-hold.txt): root's ``hold`` is
    an admin hold (JobHeldAdmin), Grid Engine's operator hold (``qhold -h o``), recorded in root's
    own file (store/holds.py) for the listing; the job's owner may hold or uhold it (no change) but
    not release it: "Access/permission denied for job N", exit 1 (Grid Engine's qrls would leave
    the operator hold in place and say nothing). Root's ``uhold`` makes it a user hold (``qrls -h
    o`` first, for a job root held); root's ``release`` lifts either (``qrls -h uo``)."""
    from ..store import holds as admin_holds

    admin = caller()[1] == 0
    known, times = admin_holds.read_all(s.cfg) if (release and not admin) or (user and admin) else ({}, {})
    calls: list[str] = []
    acted: list[tuple[int, list[int] | None, list[str]]] = []  # (job, Slurm indices or None, its ids)
    when: dict[int, float] = {}  # each acted job's Grid Engine submission time (root's record keeps it)

    def act(job: int, tasks: list[int] | None, ids: list[str], recs: list[JobRecord]) -> None:
        calls.extend(ids)
        acted.append((job, tasks, ids))
        if recs and recs[0].submit_time is not None:
            when[job] = recs[0].submit_time.timestamp()

    def root_held(job: int, tasks: list[int] | None, recs: list[JobRecord]) -> bool:
        want = tasks if tasks is not None else sorted({t for r in recs for t in (admin_holds.record_tasks(r) or ())})
        return admin_holds.held(admin_holds.current(known, times, recs[:1]), job, want or None)

    for t in targets(s, words, names="slurm")[1]:
        tok, recs, tasks = t.label, t.records, t.tasks
        if recs is None or (not recs and not tok.startswith("Name=")):
            yield Note(f"Invalid job id specified for job {tok}")
            yield Note(suspend_error(INVALID))
            continue
        if tok.startswith("Name="):  # scontrol_hold's loop over the jobs of that name
            late = False
            for job in sorted({r.job_id for r in recs}):
                mine = [r for r in recs if r.job_id == job and not (r.array_task is not None and r.state != "PENDING")]
                if not mine:
                    continue
                if any(r.state != "PENDING" for r in mine):
                    late = True
                label = str(job) if not mine[0].is_array else f"{job}_{mine[0].array_pending or mine[0].array_task}"
                if not owns(mine):
                    yield Note(f"Invalid user id for job {label}")
                    yield Note(suspend_error("Invalid user id"))
                    continue
                pending = [r for r in mine if r.array_task is None or r.state == "PENDING"]
                idx: list[int] | None = None
                if all(r.is_array for r in pending):
                    idx = sorted({i for r in pending for i in (r.extra.get("pending_indices") or
                                                                ([r.array_task] if r.array_task is not None else []))})
                    idx = idx or None
                if release and not admin and root_held(job, idx, mine):
                    yield Note(f"{DENIED} for job {label}")
                    yield Note(suspend_error(DENIED))
                    continue
                act(job, idx, jobs.ge_ids(s.cfg, job, idx, mine[0]), mine)
            if late:
                yield Note(suspend_error("Job is no longer pending execution"))
            continue
        if not owns(recs):
            yield Note(f"Invalid user id for job {tok}")
            yield Note(suspend_error("Invalid user id"))
            continue
        if release and not admin and root_held(recs[0].job_id, tasks, recs):
            yield Note(f"{DENIED} for job {tok}")
            yield Note(suspend_error(DENIED))
            continue
        act(recs[0].job_id, tasks, jobs.ge_ids(s.cfg, recs[0].job_id, tasks, recs[0]), recs)
    if calls:
        yield from _hold_calls(s, calls, acted, known, release, user, admin, when)


DENIED = "Access/permission denied"  # (slurm_strerror of ESLURM_ACCESS_DENIED)


def _hold_calls(s, calls: list[str], acted: list, known: dict, release: bool, user: bool, admin: bool,
                when: dict[int, float] | None = None) -> Iterator[Note]:
    """Grid Engine's calls for hold's jobs, and root's record of its holds (store/holds.py)."""
    from ..store import holds as admin_holds

    b = s.backend()
    kind = "" if not admin else "uo" if release else "" if user else "o"
    lift = [i for job, tasks, ids in acted if admin and user and not release and job in known for i in ids]
    if lift:
        b.release(lift, "o")  # root's uhold of a job root held: a user hold in its place
    if release:
        res = b.release(calls, kind) if kind else b.release(calls)
    else:
        res = b.hold(calls, kind) if kind else b.hold(calls)
    if admin and (kind or lift):
        done = [(job, tasks) for job, tasks, _ids in acted if job not in res.jobs]
        gone = done if (release or user) else []
        admin_holds.update(s.cfg, [] if (release or user) else done, gone, _alive(s), when)
    if not res.ok:
        why = refused(res)
        yield Note(suspend_error(why) if why else "")


def _alive(s):
    """For store/holds.py's pruning: which of some job ids Grid Engine still has (None: unknown)."""
    def alive(ids: list[int]) -> set[int] | None:
        try:
            return s.backend().find_jobs(ids).found()
        except Exception:  # BackendUnavailable and the like: prune nothing
            return None
    return alive


def suspend_error(text: str) -> str:
    """scontrol's slurm_perror("slurm_suspend error") line after a hold, uhold or release that
    failed: "slurm_suspend error: <text>", or with no space after the colon where the release
    prints it so (releases.SUSPEND_ERROR_NO_SPACE: 26.05)."""
    from ..slurm import releases

    gap = "" if releases.current().has(releases.SUSPEND_ERROR_NO_SPACE) else " "
    return f"slurm_suspend error:{gap}{text}"


def suspend(s, words: list[str], resume: bool = False) -> Iterator[Note]:
    """suspend, resume (update_job.c scontrol_suspend): job ids only, each failure
    "<slurm_strerror> for job <id>" on stderr, exit 1, with no "scontrol: error: " before it (as
    real 22.05.8, 24.11.5 and 26.05.5 answer: fixtures/slurm-*/oracle-step-ends.txt, section M):
    an id no job has is "Unexpected message received" (the controller's answer), a word that is
    no id "Invalid job id specified", a pending job "Job is pending execution", resuming a job
    that is not suspended "Job is not suspended", an ended job "Job/step already completing or
    completed", another user's job "Access/permission denied". Each job (array task) acted on
    gets a "suspend" or "resume" event in the shim's records (a warning when it cannot be
    written)."""
    kind = "resume" if resume else "suspend"
    me, uid = caller()
    jl, named = targets(s, words, names="none")  # scontrol_suspend: ids only
    for t in named:
        tok, recs, tasks = t.label, t.records, t.tasks
        if not recs:
            yield Note(f"{INVALID if recs is None else _gone(jl, tok, UNEXPECTED)} for job {tok}")
            continue
        if all(r.state == "PENDING" for r in recs):
            yield Note(f"{PENDING} for job {tok}")
            continue
        if resume and not any(r.state == "SUSPENDED" for r in recs):
            yield Note(f"Job is not suspended for job {tok}")
            continue
        ids = jobs.ge_ids(s.cfg, recs[0].job_id, tasks, recs[0])
        res = s.backend().resume(ids) if resume else s.backend().suspend(ids)
        if res.kind is not None:
            why = refused(res, "Access/permission denied")
            yield Note(f"{why} for job {tok}")
            continue
        if not all([record_event(s.cfg, r, kind, uid, me) for r in recs]):
            yield Note(f"{PROG}: warning: could not record the {kind} of job {tok} in {s.cfg.cluster.state_dir}",
                       fails=False)


UNEXPECTED = "Unexpected message received"  # suspend/resume of an id the controller does not know
PENDING = "Job is pending execution"  # suspend, resume, requeue, requeuehold of a pending job
ENDED = "Job/step already completing or completed"  # suspend, resume of an ended job


def _gone(jl, tok: str, unknown: str) -> str:
    """Why a job id names no active job: ENDED where the listing still knows the job (it ended
    within MinJobAge), else ``unknown``."""
    job = tok.split("_")[0]
    return ENDED if job.isdigit() and int(job) in jl.known else unknown


def requeue(s, words: list[str], hold: bool = False) -> Iterator[Note]:
    """requeue, requeuehold (update_job.c scontrol_requeue/_hold): job ids only, no names; each
    failure is "<slurm_strerror> for job <id>" on stderr, exit 1: "Job is pending execution" for
    a pending job, with or without hold (as every release answers: oracle-messages.txt section U,
    oracle-control.txt). A running job gets a "requeue" event first: its job wrapper then says
    ``*** JOB N ON host CANCELLED AT <time> DUE TO JOB REQUEUE ***``, its steps likewise
    (runtime/jobwrap.requeue_asked; every release: oracle-step-ends.txt, L)."""
    jl, named = targets(s, words, names="none")
    for t in named:
        tok, recs, tasks = t.label, t.records, t.tasks
        if not recs:
            job = int(tok.split("_")[0]) if recs is not None and tok.split("_")[0].isdigit() else -1
            if job in jl.known:
                yield Note(f"Requeue of job {tok} failed: Requeue of a job that has ended is not possible on Grid Engine")
            else:
                yield Note(f"{INVALID} for job {tok}")
            continue
        if all(r.state == "PENDING" for r in recs):
            yield Note(f"{PENDING} for job {tok}")
            continue
        ids = jobs.ge_ids(s.cfg, recs[0].job_id, tasks, recs[0])
        running = [r for r in recs if r.state in ("RUNNING", "SUSPENDED")]
        if running:
            me, uid = caller()
            for r in running:  # the job wrapper's word that this end is a requeue (DUE TO JOB REQUEUE)
                record_event(s.cfg, r, "requeue", uid, me)
            res = s.backend().requeue(ids)
            if not res.ok:
                why = refused(res, "Grid Engine refused")
                yield Note(f"{why} for job {tok}")
                continue
        if hold:
            s.backend().hold(ids)


def update(s, ids: list[str], changes: list[tuple[str, str]]) -> Iterator[Note]:
    """update JobId=... KEY=VALUE... (update_job.c scontrol_update_job): ``changes`` (lower-case
    keys) are checked, every one, before any job is changed: a key Grid Engine cannot change, or a
    bad value, ends the command; a StartTime parse_time refuses is its message and no change for
    that key. Then each job named: the owner (root) only, a negative Nice for root only (Slurm's
    operators), Grid Engine's qalter for what it can change (translate.alter), the shim's submit
    record for the rest (the caller's own copy: an admin's is root's)."""
    from ..slurm.options.values import time_minutes
    from ..gridengine.translate import alter

    for k, v in changes:
        if k not in UPDATABLE:
            raise ShimError(f"{PROG}: error: Update of this parameter is not supported on Grid Engine: {k}",
                       "Request aborted")
    # validate everything before changing anything
    parsed: dict[str, object] = {}
    for k, v in changes:
        if k == "timelimit":
            val = v.strip()
            inc = 0
            if val[:1] in "+-" and val[1:2].isdigit():
                inc = 1 if val[0] == "+" else -1
                val = val[1:]
            m = time_minutes(val)
            if m is None:
                raise ShimError(f"{PROG}: error: Invalid TimeLimit value")
            parsed[k] = (inc, m)
        elif k == "partition":
            if v not in s.cfg.partitions:
                raise ShimError(f"{PROG}: error: Invalid partition name specified")
            parsed[k] = v
        elif k == "nice":
            try:
                parsed[k] = int(v)
            except ValueError:
                raise ShimError(f"{PROG}: error: Invalid nice value: {v}") from None
        elif k in ("starttime", "begintime"):
            from ..slurm.timespec import TimeSpecError, start_time

            try:
                when = start_time(v)
            except TimeSpecError as e:  # as Slurm: parse_time's message, and no change for this key
                yield Note(str(e), fails=False)
                continue
            if when is not None:
                parsed["starttime"] = when
        else:
            parsed["jobname" if k == "name" else k] = v
    if not parsed:  # Slurm's scontrol_update_job: update_cnt == 0
        raise ShimError("No changes specified")
    for t in targets(s, ids)[1]:
        tok, recs = t.label, t.records
        if not recs:  # scontrol_update_job's "%s for job %s" (scontrol.c adds no slurm_perror for jobs)
            yield Note(f"{INVALID} for job {tok}")
            continue
        if not owns(recs):
            yield Note(f"Access/permission denied for job {tok}")
            continue
        privileged = caller()[1] == 0
        if alter.nice_denied(parsed, privileged):  # Slurm: a negative nice is for operators
            yield Note(f"Access/permission denied for job {tok}")
            continue
        rec = recs[0]
        job = rec.job_id
        sub = jobs.submit_record(s.cfg, rec)  # the owner's record (or root's copy), of this job
        sub = {k: v for k, v in sub.to_dict().items() if k != "t"} if sub is not None else None
        change = alter.qalter_args(parsed, s.cfg, privileged=privileged, pending=rec.state == "PENDING",
                                   hard=rec.extra.get("ge_row", {}).get("hard", {}),
                                   time_limit=jobs.detail(rec, s.cfg).time_limit if "timelimit" in parsed else None,
                                   wrapped=bool(sub))
        args, changed = change.args, change.record
        if change.not_pending:
            yield Note(f"{PROG}: error: Job is no longer pending execution for job {tok}")
        if args:
            res = s.backend().alter(str(job), args)
            if not res.ok:
                msg = refused(res, "Grid Engine refused the change")
                yield Note(f"{msg} for job {tok}")
                continue
        if changed and sub is not None:
            # into the caller's own directory: an admin's copy is root's, which readers believe
            # for the owner's job when it is newer (the job wrapper follows TimeLimit from it)
            sub.update(changed)
            if not state.record_submit(s.cfg, job, sub):
                yield Note(f"{PROG}: warning: job {job}: the change is made in Grid Engine, but the shim's record "
                           f"in {s.cfg.cluster.state_dir} could not be written", fails=False)
        elif changed and ("comment" in changed or "qos" in changed) and sub is None:
            yield Note(f"{PROG}: warning: job {job} was not submitted through slurm-shim: "
                       "Comment/QOS are not kept", fails=False)
