"""sshare on a recorded share tree (fixtures/gridengine/sge-8.1.9/share-*: Root -> w2teamA (60
shares, alice) and w2teamB (40, shimtester), with usage recorded by sge_share_mon).

Fields, widths and layouts: Slurm 22.05 src/sshare/process.c (fields[], the fair-tree default and
long lists, "Invalid field requested"); printers src/common/print_fields.c (print_fields_header,
_str with '+' for cut text, _uint, _double with %f); indentation slurmdb_tree_name_get
(src/common/slurmdb_defs.c)."""

from pathlib import Path

import pytest

from policy_replay import replaying, run_command
from shim.gridengine import ops, policy

SGE = Path(__file__).resolve().parents[2] / "fixtures" / "gridengine" / "sge-8.1.9"
TREE = (SGE / "share-qconf-sstree.txt").read_text()
MON = (SGE / "share-sge_share_mon-h.txt").read_text()


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    with replaying(monkeypatch, tmp_path, [(ops.share_tree(), TREE), (ops.share_monitor(), MON)]) as b:
        yield b


def run(capsys, *argv):
    return run_command(capsys, "sshare", *argv)


def test_tree_and_monitor_are_joined_by_path():
    nodes = policy.share_nodes(TREE, MON)
    assert list(nodes) == ["/", "/w2teamA", "/w2teamA/alice", "/w2teamB", "/w2teamB/shimtester"]
    a = nodes["/w2teamA/alice"]
    assert (a.shares, a.user, a.total, a.actual) == (1, "alice", 0.6, 0.834760)
    assert a.usage == pytest.approx(3.26193) and nodes["/"].children == ["/w2teamA", "/w2teamB"]
    rows = policy.parse_share_monitor((SGE / "share-sge_share_mon-h.txt").read_text())
    assert len(rows) == 5 and rows[0]["node_name"] == "/"
    assert policy.parse_share_tree("") == {}


def test_default_layout(capsys, recorded):
    rc, out, err = run(capsys, "-a")
    assert (rc, err) == (0, "")
    assert out.splitlines()[:2] == [
        "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare ",
        "-------------------- ---------- ---------- ----------- ----------- ------------- ---------- "]
    assert out.splitlines()[2:] == [
        "root                                                             3      1.000000            ",
        " w2teamA                                60    0.600000           3      0.834760            ",
        "  w2teamA                 alice          1    0.600000           3      0.834760   0.381230 ",
        " w2teamB                                40    0.400000           0      0.165240            ",
        "  w2teamB            shimtester          1    0.400000           0      0.165240   0.751008 "]


def test_only_my_rows_unless_all_and_filters(capsys, recorded, monkeypatch):
    monkeypatch.setattr("os.getuid", lambda: 0)  # root: no user rows of its own
    assert [ln.split()[0] for ln in run(capsys, "-n")[1].splitlines()] == ["root", "w2teamA", "w2teamB"]
    assert run(capsys, "-P", "-n", "-u", "alice", "-o", "Acc,User,RawU")[1] == \
        "root||3\n w2teamA||3\n  w2teamA|alice|3\n w2teamB||0\n"
    assert run(capsys, "-p", "-U", "-a", "-o", "User,FairShare")[1] == \
        "User|FairShare|\nalice|0.381230|\nshimtester|0.751008|\n"
    assert run(capsys, "-P", "-n", "-a", "-A", "w2teamB", "-o", "User")[1] == "\nshimtester\n"
    rc, out, err = run(capsys, "-o", "Bogus")
    assert (rc, err) == (1, 'sshare: error: Invalid field requested: "Bogus"\n')


def test_long_and_widths(capsys, recorded):
    rc, out, _ = run(capsys, "-a", "-l")
    head = out.splitlines()[0].split()
    assert head == ["Account", "User", "RawShares", "NormShares", "RawUsage", "NormUsage", "EffectvUsage",
                    "FairShare", "LevelFS", "GrpTRESMins", "TRESRunMins"]
    rc, out, _ = run(capsys, "-a", "-n", "-o", "Account%4,User%-3")
    assert out.splitlines()[0] == "root     " and out.splitlines()[2] == "  w+ al+ "


def test_no_share_tree_prints_the_header_only(capsys, monkeypatch, tmp_path):
    with replaying(monkeypatch, tmp_path, []) as b:
        b.add(*ops.share_tree(), "", rc=1, stderr="no sharetree element\n")
        rc, out, err = run(capsys, "-P")
    assert (rc, out) == (0, "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare\n")
    assert [c[0][0] for c in b.calls] == ["qconf"]  # no monitor call without a tree
