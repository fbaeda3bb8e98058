"""``sprio``: each pending job's priority and its factors, from what Grid Engine computed.

One ``qstat -u '*' -pri -ext -urg -r -s p -xml`` (every pending job's normalized tickets, urgency
with its resource, waiting-time and deadline contributions, POSIX priority, queue request) and one
``qconf -ssconf`` (the policy weights). Grid Engine's priority is
``weight_ticket*ntckts + weight_urgency*nurg + weight_priority*npprior``; sprio shows it on
Slurm's integer scale (2^32-1 = 1.0, as squeue's %Q) with these factors (README: "sprio"):

- FAIRSHARE: ``weight_ticket*ntckts`` (share tree, functional and override tickets);
- AGE: the waiting-time part of ``weight_urgency*nurg``; JOBSIZE: its resource-request part;
  SITE: its deadline part;
- QOS: ``weight_priority*npprior`` (the job's ``-p``; Slurm's nice maps to it); NICE: Slurm's nice
  (``-p`` negated);
- ASSOC, PARTITION, TRES: Grid Engine has no such factor (0, so the default layout omits them).

Held jobs (hqw) and jobs in error (Eqw) have no priority in Grid Engine's sense and are not shown,
as Slurm's held jobs (priority 0) are not.
"""

from __future__ import annotations

import sys

from ..operations import policies
from .. import siteconf
from ..errors import ShimError, for_command
from ..slurm.options.getopt import Table
from ..slurm.options.sources import Options
from ..slurm.options.spec import Arity, OptionSpec
from . import common
from ..slurm.render import report
from ..slurm.render import sprio as view

PROG = "sprio"
N, R, O = Arity.NONE, Arity.REQUIRED, Arity.OPTIONAL


_o = common.own_options(PROG, R)


# opts.c's long_options, in its order (glibc lists ambiguous candidates in this order)
OPTIONS: tuple[OptionSpec, ...] = (
    _o("autocomplete", None, help=""),
    _o("noheader", "h", N, help="no header line"),
    _o("jobs", "j", O, help="only these jobs (comma-separated; also the words after the options)"),
    _o("long", "l", N, help="every factor, and the user and nice columns"),
    _o("cluster", "M", dest="clusters", help=""),
    _o("clusters", "M", help="accepted: one cluster"),
    _o("norm", "n", N, help="normalized factors (0..1) instead of weighted ones"),
    _o("format", "o", help="layout with % letters (sprio --helpformat lists them)"),
    _o("sort", "S", help="sort by these letters, - for descending (default: job id)"),
    _o("partition", "p", help="only jobs of these partitions"),
    _o("user", "u", dest="users", help=""),
    _o("users", "u", help="only jobs of these users"),
    _o("verbose", "v", N, count=True, help="print the options first"),
    _o("version", "V", N, help="print the version"),
    _o("weights", "w", N, help="the weight of each factor"),
    _o("federation", None, N, help="accepted: one cluster"),
    _o("help", None, N, help="show this help"),
    _o("helpformat", None, N, help="the format letters"),
    _o("local", None, N, help="accepted: one cluster"),
    _o("sib", None, N, dest="sibling", help=""),
    _o("sibling", None, N, help="accepted: one cluster"),
    _o("usage", None, N, help="brief usage"),
)
TABLE = Table(PROG, OPTIONS, error_code=1)


def help_text() -> str:
    return report.help_text(PROG, OPTIONS, "Pending jobs' priorities and their factors, from Grid Engine's "
                            "tickets, urgency and POSIX priority.")


def usage_text() -> str:
    return ("Usage: sprio [-j jid[s]] [-u user_name[s]] [-o format] [-p partitions]\n"
            "   [--federation] [--local] [--sibling] [--usage] [-hlnvVw]\n")


error = for_command(PROG)  # Slurm's "<prog>: error: ..." (errors.command_error)


def _job_ids(text: str) -> list[int]:
    """opts.c _build_job_list: comma-separated ids, each slurm_xlate_job_id's (jobids.xlate_job_id);
    a bad one is fatal. N_k is job N: Grid Engine's tasks are one job (Slurm looks up the task's own
    job id)."""
    from ..slurm.jobids import xlate_job_id

    out = []
    for word in [w for w in text.split(",") if w]:
        job = xlate_job_id(word).job
        if job <= 0:
            raise error(f"Invalid job id: {word}")
        out.append(job)
    return out


def _users(text: str) -> tuple[set[str], list[str]]:
    """opts.c _build_user_list: names or uids (users.name_of); an unknown one is reported and skipped."""
    from ..slurm.users import name_of

    names, errs = set(), []
    for word in [w for w in text.split(",") if w]:
        name = name_of(word)
        if name is None:
            errs.append(f"{PROG}: error: Invalid user: {word}\n")
        else:
            names.add(name)
    return names, errs


def parse_args(argv: list[str]) -> tuple[Options, list[str]]:
    return common.command_line(TABLE, argv)


def main(argv: list[str]) -> int:
    import os

    o, positional = parse_args(argv)
    if o.help:
        sys.stdout.write(help_text())
        return 0
    if o.usage:
        sys.stdout.write(usage_text())
        return 0
    if o.helpformat:
        letters = list(view.LETTERS)
        sys.stdout.write("".join(("\n" if i and i % 8 == 0 else "") + f"%{c:<5}" for i, c in enumerate(letters)) + "\n")
        return 0
    if o.version:
        return common.print_version()
    if o.autocomplete is not None:
        return 0
    jobs_given = o.jobs is not None
    job_ids = _job_ids(o.jobs) if isinstance(o.jobs, str) else None
    if positional:
        if jobs_given and job_ids is None:
            job_ids = _job_ids(positional.pop(0))
        if positional:
            sys.stdout.write(usage_text())
            raise error(f"Unrecognized option: {positional[0]}")
    if o.long and o.format:
        raise ShimError(f"{PROG}: fatal: Options -o(--format) and -l(--long) are mutually exclusive. "
                        "Please remove one and retry.", code=1)
    fmt = o.format
    if fmt is None and not o.long:
        fmt = os.environ.get("SPRIO_FORMAT") or None
    users, user_errors = _users(o.users) if o.users else (None, [])
    for e in user_errors:
        sys.stderr.write(e)
    if o.verbose:
        sys.stdout.write("-----------------------------\n"
                         f"format     = {fmt if fmt is not None else '(null)'}\n"
                         f"job_flag   = {int(jobs_given)}\n"
                         f"jobs       = {o.jobs if isinstance(o.jobs, str) else '(null)'}\n"
                         f"partition  = {o.partition or '(null)'}\n"
                         f"users      = {o.users or '(null)'}\n"
                         f"verbose    = {o.verbose}\n"
                         "-----------------------------\n\n\n")

    cfg = siteconf.get()
    from ..gridengine import backends
    from ..gridengine.engine import Refused

    backend = backends.get(cfg)
    try:
        pending = backend.priorities()
    except Refused as e:
        raise error(f"Couldn't get priority factors from controller: {e.text}") from None
    sconf = backend.scheduler_config() or {}  # (no weights: every factor 0)
    w = policies.weights(sconf)
    listed = policies.select_priorities(policies.priority_rows(cfg, pending, sconf), job_ids, users,
                                        {p for p in o.partition.split(",") if p} if o.partition else None)
    if fmt is None:
        fmt = view.default_format(bool(o.norm), bool(o.long), users is not None, w)
    errors: list[str] = []
    fields = view.parse_format(fmt, errors)
    for e in errors:
        sys.stderr.write(f"{PROG}: error: Invalid job format specification: {e}\n")
    if job_ids is not None and not listed:
        sys.stdout.write("Unable to find jobs matching user/id(s) specified\n")
        return 0
    sys.stdout.write(view.render(fields, view.sort_rows(listed, o.sort), w, header=not o.noheader,
                                 weights_only=bool(o.weights)))
    return 0
