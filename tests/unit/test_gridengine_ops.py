"""The Grid Engine backend's operations: argv builders, answer parsers, the refusal classifier and
capability probes, on answers recorded from a real SGE 8.1.9 (fixtures/gridengine/sge-8.1.9)."""

from pathlib import Path

import pytest

from shim.gridengine.engine import Outcome, Refused
from shim.gridengine import ops, refusal
from shim.gridengine.capabilities import listed
from shim.gridengine.replay import ReplayBackend

SGE = Path(__file__).resolve().parents[2] / "fixtures" / "gridengine" / "sge-8.1.9"


def recorded_refusals() -> dict[str, tuple[str, int]]:
    """``refusals.txt``: '### as USER: CMD', Grid Engine's answer, '### rc=N'."""
    out, cmd, text = {}, None, []
    for line in (SGE / "refusals.txt").read_text().splitlines():
        if line.startswith("### as "):
            cmd, text = line.split(": ", 1)[1], []
        elif line.startswith("### rc="):
            out[cmd] = ("\n".join(text), int(line[7:]))
        else:
            text.append(line.replace('"JOB"', '"5"').replace(" JOB ", " 5 ").replace('"ARRAY"', '"6"'))
    return out


REFUSALS = recorded_refusals()


@pytest.mark.parametrize("cmd, want", [
    ("qdel JOB", refusal.DENIED), ("qdel ARRAY.2", refusal.DENIED), ("qmod -sj JOB", refusal.DENIED),
    ("qmod -usj JOB", refusal.DENIED), ("qmod -rj JOB", refusal.DENIED), ("qhold JOB", refusal.DENIED),
    ("qrls JOB", refusal.DENIED), ("qalter -N x JOB", refusal.DENIED),
    ("qdel 999999", refusal.GONE), ("qdel ARRAY.7", refusal.GONE), ("qmod -sj 999999", refusal.GONE),
    ("qhold 999999", refusal.GONE), ("qalter -N x 999999", refusal.GONE), ("qmod -rj 999999", refusal.GONE),
])
def test_every_recorded_refusal_is_classified(cmd, want):
    text, rc = REFUSALS[cmd]
    assert rc != 0
    assert refusal.kind(text) == want
    job = 999999 if "999999" in cmd else (6 if "ARRAY" in cmd else 5)
    assert refusal.per_job(text) == {job: want}


def test_the_fixture_holds_every_case():
    assert len(REFUSALS) == 14


def test_denied_wins_over_gone_for_one_job_and_silence_is_nothing():
    text = 'job "7" task "3" does not exist\nbob - you do not have the necessary privileges to delete the job "7"'
    assert refusal.per_job(text) == {7: refusal.DENIED}
    assert refusal.per_job('alice has registered the job 5 for deletion') == {}
    assert refusal.kind("") is None
    assert refusal.kind("error: something new") == refusal.OTHER


def test_operations_build_grid_engines_argv_and_read_the_answers():
    b = ReplayBackend()
    b.add("qdel", ["5", "6.2-3"], stderr=REFUSALS["qdel JOB"][0], rc=1)
    b.add("qmod", ["-sj", "8"], stdout="alice - suspended job 8")
    b.add("qsub", ["-terse", "-h"], stdout="12.1-3:1\n")
    b.add("qconf", ["-sel"], stdout="vm.example.org\nnode2\n")
    out = b.cancel(["5", "6.2-3"])
    assert isinstance(out, Outcome) and not out.ok and out.of(5) == refusal.DENIED and out.of(6) is None
    assert b.suspend(["8"]).kind is None
    assert b.submit(["-terse", "-h"], "#!/bin/sh\n") == 12
    assert b.exec_hosts() == {"vm", "vm.example.org", "node2"}
    assert [c[0] for c in b.calls] == [("qdel", "5", "6.2-3"), ("qmod", "-sj", "8"), ("qsub", "-terse", "-h"),
                                       ("qconf", "-sel")]


def test_a_refused_submission_carries_grid_engines_words():
    b = ReplayBackend()
    b.add("qsub", ["-q", "nope"], stderr="Unable to run job: Job was rejected because job requests unknown queue "
                                         '"nope".\nExiting.\n', rc=1)
    with pytest.raises(Refused) as e:
        b.submit(["-q", "nope"], "")
    assert "unknown queue" in e.value.text and e.value.kind == refusal.OTHER
    b.add("qsub", ["-x"], stdout="Your job is fine\n")
    with pytest.raises(Refused, match="unexpected qsub output"):
        b.submit(["-x"], "")


def test_many_ids_go_in_batches():
    ids = [str(i) for i in range(1, ops.QDEL_BATCH * 2 + 2)]
    from shim.proc import Result

    b = ReplayBackend(default=Result(("qdel",), 0, "", ""))
    b.cancel(ids)
    assert [len(c[0]) - 1 for c in b.calls] == [ops.QDEL_BATCH, ops.QDEL_BATCH, 1]


def test_task_ids_are_runs_of_consecutive_tasks():
    assert ops.task_ids(5, [3, 1, 2, 7, 9, 8]) == ["5.1-3", "5.7-9"]
    assert ops.task_ids(5, [4]) == ["5.4"]
    assert ops.task_ids(5, []) == []


def test_parse_job_id_reads_terse_answers():
    assert ops.parse_job_id("42\n") == 42
    assert ops.parse_job_id("43.1-10:2\n") == 43
    with pytest.raises(ValueError):
        ops.parse_job_id("")


def test_capabilities_are_read_from_the_installed_help_text():
    qsub = (SGE / "qsub-help.txt").read_text()
    qstat = (SGE / "qstat-help.txt").read_text()
    assert listed(qsub, "-binding") and listed(qsub, "-sync")
    assert not listed(qsub, "-par") and not listed(qsub, "-btype")  # OCS 9.1 options, not in SGE 8.1.9
    assert listed(qstat, "-s") and not listed(qstat, "-s", "|f}")  # no retained finished jobs
    ocs_line = "   [-par allocation_rule]                   slots per host (OCS)"
    assert listed(ocs_line, "-par")


def test_capabilities_probe_once_and_a_site_may_pin_them():
    b = ReplayBackend()
    b.add("qsub", ["-help"], stdout=(SGE / "qsub-help.txt").read_text())
    b.add("qstat", ["-help"], stdout=(SGE / "qstat-help.txt").read_text())
    caps = b.capabilities
    assert caps.binding and not caps.par and not caps.retained_finished
    assert caps.binding  # asked again: no second probe
    assert [c[0] for c in b.calls] == [("qsub", "-help"), ("qstat", "-help")]
    from shim.gridengine.capabilities import Capabilities

    assert Capabilities(b, {"par": True}).par is True
    with pytest.raises(AttributeError):
        caps.no_such_feature


def test_signals_map_to_the_three_things_grid_engine_can_do():
    import signal

    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, None):
        assert ops.signal_operation(sig) == ops.CANCEL
    assert ops.signal_operation(signal.SIGSTOP) == ops.signal_operation(signal.SIGTSTP) == ops.SUSPEND
    assert ops.signal_operation(signal.SIGCONT) == ops.RESUME
    assert ops.signal_operation(signal.SIGUSR1) is None and ops.signal_operation(signal.SIGWINCH) is None
    from shim.proc import Result

    b = ReplayBackend(default=Result(("x",), 0, "", ""))
    b.signal(["5"], None), b.signal(["6.1-2"], signal.SIGSTOP), b.signal(["7"], signal.SIGCONT)
    assert [c[0] for c in b.calls] == [("qdel", "5"), ("qmod", "-sj", "6.1-2"), ("qmod", "-usj", "7")]
    with pytest.raises(ValueError):
        b.signal(["5"], signal.SIGUSR1)


def test_a_refused_stop_is_denied_per_job():
    b = ReplayBackend()
    b.add("qmod", ["-sj", "5"], stderr=REFUSALS["qmod -sj JOB"][0], rc=1)
    out = b.signal(["5"], 19)
    assert out.of(5) == refusal.DENIED and out.kind == refusal.DENIED


def test_user_job_ids_read_qstat_u():
    text = ("job-ID  prior   name       user         state submit/start at     queue                          slots ja-task-ID \n"
            "-----------------------------------------------------------------------------------------------------------------\n"
            "     12 0.55500 sleep      alice        r     11/30/2026 09:00:01 debug@vm                           1        \n"
            "     14 0.00000 arr        alice        qw    11/30/2026 09:00:02                                    1 1-3:1\n"
            "     14 0.55500 arr        alice        r     11/30/2026 09:00:02 debug@vm                           1 4\n")
    assert ops.parse_user_job_ids(text) == [12, 14]
    assert ops.parse_user_job_ids("") == []
    b = ReplayBackend()
    b.add("qstat", ["-u", "alice"], stdout=text)
    b.add("qstat", ["-u", "bob"], stderr="error: can't connect", rc=1)
    assert b.user_job_ids("alice") == [12, 14]
    with pytest.raises(Refused):
        b.user_job_ids("bob")


def test_refusals_in_slurms_words():
    assert refusal.slurm_error(refusal.DENIED, REFUSALS["qmod -sj JOB"][0]) == "Access/permission denied"
    assert refusal.slurm_error(refusal.GONE, REFUSALS["qdel 999999"][0]) == "Invalid job id specified"
    assert refusal.slurm_error(refusal.OTHER, "error: a\nerror: commlib error\n") == "error: commlib error"
    assert refusal.slurm_error(None, "", "nothing said") == "nothing said"


def test_the_site_config_names_the_cell_and_the_users_environment_cannot_redirect():
    """Issue 16: a user's SGE_ROOT/SGE_CELL/SGE_QMASTER_PORT left over from another cell never send
    a command there: the site config's cell wins, and ports it does not name are Grid Engine's own."""
    from types import SimpleNamespace as NS

    from shim.gridengine.engine import ge_env

    stale = {"SGE_ROOT": "/opt/other", "SGE_CELL": "x", "SGE_QMASTER_PORT": "7444", "SGE_EXECD_PORT": "7445",
             "HOME": "/home/alice"}
    debian = NS(gridengine=NS(sge_root="/var/lib/gridengine", sge_cell="default", qmaster_port=0, execd_port=0))
    env = ge_env(debian, stale)
    assert (env["SGE_ROOT"], env["SGE_CELL"], env["HOME"]) == ("/var/lib/gridengine", "default", "/home/alice")
    assert "SGE_QMASTER_PORT" not in env and "SGE_EXECD_PORT" not in env
    ocs = NS(gridengine=NS(sge_root="/opt/ocs", sge_cell="default", qmaster_port=7444, execd_port=7445))
    env = ge_env(ocs, {"SGE_QMASTER_PORT": "6444"})
    assert (env["SGE_ROOT"], env["SGE_QMASTER_PORT"], env["SGE_EXECD_PORT"]) == ("/opt/ocs", "7444", "7445")


QSTAT_GT = """<?xml version='1.0'?>
<job_info><queue_info>
<job_list state="running"><JB_job_number>43</JB_job_number><queue_name>debug@vm</queue_name><master>MASTER</master><slots>1</slots></job_list>
<job_list state="running"><JB_job_number>43</JB_job_number><queue_name>debug@vm</queue_name><master>SLAVE</master><slots>1</slots></job_list>
<job_list state="running"><JB_job_number>43</JB_job_number><queue_name>debug@node2</queue_name><master>SLAVE</master><slots>1</slots></job_list>
<job_list state="running"><JB_job_number>44</JB_job_number><queue_name>debug@vm</queue_name><master>MASTER</master><slots>1</slots></job_list>
</queue_info><job_info></job_info></job_info>"""


def test_running_job_hosts():
    """srun's allocation from outside the job: ops.parse_running_hosts (was runtime/steps/allocation.hosts_from_qstat)."""
    # $round_robin with job_is_first_task FALSE: the MASTER line holds no slot
    assert ops.parse_running_hosts(QSTAT_GT, 43, "undefined", 2) == [("vm", 1), ("node2", 1)]
    # job_is_first_task TRUE: every line is a slot
    assert ops.parse_running_hosts(QSTAT_GT, 43, "undefined", 3) == [("vm", 2), ("node2", 1)]
    assert ops.parse_running_hosts(QSTAT_GT, 44, "undefined", 1) == [("vm", 1)]
    assert ops.parse_running_hosts(QSTAT_GT, 45, "undefined", 1) == []
    b = ReplayBackend()
    b.add(*ops.running_tasks(), stdout=QSTAT_GT)
    assert b.running_job_hosts(43, "undefined", 2) == [("vm", 1), ("node2", 1)]


QSTAT_GT_R = """<?xml version='1.0'?>
<job_info><queue_info>
<job_list state="running"><JB_job_number>43</JB_job_number><JB_owner>alice</JB_owner><queue_name>gpu@h1.example</queue_name><hard_request name="gpu">2</hard_request><hard_request name="h_rt">60</hard_request></job_list>
<job_list state="running"><JB_job_number>44</JB_job_number><JB_owner> bob </JB_owner><queue_name>gpu@h2</queue_name><hard_request name="gpu">1</hard_request></job_list>
<job_list state="running"><JB_job_number>x</JB_job_number><JB_owner>eve</JB_owner><queue_name>gpu@h1</queue_name></job_list>
<job_list state="running"><JB_job_number>45</JB_job_number><queue_name>gpu@h1</queue_name><hard_request name="gpu"/></job_list>
</queue_info><job_info></job_info></job_info>"""


def test_running_requests_are_the_hosts_tasks_with_their_hard_requests():
    """The job wrapper's GPU claims: which running jobs on this host hold which resources."""
    assert ops.running_tasks(requests=True) == ("qstat", ["-g", "t", "-s", "r", "-u", "*", "-r", "-xml"])
    assert ops.parse_running_requests(QSTAT_GT_R, "h1") == [
        ("alice", 43, {"gpu": "2", "h_rt": "60"}), ("", 45, {"gpu": "0"})]
    assert ops.parse_running_requests(QSTAT_GT_R, "h2") == [("bob", 44, {"gpu": "1"})]
    assert ops.parse_running_requests("error: not XML", "h1") is None
    b = ReplayBackend()
    b.add(*ops.running_tasks(requests=True), stdout=QSTAT_GT_R)
    assert b.running_requests("h2") == [("bob", 44, {"gpu": "1"})]
    b.add(*ops.running_tasks(requests=True), rc=1, stderr="error: no qmaster")
    assert b.running_requests("h2") is None


def test_a_hosts_complex_values():
    b = ReplayBackend()
    b.add(*ops.exec_host("h1"), stdout="hostname h1\ncomplex_values        exclusive=true, \\\n"
                                        "   gpu=2,gpu=3\nuser_lists NONE\n")
    b.add(*ops.exec_host("h2"), stdout="hostname h2\ncomplex_values NONE\n")
    b.add(*ops.exec_host("h3"), rc=1, stderr="h3 is not an execution host")
    assert b.host_complex_values("h1") == {"exclusive": "true", "gpu": "2"}  # a complex named twice: its first value
    assert b.host_complex_values("h2") == {}
    assert b.host_complex_values("h3") is None


def test_a_site_pins_a_capability_in_its_config(tmp_path, monkeypatch):
    """``[gridengine.capabilities]`` in the site config: what the site pins is believed without a
    probe; what it does not name is still probed. Unknown capability names are config errors."""
    from shim import config, siteconf

    conf = tmp_path / "config.toml"
    conf.write_text('[cluster]\nname = "c"\nstate_dir = "/nonexistent"\n[gridengine]\n'
                    '[gridengine.capabilities]\npar = true\n[partitions.debug]\nqueue = "debug"\ndefault = true\n')
    monkeypatch.setenv("SLURM_SHIM_CONFIG", str(conf))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    siteconf.reset()
    cfg = siteconf.get()

    class Pinned(ReplayBackend):
        pass

    b = Pinned()
    b.cfg = cfg
    b.add("qsub", ["-help"], stdout=(SGE / "qsub-help.txt").read_text())
    assert b.capabilities.par is True and b.calls == []  # pinned: no probe
    assert b.capabilities.binding is True and [c[0] for c in b.calls] == [("qsub", "-help")]
    conf.write_text(conf.read_text().replace("par = true", "parr = true"))
    with pytest.raises(Exception, match="parr"):
        config.load(str(conf))
    siteconf.reset()
