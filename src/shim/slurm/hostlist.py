"""Slurm hostlist expressions: ``vm[1-3,5],other`` <-> ``["vm1", "vm2", "vm3", "vm5", "other"]``.

A host name splits into a prefix and a numeric suffix (its trailing digits, whose length is the
zero-padding width). ``compress`` joins consecutive numbers of one prefix into ranges and puts the
ranges of a prefix into one bracket, as Slurm prints node lists (``n[01-03,07]``). ``expand`` is the
inverse and also accepts brackets anywhere in a name (``rack[1-2]n[1-4]``).
"""

from __future__ import annotations

import itertools
import re

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Iterable

MAX_RANGE = 64 * 1024
"""Slurm's MAX_RANGE: one range (``lo-hi``) names at most this many hosts."""
MAX_RANGES = 256 * 1024
"""Slurm's MAX_RANGES: one bracket holds at most this many ranges."""
MAX_HOSTS = 1 << 18
"""The shim's own cap on the names of one expression (Slurm keeps ranges unexpanded; a list of
names costs about 80 bytes each, so this keeps any expansion near 20 MB)."""
MAX_CHARS = 1 << 23
"""... and on their total length (long names or wide zero-padding)."""
_MAX_DIGITS = 18
"""Longer digit runs are no numbers here (Slurm's strtoul would overflow): a host name ending in
them is a plain name, a bracket holding one is invalid."""

_SEPARATORS = " \t\n,"
_DIGITS = "0123456789"


class _Range:
    """Hosts prefix + lo..hi, each number printed with ``width`` digits; or one name (single).
    (A plain class: ``dataclasses`` costs ~10 ms of the start of squeue, which prints node lists.)"""

    __slots__ = ("prefix", "lo", "hi", "width", "single")

    def __init__(self, prefix: str, lo: int = 0, hi: int = 0, width: int = 0, single: bool = False):
        self.prefix, self.lo, self.hi, self.width, self.single = prefix, lo, hi, width, single

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.prefix, self.lo, self.hi, self.width, self.single) == (
            other.prefix, other.lo, other.hi, other.width, other.single)

    __hash__ = None

    def __repr__(self) -> str:
        return f"_Range({self.prefix!r}, {self.lo!r}, {self.hi!r}, {self.width!r}, {self.single!r})"



class HostlistError(ValueError):
    """A host list Slurm's grammar does not allow; commands report it as ``<cmd>: error: ...``."""

def this_host() -> str:
    """This machine's short host name, as Slurm names nodes (the name before the first dot)."""
    import os

    return os.uname().nodename.split(".")[0]


def _parts(host: str) -> tuple[str, int, int] | None:
    """``n007`` -> (``n``, 7, 3): prefix, number, width; None without a numeric suffix (linear:
    the digits are stripped, not matched by a backtracking pattern)."""
    stem = host.rstrip(_DIGITS)
    width = len(host) - len(stem)
    if not width or width > _MAX_DIGITS:
        return None
    return stem, int(host[len(stem):]), width


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


def _push_num(ranges: list[_Range], prefix: str, n: int, width: int) -> None:
    """_push of one numbered name, extending the last range in place when it can (no _Range is
    made for a name that continues it with the same width)."""
    if ranges:
        tail = ranges[-1]
        if tail.hi + 1 == n and not tail.single and tail.prefix == prefix:
            if tail.width != width:  # _widths_combine, inline
                lo_digits, n_digits = len(str(tail.lo)), len(str(n))
                tail_changes = max(tail.width - lo_digits, 0) != max(width - lo_digits, 0)
                if tail_changes and max(width - n_digits, 0) != max(tail.width - n_digits, 0):
                    ranges.append(_Range(prefix, n, n, width))
                    return
                if not tail_changes:
                    tail.width = width
            tail.hi = n
            return
    ranges.append(_Range(prefix, n, n, width))


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
    ranges: list[_Range] = []
    if not sort:
        for host in hosts:
            if host:
                p = _parts(host)
                if p is None:
                    ranges.append(_Range(host, single=True))
                else:
                    _push_num(ranges, *p)
        return _render(ranges)
    groups: dict[tuple[bool, str], set[tuple[int, int]]] = {}
    for host in hosts:
        if host:
            p = _parts(host)
            if p is None:
                groups.setdefault((True, host), set())
            else:
                groups.setdefault((False, p[0]), set()).add((p[1], p[2]))
    for (single, prefix), nums in groups.items():
        if single:
            ranges.append(_Range(prefix, single=True))
            continue
        for n, w in sorted(nums):
            _push_num(ranges, prefix, n, w)
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


def _bracket(spec: str, expr: str) -> tuple[list[tuple[int, int, int]], int, int]:
    """``1-3,07`` -> ([(1, 3, 1), (7, 7, 2)], 4 names, 2 = widest number), checked against Slurm's
    limits before anything is built (each number keeps the width of its range's low end)."""
    items = spec.split(",")
    if len(items) > MAX_RANGES:
        raise HostlistError("_parse_range_list: Too many ranges, can't process entire list")
    ranges: list[tuple[int, int, int]] = []
    total = widest = 0
    for item in items:
        lo, dash, hi = item.partition("-")
        if not _number(lo) or (dash and not _number(hi)):
            raise HostlistError(f"Invalid hostlist: {expr}")
        first = _value(lo)
        last = _value(hi) if dash else first
        if last < first:
            raise HostlistError(f"Invalid hostlist: {expr}")
        if last - first + 1 > MAX_RANGE:
            raise HostlistError(f"_parse_single_range: Too many hosts in range `{item}'")
        ranges.append((first, last, len(lo)))
        total += last - first + 1
        widest = max(widest, len(lo), len(str(last)))
    return ranges, total, widest


def _value(digits: str) -> int:
    return int(digits.lstrip("0") or "0")  # (Python's digit limit counts leading zeros too)


def _number(text: str) -> bool:
    """ASCII digits of a number this module handles (int() stays cheap and within Python's
    limit on digits)."""
    return text.isdigit() and text.isascii() and len(text.lstrip("0")) <= _MAX_DIGITS


def _plan(expr: str) -> list[list[str | list[tuple[int, int, int]]]]:
    """Each token's pieces (literal text, or a bracket's ranges), after counting: an expression
    naming more than MAX_HOSTS names, or MAX_CHARS characters of names, is refused before a
    single name is built."""
    plan: list[list[str | list[tuple[int, int, int]]]] = []
    hosts = chars = 0
    for tok in _tokens(expr):
        pieces: list[str | list[tuple[int, int, int]]] = []
        names, length = 1, 0
        for piece in _BRACKETS.split(tok):
            if piece.startswith("[") and piece.endswith("]") and len(piece) >= 2:
                ranges, n, width = _bracket(piece[1:-1], expr)
                pieces.append(ranges)
                names *= n
                length += width
                if names > MAX_HOSTS:
                    break
            elif "[" in piece or "]" in piece:
                raise HostlistError(f"Invalid hostlist: {expr}")
            elif piece:
                pieces.append(piece)
                length += len(piece)
        hosts += names
        chars += names * length
        if hosts > MAX_HOSTS or chars > MAX_CHARS:
            raise HostlistError(f"Too many hosts in hostlist: {expr}")
        plan.append(pieces)
    return plan


_BRACKETS = re.compile(r"(\[[^\[\]]*\])")


def expand(expr: str) -> list[str]:
    """The host names of a hostlist expression, in order (duplicates kept, as Slurm does).

    Raises HostlistError (a ValueError) on a malformed expression (bad range, unbalanced bracket)
    and on one naming too many hosts (Slurm's MAX_RANGE and MAX_RANGES, the shim's MAX_HOSTS).
    Time and memory are linear in the length of ``expr`` plus the size of the result.
    """
    hosts: list[str] = []
    for pieces in _plan(expr):
        choices = [
            [piece] if isinstance(piece, str)
            else [f"{n:0{w}d}" for lo, hi, w in piece for n in range(lo, hi + 1)]
            for piece in pieces
        ]
        if len(choices) == 1:
            hosts.extend(choices[0])
        else:
            hosts.extend(map("".join, itertools.product(*choices)))
    return hosts


def count(expr: str) -> int:
    """How many names ``expr`` stands for (counted, not built)."""
    total = 0
    for pieces in _plan(expr):
        n = 1
        for piece in pieces:
            if not isinstance(piece, str):
                n *= sum(hi - lo + 1 for lo, hi, _ in piece)
        total += n
    return total


def _atoi(text: str) -> int:
    """C's atoi on glibc, on what follows ``*``: leading blanks, a sign and digits, the rest
    ignored; strtol stops at LONG_MAX (LONG_MIN) and the int keeps the low 32 bits (so
    ``node*99999999999999999999`` repeats the name -1 times: none). The digit string's length is
    looked at before any int() (5,000 digits cost nothing)."""
    m = re.match(r"[ \t\n\v\f\r]*([+-]?)0*([0-9]*)", text)
    assert m is not None
    digits = m[2][:20]
    value = int(digits) if digits else 0
    if len(m[2]) > 19 or value > (1 << 63) - 1:
        value = (1 << 63) - 1 if m[1] != "-" else 1 << 63
    value = (-value if m[1] == "-" else value) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def hostfile(text: str, name: str) -> tuple[list[str] | None, str]:
    """The hosts of a Slurm hostfile (slurm_read_hostfile, api/allocate.c; ``name``: its path, for
    the error): on each line ``#`` starts a comment (``\\#`` is a plain ``#``), an empty line is
    skipped, any other must begin with a letter or digit, and its comma-separated words are
    hostlists, ``NAME*N`` being NAME N times. (hosts, "") or (None, Slurm's error text)."""
    hosts: list[str] = []
    for number, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
        kept, i = [], 0
        while i < len(line):
            c = line[i]
            if c == "#":
                if kept and kept[-1] == "\\":
                    kept[-1] = "#"
                    i += 1
                    continue
                break
            kept.append(c)
            i += 1
        line = "".join(kept)
        if not line:
            continue
        if not line[0].isascii() or not line[0].isalnum():
            return None, f"Invalid hostfile {name} contents on line {number}"
        for word in line.split(","):
            if not word:
                continue
            host, star, count = word.partition("*")
            n = _atoi(count) if star else 0
            if n > MAX_HOSTS - len(hosts):  # counted before a name is repeated
                return None, "Hostlist is too long for the allocate RPC!"
            if n < 0:
                continue  # Slurm's loop repeats the name no time
            try:
                hosts.extend([host] * n if n else expand(word))
            except HostlistError:
                hosts.append(word)
            if len(hosts) > MAX_HOSTS:
                return None, "Hostlist is too long for the allocate RPC!"
    if not hosts:
        return None, "Hostlist is empty!"
    return hosts, ""
