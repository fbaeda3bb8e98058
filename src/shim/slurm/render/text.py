"""Slurm's printers of durations, sizes and its version, one function per Slurm function.

Each is named after the Slurm 22.05 function whose output it reproduces, so that a command's
field says which Slurm printer it follows:

- ``print_secs``: ``_print_secs`` of ``src/squeue/print.c`` (``M:SS``, ``H:MM:SS``,
  ``D-HH:MM:SS``; ``INVALID`` below 0 or past a year) and of ``src/sinfo/print.c`` (the same
  without the INVALID check);
- ``secs2time_str`` and ``mins2time_str``: ``src/common/parse_time.c`` (``HH:MM:SS``,
  ``D-HH:MM:SS``; ``UNLIMITED`` for INFINITE, ``INVALID`` below 0);
- ``convert_num_unit``: ``src/common/slurm_protocol_api.c`` (``convert_num_unit2`` with the
  divisor 1024): a value in a unit (none, K, M, ...) scaled up while exact, ``1536`` MB is
  ``1.50G``;
- ``version_json``: the ``"version"`` object of Slurm's ``--json`` documents.

Nothing is imported: the renderers of squeue and sinfo load this on every call.
"""

from __future__ import annotations

from ... import SLURM_VERSION

INFINITE = -1
"""The shim's INFINITE (Slurm's 0xffffffff) for durations and limits."""
YEAR_SECONDS = 365 * 24 * 3600

UNIT_NONE, UNIT_KILO, UNIT_MEGA, UNIT_GIGA, UNIT_TERA, UNIT_PETA = range(6)
_UNIT_LETTERS = ("", "K", "M", "G", "T", "P", "?")


def print_secs(t: int, check: bool = True) -> str:
    """``_print_secs``: ``M:SS``, ``H:MM:SS``, ``D-HH:MM:SS``. ``check`` (squeue's version):
    ``INVALID`` for a negative time or one past a year; sinfo's prints any time."""
    if check and (t < 0 or t > YEAR_SECONDS):
        return "INVALID"
    days, rem = divmod(t, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, seconds = divmod(rem, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{seconds:02d}"
    return f"{minutes}:{seconds:02d}"


def secs2time_str(secs: int) -> str:
    """``secs2time_str``: ``HH:MM:SS`` or ``D-HH:MM:SS``; UNLIMITED for INFINITE, INVALID below 0."""
    if secs == INFINITE:
        return "UNLIMITED"
    if secs < 0:
        return "INVALID"
    days, rem = divmod(int(secs), 86400)
    hours, rem = divmod(rem, 3600)
    minutes, seconds = divmod(rem, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{seconds:02d}"
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}"


def mins2time_str(minutes: int) -> str:
    """``mins2time_str``: a number of minutes as ``HH:MM:00`` or ``D-HH:MM:00``; UNLIMITED for
    INFINITE, INVALID below 0 (secs2time_str of the seconds)."""
    return secs2time_str(minutes if minutes == INFINITE else int(minutes) * 60)


def convert_num_unit(num: float, orig_type: int = UNIT_NONE, exact: bool = True) -> str:
    """``convert_num_unit``: ``num`` in unit ``orig_type`` (UNIT_NONE, UNIT_KILO, UNIT_MEGA, ...),
    printed as an integer with its unit letter, or with two decimals.

    ``exact`` (CONVERT_NUM_UNIT_EXACT, the commands' default) scales up by 1024 while the value
    stays a multiple of 512 (half values such as 1.5G count as exact); ``exact=False`` is
    CONVERT_NUM_UNIT_NO (``--noconvert``): the value in its own unit. 0 prints as ``0``."""
    if int(num) == 0:
        return "0"
    v = float(num)
    if exact:
        while v >= 1024 and int(v) % 512 == 0:
            v /= 1024
            orig_type += 1
    if not UNIT_NONE <= orig_type <= UNIT_PETA:
        orig_type = len(_UNIT_LETTERS) - 1
    whole = int(v)
    if whole == v:
        return f"{whole}{_UNIT_LETTERS[orig_type]}"
    return f"{v:.2f}{_UNIT_LETTERS[orig_type]}"


def version_json() -> dict[str, int]:
    """The ``"version"`` object of the ``meta.Slurm`` part of a ``--json`` document."""
    major, minor, micro = (int(p) for p in SLURM_VERSION.split("."))
    return {"major": major, "micro": micro, "minor": minor}
