"""A site that names a newer Slurm release (issue 30): on the live cell, with a private copy of the
site config that adds ``[slurm] release``, a job's environment carries SLURM_JOB_START_TIME and
SLURM_JOB_END_TIME as that release sets them, and ``squeue --only-job-state`` answers. The
cell's own config (22.05 by default) is never changed: only the commands given the copy follow it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import run, wait_until

pytestmark = pytest.mark.gridengine


def env_of(out: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)


@pytest.mark.parametrize("release, version", [("24.11", "24.11.5"), ("26.05", "26.05.5")])
def test_a_job_of_a_newer_release_sees_its_end_time_and_squeue_answers_only_states(
        release_config, tmp_path, release, version):
    env = release_config(release)
    assert run("sbatch", "--version", env=env).stdout == f"slurm-wlm {version}\n"
    out = tmp_path / "job.out"
    go = tmp_path / "go"  # the job runs until the test has asked squeue about it
    cp = run("sbatch", "--parsable", "-t", "10", "-c", "2", "-o", str(out), "--wrap",
             f"env | sort; echo == end; while [ ! -e {go} ]; do sleep 0.2; done", cwd=tmp_path, env=env)
    assert cp.returncode == 0, cp.stderr
    job = cp.stdout.strip()
    try:
        wait_until(lambda: out.exists() and "== end" in out.read_text(), 90, f"job {job}'s environment")
        states = run("squeue", "--only-job-state", "-h", "-j", job, env=env)
        assert states.returncode == 0 and re.fullmatch(rf" +{job} +R\n", states.stdout), states
        go.touch()
        got = env_of(out)
        start = int(got["SLURM_JOB_START_TIME"])
        assert int(got["SLURM_JOB_END_TIME"]) == start + 600  # the 10-minute limit
        assert got["SLURM_TRES_PER_TASK"] == "cpu=2" and got["SLURM_OOM_KILL_STEP"] == "0"
        assert "SLURM_NODE_ALIASES" not in got
        assert ("SLURM_JOB_SLUID" in got) == (release == "26.05")
        assert (got.get("SLURM_STEP_ID"), got.get("SLURM_JOB_EXCLUSIVE")) == (
            ("-5", "NO") if release == "26.05" else (None, None))
    finally:
        run("scancel", job, env=env)


def test_the_cells_own_config_stays_22_05():
    """The cell's own config (scripts/setup names 22.05, the release the live suites compare
    with): 22.05's answers."""
    assert run("squeue", "--version").stdout == "slurm-wlm 22.05.8\n"
    cp = run("squeue", "--only-job-state")
    assert (cp.returncode, cp.stdout, cp.stderr) == (
        1, "", "squeue: unrecognized option '--only-job-state'\nTry \"squeue --help\" for more information\n")


# the whole environment of a few reference option sets, per release, as test_job_env_live compares
# 22.05's: every SLURM_* variable that release set, equal after ids and paths are ours
ENV_CASES = ("plain", "cpus_per_task2", "time10", "license_matlab1", "ntasks2")
# (test_job_env_live's: what a job's environment is compared on, and what that cluster's config decides)
COMPARED = re.compile(r"^(SLURM_\w+|SLURMD_NODENAME|ENVIRONMENT|HOSTNAME|USER|LOGNAME|SHELL|MYVAR)$")
CONFIG_DEPENDENT = {"SLURM_CONF", "SLURM_WORKING_CLUSTER", "TMPDIR", "SLURM_TASK_PID", "_", "SHLVL", "OLDPWD"}
TIMES = {"SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME", "SLURM_JOB_SLUID"}


def reference_env(release: str, case: str) -> dict[str, str]:
    from conftest import FIXTURES

    text = (FIXTURES / f"slurm-{release}" / f"env-sbatch-{case}.txt").read_text()
    body = text.split("== env\n", 1)[1].split("== end", 1)[0]
    return dict(line.split("=", 1) for line in body.splitlines() if "=" in line)


@pytest.mark.parametrize("release", ["24.11", "26.05"])
def test_the_jobs_environment_is_the_releases(release_config, tmp_path, release):
    import json

    from conftest import FIXTURES

    env = release_config(release)
    submit = json.loads((FIXTURES / f"slurm-{release}" / "env-sbatch-submit-args.json").read_text())
    submit_env = dict(kv.split("=", 1) for kv in submit["submit_env"])
    submit_env["PATH"] = f"{run('sh', '-c', 'dirname $(command -v sbatch)').stdout.strip()}:{submit_env['PATH']}"
    submit_env.update(env)
    jobs = {}
    (tmp_path / "envdump.sh").write_text("#!/bin/bash\nenv | sort\necho == end\n")  # (the reference's name)
    for case in ENV_CASES:
        argv = submit["cases"][case].split()
        cp = run("env", "-i", *(f"{k}={v}" for k, v in submit_env.items()), "sbatch", "--parsable",
                 "-o", str(tmp_path / f"{case}.out"), *argv, "envdump.sh", cwd=tmp_path)
        assert cp.returncode == 0, (case, cp.stderr)
        jobs[case] = cp.stdout.strip()
    outs = {case: tmp_path / f"{case}.out" for case in ENV_CASES}
    wait_until(lambda: all(o.exists() and "== end" in o.read_text() for o in outs.values()), 120,
               f"the env dumps of jobs {sorted(jobs.values())}")
    for case in ENV_CASES:
        ref = reference_env(release, case)
        got = env_of(outs[case])
        compared = {k for k in ref if COMPARED.match(k)} - CONFIG_DEPENDENT - TIMES - {"SLURM_JOB_ACCOUNT", "PWD",
                                                                                       "HOME", "SLURM_SUBMIT_DIR"}
        want = {k: ref[k].replace(ref["SLURM_JOB_ID"], jobs[case]) for k in compared}
        assert {k: got.get(k) for k in compared} == want, case
        extra = {k for k in got if k.startswith("SLURM_") and not k.startswith("SLURM_SHIM_")} - set(ref)
        assert extra - CONFIG_DEPENDENT == set(), case
        assert TIMES & set(ref) <= set(got), case
        limit = int(ref["SLURM_JOB_END_TIME"]) - int(ref["SLURM_JOB_START_TIME"])
        assert int(got["SLURM_JOB_END_TIME"]) - int(got["SLURM_JOB_START_TIME"]) == limit, case


@pytest.mark.parametrize("release", ["24.11", "26.05"])
def test_sruns_own_job_has_the_releases_variables(release_config, tmp_path, release):
    """srun outside an allocation (its own job, its far side reading the private config as the job
    wrapper does): the SLURM_* names that release's `srun env | sort` printed, but those of that
    cluster's config, and the job's times."""
    import json

    from conftest import FIXTURES

    ref_case = json.loads((FIXTURES / f"slurm-{release}" / "cases.json").read_text())["srun_env_single"]
    ref = {line.split("=", 1)[0] for line in ref_case["stdout"].splitlines() if re.match(r"SLURM\w*=", line)}
    cp = run("srun", "env", cwd=tmp_path, env=release_config(release), timeout=120)
    assert cp.returncode == 0, cp.stderr
    got = env_of_text(cp.stdout)
    # that cluster's config (slurm.conf, default account) and this cell's (MpiDefault=pmi2, the shim's own)
    local = {"SLURM_CONF", "SLURM_JOB_ACCOUNT", "SLURM_MPI_TYPE", "SLURM_SHIM_CONFIG"}
    # (and the shim's own knobs in the caller's environment, e.g. CI's SLURM_SHIM_SERVICE=off, which
    # reach the tasks as every variable of the caller's does)
    ours = {k for k in got if k.startswith("SLURM_SHIM_")}
    assert {k for k in got if k.startswith("SLURM")} - local - ours == ref - local
    assert int(got["SLURM_JOB_END_TIME"]) - int(got["SLURM_JOB_START_TIME"]) == 365 * 86400
    assert got["SLURM_JOB_GROUP"] == "root"


@pytest.mark.parametrize("release", ["24.11", "26.05"])
def test_sacct_prints_the_jobs_output_paths_as_the_release(release_config, tmp_path, release):
    """sacct's StdOut, StdErr, StdIn of a job sbatch gave no -o, -e or -i, and --expand-patterns,
    as real 24.11.5 and 26.05.5 printed them (fixtures/slurm-*/oracle-sacct-stdio.json, dflt_P and
    dflt_expand_P): 24.11 the default pattern under the working directory, 26.05 as it is; the
    expanded one is the file the job wrote."""
    env = release_config(release)
    cp = run("sbatch", "--parsable", "--wrap", "echo out", cwd=tmp_path, env=env)
    assert cp.returncode == 0, cp.stderr
    job = cp.stdout.strip()

    def ended() -> bool:
        return run("sacct", "-j", job, "-X", "-n", "-o", "State", env=env).stdout.strip() == "COMPLETED"

    wait_until(ended, 120, f"job {job} COMPLETED in sacct")
    fields = ["sacct", "-P", "-j", job, "-o", "JobID,StdOut,StdErr,StdIn"]
    pattern = f"{tmp_path}/slurm-%j.out" if release == "24.11" else "slurm-%j.out"
    got = run(*fields, env=env)
    assert (got.returncode, got.stdout) == (0, f"JobID|StdOut|StdErr|StdIn\n{job}|{pattern}||/dev/null\n{job}.batch|||\n")
    got = run(*fields[:1], "--expand-patterns", *fields[1:], env=env)
    out = tmp_path / f"slurm-{job}.out"
    assert got.stdout == f"JobID|StdOut|StdErr|StdIn\n{job}|{out}||/dev/null\n{job}.batch|||\n"
    assert out.read_text() == "out\n"


def env_of_text(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
