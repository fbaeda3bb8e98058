"""srun: run parallel tasks, as Slurm's srun, on Grid Engine.

Inside an allocation (SLURM_JOB_ID set, or --jobid): a job step over the allocation's hosts
(shim.runtime.steps). Outside: a new job with the same translation as sbatch, started as an
interactive Grid Engine job that waits for resources (streaming output, stdin, the real exit code,
a terminal for --pty), whose one process runs the shim's step launcher
(``shim.runtime.steps.job_main``) as the job's step 0 (``shim.operations.submit.interactive_job``).
"""

from __future__ import annotations

import os
import pwd
import sys
import time

from ..gridengine import backends
from ..store import records
from .. import siteconf
from ..operations import submit
from ..runtime import jobenv, steps
from ..errors import ShimError
from ..slurm.options import sources
from ..slurm.options.getopt import Table
from ..slurm.options.table import command_table
from ..slurm.options.values import INFINITE
from ..slurm.request import submit_line
from . import common

PROG = "srun"
# Inside a job, srun's input variables are mostly the job's own output variables
# (SLURM_DISTRIBUTION, SLURM_CPU_BIND, ...): only the command line counts for fates and -v.
CLI_ONLY = ("cli",)


def table() -> Table:
    return command_table(PROG)


def request(o: sources.Options, positional: list[str], environ: dict[str, str]) -> steps.StepRequest:
    """srun's options as the step launcher's typed request."""
    argv = list(positional)
    per_task = None
    if o.multi_prog:
        try:
            with open(argv[0], encoding="utf-8") as f:
                text = f.read()
        except OSError:
            raise ShimError(f"{PROG}: error: Unable to open multi-prog file {argv[0]}", code=1) from None
        ntasks = o.ntasks or 1
        per_task = steps.parse_multi_prog(text, ntasks)
        missing = [t for t in range(ntasks) if t not in per_task]
        if missing:
            raise ShimError(f"{PROG}: error: Configuration file {argv[0]} invalid, no record for task id "
                            f"{missing[0]}", code=1)
        argv = per_task[0]
    nodes = o.nodes[0] if isinstance(o.nodes, tuple) else o.nodes
    orted = orted_exclude(argv, o.raw.get("nodelist"))
    if orted and o.source.get("nodes") != "cli":
        nodes = None  # the job's SLURM_JOB_NUM_NODES counts the host left out
    chdir = o.chdir
    if chdir and not os.path.isabs(chdir):
        chdir = os.path.normpath(os.path.join(os.getcwd(), chdir))
    kill_bad = o.kill_on_bad_exit
    bind_to, bind_verbose = step_binding(o)
    ntasks = o.ntasks
    if o.get("external_launcher") is not None and o.source.get("ntasks") != "cli":
        ntasks = None  # an MPI launcher's step: one task per node unless -n says (oracle-rest.txt M4)
    return steps.StepRequest(
        prog=PROG,
        argv=argv,
        argv_per_task={str(k): v for k, v in per_task.items()} if per_task else None,
        ntasks=ntasks,
        cpus_per_task=o.cpus_per_task or 1,
        cpus_per_task_set=o.cpus_per_task is not None,
        nodes=nodes or None,
        ntasks_per_node=o.ntasks_per_node,
        relative=o.relative or 0,
        label=bool(o.label),
        unbuffered=bool(o.unbuffered or o.pty is not None),
        output=o.output,
        error=o.error,
        input=o.input,
        append=o.open_mode == "append",
        kill_on_bad_exit=bool(kill_bad) if kill_bad is not None else False,
        wait=o.wait or 0,
        pty=o.pty is not None and pty_terminal(o.raw.get("pty")),
        time=o.time if o.time not in (None, INFINITE) else None,
        chdir=chdir or os.getcwd(),
        export=submit.export_mode(o.raw.get("export"), environ),
        distribution=o.raw.get("distribution"),
        name=o.job_name if o.source.get("job_name") == "cli" else os.path.basename(str(argv[0])),
        quiet=bool(o.quiet),
        verbose=int(o.verbose or 0),
        mpi=mpi_type(o.raw.get("mpi")),
        overcommit=bool(o.overcommit),
        nodelist=o.raw.get("nodelist"),
        exclude=o.raw.get("exclude") or orted,
        cpu_bind=bind_to,
        cpu_bind_verbose=bind_verbose,
    )


def step_binding(o: sources.Options) -> tuple[str | None, bool]:
    """--cpu-bind=cores|threads (with quiet/verbose) as each host's launcher binds the step's tasks
    where Grid Engine bound the job (runtime/steps/launch.task_cpus): (unit, verbose), else (None,
    False). A nested srun's SLURM_CPU_BIND (mask_cpu:..., its step's output) binds nothing."""
    if o.get("cpu_bind") is None:
        return None, False
    from ..gridengine.translate.qsub import cpu_bind_type

    to, mode, verbose = cpu_bind_type(o.raw.get("cpu_bind"))
    return (to, verbose) if mode is None and to in ("cores", "threads") else (None, False)


def pty_terminal(raw: str | None) -> bool:
    """``--pty=<fd>`` (Slurm 23.02+, srun.c _setup_one_job_env): the descriptor (``atoi`` of the
    value) is the terminal whose window size and raw mode the step's pseudo-terminal follows; one
    that is no terminal (set_winsize's ``ioctl(TIOCGWINSZ)`` fails) is reported with Slurm's two
    errors and the step runs without a pseudo-terminal. Grid Engine's qrsh (and the shim's step
    launcher) take the terminal from standard input: a descriptor that is another terminal than the
    one on standard input cannot be honoured, and a warning says so (the terminal on standard input
    is used). The bare flag and ``--pty=`` (no descriptor) are the terminal on standard input, as
    before."""
    if not raw:
        return True
    import fcntl
    import struct
    import termios

    digits = len(raw) - len(raw.lstrip("0123456789"))
    fd = int(raw[:digits]) if digits else 0
    try:
        fcntl.ioctl(fd, termios.TIOCGWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
    except OSError as e:
        print(f"{PROG}: error: ioctl(TIOCGWINSZ): {os.strerror(e.errno or 0)}", file=sys.stderr)
        print(f"{PROG}: error: Not using a pseudo-terminal, disregarding --pty={raw} option", file=sys.stderr)
        return False
    try:
        same = os.path.samestat(os.fstat(fd), os.fstat(0)) and os.isatty(0)
    except OSError:
        same = False
    if not same:
        print(f"{PROG}: warning: --pty={raw}: Grid Engine gives task 0 the terminal on standard input; "
              f"descriptor {fd} is another terminal and is not used", file=sys.stderr)
    return True


MPI_TYPES = ("none", "pmi2", "pmix")
"""The MPI plugins srun has here (Slurm's names): none; pmi2 (PMI-1 and PMI-2, served by srun);
pmix, what Open MPI programs are run with under Slurm: here an Open MPI program goes through
Open MPI's mpirun (runtime/steps/ompi.py) under pmi2 and pmix alike, any other gets PMI-1/PMI-2."""


def mpi_list() -> str:
    """--mpi=list, in Slurm's words (plugrack_print_mpi_plugins)."""
    return "MPI plugin types are...\n" + "".join(f"\t{t}\n" for t in MPI_TYPES)


def mpi_type(value: str | None) -> str:
    """The step's MPI plugin: --mpi (or SLURM_MPI_TYPE), else the site's default (Slurm's
    MpiDefault); "openmpi" is "none", as in Slurm. An unknown type fails as Slurm's srun does."""
    if not value:
        value = str(getattr(siteconf.get().cluster, "mpi_default", None) or "none")
    if value == "openmpi":
        value = "none"
    if value not in MPI_TYPES:
        raise ShimError(f"{PROG}: error: Couldn't find the specified plugin name for mpi/{value} looking at all files",
                        f"{PROG}: error: cannot find mpi plugin for mpi/{value}",
                        f"{PROG}: error: MPI: Cannot create context for mpi/{value}",
                        f"{PROG}: error: MPI: Unable to load any plugin",
                        f"{PROG}: error: Invalid MPI type '{value}', --mpi=list for acceptable types", code=1)
    return value


def orted_exclude(argv: list[str], nodelist: str | None) -> str | None:
    """Open MPI's mpirun in a job sees Grid Engine's allocation (PE_HOSTFILE) and Slurm's launcher
    (SLURM_JOBID): it then asks ``srun --ntasks=<nodes - 1> --ntasks-per-node=1 orted ...`` with
    no --nodelist, meaning every node but its own (where it runs its ranks itself). The step then
    leaves out this host, as those daemons need."""
    if nodelist or not argv or os.path.basename(str(argv[0])) != "orted" or "orte_hnp_uri" not in argv:
        return None
    return steps.short_host()


# ---------------------------------------------------------------------------------------------
# Inside an allocation


def job_variables(alloc: steps.Allocation, cfg) -> dict[str, str]:
    """The job's SLURM_* variables when srun's environment lost them (snakemake strips all but
    SLURM_JOB_ID): as the job's own processes had them, else rebuilt from the shim's record."""
    out = dict(alloc.job_env)
    if alloc.record and "SLURM_JOB_NODELIST" not in out:
        user = pwd.getpwuid(os.getuid())
        env = jobenv.batch_env(alloc.record, job_id=alloc.job_id, task=alloc.task, hosts=alloc.hosts,
                               this_host=steps.short_host(), user=user.pw_name, uid=user.pw_uid, gid=os.getgid())
        for k in ("ENVIRONMENT", "HOSTNAME", "SLURM_TASK_PID"):
            env.pop(k, None)
        for k, v in env.items():
            out.setdefault(k, v)
    return out


def _owner_check(backend, job_id: int):
    """Grid Engine's owner of the job (JB_owner, ``qstat -j``), asked in a thread while srun
    reads its records; the returned function says whether the job is another user's. Root may
    step into any job. No answer (qstat failed, the job unknown) leaves it to what follows."""
    import threading

    if os.getuid() == 0:
        return lambda: False
    got: list = []
    t = threading.Thread(target=lambda: got.append(_job_owner(backend, job_id)), daemon=True)
    t.start()

    def foreign() -> bool:
        t.join()
        owner = got[0] if got else None
        return owner is not None and owner != pwd.getpwuid(os.getuid()).pw_name

    return foreign


def _job_owner(backend, job_id: int) -> str | None:
    try:
        owners = backend.job_owners([job_id])
    except Exception:  # noqa: BLE001 - no answer: execd still refuses another user's qrsh -inherit
        return None
    return (owners or {}).get(job_id)


def in_allocation(o: sources.Options, req: steps.StepRequest, environ: dict[str, str], cfg, job_id: int) -> int:
    backend = backends.get(cfg)
    foreign = _owner_check(backend, job_id)
    record = records.Reader(cfg).submit(job_id, os.getuid()) or None  # only into its user's own jobs; typed (Submitted)
    if foreign():  # slurmctld's step_create: the step's user must be the job's (before any qrsh)
        raise ShimError(f"{PROG}: error: Unable to create step for job {job_id}: Access/permission denied", code=1)

    alloc = steps.find_allocation(cfg.cluster.state_dir, job_id, environ, record=record,
                                  granted=backend.running_job_hosts)
    if alloc is None:
        raise ShimError(f"{PROG}: error: Unable to confirm allocation for job {job_id}: Invalid job id specified",
                        f"{PROG}: Check SLURM_JOB_ID environment variable. Expired or invalid job {job_id}", code=1)
    base = steps.export_env(environ, req.export)
    for k, v in job_variables(alloc, cfg).items():
        base.setdefault(k, v)
    qrsh_env = getattr(backend, "env", None) or dict(os.environ)
    deadline = time.time() + req.time * 60 if req.time else None
    try:
        res = steps.run_step(req, alloc, base_env=base, state_dir=cfg.cluster.state_dir,
                             qrsh=backend.interactive_argv, qrsh_env=qrsh_env, deadline=deadline)
    except steps.StepError as e:
        raise ShimError(f"{PROG}: error: Unable to create step for job {job_id}: {e}", code=1) from None
    return res.rc


# ---------------------------------------------------------------------------------------------


def async_errors(o: sources.Options, environ: dict[str, str]) -> list[str]:
    """srun's own checks of --async and --parsable, in the order and words of Slurm 26.05.5
    (fixtures/slurm-26.05/oracle-srun.json): every one that fails is printed, then srun exits 1.
    Only a release whose option table has the two options gets here with them (releases.py; the
    others answer ``unrecognized option``); --async inside an allocation then meets its fate
    (refused: a step runs in the foreground)."""
    asynchronous = bool(getattr(o, "async", None))
    errors = []
    if asynchronous and o.pty is not None:
        errors.append("--async and --pty are mutually exclusive.")
    if asynchronous and o.immediate is not None:
        errors.append("--immediate and --async are mutually exclusive.")
    if asynchronous and o.jobid is None and not environ.get("SLURM_JOB_ID"):
        errors.append("--async is only valid for steps submitted within an existing job allocation.")
    if o.parsable and not asynchronous:
        errors.append("--parsable requires --async.")
    return [f"{PROG}: error: {e}" for e in errors]


def main(argv: list[str]) -> int:
    environ = dict(os.environ)
    t = table()
    first, o, positional = submit.command_options(t, argv, environ)
    if first is not None:
        return common.usage(first, PROG)
    errors = async_errors(o, environ)
    if errors:
        raise ShimError(*errors, code=1)
    warnings = common.fates(o, t, PROG, CLI_ONLY)
    if str(o.raw.get("distribution") or "").split(":")[0].split(",")[0].lower() in ("block", "cyclic"):
        # a step's ranks follow block and cyclic (runtime/steps/plan.layout): no warning for srun
        warnings = [w for w in warnings if not w.startswith(f"{PROG}: warning: --distribution ")]
    if o.overcommit and (o.jobid is not None or environ.get("SLURM_JOB_ID")):
        # a step of an allocation may have more tasks than CPUs (layout): no warning then
        warnings = [w for w in warnings if not w.startswith(f"{PROG}: warning: --overcommit ")]
    if o.jobid is None and not environ.get("SLURM_JOB_ID"):  # srun's own job: Grid Engine may bind it
        from ..gridengine.translate import qsub

        warnings = qsub.bound_warnings(warnings, o, PROG, submit.capabilities())
    elif step_binding(o)[0]:
        from ..runtime.steps.launch import bound_here

        if bound_here():  # a step of a job Grid Engine bound (srun inside it): each task gets its share
            warnings = [w for w in warnings if not w.startswith(f"{PROG}: warning: --cpu-bind has no effect ")]
    if o.raw.get("mpi") == "list":
        sys.stdout.write(mpi_list())
        return 0
    if not positional:
        raise ShimError(f"{PROG}: fatal: No command given to execute.", code=1)
    if not o.quiet:
        for w in warnings:
            print(w, file=sys.stderr)
    if o.verbose:
        common.print_defined_options(o, t, PROG, CLI_ONLY)
    cfg = siteconf.get()
    submit.check_cluster(PROG, o.clusters, cfg)
    # the step's SubmitLine (sacct): srun's words and the command's name, not its arguments (as
    # sbatch's line leaves out the script's: request.submit_line)
    req = request(o, positional, environ).replace(submit_line=submit_line(PROG, argv, len(positional) - 1))
    if o.jobid is not None:
        from ..slurm.jobids import split_task_id

        job, task = split_task_id(o.jobid)  # an array task's own id (SLURM_JOB_ID in the task): G and t
        if task is not None:
            environ = {**environ, "SLURM_ARRAY_TASK_ID": str(task)}
        return in_allocation(o, req, environ, cfg, job)
    return submit.interactive_job(o, req, environ, cfg, PROG)  # outside an allocation: a new job
