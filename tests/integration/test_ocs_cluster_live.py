"""The Open Cluster Scheduler cell of `slurm-shim cluster up --flavour ocs`, live, beside Debian's.

Runs only with SLURM_SHIM_CELL=ocs (.ci/run's OCS phase); then a missing cell fails every test.
Never stops or reconfigures either cell: `up` is run again only to show it changes nothing.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, run
from shim.admin import cluster, cluster_ocs
from shim import config
from shim.store import state

pytestmark = [pytest.mark.gridengine, pytest.mark.ocs]

CELL = cluster_ocs.Cell()


def ocs(*argv: str) -> subprocess.CompletedProcess:
    """One of the OCS cell's own commands, with the cell's clean environment."""
    return subprocess.run([f"{CELL.bin_dir()}/{argv[0]}", *argv[1:]], capture_output=True, text=True,
                          env=CELL.env(), cwd="/", timeout=60)


def slurm_shim(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "bin" / "slurm-shim") if not Path("/opt/slurm-shim/bin/slurm-shim").exists()
                           else "/opt/slurm-shim/bin/slurm-shim", *args],
                          capture_output=True, text=True, timeout=timeout, cwd="/")


def phases(out: str) -> dict[str, str]:
    """`cluster: <phase> ..... 0.0 s  (note)` lines as phase -> note."""
    return {m[0]: m[1] for m in re.findall(r"^cluster: (\S+(?: \S+)?) \.+ +[\d.]+ s(?:  \((.*)\))?$", out, re.M)}


def test_up_again_changes_nothing_and_leaves_debians_cell_alone():
    debian = cluster.live_daemons()
    debian_conf = os.stat("/etc/slurm-shim/config.toml")
    source = os.environ.get(cluster_ocs.TARBALL_ENV)
    cp = slurm_shim("cluster", "up", "--flavour", "ocs", *(["--source", source] if source else []))
    assert cp.returncode == 0, cp.stdout + cp.stderr
    notes = phases(cp.stdout)
    assert notes["build"] == f"installed ({cluster_ocs.installed_digest(CELL)[:12]})"
    assert (notes["install"], notes["qmaster"], notes["configure"], notes["execd"]) == (
        "installed", "running", "unchanged", "running")
    assert notes["site"] == f"{cluster_ocs.STATE_DIR} laid out"  # the config file needed no rewrite
    assert notes["test jobs"] == "exit 0 as root@debug and alice@gpu"
    assert cluster.live_daemons() == debian  # the same Debian daemons, not restarted
    after = os.stat("/etc/slurm-shim/config.toml")
    assert (after.st_mtime_ns, after.st_size) == (debian_conf.st_mtime_ns, debian_conf.st_size)


def test_status_names_the_cell_and_its_queues():
    cp = slurm_shim("cluster", "status", "--flavour", "ocs", timeout=60)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    pids = cluster_ocs.live_daemons(CELL)
    assert cp.stdout.splitlines()[:2] == [f"qmaster  up (pid {pids['qmaster']})", f"execd    up (pid {pids['execd']})"]
    assert "queue    debug@vm             ok" in cp.stdout and "queue    gpu@vm               ok" in cp.stdout
    assert cp.stdout.rstrip().endswith(f"config   {cluster_ocs.SITE_CONFIG}")


def test_each_cells_daemons_run_their_own_binaries():
    mine, debian = cluster_ocs.live_daemons(CELL), cluster.live_daemons()
    assert set(mine) == set(debian) == {"qmaster", "execd"}
    for pid in mine.values():
        assert os.readlink(f"/proc/{pid}/exe").startswith("/opt/ocs/bin/")
    for pid in debian.values():
        assert os.readlink(f"/proc/{pid}/exe").startswith("/usr/lib/gridengine/")
    listening = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
    ports = {int(m[0]): m[1] for m in re.findall(r":(\d+)\s.*?pid=(\d+)", listening)}
    assert ports.get(7444) == str(mine["qmaster"]) and ports.get(7445) == str(mine["execd"])
    assert ports.get(6444) == str(debian["qmaster"])


def test_the_cell_has_debians_queues_pes_and_complexes_in_ocs_form():
    for pe in cluster_ocs.PES:
        current = cluster.parse_attrs(ocs("qconf", "-sp", pe["pe_name"]).stdout)
        assert cluster.changes(pe, current) == {} and "qsort_args" not in current
    for q in cluster.PARTITIONS:
        assert cluster.changes(cluster.queue(q, cluster.queue_slots(os.cpu_count() or 1)),
                               cluster.parse_attrs(ocs("qconf", "-sq", q).stdout)) == {}
    queues = cluster.parse_list(ocs("qconf", "-sql").stdout)  # all.q removed; (the two-host tests' own:)
    assert [q for q in queues if q != "twohost"] == ["debug", "gpu"]
    assert cluster.complex_changes(cluster.COMPLEXES, cluster.parse_complexes(ocs("qconf", "-sc").stdout)) == []
    host = cluster.parse_values(cluster.parse_attrs(ocs("qconf", "-se", "vm").stdout)["complex_values"])
    assert (host["gpu"], host["exclusive"], host["slots"]) == ("2", "true", str(cluster_ocs.host_slots(os.cpu_count() or 1)))
    glob = cluster.parse_attrs(ocs("qconf", "-sconf", "global").stdout)
    assert glob["gid_range"] == "21000-21100"
    # OCS 9's own accounting (accounting.jsonl), as it ships: the colon file is not asked for
    assert not any(w.startswith("old_accounting") for w in glob["reporting_params"].split())
    assert (glob["min_uid"], glob["shell_start_mode"], glob["login_shells"]) == ("0", "unix_behavior", "none")


def test_job_ids_never_meet_debians():
    jid = int(ocs("qsub", "-terse", "-b", "y", "-o", "/dev/null", "-j", "y", "-N", "ocs_id", "/bin/true").stdout.strip())
    assert jid > cluster_ocs.FIRST_JOB_ID
    debian = int(Path("/var/spool/gridengine/qmaster/jobseqnum").read_text().split()[0])
    assert debian < cluster_ocs.FIRST_JOB_ID  # Debian's cell would need 500,000 jobs to reach ours


def test_site_config_names_the_cell_and_its_own_state_dir():
    cfg = config.load(cluster_ocs.SITE_CONFIG)
    ge = cfg.gridengine
    assert (ge.sge_root, ge.sge_cell, ge.qmaster_port, ge.execd_port) == ("/opt/ocs", "default", 7444, 7445)
    assert os.access(f"{ge.bin_dir}/qsub", os.X_OK) and os.path.isfile(ge.drmaa_library)
    assert cfg.cluster.state_dir == cluster_ocs.STATE_DIR != config.load("/etc/slurm-shim/config.toml").cluster.state_dir
    assert state.layout_problems(cfg.cluster.state_dir) == []


def test_the_build_cache_is_roots_and_holds_the_installed_build():
    st = os.lstat(cluster_ocs.CACHE_DIR)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700
    digest = cluster_ocs.installed_digest(CELL)
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert Path(cluster_ocs.CACHE_DIR, digest, "dist", "bin", CELL.arch(), "qsub").exists()
    assert cluster_ocs.build("/nonexistent", digest) == (f"{cluster_ocs.CACHE_DIR}/{digest}/dist", f"cached ({digest[:12]})")


def test_the_shim_answers_from_the_ocs_cell():
    cp = run("sinfo", "-h", "-o", "%P %a %D %N")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split("\n")[:2] == ["debug* up 1 vm", "gpu up 1 vm"]


def test_the_installer_carries_each_hook_once():
    assert cluster_ocs.hook_installer(CELL.root) is False  # in place: nothing to add
    for rel, anchor, hook in cluster_ocs.INSTALLER_HOOKS:
        text = Path(CELL.root, rel).read_text()
        assert text.count(cluster_ocs.HOOK_MARK) == 1 and anchor + hook in text
    # what the hooks did: the cell's host_aliases maps this host's 127.0.0.1 name back to it
    assert Path(CELL.common, "host_aliases").read_text() == f"{cluster.this_host()} localhost\n"


def test_every_install_setting_is_a_key_of_the_installed_template():
    template = Path(CELL.root, "util/install_modules/inst_template.conf").read_text()
    text = cluster_ocs.inst_conf(template, cluster_ocs.inst_values(CELL, cluster.this_host()))
    assert 'GID_RANGE="21000-21100"' in text.splitlines() and 'EXECD_SPOOL_DIR_LOCAL=""' in text.splitlines()


@pytest.mark.parametrize("client, qmaster", [("debian", "ocs"), ("ocs", "debian")])
def test_a_client_of_the_other_version_gives_up_in_time_and_says_why(client, qmaster, tmp_path):
    """Issue 16: a command never hangs on a qmaster of another Grid Engine version. The site config
    of one cell with the other cell's qmaster_port: SGE 8.1.9's qstat against OCS 9.1.4's qmaster
    (and the other way round) waits for ever, so the command gives up after gridengine.timeout,
    in Slurm's words, and then says why (gridengine/diagnose.py: qping answers, so a
    qmaster is there but does not answer this client) and what to check."""
    import tomllib

    paths = {"debian": Path("/etc/slurm-shim/config.toml"), "ocs": Path("/etc/slurm-shim/ocs.toml")}
    port = tomllib.loads(paths[qmaster].read_text())["gridengine"]["qmaster_port"]
    text = re.sub(r"(?m)^qmaster_port = \d+", f"qmaster_port = {port}", paths[client].read_text())
    text = re.sub(r"(?m)^\[gridengine\]$", "[gridengine]\ntimeout = 2", text, count=1)
    assert f"qmaster_port = {port}" in text and "timeout = 2" in text
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(text)
    wrong.chmod(0o644)
    version = {"debian": "SGE 8.1.9", "ocs": "OCS 9.1.4"}[client]
    bin_dir = tomllib.loads(text)["gridengine"]["bin_dir"]
    for argv, slurm, tool in ((["squeue"], "slurm_load_jobs error: Socket timed out on send/recv operation", "qstat"),
                              (["sinfo"], "slurm_load_partitions: Socket timed out on send/recv operation", "qhost")):
        cp = run(*argv, env={"SLURM_SHIM_CONFIG": str(wrong)}, cwd=str(tmp_path), timeout=30)
        assert cp.returncode == 1, (argv, cp.stdout, cp.stderr)
        assert cp.stderr.splitlines() == [
            slurm,
            f"slurm-shim: the qmaster at {cluster.this_host()}:{port} is up (qping answers), but {tool} from "
            f"{bin_dir} ({version}) got no answer in 2 s: a Grid Engine of another version than the client's, "
            f"or a qmaster too busy to answer; check gridengine.bin_dir and gridengine.qmaster_port in {wrong}"], argv
