"""--help and --usage text, generated from the option table."""

from __future__ import annotations

from ..options.spec import Arity, OptionSpec


def _flag(s: OptionSpec) -> str:
    short = f"-{s.short}, " if s.short else "    "
    arg = {Arity.NONE: "", Arity.REQUIRED: "=value", Arity.OPTIONAL: "[=value]"}[s.arity]
    return f"  {short}--{s.long}{arg}"


def help(prog: str, specs: tuple[OptionSpec, ...]) -> str:
    lines = [f"Usage: {prog} [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]", "", "Parallel run options:"]
    for s in specs:
        if prog not in s.commands:
            continue
        flag = _flag(s)
        fate = "" if s.fate.value in ("mapped", "local") else f" [{s.fate.value} on Grid Engine]"
        lines.append(f"{flag:<36}{s.help}{fate}")
    return "\n".join(lines) + "\n"


def usage(prog: str, specs: tuple[OptionSpec, ...]) -> str:
    flags = " ".join(f"[--{s.long}]" for s in specs if prog in s.commands)
    return f"Usage: {prog} {flags} executable [args...]\n"
