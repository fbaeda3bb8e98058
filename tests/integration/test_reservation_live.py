"""--reservation on the live Grid Engine (issue 15 part 5): a real advance reservation made with
qrsub -N (its access list: root and the plain test user), found with qrstat, and the job submitted
into it with -ar runs there; Slurm's refusals (reservation.c _valid_job_access_resv: "Requested
reservation is invalid" for a name none has, "Access denied to requested reservation" for a user
its list leaves out) queue nothing. The reservation is removed at the end."""

from __future__ import annotations

import os
import re

import pytest

from conftest import run, wait_until

pytestmark = pytest.mark.gridengine


# reservation (an advance reservation of its own per test, removed after): tests/integration/conftest.py


def test_job_runs_in_the_named_reservation(reservation, workdir, plain_user):
    name, ar = reservation
    # held first: an echo job may be gone from qstat before it is looked at
    cp = run("sbatch", "-H", f"--reservation={name}", "-J", "inresv", "--wrap", "echo in-reservation",
             cwd=workdir, user=plain_user)
    assert cp.returncode == 0, cp.stderr
    job = re.fullmatch(r"Submitted batch job (\d+)\n", cp.stdout).group(1)
    detail = run("qstat", "-j", job).stdout
    assert re.search(rf"^ar_id:\s+{ar}$", detail, re.M), detail
    cp = run("scontrol", "release", job, user=plain_user)
    assert cp.returncode == 0, cp.stderr
    out = workdir / f"slurm-{job}.out"
    wait_until(lambda: out.exists() and "in-reservation" in out.read_text(), 90, f"job {job} to run in the reservation")


def test_unknown_reservation_is_invalid(workdir):
    tag = f"w7noresv{os.getpid()}"
    cp = run("sbatch", "--reservation=nosuchresv", "-J", tag, "--wrap", "true", cwd=workdir)
    assert (cp.returncode, cp.stdout, cp.stderr) == (
        1, "", "sbatch: error: Batch job submission failed: Requested reservation is invalid\n")
    assert f"<JB_name>{tag}</JB_name>" not in run("qstat", "-u", "*", "-xml").stdout  # nothing queued


def test_reservation_of_others_is_access_denied(reservation, workdir, other_user):
    name, _ar = reservation
    cp = run("sbatch", f"--reservation={name}", "--wrap", "true", cwd=workdir, user=other_user)
    assert (cp.returncode, cp.stdout, cp.stderr) == (
        1, "", "sbatch: error: Batch job submission failed: Access denied to requested reservation\n")


def test_srun_into_the_reservation(reservation, plain_user):
    name, _ar = reservation
    cp = run("srun", f"--reservation={name}", "echo", "srun-in-resv", user=plain_user, cwd="/tmp", timeout=90)
    assert (cp.returncode, cp.stdout) == (0, "srun-in-resv\n"), cp.stderr
    cp = run("srun", "--reservation=nosuchresv", "true", cwd="/tmp")
    assert (cp.returncode, cp.stderr) == (1, "srun: error: Unable to allocate resources: Requested reservation is invalid\n")


def test_scontrol_names_a_raw_jobs_reservation(reservation, workdir):
    """A job submitted with Grid Engine's own qsub -ar: scontrol show job reads its advance
    reservation from Grid Engine's detail of the job (JB_ar) and names it (Reservation=); a raw job
    without one has no Reservation= line (and scontrol asks no qrstat for it)."""
    name, ar = reservation
    inside = run("qsub", "-terse", "-h", "-ar", ar, "-q", "debug", "-N", "rawresv", "-b", "y", "/bin/true",
                 cwd=workdir).stdout.strip()
    outside = run("qsub", "-terse", "-h", "-N", "rawnoresv", "-b", "y", "/bin/true", cwd=workdir).stdout.strip()
    try:
        assert inside.isdigit() and outside.isdigit(), (inside, outside)
        cp = run("scontrol", "show", "job", inside)
        assert cp.returncode == 0 and f"   Reservation={name}\n" in cp.stdout, cp.stdout + cp.stderr
        cp = run("scontrol", "show", "job", outside)
        assert cp.returncode == 0 and "JobName=rawnoresv" in cp.stdout and "Reservation=" not in cp.stdout, cp.stdout
        cp = run("squeue", "-h", "-j", f"{inside},{outside}", "-o", "%i %v")
        assert sorted(cp.stdout.split("\n")[:-1]) == sorted([f"{inside} {name}", f"{outside} (null)"]), cp.stdout
    finally:
        run("qdel", inside, outside)
