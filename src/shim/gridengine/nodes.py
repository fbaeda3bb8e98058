"""Grid Engine hosts as Slurm nodes: the one query (``qhost -q -xml``, read by
``gridengine.qhost.parse_qhost_xml``) and the one rule for a node's state, shared by sinfo and
scontrol show node/partition.

A queue instance's state letters decide (``gridengine.qhost.node_state``, Slurm's meaning): ``u``
(not responding) and ``o`` (orphaned) are DOWN; a queue disabled by ``qmod -d`` (``d``), by a
calendar (``D``, ``C``), in error (``E``), suspended (``s``, ``S``) or in alarm (``a``, ``A``) takes no
new jobs but keeps its running ones: Slurm's DRAIN (``drained`` when idle, ``draining`` while jobs
run). A partition is one queue, so sinfo reads the partition's instance; a host (scontrol show
node) is as available as its most available instance.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .qhost import Host

# how available a base state is: a host is as available as its best queue instance
_RANK = {"idle": 0, "mixed": 0, "allocated": 0, "draining": 1, "drained": 1, "down": 2}


def hosts(backend: Any, resources: list[str] | None = None, prefix: str = "slurm_load_partitions") -> list[Host]:
    """Every execution host with its queue instances (one ``qhost -q -xml [-F ...]`` call); Slurm's
    "Unable to contact slurm controller" (as ``prefix: ...``) when Grid Engine would not answer."""
    from ..errors import ShimError
    from . import qhost

    res = backend.hosts(qhost.qhost_args(resources))
    if res.returncode != 0 or not res.stdout.strip():
        msg = (res.stderr or res.stdout).strip().splitlines()
        raise ShimError(f"{prefix}: Unable to contact slurm controller (connect failure)"
                        + (f": {msg[-1]}" if msg else ""), code=1)
    return qhost.parse_qhost_xml(res.stdout)


def cpus(host: Host) -> int:
    """The CPUs a host offers: Grid Engine counts slots per queue instance, the host offers the
    largest of them (its processor count when no queue is on it)."""
    return max([q.slots_total for q in host.queues.values()] + [0]) or host.ncpu


def used(host: Host) -> int:
    return sum(q.slots_used for q in host.queues.values())


def state(host: Host, queue: str | None = None) -> tuple[str, str, bool]:
    """(Slurm base state, reason, responding) of ``host``: in the partition of ``queue`` (its queue
    instance there), or, with ``queue`` None, as a whole (the most available instance decides).
    Base states: idle, mixed, allocated, down, drained, draining."""
    from .qhost import node_state

    n, total = used(host), cpus(host)
    if queue is not None:
        qi = host.queues.get(queue)
        return node_state(qi.state if qi is not None else "", n, total)
    states = [node_state(qi.state, n, total) for qi in host.queues.values()] or [node_state("", n, total)]
    return min(states, key=lambda s: _RANK[s[0]])
