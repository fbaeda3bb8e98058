"""sacct against the live Grid Engine: the terminal states submitit and snakemake read.

Each job is submitted both with raw qsub (Grid Engine's accounting alone) and, where Slurm-side
behaviour matters, with the shim's sbatch (submit record, job wrapper, scancel's events). Every
wait is a bounded poll.
"""

from __future__ import annotations

import re
import time
import uuid
import xml.etree.ElementTree as ET

import pytest

from conftest import run, wait_until

pytestmark = pytest.mark.gridengine

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")


def qsub(*args: str) -> int:
    cp = run("qsub", "-terse", *args, cwd="/tmp")
    assert cp.returncode == 0, cp.stderr
    return int(cp.stdout.strip().split(".")[0])


def sbatch(*args: str, cwd) -> int:
    cp = run("sbatch", "--parsable", *args, cwd=cwd)
    assert cp.returncode == 0, cp.stderr
    return int(cp.stdout.strip().split(";")[0])


def submitit_view(job: int) -> dict[str, str]:
    """submitit: ``sacct -o JobID,State,NodeList --parsable2 -j ID``; steps skipped."""
    cp = run("sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j", str(job))
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[0] == "JobID|State|NodeList"
    rows = [dict(zip(lines[0].split("|"), ln.split("|"))) for ln in lines[1:]]
    return {r["JobID"]: r for r in rows if "." not in r["JobID"]}


def snakemake_view(name: str) -> dict[str, str]:
    """snakemake: ``sacct -X --parsable2 --noheader --format=JobIdRaw,State --name X --starttime ...``."""
    start = time.strftime("%Y-%m-%dT%H:00", time.localtime(time.time() - 2 * 86400))
    cp = run("sacct", "-X", "--parsable2", "--clusters", "all", "--noheader", "--format=JobIdRaw,State",
             "--starttime", start, "--endtime", "now", "--name", name)
    assert cp.returncode == 0, cp.stderr
    return dict(ln.split("|", 1) for ln in cp.stdout.splitlines() if ln)


def wait_state(job: int, want: str, timeout: float = 90) -> dict[str, str]:
    def done():
        row = submitit_view(job).get(str(job))
        if row and row["State"].startswith(want):
            return row
        if row and row["State"].split()[0] in TERMINAL and not row["State"].startswith(want):
            pytest.fail(f"job {job}: {row['State']}, expected {want}")
        return None

    return wait_until(done, timeout, f"sacct to show job {job} {want}")


def wait_running(job: int, timeout: float = 60) -> None:
    def running():  # (qstat's XML: its text columns differ between SGE 8.1.9 and OCS 9)
        out = run("qstat", "-u", "*", "-s", "r", "-xml").stdout
        return any(jl.findtext("JB_job_number") == str(job) and jl.findtext("state") == "r"
                   for jl in ET.fromstring(out).iter("job_list"))

    wait_until(running, timeout, f"job {job} running")


def name() -> str:
    return "sx" + uuid.uuid4().hex[:10]


# ---------------------------------------------------------------------------------------------
# raw Grid Engine jobs


def test_exit_0_completed():
    n = name()
    job = qsub("-q", "debug", "-N", n, "-b", "y", "-o", "/dev/null", "-j", "y", "/bin/sh", "-c", "'exit 0'")
    row = wait_state(job, "COMPLETED")
    assert row["NodeList"] and row["NodeList"] != "None assigned"
    assert snakemake_view(n) == {str(job): "COMPLETED"}
    cp = run("sacct", "-n", "-P", "-X", "-j", str(job), "-o", "State,ExitCode,Partition")
    assert cp.stdout == "COMPLETED|0:0|debug\n"


def test_exit_3_failed():
    n = name()
    job = qsub("-q", "debug", "-N", n, "-b", "y", "-o", "/dev/null", "-j", "y", "/bin/sh", "-c", "'exit 3'")  # -b y: Grid Engine re-parses the joined words
    wait_state(job, "FAILED")
    assert snakemake_view(n) == {str(job): "FAILED"}
    cp = run("sacct", "-n", "-P", "-j", str(job), "-o", "JobID,State,ExitCode")
    assert cp.stdout.splitlines() == [f"{job}|FAILED|3:0", f"{job}.batch|FAILED|3:0"]


def test_past_time_limit_is_timeout():
    n = name()
    # (a job that outlives any lateness of execd's limit: it starts the clock when its loop first
    # sees the job started, and in CI run 13, under both cells' load, a sleep 60 ended on its own)
    job = qsub("-q", "debug", "-N", n, "-l", "h_rt=0:0:3", "-b", "y", "-o", "/dev/null", "-j", "y",
               "/bin/sleep", "600")
    wait_state(job, "TIMEOUT", timeout=240)
    assert snakemake_view(n) == {str(job): "TIMEOUT"}
    cp = run("sacct", "-n", "-P", "-j", str(job), "-o", "JobID,State,ExitCode,Timelimit")
    assert cp.stdout.splitlines()[0] == f"{job}|TIMEOUT|0:0|00:01:00"  # Slurm keeps limits in whole minutes


def test_cancelled_while_running():
    n = name()
    job = qsub("-q", "debug", "-N", n, "-b", "y", "-o", "/dev/null", "-j", "y", "/bin/sleep", "300")
    wait_running(job)
    assert submitit_view(job)[str(job)]["State"] == "RUNNING"
    cp = run("scancel", str(job))
    assert cp.returncode == 0, cp.stderr
    row = wait_state(job, "CANCELLED")
    assert row["State"] == "CANCELLED by 0"
    assert snakemake_view(n) == {str(job): "CANCELLED by 0"}


@pytest.mark.ocs
def test_a_raw_qdel_is_cancelled_by_whoever_deleted_it(plain_user):
    """Open Cluster Scheduler 9.x's accounting.jsonl says who deleted a job (``deleted_by``): a
    plain user's own qdel, with no cancel event of the shim's, is Slurm's ``CANCELLED by <uid>``
    (sacct's print.c: a cancelled job's state with the uid that cancelled it), not a guess."""
    import pwd

    n = name()
    cp = run("qsub", "-terse", "-q", "debug", "-N", n, "-b", "y", "-o", "/dev/null", "-j", "y", "/bin/sleep", "300",
             user=plain_user, cwd="/tmp")
    assert cp.returncode == 0, cp.stderr
    job = int(cp.stdout.strip())
    wait_running(job)
    cp = run("qdel", str(job), user=plain_user)
    assert cp.returncode == 0, cp.stderr
    row = wait_state(job, "CANCELLED")
    assert row["State"] == f"CANCELLED by {pwd.getpwnam(plain_user).pw_uid}"
    assert snakemake_view(n) == {str(job): row["State"]}


def test_cancelled_while_pending():
    n = name()
    job = qsub("-q", "debug", "-N", n, "-h", "-b", "y", "-o", "/dev/null", "-j", "y", "/bin/true")
    row = submitit_view(job)[str(job)]
    assert (row["State"], row["NodeList"]) == ("PENDING", "None assigned")
    cp = run("scancel", str(job))
    assert cp.returncode == 0, cp.stderr
    row = wait_state(job, "CANCELLED", timeout=30)
    assert (row["State"], row["NodeList"]) == ("CANCELLED by 0", "None assigned")
    assert snakemake_view(n) == {str(job): "CANCELLED by 0"}
    # Grid Engine keeps no accounting record of it: the row comes from scancel's event
    assert run("qacct", "-j", str(job)).returncode != 0


# ---------------------------------------------------------------------------------------------
# jobs submitted with the shim's sbatch


def test_sbatch_jobs_terminal_states(workdir):
    n = name()
    ok = sbatch("-J", n, "-o", "/dev/null", "--wrap", "true", cwd=workdir)
    three = sbatch("-J", n, "-o", "/dev/null", "--wrap", "exit 3", cwd=workdir)
    hundred = sbatch("-J", n, "-o", "/dev/null", "--wrap", "exit 100", cwd=workdir)
    held = sbatch("-J", n, "-H", "-o", "/dev/null", "--wrap", "true", cwd=workdir)
    running = sbatch("-J", n, "-o", "/dev/null", "--wrap", "sleep 300", cwd=workdir)
    wait_state(ok, "COMPLETED")
    wait_state(three, "FAILED")
    wait_state(hundred, "FAILED")  # the wrapper remaps 100 for Grid Engine; sacct shows the real code
    wait_running(running)
    assert run("scancel", str(held), str(running)).returncode == 0
    wait_state(held, "CANCELLED", timeout=30)
    wait_state(running, "CANCELLED")
    view = snakemake_view(n)
    assert view == {str(ok): "COMPLETED", str(three): "FAILED", str(hundred): "FAILED",
                    str(held): "CANCELLED by 0", str(running): "CANCELLED by 0"}
    cp = run("sacct", "-n", "-P", "-X", "-j", f"{three},{hundred}", "-o", "JobID,JobName,ExitCode,Account")
    assert cp.stdout.splitlines() == [f"{three}|{n}|3:0|", f"{hundred}|{n}|100:0|"]


def test_array_tasks(workdir):
    n = name()
    job = sbatch("-J", n, "-o", "/dev/null", "--array=0-2", "--wrap", "exit $SLURM_ARRAY_TASK_ID", cwd=workdir)

    def all_done():
        v = submitit_view(job)
        return v if len(v) == 3 and all(r["State"] in TERMINAL for r in v.values()) else None

    v = wait_until(all_done, 90, f"array {job} to finish")
    assert {k: r["State"] for k, r in v.items()} == {
        f"{job}_0": "COMPLETED", f"{job}_1": "FAILED", f"{job}_2": "FAILED"}
    cp = run("sacct", "-n", "-P", "-X", "-j", f"{job}_2", "-o", "JobID,ExitCode")
    assert cp.stdout == f"{job}_2|2:0\n"


def test_accounting_override_and_errors(tmp_path):
    f = tmp_path / "acct"
    f.write_text("# Version: 8.1.9\n")
    cp = run("sacct", "-j", "1", env={"SLURM_SHIM_ACCOUNTING": str(f)})
    assert cp.returncode == 0 and cp.stdout.startswith("JobID")
    cp = run("sacct", "-o", "NoSuchField")
    assert (cp.returncode, cp.stderr) == (1, 'sacct: error: Invalid field requested: "NoSuchField"\n')
    cp = run("sacct", "-j", "abc")
    assert (cp.returncode, cp.stderr) == (1, "sacct: fatal: Bad job/step specified: abc\n")
    assert re.match(r"JobID +JobName", run("sacct", "-X").stdout)
