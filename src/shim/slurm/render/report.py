"""What sprio, sshare, sacctmgr and sreport share: --help/--usage text from an option table, and
Slurm's ``-p``/``-P`` parsable rows and fixed-width columns (print_fields in
src/common/print_fields.c: ``|``-separated, ``-p`` with a trailing ``|``; otherwise each column cut
at its width, right-justified numbers, a dashed line under the header). Reads nothing."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence

from ..options.spec import Arity, OptionSpec
from .help import options_help
from ...plain import record  # (dataclasses costs ~10 ms of a start)


def help_text(prog: str, specs: Sequence[OptionSpec], summary: str, usage: str = "[OPTIONS]") -> str:
    return options_help(specs, f"Usage: {prog} {usage}", width=32, intro=("", summary, ""))


def usage_text(prog: str, specs: Sequence[OptionSpec], tail: str = "") -> str:
    shorts = "".join(sorted(s.short for s in specs if s.short and s.arity is Arity.NONE))
    valued = " ".join(f"[-{s.short} {s.long}]" for s in specs if s.short and s.arity is not Arity.NONE)
    out = f"Usage: {prog} [-{shorts}] {valued}".rstrip()
    return out + (f" {tail}" if tail else "") + "\n"


@record
class Column:
    """One print_field_t: a name, a width (negative: left-justified) and how values print."""

    name: str
    len: int
    kind: str = "str"  # str, uint, double


NO_ENDING, ENDING = 2, 1  # -P and -p (print_fields_parsable_print)


def _fixed(col: Column, value: Any) -> str:
    n = abs(col.len)
    left = col.len < 0
    if col.kind == "str" or value is None:
        if value is None:
            text = " "
        else:
            text = str(value)
            if len(text) > n:
                text = text[:n - 1] + "+"
        return (f"{text:<{n}.{n}}" if left else f"{text:>{n}.{n}}") + " "
    if col.kind == "double":
        text = f"{float(value):{n}f}"
        if len(text) > n:  # print_fields_double: too wide for %f, so %e at the width
            width = n
            extra = len(f"{float(value):{width}.{width}e}") - len(text)
            if extra > width:
                width -= extra - width
            text = f"{float(value):{width}.{width}e}"
            return (f"{text:<{width}}" if left else f"{text:>{width}}") + " "
        return (f"{text:<{n}}" if left else text) + " "
    text = str(int(value))
    return (f"{text:<{n}}" if left else f"{text:>{n}}") + " "


def _parsable(col: Column, value: Any) -> str:
    if value is None:
        return ""
    if col.kind == "double":
        return f"{float(value):f}"
    if col.kind == "uint":
        return str(int(value))
    return str(value)


def print_fields(cols: Sequence[Column], rows: Iterable[Sequence[Any]], *, parsable: int = 0,
                 header: bool = True) -> str:
    """src/common/print_fields.c: print_fields_header and the str/uint/double printers. Fixed
    columns end with a space each (the last too) and a dashed line follows the header; ``-p``
    ends every field with ``|``, ``-P`` puts ``|`` between fields."""
    out: list[str] = []

    def emit(cells: list[str]) -> None:
        if parsable == NO_ENDING:
            out.append("|".join(cells))
        elif parsable == ENDING:
            out.append("".join(c + "|" for c in cells))
        else:
            out.append("".join(cells))

    if header and cols:
        if parsable:
            emit([c.name for c in cols])
        else:
            emit([(f"{c.name:<{abs(c.len)}.{abs(c.len)}}" if c.len < 0 else
                   f"{c.name:>{abs(c.len)}.{abs(c.len)}}") + " " for c in cols])
            out.append("".join("-" * abs(c.len) + " " for c in cols))
    for r in rows:
        emit([_parsable(c, v) if parsable else _fixed(c, v) for c, v in zip(cols, r)])
    return "".join(x + "\n" for x in out)
