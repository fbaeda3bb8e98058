"""salloc: obtain an allocation and run a command in it, as Slurm's salloc, on Grid Engine.

The allocation is a Grid Engine job (submitted like sbatch's, through the job wrapper, so squeue,
scancel and sacct know it) whose batch script holds the slots: ``shim.steps.hold_main`` records
the job's hosts in the state directory and waits to be released. salloc waits for that record,
prints ``salloc: Granted job allocation N``, runs the command (or the user's shell) here with the
allocation's SLURM_* variables, then releases the job with the command's exit code and prints
``salloc: Relinquishing job allocation N``. srun inside reaches the hosts as a task of the job.
The allocation's lifecycle (the holder, the wait, the notice of its end, the release) is
``shim.operations.allocation``; this module parses, submits, waits, runs the command and releases.
"""

from __future__ import annotations

import os
import pwd
import signal
import sys
import time

from ..operations import allocation, submit
from .. import proc, siteconf
from ..slurm.options.getopt import Table
from ..slurm.options.table import command_table
from . import common

PROG = "salloc"

ALLOC_VARS = (
    "SLURM_CLUSTER_NAME", "SLURM_JOBID", "SLURM_JOB_ACCOUNT", "SLURM_JOB_CPUS_PER_NODE", "SLURM_JOB_ID",
    "SLURM_JOB_NAME", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_JOB_PARTITION", "SLURM_JOB_QOS",
    "SLURM_NNODES", "SLURM_NODELIST", "SLURM_NODE_ALIASES", "SLURM_NPROCS", "SLURM_NTASKS", "SLURM_SUBMIT_DIR",
    "SLURM_SUBMIT_HOST", "SLURM_TASKS_PER_NODE", "SLURM_CPUS_PER_TASK", "SLURM_NTASKS_PER_NODE",
    "SLURM_JOB_DEPENDENCY", "SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK", "SLURM_DISTRIBUTION",
    "SLURM_HINT", "SLURM_THREADS_PER_CORE", "SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU",
)
"""What the command of ``salloc -n1 env`` sees from Slurm (the reference capture), plus the
variables of options that were given."""


def table() -> Table:
    return command_table(PROG)


def info(o, text: str) -> None:
    if not o.quiet:
        print(f"{PROG}: {text}", file=sys.stderr, flush=True)


def command_env(environ: dict[str, str], alloc: dict, o) -> dict[str, str]:
    env = dict(environ)
    job = alloc.get("env") or {}
    explicit_mem = o.mem is not None or o.mem_per_cpu is not None or o.mem_per_gpu is not None
    for k in ALLOC_VARS:
        if k in job:
            if k.startswith("SLURM_MEM_PER") and not explicit_mem:
                continue
            env[k] = job[k]
    from ..runtime.jobenv import launcher_env
    from ..slurm import releases

    release = releases.current()  # (24.11 on: the MPI launchers' variables, as in a batch job)
    env.update({k: v for k, v in launcher_env(environ).items() if release.sets(k)})
    return env


def main(argv: list[str]) -> int:
    environ = dict(os.environ)
    t = table()
    first, o, positional = submit.command_options(t, argv, environ)
    if first is not None:
        return common.usage(first, PROG)
    from ..gridengine.translate import qsub  # (the allocation's translation imports it anyway)

    for w in qsub.bound_warnings(common.fates(o, t, PROG, ("cli",)), o, PROG, submit.capabilities()):
        if not o.quiet:
            print(w, file=sys.stderr)
    cfg = siteconf.get()
    submit.check_cluster(PROG, o.clusters, cfg)
    if o.verbose:
        common.print_defined_options(o, t, PROG, ("cli",))
    command = positional or [environ.get("SHELL") or pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"]
    submitted = time.time()
    holder = allocation.holder_script(cfg.cluster.state_dir, not o.no_shell)
    job_id, rec = submit.allocate(o, environ, cfg, holder, PROG)

    def say(text: str) -> None:
        info(o, text)

    for line in allocation.verbose_lines(job_id, "submitted") if o.verbose else ():
        say(line)

    alloc = allocation.wait_granted(job_id, cfg, o.immediate, say, submitted, rec.env_file or None, PROG)
    info(o, f"Granted job allocation {job_id}")
    ready = allocation.nodes_ready(alloc)
    if ready:
        info(o, ready)
    if o.bell:
        sys.stderr.write("\a")
    if o.no_shell:
        return 0
    env = command_env(environ, alloc, o)
    try:
        child = proc.popen(command, env=env)
    except (proc.SpawnError, OSError) as e:
        print(f"{PROG}: error: {command[0]}: {getattr(e, 'strerror', None) or e}", file=sys.stderr)
        allocation.release(cfg, job_id, 1)
        info(o, f"Relinquishing job allocation {job_id}")
        return 1
    stop = allocation.watching(cfg, job_id, child, o.kill_command, say)

    def forward(sig, frame):
        if child.poll() is None:
            try:
                child.send_signal(sig)
            except ProcessLookupError:
                pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)}
    old[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command in the foreground has it
    old[signal.SIGQUIT] = signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    try:
        status = child.wait()
    finally:
        stop.set()
        for s, h in old.items():
            signal.signal(s, h)
    rc = status if status >= 0 else 128 - status
    allocation.release(cfg, job_id, rc)
    info(o, f"Relinquishing job allocation {job_id}")
    for line in allocation.verbose_lines(job_id, "released") if o.verbose else ():
        info(o, line)
    return rc


