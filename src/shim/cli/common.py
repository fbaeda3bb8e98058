"""What sbatch, srun and salloc share around the option table: fates (refuse or warn), -v's list of
defined options, --help/--usage/--version, and Grid Engine's refusals in Slurm's words."""

from __future__ import annotations

import sys

from ..errors import ShimError
from ..options import sources
from ..options.getopt import Table
from ..options.spec import Fate
from ..options.table import OPTIONS

VERSION = "slurm 22.05.8 (slurm-shim)"


def fates(o: sources.Options, t: Table, prog: str, sources_counted: tuple[str, ...] = ("cli", "env", "script")
          ) -> list[str]:
    """Refuse what Grid Engine cannot honour (one-line error, exit 1); return a warning for each
    option that is accepted but changes nothing here. Only the given sources count."""
    warnings = []
    seen: set[str] = set()
    for spec in t.specs:
        if o.source.get(spec.key) not in sources_counted or spec.key in seen:
            continue
        seen.add(spec.key)  # one row per option (--cpu-bind and --cpu_bind are one)
        if spec.fate is Fate.REFUSE:
            why = f": {spec.note}" if spec.note else ""
            raise ShimError(f"{prog}: error: --{spec.long} is not supported on Grid Engine{why}", code=1)
        if spec.fate is Fate.WARN:
            why = f" ({spec.note})" if spec.note else ""
            warnings.append(f"{prog}: warning: --{spec.long} has no effect on Grid Engine{why}")
    return list(dict.fromkeys(warnings))


def print_defined_options(o: sources.Options, t: Table, prog: str, sources_counted=("cli", "env", "script")) -> None:
    """-v: the options in force, as Slurm lists them."""
    rule = f"{prog}: -------------------- --------------------"
    lines = [f"{prog}: defined options", rule]
    for spec in t.specs:
        if o.source.get(spec.key) in sources_counted:
            raw = o.raw.get(spec.key)
            value = o[spec.key] if spec.count else ("set" if raw is None else raw)
            lines.append(f"{prog}: {spec.long:<20}: {value}")
    lines += [rule, f"{prog}: end of defined options"]
    print("\n".join(dict.fromkeys(lines)), file=sys.stderr)


def usage(o: sources.Options, prog: str) -> int:
    """--help, --usage and --version, generated from the table."""
    from ..render import help as help_render

    if o.version:
        print(VERSION)
        return 0
    sys.stdout.write(help_render.usage(prog, OPTIONS) if o.usage else help_render.help(prog, OPTIONS))
    return 0


def refusal(prog: str, failed: str, text: str, asked: dict) -> ShimError:
    """Grid Engine's refusal of a job in Slurm's words. With -w e/-w v Grid Engine only says "no
    suitable queues"; what was asked for tells which of Slurm's messages applies. ``failed`` is the
    command's own lead-in ("Batch job submission failed", "Unable to allocate resources", ...)."""
    msg = " ".join(line for line in text.splitlines() if line and line != "Exiting.")
    if "no suitable queues" in msg:
        if asked.get("licenses") and not (asked.get("mem") or asked.get("gpus")):
            return ShimError(f"{prog}: error: {failed}: Invalid license specification", code=1)
        lines = [f"{prog}: error: Memory specification can not be satisfied"] if asked.get("mem") else []
        lines.append(f"{prog}: error: {failed}: Requested node configuration is not available")
        return ShimError(*lines, code=1)
    return ShimError(f"{prog}: error: {failed}: {msg or 'Grid Engine refused the job'}", code=1)
