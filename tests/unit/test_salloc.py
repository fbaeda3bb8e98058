"""salloc without Grid Engine: the allocation job's request and script, the command's environment."""

from __future__ import annotations

import os
import shlex

import pytest

from conftest import FIXTURES, SLURM_REF
from shim.operations import allocation, submit
from shim.gridengine import backends
from shim import siteconf
from shim.store import state
from shim.runtime import steps
from shim.__main__ import dispatch
from shim.gridengine.replay import ReplayBackend
from shim.errors import ShimError
from shim.proc import Result
from shim.cli import salloc
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
    siteconf.reset()
    assert state.make_layout(str(tmp_path / "state")) == []  # as cluster up makes it
    yield
    siteconf.reset()
    backends.use(None)


PE_FALSE = "pe_name mpi\nallocation_rule $round_robin\ncontrol_slaves TRUE\njob_is_first_task FALSE\n"
PE_TRUE = "pe_name smp\nallocation_rule $pe_slots\ncontrol_slaves TRUE\njob_is_first_task TRUE\n"


def test_one_slot_allocation_gets_a_pe_where_qrsh_inherit_can_start_a_task():
    cfg = siteconf.get()
    rb = ReplayBackend()
    rb.add("qconf", ["-sp", "smp"], PE_TRUE)
    rb.add("qconf", ["-sp", "mpi"], PE_FALSE)
    argv = ["-terse", "-q", "debug", "-N", "interactive", "-o", "/dev/null"]
    names = qsub.allocation_pes(cfg, "debug")
    assert names == ["smp", "mpi"]
    assert rb.first_task_pe(names) == "mpi"
    assert qsub.allocation_argv(argv, cfg, "debug", "mpi") == ["-terse", "-q", "debug", "-pe", "mpi", "1", "-N",
                                                               "interactive", "-o", "/dev/null"]
    rb2 = ReplayBackend()
    rb2.add("qconf", ["-sp", "smp"], PE_TRUE)
    rb2.add("qconf", ["-sp", "mpi"], PE_TRUE.replace("smp", "mpi"))
    assert rb2.first_task_pe(names) is None
    assert qsub.allocation_argv(argv, cfg, "debug", None)[3:6] == ["-pe", "smp", "2"]
    with_pe = ["-q", "debug", "-pe", "smp", "4"]
    assert qsub.allocation_argv(with_pe, cfg, "debug", "mpi") == with_pe


def test_allocation_job_is_submitted_from_slash_with_a_first_task_pe(monkeypatch, tmp_path):
    """salloc's job goes through the one submission path: from "/", its PE chosen by Grid Engine's
    answer, the holder as the job's script, and a record without the environment."""
    import base64
    import json

    cwds = []

    class Rec(ReplayBackend):
        def run(self, tool, args, *, input=None, timeout=None):
            cwds.append((tool, os.getcwd()))
            return super().run(tool, args, input=input, timeout=timeout)

    rb = Rec()
    rb.add("qconf", ["-sp", "smp"], PE_TRUE)
    rb.add("qconf", ["-sp", "mpi"], PE_FALSE)
    rb.add("qsub", [], "77\n")
    backends.use(rb)
    monkeypatch.chdir(tmp_path)
    cfg = siteconf.get()
    t = salloc.table()
    cli, _ = getopt(t, ["-J", "al"])
    o = sources.collect(t, ["-J", "al"], environ={}, cli=cli)
    job, rec = submit.allocate(o, {"MYSECRET": "hunter2"}, cfg, allocation.holder_script(cfg.cluster.state_dir))
    assert job == 77 and ("qsub", "/") in cwds and os.getcwd() == str(tmp_path)
    (key, script), = [c for c in rb.calls if c[0][0] == "qsub"]
    assert key[key.index("-pe") + 1:key.index("-pe") + 3] == ("mpi", "1")
    assert b"hunter2" not in script
    stored = state.read_json(state.record_file(str(tmp_path / "state"), "jobs", "77.json"), os.getuid())
    assert stored["name"] == "al" and stored["interactive"] is True and stored["command"] == "salloc"
    assert "env_file" not in stored and "script" not in stored and "hunter2" not in json.dumps(stored)
    assert base64.b64decode(rec.script).startswith(b"#!/bin/sh\n")


def test_holder_script_runs_the_holder_with_salloc_whereabouts(tmp_path):
    text = allocation.holder_script(str(tmp_path / "st ate")).decode()
    assert text.startswith("#!/bin/sh\n")
    words = shlex.split(text.splitlines()[-1])
    assert words[0] == "exec" and words[2] == "-I" and "hold_main" in words[4]
    assert words[5] == str(tmp_path / "st ate") and words[6] == steps.short_host() and words[7].isdigit()


def test_command_environment_is_slurms_salloc_set():
    text = (SLURM_REF / "salloc_env.txt").read_text()
    body = text.split("# --- stdout", 1)[1].split("\n", 1)[1].split("# --- stderr", 1)[0]
    want = {k: v for k, _, v in (ln.partition("=") for ln in body.splitlines()) if k.startswith("SLURM_")}
    job_env = dict(want, SLURM_MEM_PER_CPU="100", SLURM_CPUS_ON_NODE="1", SLURM_TASK_PID="1", SLURM_PROCID="0",
                   SLURMD_NODENAME="vm", SLURM_GTIDS="0")  # what the allocation's own batch step sees
    t = salloc.table()
    cli, _ = getopt(t, ["-n1"])
    o = sources.collect(t, ["-n1"], environ={}, cli=cli)
    env = salloc.command_env({"HOME": "/root"}, {"env": job_env}, o)
    got = {k: v for k, v in env.items() if k.startswith("SLURM_")}
    config = {"SLURM_CONF", "SLURM_JOB_ACCOUNT"}
    assert {k: v for k, v in got.items() if k not in config} == {k: v for k, v in want.items() if k not in config}
    cli, _ = getopt(t, ["--mem=200"])
    o = sources.collect(t, ["--mem=200"], environ={}, cli=cli)
    env = salloc.command_env({}, {"env": dict(job_env, SLURM_MEM_PER_NODE="200")}, o)
    assert env["SLURM_MEM_PER_NODE"] == "200"


def test_submission_errors_in_slurms_words():
    e = submit.refusal("salloc", "Job submit/allocate failed", "Unable to run job: error: no suitable queues.\nExiting.\n", {"gpus": True})
    assert e.lines == ["salloc: error: Job submit/allocate failed: Requested node configuration is not available"]
    e = submit.refusal("salloc", "Job submit/allocate failed", "error: no suitable queues\n", {"mem": True})
    assert e.lines[0] == "salloc: error: Memory specification can not be satisfied"


def test_invalid_partition(capsys):
    """salloc's lead-in for a refused request is "Job submit/allocate failed" (salloc.c main; "Unable
    to allocate resources" only for -I's timeouts and busy nodes)."""
    assert dispatch("salloc", ["-p", "nope", "true"]) == 1
    assert capsys.readouterr().err == ("salloc: error: invalid partition specified: nope\n"
                                       "salloc: error: Job submit/allocate failed: Invalid partition name specified\n")


def test_allocation_release_file(tmp_path):
    """salloc releases through a file of the user's private steps/ (F-4: nobody else can plant one)."""
    cfg = siteconf.get()
    allocation.release(cfg, 77, 5)
    rel = tmp_path / "state" / "users" / str(os.getuid()) / "steps" / "77.release"
    assert state.read_json(str(rel), os.getuid()) == {"rc": 5}
    assert rel.stat().st_mode & 0o777 == 0o600 and rel.parent.stat().st_mode & 0o777 == 0o700


def test_environment_goes_in_a_private_file(tmp_path):
    """F-7c: salloc's environment is not in the job script Grid Engine spools (world-readable)."""
    cfg = siteconf.get()
    got = submit.env_carrier(cfg, {"MYSECRET": "hunter2"})
    assert set(got) == {"env_file"}
    assert state.read_json(got["env_file"], os.getuid()) == {"environ": {"MYSECRET": "hunter2"}}
    assert os.stat(got["env_file"]).st_mode & 0o777 == 0o600


def test_the_wait_says_slurms_words_through_the_callback(tmp_path, monkeypatch):
    """allocation.wait_granted: the holder's record (newer than the submission) is the grant; -I's
    time running out cancels the job with Slurm's busy error; the env file goes either way."""
    import time

    cfg = siteconf.get()
    sdir = cfg.cluster.state_dir
    rb = ReplayBackend(default=Result(("x",), 0, "", ""))
    backends.use(rb)
    said = []
    env_file = tmp_path / "env.json"
    env_file.write_text("{}")
    now = time.time()
    assert state.write_allocation(sdir, "78", {"hosts": [["vm", 1]], "env": {}, "start": now})
    got = allocation.wait_granted(78, cfg, None, said.append, now, str(env_file))
    assert got["hosts"] == [("vm", 1)]
    assert said == [] and not env_file.exists()
    assert state.write_allocation(sdir, "79", {"hosts": [["vm", 1]], "env": {}, "start": now - allocation.STALE - 5})
    with pytest.raises(ShimError) as e:  # another job's record (a reused id) is no grant
        allocation.wait_granted(79, cfg, 0, said.append, now)
    assert e.value.lines == ["salloc: error: Unable to allocate resources: Requested nodes are busy"]
    assert [c[0] for c in rb.calls if c[0][0] == "qdel"] == [("qdel", "79")] and said == []


def test_the_watch_says_the_allocation_was_revoked(monkeypatch):
    """The allocation's record gone under the command: Slurm's notice, and --kill-command's signal."""
    import threading

    cfg = siteconf.get()
    said, killed = [], []
    monkeypatch.setattr(steps, "signal_tree", lambda pid, sig: killed.append((pid, sig)))

    class Child:
        pid = 4242

        def poll(self):
            return None

    stop = threading.Event()
    allocation.watch(cfg, 80, Child(), 15, stop, said.append)
    assert said == ["Job allocation 80 has been revoked."] and killed == [(4242, 15)]
