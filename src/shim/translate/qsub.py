"""Slurm job request -> qsub argv, driven by the site config.

``build(opts, cfg, ctx)`` is pure: it returns the argv for ``qsub`` (the job wrapper script goes on
stdin), the payload the job wrapper needs at run time, and one note per option for
``slurm-shim explain``. Each branch says why Grid Engine needs something other than a 1:1 flag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import SiteConfig

import math
import os
from datetime import datetime
from typing import Any

from .. import names
from ..errors import ShimError
from ..options.sources import Options
from ..options.values import INFINITE, time_minutes


class Context:
    """Facts about the submission that are not options."""

    def __init__(self, prog: str = "sbatch", cwd: str = "/", script_name: str = "sbatch", user: str = "root",
                 uid: int = 0, gid: int = 0, host: str = "localhost", environ: dict[str, str] | None = None):
        self.prog, self.cwd, self.script_name = prog, cwd, script_name
        self.user, self.uid, self.gid, self.host = user, uid, gid, host
        self.environ = environ or {}


class Submission:
    """qsub's argv, the job wrapper's payload, and one (option, flags, note) per translated option."""

    def __init__(self, argv: list[str], payload: dict[str, Any], notes: list[tuple[str, str, str]],
                 array: list[int] | None = None):
        self.argv = argv
        self.payload = payload
        self.notes = notes
        self.array = array
        self.warnings: list[str] = []
        self.after: list[str] = []  # warnings about bookkeeping once Grid Engine has the job


def fail(prog: str, msg: str) -> ShimError:
    return ShimError(f"{prog}: error: {msg}", code=1)


def submission_failed(prog: str, msg: str) -> ShimError:
    return ShimError(f"{prog}: error: Batch job submission failed: {msg}", code=1)


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
        raise submission_failed(prog, "Node count specification invalid")
    per = [n // nodes + (1 if i < n % nodes else 0) for i in range(nodes)]
    return Geometry(n, c, nodes, n * c, per)


def _ge_time(minutes: int) -> str:
    return str(minutes * 60)


def _mem_value(mb: int) -> str:
    return f"{mb}M"


def build(o: Options, cfg: SiteConfig, ctx: Context) -> Submission:
    prog = ctx.prog
    argv: list[str] = ["-terse"]
    notes: list[tuple[str, str, str]] = []
    resources: list[str] = []

    def note(opt: str, flags: list[str] | str, why: str = "") -> None:
        notes.append((opt, flags if isinstance(flags, str) else " ".join(flags), why))

    # Partition -> queue. Grid Engine has no partitions; each maps to a queue in the site config.
    partition = o.partition or cfg.default_partition
    if "," in partition:
        partition = partition.split(",")[0]
    if partition not in cfg.partitions:
        raise ShimError(
            f"{prog}: error: invalid partition specified: {partition}",
            f"{prog}: error: {'Batch job submission failed' if prog == 'sbatch' else 'Unable to allocate resources'}:"
            " Invalid partition name specified",
            code=1,
        )
    part = cfg.partitions[partition]
    argv += ["-q", part.queue]
    note("--partition" if o.partition else "(default partition)", f"-q {part.queue}", f"partition {partition}")

    # Name: Grid Engine refuses many names Slurm accepts; names.encode keeps them reversibly.
    name = o.job_name or ctx.script_name
    argv += ["-N", names.encode(name)]
    note("--job-name" if o.job_name else "(job name)", f"-N {names.encode(name)}",
         "" if names.encode(name) == name else "encoded: Grid Engine refuses this name as it is")

    # Geometry: Grid Engine counts slots; a parallel environment spreads them. $pe_slots (smp) keeps
    # a job on one host as Slurm does for -N1; several nodes use the round-robin PE, which cannot
    # pin an exact node count or tasks per node.
    g = geometry(o, prog)
    if g.slots > 1 or g.nodes > 1:
        pe = part.pe_multinode if g.nodes > 1 else part.pe
        argv += ["-pe", pe, str(g.slots)]
        note("-n/-c/-N", f"-pe {pe} {g.slots}",
             f"{g.ntasks} task(s) x {g.cpus_per_task} CPU(s) on {g.nodes} node(s)")

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

    # Time: --time -> h_rt. The job wrapper enforces the limit itself (SIGTERM, then SIGKILL, and a
    # TIMEOUT record); h_rt is Grid Engine's backstop a little later.
    limit = o.time
    if limit is None and part.default_time:
        limit = time_minutes(part.default_time)
    if limit is not None and limit != INFINITE:
        backstop = limit * 60 + KILL_WAIT + 30
        resources.append(f"h_rt={backstop}")
        note("--time", f"-l h_rt={backstop}", f"{limit} min; the wrapper sends SIGTERM at the limit")

    # GPUs and any other gres -> the consumables named in the site config.
    for gname, count, why in _gres_requests(o, g, prog):
        c = cfg.gres.get(gname)
        if c is None:
            raise fail(prog, "Invalid generic resource (gres) specification")
        value = count if c.scope != "slot" else math.ceil(count / g.slots)
        resources.append(f"{c.complex}={value}")
        note(why, f"-l {c.complex}={value}", f"{count} {gname} in all")

    # Licenses -> cluster-wide consumables (the model-API seat case: -L anthropic_api:1).
    for lname, count in _license_requests(o, prog):
        c = cfg.licenses.get(lname)
        if c is None:
            raise submission_failed(prog, "Invalid license specification")
        resources.append(f"{c.complex}={count}")
        note("--licenses", f"-l {c.complex}={count}", "cluster-wide consumable")

    # Features -> boolean complexes.
    if o.constraint:
        for feat in _features(o.constraint, prog):
            complex_ = cfg.features.get(feat)
            if complex_ is None:
                raise submission_failed(prog, "Invalid feature specification")
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
            raise fail(prog, "--exclusive: this site's config names no exclusive complex "
                       "(Grid Engine cannot reserve whole hosts without one)")
        resources.append(f"{cfg.exclusive_complex}=true")
        note("--exclusive", f"-l {cfg.exclusive_complex}=true", "the whole host (user/mcs/topo modes alike)")

    if resources:
        argv += ["-l", ",".join(resources)]
    if total_mb or gpus or o.gres or o.licenses:
        # Slurm refuses at submission what no node (or license pool) could ever hold; Grid Engine
        # does the same only when asked to verify (-w e).
        argv += ["-w", "e"]

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

    # Dependencies: -hold_jid alone means afterany; afterok/afternotok are checked by the wrapper
    # when the job starts (a failed condition cancels the job, as kill-on-invalid-dep).
    checks: list[tuple[str, list[str]]] = []
    if o.kill_on_invalid_dep is not None and not o.kill_on_invalid_dep:
        raise fail(prog, "--kill-on-invalid-dep=no: on Grid Engine a job whose dependency can never be "
                   "satisfied is always cancelled")
    if o.dependency:
        holds, holds_ad, checks = _dependencies(o.dependency, prog, name, ctx)
        if holds:
            argv += ["-hold_jid", ",".join(holds)]
            note("--dependency", f"-hold_jid {','.join(holds)}", "afterok/afternotok also checked at start")
        if holds_ad:
            argv += ["-hold_jid_ad", ",".join(holds_ad)]
            note("--dependency", f"-hold_jid_ad {','.join(holds_ad)}", "aftercorr")

    if o.begin is not None:
        b: datetime = o.begin
        argv += ["-a", b.strftime("%Y%m%d%H%M.%S")]
        note("--begin", f"-a {b.strftime('%Y%m%d%H%M.%S')}", "")
    if o.hold:
        argv += ["-h"]
        note("--hold", "-h", "")
    if o.account:
        argv += ["-A", o.account]
        note("--account", f"-A {o.account}", "")
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
        # Slurm: a higher nice is a lower priority. Grid Engine users may only lower theirs (<= 0).
        prio = max(-1023, min(0, -int(o.nice)))
        argv += ["-p", str(prio)]
        note("--nice", f"-p {prio}", "")
    if o.requeue is not None:
        argv += ["-r", "y" if o.requeue else "n"]
        note("--requeue" if o.requeue else "--no-requeue", f"-r {'y' if o.requeue else 'n'}", "")

    # I/O: the wrapper opens Slurm's output files itself (patterns, truncation, merged stderr), so
    # Grid Engine's own files go nowhere and a missing directory never parks the job in Eqw.
    argv += ["-o", "/dev/null", "-j", "y", "-wd", "/", "-S", "/bin/sh", "-notify"]
    note("--output/--error", "-o /dev/null -j y", "the job wrapper writes Slurm's files")
    note("(signals)", "-notify", "scancel: SIGTERM first, SIGKILL after the queue's notify time")

    workdir = o.chdir or ctx.cwd
    if not os.path.isabs(workdir):
        workdir = os.path.normpath(os.path.join(ctx.cwd, workdir))
    payload = {
        "name": name,
        "partition": partition,
        "workdir": workdir,
        "submit_dir": ctx.cwd,
        "submit_host": ctx.host,
        "stdout": o.output,
        "stderr": o.error,
        "stdin": o.input,
        "open_mode": o.open_mode,
        "ntasks": g.ntasks,
        "ntasks_set": o.ntasks is not None or o.ntasks_per_node is not None,
        "cpus_per_task": g.cpus_per_task,
        "cpus_per_task_set": o.cpus_per_task is not None,
        "ntasks_per_node": o.ntasks_per_node,
        "nodes": g.nodes,
        "tasks_per_node": g.tasks_per_node,
        "mem_mb": o.mem,
        "mem_per_cpu_mb": o.mem_per_cpu if o.mem is None else None,
        "mem_per_gpu_mb": o.mem_per_gpu,
        "default_mem_per_cpu": cfg.memory.default_per_cpu_mb,
        "gpus": gpus,
        "gpus_per_task": o.gpus_per_task,
        "gpus_opt": o.raw.get("gpus"),
        "gpus_per_node_opt": o.raw.get("gpus_per_node"),
        "distribution": o.raw.get("distribution"),
        "hint": o.raw.get("hint"),
        "time": limit if limit is not None else INFINITE,
        "kill_wait": KILL_WAIT,
        "signal": list(o.signal) if o.signal else None,
        "account": o.account,
        "qos": o.qos,
        "comment": o.comment,
        "dependency": o.raw.get("dependency"),
        "dep_checks": checks,
        "array": array,
        "throttle": o.array[1] if o.array else None,
        "cluster": cfg.cluster.name,
        "state_dir": cfg.cluster.state_dir,
        "licenses": o.raw.get("licenses"),
        "gres": o.raw.get("gres"),
        "requeue": o.requeue,
        "nice": o.nice,
        "begin": o.begin.timestamp() if o.begin is not None else None,
        "asked": {"mem": bool(total_mb), "gpus": bool(gpus or o.gres), "licenses": bool(o.licenses)},
    }
    return Submission(argv, payload, notes, array)


KILL_WAIT = 30  # Slurm's default KillWait: seconds between SIGTERM and SIGKILL at the time limit


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
    for name, _typ, n in o.gres or ():
        if name == "gpu":
            return n * g.nodes
    return 0


def _gres_requests(o: Options, g: Geometry, prog: str) -> list[tuple[str, int, str]]:
    out: dict[str, tuple[int, str]] = {}
    for name, _typ, n in o.gres or ():
        out[name] = (n * g.nodes, "--gres")  # Slurm's --gres is per node
    gpus = 0
    if o.gpus:
        gpus, why = _gpu_count(o, g), "--gpus"
    elif o.gpus_per_node:
        gpus, why = _gpu_count(o, g), "--gpus-per-node"
    elif o.gpus_per_task:
        gpus, why = _gpu_count(o, g), "--gpus-per-task"
    if gpus:
        out["gpu"] = (gpus, why)
    return [(k, n, why) for k, (n, why) in out.items() if n > 0]


def _license_requests(o: Options, prog: str) -> list[tuple[str, int]]:
    lic = o.licenses
    if not lic:
        return []
    if isinstance(lic, dict) and lic.get("op") == "or":
        raise fail(prog, "--licenses with '|' (any one of): Grid Engine cannot request alternatives")
    items = lic["items"] if isinstance(lic, dict) else lic
    return [(name, count) for name, count in items]


def _features(expr: str, prog: str) -> list[str]:
    if any(ch in expr for ch in "|[]*"):
        raise fail(prog, "--constraint: only '&'/',' lists of features map to Grid Engine complexes")
    return [f for f in expr.replace("&", ",").split(",") if f]


def _hosts(spec: Any) -> list[str]:
    if isinstance(spec, list):
        return spec
    from ..hostlist import expand

    return expand(str(spec))


def _hosts_from_file(path: str, prog: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            words = f.read().replace(",", " ").split()
    except OSError:
        raise fail(prog, f"Unable to open nodefile {path}") from None
    from ..hostlist import expand

    return [h for w in words for h in expand(w)]


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


def _dependencies(dep: Any, prog: str, name: str, ctx: Context):
    """Slurm dependency -> (-hold_jid ids, -hold_jid_ad ids, checks for the wrapper)."""
    op, terms = dep
    if op == "or" and len(terms) > 1:
        raise fail(prog, "--dependency with '?' (any of): Grid Engine can only wait for all of its holds")
    holds: list[str] = []
    holds_ad: list[str] = []
    checks: list[tuple[str, list[str]]] = []
    for kind, ids in terms:
        ids = [str(i) for i in ids]
        if any("+" in i for i in ids):
            raise fail(prog, f"--dependency {kind}:<id>+<minutes>: Grid Engine has no delayed dependency")
        if kind == "singleton":
            holds.append(names.encode(name))
        elif kind == "afterany":
            holds += [i.split("_")[0] for i in ids]
        elif kind in ("afterok", "afternotok"):
            holds += [i.split("_")[0] for i in ids]
            checks.append((kind, ids))
        elif kind == "aftercorr":
            holds_ad += ids
        elif kind == "after":
            raise fail(prog, "--dependency after:<id> (start of another job): Grid Engine can only wait for its end; "
                       "use afterany")
        else:
            raise fail(prog, f"--dependency {kind}: not available on Grid Engine")
    # one hold per job: N_[a-b] names each task, but Grid Engine holds on the whole array
    return list(dict.fromkeys(holds)), list(dict.fromkeys(holds_ad)), checks
