"""Grid Engine hosts and queue instances for sinfo: ``qhost -q -xml`` (one call: hardware, load,
memory, and every queue instance's slots and state letters), with ``-F name,...`` for consumables;
``qconf -se host`` for the configured amount of a consumable (GRES totals).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from .units import ge_memory_bytes


@dataclass
class QueueInstance:
    queue: str
    host: str
    slots_used: int = 0
    slots_total: int = 0
    slots_resv: int = 0
    state: str = ""  # Grid Engine's state letters: u a A C s S d D E c o

    @property
    def name(self) -> str:
        return f"{self.queue}@{self.host}"


@dataclass
class Host:
    name: str
    arch: str = ""
    ncpu: int = 0
    sockets: int = 0
    cores: int = 0  # all cores of the host
    threads: int = 0  # all hardware threads of the host
    load: float | None = None
    mem_total_mb: int | None = None
    mem_used_mb: int | None = None
    resources: dict[str, str] = field(default_factory=dict)  # -F values (current availability)
    queues: dict[str, QueueInstance] = field(default_factory=dict)


QHOST_ARGS = ["-q", "-xml"]


def qhost_args(resources: list[str] | None = None) -> list[str]:
    args = list(QHOST_ARGS)
    if resources:
        args += ["-F", ",".join(resources)]
    return args


def size_mb(text: str | None) -> int | None:
    """qhost's sizes (``23.5G``, ``353.9M``, ``16.000G``, ``24105M``) in MB, truncated; None for ``-``."""
    b = ge_memory_bytes(text)
    return int(b / (1024 * 1024)) if b is not None and b != float("inf") else None


def _int(text: str | None) -> int:
    try:
        return int(float(text or 0))
    except ValueError:
        return 0


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text not in (None, "", "-") else None
    except ValueError:
        return None


def parse_qhost_xml(text: str | bytes) -> list[Host]:
    """``qhost [-q] [-F ...] [-j] -xml`` -> hosts (the pseudo host ``global`` left out)."""
    if isinstance(text, str):
        text = text.encode("utf-8", "replace")
    root = ET.fromstring(text)
    out: list[Host] = []
    for h in root.iter("host"):
        name = h.get("name", "")
        if name == "global":
            continue
        hv = {e.get("name", ""): (e.text or "") for e in h.findall("hostvalue")}
        host = Host(
            name=name, arch=hv.get("arch_string", ""), ncpu=_int(hv.get("num_proc")),
            sockets=_int(hv.get("m_socket")), cores=_int(hv.get("m_core")), threads=_int(hv.get("m_thread")),
            load=_float(hv.get("load_avg")), mem_total_mb=size_mb(hv.get("mem_total")),
            mem_used_mb=size_mb(hv.get("mem_used")))
        for e in h.findall("resourcevalue"):
            host.resources[e.get("name", "")] = e.text or ""
        for q in h.findall("queue"):
            qv = {e.get("name", ""): (e.text or "") for e in q.findall("queuevalue")}
            qi = QueueInstance(q.get("name", ""), name, _int(qv.get("slots_used")), _int(qv.get("slots")),
                               _int(qv.get("slots_resv")), qv.get("state_string", "") or "")
            host.queues[qi.queue] = qi
        out.append(host)
    return out


def parse_complex_values(qconf_se: str) -> dict[str, str]:
    """``qconf -se host`` -> its complex_values ({"gpu": "2", "mem_free": "24105M"}); a complex
    named twice has its first value (the one Grid Engine's list lookup finds)."""
    text = re.sub(r"\\\n\s*", "", qconf_se)
    for line in text.splitlines():
        if line.startswith("complex_values"):
            vals = line.split(None, 1)[1].strip() if len(line.split(None, 1)) > 1 else ""
            if vals == "NONE":
                return {}
            out = {}
            for item in vals.split(","):
                k, _, v = item.strip().partition("=")
                if k:
                    out.setdefault(k, v)
            return out
    return {}


# Grid Engine queue instance states -> (Slurm node state family, reason)
STATE_REASONS = {
    "u": ("down", "Not responding"),
    "o": ("down", "Queue instance orphaned"),
    "E": ("drain", "Queue instance in error state"),
    "d": ("drain", "Disabled by admin"),
    "D": ("drain", "Disabled by calendar"),
    "C": ("drain", "Suspended by calendar"),
    "c": ("drain", "Configuration ambiguous"),
    "s": ("drain", "Suspended"),
    "S": ("drain", "Suspended by subordination"),
    "a": ("drain", "Load alarm"),
    "A": ("drain", "Suspend threshold alarm"),
}


def node_state(letters: str, used: int, total: int) -> tuple[str, str, bool]:
    """(Slurm base state, reason, responding) of one host in one partition.

    Base states: idle, mixed, allocated, down, drained, draining.
    """
    responding = "u" not in letters
    for c in "uoEdDCcsSaA":
        if c in letters:
            family, reason = STATE_REASONS[c]
            if family == "down":
                return "down", reason, responding
            return ("draining" if used > 0 else "drained"), reason, responding
    if used <= 0:
        return "idle", "", True
    if total and used >= total:
        return "allocated", "", True
    return "mixed", "", True
