"""sinfo's fields: every ``%`` letter and ``-O`` name of Slurm 22.05 with its header, the layouts
(default, ``-l``, ``-N``, ``-N -l``, ``-s``, ``-R``), node states as Slurm spells them, and a light
``--json``.

A ``NodeView`` is one host seen from one partition (the Grid Engine queue instance of that
partition's queue on that host); a ``SinfoRow`` is one output line: one or more NodeViews of a
partition that share a state (or one node with ``-N``, or a whole partition with ``-s``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ... import SLURM_VERSION
from .fmt import Column, FieldSpec, Format, Registry, render
from .text import print_secs, version_json


# base state -> (long, compact)
STATE_NAMES = {
    "idle": ("idle", "idle"), "mixed": ("mixed", "mix"), "allocated": ("allocated", "alloc"),
    "down": ("down", "down"), "drained": ("drained", "drain"), "draining": ("draining", "drng"),
    "completing": ("completing", "comp"),
}


@dataclass
class NodeView:
    name: str
    partition: str
    state: str  # idle mixed allocated down drained draining
    responding: bool = True
    reason: str = ""
    cpus: int = 0
    cpus_alloc: int = 0
    sockets: int = 0
    cores_per_socket: int = 0
    threads_per_core: int = 0
    mem_mb: int | None = None
    free_mem_mb: int | None = None
    load: float | None = None
    gres: str = ""
    gres_used: str = ""
    arch: str = ""

    @property
    def state_long(self) -> str:
        return STATE_NAMES[self.state][0] + ("" if self.responding else "*")

    @property
    def state_compact(self) -> str:
        return STATE_NAMES[self.state][1] + ("" if self.responding else "*")

    @property
    def other(self) -> bool:
        return self.state in ("down", "drained", "draining")


@dataclass
class PartitionInfo:
    name: str
    default: bool = False
    max_time: int = -1  # minutes, -1 infinite
    default_time: int | None = None  # minutes, None: not set
    hidden: bool = False


@dataclass
class SinfoRow:
    part: PartitionInfo
    nodes: list[NodeView] = field(default_factory=list)


@dataclass
class Ctx:
    cluster: str = "cluster"
    now: float = 0.0
    convert: bool = True


# ---------------------------------------------------------------------------------------------
# values


def _minmax(values: list[int], plus: bool = True) -> str:
    if not values:
        return "0"
    lo, hi = min(values), max(values)
    if lo == hi:
        return str(hi)
    return f"{lo}+" if plus else f"{lo}-{hi}"


def _nodelist(r: SinfoRow, _c: Ctx) -> str:
    from ..hostlist import compress

    return compress(sorted({n.name for n in r.nodes}))


def _partition(r: SinfoRow, _c: Ctx) -> str:
    return r.part.name + ("*" if r.part.default else "")


def _time(r: SinfoRow, _c: Ctx) -> str:
    return "infinite" if r.part.max_time < 0 else print_secs(r.part.max_time * 60, check=False)


def _default_time(r: SinfoRow, _c: Ctx) -> str:
    if r.part.default_time is None:
        return "n/a"
    return "infinite" if r.part.default_time < 0 else print_secs(r.part.default_time * 60, check=False)


def _state(attr: str) -> Callable[[SinfoRow, Ctx], str]:
    def get(r: SinfoRow, _c: Ctx) -> str:
        if not r.nodes:
            return "n/a"
        states = {getattr(n, attr) for n in r.nodes}
        return states.pop() if len(states) == 1 else getattr(r.nodes[0], attr)
    return get


def _cpus_aiot(r: SinfoRow, _c: Ctx) -> str:
    a = i = o = t = 0
    for n in r.nodes:
        t += n.cpus
        if n.other:
            o += n.cpus
        else:
            a += min(n.cpus_alloc, n.cpus)
            i += max(0, n.cpus - n.cpus_alloc)
    return f"{a}/{i}/{o}/{t}"


def _nodes_aiot(r: SinfoRow, _c: Ctx) -> str:
    a = sum(1 for n in r.nodes if n.state in ("mixed", "allocated"))
    i = sum(1 for n in r.nodes if n.state == "idle")
    o = sum(1 for n in r.nodes if n.other)
    return f"{a}/{i}/{o}/{len(r.nodes)}"


def _nodes_ai(r: SinfoRow, _c: Ctx) -> str:
    a = sum(1 for n in r.nodes if n.state in ("mixed", "allocated"))
    i = sum(1 for n in r.nodes if n.state == "idle")
    return f"{a}/{i}"


def _num(attr: str, plus: bool = True) -> Callable[[SinfoRow, Ctx], str]:
    def get(r: SinfoRow, _c: Ctx) -> str:
        return _minmax([getattr(n, attr) or 0 for n in r.nodes], plus)
    return get


def _sct(r: SinfoRow, _c: Ctx) -> str:
    return ":".join(_minmax([getattr(n, a) or 0 for n in r.nodes])
                    for a in ("sockets", "cores_per_socket", "threads_per_core"))


def _memory(r: SinfoRow, _c: Ctx) -> str:
    return _minmax([n.mem_mb or 0 for n in r.nodes])


def _free_mem(r: SinfoRow, _c: Ctx) -> str:
    vals = [n.free_mem_mb for n in r.nodes if n.free_mem_mb is not None]
    if not vals:
        return "N/A"
    return _minmax(vals, plus=False)


def _load(r: SinfoRow, _c: Ctx) -> str:
    vals = [n.load for n in r.nodes if n.load is not None]
    if not vals:
        return "N/A"
    lo, hi = min(vals), max(vals)
    return f"{hi:.2f}" if lo == hi else f"{lo:.2f}-{hi:.2f}"


def _reason(r: SinfoRow, _c: Ctx) -> str:
    reasons = [n.reason for n in r.nodes if n.reason]
    return reasons[0] if reasons else "none"


def _first(attr: str, empty: str = "(null)") -> Callable[[SinfoRow, Ctx], str]:
    def get(r: SinfoRow, _c: Ctx) -> str:
        vals = [getattr(n, attr) for n in r.nodes if getattr(n, attr)]
        return vals[0] if vals else empty
    return get


def _c(text: str) -> Callable[[SinfoRow, Ctx], str]:
    return lambda r, c: text


def _reason_user(r: SinfoRow, _c: Ctx) -> str:
    return "Unknown"


FIELDS: list[FieldSpec] = [
    FieldSpec("a", "available", "AVAIL", _c("up")),
    FieldSpec("A", "nodeai", "NODES(A/I)", _nodes_ai),
    FieldSpec("b", "features_act", "ACTIVE_FEATURES", _c("(null)")),
    FieldSpec("B", "maxcpuspernode", "MAX_CPUS_PER_NODE", _c("UNLIMITED")),
    FieldSpec("c", "cpus", "CPUS", _num("cpus")),
    FieldSpec("C", "cpusstate", "CPUS(A/I/O/T)", _cpus_aiot),
    FieldSpec("d", "disk", "TMP_DISK", _c("0")),
    FieldSpec("D", "nodes", "NODES", lambda r, c: str(len(r.nodes))),
    FieldSpec("e", "freemem", "FREE_MEM", _free_mem),
    FieldSpec("E", "reason", "REASON", _reason),
    FieldSpec("f", "features", "AVAIL_FEATURES", _c("(null)")),
    FieldSpec("F", "nodeaiot", "NODES(A/I/O/T)", _nodes_aiot),
    FieldSpec("g", "groups", "GROUPS", _c("all")),
    FieldSpec("G", "gres", "GRES", _first("gres")),
    FieldSpec("h", "oversubscribe", "OVERSUBSCRIBE", _c("NO"), aliases=("share",)),
    FieldSpec("H", "timestamp", "TIMESTAMP", lambda r, c: "Unknown"),
    FieldSpec("I", "priorityjobfactor", "PRIO_JOB_FACTOR", _c("1")),
    FieldSpec("l", "time", "TIMELIMIT", _time),
    FieldSpec("L", "defaulttime", "DEFAULTTIME", _default_time),
    FieldSpec("m", "memory", "MEMORY", _memory),
    FieldSpec("M", "preemptmode", "PREEMPT_MODE", _c("OFF")),
    FieldSpec("n", "nodehost", "HOSTNAMES", _nodelist),
    FieldSpec("N", "nodelist", "NODELIST", _nodelist),
    FieldSpec("o", "nodeaddr", "NODE_ADDR", _nodelist),
    FieldSpec("O", "cpusload", "CPU_LOAD", _load),
    FieldSpec("p", "prioritytier", "PRIO_TIER", _c("1")),
    FieldSpec("P", "partition", "PARTITION", _partition),
    FieldSpec("r", "root", "ROOT", _c("no")),
    FieldSpec("R", "partitionname", "PARTITION", lambda r, c: r.part.name),
    FieldSpec("s", "size", "JOB_SIZE", _c("1-infinite")),
    FieldSpec("S", "allocnodes", "ALLOCNODES", _c("all")),
    FieldSpec("t", "statecompact", "STATE", _state("state_compact")),
    FieldSpec("T", "statelong", "STATE", _state("state_long")),
    FieldSpec("u", "user", "USER", _reason_user),
    FieldSpec("U", "userlong", "USER", _reason_user),
    FieldSpec("v", "version", "VERSION", _c("N/A")),
    FieldSpec("V", "cluster", "CLUSTER", lambda r, c: c.cluster),
    FieldSpec("w", "weight", "WEIGHT", _c("1")),
    FieldSpec("X", "sockets", "SOCKETS", _num("sockets")),
    FieldSpec("Y", "cores", "CORES", _num("cores_per_socket")),
    FieldSpec("Z", "threads", "THREADS", _num("threads_per_core")),
    FieldSpec("z", "socketcorethread", "S:C:T", _sct),
    FieldSpec(None, "gresused", "GRES_USED", _first("gres_used")),
    FieldSpec(None, "allocmem", "ALLOCMEM", _c("0")),
    FieldSpec(None, "comment", "COMMENT", _c("")),
    FieldSpec(None, "port", "PORT", _c("0")),
    FieldSpec(None, "statecomplete", "STATECOMPLETE", _state("state_long")),
]
REGISTRY = Registry(FIELDS)
# 24.11 on (releases.SINFO_RESERVATION): %i / reservation, the reservation a node is in. Grid
# Engine's advance reservations are not shown (sinfo -T: none), so it is empty, as Slurm's for a
# node in none
RESERVATION = FieldSpec("i", "reservation", "RESERVATION", _c(""))
REGISTRY_RESV = Registry([*FIELDS, RESERVATION])

# Slurm's built-in layouts; "#" marks the partition/node columns sized from the data.
DEFAULT = "%#P %.5a %.10l %.6D %.6t %N"
LONG = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
LONG_RESV = "%#P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %.11i %N"  # (24.11 on: RESERVATION)
NODE = "%#N %.6D %.#P %6t"
NODE_LONG = "%#N %.6D %.#P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E"
SUMMARY = "%#P %.5a %.10l %.16F %N"
REASONS = "%20E %9u %19H %N"
REASONS_LONG = "%20E %12U %19H %6t %N"

MIN_FIELD = 9


def registry(reservations: bool = False) -> Registry:
    """The fields of a release's sinfo: with %i / reservation where it has them."""
    return REGISTRY_RESV if reservations else REGISTRY


def layout(fmt: str, rows: list[SinfoRow], ctx: Ctx, errors: list[str] | None = None,
           fields: Registry = REGISTRY) -> Format:
    """A format string with Slurm's ``#`` sizes resolved: the longest partition name (with its
    ``*``) or node list, at least 9. ``fields``: the release's (registry)."""
    part_w = max([MIN_FIELD] + [len(r.part.name) + (1 if r.part.default else 0) for r in rows])
    node_w = max([MIN_FIELD] + [len(_nodelist(r, ctx)) for r in rows])
    text = fmt.replace("%#P", f"%{part_w}P").replace("%.#P", f"%.{part_w}P").replace("%#N", f"%{node_w}N")
    from .fmt import parse_percent

    return parse_percent(text, fields, errors=errors)


def lines(fmt: Format, rows: list[SinfoRow], ctx: Ctx, header: bool = True) -> list[str]:
    return list(render(fmt, rows, ctx, header=header))


def date_line(now: float) -> str:
    return time.ctime(now)


# ---------------------------------------------------------------------------------------------
# --json (OpenAPI v0.0.38 nodes, the parts Grid Engine can fill)


def json_document(nodes: dict[str, list[NodeView]], ctx: Ctx) -> str:
    out = []
    for name in sorted(nodes):
        views = nodes[name]
        n = views[0]
        parts = [v.partition for v in views]
        state = n.state_long.rstrip("*")
        out.append({
            "architecture": n.arch, "burstbuffer_network_address": "", "boards": 1, "boot_time": 0,
            "comment": "", "cores": n.cores_per_socket, "cpu_binding": 0,
            "cpu_load": int(round((n.load or 0.0) * 100)), "extra": "",
            "free_memory": n.free_mem_mb or 0, "cpus": n.cpus, "last_busy": 0, "features": "",
            "active_features": "", "gres": n.gres, "gres_drained": "N/A", "gres_used": n.gres_used,
            "mcs_label": "", "name": name, "next_state_after_reboot": "invalid", "address": name,
            "hostname": name, "state": state, "state_flags": ([] if n.responding else ["NOT_RESPONDING"])
            + (["DRAIN"] if n.state in ("drained", "draining") else []),
            "next_state_after_reboot_flags": [], "operating_system": "", "owner": None, "partitions": parts,
            "port": 0, "real_memory": n.mem_mb or 0, "reason": n.reason, "reason_changed_at": 0,
            "reason_set_by_user": None, "slurmd_start_time": 0, "sockets": n.sockets,
            "threads": n.threads_per_core, "temporary_disk": 0, "weight": 1,
            "tres": f"cpu={n.cpus},mem={n.mem_mb or 0}M,billing={n.cpus}" + (
                f",gres/{n.gres.replace(':', '=', 1)}" if n.gres else ""),
            "slurmd_version": "", "alloc_memory": 0, "alloc_cpus": n.cpus_alloc,
            "idle_cpus": max(0, n.cpus - n.cpus_alloc), "tres_used": f"cpu={n.cpus_alloc}",
            "tres_weighted": float(n.cpus_alloc),
        })
    doc: dict[str, Any] = {
        "meta": {
            "plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
            "Slurm": {"version": version_json(), "release": SLURM_VERSION},
        },
        "errors": [],
        "nodes": out,
    }
    return json.dumps(doc, indent=2).replace("/", "\\/")


__all__ = ["Column", "Ctx", "NodeView", "PartitionInfo", "SinfoRow", "layout", "lines", "json_document"]
