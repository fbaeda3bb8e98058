"""The shape of one option row."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Mapping


class Arity(Enum):
    NONE = 0  # a flag
    REQUIRED = 1  # --opt=v, --opt v, -ov, -o v
    OPTIONAL = 2  # only --opt=v or -ov; "--opt v" leaves v as the next word


class Fate(Enum):
    """What happens to the option on Grid Engine."""

    MAP = "mapped"  # translated to Grid Engine (or honoured by the shim's job wrapper)
    LOCAL = "local"  # handled by the shim itself (--parsable, --help, --wait, ...)
    WARN = "ignored"  # accepted, changes nothing a user relies on; warns once
    REFUSE = "refused"  # Grid Engine cannot honour it; one-line error, exit 1


@dataclass(frozen=True)
class OptionSpec:
    long: str
    short: str | None = None
    arity: Arity = Arity.REQUIRED
    commands: frozenset[str] = frozenset({"sbatch", "srun", "salloc"})
    env: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Input environment variables per command, e.g. {"sbatch": ("SBATCH_ACCOUNT",)}."""
    dest: str = ""
    """The request field this option sets; defaults to the long name with '-' -> '_'."""
    parse: Callable[[str, str], Any] | None = None
    """(value, prog) -> parsed value; raises ShimError with Slurm's message."""
    const: Any = True
    """Value stored by a flag (Arity.NONE), or by an OPTIONAL option given without a value."""
    fate: Fate = Fate.MAP
    note: str = ""
    """Why: shown with warnings and refusals, and in the man page."""
    help: str = ""
    group: str = "other"
    count: bool = False
    """Repeatable flag that counts (-v -v)."""

    @property
    def key(self) -> str:
        return self.dest or self.long.replace("-", "_")
