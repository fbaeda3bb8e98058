"""``scancel``: cancel or signal jobs through the Grid Engine backend (few calls for many jobs).

As Slurm's scancel, a signal signals, it does not cancel: without ``-s`` (or with ``-s KILL``) the
job is cancelled through Grid Engine (qdel), and every cancelled job or array task gets a "cancel"
event in the shim's state directory (Grid Engine keeps no record of pending jobs it deleted,
sacct needs one). Any other signal Slurm accepts, STOP, TSTP and CONT included, goes to the running
job through the shim's signal channel (``state.send_signal``): the job wrapper and srun's launchers
look for requests twice a second and deliver them as slurmstepd does, to the job's steps (not the
batch shell: it keeps running), to the batch shell alone with ``-b``, to the batch shell's whole
process group with ``-f``. A STOP or CONT sent writes a "stop" or "cont" event: slurmctld marks
the job STOPPED when its STOP was delivered and clears that at CONT (jobs.mark_stopped); TSTP
changes no state. Only the job's owner or root may send one (Slurm's Access/permission denied,
exit 210, for anyone else); a pending or suspended job is Slurm's "Job can not be altered now, try
again later" after scancel's retries. A job not submitted through the shim has no wrapper to
deliver a signal: STOP, TSTP and CONT without ``-b``/``-f`` suspend and resume it through Grid
Engine (qmod -sj/-usj, the whole job: squeue shows it SUSPENDED), as ``scontrol suspend`` does
for any job.
"""

from __future__ import annotations

import os
import signal as _signal
import sys

from .. import cancel, jobs, state
from .. import users as passwd
from ..cancel import Plan, Target
from ..errors import ShimError
from . import common
from ..options.getopt import Table, getopt
from ..options.sources import Options, apply, env_parsed
from ..options.spec import Arity, Fate, OptionSpec

PROG = "scancel"
N, R = Arity.NONE, Arity.REQUIRED
ACCESS_DENIED_RC = 210  # ESLURM_ACCESS_DENIED (2002) as an exit status
SCRIPT_MISSING_RC = 2009 & 0xFF  # ESLURM_JOB_SCRIPT_MISSING: scancel exits with the error code
NOT_NOW_RC = 2020 & 0xFF  # ESLURM_TRANSITION_STATE_NO_UPDATE


_o = common.own_options(PROG, R)


OPTIONS: tuple[OptionSpec, ...] = (
    _o("account", "A", env="SCANCEL_ACCOUNT", help="act only on jobs charging this account"),
    _o("batch", "b", N, env="SCANCEL_BATCH", help="signal batch shell for specified job"),
    _o("clusters", "M", env="SLURM_CLUSTERS", help="clusters to issue commands to (this one)"),
    _o("cluster", None, dest="clusters"),
    _o("cron", "c", N, help="cancel a cron job (accepted)"),
    _o("ctld", None, N, env="SCANCEL_CTLD", help="send the request through the controller (accepted)"),
    _o("full", "f", N, env="SCANCEL_FULL", help="signal batch shell and all steps for specified job"),
    _o("help", None, N, fate=Fate.LOCAL, help="show this help message"),
    _o("hurry", "H", N, env="SCANCEL_HURRY", help="avoid burst buffer stage out (accepted)"),
    _o("interactive", "i", N, env="SCANCEL_INTERACTIVE", help="require response from user for each job"),
    _o("jobname", None, dest="name"),
    _o("me", None, N, help="act only on jobs of the calling user"),
    _o("name", "n", env="SCANCEL_NAME", help="act only on jobs with this name"),
    _o("nodelist", "w", help="act only on jobs on these nodes"),
    _o("partition", "p", env="SCANCEL_PARTITION", help="act only on jobs in this partition"),
    _o("qos", "q", env="SCANCEL_QOS", help="act only on jobs with this quality of service"),
    _o("quiet", "Q", N, help="disable warnings"),
    _o("reservation", "R", help="act only on jobs with this reservation (Grid Engine has none)"),
    _o("sibling", None, help="remove an active sibling job from a federated job (accepted)"),
    _o("signal", "s", help="signal to send to job, default is SIGKILL (KILL cancels; others signal the "
                           "running job's steps, or its batch shell with -b, or both with -f)"),
    _o("state", "t", env="SCANCEL_STATE", dest="states", help="act only on jobs in this state"),
    _o("states", None, dest="states"),
    _o("usage", None, N, fate=Fate.LOCAL, help="display brief usage message"),
    _o("user", "u", env="SCANCEL_USER", help="act only on jobs of this user"),
    _o("verbose", "v", N, count=True, env="SCANCEL_VERBOSE", help="verbosity level"),
    _o("version", "V", N, fate=Fate.LOCAL, help="output version information and exit"),
    _o("wckey", None, env="SCANCEL_WCKEY", help="act only on jobs with this workload characterization key"),
)
TABLE = Table(PROG, OPTIONS, error_code=1)

USAGE = """\
Usage: scancel [-A account] [--batch] [--full] [--interactive] [-n job_name]
               [-p partition] [-Q] [-q qos] [-R reservation] [-s signal | integer]
               [-t PENDING | RUNNING | SUSPENDED] [--usage] [-u user_name]
               [--hurry] [-V] [-v] [-w hosts...] [--wckey=wckey]
               [job_id[_array_id][.step_id]]
"""

STATES = ("PENDING", "RUNNING", "SUSPENDED")  # the states -t takes (opt.c _xlate_state_name)


def help_text() -> str:
    lines = ["Usage: scancel [OPTIONS] [job_id[_array_id][.step_id]]"]
    for s in OPTIONS:
        if not s.help:
            continue
        short = f"-{s.short}, " if s.short else "    "
        arg = "" if s.arity is N else "=value"
        lines.append(f"  {short}--{s.long}{arg}".ljust(34) + s.help)
    lines += ["", "Help options:", "  --help                          show this help message",
              "  --usage                         display brief usage message", ""]
    return "\n".join(lines)


def error(msg: str, code: int = 1) -> ShimError:
    return ShimError(f"{PROG}: error: {msg}", code=code)


def parse_targets(words: list[str]) -> list[Target]:
    """scancel's positional ids, read by the one grammar (jobids.scancel_ids: Slurm's
    _xlate_job_step_ids): ``N``, ``N_k``, ``N_[list]``, ``N_*``, ``N+h``, ``N[...].S``, comma
    separated outside brackets. ``N_*`` and a hetjob component name the whole job."""
    from ..jobids import JobIdError, compress, scancel_ids

    try:
        ids = scancel_ids(words)
    except JobIdError as e:
        raise error(str(e)) from None
    out = []
    for j in ids:
        if j.tasks is not None:
            tasks = list(j.tasks)
            text = f"{j.job}_{tasks[0]}" if len(tasks) == 1 else f"{j.job}_[{compress(tasks)}]"
        elif j.task is not None:  # (a task's own id is echoed as typed, as Slurm echoes a job id)
            tasks, text = [j.task], str(j.own_id) if j.own_id is not None else f"{j.job}_{j.task}"
        else:
            tasks, text = None, f"{j.job}_*" if j.all_tasks else str(j.job)
        out.append(Target(text, j.job, tasks, j.step))
    return out


def parse_signal(text: str) -> int:
    """``-s``: Slurm's sig_name2num (a number, or a name of Slurm's signal table with or without
    SIG), kept in scancel's uint16_t; 0 is Slurm's "Unknown job signal" (opt.c: no prefix, exit 1)."""
    from ..options.values import signal_number

    n = signal_number(text) & 0xFFFF
    if not n:
        raise ShimError(f"Unknown job signal: {text}", code=1)
    return n


def signal_name(n: int) -> str:
    try:
        return _signal.Signals(n).name[3:]
    except ValueError:
        return str(n)


MAX_CANCEL_RETRY = 10  # scancel.c: tries of a job in a transitional state, sleeping 5+i seconds after each


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)


def parse_args(argv: list[str]) -> tuple[Options, list[str]]:
    parsed, positional = getopt(TABLE, argv, stop_at_positional=False)
    opts = Options()
    apply(opts, TABLE, env_parsed(TABLE, os.environ), "env")
    apply(opts, TABLE, parsed, "cli")
    return opts, positional  # (commas are the id grammar's: 12_[1-3,5] is one id)


def main(argv: list[str]) -> int:
    opts, words = parse_args(argv)
    if common.answered(opts, help_text, USAGE):
        return 0
    sig = parse_signal(opts.signal) if opts.signal else None
    targets = parse_targets(words)
    states = None
    if opts.states:
        from ..model import state_named

        states = set()
        for tok in opts.states.split(","):
            st = state_named(tok.strip())
            if st is None or st.long not in STATES:
                raise ShimError(f"{PROG}: error: Invalid job state specified: {tok}",
                                f"{PROG}: error: Valid job states are PENDING, RUNNING and SUSPENDED", code=1)
            states.add(st.long)
    users = None
    if opts.user:
        users = set()
        for u in opts.user.split(","):
            name = passwd.name_of(u)
            if name is None:
                raise error(f"Invalid user name: {u}")
            users.add(name)
    if opts.me:
        users = (users or set()) | {passwd.current()}
    filters = cancel.Filters(states, users, opts.name, opts.partition, opts.account, opts.qos, opts.nodelist,
                             opts.reservation, opts.wckey)
    if not targets and not filters.given:
        raise error("No job identification provided")

    from ..siteconf import get

    cfg = get()
    verbose = bool(opts.verbose)
    quiet = bool(opts.quiet)
    strict = sig is not None or bool(opts.batch)  # errors on unknown ids count only then
    # an ended job is told from an unknown one only where a message says which (-v, or errors that count)
    selection = cancel.select(cfg, targets, filters, tell_ended=verbose or strict)
    plans = selection.plans
    rc = 0
    messages: list[str] = []
    for picked in selection.picked:
        t = picked.target
        if t.step is not None:
            if verbose:
                messages.append(f"{PROG}: Terminating StepId={t.job_id}.{t.step}")
            continue
        if verbose:
            messages.append(_verbose_line(sig, bool(opts.batch), bool(opts.full), picked.label))
        if picked.why is not None:
            if verbose or strict:
                messages.append(f"{PROG}: error: Kill job error on job id {picked.label}: {picked.why}")
            if strict:
                rc = max(rc, 1)

    if opts.interactive:
        plans = [p for p in plans if _confirm(p)]

    for m in messages:
        if not (quiet and ": error: " in m):
            print(m, file=sys.stderr)
    if not plans:
        return rc

    for p in plans:
        p.ge_ids = jobs.ge_ids(cfg, p.job_id, p.tasks, p.records[0])

    from ..backends.gridengine import ops, refusal

    if _through_channel(sig, bool(opts.batch), bool(opts.full)):
        raw: list[Plan] = []
        if sig in JOB_CONTROL and not opts.batch and not opts.full:
            # no job wrapper to deliver it: Grid Engine suspends or resumes the whole job, as it can
            raw = [p for p in plans if jobs.submit_record(cfg, p.records[0]) is None]
            plans = [p for p in plans if jobs.submit_record(cfg, p.records[0]) is not None]
        if plans:
            rc = max(rc, signal_plans(cfg, plans, sig, bool(opts.batch), bool(opts.full), verbose=verbose,
                                      quiet=quiet))
        if not raw:
            return rc
        plans = raw
    op = ops.signal_operation(sig)
    if op is None:
        for p in plans:
            print(f"{PROG}: error: Kill job error on job id {p.label}: Grid Engine cannot deliver signal "
                  f"{signal_name(sig)} (only KILL, TERM, INT, HUP, QUIT, STOP and CONT)", file=sys.stderr)
        return 1

    from .. import backends

    outcome = backends.get(cfg).signal([g for p in plans for g in p.ge_ids], sig)
    # Grid Engine failed without naming a job (an error of its own): nothing was done
    failed = refusal.slurm_error(refusal.OTHER, outcome.text, "Grid Engine refused") \
        if not outcome.ok and not outcome.jobs else ""

    me = passwd.current()
    uid = os.getuid()
    unrecorded: list[str] = []
    for p in plans:
        what = outcome.of(p.job_id)
        if failed:
            if not quiet:
                print(f"{PROG}: error: Kill job error on job id {p.label}: {failed}", file=sys.stderr)
            rc = max(rc, 1)
            continue
        if what == refusal.DENIED:
            if not quiet:
                print(f"{PROG}: error: Kill job error on job id {p.label}: {refusal.slurm_error(what, '')}",
                      file=sys.stderr)
            rc = max(rc, ACCESS_DENIED_RC)
            continue
        if what == refusal.GONE:
            if (verbose or strict) and not quiet:
                print(f"{PROG}: error: Kill job error on job id {p.label}: {refusal.slurm_error(what, '')}",
                      file=sys.stderr)
            if strict:
                rc = max(rc, 1)
            continue
        written = True
        if op == ops.CANCEL:
            written = cancel.record_cancels(cfg, p, me, uid)
        elif op == ops.SUSPEND:
            written = cancel.record_suspends(cfg, p, me, uid)
        if not written:
            unrecorded.append(p.label)
    if unrecorded:  # Grid Engine has acted: the command succeeded, only the shim's note is missing
        print(f"{PROG}: warning: could not record the {'cancel' if op == ops.CANCEL else 'suspend'} of job "
              f"{', '.join(unrecorded)} in {cfg.cluster.state_dir}", file=sys.stderr)
    return rc


def _verbose_line(sig: int | None, batch: bool, full: bool, label: str) -> str:
    """scancel.c's verbose line: "Terminating job X" without -s, else "Signal N to [batch |full ]job X"."""
    if sig is None:
        return f"{PROG}: Terminating job {label}"
    kind = "full " if full else "batch " if batch else ""
    return f"{PROG}: Signal {sig} to {kind}job {label}"


JOB_CONTROL = frozenset({_signal.SIGSTOP, _signal.SIGTSTP, _signal.SIGCONT})  # what Grid Engine's qmod does


def _through_channel(sig: int | None, batch: bool, full: bool) -> bool:
    """Does the signal go through the shim's channel to the job wrapper (not Grid Engine)? Not
    without -s or for KILL (a cancel: job_signal deallocates the job; with -b the batch shell's
    SIGKILL ends the job all the same); every other signal is delivered as a signal, STOP, TSTP
    and CONT too (Slurm 22.05's _signal_job: to the steps, the batch shell keeps running; main
    leaves a job not submitted through the shim, which has no wrapper, to Grid Engine's qmod)."""
    return sig is not None and sig != _signal.SIGKILL


def _request_error(p: Plan, why: str, quiet: bool) -> None:
    if not quiet:
        print(f"{PROG}: error: Kill job error on job id {p.label}: {why}", file=sys.stderr)


def signal_plans(cfg, plans: list[Plan], sig: int, batch: bool, full: bool, *, verbose: bool = False,
                 quiet: bool = False) -> int:
    """Signal the jobs of ``plans`` through the channel, as slurmctld's job_signal answers scancel:
    ESLURM_ACCESS_DENIED (210) unless the caller is the job's owner or root (job_signal_id);
    "Job script not specified" for ``-b`` on a job with no batch script (salloc, srun: job_signal's
    ESLURM_JOB_SCRIPT_MISSING, exit 217); a job that is not running (pending, suspended) is
    ESLURM_TRANSITION_STATE_NO_UPDATE, which scancel.c's _cancel_job_id retries MAX_CANCEL_RETRY
    times, 5+i seconds apart ("Job is in transitional state, retrying" with -v), before "Job can
    not be altered now, try again later" (exit 228: scancel exits with the error code, as for
    Access/permission denied's 210); a job that ended meanwhile is Slurm's
    "Job/step already completing or completed" or "Invalid job id specified" (exit 1, as for
    every signal). Returns the exit code."""
    if full:
        batch = False  # scancel.1: -b is ignored with -f
    me, uid = passwd.current(), os.getuid()
    rc = 0
    waiting: list[Plan] = []
    sent: set[str] = set()
    unrecorded: list[str] = []
    for p in plans:
        owner_uid = state.uid_of(p.owner)
        if uid != 0 and uid != owner_uid:
            _request_error(p, "Access/permission denied", quiet)
            rc = max(rc, ACCESS_DENIED_RC)
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
                _request_error(p, f"Grid Engine cannot deliver signal {signal_name(sig)} to a job not submitted "
                                  "through slurm-shim (only KILL, TERM, INT, HUP, QUIT, STOP and CONT)", quiet)
                rc = max(rc, 1)
                continue
            if rec is not None and rec.get("interactive") and batch:
                _request_error(p, "Job script not specified", quiet)
                rc = max(rc, SCRIPT_MISSING_RC)
                continue
            if rest:
                later.append(Plan(p.job_id, p.label, rest, p.tasks, owner=p.owner))
            if rec is not None and rec.get("interactive") and full:
                # no batch step: slurmd signals nothing (_kill_all_active_steps), and succeeds
                if not cancel.record_stops(cfg, p, running, sig, me, uid):
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
                    _request_error(p, f"cannot write the signal request in {cfg.cluster.state_dir}", quiet)
                    rc = max(rc, 1)
                    break
                if not cancel.record_stops(cfg, p, [r], sig, me, uid):
                    unrecorded.append(p.label)
        waiting = later
        if not waiting:
            break
        if verbose:
            for _p in waiting:
                print(f"{PROG}: Job is in transitional state, retrying", file=sys.stderr)
        _sleep(5 + attempt)
        waiting = _refresh(cfg, waiting, quiet, verbose)
        if any(p.records == [] for p in waiting):
            rc = max(rc, 1)
            waiting = [p for p in waiting if p.records]
    for p in waiting:
        _request_error(p, "Job can not be altered now, try again later", quiet)
        rc = max(rc, NOT_NOW_RC)
    if unrecorded and not quiet:  # the signal is on its way: only the shim's note of it is missing
        print(f"{PROG}: warning: could not record the {cancel.STOP_EVENTS[sig]} of job {', '.join(dict.fromkeys(unrecorded))} "
              f"in {cfg.cluster.state_dir}", file=sys.stderr)
    return rc


def _refresh(cfg, plans: list[Plan], quiet: bool, verbose: bool) -> list[Plan]:
    """The plans' jobs as Grid Engine shows them now (cancel.refresh); a job that is gone keeps no
    records and gets Slurm's error for a job that ended."""
    for p, why in cancel.refresh(cfg, plans):
        _request_error(p, why, quiet)
    return plans


def _confirm(p: Plan) -> bool:
    r = p.records[0]
    sys.stdout.write(f"Cancel job_id={p.label} name={r.name} partition={r.partition} [y/n]? ")
    sys.stdout.flush()
    answer = sys.stdin.readline().strip().lower()
    return answer.startswith("y")

