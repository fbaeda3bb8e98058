"""``slurm-shim cluster up|down|status`` and ``slurm-shim doctor``: the words cli/admin.py hands
on, parsed (argparse) and run on Debian's cell (cluster.py) or an Open Cluster Scheduler cell
(cluster_ocs.py); and Debian's ``up``, whose last steps are install.py's (``install.ensure_site``).
It sits above the three, so none of them imports another's caller."""

from __future__ import annotations

import argparse
import os
import sys
import time

from .. import config, proc
from ..errors import ShimError
from . import cluster, install


def up() -> int:
    cluster.require_root("cluster up", "it installs packages and starts daemons")
    cluster.require_debian()
    from .cluster_ocs import SITE_CONFIG as OCS_CONFIG

    if os.path.abspath(config.config_path()) == OCS_CONFIG:  # it would write Debian's cell over it
        raise cluster.ClusterError(f"SLURM_SHIM_CONFIG is {OCS_CONFIG}, the Open Cluster Scheduler cell's: "
                                   "use cluster up --flavour ocs, or unset SLURM_SHIM_CONFIG for Debian's cell")
    started = time.monotonic()
    host = cluster.this_host()
    with cluster.phase("packages") as p:
        p.note = cluster.ensure_packages(host)
    with cluster.phase("host names") as p:
        p.note = cluster.ensure_host_names(host)
    with cluster.phase("init scripts") as p:
        p.note = cluster.ensure_init_scripts()
    with cluster.phase("qmaster") as p:
        p.note = cluster.ensure_qmaster()
    with cluster.phase("configure") as p:
        changed = cluster.configure(host)
        p.note = "changed: " + ", ".join(changed) if changed else "unchanged"
    with cluster.phase("execd") as p:
        p.note = cluster.ensure_execd(host, "global config" in changed)
    with cluster.phase("queues") as p:
        p.note = cluster.wait_queues_ready(host)
    with cluster.phase("site") as p:
        p.note = install.ensure_site(config.config_path())
    with cluster.phase("test jobs") as p:
        p.note = cluster.run_test_jobs()
    print(f"cluster: up in {time.monotonic() - started:.1f} s")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="slurm-shim", description="Administer the shim's Grid Engine cluster.")
    commands = parser.add_subparsers(dest="command", required=True)
    cluster = commands.add_parser("cluster", help="install, start, stop or inspect the single-host cluster")
    actions = cluster.add_subparsers(dest="action", required=True)
    up_ = actions.add_parser("up", help="install, configure and start Grid Engine, then run test jobs (root)")
    down_ = actions.add_parser("down", help="stop the Grid Engine daemons (root)")
    status_ = actions.add_parser("status", help="show whether the daemons run and the queues' states")
    for p in (up_, down_, status_):
        p.add_argument("--flavour", choices=("debian", "ocs"), default="debian",
                       help="debian: Debian's SGE 8.1.9 packages; ocs: Open Cluster Scheduler built from source "
                       "in /opt/ocs, a second cell beside Debian's (see cluster_ocs.py)")
    up_.add_argument("--source", metavar="TARBALL",
                     help="the Open Cluster Scheduler source tarball (--flavour ocs; default $SLURM_SHIM_OCS_TARBALL)")
    doctor_ = commands.add_parser("doctor", help="check the site config against the live Grid Engine, and the "
                                  "shim on every execution host (a tiny job each)")
    doctor_.add_argument("--no-hosts", action="store_true", help="skip the jobs on the execution hosts")
    return parser


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    run = {"up": up, "down": cluster.down, "status": cluster.status}.get(
        getattr(args, "action", None), lambda: cluster.doctor(hosts=not getattr(args, "no_hosts", False)))
    if getattr(args, "flavour", "debian") == "ocs":
        from . import cluster_ocs

        run = {"up": lambda: cluster_ocs.up(args.source), "down": cluster_ocs.down,
               "status": cluster_ocs.status}[args.action]
    elif getattr(args, "source", None):
        print("slurm-shim: error: --source is for --flavour ocs (Debian's cell comes from apt)", file=sys.stderr)
        return 2
    try:
        return run()
    except ShimError as e:
        print(*e.lines, sep="\n", file=sys.stderr)
        return e.code
    except proc.SpawnError as e:
        print(f"slurm-shim: error: {e}", file=sys.stderr)
        return 1
