"""What sbatch, srun and salloc share around the option table: -v's list of defined options and
--help/--usage/--version. (Fates are options.sources.fates; Grid Engine's refusals of a job in
Slurm's words are submit.refusal.) And what the other commands share around their own small
tables: the rows' factory (own_options), reading the command line, --help/--usage/--version.
(The big option table loads only for --help/--usage.)"""

from __future__ import annotations

import sys

from ..slurm.options import sources
from ..errors import ShimError
from ..slurm.options.getopt import Table, getopt
from ..slurm.options.sources import fates  # noqa: F401  (the commands' and tests' name for it)
from ..slurm.options.spec import Arity, Fate, OptionSpec
from ..slurm import releases


def own_options(prog: str, arity: Arity = Arity.REQUIRED, fate: Fate = Fate.MAP):
    """The factory of a command's own option rows (``_o("long", "l", help=...)``), with the
    command's default arity and fate. ``env`` names the row's input variables, separated by
    spaces (``env="SQUEUE_ACCOUNT"``)."""
    def row(long: str, short: str | None = None, arity: Arity = arity, dest: str = "", help: str = "",
            count: bool = False, env: str = "", fate: Fate = fate) -> OptionSpec:
        return OptionSpec(long, short, arity, commands=frozenset({prog}),
                          env={prog: tuple(env.split())} if env else None, dest=dest, help=help, fate=fate,
                          count=count)
    return row


def getopt_answering(table: Table, argv: list[str], answers=("help", "usage", "version")) -> tuple[list, list[str]]:
    """getopt (no stop at the first word) as the loops of squeue, sinfo and scontrol read a command
    line: ``--help``, ``--usage`` or ``-V`` (sacct: ``-V`` alone) met before a bad option word is
    answered, as those loops print it and exit where they meet it (the pairs up to it, no words);
    else the error stands."""
    try:
        return getopt(table, argv, stop_at_positional=False)
    except ShimError as e:
        before = getattr(e, "before", [])
        for i, (spec, _) in enumerate(before):
            if spec.key in answers:
                return before[:i + 1], []
        raise


def command_line(table: Table, argv: list[str]) -> tuple[sources.Options, list[str]]:
    """A command's options from its command line alone (no environment) and its other words."""
    parsed, positional = getopt(table, argv, stop_at_positional=False)
    o = sources.Options()
    sources.apply(o, table, parsed, "cli")
    return o, positional


def print_version() -> int:
    """The policy commands' --version (Slurm's print_slurm_version: ``slurm 22.05.x``, the
    configured release's version)."""
    sys.stdout.write(releases.version_line("slurm"))
    return 0


def answered(o: sources.Options, help_text, usage_text=None, version: str = "slurm-wlm") -> bool:
    """Writes what --help, --usage (where the command has it) or --version asks for, checked in that
    order, and says whether the command line asked for one (then the command exits 0).
    help_text and usage_text are functions or strings; version is the word before the release
    (``slurm-wlm 22.05.8``, or ``slurm`` where Slurm prints print_slurm_version's form) and the
    version that of the configured release (releases.current)."""
    if o.help:
        out = help_text
    elif o.usage and usage_text is not None:
        out = usage_text
    elif o.version:
        out = releases.version_line(version)
    else:
        return False
    sys.stdout.write(out() if callable(out) else out)
    return True


def print_defined_options(o: sources.Options, t: Table, prog: str, sources_counted=("cli", "env", "script")) -> None:
    """-v: the options in force, as Slurm lists them, between its two separator lines; then what
    the release prints next at -v (its ``<prog> --verbose`` text: 22.05's sbatch, its select plugins)."""
    rule = f"{prog}: -------------------- --------------------"
    options = []
    for spec in t.specs:
        if o.source.get(spec.key) in sources_counted:
            raw = o.raw.get(spec.key)
            value = o[spec.key] if spec.count else ("set" if raw is None else raw)
            options.append(f"{prog}: {spec.long:<20}: {value}")
    lines = [f"{prog}: defined options", rule, *dict.fromkeys(options), rule, f"{prog}: end of defined options"]
    sys.stderr.write("\n".join(lines) + "\n" + releases.current().texts.get(f"{prog} --verbose", ""))


def usage(o: sources.Options, prog: str) -> int:
    """--help (generated from the table), --usage (the release's synopsis) and --version."""
    from ..slurm.render import help as help_render

    if o.version:  # as the release's sbatch, srun and salloc print it (slurm-wlm 24.11.5)
        sys.stdout.write(releases.version_line())
        return 0
    release = releases.current()
    if o.usage:  # (the release's own synopsis, wrapped as it prints it)
        sys.stdout.write(help_render.usage(prog, release))
        return 0
    from ..slurm.options.table import OPTIONS

    rows = tuple(s for s in OPTIONS if release.knows(prog, s.long))  # (the release's options)
    sys.stdout.write(help_render.help(prog, rows))
    return 0


def json_client(prog: str, argv: list[str], words: list[str] | None = None):
    """Who asks, for the meta block of 24.11's and 26.05's --json/--yaml (render/openapi.Client):
    the command line, scontrol's command words, the caller's user and group names."""
    import grp
    import os

    from ..slurm import users
    from ..slurm.render.openapi import Client

    try:
        group = grp.getgrgid(os.getgid()).gr_name
    except KeyError:
        group = str(os.getgid())
    return Client([prog, *argv], users.current(), group, words)
