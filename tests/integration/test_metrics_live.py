"""A job's own metrics on the live Open Cluster Scheduler cell: the job appends lines to
$SLURM_SHIM_METRICS, the metrics epilog (the script cluster up --flavour ocs puts in the cell's common
directory) adds them to the shepherd's usage file, the cell's usage pattern puts them into
accounting.jsonl, and sacct shows them in AdminComment.

The epilog runs on a batch-only queue this module adds for its run (and removes): OCS 9.1.4 fails
every `qrsh -pty n` job (srun's) of a queue with an epilog, so no shared queue gets one (see
cluster_ocs.py). A private copy of the site config gives the queue a partition.

OCS only (SGE 8.1.9 has no usage patterns: there AdminComment stays empty, see the README).
Every wait is a bounded poll.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import SITE_CONFIG, run, wait_until
from shim.admin import cluster, cluster_ocs

pytestmark = [pytest.mark.gridengine, pytest.mark.ocs]

CELL = cluster_ocs.Cell()
QUEUE = "shim_metrics"
HOST = cluster.this_host()


def ocs(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([f"{CELL.bin_dir()}/{argv[0]}", *argv[1:]], capture_output=True, text=True,
                          env=CELL.env(), cwd="/", timeout=60)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """{"SLURM_SHIM_CONFIG": a copy of the cell's site config with partition ``metrics``}: the queue
    QUEUE (debug's settings, batch only, the metrics epilog), there for this module's tests."""
    d = tmp_path_factory.mktemp("metrics")
    attrs = cluster.parse_attrs(ocs("qconf", "-sq", "debug").stdout)
    attrs.update(qname=QUEUE, qtype="BATCH", slots="2", hostlist=HOST, epilog=cluster_ocs.epilog_conf(CELL))
    (d / QUEUE).write_text(cluster.render_attrs(attrs))
    assert Path(cluster_ocs.epilog_path(CELL)).exists(), "cluster up --flavour ocs writes the epilog script"
    cp = ocs("qconf", "-Aq", str(d / QUEUE))
    assert cp.returncode == 0, cp.stderr
    conf = d / "site.toml"
    conf.write_text(SITE_CONFIG.read_text() + f'\n[partitions.metrics]\nqueue = "{QUEUE}"\n')
    conf.chmod(0o644)
    d.chmod(0o755)
    try:
        wait_until(lambda: cluster.parse_queue_states(ocs("qstat", "-f", "-q", QUEUE).stdout).get(f"{QUEUE}@{HOST}") == "",
                   30, f"queue {QUEUE} ready")
        yield {"SLURM_SHIM_CONFIG": str(conf)}
    finally:
        wait_until(lambda: not ocs("qstat", "-u", "*", "-s", "rs", "-q", QUEUE).stdout.strip(), 60, f"{QUEUE} empty")
        assert ocs("qconf", "-dq", QUEUE).returncode == 0


SCRIPT = """#!/bin/sh
echo "tokens_in=1200" >> "$SLURM_SHIM_METRICS"
echo "tool_calls=2" >> "$SLURM_SHIM_METRICS"
echo "tokens_in=34" >> "$SLURM_SHIM_METRICS"
echo "cost_usd=0.25" >> "$SLURM_SHIM_METRICS"
echo "not a metric" >> "$SLURM_SHIM_METRICS"
echo "$SLURM_SHIM_METRICS"
"""


def _sacct(job: int, fields: str) -> list[str]:
    cp = run("sacct", "-j", str(job), "-n", "-P", "-o", fields)  # (the cell's own site config)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout.splitlines()


def _ended(job: int) -> list[str] | None:
    lines = _sacct(job, "JobID,State,AdminComment")
    return lines if lines and lines[0].split("|")[1] == "COMPLETED" else None


def _with_metrics(job: int) -> list[str] | None:
    lines = _sacct(job, "JobID,State,AdminComment")
    return lines if lines and lines[0].split("|")[2] else None


def test_a_jobs_metrics_reach_sacct(workdir, site):
    d = Path(workdir) / f"m{uuid.uuid4().hex[:8]}"
    d.mkdir(mode=0o777)
    (d / "job.sh").write_text(SCRIPT)
    cp = run("sbatch", "--parsable", "-p", "metrics", "-o", str(d / "out.txt"), str(d / "job.sh"), cwd=d, env=site)
    assert cp.returncode == 0, cp.stderr
    job = int(cp.stdout.strip().split(";")[0])
    wait_until(lambda: _ended(job), 90, f"sacct to show job {job} COMPLETED")
    # the wrapper's end event can come before Grid Engine's record: the metrics come with the record
    lines = wait_until(lambda: _with_metrics(job), 60, f"job {job}'s accounting record with its metrics")
    assert lines == [f"{job}|COMPLETED|cost_usd=0.25,tokens_in=1234,tool_calls=2", f"{job}.batch|COMPLETED|"]
    # the file is the job's own, in its private TMPDIR (gone with the job)
    path = (d / "out.txt").read_text().strip()
    assert path.endswith("/slurm-shim-metrics") and not Path(path).exists()
    # --json: the administrator's comment
    cp = run("sacct", "-j", str(job), "--json")
    assert cp.returncode == 0, cp.stderr
    [doc] = json.loads(cp.stdout)["jobs"]
    assert doc["comment"]["administrator"] == "cost_usd=0.25,tokens_in=1234,tool_calls=2"
    # the fixed-width layout cuts it as Slurm cuts any text (15 wide, + at the end)
    out = run("sacct", "-j", str(job), "-X", "-n", "-o", "AdminComment").stdout
    assert out.splitlines() == ["cost_usd=0.25,+ "]


def test_a_job_without_metrics_has_an_empty_admin_comment(workdir, site):
    d = Path(workdir) / f"m{uuid.uuid4().hex[:8]}"
    d.mkdir(mode=0o777)
    (d / "job.sh").write_text("#!/bin/sh\ntrue\n")
    cp = run("sbatch", "--parsable", "-p", "metrics", "-o", "/dev/null", str(d / "job.sh"), cwd=d, env=site)
    assert cp.returncode == 0, cp.stderr
    job = int(cp.stdout.strip().split(";")[0])
    lines = wait_until(lambda: _ended(job), 90, f"sacct to show job {job} COMPLETED")
    assert lines == [f"{job}|COMPLETED|", f"{job}.batch|COMPLETED|"]
