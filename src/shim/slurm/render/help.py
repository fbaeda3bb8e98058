"""--help text, generated from the option table, and sbatch's, srun's and salloc's --usage.

``options_help`` is the one builder of a --help listing from an ``OptionSpec`` table: every
command that lists its options (sbatch, srun and salloc here; squeue, sacct, scancel, sinfo, and
through ``render.report.help_text`` sprio, sshare, sreport and sacctmgr) calls it with what differs
between them: the usage line, the lines before and after the listing, the flag column's width and
which rows to leave out."""

from __future__ import annotations

from ..options.spec import Arity, OptionSpec

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Callable, Iterable

    from ..releases import Release

_ARG = {Arity.NONE: "", Arity.REQUIRED: "=value", Arity.OPTIONAL: "[=value]"}


def _flag(s: OptionSpec) -> str:
    short = f"-{s.short}, " if s.short else "    "
    return f"  {short}--{s.long}{_ARG[s.arity]}"


def options_help(specs: Iterable[OptionSpec], usage: str, *, width: int, intro: Iterable[str] = (),
                 tail: Iterable[str] = (), skip: Callable[[OptionSpec], bool] | None = None,
                 describe: Callable[[OptionSpec], str] | None = None) -> str:
    """The usage line, the intro lines, one line per listed option, the tail lines; each line
    ends with a newline. An option's line is ``  -s, --long=value`` (``[=value]`` for an optional
    value, four spaces for no short letter) padded to ``width`` columns, then its help text, or
    ``describe(spec)``. A row without help text (an alias such as --accounts) is never listed;
    ``skip`` leaves out more rows."""
    lines = [usage, *intro]
    for s in specs:
        if not s.help or (skip is not None and skip(s)):
            continue
        lines.append(f"{_flag(s):<{width}}{describe(s) if describe else s.help}")
    lines += tail
    return "\n".join(lines) + "\n"


def _with_fate(s: OptionSpec) -> str:
    return s.help if s.fate.value in ("mapped", "local") else f"{s.help} [{s.fate.value} on Grid Engine]"


def help(prog: str, specs: tuple[OptionSpec, ...]) -> str:
    return options_help(specs, f"Usage: {prog} [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]",
                        width=36, intro=("", "Parallel run options:"), skip=lambda s: prog not in s.commands,
                        describe=_with_fate)


def usage(prog: str, release: Release) -> str:
    """--usage of sbatch, srun or salloc: the release's synopsis (its ``usage`` entry: releases.py)."""
    return release.usage[prog]
