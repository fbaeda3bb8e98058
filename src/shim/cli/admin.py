"""``slurm-shim``: the shim's own command, one click group (help at every level, ``--version``,
shell completion of its words). The Slurm commands keep their getopt work-alike and never import click.

This module holds the words; admin/ does the work (commands.run_cluster, commands.run_doctor,
install.run), imported only when a command runs, so ``slurm-shim --version`` stays cheap.
``explain`` hands its words, unchanged, to sbatch's parser (its messages and exit codes are sbatch's).
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


class _Release(click.Choice):
    """--slurm-release: one of the releases the shim follows (releases.NAMES); another is a usage
    error naming them, in the site config's words (config.Slurm)."""

    def __init__(self) -> None:
        from ..slurm import releases

        super().__init__(releases.NAMES)

    def convert(self, value, param, ctx):
        if value in self.choices:
            return value
        self.fail(f"{value!r} is not a Slurm release the shim follows: {', '.join(self.choices)} (a site on a release "
                  "between two of them names the newest not newer than its own: 23.02 and 23.11 are 22.05, 25.05 "
                  "and 25.11 are 24.11)", param, ctx)


def _release_option(what: str, without: str = ""):
    from ..slurm import releases

    kind = _Release()
    return click.option("--slurm-release", metavar="RELEASE", type=kind, default=None,
                        help=f"the Slurm release the site follows ({'|'.join(kind.choices)}), written as "
                        f"[slurm] release into {what}. Without it: {without}the newest, {releases.DEFAULT}")


_FLAVOUR = click.option("--flavour", type=click.Choice(["debian", "ocs"]), default="debian", show_default=True,
                        help="debian: Debian's SGE 8.1.9 packages; ocs: Open Cluster Scheduler built from source in "
                        "/opt/ocs, a second cell beside Debian's (see cluster_ocs.py)")


class _InOrder(click.Group):
    """Its commands in the order they are defined (click sorts them): up, down, status."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@cli.group(cls=_InOrder, short_help="up|down|status: the local single-host Grid Engine.")
def cluster() -> None:
    """up|down|status: install, configure and start a local single-host Grid Engine (root), stop it,
    or show whether its daemons run."""


@cluster.command(short_help="Install, configure and start Grid Engine, then run test jobs (root).")
@_FLAVOUR
@click.option("--source", metavar="TARBALL", help="the Open Cluster Scheduler source tarball (--flavour ocs; "
              "default $SLURM_SHIM_OCS_TARBALL)")
@_release_option("the site config it writes", "the release the site config up wrote before names, else ")
def up(flavour: str, source: str | None, slurm_release: str | None) -> int:
    """Install, configure and start Grid Engine, write the site config, then run test jobs (root)."""
    if source and flavour != "ocs":
        click.echo("slurm-shim: error: --source is for --flavour ocs (Debian's cell comes from apt)", err=True)
        return 2
    from ..admin import commands as impl

    return impl.run_cluster("up", flavour, source, slurm_release)


@cluster.command(short_help="Stop the Grid Engine daemons (root).")
@_FLAVOUR
def down(flavour: str) -> int:
    """Stop the Grid Engine daemons (root)."""
    from ..admin import commands as impl

    return impl.run_cluster("down", flavour)


@cluster.command(short_help="Show whether the daemons run and the queues' states.")
@_FLAVOUR
def status(flavour: str) -> int:
    """Show whether the daemons run and the queues' states (exit 0 when both daemons run and qmaster answers)."""
    from ..admin import commands as impl

    return impl.run_cluster("status", flavour)


def _flag(name: str, help_: str):
    return click.option(name, is_flag=True, help=help_)


@cli.command(short_help="--plan|--apply|--uninstall: the shim on an existing Grid Engine cluster.")
@_flag("--plan", "probe Grid Engine, draft the site config, list the changes")
@_flag("--apply", "make the planned changes (root); record what was created")
@_flag("--uninstall", "remove what the record says --apply created (root)")
@_flag("--purge-state", "--uninstall: remove the state dir it made even with job records in it")
@_flag("--json", "the plan (or what was done) as JSON")
@_flag("--force", "--apply: install even from an installation someone other than root could change (its bin/ "
       "goes first on every login's PATH)")
@click.option("--config", metavar="PATH", help="the site config to write (default $SLURM_SHIM_CONFIG, else "
              "/etc/slurm-shim/config.toml)")
@click.option("--state-dir", metavar="DIR", help="the shim's state directory (/var/spool/slurm-shim)")
@click.option("--record", metavar="PATH", help="what --apply created (/var/lib/slurm-shim/install-record.json)")
@click.option("--profile", metavar="PATH", help="the profile.d snippet (/etc/profile.d/slurm-shim.sh)")
@_flag("--no-profile", "write no profile.d snippet")
@click.option("--queue", metavar="Q", multiple=True, help="make a partition of this queue (repeatable; default "
              "every queue)")
@click.option("--default", metavar="Q", help="the default partition's queue (default the first)")
@click.option("--cluster-name", metavar="NAME", help="SLURM_CLUSTER_NAME (cluster)")
@click.option("--sge-root", metavar="DIR", help="default $SGE_ROOT, else /var/lib/gridengine")
@click.option("--sge-cell", metavar="CELL", help="default $SGE_CELL, else default")
@click.option("--bin-dir", metavar="DIR", help="the q* binaries (default: found under SGE_ROOT, "
              "/usr/lib/gridengine, PATH)")
@click.option("--qmaster-port", metavar="PORT", type=int, help="default $SGE_QMASTER_PORT, else the sge_qmaster service")
@click.option("--execd-port", metavar="PORT", type=int, help="default $SGE_EXECD_PORT, else the sge_execd service")
@_release_option("the drafted site config")
def install(**given) -> int:
    """--plan|--apply|--uninstall: probe an existing Grid Engine, draft the site config and list every
    change (--plan), make exactly those changes and record them (--apply, root), or remove what the
    record says was created (--uninstall, root)."""
    modes = [f"--{m}" for m in ("plan", "apply", "uninstall") if given[m]]
    if len(modes) != 1:
        raise click.UsageError(f"{modes[1]}: not allowed with {modes[0]}" if modes else
                               "one of --plan, --apply, --uninstall is required")
    from ..admin import install as impl

    given["queue"] = list(given["queue"]) or None
    return impl.run(impl.Request(**{k: v for k, v in given.items() if v is not None}))


@cli.command(short_help="Check the site config against the live Grid Engine.")
@_flag("--no-hosts", "skip the jobs on the execution hosts")
def doctor(no_hosts: bool) -> int:
    """Check the site config against the live Grid Engine, and the shim on every execution host (a
    tiny job each); name the Slurm release the site follows."""
    from ..admin import commands as impl

    return impl.run_doctor(hosts=not no_hosts)


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
