"""The one reader of Grid Engine's values: memory, durations and time stamps.

Grid Engine writes these the same way everywhere (``qstat -r -xml`` requests, ``qstat -j``, the
accounting file's category, ``qhost``), as sge_types(1) defines them:

- a memory_specifier is a number of bytes with an optional multiplier: ``k``/``m``/``g``/``t``
  are powers of 1000, ``K``/``M``/``G``/``T`` powers of 1024 (``4g`` is 4,000,000,000 bytes,
  ``4G`` 4,294,967,296); ``qhost`` prints fractions (``23.5G``) and ``P``; ``INFINITY`` is no limit;
- a time_specifier is seconds, or ``h:m:s`` where an empty field is 0 (``1::1`` is 3601);
  ``INFINITY`` is no limit;
- a time stamp is ISO local time with optional microseconds (``qstat -xml``, OCS ``-j``), epoch
  seconds (SGE 8.1.9 ``qstat -j -xml``) or milliseconds (OCS/UGE 8.2), or ``qacct -j``'s
  ``Mon Nov 30 08:15:55 2026``.

Standard library only, nothing imported at load time: qstat's reader is on squeue's hot path.
"""

from __future__ import annotations

INFINITE_WORDS = ("INFINITY", "INFINITE", "UNLIMITED")

_MB = 1024 * 1024
_MULTIPLIERS = {
    "": 1,
    "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
    "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5,
}
_MS_FROM = 100_000_000_000
"""An epoch value above this (the year 5138 in seconds) is in milliseconds."""


def _value(text: str | None) -> str | None:
    """The value's text without blanks; None for none; "" for an INFINITY word."""
    t = text.strip() if text else ""
    if not t:
        return None
    return "" if t.upper() in INFINITE_WORDS else t


def ge_memory_bytes(text: str | None) -> float | None:
    """A Grid Engine memory value in bytes; ``inf`` for INFINITY; None when it is none."""
    t = _value(text)
    if not t:
        return None if t is None else float("inf")
    unit = t[-1] if t[-1].isalpha() else ""
    number = t[:-1].rstrip() if unit else t
    scale = _MULTIPLIERS.get(unit)
    if scale is None or not number or not number.replace(".", "", 1).isdigit() or not number.isascii():
        return None
    return float(number) * scale


def ge_memory_mb(text: str | None) -> int | None:
    """A Grid Engine memory request in MB, rounded (``1G`` 1024, ``1g`` 954); None for none or
    INFINITY (no limit)."""
    b = ge_memory_bytes(text)
    if b is None or b == float("inf"):
        return None
    return int(round(b / _MB))


def ge_seconds(text: str | None) -> int | None:
    """A Grid Engine time value as seconds; -1 for INFINITY; None when it is none."""
    t = _value(text)
    if not t:
        return None if t is None else -1
    try:
        parts = [int(p) if p else 0 for p in t.split(":")]
    except ValueError:
        try:
            return int(float(t))
        except ValueError:
            return None
    secs = 0
    for p in parts:
        secs = secs * 60 + p
    return secs


def ge_time(text: str | None) -> float | None:
    """A Grid Engine time stamp as epoch seconds; None when unset (empty, 0, ``-/-``) or unreadable."""
    if not text:
        return None
    t = text.strip()
    if t.isdigit():
        v = int(t)
        if v > _MS_FROM:
            v //= 1000
        return float(v) if v else None
    if not t or t == "-/-":
        return None
    if t[:1].isdigit():
        from datetime import datetime

        try:
            return datetime.fromisoformat(t).timestamp()
        except ValueError:
            return None
    import time

    try:
        return float(time.mktime(time.strptime(t, "%a %b %d %H:%M:%S %Y")))
    except ValueError:
        return None
