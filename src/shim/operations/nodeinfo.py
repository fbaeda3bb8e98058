"""What sinfo shows, gathered and shaped: the site config's partitions, the hosts that are their
nodes (one ``qhost -q -xml`` call, gridengine.nodes), each host seen from each partition
as a ``NodeView`` (its state in that partition's queue instance, CPUs, memory, GRES), sinfo's
filters (``-n``, ``-r``, ``-d``, ``-t``) and its rows: the views grouped as Slurm groups them (per
partition and state, per node with ``-N``, per reason with ``-R``, per partition with ``-s``).
render/sinfo.py formats them and reads nothing; cli/sinfo.py parses the options, calls these and
prints.

The rules scontrol's show views share live here once: a partition's figures from the site config
(``partitions``), which hosts are a partition's nodes (``on_partition``, ``partition_hosts``,
``host_partitions``), the CPUs a node offers and has allocated (``node_cpus``). A queue instance's
state is gridengine.nodes.state's.
"""

from __future__ import annotations

from ..gridengine import nodes as ge_nodes
from ..errors import ShimError

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Callable

    from ..gridengine.qhost import Host
    from ..slurm.render import sinfo as view  # (dataclasses): imported where views are made, so that show.py,
    # on every scontrol's start, may import this module for the partition and node rules at no cost

    StateTest = Callable[[view.NodeView], bool]

PROG = "sinfo"

# ---------------------------------------------------------------------------------------------
# node states sinfo -t accepts


# (names, matches(NodeView)): the first whose name starts with the word given
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


def parse_states(text: str) -> list[StateTest]:
    """``-t``'s list: one test per state named (``all``: every node); Slurm's "Bad state string"
    for a word no state starts with."""
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


# ---------------------------------------------------------------------------------------------
# partitions and their nodes (the rules scontrol show partition/node share)


def partitions(cfg: Any) -> list[view.PartitionInfo]:
    """The site config's partitions, in its order: name, default?, MaxTime and DefaultTime in
    minutes (-1 unlimited; DefaultTime None when not set)."""
    from ..slurm.options.values import time_minutes
    from ..slurm.render import sinfo as view

    out = []
    default = getattr(cfg, "default_partition", None)
    for name, p in cfg.partitions.items():
        mt = time_minutes(str(p.get("max_time") or "UNLIMITED"))
        dt = p.get("default_time")
        out.append(view.PartitionInfo(
            name=name, default=(name == default) if default else bool(p.get("default")),
            max_time=-1 if mt is None else mt, default_time=None if not dt else time_minutes(str(dt))))
    return out


def on_partition(p: Any, host: Host) -> bool:
    """Whether ``host`` is a node of partition ``p`` (its site config entry): it has an instance of
    the partition's queue and, when the partition lists its nodes, is one of them."""
    wanted = p.get("nodes")
    return p.queue in host.queues and (not wanted or host.name in wanted)


def partition_hosts(p: Any, hosts: list[Host]) -> list[Host]:
    """The nodes of partition ``p`` among ``hosts`` (``on_partition``): in the order the partition
    lists them, else in ``hosts``' order."""
    wanted = list(p.get("nodes") or [])
    by_name = {h.name: h for h in hosts}
    return [h for h in ((by_name[n] for n in wanted if n in by_name) if wanted else hosts) if p.queue in h.queues]


def host_partitions(cfg: Any, host: Host) -> list[str]:
    """The partitions ``host`` is a node of, in the config's order."""
    return [name for name, p in cfg.partitions.items() if on_partition(p, host)]


def partition_cpus(cfg: Any, names: list[str], backend: Any = None) -> dict[str, list[int]] | None:
    """The CPUs of each node of each partition ``names`` names, as many as Grid Engine could ever
    give a job there: the slots of the partition's queue instance on the host (the host's own CPUs,
    ``gridengine.nodes.cpus``, where the instance says none). One ``qhost -q -xml`` call; None when
    Grid Engine does not answer (then nothing can be told)."""
    from ..gridengine import backends

    try:
        hosts = ge_nodes.hosts(backend or backends.get(cfg))
    except Exception:  # ShimError (no answer), BackendUnavailable and the like
        return None
    out = {}
    for name in names:
        p = cfg.partitions[name]
        out[name] = [(h.queues[p.queue].slots_total or ge_nodes.cpus(h)) for h in partition_hosts(p, hosts)]
    return out


CPUS_PER_NODE = "CPU count per node can not be satisfied"


def node_config_fault(cpus: list[int], lo: int, hi: int | None, ntasks: int, cpt: int,
                      per_node: int) -> tuple[str, ...] | None:
    """Why a partition whose nodes have ``cpus`` (partition_cpus) could never hold a job of
    ``ntasks`` tasks of ``cpt`` CPUs on ``lo`` to ``hi`` nodes (None: no maximum), ``per_node``
    tasks on each (0: not asked): the lines Slurm 24.11 prints before "Requested node configuration
    is not available" (``()`` for none), or None where it fits. As asked of 24.11
    (fixtures/slurm-24.11/oracle-sizes.txt): one task's CPUs or one node's tasks beyond the
    largest node (-c 9, --ntasks-per-node=9) say CPUS_PER_NODE; more nodes than the partition has
    (-N 2, -N 2-3) or more CPUs than its ``hi`` largest nodes have together (-n 9, -N 1-2 -n 9,
    -n 3 -c 3) say nothing more. A partition with no node known fits (the job waits)."""
    if not cpus:
        return None
    if cpt * max(per_node, 1) > max(cpus):
        return (CPUS_PER_NODE,)
    top = sorted(cpus, reverse=True)[:hi or len(cpus)]
    if lo > len(cpus) or ntasks * cpt > sum(top):
        return ()
    return None


def node_cpus(host: Host) -> tuple[int, int]:
    """(CPUs offered, CPUs allocated) of a node: allocated is the slots used over all its queue
    instances, at most what it offers (gridengine.nodes.cpus and used)."""
    cpus = ge_nodes.cpus(host)
    return cpus, min(ge_nodes.used(host), cpus)


# ---------------------------------------------------------------------------------------------
# sinfo's node views


def gres_totals(backend: Any, hosts: list[str]) -> dict[str, dict[str, str]]:
    """Each host's consumables (``complex_values`` of its configuration): its GRES totals."""
    from ..gridengine import qhost as Q

    out: dict[str, dict[str, str]] = {}
    for h in hosts:
        res = backend.exec_host(h)
        out[h] = Q.parse_complex_values(res.stdout) if res.returncode == 0 else {}
    return out


def node_views(cfg: Any, parts: list[view.PartitionInfo], hosts: list[Host],
               totals: dict[str, dict[str, str]] | None = None) -> list[view.NodeView]:
    """Each node of each partition of ``parts`` as sinfo sees it from that partition; GRES only for
    the hosts ``totals`` has (``gres_totals``)."""
    from ..slurm.render import sinfo as view

    out: list[view.NodeView] = []
    for part in parts:
        p = cfg.partitions[part.name]
        for h in partition_hosts(p, hosts):
            cpus, alloc = node_cpus(h)
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
                cpus_alloc=alloc, sockets=h.sockets, cores_per_socket=cps, threads_per_core=tpc,
                mem_mb=h.mem_total_mb, free_mem_mb=(h.mem_total_mb - h.mem_used_mb) if (
                    h.mem_total_mb is not None and h.mem_used_mb is not None) else None,
                load=h.load, gres=",".join(gres), gres_used=",".join(gres_used), arch=h.arch))
    return out


def gather(cfg: Any, backend: Any, *, partition_names: list[str] | None = None, gres: bool = False,
           nodes: str | None = None, responding: bool = False, dead: bool = False,
           states: list[StateTest] | None = None) -> tuple[list[view.PartitionInfo], list[view.NodeView]]:
    """The partitions shown (those named; all with ``partition_names`` None) and their nodes'
    views, kept by sinfo's filters: the hosts named (``nodes``, a hostlist expression), responding
    or not, in one of the ``states`` (``parse_states``). One ``qhost -q -xml`` call; with ``gres``,
    ``-F`` the site's GRES complexes and each host's configuration for the totals."""
    parts = partitions(cfg)
    if partition_names is not None:
        parts = [p for p in parts if p.name in partition_names]
    resources = [c.complex for c in cfg.gres.values()] if gres else []
    hosts = ge_nodes.hosts(backend, resources)
    totals = gres_totals(backend, [h.name for h in hosts]) if gres and resources else None
    views = node_views(cfg, parts, hosts, totals)
    if nodes:  # expanded once Grid Engine has answered: its silence is the error a bad list meets first
        from ..slurm.hostlist import expand

        wanted = set(expand(nodes))
        views = [n for n in views if n.name in wanted]
    if responding:
        views = [n for n in views if n.responding]
    if dead:
        views = [n for n in views if not n.responding]
    if states is not None:
        views = [n for n in views if any(t(n) for t in states)]
    return parts, views


# ---------------------------------------------------------------------------------------------
# sinfo's rows


def by_host(views: list[view.NodeView]) -> dict[str, list[view.NodeView]]:
    """The views of each host (``--json``/``--yaml``: one entry per node, its partitions)."""
    out: dict[str, list[view.NodeView]] = {}
    for n in views:
        out.setdefault(n.name, []).append(n)
    return out


def build_rows(parts: list[view.PartitionInfo], nodes: list[view.NodeView], *, per_node: bool = False,
               reasons: bool = False, summarize: bool = False, exact: bool = False,
               show_empty: bool = True) -> list[view.SinfoRow]:
    """sinfo's lines: with ``per_node`` (``-N``) one per node and partition, by node name; with
    ``reasons`` (``-R``) one per reason and state of the nodes down or drained, each node once; with
    ``summarize`` (``-s``) one per partition; else one per partition and group of nodes alike (state,
    reason, GRES; with ``exact`` (``-e``) CPUs, memory and S:C:T too), the states in reverse order.
    ``show_empty``: a partition without nodes still has its line (no node filter given)."""
    from ..slurm.render import sinfo as view

    by_part = {p.name: p for p in parts}
    order = {p.name: i for i, p in enumerate(parts)}
    rows: list[view.SinfoRow] = []
    if per_node:
        for n in sorted(nodes, key=lambda n: (n.name, order[n.partition])):
            rows.append(view.SinfoRow(by_part[n.partition], [n]))
        return rows
    if reasons:
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
        if summarize:
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
