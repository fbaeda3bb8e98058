"""The pure parts of `slurm-shim cluster` and `doctor`, on recorded Grid Engine 8.1.9 output."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from conftest import SGE_REF
from shim.admin import cluster, cluster_ocs
from shim import config
from shim.admin.cluster import Complex, Facts
from shim.cli import admin
from shim.errors import ShimError

REF = SGE_REF


def ref(name: str) -> str:
    path = REF / name
    if not path.exists():
        pytest.fail(f"reference capture {path} is missing (see {REF / 'README.md'})", pytrace=False)
    return path.read_text()


# --- parsing -------------------------------------------------------------------------------


def test_parse_complexes_reads_every_row_of_qconf_sc():
    rows = cluster.parse_complexes(ref("config-qconf-sc.txt"))
    assert rows["gpu"] == Complex("gpu", "gpu", "INT", "<=", "YES", "JOB", "0", "0")
    assert rows["mem_free"].consumable == "YES"
    assert rows["slots"].urgency == "1000"
    assert "#name" not in rows and len(rows) == 55


def test_parse_attrs_joins_continuation_lines():
    attrs = cluster.parse_attrs(ref("config-qconf-sconf.txt"))
    assert attrs["reporting_params"] == (
        "accounting=true reporting=false flush_time=00:00:01 joblog=false "
        "sharelog=00:00:00 accounting_flush_time=00:00:00"
    )
    assert attrs["min_uid"] == "0"
    assert "#global:" not in attrs


def test_parse_attrs_of_an_exec_host():
    attrs = cluster.parse_attrs(ref("config-qconf-se-host.txt"))
    assert cluster.parse_values(attrs["complex_values"]) == {"gpu": "2", "mem_free": "16G"}
    assert attrs["load_values"].startswith("load_avg=")
    assert cluster.parse_values("NONE") == {}


def test_render_attrs_round_trips():
    attrs = cluster.parse_attrs(ref("config-qconf-sq-all.q.txt"))
    assert cluster.parse_attrs(cluster.render_attrs(attrs)) == attrs


def test_parse_names_handles_host_overrides():
    assert cluster.parse_names("smp mpi") == ["smp", "mpi"]
    assert cluster.parse_names("NONE") == []
    assert cluster.parse_names("smp,[vm=mpi]") == ["smp", "mpi"]


def test_parse_list():
    assert cluster.parse_list(ref("config-qconf-spl.txt")) == ["mpi", "smp"]
    assert cluster.parse_list("") == []


def test_parse_queue_states_skips_job_lines():
    states = cluster.parse_queue_states(ref("qstat-f.txt"))
    assert states == {"all.q@vm": ""}
    text = (
        "queuename                      qtype resv/used/tot. load_avg arch          states\n"
        "---------------------------------------------------------------------------------\n"
        "debug@vm                       BIP   0/0/8          -NA-     -NA-          au\n"
        "---------------------------------------------------------------------------------\n"
        "gpu@vm                         BIP   0/1/8          0.09     lx-amd64      E\n"
        "     25 0.25056 notify_sle alice        r     11/30/2026 08:15:55     1        \n"
    )
    assert cluster.parse_queue_states(text) == {"debug@vm": "au", "gpu@vm": "E"}


# --- desired vs current -------------------------------------------------------------------


def test_reference_cluster_already_has_the_desired_global_and_scheduler_config():
    assert cluster.changes(cluster.GLOBAL_CONF, cluster.parse_attrs(ref("config-qconf-sconf.txt"))) == {}
    assert cluster.changes(cluster.SCHEDULER_CONF, cluster.parse_attrs(ref("config-qconf-ssconf.txt"))) == {}


def test_changes_lists_only_what_differs():
    current = {"min_uid": "1000", "login_shells": "bash,sh", "load_report_time": "00:00:10"}
    desired = {"min_uid": "0", "login_shells": "none", "load_report_time": "0:0:10", "execd_params": "X=1"}
    assert cluster.changes(desired, current) == {"min_uid": "0", "login_shells": "none", "execd_params": "X=1"}


def test_changes_ignores_case_order_and_time_spelling():
    assert cluster.changes({"a": "TRUE", "b": "smp mpi", "c": "0:0:1"}, {"a": "true", "b": "mpi smp", "c": "00:00:01"}) == {}
    assert cluster.changes({"v": "gpu=2,mem_free=16G"}, {"v": "mem_free=16G,gpu=2"}) == {}


def test_reference_pes_and_queue_match_the_desired_ones_except_slots_and_tmpdir():
    smp, mpi = cluster.PES
    assert cluster.changes(smp, cluster.parse_attrs(ref("config-qconf-sp-smp.txt"))) == {}
    assert cluster.changes(mpi, cluster.parse_attrs(ref("config-qconf-sp-mpi.txt"))) == {}
    current = cluster.parse_attrs(ref("config-qconf-sq-all.q.txt"))
    # Grid Engine's default tmpdir /tmp lets anyone plant the job's TMPDIR (F-20): root's alone instead
    assert current["tmpdir"] == "/tmp"
    assert cluster.changes(cluster.queue("all.q", 8), current) == {"slots": "8", "tmpdir": "/var/spool/slurm-shim-tmp"}
    assert set(cluster.queue("debug", 8)) == set(current)  # a complete queue, usable for qconf -Aq


def test_complex_changes():
    current = cluster.parse_complexes(ref("config-qconf-sc.txt"))
    # the reference cluster predates the exclusive-host complex that `up` now adds
    assert [c.name for c in cluster.complex_changes(cluster.COMPLEXES, current)] == ["exclusive"]
    current["exclusive"] = Complex("exclusive", "excl", "BOOL", "EXCL", "YES", "YES", "0", "1000")
    assert cluster.complex_changes(cluster.COMPLEXES, current) == []
    current["mem_free"] = Complex("mem_free", "mf", "MEMORY", "<=", "YES", "NO", "0", "0")
    del current["gpu"]
    assert [c.name for c in cluster.complex_changes(cluster.COMPLEXES, current)] == ["mem_free", "gpu"]


def test_reference_hosts_have_the_desired_complex_values():
    glob_host = cluster.parse_attrs(ref("config-qconf-se-global.txt"))
    assert cluster.changes(cluster.exec_host("global", cluster.GLOBAL_VALUES), glob_host) == {}
    host = cluster.parse_attrs(ref("config-qconf-se-host.txt"))
    assert cluster.changes(cluster.exec_host("vm", "gpu=2,mem_free=16G"), host) == {}


def test_queue_slots_leave_room_on_small_machines():
    assert cluster.queue_slots(1) == 8
    assert cluster.queue_slots(2) == 8
    assert cluster.queue_slots(16) == 64


def test_host_aliases_text():
    assert cluster.host_aliases_text("", "vm", "localhost") == "vm localhost\n"
    assert cluster.host_aliases_text("vm localhost\n", "vm", "localhost") is None
    assert cluster.host_aliases_text("other x\nvm wrong\n", "vm", "localhost") == "other x\nvm localhost\n"


def test_preseed_answers_every_package():
    text = cluster.preseed_text("vm")
    assert "gridengine-master shared/gridenginemaster string vm" in text
    assert "gridengine-common shared/gridengineconfig boolean true" in text
    assert all(len(line.split()) == 4 for line in text.splitlines())


def test_site_config_validates_and_describes_the_cluster():
    cfg = config.parse(cluster.site_config_text(), "/etc/slurm-shim/config.toml")
    assert cfg.default_partition == "debug"
    assert {n: p.queue for n, p in cfg.partitions.items()} == {"debug": "debug", "gpu": "gpu"}
    assert (cfg.memory.complex, cfg.memory.scope) == ("mem_free", "slot")
    assert cfg.gres["gpu"] == config.Consumable(complex="gpu", scope="job")
    assert set(cfg.licenses) == {"matlab", "anthropic_api"}
    assert cfg.cluster.state_dir == "/var/spool/slurm-shim"


# --- doctor -------------------------------------------------------------------------------


def reference_facts() -> Facts:
    """The recorded reference cluster (queue all.q, PEs smp and mpi)."""
    return Facts(
        queues={"all.q": cluster.parse_attrs(ref("config-qconf-sq-all.q.txt"))},
        pes=cluster.parse_list(ref("config-qconf-spl.txt")),
        complexes=cluster.parse_complexes(ref("config-qconf-sc.txt")),
        global_values=cluster.parse_values(cluster.parse_attrs(ref("config-qconf-se-global.txt"))["complex_values"]),
        host_values={"vm": cluster.parse_values(cluster.parse_attrs(ref("config-qconf-se-host.txt"))["complex_values"])},
        state=cluster.StateFacts(),
    )


def site(**overrides) -> config.SiteConfig:
    """The written site config pointed at the reference's all.q, without the exclusive complex the
    reference cluster lacks (tests that want it pass exclusive_complex=...)."""
    text = cluster.site_config_text().replace('queue = "debug"', 'queue = "all.q"').replace('queue = "gpu"', 'queue = "all.q"')
    text = text.replace('exclusive_complex = "exclusive"\n', "")
    cfg = config.parse(text, "site.toml")
    return cfg.model_copy(update=overrides)


def levels(findings) -> dict[str, str]:
    return {f.what: f.level for f in findings}


def test_doctor_passes_on_the_reference_cluster():
    findings = cluster.doctor_findings(site(), reference_facts(), "site.toml")
    assert [f.line() for f in findings if f.level != "ok"] == []
    assert "gres gpu: capacity vm=2" in levels(findings)
    assert "license matlab: capacity global=3" in levels(findings)


def test_doctor_fails_on_a_missing_queue():
    text = cluster.site_config_text().replace('exclusive_complex = "exclusive"\n', "")
    cfg = config.parse(text, "site.toml")  # queues debug and gpu; facts have all.q
    findings = cluster.doctor_findings(cfg, reference_facts(), "site.toml")
    bad = [f for f in findings if f.level == "FAIL"]
    assert [f.what for f in bad] == ["partition debug: queue debug does not exist", "partition gpu: queue gpu does not exist"]
    assert "partitions.debug.queue in site.toml" in bad[0].fix


def test_doctor_fails_on_a_pe_missing_from_the_queue():
    facts = reference_facts()
    facts.queues["all.q"] = {**facts.queues["all.q"], "pe_list": "smp"}
    lines = [f.line() for f in cluster.doctor_findings(site(), facts, "site.toml") if f.level == "FAIL"]
    assert "FAIL  partition debug: PE mpi is not in queue all.q's pe_list  -- qconf -aattr queue pe_list mpi all.q" in lines
    facts.pes = ["smp"]
    whats = [f.what for f in cluster.doctor_findings(site(), facts, "site.toml") if f.level == "FAIL"]
    assert "partition gpu: PE mpi does not exist" in whats


def test_doctor_checks_consumable_scope():
    facts = reference_facts()
    facts.complexes["gpu"] = Complex("gpu", "gpu", "INT", "<=", "YES", "YES", "0", "0")
    facts.complexes["matlab"] = Complex("matlab", "matlab", "INT", "<=", "YES", "NO", "0", "0")
    del facts.complexes["anthropic_api"]
    got = levels(cluster.doctor_findings(site(), facts, "site.toml"))
    assert got["gres gpu: complex gpu is consumable per slot, the config says per job"] == "FAIL"
    assert got["license matlab: complex matlab is not consumable"] == "FAIL"
    assert got["license anthropic_api: complex anthropic_api does not exist (qconf -sc)"] == "FAIL"


def test_doctor_needs_capacity_for_gres_and_licenses():
    facts = reference_facts()
    facts.host_values = {"vm": {"mem_free": "16G"}}
    facts.global_values = {"matlab": "3"}
    got = levels(cluster.doctor_findings(site(), facts, "site.toml"))
    assert got["gres gpu: no capacity for gpu is set"] == "FAIL"
    assert got["license anthropic_api: no capacity for anthropic_api is set"] == "FAIL"
    assert got["license matlab: capacity global=3"] == "ok"


def test_doctor_checks_features_and_state_dir():
    facts = reference_facts()
    facts.state = cluster.StateFacts(problems=["/var/spool/slurm-shim does not exist"])
    cfg = site(features={"bigdisk": "display_win_gui", "avx": "nope"})
    got = levels(cluster.doctor_findings(cfg, facts, "site.toml"))
    assert got["feature bigdisk: BOOL complex display_win_gui exists"] == "ok"
    assert got["feature avx: no BOOL complex nope"] == "FAIL"
    assert got["state dir: /var/spool/slurm-shim does not exist: no job records are kept"] == "warn"
    facts.state = cluster.StateFacts()
    got = levels(cluster.doctor_findings(cfg, facts, "site.toml"))
    assert got["state dir /var/spool/slurm-shim is root's; users/ and gpus/ are sticky (1777)"] == "ok"


def test_state_findings_judge_layout_squats_and_leftovers():
    facts = cluster.StateFacts(
        problems=["/s/users is not a directory of root's", "/s/gpus does not exist"],
        squatted=["/s/users/1002 belongs to uid 1003, not 1002: uid 1002 keeps its records in a users/1002@<suffix> of its own"],
        leftovers=["/s/jobs (old layout, uid 1001)"])
    got = [(f.level, f.what) for f in cluster.state_findings("/s", facts)]
    assert got == [
        ("FAIL", "state dir: /s/users is not a directory of root's"),
        ("warn", "state dir: /s/gpus does not exist: no job records are kept"),
        ("FAIL", "state dir: /s/users/1002 belongs to uid 1003, not 1002: uid 1002 keeps its records in a users/1002@<suffix> of its own"),
        ("warn", "state dir: /s/jobs (old layout, uid 1001): nothing reads it"),
    ]
    assert "never reused" in cluster.state_findings("/s", facts)[0].fix


# --- cluster up: the state directory (as root: tests chown to uids nobody has) --------------

OTHER = 54321  # a uid no account has: "another user"


def mode(path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_uid, stat.S_IMODE(st.st_mode)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="makes root's layout and other users' files")


@needs_root
def test_up_lays_out_a_fresh_state_dir(tmp_path, capsys):
    sd = tmp_path / "state"
    assert cluster.ensure_state_layout(str(sd)) == f"{sd} laid out"
    assert mode(sd) == (0, 0o755)
    assert mode(sd / "users") == (0, 0o1777)
    assert mode(sd / "gpus") == (0, 0o1777)
    assert cluster.ensure_state_layout(str(sd)) == f"{sd} laid out"  # converges
    assert cluster.read_state(str(sd)) == cluster.StateFacts()
    assert capsys.readouterr().out == ""


@needs_root
@pytest.mark.parametrize("where", ["top", "users", "gpus", "users-link"])
def test_up_reports_and_never_reuses_an_object_someone_else_made(tmp_path, where):
    sd = tmp_path / "state"
    if where == "top":
        sd.mkdir(0o777)
        target = sd
    else:
        cluster.ensure_state_layout(str(sd))
        os.rmdir(sd / where.split("-")[0])
        target = sd / where.split("-")[0]
        if where == "users-link":
            (tmp_path / "mallory").mkdir()
            (tmp_path / "mallory").chmod(0o777)
            target.symlink_to(tmp_path / "mallory")
        else:
            target.mkdir()
    if not target.is_symlink():
        target.chmod(0o777)
    os.lchown(target, OTHER, OTHER)
    before = mode(target)
    with pytest.raises(cluster.ClusterError, match=f"{target} exists and is not a directory of root's"):
        cluster.ensure_state_layout(str(sd))
    assert mode(target) == before  # not taken over, not chmod'ed
    if where == "users-link":
        assert mode(tmp_path / "mallory") == (0, 0o777)  # the link was not followed
    assert cluster.read_state(str(sd)).problems  # and doctor says so


@needs_root
def test_up_removes_the_old_layouts_record_dirs_without_following_links(tmp_path, capsys):
    sd = tmp_path / "state"
    sd.mkdir()
    sd.chmod(0o1777)  # as cluster up made it before the per-user layout
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    jobs = sd / "jobs"
    jobs.mkdir()
    (jobs / "7.json").write_text("{}")
    (jobs / "link").symlink_to(outside / "precious")
    (jobs / "sub").mkdir()
    (jobs / "sub" / "deep").symlink_to(outside)
    for p in (jobs, jobs / "7.json", jobs / "sub"):
        os.lchown(p, OTHER, OTHER)
    jobs.chmod(0o777)
    (sd / "events").mkdir(0o1777)
    (sd / "steps").symlink_to(outside)  # the name goes, not what it points to
    (sd / "srun").write_text("")
    (sd / "gpus").mkdir()
    (sd / "gpus").chmod(0o1777)
    (sd / "gpus" / "vm").mkdir()  # old claims directory of a host: left alone, reported
    os.chown(sd / "gpus" / "vm", OTHER, OTHER)
    note = cluster.ensure_state_layout(str(sd))
    assert note == f"{sd} laid out, old jobs/ events/ steps/ srun/ removed"
    assert sorted(os.listdir(sd)) == ["gpus", "users"]
    assert (outside / "precious").read_text() == "keep" and sorted(os.listdir(outside)) == ["precious"]
    assert mode(sd) == (0, 0o755)
    assert (sd / "gpus" / "vm").is_dir()
    out = capsys.readouterr().out
    assert f"cluster: warning: {sd}/gpus/vm/ (old layout, uid {OTHER}) (see slurm-shim doctor)" in out


@needs_root
def test_doctor_reads_squatted_user_dirs_and_leftovers(tmp_path):
    sd = tmp_path / "state"
    cluster.ensure_state_layout(str(sd))
    users = sd / "users"
    (users / "1002").mkdir()
    os.chown(users / "1002", OTHER, OTHER)  # someone squats uid 1002's name
    (users / str(OTHER)).mkdir(0o755)
    os.chown(users / str(OTHER), OTHER, OTHER)  # their own: fine
    (users / "1003").symlink_to(tmp_path)
    (users / "notes").write_text("")
    (users / "1004").mkdir()
    os.chown(users / "1004", 1004, 1004)
    (users / "1004").chmod(0o777)
    (users / "1002@0123456789abcdef").mkdir(0o755)
    os.chown(users / "1002@0123456789abcdef", 1002, 1002)  # uid 1002's own in the squat's place: fine
    (users / f"1002@{'f' * 16}").mkdir(0o755)
    os.chown(users / f"1002@{'f' * 16}", OTHER, OTHER)  # another name in the same place: never believed
    (users / "1002@nothex").mkdir(0o755)
    (sd / "gpus" / "vm").mkdir()
    os.chown(sd / "gpus" / "vm", OTHER, OTHER)
    (sd / "gpus" / "vm.0").write_text("1 2")  # a claim: not a leftover
    facts = cluster.read_state(str(sd))
    assert facts.problems == []
    assert facts.squatted == [
        f"{users}/1002 belongs to uid {OTHER}, not 1002: uid 1002 keeps its records in a users/1002@<suffix> of its own",
        f"{users}/1002@{'f' * 16} belongs to uid {OTHER}, not 1002: it is never believed",
        f"{users}/1002@nothex (uid 0) is no user's record directory",
        f"{users}/1003 is not a directory (owned by uid 0): uid 1003 keeps its records in a users/1003@<suffix> of its own",
        f"{users}/1004 is writable by others (mode 777): uid 1004's records are not believed",
        f"{users}/notes (uid 0) is no user's record directory",
    ]
    assert facts.leftovers == [f"{sd}/gpus/vm/ (old layout, uid {OTHER})"]


def test_doctor_checks_the_exclusive_complex_only_when_configured():
    facts = reference_facts()
    assert not any(f.what.startswith("exclusive") for f in cluster.doctor_findings(site(), facts, "site.toml"))
    got = levels(cluster.doctor_findings(site(exclusive_complex="exclusive"), facts, "site.toml"))
    assert got["exclusive: no complex exclusive of type BOOL, relop EXCL, consumable YES"] == "FAIL"
    facts.complexes["exclusive"] = Complex("exclusive", "excl", "BOOL", "EXCL", "YES", "YES", "0", "1000")
    facts.host_values["vm"]["exclusive"] = "true"
    got = levels(cluster.doctor_findings(site(exclusive_complex="exclusive"), facts, "site.toml"))
    assert got["exclusive: complex exclusive exists and exec hosts offer it"] == "ok"


def test_finding_line_format():
    assert cluster.Finding("ok", "thing").line() == "ok    thing"
    assert cluster.Finding("FAIL", "thing", "fix it").line() == "FAIL  thing  -- fix it"


# --- entry point --------------------------------------------------------------------------


def test_up_and_down_refuse_non_root(monkeypatch, capsys):
    monkeypatch.setattr(cluster.os, "geteuid", lambda: 1000)
    assert admin.main(["cluster", "up"]) == 1
    assert capsys.readouterr().err == (
        "slurm-shim: error: cluster up must run as root (it installs packages and starts daemons)\n"
    )
    assert admin.main(["cluster", "down"]) == 1


def test_up_refuses_other_systems(monkeypatch, capsys):
    monkeypatch.setattr(cluster.os, "geteuid", lambda: 0)
    monkeypatch.setattr(cluster.platform, "freedesktop_os_release", lambda: {"ID": "fedora", "PRETTY_NAME": "Fedora 40"})
    assert admin.main(["cluster", "up"]) == 1
    assert "supports only Debian and Ubuntu" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys):
    assert admin.main(["cluster"]) == 2
    assert admin.main(["cluster", "sideways"]) == 2
    err = capsys.readouterr().err
    assert "Usage: slurm-shim cluster [OPTIONS] COMMAND [ARGS]..." in err and "No such command 'sideways'" in err


def test_no_subprocess_import():
    source = Path(cluster.__file__).read_text()
    assert "import subprocess" not in source and "os.system" not in source


# --- the init scripts' pid files and /etc/default/gridengine --------------------------------


def test_init_defaults_gain_the_fix_once_and_replace_an_older_one():
    base = "SGE_ROOT=/var/lib/gridengine\nSGE_CELL=default\n"
    text = cluster.init_defaults_text(base)
    assert text.startswith(base) and text.endswith(cluster.INIT_FIX)
    assert cluster.init_defaults_text(text) is None
    old = base + "\n# >>> slurm-shim cluster up: an older version\nDAEMON=x\n# <<< slurm-shim\n"
    assert cluster.init_defaults_text(old) == base + "\n" + cluster.INIT_FIX
    assert cluster.init_defaults_text("") == cluster.INIT_FIX


def _source_defaults(tmp_path, script: str, *args: str) -> dict[str, str]:
    import subprocess

    defaults = tmp_path / "gridengine"
    defaults.write_text(cluster.init_defaults_text("SGE_ROOT=/r\nSGE_CELL=c\nSGE_ARCH=a\n"))
    prog = (f'set -e\nDAEMON=/usr/sbin/sge_qmaster\nPIDFILE=/var/run/gridengine/qmaster.pid\n{script}'
            f'. {defaults}\necho "DAEMON=$DAEMON"\nenv | grep ^SGE_ || true\n')
    cp = subprocess.run(["/bin/sh", "-c", prog, "sh", *args], capture_output=True, text=True, timeout=10,
                        env={"PATH": "/usr/bin:/bin"})
    assert cp.returncode == 0, cp.stderr
    return dict(line.split("=", 1) for line in cp.stdout.split())


def test_the_fix_makes_gridengine_master_find_its_qmaster_and_nothing_else_changes(tmp_path):
    master = "SCRIPTNAME=/etc/init.d/gridengine-master\n"
    got = _source_defaults(tmp_path, master, "start")
    assert got["DAEMON"] == "/usr/lib/gridengine/sge_qmaster"  # what start-stop-daemon --exec must name
    assert got["SGE_QMASTER_PIDFILE"] == "/var/run/gridengine/qmaster.pid"  # the name sge_qmaster reads
    assert (got["SGE_ROOT"], got["SGE_CELL"], got["SGE_ARCH"]) == ("/r", "c", "a")
    stop = _source_defaults(tmp_path, master, "stop")
    assert stop["DAEMON"] == "/usr/sbin/sge_qmaster"  # stop's --exec must not match other cells' qmasters
    assert stop["SGE_QMASTER_PIDFILE"] == "/var/run/gridengine/qmaster.pid"
    wrapper = _source_defaults(tmp_path, "", "-u", "*")  # the q* wrappers (set -e) read the file too
    assert wrapper == {"DAEMON": "/usr/sbin/sge_qmaster"}
    execd = _source_defaults(tmp_path, "SCRIPTNAME=/etc/init.d/gridengine-exec\n", "start")
    assert execd == {"DAEMON": "/usr/sbin/sge_qmaster"}


@needs_root
def test_init_pid_files_are_written_read_and_removed(tmp_path, monkeypatch):
    import subprocess

    run_dir = tmp_path / "run"
    monkeypatch.setattr(cluster, "RUN_DIR", str(run_dir))
    monkeypatch.setattr(cluster, "INIT_PIDFILES", {n: str(run_dir / f"{n}.pid") for n in ("qmaster", "execd")})
    monkeypatch.setattr(cluster, "QMASTER_PIDFILE", str(tmp_path / "spool-qmaster.pid"))
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        monkeypatch.setattr(cluster, "pid_alive", lambda pid, comm=None: pid == sleeper.pid)
        assert cluster.daemon_pid("qmaster") is None
        assert cluster.write_init_pidfile("qmaster", sleeper.pid)
        assert not cluster.write_init_pidfile("qmaster", sleeper.pid)  # already says so
        assert (run_dir / "qmaster.pid").read_text() == f"{sleeper.pid}\n"
        assert mode(run_dir / "qmaster.pid") == (0, 0o644)
        assert os.listdir(run_dir) == ["qmaster.pid"]
        assert cluster.daemon_pid("qmaster") == sleeper.pid
        (run_dir / "execd.pid").write_text("999999\n")  # stale
        cluster.remove_init_pidfiles([sleeper.pid])
        assert os.listdir(run_dir) == []
    finally:
        sleeper.kill()
        sleeper.wait()


# --- Open Cluster Scheduler (cluster_ocs.py): the pure parts -----------------------------------

def test_ocs_pes_are_cluster_pes_in_the_form_ocs_takes():
    for debian, ocs in zip(cluster.PES, cluster_ocs.PES):
        assert "qsort_args" not in ocs  # OCS: error: unknown attribute name "qsort_args"
        assert ocs["ign_sreq_on_mhost"] == "FALSE"  # OCS: required attribute ... is missing
        assert {k: v for k, v in ocs.items() if k in debian} == {k: v for k, v in debian.items() if k != "qsort_args"}
    assert [pe["allocation_rule"] for pe in cluster_ocs.PES] == ["$pe_slots", "$round_robin"]


def test_ocs_global_conf_is_debians_with_ocs_own_accounting():
    # OCS 9 as it ships writes accounting.jsonl, which the shim reads: no old_accounting=true; and
    # it keeps no finished jobs in qmaster (they hold their PE referenced: qconf -dp is refused);
    # its usage pattern puts a job's own metrics into accounting.jsonl (gridengine/metrics.py)
    assert cluster_ocs.GLOBAL_CONF == {**cluster.GLOBAL_CONF, "finished_jobs": "0", "reporting_params":
                                       cluster.GLOBAL_CONF["reporting_params"] + " usage_patterns=metrics:metric_*"}
    assert "old_accounting" not in cluster_ocs.GLOBAL_CONF["reporting_params"]


def test_ocs_host_slots_hold_every_queue_at_once():
    assert cluster_ocs.host_slots(2) == 2 * cluster.queue_slots(2) == 16
    assert cluster_ocs.host_slots(16) == 128


def test_installer_hooks_go_in_once_and_refuse_an_unknown_installer():
    _, anchor, hook = cluster_ocs.INSTALLER_HOOKS[0]
    text = "a()\n{\n}\n" + anchor + "   body\n}\n"
    once = cluster_ocs.hooked(text, anchor, hook)
    assert once == text.replace(anchor, anchor + hook) and once.count(cluster_ocs.HOOK_MARK) == 1
    assert cluster_ocs.hooked(once, anchor, hook) is None
    with pytest.raises(cluster.ClusterError, match="the installer changed: 'CheckForLocalHostResolving"):
        cluster_ocs.hooked("nothing here\n", anchor, hook)


def test_inst_conf_sets_every_value_and_refuses_unknown_keys():
    template = '# comment SGE_ROOT="x"\nSGE_ROOT="Please enter path"\nCELL_NAME="default"\nADMIN_USER=""\n'
    c = cluster_ocs.Cell()
    values = {"SGE_ROOT": c.root, "ADMIN_USER": ""}
    assert cluster_ocs.inst_conf(template, values) == (
        '# comment SGE_ROOT="x"\nSGE_ROOT="/opt/ocs"\nCELL_NAME="default"\nADMIN_USER=""\n')
    with pytest.raises(cluster.ClusterError, match="template has no GID_RANGE"):
        cluster_ocs.inst_conf(template, {"GID_RANGE": "1-2"})
    inst = cluster_ocs.inst_values(c, "vm")
    assert (inst["SGE_QMASTER_PORT"], inst["SGE_EXECD_PORT"], inst["GID_RANGE"]) == ("7444", "7445", "21000-21100")
    assert inst["EXEC_HOST_LIST"] == inst["ADMIN_HOST_LIST"] == "vm" and inst["ADD_TO_RC"] == "false"


def test_ocs_site_config_names_its_own_cell(monkeypatch):
    c = cluster_ocs.Cell()
    monkeypatch.setattr(cluster_ocs.Cell, "arch", lambda self: "lx-amd64")
    ocs = config.parse(cluster_ocs.site_config_text(c), cluster_ocs.SITE_CONFIG)
    debian = config.parse(cluster.site_config_text(), "/etc/slurm-shim/config.toml")
    ge = ocs.gridengine
    assert (ge.sge_root, ge.sge_cell, ge.bin_dir) == ("/opt/ocs", "default", "/opt/ocs/bin/lx-amd64")
    assert (ge.qmaster_port, ge.execd_port, ge.drmaa_library) == (7444, 7445, "/opt/ocs/lib/lx-amd64/libdrmaa.so")
    assert ocs.cluster.state_dir == "/var/spool/slurm-shim-ocs" != debian.cluster.state_dir
    assert ocs.submit.method == "agent"  # the agent loads drmaa_library, OCS's own libdrmaa
    # the same partitions, memory, gres and licenses as Debian's cell
    assert ocs.model_dump(exclude={"gridengine", "cluster", "submit"}) == debian.model_dump(
        exclude={"gridengine", "cluster", "submit"})
    assert (debian.gridengine.qmaster_port, debian.gridengine.execd_port) == (6444, 6445)
    assert debian.gridengine.drmaa_library == "/usr/lib/gridengine-drmaa/lib/libdrmaa.so.1.0"


def test_config_port_fields_default_to_grid_engines_own_lookup_and_are_checked():
    ge = config.SiteConfig().gridengine
    assert (ge.qmaster_port, ge.execd_port, ge.drmaa_library) == (0, 0, "")
    with pytest.raises(ShimError) as e:
        config.parse("[gridengine]\nqmaster_port = 70000\n", "x.toml")
    assert e.value.lines[0].startswith("slurm-shim: error: x.toml: gridengine.qmaster_port: Input should be less")


def test_ocs_cell_env_names_the_cell_completely(monkeypatch):
    monkeypatch.setattr(cluster_ocs.Cell, "arch", lambda self: "lx-amd64")
    monkeypatch.setenv("SGE_QMASTER_PORT", "6444")
    monkeypatch.setenv("SGE_ROOT", "/var/lib/gridengine")
    env = cluster_ocs.Cell().env()
    assert env["PATH"].split(":")[0] == "/opt/ocs/bin/lx-amd64"
    assert {k: env[k] for k in ("SGE_ROOT", "SGE_CELL", "SGE_QMASTER_PORT", "SGE_EXECD_PORT")} == {
        "SGE_ROOT": "/opt/ocs", "SGE_CELL": "default", "SGE_QMASTER_PORT": "7444", "SGE_EXECD_PORT": "7445"}
    with cluster.cell(env):
        assert cluster.ge_env() == env
    assert cluster.ge_env()["SGE_ROOT"] == "/var/lib/gridengine" and "SGE_QMASTER_PORT" not in cluster.ge_env()


def test_ocs_build_cache_must_be_roots_alone(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("the cache checks need root (CI runs the unit tests as root)", pytrace=False)
    cache = tmp_path / "cache" / "ocs"
    assert cluster_ocs.root_dir(str(cache)) == str(cache)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    cache.chmod(0o770)
    with pytest.raises(cluster.ClusterError, match="must not be writable by others"):
        cluster_ocs.root_dir(str(cache))
    cache.chmod(0o700)
    os.chown(cache.parent, 1000, 1000)
    with pytest.raises(cluster.ClusterError, match=f"{cache.parent} must be a directory of root's \\(it is not\\)"):
        cluster_ocs.root_dir(str(cache))


def test_ocs_build_comes_from_the_cache_when_it_is_there(tmp_path):
    (tmp_path / "ab12" / "dist" / "bin").mkdir(parents=True)
    os.chmod(tmp_path, 0o755)
    assert cluster_ocs.build("/nonexistent.tar.gz", "ab12", str(tmp_path)) == (str(tmp_path / "ab12" / "dist"), "cached (ab12)")


def test_ocs_binaries_need_a_tarball_only_when_none_are_installed(tmp_path, monkeypatch):
    monkeypatch.delenv(cluster_ocs.TARBALL_ENV, raising=False)
    c = cluster_ocs.Cell(root=str(tmp_path / "ocs"))
    with pytest.raises(cluster.ClusterError, match=r"has no Open Cluster Scheduler yet: give its source tarball \(--source"):
        cluster_ocs.ensure_binaries(c, None)
    with pytest.raises(cluster.ClusterError, match="no-such.tar.gz: no such file"):
        cluster_ocs.ensure_binaries(c, str(tmp_path / "no-such.tar.gz"))
    (tmp_path / "ocs").mkdir()
    (tmp_path / "ocs" / cluster_ocs.STAMP).write_text("cafe" * 16 + "\n")
    assert cluster_ocs.ensure_binaries(c, None) == "installed (cafecafecafe)"
    tarball = tmp_path / "src.tar.gz"
    tarball.write_bytes(b"")
    (tmp_path / "ocs" / cluster_ocs.STAMP).write_text(cluster_ocs.sha256(str(tarball)))
    assert cluster_ocs.ensure_binaries(c, str(tarball)).startswith("installed (e3b0c44298fc")


def test_cluster_flavour_and_source_options(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(cluster_ocs, "up", lambda source, release=None: calls.append(("up", source)) or 0)
    monkeypatch.setattr(cluster_ocs, "down", lambda: calls.append(("down",)) or 0)
    monkeypatch.setattr(cluster_ocs, "status", lambda: calls.append(("status",)) or 0)
    assert admin.main(["cluster", "up", "--flavour", "ocs", "--source", "x.tar.gz"]) == 0
    assert admin.main(["cluster", "up", "--flavour", "ocs"]) == 0
    assert admin.main(["cluster", "down", "--flavour", "ocs"]) == 0
    assert admin.main(["cluster", "status", "--flavour", "ocs"]) == 0
    assert calls == [("up", "x.tar.gz"), ("up", None), ("down",), ("status",)]
    assert admin.main(["cluster", "up", "--source", "x.tar.gz"]) == 2
    assert capsys.readouterr().err == "slurm-shim: error: --source is for --flavour ocs (Debian's cell comes from apt)\n"
    assert admin.main(["cluster", "up", "--flavour", "sge"]) == 2
    assert "Invalid value for '--flavour': 'sge' is not one of 'debian', 'ocs'." in capsys.readouterr().err
    assert admin.main(["cluster", "down", "--source", "x"]) == 2


def test_ocs_daemons_are_found_by_their_own_pid_files_only(tmp_path):
    c = cluster_ocs.Cell(root=str(tmp_path))
    Path(c.qmaster_spool).mkdir(parents=True)
    Path(c.qmaster_spool, "qmaster.pid").write_text(f"{os.getpid()}\n")  # alive, but python, not sge_qmaster
    assert cluster_ocs.daemon_pid(c, "qmaster") is None
    assert cluster_ocs.pidfiles(c, "qmaster") == [f"{tmp_path}/default/spool/qmaster/qmaster.pid"]
    Path(c.spool, "vm").mkdir()
    Path(c.spool, "vm", "execd.pid").write_text("1\n")
    assert cluster_ocs.pidfiles(c, "execd") == [f"{tmp_path}/default/spool/vm/execd.pid"]
    assert not cluster_ocs._runs_from(os.getpid(), c)


def test_no_subprocess_import_in_cluster_ocs():
    source = Path(cluster_ocs.__file__).read_text()
    assert "import subprocess" not in source and "os.system" not in source


def test_debian_up_never_writes_over_the_ocs_cells_config(monkeypatch, capsys):
    monkeypatch.setattr(cluster.os, "geteuid", lambda: 0)
    monkeypatch.setattr(cluster, "require_debian", lambda: None)
    monkeypatch.setenv("SLURM_SHIM_CONFIG", cluster_ocs.SITE_CONFIG)
    monkeypatch.setattr(cluster, "this_host", lambda: pytest.fail("up went on"))
    assert admin.main(["cluster", "up"]) == 1
    assert capsys.readouterr().err == (
        "slurm-shim: error: SLURM_SHIM_CONFIG is /etc/slurm-shim/ocs.toml, the Open Cluster Scheduler cell's: "
        "use cluster up --flavour ocs, or unset SLURM_SHIM_CONFIG for Debian's cell\n")


def test_the_cached_plain_config_carries_the_cell_fields(tmp_path, monkeypatch):
    from shim import siteconf

    monkeypatch.setattr(cluster_ocs.Cell, "arch", lambda self: "lx-amd64")
    path = tmp_path / "ocs.toml"
    path.write_text(cluster_ocs.site_config_text(cluster_ocs.Cell()))
    monkeypatch.setenv("SLURM_SHIM_CONFIG", str(path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    seen = []
    for _ in range(2):  # validated by pydantic, then read back from the JSON cache
        siteconf.reset()
        ge = siteconf.get().gridengine
        seen.append((ge.sge_root, ge.qmaster_port, ge.execd_port, ge.drmaa_library))
    siteconf.reset()
    assert len(list((tmp_path / "cache" / "slurm-shim").iterdir())) == 1
    assert seen == [("/opt/ocs", 7444, 7445, "/opt/ocs/lib/lx-amd64/libdrmaa.so")] * 2


def test_ocs_up_and_down_refuse_non_root_and_status_of_no_cell(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(cluster.os, "geteuid", lambda: 1000)
    assert admin.main(["cluster", "up", "--flavour", "ocs"]) == 1
    assert capsys.readouterr().err == ("slurm-shim: error: cluster up --flavour ocs must run as root "
                                       "(it builds, installs and starts Open Cluster Scheduler)\n")
    assert admin.main(["cluster", "down", "--flavour", "ocs"]) == 1
    assert "cluster down --flavour ocs must run as root" in capsys.readouterr().err
    monkeypatch.setattr(cluster_ocs, "SITE_CONFIG", str(tmp_path / "ocs.toml"))
    assert cluster_ocs.status(cluster_ocs.Cell(root=str(tmp_path / "none"))) == 1
    assert capsys.readouterr().out == f"qmaster  down\nexecd    down\nconfig   {tmp_path}/ocs.toml (missing)\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="makes network and UTS namespaces (scripts/multihost's second host's kind)")
def test_a_daemon_of_a_second_host_in_its_own_namespaces_is_not_this_hosts(tmp_path, monkeypatch):
    """scripts/multihost's second execd shares this machine's files: its pid file is in the same
    spool (execd/node2/execd.pid). cluster up must not take it for this host's execd (it then
    started none here, and every queue instance of this host stayed 'u')."""
    import subprocess

    other = subprocess.Popen(["unshare", "--net", "--uts", "sleep", "60"])
    try:
        cluster.poll(lambda: os.readlink(f"/proc/{other.pid}/exe").endswith("/sleep"), 10, "unshare to exec sleep")
        assert cluster.on_this_host(os.getpid()) and not cluster.on_this_host(other.pid)
        for host, pid in (("node2", other.pid), ("vm", os.getpid())):
            (tmp_path / host).mkdir()
            (tmp_path / host / "execd.pid").write_text(f"{pid}\n")
        monkeypatch.setattr(cluster, "EXECD_PIDFILES", f"{tmp_path}/*/execd.pid")
        monkeypatch.setitem(cluster.INIT_PIDFILES, "execd", str(tmp_path / "none.pid"))
        monkeypatch.setattr(cluster, "pid_alive", lambda pid, comm=None: pid in (other.pid, os.getpid()))
        assert cluster.daemon_pid("execd") == os.getpid()
        (tmp_path / "vm" / "execd.pid").unlink()
        assert cluster.daemon_pid("execd") is None
    finally:
        other.kill()
        other.wait()
