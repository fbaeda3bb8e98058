"""--nice where Grid Engine's scheduler cannot act on it (brief S5-X item 5, issue 20).

Slurm's nice lowers a pending job's priority (priority/basic and priority/multifactor subtract it:
src/plugins/priority/basic/priority_basic.c priority_p_set, multifactor's _get_priority_internal).
The shim submits it as Grid Engine's POSIX priority (``qsub -p``, translate.qsub.nice_priority),
and Grid Engine ranks pending jobs by ``weight_ticket*ntckts + weight_urgency*nurg +
weight_priority*npprior``: with ``weight_priority`` 0 (Debian's default; the recorded
``qconf -ssconf`` of this project's cell) the ``-p`` orders nothing. ``cluster up`` keeps it so:
npprior is -p over a fixed range (-1023..1024: 0.5 for -p 0, 0.45117 for -100 in the recorded
``qstat -pri``), while the waiting-time urgency is normalized over the pending jobs, so a weight
that let one step of nice outweigh a second of waiting would have to be ~2046 times the others
and push the priority past Slurm's 32-bit scale. doctor and explain say so instead."""

from __future__ import annotations

import io
import sys

from conftest import FIXTURES, use_site_config
from shim.gridengine import backends
from shim.admin import cluster
from shim import siteconf
from shim.gridengine.replay import ReplayBackend
from shim.admin.cluster import Facts

SSCONF = (FIXTURES / "gridengine" / "sge-8.1.9" / "priority-qconf-ssconf.txt").read_text()


def test_doctor_warns_when_weight_priority_is_zero():
    sconf = cluster.parse_attrs(SSCONF)
    assert sconf["weight_priority"] == "0.000000"  # the recorded cell
    f = cluster.nice_finding(sconf)
    assert (f.level, f.what) == ("warn", cluster.NICE_WHAT) and "weight_priority" in f.fix
    ok = cluster.nice_finding({**sconf, "weight_priority": "0.100000"})
    assert ok.level == "ok" and "0.100000" in ok.what
    assert cluster.nice_finding({"weight_priority": "x"}).level == "warn"
    # in doctor's judgement, only when the scheduler was read; a warning fails nothing
    facts = Facts(scheduler=sconf)
    cfg = cluster.config.parse(cluster.site_config_text(), "site.toml")
    found = [x for x in cluster.doctor_findings(cfg, facts, "site.toml") if x.what == cluster.NICE_WHAT]
    assert [x.level for x in found] == ["warn"]
    assert not [x for x in cluster.doctor_findings(cfg, Facts(), "site.toml") if x.what.startswith("scheduler:")]


def test_cluster_up_leaves_weight_priority_alone():
    """cluster up's scheduler settings converge only what the shim needs (a fast scheduler); the
    weights stay Grid Engine's, so the share-tree demo ranks as before."""
    assert not any(k.startswith("weight_") for k in cluster.SCHEDULER_CONF)


def _explain(monkeypatch, tmp_path, argv, ssconf_rc=0):
    use_site_config(monkeypatch, tmp_path)
    siteconf.reset()
    b = ReplayBackend()
    b.add("qconf", ["-ssconf"], stdout=SSCONF if ssconf_rc == 0 else "", rc=ssconf_rc)
    backends.use(b)
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    from shim.cli import explain

    try:
        assert explain.main([*argv, str(script)]) == 0
    finally:
        backends.use(None)
        siteconf.reset()
    return out.getvalue(), [k for k, _ in b.calls]


def test_explain_says_nice_has_no_effect(monkeypatch, tmp_path):
    out, calls = _explain(monkeypatch, tmp_path, ["--nice=10"])
    assert "-p -10" in out
    assert "note: --nice/--priority have no effect here: the scheduler's weight_priority is 0" in out
    assert ("qconf", "-ssconf") in calls


def test_explain_asks_the_scheduler_only_for_nice(monkeypatch, tmp_path):
    out, calls = _explain(monkeypatch, tmp_path, ["-n", "1"])
    assert "weight_priority" not in out and ("qconf", "-ssconf") not in calls

