"""``slurm-shim``: the shim's own admin command (cluster up/down/status, doctor, explain)."""

from __future__ import annotations

import sys

USAGE = """usage: slurm-shim <command> [args]

commands:
  cluster up|down|status   install, configure and start a local single-host Grid Engine
  doctor                   check the site config against the live Grid Engine
  explain [sbatch options] script
                           show the qsub command, option by option, and the job's SLURM_* environment
"""


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0 if argv else 1
    cmd = argv[0]
    if cmd in ("cluster", "doctor"):
        from .. import cluster

        return cluster.main(argv)
    if cmd == "explain":
        from . import explain

        return explain.main(argv[1:])
    print(f"slurm-shim: error: unknown command '{cmd}'", file=sys.stderr)
    sys.stderr.write(USAGE)
    return 1
