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
from typing import Iterable

from .. import jobs, state
from ..records import Reader
from ..errors import ShimError
from ..model import JobRecord
from ..options.getopt import Table, getopt
from ..options.sources import Options, apply
from ..options.spec import Arity, Fate, OptionSpec

PROG = "scontrol"
VERSION = "22.05.8"
N, R = Arity.NONE, Arity.REQUIRED


def _o(long: str, short: str | None = None, arity: Arity = N, dest: str = "", help: str = "",
       count: bool = False) -> OptionSpec:
    return OptionSpec(long, short, arity, commands=frozenset({PROG}), dest=dest, help=help, fate=Fate.LOCAL,
                      count=count)


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

    @property
    def cfg(self):
        if self._cfg is None:
            from ..siteconf import get

            self._cfg = get()
        return self._cfg

    def job_list(self, refresh: bool = False) -> jobs.JobList:
        if self._jobs is None or refresh:
            self._jobs = jobs.list_jobs(self.cfg, ended=True)
        return self._jobs

    def backend(self):
        from .. import backends

        return backends.get(self.cfg)


# ---------------------------------------------------------------------------------------------
# show job


def hms(secs: int | None) -> str:
    """scontrol's times: HH:MM:SS, D-HH:MM:SS."""
    if secs is None:
        return "UNLIMITED"
    days, rem = divmod(max(0, int(secs)), 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return f"{days}-{h:02d}:{m:02d}:{s:02d}" if days else f"{h:02d}:{m:02d}:{s:02d}"


def iso(dt: datetime | None, none: str = "Unknown") -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S") if dt else none


def _null(v: str | None) -> str:
    return v if v else "(null)"


def job_lines(rec: JobRecord, s: Session, now: float) -> list[str]:
    """The key=value lines of one job, in Slurm 22.05's order (first line unindented)."""
    from ..render.squeue import mem_text, tres_text, Ctx, dependency_text, nodes_text

    cfg = s.cfg
    jobs.detail(rec, cfg)
    ctx = Ctx(cfg, now=now)
    sub = rec.extra.get("submit") or {}
    ge = rec.extra.get("ge_detail") or {}
    pending = rec.state == "PENDING"
    ran = rec.start_time is not None and rec.state not in ("PENDING",)
    head = f"JobId={rec.job_id}"
    if rec.is_array:
        task = rec.array_task if rec.array_task is not None else rec.array_pending
        head += f" ArrayJobId={rec.job_id} ArrayTaskId={task} ArrayTaskThrottle={rec.array_max_tasks or 0}"
    head += f" JobName={rec.name}"
    group = jobs.group_name(rec.gid)
    uid = "" if rec.uid is None else rec.uid
    gid = "" if rec.gid is None else rec.gid
    run = jobs.run_seconds(rec, now)
    limit = "UNLIMITED" if rec.time_limit is None or rec.time_limit < 0 else hms(rec.time_limit * 60)
    held = pending and rec.reason in ("JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied",
                                      "launch failed requeued held")
    submit = rec.submit_time or rec.start_time
    eligible = "Unknown" if held or (pending and rec.reason == "BeginTime") else iso(rec.eligible_time or submit)
    end = rec.end_time
    if end is None and rec.start_time is not None and rec.state in ("RUNNING", "SUSPENDED") and \
            rec.time_limit is not None and rec.time_limit >= 0:
        end = datetime.fromtimestamp(rec.start_time.timestamp() + rec.time_limit * 60)
    start = rec.start_time
    if pending and sub.get("begin"):
        start = datetime.fromtimestamp(float(sub["begin"]))
    susp = "None"
    if rec.state == "SUSPENDED":
        reader = rec.extra.get("submit_records") or Reader(cfg, 1)
        ev = reader.events(rec.job_id, rec.uid if rec.uid is not None else rec.user,
                           rec.extra.get("submit_ts")).get((rec.array_task, "suspend"))
        susp = iso(datetime.fromtimestamp(ev["t"])) if ev and ev.get("t") else iso(datetime.fromtimestamp(now))
    alloc = sub.get("submit_host") or os.uname().nodename.split(".")[0]
    mem = rec.min_memory_mb
    mem_field = (f"MinMemoryCPU={mem_text(mem)}" if rec.mem_per_cpu else f"MinMemoryNode={mem_text(mem)}") \
        if mem else "MinMemoryNode=0"
    exit_code = f"{rec.exit_code or 0}:{rec.exit_signal or 0}"
    out = _expand(rec.std_out, rec, sub)
    err = _expand(rec.std_err, rec, sub)
    lines = [
        head,
        f"UserId={rec.user}({uid}) GroupId={group}({gid}) MCS_label=N/A",
        f"Priority={rec.priority} Nice={rec.nice} Account={_null(rec.account)} QOS={rec.qos or 'normal'}",
        f"JobState={rec.state} Reason={rec.reason} Dependency={dependency_text(rec, ctx)}",
        f"Requeue={1 if rec.requeue else 0} Restarts=0 BatchFlag=1 Reboot=0 ExitCode={exit_code}",
    ]
    if s.details:
        lines.append("DerivedExitCode=0:0")
    lines += [
        f"RunTime={hms(run)} TimeLimit={limit} TimeMin=N/A",
        f"SubmitTime={iso(submit)} EligibleTime={eligible}",
        f"AccrueTime={'Unknown' if held else iso(submit)}",
        f"StartTime={iso(start)} EndTime={iso(end)} Deadline=N/A",
        f"SuspendTime={susp} SecsPreSuspend=0 LastSchedEval={iso(rec.start_time if ran else submit)} "
        "Scheduler=Main",
        f"Partition={rec.partition} AllocNode:Sid={alloc}:0",
        f"ReqNodeList={_null(rec.req_nodes)} ExcNodeList={_null(rec.exc_nodes)}",
        f"NodeList={nodes_text(rec) if ran else ''}",
    ]
    if ran and rec.batch_host:
        lines.append(f"BatchHost={rec.batch_host}")
    lines += [
        f"NumNodes={rec.num_nodes} NumCPUs={rec.num_cpus} NumTasks={rec.num_tasks} "
        f"CPUs/Task={rec.cpus_per_task} ReqB:S:C:T=0:0:*:*",
        f"TRES={tres_text(rec, ctx)}",
        "Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*",
    ]
    if s.details and rec.gres and ran:
        lines.append(f"JOB_GRES={rec.gres.replace('gres:', '')}")
        lines.append(f"  Nodes={nodes_text(rec)} CPU_IDs=0-{max(0, rec.num_cpus - 1)} Mem={mem or 0} "
                     f"GRES={rec.gres.replace('gres:', '')}")
    lines += [
        f"MinCPUsNode={rec.cpus_per_task} {mem_field} MinTmpDiskNode=0",
        f"Features={_null(rec.features)} DelayBoot=00:00:00",
        f"OverSubscribe=OK Contiguous=0 Licenses={_null(rec.licenses)} Network=(null)",
        f"Command={_null(rec.command or ge.get('command'))}",
        f"WorkDir={rec.work_dir or ge.get('cwd') or ''}",
    ]
    if rec.comment:
        lines.append(f"Comment={rec.comment}")
    lines += [
        f"StdErr={err}",
        f"StdIn={rec.std_in or '/dev/null'}",
        f"StdOut={out}",
        "Power=",
    ]
    if rec.gres:
        lines.append(f"TresPerNode={rec.gres}")
    lines.append("")
    return lines


def _expand(pattern: str, rec: JobRecord, sub: dict) -> str:
    if not pattern:
        return ""
    from ..jobenv import expand_pattern

    host = rec.nodes[0] if rec.nodes else ""
    try:
        return expand_pattern(pattern, job_id=rec.job_id, task=rec.array_task, name=rec.name, user=rec.user,
                              host=host, array_job=rec.is_array)
    except Exception:  # a pattern the expander does not know stays as it is
        return pattern


def render_job(rec: JobRecord, s: Session, now: float) -> str:
    from ..render.fmt import printable

    lines = [printable(ln) for ln in job_lines(rec, s, now)]  # names, comments, paths: users' text
    if s.oneliner:
        return " ".join(lines) + "\n"
    return "\n   ".join(lines) + "\n\n"


def parse_job_spec(text: str) -> tuple[int, int | None]:
    base, us, task = text.partition("_")
    if not base.isdigit() or (us and not task.isdigit()):
        raise fail("slurm_load_jobs error: Invalid job id specified")
    return int(base), int(task) if us else None


def _enrich_from_ge(recs: list[JobRecord], s: Session) -> None:
    """Jobs not submitted through the shim: paths and directory from ``qstat -j <ids> -xml``."""
    from ..backends import qstat as q

    todo = sorted({r.job_id for r in recs if not r.extra.get("ended") and not jobs.submit_record(s.cfg, r)})
    if not todo:
        return
    res = s.backend().run("qstat", ["-j", ",".join(map(str, todo)), "-xml"])
    details = q.parse_detail(res.stdout)
    for r in recs:
        d = details.get(r.job_id)
        if not d:
            continue
        cwd = d.get("JB_cwd") or _home(r.user)  # without -cwd a Grid Engine job runs in $HOME
        r.work_dir = r.work_dir or cwd
        script = d.get("JB_script_file") or ""
        if script:
            r.command = script if os.path.isabs(script) or not cwd else os.path.join(cwd, script)
            if d.get("args"):
                r.command += " " + " ".join(d["args"])
        # Grid Engine's default files: <name>.o<job>[.<task>] and .e in the working directory
        task = f".{r.array_task}" if r.array_task is not None else ""
        ge_name = d.get("JB_job_name") or r.name
        out = d["stdout"][0] if d.get("stdout") else f"{ge_name}.o{r.job_id}{task}"
        err = d["stderr"][0] if d.get("stderr") else f"{ge_name}.e{r.job_id}{task}"
        if d.get("JB_merge_stderr") in ("true", "TRUE", "1"):
            err = out
        r.std_out = out if os.path.isabs(out) or not cwd else os.path.join(cwd, out)
        r.std_err = err if os.path.isabs(err) or not cwd else os.path.join(cwd, err)
        tc = d.get("JB_ja_task_concurrency") or "0"
        if r.is_array and not r.array_max_tasks and tc.isdigit() and int(tc):
            r.array_max_tasks = int(tc)
        if d.get("JB_account") and d["JB_account"] != "sge":
            r.account = d["JB_account"]
        if r.submit_time is None and d.get("submit_ts"):
            r.submit_time = datetime.fromtimestamp(d["submit_ts"])
        begin = q.parse_time(d.get("JB_execution_time"))
        if begin and begin > time.time() and r.state == "PENDING" and r.reason in ("Resources", "Priority"):
            r.reason = "BeginTime"
            r.start_time = datetime.fromtimestamp(begin)


def _home(user: str) -> str:
    import pwd

    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return ""


def show_job(s: Session, ids: list[str]) -> str:
    jl = s.job_list()
    now = jl.now
    recs = jl.records
    if ids:
        job, task = parse_job_spec(ids[0])
        if job not in jl.known:
            raise fail("slurm_load_jobs error: Invalid job id specified")
        mine = [r for r in recs if r.job_id == job]
        if task is not None:
            hit = [r for r in mine if r.array_task == task]
            if not hit:
                for r in mine:
                    if task in r.extra.get("pending_indices", ()):
                        hit = [x for x in jobs.expand_array([r]) if x.array_task == task]
                        break
            if not hit:
                raise fail("slurm_load_jobs error: Invalid job id specified")
            mine = hit
        else:
            mine.sort(key=lambda r: (r.array_pending is None, -(r.array_task or 0)))
        recs = mine
    else:
        recs = sorted(recs, key=lambda r: (r.job_id, r.array_pending is None, r.array_task or 0))
        if not recs:
            return "No jobs in the system\n"
    _enrich_from_ge(recs, s)
    return "".join(render_job(r, s, now) for r in recs)


# ---------------------------------------------------------------------------------------------
# show config / partition / node / licenses / hostnames


def show_config(s: Session, keys: list[str]) -> str:
    cfg = s.cfg
    host = os.uname().nodename.split(".")[0]
    lic = ",".join(cfg.licenses) or "(null)"
    mem = cfg.memory.default_per_cpu_mb
    items = [
        ("AccountingStorageType", "accounting_storage/none (Grid Engine accounting via qacct)"),
        ("AuthType", "auth/none"),
        ("BatchStartTimeout", "10 sec"),
        ("ClusterName", cfg.cluster.name),
        ("CompleteWait", "0 sec"),
        ("DefMemPerCPU", str(mem) if mem else "UNLIMITED"),
        ("EnforcePartLimits", "NO"),
        ("FirstJobId", "1"),
        ("GresTypes", ",".join(cfg.gres) or "(null)"),
        ("InactiveLimit", "0 sec"),
        ("JobCompType", "jobcomp/none"),
        ("JobRequeue", "1"),
        ("KillWait", "30 sec"),
        ("Licenses", lic),
        ("MaxArraySize", str(cfg.cluster.max_array_size)),
        ("MaxJobCount", "10000"),
        ("MaxStepCount", "40000"),
        ("MaxTasksPerNode", "512"),
        ("MessageTimeout", f"{int(cfg.gridengine.timeout)} sec"),
        ("MinJobAge", f"{cfg.cluster.min_job_age} sec"),
        ("MpiDefault", "none"),
        ("OverTimeLimit", "0 min"),
        ("PreemptMode", "OFF"),
        ("PriorityType", "priority/basic"),
        ("ProctrackType", "proctrack/gridengine"),
        ("SchedulerType", "sched/gridengine"),
        ("SelectType", "select/gridengine"),
        ("SlurmctldHost[0]", host),
        ("SlurmctldPort", "6817"),
        ("SlurmctldTimeout", "120 sec"),
        ("SLURM_CONF", os.environ.get("SLURM_SHIM_CONFIG") or "/etc/slurm-shim/config.toml"),
        ("SLURM_VERSION", VERSION),
        ("StateSaveLocation", cfg.cluster.state_dir),
        ("SwitchType", "switch/none"),
        ("TaskPlugin", "task/none"),
        ("TmpFS", "/tmp"),
        ("UsePam", "No"),
        ("WaitTime", "0 sec"),
    ]
    if keys:
        want = {k.lower() for k in keys}
        items = [(k, v) for k, v in items if k.lower() in want]
    now = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    lines = [f"Configuration data as of {now}"]
    lines += [f"{k:<23} = {v}" for k, v in items]
    if not keys:
        lines += ["", f"Slurmctld(primary) at {host} is UP"]
    return "\n".join(lines) + "\n"


def _cluster_info(s: Session):
    from ..backends import qstat as q

    b = s.backend()
    queues = q.parse_queues(b.run("qstat", ["-f", "-xml"]).stdout)
    hosts = q.parse_hosts(b.run("qhost", ["-xml"]).stdout)
    return queues, hosts


def show_partition(s: Session, names: list[str]) -> str:
    from ..hostlist import compress

    cfg = s.cfg
    queues, _hosts = _cluster_info(s)
    out = []
    for name, p in cfg.partitions.items():
        if names and name not in names:
            continue
        qis = [x for x in queues if x["queue"] == p.queue]
        nodes = p.nodes or [x["host"] for x in qis]
        cpus = sum(x["slots_total"] for x in qis)
        down = qis and all(any(c in x["state"] for c in "duEs") for x in qis)
        lines = [
            f"PartitionName={name}",
            "AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL",
            f"AllocNodes=ALL Default={'YES' if name == cfg.default_partition else 'NO'} QoS=N/A",
            f"DefaultTime={_time_cfg(p.default_time, 'NONE')} DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO",
            f"MaxNodes=UNLIMITED MaxTime={_time_cfg(p.max_time, 'UNLIMITED')} MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED",
            f"Nodes={compress(nodes) if nodes else '(null)'}",
            "PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO",
            "OverTimeLimit=NONE PreemptMode=OFF",
            f"State={'DOWN' if down else 'UP'} TotalCPUs={cpus} TotalNodes={len(nodes)} SelectTypeParameters=NONE",
            "JobDefaults=(null)",
            "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED",
            f"TRES=cpu={cpus},node={len(nodes)},billing={cpus}",
        ]
        out.append("\n   ".join(lines) + "\n")
    if names and not out:
        raise fail(f"Partition {names[0]} not found")
    sep = "" if s.oneliner else "\n"
    if s.oneliner:
        return "".join(x.replace("\n   ", " ") for x in out)
    return sep.join(out) + ("\n" if out else "")


def _time_cfg(v: str | None, none: str) -> str:
    if not v or v.upper() in ("UNLIMITED", "INFINITE", "NONE"):
        return none
    from ..options.values import time_minutes

    m = time_minutes(v)
    return none if m is None or m < 0 else hms(m * 60)


def show_node(s: Session, names: list[str]) -> str:
    cfg = s.cfg
    queues, hosts = _cluster_info(s)
    all_hosts = sorted({x["host"] for x in queues} | set(hosts))
    boot = _boot_time()
    out = []
    for h in all_hosts:
        if names and h not in names:
            continue
        hv = hosts.get(h, {})
        qis = [x for x in queues if x["host"] == h]
        # Grid Engine counts slots per queue instance; the host offers the largest of them
        total = max([x["slots_total"] for x in qis] + [_num(hv.get("num_proc"))])
        used = min(total, sum(x["slots_used"] for x in qis))
        parts = [n for n, p in cfg.partitions.items() if any(x["queue"] == p.queue for x in qis)]
        st = "IDLE" if used == 0 else ("ALLOCATED" if used >= total else "MIXED")
        if qis and all(any(c in x["state"] for c in "duE") for x in qis):
            st = "DOWN"
        mem = _mem_mb(hv.get("mem_total", ""))
        used_mem = _mem_mb(hv.get("mem_used", ""))
        lines = [
            f"NodeName={h} Arch={_arch(hv.get('arch_string') or (qis[0]['arch'] if qis else ''))} "
            f"CoresPerSocket={_num(hv.get('m_core')) // max(1, _num(hv.get('m_socket'))) or 1} ",
            f"CPUAlloc={used} CPUEfctv={total} CPUTot={total} CPULoad={_load(hv.get('load_avg'))}",
            "AvailableFeatures=(null)",
            "ActiveFeatures=(null)",
            "Gres=(null)",
            f"NodeAddr={h} NodeHostName={h} Version={VERSION}",
            f"OS={os.uname().sysname} {os.uname().release} ",
            f"RealMemory={mem} AllocMem=0 FreeMem={max(0, mem - used_mem)} Sockets={_num(hv.get('m_socket')) or 1} Boards=1",
            f"State={st} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
            f"Partitions={','.join(parts)} ",
            f"BootTime={boot} SlurmdStartTime={boot}",
            f"LastBusyTime={iso(datetime.fromtimestamp(time.time()))}",
            f"CfgTRES=cpu={total},mem={mem}M,billing={total}",
            f"AllocTRES={'cpu=' + str(used) if used else ''}",
            "CapWatts=n/a",
            "CurrentWatts=0 AveWatts=0",
            "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
        ]
        if s.oneliner:
            out.append(" ".join(lines) + "\n")
        else:
            out.append("\n   ".join(lines) + "\n\n")
    if names and not out:
        raise fail(f"Node {names[0]} not found")
    return "".join(out)


def _boot_time() -> str:
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


def _load(v: str | None) -> str:
    try:
        return f"{float(v or 0):.2f}"
    except ValueError:
        return "N/A"


def _arch(a: str) -> str:
    return {"lx-amd64": "x86_64", "lx-arm64": "aarch64", "lx-x86": "i686"}.get(a, a or "x86_64")


def _mem_mb(v: str) -> int:
    from ..backends.qstat import parse_memory_mb

    v = v.strip()
    if not v or v == "-":
        return 0
    # qhost prints decimal values with binary suffixes ("23.5G")
    return parse_memory_mb(v) or 0


def show_licenses(s: Session, names: list[str]) -> str:
    cfg = s.cfg
    jl = s.job_list()
    used: dict[str, int] = {}
    for r in jl.records:
        if r.state in ("RUNNING", "SUSPENDED", "COMPLETING") and r.licenses:
            for x in r.licenses.split(","):
                n, _, c = x.partition(":")
                used[n] = used.get(n, 0) + int(c or 1)
    totals = _license_totals(s)
    out = []
    for name in cfg.licenses:
        if names and name not in names:
            continue
        total = totals.get(cfg.licenses[name].complex, 0)
        u = used.get(name, 0)
        line = [f"LicenseName={name}", f"Total={total} Used={u} Free={max(0, total - u)} Reserved=0 Remote=no"]
        out.append((" ".join(line) if s.oneliner else "\n    ".join(line)) + "\n")
    return "".join(out)


def _license_totals(s: Session) -> dict[str, int]:
    res = s.backend().run("qconf", ["-se", "global"])
    out: dict[str, int] = {}
    m = re.search(r"^complex_values\s+(.*?)(?=^\S|\Z)", res.stdout, re.M | re.S)
    if m:
        for item in re.split(r"[,\s\\]+", m.group(1)):
            k, _, v = item.partition("=")
            if k and v:
                out[k] = _num(v)
    return out


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
    jl = s.job_list()
    out = []
    for r in sorted(jl.records, key=lambda r: (r.job_id, r.array_task or 0)):
        if r.state not in ("RUNNING", "SUSPENDED", "COMPLETING") or not r.nodes:
            continue
        if ids and str(r.job_id) != ids[0].split(".")[0].split("_")[0]:
            continue
        from ..render.squeue import nodes_text

        lines = [f"StepId={r.display_id}.batch UserId={r.uid} StartTime={iso(r.start_time)} TimeLimit=UNLIMITED",
                 f"State={r.state} Partition={r.partition} NodeList={nodes_text(r)}",
                 f"Nodes={r.num_nodes} CPUs={r.num_cpus} Tasks=1 Name=batch Network=(null)",
                 "TRES=" + f"cpu={r.num_cpus},node={r.num_nodes}", ""]
        out.append((" ".join(lines) if s.oneliner else "\n   ".join(lines)) + "\n")
    if not out:
        return "No job steps in the system\n"
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# job control: hold, release, suspend, resume, requeue, update


def _targets(s: Session, words: Iterable[str]) -> list[tuple[str, list[JobRecord], list[int] | None]]:
    """Job ids or names -> [(as given, active records, Slurm tasks or None)]."""
    jl = s.job_list()
    out = []
    for w in words:
        for tok in filter(None, re.split(r"[\s,]+", w)):
            m = re.match(r"^(\d+)(?:_(\d+))?$", tok)
            if m:
                job = int(m.group(1))
                recs = [r for r in jl.records if r.job_id == job and not r.extra.get("ended")]
                task = int(m.group(2)) if m.group(2) else None
                if task is not None:
                    recs = [r for r in recs if r.array_task == task or task in r.extra.get("pending_indices", ())]
                out.append((tok, recs, [task] if task is not None else None))
            else:  # a job name
                recs = [r for r in jl.records if r.name == tok and not r.extra.get("ended")]
                ids = sorted({r.job_id for r in recs})
                for j in ids:
                    out.append((str(j), [r for r in recs if r.job_id == j], None))
                if not ids:
                    out.append((tok, [], None))
    return out


def _ge_ids(s: Session, job: int, tasks: list[int] | None, rec: JobRecord | None) -> list[str]:
    if tasks is None:
        return [str(job)]
    from .scancel import ge_task_numbers, task_ranges

    return task_ranges(job, ge_task_numbers(s.cfg, job, tasks, rec))


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
    if not words:
        raise fail(f"{PROG}: error: too few arguments for keyword:{verb}")
    rc = 0
    calls: list[str] = []
    for tok, recs, tasks in _targets(s, words):
        if not recs:
            print(f"Invalid job id specified for job {tok}", file=sys.stderr)
            print("slurm_suspend error: Invalid job id specified", file=sys.stderr)
            rc = 1
            continue
        if not _check_owner(recs):
            print(f"Invalid user id for job {tok}", file=sys.stderr)
            print("slurm_suspend error: Invalid user id", file=sys.stderr)
            rc = 1
            continue
        calls.extend(_ge_ids(s, recs[0].job_id, tasks, recs[0]))
    if calls:
        tool = "qrls" if verb == "release" else "qhold"
        res = s.backend().run(tool, calls)
        if res.returncode != 0:
            text = (res.stderr + res.stdout).strip()
            if "privilege" in text or "must be" in text:
                print("slurm_suspend error: Access/permission denied", file=sys.stderr)
            elif text:
                print(f"slurm_suspend error: {text.splitlines()[-1]}", file=sys.stderr)
            rc = 1
    return rc


def suspend_resume(s: Session, verb: str, words: list[str]) -> int:
    if not words:
        raise fail(f"{PROG}: error: too few arguments for keyword:{verb}")
    rc = 0
    me, uid = _me()
    for tok, recs, tasks in _targets(s, words):
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
        res = s.backend().run("qmod", ["-sj" if verb == "suspend" else "-usj", *ids])
        text = (res.stdout + res.stderr)
        if res.returncode != 0 or "privilege" in text or "must be" in text:
            print(f"{PROG}: error: Access/permission denied for job {tok}", file=sys.stderr)
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
    if not words:
        raise fail(f"{PROG}: error: too few arguments for keyword:{verb}")
    rc = 0
    for tok, recs, tasks in _targets(s, words):
        if not recs:
            jl = s.job_list()
            job = int(tok.split("_")[0]) if tok.split("_")[0].isdigit() else -1
            why = "Job/step already completing or completed" if job in jl.known else "Invalid job id specified"
            if job in jl.known:
                why = "Requeue of a job that has ended is not possible on Grid Engine"
            print(f"Requeue of job {tok} failed: {why}" if job in jl.known else
                  f"{PROG}: error: {why} for job {tok}", file=sys.stderr)
            rc = 1
            continue
        ids = _ge_ids(s, recs[0].job_id, tasks, recs[0])
        running = [r for r in recs if r.state in ("RUNNING", "SUSPENDED")]
        if running:
            res = s.backend().run("qmod", ["-rj", *ids])
            if res.returncode != 0:
                text = (res.stdout + res.stderr).strip().splitlines()
                print(f"{PROG}: error: Requeue of job {tok} failed: {text[-1] if text else 'qmod failed'}",
                      file=sys.stderr)
                rc = 1
                continue
        if verb == "requeuehold":
            s.backend().run("qhold", ids)
    return rc


UPDATABLE = ("timelimit", "partition", "jobname", "name", "comment", "nice", "account", "qos", "starttime",
             "begintime")


def update(s: Session, words: list[str]) -> int:
    from ..names import encode
    from ..options.values import time_minutes

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
            try:
                parsed["starttime"] = _parse_begin(v)
            except ValueError:
                raise fail(f"{PROG}: error: Invalid StartTime value") from None
        else:
            parsed["jobname" if k == "name" else k] = v
    rc = 0
    for tok, recs, tasks in _targets(s, ids):
        if not recs:
            print("slurm_update error: Invalid job id specified", file=sys.stderr)
            rc = 1
            continue
        if not _check_owner(recs):
            print("slurm_update error: Access/permission denied", file=sys.stderr)
            rc = 1
            continue
        rec = recs[0]
        job = rec.job_id
        sub = jobs.submit_record(s.cfg, rec)  # the owner's record (or root's copy), of this job
        sub = {k: v for k, v in sub.items() if k != "t"} if sub is not None else None
        ge_id = str(job)
        args: list[str] = []
        record: dict[str, object] = {}
        for k, v in parsed.items():
            if k == "timelimit":
                inc, m = v  # type: ignore[misc]
                cur = jobs.detail(rec, s.cfg).time_limit
                if inc:
                    base = cur if cur is not None and cur >= 0 else 0
                    m = max(0, base + inc * m)
                record["time"] = m
                hard = dict(rec.extra.get("ge_row", {}).get("hard", {}))
                if m == -1:
                    hard["h_rt"] = "INFINITY"
                else:
                    # the shim's jobs keep Grid Engine's h_rt as a backstop behind the wrapper's limit
                    slack = 60 if sub else 0
                    hard["h_rt"] = str(m * 60 + slack)
                if hard:
                    args += ["-l", ",".join(f"{a}={b}" for a, b in hard.items())]
            elif k == "partition":
                p = s.cfg.partitions[v]  # type: ignore[index]
                if rec.state != "PENDING":
                    print(f"{PROG}: error: Job is no longer pending execution for job {tok}", file=sys.stderr)
                    rc = 1
                    continue
                args += ["-q", p.queue]
                record["partition"] = v
            elif k == "jobname":
                args += ["-N", encode(str(v))]
                record["name"] = v
            elif k == "nice":
                args += ["-p", str(max(-1023, min(1024, -int(v))))]  # type: ignore[arg-type]
                record["nice"] = v
            elif k == "account":
                args += ["-A", str(v)]
                record["account"] = v
            elif k == "starttime":
                args += ["-a", v.strftime("%Y%m%d%H%M.%S")]  # type: ignore[union-attr]
                record["begin"] = v.timestamp()  # type: ignore[union-attr]
            elif k in ("comment", "qos"):
                record[k] = v
        if args:
            res = s.backend().run("qalter", [*args, ge_id])
            if res.returncode != 0:
                text = (res.stdout + res.stderr).strip().splitlines()
                msg = text[-1] if text else "qalter failed"
                if "privilege" in msg or "must be" in msg:
                    msg = "Access/permission denied"
                elif "does not exist" in msg:
                    msg = "Invalid job id specified"
                print(f"slurm_update error: {msg}", file=sys.stderr)
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


def _parse_begin(v: str) -> datetime:
    v = v.strip()
    if v.lower() == "now":
        return datetime.now()
    m = re.match(r"^now\+(\d+)(seconds|minutes|hours|days|[smhd])?$", v.lower())
    if m:
        n = int(m.group(1))
        unit = (m.group(2) or "s")[0]
        return datetime.fromtimestamp(time.time() + n * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit])
    return datetime.fromisoformat(v)


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
        res = s.backend().run("qstat", ["-u", "nobody-slurm-shim-ping"])
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
    if opts.help:
        sys.stdout.write(help_text())
        return 0
    if opts.usage:
        sys.stdout.write("Usage: scontrol [-M cluster] [-a|-d|-o|-Q|-v|-V] [<COMMAND>]\n")
        return 0
    if opts.version:
        sys.stdout.write(f"slurm-wlm {VERSION}\n")
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
