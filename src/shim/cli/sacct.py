"""``sacct``: Slurm's accounting view of Grid Engine's finished, running and pending jobs.

The command: its options and help, the layout (fields, parsable, JSON/YAML) and the output. What
is selected is ``accounting.query``, how the rows are found ``accounting.collect`` (Grid
Engine's accounting file, the shim's records and events, the live queue), how each row is made
``accounting.rows``; ``render.sacct`` prints them.
"""

from __future__ import annotations

import gc
import os
import pwd
import sys
import time

from ..operations.accounting.query import Selection, build_query, error, fatal
from ..errors import ShimError
from . import common
from ..slurm.options.getopt import Table
from ..slurm.options.sources import Options, apply
from ..slurm.options.spec import Arity, OptionSpec
from ..slurm.render import sacct as view

PROG = "sacct"
N, R, O = Arity.NONE, Arity.REQUIRED, Arity.OPTIONAL


_o = common.own_options(PROG, R)


OPTIONS: tuple[OptionSpec, ...] = (
    _o("allusers", "a", N, help="jobs of every user (root's default)"),
    _o("accounts", "A", help="comma-separated accounts to select"),
    _o("array", None, N, help="a pending array's tasks on lines of their own"),
    _o("allocations", "X", N, help="job allocations only, no steps"),
    _o("brief", "b", N, help="fields JobID, State, ExitCode"),
    _o("batch-script", "B", N, help="print the batch script (not kept by Grid Engine)"),
    _o("completion", "c", N, help="completion data (the same data here)"),
    _o("constraints", "C", help="comma-separated constraints to select"),
    _o("delimiter", None, help="field separator for -p/-P (default '|')"),
    _o("duplicates", "D", N, help="also show earlier runs of requeued jobs"),
    _o("env-vars", None, N, help="print the job's environment (not kept)"),
    _o("federation", None, N, help="accepted; one cluster"),
    _o("helpformat", "e", N, help="list the field names"),
    _o("help-fields", None, N, dest="helpformat"),
    _o("endtime", "E", help="end of the time window"),
    _o("expand-patterns", None, N, help="StdOut, StdErr and StdIn with %j, %x... replaced"),
    _o("file", "f", help="read this Grid Engine accounting file"),
    _o("flags", "F", help="accepted, ignored"),
    _o("gid", None, dest="group"),
    _o("group", "g", help="comma-separated groups (names or gids) to select"),
    _o("help", "h", N, help="show this help"),
    _o("helpreason", None, N, help="list the reasons --reason takes"),
    _o("helpstate", None, N, help="list the states --state takes"),
    _o("local", None, N, help="accepted; one cluster"),
    _o("name", None, help="comma-separated job names to select"),
    _o("nnodes", "i", help="jobs that ran on N nodes (min[-max])"),
    _o("ncpus", "I", help="jobs that ran on N CPUs (min[-max])"),
    _o("jobs", "j", help="comma-separated jobs (N, N_k, N.batch) to select"),
    _o("json", None, N, help="JSON output"),
    _o("timelimit-min", "k", help="jobs with at least this time limit"),
    _o("timelimit-max", "K", help="with -k: jobs with at most this time limit"),
    _o("long", "l", N, help="many fields"),
    _o("allclusters", "L", N, help="accepted; one cluster"),
    _o("cluster", None, dest="clusters"),
    _o("clusters", "M", help="accepted; one cluster"),
    _o("nodelist", "N", help="jobs that ran on any of these nodes"),
    _o("noconvert", None, N, help="print memory in the unit it was stored in"),
    _o("units", None, help="print memory in this unit (K, M, G, T, P)"),
    _o("noheader", "n", N, help="no header"),
    _o("fields", None, dest="format"),
    _o("format", "o", help="comma-separated fields, each optionally %WIDTH"),
    _o("parsable", "p", N, help="'|' after every field"),
    _o("parsable2", "P", N, help="'|' between fields"),
    _o("qos", "q", help="comma-separated QOS to select"),
    _o("partition", "r", help="comma-separated partitions to select"),
    _o("reason", "R", help="comma-separated pending reasons to select"),
    _o("state", "s", help="comma-separated states to select"),
    _o("starttime", "S", help="start of the time window"),
    _o("truncate", "T", N, help="clip start and end times to the window"),
    _o("uid", None, dest="user"),
    _o("usage", "U", N, help="brief usage"),
    _o("user", "u", help="comma-separated users (names or uids) to select"),
    _o("verbose", "v", N, count=True, help="report the time window"),
    _o("version", "V", N, help="print the version"),
    _o("wckeys", "W", help="accepted, ignored"),
    _o("whole-hetjob", None, O, help="accepted; no heterogeneous jobs"),
    _o("associations", "x", help="accepted, ignored"),
    _o("yaml", None, N, help="YAML output"),
    _o("", "t", N, dest="allocations"),
)


class _Table(Table):
    """sacct reports getopt errors and exits 1, with no "Try --help" line."""

    def fail(self, message: str) -> ShimError:
        return ShimError(f"{self.prog}: {message}", code=1)


TABLE = _Table(PROG, [s for s in OPTIONS if s.long], error_code=1)  # every release's options
TABLE.by_short["t"] = OPTIONS[-1]

# what sacct prints instead of accounting: the lists, --help and --usage (-V: at once, always)
LISTS = ("help", "usage", "helpformat", "helpstate", "helpreason")


def release_table(release=None) -> _Table:
    """The options of the site's Slurm release (releases.current): a newer release's option is that
    release's ``unrecognized option`` on an older one; -R (--reason's letter) as the release has it."""
    from ..slurm import releases

    release = release or releases.current()
    table = _Table(PROG, [s for s in OPTIONS if s.long and release.knows(PROG, s.long)], error_code=1)
    table.by_short["t"] = OPTIONS[-1]
    if not release.knows(PROG, "-R"):
        table.by_short.pop("R", None)
    return table


def at_once(release) -> tuple[str, ...]:
    """What sacct's getopt loop answers where it meets it: -V, and the lists where the release
    answers them at once (releases.SACCT_LISTS_AT_ONCE; --usage is read after the loop)."""
    from ..slurm import releases

    return ("version", *(k for k in LISTS if k != "usage")) if release.has(releases.SACCT_LISTS_AT_ONCE) else (
        "version",)


def list_asked(parsed: list, release) -> str | None:
    """What the command line asks for instead of accounting ("version" or one of LISTS): the first
    of those the loop answers at once, else the last of the others (one setting, read after the
    loop), or None."""
    keys = [spec.key for spec, _ in parsed]
    now = at_once(release)
    first = next((k for k in keys if k in now), None)
    if first is not None:
        return first
    later = [k for k in keys if k in LISTS]
    return later[-1] if later else None


def list_text(key: str, release) -> str:
    """What --helpformat, --helpstate and --helpreason print: the release's own list, else (22.05,
    which has --helpformat alone) the fields of render/sacct.py."""
    text = release.texts.get(f"{PROG} --{key}")
    return text if text is not None else view.helpformat()

USAGE = "Usage: sacct [options]\n\tUse --help for help\n"  # (every release prints these two lines)


def help_text(release=None) -> str:
    from ..slurm import releases
    from ..slurm.render.help import options_help

    release = release or releases.current()
    rows = [s for s in OPTIONS if not s.long or release.knows(PROG, s.long)]
    return options_help(rows, "Usage: sacct [OPTIONS]", width=30, intro=(
        "", "Accounting of Grid Engine jobs, as Slurm's sacct shows it.", ""), tail=(
        "", "Times (-S, -E): HH:MM[:SS][AM|PM], MMDD[YY], MM/DD[/YY], MM.DD[.YY], any of those",
        "with -HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], today, midnight, noon, fika, teatime,",
        "now[+|-count[seconds|minutes|hours|days|weeks]].",
        "Environment: SACCT_FORMAT (default --format), SLURM_SHIM_ACCOUNTING (accounting file)."))




# ---------------------------------------------------------------------------------------------
# main


def parse_args(argv: list[str], release=None) -> tuple[Options, list[str]]:
    from ..slurm import releases

    release = release or releases.current()
    table = release_table(release)
    parsed, positional = common.getopt_answering(table, argv, at_once(release))  # (the rest: read after)
    o = Options()
    jobs: list[str] = []
    formats: list[str] = []
    parsable = None
    for spec, raw in parsed:
        if spec.key == "jobs" and raw is not None:
            jobs.append(raw)
        elif spec.key == "format" and raw is not None:
            formats.append(raw)
        elif spec.key == "parsable":
            parsable = "ending"
        elif spec.key == "parsable2":
            parsable = "no_ending"
    apply(o, table, parsed, "cli")
    o["asked_list"] = list_asked(parsed, release)
    o["jobs"] = jobs or None
    o["format"] = formats or None
    o["layout"] = parsable
    return o, positional


def field_spec(o: Options) -> str:
    parts: list[str] = []
    if o.format:
        parts.extend(o.format)
    if o.brief:
        parts.append(view.BRIEF_FIELDS)
    if o.long:
        parts.append(view.LONG_FIELDS)
    if not parts:
        parts.append(os.environ.get("SACCT_FORMAT") or view.DEFAULT_FIELDS)
    return ",".join(parts)


def main(argv: list[str]) -> int:
    from ..slurm import releases

    release = releases.current()
    o, positional = parse_args(argv, release)
    asked = o.asked_list
    if asked in ("version", "help", "usage"):
        sys.stdout.write({"version": releases.version_line, "help": help_text, "usage": lambda: USAGE}[asked]())
        return 0
    if asked:
        sys.stdout.write(list_text(asked, release))
        return 0
    uid = os.getuid()
    try:
        me = pwd.getpwuid(uid).pw_name
    except KeyError:
        me = str(uid)
    qy = build_query(o, uid, me)
    try:
        names = view.field_names(field_spec(o), list_text("helpformat", release).split())
    except view.FieldError as e:
        raise error(f'Invalid field requested: "{e.name}"') from None
    if positional:
        raise ShimError(f"{PROG}: error: Unknown arguments:", *(f"{PROG}: error:  {a}" for a in positional),
                        code=1)
    if o.verbose:
        end = time.ctime(qy.end) if qy.end else "Now"
        print(f"{PROG}: Jobs eligible from {time.ctime(qy.start)} - {end}", file=sys.stderr)
    # Tens of thousands of rows are made and dropped, none of them in a reference cycle: the cyclic
    # collector would only walk them again and again.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        # --json and --yaml print every field: the format engine is not needed for them
        return _output(o, qy, [] if (o.json or o.yaml) else view.columns(names), argv)
    finally:
        if gc_was_on:
            gc.enable()


def _output(o: Options, qy: Selection, cols: list[view.Column], argv: list[str] | None = None) -> int:
    from ..operations.accounting.collect import collect

    view.reset()
    clip = qy.truncate and qy.window
    if o.json or o.yaml:
        groups = collect(qy, accounting=o.file, cfg=None)
        if clip:
            for job, steps in groups:
                _clip(qy, job, steps)
        from ..siteconf import get
        from ..slurm import releases

        # (the release's layout: render/openapi.py; its meta block names the caller and cluster)
        release, cluster = releases.current(), get().cluster.name
        client = common.json_client(PROG, argv) if argv is not None else None
        from ..slurm.render.openapi import sacct_text

        sys.stdout.write(sacct_text(groups, release, cluster, client, yaml=not o.json))
        return 0
    unit_error = None
    if o.noconvert or o.units:
        try:
            _units(cols, o)
        except ShimError as e:
            unit_error = e  # reported where Slurm does: after the records were read
    parsable = o.layout
    delim = o.delimiter if (parsable and o.delimiter is not None) else "|"
    line = view.line_function(cols, parsable=parsable, delimiter=delim)

    def emit(item: tuple[view.Row | None, list[view.Row]]) -> str:
        """One job (or its selected steps) as text, made as soon as it is known: only text is kept."""
        job, steps = item
        if clip:
            _clip(qy, job, steps)
        if job is not None:
            if not steps:
                return line(job) + "\n"
            if len(steps) == 1:
                return f"{line(job)}\n{line(steps[0])}\n"
            steps = [job, *steps]
        return "".join(line(r) + "\n" for r in steps)

    texts = collect(qy, accounting=o.file, cfg=None, emit=emit)
    if unit_error is not None:
        raise unit_error
    head = view.header_lines(cols, parsable=parsable, delimiter=delim) if not o.noheader else []
    out = sys.stdout
    if head:
        out.write("".join(h + "\n" for h in head))
    for i in range(0, len(texts), 4096):
        out.write("".join(texts[i:i + 4096]))
    return 0


def _clip(qy: Selection, job: view.Row | None, steps: list[view.Row]) -> None:
    """-T: start and end times clipped to the window."""
    for r in (job, *steps) if job is not None else steps:
        if r.start and r.start < qy.start:
            r.start = qy.start
        if r.end and qy.end and r.end > qy.end:
            r.end = qy.end


def _units(cols: list[view.Column], o: Options) -> None:
    """--noconvert / --units: memory fields in one unit."""
    target = (o.units or "").upper()[:1]
    order = "KMGTP"
    if o.units and target not in order:
        raise fatal("Invalid unit type")

    def conv(v: float | None, unit: int) -> str:
        if v is None:
            return ""
        if not target:
            return f"{int(v)}{' KMGTP'[unit].strip()}"
        k = order.index(target) + 1
        val = v / (1024 ** (k - unit))
        return f"{int(val)}{target}" if val == int(val) else f"{val:.2f}{target}"

    gets = {
        "ReqMem": lambda r, c=None: "" if r.step or not r.req_mem_mb else conv(r.req_mem_mb, 2),
        "MaxRSS": lambda r, c=None: "" if not r.step or r.maxrss_kb is None else conv(r.maxrss_kb, 1),
        "MaxVMSize": lambda r, c=None: "" if not r.step or r.maxvmem_kb is None else conv(r.maxvmem_kb, 1),
    }
    for c in cols:
        get = gets.get(c.field.name)
        if get is not None:
            f = c.field
            c.field = type(f)(f.letter, f.name, f.header, get, f.key, f.aliases, f.cut)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
