"""``slurm-shim explain [sbatch options] script``: what sbatch would do, without submitting.

Prints the exact qsub argv, a table of each Slurm option and the Grid Engine flags it became, and
the SLURM_* environment the job will see (as far as it is known before the job runs)."""

from __future__ import annotations

import os
import shlex
import socket
import sys

from tabulate import tabulate

from .. import jobenv
from . import common, sbatch


def main(argv: list[str]) -> int:
    o, sub, cfg = sbatch.prepare(argv, dict(os.environ))
    if sub is None:
        return common.usage(o, "sbatch")
    print("qsub command (the job wrapper script goes on stdin):")
    print("  " + shlex.join(["qsub", *sub.argv]))
    print()
    print(tabulate(sub.notes, headers=["Slurm", "Grid Engine", "note"], tablefmt="simple"))
    for w in sub.warnings:
        print(w)
    print()
    host = socket.gethostname().split(".")[0]
    p = sub.payload
    slots = p["ntasks"] * p["cpus_per_task"]
    env = jobenv.batch_env(p, job_id=0, task=(p["array"] or [None])[0], hosts=[(host, slots)], this_host=host,
                           user=p["user"], uid=p["uid"], gid=os.getgid())
    print("environment of the job (job id 0 stands for the id Grid Engine assigns):")
    for k in sorted(env):
        print(f"  {k}={env[k]}")
    sys.stdout.flush()
    return 0
