"""`slurm-shim cluster` and `doctor` against the live single-host cluster (`slurm-shim cluster up`)."""

from __future__ import annotations

import os
import re

import pytest

from shim.admin import cluster
from shim.cli import admin

pytestmark = pytest.mark.gridengine

SITE_CONFIG = "/etc/slurm-shim/config.toml"


def test_status_reports_a_running_cluster(capsys):
    assert admin.main(["cluster", "status"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^qmaster +up \(pid \d+\)$", out, re.M)
    assert re.search(r"^execd +up \(pid \d+\)$", out, re.M)
    assert re.search(r"^queue +debug@\S+ +ok$", out, re.M)
    assert re.search(r"^queue +gpu@\S+ +ok$", out, re.M)


@pytest.mark.skipif(os.geteuid() != 0, reason="cluster up needs root")
def test_up_on_a_running_cluster_is_a_fast_no_op_that_still_runs_test_jobs(capsys, monkeypatch):
    monkeypatch.delenv("SLURM_SHIM_CONFIG", raising=False)
    assert admin.main(["cluster", "up"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^cluster: configure \.+ +[\d.]+ s  \(unchanged\)$", out, re.M)
    # (running daemons get the init scripts' pid files if they lack them: once after an upgrade)
    assert re.search(r"^cluster: qmaster \.+ +[\d.]+ s  \(running(, pid file written)?\)$", out, re.M)
    assert re.search(r"^cluster: execd \.+ +[\d.]+ s  \(running(, pid file written)?\)$", out, re.M)
    assert re.search(r"^cluster: init scripts \.+ +[\d.]+ s  \((in place|fixed /etc/default/gridengine)\)$",
                     out, re.M)
    assert re.search(r"^cluster: site \.+ +[\d.]+ s  \(.*/var/spool/slurm-shim laid out", out, re.M)
    assert re.search(r"^cluster: test jobs .*exit 0 as root@debug and alice@gpu\)$", out, re.M)
    # (fast: each phase's "unchanged"/"running" above is the no-op; its seconds are in the output)


def test_doctor_passes_on_the_written_config(capsys, monkeypatch):
    monkeypatch.setenv("SLURM_SHIM_CONFIG", SITE_CONFIG)
    code = admin.main(["doctor"])
    out = capsys.readouterr().out
    # the only failures cluster up's cell may show are the kernel's link protections, by name: the
    # security tests keep them off, and doctor reports them (never sets them)
    kernel = [f.line() for f in cluster.kernel_findings() if f.level == "FAIL"]
    assert [line for line in out.splitlines() if line.startswith("FAIL")] == kernel, out
    assert code == (1 if kernel else 0), out
    assert "ok    partition gpu: queue gpu exists" in out
    assert f"ok    queue debug: tmpdir {cluster.TMPDIR_BASE} is root's and only root can write in it" in out


def test_doctor_fails_on_a_config_naming_a_missing_queue(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "config.toml"
    bad.write_text(cluster.site_config_text().replace('queue = "gpu"', 'queue = "no_such_queue"'))
    monkeypatch.setenv("SLURM_SHIM_CONFIG", str(bad))
    assert admin.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  partition gpu: queue no_such_queue does not exist  -- " in out
    assert "ok    partition debug: queue debug exists" in out
