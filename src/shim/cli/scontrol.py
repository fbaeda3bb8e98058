"""``scontrol``: show jobs, partitions, nodes, configuration and host lists; hold, release,
suspend, resume, requeue and update jobs -- through qstat, qhold/qrls, qmod and qalter.

What Grid Engine cannot do is said, not faked: ``update`` changes only what ``qalter`` can (and
the shim's own record for Comment/JobName/TimeLimit/Partition), anything else is refused.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from datetime import datetime

from .. import SLURM_VERSION, jobs, state
from ..records import NO_RECORD, Reader
from ..errors import ShimError
from ..model import JobRecord
from . import common
from ..options.getopt import Table, getopt
from ..options.sources import Options, apply
from ..options.spec import Arity, Fate

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (backends/__init__.py)
if TYPE_CHECKING:
    from typing import Iterable

PROG = "scontrol"
VERSION = SLURM_VERSION  # the one Slurm release the commands follow
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
    _o("local", None, help="Report information only about jobs on the local cluster"),
    _o("oneliner", "o", help='Equivalent to "oneliner" command'),
    _o("quiet", "Q", help='Equivalent to "quiet" command'),
    _o("sibling", None, help="Report information about all sibling jobs (accepted)"),
    _o("uid", "u", R, help='Update job as user "uid" instead of the invoking user'),
    _o("usage", None, help="display a brief usage message"),
    _o("verbose", "v", count=True, help='Equivalent to "verbose" command'),
    _o("version", "V", help='Equivalent to "version" command'),
)
TABLE = Table(PROG, OPTIONS, error_code=1)


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


def fail(*lines: str, code: int = 1) -> ShimError:
    return ShimError(*lines, code=code)


class Session:
    """Settings that scontrol's interactive commands (oneliner, details, quiet) can change."""

    def __init__(self, opts: Options):
        self.oneliner = bool(opts.oneliner)
        self.details = int(opts.details or 0)
        self.quiet = bool(opts.quiet)
        self.all = bool(opts.all)
        self._cfg = None
        self._jobs: jobs.JobList | None = None
        self.targets_list: jobs.JobList | None = None  # the listing the last job-control verb read

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
        (show job), else they need not be exact (the job-control verbs)."""
        if only is not None and (self._jobs is None or refresh):
            return jobs.list_jobs(self.cfg, ended=True, only=only, reasons=reasons, quotas=None if reasons else False)
        if self._jobs is None or refresh:
            self._jobs = jobs.list_jobs(self.cfg, ended=True)
        return self._jobs

    def backend(self):
        from .. import backends

        return backends.get(self.cfg)


# ---------------------------------------------------------------------------------------------
# show job


def job_facts(rec: JobRecord, s: Session, now: float):
    """Read what a job's view needs (its submit record's detail, group, submitting host, when it
    was suspended) for render.scontrol.job_lines, which reads nothing."""
    from ..render.scontrol import JobFacts
    from ..render.squeue import Ctx

    cfg = s.cfg
    jobs.detail(rec, cfg)
    sub = rec.extra.get("submit") or NO_RECORD
    suspended_at = None
    if rec.state == "SUSPENDED":
        reader = rec.extra.get("submit_records") or Reader(cfg, 1)
        ev = reader.events(rec.job_id, rec.uid if rec.uid is not None else rec.user,
                           rec.extra.get("submit_ts")).get((rec.array_task, "suspend"))
        suspended_at = ev.get("t") if ev else None
    alloc = sub.submit_host or os.uname().nodename.split(".")[0]
    return JobFacts(jobs.group_name(rec.gid), alloc, suspended_at, Ctx(cfg, now=now))


def render_job(rec: JobRecord, s: Session, now: float) -> str:
    from ..render.scontrol import job_text

    return job_text(rec, job_facts(rec, s, now), bool(s.details), s.oneliner, now)


def show_job(s: Session, ids: list[str]) -> str:
    """``show job [ID]``: the id read as scontrol_print_job reads it (jobids.scontrol_job): a
    character other than digits, ``_`` and ``+`` is its error; a job the controller does not know
    is slurm_load_jobs' error; a task or hetjob component it has not is "Job N_k not found"
    (stdout, exit 1). A task named by its own job id (``t*10^10+G``, docs/array-ids.md) that the
    array has not is, as in Slurm, a job id the controller does not know. Grid Engine has no
    hetjobs: every ``N+h`` is not found."""
    from ..jobids import JobIdError, scontrol_job

    only = None
    if ids:  # the listing comes first, as before (a silent qmaster wins over a bad id); its ended
        try:  # jobs are the one asked for
            only = {scontrol_job(ids[0]).job}
        except JobIdError:
            pass
    pre = jobs.start_details(s.cfg, only, s.backend()) if only else None  # (runs beside the listing)
    resv = s.backend().reservation_names()  # qrstat, for the Reservation= line (beside the listing too)
    try:
        return _show_job(s, ids, only, pre, resv)
    finally:
        resv.close()
        if pre is not None:
            pre.close()


def _show_job(s: Session, ids: list[str], only: set[int] | None, pre, resv=None) -> str:
    from ..jobids import JobIdError, scontrol_job

    jl = s.job_list(only=only)
    now = jl.now
    recs = jl.records
    if ids:
        try:
            spec = scontrol_job(ids[0])
        except JobIdError as e:
            raise fail(*([] if s.quiet else [f"scontrol_print_job error: {e}"])) from None
        job, task = spec.job, spec.task
        if job not in jl.known:
            raise fail("slurm_load_jobs error: Invalid job id specified")
        mine = [r for r in recs if r.job_id == job]
        if spec.het is not None:
            return _not_found(s, f"{job}+{spec.het}")
        if task is not None:
            hit = [r for r in mine if r.array_task == task]
            if not hit:
                for r in mine:
                    if task in r.extra.get("pending_indices", ()):
                        hit = [x for x in jobs.expand_array([r]) if x.array_task == task]
                        break
            if not hit:
                if "_" not in ids[0]:  # the task's own job id (t*10^10+G): in Slurm, a job id the
                    # controller does not know (slurm_load_job fails): slurm_load_jobs' error
                    raise fail(*([] if s.quiet else ["slurm_load_jobs error: Invalid job id specified"]))
                return _not_found(s, f"{job}_{task}")
            mine = hit
        else:
            mine.sort(key=lambda r: (r.array_pending is None, -(r.array_task or 0)))
        recs = mine
    else:
        recs = sorted(recs, key=lambda r: (r.job_id, r.array_pending is None, r.array_task or 0))
        if not recs:
            return "No jobs in the system\n"
    jobs.add_grid_engine_detail(s.cfg, recs, s.backend(), started=pre)
    from .common import fill_reservations

    fill_reservations(recs, s.cfg, s.backend(), resv)  # the optional Reservation= line
    return "".join(render_job(r, s, now) for r in recs)


def _not_found(s: Session, label: str) -> str:
    """scontrol_print_job's "Job X not found": on stdout (unless quiet), exit 1."""
    if not s.quiet:
        sys.stdout.write(f"Job {label} not found\n")
    raise fail(code=1)


# ---------------------------------------------------------------------------------------------
# show config / partition / node / licenses / hostnames


def show_config(s: Session, keys: list[str]) -> str:
    from ..render.scontrol import config_items, config_text

    host = os.uname().nodename.split(".")[0]
    conf = os.environ.get("SLURM_SHIM_CONFIG") or "/etc/slurm-shim/config.toml"
    return config_text(config_items(s.cfg, host, conf, VERSION), keys, host, datetime.now())


def _hosts(s: Session, prefix: str):
    """The hosts and their queue instances: the one query and reader sinfo uses too."""
    from ..backends.gridengine import nodes

    return nodes.hosts(s.backend(), prefix=prefix)


def show_partition(s: Session, names: list[str]) -> str:
    from ..backends.gridengine import nodes
    from ..render.scontrol import partition_text, partitions_text

    cfg = s.cfg
    hosts = _hosts(s, "slurm_load_partitions error")
    out = []
    for name, p in cfg.partitions.items():
        if names and name not in names:
            continue
        on = [h for h in hosts if p.queue in h.queues]
        members = p.nodes or [h.name for h in on]
        cpus = sum(h.queues[p.queue].slots_total for h in on)
        # Slurm's partition stays UP while its nodes drain (as sinfo's AVAIL): DOWN only when every
        # node of it is down (nodes.state, the rule sinfo uses)
        down = bool(on) and all(nodes.state(h, p.queue)[0] == "down" for h in on)
        out.append(partition_text(name, p, name == cfg.default_partition, members, cpus, down))
    if names and not out:
        raise fail(f"Partition {names[0]} not found")
    return partitions_text(out, s.oneliner)


def show_node(s: Session, names: list[str]) -> str:
    from ..backends.gridengine import nodes
    from ..render.scontrol import node_text

    cfg = s.cfg
    hosts = sorted(_hosts(s, "slurm_load_node error"), key=lambda h: h.name)
    boot = _boot_time()
    uname = os.uname()
    now = datetime.fromtimestamp(time.time())
    out = []
    for h in hosts:
        if names and h.name not in names:
            continue
        cpus = nodes.cpus(h)
        used = min(cpus, nodes.used(h))
        parts = [n for n, p in cfg.partitions.items() if p.queue in h.queues]
        out.append(node_text(h, nodes.state(h), cpus, used, parts, boot, f"{uname.sysname} {uname.release}", VERSION,
                             now, s.oneliner))
    if names and not out:
        raise fail(f"Node {names[0]} not found")
    return "".join(out)


def _boot_time() -> str:
    from ..render.scontrol import iso

    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                if line.startswith("btime "):
                    return iso(datetime.fromtimestamp(int(line.split()[1])))
    except OSError:
        pass
    return "None"


def _num(v: str | None) -> int:
    try:
        return int(float(v or 0))
    except ValueError:
        return 0


def show_licenses(s: Session, names: list[str]) -> str:
    from ..render.scontrol import license_text

    cfg = s.cfg
    jl = s.job_list()
    used: dict[str, int] = {}
    for r in jl.records:
        if r.state in ("RUNNING", "SUSPENDED", "COMPLETING") and r.licenses:
            for x in r.licenses.split(","):
                n, _, c = x.partition(":")
                used[n] = used.get(n, 0) + int(c or 1)
    totals = _license_totals(s)
    return "".join(license_text(name, totals.get(cfg.licenses[name].complex, 0), used.get(name, 0), s.oneliner)
                   for name in cfg.licenses if not names or name in names)


def _license_totals(s: Session) -> dict[str, int]:
    """The global host's consumables (``complex_values`` of its configuration): license totals."""
    from ..backends.qhost import parse_complex_values

    res = s.backend().exec_host("global")
    return {k: _num(v) for k, v in parse_complex_values(res.stdout).items()} if res.returncode == 0 else {}


def show_hostnames(args: list[str]) -> str:
    from ..hostlist import expand

    text = ",".join(args) if args else os.environ.get("SLURM_JOB_NODELIST", "")
    if not text:
        raise fail(f"{PROG}: error: No hostlist specified")
    text = _maybe_file(text)
    hosts = expand(" ".join(text.split()))  # one call: one cap on the whole list (F-11)
    return "".join(h + "\n" for h in hosts)


def show_hostlist(args: list[str], sort: bool) -> str:
    from ..hostlist import compress, expand

    text = ",".join(args) if args else os.environ.get("SLURM_JOB_NODELIST", "")
    if not text:
        raise fail(f"{PROG}: error: No hostlist specified")
    text = _maybe_file(text)
    hosts = expand(" ".join(text.replace("\n", ",").split()))  # one cap on the whole list (F-11)
    if sort:
        hosts = sorted(dict.fromkeys(hosts), key=_natural)
    return compress(hosts) + "\n"


def _natural(h: str) -> tuple:
    # a digit run sorts by value without int() (no limit on its length): (length, digits)
    return tuple((len(p.lstrip("0")), p.lstrip("0")) if i % 2 else p
                 for i, p in enumerate(re.split(r"(\d+)", h, flags=re.ASCII)))


def _maybe_file(text: str) -> str:
    if text.startswith("/") and os.path.isfile(text):
        with open(text, encoding="utf-8") as f:
            return ",".join(w for w in re.split(r"[\s,]+", f.read()) if w)
    return text


def show(s: Session, args: list[str]) -> str:
    if not args:
        raise fail(f"{PROG}: error: too few arguments for keyword:show")
    entity = args[0].lower()
    rest = args[1:]
    if "=" in entity:  # show job=12
        entity, _, v = entity.partition("=")
        rest = [v] + rest
    if entity in ("job", "jobs", "jobid"):
        return show_job(s, rest)
    if entity in ("hostnames", "hostname"):
        return show_hostnames(rest)
    if entity in ("hostlist",):
        return show_hostlist(rest, sort=False)
    if entity in ("hostlistsorted",):
        return show_hostlist(rest, sort=True)
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
    raise fail(f"{PROG}: error: invalid entity:{args[0]} for keyword:show")


def show_steps(s: Session, ids: list[str]) -> str:
    """``show step [ID]``: the id read as scontrol_print_step reads it (jobids.scontrol_step): a
    job, or one array task of it (the step number itself is not told apart: Grid Engine's jobs
    have their batch step only here)."""
    from ..jobids import scontrol_step
    from ..render.scontrol import steps_text

    recs = s.job_list().records
    if ids:
        want = scontrol_step(ids[0])
        recs = [r for r in recs if r.job_id == want.job and (want.task is None or r.array_task == want.task)]
    return steps_text(recs, s.oneliner)


# ---------------------------------------------------------------------------------------------
# job control: hold, release, suspend, resume, requeue, update


def _targets(s: Session, words: Iterable[str], names: str = "any"
             ) -> list[tuple[str, list[JobRecord], list[int] | None]]:
    """Job ids or names -> [(as given, active records, Slurm tasks or None)]. A word is read by
    the one grammar (jobids.scontrol_job_list: update_job.c's _is_job_id/_next_job_id, after an
    optional JobId=/Job=). A word that is no job list is read by ``names``:

    - ``"slurm"`` (hold, uhold, release: update_job.c scontrol_hold): only ``Name=NAME`` or
      ``JobName=NAME`` (case-insensitive) names jobs; any other word is an invalid id;
    - ``"none"`` (requeue, requeuehold, suspend, resume: scontrol_requeue, scontrol_suspend take
      ids only): every such word is an invalid id;
    - ``"any"`` (update's JobId=): a bare word is a job name too, as before.

    A word that is an invalid id comes back with the records None. Job names come back with a
    label ``Name=NAME`` entry per matching job (records of that job) or one with no records.
    A task named by its own job id (``t*10^10+G``, docs/array-ids.md) is labelled by that id, as
    typed, as Slurm names the job it was given. Grid Engine has no hetjobs: N+h names no job."""
    from ..jobids import JobIdError, compress, scontrol_job_list, task_job_id

    read: list[tuple[str, list | None | JobIdError]] = []
    for w in words:
        low = w.lower()
        w = w[6:] if low.startswith("jobid=") else w[4:] if low.startswith("job=") else w
        try:
            ids = scontrol_job_list(w)
        except JobIdError as e:
            ids = e
        if ids is None and (names == "none" or (names == "slurm" and not w.lower().startswith(("name=", "jobname=")))):
            ids = JobIdError("Invalid job id specified")
        read.append((w, ids))
    # job ids only: a listing of those jobs (issue 19: not the whole queue to act on one job); a
    # job name needs every job
    named = [x for _w, x in read if not isinstance(x, JobIdError)]
    only = {j.job for x in named for j in x} if all(x is not None for x in named) else None
    jl = s.job_list(only=only, reasons=False) if only is not None else s.job_list()
    s.targets_list = jl  # (requeue tells an ended job from an unknown one by it)
    out: list = []
    for w, ids in read:
        if isinstance(ids, JobIdError):
            out.append((w, None, None))
            continue
        typed = set(w.replace(",", " ").split())
        for j in ids or ():
            recs = [r for r in jl.records if r.job_id == j.job and not r.extra.get("ended")]
            tasks = list(j.tasks) if j.tasks is not None else [j.task] if j.task is not None else None
            if tasks is not None:
                want = set(tasks)
                recs = [r for r in recs if r.array_task in want or want & set(r.extra.get("pending_indices", ()))]
            if j.het is not None:
                recs = []
            own = str(task_job_id(j.job, j.task)) if j.task is not None and j.tasks is None else ""
            label = (f"{j.job}+{j.het}" if j.het is not None else own if own in typed
                     else f"{j.job}_{j.task}" if j.task is not None
                     else f"{j.job}_{compress(tasks)}" if tasks else str(j.job))
            out.append((label, recs, tasks))
        if ids is None:  # a job name
            name = w.split("=", 1)[1] if w.lower().startswith(("name=", "jobname=")) else w
            recs = [r for r in jl.records if r.name == name and not r.extra.get("ended")]
            found = sorted({r.job_id for r in recs})
            if names == "slurm":
                out.append((f"Name={name}", recs, None))
                continue
            out.extend((str(j), [r for r in recs if r.job_id == j], None) for j in found)
            if not found:
                out.append((name, [], None))
    return out


def _ge_ids(s: Session, job: int, tasks: list[int] | None, rec: JobRecord | None) -> list[str]:
    return jobs.ge_ids(s.cfg, job, tasks, rec)


def _refused(res, fallback: str = "") -> str:
    """Grid Engine's refusal (a backend Outcome) in Slurm's words (refusal.slurm_error)."""
    from ..backends.gridengine.refusal import slurm_error

    return slurm_error(res.kind, res.text, fallback)


def _me() -> tuple[str, int]:
    import pwd

    uid = os.getuid()
    try:
        return pwd.getpwuid(uid).pw_name, uid
    except KeyError:
        return str(uid), uid


def _check_owner(recs: list[JobRecord]) -> bool:
    me, uid = _me()
    return uid == 0 or all(r.user == me for r in recs)


def hold_release(s: Session, verb: str, words: list[str]) -> int:
    """hold, uhold, release (update_job.c scontrol_hold): job ids, or ``Name=``/``JobName=`` and a
    job name (any other word: "Invalid job id specified for job WORD"). A name selects every job of
    that name: a task that is not pending is left alone, another job that is not pending is acted on
    but makes the word fail with "Job is no longer pending execution"; a name no job has is no error
    (Slurm's loop finds nothing to update). scontrol.c then prints "slurm_suspend error: ..." after
    each word that failed."""
    if not words:
        raise fail(f"{PROG}: error: too few arguments for keyword:{verb}")
    rc = 0
    calls: list[str] = []
    for tok, recs, tasks in _targets(s, words, names="slurm"):
        if recs is None or (not recs and not tok.startswith("Name=")):
            print(f"Invalid job id specified for job {tok}", file=sys.stderr)
            print("slurm_suspend error: Invalid job id specified", file=sys.stderr)
            rc = 1
            continue
        if tok.startswith("Name="):  # scontrol_hold's loop over the jobs of that name
            late = False
            for job in sorted({r.job_id for r in recs}):
                mine = [r for r in recs if r.job_id == job and not (r.array_task is not None and r.state != "PENDING")]
                if not mine:
                    continue
                if any(r.state != "PENDING" for r in mine):
                    late = True
                label = str(job) if not mine[0].is_array else f"{job}_{mine[0].array_pending or mine[0].array_task}"
                if not _check_owner(mine):
                    print(f"Invalid user id for job {label}", file=sys.stderr)
                    print("slurm_suspend error: Invalid user id", file=sys.stderr)
                    rc = 1
                    continue
                pending = [r for r in mine if r.array_task is None or r.state == "PENDING"]
                if all(r.is_array for r in pending):
                    idx = sorted({i for r in pending for i in (r.extra.get("pending_indices") or
                                                                ([r.array_task] if r.array_task is not None else []))})
                    calls.extend(_ge_ids(s, job, idx, mine[0]) if idx else [str(job)])
                else:
                    calls.extend(_ge_ids(s, job, None, mine[0]))
            if late:
                print("slurm_suspend error: Job is no longer pending execution", file=sys.stderr)
                rc = 1
            continue
        if not _check_owner(recs):
            print(f"Invalid user id for job {tok}", file=sys.stderr)
            print("slurm_suspend error: Invalid user id", file=sys.stderr)
            rc = 1
            continue
        calls.extend(_ge_ids(s, recs[0].job_id, tasks, recs[0]))
    if calls:
        b = s.backend()
        res = b.release(calls) if verb == "release" else b.hold(calls)
        if not res.ok:
            why = _refused(res)
            if why:
                print(f"slurm_suspend error: {why}", file=sys.stderr)
            rc = 1
    return rc


def suspend_resume(s: Session, verb: str, words: list[str]) -> int:
    if not words:
        raise fail(f"{PROG}: error: too few arguments for keyword:{verb}")
    rc = 0
    me, uid = _me()
    for tok, recs, tasks in _targets(s, words, names="none"):  # scontrol_suspend: ids only
        if not recs:
            print(f"{PROG}: error: Invalid job id specified for job {tok}", file=sys.stderr)
            rc = 1
            continue
        if verb == "suspend" and all(r.state == "PENDING" for r in recs):
            print(f"{PROG}: error: Job is pending execution for job {tok}", file=sys.stderr)
            rc = 1
            continue
        if verb == "resume" and not any(r.state == "SUSPENDED" for r in recs):
            print(f"{PROG}: error: Job is not suspended for job {tok}", file=sys.stderr)
            rc = 1
            continue
        ids = _ge_ids(s, recs[0].job_id, tasks, recs[0])
        res = s.backend().suspend(ids) if verb == "suspend" else s.backend().resume(ids)
        if res.kind is not None:
            why = _refused(res, "Access/permission denied")
            print(f"{PROG}: error: {why} for job {tok}", file=sys.stderr)
            rc = 1
            continue
        kind = "suspend" if verb == "suspend" else "resume"
        if not all([_record(s, r, kind, uid, me) for r in recs]):
            print(f"{PROG}: warning: could not record the {kind} of job {tok} in {s.cfg.cluster.state_dir}",
                  file=sys.stderr)
    return rc


def _record(s: Session, r: JobRecord, kind: str, uid: int, me: str) -> bool:
    """A suspend/resume event in the caller's own directory (root's for an admin), naming the
    job's owner and Grid Engine's submission time so that readers tie it to this job."""
    data: dict[str, object] = {"uid": uid, "user": me, "owner": r.user}
    if r.extra.get("submit_ts"):
        data["sub"] = r.extra["submit_ts"]
    return state.record_event(s.cfg, r.job_id, r.array_task, kind, data)


def requeue(s: Session, verb: str, words: list[str]) -> int:
    """requeue, requeuehold (update_job.c scontrol_requeue/_hold): job ids only, no names; each
    failure is "<slurm_strerror> for job <id>" on stderr, exit 1."""
    if not words:
        raise fail(f"{PROG}: error: too few arguments for keyword:{verb}")
    rc = 0
    for tok, recs, tasks in _targets(s, words, names="none"):
        if not recs:
            jl = s.targets_list or s.job_list()
            job = int(tok.split("_")[0]) if recs is not None and tok.split("_")[0].isdigit() else -1
            if job in jl.known:
                print(f"Requeue of job {tok} failed: Requeue of a job that has ended is not possible on Grid Engine",
                      file=sys.stderr)
            else:
                print(f"Invalid job id specified for job {tok}", file=sys.stderr)
            rc = 1
            continue
        ids = _ge_ids(s, recs[0].job_id, tasks, recs[0])
        running = [r for r in recs if r.state in ("RUNNING", "SUSPENDED")]
        if running:
            res = s.backend().requeue(ids)
            if not res.ok:
                why = _refused(res, "Grid Engine refused")
                print(f"{why} for job {tok}", file=sys.stderr)
                rc = 1
                continue
        if verb == "requeuehold":
            s.backend().hold(ids)
    return rc


UPDATABLE = ("timelimit", "partition", "jobname", "name", "comment", "nice", "account", "qos", "starttime",
             "begintime")


def update(s: Session, words: list[str]) -> int:
    from ..options.values import time_minutes
    from ..translate import alter

    pairs: list[tuple[str, str]] = []
    for w in words:
        k, eq, v = w.partition("=")
        if not eq:
            raise fail(f"{PROG}: error: Invalid input: {w}", "Request aborted")
        pairs.append((k.lower(), v))
    ids = [v for k, v in pairs if k in ("jobid", "job")]
    if not ids:
        raise fail(f"{PROG}: error: No valid entity in update command",
                   "Input line must include \"NodeName\", \"PartitionName\", \"Reservation\", \"JobId\", "
                   "\"StepId\", \"FrontendName\" or \"SwitchName\"")
    changes = [(k, v) for k, v in pairs if k not in ("jobid", "job")]
    for k, v in changes:
        if k not in UPDATABLE:
            raise fail(f"{PROG}: error: Update of this parameter is not supported on Grid Engine: {k}",
                       "Request aborted")
    # validate everything before changing anything
    parsed: dict[str, object] = {}
    for k, v in changes:
        if k == "timelimit":
            val = v.strip()
            inc = 0
            if val[:1] in "+-" and val[1:2].isdigit():
                inc = 1 if val[0] == "+" else -1
                val = val[1:]
            m = time_minutes(val)
            if m is None:
                raise fail(f"{PROG}: error: Invalid TimeLimit value")
            parsed[k] = (inc, m)
        elif k == "partition":
            if v not in s.cfg.partitions:
                raise fail(f"{PROG}: error: Invalid partition name specified")
            parsed[k] = v
        elif k == "nice":
            try:
                parsed[k] = int(v)
            except ValueError:
                raise fail(f"{PROG}: error: Invalid nice value: {v}") from None
        elif k in ("starttime", "begintime"):
            from ..timespec import TimeSpecError, start_time

            try:
                when = start_time(v)
            except TimeSpecError as e:  # as Slurm: parse_time's message, and no change for this key
                print(e, file=sys.stderr)
                continue
            if when is not None:
                parsed["starttime"] = when
        else:
            parsed["jobname" if k == "name" else k] = v
    if not parsed:  # Slurm's scontrol_update_job: update_cnt == 0
        raise fail("No changes specified")
    rc = 0
    for tok, recs, tasks in _targets(s, ids):
        if not recs:  # scontrol_update_job's "%s for job %s" (scontrol.c adds no slurm_perror for jobs)
            print(f"Invalid job id specified for job {tok}", file=sys.stderr)
            rc = 1
            continue
        if not _check_owner(recs):
            print(f"Access/permission denied for job {tok}", file=sys.stderr)
            rc = 1
            continue
        privileged = _me()[1] == 0
        if alter.nice_denied(parsed, privileged):  # Slurm: a negative nice is for operators
            print(f"Access/permission denied for job {tok}", file=sys.stderr)
            rc = 1
            continue
        rec = recs[0]
        job = rec.job_id
        sub = jobs.submit_record(s.cfg, rec)  # the owner's record (or root's copy), of this job
        sub = {k: v for k, v in sub.to_dict().items() if k != "t"} if sub is not None else None
        ge_id = str(job)
        change = alter.qalter_args(parsed, s.cfg, privileged=privileged, pending=rec.state == "PENDING",
                                   hard=rec.extra.get("ge_row", {}).get("hard", {}),
                                   time_limit=jobs.detail(rec, s.cfg).time_limit if "timelimit" in parsed else None,
                                   wrapped=bool(sub))
        args, record = change.args, change.record
        if change.not_pending:
            print(f"{PROG}: error: Job is no longer pending execution for job {tok}", file=sys.stderr)
            rc = 1
        if args:
            res = s.backend().alter(ge_id, args)
            if not res.ok:
                msg = _refused(res, "Grid Engine refused the change")
                print(f"{msg} for job {tok}", file=sys.stderr)
                rc = 1
                continue
        if record and sub is not None:
            # into the caller's own directory: an admin's copy is root's, which readers believe
            # for the owner's job when it is newer (the job wrapper follows TimeLimit from it)
            sub.update(record)
            if not state.record_submit(s.cfg, job, sub):
                print(f"{PROG}: warning: job {job}: the change is made in Grid Engine, but the shim's record "
                      f"in {s.cfg.cluster.state_dir} could not be written", file=sys.stderr)
        elif record and ("comment" in record or "qos" in record) and sub is None:
            print(f"{PROG}: warning: job {job} was not submitted through slurm-shim: "
                  "Comment/QOS are not kept", file=sys.stderr)
    return rc


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
        return hold_release(s, "release" if cmd == "release" else "hold", args)
    if cmd in ("suspend", "resume"):
        return suspend_resume(s, cmd, args)
    if cmd in ("requeue", "requeuehold"):
        return requeue(s, cmd, args)
    if cmd == "update":
        return update(s, args)
    if cmd == "version":
        sys.stdout.write(f"slurm-wlm {VERSION}\n")
        return 0
    if cmd == "ping":
        host = os.uname().nodename.split(".")[0]
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
    parsed, positional = getopt(TABLE, argv, stop_at_positional=False)
    opts = Options()
    apply(opts, TABLE, parsed, "cli")
    if common.answered(opts, help_text, "Usage: scontrol [-M cluster] [-a|-d|-o|-Q|-v|-V] [<COMMAND>]\n"):
        return 0
    s = Session(opts)
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
