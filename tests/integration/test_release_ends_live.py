"""How a batch job ends, per release (issue 30), on the live cell with a private copy of its site
config naming the release (the cell's own config is never changed): a shell killed by SIGKILL is
FAILED 0:9 with reason JobLaunchFailure on 22.05 and RaisedSignal:9(Killed) after; a missing
working directory with the default output fails the launch on 22.05 (0:53, nothing written) and
runs on 24.11 and 26.05, whose slurmstepd makes the output file's directory; so does a missing
-o directory. As real Slurm answered: fixtures/slurm-*/oracle-ends.txt (unit side:
tests/unit/test_releases_ends.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run, wait_until

pytestmark = pytest.mark.gridengine

RELEASES = ("22.05", "24.11", "26.05")


def submit(env: dict[str, str], cwd: Path, *argv: str) -> str:
    cp = run("sbatch", "--parsable", *argv, cwd=cwd, env=env)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout.strip()


def ended(env: dict[str, str], job: str) -> str:
    """squeue -t all's ``%T|%r`` of the job once it has ended."""
    def state():
        out = run("squeue", "-h", "-t", "all", "-j", job, "-o", "%T|%r", env=env).stdout.strip()
        return out if out.split("|")[0] in ("FAILED", "COMPLETED") else None
    return wait_until(state, 120, f"job {job} to end")


def sacct_rows(env: dict[str, str], job: str, count: int) -> list[str]:
    def rows():
        out = run("sacct", "-n", "-P", "-j", job, "-o", "JobID,State,ExitCode", env=env).stdout.splitlines()
        return out if len(out) >= count else None
    return wait_until(rows, 120, f"sacct's rows of job {job}")


@pytest.mark.parametrize("release", RELEASES)
def test_a_shell_killed_by_sigkill(release_config, tmp_path, release):
    env = release_config(release)
    job = submit(env, tmp_path, "-o", str(tmp_path / "k.out"), "--wrap", "echo before; kill -9 $$")
    reason = "JobLaunchFailure" if release == "22.05" else "RaisedSignal:9(Killed)"
    assert ended(env, job) == f"FAILED|{reason}"
    show = run("scontrol", "show", "job", job, env=env).stdout
    assert f"JobState=FAILED Reason={reason} " in show and "ExitCode=0:9" in show
    assert sacct_rows(env, job, 2)[:2] == [f"{job}|FAILED|0:9", f"{job}.batch|CANCELLED|0:9"]
    assert (tmp_path / "k.out").read_text() == "before\n"


@pytest.mark.parametrize("release", RELEASES)
def test_a_missing_working_directory_with_the_default_output(release_config, tmp_path, release):
    env = release_config(release)
    gone = tmp_path / "gone"
    job = submit(env, tmp_path, "-D", str(gone), "--wrap", "pwd; echo ran")
    if release == "22.05":
        assert ended(env, job) == "FAILED|JobLaunchFailure"
        assert sacct_rows(env, job, 2)[:2] == [f"{job}|FAILED|0:53", f"{job}.batch|CANCELLED|0:53"]
        assert not gone.exists()
    else:
        assert ended(env, job) == "COMPLETED|None"
        assert (gone / f"slurm-{job}.out").read_text() == f"{gone}\nran\n"


@pytest.mark.parametrize("release", RELEASES)
def test_a_missing_output_directory(release_config, tmp_path, release):
    env = release_config(release)
    job = submit(env, tmp_path, "-o", "nodir/sub/x.out", "--wrap", "echo hi")
    if release == "22.05":
        assert ended(env, job) == "FAILED|JobLaunchFailure"
        assert not (tmp_path / "nodir").exists()
    else:
        assert ended(env, job) == "COMPLETED|None"
        assert (tmp_path / "nodir" / "sub" / "x.out").read_text() == "hi\n"
