"""srun's step launcher (shim.steps) without Grid Engine: layout, environments against the real
Slurm captures, file name patterns, srun's messages and exit codes, step ids, allocation discovery."""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys
import threading

import pytest

from conftest import SLURM_REF, wait_until
from shim.slurm.request import SubmitRecord
from shim.store import records, state
from shim.gridengine.engine import GridEngine
from shim.runtime import steps
from shim.runtime.steps import run as run_mod

VOLATILE = {"SLURM_TASK_PID", "SLURM_SRUN_COMM_PORT", "SLURM_STEP_LAUNCHER_PORT", "SHLVL", "_"}


def ref_env(name: str) -> dict[str, str]:
    text = (SLURM_REF / name).read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def case_stdout_env(name: str) -> dict[str, str]:
    text = (SLURM_REF / f"{name}.txt").read_text()
    body = text.split("# --- stdout", 1)[1].split("\n", 1)[1].split("# --- stderr", 1)[0]
    return dict(line.split("=", 1) for line in body.splitlines() if "=" in line)


# --- layout ----------------------------------------------------------------------------------


def test_layout_one_host_all_tasks():
    assert steps.layout([("vm", 2)], 2, 1, 1) == [("vm", 2, [0, 1])]


def test_layout_block_spreads_counts_round_robin_and_numbers_by_node():
    plan = steps.layout([("a", 8), ("b", 8)], 4, 1, 2)
    assert plan == [("a", 8, [0, 1]), ("b", 8, [2, 3])]
    plan = steps.layout([("a", 8), ("b", 8)], 5, 1, 2)
    assert [t for _, _, t in plan] == [[0, 1, 2], [3, 4]]


def test_layout_respects_each_hosts_cpus():
    plan = steps.layout([("a", 3), ("b", 1)], 4, 1, 2)
    assert plan == [("a", 3, [0, 1, 2]), ("b", 1, [3])]
    plan = steps.layout([("a", 4), ("b", 4)], 2, 2, 2)
    assert [t for _, _, t in plan] == [[0], [1]]


def test_layout_ntasks_per_node_and_relative():
    assert [t for _, _, t in steps.layout([("a", 8), ("b", 8)], 4, 1, 2, ntasks_per_node=2)] == [[0, 1], [2, 3]]
    assert steps.layout([("a", 2), ("b", 2)], 1, 1, 1, relative=1) == [("b", 2, [0])]


def test_layout_refuses_more_cpus_than_the_allocation():
    with pytest.raises(steps.StepError, match="More processors requested than permitted"):
        steps.layout([("vm", 2)], 5, 1, 1)
    with pytest.raises(steps.StepError, match="More processors requested than permitted"):
        steps.layout([("vm", 2)], 2, 2, 1)
    with pytest.raises(steps.StepError, match="Requested node configuration is not available"):
        steps.layout([("vm", 2)], 2, 1, 2)


def test_plan_defaults_follow_the_allocation():
    alloc = steps.Allocation(5, [("a", 2), ("b", 2)])
    assert [t for _, _, t in steps.plan_step(steps.StepRequest(), alloc)] == [[0], [1]]  # one task per node
    assert [t for _, _, t in steps.plan_step(steps.StepRequest(ntasks=3), alloc)] == [[0, 1], [2]]
    assert [t for _, _, t in steps.plan_step(steps.StepRequest(ntasks=1, nodes=2), alloc)] == [[0]]  # nnodes <= ntasks
    assert [t for _, _, t in steps.plan_step(steps.StepRequest(ntasks_per_node=2), alloc)] == [[0, 1], [2, 3]]


def test_ranges():
    assert steps.ranges([0]) == "0"
    assert steps.ranges([1, 0]) == "0-1"
    assert steps.ranges([0, 1, 3, 5, 6, 7]) == "0-1,3,5-7"


# --- messages and exit codes ------------------------------------------------------------------


def test_summary_lines_as_slurm_prints_them():
    assert steps.summary_lines("vm", {0: (3, 0)}) == ["srun: error: vm: task 0: Exited with exit code 3"]
    assert steps.summary_lines("vm", {0: (1, 0), 1: (1, 0)}) == ["srun: error: vm: tasks 0-1: Exited with exit code 1"]
    assert steps.summary_lines("vm", {0: (0, 0), 1: (1, 0)}) == ["srun: error: vm: task 1: Exited with exit code 1"]
    assert steps.summary_lines("vm", {0: (0, 9)}) == ["srun: error: vm: task 0: Killed"]
    assert steps.summary_lines("vm", {0: (0, 15), 1: (0, 15)}) == ["srun: error: vm: tasks 0-1: Terminated"]
    assert steps.summary_lines("vm", {0: (0, 15)}, signals=False) == []
    assert steps.summary_lines("vm", {0: (0, 0)}) == []


def test_global_rc_signals_outweigh_exit_codes():
    assert steps.global_rc([]) == 0
    assert steps.global_rc([(0, 0), (3, 0), (1, 0)]) == 3
    assert steps.global_rc([(0, 9)]) == 137
    assert steps.global_rc([(200, 0), (0, 15)]) == 143
    assert steps.global_rc([(0, 15), (0, 9)]) == 143
    assert steps.from_rc(137) == (0, 9) and steps.from_rc(3) == (3, 0)


# --- file name patterns -----------------------------------------------------------------------


def test_expand_io_patterns():
    vals = {"j": 42, "s": 3, "x": "job", "u": "alice"}
    assert steps.expand_io("out-%j-%t.txt", vals, tid=1) == "out-42-1.txt"
    assert steps.expand_io("%J.%s.%n.%N", vals, node=2, host="vm") == "42.3.3.2.vm"
    assert steps.expand_io("%A_%a_%3t", vals, tid=7) == f"42_{steps.NO_VAL}_007"
    assert steps.expand_io("%A_%a", dict(vals, A=40, a=2)) == "40_2"
    assert steps.expand_io("%x-%u-%%-%q-%", vals) == "job-alice-%-%q-%"


def test_per_task_patterns_and_io_modes():
    assert steps.varies_per_task("o-%t") and steps.varies_per_task("o-%2n") and steps.varies_per_task("%N")
    assert not steps.varies_per_task("o-%j.%s") and not steps.varies_per_task("100%%t")
    assert steps.io_mode(None) == ("inherit", None)
    assert steps.io_mode("none") == ("none", None)
    assert steps.io_mode("1") == ("task", 1)
    assert steps.io_mode("f-%t") == ("file", "f-%t")


# --- environments, against the real Slurm captures --------------------------------------------


def _task_env_for(base: dict[str, str], plan, step_id: int, tid: int, *, cpt=None, in_alloc=True, gpu=None):
    common = steps.step_env(base, job_id=int(base["SLURM_JOB_ID"]), step_id=step_id, plan=plan, cpus_per_task=cpt,
                            in_allocation=in_alloc, port=41051, address="127.0.0.1", gpu_ids=gpu)
    for node, (host, slots, tids) in enumerate(plan):
        if tid in tids:
            henv = steps.host_env(common, host, node, slots, tids)
            return steps.task_env(henv, tid, tids.index(tid))
    raise AssertionError(tid)


@pytest.mark.parametrize("ref,step_id,ntasks,tid,cpt", [
    ("env-srun-in-sbatch-step0.task0.txt", 0, 2, 0, None),
    ("env-srun-in-sbatch-step0.task1.txt", 0, 2, 1, None),
    ("env-srun-in-sbatch-step1_c2.task0.txt", 1, 1, 0, 2),
    ("env-srun-in-sbatch-step_gpu.task0.txt", 3, 1, 0, None),
])
def test_step_environment_equals_slurms(ref, step_id, ntasks, tid, cpt):
    batch = ref_env("env-srun-in-sbatch-batch.txt")
    plan = steps.layout([("vm", 2)], ntasks, cpt or 1, 1)
    got = _task_env_for(batch, plan, step_id, tid, cpt=cpt)
    want = ref_env(ref)
    keys = (set(got) | set(want)) - VOLATILE
    assert {k: got.get(k) for k in keys} == {k: want.get(k) for k in keys}


def test_new_job_environment_equals_standalone_sruns():
    """srun env (a job srun makes): the reference's environment, but for Slurm's configuration."""
    want = case_stdout_env("srun_env_single")
    environ = {k: want[k] for k in ("HOME", "LANG", "LOGNAME", "MYVAR", "PATH", "PWD", "SHELL", "SHLVL", "USER")}
    record = {"name": "env", "partition": "debug", "submit_dir": "/srv/sref", "submit_host": "vm", "ntasks": 1,
              "cpus_per_task": 1, "nodes": 1, "tasks_per_node": [1], "default_mem_per_cpu": 100,
              "cluster": "cluster"}
    base = steps.new_job_env(environ, SubmitRecord.from_dict(record), job_id=80, hosts=[("vm", 1)], host="vm", user="root", uid=0, gid=0,
                             ge_environ={"TMPDIR": "/tmp"})
    got = _task_env_for(base, [("vm", 1, [0])], 0, 0, in_alloc=False)
    config = {"SLURM_CONF", "SLURM_WORKING_CLUSTER", "SLURM_JOB_ACCOUNT"}  # Slurm's config, not srun's doing
    keys = (set(got) | set(want)) - VOLATILE - config
    assert {k: got.get(k) for k in keys} == {k: want.get(k) for k in keys}


def test_new_job_gpu_environment():
    want = case_stdout_env("srun_gpu_env")
    environ = {k: want[k] for k in ("HOME", "LANG", "LOGNAME", "MYVAR", "PATH", "PWD", "SHELL", "SHLVL", "USER")}
    record = {"name": "env", "partition": "gpu", "submit_dir": "/srv/sref", "submit_host": "vm", "ntasks": 1,
              "cpus_per_task": 1, "nodes": 1, "tasks_per_node": [1], "gpus": 1, "cluster": "cluster"}
    base = steps.new_job_env(environ, SubmitRecord.from_dict(record), job_id=81, hosts=[("vm", 1)], host="vm", user="root", uid=0, gid=0,
                             gpu_ids=[0], ge_environ={"TMPDIR": "/tmp"})
    got = _task_env_for(base, [("vm", 1, [0])], 0, 0, in_alloc=False, gpu="0")
    keys = (set(got) | set(want)) - VOLATILE - {"SLURM_CONF", "SLURM_WORKING_CLUSTER", "SLURM_JOB_ACCOUNT"}
    assert {k: got.get(k) for k in keys} == {k: want.get(k) for k in keys}


def test_two_task_standalone_environment():
    text = (SLURM_REF / "srun_n2_env.txt").read_text()
    lines = text.split("# --- stdout", 1)[1].split("\n", 1)[1].split("# --- stderr", 1)[0].splitlines()
    want_procids = sorted(v for k, _, v in (ln.partition("=") for ln in lines) if k == "SLURM_PROCID")
    record = {"name": "env", "partition": "debug", "submit_dir": "/srv/sref", "submit_host": "vm", "ntasks": 2,
              "ntasks_set": True, "cpus_per_task": 1, "nodes": 1, "tasks_per_node": [2], "cluster": "cluster"}
    base = steps.new_job_env({}, SubmitRecord.from_dict(record), job_id=78, hosts=[("vm", 2)], host="vm", user="root", uid=0, gid=0)
    plan = [("vm", 2, [0, 1])]
    envs = [_task_env_for(base, plan, 0, t, in_alloc=False) for t in (0, 1)]
    assert sorted(e["SLURM_PROCID"] for e in envs) == want_procids == ["0", "1"]
    for e in envs:
        assert e["SLURM_GTIDS"] == "0,1" and e["SLURM_CPUS_ON_NODE"] == "2" and e["SLURM_NTASKS"] == "2"
        assert e["SLURM_STEP_TASKS_PER_NODE"] == "2" and "SLURM_DISTRIBUTION" not in e


def test_step_on_two_hosts():
    base = {"SLURM_JOB_ID": "9", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_CPUS_PER_NODE": "2(x2)"}
    plan = steps.layout([("n1", 2), ("n2", 2)], 3, 1, 2)
    e2 = _task_env_for(base, plan, 4, 2)
    assert e2["SLURM_NODEID"] == "1" and e2["SLURM_LOCALID"] == "0" and e2["SLURMD_NODENAME"] == "n2"
    assert e2["SLURM_STEP_NODELIST"] == "n[1-2]" and e2["SLURM_STEP_TASKS_PER_NODE"] == "2,1"
    assert e2["SLURM_GTIDS"] == "2" and e2["SLURM_STEP_NUM_NODES"] == "2" and e2["SLURM_DISTRIBUTION"] == "block"


def test_export_modes():
    env = {"A": "1", "SLURM_JOB_ID": "3", "SRUN_X": "y"}
    assert steps.export_env(env, {"all": True, "vars": {"B": "2"}}) == dict(env, B="2")
    assert steps.export_env(env, {"all": False, "vars": {}}) == {"SLURM_JOB_ID": "3", "SRUN_X": "y"}
    assert steps.export_env(env, {"all": False, "vars": {"A": "1"}}) == {"SLURM_JOB_ID": "3", "SRUN_X": "y", "A": "1"}


# --- step ids -----------------------------------------------------------------------------------


@pytest.fixture
def sdir(tmp_path):
    """A state directory laid out as cluster up makes it (the tests run as root)."""
    assert state.make_layout(str(tmp_path)) == []
    return tmp_path


def own(sdir, sub: str):
    return sdir / "users" / str(os.getuid()) / sub


def test_step_ids_count_up_per_job(sdir):
    tmp_path = sdir
    assert [steps.next_step_id(str(tmp_path), "7") for _ in range(3)] == [0, 1, 2]
    assert steps.next_step_id(str(tmp_path), "8") == 0
    assert steps.next_step_id(str(tmp_path), "7_2") == 0
    counter = own(sdir, "steps") / "7"
    assert counter.read_text() == "3"
    assert counter.stat().st_mode & 0o777 == 0o600 and own(sdir, "steps").stat().st_mode & 0o777 == 0o700


def test_step_counter_must_be_the_users_own_and_never_blocks(sdir):
    """F-10: a counter file of another owner is refused; a lock held elsewhere is waited for a
    bounded time, then srun is told (it warns and uses step 0)."""
    import fcntl

    counter = own(sdir, "steps") / "9"
    steps.next_step_id(str(sdir), "9")
    os.chown(counter, 12345, 12345)
    with pytest.raises(OSError, match="not the user's own"):
        steps.next_step_id(str(sdir), "9")
    os.chown(counter, os.getuid(), os.getgid())
    fd = os.open(counter, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        old = run_mod.STEP_LOCK_WAIT
        run_mod.STEP_LOCK_WAIT = 0.3
        with pytest.raises(OSError, match="locked too long"):
            steps.next_step_id(str(sdir), "9")
    finally:
        run_mod.STEP_LOCK_WAIT = old
        os.close(fd)
    assert steps.next_step_id(str(sdir), "9") == 1


def test_concurrent_sruns_get_distinct_step_ids(sdir):
    tmp_path = sdir
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from shim.runtime import steps; "
            "print(steps.next_step_id(sys.argv[2], '11'))")
    src = os.path.dirname(os.path.dirname(os.path.dirname(steps.__file__)))
    procs = [subprocess.Popen([sys.executable, "-c", code, src, str(tmp_path)], stdout=subprocess.PIPE, text=True)
             for _ in range(8)]
    ids = sorted(int(p.communicate(timeout=30)[0]) for p in procs)
    assert ids == list(range(8))


# --- the allocation -----------------------------------------------------------------------------


def test_allocation_from_the_jobs_own_environment(sdir):
    tmp_path = sdir
    hf = tmp_path / "pe_hostfile"
    hf.write_text("vm 2 debug@vm UNDEFINED\nnode2.example 1 debug@node2 UNDEFINED\n")
    env = {"JOB_ID": "12", "PE_HOSTFILE": str(hf), "SGE_TASK_ID": "undefined", "SLURM_JOB_ID": "12",
           "SLURM_NTASKS": "3"}
    alloc = steps.find_allocation(str(tmp_path), 12, env)
    assert alloc.inside and alloc.hosts == [("vm", 2), ("node2", 1)] and alloc.key == "12"
    assert alloc.job_env["SLURM_NTASKS"] == "3"
    # remembered for sruns outside the job
    again = steps.find_allocation(str(tmp_path), 12, {"SLURM_JOB_ID": "12"})
    assert not again.inside and again.hosts == [("vm", 2), ("node2", 1)]
    rec = own(sdir, "steps") / "12.alloc.json"
    assert rec.stat().st_mode & 0o777 == 0o600


def test_allocation_record_gives_only_slurms_variables(sdir):
    """F-4: whatever an allocation record's env holds, srun takes only SLURM_* (no LD_PRELOAD)."""
    assert steps.save_allocation(str(sdir), "13", {"hosts": [["vm", 1]], "env": {
        "SLURM_JOB_ID": "13", "LD_PRELOAD": "/tmp/evil.so", "PATH": "/evil", "SLURMD_NODENAME": "vm", "X": 1}})
    alloc = steps.find_allocation(str(sdir), 13, {"SLURM_JOB_ID": "13"})
    assert alloc.job_env == {"SLURM_JOB_ID": "13", "SLURMD_NODENAME": "vm"}
    assert steps.save_allocation(str(sdir), "14", {"hosts": "vm", "env": {}})
    assert steps.find_allocation(str(sdir), 14, {"SLURM_JOB_ID": "14"}) is None  # malformed: absent


def test_allocation_of_an_array_task(sdir):
    env = {"JOB_ID": "20", "NSLOTS": "1", "SGE_TASK_ID": "2"}
    alloc = steps.find_allocation(str(sdir), 20, env, record=records.Submitted({"array": [5, 7, 9]}))  # as srun reads it
    assert alloc.task == 7 and alloc.ge_task == "2" and alloc.key == "20_7" and alloc.hosts == [(steps.short_host(), 1)]


def test_allocation_from_an_ancestors_environment():
    """snakemake strips the environment; the processes above srun still carry the job's."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env={"JOB_ID": "4242", "NSLOTS": "3", "SLURM_JOB_NODELIST": "vm", "PATH": os.defpath})
    try:
        env = None
        for _ in range(50):
            env = steps.ancestor_job_env(4242, start=child.pid)
            if env:
                break
            threading.Event().wait(0.05)
        assert env and env["NSLOTS"] == "3" and env["SLURM_JOB_NODELIST"] == "vm"
        assert steps.ancestor_job_env(4243, start=child.pid) is None
    finally:
        child.kill()
        child.wait()


def test_unknown_allocation(sdir):
    assert steps.find_allocation(str(sdir), 999, {"SLURM_JOB_ID": "999"}) is None


# --- multi-prog, payloads -----------------------------------------------------------------------


def test_multi_prog():
    text = "# comment\n0 echo zero\n1-2 echo r%t o%o\n* hostname\n"
    got = steps.parse_multi_prog(text, 4)
    assert got == {0: ["echo", "zero"], 1: ["echo", "r1", "o0"], 2: ["echo", "r2", "o1"], 3: ["hostname"]}


def test_boot_command_survives_qrsh_word_joining(sdir):
    """qrsh joins words with blanks and a shell splits them again: each word arrives intact. The
    payload itself is never on the command line (F-7b): a private file, read once."""
    import shlex

    payload = {"argv": ["printf", "[%s]\\n", "a b", "c'd", "$HOME", "`x`"], "env": {"MYSECRET": "s3cr3t"}}
    words = steps.quoted(steps.boot_argv(str(sdir), payload))
    assert "s3cr3t" not in " ".join(words)
    again = shlex.split(" ".join(words))
    assert again[:3] == [sys.executable, "-I", "-c"] and again[4] == str(sdir)
    [f] = list(own(sdir, "srun").iterdir())
    assert f.name == again[5] and f.stat().st_mode & 0o777 == 0o600
    assert steps.read_payload(again[4], again[5]) == payload
    assert list(own(sdir, "srun").iterdir()) == []  # removed once read
    with pytest.raises(ValueError):
        steps.read_payload(again[4], again[5])
    with pytest.raises(ValueError):
        steps.read_payload(str(sdir), "../../../etc/passwd")


# --- the host launcher, with real processes but no Grid Engine ---------------------------------


def _launch(tmp_path, argv, tasks=(0, 1), **extra):
    import queue

    r, w = os.pipe()
    er, ew = os.pipe()
    spec = {"argv": argv, "cwd": str(tmp_path), "env": {"PATH": os.defpath}, "tasks": list(tasks), "host": "h",
            "node": 0, "label": True, "width": 1, "stdout": ("inherit", None), "stderr": ("inherit", None),
            "stdin": ("none", None), "vals": {"j": 1, "s": 0}, "own_group": True, **extra}
    events: queue.Queue = queue.Queue()
    launch = steps.HostLaunch(spec, events, stdin=os.open(os.devnull, os.O_RDONLY), stdout=w, stderr=ew)
    launch.start()
    pending = set(tasks)
    while pending:
        _, tid, code, sig = events.get(timeout=30)
        launch.done(tid, code, sig)
        pending.discard(tid)
    launch.finish()
    os.close(w)
    os.close(ew)
    with os.fdopen(r) as f, os.fdopen(er) as g:
        return launch, f.read(), g.read()


def test_host_launch_labels_and_statuses(tmp_path):
    launch, out, err = _launch(tmp_path, ["sh", "-c", 'echo "out $SLURM_PROCID $SLURM_LOCALID $SLURM_TASK_PID $$"; '
                                                  'echo err >&2; exit $((SLURM_PROCID + 3))'])
    lines = sorted(out.splitlines())
    assert [ln.split()[:4] for ln in lines] == [["0:", "out", "0", "0"], ["1:", "out", "1", "1"]]
    assert all(ln.split()[4] == ln.split()[5] for ln in lines)  # SLURM_TASK_PID is the task's own pid
    assert sorted(err.splitlines()) == ["0: err", "1: err"]
    assert launch.statuses == {0: (3, 0), 1: (4, 0)}


def test_host_launch_exec_error_and_files(tmp_path):
    launch, out, err = _launch(tmp_path, ["no-such-program-xyz"], tasks=(0,))
    assert launch.statuses == {0: (2, 0)} and out == ""
    assert launch.late_errors == ["slurmstepd-h: error: execve(): no-such-program-xyz: No such file or directory"]
    launch, out, err = _launch(tmp_path, ["sh", "-c", "echo o$SLURM_PROCID; echo e$SLURM_PROCID >&2"],
                               label=False, stdout=("file", "o-%j-%t.txt"), stderr=("inherit", None))
    assert out == "" and err == ""
    assert (tmp_path / "o-1-0.txt").read_text() == "o0\ne0\n" and (tmp_path / "o-1-1.txt").read_text() == "o1\ne1\n"


def test_label_pump_keeps_lines_whole_and_unbuffered_mode():
    for unbuffered, chunks, want in ((False, [b"ab", b"c\nd", b"e\n", b"tail"], b"7: abc\n7: de\n7: tail"),
                                     (True, [b"ab", b"c\nd", b"e\n"], b"7: abc\n7: de\n")):
        r, w = os.pipe()
        r2, w2 = os.pipe()
        pump = steps.LabelPump(r, w2, b"7: ", unbuffered)
        pump.start()
        for c in chunks:
            os.write(w, c)
        os.close(w)
        pump.join(10)
        os.close(w2)
        with os.fdopen(r2, "rb") as f:
            assert f.read() == want


# --- GPU claims (shim.jobwrap.claim_gpus; job_main uses them too) ------------------------------


class GpuGE(GridEngine):
    """Grid Engine's answers the claims may ask for: running GPU jobs (qstat) and the host's
    GPU count (qconf -se)."""

    def __init__(self, running=(), capacity=2):
        self.running, self.capacity, self.calls = list(running), capacity, []

    def run(self, tool, args, **kw):
        from shim.proc import Result

        self.calls.append(tool)
        if tool == "qconf":
            return Result((tool,), 0, f"hostname h1\ncomplex_values        exclusive=true, \\\n   gpu={self.capacity}\n", "")
        rows = "".join(f"<job_list><JB_job_number>{j}</JB_job_number><JB_owner>{o}</JB_owner>"
                       f"<queue_name>gpu@h1</queue_name><hard_request name=\"gpu\">{n}</hard_request></job_list>"
                       for o, j, n in self.running)
        return Result((tool,), 0, f"<job_info><queue_info>{rows}</queue_info></job_info>", "")


@pytest.fixture
def gpus(sdir, monkeypatch):
    from shim.runtime import jobwrap

    ge = GpuGE()
    monkeypatch.setattr(jobwrap, "_backend_and_complex", lambda backend: (ge, "gpu", "job"))
    jobwrap._held.clear()
    yield sdir / "gpus", ge, jobwrap
    jobwrap._held.clear()


def test_gpu_claims_without_contention_ask_grid_engine_nothing(gpus):
    d, ge, jw = gpus
    assert jw.claim_gpus(str(d.parent), "h1", 1, 77) == [0]
    assert (d / "h1.0").read_text() == f"{os.getpid()} 77\n" and ge.calls == []
    assert jw.claim_gpus(str(d.parent), "h1", 1, 78) == [1]  # our own live claim (this process) holds 0
    jw.release_gpus(str(d.parent), "h1", [0, 1])
    assert [p.name for p in d.iterdir()] == []


def test_gpu_claim_names_that_are_no_claim_are_skipped_not_waited_for(gpus):
    """F-9: a FIFO (it used to block the job forever), a symlink and junk never hang or count."""
    d, ge, jw = gpus
    os.mkfifo(d / "h1.0")
    os.symlink("/etc/passwd", d / "h1.0.1")
    (d / "h1.1").write_text("junk")
    assert jw.claim_gpus(str(d.parent), "h1", 2, 5) == [0, 1]
    assert sorted(p.name for p in d.iterdir()) == ["h1.0", "h1.0.1", "h1.0.2", "h1.1", "h1.1.1"]


def test_stale_claims_are_superseded_and_our_own_removed(gpus):
    d, ge, jw = gpus
    (d / "h1.0").write_text("999999 5\n")  # ours, its process gone
    assert jw.claim_gpus(str(d.parent), "h1", 1, 6) == [0]
    assert [p.read_text() for p in d.iterdir()] == [f"{os.getpid()} 6\n"]  # the stale one is gone


def test_another_users_claim_is_live_only_when_grid_engine_runs_that_gpu_job_here(gpus):
    """F-9: mallory's claims with her own live process count only for a job of hers that Grid
    Engine runs on this host with GPUs, and only as many as it holds; never beyond the host's
    GPU count (the review saw device 4 on a 2-GPU host)."""
    import fcntl

    d, ge, jw = gpus
    held = []
    try:
        for i in (0, 1):
            (d / f"h1.{i}").write_text("4242 4242\n")
            os.chown(d / f"h1.{i}", 65534, 65534)
            held.append(open(d / f"h1.{i}", "rb"))  # her claimant's lock (F-24: no pid, no /proc)
            fcntl.flock(held[-1], fcntl.LOCK_EX)
        assert jw.claim_gpus(str(d.parent), "h1", 1, 7) == [0]  # no such GPU job: not live
        assert "qstat" in ge.calls
        jw.release_gpus(str(d.parent), "h1", [0])
        ge.running = [("nobody", 4242, 1)]  # a real job of hers, one GPU: one of her claims counts
        ge.calls.clear()
        assert jw.claim_gpus(str(d.parent), "h1", 1, 8) == [1]
        jw.release_gpus(str(d.parent), "h1", [1])
        ge.running = [("nobody", 4242, 2)]  # two GPUs: both count, and the host has no third
        with pytest.raises(jw.NoGpu, match="no free GPU on h1"):
            jw.claim_gpus(str(d.parent), "h1", 1, 9)
        assert not [p for p in d.iterdir() if p.read_text().startswith(f"{os.getpid()} ")]  # nothing left
    finally:
        for f in held:
            f.close()


def test_concurrent_claims_never_share_a_device(gpus):
    """Eight processes claim one GPU each on a 2-GPU host at once: at most two succeed, on
    different devices; the others fail cleanly (in real life Grid Engine's consumable would have
    kept them pending)."""
    d, ge, jw = gpus
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); from shim.runtime import jobwrap; "
            "jobwrap._backend_and_complex = lambda b: (None, 'gpu', 'job'); "
            "jobwrap._gpu_capacity = lambda host, backend=None: 2\n"
            "try:\n    ids = jobwrap.claim_gpus(sys.argv[2], 'h1', 1, int(sys.argv[3]))\n"
            "except jobwrap.NoGpu:\n    ids = []\n"
            "print(ids, flush=True); time.sleep(2)")
    src = os.path.dirname(os.path.dirname(os.path.dirname(steps.__file__)))
    procs = [subprocess.Popen([sys.executable, "-c", code, src, str(d.parent), str(100 + k)], stdout=subprocess.PIPE,
                              text=True, env=dict(os.environ, JOB_ID=str(100 + k))) for k in range(8)]
    got = [eval(p.communicate(timeout=60)[0]) for p in procs]
    held = [i for ids in got for i in ids]
    assert len(held) == len(set(held)) and set(held) <= {0, 1} and held, got


def test_a_task_dies_with_its_launcher(tmp_path):
    """A launcher killed outright (qrsh -inherit's shepherd SIGKILLs its process group when srun
    goes, e.g. after an MPI abort) takes its tasks along, those in process groups of their own
    included: they were left running for good, reparented to init (steps.TASK_LEASH)."""
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    pidfile = tmp_path / "task.pid"
    code = textwrap.dedent(f"""
        import os, queue, sys, time
        sys.path.insert(0, {str(Path(steps.__file__).resolve().parents[3])!r})
        from shim.runtime import steps
        spec = {{"argv": ["sh", "-c", "echo $$ > {pidfile}; exec sleep 300"], "cwd": {str(tmp_path)!r},
                "env": {{"PATH": os.defpath}}, "tasks": [0], "host": "h", "node": 0, "label": False,
                "width": 1, "stdout": ("inherit", None), "stderr": ("inherit", None),
                "stdin": ("none", None), "vals": {{"j": 1, "s": 0}}, "own_group": True}}
        launch = steps.HostLaunch(spec, queue.Queue(), stdin=os.open(os.devnull, os.O_RDONLY), stdout=1, stderr=2)
        launch.start()
        time.sleep(300)
    """)
    launcher = subprocess.Popen([sys.executable, "-I", "-c", code])
    try:
        def started() -> bool:
            assert launcher.poll() is None, "the launcher ended before its task started"
            return pidfile.exists() and bool(pidfile.read_text().strip())

        wait_until(started, 30, "the task to start", delay=0.05, cap=0.2)
        task = int(pidfile.read_text())
        assert os.getpgid(task) == task  # a process group of its own: the launcher's kill misses it
        launcher.kill()
        launcher.wait(timeout=10)
        def ended() -> bool:
            try:
                return Path(f"/proc/{task}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
            except OSError:
                return True

        wait_until(ended, 10, f"task {task} to end with its launcher", delay=0.05, cap=0.2)
    finally:
        if launcher.poll() is None:
            launcher.kill()
        try:
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass


@pytest.mark.parametrize("tty,pty,direct,piped", [
    (False, False, True, False),  # srun < file, one remote consumer: straight to qrsh
    (True, False, True, True),    # a terminal: through a pipe srun feeds
    (True, True, False, True),    # --pty (the terminal in raw mode): through a pipe too
])
def test_qrsh_inherit_never_gets_a_terminal_as_stdin(monkeypatch, tty, pty, direct, piped):
    """OCS 9.1.4's qrsh -inherit forwards a pipe's input to the task but not a terminal's (srun
    --pty inside salloc got its prompt and no keystroke): a remote launcher's stdin is srun's own
    only when that is no terminal, else a pipe that srun's broadcaster feeds."""
    seen = {}

    class Remote:
        returncode = None

        def wait(self):
            return 0

    def popen(argv, **kw):
        seen["stdin"] = kw["stdin"]
        return Remote()

    monkeypatch.setattr(run_mod.proc, "popen", popen)
    monkeypatch.setattr(run_mod, "boot_argv", lambda state_dir, spec: ["boot", "/nonexistent/launch.json"])
    step = object.__new__(run_mod._Step)
    step.req = steps.StepRequest(pty=pty)
    step.alloc = type("A", (), {"key": "7", "job_id": 7, "ge_task": "undefined"})()
    step.in_mode = ("task", 0) if pty else ("inherit", None)
    step.state_dir, step.step_id, step.sig_seen, step.stdin_tty = "/nonexistent", 0, set(), tty
    step.launch_files, step.extra_sinks, step.remotes, step.events = [], [], {}, __import__("queue").Queue()
    step.qrsh, step.qrsh_env = (lambda words: ["qrsh", *words]), {}
    step._start_remote({}, "node2", [0], direct)
    if piped:
        assert seen["stdin"] not in (0, run_mod.proc.DEVNULL) and step.extra_sinks  # srun feeds the pipe
        for fd in step.extra_sinks:
            os.close(fd)
    else:
        assert seen["stdin"] == 0 and step.extra_sinks == []
