"""Slurm job request -> qsub argv, driven by the site config.

``build(opts, cfg, ctx)`` is pure: it returns the argv for ``qsub`` (the job wrapper script goes on
stdin), the ``JobRequest`` the job wrapper needs at run time (``shim.slurm.request``), and one note per
option for ``slurm-shim explain``. Each branch says why Grid Engine needs something other than a
1:1 flag. ``qrsh_flags`` and ``allocation_argv`` adapt that argv for srun's and salloc's jobs.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Callable

    from ...config import SiteConfig

    Note = Callable[[str, "list[str] | str", str], None]  # build's note(opt, flags, why)

import math
import os
from datetime import datetime

from .. import names
from ...errors import ShimError, command_error
from ...slurm.options.sources import Options
from ...slurm.options.values import INFINITE, time_minutes
from ...slurm.request import KILL_WAIT, JobRequest


class Context:
    """Facts about the submission that are not options."""

    def __init__(self, prog: str = "sbatch", cwd: str = "/", script_name: str = "sbatch", user: str = "root",
                 uid: int = 0, gid: int = 0, host: str = "localhost", environ: dict[str, str] | None = None,
                 capabilities: Any = None):
        self.prog, self.cwd, self.script_name = prog, cwd, script_name
        self.user, self.uid, self.gid, self.host = user, uid, gid, host
        self.environ = environ or {}
        # the Grid Engine's features (``caps.par``, ...: backend.capabilities), asked only where a
        # translation needs one; None: none
        self.capabilities = capabilities


class Submission:
    """qsub's argv, the job's request, and one (option, flags, note) per translated option."""

    def __init__(self, argv: list[str], request: JobRequest, notes: list[tuple[str, str, str]],
                 array: list[int] | None = None):
        self.argv = argv
        self.request = request
        self.notes = notes
        self.array = array
        self.warnings: list[str] = []
        self.record: Any = None  # the SubmitRecord, once the command has added its facts (shim.operations.submit)

    @property
    def payload(self) -> dict[str, Any]:
        """The record (or, before there is one, the request) as the dict the job gets."""
        return (self.record or self.request).to_dict()


class Geometry:
    """Tasks, CPUs per task, nodes, Grid Engine slots and tasks on each node."""

    def __init__(self, ntasks: int, cpus_per_task: int, nodes: int, slots: int, tasks_per_node: list[int]):
        self.ntasks, self.cpus_per_task, self.nodes = ntasks, cpus_per_task, nodes
        self.slots, self.tasks_per_node = slots, tasks_per_node


MAX_NODES = 65536  # Slurm's hostlist range limit: no request for more nodes can be met anywhere


def geometry(o: Options, prog: str = "sbatch") -> Geometry:
    """Slurm's -n/-c/-N/--ntasks-per-node as tasks, CPUs and nodes (Slurm's defaults: 1 task,
    1 CPU per task, as few nodes as the tasks need); --cpus-per-gpu and --ntasks-per-gpu scale
    with the GPUs asked for."""
    c = o.cpus_per_task or 1
    nodes_min = o.nodes[0] if isinstance(o.nodes, tuple) else (o.nodes or 0)
    ntpn = o.ntasks_per_node
    gpus = _gpu_count(o, Geometry(o.ntasks or 1, c, max(nodes_min, 1), 1, [1]))
    per_gpu = o.ntasks_per_gpu or o.ntasks_per_tres
    if o.cpus_per_gpu and gpus and not o.cpus_per_task:
        c = max(1, (o.cpus_per_gpu * gpus) // max(1, o.ntasks or 1))
    if o.ntasks:
        n = o.ntasks
    elif per_gpu and gpus:
        n = per_gpu * gpus
    elif ntpn:
        n = ntpn * max(nodes_min, 1)
    else:
        n = max(nodes_min, 1)
    nodes = max(nodes_min, 1)
    if ntpn and not nodes_min:
        nodes = max(1, math.ceil(n / ntpn))
    if nodes > MAX_NODES:  # refused before one entry per node is built (security F-11)
        raise refused(prog, "Node count specification invalid")
    per = [n // nodes + (1 if i < n % nodes else 0) for i in range(nodes)]
    return Geometry(n, c, nodes, n * c, per)


def _mem_value(mb: int) -> str:
    return f"{mb}M"


def build(o: Options, cfg: SiteConfig, ctx: Context) -> Submission:
    """The qsub argv of a Slurm request, the notes that explain each flag, and the typed request
    stored beside the job: one section per kind of option, in the order the flags are written."""
    prog = ctx.prog
    argv: list[str] = ["-terse"]
    notes: list[tuple[str, str, str]] = []
    resources: list[str] = []

    def note(opt: str, flags: list[str] | str, why: str = "") -> None:
        notes.append((opt, flags if isinstance(flags, str) else " ".join(flags), why))

    partition, part = _partition(o, cfg, prog, argv, note)
    name = _name(o, ctx, argv, note)
    g = _geometry(o, part, ctx, argv, note)
    _binding(o, g, ctx, argv, note)
    total_mb, gpus = _memory(o, cfg, part, g, prog, resources, note)
    limit = _time(o, part, resources, note)
    _placement(o, cfg, part, g, prog, argv, resources, note)
    if resources:
        argv += ["-l", ",".join(resources)]
    if total_mb or gpus or o.gres or o.licenses or one_host_cpus(o, g) and cpus_refused_at_submit():
        # Slurm refuses at submission what no node (or license pool) could ever hold; Grid Engine
        # does the same only when asked to verify (-w e).
        argv += ["-w", "e"]

    array = _array(o, argv, note)
    checks, dep_warnings = _dependency(o, prog, name, ctx, argv, note)
    _scheduling(o, cfg, ctx, prog, argv, note)
    _io(argv, note)
    request = _request(o, cfg, ctx, name, partition, g, total_mb, gpus, limit, checks, array)
    sub = Submission(argv, request, notes, array)
    sub.warnings = dep_warnings
    return sub


def _partition(o: Options, cfg: SiteConfig, prog: str, argv: list[str], note: "Note") -> tuple[str, Any]:
    # Partition -> queue. Grid Engine has no partitions; each maps to a queue in the site config.
    # A list is valid only when every member is (Slurm's get_part_list); the job goes to the first.
    members = partition_list(o.partition or cfg.default_partition, cfg, prog)
    members = check_node_count(o, cfg, members, prog)  # the job goes to the first that fits
    partition = members[0]
    part = cfg.partitions[partition]
    argv += ["-q", part.queue]
    note("--partition" if o.partition else "(default partition)", f"-q {part.queue}", f"partition {partition}")

    return partition, part


def _name(o: Options, ctx: Context, argv: list[str], note: "Note") -> str:
    # Name: Grid Engine refuses many names Slurm accepts; names.encode keeps them reversibly.
    name = o.job_name or ctx.script_name
    argv += ["-N", names.encode(name)]
    note("--job-name" if o.job_name else "(job name)", f"-N {names.encode(name)}",
         "" if names.encode(name) == name else "encoded: Grid Engine refuses this name as it is")

    return name


def _geometry(o: Options, part: Any, ctx: Context, argv: list[str], note: "Note") -> Geometry:
    # Geometry: Grid Engine counts slots; a parallel environment spreads them. $pe_slots (smp) keeps
    # a job on one host as Slurm does for -N1; several nodes use the round-robin PE, which cannot
    # pin an exact node count or tasks per node, unless the Grid Engine takes a per-job allocation
    # rule (OCS 9.1's -par N: N slots on each host, the capability "par"): then an even layout on
    # a fixed node count is exact. (Not -w e: Slurm takes a job for more nodes than there are and
    # keeps it pending, sbatch_accepted_too_many_nodes; Grid Engine's "no suitable queues" would
    # not tell that from a node too small for the per-node share.)
    g = geometry(o, ctx.prog)
    if g.slots > 1 or g.nodes > 1:
        pe = part.pe_multinode if g.nodes > 1 else part.pe
        argv += ["-pe", pe, str(g.slots)]
        note("-n/-c/-N", f"-pe {pe} {g.slots}",
             f"{g.ntasks} task(s) x {g.cpus_per_task} CPU(s) on {g.nodes} node(s)")
        per_node = g.slots // g.nodes
        fixed = not isinstance(o.nodes, tuple) or o.nodes[0] == o.nodes[1]
        if (g.nodes > 1 and fixed and per_node * g.nodes == g.slots and len(set(g.tasks_per_node)) == 1
                and ctx.capabilities is not None and ctx.capabilities.par):
            argv += ["-par", str(per_node)]
            note("-N/--ntasks-per-node", f"-par {per_node}", f"{per_node} slot(s) on each of {g.nodes} hosts")

    return g


def _binding(o: Options, g: Geometry, ctx: Context, argv: list[str], note: "Note") -> None:
    # CPU binding: --hint, --threads-per-core and srun's --cpu-bind as OCS 9.1's binding request
    # (capability "btype"), asked only when one of them is given and maps (binding below).
    bind = binding(o, g)
    if bind is not None and ctx.capabilities is not None and ctx.capabilities.btype:
        flags, honoured, why = bind
        argv += flags
        note("/".join(f"--{h}" for h in honoured), flags, why)



def _memory(o: Options, cfg: SiteConfig, part: Any, g: Geometry, prog: str, resources: list[str], note: "Note"
            ) -> tuple[int | None, int]:
    # Memory: Slurm's --mem is per node, --mem-per-cpu per CPU; a Grid Engine consumable is charged
    # per slot (YES), per job (JOB) or per host, so the request is rescaled to the complex's scope.
    mem = cfg.memory
    total_mb = None
    if o.mem is not None:
        total_mb = o.mem * g.nodes if o.mem else None
        opt = "--mem"
    elif o.mem_per_cpu is not None:
        total_mb = o.mem_per_cpu * g.slots
        opt = "--mem-per-cpu"
    elif o.mem_per_gpu is not None:
        total_mb = None  # resolved below once the GPU count is known
        opt = "--mem-per-gpu"
    gpus = _gpu_count(o, g)
    check_memory(o, cfg, part, g, gpus, prog)
    if o.mem_per_gpu is not None and gpus:
        total_mb = o.mem_per_gpu * gpus
    if total_mb:
        if mem.scope == "slot":
            value = math.ceil(total_mb / g.slots)
        elif mem.scope == "host":
            value = math.ceil(total_mb / g.nodes)
        else:
            value = total_mb
        resources.append(f"{mem.complex}={_mem_value(value)}")
        note(opt, f"-l {mem.complex}={_mem_value(value)}", f"{total_mb} MB in all, charged per {mem.scope}")

    return total_mb, gpus


def _time(o: Options, part: Any, resources: list[str], note: "Note") -> int | None:
    # Time: --time -> h_rt. The job wrapper enforces the limit itself (SIGTERM, then SIGKILL, and a
    # TIMEOUT record); h_rt is Grid Engine's backstop a little later.
    limit = o.time
    if limit is None and part.default_time:
        limit = time_minutes(part.default_time)
    if limit is not None and limit != INFINITE:
        backstop = h_rt_backstop(limit)
        resources.append(f"h_rt={backstop}")
        note("--time", f"-l h_rt={backstop}", f"{limit} min; the wrapper sends SIGTERM at the limit")

    return limit


def _placement(o: Options, cfg: SiteConfig, part: Any, g: Geometry, prog: str, argv: list[str],
               resources: list[str], note: "Note") -> None:
    """GPUs and gres, licenses, features, the node list and exclusions, --exclusive."""
    # GPUs and any other gres -> the consumables named in the site config; a type (model) -> its
    # own complex, or the host complex that selects it (gres_resources).
    check_gres(o, g, prog)
    for flags, why, what in gres_resources(_gres_requests(o, g, prog), cfg, g, prog):
        resources.extend(flags)
        note(why, "-l " + ",".join(flags), what)

    # Licenses -> cluster-wide consumables (the model-API seat case: -L anthropic_api:1).
    for lname, count in _license_requests(o, prog, cfg):
        c = cfg.licenses.get(lname)
        if c is None:
            raise refused(prog, "Invalid license specification")
        resources.append(f"{c.complex}={count}")
        note("--licenses", f"-l {c.complex}={count}", "cluster-wide consumable")

    # Features -> boolean complexes.
    if o.constraint:
        for feat in _features(o.constraint, prog):
            complex_ = cfg.features.get(feat)
            if complex_ is None:
                raise refused(prog, "Invalid feature specification")
            resources.append(f"{complex_}=true")
            note("--constraint", f"-l {complex_}=true", f"feature {feat}")

    if o.nodelist or o.nodefile:
        hosts = _hosts(o.nodelist) if o.nodelist else _hosts_from_file(o.nodefile, prog)
        argv += ["-q", ",".join(f"{part.queue}@{h}" for h in hosts)]
        note("--nodelist", f"-q {part.queue}@...", "Grid Engine picks among these hosts; it cannot require all")
    if o.exclude:
        hosts = _hosts(o.exclude)
        resources.append("h=" + "&".join(f"!{h}" for h in hosts))
        note("--exclude", "-l h=!...", "")
    if o.exclusive and o.exclusive != "oversubscribe":  # --exclusive=oversubscribe means sharing is fine
        if not cfg.get("exclusive_complex"):
            raise command_error(prog, "--exclusive: this site's config names no exclusive complex "
                       "(Grid Engine cannot reserve whole hosts without one)")
        resources.append(f"{cfg.exclusive_complex}=true")
        note("--exclusive", f"-l {cfg.exclusive_complex}=true", "the whole host (user/mcs/topo modes alike)")



def _array(o: Options, argv: list[str], note: "Note") -> list[int] | None:
    # Arrays: Grid Engine task ids start at 1 and only allow one range with a step, so tasks are
    # numbered 1..K and the wrapper maps task k to Slurm's k-th index.
    array = None
    if o.array:
        array, throttle = o.array
        argv += ["-t", f"1-{len(array)}"]
        note("--array", f"-t 1-{len(array)}", "task k runs Slurm index k of the list")
        if throttle:
            argv += ["-tc", str(throttle)]
            note("--array %", f"-tc {throttle}", "")

    return array


def _dependency(o: Options, prog: str, name: str, ctx: Context, argv: list[str], note: "Note"
                ) -> tuple[list[tuple[str, list[str]]], list[str]]:
    # Dependencies: -hold_jid alone means afterany; afterok/afternotok are checked by the wrapper
    # when the job starts (a failed condition cancels the job, as kill-on-invalid-dep).
    checks: list[tuple[str, list[str]]] = []
    dep_warnings: list[str] = []
    if o.kill_on_invalid_dep is not None and not o.kill_on_invalid_dep:
        raise command_error(prog, "--kill-on-invalid-dep=no: on Grid Engine a job whose dependency can never be "
                   "satisfied is always cancelled")
    if o.dependency:
        holds, holds_ad, checks, dep_warnings = _dependencies(o.dependency, prog, name, ctx)
        if holds:
            argv += ["-hold_jid", ",".join(holds)]
            note("--dependency", f"-hold_jid {','.join(holds)}", "afterok/afternotok also checked at start")
        if holds_ad:
            argv += ["-hold_jid_ad", ",".join(holds_ad)]
            note("--dependency", f"-hold_jid_ad {','.join(holds_ad)}", "aftercorr")

    return checks, dep_warnings


def _scheduling(o: Options, cfg: SiteConfig, ctx: Context, prog: str, argv: list[str], note: "Note") -> None:
    """When and as whom: --begin, --hold, --account (and the project), mail, priority, nice, requeue."""
    if o.begin is not None:
        b: datetime = o.begin
        argv += ["-a", ge_date(b)]
        note("--begin", f"-a {ge_date(b)}", "")
    if o.hold:
        argv += ["-h"]
        note("--hold", "-h", "")
    if o.account:
        # Grid Engine refuses '@', ':', '/', '*', blanks... in an account (project@gpu is common):
        # stored reversibly as job names are; squeue, sacct and scontrol decode it.
        account = names.encode(o.account)
        argv += ["-A", account]
        note("--account", f"-A {account}", "" if account == o.account else "encoded: Grid Engine refuses this account as it is")
    project = {"qos": o.qos, "wckey": o.wckey, "account": o.account}.get(cfg.cluster.project_from)
    if project:
        argv += ["-P", project]
        note(f"--{cfg.cluster.project_from}", f"-P {project}", "Grid Engine project, as the site config says")
    if o.mail_type:
        letters = _mail_letters(o.mail_type)
        argv += ["-m", letters]
        note("--mail-type", f"-m {letters}", "")
    if o.mail_user:
        argv += ["-M", o.mail_user]
        note("--mail-user", f"-M {o.mail_user}", "")
    if o.priority is not None:
        # Slurm: --priority is for operators. Grid Engine: -p above 0 is for operators too.
        prio = max(-1023, min(1024, int(o.priority)))
        argv += ["-p", str(prio)]
        note("--priority", f"-p {prio}", "Grid Engine accepts values above 0 from operators only")
    if o.nice is not None:
        # Slurm: a higher nice is a lower priority; a negative one is for operators (job_mgr.c
        # validate_job_create_req: ESLURM_INVALID_NICE), as in scontrol update (nice_priority).
        prio = nice_priority(int(o.nice), privileged=ctx.uid == 0)
        if prio is None:
            raise refused(prog, "Invalid --nice value")
        argv += ["-p", str(prio)]
        note("--nice", f"-p {prio}", "")
    if o.requeue is not None:
        argv += ["-r", "y" if o.requeue else "n"]
        note("--requeue" if o.requeue else "--no-requeue", f"-r {'y' if o.requeue else 'n'}", "")



def _io(argv: list[str], note: "Note") -> None:
    # I/O: the wrapper opens Slurm's output files itself (patterns, truncation, merged stderr), so
    # Grid Engine's own files go nowhere and a missing directory never parks the job in Eqw.
    argv += ["-o", "/dev/null", "-j", "y", "-wd", "/", "-S", "/bin/sh", "-notify"]
    note("--output/--error", "-o /dev/null -j y", "the job wrapper writes Slurm's files")
    note("(signals)", "-notify", "scancel: SIGTERM first, SIGKILL after the queue's notify time")



def _request(o: Options, cfg: SiteConfig, ctx: Context, name: str, partition: str, g: Geometry,
             total_mb: int | None, gpus: int, limit: int | None, checks: list[tuple[str, list[str]]],
             array: list[int] | None) -> JobRequest:
    """The typed request stored beside the job (what the wrapper, squeue, scontrol and sacct read)."""
    workdir = o.chdir or ctx.cwd
    if not os.path.isabs(workdir):
        workdir = os.path.normpath(os.path.join(ctx.cwd, workdir))
    return JobRequest(
        name=name,
        partition=partition,
        workdir=workdir,
        submit_dir=ctx.cwd,
        submit_host=ctx.host,
        stdout=o.output,
        stderr=o.error,
        stdin=o.input,
        open_mode=o.open_mode,
        ntasks=g.ntasks,
        ntasks_set=o.ntasks is not None or o.ntasks_per_node is not None,
        cpus_per_task=g.cpus_per_task,
        cpus_per_task_set=o.cpus_per_task is not None,
        ntasks_per_node=o.ntasks_per_node,
        nodes=g.nodes,
        tasks_per_node=g.tasks_per_node,
        mem_mb=o.mem,
        mem_per_cpu_mb=o.mem_per_cpu if o.mem is None else None,
        mem_per_gpu_mb=o.mem_per_gpu,
        default_mem_per_cpu=cfg.memory.default_per_cpu_mb,
        gpus=gpus,
        gpus_per_task=o.gpus_per_task,
        gpus_opt=o.raw.get("gpus"),
        gpus_per_node_opt=o.raw.get("gpus_per_node"),
        distribution=o.raw.get("distribution"),
        hint=o.raw.get("hint"),
        time=limit if limit is not None else INFINITE,
        kill_wait=KILL_WAIT,
        signal=list(o.signal) if o.signal else None,
        account=o.account,
        qos=o.qos,
        comment=o.comment,
        dependency=o.raw.get("dependency"),
        dep_checks=checks,
        array=array,
        throttle=o.array[1] if o.array else None,
        array_step=_array_step(o),
        cluster=cfg.cluster.name,
        state_dir=cfg.cluster.state_dir,
        licenses=o.raw.get("licenses"),
        gres=o.raw.get("gres"),
        requeue=o.requeue,
        nice=o.nice,
        begin=o.begin.timestamp() if o.begin is not None else None,
        asked={"mem": bool(total_mb), "gpus": bool(gpus or o.gres), "licenses": bool(o.licenses),
               **_exclusive_asked(o)},
    )


# --- CPU binding (OCS 9.1: -btype/-bunit/-bamount, the capability "btype") -------------------------
#
# OCS 9.1 schedules binding units as resources: "-btype slot -bunit C -bamount 1" gives each of the
# job's slots one core of its own (T: one hardware thread), and execd binds the job's processes on a
# host to the union of that host's units (SGE_BINDING_CPUSET). The translator asks one slot per
# Slurm CPU, so one unit per slot is Slurm's allocation: --hint=nomultithread and
# --threads-per-core=1 (one thread of each core used: whole cores), --hint=multithread (each CPU a
# hardware thread). Slurm binds each task; Grid Engine binds the job's processes on a host, so
# for --cpu-bind=cores|threads (srun's own job) the job asks one such unit per CPU and each host's
# step launcher binds each task to its share of them (runtime/steps/launch.task_cpus, as it does
# for a step of any job Grid Engine bound); --cpu-bind=none is "-bamount 0", which also lifts a
# site's implicit binding (binding_params implicit=true). Everything else (sockets, ldoms, map/mask lists, --hint's
# compute_bound/memory_bound, --threads-per-core above 1) keeps its warning. Debian's SGE 8.1.9
# has only the old -binding, a hint execd may ignore, which does not keep a CPU's meaning: unused.

BIND_OPTIONS = ("hint", "threads_per_core", "cpu_bind")  # the request keys of the binding options
_HINT_RIVALS = ("ntasks_per_core", "cores_per_socket", "sockets_per_node", "threads_per_core", "extra_node_info")


def cpu_bind_type(text: str | None) -> tuple[str | None, str | None, bool]:
    """--cpu-bind's value as Slurm's slurm_verify_cpu_bind reads it: (what tasks are bound to:
    sockets/cores/threads/ldoms, the mode: none/map/mask/rank_ldom/map_ldom/mask_ldom, verbose).
    A comma followed by a digit belongs to a map/mask list. Unknown words are "?" (Slurm's srun
    refuses them; here the option keeps its warning)."""
    if not text:
        return None, None, False
    words, cur = [], ""
    for i, ch in enumerate(text):
        if ch == "," and not (i + 1 < len(text) and text[i + 1].isdigit()):
            words.append(cur)
            cur = ""
        else:
            cur += ch
    words.append(cur)
    to = mode = None
    verbose = False
    for w in (x.lower() for x in words):
        if w in ("q", "quiet"):
            verbose = False
        elif w in ("v", "verbose"):
            verbose = True
        elif w in ("no", "none"):
            mode = "none"
        elif w == "rank":
            pass  # obsolete: Slurm ignores it
        elif w.startswith(("map_cpu", "mapcpu")):
            mode = "map"
        elif w.startswith(("mask_cpu", "maskcpu")):
            mode = "mask"
        elif w == "rank_ldom" or w.startswith(("map_ldom", "mapldom", "mask_ldom", "maskldom")):
            mode = "ldom"
        elif w in ("socket", "sockets", "core", "cores", "thread", "threads", "ldom", "ldoms"):
            to = w.rstrip("s") + "s"
        else:
            mode = "?"
    return to, mode, verbose


def _by_cli(o: Options, key: str) -> bool:
    return o.source.get(key) in ("cli", "script")  # #SBATCH lines count as the command line, as in Slurm


def binding(o: Options, g: Geometry) -> tuple[list[str], tuple[str, ...], str] | None:
    """(qsub's binding flags, the options they honour, why) for a Grid Engine with -btype, or None
    when no binding option maps. --hint yields to a rival option given on the command line, and
    wins over rivals from the environment only when it is on the command line itself (Slurm's
    validate_hint_option)."""
    hint = o.raw.get("hint") if o.get("hint") is not None else None
    tpc = o.get("threads_per_core")
    to, mode, _verbose = cpu_bind_type(o.raw.get("cpu_bind") if o.get("cpu_bind") is not None else None)
    rivals = [k for k in _HINT_RIVALS if o.get(k) is not None]
    if to or mode:
        rivals.append("cpu_bind")
    if hint is not None and rivals and not (_by_cli(o, "hint") and not any(_by_cli(o, k) for k in rivals)):
        hint = None  # Slurm drops --hint
    if hint is not None:
        unit = {"nomultithread": "C", "multithread": "T"}.get(hint.lower())
        if unit is None:
            return None
        what = "one core" if unit == "C" else "one hardware thread"
        return (["-btype", "slot", "-bunit", unit, "-bamount", "1"], ("hint",),
                f"{what} per CPU, bound (execd binds the job to its units on each host)")
    honoured: list[str] = []
    unit = None
    if tpc == 1:
        unit = "C"
        honoured.append("threads-per-core")
    if mode == "none" and unit is None and to is None:
        return ["-bamount", "0"], ("cpu-bind",), "no binding (also none where the site binds jobs implicitly)"
    if mode is None and to in ("cores", "threads"):  # srun's launcher binds each task to its share
        unit = unit or ("C" if to == "cores" else "T")
        honoured.append("cpu-bind")
    if unit is None:
        return None
    what = "one core" if unit == "C" else "one hardware thread"
    return (["-btype", "slot", "-bunit", unit, "-bamount", "1"], tuple(honoured),
            f"{what} per CPU, bound (execd binds the job to its units on each host)")


def bound_warnings(warnings: list[str], o: Options, prog: str, caps: Any) -> list[str]:
    """The options' warnings less those of binding options the translation honours on this Grid
    Engine (capability "btype", probed only when such an option is given and maps)."""
    if not warnings or all(o.get(k) is None for k in BIND_OPTIONS):
        return warnings
    try:
        bind = binding(o, geometry(o, prog))
    except ShimError:
        return warnings  # the translation refuses the request itself
    if bind is None or caps is None or not caps.btype:
        return warnings
    spelled = {"cpu-bind": ("cpu-bind", "cpu_bind")}
    gone = tuple(f"{prog}: warning: --{name} has no effect " for h in bind[1] for name in spelled.get(h, (h,)))
    return [w for w in warnings if not w.startswith(gone)]


# --- what Slurm's controller (or its client-side gres check) refuses, decided from the site config --

_GRES_BAD = "Invalid generic resource (gres) specification"
_NODE_COUNT_BAD = "Node count specification invalid"


def refused(prog: str, reason: str, *before: str) -> ShimError:
    """A submission Slurm's controller refuses: ``<prog>: error: <lead-in>: <slurm_strerror>``
    (sbatch's "Batch job submission failed", srun's "Unable to allocate resources", salloc's
    "Job submit/allocate failed"), after any lines of its err_msg; exit 1."""
    from ...slurm.options.values import submit_failed

    line = submit_failed(prog, reason).lines[0]
    return ShimError(*(f"{prog}: error: {b}" for b in before), line, code=1)


def partition_list(text: str, cfg: SiteConfig, prog: str) -> list[str]:
    """The partitions of ``-p a,b`` in order (duplicates and empty words dropped), each of them one
    of the site's. As Slurm 22.05's ``_get_job_parts``/``get_part_list`` (partition_mgr.c): the
    first member that does not exist is named in the err_msg line, then ESLURM_INVALID_PARTITION_NAME;
    a list without a name (``-p ,``) names "(null)", as xstrfmtcat prints a NULL string."""
    members = list(dict.fromkeys(w for w in text.split(",") if w))
    bad = next((m for m in members if m not in cfg.partitions), None) if members else "(null)"
    if bad is not None:
        raise refused(prog, "Invalid partition name specified", f"invalid partition specified: {bad}")
    return members


def check_node_count(o: Options, cfg: SiteConfig, members: list[str], prog: str) -> list[str]:
    """Node counts Slurm 22.05's controller refuses with ESLURM_INVALID_NODE_COUNT:

    * ``-N 0``: ``_job_create`` (job_mgr.c) refuses a zero minimum for an array, or for a job
      without a batch script (srun, salloc); ``select_nodes`` (node_scheduler.c) refuses
      min = max = 0 for any job without a burst buffer. So ``sbatch -N 0-2`` is a job, ``sbatch
      -N 0`` and ``srun -N 0-2`` are not.
    * ``-w`` naming more nodes than ``-N``'s maximum (``_job_create``: the list raises min_nodes).
    * with ``cluster.enforce_part_limits`` (Slurm's EnforcePartLimits) ANY/ALL, more nodes than
      a partition with a ``nodes`` list has (``_part_access_check``'s total_nodes, through
      ``_valid_job_part``: ALL refuses when any partition of the list is too small, ANY when all
      are); NO (Slurm's default, and the reference cluster's: ``sbatch -N 2`` on one node was
      accepted) lets the job wait. A time limit over a partition's MaxTime is refused the same way
      (ESLURM_INVALID_TIME_LIMIT). Returns the partitions with those that fit first (ANY: the job
      runs in one that fits, as Slurm would schedule it there)."""
    lo, hi = o.nodes if isinstance(o.nodes, tuple) else (None, None)
    if lo == 0 and (hi == 0 or o.array or prog != "sbatch"):
        raise refused(prog, _NODE_COUNT_BAD)
    hosts = None
    if o.nodelist:
        hosts = set(_hosts(o.nodelist))
    if hosts and hi and len(hosts) > hi:
        raise refused(prog, _NODE_COUNT_BAD)
    enforce = cfg.cluster.get("enforce_part_limits", "NO")
    if enforce == "NO":
        return members
    want = max(lo or 0, len(hosts or ()))
    limit = o.time

    def fault(name: str) -> str | None:
        p = cfg.partitions[name]
        if p.nodes and want > len(p.nodes):
            return _NODE_COUNT_BAD
        if limit is not None and limit != INFINITE:
            top = time_minutes(str(p.max_time or "UNLIMITED"))
            if top is not None and top != INFINITE and limit > top:
                return "Requested time limit is invalid (missing or exceeds some limit)"
        return None

    faults = [fault(m) for m in members]
    bad = next((f for f in faults if f), None)
    if bad and (enforce == "ALL" or all(faults)):
        raise refused(prog, bad)
    return [m for m, f in zip(members, faults) if not f] + [m for m, f in zip(members, faults) if f]


def one_host_cpus(o: Options, g: Geometry) -> bool:
    """Several CPUs that must be on one host: a single task's ``-c`` (a task never spans nodes) or
    ``-N 1``'s tasks. Where no node of the partition has that many CPUs, 24.11 refuses at
    submission ("Requested node configuration is not available": operations/submit.check_fits,
    and Grid Engine's -w e behind it when no host can give the single-host PE that many slots);
    22.05 and 26.05 take the job and it pends, reason PartitionConfig (cpus_refused_at_submit;
    fixtures/slurm-*/oracle-rest.txt). Not for -n alone, which Slurm may spread over nodes, nor
    for a node count beyond the partition's, which Slurm keeps pending (PartitionNodeLimit) and
    -w e would refuse."""
    if g.slots <= 1 or g.nodes != 1:
        return False
    one_node = o.nodes == 1 or o.nodes == (1, 1)
    return one_node or (g.ntasks == 1 and not o.ntasks_per_node)


def cpus_refused_at_submit() -> bool:
    """Whether the site's release refuses at submission a job whose one node would need more CPUs
    than a node has (releases.NODE_CONFIG_AT_SUBMIT: 24.11). Where it takes such a job (22.05,
    26.05) the shim does not ask Grid Engine to verify it (-w e would refuse it): Grid Engine keeps
    it waiting, as Slurm keeps it pending."""
    from ...slurm import releases

    return releases.current().has(releases.NODE_CONFIG_AT_SUBMIT)


def check_memory(o: Options, cfg: SiteConfig, part: Any, g: Geometry, gpus: int, prog: str) -> None:
    """--mem, --mem-per-cpu or --mem-per-gpu that no node of the partition could hold: Slurm's
    select_nodes finds no node with that much memory (node_scheduler.c ``_set_err_msg``: "Memory
    specification can not be satisfied", then ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE). Decided
    here from the partition's ``node_memory_mb`` (RealMemory) when the site names it, else left to
    Grid Engine (-w e)."""
    top = part.get("node_memory_mb") or 0
    if not top:
        return
    cpus = g.cpus_per_task * max(g.tasks_per_node)
    if o.mem:
        need = o.mem
    elif o.mem_per_cpu:
        need = o.mem_per_cpu * cpus
    elif o.mem_per_gpu and gpus:
        need = o.mem_per_gpu * math.ceil(gpus / g.nodes)
    else:
        return
    if need > top:
        raise refused(prog, "Requested node configuration is not available",
                      "Memory specification can not be satisfied")


def check_gres(o: Options, g: Geometry, prog: str) -> None:
    """GPU requests that contradict each other or the job's geometry, refused as Slurm 22.05's
    ``gres_job_state_validate`` and ``_test_gres_cnt`` (src/common/gres.c) do. They run in the
    client (slurm_opt.c ``slurm_opt_create_job_desc``), which prints ESLURM_INVALID_GRES's text
    alone ("<prog>: error: Invalid generic resource (gres) specification", exit 1: the reference's
    ``sbatch --gres=fpga:1``). Slurm's names: gres_per_job is --gpus, gres_per_node --gpus-per-node
    or --gres=gpu:N, gres_per_task --gpus-per-task; num_tasks is -n (or --ntasks-per-node on a
    fixed node count, sbatch/opt.c), min/max nodes -N."""
    def count(spec: Any) -> int:
        return int(spec[-1]) if isinstance(spec, tuple) else 0

    per_job = count(o.gpus)
    per_node = count(o.gpus_per_node) or next((n for name, _t, n in o.gres or () if name == "gpu"), 0)
    per_task = count(o.gpus_per_task)
    lo, hi = o.nodes if isinstance(o.nodes, tuple) else (None, None)
    tasks = o.ntasks
    if tasks is None and o.ntasks_per_node and (not hi or lo == hi):
        tasks = (lo or 1) * o.ntasks_per_node
    per_gpu = o.ntasks_per_gpu or o.ntasks_per_tres
    bad = command_error(prog, _GRES_BAD)
    if o.mem_per_gpu is not None and not (per_job or per_node or per_task or (per_gpu and tasks)):
        raise bad  # mem_per_tres without any GPU
    if per_gpu and not (per_job or per_node or per_task) and not tasks:
        raise bad  # --ntasks-per-gpu needs GPUs or a task count
    if o.cpus_per_gpu and o.cpus_per_task:
        raise bad  # --cpus-per-gpu is mutually exclusive with --cpus-per-task
    if per_job and (per_node > per_job or per_task > per_job):
        raise bad
    if per_node and per_task > per_node:
        raise bad
    if per_job and per_node:
        if per_job % per_node:
            raise bad
        need = per_job // per_node
        if (lo is not None and need < lo) or (hi and need > hi):
            raise bad
    if per_gpu and tasks and (per_job or per_node or per_task) and tasks % per_gpu:
        raise bad
    if per_task:
        if per_job:
            if per_job % per_task or (tasks is not None and tasks != per_job // per_task):
                raise bad
        elif tasks is None:
            raise bad  # --gpus-per-task without --gpus or -n
    if per_node and per_task:
        if per_node % per_task or (o.ntasks_per_node and o.ntasks_per_node != per_node // per_task):
            raise bad
    if per_job and lo is not None and per_job < lo:
        raise bad


def gres_resources(requests: list[tuple[str, str | None, int, str]], cfg: SiteConfig, g: Geometry,
                   prog: str) -> list[tuple[list[str], str, str]]:
    """Each gres request (name, type, count in all, option) as Grid Engine resource requests:
    ([complex=value, ...], option, note). A name the site has no consumable for is Slurm's
    client-side ESLURM_INVALID_GRES (gres.c ``_get_next_job_gres``: no such GresTypes plugin). A
    type (model) is a node property in Slurm (gres.conf Type=): one no node has leaves no node to
    run on, ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE at the controller, which is what the shim
    says for a type the site's ``[gres.<name>.types]`` does not list. A listed type is either its
    own consumable (``complex``) or, with the resource's ``select`` complex, a host complex that
    must equal the type's value, with the count on the resource's complex."""
    out: list[tuple[list[str], str, str]] = []
    selected: dict[str, str] = {}
    for gname, gtype, count, why in requests:
        c = cfg.gres.get(gname)
        if c is None:
            raise command_error(prog, _GRES_BAD)
        complex_, extra = c.complex, []
        if gtype is not None:
            t = (c.get("types") or {}).get(gtype)
            if t is None:
                raise refused(prog, "Requested node configuration is not available")
            if c.get("select"):
                value = t.get("value") or gtype
                if selected.setdefault(c.select, value) != value:  # one host complex has one value
                    raise refused(prog, "Requested node configuration is not available")
                extra = [f"{c.select}={value}"]
                complex_ = t.get("complex") or c.complex
            else:
                complex_ = t.complex
        value = count if c.scope != "slot" else math.ceil(count / g.slots)
        what = f"{count} {gname}" + (f" of type {gtype}" if gtype else "") + " in all"
        out.append(([f"{complex_}={value}", *extra], why, what))
    return out


def _gpu_count(o: Options, g: Geometry) -> int:
    def count(spec: Any) -> int:
        if isinstance(spec, tuple):
            return int(spec[-1])
        return int(str(spec).rsplit(":", 1)[-1])

    if o.gpus:
        return count(o.gpus)
    if o.gpus_per_node:
        return count(o.gpus_per_node) * g.nodes
    if o.gpus_per_task:
        return count(o.gpus_per_task) * g.ntasks
    gres = sum(n for name, _typ, n in o.gres or () if name == "gpu") * g.nodes
    per_gpu = o.ntasks_per_gpu or o.ntasks_per_tres
    if not gres and per_gpu and o.ntasks:
        return o.ntasks // per_gpu  # Slurm makes gres:gpu:<ntasks/ntasks-per-gpu> (gres_job_state_validate)
    return gres


def _gres_requests(o: Options, g: Geometry, prog: str) -> list[tuple[str, str | None, int, str]]:
    """(name, type or None, count in all, option) per requested gres; a --gpus* option replaces
    --gres's GPUs (as before), and a name asked for twice with the same type counts once, the
    last word winning."""
    out: dict[tuple[str, str | None], tuple[int, str]] = {}
    for name, typ, n in o.gres or ():
        out[(name, typ)] = (n * g.nodes, "--gres")  # Slurm's --gres is per node
    gpus = 0
    for key, why in (("gpus", "--gpus"), ("gpus_per_node", "--gpus-per-node"), ("gpus_per_task", "--gpus-per-task")):
        spec = o.get(key)
        if spec:
            gpus, gtype = _gpu_count(o, g), spec[0] if isinstance(spec, tuple) else None
            break
    if not gpus and not any(k[0] == "gpu" for k in out):
        gpus, gtype, why = _gpu_count(o, g), None, "--ntasks-per-gpu"
    if gpus:
        out = {k: v for k, v in out.items() if k[0] != "gpu"}
        out[("gpu", gtype)] = (gpus, why)
    return [(k[0], k[1], n, why) for k, (n, why) in out.items() if n > 0]


def _license_requests(o: Options, prog: str, cfg: SiteConfig) -> list[tuple[str, int]]:
    lic = o.licenses
    if not lic:
        return []
    if isinstance(lic, dict) and lic.get("op") == "or":
        # any one of them (26.05): every alternative must be a license, within its total; Grid
        # Engine is asked for the first with its seats free, else the first (``free``, ``total``:
        # filled by operations/submit.free_seats)
        from ...slurm.options.values import either_license

        total = lic.get("total") or {}
        if any(name not in cfg.licenses or count > total.get(name, count) for name, count in lic["items"]):
            raise refused(prog, "Invalid license specification")
        return [either_license(lic["items"], lic.get("free") or {})]
    items = lic["items"] if isinstance(lic, dict) else lic
    return [(name, count) for name, count in items]


def _features(expr: str, prog: str) -> list[str]:
    if any(ch in expr for ch in "|[]*"):
        raise command_error(prog, "--constraint: only '&'/',' lists of features map to Grid Engine complexes")
    return [f for f in expr.replace("&", ",").split(",") if f]


def _hosts(spec: Any) -> list[str]:
    if isinstance(spec, list):
        return spec
    from ...slurm.hostlist import expand

    return expand(str(spec))


def _hosts_from_file(path: str, prog: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            words = f.read().replace(",", " ").split()
    except OSError:
        raise command_error(prog, f"Unable to open nodefile {path}") from None
    from ...slurm.hostlist import expand

    return [h for w in words for h in expand(w)]


def _exclusive_asked(o: Options) -> dict:
    """How the job shares its hosts, as 26.05's SLURM_JOB_EXCLUSIVE (NODE, USER, MCS, TOPO) and
    SLURM_JOB_OVERSUBSCRIBE (YES) name it, for the job's environment (jobenv.release_env);
    nothing for neither (NO, NO)."""
    mode = o.exclusive
    if o.oversubscribe or mode == "oversubscribe":
        return {"oversubscribe": "YES"}
    if not mode:
        return {}
    return {"exclusive": "NODE" if mode in (True, "exclusive") else str(mode).upper()}


def _array_step(o: Options) -> Any:
    """SLURM_ARRAY_TASK_STEP when it is not 1 (jobids.array_step: slurmctld reads the number after
    the first ``:`` of the --array text); MISSING leaves the field out of the record."""
    from ...slurm.jobids import array_step
    from ...slurm.request import MISSING

    text = o.raw.get("array") if o.array else None
    step = array_step(text) if isinstance(text, str) else 1
    return step if step != 1 else MISSING


def _mail_letters(types: Any) -> str:
    kinds = set(types) if not isinstance(types, str) else set(types.upper().split(","))
    if "NONE" in kinds:
        return "n"
    letters = ""
    if kinds & {"BEGIN", "ALL"}:
        letters += "b"
    if kinds & {"END", "ALL"}:
        letters += "e"
    if kinds & {"FAIL", "ALL", "REQUEUE", "INVALID_DEPEND"} or any(k.startswith("TIME_LIMIT") for k in kinds):
        letters += "a"
    return letters or "n"


def dependency_ids(ids: list[str]) -> list[tuple[str, int | None]]:
    """A dependency's job ids as (Grid Engine job, Slurm index or None): ``G``, ``G_*`` (the
    whole array, as Slurm reads it) and ``G_t``; an array task's own id (``t * 10**10 + G``,
    jobids.split_task_id) is ``G_t``. Ids values.dependency let through (digits, ``_``, ``+``)."""
    from ...slurm.jobids import split_task_id

    out: list[tuple[str, int | None]] = []
    for ident in ids:
        head, under, task = ident.partition("_")
        if under:
            out.append((head, None if task == "*" else int(task)))
        else:
            job, t = split_task_id(int(head))
            out.append((str(job), t))
    return out


def _task_dependency_warning(prog: str, kind: str, jobs: list[tuple[str, int | None]]) -> str:
    """``sbatch: warning: --dependency afterok on 7_3, 8_[1-4]: Grid Engine holds a job on whole
    arrays only: this job waits for every task of 7, 8 (afterok is checked on the tasks named)``."""
    from ...slurm.jobids import compress

    per: dict[str, list[int]] = {}
    for j, t in jobs:
        if t is not None:
            per.setdefault(j, []).append(t)
    named = ", ".join(f"{j}_{ts[0]}" if len(set(ts)) == 1 else f"{j}_[{compress(ts)}]" for j, ts in per.items())
    tail = f" ({kind} is checked on the tasks named)" if kind != "afterany" else ""
    return (f"{prog}: warning: --dependency {kind} on {named}: Grid Engine holds a job on whole arrays only: "
            f"this job waits for every task of {', '.join(per)}{tail}")


def _dependencies(dep: Any, prog: str, name: str, ctx: Context):
    """Slurm dependency -> (-hold_jid ids, -hold_jid_ad ids, checks for the wrapper, warnings).

    Grid Engine holds a job on whole jobs (-hold_jid) or pairs the tasks of two arrays
    (-hold_jid_ad), never on one task of another array: a dependency on a task (``G_t``, or the
    task's own id) holds on its whole array G, says so in a warning, and afterok/afternotok still
    check that one task when the job starts; aftercorr on one task cannot be expressed and is
    refused."""
    op, terms = dep
    if op == "or" and len(terms) > 1:
        raise command_error(prog, "--dependency with '?' (any of): Grid Engine can only wait for all of its holds")
    holds: list[str] = []
    holds_ad: list[str] = []
    checks: list[tuple[str, list[str]]] = []
    warnings: list[str] = []
    for kind, ids in terms:
        ids = [str(i) for i in ids]
        if any("+" in i for i in ids):
            raise command_error(prog, f"--dependency {kind}:<id>+<minutes>: Grid Engine has no delayed dependency")
        if kind == "singleton":
            holds.append(names.encode(name))
            continue
        if kind == "after":
            raise command_error(prog, "--dependency after:<id> (start of another job): Grid Engine can only wait for its end; "
                       "use afterany")
        if kind not in ("afterany", "afterok", "afternotok", "aftercorr"):
            raise command_error(prog, f"--dependency {kind}: not available on Grid Engine")
        jobs = dependency_ids(ids)
        tasks = [f"{j}_{t}" for j, t in jobs if t is not None]
        if kind == "aftercorr":
            if tasks:
                raise command_error(prog, f"--dependency aftercorr:{tasks[0]}: Grid Engine pairs the tasks of whole arrays "
                           "(-hold_jid_ad); name the array")
            holds_ad += [j for j, _ in jobs]
            continue
        holds += [j for j, _ in jobs]
        if tasks:
            warnings.append(_task_dependency_warning(prog, kind, jobs))
        if kind in ("afterok", "afternotok"):
            checks.append((kind, [j if t is None else f"{j}_{t}" for j, t in jobs]))
    # one hold per job: N_[a-b] names each task, but Grid Engine holds on the whole array
    return list(dict.fromkeys(holds)), list(dict.fromkeys(holds_ad)), checks, warnings


# --- the same translation for srun's and salloc's jobs ----------------------------------------

QRSH_NO_ARG = frozenset({"-h", "-notify"})
QRSH_DROPPED = frozenset({"-o", "-e", "-j", "-wd", "-S", "-w", "-t", "-tc", "-r", "-a", "-cwd"})


def qrsh_flags(qsub_argv: list[str]) -> list[str]:
    """``build``'s argv as qrsh flags (srun outside an allocation): qrsh takes the same -q/-N/-pe/
    -l/-hold_jid/-A/-P/-p/-m/-M/-h/-notify; the batch-only ones (output files, shell, array,
    rerun, start time) go; the job's own process chdirs itself, so Grid Engine starts it in /
    (never a directory others can write)."""
    out: list[str] = []
    i = 0
    while i < len(qsub_argv):
        a = qsub_argv[i]
        if a == "-terse":
            i += 1
        elif a in QRSH_NO_ARG:
            out.append(a)
            i += 1
        elif a == "-pe":
            out += qsub_argv[i:i + 3]
            i += 3
        elif a in QRSH_DROPPED:
            i += 1 if a == "-cwd" else 2
        else:
            out += qsub_argv[i:i + 2]
            i += 2
    return out + ["-wd", "/"]


def allocation_pes(cfg: SiteConfig, partition: str) -> list[str]:
    """The parallel environments an allocation of this partition may use, in order of preference."""
    part = cfg.partitions[partition]
    return list(dict.fromkeys([part.pe, part.pe_multinode]))


def allocation_argv(argv: list[str], cfg: SiteConfig, partition: str, first_task_pe: str | None) -> list[str]:
    """salloc's job: srun reaches an allocation with qrsh -inherit, which only works in a parallel
    environment, so a one-slot allocation (no -pe from ``build``) gets one: ``first_task_pe``, a
    PE whose job script does not count as a task (``GridEngine.first_task_pe``), else the
    partition's PE with one more slot than Slurm would ask."""
    if "-pe" in argv:
        return list(argv)
    extra = ["-pe", first_task_pe, "1"] if first_task_pe else ["-pe", cfg.partitions[partition].pe, "2"]
    i = argv.index("-q") + 2 if "-q" in argv else 1
    return [*argv[:i], *extra, *argv[i:]]


def nice_priority(nice: int, privileged: bool = False) -> int | None:
    """Slurm's nice (a higher nice is a lower priority) as Grid Engine's ``-p`` (-1023..1024, higher
    runs first), for submission and ``scontrol update``. As Slurm (job_mgr.c), only an operator may
    ask for a negative nice; Grid Engine likewise takes ``-p`` above 0 from operators only. None:
    the caller may not (Slurm refuses: ESLURM_INVALID_NICE at submission, Access/permission
    denied in an update)."""
    if nice < 0 and not privileged:
        return None
    return max(-1023, min(1024, -nice))


def h_rt_backstop(minutes: int, wrapped: bool = True) -> int:
    """Grid Engine's ``h_rt`` (seconds) for a Slurm time limit. A job under the shim's wrapper is
    ended by the wrapper at the limit (SIGTERM, KillWait, SIGKILL): h_rt is Grid Engine's backstop
    a little later. A job without the wrapper (not submitted through the shim) has only h_rt."""
    return minutes * 60 + (KILL_WAIT + 30 if wrapped else 0)


def ge_date(when: datetime) -> str:
    """A moment as Grid Engine's date_time, ``[[CC]YY]MMDDhhmm[.SS]`` in local time (qsub's and
    qalter's ``-a``): for ``sbatch --begin`` and ``scontrol update StartTime``."""
    return when.strftime("%Y%m%d%H%M.%S")
