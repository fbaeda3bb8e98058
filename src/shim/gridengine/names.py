"""Job names: Slurm allows any text; Grid Engine refuses names that start with a digit or hold
blanks, '/', ':', '@', '*' and more. Safe names pass unchanged; any other name is stored
reversibly as ``sx_<base32>`` so squeue can show the Slurm name from ``qstat`` alone.

Anyone can name a job ``sx_...`` with a raw ``qsub -N``, so decode believes only what encode would
have written (the same lower-case, unpadded base32 of the same UTF-8), and never hands out a name
with control or other non-printable characters (a terminal escape, a newline that fakes a row):
such a name is shown as Grid Engine holds it, ``sx_...``."""

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
        name = base64.b32decode(body + "=" * (-len(body) % 8)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return ge_name
    if not name.isprintable() or encode(name) != ge_name:
        return ge_name
    return name
