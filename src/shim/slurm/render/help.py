"""--help text, generated from the option table, and sbatch's, srun's and salloc's --usage.

``options_help`` is the one builder of a --help listing from an ``OptionSpec`` table: every
command that lists its options (sbatch, srun and salloc here; squeue, sacct, scancel, sinfo, and
through ``render.report.help_text`` sprio, sshare, sreport and sacctmgr) calls it with what differs
between them: the usage line, the lines before and after the listing, the flag column's width and
which rows to leave out."""

from __future__ import annotations

from ..options.spec import Arity, OptionSpec

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Callable, Iterable

    from ..releases import Release

_ARG = {Arity.NONE: "", Arity.REQUIRED: "=value", Arity.OPTIONAL: "[=value]"}


def _flag(s: OptionSpec) -> str:
    short = f"-{s.short}, " if s.short else "    "
    return f"  {short}--{s.long}{_ARG[s.arity]}"


def options_help(specs: Iterable[OptionSpec], usage: str, *, width: int, intro: Iterable[str] = (),
                 tail: Iterable[str] = (), skip: Callable[[OptionSpec], bool] | None = None,
                 describe: Callable[[OptionSpec], str] | None = None) -> str:
    """The usage line, the intro lines, one line per listed option, the tail lines; each line
    ends with a newline. An option's line is ``  -s, --long=value`` (``[=value]`` for an optional
    value, four spaces for no short letter) padded to ``width`` columns, then its help text, or
    ``describe(spec)``. A row without help text (an alias such as --accounts) is never listed;
    ``skip`` leaves out more rows."""
    lines = [usage, *intro]
    for s in specs:
        if not s.help or (skip is not None and skip(s)):
            continue
        lines.append(f"{_flag(s):<{width}}{describe(s) if describe else s.help}")
    lines += tail
    return "\n".join(lines) + "\n"


def _with_fate(s: OptionSpec) -> str:
    return s.help if s.fate.value in ("mapped", "local") else f"{s.help} [{s.fate.value} on Grid Engine]"


def help(prog: str, specs: tuple[OptionSpec, ...]) -> str:
    return options_help(specs, f"Usage: {prog} [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]",
                        width=36, intro=("", "Parallel run options:"), skip=lambda s: prog not in s.commands,
                        describe=_with_fate)


# sbatch's, srun's and salloc's --usage as 22.05.8 prints it (fixtures/slurm-22.05/cases.json:
# usage_<command>); a release that prints another has it in its ``usage`` (releases.py)
_SBATCH_USAGE = """\
Usage: sbatch [-N nnodes] [-n ntasks]
              [-c ncpus] [-r n] [-p partition] [--hold] [--parsable] [-t minutes]
              [-D path] [--no-kill] [--overcommit]
              [--input file] [--output file] [--error file]
              [--time-min=minutes] [--licenses=names] [--clusters=cluster_names]
              [--chdir=directory] [--oversubscribe] [-m dist] [-J jobname]
              [--verbose] [--gid=group] [--uid=user]
              [--contiguous] [--mincpus=n] [--mem=MB] [--tmp=MB] [-C list]
              [--account=name] [--dependency=type:jobid[+time]] [--comment=name]
              [--mail-type=type] [--mail-user=user] [--nice[=value]] [--wait]
              [--requeue] [--no-requeue] [--ntasks-per-node=n] [--propagate]
              [--nodefile=file] [--nodelist=hosts] [--exclude=hosts]
              [--network=type] [--mem-per-cpu=MB] [--qos=qos] [--gres=list]
              [--mem-bind=...] [--reservation=name] [--mcs-label=mcs]
              [--cpu-freq=min[-max[:gov]]] [--power=flags] [--gres-flags=opts]
              [--switches=max-switches{@max-time-to-wait}] [--reboot]
              [--core-spec=cores] [--thread-spec=threads]
              [--bb=burst_buffer_spec] [--bbf=burst_buffer_file]
              [--array=index_values] [--profile=...] [--ignore-pbs] [--spread-job]
              [--export[=names]] [--export-file=file|fd] [--delay-boot=mins]
              [--use-min-nodes]
              [--cpus-per-gpu=n] [--gpus=n] [--gpu-bind=...] [--gpu-freq=...]
              [--gpus-per-node=n] [--gpus-per-socket=n] [--gpus-per-task=n]
              [--mem-per-gpu=MB]
              executable [args...]
"""

_SRUN_USAGE = """\
Usage: srun [-N nnodes] [-n ntasks] [-i in] [-o out] [-e err]
            [-c ncpus] [-r n] [-p partition] [--hold] [-t minutes]
            [-D path] [--immediate[=secs]] [--overcommit] [--overlap] [--no-kill]
            [--oversubscribe] [--label] [--unbuffered] [-m dist] [-J jobname]
            [--jobid=id] [--verbose] [--slurmd_debug=#] [--gres=list]
            [-T threads] [-W sec] [--gres-flags=opts]
            [--licenses=names] [--clusters=cluster_names]
            [--qos=qos] [--time-min=minutes]
            [--contiguous] [--mincpus=n] [--mem=MB] [--tmp=MB] [-C list]
            [--mpi=type] [--account=name] [--dependency=type:jobid[+time]]
            [--kill-on-bad-exit] [--propagate[=rlimits] [--comment=name]
            [--cpu-bind=...] [--mem-bind=...] [--network=type]
            [--ntasks-per-node=n] [--ntasks-per-socket=n] [reservation=name]
            [--ntasks-per-core=n] [--mem-per-cpu=MB] [--preserve-env]
            [--profile=...] [--exact]
            [--mail-type=type] [--mail-user=user] [--nice[=value]]
            [--prolog=fname] [--epilog=fname]
            [--task-prolog=fname] [--task-epilog=fname]
            [--ctrl-comm-ifhn=addr] [--multi-prog] [--mcs-label=mcs]
            [--cpu-freq=min[-max[:gov]]] [--power=flags] [--spread-job]
            [--switches=max-switches{@max-time-to-wait}] [--reboot]
            [--core-spec=cores] [--thread-spec=threads]
            [--bb=burst_buffer_spec] [--bbf=burst_buffer_file]
            [--bcast=<dest_path>] [--bcast-exclude=<NONE|path1,...,pathN>]
            [--send-libs[=y|n]] [--compress[=library]]
            [--acctg-freq=<datatype>=<interval>] [--delay-boot=mins]
            [-w hosts...] [-x hosts...] [--use-min-nodes]
            [--mpi-combine=yes|no] [--het-group=value]
            [--cpus-per-gpu=n] [--gpus=n] [--gpu-bind=...] [--gpu-freq=...]
            [--gpus-per-node=n] [--gpus-per-socket=n] [--gpus-per-task=n]
            [--mem-per-gpu=MB]
            executable [args...]
"""

_SALLOC_USAGE = """\
Usage: salloc [-N numnodes|[min nodes]-[max nodes]] [-n num-processors]
              [-c cpus-per-node] [-r n] [-p partition] [--hold] [-t minutes]
              [--immediate[=secs]] [--no-kill] [--overcommit] [-D path]
              [--oversubscribe] [-J jobname]
              [--verbose] [--gid=group] [--uid=user] [--licenses=names]
              [--clusters=cluster_names]
              [--contiguous] [--mincpus=n] [--mem=MB] [--tmp=MB] [-C list]
              [--account=name] [--dependency=type:jobid[+time]] [--comment=name]
              [--mail-type=type] [--mail-user=user] [--nice[=value]]
              [--bell] [--no-bell] [--kill-command[=signal]] [--spread-job]
              [--nodefile=file] [--nodelist=hosts] [--exclude=hosts]
              [--network=type] [--mem-per-cpu=MB] [--qos=qos]
              [--mem-bind=...] [--reservation=name] [--mcs-label=mcs]
              [--time-min=minutes] [--gres=list] [--gres-flags=opts]
              [--cpu-freq=min[-max[:gov]]] [--power=flags] [--profile=...]
              [--switches=max-switches[@max-time-to-wait]]
              [--core-spec=cores] [--thread-spec=threads] [--reboot]
              [--bb=burst_buffer_spec] [--bbf=burst_buffer_file]
              [--delay-boot=mins] [--use-min-nodes]
              [--cpus-per-gpu=n] [--gpus=n] [--gpu-bind=...] [--gpu-freq=...]
              [--gpus-per-node=n] [--gpus-per-socket=n] [--gpus-per-task=n]
              [--mem-per-gpu=MB]
              [command [args...]]
"""

USAGE = {"sbatch": _SBATCH_USAGE, "srun": _SRUN_USAGE, "salloc": _SALLOC_USAGE}


def usage(prog: str, release: Release) -> str:
    """--usage of sbatch, srun or salloc: the release's synopsis (its ``usage`` entry, else 22.05's)."""
    return release.usage.get(prog, USAGE[prog])
