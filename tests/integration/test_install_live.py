"""`slurm-shim install` on a Grid Engine cluster `cluster up` never configured: a cell of its own,
``raw`` (fixture ``raw_cell``), on ports of its own, installed by the Grid Engine's own means and
then configured with raw qconf only, with a site's names: host group @workers, queues batch.q (PE
mpi_rr, $round_robin, only) and long.q (PEs smp, $pe_slots, and mpi_rr; h_rt 48 h), no shim
complex, the Grid Engine's default global and scheduler configuration (Debian's min_uid 1000: jobs
are a plain user's). --plan proposes a working site config and the missing one-host PE and
exclusive complex; --apply (into scratch paths: never the real site config, state dir or
profile.d) makes sbatch, squeue and sacct work there; a second --apply changes nothing;
--uninstall leaves the cell's qconf dumps as they were found.

The raw cell is of the Grid Engine the session selected (tests/conftest.py: CELL):

* in .ci/run's Debian phase (which runs before Open Cluster Scheduler is built), SGE 8.1.9 from
  Debian's packages, made as their postinsts make a cell (bootstrap, act_qmaster, init_cluster's
  Berkeley DB spool and the shipped defaults), in /var/lib/gridengine/raw, ports 8444/8445;
* in its OCS phase, OCS 9.1.4 from cluster up --flavour ocs's build, installed by its own inst_sge
  (cluster_ocs.ensure_cell: all.q, @allhosts and PE make as it makes them), in /opt/ocs/raw, ports
  8446/8447; the site's qconf also drops all.q and sets finished_jobs 0, as install --plan's note
  says (OCS keeps ended jobs, and their PE, in qmaster: --uninstall could not remove its PE).

It is made once (cold: ~15 s for Debian's), kept between sessions (its daemons are stopped at the
end of the session that started them, when no other session uses them; the next start takes ~3 s),
and made anew whenever its configuration is not the one made here (a run that died half-way)."""

from __future__ import annotations

import fcntl
import glob
import json
import os
import re
import shutil
import stat
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import CELL, command_dir, open_dir, run, wait_until
from shim.admin import cluster, cluster_ocs
from shim.admin.cluster import ClusterError

pytestmark = pytest.mark.gridengine

HOST = cluster.this_host()

# --------------------------------------------------------------------------------------------
# The raw cell: a cell directory, spool, ports, gid range and job ids of its own (Debian's cell:
# 6444/6445, 65400-65500, ids from 10001; the OCS cell: 7444/7445, 21000-21100, ids from 500001)

OCS = CELL == "ocs"
RAW_CELL = "raw"
if OCS:
    RAW_ROOT, RAW_QMASTER_PORT, RAW_EXECD_PORT = cluster_ocs.SGE_ROOT, 8446, 8447
    RAW_SPOOL = f"{RAW_ROOT}/{RAW_CELL}/spool"
    RAW_GID_RANGE, RAW_FIRST_JOB_ID = "22200-22300", 800000
    GE_BIN = os.path.dirname(next(iter(sorted(glob.glob(f"{RAW_ROOT}/bin/*/qconf"))), f"{RAW_ROOT}/bin/lx-amd64/qconf"))
else:
    RAW_ROOT, RAW_QMASTER_PORT, RAW_EXECD_PORT = "/var/lib/gridengine", 8444, 8445
    RAW_SPOOL = "/var/spool/gridengine-raw"
    RAW_GID_RANGE, RAW_FIRST_JOB_ID = "22000-22100", 700000
    GE_BIN = "/usr/lib/gridengine"  # Debian's binaries themselves (/usr/sbin's are wrapper scripts)
OCS_RAW = cluster_ocs.Cell(root=RAW_ROOT, cell=RAW_CELL, qmaster_port=RAW_QMASTER_PORT, execd_port=RAW_EXECD_PORT)
RAW_COMMON = f"{RAW_ROOT}/{RAW_CELL}/common"
ADMIN = "sgeadmin"
STAMP = f"{RAW_COMMON}/.slurm-shim-raw-cell.json"  # the qconf dumps as configured here
LOCK_DIR = f"/run/slurm-shim-raw-cell-{'ocs' if OCS else 'debian'}"
QUEUES, PES, GROUP = ("batch.q", "long.q"), ("mpi_rr", "smp"), "@workers"
# what `qconf -sq`/`-sp` show for a queue or PE made from qconf's own templates (SGE 8.1.9)
QUEUE_TEMPLATE = {
    "qname": "template", "hostlist": "NONE", "seq_no": "0", "load_thresholds": "np_load_avg=1.75",
    "suspend_thresholds": "NONE", "nsuspend": "1", "suspend_interval": "00:05:00", "priority": "0",
    "min_cpu_interval": "00:05:00", "processors": "UNDEFINED", "qtype": "BATCH INTERACTIVE",
    "ckpt_list": "NONE", "pe_list": "make", "rerun": "FALSE", "slots": "1", "tmpdir": "/tmp",
    "shell": "/bin/sh", "prolog": "NONE", "epilog": "NONE", "shell_start_mode": "posix_compliant",
    "starter_method": "NONE", "suspend_method": "NONE", "resume_method": "NONE", "terminate_method": "NONE",
    "notify": "00:00:60", "owner_list": "NONE", "user_lists": "NONE", "xuser_lists": "NONE",
    "subordinate_list": "NONE", "complex_values": "NONE", "projects": "NONE", "xprojects": "NONE",
    "calendar": "NONE", "initial_state": "default",
    **{f"{p}_{r}": "INFINITY" for p in "sh" for r in ("rt", "cpu", "fsize", "data", "stack", "core", "rss", "vmem")},
}
PE_TEMPLATE = {
    "pe_name": "template", "slots": "0", "user_lists": "NONE", "xuser_lists": "NONE",
    "start_proc_args": "NONE", "stop_proc_args": "NONE", "allocation_rule": "$pe_slots",
    "control_slaves": "FALSE", "job_is_first_task": "TRUE", "urgency_slots": "min",
    "accounting_summary": "FALSE", "qsort_args": "NONE",
}


def raw_env() -> dict[str, str]:
    """What points qconf/qstat (the raw cell's binaries first) and slurm-shim install at the raw
    cell, as its settings.sh would."""
    return {"SGE_ROOT": RAW_ROOT, "SGE_CELL": RAW_CELL, "SGE_QMASTER_PORT": str(RAW_QMASTER_PORT),
            "SGE_EXECD_PORT": str(RAW_EXECD_PORT), "PATH": f"{command_dir()}:{GE_BIN}:{cluster.CLEAN_PATH}"}


def daemon_env() -> dict[str, str]:
    """The daemons' own environment, a clean one (every job inherits it)."""
    return {"PATH": cluster.CLEAN_PATH, "LANG": "C.UTF-8", **{k: v for k, v in raw_env().items() if k != "PATH"}}


def rq(*args: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    """A command against the raw cell."""
    return run(*args, env={**raw_env(), **(env or {})}, **kw)


def qconf(*args: str) -> str:
    cp = rq("qconf", *args)
    assert cp.returncode == 0, (args, cp.stdout, cp.stderr)
    return cp.stdout


def names(flag: str) -> list[str]:
    cp = rq("qconf", flag)
    return cluster.parse_list(cp.stdout) if cp.returncode == 0 else []


def dumps() -> dict[str, str]:
    """The raw cell's configuration as qconf shows it: the queue, PE, complex and host group lists,
    every queue, PE and host group, the exec host (where the exclusive complex would go, load
    values left out: they change anyway), the global and scheduler configurations."""
    out = {f: rq("qconf", f).stdout for f in ("-sql", "-spl", "-sc", "-shgrpl", "-sel", "-sconf", "-ssconf")}
    out |= {f"-sq {q}": qconf("-sq", q) for q in names("-sql")}
    out |= {f"-sp {p}": qconf("-sp", p) for p in names("-spl")}
    out |= {f"-shgrp {g}": qconf("-shgrp", g) for g in names("-shgrpl")}
    out[f"-se {HOST}"] = re.sub(r"(?ms)^load_values.*?^(?=\S)", "", qconf("-se", HOST))
    return out


def pidfiles(name: str) -> list[str]:
    """(execd's spool directory is named as this host's address resolves: localhost here)"""
    if name == "qmaster":
        return [f"{RAW_SPOOL}/qmaster/qmaster.pid"]
    return sorted(glob.glob(f"{RAW_SPOOL}/execd/*/execd.pid"))


def daemon_pid(name: str) -> int | None:
    """The raw cell's live daemon (found by its own pid file: all three cells' are sge_<name>)."""
    if OCS:
        return cluster_ocs.daemon_pid(OCS_RAW, name)
    for path in pidfiles(name):
        try:
            pid = int(Path(path).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if cluster.pid_alive(pid, f"sge_{name}") and cluster.on_this_host(pid):
            return pid
    return None


def qmaster_answers() -> bool:
    return rq("qconf", "-sh", timeout=20).returncode == 0


def start_daemon(name: str) -> None:
    if OCS:
        cluster_ocs.start_daemon(OCS_RAW, name)
        return
    cp = subprocess.run([f"/usr/sbin/sge_{name}"], env=daemon_env(), cwd="/", capture_output=True, text=True,
                        timeout=60)
    assert cp.returncode == 0, f"sge_{name} of the raw cell did not start: {cp.stdout}{cp.stderr}"
    wait_until(lambda: daemon_pid(name), 60, f"the raw cell's sge_{name} to write its pid file in {RAW_SPOOL}")


def stop_daemons() -> None:
    """execd first (qmaster is what asks it), then qmaster; signalled if they do not go."""
    if OCS:
        cluster_ocs.stop(OCS_RAW)
        return
    pids = {n: daemon_pid(n) for n in ("execd", "qmaster")}
    asked = True
    if pids["execd"]:
        asked = rq("qconf", "-ke", HOST, timeout=20).returncode == 0
    if pids["qmaster"]:
        asked = rq("qconf", "-km", timeout=20).returncode == 0 and asked
    cluster.stop_pids([p for p in pids.values() if p], 30.0 if asked else 0.0)


def as_admin(*argv: str) -> None:
    cp = subprocess.run(["runuser", "-u", ADMIN, "--", "env", *(f"{k}={v}" for k, v in daemon_env().items()), *argv],
                        capture_output=True, text=True, timeout=120, cwd="/")
    assert cp.returncode == 0, f"{' '.join(argv)} failed: {cp.stdout}{cp.stderr}"


def admin_file(path: str, text: str, mode: int = 0o644) -> None:
    Path(path).write_text(text)
    os.chmod(path, mode)
    shutil.chown(path, ADMIN, ADMIN)


def make_cell() -> None:
    """The bare cell as its Grid Engine installs one, then the site's qconf."""
    if OCS:
        cluster_ocs.ensure_cell(OCS_RAW, HOST, RAW_GID_RANGE, RAW_FIRST_JOB_ID)  # (inst_sge -m, -x: both daemons)
        configure()
    else:
        make_debian_cell()


def make_debian_cell() -> None:
    """The cell as Debian's gridengine-common, -client and -master postinsts make theirs (bootstrap,
    act_qmaster, init_cluster's spool and defaults), with its own spool, execd spool, gid range and
    job ids; then qmaster, and raw qconf: hosts, host group, PEs, queues; then execd."""
    for d in (RAW_COMMON, RAW_SPOOL, f"{RAW_SPOOL}/qmaster", f"{RAW_SPOOL}/qmaster/job_scripts",
              f"{RAW_SPOOL}/spooldb", f"{RAW_SPOOL}/execd"):
        os.makedirs(d, 0o755, exist_ok=True)
        shutil.chown(d, ADMIN, ADMIN)
    shutil.chown(f"{RAW_ROOT}/{RAW_CELL}", ADMIN, ADMIN)
    bootstrap = Path("/usr/share/gridengine/default-bootstrap").read_text()
    bootstrap = bootstrap.replace("/var/spool/gridengine/", f"{RAW_SPOOL}/")
    assert f"{RAW_SPOOL}/spooldb" in bootstrap and f"{RAW_SPOOL}/qmaster" in bootstrap, bootstrap
    admin_file(f"{RAW_COMMON}/bootstrap", bootstrap)
    admin_file(f"{RAW_COMMON}/act_qmaster", HOST + "\n")
    aliases = Path(f"{RAW_ROOT}/default/common/host_aliases")  # (this host's name as it resolves back)
    if aliases.exists():
        admin_file(f"{RAW_COMMON}/host_aliases", aliases.read_text())
    conf = Path("/usr/share/gridengine/default-configuration").read_text()
    conf = re.sub(r"(?m)^execd_spool_dir\s.*$", f"execd_spool_dir        {RAW_SPOOL}/execd", conf)
    conf = re.sub(r"(?m)^gid_range\s.*$", f"gid_range              {RAW_GID_RANGE}", conf)
    admin_file(f"{RAW_SPOOL}/configuration", conf)
    resources = "/usr/share/gridengine/util/resources"
    as_admin(f"{GE_BIN}/spoolinit", "berkeleydb", "libspoolb", f"{RAW_SPOOL}/spooldb", "init")
    as_admin(f"{GE_BIN}/spooldefaults", "configuration", f"{RAW_SPOOL}/configuration")
    as_admin(f"{GE_BIN}/spooldefaults", "complexes", f"{resources}/centry")
    as_admin(f"{GE_BIN}/spooldefaults", "usersets", f"{resources}/usersets")
    as_admin(f"{GE_BIN}/spooldefaults", "managers", ADMIN, "root")
    admin_file(f"{RAW_COMMON}/settings.sh", "".join(f"{k}={v}; export {k}\n" for k, v in daemon_env().items()
                                                    if k.startswith("SGE_")))
    admin_file(f"{RAW_SPOOL}/qmaster/jobseqnum", f"{RAW_FIRST_JOB_ID}\n")  # ids no other cell gives
    start_daemon("qmaster")
    wait_until(qmaster_answers, 60, f"the raw cell's qmaster to answer (see {RAW_SPOOL}/qmaster/messages)")
    configure()
    start_daemon("execd")


def qconf_file(flag: str, attrs: dict[str, str], name: str) -> None:
    path = Path(RAW_SPOOL, f".{name}")
    path.write_text(cluster.render_attrs(attrs))
    try:
        qconf(flag, str(path))
    finally:
        path.unlink()


def configure() -> None:
    """A site's own configuration, by raw qconf, with no shim name in it."""
    if HOST not in names("-ss"):
        qconf("-as", HOST)  # (qmaster's host is an admin host already)
    if HOST not in names("-sel"):
        qconf_file("-Ae", {"hostname": HOST, "load_scaling": "NONE", "complex_values": "NONE", "user_lists": "NONE",
                           "xuser_lists": "NONE", "projects": "NONE", "xprojects": "NONE",
                           "usage_scaling": "NONE", "report_variables": "NONE"}, "host")
    qconf_file("-Ahgrp", {"group_name": GROUP, "hostlist": HOST}, "hgrp")
    pe = cluster_ocs.ocs_pe if OCS else dict  # (OCS: its own PE attributes)
    qconf_file("-Ap", pe(PE_TEMPLATE | {"pe_name": "mpi_rr", "slots": "64", "allocation_rule": "$round_robin",
                                        "control_slaves": "TRUE", "job_is_first_task": "FALSE"}), "mpi_rr")
    qconf_file("-Ap", pe(PE_TEMPLATE | {"pe_name": "smp", "slots": "64"}), "smp")
    # no load threshold: other test runs load this 2-core machine (np_load_avg=1.75 would alarm)
    qconf_file("-Aq", QUEUE_TEMPLATE | {"qname": "batch.q", "hostlist": GROUP, "pe_list": "mpi_rr", "slots": "2",
                                        "load_thresholds": "NONE"}, "batch")
    qconf_file("-Aq", QUEUE_TEMPLATE | {"qname": "long.q", "hostlist": HOST, "pe_list": "smp mpi_rr", "slots": "1",
                                        "seq_no": "10", "load_thresholds": "NONE", "h_rt": "48:00:00"}, "long")
    if OCS:  # inst_sge's all.q goes; ended jobs are not kept in qmaster (install --plan's note)
        qconf("-dq", "all.q")
        conf = cluster.parse_attrs(qconf("-sconf", "global")) | {"finished_jobs": "0"}
        os.makedirs(f"{RAW_SPOOL}/.conf", exist_ok=True)
        Path(f"{RAW_SPOOL}/.conf/global").write_text(cluster.render_attrs(conf))  # (-Mconf: the file is named
        qconf("-Mconf", f"{RAW_SPOOL}/.conf/global")                              # after the host)
        shutil.rmtree(f"{RAW_SPOOL}/.conf")


def queues_ready() -> bool:
    states = cluster.parse_queue_states(rq("qstat", "-f").stdout)
    return all(states.get(f"{q}@{HOST}") == "" for q in QUEUES)


def locked(lock, how: int) -> bool:
    """flock ``how`` on ``lock`` if no other session holds it otherwise (one try)."""
    try:
        fcntl.flock(lock, how | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def bring_up() -> tuple[bool, str]:
    """The raw cell up and as configured here: (whether this started a daemon, what was done)."""
    started = False
    if Path(STAMP).exists():
        try:
            if not daemon_pid("qmaster"):
                start_daemon("qmaster")
                started = True
            wait_until(qmaster_answers, 60, "the raw cell's qmaster to answer")
            if json.loads(Path(STAMP).read_text()) == dumps():
                if not daemon_pid("execd"):
                    start_daemon("execd")
                    started = True
                return started, "warm"
        except (AssertionError, ClusterError, pytest.fail.Exception) as e:  # a daemon that no longer starts: made anew
            print(f"raw cell: made anew: {e}")
    # none yet, a half-made one, or one whose configuration changed since (a run that died half-way)
    stop_daemons()
    shutil.rmtree(f"{RAW_ROOT}/{RAW_CELL}", ignore_errors=True)
    shutil.rmtree(RAW_SPOOL, ignore_errors=True)  # (OCS's is in the cell directory)
    make_cell()
    wait_until(queues_ready, 90, "the raw cell's queue instances to be ready")
    Path(STAMP).write_text(json.dumps(dumps()))
    return True, "cold"


@pytest.fixture(scope="session")
def raw_cell():
    """The raw cell, up for the session (its environment: raw_env()). Sessions that overlap share
    it: each holds a shared lock while it runs; the cell is made or started under an exclusive
    one. Daemons a session started are stopped by the last session out (the one that finds no
    other holding the lock at its end): idle, on ports of their own, they harm nothing meanwhile."""
    if OCS:
        needed = (f"{RAW_ROOT}/inst_sge", f"{GE_BIN}/sge_qmaster")
        why = "the OCS phase's raw cell is made from the build of slurm-shim cluster up --flavour ocs (run it first)"
    else:
        needed = (f"{GE_BIN}/spoolinit", f"{GE_BIN}/sge_qmaster", "/usr/share/gridengine/default-bootstrap")
        why = "the raw cell is made from Debian's gridengine packages (scripts/setup installs them)"
    for tool in needed:
        if not os.path.exists(tool):
            pytest.fail(f"{tool} is missing: {why}")
    os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
    marker = Path(LOCK_DIR, "started")  # a session started the daemons: the last one out stops them
    with open(os.path.join(LOCK_DIR, "users"), "a") as users:
        try:
            with open(os.path.join(LOCK_DIR, "setup"), "a") as setup:
                wait_until(lambda: locked(setup, fcntl.LOCK_EX), 300, "another test session to make the raw cell")
                wait_until(lambda: locked(users, fcntl.LOCK_SH), 300, "another test session to stop the raw cell")
                t0 = time.monotonic()
                started, how = bring_up()
                if started:
                    marker.touch()
                wait_until(queues_ready, 90, "the raw cell's queue instances to be ready")
                print(f"raw cell: {how}, ready in {time.monotonic() - t0:.1f} s")
            yield raw_env()
        finally:
            if marker.exists() and locked(users, fcntl.LOCK_EX):  # no other session uses it now
                stop_daemons()
                marker.unlink()


@pytest.fixture
def raw_site(raw_cell):
    """The raw cell, for this test alone: a test of another session that overlaps waits (both
    would install into the one cell, and each compares the cell with what it found)."""
    with open(os.path.join(LOCK_DIR, "test"), "a") as lock:
        wait_until(lambda: locked(lock, fcntl.LOCK_EX), 300, "another test session's install test on the raw cell")
        yield raw_cell


@pytest.fixture
def scratch():
    """Where --apply writes, instead of the site's paths: a directory every user can reach (the
    job is a plain user's: the raw cell keeps Grid Engine's min_uid 1000)."""
    d = open_dir("install", 0o755)
    for sub in ("cache", "out"):
        os.makedirs(d / sub, 0o777)
        os.chmod(d / sub, 0o777)
    return d


def install(*args: str, scratch: Path, where=rq) -> tuple[int, str, str]:
    """slurm-shim install in the raw cell's environment (``where=run``: the session's cell's)."""
    paths = ["--config", str(scratch / "config.toml"), "--state-dir", str(scratch / "state"),
             "--record", str(scratch / "record" / "install-record.json"), "--profile", str(scratch / "profile.sh")]
    cp = where("slurm-shim", "install", *args, *paths, timeout=120)
    return cp.returncode, cp.stdout, cp.stderr


def test_install_plans_applies_reapplies_and_uninstalls_on_a_raw_qconf_cluster(raw_site, scratch, plain_user):
    before = dumps()

    code, out, err = install("--plan", "--json", scratch=scratch)
    assert code == 0, err
    plan = json.loads(out)
    assert dumps() == before  # --plan changes nothing
    made = [(a["kind"], a["target"]) for a in plan["actions"] if a["state"] == "create"]
    # (Grid Engine's default tmpdir /tmp in both queues: root's own directory instead, F-20)
    assert made == [("pe", "shim_smp"), ("queue-pe", "batch.q shim_smp"), ("complex", "exclusive"),
                    ("host-value", f"{HOST} exclusive"), ("queue-tmpdir", "batch.q"), ("queue-tmpdir", "long.q"),
                    ("state-dir", str(scratch / "state")), ("file", str(scratch / "profile.sh")),
                    ("file", str(scratch / "config.toml"))], plan["actions"]
    in_place = {(a["kind"], a["target"]) for a in plan["actions"] if a["state"] == "in place"}
    assert {("pe", "mpi_rr"), ("pe", "smp"), ("queue-pe", "long.q smp"), ("queue-pe", "long.q mpi_rr"),
            ("queue-pe", "batch.q mpi_rr")} <= in_place, plan["actions"]
    commands = {a["target"]: a["commands"] for a in plan["actions"]}
    assert commands["batch.q shim_smp"] == ["qconf -aattr queue pe_list shim_smp batch.q"]
    assert commands[f"{HOST} exclusive"] == [f"qconf -aattr exechost complex_values exclusive=true {HOST}"]
    config = plan["config"]
    assert re.search(r'\[partitions\.batch\]\nqueue = "batch\.q"\npe = "shim_smp"\npe_multinode = "mpi_rr"\n'
                     r"default = true\n", config), config
    assert re.search(r'\[partitions\.long\]\nqueue = "long\.q"\npe = "smp"\npe_multinode = "mpi_rr"\n'
                     r'max_time = "2-00:00:00"\n', config), config
    assert (f'sge_root = "{RAW_ROOT}"\nsge_cell = "{RAW_CELL}"\nbin_dir = "{GE_BIN}"\n'
            f"qmaster_port = {RAW_QMASTER_PORT}\nexecd_port = {RAW_EXECD_PORT}\n") in config, config
    assert plan["probe"]["version"].startswith("OCS 9" if OCS else "SGE 8.1.9"), plan["probe"]["version"]
    assert plan["cell"]["sge_cell"] == RAW_CELL

    code, out, err = install("--apply", scratch=scratch)
    assert code == 0, out + err
    assert "install: 9 change(s) made" in out, out
    assert cluster.host_values(cluster.parse_attrs(qconf("-sq", "long.q"))["tmpdir"]) == {"": cluster.TMPDIR_BASE}
    assert (scratch / "config.toml").read_text() == config
    record = scratch / "record" / "install-record.json"
    st = os.stat(record)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o644)
    assert json.loads(record.read_text())["cell"] == {"sge_root": RAW_ROOT, "sge_cell": RAW_CELL, "bin_dir": GE_BIN,
                                                      "qmaster_port": RAW_QMASTER_PORT, "execd_port": RAW_EXECD_PORT}
    assert cluster.parse_names(cluster.parse_attrs(qconf("-sq", "batch.q"))["pe_list"]) == ["mpi_rr", "shim_smp"]
    applied = dumps()

    # the installed config works: a two-CPU job of a plain user in the default partition (batch),
    # seen by squeue and then sacct, which reads the raw cell's own accounting file
    env = {"SLURM_SHIM_CONFIG": str(scratch / "config.toml"), "XDG_CACHE_HOME": str(scratch / "cache")}
    out_file = scratch / "out" / "out.txt"
    cp = rq("sbatch", "--parsable", "-n", "2", "-o", str(out_file), "--wrap", "echo hello; sleep 2",
            env=env, cwd=str(scratch / "out"), user=plain_user)
    assert cp.returncode == 0, cp.stderr
    job = cp.stdout.strip()
    assert int(job) > RAW_FIRST_JOB_ID, job  # the raw cell's, not another cell's
    detail = rq("qstat", "-j", job, "-xml").stdout
    el = ET.fromstring(detail).find(".//djob_info/element")
    assert el is not None, detail
    assert (el.findtext("JB_pe"), el.findtext("JB_pe_range/ranges/RN_min"),
            el.findtext("JB_pe_range/ranges/RN_max")) == ("shim_smp", "2", "2"), detail
    seen = rq("squeue", "-h", "-j", job, "-o", "%i %P %C", env=env, user=plain_user).stdout.split()
    assert seen[:3] in ([job, "batch", "2"], []), seen  # [] only if it already ended
    # Grid Engine's default scheduler configuration starts a job within schedule_interval (15 s)
    # and flushes the accounting file every 15 s: the raw cell's own file, which sacct then reads
    accounting = Path(f"{RAW_COMMON}/accounting" + (".jsonl" if OCS else ""))  # (OCS 9 writes JSON lines)

    def accounted() -> bool:
        if not accounting.exists():
            return False
        if OCS:
            return any((r.get("job_number"), r.get("owner"), r.get("qname")) == (int(job), plain_user, "batch.q")
                       for r in map(json.loads, accounting.read_text().splitlines()))
        return bool(re.search(rf"^batch\.q:[^:]*:[^:]*:{plain_user}:[^:]*:{job}:", accounting.read_text(), re.M))

    wait_until(accounted, 120, f"the job's line in {accounting}")
    assert rq("sacct", "-X", "-n", "-P", "-j", job, "-o", "JobID,Partition,State,AllocCPUS", env=env,
              user=plain_user).stdout == f"{job}|batch|COMPLETED|2\n"
    assert out_file.read_text() == "hello\n"
    steps = rq("sacct", "-n", "-P", "-j", job, "-o", "JobID,State,MaxRSS", env=env, user=plain_user).stdout
    # (MaxRSS: only the file has it; convert_num_unit writes 11776 KB as 11.50M, a multiple of 512 KB scaling up)
    assert re.search(rf"^{job}\.batch\|COMPLETED\|\d+(\.\d\d)?[KMG]$", steps, re.M), steps

    record_text = record.read_text()
    code, out, err = install("--apply", scratch=scratch)
    assert code == 0, out + err
    assert out.startswith("install: nothing to change"), out
    assert record.read_text() == record_text and dumps() == applied

    # qmaster lets a PE go only once no job it knows refers to it: an ended job stays known a
    # moment after accounting has it
    wait_until(lambda: rq("qstat", "-j", job).returncode != 0, 60, "qmaster to forget the ended job")
    # --uninstall from a shell whose environment names the session's cell (Debian's, or OCS's):
    # the record names the raw cell, and that is where it undoes
    code, out, err = install("--uninstall", "--purge-state", scratch=scratch, where=run)
    assert code == 0, out + err
    after = dumps()
    assert after == before, {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys()
                             if before.get(k) != after.get(k)}
    for gone in ("config.toml", "profile.sh", "state", "record/install-record.json"):
        assert not (scratch / gone).exists(), gone


def test_doctor_checks_the_shim_on_every_execution_host_through_grid_engine(tmp_path):
    """One check job per exec host, through Grid Engine: this host passes with the real site config;
    a job whose interpreter is missing there comes back as Grid Engine's exit code 127 and doctor's
    fix; --no-hosts runs no job."""
    cp = run("slurm-shim", "doctor", timeout=120)
    assert re.search(rf"^ok    exec host {re.escape(HOST)}: slurm-shim \S+ from \S+, the site config and the state "
                     r"dir \S+ are there$", cp.stdout, re.M), cp.stdout
    from shim import config

    cfg = config.load("/etc/slurm-shim/config.toml")
    where = {"python": str(tmp_path / "python"), "prefix": str(tmp_path), "version": "x", "src": "/nowhere",
             "config": "(none)", "state_dir": cfg.cluster.state_dir}
    script = cluster.host_check_script(where["python"], "/nowhere", None, "")
    qsub = os.path.join(cfg.gridengine.bin_dir or "/usr/bin", "qsub")
    f = cluster.host_finding(HOST, qsub, cfg, script, where)
    assert (f.level, f.what, f.fix) == ("FAIL", f"exec host {HOST} has no interpreter {tmp_path}/python",
                                        f"install the shim at {tmp_path} on it (the same path as here), or share {tmp_path}")
    quick = run("slurm-shim", "doctor", "--no-hosts").stdout
    assert "ok    sge_qmaster answers" in quick and not re.search(r"^\S+ +exec host ", quick, re.M)


def test_doctor_checks_the_second_execution_host_too(two_hosts):
    """Every execution host Grid Engine knows gets its check job (qconf -sel): with the two-host
    tests' second host up, doctor says the shim is there too (same path: a shared filesystem)."""
    cp = run("slurm-shim", "doctor", timeout=180)
    for host in (HOST, two_hosts.node):
        assert re.search(rf"^ok    exec host {re.escape(host)}: slurm-shim \S+ from \S+, the site config and the "
                         r"state dir \S+ are there$", cp.stdout, re.M), cp.stdout
