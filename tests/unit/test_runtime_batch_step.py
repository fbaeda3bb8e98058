"""The job wrapper (runtime/jobwrap.py) run whole, as Grid Engine runs a job script, without Grid
Engine: the payload on stdin is a submit record, read typed (SubmitRecord), and the batch step it
describes runs with Slurm's variables, files and exit code, and leaves its start and end records."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

from shim.runtime import boot
from shim.slurm.request import MISSING, SubmitRecord
from shim.store import records

SRC = Path(__file__).resolve().parents[2] / "src"
SCRIPT = b"#!/bin/sh\necho \"hello $SLURM_JOB_NAME $SLURM_NTASKS $SLURM_CPUS_PER_TASK $GREETING $1\"\nexit 3\n"


def run_wrapper(state_dir: Path, workdir: Path, record: SubmitRecord, job_id: int = 77) -> subprocess.CompletedProcess:
    code = "import sys; sys.path.insert(0, sys.argv[1]); from shim.runtime.jobwrap import run; run()"
    env = {"PATH": os.defpath, "JOB_ID": str(job_id), "SGE_TASK_ID": "undefined",
           "SLURM_SHIM_CONFIG": os.environ["SLURM_SHIM_CONFIG"], "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]}
    return subprocess.run([sys.executable, "-I", "-c", code, str(SRC)], input=boot.payload_text(record.to_dict()),
                          capture_output=True, text=True, env=env, cwd=str(workdir), timeout=60)


def a_record(state_dir: Path, work: Path, **changes) -> SubmitRecord:
    rec = SubmitRecord(
        name="typed", state_dir=str(state_dir), workdir=str(work), submit_dir=str(work), submit_host="vm",
        stdout=str(work / "out-%j.txt"), stderr=None, stdin=None, ntasks=2, ntasks_set=True, cpus_per_task=3,
        cpus_per_task_set=True, nodes=1, tasks_per_node=[2], time=5, kill_wait=30, partition="debug",
        cluster="cluster", script=base64.b64encode(SCRIPT).decode("ascii"), args=["arg1"],
        environ={"PATH": os.defpath, "GREETING": "hi"}, export={"all": True, "vars": {}}, export_raw=None,
        umask=0o022, user="root", uid=0, submit_time=1796612425.5, sub=1796612425.5, command="sbatch", version=1)
    return rec.replace(**changes)


def test_the_batch_step_runs_from_its_typed_submit_record(unit_site, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    cp = run_wrapper(unit_site, work, a_record(unit_site, work))
    assert cp.returncode == 3, cp.stderr
    assert (work / "out-77.txt").read_text() == "hello typed 2 3 hi arg1\n"
    events = records.Reader(str(unit_site)).events(77, os.getuid())
    end = events[(None, "end")]
    assert (end["exit"], end["signal"], end["state"], end["sub"]) == (3, 0, "FAILED", 1796612425.5)
    assert (None, "start") in events


def test_a_missing_working_directory_runs_the_script_in_tmp(unit_site, tmp_path):
    """As slurmstepd of every release (fixtures/slurm-*/oracle-ends.txt W): two lines on the job's
    stderr, the script run in /tmp; an output file that can be opened is written (test_releases_ends.py)."""
    work = tmp_path / "work"
    work.mkdir()
    cp = run_wrapper(unit_site, work, a_record(unit_site, work, workdir=str(tmp_path / "gone")))
    assert cp.returncode == 3, cp.stderr
    end = records.Reader(str(unit_site)).events(77, os.getuid())[(None, "end")]
    assert (end["state"], end["reason"], end["exit"]) == ("FAILED", "None", 3)
    lines = (work / "out-77.txt").read_text().splitlines()
    assert [ln.split(": error: ", 1)[1] for ln in lines[:2]] == [
        f"couldn't chdir to `{tmp_path / 'gone'}': No such file or directory: going to /tmp instead"] * 2
    assert lines[2:] == ["hello typed 2 3 hi arg1"] and not (tmp_path / "gone").exists()


def test_the_secrets_come_from_the_jobs_private_file(unit_site, tmp_path):
    """As sbatch submits: the environment, script and arguments in the user's private file, the
    job script carrying only its name and hash; the wrapper's record takes them from there, and
    the file goes at the job's end."""
    from shim import siteconf
    from shim.operations import submit

    work = tmp_path / "work"
    work.mkdir()
    carried, env_file = submit.private_payload(a_record(unit_site, work), siteconf.get(), "sbatch")
    assert carried.script is MISSING and carried.environ is MISSING and carried.env_file == env_file
    cp = run_wrapper(unit_site, work, carried, job_id=78)
    assert cp.returncode == 3, cp.stderr
    assert (work / "out-78.txt").read_text() == "hello typed 2 3 hi arg1\n"
    assert not os.path.exists(env_file)


def test_a_changed_time_limit_goes_into_the_runners_record(unit_site, monkeypatch):
    """scontrol update TimeLimit=7 while the script runs: the wrapper reads the job's record again,
    and the Runner's timers are made from a copy of its record with the new limit."""
    from shim import proc
    from shim.runtime import jobwrap
    from shim.store import state

    start = 4e9  # (the timers lie in the future: nothing fires)
    rec = SubmitRecord(time=5, kill_wait=30)
    r = jobwrap.Runner(rec)
    r.schedule(start)
    assert [t - start for t, _, _ in r.events] == [300, 330]
    assert state.record_submit(str(unit_site), 79, {"time": 7, "user": "root", "uid": 0})
    waits = []

    class Child:
        pid = -1

        def wait(self, timeout=None):
            waits.append(timeout)
            if len(waits) == 1:
                raise proc.TimeoutExpired("script", timeout)
            return 0

    r.child = Child()
    monkeypatch.setattr(jobwrap, "LIMIT_RECHECK", -1.0)  # (look at the record at the first timeout)
    assert jobwrap._wait(r, str(unit_site), 79, None, None, "vm", "79", start) == 0
    assert (r.p.time, rec.time) == (7, 5) and [t - start for t, _, _ in r.events] == [420, 450]
