"""sbatch's translation to qsub, on the unit-test site config, with no Grid Engine involved."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from conftest import FIXTURES, use_site_config
from shim import backends, siteconf, state
from shim.backends.replay import ReplayBackend
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
    from shim import names

    a = argv_of(["-J", "1 weird/name:x"])
    assert names.decode(flag(a, "-N")) == "1 weird/name:x"


def test_hold_account_requeue_nice():
    a = argv_of(["-H", "-A", "research", "--requeue", "--nice=10"])
    assert "-h" in a and flag(a, "-A") == "research" and flag(a, "-r") == "y" and flag(a, "-p") == "-10"


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
    rec = state.load_submit(siteconf.get(), 4242)
    assert rec["name"] == "fromdirective" and rec["time"] == 10
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
