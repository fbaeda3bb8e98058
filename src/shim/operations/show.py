"""What scontrol's ``show`` views need, gathered: the jobs an id names, with Grid Engine's detail
and each job's facts (group, submitting host, when it was suspended); the partitions' and nodes'
figures from the hosts (the one query and rules sinfo uses: gridengine.nodes); licenses
in use and in total; the configuration's items; host lists. render/scontrol.py formats them and
reads nothing; cli/scontrol.py reads the words, calls these and prints.

``s`` is the command's session: its site config (``cfg``), backend (``backend()``), job list
(``job_list()``) and ``quiet``.
"""

from __future__ import annotations

import os
import re

from . import jobs
from ..errors import ShimError
from ..store.records import NO_RECORD, Reader
from ..slurm.hostlist import this_host as short_host

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from ..gridengine.qhost import Host
    from ..slurm.model import JobRecord
    from ..slurm.render.scontrol import JobFacts

PROG = "scontrol"



# ---------------------------------------------------------------------------------------------
# show job, show step


def job_facts(rec: JobRecord, cfg, now: float) -> JobFacts:
    """Read what a job's view needs (its submit record's detail, group, submitting host, when it
    was suspended) for render.scontrol.job_lines, which reads nothing."""
    from ..slurm.render.scontrol import JobFacts
    from ..slurm.render.squeue import Ctx

    jobs.detail(rec, cfg)
    sub = rec.extra.get("submit") or NO_RECORD
    suspended_at = None
    if rec.state == "SUSPENDED":
        reader = rec.extra.get("submit_records") or Reader(cfg, 1)
        ev = reader.events(rec.job_id, rec.uid if rec.uid is not None else rec.user,
                           rec.extra.get("submit_ts")).get((rec.array_task, "suspend"))
        suspended_at = ev.get("t") if ev else None
    alloc = sub.submit_host or short_host()
    return JobFacts(jobs.group_name(rec.gid), alloc, suspended_at, Ctx(cfg, now=now))


def jobs_shown(s, ids: list[str]) -> tuple[list[JobRecord], float, str | None]:
    """``show job [ID]``: the records to show, the listing's time, and the label of a task or
    hetjob component the job has not (scontrol_print_job's "Job X not found", else None). The id
    is read as scontrol_print_job reads it (jobids.scontrol_job): a character other than digits,
    ``_`` and ``+`` is its error; a job the controller does not know is slurm_load_jobs' error
    (both ShimErrors, with no line when quiet). A task named by its own job id (``t*10^10+G``,
    docs/array-ids.md) that the array has not is, as in Slurm, a job id the controller does not
    know. Grid Engine has no hetjobs: every ``N+h`` is not found. No records without an id: no
    jobs in the system."""
    from ..slurm.jobids import JobIdError, scontrol_job

    only = None
    if ids:  # the listing comes first, as before (a silent qmaster wins over a bad id); its ended
        try:  # jobs are the one asked for
            only = {scontrol_job(ids[0]).job}
        except JobIdError:
            pass
    pre = jobs.start_details(s.cfg, only, s.backend()) if only else None  # (runs beside the listing)
    # qrstat, for the Reservation= line, beside the listing too; not where Grid Engine's detail of
    # the job is asked for (its JB_ar tells whether the job has an advance reservation to name),
    # nor where the job's submit record says it was submitted into none (jobs.recorded_ar)
    no_ar = only is not None and pre is None and jobs.recorded_ar(s.cfg, next(iter(only))) == ""
    resv = s.backend().reservation_names() if pre is None and not no_ar else None
    listing = None
    try:
        jl = None
        if pre is not None:  # a held job (OCS 9): its record from that detail alone (jobs.held_rows)
            listing = _own_listing(s)  # (as the listing's path starts it: beside the detail)
            rows, pre = jobs.held_rows(only, pre)
            if rows is not None:
                if listing is not None:
                    listing.close()  # (the owner's listing is not needed: stopped)
                jl = jobs.list_jobs(s.cfg, ended=True, only=only, reasons=True, rows=rows)
            elif listing is not None:  # (s.job_list's listing, with the listing started)
                jl = jobs.list_jobs(s.cfg, ended=True, only=only, reasons=True, direct=False, started=listing)
        return _jobs_shown(s, ids, only, pre, resv, jl)
    finally:
        if listing is not None:
            listing.close()
        if resv is not None:
            resv.close()
        if pre is not None:
            pre.close()


def _own_listing(s):
    """The caller's own jobs' listing, started (jobs._named's first question), None without a name."""
    from ..gridengine import backends, qstat as q

    me = jobs.own_name()
    return backends.start_qstat(s.cfg, q.listing_args([me]), backend=s.backend()) if me else None


def _jobs_shown(s, ids: list[str], only: set[int] | None, pre, resv,
                jl=None) -> tuple[list[JobRecord], float, str | None]:
    from ..slurm.jobids import JobIdError, scontrol_job

    jl = s.job_list(only=only) if jl is None else jl
    now = jl.now
    recs = jl.records
    if ids:
        try:
            spec = scontrol_job(ids[0])
        except JobIdError as e:
            raise ShimError(*([] if s.quiet else [f"scontrol_print_job error: {e}"])) from None
        job, task = spec.job, spec.task
        if job not in jl.known:
            raise ShimError("slurm_load_jobs error: Invalid job id specified")
        mine = [r for r in recs if r.job_id == job]
        if spec.het is not None:
            return [], now, f"{job}+{spec.het}"
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
                    raise ShimError(*([] if s.quiet else ["slurm_load_jobs error: Invalid job id specified"]))
                return [], now, f"{job}_{task}"
            mine = hit
        else:
            mine.sort(key=lambda r: (r.array_pending is None, -(r.array_task or 0)))
        recs = mine
    else:
        recs = sorted(recs, key=lambda r: (r.job_id, r.array_pending is None, r.array_task or 0))
        if not recs:
            return [], now, None
    jobs.add_grid_engine_detail(s.cfg, recs, s.backend(), started=pre)
    from .jobs import fill_reservations

    fill_reservations(recs, s.cfg, s.backend(), resv)  # the optional Reservation= line
    return recs, now, None


def steps_shown(s, ids: list[str]) -> list[JobRecord]:
    """``show step [ID]``: the id read as scontrol_print_step reads it (jobids.scontrol_step): a
    job, or one array task of it (the step number itself is not told apart: Grid Engine's jobs
    have their batch step only here)."""
    from ..slurm.jobids import scontrol_step

    recs = s.job_list().records
    if ids:
        want = scontrol_step(ids[0])
        recs = [r for r in recs if r.job_id == want.job and (want.task is None or r.array_task == want.task)]
    return recs


# ---------------------------------------------------------------------------------------------
# show config / partition / node / licenses


def config_items(cfg, version: str) -> tuple[list[tuple[str, str]], str]:
    """``show config``'s items and this host's name."""
    from ..slurm.render.scontrol import config_items as items

    host = short_host()
    conf = os.environ.get("SLURM_SHIM_CONFIG") or "/etc/slurm-shim/config.toml"
    return items(cfg, host, conf, version), host


def _hosts(s, prefix: str) -> list[Host]:
    """The hosts and their queue instances: the one query and reader sinfo uses too."""
    from ..gridengine import nodes

    return nodes.hosts(s.backend(), prefix=prefix)


def partitions(s, names: list[str]) -> list[tuple]:
    """``show partition [NAME]``: (the partition as nodeinfo.partitions reads it, its member nodes,
    CPUs, down?) of each partition named (all without names), in the config's order."""
    from . import nodeinfo
    from ..gridengine import nodes

    cfg = s.cfg
    hosts = _hosts(s, "slurm_load_partitions error")
    out = []
    for part in nodeinfo.partitions(cfg):
        if names and part.name not in names:
            continue
        p = cfg.partitions[part.name]
        on = nodeinfo.partition_hosts(p, hosts)  # (sinfo's rule: a listed host Grid Engine has, with the queue)
        members = [h.name for h in on]
        cpus = sum(h.queues[p.queue].slots_total for h in on)
        # Slurm's partition stays UP while its nodes drain (as sinfo's AVAIL): DOWN only when every
        # node of it is down (nodes.state, the rule sinfo uses)
        down = bool(on) and all(nodes.state(h, p.queue)[0] == "down" for h in on)
        out.append((part, members, cpus, down))
    return out


def nodes_shown(s, names: list[str]) -> list[tuple]:
    """``show node [NAME]``: (host, its state, CPUs, CPUs used, partitions) of each host named
    (all without names), by name."""
    from . import nodeinfo
    from ..gridengine import nodes

    cfg = s.cfg
    hosts = sorted(_hosts(s, "slurm_load_node error"), key=lambda h: h.name)
    out = []
    for h in hosts:
        if names and h.name not in names:
            continue
        cpus, used = nodeinfo.node_cpus(h)
        parts = nodeinfo.host_partitions(cfg, h)
        out.append((h, nodes.state(h), cpus, used, parts))
    return out


def boot_time() -> str:
    """This host's boot time (/proc/stat's btime), as scontrol shows it; "None" unknown."""
    from datetime import datetime

    from ..slurm.render.scontrol import iso

    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                if line.startswith("btime "):
                    return iso(datetime.fromtimestamp(int(line.split()[1])))
    except OSError:
        pass
    return "None"


def os_name() -> str:
    uname = os.uname()
    return f"{uname.sysname} {uname.release}"


def _num(v: str | None) -> int:
    try:
        return int(float(v or 0))
    except ValueError:
        return 0


def licenses(s, names: list[str]) -> list[tuple[str, int, int]]:
    """``show licenses [NAME]``: (name, total, in use) of each license of the site config named
    (all without names): the total is the global host's consumable, the use that of the running,
    suspended and completing jobs."""
    cfg = s.cfg
    jl = s.job_list()
    used: dict[str, int] = {}
    for r in jl.records:
        if r.state in ("RUNNING", "SUSPENDED", "COMPLETING") and r.licenses:
            for x in r.licenses.split(","):
                n, _, c = x.partition(":")
                if "|" in x or not (c or "1").isdigit():
                    continue  # (26.05's either-license request as written: which one Grid Engine holds is not here)
                used[n] = used.get(n, 0) + int(c or 1)
    totals = _license_totals(s)
    return [(name, totals.get(cfg.licenses[name].complex, 0), used.get(name, 0))
            for name in cfg.licenses if not names or name in names]


def _license_totals(s) -> dict[str, int]:
    """The global host's consumables (``complex_values`` of its configuration): license totals."""
    from ..gridengine.qhost import parse_complex_values

    res = s.backend().exec_host("global")
    return {k: _num(v) for k, v in parse_complex_values(res.stdout).items()} if res.returncode == 0 else {}


# ---------------------------------------------------------------------------------------------
# show hostnames / hostlist / hostlistsorted


def _hostlist_text(args: list[str]) -> str:
    """The host list given: the words, else SLURM_JOB_NODELIST; a path is a file of host names."""
    text = ",".join(args) if args else os.environ.get("SLURM_JOB_NODELIST", "")
    if not text:
        raise ShimError(f"{PROG}: error: No hostlist specified")
    return _maybe_file(text)


def host_names(args: list[str]) -> list[str]:
    """``show hostnames``: every host the list names, in its order."""
    from ..slurm.hostlist import expand

    text = _hostlist_text(args)
    return expand(" ".join(text.split()))  # one call: one cap on the whole list (F-11)


def host_list(args: list[str], sort: bool) -> str:
    """``show hostlist`` (``hostlistsorted``: sorted naturally, each host once): the list given
    as one hostlist expression."""
    from ..slurm.hostlist import compress, expand

    text = _hostlist_text(args)
    hosts = expand(" ".join(text.replace("\n", ",").split()))  # one cap on the whole list (F-11)
    if sort:
        hosts = sorted(dict.fromkeys(hosts), key=_natural)
    return compress(hosts)


def _natural(h: str) -> tuple:
    # a digit run sorts by value without int() (no limit on its length): (length, digits)
    return tuple((len(p.lstrip("0")), p.lstrip("0")) if i % 2 else p
                 for i, p in enumerate(re.split(r"(\d+)", h, flags=re.ASCII)))


def _maybe_file(text: str) -> str:
    if text.startswith("/") and os.path.isfile(text):
        with open(text, encoding="utf-8") as f:
            return ",".join(w for w in re.split(r"[\s,]+", f.read()) if w)
    return text
