"""The shape of one option row."""

from __future__ import annotations

from enum import Enum

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
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


class OptionSpec:
    """One option: its spelling, arity, commands, input variables, value grammar and fate."""

    __slots__ = ("long", "short", "arity", "commands", "env", "dest", "parse", "const", "fate", "note", "help",
                 "group", "count", "later", "key")

    def __init__(
        self,
        long: str,
        short: str | None = None,
        arity: Arity = Arity.REQUIRED,
        commands: frozenset[str] = frozenset({"sbatch", "srun", "salloc"}),
        env: Mapping[str, tuple[str, ...]] | None = None,
        dest: str = "",
        parse: Callable[[str, str], Any] | None = None,
        const: Any = True,
        fate: Fate = Fate.MAP,
        note: str = "",
        help: str = "",
        group: str = "other",
        count: bool = False,
        later: Callable[[str], bool] | None = None,
    ):
        self.long = long
        self.short = short
        self.arity = arity
        self.commands = commands
        self.env = env or {}  # input variables per command, e.g. {"sbatch": ("SBATCH_ACCOUNT",)}
        self.dest = dest  # the request key; defaults to the long name with '-' -> '_'
        self.parse = parse  # (value, prog) -> parsed value; raises ShimError with Slurm's message
        self.const = const  # stored by a flag, or by an OPTIONAL option given without a value
        self.fate = fate
        self.note = note  # why: shown with warnings and refusals, and in the man page
        self.help = help
        self.group = group
        self.count = count  # a repeatable flag that counts (-v -v)
        # An OPTIONAL row for an option that is a flag in Slurm 22.05 and takes an optional value in
        # newer releases (--requeue[=expedite], --pty[=fd]): which values the newer releases take.
        # Any other "=value" is 22.05's getopt error ("doesn't allow an argument"), and its input
        # variable follows 22.05's rules for a flag's variable (sources.env_parsed).
        self.later = later
        self.key = dest or long.replace("-", "_")

    def __repr__(self) -> str:
        return f"OptionSpec(--{self.long})"
