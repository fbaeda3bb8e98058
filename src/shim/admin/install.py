"""`slurm-shim install --plan|--apply|--uninstall`: the shim on a Grid Engine cluster that exists.

A real site has its own queues, parallel environments, complexes and hosts, and an admin who
reviews every change. So:

* ``--plan`` probes the live Grid Engine (queues with their PEs, PEs with their allocation rules,
  complexes with their scopes, consumables offered by hosts and by the global host, exec hosts,
  the accounting file, the version and the capabilities), drafts a site config from what is there
  (partitions are the queues; a queue's ``$pe_slots`` PE is the one-host PE, its ``$round_robin``
  or ``$fill_up`` PE the several-host one; the consumable memory complex and its scope; host
  consumables as gres, global ones as licenses; a BOOL/EXCL complex for ``--exclusive``) and
  lists every change it would make with the exact command: a PE the translator needs when a
  queue has none, the exclusive-host complex and its host values, the state directories with
  owners and modes, a profile.d snippet, the site config file.
* ``--apply`` makes exactly those changes. An object that exists with other values is reported
  (``conflict``) and left as it is; one that exists as wanted is ``in place``. It writes a record
  of what it created (root's, written atomically), so a second ``--apply`` changes nothing.
* ``--uninstall`` undoes exactly what the record says was created, each only if it is still as
  created (an object changed since is reported and left), and nothing else.

``cluster up`` (cluster.py) runs the same plan and apply on the cell it configured, with its own
site config text (which it may replace: the file is its own) and without a record.

Every Grid Engine call goes through a backend (``gridengine.engine``; ``CellBackend`` for
cluster.py's cell) and every qconf argv comes from ``ops``: what the plan shows is what runs.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import pwd
import re
import shlex
import socket
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .. import __version__, config
from . import cluster
from ..store import state
from ..gridengine.engine import GridEngine
from ..gridengine import ops
from .cluster import SCOPES, ClusterError, Complex, parse_attrs, parse_complexes, parse_list, parse_names, parse_values
from ..errors import ShimError

RECORD = "/var/lib/slurm-shim/install-record.json"
PROFILE = "/etc/profile.d/slurm-shim.sh"
STATE_DIR = "/var/spool/slurm-shim"
SHIM_SMP, SHIM_MPI = "shim_smp", "shim_mpi"  # the PEs install makes when a queue has none
EXCLUSIVE = Complex("exclusive", "excl", "BOOL", "EXCL", "YES", "YES", "0", "1000")  # as cluster.COMPLEXES'
SINGLE_RULES = ("$pe_slots",)
MULTI_RULES = ("$round_robin", "$fill_up")
GPU_NAMES = ("gpus", "ngpus", "num_gpu", "num_gpus", "nvidia_gpu", "cuda", "gpu_count")
MEMORY_NAMES = ("mem_free", "h_vmem", "virtual_free", "mem_req", "mem")  # preferred consumables, in order
WRITE_TIMEOUT = 30.0

# states of an action
CREATE, REPLACE, IN_PLACE, CONFLICT = "create", "replace", "in place", "conflict"


class InstallError(ShimError):
    def __init__(self, message: str, code: int = 1):
        super().__init__(f"slurm-shim: error: {message}")
        self.code = code


class CellBackend(GridEngine):
    """cluster.py's cell as a backend: its clean environment (``cluster.ge``), so that ``cluster
    up`` and ``install`` make the same calls."""

    def __init__(self, bin_dir: str = ""):
        self.bin_dir = bin_dir  # the cell's binaries first (Debian's /usr/bin wrappers cost ~0.1 s a call)

    def run(self, tool, args, *, input=None, timeout=None):
        from .. import proc

        env = cluster.ge_env()
        if self.bin_dir:
            env["PATH"] = f"{self.bin_dir}:{env.get('PATH', cluster.CLEAN_PATH)}"
        return proc.run([tool, *args], input=input, timeout=timeout or WRITE_TIMEOUT, env=env, cwd="/")

    def argv(self, tool, args):
        return [tool, *args]


# --------------------------------------------------------------------------------------------
# Probe: what the live Grid Engine has


@dataclass
class Probe:
    version: str = ""
    queues: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> qconf -sq
    pes: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> qconf -sp
    complexes: dict[str, Complex] = field(default_factory=dict)
    hosts: dict[str, dict[str, str]] = field(default_factory=dict)  # exec host -> complex_values
    global_values: dict[str, str] = field(default_factory=dict)
    global_conf: dict[str, str] = field(default_factory=dict)
    scheduler: dict[str, str] = field(default_factory=dict)
    capabilities: dict[str, bool] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)  # host group -> its hosts (resolved)

    def queue_hosts(self, name: str) -> list[str]:
        """A queue's hosts: its hostlist with host groups resolved."""
        out: list[str] = []
        for token in parse_names(self.queues.get(name, {}).get("hostlist", "NONE")):
            out += self.groups.get(token, []) if token.startswith("@") else [token]
        return list(dict.fromkeys(out))

    def summary(self) -> dict[str, Any]:
        return {
            "version": self.version, "queues": self.queues, "pes": self.pes,
            "complexes": {n: c.line() for n, c in self.complexes.items()},
            "exec_hosts": self.hosts, "global_values": self.global_values, "capabilities": self.capabilities,
        }


def _read(ge: GridEngine, call: ops.Call) -> str:
    """qconf's answer, or "" when the object or list does not exist (rc 1)."""
    r = ge.call(call)
    return r.stdout if r.returncode == 0 else ""


def probe(ge: GridEngine, *, queues: Iterable[str] | None = None, pes: Iterable[str] | None = None,
          hosts: Iterable[str] | None = None) -> Probe:
    """Everything (an install's --plan), or only the named queues, PEs and exec hosts and the
    complexes (cluster up's last step: what a given site config needs, in few calls)."""
    p = Probe()
    full = queues is None and pes is None and hosts is None
    if full:
        r = ge.call(ops.help_of("qconf"))
        help_text = (r.stdout + r.stderr).strip()
        p.version = help_text.splitlines()[0].strip() if help_text else "unknown"
    q_names = parse_list(_read(ge, ops.queue_list())) if queues is None else list(queues)
    for q in q_names:
        if attrs := parse_attrs(_read(ge, ops.queue_config(q))):
            p.queues[q] = attrs
    if hosts is None:
        groups = {t for attrs in p.queues.values() for t in parse_names(attrs.get("hostlist", "NONE")) if t[:1] == "@"}
        for g in sorted(groups):
            p.groups[g] = _read(ge, ops.host_group_hosts(g)).split()
    known = parse_list(_read(ge, ops.pe_names()))
    for pe in known if pes is None else [x for x in dict.fromkeys(pes) if x in known]:
        p.pes[pe] = parse_attrs(_read(ge, ops.parallel_env(pe)))
    p.complexes = parse_complexes(_read(ge, ops.complexes()))
    for host in parse_list(_read(ge, ops.exec_hosts())) if hosts is None else hosts:
        if attrs := parse_attrs(_read(ge, ops.exec_host(host))):
            p.hosts[host] = parse_values(attrs.get("complex_values", "NONE"))
    if full:
        p.global_values = parse_values(parse_attrs(_read(ge, ops.exec_host("global"))).get("complex_values", "NONE"))
        p.global_conf = parse_attrs(_read(ge, ops.cell_config()))
        p.scheduler = parse_attrs(_read(ge, ops.scheduler_config()))
        p.capabilities = ge.capabilities.probed()
    return p


# --------------------------------------------------------------------------------------------
# The cell and where the shim lives


@dataclass(frozen=True)
class Cell:
    sge_root: str = cluster.SGE_ROOT
    sge_cell: str = cluster.SGE_CELL
    bin_dir: str = ""
    qmaster_port: int = 0
    execd_port: int = 0
    drmaa_library: str = ""

    @property
    def accounting(self) -> str:
        return f"{self.sge_root}/{self.sge_cell}/common/accounting"

    def key(self) -> dict[str, Any]:
        """What names the cell: a record keeps it, and --uninstall goes back to that cell."""
        return {"sge_root": self.sge_root, "sge_cell": self.sge_cell, "qmaster_port": self.qmaster_port,
                "execd_port": self.execd_port, "bin_dir": self.bin_dir}

    def where(self) -> str:
        return f"{self.sge_root}/{self.sge_cell} (qmaster port {self.qmaster_port or 'default'})"


def _is_binary(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def find_bin_dir(sge_root: str) -> str:
    """The directory of the q* binaries themselves (Debian's /usr/bin ones are slow wrapper scripts)."""
    import shutil

    which = shutil.which("qconf")
    candidates = [*sorted(glob.glob(f"{sge_root}/bin/*")), "/usr/lib/gridengine",
                  *([os.path.dirname(which)] if which else [])]
    for d in dict.fromkeys(os.path.realpath(c) for c in candidates):  # $SGE_ROOT/bin/* may be links
        if _is_binary(os.path.join(d, "qconf")):
            return d
    return os.path.dirname(which) if which else ""


def find_drmaa(sge_root: str) -> str:
    candidates = [*sorted(glob.glob(f"{sge_root}/lib/*/libdrmaa.so*")), cluster.DRMAA_LIBRARY]
    return next((c for c in candidates if os.path.exists(c)), "")


def service_port(env_name: str, service: str, given: int | None = None) -> int:
    if given:
        return given
    value = os.environ.get(env_name, "")
    if value.isdigit():
        return int(value)
    try:
        return socket.getservbyname(service, "tcp")
    except OSError:
        return 0


def detect_cell(sge_root: str | None = None, sge_cell: str | None = None, bin_dir: str | None = None,
                qmaster_port: int | None = None, execd_port: int | None = None) -> Cell:
    """The cell the flags name, else the environment (a cell's settings.sh), else Debian's."""
    root = sge_root or os.environ.get("SGE_ROOT") or cluster.SGE_ROOT
    return Cell(sge_root=root, sge_cell=sge_cell or os.environ.get("SGE_CELL") or cluster.SGE_CELL,
                bin_dir=bin_dir or find_bin_dir(root),
                qmaster_port=service_port("SGE_QMASTER_PORT", "sge_qmaster", qmaster_port),
                execd_port=service_port("SGE_EXECD_PORT", "sge_execd", execd_port), drmaa_library=find_drmaa(root))


def cell_of(data: Mapping[str, Any]) -> Cell | None:
    """The cell a record was written for (None: a record from before records named it)."""
    c = data.get("cell")
    if not isinstance(c, dict):
        return None
    return Cell(sge_root=str(c.get("sge_root", "")), sge_cell=str(c.get("sge_cell", "")),
                bin_dir=str(c.get("bin_dir", "")), qmaster_port=int(c.get("qmaster_port") or 0),
                execd_port=int(c.get("execd_port") or 0))


def recorded_cell(data: Mapping[str, Any], args: Request, record: str) -> Cell | None:
    """The record's cell (cell_of), unless the flags name another: then an error, as a record's
    objects are that cell's alone."""
    cell = cell_of(data)
    if cell is None:
        return None
    for flag, given, have in (("--sge-root", args.sge_root, cell.sge_root), ("--sge-cell", args.sge_cell, cell.sge_cell),
                              ("--qmaster-port", args.qmaster_port, cell.qmaster_port)):
        if given and given != have:
            raise InstallError(f"{record} records what --apply made in the cell {cell.where()}, not in the one "
                               f"{flag} {given} names: run with that cell, or name another --record", 2)
    return cell


def same_cell(a: Cell, b: Cell) -> bool:
    return (a.sge_root, a.sge_cell, a.qmaster_port) == (b.sge_root, b.sge_cell, b.qmaster_port)


def backend_for(cell: Cell) -> GridEngine:
    from ..gridengine.process import GridEngineBackend

    cfg = config.SiteConfig(gridengine=config.GridEngine(
        sge_root=cell.sge_root, sge_cell=cell.sge_cell, bin_dir=cell.bin_dir, timeout=WRITE_TIMEOUT,
        qmaster_port=cell.qmaster_port, execd_port=cell.execd_port))
    return GridEngineBackend(cfg)


def shim_prefix() -> str:
    """The installation's prefix: the directory above the interpreter's bin/ (a venv's)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))


def unsafe_path(path: str, _depth: int = 0) -> str | None:
    """Why someone other than root could change what ``path`` is, or None: it and every directory
    above it must be root's and writable by nobody else (a link only when root's, judged by its
    target too); above it a sticky directory such as /tmp is fine, as nobody can rename root's
    entry in it."""
    parts = os.path.normpath(os.path.abspath(path)).split("/")[1:]
    for n in range(len(parts) + 1):
        p = "/" + "/".join(parts[:n])
        try:
            st = os.lstat(p)
        except OSError as e:
            return f"{p}: {e.strerror}"
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid != 0:
                return f"{p} is a link of uid {st.st_uid}"
            if _depth > 8:
                return f"{p}: too many links"
            return unsafe_path(os.path.join(os.path.realpath(p), *parts[n:]), _depth + 1)
        if st.st_uid != 0:
            return f"{p} belongs to uid {st.st_uid}, not root"
        if st.st_mode & 0o022 and (n == len(parts) or not st.st_mode & stat.S_ISVTX):
            return f"{p} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def prefix_problems(prefix: str, python: str | None = None, package: str | None = None) -> list[str]:
    """What makes the installation unfit to be first on every login's PATH (root's included): the
    interpreter, ``<prefix>/bin`` and the shim's package directory, each with every directory above
    it, must be root's and writable by nobody else (security review 3, F-32)."""
    python = python or sys.executable
    package = package or os.path.dirname(os.path.abspath(sys.modules["shim"].__file__ or ""))
    found = [unsafe_path(p) for p in (python, os.path.join(prefix, "bin"), package)]
    return list(dict.fromkeys(f for f in found if f))


def profile_text(prefix: str, config_path: str) -> str:
    """The profile.d snippet: the commands first on PATH and their pages on MANPATH (man-db also
    finds ../share/man of a PATH entry; a MANPATH ending in ':' keeps the system's pages). The
    paths are shell-quoted: no character of the prefix means anything to the login shell."""
    bin_dir, man = shlex.quote(f"{prefix}/bin"), shlex.quote(f"{prefix}/share/man")
    lines = [
        "# Written by `slurm-shim install`: Slurm's commands (on Grid Engine) and their man pages.",
        f'case ":$PATH:" in *:{bin_dir}:*) ;; *) PATH={bin_dir}:$PATH ;; esac',
        "export PATH",
        f'case ":${{MANPATH:-}}:" in *:{man}:*) ;; *) MANPATH={man}:${{MANPATH:-}} ;; esac',
        "export MANPATH",
    ]
    if os.path.abspath(config_path) != config.DEFAULT_PATH:
        lines += [f"SLURM_SHIM_CONFIG={shlex.quote(config_path)}", "export SLURM_SHIM_CONFIG"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Draft: a site config from what is there (pure)


def partition_name(queue: str) -> str:
    name = queue[:-2] if queue.endswith(".q") and len(queue) > 2 else queue
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def rule_of(pe: Mapping[str, str]) -> str:
    return pe.get("allocation_rule", "").strip()


def pick_pe(queue: Mapping[str, str], pes: Mapping[str, Mapping[str, str]], rules: tuple[str, ...]) -> str | None:
    """The first PE in the queue's pe_list whose allocation rule is one of rules."""
    for name in parse_names(queue.get("pe_list", "NONE")):
        if name in pes and rule_of(pes[name]) in rules:
            return name
    return None


def pick_memory(p: Probe) -> tuple[str, str, str]:
    """(complex, scope, note): the consumable MEMORY complex, preferring one the hosts offer."""
    offered = {name for values in p.hosts.values() for name in values} | set(p.global_values)
    usable = [c for c in p.complexes.values()
              if c.type == "MEMORY" and c.consumable.upper() in SCOPES and c.requestable.upper() in ("YES", "FORCED")]
    rank = {n: i for i, n in enumerate(MEMORY_NAMES)}
    usable.sort(key=lambda c: (c.name not in offered, rank.get(c.name, len(rank)), c.name))
    if usable:
        c = usable[0]
        return c.name, SCOPES[c.consumable.upper()], ""
    fallback = next((n for n in MEMORY_NAMES if n in p.complexes), "mem_free")
    return fallback, "host", (f"no consumable MEMORY complex: --mem is requested as {fallback}, which Grid "
                              "Engine checks against each host's value but does not count down")


def consumables(p: Probe, values: Mapping[str, str], skip: Iterable[str]) -> dict[str, str]:
    """Consumable, requestable, non-BOOL complexes named in values: name -> scope."""
    out = {}
    for name in sorted(values):
        c = p.complexes.get(name)
        if (c is None or name in skip or c.type in ("BOOL", "MEMORY", "STRING", "CSTRING", "RESTRING", "HOST")
                or c.consumable.upper() not in SCOPES or c.requestable.upper() not in ("YES", "FORCED")):
            continue
        out[name] = SCOPES[c.consumable.upper()]
    return out


def exclusive_name(p: Probe) -> str:
    """A complex usable for --exclusive: BOOL, relop EXCL, consumable YES ("" if none)."""
    for c in p.complexes.values():
        if (c.type, c.relop.upper(), c.consumable.upper()) == ("BOOL", "EXCL", "YES"):
            return c.name
    return ""


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def _s(value: str) -> str:
    return json.dumps(value)  # a TOML basic string (JSON's escapes are TOML's)


@dataclass
class Draft:
    text: str
    notes: list[str]


def draft(p: Probe, cell: Cell, *, state_dir: str, queues: list[str] | None = None, cluster_name: str = "cluster",
          default_queue: str | None = None, release: str | None = None) -> Draft:
    """A site config for the cluster probed: every queue (or those named) a partition; ``release``
    (--slurm-release) its ``[slurm] release`` (None: the newest)."""
    from ..slurm import releases

    notes: list[str] = []
    names = [q for q in (queues or list(p.queues))]
    for q in names:
        if q not in p.queues:
            raise InstallError(f"queue {q} does not exist (qconf -sql: {' '.join(p.queues) or 'none'})", 2)
    if not names:
        raise InstallError("Grid Engine has no queues to make partitions of (qconf -sql)")
    default = default_queue or names[0]
    if default not in names:
        raise InstallError(f"--default {default} is not one of the queues: {' '.join(names)}", 2)
    excl = exclusive_name(p) or EXCLUSIVE.name
    mem, scope, note = pick_memory(p)
    if note:
        notes.append(note)
    host_values: dict[str, str] = {}
    for values in p.hosts.values():
        host_values.update(values)
    gres = consumables(p, host_values, skip=("slots", excl, mem))  # complex -> scope
    gres_complex = {n: n for n in gres}  # gres name -> complex
    if "gpu" not in gres:  # --gpus and --gres=gpu use gres "gpu": a site's GPU complex by another name
        alias = next((n for n in gres if n.lower() in GPU_NAMES), None)
        if alias:
            gres_complex = {("gpu" if n == alias else n): n for n in gres}
            notes.append(f"gres gpu is complex {alias}")
    licenses = consumables(p, p.global_values, skip=("slots", excl, mem, *gres))
    out = [
        "# Drafted by `slurm-shim install --plan` from the live Grid Engine: review it.",
        f"exclusive_complex = {_s(excl)}",
        "",
        "[slurm]",
        f"release = {_s(release or releases.DEFAULT)}",
        "",
        "[cluster]",
        f"name = {_s(cluster_name)}",
        f"state_dir = {_s(state_dir)}",
        "",
        "[gridengine]",
        f"sge_root = {_s(cell.sge_root)}",
        f"sge_cell = {_s(cell.sge_cell)}",
        f"bin_dir = {_s(cell.bin_dir)}",
        f"qmaster_port = {cell.qmaster_port}",
        f"execd_port = {cell.execd_port}",
        f"drmaa_library = {_s(cell.drmaa_library)}",
    ]
    used = set()
    for q in names:
        queue = p.queues[q]
        name = partition_name(q)
        base, n = name, 1
        while name in used:
            n += 1
            name = f"{base}_{n}"
        used.add(name)
        single = pick_pe(queue, p.pes, SINGLE_RULES) or SHIM_SMP
        multi = pick_pe(queue, p.pes, MULTI_RULES) or SHIM_MPI
        out += ["", f"[partitions.{_key(name)}]", f"queue = {_s(q)}", f"pe = {_s(single)}",
                f"pe_multinode = {_s(multi)}"]
        if q == default:
            out.append("default = true")
        h_rt = queue.get("h_rt", "INFINITY")
        if h_rt.upper() != "INFINITY":
            out.append(f"max_time = {_s(slurm_time(h_rt))}")
    out += ["", "[memory]", f"complex = {_s(mem)}", f"scope = {_s(scope)}"]
    for name, complex_name in gres_complex.items():
        out += ["", f"[gres.{_key(name)}]", f"complex = {_s(complex_name)}", f"scope = {_s(gres[complex_name])}"]
    for name, sc in licenses.items():
        out += ["", f"[licenses.{_key(name)}]", f"complex = {_s(name)}", f"scope = {_s(sc)}"]
    method = "agent" if cell.drmaa_library else "qsub"
    out += ["", "[submit]", f"method = {_s(method)}"]
    return Draft("\n".join(out) + "\n", notes)


def slurm_time(h_rt: str) -> str:
    """A Grid Engine time (``48:00:00``, ``3600``) as Slurm's ``D-HH:MM:SS``."""
    parts = [int(x or 0) for x in h_rt.split(":")] if re.fullmatch(r"[\d:]+", h_rt) else [0]
    secs = 0
    for part in parts:
        secs = secs * 60 + part
    days, rest = divmod(secs, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


# --------------------------------------------------------------------------------------------
# Plan: the changes a site config needs (pure, given the probe and the paths' state)


@dataclass
class Action:
    kind: str  # pe | queue-pe | complex | host-value | state-dir | file | client
    target: str
    state: str  # create | replace | in place | conflict
    what: str
    commands: list[str] = field(default_factory=list)  # shell lines, for the admin to read or run
    data: dict[str, Any] = field(default_factory=dict)  # what apply needs (and the record keeps)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "target": self.target, "state": self.state, "what": self.what,
                "commands": self.commands, "data": self.data}


@dataclass
class Plan:
    cell: Cell
    probe: Probe
    config_path: str
    config_text: str
    actions: list[Action]
    notes: list[str]
    failures: list[cluster.Finding] = field(default_factory=list)  # what install does not change but must say

    @property
    def changes(self) -> list[Action]:
        return [a for a in self.actions if a.state in (CREATE, REPLACE)]

    def as_dict(self) -> dict[str, Any]:
        return {"cell": self.cell.__dict__, "probe": self.probe.summary(), "config_path": self.config_path,
                "config": self.config_text, "actions": [a.as_dict() for a in self.actions], "notes": self.notes,
                "failures": [{"what": f.what, "fix": f.fix} for f in self.failures], "changes": len(self.changes)}


def desired_pe(name: str, rule: str, template: Mapping[str, str] | None = None) -> dict[str, str]:
    """A PE the translator can use: cluster.py's smp/mpi with this name and rule (control_slaves for
    srun's qrsh -inherit; the several-host one's job script is no task). A probed PE gives the
    attribute names this Grid Engine takes (OCS has more, and no qsort_args)."""
    pe = cluster.parallel_env(name, rule, rule in SINGLE_RULES)
    if template:
        extra = {k: v for k, v in template.items() if k not in pe}
        pe = {k: v for k, v in pe.items() if k in template or k in ("pe_name",)} | extra
    return pe


def _qconf_line(call: ops.Call) -> str:
    tool, args = call
    return shlex.join([tool, *args])


def pe_actions(cfg: config.SiteConfig, p: Probe) -> list[Action]:
    actions: list[Action] = []
    made: set[str] = set()
    template = next(iter(p.pes.values()), None)
    for part_name, part in cfg.partitions.items():
        q = p.queues.get(part.queue)
        if q is None:
            actions.append(Action("queue", part.queue, CONFLICT, f"partition {part_name}: queue {part.queue} does "
                                  "not exist: create it (qconf -aq) or drop the partition from the site config"))
            continue
        pe_list = parse_names(q.get("pe_list", "NONE"))
        for pe, rules, use in ((part.pe, SINGLE_RULES, "one host"), (part.pe_multinode, MULTI_RULES, "several hosts")):
            if pe in p.pes:
                if rule_of(p.pes[pe]) not in rules and pe not in made:
                    actions.append(Action("pe", pe, CONFLICT, f"pe {pe}: allocation_rule {rule_of(p.pes[pe])}, "
                                          f"partition {part_name} needs {' or '.join(rules)} ({use}): left as it is"))
                    made.add(pe)
                elif pe not in made:
                    actions.append(Action("pe", pe, IN_PLACE, f"pe {pe}: {rule_of(p.pes[pe])} ({use})"))
                    made.add(pe)
                    if p.pes[pe].get("control_slaves", "").upper() != "TRUE":
                        actions[-1].what += "; control_slaves FALSE: srun's steps on other hosts need TRUE"
            elif pe not in made:
                attrs = desired_pe(pe, rules[0], template)
                actions.append(Action("pe", pe, CREATE, f"pe {pe}: {rules[0]} ({use}) for partition {part_name}",
                                      [f"{_qconf_line(ops.add_from_file('-Ap', f'{pe}.pe'))}  # {pe}.pe:",
                                       *("    " + line for line in cluster.render_attrs(attrs).splitlines())],
                                      {"name": pe, "attrs": attrs}))
                made.add(pe)
            if pe not in pe_list:
                call = ops.add_to_list("queue", "pe_list", pe, part.queue)
                actions.append(Action("queue-pe", f"{part.queue} {pe}", CREATE,
                                      f"queue {part.queue}: pe_list gains {pe}", [_qconf_line(call)],
                                      {"queue": part.queue, "pe": pe}))
                pe_list.append(pe)
            else:
                actions.append(Action("queue-pe", f"{part.queue} {pe}", IN_PLACE, f"queue {part.queue}: {pe} in pe_list"))
    return actions


def exclusive_actions(cfg: config.SiteConfig, p: Probe, hosts: list[str] | None = None) -> list[Action]:
    """The exclusive-host complex, and its value on the exec hosts named (None: every one)."""
    name = cfg.exclusive_complex
    if not name:
        return []
    actions: list[Action] = []
    c = p.complexes.get(name)
    want = Complex(name, EXCLUSIVE.shortcut if name == EXCLUSIVE.name else name, *EXCLUSIVE.line().split()[2:])
    if c is None:
        taken = {x.shortcut for x in p.complexes.values()}
        if want.shortcut in taken:
            want = Complex(name, name, *want.line().split()[2:])
        actions.append(Action("complex", name, CREATE, f"complex {name}: BOOL EXCL consumable, --exclusive's "
                              "whole host", [f"qconf -sc > complexes; echo {shlex.quote(want.line())} >> complexes; "
                                             f"{_qconf_line(ops.replace_complexes('complexes'))}"],
                              {"row": want.line().split()}))
    elif (c.type, c.relop.upper(), c.consumable.upper()) != ("BOOL", "EXCL", "YES"):
        return [Action("complex", name, CONFLICT, f"complex {name} is {c.line()}, not BOOL EXCL consumable YES: "
                       "left as it is; --exclusive will not reserve a host")]
    else:
        actions.append(Action("complex", name, IN_PLACE, f"complex {name}: {c.line()}"))
    for host, values in sorted(p.hosts.items()):
        if hosts is not None and host not in hosts:
            continue
        if name in values:
            actions.append(Action("host-value", f"{host} {name}", IN_PLACE, f"exec host {host}: {name}={values[name]}"))
        else:
            call = ops.add_to_list("exechost", "complex_values", f"{name}=true", host)
            actions.append(Action("host-value", f"{host} {name}", CREATE, f"exec host {host}: complex_values gains "
                                  f"{name}=true", [_qconf_line(call)], {"host": host, "complex": name, "value": "true"}))
    return actions


def tmpdir_actions(cfg: config.SiteConfig, p: Probe, base: str = cluster.TMPDIR_BASE) -> list[Action]:
    """Each partition's queue gets a tmpdir under a directory only root can write (``base``) when
    someone else could make a name in its own (cluster.unsafe_dir, judged on this host): execd
    chowns and removes ``<tmpdir>/<job>.<task>.<queue>`` as root, following links (security
    review 3, F-20). A host's own unsafe tmpdir is reported and left."""
    actions: list[Action] = []
    for q in dict.fromkeys(part.queue for part in cfg.partitions.values()):
        attrs = p.queues.get(q)
        if not attrs or "tmpdir" not in attrs:
            continue
        values = cluster.host_values(attrs["tmpdir"])
        default = values.get("", "")
        problem = cluster.unsafe_dir(default) if default else None
        if problem:
            call = ops.set_attr("queue", "tmpdir", base, q)
            actions.append(Action("queue-tmpdir", q, CREATE, f"queue {q}: tmpdir {default} becomes {base} ({problem}: "
                                  f"{cluster.TMPDIR_HARM})",
                                  [f"install -d -o root -g root -m 0755 {shlex.quote(base)}  # here; on other exec "
                                   "hosts execd makes it as root", _qconf_line(call)],
                                  {"queue": q, "old": default, "new": base}))
        else:
            actions.append(Action("queue-tmpdir", q, IN_PLACE, f"queue {q}: tmpdir {default}: only root can write in it"))
        for host, path in values.items():
            if host and (problem := cluster.unsafe_dir(path)):
                actions.append(Action("queue-tmpdir", f"{q}@{host}", CONFLICT, f"queue {q}@{host}: tmpdir {path}: "
                                      f"{problem}: {cluster.TMPDIR_HARM}: left as it is (qconf -mattr queue tmpdir "
                                      f"{base}/{host} {q}@{host})"))
    return actions


def site_failures(prefix: str | None) -> list[cluster.Finding]:
    """What install reports as failures and never changes: the kernel's link protections on this
    host (cluster.kernel_findings) and, when the prefix goes on every login's PATH, an
    installation someone other than root could change (prefix_problems)."""
    found = [f for f in cluster.kernel_findings() if f.level == "FAIL"]
    for problem in prefix_problems(prefix) if prefix else []:
        found.append(cluster.Finding("FAIL", f"installation: {problem}: the profile.d snippet would put {prefix}/bin "
                                     "first on every login's PATH, root's included",
                                     "install the shim where only root can write (e.g. a venv root made under "
                                     "/opt), or run --apply --force to install it anyway"))
    return found


def check_notes(cfg: config.SiteConfig, p: Probe, cell: Cell) -> list[str]:
    """What the admin should know but install does not change (site policy)."""
    notes = []
    if "accounting=true" not in p.global_conf.get("reporting_params", "accounting=true").lower():
        notes.append("reporting_params has no accounting=true: sacct reads Grid Engine's accounting file "
                     "(qconf -mconf global)")
    if not os.path.exists(cell.accounting):
        notes.append(f"no accounting file at {cell.accounting} yet (Grid Engine writes it when the first job ends)")
    kept = p.global_conf.get("finished_jobs", "0").strip()
    if p.version.startswith(("OCS", "GCS")) and kept not in ("", "0"):
        notes.append(f"finished_jobs {kept}: qmaster keeps the last {kept} ended jobs, and each keeps its PE "
                     "referenced: --uninstall cannot remove a PE it made until they are gone (qconf -mconf "
                     "global: finished_jobs 0; the shim reads ended jobs from accounting)")
    if p.scheduler.get("schedd_job_info", "false").lower() != "true":
        notes.append("schedd_job_info is false: squeue shows no quota reasons (qconf -msconf: schedd_job_info true)")
    if not p.hosts:
        notes.append("no execution hosts (qconf -sel)")
    for name, part in cfg.partitions.items():
        q = p.queues.get(part.queue, {})
        if q and not p.queue_hosts(part.queue) and (p.groups or "@" not in q.get("hostlist", "")):
            notes.append(f"partition {name}: queue {part.queue} has no hosts (hostlist {q.get('hostlist', 'NONE')})")
    for kind, items in (("gres", cfg.gres), ("licenses", cfg.licenses)):
        for name, c in items.items():
            if c.complex not in p.complexes:
                notes.append(f"{kind}.{name}: complex {c.complex} does not exist (qconf -sc)")
    if cfg.memory.complex not in p.complexes:
        notes.append(f"memory: complex {cfg.memory.complex} does not exist (qconf -sc)")
    return notes


def state_action(state_dir: str) -> Action:
    problems = state.layout_problems(state_dir)
    dirs = [state_dir, os.path.join(state_dir, "users"), os.path.join(state_dir, "gpus")]
    commands = [f"install -d -o root -g root -m 0755 {shlex.quote(state_dir)}",
                f"install -d -o root -g root -m 1777 {shlex.quote(dirs[1])} {shlex.quote(dirs[2])}"]
    if not problems:
        return Action("state-dir", state_dir, IN_PLACE, f"state dir {state_dir}: root's 0755; users/ and gpus/ 1777")
    blocked = [x for x in problems if "not a directory of root's" in x]
    if blocked:
        return Action("state-dir", state_dir, CONFLICT, "state dir: " + "; ".join(blocked)
                      + ": not made by root, never reused: remove it")
    missing = [d for d in dirs if not os.path.lexists(d)]
    return Action("state-dir", state_dir, CREATE, f"state dir {state_dir}: " + "; ".join(problems), commands,
                  {"path": state_dir, "missing": missing})


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def file_action(path: str, text: str, what: str, mode: int = 0o644, replace: bool = False, show: bool = True) -> Action:
    """A file install writes (show: its text among the commands; the site config is shown whole at the end)."""
    data = {"path": path, "text": text, "mode": mode, "sha256": _sha(text)}
    commands = [f"install -D -o root -g root -m {mode:04o} /dev/stdin {shlex.quote(path)}  # with this text"
                + (":" if show else " (below)"), *(f"    {line}" for line in (text.splitlines() if show else ()))]
    try:
        with open(path, encoding="utf-8") as f:
            current = f.read()
    except FileNotFoundError:
        return Action("file", path, CREATE, f"{what} {path}", commands, data)
    except OSError as e:
        return Action("file", path, CONFLICT, f"{what} {path}: {e.strerror}: left as it is")
    if current == text:
        return Action("file", path, IN_PLACE, f"{what} {path}")
    if replace:
        return Action("file", path, REPLACE, f"{what} {path}", commands, data)
    return Action("file", path, CONFLICT, f"{what} {path} exists with other contents: left as it is "
                  "(compare it with the draft)")


@dataclass
class Options:
    config_path: str
    state_dir: str = STATE_DIR
    profile: str | None = PROFILE
    queues: list[str] | None = None
    default_queue: str | None = None
    cluster_name: str = "cluster"
    config_text: str | None = None  # a given site config (cluster up's), else drafted
    replace_config: bool = False
    hosts: list[str] | None = None  # the exec hosts to offer the exclusive complex (None: the partitions')
    client: str | None = None  # the prefix whose served commands become the thin client (install; not cluster up)
    release: str | None = None  # the drafted config's [slurm] release (None: the newest)


def plan(p: Probe, cell: Cell, opts: Options) -> Plan:
    notes: list[str] = []
    if opts.config_text is None:
        d = draft(p, cell, state_dir=opts.state_dir, queues=opts.queues, cluster_name=opts.cluster_name,
                  default_queue=opts.default_queue, release=opts.release)
        text, notes = d.text, list(d.notes)
    else:
        text = opts.config_text
    cfg = config.parse(text, opts.config_path)
    hosts = opts.hosts
    if hosts is None:  # the partitions' hosts
        hosts = list(dict.fromkeys(h for part in cfg.partitions.values() for h in p.queue_hosts(part.queue)))
    actions = [*pe_actions(cfg, p), *exclusive_actions(cfg, p, hosts), *tmpdir_actions(cfg, p),
               state_action(cfg.cluster.state_dir)]
    if opts.profile:
        actions.append(file_action(opts.profile, profile_text(shim_prefix(), opts.config_path),
                                   "profile.d snippet (PATH, MANPATH)"))
    if opts.client:
        a, note = client_action(opts.client)
        if a is not None:
            actions.append(a)
        if note:
            notes.append(note)
    actions.append(file_action(opts.config_path, text, "site config", replace=opts.replace_config, show=False))
    notes += check_notes(cfg, p, cell)
    return Plan(cell, p, opts.config_path, text, actions, notes)


def _is_script(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def client_action(prefix: str) -> tuple[Action | None, str]:
    """The warm service's thin client (docs/service.md), as scripts/setup builds it: where a C
    compiler exists, each served command of prefix/bin that is still pip's Python script becomes
    the compiled client, the script moving to prefix/libexec/slurm-shim (the client's fallback).
    (The action or None, a note.)"""
    import shutil

    from ..service import server as service

    b, lx = os.path.join(prefix, "bin"), os.path.join(prefix, "libexec", "slurm-shim")
    scripts = [c for c in service.SERVED if _is_script(os.path.join(b, c))]
    if not scripts:
        served = [c for c in service.SERVED if _is_binary(os.path.join(b, c)) and os.access(os.path.join(lx, c), os.X_OK)]
        if served:
            return Action("client", prefix, IN_PLACE, f"thin client in {b} ({' '.join(served)})"), ""
        return None, ""
    src = os.path.join(service.package_root(), "client", "client.c")
    if shutil.which("cc") is None or not os.path.exists(src):
        return None, (f"no C compiler (cc): {' '.join(scripts)} stay Python scripts, which run each command "
                      "in-process (no warm service client)")
    built = os.path.join(lx, ".client.new")
    defs = [f'-DSHIM_FALLBACK="{lx}"', f'-DSHIM_PYTHON="{os.path.join(b, "python3")}"']  # (as install_client's)
    commands = [f"cc -O2 -static {' '.join(map(shlex.quote, defs))} -o {shlex.quote(built)} {shlex.quote(src)}"
                "  # (without -static where libc.a is missing)",
                *(f"mv {shlex.quote(os.path.join(b, c))} {shlex.quote(os.path.join(lx, c))}; "
                  f"install -m 0755 {shlex.quote(built)} {shlex.quote(os.path.join(b, c))}" for c in scripts)]
    return Action("client", prefix, CREATE, f"the warm service's thin client over {' '.join(scripts)} in {b} "
                  f"(the Python scripts move to {lx})", commands, {"prefix": prefix}), ""


def _file_sha(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def undo_client(e: Mapping[str, Any]) -> tuple[bool, str]:
    """Put back each Python script the client replaced, where bin/ still holds the client as
    built (an upgrade's fresh script, or a file changed since, is left)."""
    prefix = e["prefix"]
    b, lx = os.path.join(prefix, "bin"), os.path.join(prefix, "libexec", "slurm-shim")
    left: dict[str, str] = {}
    back: list[str] = []
    for cmd, sha in dict(e["commands"]).items():
        cmd_path, py = os.path.join(b, cmd), os.path.join(lx, cmd)
        if _file_sha(cmd_path) != sha or not _is_script(py):
            if not _is_script(cmd_path):
                left[cmd] = sha
            continue  # (already a Python script again: nothing to put back)
        os.replace(py, cmd_path)
        back.append(cmd)
    if left:
        e["commands"] = left  # type: ignore[index]  # (the record keeps what is left)
        return False, (f"thin client in {b}: {' '.join(left)} changed since it was built, or their Python scripts "
                       f"are gone from {lx}: left")
    return True, f"thin client in {b}: the Python scripts are back ({' '.join(back) or 'already'})"


# --------------------------------------------------------------------------------------------
# Apply and uninstall


def _write_and_call(ge: GridEngine, make_call, filename: str, text: str) -> None:
    with tempfile.TemporaryDirectory(prefix="slurm-shim-") as tmp:
        path = os.path.join(tmp, filename)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        _must(ge, make_call(path))


def _must(ge: GridEngine, call: ops.Call) -> str:
    r = ge.call(call, timeout=WRITE_TIMEOUT)
    if r.returncode != 0:
        detail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-3:]
        raise InstallError(f"{_qconf_line(call)} failed (exit {r.returncode}): {' / '.join(detail)}")
    return r.stdout


def write_complexes(ge: GridEngine, rows: Iterable[Complex]) -> None:
    """The whole complex list (qconf -Mc): how SGE 8.1.9 adds or removes a row."""
    _write_and_call(ge, ops.replace_complexes, "complexes", "".join(c.line() + "\n" for c in rows))


def write_object(ge: GridEngine, flag: str, attrs: Mapping[str, str], filename: str = "object") -> None:
    """``qconf -A*``/``-M*`` with attrs in a file (for -Mconf the file name is the host)."""
    _write_and_call(ge, lambda path: ops.add_from_file(flag, path), filename, cluster.render_attrs(attrs))


def apply_action(ge: GridEngine, a: Action) -> tuple[str, dict[str, Any] | None]:
    """Make one change: (a note for the output, the record's entry or None)."""
    d = a.data
    if a.kind == "pe":
        write_object(ge, "-Ap", d["attrs"], d["name"])
        return f"pe {d['name']} added", {"kind": "pe", "name": d["name"], "attrs": d["attrs"]}
    if a.kind == "queue-pe":
        _must(ge, ops.add_to_list("queue", "pe_list", d["pe"], d["queue"]))
        return f"queue {d['queue']}: {d['pe']} added to pe_list", {"kind": "queue-pe", **d}
    if a.kind == "complex":
        current = parse_complexes(_must(ge, ops.complexes()))
        row = Complex(*d["row"])
        if row.name not in current:
            write_complexes(ge, [*current.values(), row])
        return f"complex {row.name} added", {"kind": "complex", "row": d["row"]}
    if a.kind == "host-value":
        _must(ge, ops.add_to_list("exechost", "complex_values", f"{d['complex']}={d['value']}", d["host"]))
        return f"exec host {d['host']}: {d['complex']}={d['value']}", {"kind": "host-value", **d}
    if a.kind == "queue-tmpdir":
        cluster.ensure_tmpdir_base(d["new"])
        _must(ge, ops.set_attr("queue", "tmpdir", d["new"], d["queue"]))
        return f"queue {d['queue']}: tmpdir {d['new']}", {"kind": "queue-tmpdir", **d}
    if a.kind == "state-dir":
        note = cluster.ensure_state_layout(a.target)
        return note, ({"kind": "dirs", "paths": d.get("missing", [])} if d.get("missing") else None)
    if a.kind == "client":
        from ..service import server as service

        done = service.install_client(d["prefix"])
        b = os.path.join(d["prefix"], "bin")
        if not done:
            return f"thin client: not built (cc failed): the commands in {b} stay Python scripts", None
        return f"thin client built over {' '.join(done)} in {b}", {
            "kind": "client", "prefix": d["prefix"], "commands": {c: _file_sha(os.path.join(b, c)) for c in done}}
    if a.kind == "file":
        parent = os.path.dirname(os.path.abspath(d["path"]))
        os.makedirs(parent, 0o755, exist_ok=True)
        state.atomic_write(d["path"], d["text"], d["mode"])
        entry = {"kind": "file", "path": d["path"], "sha256": d["sha256"]} if a.state == CREATE else None
        return f"wrote {d['path']}", entry
    raise InstallError(f"cannot apply {a.kind} {a.target}")


def apply(plan_: Plan, ge: GridEngine, record: str | None, *, ensure: Iterable[str] = (),
          say=print) -> list[str]:
    """Make the plan's changes in order; record what was created. ``ensure`` names kinds whose
    in-place actions run too (cluster up lays out its state dir every time: it also clears the old
    layout). The notes of what was done."""
    notes: list[str] = []
    entries: list[dict[str, Any]] = []
    try:
        for a in plan_.actions:
            if a.state in (CREATE, REPLACE) or (a.state == IN_PLACE and a.kind in ensure):
                note, entry = apply_action(ge, a)
                notes.append(note)
                say(f"done     {note}")
                if entry:
                    entries.append(entry)
    finally:
        if record and entries:
            add_to_record(record, entries, plan_.config_path, plan_.cell)
    return notes


def read_record(path: str) -> dict[str, Any]:
    """The record, believed only if it is a regular file of root's that nobody else may write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return {"version": 1, "created": []}
    except OSError as e:
        raise InstallError(f"{path}: {e.strerror}") from None
    with os.fdopen(fd, encoding="utf-8") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise InstallError(f"{path} is not a file of uid {os.geteuid()}'s that only it may write: not trusted")
        try:
            data = json.loads(f.read(1 << 20))
        except ValueError:
            raise InstallError(f"{path} is not an install record (JSON)") from None
    if not isinstance(data, dict) or not isinstance(data.get("created"), list):
        raise InstallError(f"{path} is not an install record")
    return data


def add_to_record(path: str, entries: list[dict[str, Any]], config_path: str, cell: Cell | None = None) -> None:
    """Append to the record, which names the cell its objects are in (--uninstall goes there)."""
    data = read_record(path)
    data.update(version=1, shim=__version__, config=config_path)
    if cell is not None:
        data["cell"] = cell.key()
    data["created"] = [*data["created"], *entries]
    write_record(path, data)


def write_record(path: str, data: dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), 0o755, exist_ok=True)
    state.atomic_write(path, json.dumps(data, indent=1, sort_keys=True) + "\n", 0o644)


def _normal_attrs(attrs: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    return {k: cluster._normal(v) for k, v in attrs.items()}


def remove_tree(path: str) -> bool:
    """A state dir install made, with what users put in it: only a directory of root's that nobody
    else may write (so no name in it can be swapped meanwhile), by descriptor (shutil.rmtree
    resists symlink races where the platform allows)."""
    import shutil

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022 or not shutil.rmtree.avoids_symlink_attacks:
        return False
    shutil.rmtree(path)
    return True


def undo(ge: GridEngine, e: Mapping[str, Any], purge: bool = False) -> tuple[bool, str]:
    """Undo one recorded creation if it is still as made: (undone, what happened). ``purge``: the
    state dir goes with the records in it (else a directory that is not empty is left)."""
    kind = e.get("kind")
    if kind == "client":
        return undo_client(e)
    if kind == "pe":
        current = parse_attrs(_read(ge, ops.parallel_env(e["name"])))
        if not current:
            return True, f"pe {e['name']}: already gone"
        if any(_normal_attrs(current).get(k) != v for k, v in _normal_attrs(e["attrs"]).items()):
            return False, f"pe {e['name']} changed since it was added: left (qconf -dp {e['name']} removes it)"
        _must(ge, ops.delete_pe(e["name"]))
        return True, f"pe {e['name']} removed"
    if kind == "queue-pe":
        current = parse_attrs(_read(ge, ops.queue_config(e["queue"])))
        if e["pe"] not in parse_names(current.get("pe_list", "NONE")):
            return True, f"queue {e['queue']}: {e['pe']} already not in pe_list"
        _must(ge, ops.delete_from_list("queue", "pe_list", e["pe"], e["queue"]))
        return True, f"queue {e['queue']}: {e['pe']} removed from pe_list"
    if kind == "queue-tmpdir":
        attrs = parse_attrs(_read(ge, ops.queue_config(e["queue"])))
        if not attrs:
            return True, f"queue {e['queue']}: already gone"
        if cluster.host_values(attrs.get("tmpdir", "")).get("") != e["new"]:
            return False, f"queue {e['queue']}: tmpdir changed since it was set to {e['new']}: left"
        _must(ge, ops.set_attr("queue", "tmpdir", e["old"], e["queue"]))
        return True, f"queue {e['queue']}: tmpdir {e['old']} again"
    if kind == "host-value":
        values = parse_values(parse_attrs(_read(ge, ops.exec_host(e["host"]))).get("complex_values", "NONE"))
        if e["complex"] not in values:
            return True, f"exec host {e['host']}: {e['complex']} already gone"
        if values[e["complex"]].casefold() != str(e["value"]).casefold():
            return False, f"exec host {e['host']}: {e['complex']}={values[e['complex']]} changed since: left"
        _must(ge, ops.delete_from_list("exechost", "complex_values", e["complex"], e["host"]))
        return True, f"exec host {e['host']}: {e['complex']} removed from complex_values"
    if kind == "complex":
        row = Complex(*e["row"])
        current = parse_complexes(_must(ge, ops.complexes()))
        if row.name not in current:
            return True, f"complex {row.name}: already gone"
        if current[row.name] != row:
            return False, f"complex {row.name} changed since it was added: left"
        write_complexes(ge, [c for n, c in current.items() if n != row.name])
        return True, f"complex {row.name} removed"
    if kind == "file":
        path = e["path"]
        try:
            with open(path, encoding="utf-8") as f:
                same = _sha(f.read()) == e["sha256"]
        except FileNotFoundError:
            return True, f"{path}: already gone"
        if not same:
            return False, f"{path} changed since it was written: left"
        os.unlink(path)
        return True, f"{path} removed"
    if kind == "dirs" and purge and e["paths"]:
        top = min(e["paths"], key=len)
        removed = remove_tree(top)
        return removed, f"{top} removed with the job records in it" if removed else f"{top}: not removed"
    if kind == "dirs":
        left = []
        for path in sorted(e["paths"], key=len, reverse=True):  # children first
            try:
                os.rmdir(path)
            except FileNotFoundError:
                pass
            except OSError:
                left.append(path)
        if left:
            return False, f"{', '.join(left)} not empty (the shim's job records): left (--purge-state removes them)"
        return True, f"{', '.join(e['paths'])} removed"
    return False, f"unknown record entry {kind!r}: left"


def uninstall(ge: GridEngine, record: str, say=print, purge: bool = False) -> int:
    if not os.path.lexists(record):
        say(f"install: no record at {record}: nothing to remove")
        return 0
    data = read_record(record)
    kept = []
    for e in reversed(data["created"]):
        try:
            done, what = undo(ge, e, purge)
        except (ShimError, OSError, KeyError, TypeError) as err:
            done, what = False, f"{e.get('kind')}: {err}"
        say(f"{'undone  ' if done else 'left    '} {what}")
        if not done:
            kept.insert(0, e)
    if kept:
        data["created"] = kept
        write_record(record, data)
        say(f"install: {len(kept)} item(s) left; {record} lists them")
        return 1
    if os.path.lexists(record):
        os.unlink(record)
    say(f"install: everything the record listed is removed ({record} removed)")
    return 0


def local(config_path: str, text: str, host: str) -> list[str]:
    """cluster up's last step (ensure_site, below): install --apply on the cell it configured,
    with its own site config text, which it replaces when it differs (the file is cluster up's),
    the exclusive complex offered by its host, no profile.d snippet and no record (cluster down
    is its inverse). The state dir is laid out every time. The notes of what was done."""
    cfg = config.parse(text, config_path)
    ge = CellBackend(cfg.gridengine.bin_dir)
    cell = Cell(sge_root=cfg.gridengine.sge_root, sge_cell=cfg.gridengine.sge_cell, bin_dir=cfg.gridengine.bin_dir)
    opts = Options(config_path=config_path, state_dir=cfg.cluster.state_dir, profile=None, config_text=text,
                   replace_config=True, hosts=[host])
    parts = cfg.partitions.values()
    found = probe(ge, queues=[p.queue for p in parts], pes=[x for p in parts for x in (p.pe, p.pe_multinode)],
                  hosts=[host])
    the_plan = plan(found, cell, opts)
    for a in the_plan.actions:  # cluster up stops at what it cannot fix, as it always has
        if a.state == CONFLICT:
            if a.kind == "state-dir":
                cluster.ensure_state_layout(a.target)  # raises, naming the object in the way
            raise ClusterError(a.what)
    return apply(the_plan, ge, None, ensure=("state-dir",), say=lambda _line: None)


# --------------------------------------------------------------------------------------------
# Output and entry point


def render(plan_: Plan) -> str:
    p, c = plan_.probe, plan_.cell
    caps = ", ".join(k for k, v in sorted(p.capabilities.items()) if v) or "none"
    lines = [
        f"install: Grid Engine {p.version} in {c.sge_root}/{c.sge_cell} (commands {c.bin_dir or 'on PATH'}, "
        f"qmaster port {c.qmaster_port or 'default'}); capabilities: {caps}",
        f"install: {len(p.hosts)} exec host(s): {' '.join(sorted(p.hosts)) or 'none'}; accounting file {c.accounting}",
    ]
    for q, attrs in p.queues.items():
        pes = ", ".join(f"{n} ({rule_of(p.pes[n])})" for n in parse_names(attrs.get("pe_list", "NONE")) if n in p.pes)
        lines.append(f"found    queue {q}: hosts {attrs.get('hostlist', '?')}, slots {attrs.get('slots', '?')}, "
                     f"PEs {pes or 'none'}")
    for a in plan_.actions:
        lines.append(f"{a.state:<8} {a.what}")
        lines += [f"           {cmd}" for cmd in (a.commands if a.state in (CREATE, REPLACE) else [])]
    lines += [f"note     {n}" for n in plan_.notes]
    lines += [f"FAIL     {f.what}  -- {f.fix}" for f in plan_.failures]
    lines.append(f"install: site config for {plan_.config_path}:")
    lines += [f"  {line}" if line else "" for line in plan_.config_text.splitlines()]
    n = len(plan_.changes)
    conflicts = sum(a.state == CONFLICT for a in plan_.actions)
    lines.append(f"install: {n} change(s) to make" + (f", {conflicts} conflict(s) left as they are" if conflicts else "")
                 + ("; run with --apply (as root) to make them" if n else ""))
    return "\n".join(lines) + "\n"


@dataclass
class Request:
    """What ``slurm-shim install`` is asked (cli/admin.py reads the words, one of plan, apply and
    uninstall set): the fields are its options' (--state-dir: ``state_dir``; --queue, repeated: ``queue``)."""
    plan: bool = False
    apply: bool = False
    uninstall: bool = False
    purge_state: bool = False
    json: bool = False
    force: bool = False
    config: str | None = None  # (None: $SLURM_SHIM_CONFIG, else config.DEFAULT_PATH)
    state_dir: str = STATE_DIR
    record: str = RECORD
    profile: str = PROFILE
    no_profile: bool = False
    queue: list[str] | None = None
    default: str | None = None
    cluster_name: str = "cluster"
    sge_root: str | None = None
    sge_cell: str | None = None
    bin_dir: str | None = None
    qmaster_port: int | None = None
    execd_port: int | None = None
    slurm_release: str | None = None  # the drafted config's [slurm] release (None: the newest)


def run(args: Request) -> int:
    """``slurm-shim install``: its exit code; its errors as the shim's lines on stderr."""
    from ..errors import BackendUnavailable

    try:
        return _run(args)
    except BackendUnavailable as e:  # its lines are in a Slurm command's words
        print(f"slurm-shim: error: Grid Engine's commands cannot be run or do not answer: {e.__cause__ or e}",
              file=sys.stderr)
        return 1
    except ShimError as e:
        print(*e.lines, sep="\n", file=sys.stderr)
        return e.code


def _run(args: Request) -> int:
    if (args.apply or args.uninstall) and os.geteuid() != 0:
        raise ClusterError(f"install {'--apply' if args.apply else '--uninstall'} must run as root (it changes "
                           "Grid Engine's configuration and makes root's directories)")
    cell = detect_cell(args.sge_root, args.sge_cell, args.bin_dir, args.qmaster_port, args.execd_port)
    if args.uninstall:
        # the cell the record's objects are in, whatever this shell's SGE_CELL says
        recorded = recorded_cell(read_record(args.record), args, args.record) if os.path.lexists(args.record) else None
        if recorded is not None:
            cell = dataclasses.replace(recorded, bin_dir=recorded.bin_dir or cell.bin_dir)
        ge = backend_for(cell)
        if args.json:
            out: list[str] = []
            code = uninstall(ge, args.record, say=out.append, purge=args.purge_state)
            print(json.dumps({"uninstall": out, "exit": code}, indent=1))
            return code
        return uninstall(ge, args.record, purge=args.purge_state)
    if args.apply and os.path.lexists(args.record):  # one record, one cell: refused before any change
        data = read_record(args.record)
        other = cell_of(data)
        if data["created"] and other is not None and not same_cell(other, cell):
            raise InstallError(f"{args.record} records what --apply made in the cell {other.where()}, not "
                               f"{cell.where()}: uninstall that first, or name another --record for this cell", 2)
    ge = backend_for(cell)
    opts = Options(config_path=os.path.abspath(args.config or config.config_path()), state_dir=args.state_dir,
                   profile=None if args.no_profile else args.profile, queues=args.queue, default_queue=args.default,
                   cluster_name=args.cluster_name, client=shim_prefix(), release=args.slurm_release)
    if not bool(_read(ge, ops.exec_hosts()) or _read(ge, ops.queue_list())):
        raise InstallError(f"Grid Engine in {cell.sge_root}/{cell.sge_cell} does not answer (qconf -sel, "
                           f"commands in {cell.bin_dir or 'PATH'}): is sge_qmaster running?")
    the_plan = plan(probe(ge), cell, opts)
    the_plan.failures = site_failures(opts.client if opts.profile else None)
    if args.plan:
        print(json.dumps(the_plan.as_dict(), indent=1) if args.json else render(the_plan), end="" if not args.json else "\n")
        return 0
    said: list[str] = []
    say = said.append if args.json else print
    problems = prefix_problems(opts.client) if opts.profile and opts.client else []
    if problems and not args.force:
        raise InstallError(f"refusing to put {opts.client}/bin first on every login's PATH: {'; '.join(problems)} "
                           "(install the shim where only root can write, or --apply --force)")
    if not the_plan.changes:
        say("install: nothing to change (every object is in place)")
    else:
        import contextlib

        # (the state layout's warnings go to stderr when stdout is the JSON document)
        with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
            apply(the_plan, ge, args.record, say=say)
        say(f"install: {len(the_plan.changes)} change(s) made; {args.record} records what was created")
    for a in the_plan.actions:
        if a.state == CONFLICT:
            say(f"conflict {a.what}")
    for f in the_plan.failures:  # (the site's, which install does not change)
        warn = f.what.startswith("installation: ")
        say(f"{'warning ' if warn else 'FAIL    '} {f.what}" + ("" if warn else f"  -- {f.fix}"))
    if args.json:
        print(json.dumps({"done": said, "plan": the_plan.as_dict()}, indent=1))
    return 0


def ensure_site(path: str, text: str | None = None) -> str:
    """Test user, then `install --apply` with the cluster's own site config (text: another cell's,
    else Debian's): install.py's plan and apply, the code path of an existing site's install, which
    here finds the PEs and complexes configure made, lays out the state dir and writes the file."""
    notes = []
    try:
        pwd.getpwnam(cluster.TEST_USER)
    except KeyError:
        cluster.must("useradd", "-m", cluster.TEST_USER, env=dict(os.environ))
        notes.append(f"user {cluster.TEST_USER} created")
    notes += local(path, text or cluster.site_config_text(), cluster.this_host())
    return ", ".join(notes) or f"{path} up to date"
