"""sbatch: submit a batch script to Grid Engine as Slurm would.

Pipeline (shim.operations.submit): argv -> script -> #SBATCH directives -> input variables -> options (one
table) -> fates (refuse/warn) -> translate.qsub -> the backend (the daemon's DRMAA session or qsub) -> the
submit record -> Slurm's output.
"""

from __future__ import annotations

import os
import sys

from ..store import state
from ..operations import submit
from ..slurm.options.getopt import Table
from ..slurm.options.table import command_table
from . import common

PROG = "sbatch"
prepare = submit.batch  # (options, submission, site config): slurm-shim explain's view too
wrapper_script = submit.job_script


def table() -> Table:
    return command_table(PROG)


def main(argv: list[str]) -> int:
    environ = dict(os.environ)
    o, sub, cfg = submit.batch(argv, environ)
    if sub is None:
        return common.usage(o, PROG)
    for w in sub.warnings:
        print(w, file=sys.stderr)
    cluster = o.clusters or o.cluster
    submit.check_cluster(PROG, cluster, cfg)
    if o.verbose:
        common.print_defined_options(o, table(), PROG)
    if o.test_only:
        return submit.test_only(sub, cfg, PROG)
    job_id, rec, after = submit.submit_batch(sub, cfg, PROG)
    if (o.verbose or 0) > 1:  # (the shim's own line, from -vv: -v prints the release's bytes alone)
        print(submit.command_line(PROG, sub.argv), file=sys.stderr)
    if o.parsable:
        print(f"{job_id};{cluster}" if cluster else str(job_id))
    elif not o.quiet:
        suffix = f" on cluster {cluster}" if cluster else ""
        print(f"Submitted batch job {job_id}{suffix}")
    sys.stdout.flush()
    for w in after:
        print(w, file=sys.stderr)
    # at most once an hour (state keeps the time); private files of jobs Grid Engine no longer has
    state.prune(cfg, submit.RECORD_MAX_AGE, alive=submit.alive_jobs(cfg))
    if o.wait:
        return submit.wait_for(job_id, rec, cfg)
    return 0
