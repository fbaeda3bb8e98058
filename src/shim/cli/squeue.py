"""``squeue``: Slurm's queue view of Grid Engine's jobs (one ``qstat`` call per run).

This module parses the command line, calls squeue's selection and order (``shim.operations.jobqueue``) and
renders (``render/squeue.py``). The qstat call starts as soon as the options are read and the site
config is known; the job records, renderers and the rest are imported while it runs (``main``)."""

from __future__ import annotations

import os
import sys
import time

from ..slurm import users as passwd
from ..errors import ShimError, for_command
from . import common
from ..slurm.options.getopt import Table
from ..slurm.options.sources import Options, apply, env_parsed
from ..slurm.options.spec import Arity, Fate, OptionSpec

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from ..operations import jobqueue
    from ..gridengine.qstat import Query as Started
    from ..slurm.render import fmt
    from ..slurm.render import squeue as view

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
    _o("helpformat", None, N, help="list the fields of --format", fate=Fate.LOCAL),
    _o("helpFormat", None, N, help="list the fields of --Format", fate=Fate.LOCAL),
    _o("helpstate", None, N, help="list the states of --states", fate=Fate.LOCAL),
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
    _o("running-over", None, help="running jobs that have run at least this long"),
    _o("running-under", None, help="running jobs that have run less than this long"),
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

TABLE = Table(PROG, OPTIONS, error_code=1)  # every release's options (releases.py: which each has)
# what squeue's getopt loop answers where it meets it, before any later word is read
ANSWERS = ("help", "usage", "version", "helpformat", "helpFormat", "helpstate")


def release_table(release=None) -> Table:
    """The options of the site's Slurm release (releases.current): a newer release's option is
    that release's ``unrecognized option`` on an older one, and one it dropped on a newer."""
    from ..slurm import releases

    release = release or releases.current()
    return Table(PROG, [o for o in OPTIONS if release.knows(PROG, o.long)], error_code=1)


def usage_text(release=None) -> str:
    from ..slurm import releases

    return (release or releases.current()).usage.get(PROG, USAGE)

USAGE = """\
Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid]
              [-n name] [-o format] [-p partitions] [--qos qos]
              [--reservation reservation] [--sort fields] [--start]
              [--step step_id] [-t states] [-u user_name] [--usage]
              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]
	      [-ahjlrsv]
"""


def help_text(release=None) -> str:
    from ..slurm import releases
    from ..slurm.render.help import options_help

    release = release or releases.current()
    lists = [line for long, line in HELP_LISTS if release.knows(PROG, long)]
    rows = [o for o in OPTIONS if release.knows(PROG, o.long)]
    return options_help(rows, "Usage: squeue [OPTIONS]", width=36, tail=(
        "", "Help options:", "  --help                          show this help message", *lists,
        "  --usage                         display a brief summary of squeue options"))


# --help's lines of the list options, as 24.11 and 26.05 print them
HELP_LISTS = (
    ("helpformat", "  --helpformat                    print a list of fields that can be specified\n"
                   "                                  with '--format=' option"),
    ("helpFormat", "  --helpFormat                    print a list of fields that can be specified\n"
                   "                                  with '--Format=' option"),
    ("helpstate", "  --helpstate                     print a list of states that can use specified\n"
                  "                                  with '--states=' option"),
)


error = for_command(PROG)  # Slurm's "<prog>: error: ..." (errors.command_error)


def parse_args(argv: list[str], environ=None) -> tuple[Options, list, list[str]]:
    environ = os.environ if environ is None else environ
    table = release_table()
    parsed, positional = common.getopt_answering(table, argv, ANSWERS)
    opts = Options()
    apply(opts, table, env_parsed(table, environ), "env")
    apply(opts, table, parsed, "cli")
    # squeue's -j and -s take an optional argument: "-j 12" leaves 12 as the next word
    rest = list(positional)
    if opts.jobs is True:
        opts["jobs"] = rest.pop(0) if rest else True
    if opts.steps is True:
        opts["steps"] = rest.pop(0) if rest else True
    if rest:
        raise ShimError(f"{PROG}: error: Unrecognized option: {rest[0]}", usage_text().rstrip("\n"), code=1)
    if opts.only_job_state:
        from ..slurm import releases

        keys, fatal = releases.current().conflicts.get(f"{PROG} --only-job-state", ((), ""))
        if any(opts.get(k) not in (None, False) for k in keys):
            raise ShimError(fatal, code=1)
    for key in ("running_over", "running_under"):  # (26.05: a time as --time takes it, in seconds)
        if opts.get(key) is not None:
            opts[key] = running_time(opts[key])
    return opts, parsed, rest


def running_time(text: str) -> int:
    """--running-over/--running-under's time (time_str2secs: M, M:S, H:M:S, D-H...) in seconds;
    a malformed one, 0 and UNLIMITED are 26.05's fatal error."""
    from ..slurm.options.values import time_seconds

    secs = time_seconds(text)
    if secs is None or secs <= 0:
        raise ShimError(f"{PROG}: fatal: Invalid time limit specification", code=1)
    return secs


def answer(key: str, release=None) -> str:
    """What --help, --usage, -V and the lists (--helpformat, --helpFormat, --helpstate) print."""
    from ..slurm import releases

    release = release or releases.current()
    if key == "help":
        return help_text(release)
    if key == "usage":
        return usage_text(release)
    if key == "version":
        return releases.version_line(release=release)
    if key == "helpstate":
        return "".join(f"{s}\n" for s in release.job_states or ())
    return release.texts[f"{PROG} --{key}"]


def parse_job_ids(text: str) -> list[tuple[int, int | None]]:
    """-j: ``N`` or ``N_k``, comma separated, read as Slurm's squeue reads them (jobids.squeue_jobs)."""
    from ..slurm.jobids import squeue_jobs

    return _ids(squeue_jobs, text)


def parse_steps(text: str) -> list[tuple[int, int | None]]:
    """--steps: ``N[_k].S``, comma separated (jobids.squeue_steps); the jobs (and indices) named."""
    from ..slurm.jobids import squeue_steps

    return _ids(squeue_steps, text)


def _ids(grammar, text: str) -> list[tuple[int, int | None]]:
    from ..slurm.jobids import JobIdError

    try:
        return [(j.job, j.task) for j in grammar(text)]
    except JobIdError as e:
        raise error(str(e)) from None


def choose_format(opts: Options, parsed: list) -> tuple[str, str]:
    """("percent" | "long", format text): the last -o/-O on the command line, else the
    environment (SQUEUE_FORMAT2 before SQUEUE_FORMAT), else the mode's default."""
    from ..slurm.render import squeue as view

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
    if opts.start:
        return "percent", view.START_FORMAT
    if opts.only_job_state:  # -l's date line, never its columns
        return "percent", view.ONLY_STATE_FORMAT
    if opts.long:
        return "percent", view.LONG_FORMAT
    return "percent", view.DEFAULT_FORMAT


def build_format(kind: str, text: str) -> fmt.Format:
    from ..slurm.render import fmt
    from ..slurm.render import squeue as view

    errors: list[str] = []
    if kind == "long":
        f = fmt.parse_long(text, view.REGISTRY, errors=errors)
    else:
        f = fmt.parse_percent(text, view.REGISTRY, all_letters=view.ALL_LETTERS, errors=errors)
    for e in errors:
        print(f"{PROG}: error: Invalid job format specification: {e}", file=sys.stderr)
    return f


def parse_states(text: str) -> set[str] | None:
    """-t: long names or compact codes, any case, comma separated (Slurm's job_state_num); "all"
    for every state."""
    from ..slurm.model import state_list, state_named

    out: set[str] = set()
    for tok in text.split(","):
        t = tok.strip()
        if not t:
            continue
        if t.upper() == "ALL":
            return None
        state = state_named(t)
        if state is None:
            from ..slurm import releases

            named = releases.current().job_states
            if named and t.lower() in named:  # a state of this release no Grid Engine job is in (26.05's
                out.add(t.upper())  # expediting): taken, and it matches no job
                continue
            raise ShimError(f"{PROG}: error: Invalid job state specified: {tok}",
                            f"{PROG}: error: Valid job states include: {','.join(named) if named else state_list()}",
                            "", code=1)
        out.add(state.long)
    return out


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


def _json_filters() -> bool:
    """Whether the release's --json and --yaml keep the jobs the filters keep (24.11's and
    26.05's layouts; 22.05's lists every job whatever the filters)."""
    from ..slurm import releases
    from ..slurm.render.openapi import layout_of

    return layout_of(releases.current()) is not None


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
    asked = next((spec.key for spec, _ in parsed if spec.key in ANSWERS), None)  # the first one met
    if asked is not None:
        sys.stdout.write(answer(asked))
        return 0

    states: set[str] | None = parse_states(opts.states) if opts.states else {"PENDING"} if opts.start else None
    job_ids = parse_job_ids(opts.jobs) if isinstance(opts.jobs, str) else None
    if opts.steps is not None and isinstance(opts.steps, str):
        job_ids = (job_ids or []) + parse_steps(opts.steps)
    users: set[str] | None = None
    user_errors: list[str] = []
    # -u and --me set one user list (squeue/opts.c: each replaces params.users, the later on the
    # command line wins, and either beats SQUEUE_USERS)
    who = [spec.key for spec, _ in parsed if spec.key in ("users", "me")]
    if who and who[-1] == "me":
        users = {passwd.current()}
    elif opts.users:
        users, user_errors = resolve_users(opts.users)
    if opts.nodelist:  # a bad or oversized -w fails here, before qstat, as Slurm's option parsing does
        from ..slurm.hostlist import count

        count(opts.nodelist)

    from ..siteconf import get

    cfg = get()
    period = 0
    if opts.iterate:
        try:
            period = max(1, int(opts.iterate))
        except ValueError:
            raise error(f"Invalid iterate value: {opts.iterate}")
    # what the listing holds: -j's jobs alone (jobs.list_jobs' ``only``: the caller's own jobs are
    # listed first, not the whole queue), else -u/--me's users' jobs (its ``users``); --json and
    # --yaml print every job in 22.05's layout, and filter as the text does in 24.11's and 26.05's
    # (render/openapi.py: the release's layout)
    whole = bool(opts.json or opts.yaml) and not _json_filters()
    only = {j for j, _t in job_ids} if job_ids and not whole else None
    # (--only-job-state's records name no user: every user's jobs are listed, jobqueue.state_only)
    listed = sorted(users) if users and only is None and not whole and not opts.only_job_state else None
    # qstat is the long pole: start it now, and import and prepare the rest while it runs
    from ..gridengine import backends, qstat as q

    now = time.time()
    if only:
        me = passwd.own_name()  # (None: jobs.list_jobs asks qstat -j first)
        started = backends.start_qstat(cfg, q.listing_args([me])) if me else None
    elif listed:
        started = backends.start_qstat(cfg, q.listing_args(listed))
    else:
        started = backends.start_qstat(cfg)
    try:
        from ..operations import jobqueue
        from ..slurm.render import squeue as view

        qy = jobqueue.query(opts, states, job_ids, users, user_errors, only=only, listed=listed)
        qy.whole = whole
        ctx = view.Ctx(cfg, convert=not opts.noconvert)
        ctx.now = now
        kind, ftext = choose_format(opts, parsed)
        if period:
            try:
                while True:
                    _run_once(cfg, ctx, opts, qy, kind, ftext, dated=True, started=started)
                    started = None
                    sys.stdout.write("\n")
                    sys.stdout.flush()
                    time.sleep(period)
            except KeyboardInterrupt:
                return 0
        if opts.json or opts.yaml:
            ctx.client = common.json_client(PROG, argv)
        return _run_once(cfg, ctx, opts, qy, kind, ftext, dated=bool(opts.long or opts.verbose), started=started)
    finally:
        if started is not None:
            started.close()


WRITE_BATCH = 4096  # rows rendered and written at a time


def _run_once(cfg, ctx: view.Ctx, opts: Options, qy: jobqueue.Query, kind: str, ftext: str, *, dated: bool,
              started: Started | None = None) -> int:
    """One report: the listing the query reads (jobqueue.listing), the records it shows in squeue's
    order (jobqueue.select, fill_detail, sort_records), rendered."""
    from ..operations import jobqueue
    from ..slurm.render import fmt
    from ..slurm.render import squeue as view

    if started is None:
        ctx.now = time.time()
    jl = jobqueue.listing(cfg, qy, now=ctx.now, started=started,
                          reasons=(bool(opts.json or opts.yaml) or jobqueue.shows_reasons(qy, kind, ftext))
                          and not qy.state_only)  # (--json: every field, whatever -o says)
    if qy.state_only and not qy.whole:
        jobqueue.state_only(jl)
    if opts.json or opts.yaml:  # every field of every job (of those the filters keep, but on 22.05)
        if not qy.whole:
            jl.records = jobqueue.select(jl, qy, cfg)
        recs = jobqueue.every_job(jl, cfg, qy, ctx)
        from ..slurm.render.openapi import squeue_text  # (the release's layout)

        sys.stdout.write(squeue_text(recs, ctx, yaml=not opts.json) + "\n")
        return 0

    recs = jobqueue.select(jl, qy, cfg)
    keys = jobqueue.sort_keys(qy)
    if qy.steps:
        f = fmt.parse_percent(ftext, view.STEP_REGISTRY) if kind == "percent" else \
            fmt.parse_long(ftext, view.STEP_REGISTRY)
    else:
        f = build_format(kind, ftext)
    jobqueue.fill_detail(recs, cfg, [c.field for c in f.columns] + [spec for spec, _ in keys])
    recs = jobqueue.sort_records(recs, qy, ctx, keys, jl.records)
    out: list[str] = []
    if dated:
        from datetime import datetime

        out.append(datetime.fromtimestamp(ctx.now).strftime("%a %b %d %H:%M:%S %Y"))
    if opts.clusters:
        out.append(f"CLUSTER: {cfg.cluster.name}")
    if not opts.noheader:
        out.append(fmt.render_header(f))
    write = sys.stdout.write
    if out:
        write("\n".join(out) + "\n")
    # the rows (fmt.render_lines' lines) written a batch at a time: a big queue's text is never
    # held whole beside its records
    rows = view.steps_rows(recs) if qy.steps else recs
    line = fmt.compile_row(f)
    for i in range(0, len(rows), WRITE_BATCH):
        write("\n".join([line(r, ctx) for r in rows[i:i + WRITE_BATCH]]) + "\n")
    for u in qy.bad_users:
        sys.stdout.flush()
        print(f"{PROG}: error: Invalid user: {u}\n", file=sys.stderr)
    return 0
