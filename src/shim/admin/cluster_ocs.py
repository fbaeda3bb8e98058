"""`slurm-shim cluster up|down|status --flavour ocs`: an Open Cluster Scheduler 9.x cell.

`up` builds Open Cluster Scheduler from its source tarball (Debian packages only; the build is
cached by the tarball's sha256 under a root-only directory, so a second machine-local run skips
it), installs it non-interactively under its own SGE_ROOT (/opt/ocs) with its own cell, ports, gid
range and first job id, gives it the queues, PEs and complexes of the Debian cell (cluster.py's
desired configuration: one definition for both), starts its daemons and runs the same test jobs.
It writes the cell's own site config (/etc/slurm-shim/ocs.toml, chosen with SLURM_SHIM_CONFIG).
Like the Debian flavour every step looks before it changes, so running it again changes nothing.

It lives next to the Debian cell and never touches it: other ports (7444/7445 instead of
/etc/services' 6444/6445), gid range 21000-21100 (Debian's: 65400-65500), job ids from 500000
(the shim keys per-job files by job id), its own state dir, and daemons found by their own pid
files (both cells' daemons are named sge_qmaster/sge_execd, so never by name).

The installer (`inst_sge -auto`) refuses this host as it is set up for the Debian cell (the
host name resolves to 127.0.0.1, see shared/ocs/README.md): `install` puts two hooks, inert unless
their environment variables are set, into the copy of the installer under SGE_ROOT, and installs
the master and the execd separately (`-x -noremote`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from . import cluster, install
from .. import proc
from ..store import state
from ..gridengine import metrics
from .cluster import ClusterError, must, phase

SGE_ROOT = "/opt/ocs"
SGE_CELL = "default"
QMASTER_PORT = 7444
EXECD_PORT = 7445
CLUSTER_NAME = f"ocs{QMASTER_PORT}"
GID_RANGE = "21000-21100"
FIRST_JOB_ID = 500000  # jobseqnum: the next job gets FIRST_JOB_ID + 1
CACHE_DIR = "/var/cache/slurm-shim/ocs"  # root's, 0700: what is built here later runs as root
SITE_CONFIG = "/etc/slurm-shim/ocs.toml"
STATE_DIR = "/var/spool/slurm-shim-ocs"
TARBALL_ENV = "SLURM_SHIM_OCS_TARBALL"
STAMP = ".slurm-shim-build"  # in SGE_ROOT: the sha256 of the tarball its binaries came from
TOP_DIR = "clusterscheduler"  # the tarball's one top directory (the build requires this name)

# Debian 12 packages that replace every download of the default build (WITH_OS_3RDPARTY=ON).
BUILD_PACKAGES = (
    "build-essential", "cmake", "libdb5.3-dev", "libjemalloc-dev", "libhwloc-dev", "rapidjson-dev",
    "libudev-dev", "libmunge-dev", "libtirpc-dev", "gawk",
)
BUILD_TIMEOUT = 3600.0
# 9.1.4's ocs_qquota_print.cc uses ptrdiff_t without <cstddef> (gcc 12: "'ptrdiff_t' does not name
# a type"). The build forces CMAKE_CXX_FLAGS (cache FORCE), so the include goes in the Release flags.
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release", "-DENABLE_LTO=OFF", "-DWITH_OS_3RDPARTY=ON", "-DWITH_JNI=OFF",
    "-DINSTALL_SGE_TEST=OFF", "-DCMAKE_CXX_FLAGS_RELEASE=-O3 -DNDEBUG -include cstddef",
)


# --------------------------------------------------------------------------------------------
# The cell


@dataclass(frozen=True)
class Cell:
    """Where an OCS cell lives and how its clients reach it."""

    root: str = SGE_ROOT
    cell: str = SGE_CELL
    qmaster_port: int = QMASTER_PORT
    execd_port: int = EXECD_PORT

    @property
    def common(self) -> str:
        return f"{self.root}/{self.cell}/common"

    @property
    def spool(self) -> str:
        return f"{self.root}/{self.cell}/spool"

    @property
    def qmaster_spool(self) -> str:
        return f"{self.spool}/qmaster"

    def arch(self) -> str:
        """The binaries' architecture directory (lx-amd64 here), as installed."""
        found = sorted(p.name for p in Path(self.root, "bin").glob("*") if (p / "qconf").exists())
        if not found:
            raise ClusterError(f"no Open Cluster Scheduler binaries under {self.root}/bin")
        return found[0]

    def bin_dir(self) -> str:
        return f"{self.root}/bin/{self.arch()}"

    def lib_dir(self) -> str:
        return f"{self.root}/lib/{self.arch()}"

    def env(self) -> dict[str, str]:
        """A clean environment naming this cell completely (the daemons' is what jobs inherit)."""
        return {
            "PATH": f"{self.bin_dir()}:{cluster.CLEAN_PATH}", "LANG": "C.UTF-8",
            "SGE_ROOT": self.root, "SGE_CELL": self.cell,
            "SGE_QMASTER_PORT": str(self.qmaster_port), "SGE_EXECD_PORT": str(self.execd_port),
        }


# --------------------------------------------------------------------------------------------
# Build (cached by the tarball's sha256)


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def root_dir(path: str) -> str:
    """path as a directory of root's that nobody else may write, along with every parent: what is
    built in it runs as root later. Made (0700) if missing; ClusterError if anything else is there."""
    parts = Path(path).parts
    for i in range(2, len(parts) + 1):
        p = os.path.join(*parts[:i])
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            os.mkdir(p, 0o700)
            st = os.lstat(p)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0:
            raise ClusterError(f"{p} must be a directory of root's (it is not)")
        last = i == len(parts)
        if st.st_mode & 0o022 and (last or not st.st_mode & stat.S_ISVTX):  # a sticky /tmp above is fine
            raise ClusterError(f"{p} must not be writable by others")
    return path


def missing_packages(packages: tuple[str, ...] = BUILD_PACKAGES) -> list[str]:
    r = proc.run(["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n", *packages])
    ok = {line.split()[0] for line in r.stdout.splitlines() if line.split()[1:2] == ["ii"]}
    return [p for p in packages if p not in ok]


def ensure_build_packages() -> str:
    todo = missing_packages()
    if not todo:
        return "installed"
    apt_env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt = ("apt-get", "-o", "DPkg::Lock::Timeout=900")
    must(*apt, "update", timeout=900, env=apt_env)
    must(*apt, "install", "-y", "--no-install-recommends", *todo, timeout=1800, env=apt_env)
    return "installed " + " ".join(todo)


def _logged(log: Path, argv: list[str], cwd: str, env: dict[str, str]) -> None:
    """Run a build step, appending its output to log; ClusterError with the last lines on failure."""
    r = proc.run(argv, timeout=BUILD_TIMEOUT, env=env, cwd=cwd)
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"$ {' '.join(argv)}\n{r.stdout}{r.stderr}\n")
    if r.returncode != 0:
        tail = [line for line in (r.stdout + r.stderr).splitlines() if "error" in line.lower()][-3:]
        tail = tail or (r.stdout + r.stderr).splitlines()[-3:]
        raise ClusterError(f"{argv[0]} {argv[1] if len(argv) > 1 else ''} failed (exit {r.returncode}), "
                           f"see {log}: {' / '.join(t.strip() for t in tail)}")


def build(tarball: str, digest: str, cache: str = CACHE_DIR) -> tuple[str, str]:
    """The installed tree built from tarball (sha256 digest), from the cache or built now.
    Returns (the tree's directory, a note)."""
    home = Path(root_dir(cache), digest)
    dist = home / "dist"
    if (dist / "bin").is_dir():
        return str(dist), f"cached ({digest[:12]})"
    root_dir(str(home))
    for old in ("work", "dist.part"):
        shutil.rmtree(home / old, ignore_errors=True)
    work, part, log = home / "work", home / "dist.part", home / "build.log"
    work.mkdir(0o700)
    log.write_text("")
    env = {"PATH": cluster.CLEAN_PATH, "LANG": "C.UTF-8", "HOME": str(work)}
    _logged(log, ["tar", "-xzf", os.path.abspath(tarball), "-C", str(work), "--no-same-owner"], str(work), env)
    src = work / TOP_DIR
    if not (src / "CMakeLists.txt").exists():
        raise ClusterError(f"{tarball}: no {TOP_DIR}/CMakeLists.txt in it (not an Open Cluster Scheduler source tarball)")
    jobs = str(os.cpu_count() or 1)
    nice = ["nice", "-n", "10"]
    _logged(log, [*nice, "cmake", "-S", str(src), "-B", str(work / "build"), *CMAKE_OPTIONS,
                  f"-DCMAKE_INSTALL_PREFIX={part}"], str(work), env)
    _logged(log, [*nice, "make", "-C", str(work / "build"), "-j", jobs], str(work), env)
    _logged(log, ["make", "-C", str(work / "build"), "install"], str(work), env)
    if not (part / "bin").is_dir():
        raise ClusterError(f"the build installed no bin/ into {part} (see {log})")
    part.rename(dist)
    shutil.rmtree(work, ignore_errors=True)
    return str(dist), f"built {digest[:12]} with {jobs} jobs"


# --------------------------------------------------------------------------------------------
# Install: the binaries into SGE_ROOT, then the cell with inst_sge


# Two hooks in the installer's own copy under SGE_ROOT, inert unless their variable is set:
# inst_sge refuses a host whose name resolves to 127.0.0.1 (the Debian cell's /etc/hosts setup),
# and qmaster needs host_aliases (`vm localhost`) before its first start, which -auto gives no
# chance to write (it refuses an existing cell directory).
HOOK_MARK = "# slurm-shim cluster up --flavour ocs"
INSTALLER_HOOKS = (
    ("util/install_modules/inst_common.sh",
     "CheckForLocalHostResolving()\n{\n",
     f'   if [ -n "$SLURM_SHIM_LOCALHOST_OK" ]; then return; fi  {HOOK_MARK}\n'),
    ("util/install_modules/inst_qmaster.sh",
     "   $ECHO $HOST >> $COMMONDIR/act_qmaster\n   SetPerm $COMMONDIR/act_qmaster\n",
     f'   if [ -n "$SLURM_SHIM_HOST_ALIASES" ]; then  {HOOK_MARK}\n'
     '      printf \'%s\\n\' "$SLURM_SHIM_HOST_ALIASES" > $COMMONDIR/host_aliases\n'
     '      SetPerm $COMMONDIR/host_aliases\n'
     '   fi\n'),
)


def hooked(text: str, anchor: str, hook: str) -> str | None:
    """text with hook inserted after anchor, None if it is there already; ClusterError if the
    anchor is missing (an installer this code does not know)."""
    if anchor + hook in text:
        return None
    if text.count(anchor) != 1:
        raise ClusterError(f"the installer changed: {anchor.splitlines()[0]!r} is not there once")
    return text.replace(anchor, anchor + hook)


def hook_installer(root: str) -> bool:
    changed = False
    for rel, anchor, hook in INSTALLER_HOOKS:
        path = Path(root, rel)
        text = hooked(path.read_text(), anchor, hook)
        if text is not None:
            state.atomic_write(str(path), text, stat.S_IMODE(path.stat().st_mode))
            changed = True
    return changed


def installed_digest(c: Cell) -> str:
    try:
        return Path(c.root, STAMP).read_text().strip()
    except OSError:
        return ""


def tarball_path(source: str | None) -> str | None:
    return source or os.environ.get(TARBALL_ENV) or None


def ensure_binaries(c: Cell, source: str | None, cache: str = CACHE_DIR) -> str:
    """SGE_ROOT holds the binaries built from the tarball (from the cache when built before)."""
    tarball = tarball_path(source)
    have = installed_digest(c)
    if have and tarball is None:
        return f"installed ({have[:12]})"
    if tarball is None:
        raise ClusterError(f"{c.root} has no Open Cluster Scheduler yet: give its source tarball "
                           f"(--source TARBALL or ${TARBALL_ENV})")
    if not os.path.isfile(tarball):
        raise ClusterError(f"{tarball}: no such file")
    digest = sha256(tarball)
    if digest == have:
        return f"installed ({have[:12]})"
    dist, note = build(tarball, digest, cache)
    root_dir(os.path.dirname(os.path.abspath(c.root)) or "/")
    if os.path.isdir(c.root) and live_daemons(c):  # other binaries: a running one cannot be overwritten
        note += f", stopped {' and '.join(stop(c))}"
    shutil.copytree(dist, c.root, symlinks=True, dirs_exist_ok=True)
    os.chmod(c.root, 0o755)
    hook_installer(c.root)
    state.atomic_write(str(Path(c.root, STAMP)), digest + "\n", 0o644)
    return f"{note}, copied to {c.root}"


def inst_conf(template: str, values: dict[str, str]) -> str:
    """inst_template.conf with values set (every key must be in the template)."""
    lines, seen = [], set()
    for line in template.splitlines():
        key = line.split("=", 1)[0]
        if "=" in line and not line.startswith("#") and key in values:
            line = f'{key}="{values[key]}"'
            seen.add(key)
        lines.append(line)
    if missing := set(values) - seen:
        raise ClusterError(f"the installer's template has no {', '.join(sorted(missing))}")
    return "\n".join(lines) + "\n"


def inst_values(c: Cell, host: str, gid_range: str = GID_RANGE) -> dict[str, str]:
    return {
        "SGE_ROOT": c.root, "SGE_QMASTER_PORT": str(c.qmaster_port), "SGE_EXECD_PORT": str(c.execd_port),
        "SGE_CLUSTER_NAME": f"ocs{c.qmaster_port}", "CELL_NAME": c.cell, "ADMIN_USER": "",
        "QMASTER_SPOOL_DIR": c.qmaster_spool, "EXECD_SPOOL_DIR": c.spool, "EXECD_SPOOL_DIR_LOCAL": "",
        "GID_RANGE": gid_range, "SPOOLING_METHOD": "classic",
        "ADMIN_HOST_LIST": host, "SUBMIT_HOST_LIST": host, "EXEC_HOST_LIST": host,
        "HOSTNAME_RESOLVING": "true", "DEFAULT_DOMAIN": "none", "ADD_TO_RC": "false",
        "SLICE_NAME": f"ocs{c.qmaster_port}", "SGE_ENABLE_SMF": "false",
    }


INSTALLED = ".slurm-shim-installed"  # in the cell's common dir: both inst_sge runs succeeded
INST_TIMEOUT = 600.0


def reverse_name(host: str) -> str:
    """The name host's address resolves back to (localhost when /etc/hosts maps it to 127.0.0.1)."""
    import socket

    try:
        return socket.gethostbyaddr(socket.gethostbyname(host))[0]
    except OSError:
        return host


def inst_log(c: Cell, mode: str) -> str:
    """inst_sge's output (another cell's beside this one's: the tests' raw cell)."""
    return f"{c.root}/inst_sge{mode}.log" if c.cell == SGE_CELL else f"{c.root}/inst_sge{mode}-{c.cell}.log"


def run_inst_sge(c: Cell, mode: list[str], conf: str, host: str) -> None:
    env = {"PATH": cluster.CLEAN_PATH, "LANG": "C", "SLURM_SHIM_LOCALHOST_OK": "1"}
    reverse = reverse_name(host)
    if reverse != host:
        env["SLURM_SHIM_HOST_ALIASES"] = f"{host} {reverse}"
    r = proc.run(["./inst_sge", *mode, "-auto", conf], timeout=INST_TIMEOUT, env=env, cwd=c.root)
    log = Path(inst_log(c, mode[0]))
    log.write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        tail = [line for line in (r.stdout + r.stderr).splitlines() if line.strip()][-3:]
        raise ClusterError(f"inst_sge {' '.join(mode)} failed (exit {r.returncode}), see {log}: {' / '.join(tail)}")


def ensure_cell(c: Cell, host: str, gid_range: str = GID_RANGE, first_job_id: int = FIRST_JOB_ID) -> str:
    """The cell, installed by inst_sge (master, then execd on this host); job ids from
    first_job_id. (A cell beside this one, as the tests' raw cell: a gid range and job ids of its
    own.)"""
    common = Path(c.common)
    if (common / INSTALLED).exists():
        return "installed"
    cell_dir = Path(c.root, c.cell)
    if cell_dir.exists():  # a failed earlier install: nothing in it is worth keeping
        stop(c)
        shutil.rmtree(cell_dir)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="slurm-shim-ocs-") as tmp:
        conf = os.path.join(tmp, "inst.conf")
        template = Path(c.root, "util/install_modules/inst_template.conf").read_text()
        Path(conf).write_text(inst_conf(template, inst_values(c, host, gid_range)))
        run_inst_sge(c, ["-m"], conf, host)
        if not (common / "act_qmaster").exists():
            raise ClusterError(f"inst_sge -m made no {common}/act_qmaster (see {inst_log(c, '-m')})")
        cluster.poll(lambda: qmaster_answers(c), cluster.WAIT_QMASTER, "the new qmaster does not answer")
        # Job ids from FIRST_JOB_ID: the shim keys per-job files by id alone, so the two cells'
        # ids must never meet. qmaster reads jobseqnum at start only.
        stop_daemon(c, "qmaster")
        Path(c.qmaster_spool, "jobseqnum").write_text(f"{first_job_id}\n")
        start_daemon(c, "qmaster")
        run_inst_sge(c, ["-x", "-noremote"], conf, host)
    state.atomic_write(str(common / INSTALLED), f"{time.strftime('%Y-%m-%dT%H:%M:%S')}\n", 0o644)
    return f"installed {c.root}/{c.cell} (qmaster port {c.qmaster_port}, execd port {c.execd_port})"


# --------------------------------------------------------------------------------------------
# Daemons, found by this cell's pid files only (both cells' are named sge_qmaster/sge_execd)


def pidfiles(c: Cell, name: str) -> list[str]:
    import glob

    if name == "qmaster":
        return [f"{c.qmaster_spool}/qmaster.pid"]
    return sorted(glob.glob(f"{c.spool}/*/execd.pid"))


def daemon_pid(c: Cell, name: str) -> int | None:
    for pidfile in pidfiles(c, name):
        try:
            pid = int(Path(pidfile).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if cluster.pid_alive(pid, f"sge_{name}") and _runs_from(pid, c) and cluster.on_this_host(pid):
            return pid
    return None


def _runs_from(pid: int, c: Cell) -> bool:
    """pid's program is this cell's binary (a stale pid file may name another cell's daemon)."""
    try:
        return os.readlink(f"/proc/{pid}/exe").startswith(c.root.rstrip("/") + "/")
    except OSError:
        return False


def live_daemons(c: Cell) -> dict[str, int]:
    return {name: pid for name in ("qmaster", "execd") if (pid := daemon_pid(c, name)) is not None}


def start_daemon(c: Cell, name: str) -> int:
    must(f"{c.bin_dir()}/sge_{name}", timeout=60, env=c.env())
    return cluster.poll(lambda: daemon_pid(c, name), cluster.WAIT_QMASTER,
                        f"sge_{name} of {c.root} did not write its pid file")


def stop_daemon(c: Cell, name: str) -> None:
    pid = daemon_pid(c, name)
    if pid is None:
        return
    asked = False
    try:
        if name == "qmaster":
            asked = proc.run([f"{c.bin_dir()}/qconf", "-km"], env=c.env(), timeout=30).returncode == 0
        else:
            asked = proc.run([f"{c.bin_dir()}/qconf", "-ke", cluster.this_host()], env=c.env(), timeout=30).returncode == 0
    except proc.SpawnError:
        pass
    cluster.stop_pids([pid], cluster.WAIT_STOP if asked else 0.0)


def qmaster_answers(c: Cell) -> bool:
    try:
        return proc.run([f"{c.bin_dir()}/qconf", "-sh"], env=c.env(), timeout=10).returncode == 0
    except proc.SpawnError:
        return False


def stop(c: Cell) -> list[str]:
    """Stop this cell's daemons (execd first, as qmaster is needed to ask it). What was stopped."""
    running = live_daemons(c)
    for name in ("execd", "qmaster"):
        if name in running:
            stop_daemon(c, name)
    return list(running)


def ensure_qmaster(c: Cell) -> str:
    note = "running"
    if daemon_pid(c, "qmaster") is None:
        start_daemon(c, "qmaster")
        note = "started"
    cluster.poll(lambda: qmaster_answers(c), cluster.WAIT_QMASTER,
                 f"the qmaster of {c.root} does not answer (see {c.qmaster_spool}/messages)")
    return note


def ensure_execd(c: Cell, global_changed: bool) -> str:
    pid = daemon_pid(c, "execd")
    if pid is not None and not global_changed:
        return "running"
    if pid is not None:  # a running execd reads min_uid etc. late (see cluster.ensure_execd)
        stop_daemon(c, "execd")
    start_daemon(c, "execd")
    return "restarted (global config changed)" if pid else "started"


# --------------------------------------------------------------------------------------------
# The desired cell: cluster.py's, with what OCS needs differently


# The accounting OCS 9 writes by default, accounting.jsonl (the shim reads it, and the colon file
# of old_accounting=true as well: OCS writes one or the other, never both). finished_jobs 0: OCS
# keeps the last 100 finished jobs in qmaster, and they keep their PE referenced ("Pe ... is still
# referenced in job N"), so a PE a site removes (install --uninstall) would be refused until 100
# more jobs ended. The shim reads ended jobs from accounting, never from qmaster's zombie list.
#
# usage_patterns: the job's own metrics (the lines the metrics epilog adds to its usage file,
# gridengine/metrics.py) into its accounting record, under usage.metrics. The epilog script is put
# in the cell's common directory, but no queue or global configuration names it: OCS 9.1.4's
# shepherd fails every `qrsh -pty n` job (srun's) of a queue that has a prolog or epilog ("error:
# fd for in is not 0" before the epilog, and the queue goes into error state: builtin_starter.cc
# keeps a qrsh job's first three descriptors open for its prolog and epilog, then requires the
# /dev/null it opens as stdin to be descriptor 0; seen live 2026-12-02). A site names it
# (epilog_conf) on queues that run batch jobs only (qtype BATCH), where it is safe.
GLOBAL_CONF = {**cluster.GLOBAL_CONF, "finished_jobs": "0",
               "reporting_params": f"{cluster.GLOBAL_CONF['reporting_params']} usage_patterns={metrics.USAGE_PATTERN}"}
EPILOG = "slurm-shim-epilog"


def epilog_path(c: Cell) -> str:
    return f"{c.common}/{EPILOG}"


def epilog_conf(c: Cell) -> str:
    """The ``epilog`` value that runs the metrics epilog (``root@``: the shepherd starts it as root,
    in the job's environment, after the job; it always exits 0)."""
    return f"root@{epilog_path(c)}"


def ensure_epilog(c: Cell) -> bool:
    """The epilog script (metrics.epilog_script) in the cell's common directory, root's, 0755, for
    this installation's interpreter. True if it was (re)written."""
    import sys

    import shim

    src = os.path.dirname(os.path.dirname(os.path.abspath(shim.__file__)))
    text = metrics.epilog_script(sys.executable or "/usr/bin/python3", src)
    path = Path(epilog_path(c))
    try:
        st = path.lstat()
        if (stat.S_ISREG(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o755
                and path.read_text() == text):
            return False
    except OSError:
        pass
    state.atomic_write(str(path), text, 0o755)
    return True


def ocs_pe(pe: dict[str, str]) -> dict[str, str]:
    """A PE of cluster.PES as OCS 9 takes it: no qsort_args (`unknown attribute name`), and the
    attributes it requires (`required attribute "ign_sreq_on_mhost" is missing`) at their defaults."""
    out = {k: v for k, v in pe.items() if k != "qsort_args"}
    out.update(ign_sreq_on_mhost="FALSE", master_forks_slaves="FALSE", daemon_forks_slaves="FALSE")
    return out


PES = tuple(ocs_pe(pe) for pe in cluster.PES)


def host_slots(cores: int) -> int:
    """OCS caps an exec host's slots (complex_values slots=<cores>, re-added when left out), which
    SGE 8.1.9 does not: room for every partition's queue slots at once, as on Debian's cell."""
    return len(cluster.PARTITIONS) * cluster.queue_slots(cores)


def site_config_text(c: Cell, release: str | None = None) -> str:
    return cluster.site_config_text(
        flavour=" --flavour ocs", release=release, state_dir=STATE_DIR, sge_root=c.root, sge_cell=c.cell, bin_dir=c.bin_dir(),
        qmaster_port=c.qmaster_port, execd_port=c.execd_port, drmaa_library=f"{c.lib_dir()}/libdrmaa.so",
        # the per-user daemon's submissions load this cell's drmaa_library (started with the cell's ge_env)
        submit="agent",
    )


# --------------------------------------------------------------------------------------------
# Entry points


def up(source: str | None = None, c: Cell = Cell(), release: str | None = None) -> int:
    """The cell: built from ``source`` (else the cache or the installed one), its site config
    following the Slurm ``release`` (None: the one the cell's site config names, else the newest)."""
    cluster.require_root("cluster up --flavour ocs", "it builds, installs and starts Open Cluster Scheduler")
    cluster.require_debian()
    started = time.monotonic()
    host = cluster.this_host()
    with phase("packages") as p:
        p.note = ensure_build_packages()
    with phase("build") as p:
        p.note = ensure_binaries(c, source)
    with phase("install") as p:
        p.note = ensure_cell(c, host)
    with phase("qmaster") as p:
        p.note = ensure_qmaster(c)
    with cluster.cell(c.env()):
        with phase("configure") as p:
            epilog = ensure_epilog(c)
            changed = cluster.configure(host, global_conf=GLOBAL_CONF, pes=PES,
                                        host_values=f"slots={host_slots(os.cpu_count() or 1)}")
            changed[:0] = ["epilog"] if epilog else []
            p.note = "changed: " + ", ".join(changed) if changed else "unchanged"
        with phase("execd") as p:
            p.note = ensure_execd(c, "global config" in changed)
        with phase("queues") as p:
            p.note = cluster.wait_queues_ready(host)
        with phase("site") as p:
            p.note = install.ensure_site(SITE_CONFIG, site_config_text(c, release or cluster.kept_release(SITE_CONFIG)))
        with phase("test jobs") as p:
            # (OCS 9.1.4: a non-manager's `qsub -sync y` prints the job's end at once but exits up
            # to 30 s later; qmaster logs `denied: "alice" must be manager to initiate TRIGGER
            # operation`. So this phase takes 1-31 s where Debian's takes 1 s.)
            p.note = cluster.run_test_jobs(c.bin_dir())
    print(f"cluster: up in {time.monotonic() - started:.1f} s (Open Cluster Scheduler in {c.root}, "
          f"SLURM_SHIM_CONFIG={SITE_CONFIG})")
    return 0


def down(c: Cell = Cell()) -> int:
    cluster.require_root("cluster down --flavour ocs", "it stops the daemons")
    started = time.monotonic()
    if not os.path.isdir(c.root) or not live_daemons(c):
        print("cluster: already down")
        return 0
    stop(c)
    print(f"cluster: down in {time.monotonic() - started:.1f} s")
    return 0


def status(c: Cell = Cell()) -> int:
    daemons = live_daemons(c) if os.path.isdir(c.root) else {}
    for name in ("qmaster", "execd"):
        print(f"{name:<8} " + (f"up (pid {daemons[name]})" if name in daemons else "down"))
    answers = "qmaster" in daemons and qmaster_answers(c)
    if answers:
        r = proc.run([f"{c.bin_dir()}/qstat", "-f"], env=c.env(), timeout=30)
        for qi, letters in sorted(cluster.parse_queue_states(r.stdout).items()):
            print(f"queue    {qi:<20} {letters or 'ok'}")
    elif "qmaster" in daemons:
        print("qmaster  does not answer")
    print(f"config   {SITE_CONFIG}" + ("" if os.path.exists(SITE_CONFIG) else " (missing)"))
    return 0 if answers and "execd" in daemons else 1
