"""Value grammars of Slurm options, with Slurm's exact messages and exit codes on bad input.

Each parser takes (text, prog) and returns a plain value, or raises ShimError.
"""

from __future__ import annotations

import re

from ..errors import ShimError

INFINITE = -1  # a time limit of UNLIMITED/INFINITE


def _err(prog: str, msg: str, code: int) -> ShimError:
    return ShimError(f"{prog}: error: {msg}", code=code)


_TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def time_minutes(text: str) -> int | None:
    """Slurm's time_str2mins: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S; -1 for unlimited; None if bad."""
    s = text.strip()
    if s.lower() in ("unlimited", "infinite", "-1"):
        return INFINITE
    m = _TIME_RE.match(s)
    if not m:
        return None
    d, a, b, c = m.groups()
    a, b, c = int(a), int(b) if b else None, int(c) if c else None
    if d is not None:
        days, hours, mins, secs = int(d), a, b or 0, c or 0
    elif c is not None:
        days, hours, mins, secs = 0, a, b, c
    elif b is not None:
        days, hours, mins, secs = 0, 0, a, b
    else:
        days, hours, mins, secs = 0, 0, a, 0
    total = ((days * 24 + hours) * 60 + mins) * 60 + secs
    return (total + 59) // 60  # Slurm rounds seconds up to a whole minute


def time_limit(text: str, prog: str, opt: str = "--time") -> int:
    v = time_minutes(text)
    if v is None:
        raise _err(prog, f"Invalid {opt} specification", 255)
    return v


_MEM_RE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)B?$", re.IGNORECASE)
_MEM_SCALE = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}


def mem_mb(text: str, prog: str, opt: str = "--mem") -> int:
    """Memory size in MB (the default unit), K/M/G/T suffixes."""
    m = _MEM_RE.match(text.strip())
    if not m:
        raise _err(prog, f"Invalid {opt} specification", 255)
    n = float(m.group(1)) * _MEM_SCALE[m.group(2).upper()]
    return int(-(-n // 1))


def positive_int(text: str, prog: str, opt: str) -> int:
    """A count that must be >= 1: Slurm's "Invalid numeric value" (exit 1)."""
    try:
        v = int(text.strip(), 10)
    except ValueError:
        v = 0
    if v < 1:
        raise _err(prog, f'Invalid numeric value "{text}" for {opt}.', 1)
    return v
