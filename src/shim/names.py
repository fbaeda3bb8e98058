"""Job names: Slurm allows any text; Grid Engine refuses names that start with a digit or hold
blanks, '/', ':', '@', '*' and more. Safe names pass unchanged; any other name is stored
reversibly as ``sx_<base32>`` so squeue can show the Slurm name from ``qstat`` alone."""

from __future__ import annotations

import base64
import re

_SAFE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,199}$")
_PREFIX = "sx_"


def encode(name: str) -> str:
    if _SAFE.match(name) and not name.startswith(_PREFIX):
        return name
    return _PREFIX + base64.b32encode(name.encode("utf-8")).decode("ascii").rstrip("=").lower()


def decode(ge_name: str) -> str:
    if not ge_name.startswith(_PREFIX):
        return ge_name
    body = ge_name[len(_PREFIX):].upper()
    try:
        return base64.b32decode(body + "=" * (-len(body) % 8)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return ge_name
