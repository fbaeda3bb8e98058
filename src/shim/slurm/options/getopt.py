"""A getopt_long work-alike: Slurm parses with glibc's getopt_long, and tools rely on its quirks.

- ``--name=value`` and ``--name value`` (required argument); optional arguments only with ``=``;
- unique prefixes of long names (``--part=gpu``); an exact name beats a longer one;
- short bundles ``-vvH`` and glued values ``-n2``;
- ``+`` mode (sbatch/srun/salloc): parsing stops at the first non-option word, so everything after
  the script or command belongs to it; ``--`` ends options in every mode.
"""

from __future__ import annotations

from ...errors import ShimError
from .spec import Arity, OptionSpec

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Iterable, Sequence

Parsed = list[tuple[OptionSpec, "str | None"]]


class Table:
    """The options one command accepts, indexed for lookup."""

    def __init__(
        self,
        prog: str,
        specs: Iterable[OptionSpec],
        *,
        error_code: int = 255,
        order: Sequence[str] | None = None,
    ):
        """``order`` lists long names in the order of the real command's getopt array, which is the
        order glibc reports an ambiguous prefix's candidates in (default: the order of ``specs``)."""
        self.prog = prog
        self.error_code = error_code
        self.specs = [s for s in specs if prog in s.commands]
        if order is not None:
            rank = {name: i for i, name in enumerate(order)}
            self.specs.sort(key=lambda s: rank.get(s.long, len(rank)))
        self.by_long = {s.long: s for s in self.specs}
        self.by_short = {s.short: s for s in self.specs if s.short}

    def fail(self, message: str) -> ShimError:
        return ShimError(
            f"{self.prog}: {message}", f'Try "{self.prog} --help" for more information', code=self.error_code
        )

    def match_long(self, name: str, typed: str | None = None) -> OptionSpec:
        """The option ``--name`` stands for. ``typed`` is the whole word after ``--`` (with any
        ``=value``): glibc echoes it in the unrecognized and ambiguous messages."""
        typed = name if typed is None else typed
        spec = self.by_long.get(name)
        if spec is not None:
            return spec
        candidates = [s for s in self.specs if s.long.startswith(name)]
        if not candidates:
            raise self.fail(f"unrecognized option '--{typed}'")
        # glibc takes the first match and calls the prefix ambiguous only if another match is a
        # different option; it then lists the first match and every match that differs from it
        first = candidates[0]
        same = (first.key, first.arity, first.const)
        listed = [first] + [s for s in candidates[1:] if (s.key, s.arity, s.const) != same]
        if len(listed) == 1:
            return first
        names = " ".join(f"'--{s.long}'" for s in listed)
        raise self.fail(f"option '--{typed}' is ambiguous; possibilities: {names}")


def getopt(table: Table, argv: Sequence[str], *, stop_at_positional: bool = True) -> tuple[Parsed, list[str]]:
    """Split argv into (option, value) pairs in order, and the positional words. A bad option word
    is the table's error, which carries the pairs before it (``before``): where Slurm's loop acts
    on an option as it meets it (scancel's ``-t``, ``--help``), that comes before the error."""
    parsed: Parsed = []
    try:
        return _getopt(table, argv, stop_at_positional, parsed)
    except ShimError as e:
        e.before = parsed  # type: ignore[attr-defined]
        raise


def _getopt(table: Table, argv: Sequence[str], stop_at_positional: bool, parsed: Parsed) -> tuple[Parsed, list[str]]:
    positional: list[str] = []
    i = 0
    n = len(argv)
    while i < n:
        word = argv[i]
        i += 1
        if word == "--":
            positional.extend(argv[i:])
            break
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            spec = table.match_long(name, word[2:])
            if spec.arity is Arity.NONE:
                if eq:
                    raise table.fail(f"option '--{spec.long}' doesn't allow an argument")
                parsed.append((spec, None))
            elif spec.arity is Arity.OPTIONAL:
                if eq and spec.later is not None and not spec.later(value):
                    # a flag in Slurm 22.05: a value no newer release takes is 22.05's error
                    raise table.fail(f"option '--{spec.long}' doesn't allow an argument")
                parsed.append((spec, value if eq else None))
            elif eq:
                parsed.append((spec, value))
            elif i < n:
                parsed.append((spec, argv[i]))
                i += 1
            else:
                raise table.fail(f"option '--{spec.long}' requires an argument")
            continue
        if word.startswith("-") and len(word) > 1:
            j = 1
            while j < len(word):
                letter = word[j]
                j += 1
                spec = table.by_short.get(letter)
                if spec is None:
                    raise table.fail(f"invalid option -- '{letter}'")
                if spec.arity is Arity.NONE:
                    parsed.append((spec, None))
                    continue
                rest = word[j:]
                if rest:
                    parsed.append((spec, rest))
                elif spec.arity is Arity.OPTIONAL:
                    parsed.append((spec, None))
                elif i < n:
                    parsed.append((spec, argv[i]))
                    i += 1
                else:
                    raise table.fail(f"option requires an argument -- '{letter}'")
                break
            continue
        if stop_at_positional:
            positional.append(word)
            positional.extend(argv[i:])
            break
        positional.append(word)
    return parsed, positional
