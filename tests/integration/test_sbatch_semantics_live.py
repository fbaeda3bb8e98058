"""Slurm semantics Grid Engine lacks, emulated and checked on the live cluster: 0-based and
comma-list arrays, afterok/afternotok, --wait exit codes, exit codes 99/100, time limits with
SIGTERM first, output patterns, a missing output directory, --open-mode."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import job_array, run, wait_until

pytestmark = pytest.mark.gridengine


def sbatch(*argv, cwd, input=None, check=True):
    cp = run("sbatch", "--parsable", *argv, cwd=cwd, input=input)
    if check:
        assert cp.returncode == 0, cp.stderr
        return int(cp.stdout.strip())
    return cp


def read_when(path: Path, marker: str = "", timeout: float = 60) -> str:
    wait_until(lambda: path.exists() and marker in path.read_text(), timeout, f"{path.name} with {marker!r}")
    return path.read_text()


def gone(job: int) -> bool:
    return run("qstat", "-j", str(job)).returncode != 0


def test_zero_based_stepped_and_listed_arrays_see_slurms_indices(workdir):
    """SLURM_ARRAY_TASK_* as slurmctld's _create_job_array sets them (job_mgr.c): COUNT, MIN, MAX of
    the indices, and STEP the number after the text's first ':' (2 here, from 10-14:2)."""
    job = sbatch("--array=0,3,10-14:2", "-o", "a_%A_%a.out", "--wrap", "echo idx=$SLURM_ARRAY_TASK_ID "
                 "n=$SLURM_ARRAY_TASK_COUNT min=$SLURM_ARRAY_TASK_MIN max=$SLURM_ARRAY_TASK_MAX "
                 "step=$SLURM_ARRAY_TASK_STEP", cwd=workdir)
    for idx in (0, 3, 10, 12, 14):
        text = read_when(workdir / f"a_{job}_{idx}.out", "idx=")
        assert text.strip() == f"idx={idx} n=5 min=0 max=14 step=2"


def test_array_throttle_becomes_tc(workdir):
    job = sbatch("--array=1-4%2", "-H", "--wrap", "true", cwd=workdir)
    assert job_array(job) == ((1, 4, 1), 2)
    run("qdel", str(job))


def test_wait_returns_the_jobs_exit_code(workdir):
    cp = run("sbatch", "--wait", "--wrap", "exit 3", cwd=workdir, timeout=120)
    assert cp.returncode == 3
    assert re.fullmatch(r"Submitted batch job \d+\n", cp.stdout)


def test_exit_100_is_a_failure_not_an_error_state(workdir):
    cp = run("sbatch", "--wait", "--wrap", "exit 100", cwd=workdir, timeout=120)
    assert cp.returncode == 100
    job = int(cp.stdout.split()[-1])
    wait_until(lambda: gone(job), 30, "the job to leave Grid Engine (never parked in Eqw)")


def test_afterok_runs_after_success_and_never_after_failure(workdir):
    ok = sbatch("--wrap", "sleep 1; exit 0", cwd=workdir)
    bad = sbatch("--wrap", "sleep 1; exit 3", cwd=workdir)
    after_ok = sbatch(f"--dependency=afterok:{ok}", "-o", "dep_ok.out", "--wrap", "echo ran", cwd=workdir)
    after_bad = sbatch(f"--dependency=afterok:{bad}", "-o", "dep_bad.out", "--wrap", "echo ran", cwd=workdir)
    notok = sbatch(f"--dependency=afternotok:{bad}", "-o", "dep_notok.out", "--wrap", "echo ran", cwd=workdir)
    assert read_when(workdir / "dep_ok.out", "ran")
    assert read_when(workdir / "dep_notok.out", "ran")
    wait_until(lambda: gone(after_bad), 60, "the afterok job on a failed job to end")
    assert not (workdir / "dep_bad.out").exists()
    del after_ok, notok


def test_time_limit_sends_sigterm_first(workdir):
    script = "#!/bin/bash\ntrap 'echo got-TERM; exit 0' TERM\necho started\nsleep 300 & wait\n"
    (workdir / "limit.sh").write_text(script)
    # --time=0:02 is 2 seconds, which Slurm rounds up to a minute; use a short limit via -t 1
    job = sbatch("-t", "1", "-o", "limit.out", "limit.sh", cwd=workdir)
    text = read_when(workdir / "limit.out", "got-TERM", timeout=150)
    assert "started" in text
    wait_until(lambda: gone(job), 60, "job end")


def test_output_patterns_and_padding(workdir):
    job = sbatch("-J", "xx", "-o", "o_j%j_x%x_u%u_N%N_n%n_t%t_s%s_%%_%5j.out", "--wrap", "echo hi", cwd=workdir)
    host = run("hostname").stdout.strip().split(".")[0]
    user = run("id", "-un").stdout.strip()
    name = f"o_j{job}_xxx_u{user}_N{host}_n0_t0_sbatch_%_{job:05d}.out"
    assert read_when(workdir / name, "hi")


def test_separate_stderr_and_append_mode(workdir):
    (workdir / "app.out").write_text("previous\n")
    sbatch("-o", "app.out", "-e", "app.err", "--open-mode=append", "--wrap", "echo out; echo err >&2", cwd=workdir)
    assert read_when(workdir / "app.out", "out") == "previous\nout\n"
    assert read_when(workdir / "app.err", "err") == "err\n"


def test_missing_output_directory_fails_the_job_without_blocking_grid_engine(workdir):
    job = sbatch("-o", "nodir/x.out", "--wrap", "echo hi", cwd=workdir)
    wait_until(lambda: gone(job), 60, "job to leave Grid Engine (no Eqw)")
    assert not (workdir / "nodir").exists()


def test_chdir_puts_default_output_in_the_working_directory(workdir):
    (workdir / "sub").mkdir()
    job = sbatch("-D", "sub", "--wrap", "pwd", cwd=workdir)
    assert read_when(workdir / "sub" / f"slurm-{job}.out", "sub").strip() == str(workdir / "sub")
