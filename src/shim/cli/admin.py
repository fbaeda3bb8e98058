"""``slurm-shim``: the shim's own command, a conventional click CLI (help, ``--version``, shell
completion). The Slurm commands keep their getopt work-alike and never import click.

``cluster`` and ``doctor`` are handed, words unchanged, to admin/commands.py's own parser; ``explain``
reads sbatch's options with sbatch's parser. Both keep their messages and exit codes.
"""

from __future__ import annotations

import sys

import click

from .. import SLURM_VERSION, __version__

PROG = "slurm-shim"
# words passed on untouched (their own parser reads them, --help included)
_PASS_ON = {"ignore_unknown_options": True, "allow_extra_args": False, "allow_interspersed_args": False,
            "help_option_names": []}


def version_text() -> str:
    from ..slurm import releases
    from ..errors import ShimError

    try:  # the site's release; a config that does not load still lets the shim say its own version
        follows = releases.current().version
    except ShimError:
        follows = SLURM_VERSION
    return f"{PROG} {__version__} (the commands follow Slurm {follows})"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit(0)


def _items(complete, ctx: click.Context, incomplete: str) -> list:
    from click.shell_completion import CompletionItem

    done = list(ctx.params.get("args") or ())
    return [w if isinstance(w, CompletionItem) else CompletionItem(w) for w in complete(done, incomplete)]


class _PassOn(click.Command):
    """A command whose words go on untouched to its own parser; ``complete(words so far, incomplete)``
    completes them, options too (click would offer only the command's own options, of which it has none)."""

    complete = staticmethod(lambda done, incomplete: [])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list:
        return _items(self.complete, ctx, incomplete)


def _pass_on(complete, **kwargs):
    """``@cli.command`` for a _PassOn command completed by ``complete``."""
    def decorate(fn):
        cls = type("PassOn", (_PassOn,), {"complete": staticmethod(complete)})
        arg = click.argument("args", nargs=-1, type=click.UNPROCESSED,
                             shell_complete=lambda ctx, _param, incomplete: _items(complete, ctx, incomplete))
        return cli.command(cls=cls, context_settings=_PASS_ON, add_help_option=False, **kwargs)(arg(fn))

    return decorate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-V", "--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the shim's version and the Slurm version its commands follow.")
def cli() -> None:
    """The shim's own command: the local cluster, checks of a site, what sbatch would do.

    Slurm's commands (sbatch, srun, salloc, squeue, scancel, scontrol, sacct, sinfo) are separate
    programs beside this one."""


def _cluster_words(done: list[str], incomplete: str) -> list[str]:
    if done:
        return []
    return [w for w in ("up", "down", "status") if w.startswith(incomplete)]


@_pass_on(_cluster_words, short_help="up|down|status: the local single-host Grid Engine.")
def cluster(args: tuple[str, ...]) -> int:
    """up|down|status: install, configure and start a local single-host Grid Engine (root), stop it,
    or show whether its daemons run."""
    from ..admin import commands as impl

    return impl.main(["cluster", *args])


_INSTALL_OPTIONS = ("--plan", "--apply", "--uninstall", "--json", "--config", "--state-dir", "--record", "--profile",
                    "--no-profile", "--purge-state", "--queue", "--default", "--cluster-name", "--sge-root", "--sge-cell", "--bin-dir")


@_pass_on(lambda done, incomplete: [w for w in _INSTALL_OPTIONS if w.startswith(incomplete)],
          short_help="--plan|--apply|--uninstall: the shim on an existing Grid Engine cluster.")
def install(args: tuple[str, ...]) -> int:
    """--plan|--apply|--uninstall: probe an existing Grid Engine, draft the site config and list every
    change (--plan), make exactly those changes and record them (--apply, root), or remove what the
    record says was created (--uninstall, root)."""
    from ..admin import install as impl

    return impl.main(list(args))


@_pass_on(lambda done, incomplete: [])
def doctor(args: tuple[str, ...]) -> int:
    """Check the site config against the live Grid Engine."""
    from ..admin import commands as impl

    return impl.main(["doctor", *args])


def _explain_words(done: list[str], incomplete: str) -> list:
    """sbatch's options, else a file (the script)."""
    if incomplete.startswith("-"):
        from ..slurm.options.table import command_table

        spelled = [f"--{s.long}" for s in command_table("sbatch").specs]
        return sorted(w for w in spelled if w.startswith(incomplete))
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


@_pass_on(_explain_words, short_help="[sbatch options] script: what sbatch would run.")
def explain(args: tuple[str, ...]) -> int:
    """[sbatch options] script: show the qsub command, option by option, and the job's SLURM_* environment."""
    from . import explain as impl

    return impl.main(list(args))


@cli.command(short_help="The bash or zsh completion of every command.")
@click.argument("shell", type=click.Choice(["bash", "zsh", "partitions"]))
def completion(shell: str) -> int:
    """bash: print the bash completion of every command, for `source <(slurm-shim completion bash)`
    (installs also ship it in <prefix>/share/bash-completion/completions); zsh: the same for zsh
    (`source <(slurm-shim completion zsh)`; shipped in <prefix>/share/zsh/site-functions). partitions:
    the site config's partitions, one a line (what the scripts ask for)."""
    from ..admin import completion as impl

    if shell == "partitions":  # what the completion script asks for: the site config's partitions
        click.echo("\n".join(impl.partitions()))
        return 0
    sys.stdout.write(impl.zsh() if shell == "zsh" else impl.bash())
    return 0


@cli.command(name="help", hidden=True)
@click.pass_context
def help_(ctx: click.Context) -> int:
    """The help above (`slurm-shim help`, as before click)."""
    click.echo(ctx.parent.get_help() if ctx.parent else "")
    return 0


def main(argv: list[str]) -> int:
    try:
        rv = cli.main(args=list(argv), prog_name=PROG, standalone_mode=False)
    except click.ClickException as e:  # usage errors (plain `slurm-shim`: the help on stderr), exit 2
        e.show()
        return e.exit_code
    except click.exceptions.Abort:
        return 1
    return rv if isinstance(rv, int) else 0
