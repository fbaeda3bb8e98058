"""srun against the live Grid Engine: a new job (qrsh), steps inside sbatch jobs, Slurm's output,
messages, exit codes and per-task environments compared with the real Slurm captures."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import SLURM_REF, STATE_DIR, run, shim_env, wait_until

pytestmark = pytest.mark.gridengine

HOST = os.uname().nodename.split(".")[0]
STATE = STATE_DIR  # the selected cell's (conftest.SITE_CONFIG)
MINE = STATE / "users" / str(os.getuid())  # the records of the tests' own (root's) jobs
CONFIG_KEYS = {"SLURM_CONF", "SLURM_WORKING_CLUSTER", "SLURM_JOB_ACCOUNT"}  # Slurm's config, not srun's
VOLATILE = {"SLURM_TASK_PID", "SLURM_SRUN_COMM_PORT", "SLURM_STEP_LAUNCHER_PORT", "SLURM_JOB_ID", "SLURM_JOBID",
            "SLURM_SRUN_COMM_HOST", "SLURM_LAUNCH_NODE_IPADDR", "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST",
            "SLURMD_NODENAME", "SLURM_TOPOLOGY_ADDR", "SLURM_NODELIST", "SLURM_JOB_NODELIST",
            "SLURM_STEP_NODELIST"}


# What the site's MPI plugin adds to every task (cluster up's MpiDefault is pmi2; the reference
# cluster's is none): tests/integration/test_mpi_live.py checks these
MPI_PLUGIN_ENV = ("SLURM_MPI_TYPE", "PMI_FD", "PMI_RANK", "PMI_SIZE", "PMI_JOBID")


def env_of(text: str) -> dict[str, str]:
    return {k: v for k, v in (line.split("=", 1) for line in text.splitlines()
                              if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", line)) if k not in MPI_PLUGIN_ENV}


def ref_case(name: str) -> tuple[str, str]:
    text = (SLURM_REF / f"{name}.txt").read_text()
    out = text.split("# --- stdout", 1)[1].split("\n", 1)[1].split("# --- stderr", 1)[0]
    err = text.split("# --- stderr", 1)[1].split("\n", 1)[1]
    return out, err


def ref_env(name: str) -> dict[str, str]:
    return env_of((SLURM_REF / name).read_text())


def slurm_keys(env: dict[str, str]) -> set[str]:
    # SLURM_SHIM_* are the shim's own settings, passed on like any exported variable
    return {k for k in env if k.startswith(("SLURM", "SRUN")) and not k.startswith("SLURM_SHIM_")} - CONFIG_KEYS


def sbatch(*argv, cwd, user=None, env=None) -> int:
    cp = run("sbatch", "--parsable", *argv, cwd=cwd, user=user, env=env)
    assert cp.returncode == 0, cp.stderr
    return int(cp.stdout.strip())


def wait_file(path: Path, marker: str, timeout: float = 90) -> str:
    wait_until(lambda: path.exists() and marker in path.read_text(), timeout, f"{marker!r} in {path}")
    return path.read_text()


def gone(job: int) -> bool:
    return run("qstat", "-j", str(job)).returncode != 0


# --- a new job ----------------------------------------------------------------------------------


def test_hostname(workdir):
    cp = run("srun", "hostname", cwd=workdir)
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, f"{HOST}\n", "")


def test_two_labelled_tasks(workdir):
    cp = run("srun", "-n2", "-l", "hostname", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.splitlines()) == [f"0: {HOST}", f"1: {HOST}"]
    ref, _ = ref_case("srun_n2_label_hostname")
    assert sorted(ref.splitlines()) == ["0: vm", "1: vm"]


@pytest.mark.parametrize("case,argv,rc,err", [
    ("srun_exit3", ["bash", "-c", "exit 3"], 3, ["srun: error: {h}: task 0: Exited with exit code 3"]),
    ("srun_false", ["false"], 1, ["srun: error: {h}: task 0: Exited with exit code 1"]),
    ("srun_signal_kill", ["bash", "-c", "kill -9 $$"], 137,
     ["srun: error: {h}: task 0: Killed", "srun: Force Terminated StepId={j}.0"]),
    ("srun_err_command_not_found", ["nosuchcommand"], 2,
     ["srun: error: {h}: task 0: Exited with exit code 2",
      "slurmstepd-{h}: error: execve(): nosuchcommand: No such file or directory"]),
])
def test_exit_codes_and_messages_as_slurm(workdir, case, argv, rc, err):
    cp = run("srun", *argv, cwd=workdir)
    assert cp.returncode == rc
    lines = cp.stderr.splitlines()
    job = re.search(r"StepId=(\d+)", cp.stderr).group(1) if "StepId" in cp.stderr else "0"
    assert lines == [e.format(h=HOST, j=job) for e in err]
    _, ref_err = ref_case(case)
    assert [re.sub(r"StepId=\d+", "StepId=J", x) for x in ref_err.splitlines()] == \
           [re.sub(r"StepId=\d+", "StepId=J", e.format(h="vm", j=1)) for e in err]


def test_stdin_and_separate_stderr(workdir):
    cp = run("srun", "cat", input="line1\nline2\n", cwd=workdir)
    assert (cp.returncode, cp.stdout) == (0, "line1\nline2\n")
    cp = run("srun", "bash", "-c", "echo out; echo err >&2", cwd=workdir)
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "out\n", "err\n")
    cp = run("srun", "-n2", "-l", "cat", input="x\n", cwd=workdir)  # stdin goes to every task
    assert sorted(cp.stdout.splitlines()) == ["0: x", "1: x"]


def test_environment_equals_slurms_standalone_srun(workdir):
    cp = run("srun", "env", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    got = env_of(cp.stdout)
    want = env_of(ref_case("srun_env_single")[0])
    assert slurm_keys(got) == slurm_keys(want)
    for k in slurm_keys(want) - VOLATILE:
        assert got[k] == want[k], k
    assert got["SLURM_JOB_ID"] == got["SLURM_JOBID"] and got["SLURMD_NODENAME"] == HOST
    assert got["SLURM_SUBMIT_DIR"] == str(workdir) and "ENVIRONMENT" not in got


def test_two_task_environment(workdir):
    cp = run("srun", "-n2", "bash", "-c", 'echo "$SLURM_PROCID $SLURM_LOCALID $SLURM_GTIDS $SLURM_NTASKS '
             '$SLURM_STEP_ID $SLURM_CPUS_ON_NODE $SLURM_STEP_TASKS_PER_NODE"', cwd=workdir)
    assert sorted(cp.stdout.splitlines()) == ["0 0 0,1 2 0 2 2", "1 1 0,1 2 0 2 2"]
    want = env_of(ref_case("srun_n2_env")[0])
    assert want["SLURM_GTIDS"] == "0,1" and want["SLURM_CPUS_ON_NODE"] == "2"


def test_gpu_environment(workdir):
    cp = run("srun", "--gres=gpu:1", "-p", "gpu", "env", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    got = env_of(cp.stdout)
    want = env_of(ref_case("srun_gpu_env")[0])
    assert slurm_keys(got) == slurm_keys(want)
    assert got["SLURM_STEP_GPUS"] == got["CUDA_VISIBLE_DEVICES"] in ("0", "1")
    assert got["SLURM_GPUS_ON_NODE"] == "1" and got["SLURM_JOB_PARTITION"] == "gpu"


def test_resources_reach_grid_engine(workdir):
    cp = run("srun", "-n2", "-c2", "--mem=100M", "-J", "sized", "bash", "-c",
             'echo "$NSLOTS $PE $SLURM_CPUS_ON_NODE $SLURM_JOB_CPUS_PER_NODE $SLURM_CPUS_PER_TASK '
             '$SLURM_MEM_PER_NODE $SLURM_JOB_NAME"', cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == ["4 smp 4 4 2 100 sized"] * 2


@pytest.mark.parametrize("argv,rc,err", [
    ([], 1, "srun: fatal: No command given to execute.\n"),
    (["--bogus", "hostname"], 255, "srun: unrecognized option '--bogus'\nTry \"srun --help\" for more information\n"),
    (["-p", "nope", "hostname"], 1, "srun: error: invalid partition specified: nope\n"
                                    "srun: error: Unable to allocate resources: Invalid partition name specified\n"),
    (["--gres=gpu:5", "-p", "gpu", "true"], 1,
     "srun: error: Unable to allocate resources: Requested node configuration is not available\n"),
])
def test_refusals(workdir, argv, rc, err):
    cp = run("srun", *argv, cwd=workdir)
    assert (cp.returncode, cp.stderr, cp.stdout) == (rc, err, "")


def test_refusals_match_the_reference():
    assert ref_case("srun_err_no_command")[1] == "srun: fatal: No command given to execute.\n"
    assert ref_case("srun_err_invalid_partition")[1].startswith("srun: error: invalid partition specified: nope\n")


def test_job_is_recorded_with_its_real_exit_code(workdir):
    cp = run("srun", "-J", "rec-100", "bash", "-c", "echo $SLURM_JOB_ID; exit 100", cwd=workdir)
    assert cp.returncode == 100  # Grid Engine never sees 100 (an error state); srun still reports it
    job = int(cp.stdout.strip())
    rec = __import__("json").loads((MINE / "records" / "jobs" / str(job // 100) / f"{job}.json").read_text())
    end = __import__("json").loads((MINE / "records" / "events" / str(job // 100) / f"{job}.x.end.json").read_text())
    assert rec["name"] == "rec-100" and (end["exit"], end["state"]) == (100, "FAILED")
    wait_until(lambda: gone(job), 30, f"job {job} to leave Grid Engine")
    assert "Eqw" not in run("qstat", "-u", "*").stdout


def test_plain_user(workdir):
    cp = run("srun", "-n2", "-l", "id", "-un", user="alice", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.splitlines()) == ["0: alice", "1: alice"]


def test_sigterm_ends_the_job(workdir):
    name = f"srunterm{os.getpid()}"
    p = subprocess.Popen(["srun", "-J", name, "bash", "-c", "echo started; sleep 300"], cwd=workdir,
                         env=shim_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "started\n"
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=30)
        assert rc == 143
        wait_until(lambda: name not in run("qstat", "-u", "*", "-xml").stdout, 30, "the job to be gone")
    finally:
        if p.poll() is None:
            p.kill()


def test_time_limit(workdir):
    """A step past its time limit: slurmstepd's line, srun's notice, SIGTERM, exit 143; not before
    its one minute (how soon after it is a matter of load, not of the test)."""
    t0 = time.monotonic()
    cp = run("srun", "-t", "1", "sleep", "300", cwd=workdir, timeout=150)
    assert cp.returncode == 143
    assert time.monotonic() - t0 >= 55  # (the limit's minute, less Grid Engine's start of the job)
    lines = cp.stderr.splitlines()
    assert re.fullmatch(rf"slurmstepd-{HOST}: error: \*\*\* STEP \d+\.0 ON {HOST} CANCELLED AT "
                        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d DUE TO TIME LIMIT \*\*\*", lines[0])
    assert lines[1:] == ["srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
                         f"srun: error: {HOST}: task 0: Terminated"]
    ref = ref_case("srun_time_limit")[1].splitlines()
    assert ref[-2:] == ["srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
                        "srun: error: vm: task 0: Terminated"]


def test_multi_prog(workdir):
    (workdir / "mp.conf").write_text("0 echo zero\n1-2 echo rank%t off%o\n")
    cp = run("srun", "-n3", "-l", "--multi-prog", "mp.conf", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.splitlines()) == ["0: zero", "1: rank1 off0", "2: rank2 off1"]


# --- steps inside an sbatch job -------------------------------------------------------------------


STEPS_SCRIPT = """#!/bin/bash
env | sort > batch.env
srun -n2 bash -c 'env | sort > step0.task$SLURM_PROCID.env'
srun -n1 -c2 bash -c 'env | sort > step1.task$SLURM_PROCID.env'
srun -l hostname
srun --bogus-option true; echo "srun bogus rc=$?"
srun -n1 --gres=gpu:1 bash -c 'env | sort > step3.task$SLURM_PROCID.env'
srun -n5 true; echo "srun n5 rc=$?"
srun false; echo "srun false rc=$?"
srun bash -c 'exit $SLURM_PROCID'; echo "srun exit procid rc=$?"
echo END
"""


def _diff(batch: dict[str, str], step: dict[str, str]) -> tuple[dict, dict]:
    added = {k: v for k, v in step.items() if k not in batch}
    changed = {k: v for k, v in step.items() if k in batch and batch[k] != v}
    return added, changed


def test_steps_inside_sbatch_equal_slurms(workdir):
    (workdir / "steps.sh").write_text(STEPS_SCRIPT)
    job = sbatch("-n", "2", "--gres=gpu:1", "steps.sh", cwd=workdir)
    out = wait_file(workdir / f"slurm-{job}.out", "END")
    # the job's output: step 2's labelled lines, then srun's own lines and exit codes
    ref_out = (SLURM_REF / "env-srun-in-sbatch-steps.out.txt").read_text().splitlines()
    got = [re.sub(rf"job {job}", "job 76", ln) for ln in out.splitlines() if ln != "END"]
    want = [re.sub(r"\bvm\b", HOST, ln) for ln in ref_out]
    assert sorted(got[:2]) == sorted(want[:2]) and got[2:] == want[2:]
    batch = env_of((workdir / "batch.env").read_text())
    ref_batch = ref_env("env-srun-in-sbatch-batch.txt")
    for mine, ref in (("step0.task0.env", "env-srun-in-sbatch-step0.task0.txt"),
                      ("step0.task1.env", "env-srun-in-sbatch-step0.task1.txt"),
                      ("step1.task0.env", "env-srun-in-sbatch-step1_c2.task0.txt"),
                      ("step3.task0.env", "env-srun-in-sbatch-step_gpu.task0.txt")):
        step = env_of((workdir / mine).read_text())
        added, changed = _diff(batch, step)
        ref_added, ref_changed = _diff(ref_batch, ref_env(ref))
        assert set(added) == set(ref_added), mine
        assert set(changed) - {"TMP"} == set(ref_changed), mine
        for k in set(ref_added) | set(ref_changed):
            if k not in VOLATILE | {"SHLVL"}:
                assert step[k] == ref_env(ref)[k], (mine, k)
        assert step["SLURM_STEP_ID"] == mine[4]


def test_stripped_environment_finds_the_allocation(workdir):
    """snakemake's jobstep calls srun with only SLURM_JOB_ID (and a few others) left. (A site
    config in another place than the default, as the OCS cell's, is the site's: it is kept.)"""
    (workdir / "strip.sh").write_text(
        "#!/bin/bash\nsrun true\n"
        "env -i PATH=$PATH SLURM_JOB_ID=$SLURM_JOB_ID ${SLURM_SHIM_CONFIG:+SLURM_SHIM_CONFIG=$SLURM_SHIM_CONFIG}"
        " srun -n1 -c1 bash -c 'env | sort' > stripped.env\n"
        "echo rc=$? > stripped.rc\n")
    job = sbatch("-n", "2", "strip.sh", cwd=workdir)
    wait_file(workdir / "stripped.rc", "rc=")
    assert (workdir / "stripped.rc").read_text() == "rc=0\n"
    env = env_of((workdir / "stripped.env").read_text())
    assert env["SLURM_JOB_ID"] == str(job) and env["SLURM_STEP_ID"] == "1" and env["SLURM_CPUS_PER_TASK"] == "1"
    assert env["SLURM_JOB_NODELIST"] == HOST and env["SLURM_JOB_CPUS_PER_NODE"] == "2"
    assert env["SLURM_NTASKS"] == "1" and env["SLURM_PROCID"] == "0" and "HOME" not in env


def test_output_files_labels_and_stdin_modes(workdir):
    (workdir / "io.sh").write_text("""#!/bin/bash
srun -n2 -o out-%j-%t.txt bash -c 'echo hello $SLURM_PROCID; echo err $SLURM_PROCID >&2'
srun -n2 -o shared-%s.txt -e err-%s.txt bash -c 'echo o; echo e >&2'
srun -n2 -l -o lab.txt bash -c 'echo a; echo b'
srun -n1 -o app.txt echo one
srun -n1 --open-mode=append -o app.txt echo two
printf 'x\\n' | srun -n2 -i none cat > none.txt
srun -n2 -o none echo hidden
srun -n2 -o 1 bash -c 'echo only$SLURM_PROCID'
echo END
""")
    job = sbatch("-n", "2", "io.sh", cwd=workdir)
    out = wait_file(workdir / f"slurm-{job}.out", "END")
    assert out == "only1\nEND\n"
    for t in (0, 1):
        assert (workdir / f"out-{job}-{t}.txt").read_text() == f"hello {t}\nerr {t}\n"
    assert (workdir / "shared-1.txt").read_text() == "o\no\n" and (workdir / "err-1.txt").read_text() == "e\ne\n"
    assert sorted((workdir / "lab.txt").read_text().splitlines()) == ["0: a", "0: b", "1: a", "1: b"]
    assert (workdir / "app.txt").read_text() == "one\ntwo\n"
    assert (workdir / "none.txt").read_text() == ""


def test_step_ids_count_up_and_kill_on_bad_exit(workdir):
    (workdir / "ids.sh").write_text("""#!/bin/bash
for i in 1 2 3; do srun -n1 bash -c 'echo step=$SLURM_STEP_ID'; done
srun -n2 -K bash -c 'if [ $SLURM_PROCID = 1 ]; then exit 5; fi; sleep 60'; echo "K rc=$?"
echo END
""")
    job = sbatch("-n", "2", "ids.sh", cwd=workdir)
    out = wait_file(workdir / f"slurm-{job}.out", "END", timeout=60)
    lines = out.splitlines()
    assert lines[:3] == ["step=0", "step=1", "step=2"]
    assert lines[3:] == [f"srun: Terminating StepId={job}.3", f"srun: error: {HOST}: task 0: Terminated",
                         f"srun: error: {HOST}: task 1: Exited with exit code 5", "K rc=143", "END"] or \
        lines[3:] == [f"srun: error: {HOST}: task 1: Exited with exit code 5", f"srun: Terminating StepId={job}.3",
                      f"srun: error: {HOST}: task 0: Terminated", "K rc=143", "END"] or \
        set(lines[3:]) == {f"srun: Terminating StepId={job}.3", f"srun: error: {HOST}: task 0: Terminated",
                           f"srun: error: {HOST}: task 1: Exited with exit code 5", "K rc=143", "END"}
    assert (MINE / "steps" / str(job)).read_text() == "4"
    rec = __import__("json").loads((MINE / "steps" / f"{job}.3.json").read_text())
    assert rec["ntasks"] == 2 and rec["exit"] == 143 and rec["state"] == "FAILED"


def test_export_inside_a_job(workdir):
    (workdir / "exp.sh").write_text("""#!/bin/bash
export FOO=outer
srun --export=NONE bash -c 'echo "none:${FOO:-unset}:${HOME:-unset}:$SLURM_STEP_ID"'
srun --export=ALL,BAR=2 bash -c 'echo "all:$FOO:$BAR"'
srun --export=BAR=3 bash -c 'echo "list:${FOO:-unset}:$BAR"'
echo END
""")
    job = sbatch("exp.sh", cwd=workdir)
    out = wait_file(workdir / f"slurm-{job}.out", "END")
    assert out.splitlines() == ["none:unset:unset:0", "all:outer:2", "list:unset:3", "END"]


def test_fast_local_launch_inside_a_job(workdir):
    (workdir / "fast.sh").write_text("#!/bin/bash\nstart=$(date +%s%N)\nfor i in 1 2 3 4 5; do srun true; done\n"
                                     "echo ms=$(( ($(date +%s%N) - start) / 5000000 ))\necho END\n")
    job = sbatch("fast.sh", cwd=workdir)
    out = wait_file(workdir / f"slurm-{job}.out", "END")
    ms = int(re.search(r"ms=(\d+)", out).group(1))
    assert ms < 1500, out  # no Grid Engine round trip for the job's own host


def test_srun_into_a_running_job_from_outside(workdir):
    """srun --jobid from another shell: the allocation from Grid Engine (qstat) or the record an
    srun inside the job left; the tasks join the job through qrsh -inherit."""
    job = sbatch("-n", "2", "-J", "holdit", "--wrap", "sleep 120", cwd=workdir)
    try:
        wait_until(lambda: re.search(rf"<JB_job_number>{job}</JB_job_number>\s*<JAT_prio>[^<]*</JAT_prio>\s*"
                                     r"<JB_name>[^<]*</JB_name>\s*<JB_owner>[^<]*</JB_owner>\s*<state>r</state>",
                                     run("qstat", "-u", "*", "-xml").stdout), 60, "the job to run")
        cp = run("srun", f"--jobid={job}", "-n1", "bash", "-c", "echo $SLURM_JOB_ID $SLURM_STEP_ID $JOB_ID",
                 cwd=workdir)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout == f"{job} 0 {job}\n"
    finally:
        run("qdel", str(job))
    cp = run("srun", "--jobid=999999999", "true", cwd=workdir)
    assert cp.returncode == 1 and "Unable to confirm allocation for job 999999999" in cp.stderr


# --- two execution hosts (scripts/multihost: a second sge_execd in network + UTS namespaces) -----


# (the fixture two_hosts: tests/integration/conftest.py; its .node is the second host)


def test_two_hosts_steps_inside_sbatch(workdir, two_hosts):
    (workdir / "two.sh").write_text("""#!/bin/bash
srun -n2 -l bash -c 'echo $(hostname) $SLURM_NODEID $SLURM_LOCALID $SLURMD_NODENAME $SLURM_STEP_NODELIST $JOB_ID'
srun -n2 bash -c 'exit $((SLURM_PROCID + 3))'; echo rc=$?
srun -n2 -o out-%N-%t.txt hostname
srun -n4 -l bash -c 'echo $(hostname) $SLURM_LOCALID $SLURM_GTIDS'
echo END
""")
    job = sbatch("-p", "twohost", "-N2", "-n4", "two.sh", cwd=workdir, env=two_hosts)
    out = wait_file(workdir / f"slurm-{job}.out", "END")
    lines = out.splitlines()
    first = sorted(lines[:2])
    hosts = sorted(ln.split()[1] for ln in first)
    assert hosts == sorted([two_hosts.node, HOST]), out
    for ln in first:
        rank, host, nodeid, localid, nodename, steplist, jobid = ln.split()
        assert host == nodename and localid == "0" and jobid == str(job) and set(steplist.split(",")) == {two_hosts.node, HOST}
        assert rank == f"{nodeid}:"
    errs = sorted(ln for ln in lines if ln.startswith("srun: error:"))
    assert len(errs) == 2 and all("Exited with exit code" in e for e in errs)
    assert "rc=4" in lines
    for f in (workdir.glob("out-*.txt")):
        host, rank = f.stem.split("-")[1:]
        assert f.read_text() == f"{host}\n"
    assert len(list(workdir.glob("out-*.txt"))) == 2
    four = sorted(ln for ln in lines if re.match(r"\d: ", ln) and len(ln.split()) == 4)
    assert [ln.split()[0] for ln in four] == ["0:", "1:", "2:", "3:"]
    assert {ln.split()[1] for ln in four} == {two_hosts.node, HOST} and {ln.split()[2] for ln in four} == {"0", "1"}


def test_two_hosts_new_job_and_salloc(workdir, two_hosts):
    cp = run("srun", "-p", "twohost", "-N2", "-n4", "-l", "bash", "-c", "echo $(hostname) $SLURM_NODEID",
             cwd=workdir, env=two_hosts)
    assert cp.returncode == 0, cp.stderr
    got = sorted(cp.stdout.splitlines())
    assert [g.split()[0] for g in got] == ["0:", "1:", "2:", "3:"]
    assert sorted({g.split()[1] for g in got}) == sorted({two_hosts.node, HOST})
    assert got[0].split()[1] == got[1].split()[1] and got[2].split()[1] == got[3].split()[1]  # block layout
    cp = run("salloc", "-p", "twohost", "-N2", "-n2", "srun", "-l", "bash", "-c", "echo $(hostname)",
             cwd=workdir, env=two_hosts)
    assert cp.returncode == 0, cp.stderr
    assert sorted(ln.split()[1] for ln in cp.stdout.splitlines()) == sorted([two_hosts.node, HOST])


def test_two_hosts_two_tasks_on_each_host(workdir, two_hosts):
    """`sbatch -N 2 --ntasks-per-node=2` (issue 16): two srun tasks on each host,
    SLURM_TASKS_PER_NODE 2(x2), and Grid Engine's grant (PE_HOSTFILE) two slots on each host, with
    no warning. On OCS the shim pins the layout: `-pe mpi 4 -par 2` (capability par; the request's
    allocation rule is 2). SGE 8.1.9 has no -par: the shim asks the round-robin PE for 4 slots
    (`-pe mpi 4`, nothing more), which deals them one host at a time, so two hosts with room get two
    each: even, but not pinned (README: Geometry)."""
    import xml.etree.ElementTree as ET

    from conftest import CELL

    (workdir / "geometry.sh").write_text("""#!/bin/bash
while read -r host slots rest; do echo "grant ${host%%.*} $slots"; done < "$PE_HOSTFILE"
echo "tpn $SLURM_TASKS_PER_NODE $SLURM_JOB_NUM_NODES"
srun -l bash -c 'echo task $(hostname) $SLURM_NODEID $SLURM_LOCALID'
echo END
""")
    cp = run("sbatch", "--parsable", "-H", "-p", "twohost", "-N", "2", "--ntasks-per-node=2", "geometry.sh",
             cwd=workdir, env=two_hosts)
    assert cp.returncode == 0 and cp.stderr == "", cp.stderr
    job = int(cp.stdout.strip())
    try:
        held = run("qstat", "-j", str(job), "-xml")  # the request, as Grid Engine holds it
        assert held.returncode == 0, held.stderr
        el = ET.fromstring(held.stdout).find(".//djob_info/element")
        assert el is not None, held.stdout
        assert el.findtext("JB_pe") == "mpi" and [r.text for r in el.iter("RN_min")][:1] == ["4"], held.stdout
        assert [r.text for r in el.iter("JRS_allocation_rule")] == (["2"] if CELL == "ocs" else []), held.stdout
    finally:
        assert run("scontrol", "release", str(job), env=two_hosts).returncode == 0
    out = wait_file(workdir / f"slurm-{job}.out", "END")
    lines = out.splitlines()
    assert sorted(ln.split()[1:] for ln in lines if ln.startswith("grant ")) == \
        sorted([[HOST, "2"], [two_hosts.node, "2"]]), out
    assert "tpn 2(x2) 2" in lines, out
    tasks = sorted(ln.split() for ln in lines if re.match(r"\d+: task ", ln))
    assert [t[0] for t in tasks] == ["0:", "1:", "2:", "3:"], out
    host = [t[2] for t in tasks]
    assert host[0] == host[1] and host[2] == host[3] and {host[0], host[2]} == {HOST, two_hosts.node}, out
    assert [(t[3], t[4]) for t in tasks] == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1")], out
