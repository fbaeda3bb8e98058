"""``sinfo``: Slurm's partition and node view of Grid Engine.

Partitions are the site config's (each one a Grid Engine queue); nodes are the hosts that have an
instance of that queue. One ``qhost -q -xml`` call answers everything the default layouts show
(slots used and total per queue instance, state letters, hardware, load, memory); ``qconf -se``
is asked only for GRES totals. Node states: a queue instance that is disabled (d), in error (E),
suspended or in alarm is drained (``drain``/``drng``), one whose host does not answer (u) is
``down*``; otherwise used slots over all queues of the host make it idle, mix or alloc.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from .. import siteconf
from ..backends import qhost as Q
from ..backends.gridengine import nodes as ge_nodes
from ..errors import ShimError
from . import common
from ..options.getopt import Table, getopt
from ..options.sources import Options, apply
from ..options.spec import Arity, OptionSpec
from ..render import fmt
from ..render import sinfo as view

PROG = "sinfo"
N, R = Arity.NONE, Arity.REQUIRED


_o = common.own_options(PROG, R)


OPTIONS: tuple[OptionSpec, ...] = (
    _o("all", "a", N, help="show all partitions"),
    _o("dead", "d", N, help="only nodes that do not respond"),
    _o("exact", "e", N, help="group nodes only when their figures are identical"),
    _o("federation", None, N, help="accepted; one cluster"),
    _o("help", None, N, help="show this help"),
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

TABLE = Table(PROG, OPTIONS, error_code=1)

USAGE = "Usage: sinfo [-adehlNRrsTv] [-i seconds] [-t states] [-p partition] [-n nodes] [-o format] [-O Format]\n"


def help_text() -> str:
    lines = ["Usage: sinfo [OPTIONS]", "", "Grid Engine's queues and hosts, as Slurm's partitions and nodes.", ""]
    for s in OPTIONS:
        if s.long == "cluster":
            continue
        flag = (f"-{s.short}, " if s.short else "    ") + f"--{s.long}"
        if s.arity is Arity.REQUIRED:
            flag += "=value"
        lines.append(f"  {flag:<27}{s.help}")
    return "\n".join(lines) + "\n"


def error(msg: str) -> ShimError:
    return ShimError(f"{PROG}: error: {msg}", code=1)


# node state names sinfo -t accepts: (name, matches(NodeView))
_STATE_TESTS: list[tuple[tuple[str, ...], Any]] = [
    (("unknown", "unk"), lambda n: False),
    (("down",), lambda n: n.state == "down"),
    (("idle",), lambda n: n.state in ("idle", "drained")),
    (("allocated", "alloc"), lambda n: n.state == "allocated" or (n.state == "draining" and n.cpus_alloc >= n.cpus)),
    (("error", "err"), lambda n: False),
    (("mixed", "mix"), lambda n: n.state == "mixed" or (n.state == "draining" and n.cpus_alloc < n.cpus)),
    (("future", "futr"), lambda n: False),
    (("drain",), lambda n: n.state in ("drained", "draining")),
    (("drained",), lambda n: n.state == "drained"),
    (("draining", "drng"), lambda n: n.state == "draining"),
    (("resv", "reserved"), lambda n: False),
    (("perfctrs", "npc"), lambda n: False),
    (("completing", "comp"), lambda n: False),
    (("no_respond",), lambda n: not n.responding),
    (("power_save", "powered_down"), lambda n: False),
    (("power_up", "powering_up"), lambda n: False),
    (("fail",), lambda n: False),
    (("maint",), lambda n: False),
    (("reboot", "reboot_requested"), lambda n: False),
]
VALID_STATES = ("unknown,down,idle,allocated,error,mixed,future,drain,drained,draining,no_respond,reserved,"
                "perfctrs,completing,power_down,power_up,fail,maint,reboot_requested")


def parse_states(text: str) -> list[Any]:
    if text.lower() == "all":
        return [lambda n: True]
    tests = []
    for item in [x for x in text.split(",") if x]:
        low = item.lower()
        match = None
        for names, test in _STATE_TESTS:
            if any(name.startswith(low) for name in names):
                match = test
                break
        if match is None:
            raise ShimError(f'{PROG}: error: Bad state string: "{item}"', f"{PROG}: error: valid states: {VALID_STATES}",
                            code=1)
        tests.append(match)
    return tests


def partitions(cfg: Any) -> list[view.PartitionInfo]:
    from ..options.values import time_minutes

    out = []
    default = getattr(cfg, "default_partition", None)
    for name, p in cfg.partitions.items():
        mt = time_minutes(str(p.get("max_time") or "UNLIMITED"))
        dt = p.get("default_time")
        out.append(view.PartitionInfo(
            name=name, default=(name == default) if default else bool(p.get("default")),
            max_time=-1 if mt is None else mt, default_time=None if not dt else time_minutes(str(dt))))
    return out


def gres_totals(backend: Any, hosts: list[str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for h in hosts:
        res = backend.exec_host(h)
        out[h] = Q.parse_complex_values(res.stdout) if res.returncode == 0 else {}
    return out


def node_views(cfg: Any, parts: list[view.PartitionInfo], hosts: list[Q.Host],
               totals: dict[str, dict[str, str]] | None = None) -> list[view.NodeView]:
    out: list[view.NodeView] = []
    by_name = {h.name: h for h in hosts}
    for part in parts:
        p = cfg.partitions[part.name]
        wanted = list(p.get("nodes") or [])
        for h in (by_name[n] for n in wanted if n in by_name) if wanted else hosts:
            if p.queue not in h.queues:
                continue
            cpus, used = ge_nodes.cpus(h), ge_nodes.used(h)
            st, reason, responding = ge_nodes.state(h, p.queue)
            gres, gres_used = [], []
            for gname, c in cfg.gres.items():
                total = (totals or {}).get(h.name, {}).get(c.complex)
                if total is None:
                    continue
                try:
                    t = int(float(total))
                    avail = int(float(h.resources.get(c.complex, total)))
                except ValueError:
                    continue
                gres.append(f"{gname}:{t}")
                gres_used.append(f"{gname}:{max(0, t - avail)}")
            cps = h.cores // h.sockets if h.sockets else 0
            tpc = h.threads // h.cores if h.cores else 0
            out.append(view.NodeView(
                name=h.name, partition=part.name, state=st, responding=responding, reason=reason, cpus=cpus,
                cpus_alloc=min(used, cpus), sockets=h.sockets, cores_per_socket=cps, threads_per_core=tpc,
                mem_mb=h.mem_total_mb, free_mem_mb=(h.mem_total_mb - h.mem_used_mb) if (
                    h.mem_total_mb is not None and h.mem_used_mb is not None) else None,
                load=h.load, gres=",".join(gres), gres_used=",".join(gres_used), arch=h.arch))
    return out


def build_rows(parts: list[view.PartitionInfo], nodes: list[view.NodeView], o: Options, exact: bool,
               show_empty: bool) -> list[view.SinfoRow]:
    by_part = {p.name: p for p in parts}
    order = {p.name: i for i, p in enumerate(parts)}
    rows: list[view.SinfoRow] = []
    if o.node:
        for n in sorted(nodes, key=lambda n: (n.name, order[n.partition])):
            rows.append(view.SinfoRow(by_part[n.partition], [n]))
        return rows
    if o.list_reasons:
        groups: dict[tuple[str, str], list[view.NodeView]] = {}
        seen: set[str] = set()
        for n in nodes:
            if not n.other and n.responding:
                continue
            if n.name in seen:
                continue  # a node is listed once, whatever its partitions
            seen.add(n.name)
            groups.setdefault((n.reason, n.state_compact), []).append(n)
        for (_reason, _st), ns in groups.items():
            rows.append(view.SinfoRow(by_part[ns[0].partition], ns))
        return rows
    for part in parts:
        mine = [n for n in nodes if n.partition == part.name]
        if o.summarize:
            if mine or show_empty:
                rows.append(view.SinfoRow(part, mine))
            continue
        if not mine:
            if show_empty:
                rows.append(view.SinfoRow(part, []))
            continue
        groups2: dict[tuple, list[view.NodeView]] = {}
        for n in mine:
            key: tuple = (n.state_compact, n.reason, n.gres)
            if exact:
                key += (n.cpus, n.mem_mb, n.sockets, n.cores_per_socket, n.threads_per_core)
            groups2.setdefault(key, []).append(n)
        for key in sorted(groups2, key=lambda k: k[0], reverse=True):
            rows.append(view.SinfoRow(part, groups2[key]))
    return rows


def parse_args(argv: list[str]) -> tuple[Options, list[tuple[OptionSpec, str | None]], list[str]]:
    parsed, positional = getopt(TABLE, argv, stop_at_positional=False)
    o = Options()
    apply(o, TABLE, parsed, "cli")
    return o, parsed, positional


def main(argv: list[str]) -> int:
    o, parsed, _positional = parse_args(argv)
    if common.answered(o, help_text, USAGE):
        return 0
    import os

    if o.reservation:
        sys.stdout.write("No reservations in the system\n")
        return 0
    env_part = os.environ.get("SINFO_PARTITION")
    if o.all and o.partition:
        raise error("Conflicting options, -a and -p, specified. Please choose one or the other.")
    tests = parse_states(o.states) if o.states else None
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
    from .. import backends

    backend = backends.get(cfg)
    while True:
        out, err = render(o, cfg, backend, tests, env_part)
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
    return "o", view.LONG if o.long else view.DEFAULT


def render(o: Options, cfg: Any, backend: Any, tests: list | None, env_part: str | None,
           now: float | None = None) -> tuple[str, str]:
    """(stdout, stderr) of one report."""
    now = time.time() if now is None else now
    ctx = view.Ctx(cluster=cfg.cluster.name, now=now, convert=not o.noconvert)
    kind, text = _format_for(o)
    errors: list[str] = []
    err_lines: list[str] = []
    parts = partitions(cfg)
    wanted_parts = o.partition or env_part
    if wanted_parts:
        names = [x for x in wanted_parts.split(",") if x]
        parts = [p for p in parts if p.name in names]
    needs_gres = any(t in text.lower() for t in ("%g", "gres")) if kind == "O" else ("G" in _letters(text))
    if o.json or o.yaml:
        needs_gres = True
    resources = [c.complex for c in cfg.gres.values()] if needs_gres else []
    hosts = ge_nodes.hosts(backend, resources)
    totals = gres_totals(backend, [h.name for h in hosts]) if needs_gres and resources else None
    nodes = node_views(cfg, parts, hosts, totals)
    if o.nodes:
        from ..hostlist import expand

        wanted = set(expand(o.nodes))
        nodes = [n for n in nodes if n.name in wanted]
    if o.responding:
        nodes = [n for n in nodes if n.responding]
    if o.dead:
        nodes = [n for n in nodes if not n.responding]
    if o.list_reasons and tests is None:
        tests = parse_states("down,drain")
    if tests is not None:
        nodes = [n for n in nodes if any(t(n) for t in tests)]
    if o.json or o.yaml:
        by_host: dict[str, list[view.NodeView]] = {}
        for n in nodes:
            by_host.setdefault(n.name, []).append(n)
        doc = view.json_document(by_host, ctx)
        if o.yaml:
            from ..render.sacct import _yaml
            import json as _json

            lines: list[str] = ["---"]
            _yaml(_json.loads(doc), 0, lines)
            return "\n".join(lines) + "\n", ""
        return doc, ""
    filtering = bool(o.nodes or o.responding or o.dead or tests is not None)
    rows = build_rows(parts, nodes, o, bool(o.exact), show_empty=not filtering)
    if kind == "O":
        form = fmt.parse_long(text, view.REGISTRY, errors=errors)
        err_lines = [f"{PROG}: error: Invalid job format specification: {e}" for e in errors]
    else:
        form = view.layout(text, rows, ctx, errors=errors)
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
