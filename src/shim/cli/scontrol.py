"""``scontrol``: show jobs, partitions, nodes, configuration and host lists; hold, release,
suspend, resume, requeue and update jobs -- through the Grid Engine backend.

The command reads its words and prints: what a ``show`` view needs is gathered by shim/show.py and
formatted by render/scontrol.py; the job-control verbs are shim/control.py's, whose notes (Slurm's
lines) are printed here.
"""

from __future__ import annotations

import shlex
import sys
import time
from datetime import datetime

from ..operations import jobs
from ..slurm import releases
from ..operations import show as gather  # (show: the command below)
from ..errors import ShimError
from ..slurm.hostlist import this_host
from . import common
from ..slurm.options.getopt import Table
from ..slurm.options.sources import Options, apply
from ..slurm.options.spec import Arity, Fate

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Iterable

PROG = "scontrol"
N, R = Arity.NONE, Arity.REQUIRED


_o = common.own_options(PROG, N, Fate.LOCAL)


OPTIONS = (
    _o("all", "a", help='Equivalent to "all" command'),
    _o("cluster", "M", R, dest="clusters", help='Equivalent to "cluster" command'),
    _o("clusters", None, R, dest="clusters"),
    _o("details", "d", count=True, help='Equivalent to "details" command'),
    _o("federation", None, help="Report federated job information (accepted)"),
    _o("future", "F", help='Report information about nodes in "FUTURE" state'),
    _o("help", "h", help='Equivalent to "help" command'),
    _o("hide", None, help='Equivalent to "hide" command'),
    _o("json", None, help="Produce JSON output (24.11, 26.05: show job)"),
    _o("local", None, help="Report information only about jobs on the local cluster"),
    _o("oneliner", "o", help='Equivalent to "oneliner" command'),
    _o("quiet", "Q", help='Equivalent to "quiet" command'),
    _o("sibling", None, help="Report information about all sibling jobs (accepted)"),
    _o("uid", "u", R, help='Update job as user "uid" instead of the invoking user'),
    _o("usage", None, help="display a brief usage message"),
    _o("verbose", "v", count=True, help='Equivalent to "verbose" command'),
    _o("version", "V", help='Equivalent to "version" command'),
    _o("yaml", None, help="Produce YAML output (24.11, 26.05: show job)"),
)
TABLE = Table(PROG, OPTIONS, error_code=1)


def release_table() -> Table:
    """The options of the site's release (--json and --yaml from 24.11 on: releases.py)."""
    return Table(PROG, [o for o in OPTIONS if releases.current().knows(PROG, o.long)], error_code=1)


def help_text() -> str:
    return """\
scontrol [<OPTION>] [<COMMAND>]
    Valid <OPTION> values are:
     -a, --all      Equivalent to "all" command
     -d, --details  Equivalent to "details" command
     -h, --help     Equivalent to "help" command
     -o, --oneliner Equivalent to "oneliner" command
     -Q, --quiet    Equivalent to "quiet" command
     -v, --verbose  Equivalent to "verbose" command
     -V, --version  Equivalent to "version" command

    Valid <COMMAND> values (on Grid Engine, through slurm-shim) are:
     hold <job_list>          prevent specified job from starting (qhold)
     uhold <job_list>         place user hold on specified job (qhold)
     release <job_list>       permit specified job to start (qrls)
     requeue <job_id>         re-queue a running batch job (qmod -rj)
     requeuehold <job_id>     re-queue and hold a batch job
     resume <job_list>        resume previously suspended job (qmod -usj)
     suspend <job_list>       suspend specified job (qmod -sj)
     show <ENTITY> [<ID>]     display state of identified entity, default is all records
     update <SPECIFICATIONS>  update job: TimeLimit, Partition, JobName, Comment, Nice,
                              Account, QOS, StartTime (what qalter can change)
     ping                     print status of the controller (the Grid Engine qmaster)
     version                  display tool version number
     oneliner, details, quiet, verbose, exit, quit

  <ENTITY> may be "config", "hostlist", "hostlistsorted", "hostnames", "job",
       "licenses", "node", "partition" or "step"
"""



class Session:
    """Settings that scontrol's interactive commands (oneliner, details, quiet) can change, and what
    its commands share: the site config, the backend, the job list (kept between commands)."""

    def __init__(self, opts: Options):
        self.oneliner = bool(opts.oneliner)
        self.details = int(opts.details or 0)
        self.quiet = bool(opts.quiet)
        self.all = bool(opts.all)
        self.mime = "json" if opts.get("json") else "yaml" if opts.get("yaml") else None
        self.client = None  # who asks, for --json's meta block (main)
        self._cfg = None
        self._jobs: jobs.JobList | None = None

    @property
    def cfg(self):
        if self._cfg is None:
            from ..siteconf import get

            self._cfg = get()
        return self._cfg

    def job_list(self, refresh: bool = False, only: set[int] | None = None, reasons: bool = True) -> jobs.JobList:
        """The listing (kept for the session); ``only``: a listing of these jobs (jobs.list_jobs:
        Grid Engine is asked about them and their owners' jobs, not the whole queue; ``show job
        N`` reads no other job's records), not kept. ``reasons``: the pending reasons are shown
        (show job), else they need not be exact (the job-control verbs, which print no priority
        either: their records come from ``qstat -j <ids> -xml`` where it determines them,
        jobs.list_jobs' ``direct``)."""
        if only is not None and (self._jobs is None or refresh):
            return jobs.list_jobs(self.cfg, ended=True, only=only, reasons=reasons, quotas=None if reasons else False,
                                  direct=not reasons)  # (the job-control verbs: from qstat -j N alone)
        if self._jobs is None or refresh:
            self._jobs = jobs.list_jobs(self.cfg, ended=True)
        return self._jobs

    def backend(self):
        from ..gridengine import backends

        return backends.get(self.cfg)


# ---------------------------------------------------------------------------------------------
# show: the words read, what a view needs gathered (shim/show.py), formatted (render/scontrol.py)


def show(s: Session, args: list[str]) -> str:
    if not args:
        raise ShimError(f"{PROG}: error: too few arguments for keyword:show")
    entity = args[0].lower()
    rest = args[1:]
    if "=" in entity:  # show job=12
        entity, _, v = entity.partition("=")
        rest = [v] + rest
    if entity in ("job", "jobs", "jobid"):
        return show_job(s, rest)
    if entity in ("hostnames", "hostname"):
        return "".join(h + "\n" for h in gather.host_names(rest))
    if entity in ("hostlist",):
        return gather.host_list(rest, sort=False) + "\n"
    if entity in ("hostlistsorted",):
        return gather.host_list(rest, sort=True) + "\n"
    if entity in ("config", "conf", "configuration"):
        return show_config(s, rest)
    if entity in ("partition", "partitions", "part"):
        return show_partition(s, rest)
    if entity in ("node", "nodes"):
        return show_node(s, rest)
    if entity in ("license", "licenses", "lic"):
        return show_licenses(s, rest)
    if entity in ("step", "steps"):
        return show_steps(s, rest)
    if entity in ("daemons",):
        return "slurmctld slurmd\n"
    raise ShimError(f"{PROG}: error: invalid entity:{args[0]} for keyword:show")


def show_job(s: Session, ids: list[str]) -> str:
    """``show job [ID]`` (show.jobs_shown): a task or hetjob component the job has not is
    scontrol_print_job's "Job X not found" (stdout unless quiet, exit 1)."""
    from ..slurm.render.scontrol import job_text

    recs, now, missing = gather.jobs_shown(s, ids)
    if missing is not None:
        if not s.quiet:
            sys.stdout.write(f"Job {missing} not found\n")
        raise ShimError()
    if s.mime:  # --json, --yaml (24.11, 26.05): the jobs in the release's layout
        from ..slurm.render.squeue import Ctx
        from ..slurm.render.openapi import job_document

        facts = [gather.job_facts(r, s.cfg, now) for r in recs]
        ctx = facts[0].ctx if facts else Ctx(s.cfg, now=now)
        return job_document(recs, [f.alloc_host for f in facts], ctx, s.client, yaml=s.mime == "yaml") + "\n"
    if not ids and not recs:
        return "No jobs in the system\n"
    return "".join(job_text(r, gather.job_facts(r, s.cfg, now), bool(s.details), s.oneliner, now) for r in recs)


def show_steps(s: Session, ids: list[str]) -> str:
    from ..slurm.render.scontrol import steps_text

    return steps_text(gather.steps_shown(s, ids), s.oneliner)


def show_config(s: Session, keys: list[str]) -> str:
    from ..slurm.render.scontrol import config_text

    items, host = gather.config_items(s.cfg, releases.current().version)
    return config_text(items, keys, host, datetime.now())


def show_partition(s: Session, names: list[str]) -> str:
    from ..slurm.render.scontrol import partition_text, partitions_text

    release = releases.current()
    out = [partition_text(*p, release=release) for p in gather.partitions(s, names)]
    if names and not out:
        raise ShimError(f"Partition {names[0]} not found")
    return partitions_text(out, s.oneliner)


def show_node(s: Session, names: list[str]) -> str:
    from ..slurm.render.scontrol import node_text

    found = gather.nodes_shown(s, names)
    boot = gather.boot_time()
    system = gather.os_name()
    now = datetime.fromtimestamp(time.time())
    out = [node_text(h, st, cpus, used, parts, boot, system, releases.current().version, now,
                     s.oneliner)
           for h, st, cpus, used, parts in found]
    if names and not out:
        raise ShimError(f"Node {names[0]} not found")
    return "".join(out)


def show_licenses(s: Session, names: list[str]) -> str:
    from ..slurm.render.scontrol import license_text

    return "".join(license_text(name, total, used, s.oneliner) for name, total, used in gather.licenses(s, names))


# ---------------------------------------------------------------------------------------------
# job control: hold, release, suspend, resume, requeue, update (shim/control.py), its notes printed


def _say(notes: Iterable) -> int:
    """Print control's notes on stderr as they come; 1 when one of them fails the command."""
    rc = 0
    for n in notes:
        if n.text:
            print(n.text, file=sys.stderr)
        if n.fails:
            rc = 1
    return rc


def control_verb(s: Session, cmd: str, words: list[str], user: bool = False) -> int:
    from ..operations import control

    if not words:
        raise ShimError(f"{PROG}: error: too few arguments for keyword:{cmd}")
    if cmd in ("hold", "release"):  # (``user``: uhold/holdu, a user hold even when root asks)
        return _say(control.hold(s, words, release=cmd == "release", user=user))
    if cmd in ("suspend", "resume"):
        return _say(control.suspend(s, words, resume=cmd == "resume"))
    return _say(control.requeue(s, words, hold=cmd == "requeuehold"))


def update(s: Session, words: list[str]) -> int:
    """update KEY=VALUE...: the words read (each a KEY=VALUE, a JobId= among them); the rest is
    control.update's."""
    from ..operations import control

    pairs: list[tuple[str, str]] = []
    for w in words:
        k, eq, v = w.partition("=")
        if not eq:
            raise ShimError(f"{PROG}: error: Invalid input: {w}", "Request aborted")
        pairs.append((k.lower(), v))
    ids = [v for k, v in pairs if k in ("jobid", "job")]
    if not ids:
        raise ShimError(f"{PROG}: error: No valid entity in update command",
                   "Input line must include \"NodeName\", \"PartitionName\", \"Reservation\", \"JobId\", "
                   "\"StepId\", \"FrontendName\" or \"SwitchName\"")
    return _say(control.update(s, ids, [(k, v) for k, v in pairs if k not in ("jobid", "job")]))


# ---------------------------------------------------------------------------------------------
# dispatch


def run_command(s: Session, words: list[str]) -> int:
    if not words:
        return 0
    cmd = words[0].lower()
    args = words[1:]
    if cmd == "show":
        sys.stdout.write(show(s, args))
        return 0
    if cmd in ("hold", "holdu", "uhold", "release"):
        return control_verb(s, "release" if cmd == "release" else "hold", args, user=cmd in ("holdu", "uhold"))
    if cmd in ("suspend", "resume", "requeue", "requeuehold"):
        return control_verb(s, cmd, args)
    if cmd == "update":
        return update(s, args)
    if cmd == "version":
        sys.stdout.write(releases.version_line())
        return 0
    if cmd == "ping":
        host = this_host()
        res = s.backend().ping()
        up = "UP" if res.returncode == 0 else "DOWN"
        sys.stdout.write(f"Slurmctld(primary) at {host} is {up}\n")
        return 0 if up == "UP" else 1
    if cmd in ("oneliner",):
        s.oneliner = True
        return 0
    if cmd in ("details",):
        s.details = 1
        return 0
    if cmd in ("quiet",):
        s.quiet = True
        return 0
    if cmd in ("verbose", "all", "hide", "local", "federation", "sibling"):
        return 0
    if cmd == "help":
        sys.stdout.write(help_text())
        return 0
    if cmd in ("wait_job",):
        return 0
    if cmd in ("exit", "quit"):
        raise SystemExit(0)
    print(f"invalid keyword: {words[0]}", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    table = release_table()
    parsed, positional = common.getopt_answering(table, argv)
    opts = Options()
    apply(opts, table, parsed, "cli")
    if common.answered(opts, help_text, "Usage: scontrol [-M cluster] [-a|-d|-o|-Q|-v|-V] [<COMMAND>]\n"):
        return 0
    s = Session(opts)
    if s.mime:
        s.client = common.json_client(PROG, argv, words=positional)
    if positional:
        return run_command(s, positional)
    rc = 0
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            sys.stdout.write("scontrol: ")
            sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            break
        try:
            rc = run_command(s, shlex.split(line))
        except SystemExit:
            break
        except ShimError as e:
            for ln in e.lines:
                print(ln, file=sys.stderr)
            rc = e.code
    return rc
