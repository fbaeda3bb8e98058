"""How a batch job ends, per release (issue 30), the job wrapper (runtime/jobwrap.py) run whole as
Grid Engine runs it, then read back as squeue, scontrol and sacct show it:

- its shell killed by a signal: FAILED 0:<sig>, the batch step CANCELLED 0:<sig>; the reason
  JobLaunchFailure on 22.05, RaisedSignal:<sig>(<strsignal>) on 24.11 and 26.05 (scontrol's with
  '_' for blanks);
- a missing working directory: slurmstepd says so twice and runs the script in /tmp, every
  release; an output file whose directory is missing fails the launch on 22.05 (0:53, nothing
  written), where 24.11 and 26.05 make the directory (the user's, 0777 less the umask) and run.

What each release did: fixtures/slurm-<release>/oracle-ends.txt (asked of it) and the captures'
``squeue_t_all_acct`` and ``sacct_P_more`` (jobs kill9 and faildir)."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, release_cases
from shim.proc import Result
from shim.runtime import boot
from shim.slurm.request import SubmitRecord
from shim.store import records

NAMES = ("22.05", "24.11", "26.05")
SRC = Path(__file__).resolve().parents[2] / "src"
EMPTY_QUEUE = (FIXTURES / "gridengine" / "sge-8.1.9" / "live-qstat-u-all-r-xml.empty.xml").read_text()


def oracle(name: str, key: str) -> list[str]:
    """The output lines of question ``key`` (``### <key>: ...``) in the release's oracle-ends.txt."""
    text = (FIXTURES / f"slurm-{name}" / "oracle-ends.txt").read_text()
    return re.split(r"\n### ", text.split(f"\n### {key}: ", 1)[1], maxsplit=1)[0].splitlines()[1:]


def run_wrapper(work: Path, record: SubmitRecord, job_id: int) -> subprocess.CompletedProcess:
    code = "import sys; sys.path.insert(0, sys.argv[1]); from shim.runtime.jobwrap import run; run()"
    env = {"PATH": os.defpath, "JOB_ID": str(job_id), "SGE_TASK_ID": "undefined",
           "SLURM_SHIM_CONFIG": os.environ["SLURM_SHIM_CONFIG"], "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"]}
    return subprocess.run([sys.executable, "-I", "-c", code, str(SRC)], input=boot.payload_text(record.to_dict()),
                          capture_output=True, text=True, env=env, cwd="/", timeout=60)


def a_job(tmp_path: Path, script: str, **changes) -> SubmitRecord:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    rec = SubmitRecord(
        name="wrap", state_dir=str(tmp_path / "state"), workdir=str(work), submit_dir=str(work), submit_host="vm",
        stdout=None, stderr=None, stdin=None, ntasks=1, ntasks_set=False, cpus_per_task=1, cpus_per_task_set=False,
        nodes=1, tasks_per_node=[1], time=60, kill_wait=30, partition="debug", cluster="cluster",
        script=base64.b64encode(f"#!/bin/sh\n{script}\n".encode()).decode("ascii"), args=[],
        environ={"PATH": os.defpath}, export={"all": True, "vars": {}}, export_raw=None, umask=0o022,
        user="root", uid=0, submit_time=1796612425.5, sub=1796612425.5, command="sbatch", version=1)
    return rec.replace(**changes)


def the_end(tmp_path: Path, job_id: int) -> dict:
    return records.Reader(str(tmp_path / "state")).events(job_id, os.getuid())[(None, "end")]


def shown(job_id: int, capsys) -> tuple[str, list[str]]:
    """squeue -h -t all -j N -o '%T|%r', and scontrol show job N's JobState= and ExitCode= lines,
    of the ended job (Grid Engine lists nothing: the job wrapper's records tell)."""
    from shim.__main__ import dispatch
    from shim.gridengine import backends
    from shim.gridengine.replay import ReplayBackend

    backends.use(ReplayBackend({("qstat",): Result(("qstat",), 0, EMPTY_QUEUE, "")},
                               default=Result(("x",), 0, "", "")))
    assert dispatch("squeue", ["-h", "-t", "all", "-j", str(job_id), "-o", "%T|%r"]) == 0
    squeue = capsys.readouterr().out.strip()
    assert dispatch("scontrol", ["show", "job", str(job_id)]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "JobState=" in ln or "ExitCode=" in ln]
    return squeue, lines


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("sig", (9, 15, 11, 6))
def test_a_batch_shell_killed_by_a_signal_ends_as_each_release(release_site, capsys, tmp_path, name, sig):
    from shim.gridengine import qacct

    release_site(name)
    job = 500 + sig
    cp = run_wrapper(tmp_path, a_job(tmp_path, f"echo before; kill -{sig} $$", stdout=str(tmp_path / "k.out")), job)
    assert cp.returncode == 128 + sig, cp.stderr
    assert (tmp_path / "k.out").read_text() == "before\n"
    want = oracle(name, f"K{sig}")
    end = the_end(tmp_path, job)
    assert (end["state"], end["exit"], end["signal"], end["reason"]) == ("FAILED", 0, sig, want[0].split("|", 1)[1])
    squeue, scontrol = shown(job, capsys)
    assert squeue == want[0]
    assert [s.strip() for s in scontrol] == [want[1].strip(), want[2].strip()]  # (Reason=, ExitCode=0:<sig>)
    oc = qacct.outcome(None, end)  # sacct's job and batch rows: N|FAILED|0:sig|None, N.batch|CANCELLED|0:sig|
    rows = [f"{job}|{oc.state}|{oc.exit}:{oc.signal}|None",
            f"{job}.batch|{oc.batch_state}|{oc.batch_exit}:{oc.batch_signal}|"]
    assert [re.sub(r"^\d+", str(job), r) for r in want[3:5]] == rows


@pytest.mark.parametrize("name", NAMES)
def test_the_captured_kill9_ends_as_each_release(release_site, capsys, tmp_path, name):
    """The captures' job kill9 (``sbatch -J kill9 --wrap 'kill -9 $$'``): squeue -t all's row."""
    release_site(name)
    cp = run_wrapper(tmp_path, a_job(tmp_path, "kill -9 $$", name="kill9", stdout="/dev/null"), 137)
    assert cp.returncode == 137, cp.stderr
    squeue, _ = shown(137, capsys)
    row = next(r for r in release_cases(name)["squeue_t_all_acct"]["stdout"].splitlines() if " kill9 " in r)
    assert f"({squeue.split('|')[1]})" == row.split()[-1]


@pytest.mark.parametrize("name", NAMES)
def test_a_missing_working_directory_runs_the_script_in_tmp(release_site, capsys, tmp_path, name):
    """Job W: ``-o <absolute> -D /nonexistent/dir --wrap 'pwd; echo ran'``: COMPLETED in every
    release, slurmstepd's two lines first (26.05's with their time)."""
    release_site(name)
    out = tmp_path / "w.out"
    cp = run_wrapper(tmp_path, a_job(tmp_path, "pwd; echo ran", stdout=str(out), workdir=str(tmp_path / "gone")), 60)
    assert cp.returncode == 0, cp.stderr
    end = the_end(tmp_path, 60)
    assert (end["state"], end["exit"], end["signal"], end["reason"]) == ("COMPLETED", 0, 0, "None")
    want = oracle(name, "W")
    assert want[0] == "COMPLETED|None" and shown(60, capsys)[0] == want[0]
    stamp = r"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\]"
    got = re.sub(stamp, "[T]", out.read_text().replace(str(tmp_path / "gone"), "/nonexistent/dir"))
    assert got.replace("slurmstepd-" + os.uname().nodename.split(".")[0], "slurmstepd-vm") == \
        re.sub(stamp, "[T]", "\n".join(want[want.index("-- w.out") + 1:]) + "\n")
    assert not (tmp_path / "gone").exists()


@pytest.mark.parametrize("name", NAMES)
def test_a_missing_working_directory_with_the_default_output(release_site, capsys, tmp_path, name):
    """Job A1 (the captures' faildir): ``-D /nonexistent/s4a --wrap 'pwd; echo ran'`` with no -o.
    22.05: FAILED JobLaunchFailure 0:53, nothing written; 24.11, 26.05: the directory made for
    slurm-N.out, the script run there, COMPLETED."""
    from shim.gridengine import qacct

    release_site(name)
    gone = tmp_path / "work" / "s4a"
    cp = run_wrapper(tmp_path, a_job(tmp_path, "pwd; echo ran", workdir=str(gone)), 61)
    assert cp.stderr == ""
    want = oracle(name, "A1")
    squeue, scontrol = shown(61, capsys)
    assert squeue == want[1]
    assert scontrol[0].strip() == want[2].strip()
    assert scontrol[1].split()[-1] == want[3].split()[-1]  # ExitCode=0:53, or 0:0
    oc = qacct.outcome(None, the_end(tmp_path, 61))
    rows = [f"61|{oc.state}|{oc.exit}:{oc.signal}|None",
            f"61.batch|{oc.batch_state}|{oc.batch_exit}:{oc.batch_signal}|"]
    assert rows == [re.sub(r"^\d+", "61", r) for r in want[4:6]]
    if name == "22.05":
        assert not gone.exists()
    else:
        assert (gone / "slurm-61.out").read_text() == f"{gone}\nran\n"
        assert oct(gone.stat().st_mode & 0o777) == "0o755"  # (as A1's stat said: 755, the user's)
    # the captures' faildir ended the same way
    row = next(r for r in release_cases(name)["squeue_t_all_acct"]["stdout"].splitlines() if " faildir " in r)
    assert row.split()[4] == {"FAILED": "F", "COMPLETED": "CD"}[squeue.split("|")[0]]


@pytest.mark.parametrize("name", NAMES)
def test_an_output_directory_that_is_missing(release_site, capsys, tmp_path, name):
    """Job A2: ``-o <dir>/new/sub/r.out --wrap pwd`` (the working directory exists): 22.05 fails
    the launch; 24.11 and 26.05 make new/ and new/sub/ and run."""
    release_site(name)
    out = tmp_path / "new" / "sub" / "r.out"
    cp = run_wrapper(tmp_path, a_job(tmp_path, "pwd", stdout=str(out)), 62)
    assert cp.stderr == ""
    want = oracle(name, "A2")
    assert shown(62, capsys)[0] == want[0]
    if name == "22.05":
        assert not (tmp_path / "new").exists() and want[0] == "FAILED|JobLaunchFailure"
    else:
        assert out.read_text() == f"{tmp_path / 'work'}\n" and want[0] == "COMPLETED|None"
