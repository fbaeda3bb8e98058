"""``slurm-shim explain [sbatch options] script``: what sbatch would do, without submitting.

Prints the exact Grid Engine command, a table of each Slurm option and the Grid Engine flags it
became, and the SLURM_* environment the job will see (as far as it is known before the job runs)."""

from __future__ import annotations

import os
import sys

from tabulate import tabulate

from ..operations import submit
from ..slurm.hostlist import this_host
from ..runtime import jobenv
from . import common


def main(argv: list[str]) -> int:
    o, sub, cfg = submit.batch(argv, dict(os.environ))
    if sub is None:
        return common.usage(o, "sbatch")
    line = submit.shell_words(sub.argv)
    print(f"{line.split()[0]} command (the job wrapper script goes on stdin):")
    print("  " + line)
    print()
    print(tabulate(sub.notes, headers=["Slurm", "Grid Engine", "note"], tablefmt="simple"))
    for w in sub.warnings:
        print(w)
    if o.get("nice") is not None or o.get("priority") is not None:
        print(nice_note(cfg))
    print()
    host = this_host()
    rec = sub.record
    slots = rec.ntasks * rec.cpus_per_task
    env = jobenv.batch_env(rec.to_dict(), job_id=0, task=(rec.array or [None])[0], hosts=[(host, slots)],
                           this_host=host, user=rec.user, uid=rec.uid, gid=os.getgid())
    if rec.array:
        print("environment of the job's first task (job id 0 stands for the id Grid Engine assigns; "
              "a task's own SLURM_JOB_ID is its index * 10^10 + that id):")
    else:
        print("environment of the job (job id 0 stands for the id Grid Engine assigns):")
    for k in sorted(env):
        print(f"  {k}={env[k]}")
    sys.stdout.flush()
    return 0


def nice_note(cfg) -> str:
    """Whether the ``-p`` that --nice/--priority became can order anything here: Grid Engine adds
    ``weight_priority`` times the job's POSIX priority to its rank (cluster.nice_finding, which
    doctor reports). One ``qconf -ssconf``."""
    from ..gridengine import backends
    from ..admin.cluster import nice_weight

    try:
        sconf = backends.get(cfg).scheduler_config()
    except Exception:  # noqa: BLE001  (explain still explains without the scheduler's answer)
        sconf = None
    if sconf is None:
        return "note: the scheduler's weight_priority could not be read (qconf -ssconf): -p orders pending jobs only when it is above 0"
    w = nice_weight(sconf)
    if w <= 0:
        return ("note: --nice/--priority have no effect here: the scheduler's weight_priority is 0, so Grid Engine "
                "does not rank pending jobs by -p (slurm-shim doctor; qconf -msconf to change it)")
    return f"note: -p ranks pending jobs here (the scheduler's weight_priority is {w:g})"
