"""salloc: obtain an allocation and run a command in it, as Slurm's salloc, on Grid Engine.

The allocation is a Grid Engine job (submitted like sbatch's, through the job wrapper, so squeue,
scancel and sacct know it) whose batch script holds the slots: ``shim.steps.hold_main`` records
the job's hosts in the state directory and waits to be released. salloc waits for that record,
prints ``salloc: Granted job allocation N``, runs the command (or the user's shell) here with the
allocation's SLURM_* variables, then releases the job with the command's exit code and prints
``salloc: Relinquishing job allocation N``. srun inside reaches the hosts as a task of the job.
"""

from __future__ import annotations

import os
import pwd
import signal
import sys
import threading
import time

from .. import backends, proc, siteconf, state, submit
from ..runtime import boot, steps
from ..errors import ShimError
from ..options.getopt import Table
from ..options.table import command_table
from . import common

PROG = "salloc"
PENDING_NOTICE = 2.0
"""Seconds before salloc says the job is queued: Grid Engine starts even an idle cluster's jobs
about a second after submission, which Slurm would not call pending."""

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


def holder_script(state_dir: str, watch_pid: bool = True) -> bytes:
    """The allocation job's batch script: shim.steps.hold_main, told where salloc runs (so that an
    allocation whose salloc died on the same host ends; --no-shell allocations outlive salloc)."""
    return boot.script("hold_main", [state_dir, steps.short_host(), str(os.getpid() if watch_pid else 0)],
                       comment="slurm-shim: this job holds a salloc allocation until salloc releases it.")


STALE = 300.0
"""An allocation record older than the submission by this much is another job's (a reused id)."""


def wait_granted(o, job_id: int, cfg, immediate: int | None, submitted: float | None = None) -> dict:
    """Wait until the allocation job runs and has recorded its hosts; Slurm's messages on the way."""
    submitted = time.time() if submitted is None else submitted
    backend = backends.get(cfg)
    sdir = cfg.cluster.state_dir
    start = time.monotonic()
    delay = 0.05
    said_pending = False
    next_check = start + 2.0
    interrupted: dict[str, int] = {}
    old = {s: signal.signal(s, lambda sig, f: interrupted.setdefault("sig", sig))
           for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            data = steps.load_allocation(sdir, str(job_id))
            began = (data or {}).get("start")
            if data and isinstance(began, (int, float)) and began >= submitted - STALE:
                if said_pending:
                    info(o, f"job {job_id} has been allocated resources")
                return data
            now = time.monotonic()
            if interrupted:
                backend.cancel([str(job_id)])
                info(o, f"Job allocation {job_id} has been revoked.")
                raise ShimError(code=1)
            if immediate is not None and now - start > immediate:
                backend.cancel([str(job_id)])
                if said_pending:
                    info(o, f"Job allocation {job_id} has been revoked.")
                raise ShimError(f"{PROG}: error: Unable to allocate resources: Requested nodes are busy", code=1)
            if not said_pending and now - start > PENDING_NOTICE and immediate is None:
                info(o, f"Pending job allocation {job_id}")
                info(o, f"job {job_id} queued and waiting for resources")
                said_pending = True
            if now >= next_check:
                next_check = now + 2.0
                if not backend.exists(job_id) and not steps.load_allocation(sdir, str(job_id)):
                    info(o, f"Job allocation {job_id} has been revoked.")
                    raise ShimError(code=1)
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def command_env(environ: dict[str, str], alloc: dict, o) -> dict[str, str]:
    env = dict(environ)
    job = alloc.get("env") or {}
    explicit_mem = o.mem is not None or o.mem_per_cpu is not None or o.mem_per_gpu is not None
    for k in ALLOC_VARS:
        if k in job:
            if k.startswith("SLURM_MEM_PER") and not explicit_mem:
                continue
            env[k] = job[k]
    return env


def release(cfg, job_id: int, rc: int) -> None:
    """End the allocation with the command's exit code: a file in the user's private ``steps/``
    that the holder watches (written atomically); the job is cancelled when it cannot be written."""
    path = steps.release_path(cfg.cluster.state_dir, str(job_id))
    if path is None or not state.write_json(path, {"rc": int(rc)}, 0o600):
        backends.get(cfg).cancel([str(job_id)])


def watch(o, cfg, job_id: int, child, kill_sig: int | None, stop: threading.Event) -> None:
    """The allocation ending under the command (scancel, time limit): Slurm's notice, and the
    --kill-command signal for the command."""
    path = steps.alloc_path(cfg.cluster.state_dir, str(job_id))
    while not stop.wait(1.0):
        if path is None or not os.path.lexists(path):
            if stop.is_set():
                return
            info(o, f"Job allocation {job_id} has been revoked.")
            if kill_sig and child.poll() is None:
                steps.signal_tree(child.pid, kill_sig)  # the command and what it started
            return


def main(argv: list[str]) -> int:
    environ = dict(os.environ)
    t = table()
    first, o, positional = submit.command_options(t, argv, environ)
    if first is not None:
        return common.usage(first, PROG)
    from ..translate import qsub  # (the allocation's translation imports it anyway)

    for w in qsub.bound_warnings(common.fates(o, t, PROG, ("cli",)), o, PROG, submit.capabilities()):
        if not o.quiet:
            print(w, file=sys.stderr)
    cfg = siteconf.get()
    submit.check_cluster(PROG, o.clusters, cfg)
    if o.verbose:
        common.print_defined_options(o, t, PROG, ("cli",))
    command = positional or [environ.get("SHELL") or pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"]
    submitted = time.time()
    job_id, rec = submit.allocate(o, environ, cfg, holder_script(cfg.cluster.state_dir, not o.no_shell), PROG)
    try:
        alloc = wait_granted(o, job_id, cfg, o.immediate, submitted)
    finally:
        if rec.get("env_file"):  # the holder's wrapper has read it (or the job is gone)
            try:
                os.unlink(rec.env_file)
            except OSError:
                pass
    info(o, f"Granted job allocation {job_id}")
    if o.bell:
        sys.stderr.write("\a")
    if o.no_shell:
        return 0
    env = command_env(environ, alloc, o)
    try:
        child = proc.popen(command, env=env)
    except (proc.SpawnError, OSError) as e:
        print(f"{PROG}: error: {command[0]}: {getattr(e, 'strerror', None) or e}", file=sys.stderr)
        release(cfg, job_id, 1)
        info(o, f"Relinquishing job allocation {job_id}")
        return 1
    stop = threading.Event()
    threading.Thread(target=watch, args=(o, cfg, job_id, child, o.kill_command, stop), daemon=True).start()

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
    release(cfg, job_id, rc)
    info(o, f"Relinquishing job allocation {job_id}")
    return rc


