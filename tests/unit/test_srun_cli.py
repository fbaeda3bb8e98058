"""srun's command line, on the unit-test site config, with no Grid Engine involved: Slurm's errors
and exit codes, options as a step request, the qrsh variant of sbatch's translation."""

from __future__ import annotations

import os
import shlex

import pytest

from conftest import FIXTURES
from shim.gridengine import backends
from shim import proc, siteconf
from shim.store import state
from shim.operations import submit
from shim.runtime import steps
from shim.__main__ import dispatch
from shim.gridengine.replay import ReplayBackend
from shim.cli import common, srun
from shim.slurm.options import table
from shim.slurm.request import SubmitRecord
from shim.errors import ShimError
from shim.slurm.options import sources
from shim.slurm.options.getopt import getopt
from shim.gridengine.translate import qsub


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    text = (FIXTURES / "site" / "config.toml").read_text()
    conf = tmp_path / "config.toml"
    conf.write_text(text.replace("/tmp/slurm-shim-unit-state", str(tmp_path / "state")))
    monkeypatch.setenv("SLURM_SHIM_CONFIG", str(conf))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for k in ("SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_JOB_NUM_NODES", "SLURM_CPUS_PER_TASK"):
        monkeypatch.delenv(k, raising=False)
    siteconf.reset()
    assert state.make_layout(str(tmp_path / "state")) == []  # as cluster up makes it
    yield
    siteconf.reset()
    backends.use(None)


def opts(argv, environ=None):
    t = srun.table()
    cli, positional = getopt(t, argv)
    return sources.collect(t, argv, environ=environ or {}, cli=cli), positional, t


def req(argv, environ=None):
    o, positional, _t = opts(argv, environ)
    return srun.request(o, positional, environ or {})


def test_no_command_is_fatal(capsys):
    assert dispatch("srun", []) == 1
    assert capsys.readouterr().err == "srun: fatal: No command given to execute.\n"


def test_unknown_option(capsys):
    assert dispatch("srun", ["--bogus", "hostname"]) == 255
    assert capsys.readouterr().err == "srun: unrecognized option '--bogus'\nTry \"srun --help\" for more information\n"


def test_invalid_partition(capsys):
    assert dispatch("srun", ["-p", "nope", "hostname"]) == 1
    assert capsys.readouterr().err == ("srun: error: invalid partition specified: nope\n"
                                       "srun: error: Unable to allocate resources: Invalid partition name specified\n")


def test_bad_values_fail_as_slurm(capsys):
    assert dispatch("srun", ["-n", "0", "hostname"]) == 1
    assert "Invalid numeric value" in capsys.readouterr().err


def test_help_and_version(capsys):
    assert dispatch("srun", ["--help"]) == 0
    assert "--label" in capsys.readouterr().out
    assert dispatch("srun", ["--version"]) == 0
    assert "22.05" in capsys.readouterr().out


def test_options_become_a_step_request():
    r = req(["-n2", "-c3", "-l", "-o", "out-%t", "-e", "err", "-i", "none", "-K", "-W", "5", "-t", "2",
             "--open-mode=append", "-D", "/tmp", "-N1", "--export=NONE,FOO=1", "prog", "a b"])
    assert r.argv == ["prog", "a b"] and r.ntasks == 2 and r.cpus_per_task == 3 and r.cpus_per_task_set
    assert r.label and r.output == "out-%t" and r.error == "err" and r.input == "none"
    assert r.kill_on_bad_exit and r.wait == 5 and r.time == 2 and r.append and r.chdir == "/tmp"
    assert r.nodes == 1 and r.export == {"all": False, "vars": {"FOO": "1"}} and r.name == "prog"


def test_inside_a_job_srun_inherits_the_jobs_geometry():
    env = {"SLURM_JOB_ID": "5", "SLURM_NTASKS": "4", "SLURM_CPUS_PER_TASK": "2", "SLURM_JOB_NUM_NODES": "1",
           "SLURM_JOB_NAME": "batchname"}
    o, positional, _t = opts(["hostname"], env)
    r = srun.request(o, positional, env)
    assert o.jobid == 5 and r.ntasks == 4 and r.cpus_per_task == 2 and r.nodes == 1
    assert r.name == "hostname"  # the step's name; SLURM_JOB_NAME is the job's
    r = req(["-K0", "x"])
    assert not r.kill_on_bad_exit


def test_fates_only_for_the_command_line():
    o, _p, t = opts(["--cpu-bind=cores", "x"])
    assert common.fates(o, t, "srun", srun.CLI_ONLY) == ["srun: warning: --cpu-bind has no effect on Grid Engine "
                                f"({table.BIND_TASKS})"]
    o, _p, t = opts(["x"], {"SLURM_CPU_BIND": "cores", "SLURM_DISTRIBUTION": "cyclic"})
    assert common.fates(o, t, "srun", srun.CLI_ONLY) == []
    o, _p, t = opts(["--x11", "x"])
    with pytest.raises(ShimError, match="--x11 is not supported"):
        common.fates(o, t, "srun", srun.CLI_ONLY)


def test_qrsh_flags_keep_the_resource_translation():
    argv = ["-terse", "-q", "debug", "-N", "job", "-pe", "smp", "4", "-l", "mem_free=100M,h_rt=120", "-w", "e",
            "-hold_jid", "7", "-h", "-A", "acct", "-p", "-10", "-o", "/dev/null", "-j", "y", "-wd", "/tmp",
            "-S", "/bin/sh", "-notify", "-r", "y", "-a", "202601010000.00"]
    assert qsub.qrsh_flags(argv) == ["-q", "debug", "-N", "job", "-pe", "smp", "4", "-l", "mem_free=100M,h_rt=120",
                                     "-hold_jid", "7", "-h", "-A", "acct", "-p", "-10", "-notify", "-wd", "/"]


def test_unsatisfiable_requests_in_slurms_words():
    e = submit.refusal("srun", "Unable to allocate resources", "verification: no suitable queues\n", {"gpus": True})
    assert e.lines == ["srun: error: Unable to allocate resources: Requested node configuration is not available"]
    e = submit.refusal("srun", "Unable to allocate resources", "verification: no suitable queues\n", {"mem": True})
    assert e.lines[0] == "srun: error: Memory specification can not be satisfied"
    e = submit.refusal("srun", "Unable to allocate resources", "verification: no suitable queues\n", {"licenses": True})
    assert e.lines == ["srun: error: Unable to allocate resources: Invalid license specification"]


def test_new_job_runs_qrsh_with_the_translation(monkeypatch, tmp_path):
    """Outside an allocation: one qrsh -now no with sbatch's resource flags, the step launcher's
    payload quoted word by word, and the exit code srun gets back through the state directory."""
    rb = ReplayBackend(default=steps_result())
    backends.use(rb)
    started = {}

    class FakeProc:
        def __init__(self, argv, **kw):
            started["argv"] = argv
            words = shlex.split(" ".join(argv[argv.index("-pty") + 2:]))
            started["words"] = words
            payload = steps.read_payload(words[4], words[5])  # what job_main does on the far side
            started["payload"] = payload
            state.write_token(payload["state_dir"], payload["token"], {"job_id": 5, "rc": 3})

        def wait(self):
            return 0

        def poll(self):
            return 0

    monkeypatch.setattr(proc, "popen", FakeProc)
    assert dispatch("srun", ["-n2", "-c2", "--mem=100", "-J", "named", "echo", "a b"]) == 3
    argv = started["argv"]
    assert argv[:1] == ["qrsh"] and "-now" in argv and argv[argv.index("-now") + 1] == "no"
    assert argv[argv.index("-pe") + 1:argv.index("-pe") + 3] == ["smp", "4"]
    assert argv[argv.index("-pty") + 1] == "n"
    p = started["payload"]
    assert p["req"]["argv"] == ["echo", "a b"] and p["req"]["ntasks"] == 2 and p["record"]["name"] == "named"
    # job_main reads both typed: the step request exactly as srun made it, the submit record as a
    # SubmitRecord that is key for key the record srun wrote (what job_main records for the job)
    made = req(["-n2", "-c2", "--mem=100", "-J", "named", "echo", "a b"])
    assert steps.StepRequest.from_json(p["req"]) == made.replace(submit_line="srun -n2 -c2 --mem=100 -J named echo")
    rec = SubmitRecord.from_dict(p["record"])
    assert rec.to_dict() == p["record"] and (rec.name, rec.ntasks, rec.cpus_per_task) == ("named", 2, 2)
    assert any(c[0][:3] == ("qrsh", "-w", "v") for c in rb.calls)  # --mem: checked before queueing
    assert "environ" in p and not any("PATH" in w for w in started["words"])  # F-7b: not on argv
    assert list((tmp_path / "state" / "users" / str(os.getuid()) / "srun").iterdir()) == []  # all removed


def qrsh_that_never_starts(monkeypatch) -> dict:
    """srun's qrsh replaced by a process that exits 1 at once (Grid Engine could not start the
    job); the returned dict gets the argv it was given ("argv")."""
    seen = {}

    class FakeProc:
        def __init__(self, argv, **kw):
            seen["argv"] = argv

        def wait(self):
            return 1

        def poll(self):
            return 1

    monkeypatch.setattr(proc, "popen", FakeProc)
    return seen


def test_new_job_payload_file_is_removed_when_the_job_never_started(monkeypatch, tmp_path):
    backends.use(ReplayBackend(default=steps_result()))
    qrsh_that_never_starts(monkeypatch)
    assert dispatch("srun", ["true"]) == 1
    assert list((tmp_path / "state" / "users" / str(os.getuid()) / "srun").iterdir()) == []


def steps_result():
    from shim.proc import Result

    return Result(("x",), 0, "", "")


@pytest.mark.parametrize("pty", ["--pty", "--pty="])
def test_pty_and_immediate(monkeypatch, pty):
    """'--pty=' is '--pty': qrsh -pty y (23.02's '--pty=0' with a terminal on stdin: test_srun_pty_fd)."""
    backends.use(ReplayBackend(default=steps_result()))
    seen = qrsh_that_never_starts(monkeypatch)
    with pytest.raises(ShimError, match="Requested nodes are busy"):
        srun.main([pty, "-I", "bash"])
    argv = seen["argv"]
    assert argv[argv.index("-pty") + 1] == "y" and argv[argv.index("-now") + 1] == "yes"


@pytest.mark.parametrize("pty", ["--pty", "--pty="])
def test_pty_spellings_make_one_request(pty):
    """Every spelling newer releases take means the terminal, unbuffered (Slurm: --pty implies -u)."""
    o = sources.collect(srun.table(), [pty, "bash"], environ={})
    req = srun.request(o, ["bash"], {})
    assert req.pty is True and req.unbuffered is True
    plain = srun.request(sources.collect(srun.table(), ["bash"], environ={}), ["bash"], {})
    assert plain.pty is False and plain.unbuffered is False


@pytest.mark.parametrize("word", ["--pty=bash", "--pty=yes", "--pt=x", "--pty= 1"])
def test_pty_with_a_value_no_version_takes_is_22_05s_getopt_error(word, capsys):
    """22.05's --pty is no_argument (glibc: "doesn't allow an argument", exit 255, before anything
    runs); 23.02+ take only a descriptor (a value starting with a digit). Before, '--pty=bash' was
    accepted as --pty."""
    with pytest.raises(ShimError) as e:
        srun.main([word, "true"])
    assert e.value.lines == ["srun: option '--pty' doesn't allow an argument",
                             'Try "srun --help" for more information']
    assert e.value.code == 255


def test_jobid_is_slurms_parse_int(capsys, monkeypatch):
    """srun --jobid (and SLURM_JOB_ID) is parse_int("--jobid", arg, true) in Slurm 22.05
    (slurm_opt.c arg_set_jobid): a whole number >= 1; 12_3, 12.0, abc and 0 are refused before
    anything runs (the shim took the number before '_', '.' or '+')."""
    from shim.slurm.options.values import parse_int

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    for bad in ("12_3", "12.0", "12+1", "abc", "0"):
        with pytest.raises(ShimError) as e:
            srun.main([f"--jobid={bad}", "true"])
        assert (e.value.code, e.value.lines) == (1, [f'srun: error: Invalid numeric value "{bad}" for --jobid.'])
        monkeypatch.setenv("SLURM_JOB_ID", bad)
        with pytest.raises(ShimError) as e:
            srun.main(["true"])
        assert e.value.lines == [f'srun: error: Invalid numeric value "{bad}" for --jobid.']
        monkeypatch.delenv("SLURM_JOB_ID")
    assert parse_int(" 12", "srun", "--jobid", True) == 12


def test_the_interactive_operations_argv():
    """qrsh's flags for a new job are the backend's (ops.interactive): the translation, -now, -pty,
    then the command's words, in that order; either flag left out when not said."""
    from shim.gridengine import ops

    assert ops.interactive(["-q", "debug"], now=False, pty=True, command=["a", "'b c'"]) == \
        ("qrsh", ["-q", "debug", "-now", "no", "-pty", "y", "a", "'b c'"])
    assert ops.interactive(["-q", "debug"], now=True, pty=False) == ("qrsh", ["-q", "debug", "-now", "yes", "-pty", "n"])
    assert ops.interactive(["-inherit", "vm"]) == ("qrsh", ["-inherit", "vm"])


@pytest.mark.parametrize("reported, sig", [(7, "SIGTERM"), (None, "SIGHUP"), (7, "SIGINT")])
def test_the_interactive_operation_ends_the_job_on_a_signal(monkeypatch, reported, sig):
    """SIGTERM/SIGHUP while the job runs: qdel once the job reported its id, else SIGINT to qrsh
    (which deletes its pending job); SIGINT is qrsh's own and only noted. The status says which came."""
    import signal

    rb = ReplayBackend(default=steps_result())
    sent = []

    class FakeProc:
        def __init__(self, argv, env=None, **kw):
            sent.append(("env", "JOB_ID" in env))

        def wait(self):
            os.kill(os.getpid(), getattr(signal, sig))
            return 130

        def poll(self):
            return None

        def send_signal(self, s):
            sent.append(s)

    monkeypatch.setattr(proc, "popen", FakeProc)
    monkeypatch.setenv("JOB_ID", "12")
    before = signal.getsignal(signal.SIGTERM)
    assert rb.interactive(["-q", "debug"], now=False, pty=False, command=["x"], started=lambda: reported) == \
        (130, getattr(signal, sig))
    assert signal.getsignal(signal.SIGTERM) is before
    qdel = [c[0] for c in rb.calls if c[0][0] == "qdel"]
    assert sent.pop(0) == ("env", False)  # a job of its own, not a task of the job around srun
    if sig == "SIGINT":
        assert qdel == [] and sent == []
    elif reported:
        assert qdel == [("qdel", "7")] and sent == []
    else:
        assert qdel == [] and sent == [signal.SIGINT]


def test_a_step_that_lost_the_jobs_variables_rebuilds_them_from_the_typed_record():
    """srun inside a job whose environment was stripped: the job's SLURM_* variables come from its
    submit record as srun read it (records.Submitted, not rebuilt into a dict), the same as a dict
    of that record would give."""
    from shim.store import records

    rec = records.Submitted({"name": "batch", "partition": "debug", "ntasks": 2, "ntasks_set": True,
                             "cpus_per_task": 1, "cluster": "cluster", "array": [3, 5], "time": "bogus"})
    alloc = steps.Allocation(9, [("vm", 2)], task=5, ge_task="2", record=rec)
    got = srun.job_variables(alloc, None)
    assert (got["SLURM_JOB_NAME"], got["SLURM_JOB_PARTITION"], got["SLURM_NTASKS"], got["SLURM_ARRAY_TASK_ID"],
            got["SLURM_ARRAY_JOB_ID"]) == ("batch", "debug", "2", "5", "9")
    assert "ENVIRONMENT" not in got and "SLURM_TASK_PID" not in got
    as_dict = steps.Allocation(9, [("vm", 2)], task=5, ge_task="2", record=rec.to_dict())  # type: ignore[arg-type]
    assert srun.job_variables(as_dict, None) == got


def test_a_steps_submit_line_is_sruns_words_and_the_commands_name(monkeypatch):
    """The step's SubmitLine (sacct's step rows): srun's options and the command's name, not the
    command's arguments (they may be secret; sbatch's line leaves out the script's too)."""
    seen = {}

    def in_allocation(o, req, environ, cfg, job_id):
        seen["req"], seen["job"] = req, job_id
        return 0

    monkeypatch.setattr(srun, "in_allocation", in_allocation)
    assert srun.main(["--jobid", "77", "-n", "2", "-l", "python3", "-c", "print('token=s3cret')"]) == 0
    assert seen["job"] == 77
    assert seen["req"].submit_line == "srun --jobid 77 -n 2 -l python3"
    assert seen["req"].argv == ["python3", "-c", "print('token=s3cret')"]
