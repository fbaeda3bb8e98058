"""Runs after the other unit tests (pytest runs a directory's files by name): they leave the
process as they found it. CI's second pass runs the live tests in the same process after them and
hands os.environ to the real commands: a leaked SLURM_SHIM_CONFIG (test_qstat's once) pointed
every command at the unit-test site config, and a hundred live tests failed."""

import os

START = dict(os.environ)  # at collection, before any test ran


def test_the_environment_is_as_the_run_found_it():
    now = dict(os.environ)
    changed = {k: (START.get(k), now.get(k)) for k in set(START) | set(now)
               if START.get(k) != now.get(k) and (k.startswith(("SLURM", "SGE_", "SQUEUE", "SBATCH", "SACCT",
                                                                "SALLOC", "SRUN", "XDG_")))}
    assert changed == {}
