"""``squeue``: Slurm's queue view of Grid Engine's jobs (one ``qstat`` call per run).

The qstat call starts as soon as the options are read and the site config is known; the job
records, renderers and the rest are imported while it runs (``main``)."""

from __future__ import annotations

import os
import sys
import time

from .. import users as passwd
from ..errors import ShimError
from . import common
from ..options.getopt import Table, getopt
from ..options.sources import Options, apply, env_parsed
from ..options.spec import Arity, Fate, OptionSpec

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (backends/__init__.py)
if TYPE_CHECKING:
    from .. import jobs
    from ..backends.qstat import Query
    from ..render import fmt
    from ..render import squeue as view

PROG = "squeue"
N, R, O = Arity.NONE, Arity.REQUIRED, Arity.OPTIONAL


_o = common.own_options(PROG, R)


OPTIONS: tuple[OptionSpec, ...] = (
    _o("account", "A", env="SQUEUE_ACCOUNT", help="comma separated list of accounts to view"),
    _o("accounts", None, dest="account"),
    _o("all", "a", N, env="SQUEUE_ALL", help="display jobs in hidden partitions (all are shown)"),
    _o("array", "r", N, env="SQUEUE_ARRAY", help="display one job array element per line"),
    _o("array-unique", None, N, env="SQUEUE_ARRAY_UNIQUE", help="one unique pending job array element per line"),
    _o("cluster", None, dest="clusters"),
    _o("clusters", "M", env="SLURM_CLUSTERS", help="cluster to issue commands to (this one)"),
    _o("federation", None, N, env="SQUEUE_FEDERATION", help="accepted, no federation on Grid Engine",
       fate=Fate.WARN),
    _o("Format", "O", env="SQUEUE_FORMAT2", dest="format_long", help="format specification (long names)"),
    _o("format", "o", env="SQUEUE_FORMAT", help="format specification (%% letters)"),
    _o("help", None, N, help="show this help message", fate=Fate.LOCAL),
    _o("hide", None, N, help="do not display jobs in hidden partitions"),
    _o("iterate", "i", help="repeat the report every so many seconds"),
    _o("jobs", "j", O, dest="jobs", help="comma separated list of job IDs to view"),
    _o("json", None, N, help="produce JSON output"),
    _o("licenses", "L", env="SQUEUE_LICENSES", help="comma separated list of license names to view"),
    _o("local", None, N, env="SQUEUE_LOCAL", help="jobs of the local cluster only"),
    _o("long", "l", N, help="long report"),
    _o("me", None, N, help="equivalent to --user=<my user name>"),
    _o("name", "n", env="SQUEUE_NAMES", help="comma separated list of job names to view"),
    _o("noconvert", None, N, help="don't convert units (2048M stays 2048M)"),
    _o("node", None, dest="nodelist"),
    _o("nodelist", "w", help="list of nodes to view"),
    _o("nodes", None, dest="nodelist"),
    _o("noheader", "h", N, help="no headers on output"),
    _o("only-job-state", None, N, help="only the job id and state"),
    _o("partition", "p", env="SQUEUE_PARTITION", dest="partitions", help="comma separated list of partitions"),
    _o("partitions", None, dest="partitions"),
    _o("priority", "P", N, env="SQUEUE_PRIORITY", help="list pending jobs once per partition"),
    _o("qos", "q", env="SQUEUE_QOS", help="comma separated list of qos's to view"),
    _o("reservation", "R", help="reservation to view (a Grid Engine advance reservation)"),
    _o("sibling", None, N, env="SQUEUE_SIBLING", help="accepted, no federation on Grid Engine"),
    _o("sort", "S", env="SQUEUE_SORT", help="comma separated list of fields to sort on"),
    _o("start", None, N, help="print expected start times of pending jobs"),
    _o("steps", "s", O, dest="steps", help="comma separated list of job steps to view"),
    _o("states", "t", env="SQUEUE_STATES", help="comma separated list of states to view, or all"),
    _o("usage", None, N, help="display a brief summary of squeue options", fate=Fate.LOCAL),
    _o("user", "u", env="SQUEUE_USERS", dest="users", help="comma separated list of users to view"),
    _o("users", None, dest="users"),
    _o("verbose", "v", N, count=True, help="verbosity level"),
    _o("version", "V", N, help="output version information and exit", fate=Fate.LOCAL),
    _o("yaml", None, N, help="produce YAML output"),
)

TABLE = Table(PROG, OPTIONS, error_code=1)

USAGE = """\
Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid]
              [-n name] [-o format] [-p partitions] [--qos qos]
              [--reservation reservation] [--sort fields] [--start]
              [--step step_id] [-t states] [-u user_name] [--usage]
              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]
	      [-ahjlrsv]
"""


def help_text() -> str:
    lines = ["Usage: squeue [OPTIONS]"]
    for s in OPTIONS:
        if not s.help:
            continue
        short = f"-{s.short}, " if s.short else "    "
        arg = {N: "", R: "=value", O: "[=value]"}[s.arity]
        lines.append(f"  {short}--{s.long}{arg}".ljust(36) + s.help)
    lines += ["", "Help options:", "  --help                          show this help message",
              "  --usage                         display a brief summary of squeue options", ""]
    return "\n".join(lines)


def error(msg: str, code: int = 1) -> ShimError:
    return ShimError(f"{PROG}: error: {msg}", code=code)


def parse_args(argv: list[str], environ=None) -> tuple[Options, list, list[str]]:
    environ = os.environ if environ is None else environ
    parsed, positional = getopt(TABLE, argv, stop_at_positional=False)
    opts = Options()
    apply(opts, TABLE, env_parsed(TABLE, environ), "env")
    apply(opts, TABLE, parsed, "cli")
    # squeue's -j and -s take an optional argument: "-j 12" leaves 12 as the next word
    rest = list(positional)
    if opts.jobs is True:
        opts["jobs"] = rest.pop(0) if rest else True
    if opts.steps is True:
        opts["steps"] = rest.pop(0) if rest else True
    if rest:
        raise ShimError(f"{PROG}: error: Unrecognized option: {rest[0]}", USAGE.rstrip("\n"), code=1)
    return opts, parsed, rest


def parse_job_ids(text: str) -> list[tuple[int, int | None]]:
    """-j: ``N`` or ``N_k``, comma separated, read as Slurm's squeue reads them (jobids.squeue_jobs)."""
    from ..jobids import JobIdError, squeue_jobs

    try:
        return [(j.job, j.task) for j in squeue_jobs(text)]
    except JobIdError as e:
        raise error(str(e)) from None


def parse_steps(text: str) -> list[tuple[int, int | None]]:
    """--steps: ``N[_k].S``, comma separated (jobids.squeue_steps); the jobs (and indices) named."""
    from ..jobids import JobIdError, squeue_steps

    try:
        return [(j.job, j.task) for j in squeue_steps(text)]
    except JobIdError as e:
        raise error(str(e)) from None


def choose_format(opts: Options, parsed: list) -> tuple[str, str]:
    """("percent" | "long", format text): the last -o/-O on the command line, else the
    environment (SQUEUE_FORMAT2 before SQUEUE_FORMAT), else the mode's default."""
    from ..render import squeue as view

    for spec, value in reversed(parsed):
        if spec.key == "format":
            return "percent", value
        if spec.key == "format_long":
            return "long", value
    if opts.format_long and opts.source.get("format_long") == "env":
        return "long", opts.format_long
    if opts.format and opts.source.get("format") == "env":
        return "percent", opts.format
    if opts.steps is not None:
        return "percent", view.STEPS_FORMAT
    if opts.only_job_state:
        return "percent", "%.18i %.2t"
    if opts.start:
        return "percent", view.START_FORMAT
    if opts.long:
        return "percent", view.LONG_FORMAT
    return "percent", view.DEFAULT_FORMAT


def build_format(kind: str, text: str) -> fmt.Format:
    from ..render import fmt
    from ..render import squeue as view

    errors: list[str] = []
    if kind == "long":
        f = fmt.parse_long(text, view.REGISTRY, errors=errors)
    else:
        f = fmt.parse_percent(text, view.REGISTRY, all_letters=view.ALL_LETTERS, errors=errors)
    for e in errors:
        print(f"{PROG}: error: Invalid job format specification: {e}", file=sys.stderr)
    return f


def select(jl: jobs.JobList, opts: Options, ctx: view.Ctx, states: set[str] | None,
           job_ids: list[tuple[int, int | None]] | None, users: set[str] | None) -> list:
    from .. import jobs

    cfg = ctx.cfg
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
    if states is not None:
        from ..model import shown_state  # -t R is not a stopped job, -t ST is (Slurm's _filter_job)

        recs = [r for r in recs if shown_state(r) in states]
    if users is not None:
        recs = [r for r in recs if r.user in users]
    if opts.name:
        names = set(opts.name.split(","))
        recs = [r for r in recs if r.name in names]
    if opts.partitions:
        parts = set(opts.partitions.split(","))
        recs = [r for r in recs if r.partition in parts]
    if opts.account:
        accts = {a.lower() for a in opts.account.split(",")}
        recs = [r for r in recs if (jobs.detail(r, cfg).account or "").lower() in accts]
    if opts.qos:
        qs = {a.lower() for a in opts.qos.split(",")}
        recs = [r for r in recs if (jobs.detail(r, cfg).qos or "normal").lower() in qs]
    if opts.licenses:
        want = set(opts.licenses.split(","))
        recs = [r for r in recs if {x.split(":")[0] for x in filter(None, jobs.detail(r, cfg).licenses.split(","))} & want]
    if opts.nodelist:
        from ..hostlist import expand

        hosts = set(expand(opts.nodelist))  # one call: one cap on the whole list (F-11)
        if "localhost" in hosts:
            hosts.add(os.uname().nodename.split(".")[0])
        recs = [r for r in recs if set(r.nodes) & hosts]
    if opts.reservation:  # squeue's _filter_job: the job's reservation name is the one asked for
        from .common import fill_reservations

        fill_reservations(recs, cfg)
        recs = [r for r in recs if r.extra.get("reservation") == opts.reservation]
    return recs



# the fields whose text the pending reasons decide: Reason, ReasonList, and StartTime (a job
# waiting for --begin shows its begin time, decided with the reasons: jobs._refine_reasons)
REASON_FIELDS = frozenset({"Reason", "ReasonList", "StartTime"})


def shows_reasons(opts: Options, kind: str, ftext: str) -> bool:
    """Does the output show or sort by what the pending reasons decide? Without, no resource
    quota is asked about (policy.reasons_for: ~10 ms) and ``-j``'s jobs need no whole-queue
    listing for their reasons (jobs.list_jobs' ``reasons``): e.g. Parsl's and Nextflow's
    ``squeue -h -o '%i %t'`` polls. --json, --yaml and anything unreadable: True."""
    if opts.json or opts.yaml:
        return True
    if opts.steps is not None:
        return False  # a step's view shows no job reason (steps belong to running jobs)
    from ..render import fmt
    from ..render import squeue as view

    try:
        f = fmt.parse_long(ftext, view.REGISTRY, errors=[]) if kind == "long" else \
            fmt.parse_percent(ftext, view.REGISTRY, all_letters=view.ALL_LETTERS, errors=[])
        fields = [c.field for c in f.columns]
        if opts.sort:
            fields += [spec for spec, _ in fmt.parse_sort(opts.sort, view.REGISTRY)]
    except Exception:  # noqa: BLE001 - the real parse reports it; until then, assume reasons are shown
        return True
    return any(getattr(x, "name", None) in REASON_FIELDS for x in fields)


def sort_keys(opts: Options) -> list:
    """-S: the fields to sort by, with their direction (empty without -S)."""
    from ..render import fmt
    from ..render import squeue as view

    if not opts.sort:
        return []
    try:
        return fmt.parse_sort(opts.sort, view.REGISTRY)
    except fmt.FormatError as e:
        raise error(f"Invalid sort specification: {e.spec}")


def fill_detail(recs: list, cfg, fields: list) -> None:
    """Read the submit-record detail (jobs.detail) of the records whose shown or sorted fields
    need it, and the group's name where it is shown, before sorting and rendering: the renderer
    reads no file."""
    from .. import jobs
    from ..render import squeue as view

    if view.shows_group(fields):
        for r in recs:
            r.group = r.group or jobs.group_name(r.gid)
    if view.shows_reservation(fields):
        from .common import fill_reservations

        fill_reservations(recs, cfg)
    wanted = view.detail_wanted(fields)
    if wanted is None:
        return
    for r in recs:
        if wanted(r):
            jobs.detail(r, cfg)


def sort_records(recs: list, opts: Options, ctx: view.Ctx, keys: list | None = None,
                 listed: list | None = None) -> list:
    """``recs`` in squeue's order; ``listed``: every job of the listing, before -t/-u/... chose
    ``recs`` (where an array's records were created depends on its other tasks)."""
    from ..render import fmt
    from ..render import squeue as view

    if not recs:
        return []
    created = created_key(recs, listed)
    if opts.sort or opts.start:
        base = sorted(recs, key=created)
        if opts.sort:
            return fmt.sort_rows(base, sort_keys(opts) if keys is None else keys, ctx)
        return sorted(base, key=lambda r: (r.start_time is None, r.start_time.timestamp() if r.start_time else 0))
    # Slurm's default "P,t,-p" (partition, compact state, priority down); ties keep the job list's
    # order (one sort on both: the same order as the stable sorts one after the other)
    codes = view.STATE_CODES
    return sorted(recs, key=lambda r: (r.partition, codes.get(r.state, r.state), -r.priority, created(r)))


def controller_order(recs: list, listed: list | None = None) -> list:
    """``recs`` in the controller's list order (``created_key``)."""
    return sorted(recs, key=created_key(recs, listed)) if recs else []


def created_key(recs: list, listed: list | None = None):
    """A sort key that puts records in the order Slurm's controller lists them, which squeue's sorts keep for ties
    (squeue/sort.c: each key is one list_sort, from the last key to the first, and list_sort is
    glibc's qsort, a stable merge sort on Debian 12's glibc 2.36). slurmctld appends a job's
    record to its job list when it is created (job_mgr.c _create_job_record, list_append) and
    pack_all_jobs walks the list in that order: a job at its submission; an array's task when it
    is split from the array's record, i.e. when it starts (job_array_split), except the task that
    starts last, which is the array's own record and keeps the array's place. So: by the time the
    record was created (submission, or the task's start), then job id and index.

    A running job's submission time is not in qstat's listing (only its start) and is read only
    where a field needs it. Job ids grow with submission, so a record created at submission was
    created no later than any record of a later id: its time is the earliest known (submission,
    else start) of its own id and every later one. That keeps records created at submission in id
    order whatever is known of their times, and places a split task after every job submitted
    before the earliest time known of the jobs that follow."""
    every = recs if listed is None else listed
    waiting: set[int] = set()
    last: dict[int, tuple] = {}  # array -> (start, index) of its task that started last (the array's own record)
    known: dict[int, object] = {}  # job id -> the earliest time known of its record created at submission
    for r in every:
        if r.array_pending is not None or (r.array_task is not None and r.start_time is None and r.state == "PENDING"):
            waiting.add(r.job_id)
        elif r.array_task is not None and r.start_time is not None:
            mark = (r.start_time, r.array_task)
            if last.get(r.job_id, mark) <= mark:
                last[r.job_id] = mark
    for job in waiting:
        last.pop(job, None)
    for r in every:
        if r.array_task is not None and r.start_time is not None and last.get(r.job_id) != (r.start_time, r.array_task):
            continue  # a split task: created at its start
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
        if task is None:
            return (created_at.get(r.job_id) or r.submit_time or r.start_time or epoch, 0, r.job_id, -1)
        start = r.start_time
        if start is not None and last.get(r.job_id) != (start, task):
            return (start, 1, r.job_id, task)  # split from the array when it started
        return (created_at.get(r.job_id) or r.submit_time or start or epoch, 0, r.job_id, task)

    return created


def parse_states(text: str) -> set[str] | None:
    """-t: long names or compact codes, any case, comma separated (Slurm's job_state_num); "all"
    for every state."""
    from ..model import state_list, state_named

    out: set[str] = set()
    for tok in text.split(","):
        t = tok.strip()
        if not t:
            continue
        if t.upper() == "ALL":
            return None
        state = state_named(t)
        if state is None:
            raise ShimError(f"{PROG}: error: Invalid job state specified: {tok}",
                            f"{PROG}: error: Valid job states include: {state_list()}", "", code=1)
        out.add(state.long)
    return out


def __getattr__(name: str):
    """``VALID_STATES`` (completion.py reads it): Slurm's state list, from model's one table, made
    only when asked so that squeue's start does not import the model before qstat runs."""
    if name == "VALID_STATES":
        from ..model import state_list

        return state_list()
    raise AttributeError(name)


def resolve_users(text: str) -> tuple[set[str], list[str]]:
    """-u: names or numeric uids (users.name_of); returns (known names, unknown words)."""
    names: set[str] = set()
    bad: list[str] = []
    for tok in text.split(","):
        tok = tok.strip()
        if not tok:
            continue
        name = passwd.name_of(tok)
        if name is None:
            bad.append(tok)
        else:
            names.add(name)
    return names, bad


def main(argv: list[str]) -> int:
    # ~10 containers per job and no cycles worth collecting: without the cyclic collector, a
    # 10,000-job listing takes a third less time
    import gc

    collecting = gc.isenabled()
    gc.disable()
    try:
        return _main(argv)
    finally:
        if collecting:
            gc.enable()


def _main(argv: list[str]) -> int:
    opts, parsed, _ = parse_args(argv)
    if opts.help:
        sys.stdout.write(help_text())
        return 0
    if opts.usage:
        sys.stdout.write(USAGE)
        return 0
    if opts.version:
        from .. import SLURM_VERSION

        sys.stdout.write(f"slurm-wlm {SLURM_VERSION}\n")
        return 0

    states: set[str] | None = parse_states(opts.states) if opts.states else {"PENDING"} if opts.start else None
    job_ids = parse_job_ids(opts.jobs) if isinstance(opts.jobs, str) else None
    if opts.steps is not None and isinstance(opts.steps, str):
        job_ids = (job_ids or []) + parse_steps(opts.steps)
    users: set[str] | None = None
    user_errors: list[str] = []
    if opts.users:
        users, user_errors = resolve_users(opts.users)
    if opts.me:
        users = (users or set()) | {passwd.current()}
    if opts.nodelist:  # a bad or oversized -w fails here, before qstat, as Slurm's option parsing does
        from ..hostlist import count

        count(opts.nodelist)

    from ..siteconf import get

    cfg = get()
    period = 0
    if opts.iterate:
        try:
            period = max(1, int(opts.iterate))
        except ValueError:
            raise error(f"Invalid iterate value: {opts.iterate}")
    # qstat is the long pole: start it now, and import and prepare the rest while it runs
    from ..backends import qstat as q

    now = time.time()
    if job_ids and not (opts.json or opts.yaml):
        # -j: the named jobs' records alone (jobs.list_jobs' ``only``): the caller's own jobs are
        # listed first, not the whole queue
        me = passwd.own_name()  # (None: jobs.list_jobs asks qstat -j first)
        started = q.start(cfg, q.listing_args([me])) if me else None
    elif users and not (opts.json or opts.yaml):  # -u/--me: those users' jobs (jobs.list_jobs' ``users``)
        started = q.start(cfg, q.listing_args(sorted(users)))
    else:
        started = q.start(cfg)
    try:
        from .. import jobs
        from ..render import squeue as view

        if states is None and not opts.states:
            states = set(jobs.ACTIVE_STATES)
        ctx = view.Ctx(cfg, convert=not opts.noconvert)
        ctx.now = now
        kind, ftext = choose_format(opts, parsed)
        if period:
            try:
                while True:
                    _run_once(cfg, ctx, opts, kind, ftext, states, job_ids, users, user_errors, dated=True,
                              started=started)
                    started = None
                    sys.stdout.write("\n")
                    sys.stdout.flush()
                    time.sleep(period)
            except KeyboardInterrupt:
                return 0
        return _run_once(cfg, ctx, opts, kind, ftext, states, job_ids, users, user_errors,
                         dated=bool(opts.long or opts.verbose), started=started)
    finally:
        if started is not None:
            started.close()


def _run_once(cfg, ctx, opts, kind, ftext, states, job_ids, users, user_errors, *, dated: bool,
              started: Query | None = None) -> int:
    from .. import jobs
    from ..render import fmt
    from ..render import squeue as view

    if started is None:
        ctx.now = time.time()
    want_ended = bool(opts.json or opts.yaml or job_ids or states is None or
                      any(s not in jobs.ACTIVE_STATES for s in states))
    # -j: the ended jobs' records of those ids only (--json and --yaml print every job)
    only = {j for j, _t in job_ids} if job_ids and not (opts.json or opts.yaml) else None
    shown = shows_reasons(opts, kind, ftext)
    jl = jobs.list_jobs(cfg, ended=want_ended, now=ctx.now, started=started, only=only, reasons=shown,
                        quotas=shown, users=sorted(users) if users and only is None and not (opts.json or opts.yaml)
                        else None)

    if opts.json or opts.yaml:
        for r in jl.records:  # every field of every job
            jobs.detail(r, cfg)
            r.group = r.group or jobs.group_name(r.gid)
        from .common import fill_reservations

        fill_reservations(jl.records, cfg)
        recs = sort_records(jl.records, opts, ctx)
        text = view.json_document(recs, ctx) if opts.json else yaml_document(recs, ctx)
        sys.stdout.write(text + "\n")
        return 0

    if job_ids is not None and len(job_ids) == 1 and job_ids[0][0] not in jl.known:
        raise ShimError("slurm_load_jobs error: Invalid job id specified", code=1)

    recs = select(jl, opts, ctx, states, job_ids, users)
    if opts.array:
        recs = jobs.expand_array(recs)
    keys = sort_keys(opts)
    if opts.steps is not None:
        f = fmt.parse_percent(ftext, view.STEP_REGISTRY) if kind == "percent" else \
            fmt.parse_long(ftext, view.STEP_REGISTRY)
    else:
        f = build_format(kind, ftext)
    fill_detail(recs, cfg, [c.field for c in f.columns] + [spec for spec, _ in keys])
    recs = sort_records(recs, opts, ctx, keys, jl.records)
    out: list[str] = []
    if dated:
        from datetime import datetime

        out.append(datetime.fromtimestamp(ctx.now).strftime("%a %b %d %H:%M:%S %Y"))
    if opts.clusters:
        out.append(f"CLUSTER: {cfg.cluster.name}")
    if opts.steps is not None:
        out += fmt.render_lines(f, view.steps_rows(recs), ctx, header=not opts.noheader)
    else:
        out += fmt.render_lines(f, recs, ctx, header=not opts.noheader)
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))
    for u in user_errors:
        sys.stdout.flush()
        print(f"{PROG}: error: Invalid user: {u}\n", file=sys.stderr)
    return 0


def yaml_document(recs: list, ctx: view.Ctx) -> str:
    """``--yaml``: the ``--json`` document in Slurm's YAML dialect (render/yaml, shared with sacct)."""
    import json as _json

    from ..render import squeue as view
    from ..render import yaml

    return yaml.document(_json.loads(view.json_document(recs, ctx)))
