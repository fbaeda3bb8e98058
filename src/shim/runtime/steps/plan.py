"""Planning a step: what srun was asked for (``StepRequest``, typed), which host runs which task ranks
(Slurm's block distribution), the environment of the step, of each host and of each task, and
srun's ``--output``/``--error``/``--input`` values and file name patterns."""

from __future__ import annotations

import os
import shlex
import socket
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ...slurm import jobids
from .. import jobenv
from ..jobenv import NO_VAL

if TYPE_CHECKING:
    from .allocation import Allocation

class StepError(Exception):
    """The step cannot be created (Slurm: ``Unable to create step for job N: <reason>``)."""


def layout(hosts: Sequence[tuple[str, int]], ntasks: int, cpus_per_task: int, nnodes: int,
           ntasks_per_node: int | None = None, relative: int = 0,
           distribution: str | None = None, overcommit: bool = False) -> list[tuple[str, int, list[int]]]:
    """[(host, slots, [task ranks])] for a step, by Slurm's distribution: task counts go round
    the nodes one at a time while a node has CPUs left (so -n4 on two nodes is 2+2); block (the
    default) then numbers ranks node by node (0,1 on the first node, 2,3 on the second), cyclic
    (``--distribution=cyclic``, its first word) in the order they were dealt (0,2 and 1,3).
    ``overcommit`` (``-O``) lets the tasks outnumber the CPUs, dealt on round the nodes."""
    usable = list(hosts[relative:])
    if relative >= len(hosts) or nnodes > len(usable):
        raise StepError("Requested node configuration is not available")
    use = usable[:nnodes]
    if ntasks * cpus_per_task > sum(s for _, s in use) and not overcommit:
        raise StepError("More processors requested than permitted")
    cap = [s // cpus_per_task for _, s in use]
    if ntasks_per_node:
        cap = [min(c, ntasks_per_node) for c in cap]
    counts = [0] * len(use)
    dealt: list[list[int]] = [[] for _ in use]  # ranks in the order they were dealt (cyclic)
    assigned = 0
    over = False
    j = 0
    while assigned < ntasks:
        space = False
        for i in range(len(use)):
            if assigned >= ntasks:
                break
            if j < cap[i] or over:
                counts[i] += 1
                dealt[i].append(assigned)
                assigned += 1
                if j + 1 < cap[i]:
                    space = True
        if not space:
            over = True
        j += 1
    cyclic = (distribution or "").split(":")[0].split(",")[0].strip().lower() == "cyclic"
    out: list[tuple[str, int, list[int]]] = []
    rank = 0
    for (host, slots), c, d in zip(use, counts, dealt):
        if c:
            out.append((host, slots, d if cyclic else list(range(rank, rank + c))))
            rank += c
    return out


ranges = jobids.compress  # task ids as Slurm lists them: 0-1,3


# ---------------------------------------------------------------------------------------------
# Environment


def launch_address() -> str:
    try:
        return socket.gethostbyname(os.uname().nodename)
    except OSError:
        return "127.0.0.1"


def step_env(base: Mapping[str, str], *, job_id: int, step_id: int, plan: list[tuple[str, int, list[int]]],
             cpus_per_task: int | None, in_allocation: bool, distribution: str | None = None,
             umask: int = 0o022, debug: int = 3, port: int | None = None, address: str | None = None,
             gpu_ids: str | None = None) -> dict[str, str]:
    """What every task of the step sees (before its host's and its own variables): the job's
    environment plus srun's step variables, as Slurm's srun sets them."""
    from ...slurm.hostlist import compress

    nodes = [h for h, _, _ in plan]
    counts = [len(t) for _, _, t in plan]
    ntasks = sum(counts)
    nodelist = compress(nodes, sort=False)
    tpn = jobenv.tasks_per_node_str(counts)
    port = port if port is not None else 32768 + (os.getpid() * 7 + step_id) % 28000
    address = address or launch_address()
    env = dict(base)
    env.update({
        "SLURM_JOB_ID": str(job_id),
        "SLURM_JOBID": str(job_id),
        "SLURM_STEP_ID": str(step_id),
        "SLURM_STEPID": str(step_id),
        "SLURM_STEP_NODELIST": nodelist,
        "SLURM_STEP_NUM_NODES": str(len(nodes)),
        "SLURM_STEP_NUM_TASKS": str(ntasks),
        "SLURM_STEP_TASKS_PER_NODE": tpn,
        "SLURM_STEP_LAUNCHER_PORT": str(port),
        "SLURM_SRUN_COMM_HOST": address,
        "SLURM_SRUN_COMM_PORT": str(port),
        "SLURM_LAUNCH_NODE_IPADDR": address,
        "SLURM_UMASK": f"{umask:04o}",
        "SRUN_DEBUG": str(debug),
        "SLURM_NTASKS": str(ntasks),
        "SLURM_NPROCS": str(ntasks),
        "SLURM_TASKS_PER_NODE": tpn,
        "SLURM_NNODES": str(len(nodes)),
        "SLURM_NODELIST": nodelist,
    })
    if cpus_per_task is not None:
        env["SLURM_CPUS_PER_TASK"] = str(cpus_per_task)
    env.update(release_step_env(cpus_per_task, gid=env.get("SLURM_JOB_GID")))
    if in_allocation:
        env["SLURM_DISTRIBUTION"] = distribution or ("block" if ntasks > len(nodes) else "cyclic")
        if "SLURM_JOB_CPUS_PER_NODE" in env:
            env["SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0"] = env["SLURM_JOB_CPUS_PER_NODE"]
    elif distribution:
        env["SLURM_DISTRIBUTION"] = distribution
    gpus = gpu_ids if gpu_ids is not None else env.get("SLURM_JOB_GPUS")
    if gpus:
        env["SLURM_STEP_GPUS"] = gpus
    return env


def release_step_env(cpus_per_task: int | None, release: Any = None, gid: str | None = None) -> dict[str, str]:
    """The step variables only some Slurm releases set (releases.py; None: the site's): 24.11's
    SLURMD_DEBUG=2 and, with srun's own -c, SLURM_TRES_PER_TASK=cpu=N; 26.05's SLURM_JOB_GROUP
    (the name of the job's group, ``gid``)."""
    from ...slurm import releases
    from ..jobenv import group_name

    release = release or releases.current()
    env = {"SLURMD_DEBUG": "2"}
    if cpus_per_task is not None:
        env["SLURM_TRES_PER_TASK"] = f"cpu={cpus_per_task}"
    out = {k: v for k, v in env.items() if release.sets(k)}
    if gid is not None and release.sets("step:SLURM_JOB_GROUP"):
        out["SLURM_JOB_GROUP"] = group_name(gid)
    return out


def host_env(common: Mapping[str, str], host: str, node_index: int, slots: int, tids: Sequence[int]) -> dict[str, str]:
    env = dict(common)
    env.update({
        "SLURMD_NODENAME": host,
        "SLURM_TOPOLOGY_ADDR": host,
        "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
        "SLURM_NODEID": str(node_index),
        "SLURM_GTIDS": ",".join(str(t) for t in tids),
        "SLURM_CPUS_ON_NODE": str(slots),
    })
    return env


def task_env(host: Mapping[str, str], tid: int, local_id: int) -> dict[str, str]:
    env = dict(host)
    env["SLURM_PROCID"] = str(tid)
    env["SLURM_LOCALID"] = str(local_id)
    return env


def export_env(environ: Mapping[str, str], mode: Mapping[str, Any] | None) -> dict[str, str]:
    """srun --export: ALL (default) passes srun's environment; NONE passes only the SLURM_*
    variables; a list passes SLURM_* and the listed ones (``ALL,X=1`` adds to everything)."""
    mode = mode or {"all": True, "vars": {}}
    if mode.get("all"):
        env = dict(environ)
    else:
        env = {k: v for k, v in environ.items() if k.startswith(("SLURM_", "SLURMD_", "SRUN_"))}
    env.update(mode.get("vars") or {})
    return env


# ---------------------------------------------------------------------------------------------
# Output file patterns


def expand_io(pattern: str, vals: Mapping[str, Any], *, tid: int = 0, node: int = 0, host: str = "") -> str:
    """A step's file name pattern: %j %J %s %t %n %N %A %a %x %u %% as Slurm's srun and slurmstepd
    expand them (``fname_create`` in src/srun/libsrun/fname.c, ``_step_path_check`` in
    src/slurmd/common/fname.c): %J is ``<job>.<step>`` (the job id padded), %A the array's job
    (else the job), %a its index (else NO_VAL). ``vals``: j, s, A, a, x, u."""
    job = vals.get("j")

    def number(v: Any) -> Any:
        return int(v) if isinstance(v, str) and v.isascii() and v.isdigit() else v

    return jobenv.expand(pattern, {
        "j": job, "J": lambda width: f"{job:0{width}d}.{vals.get('s')}" if isinstance(job, int) else f"{job}.{vals.get('s')}",
        "s": vals.get("s"), "t": tid, "n": node, "N": host, "A": number(vals.get("A", job)),
        "a": number(vals.get("a", NO_VAL)), "x": str(vals.get("x", "")), "u": str(vals.get("u", "")),
    })


def varies_per_task(pattern: str | None) -> bool:
    """Whether a pattern names a different file per task or node (%t, %n, %N)."""
    if not pattern:
        return False
    i = 0
    while i < len(pattern) - 1:
        if pattern[i] == "%":
            j = i + 1
            while j < len(pattern) and pattern[j].isdigit():
                j += 1
            if j < len(pattern):
                if pattern[j] in "tnN":
                    return True
                if pattern[j] == "%":
                    i = j + 1
                    continue
            i = j
        else:
            i += 1
    return False


def io_mode(value: str | None) -> tuple[str, Any]:
    """srun's --output/--error/--input values: ("inherit", None), ("none", None), ("task", N),
    ("all", None) or ("file", pattern)."""
    if value is None or value == "":
        return "inherit", None
    low = value.lower()
    if low == "none":
        return "none", None
    if low == "all":
        return "inherit", None
    if value.isdigit():
        return "task", int(value)
    return "file", value


def parse_multi_prog(text: str, ntasks: int) -> dict[int, list[str]]:
    """--multi-prog's file: lines ``ranks program args``; ranks ``*``, ``N``, ``N-M`` or lists;
    ``%t`` is the task's rank and ``%o`` its offset within the line's range."""
    out: dict[int, list[str]] = {}
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if len(words) < 2:
            continue
        spec, argv = words[0], words[1:]
        if spec == "*":
            ids = [t for t in range(ntasks) if t not in out]
        else:
            ids = []
            for part in spec.split(","):
                lo, _, hi = part.partition("-")
                ids += list(range(int(lo), int(hi or lo) + 1))
        for off, t in enumerate(ids):
            if t not in out and t < ntasks:
                out[t] = [w.replace("%t", str(t)).replace("%o", str(off)) for w in argv]
    return out


def _str(v: Any) -> bool:
    return type(v) is str


def _opt_str(v: Any) -> bool:
    return v is None or type(v) is str


def _int(v: Any) -> bool:
    return type(v) is int


def _opt_int(v: Any) -> bool:
    return v is None or type(v) is int


def _bool(v: Any) -> bool:
    return type(v) is bool


def _words(v: Any) -> bool:
    return type(v) is list and all(type(w) is str for w in v)


def _per_task(v: Any) -> bool:
    return v is None or (type(v) is dict and all(type(k) is str and k.isascii() and k.isdigit() and _words(w)
                                                  for k, w in v.items()))


def _export(v: Any) -> bool:
    return v is None or (type(v) is dict and set(v) == {"all", "vars"} and type(v["all"]) is bool
                         and type(v["vars"]) is dict
                         and all(type(k) is str and type(x) is str for k, x in v["vars"].items()))


# A field's check, and what it wants in words (a step request's error names them)
STR = (_str, "a string")
OPT_STR = (_opt_str, "a string or null")
INT = (_int, "an integer")
OPT_INT = (_opt_int, "an integer or null")
BOOL = (_bool, "true or false")
WORDS = (_words, "a list of strings")
PER_TASK = (_per_task, "null or an object of task ranks to lists of strings")
EXPORT = (_export, 'null or {"all": true|false, "vars": {name: value}}')

# (name, kind, default); a list default is a fresh one per request
STEP_FIELDS: tuple[tuple[str, tuple[Callable[[Any], bool], str], Any], ...] = (
    ("prog", STR, "srun"),
    ("argv", WORDS, list),
    ("argv_per_task", PER_TASK, None),
    ("ntasks", OPT_INT, None),
    ("cpus_per_task", INT, 1),
    ("cpus_per_task_set", BOOL, False),
    ("nodes", OPT_INT, None),
    ("ntasks_per_node", OPT_INT, None),
    ("relative", INT, 0),
    ("label", BOOL, False),
    ("unbuffered", BOOL, False),
    ("output", OPT_STR, None),
    ("error", OPT_STR, None),
    ("input", OPT_STR, None),
    ("append", BOOL, False),
    ("kill_on_bad_exit", BOOL, False),
    ("wait", INT, 0),
    ("pty", BOOL, False),
    ("time", OPT_INT, None),
    ("chdir", OPT_STR, None),
    ("export", EXPORT, None),
    ("distribution", OPT_STR, None),
    ("name", OPT_STR, None),
    ("quiet", BOOL, False),
    ("verbose", INT, 0),
    ("mpi", STR, "none"),
    ("overcommit", BOOL, False),
    ("nodelist", OPT_STR, None),
    ("exclude", OPT_STR, None),
    ("cpu_bind", OPT_STR, None),
    ("cpu_bind_verbose", BOOL, False),
    ("submit_line", OPT_STR, None),  # srun's command line as Slurm keeps it (the step's SubmitLine)
)


class StepRequest:
    """What srun was asked for, typed: built from srun's options (``cli/srun.request``), it travels
    to the job srun makes as JSON (``to_json``/``from_json``) and is read by attribute. Frozen,
    with ``__slots__``; ``replace`` (or ``plain.replace``) gives a changed copy. Written out rather
    than a dataclass, as ``plain.record``'s classes are: ``dataclasses`` (it imports ``inspect``)
    would cost ~7 ms of srun's start and of every host launcher's; unlike those, every value is
    checked (``STEP_FIELDS`` holds each field's check and default).

    ``argv`` (the command; with --multi-prog task 0's) and ``argv_per_task`` ({"rank": argv});
    counts ``ntasks``, ``cpus_per_task`` (``cpus_per_task_set``: -c was given), ``nodes``,
    ``ntasks_per_node``, ``relative``; I/O ``label``, ``unbuffered``, ``output``, ``error``,
    ``input`` (srun's values), ``append``, ``pty``; ``kill_on_bad_exit``, ``wait`` (seconds),
    ``time`` (minutes, None: no limit), ``chdir``, ``export`` (``{"all": bool, "vars": {...}}``),
    ``distribution``, ``name``, ``quiet``, ``verbose``, ``mpi`` (none, pmi2, pmix), ``overcommit``,
    ``nodelist``/``exclude`` (-w/-x), ``cpu_bind`` (cores, threads or None) and
    ``cpu_bind_verbose``; ``submit_line`` srun's command line (request.submit_line: the step's
    SubmitLine in sacct; None: not known); ``prog`` names the command in messages."""

    __slots__ = tuple(f[0] for f in STEP_FIELDS)
    __record_fields__ = __slots__  # (what plain.replace copies)
    prog: str
    argv: list[str]
    argv_per_task: dict[str, list[str]] | None
    ntasks: int | None
    cpus_per_task: int
    cpus_per_task_set: bool
    nodes: int | None
    ntasks_per_node: int | None
    relative: int
    label: bool
    unbuffered: bool
    output: str | None
    error: str | None
    input: str | None
    append: bool
    kill_on_bad_exit: bool
    wait: int
    pty: bool
    time: int | None
    chdir: str | None
    export: dict[str, Any] | None
    distribution: str | None
    name: str | None
    quiet: bool
    verbose: int
    mpi: str
    overcommit: bool
    nodelist: str | None
    exclude: str | None
    cpu_bind: str | None
    cpu_bind_verbose: bool
    submit_line: str | None

    def __init__(self, **values: Any) -> None:
        """Fields by name, each checked (StepError: a field that is not one, or a value of the
        wrong type); a field not given takes its default."""
        unknown = sorted(set(values) - set(self.__slots__))
        if unknown:
            raise StepError(f"the step request has no field {', '.join(unknown)}")
        set_ = object.__setattr__
        for name, (check, wants), default in STEP_FIELDS:
            if name in values:
                value = values[name]
                if not check(value):
                    raise StepError(f"the step request's {name} must be {wants}, not {type(value).__name__}")
            else:
                value = default() if default is list else default
            set_(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"StepRequest is frozen: use replace({name}=...)")

    __delattr__ = __setattr__  # type: ignore[assignment]

    def replace(self, **changes: Any) -> StepRequest:
        """A copy with some fields changed (checked as the constructor checks them)."""
        return StepRequest(**{**self.to_json(), **changes})

    def to_json(self) -> dict[str, Any]:
        """Every field by name: what a payload carries (json.dumps of it), and from_json reads."""
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_json(cls, data: Any) -> StepRequest:
        """A request as to_json wrote it (StepError: not an object, a key that is no field, a value
        of the wrong type). The payload crosses a process boundary, so nothing is taken on trust."""
        if type(data) is not dict:
            raise StepError(f"the step request must be an object, not {type(data).__name__}")
        return cls(**data)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  (argv is a list)

    def __repr__(self) -> str:
        return f"StepRequest({', '.join(f'{k}={getattr(self, k)!r}' for k in self.__slots__)})"


def plan_step(req: StepRequest, alloc: Allocation) -> list[tuple[str, int, list[int]]]:
    """The step's layout over the allocation (StepError when it cannot be made). ``-w/--nodelist``
    and ``-x/--exclude`` choose among the allocation's hosts (Open MPI's mpirun starts its daemons
    with ``srun --nodelist=...``); a listed host outside the allocation cannot be used."""
    cpt = req.cpus_per_task or 1
    hosts = _chosen_hosts(alloc.hosts, req.nodelist, req.exclude)
    if len(hosts) != len(alloc.hosts):
        from .allocation import Allocation

        alloc = Allocation(alloc.job_id, hosts)
    nodes = req.nodes
    if req.nodelist and not nodes:
        nodes = len(hosts)
    nnodes = nodes if nodes else len(alloc.hosts)
    if req.ntasks:
        ntasks = req.ntasks
    elif req.ntasks_per_node:
        ntasks = req.ntasks_per_node * nnodes
    else:
        ntasks = nnodes
    if nnodes > len(alloc.hosts) - req.relative:
        raise StepError("Requested node configuration is not available")
    nnodes = max(1, min(nnodes, ntasks))
    return layout(alloc.hosts, ntasks, cpt, nnodes, req.ntasks_per_node, req.relative,
                  req.distribution, req.overcommit)


def _chosen_hosts(hosts: Sequence[tuple[str, int]], nodelist: str | None,
                  exclude: str | None) -> list[tuple[str, int]]:
    """The allocation's hosts a step may use, in the allocation's order."""
    from ...slurm.hostlist import expand

    def names(expr: str) -> list[str]:
        try:
            return [h.split(".")[0] for h in expand(expr)]
        except ValueError:
            raise StepError("Requested node configuration is not available") from None

    out = list(hosts)
    if nodelist:
        wanted = names(nodelist)
        have = {h for h, _ in hosts}
        if any(w not in have for w in wanted):
            raise StepError("Requested node configuration is not available")
        out = [(h, s) for h, s in out if h in wanted]
    if exclude:
        gone = set(names(exclude))
        out = [(h, s) for h, s in out if h not in gone]
        if not out:
            raise StepError("Requested node configuration is not available")
    return out
