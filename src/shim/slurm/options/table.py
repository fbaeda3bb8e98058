"""THE option table: every Slurm option sbatch, srun and salloc know, one row each, alphabetical.

Rows are data; value grammars live in values.py; what each option becomes on Grid Engine lives in
translate/. A test checks this table against the full Slurm option surface, and
tests/unit/test_option_arity.py checks every row's argument form (none, required, optional) and commands
against Slurm's own option table (src/common/slurm_opt.c at 22.05, 26.05 and 26.11-dev, extracted into
fixtures/slurm-options/slurm_opt-*.json). A command accepts an option if any of those versions does;
where the versions give one option different forms, the row takes the one that accepts both spellings.

Each row says which commands accept the option, which input environment variables set it (per
command, the one that wins in Slurm first), how its value is parsed, and its fate on Grid Engine:
MAP (translated, or honoured by the shim's job wrapper), LOCAL (handled by the command itself),
WARN (accepted and ignored with a one-line warning; ``note`` says why that is harmless) or REFUSE
(Grid Engine cannot honour it; ``note`` says why).

The surface is that of a recent Slurm; options newer than 22.05 are kept so that scripts written for
newer sites get a clear answer, and ``--power`` (22.05 only) is kept for older scripts.
"""

from __future__ import annotations

from functools import partial

from . import values as v
from .getopt import Table
from .spec import Arity, Fate, OptionSpec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..releases import Release

SB, SR, SA = "sbatch", "srun", "salloc"
ALL = frozenset({SB, SR, SA})
BATCH = frozenset({SB})
RUN = frozenset({SR})
ALLOC = frozenset({SA})
BATCH_RUN = frozenset({SB, SR})
BATCH_ALLOC = frozenset({SB, SA})
RUN_ALLOC = frozenset({SR, SA})
N, R, O = Arity.NONE, Arity.REQUIRED, Arity.OPTIONAL
MAP, LOCAL, WARN, REFUSE = Fate.MAP, Fate.LOCAL, Fate.WARN, Fate.REFUSE


def env(sbatch: str | None = None, srun: str | None = None, salloc: str | None = None) -> dict:
    """Input variables per command, space separated, the one Slurm lets win first."""
    out = {}
    for cmd, names in ((SB, sbatch), (SR, srun), (SA, salloc)):
        if names:
            out[cmd] = tuple(names.split())
    return out


def env3(suffix: str) -> dict:
    """The common pattern SBATCH_<suffix>, SLURM_<suffix> (srun), SALLOC_<suffix>."""
    return env(f"SBATCH_{suffix}", f"SLURM_{suffix}", f"SALLOC_{suffix}")


# Notes shared by several rows.
NO_BCAST = "programs and libraries are read from the shared file system"
NO_BIND = "binding is left to the operating system"
NO_SEGMENTS = "Grid Engine has no topology segments"
NO_SOCKETS = "Grid Engine does not choose hosts by socket/core layout"
# --cpu-bind/--hint/--threads-per-core: the cases a Grid Engine with -btype (OCS 9.1) binds lose
# their warning (translate/qsub.py binding, bound_warnings); the note says why the rest stay.
BIND_TASKS = ("only none, cores and threads are bound, where Grid Engine binds the job to CPUs of its own "
              "(OCS 9.1's -bunit/-bamount: srun's own job, a step of a job submitted with a binding)")
NO_CONTAINERS = "OCI containers are not supported"
NO_HETJOB = "heterogeneous jobs are not supported"
NO_REBOOT = "nodes are never rebooted for a job"

OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("accel-bind", None, R, RUN, fate=WARN, note=NO_BIND,
               help="bind tasks to nearby GPUs/NICs", group="placement"),
    OptionSpec("account", "A", R, ALL, env=env3("ACCOUNT"),
               note="an account Grid Engine refuses as it is (project@gpu) is stored encoded, and shown unchanged",
               help="account charged for the job", group="accounting"),
    OptionSpec("acctg-freq", None, R, ALL, env=env3("ACCTG_FREQ"), fate=WARN,
               note="Grid Engine samples usage at its own interval",
               help="usage sampling intervals", group="accounting"),
    OptionSpec("array", "a", R, BATCH, env=env(sbatch="SBATCH_ARRAY_INX"), parse=v.array_spec,
               note="each task is a job of its own: task t's SLURM_JOB_ID is t * 10^10 + the array's id "
               "(task 0 keeps the array's id), which every command takes (docs/array-ids.md)",
               help="run the script once per index (a-b:step,...%limit)", group="scheduling"),
    OptionSpec("async", None, N, RUN, fate=REFUSE, note="newer Slurm option; steps run in the foreground",
               help="return once the step has started", group="interactive"),
    OptionSpec("autocomplete", None, R, ALL, fate=LOCAL,
               help="list completions for a partial option (shell helper)", group="other"),
    OptionSpec("batch", None, R, BATCH, env=env(sbatch="SBATCH_BATCH"), fate=REFUSE,
               note="features cannot be required of the batch host alone",
               help="node features the batch host must have", group="placement"),
    OptionSpec("bb", None, R, ALL, env=env3("BURST_BUFFER"), fate=REFUSE, note="Grid Engine has no burst buffers",
               help="burst buffer request", group="resources"),
    OptionSpec("bbf", None, R, ALL, fate=REFUSE, note="Grid Engine has no burst buffers",
               help="file with a burst buffer request", group="resources"),
    OptionSpec("bcast", None, O, RUN, env=env(srun="SLURM_BCAST"), fate=WARN, note=NO_BCAST,
               help="copy the program to the nodes before starting it", group="io"),
    OptionSpec("bcast-exclude", None, R, RUN, env=env(srun="SLURM_BCAST_EXCLUDE"), fate=WARN, note=NO_BCAST,
               help="library directories --send-libs leaves out", group="io"),
    OptionSpec("begin", "b", R, ALL, parse=v.begin_time,
               help="do not start before this time", group="scheduling"),
    OptionSpec("bell", None, N, ALLOC, env=env(salloc="SALLOC_BELL"), fate=LOCAL,
               help="ring the terminal bell when the allocation is granted", group="interactive"),
    OptionSpec("chdir", "D", R, ALL, env=env(srun="SLURM_WORKING_DIR SLURM_REMOTE_CWD"),
               help="working directory of the job or step", group="io"),
    OptionSpec("cluster", None, R, ALL, dest="clusters", fate=LOCAL, note="only the local cluster exists",
               help="same as --clusters", group="other"),
    OptionSpec("cluster-constraint", None, R, ALL, env=env3("CLUSTER_CONSTRAINT"), fate=REFUSE,
               note="there is no federation, only one cluster",
               help="features a federated cluster must have", group="placement"),
    OptionSpec("clusters", "M", R, ALL,
               env=env("SLURM_CLUSTERS SBATCH_CLUSTERS", "SLURM_CLUSTERS", "SLURM_CLUSTERS SALLOC_CLUSTERS"),
               fate=LOCAL, note="only the local cluster exists",
               help="cluster(s) to use", group="other"),
    OptionSpec("comment", None, R, ALL,
               help="free text kept with the job", group="accounting"),
    OptionSpec("compress", None, O, RUN, env=env(srun="SLURM_COMPRESS"), fate=WARN, note=NO_BCAST,
               help="compression for --bcast", group="io"),
    OptionSpec("consolidate-segments", None, N, ALL, env=env3("CONSOLIDATE_SEGMENTS"), fate=WARN,
               note=NO_SEGMENTS, help="keep topology segments together", group="placement"),
    OptionSpec("constraint", "C", R, ALL, env=env3("CONSTRAINT"),
               help="node features the job needs", group="placement"),
    OptionSpec("container", None, R, ALL,
               env=env("SBATCH_CONTAINER", "SRUN_CONTAINER", "SALLOC_CONTAINER"), fate=REFUSE,
               note=NO_CONTAINERS, help="OCI bundle to run in", group="environment"),
    OptionSpec("container-id", None, R, ALL,
               env=env("SBATCH_CONTAINER_ID", "SRUN_CONTAINER_ID", "SALLOC_CONTAINER_ID"), fate=REFUSE,
               note=NO_CONTAINERS, help="identifier of the container", group="environment"),
    # Slurm 26.05's name for what 26.11 renamed --runtime (both are kept, each with its own variables)
    OptionSpec("container-type", None, R, ALL,
               env=env("SBATCH_CONTAINER_TYPE", "SRUN_CONTAINER_TYPE", "SALLOC_CONTAINER_TYPE"), fate=REFUSE,
               note="container runtimes are not supported",
               help="container runtime plugin (26.05's spelling of --runtime)", group="environment"),
    OptionSpec("context", None, R, ALL, fate=REFUSE, note="security contexts are not supported",
               help="SELinux context of the job", group="environment"),
    OptionSpec("contiguous", None, N, ALL, fate=WARN, note="Grid Engine has no notion of adjacent nodes",
               help="ask for consecutive nodes", group="placement"),
    OptionSpec("core-spec", "S", R, ALL, env=env3("CORE_SPEC"), parse=v.nonneg("--core-spec"), fate=WARN,
               note="no cores are set aside for the system",
               help="cores per node kept for system use", group="resources"),
    OptionSpec("cores-per-socket", None, R, ALL, env=env(srun="SLURM_NCORES_PER_SOCKET"),
               parse=v.positive("--cores-per-socket"), fate=WARN, note=NO_SOCKETS,
               help="minimum cores per socket", group="geometry"),
    OptionSpec("cpu-bind", None, R, RUN, env=env(srun="SLURM_CPU_BIND"), fate=WARN, note=BIND_TASKS,
               help="how tasks are bound to CPUs", group="placement"),
    OptionSpec("cpu-freq", None, R, ALL, env=env3("CPU_FREQ_REQ"), fate=WARN,
               note="CPU frequency is not managed", help="CPU frequency range or governor", group="resources"),
    OptionSpec("cpu_bind", None, R, RUN, env=env(srun="SLURM_CPU_BIND"), dest="cpu_bind", fate=WARN, note=BIND_TASKS,
               help="old spelling of --cpu-bind", group="placement"),
    OptionSpec("cpus-per-gpu", None, R, ALL, env=env3("CPUS_PER_GPU"), parse=v.positive("--cpus-per-gpu"),
               help="CPUs for each GPU", group="resources"),
    OptionSpec("cpus-per-task", "c", R, ALL, env=env(srun="SRUN_CPUS_PER_TASK SLURM_CPUS_PER_TASK"),
               parse=v.positive("--cpus-per-task"),
               help="CPUs for each task", group="geometry"),
    OptionSpec("deadline", None, R, ALL, parse=v.deadline_time, fate=WARN,
               note="the job is not removed when the deadline passes",
               help="drop the job if it cannot end by this time", group="time"),
    OptionSpec("debugger-test", None, N, RUN, fate=REFUSE, note="there is no parallel debugger interface",
               help="check that a debugger could attach (internal)", group="other"),
    OptionSpec("delay-boot", None, R, ALL, env=env3("DELAY_BOOT"), parse=v.delay_seconds, fate=WARN, note=NO_REBOOT,
               help="wait this long before rebooting nodes for features", group="scheduling"),
    OptionSpec("dependency", "d", R, ALL, env=env(srun="SLURM_DEPENDENCY"), parse=v.dependency,
               note="on one array task, Grid Engine holds the job on the whole array (a warning says so; "
               "afterok/afternotok check that task); aftercorr on one task is refused",
               help="start only once other jobs reach a state", group="dependency"),
    OptionSpec("disable-status", "X", N, RUN, env=env(srun="SLURM_DISABLE_STATUS"), fate=LOCAL,
               help="Ctrl-C does not print task status", group="interactive"),
    OptionSpec("distribution", "m", R, ALL, env=env("SBATCH_DISTRIBUTION", "SLURM_DISTRIBUTION"),
               parse=v.distribution, fate=WARN, note="the queue's allocation rule lays out the tasks",
               help="how tasks are spread over nodes, sockets and cores", group="placement"),
    OptionSpec("epilog", None, R, RUN, env=env(srun="SLURM_EPILOG"), fate=LOCAL,
               help="program srun runs after the step", group="other"),
    OptionSpec("error", "e", R, BATCH_RUN, env=env("SBATCH_ERROR", "SRUN_ERROR SLURM_STDERRMODE"),
               help="standard error file (name pattern)", group="io"),
    OptionSpec("exact", None, N, RUN, env=env(srun="SLURM_EXACT"),
               help="the step gets exactly what it asks for", group="resources"),
    OptionSpec("exclude", "x", R, ALL,
               help="nodes not to use", group="placement"),
    OptionSpec("exclusive", None, O, ALL, env=env3("EXCLUSIVE"), parse=v.exclusive, const="exclusive",
               help="do not share nodes (=user, =mcs, =topo: only with own kind)", group="placement"),
    OptionSpec("export", None, R, BATCH_RUN, env=env("SBATCH_EXPORT", "SRUN_EXPORT_ENV SLURM_EXPORT_ENV"),
               # any text: options/export.py reads it (submit.export_mode), as Slurm's env_merge_filter
               help="environment variables the job gets (ALL, NONE, list)", group="environment"),
    OptionSpec("export-file", None, R, BATCH,
               help="read the job's environment from a file or descriptor", group="environment"),
    OptionSpec("external", None, N, BATCH, fate=REFUSE, note="newer Slurm option; every job needs a script",
               help="register a job started outside Slurm", group="scheduling"),
    # (24.11 on) the step of an MPI launcher's daemons (mpirun's srun, as the job's HYDRA_*, OMPI_MCA_*
    # and PRTE_MCA_* variables ask: runtime/jobenv.LAUNCHERS): it shares the job's CPUs with the other
    # steps, as every step here does, and without -n it is one task per node (cli/srun.request)
    OptionSpec("external-launcher", None, O, RUN, env=env(srun="SLURM_EXTERNAL_LAUNCHER"),
               help="mark the step as an MPI launcher's daemons", group="interactive"),
    OptionSpec("extra", None, R, ALL, fate=REFUSE, note="nodes carry no extra data on Grid Engine",
               help="text matched against node extra data", group="placement"),
    OptionSpec("extra-node-info", "B", R, ALL, fate=WARN, note=NO_SOCKETS,
               help="minimum sockets[:cores[:threads]] per node", group="geometry"),
    # [=timeout][mode] (e.g. =L, =10S): accepted and checked as Slurm does; the login environment is
    # loaded the same way whatever they say. salloc takes it too (Slurm loads it there only as root).
    # That is 22.05's form; salloc lost the option in 24.11 and the value went in 25.05 (a flag): OPTIONAL
    # on both commands accepts every spelling either version accepts.
    OptionSpec("get-user-env", None, O, BATCH_ALLOC, env=env(sbatch="SBATCH_GET_USER_ENV"), parse=v.get_user_env,
               help="start from the user's login environment", group="environment"),
    # --gid and --uid: every command in 22.05, sbatch only since 23.11; kept on all three
    OptionSpec("gid", None, R, ALL, fate=REFUSE, note="jobs always run as the submitting user and group",
               help="group to run the job as (root only)", group="accounting"),
    OptionSpec("gpu-bind", None, R, ALL, env=env3("GPU_BIND"), fate=WARN, note="tasks see every GPU of the job",
               help="how tasks are bound to GPUs", group="placement"),
    OptionSpec("gpu-freq", None, R, ALL, env=env3("GPU_FREQ"), fate=WARN, note="GPU clocks are not managed",
               help="GPU frequency", group="resources"),
    OptionSpec("gpus", "G", R, ALL, env=env3("GPUS"), parse=v.gpu_spec,
               help="GPUs for the whole job ([type:]count)", group="resources"),
    OptionSpec("gpus-per-node", None, R, ALL, env=env3("GPUS_PER_NODE"), parse=v.gpu_spec,
               help="GPUs on each node ([type:]count)", group="resources"),
    OptionSpec("gpus-per-socket", None, R, ALL, env=env3("GPUS_PER_SOCKET"), parse=v.gpu_spec, fate=REFUSE,
               note="Grid Engine does not place GPUs by socket",
               help="GPUs per socket ([type:]count)", group="resources"),
    OptionSpec("gpus-per-task", None, R, ALL, env=env3("GPUS_PER_TASK"), parse=v.gpu_spec,
               help="GPUs for each task ([type:]count)", group="resources"),
    OptionSpec("gres", None, R, ALL, env=env3("GRES"), parse=v.gres_spec,
               note="each name is the site's consumable, each type its own complex or a model-selecting "
               "complex (site config [gres.<name>.types]); a type the site does not list is refused",
               help="generic resources per node (name[:type][:count],...)", group="resources"),
    OptionSpec("gres-flags", None, R, ALL, env=env3("GRES_FLAGS"), parse=v.gres_flags, fate=WARN, note=NO_BIND,
               help="GRES binding policy", group="resources"),
    OptionSpec("help", "h", N, ALL, fate=LOCAL,
               help="show the options and exit", group="output"),
    OptionSpec("het-group", None, R, RUN, fate=REFUSE, note=NO_HETJOB,
               help="components of a heterogeneous job to run in", group="geometry"),
    OptionSpec("hint", None, R, ALL, env=env("SBATCH_HINT SLURM_HINT", "SLURM_HINT", "SLURM_HINT SALLOC_HINT"),
               fate=WARN, note="only nomultithread and multithread are bound (one core or one hardware thread "
               "per CPU), on a Grid Engine with -btype (OCS 9.1)",
               help="binding hint (compute_bound, nomultithread, ...)", group="placement"),
    OptionSpec("hold", "H", N, ALL,
               help="submit the job held", group="scheduling"),
    OptionSpec("ignore-pbs", None, N, BATCH, env=env(sbatch="SBATCH_IGNORE_PBS"), fate=LOCAL,
               note="#PBS and #BSUB lines are never read",
               help="do not read #PBS/#BSUB lines", group="other"),
    OptionSpec("ignore-signals", None, R, RUN, fate=LOCAL,
               help="signals srun does not pass on to the tasks", group="interactive"),
    OptionSpec("immediate", "I", O, RUN_ALLOC, env=env(salloc="SALLOC_IMMEDIATE"), parse=v.immediate,
               const=v.DEFAULT_IMMEDIATE, fate=LOCAL,
               help="give up unless resources are free within N seconds", group="scheduling"),
    OptionSpec("input", "i", R, BATCH_RUN, env=env("SBATCH_INPUT", "SRUN_INPUT SLURM_STDINMODE"),
               help="standard input file (name pattern)", group="io"),
    OptionSpec("interactive", None, N, RUN, fate=LOCAL,
               help="run as an allocation's interactive step (internal)", group="interactive"),
    OptionSpec("job-name", "J", R, ALL, env=env("SBATCH_JOB_NAME", "SLURM_JOB_NAME"),
               help="name of the job", group="other"),
    OptionSpec("jobid", None, R, RUN, env=env(srun="SLURM_JOB_ID"), parse=v.positive("--jobid"),
               help="run the step inside this existing job", group="scheduling"),
    OptionSpec("kill-command", "K", O, ALLOC, env=env(salloc="SALLOC_KILL_CMD"), parse=v.kill_command,
               const=v.SIGNALS["TERM"], fate=LOCAL,
               help="signal the command gets when the allocation ends", group="interactive"),
    OptionSpec("kill-on-bad-exit", "K", O, RUN, env=env(srun="SLURM_KILL_BAD_EXIT"),
               parse=v.nonneg("--kill-on-bad-exit"), const=1, fate=LOCAL,
               help="end the step when any task fails (=0 to keep going)", group="interactive"),
    OptionSpec("kill-on-invalid-dep", None, R, BATCH, parse=v.kill_on_invalid_dep,
               help="cancel the job if its dependency can never be met (yes/no)", group="dependency"),
    OptionSpec("label", "l", N, RUN, env=env(srun="SLURM_LABELIO"),
               help="prefix each output line with the task number", group="io"),
    OptionSpec("licenses", "L", R, ALL, parse=v.licenses,
               help="licenses the job needs (name[@db][:count],...)", group="resources"),
    OptionSpec("mail-type", None, R, ALL, parse=v.mail_type,
               help="events that send mail (BEGIN, END, FAIL, ALL, ...)", group="notification"),
    OptionSpec("mail-user", None, R, ALL,
               help="who gets the mail", group="notification"),
    OptionSpec("mcs-label", None, R, ALL, fate=REFUSE, note="MCS labels are not supported",
               help="MCS label of the job", group="accounting"),
    OptionSpec("mem", None, R, ALL, env=env3("MEM_PER_NODE"), parse=v.mem_mb,
               help="memory per node (MB, or with K/M/G/T)", group="resources"),
    OptionSpec("mem-bind", None, R, ALL, env=env3("MEM_BIND"), fate=WARN, note=NO_BIND,
               help="NUMA memory binding", group="placement"),
    OptionSpec("mem-per-cpu", None, R, ALL, env=env3("MEM_PER_CPU"), parse=v.memory("--mem-per-cpu"),
               help="memory per CPU", group="resources"),
    OptionSpec("mem-per-gpu", None, R, ALL, env=env3("MEM_PER_GPU"), parse=v.memory("--mem-per-gpu"),
               help="memory per GPU", group="resources"),
    OptionSpec("mem-update", None, R, ALL, fate=WARN, note="memory limits stay as requested",
               help="raise the memory limit while running (margin@delay)", group="resources"),
    OptionSpec("mincpus", None, R, ALL, parse=v.positive("--mincpus"), fate=WARN,
               note="hosts are not chosen by their CPU count",
               help="minimum CPUs per node", group="geometry"),
    OptionSpec("mpi", None, R, RUN, env=env(srun="SLURM_MPI_TYPE"), fate=LOCAL,
               note="pmi2: srun serves PMI-1 and PMI-2 to every task (MPICH, Intel MPI, MVAPICH) and starts an "
                    "Open MPI program through Open MPI's mpirun; pmix: the same; none: plain tasks; list: the types; "
                    "the default is the site's cluster.mpi_default (Slurm's MpiDefault)",
               help="MPI/PMI plugin for the step", group="other"),
    OptionSpec("msg-timeout", None, R, RUN, parse=v.positive("--msg-timeout"), fate=WARN,
               note="there are no launch messages to time out",
               help="seconds to wait for launch messages", group="other"),
    OptionSpec("multi-prog", None, N, RUN, env=env(srun="SLURM_SRUN_MULTI"), fate=LOCAL,
               help="run a different program per task, from a file", group="interactive"),
    OptionSpec("network", None, R, ALL, env=env3("NETWORK"), fate=REFUSE,
               note="network and switch requests are not supported",
               help="network or interconnect request", group="resources"),
    OptionSpec("nice", None, O, ALL, parse=v.nice, const=100,
               note="Grid Engine's -p, the other way round; a negative nice is refused to all but root, as Slurm's controller does",
               help="lower the job's priority by this much (100 by default)", group="scheduling"),
    OptionSpec("no-allocate", "Z", N, RUN, fate=REFUSE, note="tasks cannot run outside an allocation",
               help="run on nodes without an allocation (privileged)", group="interactive"),
    OptionSpec("no-bell", None, N, ALLOC, env=env(salloc="SALLOC_NO_BELL"), dest="bell", const=False, fate=LOCAL,
               help="never ring the terminal bell", group="interactive"),
    OptionSpec("no-kill", "k", O, ALL, env=env3("NO_KILL"), parse=v.no_kill, fate=WARN,
               note="Grid Engine decides what a node failure does to the job",
               help="keep the job when one of its nodes fails (=off to undo)", group="scheduling"),
    OptionSpec("no-requeue", None, N, BATCH, env=env(sbatch="SBATCH_NO_REQUEUE"), dest="requeue", const=False,
               help="never requeue the job", group="scheduling"),
    OptionSpec("no-shell", None, N, ALLOC, fate=LOCAL,
               help="allocate without starting a command", group="interactive"),
    OptionSpec("nodefile", "F", R, ALL,
               help="file listing the nodes to use", group="placement"),
    OptionSpec("nodelist", "w", R, ALL,
               help="nodes to use (hostlist)", group="placement"),
    OptionSpec("nodes", "N", R, ALL, env=env(srun="SLURM_JOB_NUM_NODES"), parse=v.node_count,
               help="number of nodes (min[-max])", group="geometry"),
    OptionSpec("ntasks", "n", R, ALL, env=env(srun="SLURM_NTASKS SLURM_NPROCS"), parse=v.positive("--ntasks"),
               help="number of tasks", group="geometry"),
    OptionSpec("ntasks-per-core", None, R, ALL, env=env(srun="SLURM_NTASKS_PER_CORE"),
               parse=v.positive("--ntasks-per-core"), fate=WARN, note=NO_SOCKETS,
               help="most tasks on one core", group="geometry"),
    OptionSpec("ntasks-per-gpu", None, R, ALL, env=env(srun="SLURM_NTASKS_PER_GPU"),
               parse=v.positive("--ntasks-per-gpu"),
               help="tasks for each GPU", group="geometry"),
    OptionSpec("ntasks-per-node", None, R, ALL, env=env(srun="SLURM_NTASKS_PER_NODE"),
               parse=v.positive("--ntasks-per-node"),
               help="tasks on each node", group="geometry"),
    OptionSpec("ntasks-per-socket", None, R, ALL, parse=v.positive("--ntasks-per-socket"), fate=WARN,
               note=NO_SOCKETS, help="most tasks on one socket", group="geometry"),
    OptionSpec("ntasks-per-tres", None, R, ALL, env=env(srun="SLURM_NTASKS_PER_TRES"),
               parse=v.positive("--ntasks-per-tres"),
               help="tasks for each GPU (generic form)", group="geometry"),
    OptionSpec("oom-kill-step", None, O, ALL, env=env(srun="SLURM_OOM_KILL_STEP"), fate=WARN,
               note="Grid Engine's memory limit ends the whole job anyway",
               help="end the whole step when one task runs out of memory", group="resources"),
    OptionSpec("open-mode", None, R, BATCH_RUN, env=env("SBATCH_OPEN_MODE", "SLURM_OPEN_MODE"), parse=v.open_mode,
               help="append to or truncate the output files", group="io"),
    OptionSpec("output", "o", R, BATCH_RUN, env=env("SBATCH_OUTPUT", "SRUN_OUTPUT SLURM_STDOUTMODE"),
               help="standard output file (name pattern)", group="io"),
    OptionSpec("overcommit", "O", N, ALL, env=env3("OVERCOMMIT"), fate=WARN,
               note="each task still gets a CPU of its own",
               help="allow more tasks than CPUs", group="resources"),
    OptionSpec("overlap", None, O, RUN, env=env(srun="SLURM_OVERLAP"),
               help="the step may share resources with other steps", group="resources"),
    OptionSpec("oversubscribe", "s", N, ALL, note="Grid Engine shares hosts between jobs by default",
               help="allow sharing nodes with other jobs", group="placement"),
    OptionSpec("pack-group", None, R, RUN, dest="het_group", fate=REFUSE, note=NO_HETJOB,
               help="old spelling of --het-group", group="geometry"),
    OptionSpec("parsable", None, N, BATCH_RUN, fate=LOCAL,
               help="print only the job id (and cluster)", group="output"),
    OptionSpec("partition", "p", R, ALL, env=env3("PARTITION"),
               note="every partition of a list must exist; the job goes to the first one's queue",
               help="partition(s) to run in", group="placement"),
    OptionSpec("power", None, R, ALL, env=env3("POWER"), fate=WARN, note="power management is not available",
               help="power management flags (Slurm 22.05)", group="resources"),
    OptionSpec("prefer", None, R, ALL, fate=WARN, note="soft preferences are not enforced",
               help="node features to prefer", group="placement"),
    OptionSpec("preserve-env", "E", N, RUN, fate=LOCAL,
               help="keep SLURM_NNODES and SLURM_NTASKS from the environment", group="environment"),
    OptionSpec("priority", None, R, ALL, parse=v.priority,
               help="set the job's priority (number or TOP)", group="scheduling"),
    OptionSpec("profile", None, R, ALL, env=env3("PROFILE"), fate=WARN, note="there are no profiling plugins",
               help="usage profiles to record", group="accounting"),
    OptionSpec("prolog", None, R, RUN, env=env(srun="SLURM_PROLOG"), fate=LOCAL,
               help="program srun runs before the step", group="other"),
    OptionSpec("propagate", None, O, BATCH_RUN, fate=WARN, note="resource limits come from the Grid Engine queue",
               help="resource limits the job inherits", group="environment"),
    # a flag in 22.05, an optional value (a file descriptor) since 23.02: OPTIONAL accepts both
    # spellings, and only the values 23.02 takes (any other is 22.05's "doesn't allow an argument").
    # --pty=fd (cli/srun.pty_terminal): a descriptor that is no terminal gets 23.02's two errors and
    # no pseudo-terminal; one that is another terminal than stdin's gets a warning (Grid Engine's
    # qrsh and the step launcher take the terminal on stdin), and stdin's terminal is used.
    OptionSpec("pty", None, O, RUN, parse=v.pty, later=v.pty_later,
               help="run task 0 in a pseudo-terminal (--pty=fd: stdin's terminal only)", group="interactive"),
    OptionSpec("qos", "q", R, ALL, env=env3("QOS"),
               help="quality of service", group="scheduling"),
    OptionSpec("quiet", "Q", N, ALL, fate=LOCAL,
               help="print errors only", group="output"),
    OptionSpec("quit-on-interrupt", None, N, RUN, fate=LOCAL,
               help="quit on the first Ctrl-C", group="interactive"),
    OptionSpec("reboot", None, N, ALL, fate=WARN, note=NO_REBOOT,
               help="reboot the nodes before the job", group="scheduling"),
    OptionSpec("relative", "r", R, RUN, parse=v.nonneg("--relative"), fate=LOCAL,
               help="start the step at this node of the allocation", group="placement"),
    # a flag in 22.05, [=expedite] since 25.11: OPTIONAL accepts both spellings, and only the values
    # 25.11 takes (any other is 22.05's "doesn't allow an argument")
    OptionSpec("requeue", None, O, BATCH, env=env(sbatch="SBATCH_REQUEUE"), parse=v.requeue,
               later=v.requeue_later, help="the job may be requeued", group="scheduling"),
    OptionSpec("reservation", None, R, ALL, env=env3("RESERVATION"),
               note="the Grid Engine advance reservation of that name (qrsub -N), submitted with -ar; "
               "refused as Slurm refuses it when none has the name or its access list leaves the user out",
               help="run inside the named reservation", group="scheduling"),
    OptionSpec("resources", None, R, ALL, fate=REFUSE, note="newer Slurm resource feature, not supported",
               help="named resources", group="resources"),
    OptionSpec("resv-ports", None, O, ALL, env=env(srun="SLURM_RESV_PORTS"), parse=v.nonneg("--resv-port"),
               fate=WARN, note="no ports are reserved", help="reserve communication ports", group="resources"),
    OptionSpec("runtime", None, R, ALL, env=env("SBATCH_RUNTIME", "SRUN_RUNTIME", "SALLOC_RUNTIME"), fate=REFUSE,
               note="container runtimes are not supported", help="container runtime plugin", group="environment"),
    OptionSpec("segment", None, R, ALL, env=env("SBATCH_SEGMENT_SIZE", "SRUN_SEGMENT_SIZE", "SALLOC_SEGMENT_SIZE"),
               fate=WARN, note=NO_SEGMENTS, help="topology segment size", group="placement"),
    OptionSpec("send-libs", None, O, RUN, env=env(srun="SLURM_SEND_LIBS"), fate=WARN, note=NO_BCAST,
               help="copy shared libraries along with --bcast", group="io"),
    OptionSpec("signal", None, R, ALL, env=env3("SIGNAL"), parse=v.signal_spec,
               help="signal the job before its time limit ([R|B:]sig[@secs])", group="notification"),
    OptionSpec("slurmd-debug", None, R, RUN, env=env(srun="SLURMD_DEBUG"), fate=WARN, note="there is no slurmd",
               help="debug level of the node daemons", group="output"),
    OptionSpec("sockets-per-node", None, R, ALL, env=env(srun="SLURM_NSOCKETS_PER_NODE"),
               parse=v.positive("--sockets-per-node"), fate=WARN, note=NO_SOCKETS,
               help="minimum sockets per node", group="geometry"),
    OptionSpec("spread-job", None, N, ALL, env=env3("SPREAD_JOB"), fate=WARN,
               note="the queue's allocation rule decides the spread",
               help="use as many nodes as possible", group="placement"),
    OptionSpec("spread-segments", None, N, ALL, env=env3("SPREAD_SEGMENTS"), fate=WARN, note=NO_SEGMENTS,
               help="put segments in separate blocks", group="placement"),
    OptionSpec("stepmgr", None, N, ALL, fate=WARN, note="the shim manages steps itself",
               help="run a step manager inside the job", group="other"),
    OptionSpec("switches", None, R, ALL, fate=REFUSE, note="switch topology cannot be requested",
               help="most leaf switches[@longest wait]", group="placement"),
    OptionSpec("task-epilog", None, R, RUN, env=env(srun="SLURM_TASK_EPILOG"),
               help="program run after each task", group="other"),
    OptionSpec("task-prolog", None, R, RUN, env=env(srun="SLURM_TASK_PROLOG"),
               help="program run before each task", group="other"),
    OptionSpec("tasks-per-node", None, R, ALL, env=env(srun="SLURM_NTASKS_PER_NODE"), dest="ntasks_per_node",
               parse=v.positive("--ntasks-per-node"),
               help="old spelling of --ntasks-per-node", group="geometry"),
    OptionSpec("test-only", None, N, BATCH_RUN, fate=LOCAL,
               help="check the request and estimate its start; submit nothing", group="output"),
    OptionSpec("thread-spec", None, R, ALL, env=env3("THREAD_SPEC"), parse=v.positive("--thread-spec"), fate=WARN,
               note="no threads are set aside for the system",
               help="threads per node kept for system use", group="resources"),
    OptionSpec("threads", "T", R, RUN, env=env(srun="SLURM_THREADS"), parse=v.positive("--threads"), fate=WARN,
               note="srun's launch fan-out is not tunable",
               help="threads srun uses to start tasks", group="other"),
    OptionSpec("threads-per-core", None, R, ALL, env=env3("THREADS_PER_CORE"),
               parse=v.positive("--threads-per-core"), fate=WARN,
               note="only 1 is bound (one core per CPU), on a Grid Engine with -btype (OCS 9.1); "
               "Grid Engine does not choose hosts by threads per core",
               help="hardware threads per core to use", group="geometry"),
    OptionSpec("time", "t", R, ALL, env=env3("TIMELIMIT"), parse=v.time_limit,
               help="time limit ([D-]H:M:S, minutes, UNLIMITED)", group="time"),
    OptionSpec("time-min", None, R, ALL, parse=partial(v.time_limit, opt="--time-min"), fate=WARN,
               note="there is no backfill; the --time limit applies",
               help="smallest acceptable time limit", group="time"),
    OptionSpec("tmp", None, R, ALL, parse=v.memory("--tmp"), fate=WARN, note="temporary disk is not reserved",
               help="minimum temporary disk per node", group="resources"),
    OptionSpec("treewidth", None, R, RUN, fate=WARN, note="there are no launch messages to fan out",
               help="fan-out of launch messages", group="other"),
    OptionSpec("tres-bind", None, R, ALL, env=env3("TRES_BIND"), fate=WARN, note=NO_BIND,
               help="how tasks are bound to resources", group="placement"),
    OptionSpec("tres-per-task", None, R, ALL, env=env3("TRES_PER_TASK"), fate=REFUSE,
               note="newer Slurm option; use --cpus-per-task/--gpus-per-task",
               help="resources per task (cpu=N,gres/gpu=N)", group="resources"),
    OptionSpec("uid", None, R, ALL, fate=REFUSE, note="jobs always run as the submitting user",
               help="user to run the job as (root only)", group="accounting"),
    OptionSpec("unbuffered", "u", N, RUN, env=env(srun="SLURM_UNBUFFEREDIO"),
               help="pass task output on without buffering", group="io"),
    OptionSpec("usage", None, N, ALL, fate=LOCAL,
               help="show a short usage message", group="output"),
    OptionSpec("use-min-nodes", None, N, ALL, env=env3("USE_MIN_NODES"), fate=WARN,
               note="Grid Engine picks the node count within the range",
               help="prefer the low end of a node-count range", group="geometry"),
    OptionSpec("verbose", "v", N, ALL, env=env3("DEBUG"), fate=LOCAL, count=True,
               help="more messages (repeatable)", group="output"),
    OptionSpec("version", "V", N, ALL, fate=LOCAL,
               help="show the version and exit", group="output"),
    OptionSpec("wait", "W", N, BATCH, env=env(sbatch="SBATCH_WAIT"), fate=LOCAL,
               help="return when the job ends, with its exit code", group="scheduling"),
    OptionSpec("wait", "W", R, RUN, env=env(srun="SLURM_WAIT"), parse=v.nonneg("--wait"), fate=LOCAL,
               help="seconds to let other tasks run after the first ends", group="interactive"),
    OptionSpec("wait-all-nodes", None, R, BATCH_ALLOC, env=env(sbatch="SBATCH_WAIT_ALL_NODES",
               salloc="SALLOC_WAIT_ALL_NODES"), parse=v.wait_all_nodes, fate=WARN,
               note="hosts are always up when a job starts",
               help="start only once every node is ready (0 or 1)", group="scheduling"),
    OptionSpec("wait-for-children", None, N, RUN, fate=WARN, note="the step ends with its tasks",
               help="wait for every process the tasks started", group="interactive"),
    OptionSpec("wckey", None, R, ALL, env=env3("WCKEY"),
               help="workload characterization key", group="accounting"),
    OptionSpec("whole", None, N, RUN,
               help="the step gets whole nodes of the allocation", group="resources"),
    OptionSpec("wrap", None, R, BATCH, fate=LOCAL,
               help="submit this command line as an sh script", group="other"),
    OptionSpec("x11", None, O, RUN_ALLOC, fate=REFUSE, note="X11 forwarding is not supported",
               help="forward X11 (all, first or last node)", group="interactive"),
)

# getopt_long lists an ambiguous prefix's candidates in the order of Slurm's own option array
# (src/common/slurm_opt.c), which is not quite alphabetical; this is that order.
GETOPT_ORDER: tuple[str, ...] = (
    "accel-bind", "account", "acctg-freq", "array", "async", "autocomplete", "batch", "bcast",
    "bcast-exclude", "begin", "bell", "bb", "bbf", "cluster-constraint", "chdir", "cluster", "clusters",
    "comment", "compress", "consolidate-segments", "container", "container-id", "container-type", "context",
    "contiguous", "constraint", "core-spec", "cores-per-socket", "cpu-bind", "cpu_bind", "cpu-freq",
    "cpus-per-gpu", "cpus-per-task", "deadline", "debugger-test", "delay-boot", "dependency", "disable-status",
    "distribution", "epilog", "error", "exact", "exclude", "exclusive", "export", "export-file", "external",
    "external-launcher", "extra", "extra-node-info", "get-user-env", "gid", "gpu-bind", "gpu-freq", "gpus",
    "gpus-per-node", "gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "help", "het-group", "hint",
    "hold", "ignore-pbs", "ignore-signals", "immediate", "input", "interactive", "jobid", "job-name",
    "kill-command", "kill-on-bad-exit", "kill-on-invalid-dep", "label", "licenses", "mail-type",
    "mail-user", "threads", "mcs-label", "mem", "mem-bind", "mem-per-cpu", "mem-per-gpu", "mem-update",
    "mincpus", "mpi", "msg-timeout", "multi-prog", "network", "nice", "no-allocate", "no-bell", "no-kill",
    "no-shell", "no-requeue", "nodefile", "nodelist", "nodes", "ntasks", "ntasks-per-core",
    "ntasks-per-gpu", "ntasks-per-node", "ntasks-per-socket", "ntasks-per-tres", "oom-kill-step",
    "open-mode", "output", "overcommit", "overlap", "oversubscribe", "pack-group", "parsable", "partition",
    "power", "prefer", "preserve-env", "priority", "profile", "prolog", "propagate", "pty", "qos", "quiet",
    "quit-on-interrupt", "reboot", "relative", "requeue", "resources", "reservation", "resv-ports",
    "runtime", "segment", "send-libs", "signal", "slurmd-debug", "sockets-per-node", "spread-job",
    "spread-segments", "stepmgr", "switches", "task-epilog", "task-prolog", "tasks-per-node", "test-only",
    "thread-spec", "threads-per-core", "time", "time-min", "tmp", "treewidth", "tres-bind",
    "tres-per-task", "uid", "unbuffered", "use-min-nodes", "verbose", "version", "usage", "wait",
    "wait-all-nodes", "wait-for-children", "wckey", "whole", "wrap", "x11",
)


def command_table(prog: str, release: "Release | None" = None) -> Table:
    """The getopt table of sbatch, srun or salloc, candidates ordered as Slurm's getopt sees them:
    the rows the site's Slurm release has (releases.current; ``release`` another), an option of a
    newer or older release being that release's ``unrecognized option``."""
    from .. import releases

    release = release or releases.current()
    known = releases.RELEASES.get(release.name) is release  # (one of the table's own: its rows never change)
    key = (prog, release.name)
    if known and key in _TABLES:
        return _TABLES[key]
    t = Table(prog, [o for o in OPTIONS if release.knows(prog, o.long)], order=GETOPT_ORDER)
    if known:
        _TABLES[key] = t
    return t


# (command, release name) -> its Table, built once a process (the warm service builds them before
# it forks: service/server.warm). A Table is only read once built.
_TABLES: dict[tuple[str, str], Table] = {}


def every_table(prog: str) -> Table:
    """Every row of ``prog``, whichever release has it (the table's own checks, completion)."""
    return Table(prog, OPTIONS, order=GETOPT_ORDER)


def spec(long: str, prog: str) -> OptionSpec:
    """The row of option ``--long`` for command ``prog``."""
    for row in OPTIONS:
        if row.long == long and prog in row.commands:
            return row
    raise KeyError(f"{prog} --{long}")
