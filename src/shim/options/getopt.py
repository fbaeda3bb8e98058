"""A getopt_long work-alike: Slurm parses with glibc's getopt_long, and tools rely on its quirks.

- ``--name=value`` and ``--name value`` (required argument); optional arguments only with ``=``;
- unique prefixes of long names (``--part=gpu``); an exact name beats a longer one;
- short bundles ``-vvH`` and glued values ``-n2``;
- ``+`` mode (sbatch/srun/salloc): parsing stops at the first non-option word, so everything after
  the script or command belongs to it; ``--`` ends options in every mode.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from ..errors import ShimError
from .spec import Arity, OptionSpec

Parsed = list[tuple[OptionSpec, "str | None"]]


class Table:
    """The options one command accepts, indexed for lookup."""

    def __init__(self, prog: str, specs: Iterable[OptionSpec], *, error_code: int = 255):
        self.prog = prog
        self.error_code = error_code
        self.specs = [s for s in specs if prog in s.commands]
        self.by_long = {s.long: s for s in self.specs}
        self.by_short = {s.short: s for s in self.specs if s.short}

    def fail(self, message: str) -> ShimError:
        return ShimError(
            f"{self.prog}: {message}", f'Try "{self.prog} --help" for more information', code=self.error_code
        )

    def match_long(self, name: str) -> OptionSpec:
        spec = self.by_long.get(name)
        if spec is not None:
            return spec
        candidates = [s for s in self.specs if s.long.startswith(name)]
        # glibc accepts a prefix shared by several entries only if they are all the same option
        distinct = {(s.key, s.arity, s.const) for s in candidates}
        if len(distinct) == 1:
            return candidates[0]
        if not candidates:
            raise self.fail(f"unrecognized option '--{name}'")
        names = " ".join(f"'--{s.long}'" for s in candidates)
        raise self.fail(f"option '--{name}' is ambiguous; possibilities: {names}")


def getopt(table: Table, argv: Sequence[str], *, stop_at_positional: bool = True) -> tuple[Parsed, list[str]]:
    """Split argv into (option, value) pairs in order, and the positional words."""
    parsed: Parsed = []
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
            spec = table.match_long(name)
            if spec.arity is Arity.NONE:
                if eq:
                    raise table.fail(f"option '--{spec.long}' doesn't allow an argument")
                parsed.append((spec, None))
            elif spec.arity is Arity.OPTIONAL:
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
