"""`slurm-shim install`: probe, draft, plan, apply and uninstall on qconf answers recorded from a
real SGE 8.1.9 cluster (fixtures/gridengine/sge-8.1.9: queue all.q with PEs smp and mpi, exec host
vm without the exclusive complex), through the replay transport. The live test is
tests/integration/test_install_live.py."""

from __future__ import annotations

import json
import os
import stat

import pytest

from conftest import SGE_REF
from shim.admin import cluster, install
from shim.cli import admin
from shim import config
from shim.gridengine.replay import ReplayBackend
from shim.proc import Result

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the state layout is root's (CI runs as root)")


def ref(name: str) -> str:
    path = SGE_REF / name
    if not path.exists():
        pytest.fail(f"reference capture {path} is missing (see {SGE_REF / 'README.md'})", pytrace=False)
    return path.read_text()


class Recording(ReplayBackend):
    """The replay transport, also keeping the file a qconf -A*/-M* call reads (it is gone after)."""

    def __init__(self, answers=None):
        super().__init__(answers, default=Result(("qconf",), 0, "", ""))
        self.files: dict[str, str] = {}

    def run(self, tool, args, *, input=None, timeout=None):
        if args and args[0] in ("-Ap", "-Mc", "-Aq", "-Ae") and len(args) == 2:
            with open(args[1]) as f:
                self.files[args[0]] = f.read()
        return super().run(tool, args, input=input, timeout=timeout)

    def writes(self) -> list[tuple[str, ...]]:
        return [argv for argv, _ in self.calls
                if argv[0] == "qconf" and argv[1] in ("-Ap", "-Mc", "-aattr", "-dattr", "-dp", "-Aq", "-Ae", "-mattr")]


def reference(queue: str | None = None, **over: str) -> Recording:
    ge = Recording()
    ge.add("qconf", ["-help"], "SGE 8.1.9\nusage: qconf [options]\n")
    ge.add("qsub", ["-help"], ref("qsub-help.txt"))
    ge.add("qstat", ["-help"], ref("qstat-help.txt"))
    ge.add("qconf", ["-sql"], "all.q\n")
    ge.add("qconf", ["-sq", "all.q"], queue or ref("config-qconf-sq-all.q.txt"))
    ge.add("qconf", ["-shgrp_resolved", "@allhosts"], "vm\n")
    ge.add("qconf", ["-spl"], ref("config-qconf-spl.txt"))
    ge.add("qconf", ["-sp", "smp"], ref("config-qconf-sp-smp.txt"))
    ge.add("qconf", ["-sp", "mpi"], ref("config-qconf-sp-mpi.txt"))
    ge.add("qconf", ["-sc"], over.get("sc", ref("config-qconf-sc.txt")))
    ge.add("qconf", ["-sel"], "vm\n")
    ge.add("qconf", ["-se", "vm"], ref("config-qconf-se-host.txt"))
    ge.add("qconf", ["-se", "global"], ref("config-qconf-se-global.txt"))
    ge.add("qconf", ["-sconf", "global"], ref("config-qconf-sconf.txt"))
    ge.add("qconf", ["-ssconf"], ref("config-qconf-ssconf.txt"))
    return ge


CELL = install.Cell(bin_dir="/usr/lib/gridengine", qmaster_port=6444, execd_port=6445,
                    drmaa_library="/usr/lib/gridengine-drmaa/lib/libdrmaa.so.1.0")


def planned(tmp_path, ge=None, **opts):
    ge = ge or reference()
    o = install.Options(config_path=str(tmp_path / "config.toml"), state_dir=str(tmp_path / "state"),
                        profile=None, **opts)
    return ge, install.plan(install.probe(ge), CELL, o)


def by_state(p, state):
    return [(a.kind, a.target) for a in p.actions if a.state == state]


# --- probe and draft ------------------------------------------------------------------------------


def test_probe_reads_queues_pes_complexes_hosts_and_capabilities():
    p = install.probe(reference())
    assert p.version == "SGE 8.1.9"
    assert list(p.queues) == ["all.q"] and p.queue_hosts("all.q") == ["vm"]
    assert {n: install.rule_of(pe) for n, pe in p.pes.items()} == {"mpi": "$round_robin", "smp": "$pe_slots"}
    assert p.hosts == {"vm": {"gpu": "2", "mem_free": "16G"}}
    assert p.global_values == {"anthropic_api": "96", "matlab": "3"}
    assert p.capabilities["sync"] is True and p.capabilities["par"] is False


def test_the_draft_of_the_reference_cluster_is_a_working_site_config(tmp_path):
    _, p = planned(tmp_path)
    cfg = config.parse(p.config_text, "draft")
    assert list(cfg.partitions) == ["all"]
    part = cfg.partitions["all"]
    assert (part.queue, part.pe, part.pe_multinode, part.default) == ("all.q", "smp", "mpi", True)
    assert (cfg.memory.complex, cfg.memory.scope) == ("mem_free", "slot")
    assert {n: (c.complex, c.scope) for n, c in cfg.gres.items()} == {"gpu": ("gpu", "job")}
    assert {n: (c.complex, c.scope) for n, c in cfg.licenses.items()} == {
        "anthropic_api": ("anthropic_api", "job"), "matlab": ("matlab", "job")}
    assert cfg.exclusive_complex == "exclusive"
    assert cfg.cluster.state_dir == str(tmp_path / "state")
    g = cfg.gridengine
    assert (g.bin_dir, g.qmaster_port, g.execd_port, cfg.submit.method) == ("/usr/lib/gridengine", 6444, 6445, "agent")
    # doctor finds nothing wrong with it once the exclusive complex is there
    facts = cluster.Facts(queues={"all.q": cluster.parse_attrs(ref("config-qconf-sq-all.q.txt"))}, pes=["mpi", "smp"],
                          complexes={**cluster.parse_complexes(ref("config-qconf-sc.txt")), "exclusive": install.EXCLUSIVE},
                          global_values={"anthropic_api": "96", "matlab": "3"},
                          host_values={"vm": {"gpu": "2", "mem_free": "16G", "exclusive": "true"}})
    assert [f.line() for f in cluster.doctor_findings(cfg, facts, "draft") if f.level != "ok"] == []


def test_the_plan_lists_each_change_with_its_exact_command(tmp_path):
    _, p = planned(tmp_path)
    assert by_state(p, install.CREATE) == [("complex", "exclusive"), ("host-value", "vm exclusive"),
                                           ("queue-tmpdir", "all.q"), ("state-dir", str(tmp_path / "state")),
                                           ("file", str(tmp_path / "config.toml"))]
    assert by_state(p, install.CONFLICT) == []
    commands = {a.target: a.commands for a in p.actions}
    assert commands["vm exclusive"] == ["qconf -aattr exechost complex_values exclusive=true vm"]
    # Grid Engine's default tmpdir /tmp: root's own directory instead (F-20)
    assert commands["all.q"][-1] == "qconf -mattr queue tmpdir /var/spool/slurm-shim-tmp all.q"
    assert commands["exclusive"] == ["qconf -sc > complexes; echo 'exclusive excl BOOL EXCL YES YES 0 1000' >> "
                                     "complexes; qconf -Mc complexes"]
    assert commands[str(tmp_path / "state")][1].endswith("-m 1777 " f"{tmp_path}/state/users {tmp_path}/state/gpus")
    text = install.render(p)
    assert "create   exec host vm: complex_values gains exclusive=true\n" in text
    assert "in place pe smp: $pe_slots (one host)" in text
    assert "install: 5 change(s) to make; run with --apply" in text
    doc = json.loads(json.dumps(p.as_dict()))
    assert doc["changes"] == 5 and doc["probe"]["version"] == "SGE 8.1.9"


def test_an_open_cluster_scheduler_that_keeps_ended_jobs_is_noted():
    """OCS keeps finished_jobs ended jobs in qmaster, each keeping its PE referenced, so a PE
    install made cannot be removed until they are gone: said in the plan (SGE 8.1.9 lets go)."""
    cfg = config.parse(install.draft(install.probe(reference()), CELL, state_dir="/s").text, "d")
    note = ("finished_jobs 100: qmaster keeps the last 100 ended jobs, and each keeps its PE referenced: --uninstall "
            "cannot remove a PE it made until they are gone (qconf -mconf global: finished_jobs 0; the shim reads "
            "ended jobs from accounting)")
    assert note not in install.check_notes(cfg, install.probe(reference()), CELL)
    ocs = reference()
    ocs.add("qconf", ["-help"], "OCS 9.1.4\nusage: qconf [options]\n")
    assert note in install.check_notes(cfg, install.probe(ocs), CELL)
    ocs.add("qconf", ["-sconf", "global"], ref("config-qconf-sconf.txt").replace("finished_jobs                100",
                                                                                 "finished_jobs                0"))
    assert not [n for n in install.check_notes(cfg, install.probe(ocs), CELL) if n.startswith("finished_jobs")]


def test_a_queue_without_usable_pes_gets_the_shims_own(tmp_path):
    queue = ref("config-qconf-sq-all.q.txt").replace("pe_list               smp mpi", "pe_list               NONE")
    ge, p = planned(tmp_path, reference(queue))
    assert by_state(p, install.CREATE)[:4] == [("pe", "shim_smp"), ("queue-pe", "all.q shim_smp"),
                                               ("pe", "shim_mpi"), ("queue-pe", "all.q shim_mpi")]
    smp, _, mpi, _ = p.actions[:4]
    assert smp.data["attrs"]["allocation_rule"] == "$pe_slots" and mpi.data["attrs"]["allocation_rule"] == "$round_robin"
    assert mpi.data["attrs"]["job_is_first_task"] == "FALSE" and mpi.data["attrs"]["control_slaves"] == "TRUE"
    assert set(smp.data["attrs"]) == set(cluster.parse_attrs(ref("config-qconf-sp-smp.txt")))  # this Grid Engine's form
    assert p.actions[1].commands == ["qconf -aattr queue pe_list shim_smp all.q"]
    assert smp.commands[0] == "qconf -Ap shim_smp.pe  # shim_smp.pe:"
    part = config.parse(p.config_text, "d").partitions["all"]
    assert (part.pe, part.pe_multinode) == ("shim_smp", "shim_mpi")


def test_an_object_that_exists_with_other_values_is_reported_and_left(tmp_path):
    queue = ref("config-qconf-sq-all.q.txt").replace("pe_list               smp mpi", "pe_list               smp")
    ge = reference(queue)
    ge.add("qconf", ["-spl"], "mpi\nshim_mpi\nsmp\n")
    ge.add("qconf", ["-sp", "shim_mpi"], ref("config-qconf-sp-smp.txt").replace("smp", "shim_mpi"))  # $pe_slots
    sc = ref("config-qconf-sc.txt") + "exclusive           excl             INT       <=    YES         NO         0        0\n"
    ge.add("qconf", ["-sc"], sc)
    _, p = planned(tmp_path, ge)
    assert ("pe", "shim_mpi") in by_state(p, install.CONFLICT)
    assert ("complex", "exclusive") in by_state(p, install.CONFLICT)
    assert not [a for a in p.changes if a.kind in ("pe", "complex", "host-value")]
    install.apply(p, ge, str(tmp_path / "record.json"), say=lambda _: None)
    assert ("qconf", "-dp", "shim_mpi") not in ge.writes() and not [w for w in ge.writes() if w[1] in ("-Ap", "-Mc")]


def test_a_gpu_complex_by_another_name_is_gres_gpu():
    p = install.probe(reference())
    del p.complexes["gpu"]
    p.complexes["ngpus"] = cluster.Complex("ngpus", "ng", "INT", "<=", "YES", "YES", "0", "0")
    p.hosts = {"vm": {"ngpus": "4", "mem_free": "16G"}}
    d = install.draft(p, CELL, state_dir="/s")
    gres = config.parse(d.text, "d").gres
    assert {n: (c.complex, c.scope) for n, c in gres.items()} == {"gpu": ("ngpus", "slot")}
    assert "gres gpu is complex ngpus" in d.notes


def test_memory_is_the_consumable_memory_complex_and_without_one_a_threshold():
    p = install.probe(reference())
    assert install.pick_memory(p)[:2] == ("mem_free", "slot")
    p.complexes["mem_free"] = cluster.Complex("mem_free", "mf", "MEMORY", "<=", "YES", "NO", "0", "0")
    p.complexes["h_vmem"] = cluster.Complex("h_vmem", "h_vmem", "MEMORY", "<=", "YES", "JOB", "0", "0")
    assert install.pick_memory(p)[:2] == ("h_vmem", "job")
    del p.complexes["h_vmem"]
    name, scope, note = install.pick_memory(p)
    assert (name, scope) == ("mem_free", "host") and "no consumable MEMORY complex" in note


def test_queue_names_and_time_limits_in_slurms_words(tmp_path):
    assert [install.partition_name(q) for q in ("all.q", "gpu", "big nodes.q", ".q")] == ["all", "gpu", "big_nodes", "_q"]
    two = install.probe(reference())
    two.queues = {"a.q": two.queues["all.q"], "a": two.queues["all.q"]}
    assert list(config.parse(install.draft(two, CELL, state_dir="/s").text, "d").partitions) == ["a", "a_2"]
    assert [install.slurm_time(t) for t in ("48:00:00", "3600", "1:30:00", "0:0:5")] == [
        "2-00:00:00", "01:00:00", "01:30:00", "00:00:05"]
    queue = ref("config-qconf-sq-all.q.txt").replace("h_rt                  INFINITY", "h_rt                  72:00:00")
    _, p = planned(tmp_path, reference(queue))
    assert config.parse(p.config_text, "d").partitions["all"].max_time == "3-00:00:00"
    with pytest.raises(install.InstallError, match="queue nope.q does not exist"):
        planned(tmp_path, queues=["nope.q"])


def test_an_ocs_pe_keeps_the_attributes_that_grid_engine_takes():
    ocs = {"pe_name": "x", "slots": "1", "allocation_rule": "$pe_slots", "ign_sreq_on_mhost": "FALSE",
           "master_forks_slaves": "FALSE", "daemon_forks_slaves": "FALSE", "control_slaves": "FALSE",
           "job_is_first_task": "TRUE", "user_lists": "NONE", "xuser_lists": "NONE", "start_proc_args": "NONE",
           "stop_proc_args": "NONE", "urgency_slots": "min", "accounting_summary": "FALSE"}
    pe = install.desired_pe("shim_mpi", "$round_robin", ocs)
    assert "qsort_args" not in pe and pe["ign_sreq_on_mhost"] == "FALSE" and set(pe) == set(ocs)
    assert (pe["pe_name"], pe["allocation_rule"], pe["control_slaves"]) == ("shim_mpi", "$round_robin", "TRUE")


# --- files and the state dir ------------------------------------------------------------------------


def test_a_file_is_created_left_when_different_and_replaced_only_when_asked(tmp_path):
    path = tmp_path / "f.toml"
    assert install.file_action(str(path), "a\n", "x").state == install.CREATE
    path.write_text("a\n")
    assert install.file_action(str(path), "a\n", "x").state == install.IN_PLACE
    a = install.file_action(str(path), "b\n", "x")
    assert a.state == install.CONFLICT and a.commands == [] and "left as it is" in a.what
    assert install.file_action(str(path), "b\n", "x", replace=True).state == install.REPLACE


def test_the_profile_snippet_puts_commands_and_pages_first_once(tmp_path):
    text = install.profile_text("/opt/slurm-shim", "/etc/slurm-shim/config.toml")
    assert '*:/opt/slurm-shim/bin:*) ;; *) PATH=/opt/slurm-shim/bin:$PATH' in text
    assert 'MANPATH=/opt/slurm-shim/share/man:${MANPATH:-}' in text and "SLURM_SHIM_CONFIG" not in text
    other = install.profile_text("/opt/slurm-shim", str(tmp_path / "site config.toml"))
    assert f"SLURM_SHIM_CONFIG='{tmp_path}/site config.toml'" in other
    import subprocess

    snippet = tmp_path / "slurm-shim.sh"
    snippet.write_text(other)
    out = subprocess.run(["/bin/sh", "-c", f'. "{snippet}"; . "{snippet}"; echo "$PATH|$MANPATH|$SLURM_SHIM_CONFIG"'],
                         env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True).stdout.strip()
    # once on PATH however often a login shell reads it; MANPATH's trailing ':' keeps the system's pages
    assert out == f"/opt/slurm-shim/bin:/usr/bin:/bin|/opt/slurm-shim/share/man:|{tmp_path}/site config.toml"


@root_only
def test_state_dir_is_planned_made_and_someone_elses_is_a_conflict(tmp_path):
    d = tmp_path / "state"
    a = install.state_action(str(d))
    assert a.state == install.CREATE and a.data["missing"] == [str(d), f"{d}/users", f"{d}/gpus"]
    assert state_ok(d) is False
    note, entry = install.apply_action(Recording(), a)
    assert note == f"{d} laid out" and entry == {"kind": "dirs", "paths": a.data["missing"]}
    assert install.state_action(str(d)).state == install.IN_PLACE and state_ok(d)
    other = tmp_path / "squat"
    other.mkdir()
    os.chown(other, 65534, 65534)
    assert install.state_action(str(other)).state == install.CONFLICT


def state_ok(d) -> bool:
    try:
        return (stat.S_IMODE(os.stat(d).st_mode), stat.S_IMODE(os.stat(d / "users").st_mode)) == (0o755, 0o1777)
    except OSError:
        return False


# --- apply, record, uninstall ---------------------------------------------------------------------------


@root_only
def test_apply_makes_exactly_the_planned_changes_and_records_them(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(cluster, "ensure_tmpdir_base", made.append)
    ge, p = planned(tmp_path)
    record = tmp_path / "rec" / "install-record.json"
    notes = install.apply(p, ge, str(record), say=lambda _: None)
    assert ge.writes() == [("qconf", "-Mc", ge.writes()[0][2]),
                           ("qconf", "-aattr", "exechost", "complex_values", "exclusive=true", "vm"),
                           ("qconf", "-mattr", "queue", "tmpdir", cluster.TMPDIR_BASE, "all.q")]
    assert made == [cluster.TMPDIR_BASE]
    rows = cluster.parse_complexes(ge.files["-Mc"])
    assert rows["exclusive"] == install.EXCLUSIVE and len(rows) == len(cluster.parse_complexes(ref("config-qconf-sc.txt"))) + 1
    assert notes[-1] == f"wrote {tmp_path}/config.toml" and (tmp_path / "config.toml").read_text() == p.config_text
    st = os.stat(record)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o644)
    created = json.loads(record.read_text())["created"]
    assert [e["kind"] for e in created] == ["complex", "host-value", "queue-tmpdir", "dirs", "file"]
    assert created[2] == {"kind": "queue-tmpdir", "queue": "all.q", "old": "/tmp", "new": cluster.TMPDIR_BASE}
    # a second plan of the same paths: the files are in place
    _, again = planned(tmp_path)
    assert by_state(again, install.IN_PLACE)[-2:] == [("state-dir", str(tmp_path / "state")),
                                                      ("file", str(tmp_path / "config.toml"))]


@root_only
def test_uninstall_undoes_only_what_is_still_as_created(tmp_path):
    record = tmp_path / "record.json"
    pe = install.desired_pe("shim_mpi", "$round_robin", cluster.parse_attrs(ref("config-qconf-sp-mpi.txt")))
    conf = tmp_path / "config.toml"
    conf.write_text("mine\n")
    edited = tmp_path / "profile.sh"
    edited.write_text("edited by the admin\n")
    (tmp_path / "state" / "users" / "0").mkdir(parents=True)
    entries = [
        {"kind": "dirs", "paths": [str(tmp_path / "state"), str(tmp_path / "state/users"), str(tmp_path / "state/gpus")]},
        {"kind": "pe", "name": "shim_mpi", "attrs": pe},
        {"kind": "queue-pe", "queue": "all.q", "pe": "mpi"},
        {"kind": "queue-pe", "queue": "all.q", "pe": "gone"},
        {"kind": "host-value", "host": "vm", "complex": "gpu", "value": "4"},
        {"kind": "host-value", "host": "vm", "complex": "mem_free", "value": "16G"},
        {"kind": "file", "path": str(conf), "sha256": install._sha("mine\n")},
        {"kind": "file", "path": str(edited), "sha256": install._sha("as written\n")},
    ]
    install.write_record(str(record), {"version": 1, "created": entries})
    ge = reference()
    ge.add("qconf", ["-sp", "shim_mpi"], cluster.render_attrs(pe))
    said: list[str] = []
    assert install.uninstall(ge, str(record), say=said.append) == 1
    assert ge.writes() == [("qconf", "-dattr", "exechost", "complex_values", "mem_free", "vm"),
                           ("qconf", "-dattr", "queue", "pe_list", "mpi", "all.q"), ("qconf", "-dp", "shim_mpi")]
    assert not conf.exists() and edited.read_text() == "edited by the admin\n"
    assert f"left     {edited} changed since it was written: left" in said
    assert "left     exec host vm: gpu=2 changed since: left" in said
    assert any("not empty (the shim's job records): left" in s for s in said)
    left = json.loads(record.read_text())["created"]
    assert [e["kind"] for e in left] == ["dirs", "host-value", "file"]
    # with --purge-state the state dir goes with its records; the two changed objects stay
    assert install.uninstall(ge, str(record), say=said.append, purge=True) == 1
    assert not (tmp_path / "state").exists()
    assert [e["kind"] for e in json.loads(record.read_text())["created"]] == ["host-value", "file"]


@root_only
def test_a_record_others_may_write_is_not_believed(tmp_path):
    record = tmp_path / "record.json"
    install.write_record(str(record), {"version": 1, "created": []})
    os.chmod(record, 0o666)
    with pytest.raises(install.InstallError, match="not trusted"):
        install.read_record(str(record))
    assert install.read_record(str(tmp_path / "none.json")) == {"version": 1, "created": []}


def test_apply_and_uninstall_need_root_and_plan_does_not(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert admin.main(["install", "--apply"]) == 1
    assert "install --apply must run as root" in capsys.readouterr().err
    assert admin.main(["install", "--uninstall"]) == 1
    assert admin.main(["install"]) == 2  # one of --plan/--apply/--uninstall
    assert admin.main(["install", "--plan", "--apply"]) == 2
    err = capsys.readouterr().err
    assert "Error: one of --plan, --apply, --uninstall is required" in err
    assert "Error: --apply: not allowed with --plan" in err


def test_cluster_ups_site_step_is_install_on_its_own_config(tmp_path, monkeypatch):
    """cluster up's last step: install.local with cluster.py's site config, replacing its own file
    when it differs, the exclusive complex on its host only, no profile.d snippet and no record."""
    ge = reference()
    # (configure gave cluster up's queues their tmpdir before this step)
    queue = ref("config-qconf-sq-all.q.txt").replace(" /tmp\n", f" {cluster.TMPDIR_BASE}\n")
    ge.add("qconf", ["-sq", "debug"], queue.replace("all.q", "debug"))
    ge.add("qconf", ["-sq", "gpu"], queue.replace("all.q", "gpu"))
    monkeypatch.setattr(install, "CellBackend", lambda bin_dir="": ge)
    laid = []
    monkeypatch.setattr(cluster, "ensure_state_layout", lambda d: laid.append(d) or f"{d} laid out")
    conf = tmp_path / "config.toml"
    conf.write_text("older\n")
    text = cluster.site_config_text(state_dir=str(tmp_path / "state"))
    notes = install.local(str(conf), text, "vm")
    assert notes == ["complex exclusive added", "exec host vm: exclusive=true", f"{tmp_path}/state laid out",
                     f"wrote {conf}"]
    assert conf.read_text() == text and laid == [str(tmp_path / "state")]
    assert [c for c, _ in ge.calls if c[1] in ("-sql", "-sel", "-sconf", "-help")] == []  # only what the config names
    assert not list(tmp_path.glob("*.json"))


# --- doctor on every execution host -----------------------------------------------------------------------


def run_check(script: str) -> int:
    import subprocess

    return subprocess.run(["/bin/sh", "-c", script.split("\n", 1)[1]], cwd="/", capture_output=True).returncode


@root_only
def test_the_host_check_job_says_what_is_missing_by_its_exit_code(tmp_path):
    """The script doctor runs on each host (here, run by sh as Grid Engine would): 0 when this
    installation, the same site config and the state dir's layout are there."""
    import sys

    import shim
    from shim.store import state

    src = os.path.dirname(os.path.dirname(os.path.abspath(shim.__file__)))
    conf = tmp_path / "config.toml"
    conf.write_text("x = 1\n")
    sd = tmp_path / "state"
    assert state.make_layout(str(sd)) == []
    py = sys.executable
    assert run_check(cluster.host_check_script(py, src, str(conf), str(sd))) == 0
    assert run_check(cluster.host_check_script(py, src, None, str(sd))) == 0  # no site config: not compared
    assert run_check(cluster.host_check_script(py, src, str(conf), str(tmp_path / "nostate"))) == 16
    assert run_check(cluster.host_check_script(py, src, str(conf), "")) == 0  # not laid out here either: not compared
    script = cluster.host_check_script(py, src, str(conf), str(sd))
    conf.write_text("x = 2\n")
    assert run_check(script) == 15
    conf.unlink()
    assert run_check(script) == 14
    assert run_check(cluster.host_check_script(py, str(tmp_path), None, str(sd))) == 13  # shim found elsewhere
    assert run_check(cluster.host_check_script(str(tmp_path / "python"), src, None, str(sd))) == 127
    other = cluster.host_check_script(py, src, None, str(sd)).replace(shim.__version__, "0.0.0-other")
    assert run_check(other) == 12


def test_doctor_judges_each_hosts_check_job(monkeypatch):
    from shim import proc

    answers = {"ok": "Job 5 exited with exit code 0.", "nopy": "Job 6 exited with exit code 127.",
               "old": "Job 7 exited with exit code 12.", "nostate": "Job 8 exited with exit code 16."}

    def fake_run(argv, **kw):
        if argv[0].endswith("qdel"):
            deleted.append(argv[1])
            return Result(tuple(argv), 0, "", "")
        host = argv[argv.index("-l") + 1][2:]
        if host == "busy":
            raise proc.Timeout("qsub timed out")
        return Result(tuple(argv), 0, answers.get(host, ""), "" if host in answers else "error: no such host")

    deleted: list[str] = []
    monkeypatch.setattr(proc, "run", fake_run)
    cfg = config.SiteConfig()
    found = {f.what.split()[2].rstrip(":"): f for f in
             cluster.host_findings(cfg, "/usr/lib/gridengine/qsub", ["ok", "nopy", "old", "nostate", "busy", "bad"], None)}
    assert found["ok"].level == "ok"
    assert found["nopy"].level == "FAIL" and "has no interpreter" in found["nopy"].what
    assert "the same path as here" in found["nopy"].fix
    assert found["old"].what.startswith("exec host old has another slurm-shim version than")
    assert "shared" in found["nostate"].what and "mount the shared" in found["nostate"].fix
    assert found["busy"].level == "warn" and "did not run within 60 s" in found["busy"].what
    assert deleted == [f"shim_doctor_{os.getpid()}_busy"]  # the timed-out check job, and only it
    assert found["bad"].level == "FAIL" and "error: no such host" in found["bad"].what


@root_only
def test_cluster_up_stops_at_a_state_dir_someone_else_made(tmp_path, monkeypatch):
    ge = reference()
    for q in ("debug", "gpu"):
        ge.add("qconf", ["-sq", q], ref("config-qconf-sq-all.q.txt").replace("all.q", q))
    monkeypatch.setattr(install, "CellBackend", lambda bin_dir="": ge)
    sd = tmp_path / "state"
    sd.mkdir()
    os.chown(sd, 65534, 65534)
    with pytest.raises(cluster.ClusterError, match=f"state dir {sd}: {sd} exists and is not a directory of root's"):
        install.local(str(tmp_path / "config.toml"), cluster.site_config_text(state_dir=str(sd)), "vm")
    assert not (tmp_path / "config.toml").exists() and ge.writes() == []


def test_the_cell_is_the_flags_else_the_environments(monkeypatch):
    """A cell other than Debian's default, as its settings.sh names it (SGE_ROOT, SGE_CELL and
    the ports), or by flags, which win."""
    for k, v in {"SGE_ROOT": "/opt/site", "SGE_CELL": "raw", "SGE_QMASTER_PORT": "8444", "SGE_EXECD_PORT": "8445"}.items():
        monkeypatch.setenv(k, v)
    c = install.detect_cell(bin_dir="/usr/lib/gridengine")
    assert (c.sge_root, c.sge_cell, c.qmaster_port, c.execd_port) == ("/opt/site", "raw", 8444, 8445)
    assert c.accounting == "/opt/site/raw/common/accounting"
    c = install.detect_cell("/var/lib/gridengine", "other", "/usr/lib/gridengine", 9444, 9445)
    assert (c.sge_root, c.sge_cell, c.qmaster_port, c.execd_port) == ("/var/lib/gridengine", "other", 9444, 9445)
    asked: list[install.Request] = []
    monkeypatch.setattr(install, "run", lambda req: asked.append(req) or 0)
    assert admin.main(["install", "--plan", "--qmaster-port", "9444", "--execd-port", "9445"]) == 0
    assert (asked[0].qmaster_port, asked[0].execd_port) == (9444, 9445)


RAW = install.Cell(sge_root="/var/lib/gridengine", sge_cell="raw", bin_dir="/usr/lib/gridengine",
                   qmaster_port=8444, execd_port=8445)


@root_only
def test_the_record_names_its_cell_and_uninstall_goes_back_there(tmp_path, monkeypatch, capsys):
    """--uninstall undoes in the cell the record was written for, whatever this shell's SGE_CELL
    says (in another cell an object of the same name may be that cell's own: cluster up's
    exclusive complex); flags naming another cell are refused, as is an --apply of another cell
    into the same record, before any change."""
    monkeypatch.setattr(cluster, "ensure_tmpdir_base", lambda path: True)
    ge, p = planned(tmp_path)
    p.cell = RAW
    record = tmp_path / "rec.json"
    install.apply(p, ge, str(record), say=lambda _: None)
    assert json.loads(record.read_text())["cell"] == {"sge_root": "/var/lib/gridengine", "sge_cell": "raw",
                                                      "qmaster_port": 8444, "execd_port": 8445,
                                                      "bin_dir": "/usr/lib/gridengine"}
    used: list[install.Cell] = []
    replay = reference(ref("config-qconf-sq-all.q.txt").replace(" /tmp\n", f" {cluster.TMPDIR_BASE}\n"))

    def backend(cell):
        used.append(cell)
        return replay

    monkeypatch.setattr(install, "backend_for", backend)
    for k in ("SGE_ROOT", "SGE_QMASTER_PORT", "SGE_EXECD_PORT"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SGE_CELL", "default")
    # the flags name another cell: refused, nothing undone
    assert admin.main(["install", "--uninstall", "--record", str(record), "--sge-cell", "default"]) == 2
    err = capsys.readouterr().err
    assert (f"slurm-shim: error: {record} records what --apply made in the cell /var/lib/gridengine/raw (qmaster "
            "port 8444), not in the one --sge-cell default names") in err
    assert used == [] and (tmp_path / "config.toml").exists()
    # --apply of another cell (this shell's) into the same record: refused before any call
    assert admin.main(["install", "--apply", "--record", str(record), "--config", str(tmp_path / "other.toml")]) == 2
    assert "records what --apply made in the cell /var/lib/gridengine/raw (qmaster port 8444), not " \
           "/var/lib/gridengine/default" in capsys.readouterr().err
    assert replay.writes() == [] and not (tmp_path / "other.toml").exists()
    # the shell names Debian's default cell: the record's cell is the one undone
    assert admin.main(["install", "--uninstall", "--record", str(record)]) == 0
    assert [(c.sge_cell, c.qmaster_port, c.execd_port) for c in used] == [("raw", 8444, 8445)]
    out = capsys.readouterr().out
    assert "undone   complex exclusive: already gone" in out  # (the replay has none)
    assert "undone   queue all.q: tmpdir /tmp again" in out  # (what --apply found: the record's to undo)
    assert replay.writes() == [("qconf", "-mattr", "queue", "tmpdir", "/tmp", "all.q")]
    assert not record.exists() and not (tmp_path / "config.toml").exists()


def test_grid_engine_that_cannot_be_reached_is_said_in_the_shims_words(capsys):
    assert admin.main(["install", "--plan", "--bin-dir", "/nonexistent-w5"]) == 1
    assert capsys.readouterr().err == ("slurm-shim: error: Grid Engine's commands cannot be run or do not answer: "
                                       "/nonexistent-w5/qconf: command not found\n")


# --- the warm service's thin client ----------------------------------------------------------------------


@root_only
def test_apply_builds_the_thin_client_and_uninstall_puts_the_scripts_back(tmp_path):
    """install --apply (Options.client): each served command's pip script becomes the compiled
    client, recorded; a second plan finds it in place; --uninstall moves the scripts back, except
    where bin/ holds something else by then."""
    from shim.service import server as service

    prefix = tmp_path / "prefix"
    b = prefix / "bin"
    b.mkdir(parents=True)
    script = "#!/opt/slurm-shim/bin/python3 -I\nprint('python')\n"
    for c in (*service.SERVED, "srun"):
        (b / c).write_text(script)
        (b / c).chmod(0o755)
    ge, p = planned(tmp_path, client=str(prefix))
    [a] = [a for a in p.actions if a.kind == "client"]
    assert a.state == install.CREATE and "squeue" in a.what and a in p.changes
    assert "-DSHIM_FALLBACK=" in a.commands[0] and len(a.commands) == 1 + len(service.SERVED)
    record = tmp_path / "rec" / "install-record.json"
    notes = install.apply(p, ge, str(record), say=lambda _: None)
    assert f"thin client built over {' '.join(service.SERVED)} in {b}" in notes
    for c in service.SERVED:
        assert (b / c).read_bytes()[:4] == b"\x7fELF"
    assert (b / "srun").read_text() == script
    [entry] = [e for e in json.loads(record.read_text())["created"] if e["kind"] == "client"]
    assert sorted(entry["commands"]) == sorted(service.SERVED) and entry["prefix"] == str(prefix)
    _, again = planned(tmp_path, client=str(prefix))
    assert [x.state for x in again.actions if x.kind == "client"] == [install.IN_PLACE]
    # an admin's own squeue since: left (and kept in the record); the others are scripts again
    (b / "squeue").write_bytes(b"\x7fELF other")
    said: list[str] = []
    assert install.uninstall(ge, str(record), say=said.append) == 1
    for c in service.SERVED:
        if c != "squeue":
            assert (b / c).read_text() == script, c
    assert (b / "squeue").read_bytes() == b"\x7fELF other"
    assert any("thin client" in s and "squeue changed since it was built" in s for s in said)
    [left] = [e for e in json.loads(record.read_text())["created"] if e["kind"] == "client"]
    assert list(left["commands"]) == ["squeue"]


def test_without_a_compiler_the_plan_says_the_commands_stay_scripts(tmp_path, monkeypatch):
    import shutil

    from shim.service import server as service

    b = tmp_path / "bin"
    b.mkdir()
    for c in service.SERVED:
        (b / c).write_text("#!/usr/bin/python3 -I\n")
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    action, note = install.client_action(str(tmp_path))
    assert action is None and "no C compiler" in note and "squeue" in note
    assert install.client_action(str(tmp_path / "empty")) == (None, "")
