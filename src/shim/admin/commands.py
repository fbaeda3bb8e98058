"""``slurm-shim cluster up|down|status`` and ``slurm-shim doctor``: the work behind the words
cli/admin.py reads, on Debian's cell (cluster.py) or an Open Cluster Scheduler cell
(cluster_ocs.py); and Debian's ``up``, whose last steps are install.py's (``install.ensure_site``).
It sits above the three, so none of them imports another's caller."""

from __future__ import annotations

import os
import sys
import time
from typing import Callable

from .. import config, proc
from ..errors import ShimError
from . import cluster, install


def up(release: str | None = None) -> int:
    """Debian's cell; ``release``: the site config's ``[slurm] release`` (None: the one the site
    config up wrote before names, else the newest)."""
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
        path = config.config_path()
        p.note = install.ensure_site(path, cluster.site_config_text(release=release or cluster.kept_release(path)))
    with cluster.phase("test jobs") as p:
        p.note = cluster.run_test_jobs()
    print(f"cluster: up in {time.monotonic() - started:.1f} s")
    return 0


def run_cluster(action: str, flavour: str = "debian", source: str | None = None, release: str | None = None) -> int:
    """``cluster up|down|status`` on Debian's cell or (flavour "ocs") the Open Cluster Scheduler one:
    ``source`` is the OCS source tarball, ``release`` the Slurm release up writes into the site config."""
    if flavour == "ocs":
        from . import cluster_ocs

        work = {"up": lambda: cluster_ocs.up(source, release=release), "down": cluster_ocs.down,
                "status": cluster_ocs.status}[action]
    else:
        work = {"up": lambda: up(release), "down": cluster.down, "status": cluster.status}[action]
    return guarded(work)


def run_doctor(hosts: bool = True) -> int:
    """``doctor``: the site config against the live Grid Engine (``hosts``: a check job on each exec host)."""
    return guarded(lambda: cluster.doctor(hosts=hosts))


def guarded(work: Callable[[], int]) -> int:
    """The exit code of ``work``; its errors as the shim's lines on stderr and their code."""
    try:
        return work()
    except ShimError as e:
        print(*e.lines, sep="\n", file=sys.stderr)
        return e.code
    except proc.SpawnError as e:
        print(f"slurm-shim: error: {e}", file=sys.stderr)
        return 1
