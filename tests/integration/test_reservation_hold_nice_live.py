"""Brief S5-X on the live Grid Engine: a job's reservation in squeue and scontrol (Slurm's
squeue _print_job_reservation / slurm_sprint_job_info's Reservation= line), scontrol hold/release
by Name= only (update_job.c scontrol_hold), and doctor's word on --nice under weight_priority 0.
Jobs are held and deleted at the end; the advance reservation is removed."""

from __future__ import annotations

import re

import pytest

from conftest import run, wait_until

pytestmark = pytest.mark.gridengine

SLEEP = ["-b", "y", "/bin/sleep", "300"]


def test_a_jobs_reservation_in_squeue_and_scontrol(reservation, jobs, workdir):
    name, ar = reservation
    inside = jobs.qsub("inar", "-ar", ar, "-h", *SLEEP)  # a raw qsub job in the reservation, held
    outside = jobs.qsub("noar", "-q", "debug", "-h", *SLEEP)
    cp = run("sbatch", f"--reservation={name}", "-H", "-J", "s5xresv", "--wrap", "sleep 300", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    shim_job = re.fullmatch(r"Submitted batch job (\d+)\n", cp.stdout).group(1)
    try:
        cp = run("squeue", "-h", "-j", f"{inside},{outside},{shim_job}", "-o", "%i %v")
        assert cp.returncode == 0, cp.stderr
        assert dict(ln.split() for ln in cp.stdout.splitlines()) == {inside: name, outside: "(null)", shim_job: name}
        cp = run("squeue", "-h", "-R", name, "-o", "%i")
        assert sorted(cp.stdout.split()) == sorted([inside, shim_job]), cp.stdout
        cp = run("squeue", "-h", "-j", shim_job, "-O", "jobid,reservation")
        assert cp.stdout.split() == [shim_job, name]
        for job in (inside, shim_job):
            out = run("scontrol", "show", "job", job).stdout
            lines = out.splitlines()
            assert f"   Reservation={name}" in lines, out
            i = lines.index(f"   Reservation={name}")
            assert lines[i - 1].startswith("   Features=") and lines[i + 1].startswith("   OverSubscribe=")
        assert "Reservation=" not in run("scontrol", "show", "job", outside).stdout
    finally:
        run("scancel", shim_job)


def test_hold_and_release_by_name_only(jobs):
    a = jobs.qsub("named", "-q", "debug", "-h", *SLEEP)
    name = jobs.name("named")
    cp = run("scontrol", "release", name)  # a bare word: Slurm's invalid job id, nothing released
    assert (cp.returncode, cp.stdout, cp.stderr) == (
        1, "", f"Invalid job id specified for job {name}\nslurm_suspend error: Invalid job id specified\n")
    assert "h" in jobs.ge_state(a)
    cp = run("scontrol", "hold", "Name=nosuch-s5x")  # a name no job has: nothing to do, no error
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", "")
    cp = run("scontrol", "release", f"JobName={name}")
    assert (cp.returncode, cp.stderr) == (0, "")
    wait_until(lambda: "h" not in jobs.ge_state(a), 30, f"job {a} released")
    cp = run("scontrol", "requeue", name)
    assert (cp.returncode, cp.stderr) == (1, f"Invalid job id specified for job {name}\n")


def test_doctor_says_when_nice_cannot_order_jobs():
    sconf = run("qconf", "-ssconf").stdout
    weight = float(re.search(r"^weight_priority\s+(\S+)", sconf, re.M).group(1))
    out = run("slurm-shim", "doctor", "--no-hosts", timeout=120).stdout
    if weight == 0:
        assert re.search(r"^warn  scheduler: weight_priority is 0: --nice", out, re.M), out
    else:
        assert re.search(r"^ok    scheduler: weight_priority is \S+: --nice orders pending jobs$", out, re.M), out


def test_srun_pty_on_a_descriptor_that_is_no_terminal_runs_without_one(tmp_path):
    """srun --pty=<fd> whose fd is a file (23.02's set_winsize fails): Slurm's two errors, and the
    command still runs, without a terminal."""
    import subprocess

    from conftest import shim_env

    f = tmp_path / "not-a-tty"
    f.write_text("")
    with open(f) as fh:
        fd = fh.fileno()
        cp = subprocess.run(["srun", f"--pty={fd}", "sh", "-c", "tty; echo ran"], env=shim_env(), cwd="/tmp",
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90, pass_fds=(fd,))
    assert cp.stderr.startswith("srun: error: ioctl(TIOCGWINSZ): Inappropriate ioctl for device\n"
                                f"srun: error: Not using a pseudo-terminal, disregarding --pty={fd} option\n"), cp.stderr
    assert (cp.returncode, cp.stdout) == (0, "not a tty\nran\n"), cp.stderr


def test_a_task_the_array_has_not(workdir):
    """scontrol_print_job: ``G_t`` of a task the array has not is "Job G_t not found" (stdout);
    the task's own id (t*10^10+G) names a job the controller does not know. The job verbs name
    the id as typed ("%s for job %s")."""
    cp = run("sbatch", "--array=1-2", "-H", "-J", "s5xarr", "--wrap", "true", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    g = re.fullmatch(r"Submitted batch job (\d+)\n", cp.stdout).group(1)
    own = str(9 * 10**10 + int(g))
    try:
        cp = run("scontrol", "show", "job", f"{g}_9")
        assert (cp.returncode, cp.stdout, cp.stderr) == (1, f"Job {g}_9 not found\n", "")
        cp = run("scontrol", "show", "job", own)
        assert (cp.returncode, cp.stdout, cp.stderr) == (1, "", "slurm_load_jobs error: Invalid job id specified\n")
        cp = run("scontrol", "release", own)
        assert (cp.returncode, cp.stderr) == (
            1, f"Invalid job id specified for job {own}\nslurm_suspend error: Invalid job id specified\n")
        cp = run("scontrol", "update", f"JobId={g}_9", "Comment=x")
        assert (cp.returncode, cp.stderr) == (1, f"Invalid job id specified for job {g}_9\n")
        assert run("scontrol", "show", "job", str(2 * 10**10 + int(g))).stdout.startswith(
            f"JobId={2 * 10**10 + int(g)} ArrayJobId={g} ArrayTaskId=2 ")
    finally:
        run("scancel", g)
