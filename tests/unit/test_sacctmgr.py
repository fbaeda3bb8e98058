"""sacctmgr show on recorded Grid Engine configuration (fixtures/gridengine/sge-8.1.9/accounts-*:
project w2quota open to all, quota set w2_team limiting it, the two-team share tree, the users,
managers root and sgeadmin, no operators).

Field names, shortest prefixes, headers and widths: Slurm 22.05 src/sacctmgr/common.c
(_get_print_field); default lists: association_functions.c (sacctmgr_list_assoc),
account_functions.c, user_functions.c, qos_functions.c; messages: sacctmgr.c (_show_it "No valid
entity in list command", _process_command "invalid keyword"), " Unknown condition", "Unknown field"."""

from pathlib import Path

import pytest

from policy_replay import replaying, run_command
from shim.gridengine import ops
from shim.slurm.render import sacctmgr as view

SGE = Path(__file__).resolve().parents[2] / "fixtures" / "gridengine" / "sge-8.1.9"


def rec(name: str) -> str:
    return (SGE / name).read_text()


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    answers = [(ops.share_tree(), rec("accounts-qconf-sstree.txt")), (ops.quota_sets(), rec("accounts-qconf-srqs.txt")),
               (ops.project_list(), rec("accounts-qconf-sprjl.txt")),
               (ops.project("w2quota"), rec("accounts-qconf-sprj-w2quota.txt")),
               (ops.user_list(), rec("accounts-qconf-suserl.txt")), (ops.managers(), rec("accounts-qconf-sm.txt"))]
    with replaying(monkeypatch, tmp_path, answers) as b:
        b.add(*ops.operators(), "", rc=1, stderr="no operator defined\n")
        yield b


def run(capsys, *argv):
    return run_command(capsys, "sacctmgr", *argv)


def test_what_a_user_may_charge(capsys, recorded):
    """The tools' question: sacctmgr -nP show assoc user=$USER format=account."""
    assert run(capsys, "-nP", "show", "assoc", "user=alice", "format=account") == (0, "w2teamA\nw2quota\n", "")
    assert run(capsys, "-nP", "list", "associations", "users=shimtester", "format=acc,user,share")[1] == \
        "w2teamB|shimtester|1\nw2quota|shimtester|1\n"


def test_project_access_lists_through_the_backends_one_reader(capsys, recorded):
    """A project's acl/xacl of access lists: members read by GridEngine.userset_entries (the one
    reader of qconf -su, submit's --reservation check uses it too); a list Grid Engine will not
    show has no members."""
    recorded.add(*ops.project("w2quota"), "name w2quota\noticket 0\nfshare 0\nacl teamlist gone\nxacl NONE\n")
    recorded.add(*ops.userset("teamlist"), "name    teamlist\ntype    ACL\nfshare  0\noticket 0\n"
                                           "entries alice,\\\n        root\n")
    recorded.add(*ops.userset("gone"), "", rc=1, stderr="\"gone\" does not exist\n")
    rows = run(capsys, "-nP", "show", "assoc", "account=w2quota", "format=account,user")[1].splitlines()
    assert [r for r in rows if r != "w2quota|"] == ["w2quota|alice", "w2quota|root"]


def test_default_association_layout(capsys, recorded):
    rc, out, err = run(capsys, "show", "assoc", "account=w2quota", "user=")
    lines = out.splitlines()
    assert lines[0].split() == ["Cluster", "Account", "User", "Partition", "Share", "Priority", "GrpJobs",
                                "GrpTRES", "GrpSubmit", "GrpWall", "GrpTRESMins", "MaxJobs", "MaxTRES",
                                "MaxTRESPerNode", "MaxSubmit", "MaxWall", "MaxTRESMins", "QOS", "Def", "QOS",
                                "GrpTRESRunMin"]  # 13 wide: the header is cut as Slurm cuts it
    assert lines[1].startswith("---------- ---------- ---------- ---------- --------- ---------- ------- ")
    rc, out, err = run(capsys, "-P", "show", "assoc", "account=w2quota", "format=account,user,grptres,maxtrespu")
    rows = out.splitlines()
    assert rows[0] == "Account|User|GrpTRES|MaxTRESPU"
    assert rows[1] == "w2quota||cpu=4|license/anthropic_api=2"  # the project's rules, in Slurm's TRES words
    assert "w2quota|alice||license/anthropic_api=2" in rows


def test_accounts_users_qos(capsys, recorded):
    assert run(capsys, "-nP", "show", "account")[1] == (
        "root|default root account|root\nw2teamA|w2teamA|root\nw2teamB|w2teamB|root\nw2quota|w2quota|root\n")
    out = run(capsys, "-nP", "show", "user", "format=user,defaulta,admin")[1].splitlines()
    assert "alice|w2teamA|None" in out and "root||Administrator" in out and "shimtester|w2teamB|None" in out
    assert run(capsys, "-nP", "show", "qos", "format=name,grptres")[1] == "normal|\nw2_team|\n"
    rc, out, _ = run(capsys, "show", "user", "name=root")
    assert out.splitlines()[2] == "      root            Administ+ "


def test_changes_are_refused_naming_qconf(capsys, recorded):
    rc, out, err = run(capsys, "add", "account", "teamC")
    assert rc == 1 and "read-only" in err and "qconf -aprj" in err and out == ""
    rc, out, err = run(capsys, "-i", "modify", "user", "alice", "set", "defaultaccount=w2teamB")
    assert rc == 1 and "qconf -auser" in err
    rc, out, err = run(capsys, "delete", "qos", "w2_team")
    assert rc == 1 and "qconf -arqs" in err
    assert recorded.calls == []  # nothing was even asked


def test_bad_words(capsys, recorded):
    assert run(capsys, "show", "bogus")[0] == 1
    assert "No valid entity in list command" in run(capsys, "show", "bogus")[2]
    assert run(capsys, "frobnicate") == (1, "", "invalid keyword: frobnicate\n")
    assert run(capsys, "show", "assoc", "foo=bar") == (1, "", " Unknown condition: foo=bar\n")
    assert run(capsys, "show", "assoc", "format=nope") == (1, "", "Unknown field 'nope'\n")


@pytest.mark.parametrize("word, header", [
    ("acc", "Account"), ("acct", "Account"), ("us", "User"), ("s", "Share"), ("fairsh", "Share"),
    ("grptres", "GrpTRES"), ("grptresm", "GrpTRESMins"), ("maxtrespern", "MaxTRESPerNode"),
    ("defaulta", "Def Acct"), ("defaultq", "Def QOS"), ("o", "Org"), ("maxjobspu", "MaxJobsPU"),
])
def test_field_prefixes(word, header):
    assert view.field(word).name == header


@pytest.mark.parametrize("word", ["ac", "defa", "grpt"])
def test_field_prefixes_too_short(word):
    with pytest.raises(view.FieldError):
        view.field(word)
