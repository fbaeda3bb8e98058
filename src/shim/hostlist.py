"""Slurm hostlist expressions: ``vm[1-3,5],other`` <-> ``["vm1", "vm2", "vm3", "vm5", "other"]``.

A host name splits into a prefix and a numeric suffix (its trailing digits, whose length is the
zero-padding width). ``compress`` joins consecutive numbers of one prefix into ranges and puts the
ranges of a prefix into one bracket, as Slurm prints node lists (``n[01-03,07]``). ``expand`` is the
inverse and also accepts brackets anywhere in a name (``rack[1-2]n[1-4]``).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Iterable

MAX_HOSTS = 1 << 20
"""Refuse expressions naming more hosts than this (Slurm has a similar cap)."""

_SEPARATORS = " \t\n,"


@dataclass
class _Range:
    """Hosts prefix + lo..hi, each number printed with ``width`` digits; or one name (single)."""

    prefix: str
    lo: int = 0
    hi: int = 0
    width: int = 0
    single: bool = False



class HostlistError(ValueError):
    """A host list Slurm's grammar does not allow; commands report it as ``<cmd>: error: ...``."""

def _split_host(host: str) -> _Range:
    m = re.match(r"^(.*?)(\d+)$", host, re.ASCII)
    if not m:
        return _Range(host, single=True)
    return _Range(m.group(1), int(m.group(2)), int(m.group(2)), len(m.group(2)))


def _pad_extra(num: int, width: int) -> int:
    """How many zeros printing ``num`` with ``width`` digits adds."""
    return max(width - len(str(num)), 0)


def _widths_combine(a: _Range, b: _Range) -> bool:
    """Slurm's width equivalence: two zero-padding widths are compatible when one of them can be
    applied to both numbers without changing how either prints; the range then takes that width."""
    if a.width == b.width:
        return True
    a_changes = _pad_extra(a.lo, a.width) != _pad_extra(a.lo, b.width)
    b_changes = _pad_extra(b.lo, b.width) != _pad_extra(b.lo, a.width)
    if a_changes and b_changes:
        return False
    if a_changes:
        b.width = a.width
    else:
        a.width = b.width
    return True


def _same_group(a: _Range, b: _Range) -> bool:
    return not a.single and not b.single and a.prefix == b.prefix


def _push(ranges: list[_Range], hr: _Range) -> None:
    """Append ``hr``, extending the last range when it continues it (as Slurm's hostlist_push)."""
    if ranges:
        tail = ranges[-1]
        if _same_group(tail, hr) and tail.hi + 1 == hr.lo and _widths_combine(tail, hr):
            tail.hi = hr.hi
            return
    ranges.append(hr)


def _render(ranges: list[_Range]) -> str:
    parts: list[str] = []
    i = 0
    while i < len(ranges):
        first = ranges[i]
        if first.single:
            parts.append(first.prefix)
            i += 1
            continue
        group = [first]
        while i + len(group) < len(ranges) and _same_group(first, ranges[i + len(group)]):
            group.append(ranges[i + len(group)])
        nums = ",".join(
            f"{r.lo:0{r.width}d}" + (f"-{r.hi:0{r.width}d}" if r.hi > r.lo else "") for r in group
        )
        bracket = len(group) > 1 or first.hi > first.lo
        parts.append(f"{first.prefix}[{nums}]" if bracket else f"{first.prefix}{nums}")
        i += len(group)
    return ",".join(parts)


def compress(hosts: Iterable[str], *, sort: bool = True) -> str:
    """The hostlist expression of ``hosts``.

    With ``sort`` (the default, for node lists): names sharing a prefix are gathered in the order
    the prefixes first appear, sorted by number inside a prefix, and duplicates are dropped
    (``["b2", "a1", "b1", "b1"]`` -> ``b[1-2],a1``). Without it, the input order is kept exactly and
    only neighbours merge, like ``scontrol show hostlist``.
    """
    names = [h for h in hosts if h]
    if sort:
        groups: dict[tuple[bool, str], set[tuple[int, int]]] = {}
        for host in names:
            hr = _split_host(host)
            groups.setdefault((hr.single, hr.prefix), set()).add((hr.lo, hr.width))
        ordered: list[_Range] = []
        for (single, prefix), nums in groups.items():
            if single:
                ordered.append(_Range(prefix, single=True))
            else:
                ordered.extend(_Range(prefix, n, n, w) for n, w in sorted(nums))
    else:
        ordered = [_split_host(h) for h in names]
    ranges: list[_Range] = []
    for hr in ordered:
        _push(ranges, hr)
    return _render(ranges)


def _tokens(expr: str) -> list[str]:
    """Split at commas and blanks outside brackets."""
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)
        if ch in _SEPARATORS and depth == 0:
            if cur:
                out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def _range_list(spec: str, expr: str) -> list[str]:
    """``1-3,07`` -> ["1", "2", "3", "07"] (widths from each range's low end)."""
    out: list[str] = []
    for item in spec.split(","):
        lo, dash, hi = item.partition("-")
        if not lo.isdigit() or not lo.isascii() or (dash and not (hi.isdigit() and hi.isascii())):
            raise HostlistError(f"Invalid hostlist: {expr}")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first or last - first >= MAX_HOSTS:
            raise HostlistError(f"Invalid hostlist: {expr}")
        out.extend(f"{n:0{len(lo)}d}" for n in range(first, last + 1))
    return out


def expand(expr: str) -> list[str]:
    """The host names of a hostlist expression, in order (duplicates kept, as Slurm does).

    Raises ValueError on a malformed expression (bad range, unbalanced bracket).
    """
    hosts: list[str] = []
    for tok in _tokens(expr):
        pieces = re.split(r"(\[[^\[\]]*\])", tok)
        choices: list[list[str]] = []
        for piece in pieces:
            if piece.startswith("[") and piece.endswith("]") and len(piece) >= 2:
                choices.append(_range_list(piece[1:-1], expr))
            elif "[" in piece or "]" in piece:
                raise HostlistError(f"Invalid hostlist: {expr}")
            elif piece:
                choices.append([piece])
        total = 1
        for c in choices:
            total *= len(c)
        if len(hosts) + total > MAX_HOSTS:
            raise HostlistError(f"Too many hosts in hostlist: {expr}")
        hosts.extend("".join(parts) for parts in itertools.product(*choices))
    return hosts


def count(expr: str) -> int:
    """How many names ``expr`` stands for."""
    return len(expand(expr))
