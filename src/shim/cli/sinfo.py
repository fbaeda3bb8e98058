"""``sinfo``: Slurm's partition and node view of Grid Engine.

Partitions are the site config's (each one a Grid Engine queue); nodes are the hosts that have an
instance of that queue. One ``qhost -q -xml`` call answers everything the default layouts show
(slots used and total per queue instance, state letters, hardware, load, memory); ``qconf -se``
is asked only for GRES totals. Node states: a queue instance that is disabled (d), in error (E),
suspended or in alarm is drained (``drain``/``drng``), one whose host does not answer (u) is
``down*``; otherwise used slots over all queues of the host make it idle, mix or alloc.

This module parses the options, asks shim.operations.nodeinfo for the partitions, node views and rows (the
gathering, filters and grouping) and hands them to render/sinfo.py; ``--iterate`` repeats here.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from ..operations import nodeinfo
from .. import siteconf
from ..errors import for_command
from . import common
from ..slurm.options.getopt import Table
from ..slurm.options.sources import Options, apply
from ..slurm.options.spec import Arity, OptionSpec
from ..slurm.render import fmt
from ..slurm.render import sinfo as view

PROG = "sinfo"
N, R = Arity.NONE, Arity.REQUIRED


_o = common.own_options(PROG, R)


OPTIONS: tuple[OptionSpec, ...] = (
    _o("all", "a", N, help="show all partitions"),
    _o("dead", "d", N, help="only nodes that do not respond"),
    _o("exact", "e", N, help="group nodes only when their figures are identical"),
    _o("federation", None, N, help="accepted; one cluster"),
    _o("future", "F", N, help="nodes in FUTURE state too (Grid Engine has none)"),
    _o("help", None, N, help="show this help"),
    _o("helpformat", None, N, help="list the fields of --format"),
    _o("helpFormat", None, N, help="list the fields of --Format"),
    _o("helpstate", None, N, help="list the node states"),
    _o("hide", None, N, help="hide hidden partitions"),
    _o("iterate", "i", help="repeat every so many seconds"),
    _o("json", None, N, help="JSON output"),
    _o("local", None, N, help="accepted; one cluster"),
    _o("long", "l", N, help="more fields"),
    _o("cluster", None, dest="clusters"),
    _o("clusters", "M", help="accepted; one cluster"),
    _o("nodes", "n", help="only these nodes"),
    _o("noconvert", None, N, help="accepted"),
    _o("noheader", "h", N, help="no header"),
    _o("Node", "N", N, dest="node", help="one line per node and partition"),
    _o("format", "o", help="format with % letters"),
    _o("Format", "O", dest="format_long", help="format with field names"),
    _o("partition", "p", help="only these partitions"),
    _o("responding", "r", N, help="only nodes that respond"),
    _o("list-reasons", "R", N, dest="list_reasons", help="why nodes are down or drained"),
    _o("summarize", "s", N, help="node counts per partition"),
    _o("sort", "S", help="accepted (partition order, then state)"),
    _o("states", "t", help="only nodes in these states"),
    _o("reservation", "T", N, help="reservations (Grid Engine advance reservations are not shown)"),
    _o("usage", None, N, help="brief usage"),
    _o("verbose", "v", N, count=True, help="verbosity"),
    _o("version", "V", N, help="print the version"),
    _o("yaml", None, N, help="YAML output"),
)

TABLE = Table(PROG, OPTIONS, error_code=1)  # every release's options (releases.py: which each has)
LISTS = ("helpformat", "helpFormat", "helpstate")  # 24.11 on: the release's texts, answered where met


def release_table(release: Any = None) -> Table:
    """The options of the site's Slurm release (releases.current): -F/--future and the lists are
    22.05's unrecognized options."""
    from ..slurm import releases

    release = release or releases.current()
    return Table(PROG, [o for o in OPTIONS if release.knows(PROG, o.long)], error_code=1)

USAGE = """\
Usage: sinfo [-abdelNRrsTv] [-i seconds] [-t states] [-p partition] [-n nodes]
             [-S fields] [-o format] [-O Format] [--federation] [--local]
"""  # (every release's: fixtures/slurm-*/cases.json usage_sinfo)


def help_text() -> str:
    from ..slurm.render.help import options_help

    return options_help(release_table().specs, "Usage: sinfo [OPTIONS]", width=29, intro=(
        "", "Grid Engine's queues and hosts, as Slurm's partitions and nodes.", ""))


error = for_command(PROG)  # Slurm's "<prog>: error: ..." (errors.command_error)


def parse_args(argv: list[str]) -> tuple[Options, list[tuple[OptionSpec, str | None]], list[str]]:
    table = release_table()
    parsed, positional = common.getopt_answering(table, argv, ("help", "usage", "version", *LISTS))
    o = Options()
    apply(o, table, parsed, "cli")
    return o, parsed, positional


def main(argv: list[str]) -> int:
    o, parsed, _positional = parse_args(argv)
    listed = next((spec.key for spec, _ in parsed if spec.key in ("help", "usage", "version", *LISTS)), None)
    if listed in LISTS:  # (the first of them met wins, as sinfo's getopt loop answers it)
        from ..slurm import releases

        sys.stdout.write(releases.current().texts[f"{PROG} --{listed}"])
        return 0
    if common.answered(o, help_text, USAGE):
        return 0
    import os

    if o.reservation:
        sys.stdout.write("No reservations in the system\n")
        return 0
    env_part = os.environ.get("SINFO_PARTITION")
    if o.all and o.partition:
        raise error("Conflicting options, -a and -p, specified. Please choose one or the other.")
    tests = nodeinfo.parse_states(o.states) if o.states else None
    if o.iterate is not None:
        try:
            period = int(o.iterate)
        except ValueError:
            period = 0
        if period <= 0:
            raise error(f"Error: invalid entry for --iterate={o.iterate}")
    else:
        period = 0

    cfg = siteconf.get()
    from ..gridengine import backends

    backend = backends.get(cfg)
    while True:
        out, err = render(o, cfg, backend, tests, env_part, argv=argv)
        if err:
            sys.stderr.write(err)
        sys.stdout.write(out)
        if not period:
            return 0
        sys.stdout.write("\n")
        sys.stdout.flush()
        time.sleep(period)


def _format_for(o: Options) -> tuple[str, str]:
    """(kind, text): kind "o" for a % format, "O" for a long format."""
    import os

    if o.format_long:
        return "O", o.format_long
    if o.format:
        return "o", o.format
    if o.summarize:
        return "o", view.SUMMARY
    if o.node:
        return "o", view.NODE_LONG if o.long else view.NODE
    if o.list_reasons:
        return "o", view.REASONS_LONG if o.long else view.REASONS
    env = os.environ.get("SINFO_FORMAT")
    if env:
        return "o", env
    return "o", (view.LONG_RESV if _reservations() else view.LONG) if o.long else view.DEFAULT


def _reservations() -> bool:
    """Whether the release's sinfo has the reservation field (and -l its column)."""
    from ..slurm import releases

    return releases.current().has(releases.SINFO_RESERVATION)


def _newer_json(o: Options, cfg: Any, parts: list, nodes: list, argv: list[str] | None) -> tuple[str, str] | None:
    """--json/--yaml in the release's layout where it is 24.11's or 26.05's (render/openapi.py:
    a row per partition and group of nodes alike); None for 22.05's node list."""
    from ..slurm import releases
    from ..slurm.render import openapi

    release = releases.current()
    layout = openapi.layout_of(release)
    if layout is None:
        return None
    rows = nodeinfo.build_rows(parts, nodes)
    client = common.json_client(PROG, argv or [])
    doc = openapi.sinfo_document(rows, layout, release, cfg.cluster.name, client)
    return openapi.text_of(doc, yaml=bool(o.yaml)) + "\n", ""


def render(o: Options, cfg: Any, backend: Any, tests: list | None, env_part: str | None,
           now: float | None = None, argv: list[str] | None = None) -> tuple[str, str]:
    """(stdout, stderr) of one report."""
    now = time.time() if now is None else now
    ctx = view.Ctx(cluster=cfg.cluster.name, now=now, convert=not o.noconvert)
    kind, text = _format_for(o)
    errors: list[str] = []
    err_lines: list[str] = []
    wanted_parts = o.partition or env_part
    needs_gres = any(t in text.lower() for t in ("%g", "gres")) if kind == "O" else ("G" in _letters(text))
    if o.json or o.yaml:
        needs_gres = True
    if o.list_reasons and tests is None:
        tests = nodeinfo.parse_states("down,drain")
    parts, nodes = nodeinfo.gather(
        cfg, backend, partition_names=[x for x in wanted_parts.split(",") if x] if wanted_parts else None,
        gres=needs_gres, nodes=o.nodes, responding=bool(o.responding), dead=bool(o.dead), states=tests)
    if o.json or o.yaml:
        newer = _newer_json(o, cfg, parts, nodes, argv)
        if newer is not None:
            return newer
        doc = view.json_document(nodeinfo.by_host(nodes), ctx)
        if o.yaml:  # the same document in Slurm's YAML (render/yaml.py, the writer squeue and sacct use)
            import json as _json

            from ..slurm.render.yaml import document

            return document(_json.loads(doc)) + "\n", ""
        return doc, ""
    filtering = bool(o.nodes or o.responding or o.dead or tests is not None)
    rows = nodeinfo.build_rows(parts, nodes, per_node=bool(o.node), reasons=bool(o.list_reasons),
                               summarize=bool(o.summarize), exact=bool(o.exact), show_empty=not filtering)
    if kind == "O":
        form = fmt.parse_long(text, view.registry(_reservations()), errors=errors)
        err_lines = [f"{PROG}: error: Invalid job format specification: {e}" for e in errors]
    else:
        form = view.layout(text, rows, ctx, errors=errors, fields=view.registry(_reservations()))
        err_lines = [f"Invalid node format specification: {e}" for e in errors]
    out_lines: list[str] = []
    if (o.long or period_of(o)) and not o.noheader:
        out_lines.append(view.date_line(now))
    out_lines.extend(view.lines(form, rows, ctx, header=not o.noheader))
    out = "\n".join(out_lines) + "\n" if out_lines else ""
    return out, "".join(e + "\n" for e in err_lines)


def period_of(o: Options) -> bool:
    return o.iterate is not None


def _letters(text: str) -> set[str]:
    out = set()
    i = 0
    while i < len(text):
        if text[i] == "%":
            j = i + 1
            while j < len(text) and (text[j].isdigit() or text[j] in ".#"):
                j += 1
            if j < len(text):
                out.add(text[j])
            i = j + 1
        else:
            i += 1
    return out
