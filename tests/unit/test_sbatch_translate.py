"""sbatch's translation to qsub, on the unit-test site config, with no Grid Engine involved."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, use_site_config
from shim.gridengine import backends
from shim.store import records, state
from shim import siteconf
from shim.gridengine.replay import ReplayBackend
from shim.cli import sbatch
from shim.errors import ShimError

SCRIPT = "#!/bin/bash\n#SBATCH --job-name=fromdirective\n#SBATCH -t 10\necho hi\n"


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    use_site_config(monkeypatch, tmp_path)
    siteconf.reset()
    yield
    siteconf.reset()
    backends.use(None)


def prep(argv, script=SCRIPT, env=None, tmp_path=None):
    return sbatch.prepare(argv, env or {}, stdin=io.StringIO(script), cwd="/srv/x")


def argv_of(argv, script=SCRIPT, env=None):
    _o, sub, _cfg = prep(argv, script, env)
    return sub.argv


def flag(argv, name):
    return argv[argv.index(name) + 1]


def resources(argv):
    return dict(kv.split("=", 1) for kv in flag(argv, "-l").split(",")) if "-l" in argv else {}


def test_default_partition_queue_and_name_from_directive():
    a = argv_of([])
    assert flag(a, "-q") == "debug"
    assert flag(a, "-N") == "fromdirective"
    assert "-pe" not in a


def test_command_line_beats_environment_beats_directive():
    a = argv_of(["-J", "cli"], env={"SBATCH_JOB_NAME": "env"})
    assert flag(a, "-N") == "cli"
    a = argv_of([], env={"SBATCH_JOB_NAME": "env"})
    assert flag(a, "-N") == "env"


def test_tasks_and_cpus_become_slots_in_the_smp_pe():
    a = argv_of(["-n", "2", "-c", "3"])
    assert a[a.index("-pe") + 1:a.index("-pe") + 3] == ["smp", "6"]


def test_several_nodes_use_the_multinode_pe():
    a = argv_of(["-N", "2", "--ntasks-per-node=2"])
    assert a[a.index("-pe") + 1:a.index("-pe") + 3] == ["mpi", "4"]


def test_mem_per_node_is_divided_over_slots():
    a = argv_of(["-n", "4", "--mem=4G"])
    assert resources(a)["mem_free"] == "1024M"


def test_time_limit_gives_a_later_h_rt_backstop():
    a = argv_of(["-t", "1:00:00"])
    assert int(resources(a)["h_rt"]) > 3600


def test_unlimited_time_has_no_h_rt():
    assert "h_rt" not in resources(argv_of(["-t", "UNLIMITED"]))


def test_partition_default_time_applies():
    a = argv_of(["-p", "gpu"], script="#!/bin/sh\ntrue\n")
    assert flag(a, "-q") == "gpu"
    assert int(resources(a)["h_rt"]) >= 3600


def test_invalid_partition_is_slurms_error():
    with pytest.raises(ShimError) as e:
        prep(["-p", "nope"])
    assert e.value.lines == ["sbatch: error: invalid partition specified: nope",
                             "sbatch: error: Batch job submission failed: Invalid partition name specified"]
    assert e.value.code == 1


def test_names_grid_engine_refuses_are_encoded_reversibly():
    from shim.gridengine import names

    a = argv_of(["-J", "1 weird/name:x"])
    assert names.decode(flag(a, "-N")) == "1 weird/name:x"


def test_hold_account_requeue_nice():
    a = argv_of(["-H", "-A", "research", "--requeue", "--nice=10"])
    assert "-h" in a and flag(a, "-A") == "research" and flag(a, "-r") == "y" and flag(a, "-p") == "-10"


def test_nice_is_the_same_rule_as_scontrol_update(monkeypatch):
    """One nice mapping (translate.qsub.nice_priority) for sbatch --nice and scontrol update
    nice=: a higher nice is a lower -p; a negative nice is for operators only. Slurm 22.05's
    job_mgr.c validate_job_create_req refuses it from anyone else with ESLURM_INVALID_NICE
    ("Invalid --nice value"), before any job exists."""
    from shim.operations import submit

    assert flag(argv_of(["--nice=-5"]), "-p") == "5"  # root: an operator
    assert flag(argv_of(["--nice=5000"]), "-p") == "-1023"  # Grid Engine's floor
    monkeypatch.setattr(submit.os, "getuid", lambda: 65534)
    assert flag(argv_of(["--nice=5"]), "-p") == "-5"
    with pytest.raises(ShimError) as e:
        prep(["--nice=-5"])
    assert (e.value.lines, e.value.code) == (["sbatch: error: Batch job submission failed: Invalid --nice value"], 1)


def test_no_shell_sees_the_script_or_arguments():
    wrapper = sbatch.wrapper_script({"x": "$(rm -rf /)`id`'\"\n"}).decode()
    assert "$(rm" not in wrapper and "`id`" not in wrapper


def test_wrap_builds_a_sh_script():
    _o, sub, _ = prep(["--wrap", "echo hi"], script="")
    import base64

    assert base64.b64decode(sub.payload["script"]).decode().startswith("#!/bin/sh\n")
    assert sub.payload["name"] == "wrap"


def test_wrap_with_script_args_is_refused():
    with pytest.raises(ShimError) as e:
        sbatch.prepare(["--wrap=true", "job.sh"], {}, stdin=io.StringIO(""))
    assert e.value.lines == ["sbatch: error: Script arguments not permitted with --wrap option"]


def test_script_without_shebang_is_refused():
    with pytest.raises(ShimError) as e:
        prep([], script="echo hi\n")
    assert e.value.code == 1 and "This does not look like a batch script" in e.value.lines[0]


def test_empty_stdin_script():
    with pytest.raises(ShimError) as e:
        prep([], script="")
    assert e.value.lines == ["sbatch: error: Batch script is empty!"]


def test_submit_records_state_and_prints_slurms_line(capsys, monkeypatch, tmp_path):
    b = ReplayBackend()
    b.add("qsub", argv_of([]), stdout="4242\n")
    backends.use(b)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(SCRIPT.encode())))
    assert sbatch.main([]) == 0
    assert capsys.readouterr().out == "Submitted batch job 4242\n"
    rec = records.Reader(siteconf.get()).submit(4242, None)
    assert rec.name == "fromdirective" and rec.time == 10
    (call_argv, stdin), = b.calls
    assert call_argv[0] == "qsub" and stdin.startswith(b"#!/bin/sh\n")


def test_qsub_failure_is_a_slurm_style_error(monkeypatch):
    b = ReplayBackend()
    b.add("qsub", argv_of([]), rc=1, stdout="", stderr="Unable to run job: denied: something\nExiting.\n")
    backends.use(b)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(SCRIPT.encode())))
    with pytest.raises(ShimError) as e:
        sbatch.main([])
    assert e.value.lines == ["sbatch: error: Batch job submission failed: Unable to run job: denied: something"]


# ---------------------------------------------------------------------------------------------
# what a submission leaves for others to read, and bookkeeping that fails (security F-7, F-8, F-13;
# issue 13 item 4)


def _payload(script: bytes) -> dict:
    import base64
    import json

    body = script.decode().split("<<'__SLURM_SHIM_PAYLOAD__'\n", 1)[1].split("\n__SLURM_SHIM_PAYLOAD__", 1)[0]
    return json.loads(base64.b64decode(body.replace("\n", "")))


class CwdBackend(ReplayBackend):
    """Notes the working directory each Grid Engine command runs in."""

    def run(self, tool, args, *, input=None, timeout=None):
        import os

        self.cwds = getattr(self, "cwds", []) + [os.getcwd()]
        return super().run(tool, args, input=input, timeout=timeout)


def _submit(monkeypatch, argv, env=None, job="4242"):
    b = CwdBackend()
    b.add("qsub", [], stdout=f"{job}\n")
    backends.use(b)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(SCRIPT.encode())))
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    return b


def test_secrets_go_to_a_private_file_not_the_record_or_the_script(capsys, monkeypatch, tmp_path):
    import json
    import os
    import stat

    ef = tmp_path / "exports"
    ef.write_text("DB_PASSWORD=from-export-file-s3cr3t\n")
    ef.chmod(0o600)
    b = _submit(monkeypatch, [], {"MYSECRET": "hunter2-sbatch"})
    before = __import__("time").time()
    assert sbatch.main(["--export=ALL,API_TOKEN=tok-123", f"--export-file={ef}"]) == 0
    assert capsys.readouterr() == ("Submitted batch job 4242\n", "")
    (_argv, script), = b.calls
    assert b"hunter2" not in script and b"tok-123" not in script
    payload = _payload(script)
    assert "environ" not in payload and "tok-123" not in json.dumps(payload) and "s3cr3t" not in json.dumps(payload)
    assert before <= payload["sub"] <= __import__("time").time()
    path = payload["env_file"]
    st = os.lstat(path)
    assert stat.S_IMODE(st.st_mode) == 0o600 and stat.S_IMODE(os.lstat(os.path.dirname(path)).st_mode) == 0o700
    secret = json.loads(open(path).read())
    assert secret["environ"]["MYSECRET"] == "hunter2-sbatch"
    assert secret["export"]["vars"] == {"API_TOKEN": "tok-123"}
    assert secret["export_file"] == {"DB_PASSWORD": "from-export-file-s3cr3t"}
    assert secret["export_raw"] == "ALL,API_TOKEN=tok-123"
    rec = records.Reader(siteconf.get()).submit(4242, None)
    text = json.dumps(rec.to_dict())
    assert "tok-123" not in text and "s3cr3t" not in text and "hunter2" not in text
    assert rec.get("export") == {"all": True, "vars": ["API_TOKEN"]} and rec.get("export_file") == ["DB_PASSWORD"]
    assert rec.get("export_raw") == "ALL,API_TOKEN" and rec.sub == payload["sub"]


def test_without_a_private_file_nothing_is_submitted(capsys, monkeypatch):
    """F-21: the environment, the script and its arguments never go where others can read them:
    without a private file of the user's own, sbatch refuses and Grid Engine is not asked."""
    b = _submit(monkeypatch, [], {"MYSECRET": "hunter2-sbatch"})
    monkeypatch.setattr(state, "write_private", lambda *a: None)
    with pytest.raises(ShimError) as e:
        sbatch.main([])
    assert e.value.code == 1 and len(e.value.lines) == 1 and "hunter2" not in e.value.lines[0]
    assert e.value.lines[0].startswith("sbatch: error: Batch job submission failed: no private directory of your own under ")
    assert capsys.readouterr().out == ""
    assert [c for c in b.calls if c[0][0] == "qsub"] == []


def test_a_record_that_cannot_be_written_never_fails_an_accepted_job(capsys, monkeypatch, tmp_path):
    _submit(monkeypatch, [])
    real = state.write_record
    monkeypatch.setattr(state, "write_record", lambda cfg, kind, *a: kind != "jobs" and real(cfg, kind, *a))
    assert sbatch.main(["--parsable"]) == 0
    out, err = capsys.readouterr()
    assert out == "4242\n"
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sbatch: warning: job 4242 is queued")


def test_qsub_runs_in_slash_and_the_job_keeps_its_directory(capsys, monkeypatch, tmp_path):
    """F-8: ./.sge_request of the submit directory is never read (qsub runs in /); the job
    still starts in the submit directory, or in --chdir's."""
    import os

    sub_dir = tmp_path / "project"
    sub_dir.mkdir()
    (sub_dir / ".sge_request").write_text("-l h_rt=1 -v PYTHONPATH=/evil\n")
    monkeypatch.chdir(sub_dir)
    b = _submit(monkeypatch, [])
    assert sbatch.main([]) == 0
    assert b.cwds == ["/"] and os.getcwd() == str(sub_dir)
    assert _payload(b.calls[0][1])["workdir"] == str(sub_dir)
    b = _submit(monkeypatch, [], job="4243")
    assert sbatch.main(["--chdir=sub"]) == 0
    assert b.cwds == ["/"] and _payload(b.calls[0][1])["workdir"] == str(sub_dir / "sub")


def test_an_older_jobs_events_with_the_same_id_are_forgotten(capsys, monkeypatch):
    import os

    cfg = siteconf.get()
    assert state.record_event(cfg, 4242, None, "end", {"exit": 3, "state": "FAILED"})
    old = time.time() - 60  # the older job's, a minute ago (recent: pruning would not take it)
    os.utime(state.record_file(cfg, "events", "4242.x.end.json"), (old, old))
    _submit(monkeypatch, [])
    assert sbatch.main([]) == 0
    assert records.Reader(cfg).events(4242, None) == {}


def test_an_older_arrays_task_events_are_forgotten_by_name(capsys, monkeypatch):
    import os

    cfg = siteconf.get()
    for task in (5, 7):
        assert state.record_event(cfg, 4242, task, "end", {"exit": 3, "state": "FAILED"})
        os.utime(state.record_file(cfg, "events", f"4242.{task}.end.json"), (time.time() - 60,) * 2)
    assert state.record_event(cfg, 4243, None, "end", {"exit": 1, "state": "FAILED"})
    _submit(monkeypatch, ["--array=5"])
    assert sbatch.main(["--array=5"]) == 0
    # the new array's index 5 no longer meets the old job's end; index 7 (not the new job's) and
    # other jobs' records are left to pruning
    assert set(records.Reader(cfg).events(4242, None)) == {(7, "end")}
    assert set(records.Reader(cfg).events(4243, None)) == {(None, "end")}


def test_the_new_jobs_own_events_are_not_forgotten(capsys, monkeypatch):
    """A job that started (and wrote its events) before sbatch got round to forgetting the old
    job's keeps them."""
    import os

    cfg = siteconf.get()
    assert state.record_event(cfg, 4242, None, "end", {"exit": 3, "state": "FAILED"})
    old = state.record_file(cfg, "events", "4242.x.end.json")
    os.utime(old, (1, 1))
    b = _submit(monkeypatch, [])
    real = b.run

    def run_and_start(tool, args, **kw):
        res = real(tool, args, **kw)
        state.record_event(cfg, 4242, None, "start", {"node": "vm"})  # the job, already running
        return res

    b.run = run_and_start
    assert sbatch.main([]) == 0
    assert set(records.Reader(cfg).events(4242, None)) == {(None, "start")}


def test_site_max_array_size_bounds_arrays_and_dependencies(monkeypatch, tmp_path):
    """cluster.max_array_size is MaxArraySize for --array and for task lists in --dependency."""
    with pytest.raises(ShimError, match="Invalid job array specification"):
        argv_of(["--array=1500"])
    with pytest.raises(ShimError, match="Job dependency problem"):
        argv_of(["--dependency=afterok:7_[1400-1500]"])
    conf = tmp_path / "config.toml"
    conf.write_text(conf.read_text().replace("max_array_size = 1001", "max_array_size = 2001"))
    siteconf.reset()
    assert flag(argv_of(["--array=1500"]), "-t") == "1-1"
    assert flag(argv_of(["--dependency=afterok:7_[1400-1500]"]), "-hold_jid") == "7"
    with pytest.raises(ShimError, match="Invalid job array specification"):
        argv_of(["--array=2001"])


# ---------------------------------------------------------------------------------------------
# --export: one reader, Slurm's (src/common/env.c: env_merge_filter, find_quote_token)


@pytest.mark.parametrize("text, want", [
    (None, {"all": True, "vars": {}}),
    ("ALL", {"all": True, "vars": {}}),
    ("all", {"all": True, "vars": {}}),
    ("NONE", {"all": False, "vars": {}}),
    ("nil", {"all": False, "vars": {}}),
    ("HOME,X=1,UNSET", {"all": False, "vars": {"HOME": "/home/u", "X": "1"}}),  # a NAME that is not set: left out
    ("X=1,all", {"all": True, "vars": {"X": "1"}}),  # ALL anywhere in the list
    ("'X=a,b',Y=2", {"all": False, "vars": {"X": "a,b", "Y": "2"}}),  # a quoted item keeps its comma, loses its quotes
    ("X='a b',Y", {"all": False, "vars": {"X": "'a b'", "Y": "from-env"}}),  # quotes inside an item stay
    ('X="it\'s",Y=2', {"all": False, "vars": {"X": "\"it's\",Y=2"}}),  # ' and " counted apart: ' left open
    ("X=1,,Y=2,", {"all": False, "vars": {"X": "1", "Y": "2"}}),
])
def test_export_is_read_as_slurm_reads_it(text, want):
    from shim.slurm.options import export

    assert export.mode(text, {"HOME": "/home/u", "Y": "from-env"}) == want


def test_export_reaches_the_job_through_the_option_table_text():
    _o, sub, _cfg = prep(["--export='X=a,b',HOME"], env={"HOME": "/h"})
    assert sub.record.export == {"all": False, "vars": {"X": "a,b", "HOME": "/h"}}
    assert sub.record.public().export == {"all": False, "vars": ["HOME", "X"]}


# --- OCS 9.1's -par <per-node>: exact geometry where the Grid Engine offers it (capability "par") ---

def _grid_engine(help_file: Path) -> ReplayBackend:
    b = ReplayBackend()
    b.add("qsub", ["-help"], help_file.read_text())
    backends.use(b)
    return b


OCS_HELP = FIXTURES / "gridengine" / "ocs-9.1.4" / "qsub-help.txt"
SGE_HELP = FIXTURES / "gridengine" / "sge-8.1.9" / "qsub-help.txt"


@pytest.mark.parametrize("argv, per_node", [
    (["-N", "2", "--ntasks-per-node=2"], "2"),
    (["-N", "2", "--ntasks-per-node=2", "-c", "3"], "6"),
    (["-N", "3", "-n", "6"], "2"),
    (["-n", "4", "--ntasks-per-node=2"], "2"),  # the node count follows: 2 nodes of 2
    (["-N", "2-2", "--ntasks-per-node=1"], "1"),
])
def test_ocs_par_pins_the_tasks_on_each_node(argv, per_node):
    b = _grid_engine(OCS_HELP)
    a = argv_of(argv)
    assert a[a.index("-pe") + 1] == "mpi" and flag(a, "-par") == per_node
    assert int(a[a.index("-pe") + 2]) % int(per_node) == 0
    assert "-w" not in a  # more nodes than there are: pending, as Slurm (sbatch_accepted_too_many_nodes)
    assert [k for k, _ in b.calls] == [("qsub", "-help")]  # probed once


@pytest.mark.parametrize("argv", [
    ["-N", "2", "-n", "3"],  # uneven: 2 + 1
    ["-N", "2-4", "--ntasks-per-node=2"],  # a node range: Grid Engine picks the count
    ["-N", "1", "-n", "4"],  # one node: the smp PE ($pe_slots) is exact already
    ["-n", "4"],
])
def test_ocs_par_only_for_an_even_layout_on_a_fixed_node_count(argv):
    _grid_engine(OCS_HELP)
    assert "-par" not in argv_of(argv)


def test_without_the_capability_the_round_robin_pe_stays():
    b = _grid_engine(SGE_HELP)  # SGE 8.1.9 has no -par
    a = argv_of(["-N", "2", "--ntasks-per-node=2"])
    assert "-par" not in a and "-w" not in a and a[a.index("-pe") + 1:a.index("-pe") + 3] == ["mpi", "4"]
    assert [k for k, _ in b.calls] == [("qsub", "-help")]


def test_a_single_node_job_asks_grid_engine_nothing():
    b = _grid_engine(OCS_HELP)
    argv_of(["-n", "4", "-c", "2"])
    argv_of([])
    assert b.calls == []  # the capability is probed only for a multi-node layout
