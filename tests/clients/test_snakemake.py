"""Snakemake with snakemake-executor-plugin-slurm (their PyPI releases, unmodified) on the shim.

The plugin submits `sbatch --parsable --job-name <run id> ... -p -t --mem --cpus-per-task -D
--wrap="python -m snakemake ... --executor slurm-jobstep"`, polls `sacct -X --parsable2 --format=
JobIdRaw,State --name <run id>` or `squeue --format=%i|%T --states=all --name <run id>`, and inside
the job the jobstep plugin strips every SLURM_* variable but the job id and runs the rule through
`srun -n1 --cpu-bind=q --cpus-per-task=N ...` (array tasks: directly, without srun)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from .conftest import job_python, require, sacct_rows, tail

pytestmark = pytest.mark.gridengine

WORKFLOWS = Path(__file__).parent / "workflows"
RUN = 300  # seconds for a whole workflow (3 jobs, 2 of them in parallel) on a busy 2-core host
FAST = ["--slurm-init-seconds-before-status-checks", "1", "--latency-wait", "10"]


def snakemake(workdir: Path, env: dict[str, str], reaper, *args: str, snakefile: str = "Snakefile"):
    """Run snakemake as its users do (a command in the workflow directory); return (rc, log, run id)."""
    require("snakemake", "snakemake_executor_plugin_slurm", "snakemake_executor_plugin_slurm_jobstep")
    shutil.copy(WORKFLOWS / snakefile, workdir / "Snakefile")
    log = workdir / "snakemake.out"
    argv = [job_python(), "-m", "snakemake", "--executor", "slurm", "--jobs", "4", *FAST, *args]
    with open(log, "wb") as out:
        p = subprocess.Popen(argv, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = p.wait(timeout=RUN)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
            rc = None
    text = log.read_text(errors="replace")
    m = re.search(r"SLURM run ID: (\S+)", text)
    run_id = m.group(1) if m else None
    if run_id:
        reaper.add_name(run_id)
    if rc is None:
        pytest.fail(f"snakemake did not finish in {RUN} s:\n{text[-6000:]}")
    assert run_id, text[-6000:]
    return rc, text, run_id


def accounting(run_id: str) -> list[dict[str, str]]:
    return sacct_rows("-X", "--name", run_id, "-S", "now-1days",
                      "-o", "JobID,JobName,Partition,ReqMem,Timelimit,AllocCPUS,State,ExitCode,Comment")


def job_logs(workdir: Path) -> str:
    return "\n".join(f"== {p}\n{tail(p)}" for p in sorted((workdir / ".snakemake").rglob("slurm_logs/**/*.log")))


@pytest.mark.parametrize("status,array", [("sacct", False), ("squeue", False), ("sacct", True), ("squeue", True)],
                         ids=["sacct", "squeue", "array-sacct", "array-squeue"])
def test_workflow_with_resources_runs_to_completion(client_env, workdir, reaper, status, array):
    extra = ["--slurm-status-command", status] + (["--slurm-array-jobs", "make"] if array else [])
    rc, text, run_id = snakemake(workdir, client_env, reaper, *extra)
    assert rc == 0, text[-6000:] + job_logs(workdir)
    assert "3 of 4 steps (75%) done" in text and "4 of 4 steps (100%) done" in text

    rows = accounting(run_id)
    make = [r for r in rows if r["Comment"].startswith("rule_make")]
    [merge] = [r for r in rows if r["Comment"] == "rule_merge"]
    assert len(make) == 2, rows
    for r in make:
        assert (r["JobName"], r["Partition"], r["Timelimit"], r["AllocCPUS"], r["State"], r["ExitCode"]) == \
            (run_id, "debug", "00:05:00", "2", "COMPLETED", "0:0"), r
        assert r["ReqMem"] in ("200M", "201M"), r  # array jobs: the plugin adds 1 MB per array payload
    assert (merge["Partition"], merge["ReqMem"], merge["Timelimit"], merge["AllocCPUS"], merge["State"]) == \
        ("gpu", "100M", "00:03:00", "1", "COMPLETED"), merge

    lines = sorted((workdir / "out" / "merged.txt").read_text().splitlines())
    ids = {r["JobID"] for r in make}
    if array:
        # one array job, tasks 1 and 2 (the plugin's indices); the first task runs the rule without
        # srun, in the plugin's stripped environment, so it has no SLURM_CPUS_PER_TASK
        [base] = {i.split("_")[0] for i in ids}
        assert ids == {f"{base}_1", f"{base}_2"}, ids
        # each task is a job of its own (SLURM_JOB_ID: t * 10**10 + the array's id, docs/array-ids.md)
        # that ran one sample: the plugin promises one rule instance a task, not which task gets which
        # (its order of the instances is its own, and differed between runs)
        got = [line.split()[:2] for line in lines]
        assert sorted(s for s, _ in got) == ["a", "b"], lines
        assert sorted(int(j.removeprefix("job=")) for _, j in got) == [10**10 + int(base), 2 * 10**10 + int(base)], lines
    else:
        # each rule ran through `srun -n1 --cpus-per-task=2` from an environment stripped to SLURM_JOB_ID
        assert lines == sorted(f"{r['Comment'][-1]} job={r['JobID']} cpus=2" for r in make), lines


def test_failing_rule_is_reported_failed(client_env, workdir, reaper):
    rc, text, run_id = snakemake(workdir, client_env, reaper, "--keep-going", snakefile="failing.smk")
    assert rc == 1, text[-6000:]
    assert re.search(r"Error in rule bad:\n\s+message: SLURM-job '\d+' failed, SLURM status is: 'FAILED'", text), \
        text[-6000:]
    assert "Finished jobid: 1 (Rule: ok)" in text or "(Rule: ok)" in text
    assert (workdir / "out" / "ok.txt").read_text() == "fine\n"
    assert not (workdir / "out" / "bad.txt").exists()
    states = {r["Comment"]: (r["State"], r["ExitCode"]) for r in accounting(run_id)}
    # the rule exited 3; snakemake inside the job reports it and exits 1
    assert states == {"rule_ok": ("COMPLETED", "0:0"), "rule_bad": ("FAILED", "1:0")}, states
