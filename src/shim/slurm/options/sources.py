"""Where option values come from, merged with Slurm's precedence: ``#SBATCH`` directives, then
input environment variables, then the command line; a later source overrides an earlier one.

Every occurrence is parsed (so a bad directive fails even when the command line overrides it,
as in Slurm), and the winner of each option is kept with its provenance.
"""

from __future__ import annotations

import os

from ...errors import ShimError
from .getopt import Parsed, Table, getopt
from .spec import Arity, Fate

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Iterable, Mapping, Sequence


class Options(dict):
    """Option values by key (``cpus_per_task``); a missing option reads as None."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.source: dict[str, str] = {}
        self.raw: dict[str, str | None] = {}

    def __getattr__(self, name: str) -> Any:
        return self.get(name)


def apply(opts: Options, table: Table, parsed: Parsed, source: str) -> None:
    for spec, raw in parsed:
        key = spec.key
        if spec.count:
            opts[key] = (opts.get(key) or 0) + 1
        elif raw is None:
            opts[key] = spec.const
        elif spec.parse is not None:
            opts[key] = spec.parse(raw, table.prog)
        else:
            opts[key] = raw
        opts.source[key] = source
        opts.raw[key] = raw


def directive_words(text: str, prefix: str = "#SBATCH") -> list[str]:
    """The option words of the directive block at the top of a script, as Slurm reads it:
    from the top until the first line that is neither blank nor a comment."""
    words: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        if stripped.startswith(prefix) and (len(stripped) == len(prefix) or stripped[len(prefix)].isspace()):
            words.extend(split_directive(stripped[len(prefix):]))
    return words


def split_directive(text: str) -> list[str]:
    """Split one directive's text into words: blanks separate, quotes group and are removed,
    an unquoted '#' at the start of a word starts a comment."""
    words: list[str] = []
    cur: list[str] = []
    have = False
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
            else:
                cur.append(ch)
            continue
        if ch in "\"'":
            quote = ch
            have = True
        elif ch.isspace():
            if have:
                words.append("".join(cur))
                cur, have = [], False
        elif ch == "#" and not have:
            break
        else:
            cur.append(ch)
            have = True
    if have:
        words.append("".join(cur))
    return words


def _env_truthy(value: str) -> bool:
    v = value.strip().lower()
    if v in ("", "yes"):
        return True
    try:
        return int(v) != 0
    except ValueError:
        return False


def env_parsed(table: Table, environ: Mapping[str, str]) -> Parsed:
    """The input variables set in ``environ``, as (option, value) pairs."""
    out: Parsed = []
    for spec in table.specs:
        for name in spec.env.get(table.prog, ()):
            if name in environ:
                value = environ[name]
                if spec.arity is Arity.NONE:
                    if _env_truthy(value):
                        out.append((spec, None))
                elif spec.arity is Arity.OPTIONAL and value == "":
                    out.append((spec, None))
                elif spec.later is not None and not spec.later(value):
                    # a flag in Slurm 22.05 (SBATCH_REQUEUE): "yes" or a number other than 0 sets
                    # it, anything else leaves it unset; the values newer releases take are theirs
                    if _env_truthy(value):
                        out.append((spec, None))
                else:
                    out.append((spec, value))
                break
    return out


def collect(
    table: Table,
    argv: Sequence[str],
    *,
    script_words: Iterable[str] | None = None,
    environ: Mapping[str, str] | None = None,
    cli: Parsed | None = None,
) -> Options:
    """Merge directives < environment < command line into one Options."""
    opts = Options()
    if script_words is not None:
        parsed, _ = getopt(table, list(script_words), stop_at_positional=False)
        apply(opts, table, parsed, "script")
    apply(opts, table, env_parsed(table, os.environ if environ is None else environ), "env")
    if cli is None:
        cli, _ = getopt(table, argv)
    apply(opts, table, cli, "cli")
    return opts


def fates(o: Options, t: Table, prog: str, sources_counted: tuple[str, ...] = ("cli", "env", "script")
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
