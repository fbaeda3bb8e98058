"""shim.operations.policies: what sacctmgr, sprio, sshare and sreport show, gathered and computed outside
their command modules (the commands' own tests check the output; these check the rules)."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from shim.operations import policies
from shim.gridengine import policy

SRC = Path(__file__).resolve().parents[2] / "src"
SGE = Path(__file__).resolve().parents[2] / "fixtures" / "gridengine" / "sge-8.1.9"


def test_importing_it_loads_no_command_and_no_heavy_module():
    """Every policy command imports it at start: no dataclasses/typing of its own, nothing of cli/."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import shim.operations.policies; "
            "print(' '.join(sorted(m for m in sys.modules if m in ('dataclasses', 'typing', 'inspect') "
            "or m.startswith(('shim.cli', 'shim.slurm.render', 'shim.gridengine.backends')))))")
    cp = subprocess.run([sys.executable, "-I", "-c", code, str(SRC)], capture_output=True, text=True, timeout=60)
    assert (cp.returncode, cp.stdout.strip()) == (0, ""), cp.stderr


def test_a_share_tree_node_is_an_account_by_one_rule():
    """sacctmgr and sshare alike: children, a project's node (the monitor names a project and no
    user) or a node named as a Grid Engine project is an account; other leaves are users."""
    nodes = policy.share_nodes((SGE / "share-qconf-sstree.txt").read_text(),
                               (SGE / "share-sge_share_mon-h.txt").read_text())
    assert [p for p, n in nodes.items() if policies.is_account(n)] == ["/", "/w2teamA", "/w2teamB"]
    alice = nodes["/w2teamA/alice"]
    assert policies.is_account(alice, ["alice"]) and not policies.is_account(alice, ["w2quota"])
    alice.user, alice.project = "", "w2quota"  # a project's leaf, as sge_share_mon names it
    assert policies.is_account(alice)
    assert policies.account_name(nodes, "/") == "root" and policies.account_name(nodes, "/w2teamB") == "w2teamB"


def test_sshare_rows_and_their_selection():
    nodes = policy.share_nodes((SGE / "share-qconf-sstree.txt").read_text(),
                               (SGE / "share-sge_share_mon-h.txt").read_text())
    rows = policies.shares(nodes, "c")
    assert [(r.account, r.user, r.depth) for r in rows] == [
        ("root", "", 0), ("w2teamA", "", 1), ("w2teamA", "alice", 1), ("w2teamB", "", 1),
        ("w2teamB", "shimtester", 1)]
    assert policies.shares({}, "c") == []
    assert [(r.account, r.user) for r in policies.select_shares(rows, users={"alice"})] == [
        ("root", ""), ("w2teamA", ""), ("w2teamA", "alice"), ("w2teamB", "")]
    assert [r.user for r in policies.select_shares(rows, accounts={"w2teamb"}, users_only=True)] == ["shimtester"]
    assert policies.select_shares(rows) == rows


def test_a_pending_jobs_partition_is_squeues_and_sacct_s():
    """sprio's Partition is what squeue and sacct show for the job (QueueMap.of_request: the twins
    disagreed: sprio took the first requested queue that was a partition's, else the default)."""
    from shim.gridengine.qstat import QueueMap
    from shim.siteconf import NS

    qmap = QueueMap(NS.wrap({"default_partition": "debug",
                             "partitions": {"debug": {"queue": "debug"}, "gpu": {"queue": "gpuq"}}}))
    assert qmap.of_request(("gpuq@node1",)) == "gpu"
    assert qmap.of_request(("other", "gpuq")) == "other"  # the first queue, shown as itself when unmapped
    assert qmap.of_request(()) == "debug"  # none asked for: the default partition
    assert all(qmap.of_request((q,)) == qmap.partition(q) for q in ("debug", "gpuq@n1", "x.q"))


def test_sprio_weights_junk_is_zero_and_selection():
    assert policies.weight({"weight_ticket": "x"}, "weight_ticket") == 0.0
    assert policies.weight({}, "weight_urgency") == 0.0 and policies.weight({"w": "0.25"}, "w") == 0.25
    w = policies.weights({"weight_ticket": "0.5", "weight_urgency": "1", "weight_priority": "junk"})
    assert (w.fairshare, w.age, w.jobsize, w.qos) == (round(0.5 * 0xFFFFFFFF), 0xFFFFFFFF, 0xFFFFFFFF, 0)
    from shim.slurm.render import sprio as view

    rows = [view.Row(1, "debug", "alice"), view.Row(2, "gpu", "bob"), view.Row(3, "debug", "bob")]
    assert [r.job_id for r in policies.select_priorities(rows, [3, 2], {"bob"}, {"debug"})] == [3]
    assert policies.select_priorities(rows) == rows


def test_sreport_reports_from_one_usage_table():
    used = {("a", "u1"): 10.0, ("a", "u2"): 30.0, ("b", "u1"): 20.0}
    assert policies.utilization(used, "account_by_user") == [
        {"Account": "root", "Login": None, "Used": 60.0}, {"Account": "a", "Login": None, "Used": 40.0},
        {"Account": "a", "Login": "u1", "Used": 10.0}, {"Account": "a", "Login": "u2", "Used": 30.0},
        {"Account": "b", "Login": None, "Used": 20.0}, {"Account": "b", "Login": "u1", "Used": 20.0}]
    assert [(r["Account"], r["Login"]) for r in policies.utilization(used, "user_by_account")] == [
        ("a", "u2"), ("b", "u1"), ("a", "u1")]
    assert policies.utilization(used, "top", top=1, group=True) == [{"Account": "a,b", "Login": "u1", "Used": 30.0}]
    assert policies.select_usage(used, users={"u1"}, accounts={"b"}) == {("b", "u1"): 20.0}
    assert policies.select_usage(used) == used


def test_sreport_window_rounds_to_the_nearest_hour(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        hour = 1796169600 + 10 * 3600  # 2026-12-02T10:00 UTC
        assert policies.rounded(hour + 29 * 60 + 29) == hour and policies.rounded(hour + 29 * 60 + 30) == hour + 3600
        with pytest.raises(ValueError):
            policies.window("garbage", None, hour)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
