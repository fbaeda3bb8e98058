"""The Slurm release a site comes from (issue 30): 22.05, 24.11 or 26.05, one table per release of
what differs between them, in the style of the option table. Commands, renderers and the job's
environment ask the configured release (``current()``) what it has; no command tests a release
name.

A row names what varies: a job variable (``env``), or a command's own option (``options``: command
-> long names). Anything no row names is the same in every release. The facts were measured on real
Slurm 22.05.8, 24.11.5 and 26.05.5 (fixtures/slurm-*/README.md); a release between two of these
behaves as the newest of them not newer than it (README, "The Slurm release").

Reads no file but the site config, imports nothing heavy: every command's ``--version`` asks it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Iterable

DEFAULT = "26.05"  # the release of a site config without [slurm] release: the newest (cluster up and install write it)


# What a release does or does not do, beyond variables, options and texts: a name each, for the
# ``rules`` of the releases that follow it (the code that reads one names it, never a release).
KNOWN_DEPENDENCY = "known-dependency"
TRES_SLASH = "tres-slash"
JOB_TRES_SPLIT = "job-tres-split"
JOB_FIELDS_26 = "job-fields-26"
MERGED_STDERR_EMPTY = "merged-stderr-empty"
OVERSUBSCRIBE_NO = "oversubscribe-no"
EITHER_LICENSE = "either-license"
EQUAL_PRIORITIES = "equal-priorities"
STEPD_STAMP = "stepd-stamp"
CANCEL_SIGNAL_NAMED = "cancel-signal-named"
NODES_READY = "nodes-ready"
SUSPEND_ERROR_NO_SPACE = "suspend-error-no-space"
TEST_ONLY_STRAY_A = "test-only-stray-a"
NODE_CONFIG_AT_SUBMIT = "node-config-at-submit"
SACCT_LISTS_AT_ONCE = "sacct-lists-at-once"
SACCT_EXIT_AS_IS = "sacct-exit-as-is"
JOB_ID_RETURNED = "job-id-returned"
LAUNCH_LINES_PLAIN = "launch-lines-plain"
REVOKED_AFTER_RELEASE = "revoked-after-release"
SACCT_DEFAULT_OUT_AS_IS = "sacct-default-out-as-is"
SACCT_NODE_NONE = "sacct-node-none"
SACCT_PATTERN_KEEPS_UNKNOWN = "sacct-pattern-keeps-unknown"
SACCT_STEP_STDIO = "sacct-step-stdio"
RAISED_SIGNAL = "raised-signal"
OUTPUT_DIRS_MADE = "output-dirs-made"
SINFO_RESERVATION = "sinfo-reservation"
PARTITION_SOCKET_LIMIT = "partition-socket-limit"
PARTITION_EXCLUSIVE = "partition-exclusive"
RULES = {
    # sacct answers --help, --helpformat, --helpstate and --helpreason where its getopt loop meets
    # them: the first of them wins, before a later bad option (24.11 reads the whole line first, a
    # bad option fails it, and the last of them wins)
    SACCT_LISTS_AT_ONCE: "26.05",
    # sacct's ExitCode prints an exit code of 128 or more as it is: 22.05 and 24.11 print it less
    # 128 (a script's exit 143 is 15:0, 128 is 0:0, a step's exit 200 is 72:0); DerivedExitCode,
    # scontrol's ExitCode and --json keep it (fixtures/slurm-*/oracle-step-rows.json)
    SACCT_EXIT_AS_IS: "26.05",
    # sacct's StdOut (and --json's stdout) of a batch job submitted without -o is Slurm's default
    # pattern as it is, slurm-%j.out (slurm-%A_%a.out in an array); 24.11 prints it under the job's
    # working directory. Expanded, both are under it (fixtures/slurm-*/oracle-sacct-stdio.json)
    SACCT_DEFAULT_OUT_AS_IS: "26.05",
    # sacct --expand-patterns: %N of a job that has no node (pending, cancelled before it ran) is
    # "None"; 24.11 prints "(null)"
    SACCT_NODE_NONE: "26.05",
    # sacct --expand-patterns: a width before a letter that is no pattern stays as written (%5q);
    # 24.11 drops the '%' and every digit but the last (5q), as the job's own files are named
    SACCT_PATTERN_KEEPS_UNKNOWN: "26.05",
    # sacct: a srun step's row carries its -o, -e, -i (StdOut, StdErr, StdIn under its working
    # directory; --json's as written, beside the expanded paths); 24.11's step rows have none
    SACCT_STEP_STDIO: "26.05",
    # afterok/afternotok on a job the controller does not know (never was, or ended more than
    # MinJobAge ago) is refused at submission: "Job dependency problem", exit 1 (22.05 took it
    # and the job ran at once: an unknown job counts as done)
    KNOWN_DEPENDENCY: "24.11",
    # a job's TRES per node (squeue %b / tres-per-node, scontrol's TresPerNode): gres/gpu:N
    # (22.05: gres:gpu:N)
    TRES_SLASH: "24.11",
    # scontrol show job: ReqTRES= and AllocTRES= lines (AllocTRES=(null) until the job has its
    # allocation) where 22.05 had one TRES= line; no Power= line
    JOB_TRES_SPLIT: "24.11",
    # scontrol show job: Exclusive= and LicensesAlloc= on the OverSubscribe line, a SubmitLine=
    # line after Command=, no blank last line, and with -d a SLUID= line after the first
    JOB_FIELDS_26: "26.05",
    # scontrol show job: StdErr= is empty where stderr goes to the stdout file (22.05 and 24.11
    # repeat the StdOut path)
    MERGED_STDERR_EMPTY: "26.05",
    # OverSubscribe of a job (squeue %h, scontrol show job) is NO where 22.05 and 24.11 say OK
    OVERSUBSCRIBE_NO: "26.05",
    # -L a:1|b:1 asks for any one of the licenses (every alternative must be valid; '|' and ','
    # never together); 22.05 and 24.11 refuse every '|': "Invalid license specification"
    EITHER_LICENSE: "26.05",
    # squeue's order of jobs of equal priority: every job's priority is 1 (PriorityType's default
    # became priority/multifactor, no weights set), so the start-time sort squeue does before its
    # -S keys decides among them (squeue/sort.c sort_jobs_by_start_time, the same in every
    # release): the jobs with a start time (running, or waiting for --begin) latest first, ties
    # in the controller's list order, then those without in that order backwards (its comparator
    # calls every job without a start the greater; glibc's merge sort so reverses them). 22.05's
    # priority/basic gave each job its own priority, decreasing with submission: ties in the
    # controller's order (operations/jobqueue.sort_records)
    EQUAL_PRIORITIES: "24.11",
    # slurmstepd's lines in the job's output and srun's stderr begin "[<time>.<ms>] error: " where
    # 22.05 and 24.11 say "slurmstepd-<node>: error: "; a task's launch failure (execve) comes
    # before srun's line about that task, not after it (runtime/stepd.py)
    STEPD_STAMP: "26.05",
    # "*** JOB|STEP ... CANCELLED AT <time> DUE to SIGNAL Terminated ***" (the signal's name, as
    # strsignal; sic "to") where a signal ended it (scancel, -s TERM/KILL); 22.05 and 24.11 end
    # at "<time> ***". A time limit still says "DUE TO TIME LIMIT" in every release
    CANCEL_SIGNAL_NAMED: "26.05",
    # salloc prints "salloc: Nodes <nodes> are ready for job" after "Granted job allocation N"
    # (not with -Q), and srun -v in a job of its own "srun: Nodes <nodes> are ready for job"
    NODES_READY: "24.11",
    # scontrol hold/uhold/release: "slurm_suspend error:<text>" (no space after the colon)
    SUSPEND_ERROR_NO_SPACE: "26.05",
    # sbatch --test-only: "Job N to start at <time> a using ..." (a stray "a" after the time)
    TEST_ONLY_STRAY_A: "26.05",
    # 24.11 only: a job no node of its partition could ever hold (more nodes than the partition
    # has, more CPUs on one node than a node has) is refused at submission, "Requested node
    # configuration is not available", exit 1 (srun, salloc: "Unable to allocate resources",
    # "Job submit/allocate failed"); 22.05 and 26.05 take it and it pends (PartitionNodeLimit)
    NODE_CONFIG_AT_SUBMIT: "24.11",
    # -v: salloc, and srun in a job of its own, say "JobId=N returned by the controller" first
    # about their job (fixtures/slurm-*/oracle-step-ends.txt, N)
    JOB_ID_RETURNED: "26.05",
    # srun -v's lines of the launch ("CpuBindType=...", "Node vm, 1 tasks started", "Received task
    # exit notification ...", "vm: task 0: Completed") without 22.05's "launch/slurm: <function>: "
    LAUNCH_LINES_PLAIN: "24.11",
    # 22.05 only: salloc -v's last line, after "Relinquishing job allocation N", is "Job allocation
    # N has been revoked." (every time it was asked; never without -v)
    REVOKED_AFTER_RELEASE: "22.05",
    # a batch script ended by a signal (kill -9 $$, a segfault): the job is FAILED 0:<sig> with
    # reason RaisedSignal:<sig>(<strsignal>), where 22.05 gives JobLaunchFailure for every signal
    # (fixtures/slurm-*/oracle-ends.txt K9-K6; the captures' squeue_t_all_acct, kill9)
    RAISED_SIGNAL: "24.11",
    # slurmstepd makes the missing directories of the job's --output/--error files (the user's,
    # 0777 less the umask) before it opens them and changes to the working directory: -o nodir/x.out
    # and a missing -D with the default output run (22.05: JobLaunchFailure 0:53, nothing written)
    # (oracle-ends.txt A1-A4; the captures' faildir: F JobLaunchFailure on 22.05, CD after)
    OUTPUT_DIRS_MADE: "24.11",
    # sinfo has %i / -O reservation (RESERVATION: the reservation a node is in, empty for none)
    # and -l shows it before NODELIST (%.11i); 22.05: "Invalid node format specification: i"
    # (fixtures/slurm-*/oracle-rest.txt S1, S2; the captures' sinfo_l)
    SINFO_RESERVATION: "24.11",
    # scontrol show partition: MaxCPUsPerSocket=UNLIMITED after MaxCPUsPerNode, and
    # ExclusiveTopo=NO after ExclusiveUser=NO (the captures' scontrol_show_partition)
    PARTITION_SOCKET_LIMIT: "24.11",
    # scontrol show partition: one Exclusive=NO where 24.11 has ExclusiveUser=NO ExclusiveTopo=NO
    PARTITION_EXCLUSIVE: "26.05",
}  # (rule: the first of the three releases that follows it)


class Release:
    """One release's row: its name (the config value), the version its commands print, the job
    variables it sets of those that vary (``env``) and the commands' own options it has of those
    that vary (``options``: command -> long names)."""

    __slots__ = ("name", "version", "env", "options", "usage", "texts", "job_states", "conflicts", "rules", "json")

    def __init__(self, name: str, version: str, env: Iterable[str] = (),
                 options: dict[str, Iterable[str]] | None = None, usage: dict[str, str] | None = None,
                 texts: dict[str, str] | None = None, job_states: tuple[str, ...] | None = None,
                 conflicts: dict[str, tuple[Iterable[str], str]] | None = None, rules: Iterable[str] = (),
                 json: str = "v0.0.38"):
        self.name = name
        self.version = version
        self.env = frozenset(env)
        self.options = {cmd: frozenset(names) for cmd, names in (options or {}).items()}
        self.usage = dict(usage or {})  # command -> its --usage text, where the release changed it
        self.texts = dict(texts or {})  # "command --option" -> what that option prints
        # the job states squeue names (-t's error, --helpstate), as this release spells them; None:
        # model.state_list's (22.05: upper case)
        self.job_states = job_states
        # "command --option" -> (the option keys it refuses beside it, the fatal message)
        self.conflicts = {k: (tuple(keys), text) for k, (keys, text) in (conflicts or {}).items()}
        self.rules = frozenset(rules)  # the RULES this release follows
        # the layout of --json and --yaml (squeue, scontrol show job, sacct, sinfo): the data_parser
        # version the release prints (render/openapi.py; v0.0.38: 22.05's OpenAPI documents)
        self.json = json
        if not self.rules <= RULES.keys():
            raise ValueError(f"unknown rules: {sorted(self.rules - RULES.keys())}")

    def has(self, rule: str) -> bool:
        """Whether this release follows ``rule`` (one of RULES)."""
        return rule in self.rules

    def sets(self, var: str) -> bool:
        """Whether this release's jobs carry ``var`` (True for every variable no release varies)."""
        return var not in VARYING_ENV or var in self.env

    def knows(self, command: str, long: str) -> bool:
        """Whether ``command`` of this release has the option ``--long`` (True for the options no
        release varies)."""
        return long not in VARYING_OPTIONS.get(command, ()) or long in self.options.get(command, ())

    def job_env(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` without the varying variables this release does not set."""
        return {k: v for k, v in env.items() if self.sets(k)}

    def __repr__(self) -> str:
        return f"Release({self.name})"


_SQUEUE_USAGE_24 = """\
Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid]
              [-n name] [-o format] [--only-job-state] [-p partitions]
              [--qos qos] [--reservation reservation] [--sort fields] [--start]
              [--step step_id] [-t states] [-u user_name] [--usage]
              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]
              [--expand-patterns] [--json=data_parser] [--yaml=data_parser]
"""

# sbatch's, srun's, salloc's and scancel's --usage as 24.11.5 and 26.05.5 print them
# (fixtures/slurm-*/cases.json: usage_<command>; 22.05's: render/help.py, cli/scancel.py)
# sbatch's, srun's and salloc's --usage as 22.05.8 prints it (fixtures/slurm-22.05/cases.json:
# usage_<command>); each later release's is the one before it with the lines it changed (_amend)
_SBATCH_USAGE_22 = """\
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
_SRUN_USAGE_22 = """\
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
_SALLOC_USAGE_22 = """\
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


def _amend(text: str, lines: dict[str, tuple[str, ...]]) -> str:
    """``text`` with each line named in ``lines`` replaced by its lines there (() drops it): a
    release's synopsis as the release before it printed it, where the newer one changed it."""
    old = text.splitlines()
    if any(old.count(line) != 1 for line in lines):
        raise ValueError("an amended line is not in the text once")
    return "".join(f"{new}\n" for line in old for new in lines.get(line, (line,)))


_SBATCH_USAGE_24 = _amend(_SBATCH_USAGE_22, {
    '              [--mem-per-gpu=MB]':
        ('              [--mem-per-gpu=MB] [--tres-bind=...] [--tres-per-task=list]',
         '              [--oom-kill-step[=0|1]]'),
})

_SRUN_USAGE_24 = _amend(_SRUN_USAGE_22, {
    '            [--mem-per-gpu=MB]':
        ('            [--mem-per-gpu=MB] [--tres-bind=...] [--tres-per-task=list]',
         '            [--oom-kill-step[=0|1]]'),
})

_SALLOC_USAGE_24 = _amend(_SALLOC_USAGE_22, {
    '              [--oversubscribe] [-J jobname]':
        ('              [--oversubscribe] [-J jobname] [--verbose] [--licenses=names]',),
    '              [--verbose] [--gid=group] [--uid=user] [--licenses=names]':
        (),
    '              [--mem-per-gpu=MB]':
        ('              [--mem-per-gpu=MB] [--tres-bind=...] [--tres-per-task=list]',
         '              [--oom-kill-step[=0|1]]'),
})

_SBATCH_USAGE_26 = _amend(_SBATCH_USAGE_24, {
    '              [--verbose] [--gid=group] [--uid=user]':
        ('              [--verbose] [--gid=group] [--uid=user] [--contiguous]',
         '              [--container=path] [--container-id=id] [--container-type=type]',
         '              [--mincpus=n] [--mem=MB] [--tmp=MB] [-C list]'),
    '              [--contiguous] [--mincpus=n] [--mem=MB] [--tmp=MB] [-C list]':
        (),
    '              [--requeue] [--no-requeue] [--ntasks-per-node=n] [--propagate]':
        ('              [--requeue[=expedite]] [--no-requeue] [--ntasks-per-node=n]',
         '              [--propagate] [--nodefile=file] [--nodelist=hosts] [--exclude=hosts]'),
    '              [--nodefile=file] [--nodelist=hosts] [--exclude=hosts]':
        (),
    '              [--array=index_values] [--profile=...] [--ignore-pbs] [--spread-job]':
        ('              [--array=index_values] [--profile=...] [--ignore-pbs] [--spread-job]',
         '              [--spread-segments]'),
})

_SRUN_USAGE_26 = _amend(_SRUN_USAGE_24, {
    '            [--qos=qos] [--time-min=minutes]':
        ('            [--qos=qos] [--time-min=minutes] [--contiguous]',
         '            [--mincpus=n] [--mem=MB] [--tmp=MB] [-C list]',
         '            [--container=path] [--container-id=id] [--container-type=type]'),
    '            [--contiguous] [--mincpus=n] [--mem=MB] [--tmp=MB] [-C list]':
        (),
    '            [--cpu-freq=min[-max[:gov]]] [--power=flags] [--spread-job]':
        ('            [--cpu-freq=min[-max[:gov]]] [--power=flags] [--spread-job]',
         '            [--spread-segments]'),
    '            [--oom-kill-step[=0|1]]':
        ('            [--oom-kill-step[=0|1]] [--ignore-signals=signals...]',
         '            [--async] [--parsable]'),
})

_SALLOC_USAGE_26 = _amend(_SALLOC_USAGE_24, {
    '              [--clusters=cluster_names]':
        ('              [--clusters=cluster_names] [--contiguous]',
         '              [--container=path] [--container-id=id] [--container-type=type]',
         '              [--mincpus=n] [--mem=MB] [--tmp=MB] [-C list]'),
    '              [--contiguous] [--mincpus=n] [--mem=MB] [--tmp=MB] [-C list]':
        (),
    '              [--bell] [--no-bell] [--kill-command[=signal]] [--spread-job]':
        ('              [--bell] [--no-bell] [--kill-command[=signal]] [--spread-job]',
         '              [--spread-segments]'),
})

_SCANCEL_USAGE_24 = """\
Usage: scancel [-A account] [--batch] [--ctld] [--full] [--interactive] [-n job_name]
               [-p partition] [-Q] [-q qos] [-R reservation] [-s signal | integer]
               [-t PENDING | RUNNING | SUSPENDED] [--usage] [-u user_name]
               [--hurry] [-V] [-v] [-w hosts...] [--wckey=wckey]
               [job_id[_array_id][.step_id]]
"""

# 22.05.8's sbatch -v: after its list of defined options, its select plugins' init lines (all four
# plugins load; 20 is SelectTypeParameters=CR_Core_Memory), before the submission or its error
# (fixtures/slurm-22.05/oracle-sbatch-verbose.json); 24.11 and 26.05 print none
_SBATCH_VERBOSE_22 = """\
sbatch: select/cons_tres: common_init: select/cons_tres loaded
sbatch: select/cray_aries: init: Cray/Aries node selection plugin loaded
sbatch: select/linear: init: Linear node selection plugin loaded with argument 20
sbatch: select/cons_res: common_init: select/cons_res loaded
"""

# squeue --helpformat, --helpFormat and the states of --helpstate (and -t's error), as 24.11.5 prints
# them (fixtures/slurm-24.11/README.md)
_SQUEUE_HELPFORMAT = (
    '%a    %F    %K    %B    %o    %k    %O    %I    \n'
    '%X    %E    %e    %x    %f    %G    %g    %i    \n'
    '%A    %W    %c    %m    %d    %j    %y    %N    \n'
    '%C    %D    %h    %P    %p    %Q    %q    %r    \n'
    '%R    %n    %v    %Y    %z    %H    %S    %T    \n'
    '%t    %V    %J    %L    %l    %M    %U    %u    \n'
    '%w    %Z    \n'
)
_SQUEUE_HELPFORMAT_LONG = (
    'Account             AccrueTime          admin_comment       AllocNodes          \n'
    'AllocSID            ArrayJobId          ArrayTaskId         AssocId             \n'
    'BatchFlag           BatchHost           BoardsPerNode       BurstBuffer         \n'
    'BurstBufferState    Cluster             ClusterFeature      Command             \n'
    'Comment             Container           ContainerId         Contiguous          \n'
    'Cores               CoreSpec            CPUsPerTask         cpus-per-task       \n'
    'cpus-per-tres       Deadline            DelayBoot           Dependency          \n'
    'DerivedEC           EligibleTime        EndTime             ExcNodes            \n'
    'exit_code           Feature             GroupId             GroupName           \n'
    'HetJobId            HetJobIdSet         HetJobOffset        JobArrayId          \n'
    'JobId               LastSchedEval       Licenses            MaxCPUs             \n'
    'MaxNodes            mem-per-tres        MCSLabel            MinCPUs             \n'
    'MinMemory           MinTime             MinTmpDisk          Name                \n'
    'Network             Nice                NodeList            NTPerCore           \n'
    'NTPerNode           NTPerSocket         NTPerBoard          NumCPUs             \n'
    'NumNodes            NumTasks            Origin              OriginRaw           \n'
    'OverSubscribe       Partition           PendingTime         PreemptTime         \n'
    'Prefer              Priority            PriorityLong        Profile             \n'
    'QOS                 Reason              ReasonList          Reboot              \n'
    'ReqNodes            ReqSwitch           Requeue             Reservation         \n'
    'ResizeTime          RestartCnt          SchedNodes          SCT                 \n'
    'SiblingsActive      SiblingsActiveRaw   SiblingsViable      SiblingsViableRaw   \n'
    'Sockets             SPerBoard           StartTime           State               \n'
    'StateCompact        StdErr              StdIn               StdOut              \n'
    'SubmitTime          system_comment      Threads             TimeLeft            \n'
    'TimeLimit           TimeUsed            tres-alloc          tres-bind           \n'
    'tres-freq           tres-per-job        tres-per-socket     tres-per-task       \n'
    'UserId              UserName            Wait4Switch         WCKey               \n'
    'WorkDir             \n'
)
_JOB_STATES_24 = (
    'pending', 'running', 'suspended', 'completed', 'cancelled', 'failed', 'timeout', 'node_fail', 'preempted',
    'boot_fail', 'deadline', 'out_of_memory', 'completing', 'configuring', 'resizing', 'resv_del_hold',
    'requeued', 'requeue_fed', 'requeue_hold', 'revoked', 'signaling', 'special_exit', 'stage_out', 'stopped',
)
# and as 26.05.5 prints them (fixtures/slurm-26.05/README.md)
_SQUEUE_HELPFORMAT_26 = (
    '%a    %F    %K    %B    %o    %k    %O    %I    \n'
    '%X    %E    %e    %x    %f    %G    %g    %i    \n'
    '%A    %W    %c    %m    %d    %j    %y    %N    \n'
    '%C    %D    %h    %P    %p    %Q    %q    %r    \n'
    '%R    %n    %v    %Y    %z    %s    %H    %S    \n'
    '%T    %t    %V    %J    %L    %l    %M    %U    \n'
    '%u    %w    %Z    \n'
)
_SQUEUE_HELPFORMAT_LONG_26 = (
    'Account             AccrueTime          admin_comment       AllocNodes          \n'
    'AllocSID            ArrayJobId          ArrayTaskId         AssocId             \n'
    'BatchFlag           BatchHost           BoardsPerNode       BurstBuffer         \n'
    'BurstBufferState    Cluster             ClusterFeature      Command             \n'
    'Comment             Container           ContainerId         ContainerType       \n'
    'Contiguous          Cores               CoreSpec            CPUsPerTask         \n'
    'cpus-per-task       cpus-per-tres       CronJob             Deadline            \n'
    'DelayBoot           Dependency          DerivedEC           EligibleTime        \n'
    'EndTime             ExcNodes            Exclusive           exit_code           \n'
    'Feature             GroupId             GroupName           HetJobId            \n'
    'HetJobIdSet         HetJobOffset        JobArrayId          JobId               \n'
    'LastSchedEval       Licenses            LicensesAlloc       MaxCPUs             \n'
    'MaxNodes            mem-per-tres        MCSLabel            MinCPUs             \n'
    'MinMemory           MinTime             MinTmpDisk          Name                \n'
    'Network             Nice                NodeList            NTPerCore           \n'
    'NTPerNode           NTPerSocket         NTPerBoard          NumCPUs             \n'
    'NumNodes            NumTasks            Origin              OriginRaw           \n'
    'OverSubscribe       Partition           PendingTime         PreemptTime         \n'
    'Prefer              Priority            PriorityLong        Profile             \n'
    'QOS                 Reason              ReasonList          Reboot              \n'
    'ReqNodes            ReqSwitch           Requeue             Reservation         \n'
    'ResizeTime          RestartCnt          SchedNodes          SCT                 \n'
    'SegmentSize         SiblingsActive      SiblingsActiveRaw   SiblingsViable      \n'
    'SiblingsViableRaw   SLUID               Sockets             SPerBoard           \n'
    'StartTime           State               StateCompact        StdErr              \n'
    'StdIn               StdOut              SubmitTime          system_comment      \n'
    'Threads             TimeLeft            TimeLimit           TimeUsed            \n'
    'tres-alloc          tres-bind           tres-freq           tres-per-job        \n'
    'tres-per-socket     tres-per-task       UserId              UserName            \n'
    'Wait4Switch         WCKey               WorkDir             \n'
)
_JOB_STATES_26 = (
    'pending', 'running', 'suspended', 'completed', 'cancelled', 'failed', 'timeout', 'node_fail', 'preempted',
    'boot_fail', 'deadline', 'out_of_memory', 'completing', 'configuring', 'expediting', 'resizing',
    'resv_del_hold', 'requeued', 'requeue_fed', 'requeue_hold', 'revoked', 'signaling', 'special_exit',
    'stage_out', 'stopped',
)

# sbatch's, salloc's and srun's options that not every release has (the rest: options/table.py),
# as slurm_opt.c has them at 22.05.8 and 26.05.3 (fixtures/slurm-options/) and as 24.11.5 and
# 26.05.5 answered (fixtures/slurm-*/oracle-options.json); the same in sbatch and salloc
_SBATCH_24 = ("autocomplete", "container-id", "extra", "oom-kill-step", "resv-ports", "segment", "stepmgr",
              "tres-bind", "tres-per-task")
_SRUN_24 = ("autocomplete", "container-id", "external-launcher", "extra", "oom-kill-step", "segment", "stepmgr",
            "treewidth", "tres-bind", "tres-per-task")
_NEW_26 = ("consolidate-segments", "container-type", "mem-update", "resources", "spread-segments")
_SBATCH_26 = _SBATCH_24 + _NEW_26
_SRUN_26 = _SRUN_24 + _NEW_26 + ("async", "ignore-signals", "parsable", "wait-for-children")

# sacct's lists as 24.11.5 and 26.05.5 print them (fixtures/slurm-*/cases.json help_sacct_helpformat,
# fixtures/slurm-*/oracle-sacct.json): --helpformat's fields (each padded to 19, four a line; the
# fields sacct's --format takes, in its matching order), --helpstate's states (the same layout) and
# --helpreason's reasons (padded to 39, two a line), names as the release spells them
def _sacct_list(names: str, width: int, per_line: int) -> str:
    words = names.split()
    return "".join(("" if i == 0 else "\n" if i % per_line == 0 else " ") + f"{w:<{width}}"
                   for i, w in enumerate(words)) + "\n"


_SACCT_FIELDS_24 = """
    Account AdminComment AllocCPUS AllocNodes AllocTRES AssocID AveCPU AveCPUFreq AveDiskRead
    AveDiskWrite AvePages AveRSS AveVMSize BlockID Cluster Comment Constraints ConsumedEnergy
    ConsumedEnergyRaw Container CPUTime CPUTimeRAW DBIndex DerivedExitCode Elapsed ElapsedRaw Eligible
    End ExitCode Extra FailedNode Flags GID Group JobID JobIDRaw JobName Layout Licenses MaxDiskRead
    MaxDiskReadNode MaxDiskReadTask MaxDiskWrite MaxDiskWriteNode MaxDiskWriteTask MaxPages MaxPagesNode
    MaxPagesTask MaxRSS MaxRSSNode MaxRSSTask MaxVMSize MaxVMSizeNode MaxVMSizeTask McsLabel MinCPU
    MinCPUNode MinCPUTask NCPUS NNodes NodeList NTasks Partition Planned PlannedCPU PlannedCPURAW
    Priority QOS QOSRAW QOSREQ Reason ReqCPUFreq ReqCPUFreqGov ReqCPUFreqMax ReqCPUFreqMin ReqCPUS
    ReqMem ReqNodes ReqTRES Reservation ReservationId Restarts SLUID Start State StdErr StdIn StdOut
    Submit SubmitLine Suspended SystemComment SystemCPU Timelimit TimelimitRaw TotalCPU TRESUsageInAve
    TRESUsageInMax TRESUsageInMaxNode TRESUsageInMaxTask TRESUsageInMin TRESUsageInMinNode
    TRESUsageInMinTask TRESUsageInTot TRESUsageOutAve TRESUsageOutMax TRESUsageOutMaxNode
    TRESUsageOutMaxTask TRESUsageOutMin TRESUsageOutMinNode TRESUsageOutMinTask TRESUsageOutTot UID User
    UserCPU WCKey WCKeyID WorkDir
"""
# 26.05 adds Exclusive, OriginalSLUID, OverSubscribe, ReqReservation and SegmentSize
_SACCT_FIELDS_26 = (_SACCT_FIELDS_24.replace(" End ", " End Exclusive ").replace(" NTasks ", " NTasks OriginalSLUID OverSubscribe ")
                    .replace(" ReservationId ", " ReservationId ReqReservation ").replace(" Restarts ", " Restarts SegmentSize "))
_SACCT_STATES = "PENDING RUNNING SUSPENDED COMPLETED CANCELLED FAILED TIMEOUT NODE_FAIL PREEMPTED BOOT_FAIL DEADLINE OUT_OF_MEMORY"
_SACCT_REASONS_24 = """
    None Priority Dependency Resources PartitionNodeLimit PartitionTimeLimit PartitionDown
    PartitionInactive JobHeldAdmin BeginTime Licenses AssociationJobLimit AssociationResourceLimit
    AssociationTimeLimit Reservation ReqNodeNotAvail JobHeldUser FrontEndDown SchedDefer PartitionDown
    NodeDown BadConstraints SystemFailure JobLaunchFailure NonZeroExitCode TimeLimit InactiveLimit
    InvalidAccount InvalidQOS QOSUsageThreshold QOSJobLimit QOSResourceLimit QOSTimeLimit RaisedSignal
    InvaildReason Cleaning Prolog QOSNotAllowed AccountNotAllowed DependencyNeverSatisfied
    QOSGrpCpuLimit QOSGrpCPUMinutesLimit QOSGrpCPURunMinutesLimit QOSGrpJobsLimit QOSGrpMemLimit
    QOSGrpNodeLimit QOSGrpSubmitJobsLimit QOSGrpWallLimit QOSMaxCpuPerJobLimit
    QOSMaxCpuMinutesPerJobLimit QOSMaxNodePerJobLimit QOSMaxWallDurationPerJobLimit
    QOSMaxCpuPerUserLimit QOSMaxJobsPerUserLimit QOSMaxNodePerUserLimit QOSMaxSubmitJobPerUserLimit
    QOSMinCpuNotSatisfied AssocGrpCpuLimit AssocGrpCPUMinutesLimit AssocGrpCPURunMinutesLimit
    AssocGrpJobsLimit AssocGrpMemLimit AssocGrpNodeLimit AssocGrpSubmitJobsLimit AssocGrpWallLimit
    AssocMaxJobsLimit AssocMaxCpuPerJobLimit AssocMaxCpuMinutesPerJobLimit AssocMaxNodePerJobLimit
    AssocMaxWallDurationPerJobLimit AssocMaxSubmitJobLimit JobHoldMaxRequeue JobArrayTaskLimit
    BurstBufferResources BurstBufferStageIn BurstBufferOperation InvaildReason InvaildReason
    AssocGrpUnknown AssocGrpUnknownMinutes AssocGrpUnknownRunMinutes AssocMaxUnknownPerJob
    AssocMaxUnknownPerNode AssocMaxUnknownMinutesPerJob AssocMaxCpuPerNode AssocGrpMemMinutes
    AssocGrpMemRunMinutes AssocMaxMemPerJob AssocMaxMemPerNode AssocMaxMemMinutesPerJob
    AssocGrpNodeMinutes AssocGrpNodeRunMinutes AssocMaxNodeMinutesPerJob AssocGrpEnergy
    AssocGrpEnergyMinutes AssocGrpEnergyRunMinutes AssocMaxEnergyPerJob AssocMaxEnergyPerNode
    AssocMaxEnergyMinutesPerJob AssocGrpGRES AssocGrpGRESMinutes AssocGrpGRESRunMinutes
    AssocMaxGRESPerJob AssocMaxGRESPerNode AssocMaxGRESMinutesPerJob AssocGrpLicense
    AssocGrpLicenseMinutes AssocGrpLicenseRunMinutes AssocMaxLicensePerJob AssocMaxLicenseMinutesPerJob
    AssocGrpBB AssocGrpBBMinutes AssocGrpBBRunMinutes AssocMaxBBPerJob AssocMaxBBPerNode
    AssocMaxBBMinutesPerJob QOSGrpUnknown QOSGrpUnknownMinutes QOSGrpUnknownRunMinutes
    QOSMaxUnknownPerJob QOSMaxUnknownPerNode QOSMaxUnknownPerUser QOSMaxUnknownMinutesPerJob
    QOSMinUnknown QOSMaxCpuPerNode QOSGrpMemoryMinutes QOSGrpMemoryRunMinutes QOSMaxMemoryMinutesPerJob
    QOSMaxMemoryPerJob QOSMaxMemoryPerNode QOSMaxMemoryPerUser QOSMinMemory QOSGrpEnergy
    QOSGrpEnergyMinutes QOSGrpEnergyRunMinutes QOSMaxEnergyPerJob QOSMaxEnergyPerNode
    QOSMaxEnergyPerUser QOSMaxEnergyMinutesPerJob QOSMinEnergy QOSGrpNodeMinutes QOSGrpNodeRunMinutes
    QOSMaxNodeMinutesPerJob QOSMinNode QOSGrpGRES QOSGrpGRESMinutes QOSGrpGRESRunMinutes
    QOSMaxGRESPerJob QOSMaxGRESPerNode QOSMaxGRESPerUser QOSMaxGRESMinutesPerJob QOSMinGRES
    QOSGrpLicense QOSGrpLicenseMinutes QOSGrpLicenseRunMinutes QOSMaxLicensePerJob QOSMaxLicensePerUser
    QOSMaxLicenseMinutesPerJob QOSMinLicense QOSGrpBB QOSGrpBBMinutes QOSGrpBBRunMinutes QOSMaxBBPerJob
    QOSMaxBBPerNode QOSMaxBBPerUser AssocMaxBBMinutesPerJob QOSMinBB DeadLine MaxBBPerAccount
    MaxCpuPerAccount MaxEnergyPerAccount MaxGRESPerAccount MaxNodePerAccount MaxLicensePerAccount
    MaxMemoryPerAccount MaxUnknownPerAccount MaxJobsPerAccount MaxSubmitJobsPerAccount PartitionConfig
    AccountingPolicy FedJobLock OutOfMemory MaxMemPerLimit AssocGrpBilling AssocGrpBillingMinutes
    AssocGrpBillingRunMinutes AssocMaxBillingPerJob AssocMaxBillingPerNode AssocMaxBillingMinutesPerJob
    QOSGrpBilling QOSGrpBillingMinutes QOSGrpBillingRunMinutes QOSMaxBillingPerJob QOSMaxBillingPerNode
    QOSMaxBillingPerUser QOSMaxBillingMinutesPerJob MaxBillingPerAccount QOSMinBilling
    ReservationDeleted ReservationInvalid Constraints MaxBBRunMinsPerAccount MaxBillingRunMinsPerAccount
    MaxCpuRunMinsPerAccount MaxEnergyRunMinsPerAccount MaxGRESRunMinsPerAccount MaxNodeRunMinsPerAccount
    MaxLicenseRunMinsPerAccount MaxMemoryRunMinsPerAccount MaxUnknownRunMinsPerAccount
    MaxBBRunMinsPerUser MaxBillingRunMinsPerUser MaxCpuRunMinsPerUser MaxEnergyRunMinsPerUser
    MaxGRESRunMinsPerUser MaxNodeRunMinsPerUser MaxLicenseRunMinsPerUser MaxMemoryRunMinsPerUser
    MaxUnknownRunMinsPerUser MaxPoweredUpNodes MpiPortsBusy
"""
# 26.05 spells InvalidReason right and has NvidiaImexChannels where 24.11 has FrontEndDown
_SACCT_REASONS_26 = _SACCT_REASONS_24.replace("InvaildReason", "InvalidReason").replace("FrontEndDown", "NvidiaImexChannels")
_SACCT_24 = ("array", "expand-patterns", "helpreason", "helpstate")  # --reason is every release's
_SACCT_TEXTS_24 = {"sacct --helpformat": _sacct_list(_SACCT_FIELDS_24, 19, 4),
                   "sacct --helpstate": _sacct_list(_SACCT_STATES, 19, 4),
                   "sacct --helpreason": _sacct_list(_SACCT_REASONS_24, 39, 2)}
_SACCT_TEXTS_26 = {**_SACCT_TEXTS_24, "sacct --helpformat": _sacct_list(_SACCT_FIELDS_26, 19, 4),
                   "sacct --helpreason": _sacct_list(_SACCT_REASONS_26, 39, 2)}


# sinfo --helpformat (its letters, each "%x" padded to 6, eight a line), --helpFormat (the -O names,
# padded to 20, four a line) and --helpstate (the node states, one a line), as 24.11.5 and 26.05.5
# print them (fixtures/slurm-*/oracle-rest.txt S5-S7)
def _columns(words: Iterable[str], width: int, per_line: int) -> str:
    words = list(words)
    return "".join(f"{w:<{width}}" + ("\n" if i % per_line == per_line - 1 or i == len(words) - 1 else "")
                   for i, w in enumerate(words))


_SINFO_LETTERS = "S a V Y c O C L d f b e G G g B m o A F n N D h P R M I p E i r s X z t T Z l H u U v w"
_SINFO_FIELDS = """
    AllocMem AllocNodes Available Cluster Comment Cores CPUs CPUsLoad CPUsState DefaultTime Disk Extra
    Features features_act FreeMem Gres GresUsed Groups MaxCPUsPerNode Memory NodeAddr NodeAI NodeAIOT
    NodeHost NodeList Nodes OverSubscribe Partition PartitionName Port PreemptMode PriorityJobFactor
    PriorityTier Reason Reservation Root Size Sockets SocketCoreThread StateCompact StateComplete
    StateLong Threads Time TimeStamp User UserLong Version Weight
"""
_NODE_STATES_24 = """
    unknown down idle allocated ? mixed future drain drained draining no_respond reserved planned blocked
    cloud completing powering_down powered_down power_down powering_up fail maint reboot reboot^
"""
# 26.05: no "?", and power_up, inval, external, dynamic_future and dynamic_norm
_NODE_STATES_26 = (_NODE_STATES_24.replace(" ? ", " ").replace(" powering_up ", " powering_up power_up inval ")
                   .replace(" reboot^", " reboot^ external dynamic_future dynamic_norm"))
_SINFO_TEXTS_24 = {"sinfo --helpformat": _columns((f"%{c}" for c in _SINFO_LETTERS.split()), 6, 8),
                   "sinfo --helpFormat": _columns(_SINFO_FIELDS.split(), 20, 4),
                   "sinfo --helpstate": "".join(f"{w}\n" for w in _NODE_STATES_24.split())}
_SINFO_TEXTS_26 = {**_SINFO_TEXTS_24, "sinfo --helpstate": "".join(f"{w}\n" for w in _NODE_STATES_26.split())}
_SINFO_24 = ("future", "helpformat", "helpFormat", "helpstate")  # -F/--future: 23.11


# The three tables. Comments say when a row first appeared upstream, where Slurm's NEWS says it.
R22_05 = Release(
    "22.05", "22.05.8",
    env=("SLURM_NODE_ALIASES",),  # "(null)" in every batch job; gone in 24.11
    options={
        "squeue": ("array-unique",),  # refused from 24.11 on (unrecognized option)
        "sbatch": ("power",),
        "srun": ("gid", "power", "uid"),
        "salloc": ("get-user-env", "gid", "power", "uid"),
    },
    usage={"sbatch": _SBATCH_USAGE_22, "srun": _SRUN_USAGE_22, "salloc": _SALLOC_USAGE_22},
    texts={"sbatch --verbose": _SBATCH_VERBOSE_22, "salloc --verbose": _SBATCH_VERBOSE_22.replace("sbatch: ", "salloc: "),
           "srun --verbose launch": "route/default: init: route default plugin loaded\n"},  # (srun -v: its plugin)
    rules=(REVOKED_AFTER_RELEASE,),
)

_ENV_24 = (
    "SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME",  # 23.02: start, start + time limit (or + 365 days)
    "SLURM_OOM_KILL_STEP",  # 24.11: 0 unless --oom-kill-step
    "SLURM_TRES_PER_TASK",  # cpu=N with -c, gres/gpu=N with --gpus-per-task
    "SLURM_JOB_LICENSES",  # the job's licenses (-L)
    "SLURMD_DEBUG",  # 2 in a step's tasks
    "SLURM_JOB_GROUP",  # the job's group, in the tasks of the job srun makes for itself
    # the MPI launchers' (mpirun starts its daemons with srun --external-launcher: runtime/jobenv.LAUNCHERS)
    "HYDRA_BOOTSTRAP", "HYDRA_LAUNCHER_EXTRA_ARGS", "I_MPI_HYDRA_BOOTSTRAP", "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS",
    "OMPI_MCA_plm_slurm_args", "PRTE_MCA_plm_slurm_args",
)
_SQUEUE_24 = ("only-job-state", "helpformat", "helpFormat", "helpstate")  # --only-job-state: 23.11.5
_SCONTROL_24 = ("json", "yaml")  # scontrol show job --json (22.05: unrecognized option)

_RULES_24 = (KNOWN_DEPENDENCY, TRES_SLASH, JOB_TRES_SPLIT, EQUAL_PRIORITIES, NODES_READY, LAUNCH_LINES_PLAIN,
             RAISED_SIGNAL, OUTPUT_DIRS_MADE, SINFO_RESERVATION, PARTITION_SOCKET_LIMIT)

R24_11 = Release(
    "24.11", "24.11.5",
    env=_ENV_24,
    options={"squeue": _SQUEUE_24, "sbatch": _SBATCH_24, "salloc": _SBATCH_24, "srun": _SRUN_24,
             "scontrol": _SCONTROL_24, "sacct": _SACCT_24, "sinfo": _SINFO_24},
    usage={"squeue": _SQUEUE_USAGE_24 + "              [-ahjlrsv]\n", "sbatch": _SBATCH_USAGE_24,
           "srun": _SRUN_USAGE_24, "salloc": _SALLOC_USAGE_24, "scancel": _SCANCEL_USAGE_24},
    texts={"squeue --helpformat": _SQUEUE_HELPFORMAT, "squeue --helpFormat": _SQUEUE_HELPFORMAT_LONG, **_SACCT_TEXTS_24,
           **_SINFO_TEXTS_24,
           "srun --verbose launch": "topology/default: init: topology Default plugin loaded\n"},  # (26.05: none)
    job_states=_JOB_STATES_24,
    conflicts={"squeue --only-job-state": (("steps",), "squeue: fatal: Options --only-job-state and -s(--steps) are "
                                           "mutually exclusive. Please remove one and retry.")},
    rules=_RULES_24 + (NODE_CONFIG_AT_SUBMIT,),  # (24.11 only: 26.05 takes such jobs again)
    json="v0.0.42",
)

R26_05 = Release(
    "26.05", "26.05.5",
    options={"squeue": _SQUEUE_24 + ("running-over", "running-under"), "sbatch": _SBATCH_26 + ("external",),
             "salloc": _SBATCH_26, "srun": _SRUN_26, "scontrol": _SCONTROL_24,
             "sacct": _SACCT_24 + ("-R",), "sinfo": _SINFO_24},  # -R: --reason's letter (22.05, 24.11: invalid option)
    env=_ENV_24 + (
        "SLURM_JOB_EXCLUSIVE", "SLURM_JOB_OVERSUBSCRIBE",  # NO, or NODE/USER/MCS/TOPO; NO, or YES
        "SLURM_JOB_SLUID",  # the job's Slurm Lexicographically-sortable Unique ID
        "SLURM_STEP_ID", "SLURM_STEPID",  # -5 in the batch script (the batch step)
        "step:SLURM_JOB_GROUP",  # SLURM_JOB_GROUP in every step's tasks (24.11: srun's own job's only)
    ),
    usage={"squeue": _SQUEUE_USAGE_24
           + "              [--running-over=time] [--running-under=time] [-ahjlrsv]\n",
           "sbatch": _SBATCH_USAGE_26, "srun": _SRUN_USAGE_26, "salloc": _SALLOC_USAGE_26,
           "scancel": _SCANCEL_USAGE_24},
    texts={"squeue --helpformat": _SQUEUE_HELPFORMAT_26, "squeue --helpFormat": _SQUEUE_HELPFORMAT_LONG_26,
           **_SACCT_TEXTS_26, **_SINFO_TEXTS_26},
    job_states=_JOB_STATES_26,
    # every filter but -j and -t, and -l, -a, --start, -P (as asked of 26.05.5; -S, -r, -o, -O, -h,
    # -M, --local, --federation, --sibling, --hide, --noconvert, -v and --json are taken)
    conflicts={"squeue --only-job-state": (
        ("steps", "users", "me", "partitions", "name", "account", "qos", "nodelist", "licenses", "reservation",
         "start", "priority", "long", "all"),
        "squeue: fatal: Option --only-job-state only works alone, with -j (--jobs) and/or -t (--states) "
        "parameters, parameters for cluster/federation selection, and the printing options.")},
    rules=_RULES_24 + (PARTITION_EXCLUSIVE, JOB_ID_RETURNED, JOB_FIELDS_26, MERGED_STDERR_EMPTY, OVERSUBSCRIBE_NO, EITHER_LICENSE, STEPD_STAMP,
                       CANCEL_SIGNAL_NAMED, SUSPEND_ERROR_NO_SPACE, TEST_ONLY_STRAY_A, SACCT_LISTS_AT_ONCE,
                       SACCT_EXIT_AS_IS, SACCT_DEFAULT_OUT_AS_IS, SACCT_NODE_NONE, SACCT_PATTERN_KEEPS_UNKNOWN,
                       SACCT_STEP_STDIO),
    json="v0.0.45",
)

RELEASES: dict[str, Release] = {r.name: r for r in (R22_05, R24_11, R26_05)}
NAMES = tuple(RELEASES)

# What varies: a name any release's row holds (the rest is alike in all three).
VARYING_ENV = frozenset().union(*(r.env for r in RELEASES.values()))
VARYING_OPTIONS: dict[str, frozenset[str]] = {}
for _r in RELEASES.values():
    for _cmd, _names in _r.options.items():
        VARYING_OPTIONS[_cmd] = VARYING_OPTIONS.get(_cmd, frozenset()) | _names
del _r, _cmd, _names


def get(name: str) -> Release:
    """The release called ``name`` (one of NAMES; KeyError otherwise)."""
    return RELEASES[name]


def current() -> Release:
    """The release the site config names (``[slurm] release``), else DEFAULT."""
    from .. import siteconf

    section = siteconf.get().get("slurm") or {}
    return RELEASES.get(section.get("release") or DEFAULT, RELEASES[DEFAULT])


def version_line(word: str = "slurm-wlm", release: Release | None = None) -> str:
    """What ``--version`` prints: ``slurm-wlm 24.11.5`` (the Debian builds the references were
    captured on say ``slurm-wlm``; print_slurm_version's own word is ``slurm``)."""
    return f"{word} {(release or current()).version}\n"


# --- values of the varying job variables -----------------------------------------------------------

YEAR = 365 * 24 * 3600  # SLURM_JOB_END_TIME of a job without a time limit: its start + 365 days
_CB32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base 32, as sluid strings use it


def end_time(start: int, limit_minutes: int | None) -> int:
    """SLURM_JOB_END_TIME: the start plus the time limit, or plus 365 days with none (as 24.11 and
    26.05 set it for a job without --time on a partition without a limit)."""
    if limit_minutes is None or limit_minutes < 0:
        return start + YEAR
    return start + limit_minutes * 60


def sluid(cluster: str, submit_ms: int, job_id: int, task: int | None) -> str:
    """SLURM_JOB_SLUID: ``s`` and 13 base-32 digits of a 64-bit number laid out as Slurm's
    (src/common/sluid.c): a 12-bit cluster id, the milliseconds of the job's creation, a 10-bit
    sequence. Ours: the cluster id from the cluster's name (2..4095, as Slurm's range), the
    submission's milliseconds plus the array index, and the Grid Engine job id's low 10 bits as
    the sequence: unique per job and task (two jobs would need equal low bits in the same
    millisecond), and sortable by submission as Slurm's."""
    import zlib

    cluster_id = zlib.crc32(cluster.encode()) % 4094 + 2
    ms = (submit_ms + (task or 0)) & ((1 << 42) - 1)
    value = (cluster_id << 52) | (ms << 10) | (job_id & 0x3FF)
    return "s" + "".join(_CB32[(value >> (5 * i)) & 0x1F] for i in range(12, -1, -1))


def licenses(text: str) -> str:
    """SLURM_JOB_LICENSES: the job's -L as written (24.11 and 26.05 pass ``matlab`` and
    ``matlab:1,matlab:1`` on unchanged)."""
    return str(text)


def tres_per_task(cpus: int | None, gpus: str | None) -> str:
    """SLURM_TRES_PER_TASK: ``cpu=N`` for an explicit -c, ``gres/gpu=N`` (``gres/gpu:type=N``) for
    --gpus-per-task, comma separated; "" for neither."""
    parts = []
    if cpus is not None:
        parts.append(f"cpu={cpus}")
    if gpus:
        kind, _, n = str(gpus).rpartition(":")
        parts.append(f"gres/gpu:{kind}={n}" if kind else f"gres/gpu={n}")
    return ",".join(parts)
