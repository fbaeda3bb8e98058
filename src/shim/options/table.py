"""THE option table: every Slurm option sbatch, srun and salloc know, one row each, alphabetical.

Rows are data; value grammars live in values.py; what each option becomes on Grid Engine lives in
translate/. A test checks this table against the full Slurm option surface.
"""

from __future__ import annotations

from functools import partial

from . import values as v
from .spec import Arity, Fate, OptionSpec

SB, SR, SA = "sbatch", "srun", "salloc"
ALL = frozenset({SB, SR, SA})
N, R, O = Arity.NONE, Arity.REQUIRED, Arity.OPTIONAL


def env(sbatch: str | None = None, srun: str | None = None, salloc: str | None = None) -> dict:
    out = {}
    for cmd, names in ((SB, sbatch), (SR, srun), (SA, salloc)):
        if names:
            out[cmd] = tuple(names.split())
    return out


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("chdir", "D", R, env=env(srun="SLURM_WORKING_DIR"), help="working directory of the job"),
    OptionSpec("cpus-per-task", "c", R, parse=partial(v.positive_int, opt="--cpus-per-task"),
               env=env(sbatch="SBATCH_CPUS_PER_TASK", srun="SLURM_CPUS_PER_TASK"), help="CPUs per task"),
    OptionSpec("error", "e", R, commands=frozenset({SB, SR}), env=env(sbatch="SBATCH_ERROR", srun="SLURM_STDERRMODE"),
               help="stderr file name pattern"),
    OptionSpec("help", "h", N, fate=Fate.LOCAL, help="print help"),
    OptionSpec("job-name", "J", R, env=env(sbatch="SBATCH_JOB_NAME", srun="SLURM_JOB_NAME", salloc="SALLOC_JOB_NAME"),
               help="job name"),
    OptionSpec("mem", None, R, parse=v.mem_mb,
               env=env(sbatch="SBATCH_MEM_PER_NODE", srun="SLURM_MEM_PER_NODE", salloc="SALLOC_MEM_PER_NODE"),
               help="memory per node"),
    OptionSpec("nodes", "N", R, env=env(srun="SLURM_NNODES"), help="number of nodes (min[-max])"),
    OptionSpec("ntasks", "n", R, parse=partial(v.positive_int, opt="--ntasks"), env=env(srun="SLURM_NTASKS"),
               help="number of tasks"),
    OptionSpec("output", "o", R, commands=frozenset({SB, SR}), env=env(sbatch="SBATCH_OUTPUT", srun="SLURM_STDOUTMODE"),
               help="stdout file name pattern"),
    OptionSpec("parsable", None, N, commands=frozenset({SB}), fate=Fate.LOCAL, help="print only the job id"),
    OptionSpec("partition", "p", R,
               env=env(sbatch="SBATCH_PARTITION", srun="SLURM_PARTITION", salloc="SALLOC_PARTITION"),
               help="partition"),
    OptionSpec("time", "t", R, parse=v.time_limit,
               env=env(sbatch="SBATCH_TIMELIMIT", srun="SLURM_TIMELIMIT", salloc="SALLOC_TIMELIMIT"),
               help="time limit"),
    OptionSpec("wrap", None, R, commands=frozenset({SB}), fate=Fate.LOCAL, help="wrap a command in a sh script"),
)
