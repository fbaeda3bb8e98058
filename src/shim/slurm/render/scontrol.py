"""scontrol's key=value views (show job, config, partition, node, licenses, steps), in Slurm 22.05's
layout; show job's lines differ per release where releases.py's rules say so. Nothing here reads a file, a record or Grid Engine: the command gathers what a view needs
(the job's detail and facts, the site config, the hosts) and these functions only format it.
"""

from __future__ import annotations

from datetime import datetime

from ..model import shown_state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ...gridengine.qhost import Host
    from ..model import JobRecord


def hms(secs: int | None) -> str:
    """scontrol's times: HH:MM:SS, D-HH:MM:SS (secs2time_str; a negative time counts as 0)."""
    from .text import secs2time_str

    return "UNLIMITED" if secs is None else secs2time_str(max(0, int(secs)))


def iso(dt: datetime | None, none: str = "Unknown") -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S") if dt else none


def _null(v: str | None) -> str:
    return v if v else "(null)"


def _block(lines: list[str], oneliner: bool, indent: str = "\n   ") -> str:
    return " ".join(lines) if oneliner else indent.join(lines)


# ---------------------------------------------------------------------------------------------
# show job


class JobFacts:
    """What a job's view needs beyond its (detailed) record, gathered by the command: the group
    name, the submitting host, when it was suspended, and squeue's context (config and time)."""

    __slots__ = ("group", "alloc_host", "suspended_at", "ctx")

    def __init__(self, group: str, alloc_host: str, suspended_at: float | None, ctx: Any):
        self.group, self.alloc_host, self.suspended_at, self.ctx = group, alloc_host, suspended_at, ctx


def job_lines(rec: JobRecord, facts: JobFacts, details: bool, now: float) -> list[str]:
    """The key=value lines of one job, in Slurm 22.05's order (first line unindented), with the
    lines and values of the site's release (``ctx.release``: releases.JOB_TRES_SPLIT,
    JOB_FIELDS_26, MERGED_STDERR_EMPTY, OVERSUBSCRIBE_NO, TRES_SLASH). ``rec`` has been through
    ``jobs.detail`` (the squeue getters used here then read nothing); SubmitLine is the record's
    ``extra["submit_line"]``, "(null)" where it has none."""
    from ..model import run_seconds
    from .. import releases as r
    from .squeue import dependency_text, mem_text, nodes_text, oversubscribe, tres_per_node, tres_text

    ctx = facts.ctx
    release = ctx.release  # what differs per release: releases.py's rules, named below
    sub = rec.extra.get("submit")  # (records.Submitted)
    ge = rec.extra.get("ge_detail") or {}
    pending = rec.state == "PENDING"
    ran = rec.start_time is not None and rec.state not in ("PENDING",)
    from ..jobids import task_job_id

    head = f"JobId={task_job_id(rec.job_id, rec.array_task)}"  # an array task's own id (docs/array-ids.md)
    if rec.is_array:
        task = rec.array_task if rec.array_task is not None else rec.array_pending
        head += f" ArrayJobId={rec.job_id} ArrayTaskId={task} ArrayTaskThrottle={rec.array_max_tasks or 0}"
    head += f" JobName={rec.name}"
    uid = "" if rec.uid is None else rec.uid
    gid = "" if rec.gid is None else rec.gid
    run = run_seconds(rec, now)
    limit = "UNLIMITED" if rec.time_limit is None or rec.time_limit < 0 else hms(rec.time_limit * 60)
    held = pending and rec.reason in ("JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied",
                                      "launch failed requeued held")
    submit, eligible, start, end, susp = _times(rec, facts, sub, pending, held, now)
    mem = rec.min_memory_mb
    mem_field = (f"MinMemoryCPU={mem_text(mem)}" if rec.mem_per_cpu else f"MinMemoryNode={mem_text(mem)}") \
        if mem else "MinMemoryNode=0"
    exit_code = f"{rec.exit_code or 0}:{rec.exit_signal or 0}"
    out = _expand(rec.std_out, rec)
    err = _expand(rec.std_err, rec)
    fields_26 = release.has(r.JOB_FIELDS_26)
    lines = [head]
    if details and fields_26:  # the job's SLUID, as its job wrapper made SLURM_JOB_SLUID
        made = getattr(sub, "sub", None) if sub is not None else None
        lines.append("SLUID=" + (r.sluid(str(getattr(sub, "cluster", None) or "cluster"), int(made * 1000), rec.job_id,
                                         rec.array_task) if isinstance(made, (int, float)) else "(null)"))
    reason = str(rec.reason).replace(" ", "_")  # (as scontrol prints a reason: RaisedSignal:11(Segmentation_fault))
    lines += [
        f"UserId={rec.user}({uid}) GroupId={facts.group}({gid}) MCS_label=N/A",
        f"Priority={rec.priority} Nice={rec.nice} Account={_null(rec.account)} QOS={rec.qos or 'normal'}",
        f"JobState={shown_state(rec)} Reason={reason} Dependency={dependency_text(rec, ctx)}",
        f"Requeue={1 if rec.requeue else 0} Restarts=0 BatchFlag=1 Reboot=0 ExitCode={exit_code}",
    ]
    if details:
        lines.append("DerivedExitCode=0:0")
    lines += [
        f"RunTime={hms(run)} TimeLimit={limit} TimeMin=N/A",
        f"SubmitTime={iso(submit)} EligibleTime={eligible}",
        f"AccrueTime={'Unknown' if held else iso(submit)}",
        f"StartTime={iso(start)} EndTime={iso(end)} Deadline=N/A",
        f"SuspendTime={susp} SecsPreSuspend=0 LastSchedEval={iso(rec.start_time if ran else submit)} "
        "Scheduler=Main",
        f"Partition={rec.partition} AllocNode:Sid={facts.alloc_host}:0",
        f"ReqNodeList={_null(rec.req_nodes)} ExcNodeList={_null(rec.exc_nodes)}",
        f"NodeList={nodes_text(rec) if ran else ''}",
    ]
    if ran and rec.batch_host:
        lines.append(f"BatchHost={rec.batch_host}")
    lines += [
        f"NumNodes={rec.num_nodes} NumCPUs={rec.num_cpus} NumTasks={rec.num_tasks} "
        f"CPUs/Task={rec.cpus_per_task} ReqB:S:C:T=0:0:*:*",
    ]
    if release.has(r.JOB_TRES_SPLIT):
        lines += [f"ReqTRES={tres_text(rec, ctx)}", f"AllocTRES={tres_text(rec, ctx) if ran else '(null)'}"]
    else:
        lines.append(f"TRES={tres_text(rec, ctx)}")
    lines += [
        "Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*",
    ]
    if details and rec.gres and ran:
        lines.append(f"JOB_GRES={rec.gres.replace('gres:', '')}")
        lines.append(f"  Nodes={nodes_text(rec)} CPU_IDs=0-{max(0, rec.num_cpus - 1)} Mem={mem or 0} "
                     f"GRES={rec.gres.replace('gres:', '')}")
    lines += [
        f"MinCPUsNode={rec.cpus_per_task} {mem_field} MinTmpDiskNode=0",
        f"Features={_null(rec.features)} DelayBoot=00:00:00",
    ]
    if rec.extra.get("reservation"):  # slurm_sprint_job_info's optional line (jobs.fill_reservations)
        lines.append(f"Reservation={rec.extra['reservation']}")
    exclusive = " Exclusive=NO" if fields_26 else ""
    licenses_alloc = f" LicensesAlloc={_null(rec.licenses if ran else '')}" if fields_26 else ""
    lines += [
        f"OverSubscribe={oversubscribe(rec, ctx)}{exclusive} Contiguous=0 Licenses={_null(rec.licenses)}"
        f"{licenses_alloc} Network=(null)",
        f"Command={_null(rec.command or ge.get('command'))}",
    ]
    if fields_26:  # the submission's command line, where the record keeps it
        lines.append(f"SubmitLine={_null(rec.extra.get('submit_line'))}")
    lines += [
        f"WorkDir={rec.work_dir or ge.get('cwd') or ''}",
    ]
    if rec.comment:
        lines.append(f"Comment={rec.comment}")
    if err == out and release.has(r.MERGED_STDERR_EMPTY):
        err = ""
    lines += [
        f"StdErr={err}",
        f"StdIn={rec.std_in or '/dev/null'}",
        f"StdOut={out}",
    ]
    if not release.has(r.JOB_TRES_SPLIT):
        lines.append("Power=")
    if rec.gres:
        lines.append(f"TresPerNode={tres_per_node(rec, ctx)}")
    if not fields_26:
        lines.append("")  # the blank last line (22.05, 24.11)
    return lines


def _times(rec: JobRecord, facts: JobFacts, sub, pending: bool, held: bool, now: float) -> tuple:
    """(SubmitTime, EligibleTime's text, StartTime, EndTime, SuspendTime's text) of job_lines: a
    running job ends at its start plus its limit, a pending one with --begin starts then."""
    submit = rec.submit_time or rec.start_time
    eligible = "Unknown" if held or (pending and rec.reason == "BeginTime") else iso(rec.eligible_time or submit)
    end = rec.end_time
    if end is None and rec.start_time is not None and rec.state in ("RUNNING", "SUSPENDED") and \
            rec.time_limit is not None and rec.time_limit >= 0:
        end = datetime.fromtimestamp(rec.start_time.timestamp() + rec.time_limit * 60)
    start = rec.start_time
    if pending and sub and sub.begin:
        start = datetime.fromtimestamp(float(sub.begin))
    susp = "None"
    if rec.state == "SUSPENDED":
        susp = iso(datetime.fromtimestamp(facts.suspended_at if facts.suspended_at else now))
    return submit, eligible, start, end, susp


def _expand(pattern: str, rec: JobRecord) -> str:
    if not pattern:
        return ""
    from ..patterns import expand_pattern

    host = rec.nodes[0] if rec.nodes else ""
    try:
        return expand_pattern(pattern, job_id=rec.job_id, task=rec.array_task, name=rec.name, user=rec.user,
                              host=host, array_job=rec.is_array)
    except Exception:  # a pattern the expander does not know stays as it is
        return pattern


def job_text(rec: JobRecord, facts: JobFacts, details: bool, oneliner: bool, now: float) -> str:
    from .fmt import printable

    lines = [printable(ln) for ln in job_lines(rec, facts, details, now)]  # names, comments, paths: users' text
    if oneliner:
        return " ".join(lines) + "\n"
    return "\n   ".join(lines) + "\n\n"


# ---------------------------------------------------------------------------------------------
# show config


def config_items(cfg: Any, host: str, conf_path: str, version: str) -> list[tuple[str, str]]:
    lic = ",".join(cfg.licenses) or "(null)"
    mem = cfg.memory.default_per_cpu_mb
    return [
        ("AccountingStorageType", "accounting_storage/none (Grid Engine accounting via qacct)"),
        ("AuthType", "auth/none"),
        ("BatchStartTimeout", "10 sec"),
        ("ClusterName", cfg.cluster.name),
        ("CompleteWait", "0 sec"),
        ("DefMemPerCPU", str(mem) if mem else "UNLIMITED"),
        ("EnforcePartLimits", cfg.cluster.get("enforce_part_limits") or "NO"),
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
        ("SLURM_CONF", conf_path),
        ("SLURM_VERSION", version),
        ("StateSaveLocation", cfg.cluster.state_dir),
        ("SwitchType", "switch/none"),
        ("TaskPlugin", "task/none"),
        ("TmpFS", "/tmp"),
        ("UsePam", "No"),
        ("WaitTime", "0 sec"),
    ]


def config_text(items: list[tuple[str, str]], keys: list[str], host: str, now: datetime) -> str:
    if keys:
        want = {k.lower() for k in keys}
        items = [(k, v) for k, v in items if k.lower() in want]
    lines = [f"Configuration data as of {now.strftime('%Y-%m-%dT%H:%M:%S')}"]
    lines += [f"{k:<23} = {v}" for k, v in items]
    if not keys:
        lines += ["", f"Slurmctld(primary) at {host} is UP"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# show partition / node


def part_time(minutes: int | None) -> str:
    """A partition's DefaultTime or MaxTime (minutes; -1 unlimited, None not set), as scontrol's
    print_part prints it: UNLIMITED for INFINITE, NONE for NO_VAL."""
    if minutes is None:
        return "NONE"
    return "UNLIMITED" if minutes < 0 else hms(minutes * 60)


def partition_text(part: Any, nodes: list[str], cpus: int, down: bool, release: Any = None) -> str:
    """One partition (``part``: nodeinfo.partitions' entry; first line unindented; the command
    joins them). ``release`` (releases.Release; None: 22.05's lines): 24.11's ExclusiveTopo=NO and
    MaxCPUsPerSocket=UNLIMITED (releases.PARTITION_SOCKET_LIMIT), 26.05's one Exclusive=NO in place
    of ExclusiveUser= and ExclusiveTopo= (releases.PARTITION_EXCLUSIVE)."""
    from ..hostlist import compress
    from .. import releases as r

    has = release.has if release is not None else (lambda rule: False)
    exclusive = ("Exclusive=NO" if has(r.PARTITION_EXCLUSIVE) else
                 "ExclusiveUser=NO ExclusiveTopo=NO" if has(r.PARTITION_SOCKET_LIMIT) else "ExclusiveUser=NO")
    per_socket = " MaxCPUsPerSocket=UNLIMITED" if has(r.PARTITION_SOCKET_LIMIT) else ""
    lines = [
        f"PartitionName={part.name}",
        "AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL",
        f"AllocNodes=ALL Default={'YES' if part.default else 'NO'} QoS=N/A",
        f"DefaultTime={part_time(part.default_time)} DisableRootJobs=NO {exclusive} GraceTime=0 Hidden=NO",
        f"MaxNodes=UNLIMITED MaxTime={part_time(part.max_time)} MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED{per_socket}",
        f"Nodes={compress(nodes) if nodes else '(null)'}",
        "PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO",
        "OverTimeLimit=NONE PreemptMode=OFF",
        f"State={'DOWN' if down else 'UP'} TotalCPUs={cpus} TotalNodes={len(nodes)} SelectTypeParameters=NONE",
        "JobDefaults=(null)",
        "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED",
        f"TRES=cpu={cpus},node={len(nodes)},billing={cpus}",
    ]
    return "\n   ".join(lines) + "\n"


def partitions_text(blocks: list[str], oneliner: bool) -> str:
    if oneliner:
        return "".join(x.replace("\n   ", " ") for x in blocks)
    return "\n".join(blocks) + ("\n" if blocks else "")


def node_state_text(base: str, responding: bool, used: int, total: int) -> str:
    """Slurm's node_state_string_complete for a base state of gridengine.nodes.state: the
    base state, then its flags (``IDLE+DRAIN``, ``MIXED+DRAIN``, ``DOWN+NOT_RESPONDING``)."""
    busy = "IDLE" if used <= 0 else ("ALLOCATED" if total and used >= total else "MIXED")
    text = {"drained": "IDLE+DRAIN", "draining": busy + "+DRAIN", "down": "DOWN"}.get(base, base.upper())
    return text if responding else text + "+NOT_RESPONDING"


_ARCH = {"lx-amd64": "x86_64", "lx-arm64": "aarch64", "lx-x86": "i686"}


def node_text(h: Host, state: tuple[str, str, bool], cpus: int, used: int, parts: list[str], boot: str,
              os_text: str, version: str, now: datetime, oneliner: bool) -> str:
    """One node: host ``h`` (gridengine.qhost.Host), its ``state`` (gridengine.nodes.state),
    the CPUs it offers and uses, its partitions, boot time and ``uname`` text."""
    base, reason, responding = state
    mem = h.mem_total_mb or 0
    used_mem = h.mem_used_mb or 0
    lines = [
        f"NodeName={h.name} Arch={_ARCH.get(h.arch, h.arch or 'x86_64')} "
        f"CoresPerSocket={h.cores // max(1, h.sockets) or 1} ",
        f"CPUAlloc={used} CPUEfctv={cpus} CPUTot={cpus} CPULoad={h.load or 0:.2f}",
        "AvailableFeatures=(null)",
        "ActiveFeatures=(null)",
        "Gres=(null)",
        f"NodeAddr={h.name} NodeHostName={h.name} Version={version}",
        f"OS={os_text} ",
        f"RealMemory={mem} AllocMem=0 FreeMem={max(0, mem - used_mem)} Sockets={h.sockets or 1} Boards=1",
        f"State={node_state_text(base, responding, used, cpus)} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A "
        "MCS_label=N/A",
        f"Partitions={','.join(parts)} ",
        f"BootTime={boot} SlurmdStartTime={boot}",
        f"LastBusyTime={iso(now)}",
        f"CfgTRES=cpu={cpus},mem={mem}M,billing={cpus}",
        f"AllocTRES={'cpu=' + str(used) if used else ''}",
        "CapWatts=n/a",
        "CurrentWatts=0 AveWatts=0",
        "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
    ]
    if reason:  # node_info.c: Reason= (no [user@time]: Grid Engine keeps neither)
        lines.append(f"Reason={reason}")
    return " ".join(lines) + "\n" if oneliner else "\n   ".join(lines) + "\n\n"


# ---------------------------------------------------------------------------------------------
# show licenses / steps


def license_text(name: str, total: int, used: int, oneliner: bool) -> str:
    line = [f"LicenseName={name}", f"Total={total} Used={used} Free={max(0, total - used)} Reserved=0 Remote=no"]
    return _block(line, oneliner, "\n    ") + "\n"


def steps_text(records: list[JobRecord], oneliner: bool) -> str:
    """The batch steps of the running jobs among ``records`` (the command chose them)."""
    from .squeue import nodes_text

    out = []
    for r in sorted(records, key=lambda r: (r.job_id, r.array_task or 0)):
        if r.state not in ("RUNNING", "SUSPENDED", "COMPLETING") or not r.nodes:
            continue
        lines = [f"StepId={r.display_id}.batch UserId={r.uid} StartTime={iso(r.start_time)} TimeLimit=UNLIMITED",
                 f"State={r.state} Partition={r.partition} NodeList={nodes_text(r)}",
                 f"Nodes={r.num_nodes} CPUs={r.num_cpus} Tasks=1 Name=batch Network=(null)",
                 "TRES=" + f"cpu={r.num_cpus},node={r.num_nodes}", ""]
        out.append(_block(lines, oneliner) + "\n")
    if not out:
        return "No job steps in the system\n"
    return "".join(out)
