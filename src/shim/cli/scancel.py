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
for any job. The command parses its options and prints; which jobs (cancel.select) and what is
done to them (cancel.deliver) are shim/cancel.py's.
"""

from __future__ import annotations

import os
import sys

from ..operations import cancel
from ..operations.cancel import Plan, Target
from ..errors import ShimError, for_command
from . import common
from ..slurm.options.getopt import Table, getopt
from ..slurm.options.sources import Options, apply, env_parsed
from ..slurm.options.spec import Arity, Fate, OptionSpec

TYPE_CHECKING = False  # typing costs ~9 ms of a start
if TYPE_CHECKING:
    from typing import Iterable

PROG = "scancel"
N, R = Arity.NONE, Arity.REQUIRED


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
    _o("reservation", "R", help="act only on jobs of this reservation (a Grid Engine advance reservation)"),
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

# 22.05's --usage; a release that prints another has it in its ``usage`` (releases.py: 24.11's --ctld)
USAGE = """\
Usage: scancel [-A account] [--batch] [--full] [--interactive] [-n job_name]
               [-p partition] [-Q] [-q qos] [-R reservation] [-s signal | integer]
               [-t PENDING | RUNNING | SUSPENDED] [--usage] [-u user_name]
               [--hurry] [-V] [-v] [-w hosts...] [--wckey=wckey]
               [job_id[_array_id][.step_id]]
"""


def usage_text() -> str:
    """--usage: the configured release's synopsis."""
    from ..slurm import releases

    return releases.current().usage.get(PROG, USAGE)


def help_text() -> str:
    from ..slurm.render.help import options_help

    return options_help(OPTIONS, "Usage: scancel [OPTIONS] [job_id[_array_id][.step_id]]", width=34, tail=(
        "", "Help options:", "  --help                          show this help message",
        "  --usage                         display brief usage message"))


error = for_command(PROG)  # Slurm's "<prog>: error: ..." (errors.command_error)


def parse_targets(words: list[str]) -> list[Target]:
    """scancel's positional ids, read by the one grammar (jobids.scancel_ids: Slurm's
    _xlate_job_step_ids): ``N``, ``N_k``, ``N_[list]``, ``N_*``, ``N+h``, ``N[...].S``, comma
    separated outside brackets. ``N_*`` and a hetjob component name the whole job."""
    from ..slurm.jobids import JobIdError, compress, scancel_ids

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
    from ..slurm.options.values import signal_number

    n = signal_number(text) & 0xFFFF
    if not n:
        raise ShimError(f"Unknown job signal: {text}", code=1)
    return n


def _state_given(text: str, env: bool = False) -> str:
    """``-t``/``SCANCEL_STATE``: one state, Slurm's _xlate_state_name (opt.c): job_state_num, any
    job state's long name or compact code in any case (a state other than PENDING, RUNNING and
    SUSPENDED is taken, and matches no job: cancel.Filters); anything else, a comma list
    included, is its error, printed without a prefix, exit 1."""
    from ..slurm.model import state_named

    st = state_named(text)
    if st is None:
        raise ShimError(f"Unrecognized SCANCEL_STATE value: {text}" if env else f"Invalid job state specified: {text}",
                        "Valid job states are PENDING, RUNNING, and SUSPENDED", code=1)
    return st.long


def _user_named(word: str) -> str | None:
    """``-u``/``--me``'s user, as Slurm's uid_from_string reads it: a user name first, else a uid
    (strtol's decimal: leading blanks and a sign allowed, 0 to INT_MAX) that the user database
    knows; None when there is no such user."""
    import pwd
    import re

    try:
        return pwd.getpwnam(word).pw_name
    except (KeyError, ValueError):  # (ValueError: a NUL in the word)
        pass
    m = re.fullmatch(r"[ \t\n\v\f\r]*([+-]?[0-9]+)", word)
    if m is None or not 0 <= int(m.group(1)) <= 0x7FFFFFFF:
        return None
    try:
        return pwd.getpwuid(int(m.group(1))).pw_name
    except KeyError:
        return None


def parse_args(argv: list[str]) -> tuple[Options, list[str]]:
    """The options as Slurm's scancel/opt.c reads them: the input variables, then the command line;
    each option keeps its last value (one value each: no lists). ``--me`` and ``-u`` set the same
    user (opt.user_name): the later on the command line wins, and either beats SCANCEL_USER; the
    winner is left in ``user`` (``--me`` as the caller's uid in digits, as opt.c's "%u" of getuid()).
    As opt.c, an invalid SCANCEL_STATE, then each ``-t`` and ``-s`` in command-line order, is an
    error before anything else (an unknown option after them included), unless ``--help``,
    ``--usage`` or ``-V`` comes first (it is answered, whatever follows)."""
    env = env_parsed(TABLE, os.environ)
    for spec, raw in env:  # (_opt_env runs before _opt_args)
        if spec.key == "states" and raw is not None:
            _state_given(raw, env=True)
    try:
        parsed, positional = getopt(TABLE, argv, stop_at_positional=False)
        bad = None
    except ShimError as e:  # an unknown option: what opt.c's loop met before it comes first
        parsed, positional, bad = getattr(e, "before", []), [], e
    for spec, raw in parsed:
        if spec.key in ("help", "usage", "version"):
            bad = None
            break  # opt.c prints it and exits where it comes
        if spec.key == "states" and raw is not None:
            _state_given(raw)
        elif spec.key == "signal" and raw is not None:
            parse_signal(raw)
    if bad is not None:
        raise bad
    opts = Options()
    apply(opts, TABLE, env, "env")
    apply(opts, TABLE, parsed, "cli")
    who = [spec.key for spec, _ in parsed if spec.key in ("user", "me")]
    if who and who[-1] == "me":
        opts["user"], opts.source["user"], opts.raw["user"] = str(os.getuid()), "cli", None
    return opts, positional  # (commas are the id grammar's: 12_[1-3,5] is one id)


def main(argv: list[str]) -> int:
    opts, words = parse_args(argv)
    if common.answered(opts, help_text, usage_text):
        return 0
    sig = parse_signal(opts.signal) if opts.signal else None
    targets = parse_targets(words)
    # one value each, compared whole by cancel.Filters (scancel.c _filter_job_records' xstrcmp)
    state = _state_given(opts.states) if opts.states is not None else None
    user = None
    if opts.user is not None:  # opt.c _opt_verify: uid_from_string, after the ids were read
        user = _user_named(opts.user)
        if user is None:
            raise error(f"Invalid user name: {opts.user}")
    filters = cancel.Filters(state, user, opts.name, opts.partition, opts.account, opts.qos, opts.nodelist,
                             opts.reservation, opts.wckey, user_text=opts.user)
    if not targets and not filters.given:
        raise error("No job identification provided")

    from ..siteconf import get

    cfg = get()
    verbose, quiet, batch, full = bool(opts.verbose), bool(opts.quiet), bool(opts.batch), bool(opts.full)
    strict = sig is not None or batch  # errors on unknown ids count only then
    # an ended job is told from an unknown one only where a message says which (-v, or errors that count)
    selection = cancel.select(cfg, targets, filters, tell_ended=verbose or strict)
    notes = cancel.told(selection, sig, batch=batch, full=full, verbose=verbose, strict=strict,
                        filters=filters)
    plans = selection.plans
    if opts.interactive:
        plans = [p for p in plans if _confirm(p)]
    rc = _say(notes, quiet)
    if plans:
        rc = max(rc, _say(cancel.deliver(cfg, plans, sig, batch=batch, full=full, verbose=verbose, strict=strict),
                          quiet))
    return rc


def _say(notes: Iterable[cancel.Note], quiet: bool) -> int:
    """Print each note on stderr as it comes (-Q hides errors and warnings); the exit status they make."""
    rc = 0
    for n in notes:
        if not (quiet and n.quiet_hides):
            print(n.text, file=sys.stderr)
        rc = max(rc, n.rc)
    return rc


def _confirm(p: Plan) -> bool:
    r = p.records[0]
    sys.stdout.write(f"Cancel job_id={p.label} name={r.name} partition={r.partition} [y/n]? ")
    sys.stdout.flush()
    answer = sys.stdin.readline().strip().lower()
    return answer.startswith("y")

