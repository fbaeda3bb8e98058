"""`slurm-shim cluster up|down|status` and `slurm-shim doctor`.

`up` makes this Debian/Ubuntu machine a single-host Son of Grid Engine cluster shaped like the
Slurm cluster the shim imitates (partitions debug and gpu, two GPUs, licenses), writes the site
config that describes it, and proves it with test jobs. Every step looks before it changes, so a
fresh machine, a stopped cluster and a running one all converge to the same state.
`doctor` checks any site config against whatever Grid Engine is live.

The daemons `up` starts are the init scripts' too: `up` writes the pid files Debian's
/etc/init.d/gridengine-master and gridengine-exec go by, and fixes /etc/default/gridengine so the
master script finds its daemon. So `/etc/init.d/gridengine-exec stop; /etc/init.d/gridengine-master
stop` stops them, `... start` starts one of each (never a second one), and `cluster down`/`up` can
be mixed with either.
"""

from __future__ import annotations

import glob
import os
import platform
import pwd
import re
import shutil
import signal
import socket
import stat
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from .. import config, proc
from ..store import state
from ..errors import ShimError

SGE_ROOT = "/var/lib/gridengine"
SGE_CELL = "default"
COMMON_DIR = f"{SGE_ROOT}/{SGE_CELL}/common"
HOST_ALIASES = f"{COMMON_DIR}/host_aliases"
SPOOL = "/var/spool/gridengine"
QMASTER_PIDFILE = f"{SPOOL}/qmaster/qmaster.pid"
# The execd spool dir is named after the name the execd resolves itself to ("localhost" when the
# host-alias fix is in place), so find it by pattern.
EXECD_PIDFILES = f"{SPOOL}/execd/*/execd.pid"
DAEMONS = {"qmaster": "/usr/sbin/sge_qmaster", "execd": "/usr/sbin/sge_execd"}
# What Debian's /etc/init.d/gridengine-{master,exec} go by: cluster up writes these for the
# daemons it starts, so the init scripts' stop stops them and start starts no second one.
RUN_DIR = "/var/run/gridengine"
INIT_PIDFILES = {"qmaster": f"{RUN_DIR}/qmaster.pid", "execd": f"{RUN_DIR}/execd.pid"}
INIT_DEFAULTS = "/etc/default/gridengine"
ADMIN_USER = "sgeadmin"
CLEAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PACKAGES = ("gridengine-master", "gridengine-exec", "gridengine-client", "gridengine-drmaa1.0")
Q_COMMANDS = ("qsub", "qstat", "qdel", "qconf", "qacct", "qhost", "qrsh")
TEST_USER = "alice"
STATE_DIR = "/var/spool/slurm-shim"
# Top-level record directories of versions before the per-user layout (users/<uid>/...): made by
# whichever user wrote first, and read by nothing any more.
OLD_LAYOUT = ("jobs", "events", "steps", "srun")
PARTITIONS = ("debug", "gpu")  # queue name == partition name
# Every queue's tmpdir: Grid Engine's execd makes <tmpdir>/<job>.<task>.<queue> as root, accepts a
# name that exists, chowns it to the job's owner and removes it recursively at the end, following
# links each time (tmpdir.c). Under a directory only root can write nobody can plant that name;
# with Grid Engine's default /tmp anyone can (security review 3, F-20). execd makes a missing one
# itself, as root, 0755 (sge_mkdir makes every missing parent).
TMPDIR_BASE = "/var/spool/slurm-shim-tmp"

WAIT_QMASTER = 60.0
WAIT_QUEUES = 60.0
WAIT_STOP = 30.0
TEST_JOB_TIMEOUT = 120.0


class ClusterError(ShimError):
    def __init__(self, message: str):
        super().__init__(f"slurm-shim: error: {message}")


# --------------------------------------------------------------------------------------------
# Parsing qconf/qstat output (pure functions)


def parse_attrs(text: str) -> dict[str, str]:
    """A `qconf -s<object>` listing ("name  value" lines, `\\` continuations) as a dict."""
    attrs: dict[str, str] = {}
    logical = re.sub(r"\\\n\s*", " ", text)
    for line in logical.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, _, value = line.strip().partition(" ")
        attrs[key] = " ".join(value.split())
    return attrs


def render_attrs(attrs: Mapping[str, str]) -> str:
    """The inverse of parse_attrs: a file for `qconf -A*`/`-M*`."""
    width = max(len(k) for k in attrs) + 1
    return "".join(f"{k:<{width}} {v}\n" for k, v in attrs.items())


def parse_list(text: str) -> list[str]:
    """`qconf -sql`/`-spl`/`-sel`/`-sh`: one name a line."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def parse_values(value: str) -> dict[str, str]:
    """A `complex_values` setting (`gpu=2,mem_free=16G` or `NONE`) as a dict."""
    pairs = [p.strip() for p in value.split(",") if "=" in p]
    return dict(p.split("=", 1) for p in pairs)


def parse_names(value: str) -> list[str]:
    """A list setting such as `pe_list smp mpi` (host overrides `[vm=smp]` included) as names."""
    names = []
    for token in re.split(r"[\s,\[\]]+", value):
        token = token.rpartition("=")[2]
        if token and token.upper() != "NONE":
            names.append(token)
    return names


@dataclass(frozen=True)
class Complex:
    """One row of `qconf -sc`."""

    name: str
    shortcut: str
    type: str
    relop: str
    requestable: str
    consumable: str
    default: str
    urgency: str

    def line(self) -> str:
        return " ".join(
            [self.name, self.shortcut, self.type, self.relop, self.requestable,
             self.consumable, self.default, self.urgency]
        )


def parse_complexes(text: str) -> dict[str, Complex]:
    rows = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 8 and not line.startswith("#"):
            rows[fields[0]] = Complex(*fields)
    return rows


def parse_queue_states(qstat_f: str) -> dict[str, str]:
    """Queue instance -> state letters ("" when healthy) from `qstat -f` text."""
    states = {}
    for line in qstat_f.splitlines():
        fields = line.split()
        # queue lines: name@host qtype resv/used/tot load arch [states]; job lines start with a number
        if len(fields) >= 5 and "@" in fields[0] and re.fullmatch(r"[BIPCN]+", fields[1]):
            states[fields[0]] = fields[5] if len(fields) > 5 else ""
    return states


_TIME = re.compile(r"(\d+):(\d+):(\d+)")


def _normal(value: str) -> tuple[str, ...]:
    """A value in a form where Grid Engine's rewrites do not count as changes."""
    tokens = []
    for token in re.split(r"[\s,]+", value.strip()):
        m = _TIME.fullmatch(token)
        tokens.append(":".join(str(int(g)) for g in m.groups()) if m else token.casefold())
    return tuple(sorted(t for t in tokens if t))


def changes(desired: Mapping[str, str], current: Mapping[str, str]) -> dict[str, str]:
    """The desired settings that the current object does not already have."""
    return {
        k: v for k, v in desired.items()
        if k not in current or _normal(v) != _normal(current[k])
    }


def complex_changes(desired: Iterable[Complex], current: Mapping[str, Complex]) -> list[Complex]:
    return [c for c in desired if current.get(c.name) != c]


# --------------------------------------------------------------------------------------------
# The desired cluster (pure functions)

GLOBAL_CONF = {
    "min_uid": "0",  # root may run jobs (CI runs as root)
    "min_gid": "0",
    "shell_start_mode": "unix_behavior",  # honour #! like sbatch
    # With the default list, `-b y` jobs run under `bash -l`, which sources the user's profile.
    "login_shells": "none",
    "load_report_time": "00:00:10",
    "execd_params": "ENABLE_ADDGRP_KILL=TRUE",
    "reporting_params": "accounting=true reporting=false flush_time=00:00:01 joblog=false "
    "sharelog=00:00:00 accounting_flush_time=00:00:00",
    "max_aj_instances": "2000",  # Slurm MaxArraySize is 1001: room for a whole array
    "max_aj_tasks": "75000",
    **{f"{k}_{r}": "builtin" for k in ("qlogin", "rlogin", "rsh") for r in ("command", "daemon")},
}

SCHEDULER_CONF = {
    "schedule_interval": "0:0:1",
    "flush_submit_sec": "1",
    "flush_finish_sec": "1",
    "job_load_adjustments": "NONE",
    "load_adjustment_decay_time": "0:0:0",
    "schedd_job_info": "true",
}

# h_vmem must not be the consumable: a consumable defaults to 0 and execd enforces h_vmem=0.
COMPLEXES = (
    Complex("mem_free", "mf", "MEMORY", "<=", "YES", "YES", "0", "0"),
    Complex("gpu", "gpu", "INT", "<=", "YES", "JOB", "0", "0"),
    Complex("matlab", "matlab", "INT", "<=", "YES", "JOB", "0", "0"),
    Complex("anthropic_api", "anthropic_api", "INT", "<=", "YES", "JOB", "0", "0"),
    # sbatch --exclusive: an EXCL boolean gives a job the whole host (Grid Engine 6.2u3 and later).
    Complex("exclusive", "excl", "BOOL", "EXCL", "YES", "YES", "0", "1000"),
)
GLOBAL_VALUES = "anthropic_api=96,matlab=3"
GPUS = 2

_LIMITS = {f"{p}_{r}": "INFINITY" for r in ("rt", "cpu", "fsize", "data", "stack", "core", "rss", "vmem") for p in "sh"}


def exec_host(name: str, complex_values: str) -> dict[str, str]:
    return {
        "hostname": name, "load_scaling": "NONE", "complex_values": complex_values,
        "user_lists": "NONE", "xuser_lists": "NONE", "projects": "NONE", "xprojects": "NONE",
        "usage_scaling": "NONE", "report_variables": "NONE",
    }


def parallel_env(name: str, allocation_rule: str, job_is_first_task: bool) -> dict[str, str]:
    return {
        "pe_name": name, "slots": "999", "user_lists": "NONE", "xuser_lists": "NONE",
        "start_proc_args": "NONE", "stop_proc_args": "NONE", "allocation_rule": allocation_rule,
        "control_slaves": "TRUE", "job_is_first_task": str(job_is_first_task).upper(),
        "urgency_slots": "min", "accounting_summary": "TRUE", "qsort_args": "NONE",
    }


PES = (parallel_env("smp", "$pe_slots", True), parallel_env("mpi", "$round_robin", False))


def queue(name: str, slots: int) -> dict[str, str]:
    return {
        "qname": name, "hostlist": "@allhosts", "seq_no": "0", "load_thresholds": "NONE",
        "suspend_thresholds": "NONE", "nsuspend": "1", "suspend_interval": "00:05:00",
        "priority": "0", "min_cpu_interval": "00:05:00", "processors": "UNDEFINED",
        "qtype": "BATCH INTERACTIVE", "ckpt_list": "NONE", "pe_list": "smp mpi", "rerun": "FALSE",
        "slots": str(slots), "tmpdir": TMPDIR_BASE, "shell": "/bin/bash", "prolog": "NONE",
        "epilog": "NONE", "shell_start_mode": "unix_behavior", "starter_method": "NONE",
        "suspend_method": "NONE", "resume_method": "NONE", "terminate_method": "NONE",
        "notify": "00:00:05", "owner_list": "NONE", "user_lists": "NONE", "xuser_lists": "NONE",
        "subordinate_list": "NONE", "complex_values": "NONE", "projects": "NONE",
        "xprojects": "NONE", "calendar": "NONE", "initial_state": "default", **_LIMITS,
    }


def queue_slots(cores: int) -> int:
    """Oversubscribed on purpose: multi-slot test jobs need room on a 2-core machine."""
    return max(8, 4 * cores)


QMASTER_PORT, EXECD_PORT = 6444, 6445  # /etc/services' sge_qmaster and sge_execd, which Debian's cell uses
DRMAA_LIBRARY = "/usr/lib/gridengine-drmaa/lib/libdrmaa.so.1.0"


def site_config_text(
    *, flavour: str = "", state_dir: str = STATE_DIR, sge_root: str = SGE_ROOT, sge_cell: str = SGE_CELL,
    bin_dir: str = "/usr/lib/gridengine", qmaster_port: int = QMASTER_PORT, execd_port: int = EXECD_PORT,
    drmaa_library: str = DRMAA_LIBRARY, submit: str = "agent", release: str | None = None,
) -> str:
    """The site config describing the cluster `up` builds (it mirrors the real Slurm cluster).
    The keywords are another cell's (cluster_ocs.py); the defaults describe Debian's. ``release``
    (--slurm-release, else kept_release's) is written as ``[slurm] release``; None: the newest."""
    from ..slurm import releases

    why = {"agent": "a per-user DRMAA agent; sbatch falls back to qsub whenever it is unavailable"}.get(submit, "")
    slurm = f'[slurm]\nrelease = "{release or releases.DEFAULT}"  # --slurm-release\n\n'
    return f"""\
# Written by `slurm-shim cluster up{flavour}`: the single-host Grid Engine it configured.
exclusive_complex = "exclusive"

{slurm}[cluster]
name = "cluster"
state_dir = "{state_dir}"
max_array_size = 1001
mpi_default = "pmi2"  # srun serves PMI-1/PMI-2 (MPICH and friends; Open MPI: see man srun)

[gridengine]
sge_root = "{sge_root}"
sge_cell = "{sge_cell}"
bin_dir = "{bin_dir}"  # the binaries themselves: the /usr/bin wrappers cost ~0.1 s a call
qmaster_port = {qmaster_port}
execd_port = {execd_port}
drmaa_library = "{drmaa_library}"

[partitions.debug]
queue = "debug"
pe = "smp"
pe_multinode = "mpi"
default = true

[partitions.gpu]
queue = "gpu"
pe = "smp"
pe_multinode = "mpi"
max_time = "2-00:00:00"
default_time = "01:00:00"

[memory]
complex = "mem_free"
scope = "slot"
default_per_cpu_mb = 100

[gres.gpu]
complex = "gpu"
scope = "job"

[licenses.matlab]
complex = "matlab"
scope = "job"

[licenses.anthropic_api]
complex = "anthropic_api"
scope = "job"

[submit]
method = "{submit}"{f"  # {why}" if why else ""}
"""


def preseed_text(host: str) -> str:
    """debconf answers that let the postinsts build the cell without asking."""
    lines = []
    for pkg in ("gridengine-common", "gridengine-client", "gridengine-master", "gridengine-exec"):
        lines += [
            f"{pkg} shared/gridengineconfig boolean true",
            f"{pkg} shared/gridenginecell string {SGE_CELL}",
            f"{pkg} shared/gridenginemaster string {host}",
        ]
    return "\n".join(lines) + "\n"


def host_aliases_text(current: str, host: str, reverse: str) -> str | None:
    """host_aliases with `host reverse` in it, or None when it is already there."""
    lines = [line for line in current.splitlines() if line.strip()]
    for line in lines:
        names = line.split()
        if names[0] == host and reverse in names[1:]:
            return None
    kept = [line for line in lines if line.split()[0] != host]
    return "\n".join([*kept, f"{host} {reverse}"]) + "\n"


# --------------------------------------------------------------------------------------------
# Running things


_CELL_ENV: dict[str, str] | None = None  # set by cell(): another cell's environment


@contextmanager
def cell(env: Mapping[str, str]) -> Iterator[None]:
    """Run this module's qconf/qstat steps (configure, wait_queues_ready, ...) against another
    cell (cluster_ocs.py): ge_env() is env (PATH, SGE_ROOT, SGE_CELL, ports) meanwhile."""
    global _CELL_ENV
    old, _CELL_ENV = _CELL_ENV, dict(env)
    try:
        yield
    finally:
        _CELL_ENV = old


def ge_env() -> dict[str, str]:
    """A clean environment: the daemons' environment is what every job inherits."""
    if _CELL_ENV is not None:
        return dict(_CELL_ENV)
    return {"PATH": CLEAN_PATH, "LANG": "C.UTF-8", "SGE_ROOT": SGE_ROOT, "SGE_CELL": SGE_CELL}


def ge(*argv: str, input: str | None = None, timeout: float = 30) -> proc.Result:
    return proc.run(argv, input=input, timeout=timeout, env=ge_env(), cwd="/")


def must(*argv: str, input: str | None = None, timeout: float = 30, env: Mapping[str, str] | None = None) -> str:
    r = proc.run(argv, input=input, timeout=timeout, env=env or ge_env(), cwd="/")
    if r.returncode != 0:
        detail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-3:]
        raise ClusterError(f"{' '.join(argv)} failed (exit {r.returncode}): {' / '.join(detail)}")
    return r.stdout


def poll(check, timeout: float, what: str, interval: float = 0.2):
    """Call check() until it returns something truthy; ClusterError after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise ClusterError(f"{what} (gave up after {timeout:g} s)")
        time.sleep(interval)


def qconf_apply(flag: str, attrs: Mapping[str, str], filename: str = "object") -> None:
    """`qconf -A*`/`-M*` with attrs written to a file (for -Mconf the file name is the host)."""
    with tempfile.TemporaryDirectory(prefix="slurm-shim-") as tmp:
        path = Path(tmp, filename)
        path.write_text(render_attrs(attrs))
        must("qconf", flag, str(path))


# --------------------------------------------------------------------------------------------
# Daemons: pidfile + /proc. cluster up starts them itself (with the clean environment jobs
# inherit) and writes the pid files Debian's init scripts go by; /etc/default/gridengine gets the
# two lines gridengine-master needs to find its daemon (see INIT_FIX).


def pid_alive(pid: int, comm: str | None = None) -> bool:
    """Running and not a zombie (PID 1 here reaps orphans lazily, so dead daemons linger as Z)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    name = text[text.index("(") + 1:text.rindex(")")]
    state = text[text.rindex(")") + 2:].split()[0]
    return state not in ("Z", "X") and (comm is None or name == comm)


def on_this_host(pid: int) -> bool:
    """pid runs in this host's network and UTS namespaces: not a second execution host made in
    namespaces of its own on the same machine (scripts/multihost), whose execd writes its pid file
    into the same spool directory (``execd/node2/execd.pid``)."""
    try:
        return all(os.readlink(f"/proc/{pid}/ns/{ns}") == os.readlink(f"/proc/self/ns/{ns}") for ns in ("net", "uts"))
    except OSError:
        return False


def daemon_pid(name: str) -> int | None:
    """This host's live daemon's pid, from the init scripts' pid file or the one in Grid Engine's
    spool."""
    pattern = QMASTER_PIDFILE if name == "qmaster" else EXECD_PIDFILES
    for pidfile in [INIT_PIDFILES[name], *glob.glob(pattern)]:
        try:
            pid = int(Path(pidfile).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if pid_alive(pid, f"sge_{name}") and on_this_host(pid):
            return pid
    return None


def live_daemons() -> dict[str, int]:
    return {name: pid for name in DAEMONS if (pid := daemon_pid(name)) is not None}


def start_daemon(name: str) -> int:
    """Start a daemon (it forks into the background; the foreground process exits at once) and
    write the init scripts' pid file for it. Its pid."""
    must(DAEMONS[name], timeout=60)
    pid = poll(lambda: daemon_pid(name), WAIT_QMASTER, f"sge_{name} did not write its pid file (see {SPOOL})")
    write_init_pidfile(name, pid)
    return pid


def write_init_pidfile(name: str, pid: int) -> bool:
    """``/var/run/gridengine/<name>.pid`` naming pid (the directory made as the init scripts make
    it: sgeadmin's, 0755, since a daemon they start writes its own file there). True if written."""
    path = INIT_PIDFILES[name]
    try:
        if int(Path(path).read_text().split()[0]) == pid:
            return False
    except (OSError, ValueError, IndexError):
        pass
    if not os.path.isdir(RUN_DIR):
        os.makedirs(RUN_DIR, 0o755)
        try:
            admin = pwd.getpwnam(ADMIN_USER)
            os.chown(RUN_DIR, admin.pw_uid, admin.pw_gid)
        except KeyError:
            pass
    state.atomic_write(path, f"{pid}\n")
    return True


def remove_init_pidfiles(stopped: Iterable[int]) -> None:
    """After the daemons are gone: their init pid files go too (as the init scripts do)."""
    gone = set(stopped)
    for path in INIT_PIDFILES.values():
        try:
            pid = int(Path(path).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if pid in gone or not pid_alive(pid):
            try:
                os.unlink(path)
            except OSError:
                pass


# Debian's gridengine-master tests for a running qmaster with `--exec /usr/sbin/sge_qmaster`, a
# wrapper script that no process runs as (the daemon is /usr/lib/gridengine/sge_qmaster), so its
# `start` always starts a second qmaster; and it exports SGE_MASTER_PIDFILE, a name sge_qmaster
# does not read (it reads SGE_QMASTER_PIDFILE), so a qmaster it starts writes no pid file and its
# `stop` finds nothing. The script reads /etc/default/gridengine after setting both, so these
# lines there fix it. Only for that script (the q* wrappers read the file too), and the binary
# only for `start` (its `stop` also stops whatever runs that binary, other cells' qmasters too).
INIT_FIX = """\
# >>> slurm-shim cluster up: let /etc/init.d/gridengine-master find the qmaster it manages
if [ "${SCRIPTNAME:-}" = /etc/init.d/gridengine-master ]; then
    export SGE_QMASTER_PIDFILE="$PIDFILE"
    if [ "${1:-}" = start ]; then
        DAEMON=/usr/lib/gridengine/sge_qmaster
        export SGE_ROOT SGE_CELL SGE_ARCH
    fi
fi
# <<< slurm-shim
"""


def init_defaults_text(current: str) -> str | None:
    """/etc/default/gridengine with INIT_FIX in it (replacing an older copy), or None if it is."""
    if INIT_FIX in current:
        return None
    kept = re.sub(r"(?ms)^# >>> slurm-shim cluster up:.*?^# <<< slurm-shim\n?", "", current)
    return kept.rstrip("\n") + "\n\n" + INIT_FIX if kept.strip() else INIT_FIX


def ensure_init_scripts() -> str:
    path = Path(INIT_DEFAULTS)
    current = path.read_text() if path.exists() else ""
    text = init_defaults_text(current)
    if text is None:
        return "in place"
    state.atomic_write(str(path), text)
    return f"fixed {INIT_DEFAULTS}"


def qmaster_answers() -> bool:
    try:
        return ge("qconf", "-sh", timeout=10).returncode == 0
    except proc.SpawnError:
        return False


def stop_pids(pids: Iterable[int], grace: float = WAIT_STOP) -> None:
    """Wait grace seconds for pids to end; then TERM, then KILL those pids (and only those)."""
    remaining = list(pids)
    for sig, wait in ((None, grace), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        for pid in remaining if sig else ():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while remaining and time.monotonic() < deadline:
            remaining = [p for p in remaining if pid_alive(p)]
            time.sleep(0.1)
        if not remaining:
            return
    raise ClusterError(f"processes {remaining} survived SIGKILL")


def stop_daemons(host: str) -> None:
    """Ask qmaster to stop both daemons; signal them if it cannot (e.g. before the host-alias fix)."""
    pids = live_daemons()
    asked = "qmaster" in pids
    if asked and "execd" in pids:
        asked = ge("qconf", "-ke", host).returncode == 0
    if "qmaster" in pids:
        asked = ge("qconf", "-km").returncode == 0 and asked
    stop_pids(pids.values(), WAIT_STOP if asked else 0.0)
    remove_init_pidfiles(pids.values())


# --------------------------------------------------------------------------------------------
# cluster up: the phases


def this_host() -> str:
    """This host's name as Grid Engine sees it: the canonical name of gethostname()."""
    name = socket.gethostname()
    try:
        canonical = socket.gethostbyname_ex(name)[0]
    except OSError:
        return name
    return name if canonical.startswith("localhost") else canonical


def require_root(what: str, why: str) -> None:
    if os.geteuid() != 0:
        raise ClusterError(f"{what} must run as root ({why})")


def require_debian() -> None:
    try:
        release = platform.freedesktop_os_release()
    except OSError:
        release = {}
    ids = {release.get("ID", ""), *release.get("ID_LIKE", "").split()}
    if not ids & {"debian", "ubuntu"}:
        pretty = release.get("PRETTY_NAME", "an unknown system")
        raise ClusterError(
            f"cluster up supports only Debian and Ubuntu (it installs Grid Engine with apt); this is {pretty}"
        )


def packages_installed() -> bool:
    r = proc.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}\n", *PACKAGES])
    lines = r.stdout.splitlines()
    return len(lines) == len(PACKAGES) and all(line.startswith("ii") for line in lines)


def ensure_packages(host: str) -> str:
    if packages_installed() and Path(COMMON_DIR, "act_qmaster").exists():
        return "installed"
    apt_env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt = ("apt-get", "-o", "DPkg::Lock::Timeout=900")
    must("debconf-set-selections", input=preseed_text(host), env=apt_env)
    must(*apt, "update", timeout=900, env=apt_env)
    must(*apt, "install", "-y", "--no-install-recommends", *PACKAGES, timeout=1800, env=apt_env)
    if not Path(COMMON_DIR, "act_qmaster").exists():
        raise ClusterError(
            f"the packages are installed but {COMMON_DIR} was not set up; "
            "run `dpkg-reconfigure gridengine-master` and answer yes to configuring it automatically"
        )
    return "installed " + " ".join(PACKAGES)


def ensure_host_names(host: str) -> str:
    """Grid Engine refuses clients whose address reverse-resolves to another name (localhost)."""
    try:
        address = socket.gethostbyname(host)
    except OSError:
        with open("/etc/hosts", "a") as f:
            f.write(f"127.0.1.1 {host}\n")
        address = "127.0.1.1"
    try:
        reverse = socket.gethostbyaddr(address)[0]
    except OSError:
        reverse = host
    if reverse == host:
        return "resolve consistently"
    path = Path(HOST_ALIASES)
    text = host_aliases_text(path.read_text() if path.exists() else "", host, reverse)
    if text is None:
        return f"alias {reverse} -> {host} in place"
    path.write_text(text)
    if live_daemons():
        stop_daemons(host)  # they read host_aliases only at start
    return f"aliased {reverse} -> {host}"


def ensure_qmaster() -> str:
    pid = daemon_pid("qmaster")
    if pid is None:
        start_daemon("qmaster")
        note = "started"
    else:
        note = "running" + (", pid file written" if write_init_pidfile("qmaster", pid) else "")
    poll(qmaster_answers, WAIT_QMASTER, "sge_qmaster does not answer (see /var/spool/gridengine/qmaster/messages)")
    return note


def converge(
    show: tuple[str, ...], add: str | None, modify: str, desired: dict[str, str], filename: str = "object"
) -> bool:
    """Create or update one qconf object so it has the desired settings. True if it changed."""
    r = ge("qconf", *show)
    if r.returncode != 0 and add:
        qconf_apply(add, desired, filename)
        return True
    if r.returncode != 0:
        raise ClusterError(f"qconf {' '.join(show)}: {r.stderr.strip()}")
    current = parse_attrs(r.stdout)
    if not changes(desired, current):
        return False
    merged = {**current, **desired}
    for readonly in ("load_values", "processors") if show[0] == "-se" else ():
        merged.pop(readonly, None)
    qconf_apply(modify, merged, filename)
    return True


def ensure_complexes() -> bool:
    current = parse_complexes(must("qconf", "-sc"))
    todo = complex_changes(COMPLEXES, current)
    if todo:
        merged = {**current, **{c.name: c for c in todo}}
        with tempfile.TemporaryDirectory(prefix="slurm-shim-") as tmp:
            path = Path(tmp, "complexes")
            path.write_text("".join(c.line() + "\n" for c in merged.values()))
            must("qconf", "-Mc", str(path))
    return bool(todo)


def ensure_listed(show: str, add: str, host: str) -> bool:
    r = ge("qconf", show)
    if host in parse_list(r.stdout if r.returncode == 0 else ""):
        return False
    must("qconf", add, host)
    return True


def host_memory() -> str:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return f"{int(line.split()[1]) // 1024}M"
    raise ClusterError("cannot read MemTotal from /proc/meminfo")


def remove_default_queue() -> bool:
    """Drop all.q so its slots are not counted twice; keep it if it still has jobs."""
    r = ge("qconf", "-sql")
    if "all.q" not in parse_list(r.stdout):
        return False
    if must("qstat", "-u", "*", "-q", "all.q").strip():
        print("cluster: all.q still has jobs; leaving it (it is not in the site config)")
        return False
    must("qconf", "-dq", "all.q")
    return True


def configure(host: str, *, global_conf: Mapping[str, str] = GLOBAL_CONF, pes: Iterable[dict[str, str]] = PES,
              host_values: str = "") -> list[str]:
    """Apply the desired Grid Engine configuration; return what changed. The keywords are what
    another Grid Engine needs differently (cluster_ocs.py): its PE attributes, more exec host values."""
    slots = queue_slots(os.cpu_count() or 1)
    values = f"exclusive=true,gpu={GPUS},mem_free={host_memory()}" + (f",{host_values}" if host_values else "")
    steps = [
        ("global config", lambda: converge(("-sconf", "global"), None, "-Mconf", dict(global_conf), "global")),
        ("scheduler", lambda: converge(("-ssconf",), None, "-Msconf", SCHEDULER_CONF)),
        ("complexes", ensure_complexes),
        ("admin host", lambda: ensure_listed("-sh", "-ah", host)),
        ("submit host", lambda: ensure_listed("-ss", "-as", host)),
        ("global host", lambda: converge(("-se", "global"), "-Ae", "-Me", exec_host("global", GLOBAL_VALUES))),
        (f"exec host {host}", lambda: converge(
            ("-se", host), "-Ae", "-Me", exec_host(host, values))),
        ("@allhosts", lambda: converge(
            ("-shgrp", "@allhosts"), "-Ahgrp", "-Mhgrp", {"group_name": "@allhosts", "hostlist": host})),
        *[(f"pe {pe['pe_name']}", lambda pe=pe: converge(("-sp", pe["pe_name"]), "-Ap", "-Mp", pe)) for pe in pes],
        ("tmpdir", ensure_tmpdir_base),
        *[(f"queue {q}", lambda q=q: converge(("-sq", q), "-Aq", "-Mq", queue(q, slots))) for q in PARTITIONS],
        ("all.q removed", remove_default_queue),
    ]
    return [what for what, step in steps if step()]


def ensure_tmpdir_base(path: str = TMPDIR_BASE) -> bool:
    """The queues' tmpdir on this host: root's, 0755, in directories only root can write. True if
    it was made or its mode fixed; an object someone else made there is never reused (ClusterError)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        os.mkdir(path, 0o755)
        st = os.lstat(path)
        os.chmod(path, 0o755)  # whatever the umask
        return True
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0:
        raise ClusterError(f"{path} (the queues' tmpdir) is not a directory of root's (uid {st.st_uid}): "
                           "remove it; cluster up makes it")
    problem = unsafe_dir(path)
    if problem and stat.S_IMODE(st.st_mode) & 0o022:
        os.chmod(path, 0o755)
        return True
    if problem:
        raise ClusterError(f"the queues' tmpdir {problem}")
    return False


def ensure_execd(host: str, global_changed: bool) -> str:
    pid = daemon_pid("execd")
    if pid is not None and not global_changed:
        return "running" + (", pid file written" if write_init_pidfile("execd", pid) else "")
    if pid is not None:
        # A running execd picks up global config changes late; until then jobs can fail in the
        # shepherd (min_uid) and put the queue into error state.
        ge("qconf", "-ke", host)
        stop_pids([pid])
        remove_init_pidfiles([pid])
    start_daemon("execd")
    return "restarted (global config changed)" if pid else "started"


def wait_queues_ready(host: str) -> str:
    """Wait until every partition's queue instance is healthy, clearing error/disabled states."""
    wanted = [f"{q}@{host}" for q in PARTITIONS]

    def ready():
        states = parse_queue_states(must("qstat", "-f", "-q", ",".join(PARTITIONS)))
        for qi in wanted:
            if "E" in states.get(qi, ""):
                must("qmod", "-c", qi)  # a failed shepherd leaves the queue in error state
            if "d" in states.get(qi, ""):
                must("qmod", "-e", qi)
        return all(states.get(qi, "?") == "" for qi in wanted)

    poll(ready, WAIT_QUEUES, "queue instances did not become ready (is sge_execd running? see qstat -f)")
    return ", ".join(wanted) + " ok"


def ensure_state_layout(state_dir: str) -> str:
    """The state directory as state.py expects it, made by root (top 0755, users/ and gpus/ 1777),
    so that no user is first to make and own a directory the others' records go into. An object
    in the way that root did not make is reported and never reused (ClusterError). Old-layout
    record directories are removed, safely; anything else odd is reported."""
    parent = os.path.dirname(os.path.abspath(state_dir))
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    problems = state.make_layout(state_dir)
    if problems:
        raise ClusterError(f"state dir {state_dir}: " + "; ".join(problems))
    removed, left = remove_old_layout(state_dir)
    seen = read_state(state_dir)
    for line in [*left, *seen.squatted, *seen.leftovers]:
        print(f"cluster: warning: {line} (see slurm-shim doctor)", flush=True)
    note = f"{state_dir} laid out"
    return note + (f", old {' '.join(n + '/' for n in removed)} removed" if removed else "")


def remove_old_layout(state_dir: str) -> tuple[list[str], list[str]]:
    """Remove the top-level ``jobs/ events/ steps/ srun/`` of the old layout, never following a
    link: a link or file goes by its name; a directory is first taken from its maker (root's,
    0700: nobody can add to it while it goes), then removed by descriptor (``shutil.rmtree``
    resists symlink races). Only under a top directory of root's that nobody else may write, so
    no name can be swapped meanwhile. Returns (removed, what could not be removed and why)."""
    try:
        top = os.lstat(state_dir)
    except OSError:
        return [], []
    if not stat.S_ISDIR(top.st_mode) or top.st_uid != 0 or top.st_mode & 0o022:
        return [], []
    if not shutil.rmtree.avoids_symlink_attacks:
        return [], [f"{state_dir}: old-layout directories left alone (no symlink-safe removal here)"]
    removed, left = [], []
    for name in OLD_LAYOUT:
        path = os.path.join(state_dir, name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError as e:
            left.append(f"{path}: {e.strerror}")
            continue
        try:
            if stat.S_ISDIR(st.st_mode):
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    if os.fstat(fd).st_ino != st.st_ino:
                        raise OSError(0, "it changed while it was looked at")
                    os.fchown(fd, 0, 0)
                    os.fchmod(fd, 0o700)
                finally:
                    os.close(fd)
                shutil.rmtree(path)
            else:
                os.unlink(path)
            removed.append(name)
        except OSError as e:
            left.append(f"{path} (old layout) not removed: {e.strerror or e}")
    return removed, left


@dataclass
class StateFacts:
    """What doctor reads in the state directory (see state.py for the layout)."""

    problems: list[str] = field(default_factory=list)  # state.layout_problems
    squatted: list[str] = field(default_factory=list)  # users/<uid> not that user's own directory
    leftovers: list[str] = field(default_factory=list)  # the old layout's directories


def read_state(state_dir: str) -> StateFacts:
    """The state directory's layout, its per-user directories and old-layout leftovers, read
    without following links or changing anything."""
    facts = StateFacts(problems=state.layout_problems(state_dir))
    users = os.path.join(state_dir, "users")
    for name, st in _entries(users):
        what = f"{users}/{name}"
        uid_part, at, suffix = name.partition("@")
        if not (uid_part.isascii() and uid_part.isdigit()) or (at and not state.ALT_SUFFIX.fullmatch(suffix)):
            facts.squatted.append(f"{what} (uid {st.st_uid}) is no user's record directory")
        elif at:  # users/<uid>@<suffix>: the user's own where someone else holds users/<uid> (F-21)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != int(uid_part):
                facts.squatted.append(f"{what} belongs to uid {st.st_uid}, not {uid_part}: it is never believed")
            elif st.st_mode & 0o022:
                facts.squatted.append(f"{what} is writable by others (mode {stat.S_IMODE(st.st_mode):o}): "
                                      f"uid {uid_part}'s records there are not believed")
        elif not stat.S_ISDIR(st.st_mode):
            facts.squatted.append(f"{what} is not a directory (owned by uid {st.st_uid}): "
                                  f"uid {name} keeps its records in a users/{name}@<suffix> of its own")
        elif st.st_uid != int(name):
            facts.squatted.append(f"{what} belongs to uid {st.st_uid}, not {name}: "
                                  f"uid {name} keeps its records in a users/{name}@<suffix> of its own")
        elif st.st_mode & 0o022:
            facts.squatted.append(f"{what} is writable by others (mode {stat.S_IMODE(st.st_mode):o}): "
                                  f"uid {name}'s records are not believed")
    for name in OLD_LAYOUT:
        try:
            st = os.lstat(os.path.join(state_dir, name))
        except OSError:
            continue
        facts.leftovers.append(f"{state_dir}/{name} (old layout, uid {st.st_uid})")
    gpus = os.path.join(state_dir, "gpus")
    for name, st in _entries(gpus):
        if stat.S_ISDIR(st.st_mode):  # claims are files <host>.<index>; the old layout had gpus/<host>/
            facts.leftovers.append(f"{gpus}/{name}/ (old layout, uid {st.st_uid})")
    return facts


def _entries(path: str) -> list[tuple[str, os.stat_result]]:
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            return []
        names = sorted(os.listdir(path))
    except OSError:
        return []
    out = []
    for n in names:
        try:
            out.append((n, os.lstat(os.path.join(path, n))))
        except OSError:
            pass
    return out


def submit_test_job(user: str, queue_name: str, bin_dir: str = "/usr/bin") -> str:
    """`qsub -sync y -b y /bin/true`, as root or through runuser; the job must exit 0."""
    name = f"shim_up_{user}"
    qsub = [f"{bin_dir}/qsub", "-sync", "y", "-b", "y", "-N", name, "-q", queue_name,
            "-o", "/dev/null", "-e", "/dev/null", "/bin/true"]
    prefix = [] if user == "root" else ["runuser", "-u", user, "--"]
    try:
        r = ge(*prefix, *qsub, timeout=TEST_JOB_TIMEOUT)
    except proc.SpawnError:
        ge(*prefix, f"{bin_dir}/qdel", name)
        raise ClusterError(f"test job as {user} did not finish within {TEST_JOB_TIMEOUT:g} s (see qstat -j {name})")
    if r.returncode != 0:
        raise ClusterError(f"test job as {user} failed (exit {r.returncode}): {(r.stdout + r.stderr).strip()}")
    return f"{user}@{queue_name}"


def run_test_jobs(bin_dir: str = "/usr/bin") -> str:
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(submit_test_job, ("root", TEST_USER), PARTITIONS, (bin_dir, bin_dir)))
    return "exit 0 as " + " and ".join(done)


@dataclass
class _Phase:
    note: str = ""


@contextmanager
def phase(name: str) -> Iterator[_Phase]:
    started = time.monotonic()
    p = _Phase()
    yield p
    dots = "." * max(3, 16 - len(name))
    note = f"  ({p.note})" if p.note else ""
    print(f"cluster: {name} {dots} {time.monotonic() - started:5.1f} s{note}", flush=True)


def down() -> int:
    require_root("cluster down", "it stops the daemons")
    started = time.monotonic()
    if not live_daemons():
        print("cluster: already down")
        return 0
    stop_daemons(this_host())
    print(f"cluster: down in {time.monotonic() - started:.1f} s")
    return 0


def status() -> int:
    daemons = live_daemons()
    for name in DAEMONS:
        print(f"{name:<8} " + (f"up (pid {daemons[name]})" if name in daemons else "down"))
    answers = "qmaster" in daemons and qmaster_answers()
    if answers:
        states = parse_queue_states(ge("qstat", "-f").stdout)
        for qi, letters in sorted(states.items()):
            print(f"queue    {qi:<20} {letters or 'ok'}")
    elif "qmaster" in daemons:
        print("qmaster  does not answer")
    path = config.config_path()
    print(f"config   {path}" + ("" if os.path.exists(path) else " (missing)"))
    return 0 if answers and "execd" in daemons else 1


# --------------------------------------------------------------------------------------------
# doctor


@dataclass(frozen=True)
class Finding:
    level: str  # ok | warn | FAIL
    what: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.level:<5} {self.what}" + (f"  -- {self.fix}" if self.fix else "")


@dataclass
class Facts:
    """What doctor reads from the live Grid Engine; doctor_findings judges it without running anything."""

    queues: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> qconf -sq
    pes: list[str] = field(default_factory=list)
    complexes: dict[str, Complex] = field(default_factory=dict)
    global_values: dict[str, str] = field(default_factory=dict)
    host_values: dict[str, dict[str, str]] = field(default_factory=dict)  # exec host -> complex_values
    state: StateFacts | None = None  # None: not looked at
    scheduler: dict[str, str] | None = None  # qconf -ssconf; None: not looked at
    tmpdirs: dict[str, str] = field(default_factory=dict)  # every queue -> its tmpdir (host overrides included)


SCOPES = {"YES": "slot", "JOB": "job", "HOST": "host"}
CONSUMABLE = {scope: flag for flag, scope in SCOPES.items()}


def partition_findings(name: str, queue_name: str, pes: Iterable[str], facts: Facts, path: str) -> list[Finding]:
    what = f"partition {name}: queue {queue_name}"
    if queue_name not in facts.queues:
        return [Finding("FAIL", f"{what} does not exist",
                        f"run slurm-shim cluster up, qconf -aq {queue_name}, or fix partitions.{name}.queue in {path}")]
    found = [Finding("ok", f"{what} exists")]
    pe_list = parse_names(facts.queues[queue_name].get("pe_list", "NONE"))
    for pe in dict.fromkeys(pes):
        if pe not in facts.pes:
            found.append(Finding("FAIL", f"partition {name}: PE {pe} does not exist", f"qconf -ap {pe}"))
        elif pe not in pe_list:
            found.append(Finding("FAIL", f"partition {name}: PE {pe} is not in queue {queue_name}'s pe_list",
                                 f"qconf -aattr queue pe_list {pe} {queue_name}"))
        else:
            found.append(Finding("ok", f"partition {name}: PE {pe} exists and is in queue {queue_name}'s pe_list"))
    return found


def complex_finding(what: str, name: str, scope: str, facts: Facts, path_key: str) -> Finding:
    c = facts.complexes.get(name)
    if c is None:
        return Finding("FAIL", f"{what}: complex {name} does not exist (qconf -sc)",
                       f"add it with qconf -mc ({name} {name} INT <= YES {CONSUMABLE[scope]} 0 0)")
    if c.requestable.upper() not in ("YES", "FORCED"):
        return Finding("FAIL", f"{what}: complex {name} is not requestable", "set requestable YES with qconf -mc")
    actual = SCOPES.get(c.consumable.upper())
    if actual is None:
        return Finding("FAIL", f"{what}: complex {name} is not consumable",
                       f"set consumable {CONSUMABLE[scope]} with qconf -mc")
    if actual != scope:
        return Finding("FAIL", f"{what}: complex {name} is consumable per {actual}, the config says per {scope}",
                       f"set {path_key}.scope = \"{actual}\", or consumable {CONSUMABLE[scope]} with qconf -mc")
    return Finding("ok", f"{what}: complex {name} is consumable per {scope}")


def capacity_finding(what: str, name: str, where: Mapping[str, Mapping[str, str]], fix: str) -> Finding:
    offering = {host: values[name] for host, values in where.items() if name in values}
    if not offering:
        return Finding("FAIL", f"{what}: no capacity for {name} is set", fix)
    listed = ", ".join(f"{host}={n}" for host, n in sorted(offering.items()))
    return Finding("ok", f"{what}: capacity {listed}")


def doctor_findings(cfg: config.SiteConfig, facts: Facts, path: str) -> list[Finding]:
    """Judge a site config against facts read from Grid Engine (pure: testable on recorded text)."""
    found: list[Finding] = []
    for name, part in cfg.partitions.items():
        found += partition_findings(name, part.queue, (part.pe, part.pe_multinode), facts, path)
    found.append(complex_finding("memory", cfg.memory.complex, cfg.memory.scope, facts, "memory"))
    for name, c in cfg.gres.items():
        found.append(complex_finding(f"gres {name}", c.complex, c.scope, facts, f"gres.{name}"))
        found.append(capacity_finding(f"gres {name}", c.complex, facts.host_values,
                                      f"qconf -aattr exechost complex_values {c.complex}=N <host>"))
    for name, c in cfg.licenses.items():
        found.append(complex_finding(f"license {name}", c.complex, c.scope, facts, f"licenses.{name}"))
        found.append(capacity_finding(f"license {name}", c.complex, {"global": facts.global_values},
                                      f"qconf -aattr exechost complex_values {c.complex}=N global"))
    for feature, name in cfg.features.items():
        c = facts.complexes.get(name)
        if c is None or c.type != "BOOL":
            found.append(Finding("FAIL", f"feature {feature}: no BOOL complex {name}",
                                 f"add it with qconf -mc ({name} {name} BOOL == YES NO 0 0)"))
        else:
            found.append(Finding("ok", f"feature {feature}: BOOL complex {name} exists"))
    if cfg.exclusive_complex:
        found.append(exclusive_finding(cfg.exclusive_complex, facts))
    if facts.scheduler is not None:
        found.append(nice_finding(facts.scheduler))
    if facts.state is not None:
        found += state_findings(cfg.cluster.state_dir, facts.state)
    found += tmpdir_findings(facts.tmpdirs)
    return found


NICE_WHAT = "scheduler: weight_priority is 0: --nice, --priority and scontrol update Nice= do not change the order of pending jobs"
NICE_FIX = ("Grid Engine ranks pending jobs by weight_ticket*tickets + weight_urgency*urgency + weight_priority*(qsub -p); "
            "qconf -msconf and set weight_priority above 0 if Slurm's nice should count")


def nice_weight(sconf: Mapping[str, str]) -> float:
    """The scheduler's weight_priority (qconf -ssconf); 0 when absent or not a number."""
    try:
        return float(sconf.get("weight_priority", "0"))
    except ValueError:
        return 0.0


def nice_finding(sconf: Mapping[str, str]) -> Finding:
    """Slurm's nice is Grid Engine's POSIX priority (``qsub -p``, translate.qsub.nice_priority),
    which enters a pending job's priority only through the scheduler's ``weight_priority``: at 0
    (Debian's default, and ``cluster up``'s) --nice is accepted and recorded but orders nothing."""
    w = nice_weight(sconf)
    if w <= 0:
        return Finding("warn", NICE_WHAT, NICE_FIX)
    return Finding("ok", f"scheduler: weight_priority is {sconf.get('weight_priority')}: --nice orders pending jobs")


def exclusive_finding(name: str, facts: Facts) -> Finding:
    """--exclusive needs Grid Engine's exclusive-host complex: BOOL with relop EXCL, consumable."""
    c = facts.complexes.get(name)
    if c is None or (c.type, c.relop, c.consumable) != ("BOOL", "EXCL", "YES"):
        return Finding("FAIL", f"exclusive: no complex {name} of type BOOL, relop EXCL, consumable YES",
                       f"add it with qconf -mc ({name} {name} BOOL EXCL YES YES 0 1000)")
    if not any(name in values for values in facts.host_values.values()):
        return Finding("FAIL", f"exclusive: no exec host offers {name}",
                       f"qconf -aattr exechost complex_values {name}=true <host>")
    return Finding("ok", f"exclusive: complex {name} exists and exec hosts offer it")


def state_findings(state_dir: str, facts: StateFacts) -> list[Finding]:
    """The state directory: root's layout (FAIL when someone else's object is in the way, warn
    when it is missing), squatted per-user directories (FAIL: someone else's name in users/;
    the user's records go to a users/<uid>@<suffix> of her own meanwhile), and
    old-layout leftovers (warn: nothing reads them)."""
    make = "slurm-shim cluster up (as root) makes it"
    found = []
    for p in facts.problems:
        if p.endswith("does not exist"):
            found.append(Finding("warn", f"state dir: {p}: no job records are kept", make))
        else:
            found.append(Finding("FAIL", f"state dir: {p}",
                                 f"remove it (it was not made by the shim, and is never reused); then {make}"))
    if not facts.problems:
        found.append(Finding("ok", f"state dir {state_dir} is root's; users/ and gpus/ are sticky (1777)"))
    for s in facts.squatted:
        found.append(Finding("FAIL", f"state dir: {s}", "remove it (rm -r): it is not the user's, and nothing of hers is in it"))
    for s in facts.leftovers:
        found.append(Finding("warn", f"state dir: {s}: nothing reads it",
                             "slurm-shim cluster up removes jobs/ events/ steps/ srun/; remove the rest by hand"))
    return found


def unsafe_dir(path: str, _depth: int = 0) -> str | None:
    """Why someone other than root could add, swap or remove a name in the directory ``path`` on
    this host, or None when nobody can: it and every directory above it are real directories (a
    link only when root's, judged by its target) of root's that nobody else may write; above it a
    sticky one others may write is fine (nobody can rename root's entry in it). A part that does
    not exist is fine when only root can write where it goes: Grid Engine's execd makes it as root."""
    if not os.path.isabs(path):
        return f"{path} is not an absolute path"
    parts = os.path.normpath(path).split("/")[1:]
    open_above = ""  # the directory above, when others may write in it
    for n in range(len(parts) + 1):
        p = "/" + "/".join(parts[:n])
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            return f"{p} does not exist, and others can make it in {open_above}" if open_above else None
        except OSError as e:
            return f"{p}: {e.strerror}"
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid != 0:
                return f"{p} is a link of uid {st.st_uid}"
            if _depth > 8:
                return f"{p}: too many links"
            return unsafe_dir(os.path.join(os.path.realpath(p), *parts[n:]), _depth + 1)
        if not stat.S_ISDIR(st.st_mode):
            return f"{p} is not a directory"
        if st.st_uid != 0:
            return f"{p} belongs to uid {st.st_uid}, not root"
        writable = st.st_mode & 0o022
        if writable and (n == len(parts) or not st.st_mode & stat.S_ISVTX):
            return f"{p} is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
        open_above = p if writable else ""
    return None


def host_values(value: str) -> dict[str, str]:
    """A queue attribute with host overrides (``/tmp,[node2=/tmp/node2]``): {"": the default,
    host: its value}."""
    out: dict[str, str] = {}
    for m in re.finditer(r"\[\s*([^=\]\s]+)\s*=\s*([^\]]*?)\s*\]|([^,\[\]\s]+)", value):
        if m.group(3) is not None:
            out.setdefault("", m.group(3))
        else:
            out[m.group(1)] = m.group(2)
    return out


TMPDIR_HARM = ("anyone can plant <tmpdir>/<job>.<task>.<queue>, which Grid Engine's execd chowns to the job's "
               "owner and removes as root, following links")


def tmpdir_findings(tmpdirs: Mapping[str, str], check=unsafe_dir) -> list[Finding]:
    """Every queue's tmpdir (and its host overrides), judged on this host: FAIL where someone
    other than root could make a name in it (security review 3, F-20)."""
    found = []
    for q, value in sorted(tmpdirs.items()):
        for host, path in host_values(value).items():
            where = f"queue {q}" + (f"@{host}" if host else "")
            problem = check(path)
            if problem:
                base = TMPDIR_BASE + (f"/{host}" if host else "")
                found.append(Finding("FAIL", f"{where}: tmpdir {path}: {problem}: {TMPDIR_HARM}",
                                     f"install -d -o root -g root -m 0755 {base} on every exec host; "
                                     f"qconf -mattr queue tmpdir {base} {q}{'@' + host if host else ''}"))
            else:
                made = "" if os.path.lexists(path) else " (not made here yet: execd makes it as root)"
                found.append(Finding("ok", f"{where}: tmpdir {path} is root's and only root can write in it{made}"))
    return found


# What the kernel must do for root and for every job in a sticky directory such as /tmp: doctor
# reads /proc/sys on this host and never changes it.
KERNEL_CHECKS = (
    ("fs.protected_symlinks", "a link in a sticky directory such as /tmp is followed by whoever opens it (root "
     "and other users' jobs write, chown or remove through another user's link)",
     "sysctl -w fs.protected_symlinks=1, and set it in /etc/sysctl.d/ (slurm-shim never changes it)"),
    ("fs.protected_regular", "a file another user made in a sticky directory such as /tmp is opened with "
     "O_CREAT as if it were new (a job's output goes into a file someone else owns and reads)",
     "sysctl -w fs.protected_regular=1 (2: group-writable sticky directories too), and set it in "
     "/etc/sysctl.d/ (slurm-shim never changes it)"),
)


def kernel_findings(proc_sys: str = "/proc/sys") -> list[Finding]:
    """fs.protected_symlinks and fs.protected_regular on this host: FAIL when 0. Nothing when the
    kernel has no such setting."""
    found = []
    for name, harm, fix in KERNEL_CHECKS:
        try:
            with open(os.path.join(proc_sys, *name.split(".")), encoding="ascii") as f:
                value = f.read().strip()
        except (OSError, ValueError):
            continue
        if value == "0":
            found.append(Finding("FAIL", f"kernel: {name} is 0: {harm}", fix))
        else:
            found.append(Finding("ok", f"kernel: {name} is {value}"))
    return found


def private_findings(state_dir: str) -> list[Finding]:
    """The caller's private places (issue 26): the state directory keeps owners (a round trip:
    F-35), the caller's users/<uid> is the caller's own (F-21), and /tmp/slurm-shim-<uid> too
    (F-29: the per-user daemon then uses another directory)."""
    from ..service import server as service

    if state.layout_problems(state_dir):
        return []  # (state_findings says what is wrong with the layout)
    problem = state.ownership_problem(state_dir)
    found = [Finding("FAIL", f"state dir: {problem}", "keep owners on this file system (no all_squash, "
                     "matching idmap; root's jobs need no_root_squash), or put the state dir on a local or "
                     "owner-keeping file system") if problem else
             Finding("ok", f"state dir: a directory made in {state_dir}/users keeps its owner (uid {os.getuid()})")]
    squat = state.squatted_home(state_dir)
    if squat is not None:
        found.append(Finding("warn", f"state dir: {squat[0]} is not yours (someone else made it): your records are in "
                             f"{squat[1] or 'a users/<uid>@<suffix> made at your next submission'}",
                             f"an admin may remove {squat[0]}"))
    tmp = service.squatted_tmp()
    if tmp is not None:
        found.append(Finding("warn", f"{tmp} is not your own private directory (someone else made it): the warm service "
                             f"(its submissions too) uses {service.service_dir() or 'none (it is off)'}",
                             f"an admin may remove {tmp}"))
    return found


def store_findings(cfg: config.SiteConfig) -> list[Finding]:
    """A store near its count bound (issue 29: past it, prune drops the oldest records, and sacct
    no longer reaches back [store] max_age_days): the caller's, or every user's for root."""
    owners = [uid for uid, _d in state.user_dirs(cfg)] if os.geteuid() == 0 else [None]
    return [Finding("warn", f"store: {near}", "raise [store] max_records, or lower max_age_days")
            for near in (state.near_bound(cfg, owner) for owner in owners) if near]


class _Qconf:
    def __init__(self, cfg: config.SiteConfig, qconf: str):
        self.cfg, self.qconf = cfg, qconf

    def __call__(self, *args: str) -> str:
        """qconf's output, or "" when the object or list does not exist."""
        from ..gridengine.engine import ge_env  # the one place that decides which cell a command reaches

        r = proc.run([self.qconf, *args], env=ge_env(self.cfg), timeout=self.cfg.gridengine.timeout)
        return r.stdout if r.returncode == 0 else ""


def gather_facts(cfg: config.SiteConfig, qconf: _Qconf) -> Facts:
    facts = Facts(
        pes=parse_list(qconf("-spl")),
        complexes=parse_complexes(qconf("-sc")),
        global_values=parse_values(parse_attrs(qconf("-se", "global")).get("complex_values", "NONE")),
    )
    existing = parse_list(qconf("-sql"))
    for q in dict.fromkeys(p.queue for p in cfg.partitions.values()):
        if q in existing:
            facts.queues[q] = parse_attrs(qconf("-sq", q))
    for q in existing:  # every queue's: a plain qsub reaches any of them
        attrs = facts.queues.get(q) or parse_attrs(qconf("-sq", q))
        if "tmpdir" in attrs:
            facts.tmpdirs[q] = attrs["tmpdir"]
    for host in parse_list(qconf("-sel")):
        facts.host_values[host] = parse_values(parse_attrs(qconf("-se", host)).get("complex_values", "NONE"))
    sconf = qconf("-ssconf")
    facts.scheduler = parse_attrs(sconf) if sconf else None
    return facts


# --------------------------------------------------------------------------------------------
# doctor on every execution host: a tiny job per host, through Grid Engine itself

HOST_CHECK_TIMEOUT = 60.0
# the check job's exit codes -> what is wrong on that host
HOST_PROBLEMS = {
    126: "cannot run the shim's interpreter {python}",
    127: "has no interpreter {python}",
    11: "{python} -I cannot import the shim from {src}",
    12: "has another slurm-shim version than {version}",
    13: "imports the shim from another directory than {src}",
    14: "has no site config {config}",
    15: "has another site config at {config} than this host",
    16: "has no state dir {state_dir} laid out by root (users/ root's, 1777): it must be the one shared directory",
    17: "gives jobs a TMPDIR in a directory that someone other than root can write (" + TMPDIR_HARM + ")",
}
HOST_FIXES = {
    126: "install the shim at {prefix} on it (the same path as here), or share {prefix}",
    127: "install the shim at {prefix} on it (the same path as here), or share {prefix}",
    11: "install the shim at {prefix} on it (the same path as here), or share {prefix}",
    12: "install slurm-shim {version} at {prefix} there too",
    13: "install it at the same path as here ({src})",
    14: "copy {config} there (the job wrapper reads it on the execution host)",
    15: "copy {config} there: every host must read the same site config",
    16: "mount the shared {state_dir} there (made by root once, on the file server)",
    17: "give every queue a tmpdir under a directory of root's that only root can write (" + TMPDIR_BASE
        + "), and check it there: doctor lists each queue's",
}


def host_check_script(python: str, src_dir: str, config_path: str | None, state_dir: str) -> str:
    """The check job: this installation's interpreter, isolated as the job wrapper runs (`python -I`),
    imports the shim and the job wrapper from the same directory, with the same version, and finds
    the same site config, the state dir's layout (state_dir "": not looked at) and a TMPDIR whose
    directory is root's alone (Grid Engine's tmpdir there); the exit code says what failed
    (HOST_PROBLEMS)."""
    import hashlib
    import shlex

    src = repr(src_dir)
    digest = ""
    if config_path:
        with open(config_path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    from .. import __version__

    code = (
        "import hashlib, os, stat, sys\n"
        f"sys.path.insert(0, {src})\n"
        "try:\n import shim, shim.runtime.jobwrap\nexcept Exception:\n sys.exit(11)\n"
        f"if shim.__version__ != {__version__!r}: sys.exit(12)\n"
        f"if os.path.dirname(os.path.dirname(os.path.abspath(shim.__file__))) != {src}: sys.exit(13)\n"
        f"conf, digest = {config_path!r}, {digest!r}\n"
        "if conf:\n"
        " try:\n  data = open(conf, 'rb').read()\n except OSError:\n  sys.exit(14)\n"
        " if hashlib.sha256(data).hexdigest() != digest: sys.exit(15)\n"
        # the job's own TMPDIR (<tmpdir>/<job>.<task>.<queue>): its directory must be root's alone
        "t = os.environ.get('TMPDIR', '')\n"
        "if t:\n"
        " try:\n  st = os.lstat(os.path.dirname(os.path.normpath(t)))\n except OSError:\n  sys.exit(17)\n"
        " if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022: sys.exit(17)\n"
        f"if not {state_dir!r}: sys.exit(0)\n"
        "try:\n"
        f" st = os.stat(os.path.join({state_dir!r}, 'users'))\n"
        "except OSError:\n sys.exit(16)\n"
        "sys.exit(0 if st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o1777 else 16)\n"
    )
    return f"#!/bin/sh\nexec {shlex.quote(python)} -I -c {shlex.quote(code)}\n"


_EXITED = re.compile(r"exited with exit code (\d+)")


def host_finding(host: str, qsub: str, cfg: config.SiteConfig, script: str, where: Mapping[str, str],
                 timeout: float = HOST_CHECK_TIMEOUT) -> Finding:
    """Run the check job on host (qsub -sync y -l h=host) and judge its exit code."""
    from ..gridengine.engine import ge_env

    name = f"shim_doctor_{os.getpid()}_" + re.sub(r"[^A-Za-z0-9_]", "_", host)  # qdel after a timeout: this one only
    argv = [qsub, "-sync", "y", "-N", name, "-l", f"h={host}", "-o", "/dev/null", "-e", "/dev/null",
            "-S", "/bin/sh", "-wd", "/"]
    try:
        r = proc.run(argv, input=script, env=ge_env(cfg), cwd="/", timeout=timeout)
    except proc.SpawnError:
        try:
            proc.run([os.path.join(os.path.dirname(qsub), "qdel"), name], env=ge_env(cfg), cwd="/", timeout=30)
        except proc.SpawnError:
            pass
        return Finding("warn", f"exec host {host}: the check job did not run within {timeout:g} s "
                       "(no free slot there?): not checked", "run slurm-shim doctor again when it has room")
    m = _EXITED.search(r.stdout + r.stderr)
    code = int(m.group(1)) if m else None
    if code == 0:
        return Finding("ok", f"exec host {host}: slurm-shim {where['version']} from {where['src']}, the site config "
                       f"and the state dir {cfg.cluster.state_dir} are there")
    if code in HOST_PROBLEMS:
        return Finding("FAIL", f"exec host {host} " + HOST_PROBLEMS[code].format(**where),
                       HOST_FIXES[code].format(**where))
    said = (r.stderr.strip() or r.stdout.strip()).splitlines()[-1:] or [f"exit {r.returncode}"]
    return Finding("FAIL", f"exec host {host}: the check job failed: {said[0]}",
                   f"see qacct -j {name}; the job runs the shim's interpreter as you, on that host")


def host_findings(cfg: config.SiteConfig, qsub: str, hosts: Iterable[str], config_path: str | None) -> list[Finding]:
    """doctor on every execution host, at once: the shim at the same path with the same version,
    the same site config, the shared state dir (README: Several hosts)."""
    import sys

    from .. import __version__

    hosts = sorted(hosts)
    if not hosts:
        return []
    python = proc.shim_python("runtime.jobwrap", "run")[0]  # what every job wrapper runs
    src = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["shim"].__file__)))
    where = {"python": python, "prefix": os.path.dirname(os.path.dirname(python)), "version": __version__,
             "src": src, "config": config_path or "(none)", "state_dir": cfg.cluster.state_dir}
    # the state dir is compared only where it is laid out here (else doctor says so once, above)
    laid_out = not state.layout_problems(cfg.cluster.state_dir)
    script = host_check_script(python, src, config_path, cfg.cluster.state_dir if laid_out else "")
    with ThreadPoolExecutor(max_workers=min(8, len(hosts))) as pool:
        return list(pool.map(lambda h: host_finding(h, qsub, cfg, script, where), hosts))


def doctor(hosts: bool = True) -> int:
    path = config.config_path()
    findings: list[Finding] = []
    if os.path.exists(path):
        cfg, findings = doctor_config(path)
    else:
        cfg = config.SiteConfig()
        findings.append(Finding("warn", f"no site config at {path}; checking the built-in defaults",
                                "run slurm-shim cluster up, or set SLURM_SHIM_CONFIG"))
        findings.append(release_finding(cfg, None))
    findings += live_findings(cfg, path, hosts, path if os.path.exists(path) else None)
    findings += state_findings(cfg.cluster.state_dir, read_state(cfg.cluster.state_dir))  # qmaster or not
    findings += private_findings(cfg.cluster.state_dir)
    findings += store_findings(cfg)
    findings += kernel_findings()
    for f in findings:
        print(f.line())
    return 1 if any(f.level == "FAIL" for f in findings) else 0


def doctor_config(path: str) -> tuple[config.SiteConfig, list[Finding]]:
    """The site config doctor checks, and its first lines: valid, and the Slurm release the site
    follows. An unknown ``[slurm] release`` is a FAIL line of its own, naming the releases the shim
    follows, and the rest is still checked (read without that key); any other error stops doctor."""
    try:
        cfg = config.load(path)
    except ShimError:
        value, rest = _without_release(path)
        if rest is None:
            raise
        from ..slurm import releases

        return rest, [Finding("FAIL", f"slurm release: {path} names [slurm] release = {value!r}, not a release the "
                              "shim follows", f"name one of {', '.join(releases.NAMES)} (a site on a release between "
                              "two of them names the newest not newer than its own: 23.02 and 23.11 are 22.05, 25.05 "
                              "and 25.11 are 24.11)")]
    return cfg, [Finding("ok", f"site config {path} is valid"), release_finding(cfg, path)]


def _without_release(path: str) -> tuple[object, config.SiteConfig | None]:
    """(the [slurm] release value, the config validated without it) when that value is not a
    release the shim follows and the rest is valid; else (None, None)."""
    import tomllib

    from ..slurm import releases

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, ValueError):  # (tomllib.TOMLDecodeError is a ValueError)
        return None, None
    slurm = data.get("slurm")
    if not isinstance(slurm, dict) or "release" not in slurm or slurm["release"] in releases.NAMES:
        return None, None
    value = slurm.pop("release")
    try:
        return value, config.SiteConfig.model_validate(data)
    except ValueError:  # (pydantic's ValidationError is one): config.load's lines say it all
        return None, None


def kept_release(path: str) -> str | None:
    """The ``[slurm] release`` the site config at ``path`` names when it is one the shim follows
    (cluster up without --slurm-release keeps a cell's release); None: no such file, key or release."""
    import tomllib

    from ..slurm import releases

    try:
        with open(path, "rb") as f:  # root's own config (/etc/slurm-shim), which only root writes
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return None
    slurm = data.get("slurm")
    value = slurm.get("release") if isinstance(slurm, dict) else None
    return value if value in releases.NAMES else None


def release_finding(cfg: config.SiteConfig, path: str | None) -> Finding:
    """doctor's line of the Slurm release the site follows: the config's [slurm] release, else the
    default, the newest (issue 30)."""
    from ..slurm import releases

    r = releases.get(cfg.slurm.release)
    if "slurm" in cfg.model_fields_set and "release" in cfg.slurm.model_fields_set:
        where = f"[slurm] release in {path}"
    else:
        where = (f"the default, the newest: {path} names no [slurm] release" if path
                 else "the default, the newest: no site config")
    return Finding("ok", f"slurm release {r.name}: the commands follow Slurm {r.version} ({where})")


def live_findings(cfg: config.SiteConfig, path: str, hosts: bool = False, config_file: str | None = None) -> list[Finding]:
    bin_dir = cfg.gridengine.bin_dir or None
    where = {name: shutil.which(name, path=bin_dir) for name in Q_COMMANDS}
    missing = [name for name, found in where.items() if not found]
    if missing:
        return [Finding("FAIL", f"commands not found: {' '.join(missing)}",
                        f"install gridengine-client, or set gridengine.bin_dir in {path}")]
    found = [Finding("ok", f"commands {' '.join(Q_COMMANDS)} found in {os.path.dirname(where['qconf'])}")]
    qconf = _Qconf(cfg, where["qconf"])
    try:
        answered = bool(qconf("-sh"))
    except proc.SpawnError:
        answered = False
    if not answered:
        return [*found, Finding("FAIL", "sge_qmaster does not answer", "slurm-shim cluster up (as root)")]
    found.append(Finding("ok", "sge_qmaster answers"))
    facts = gather_facts(cfg, qconf)
    found += doctor_findings(cfg, facts, path)
    return found + (host_findings(cfg, where["qsub"], facts.host_values, config_file) if hosts else [])


# --------------------------------------------------------------------------------------------
# Entry point
