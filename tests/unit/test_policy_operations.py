"""The policy commands' Grid Engine operations are GridEngine methods (issue 14: the backend calls
Grid Engine and reads its answers; sprio, sshare, sacctmgr, explain and the reservation names of
squeue/scontrol only call them). They run on the replay transport as on the real one, and the
commands' answers when Grid Engine would not say are the ones they gave before."""

from pathlib import Path

import pytest

from policy_replay import replaying, run_command
from shim.gridengine.engine import Refused, ReservationNames
from shim.gridengine import ops
from shim.gridengine.replay import ReplayBackend
from test_reservation import SUMMARY

SGE = Path(__file__).resolve().parents[2] / "fixtures" / "gridengine" / "sge-8.1.9"
TREE = (SGE / "share-qconf-sstree.txt").read_text()
MON = (SGE / "share-sge_share_mon-h.txt").read_text()
XML = (SGE / "priority-qstat-pri-ext-urg-r-xml.xml").read_text()
SCONF = (SGE / "priority-qconf-ssconf.txt").read_text()


def test_the_policy_operations_on_the_replay_transport():
    b = ReplayBackend()
    b.add(*ops.priorities(), XML)
    b.add(*ops.scheduler_config(), SCONF)
    b.add(*ops.share_tree(), TREE)
    b.add(*ops.share_monitor(), MON)
    b.add(*ops.project_list(), "w2quota\nother\n")
    b.add(*ops.project("w2quota"), "name w2quota\nacl a,\\\n    b\n")
    b.add(*ops.user_list(), "alice\nroot\n")
    b.add(*ops.managers(), "root\nsgeadmin\n")
    b.add(*ops.operators(), "", rc=1, stderr="no operator defined\n")
    b.add(*ops.quota_sets(), "", rc=1, stderr="no resource quota set list defined\n")
    assert sorted(j.job for j in b.priorities()) == [7441, 7442, 7443, 7444]
    assert b.scheduler_config()["weight_ticket"] == "0.500000"
    assert list(b.share_tree()) == ["/", "/w2teamA", "/w2teamA/alice", "/w2teamB", "/w2teamB/shimtester"]
    assert b.share_tree()["/w2teamA/alice"].user == ""  # the tree alone: no monitor figures
    nodes, why = b.share_usage()
    assert why is None and nodes["/w2teamA/alice"].user == "alice"
    assert (b.projects(), b.users()) == (["w2quota", "other"], ["alice", "root"])
    assert b.project("w2quota") == {"name": "w2quota", "acl": "a,b"}
    assert (b.managers(), b.operators(), b.quota_sets()) == (["root", "sgeadmin"], [], {})


def test_what_grid_engine_would_not_say():
    b = ReplayBackend()
    b.add(*ops.priorities(), "", rc=1, stderr="error: commlib error\n")
    b.add(*ops.scheduler_config(), "weight_ticket 1\n", rc=1)
    b.add(*ops.share_tree(), TREE)
    b.add(*ops.share_monitor(), "", rc=2, stderr="sge_share_mon: no usage\n")
    with pytest.raises(Refused) as e:
        b.priorities()
    assert (e.value.text, e.value.returncode) == ("error: commlib error", 1)
    assert b.scheduler_config() is None
    nodes, why = b.share_usage()
    assert why == "sge_share_mon: no usage" and nodes["/"].usage == 0.0 and len(nodes) == 5


def test_a_monitor_that_cannot_start_is_a_warning(capsys, monkeypatch, tmp_path):
    with replaying(monkeypatch, tmp_path, [(ops.share_tree(), TREE)]) as b:
        real = b.run

        def run(tool, args, **kw):
            if tool == "sge_share_mon":
                raise FileNotFoundError(2, "No such file or directory")
            return real(tool, args, **kw)

        b.run = run
        rc, out, err = run_command(capsys, "sshare", "-a", "-P", "-n")
    assert rc == 0 and err == "sshare: warning: sge_share_mon gave no usage: [Errno 2] No such file or directory\n"
    assert out.splitlines()[0].startswith("root|")


def test_sshare_warns_when_the_monitor_refuses(capsys, monkeypatch, tmp_path):
    with replaying(monkeypatch, tmp_path, [(ops.share_tree(), TREE)]) as b:
        b.add(*ops.share_monitor(), "", rc=1, stderr="error: no share tree usage\n")
        rc, out, err = run_command(capsys, "sshare", "-a", "-P", "-n")
    assert (rc, err) == (0, "sshare: warning: sge_share_mon gave no usage: error: no share tree usage\n")
    assert [c[0][0] for c in b.calls] == ["qconf", "sge_share_mon"]


def test_sprio_says_why_it_has_no_priorities(capsys, monkeypatch, tmp_path):
    with replaying(monkeypatch, tmp_path, []) as b:
        b.add(*ops.priorities(), "", rc=1, stderr="error: unable to contact qmaster\n")
        rc, out, err = run_command(capsys, "sprio")
    assert (rc, out) == (1, "")
    assert err == "sprio: error: Couldn't get priority factors from controller: error: unable to contact qmaster\n"
    assert [c[0][:2] for c in b.calls] == [("qstat", "-u")]  # no scheduler configuration asked for


@pytest.mark.parametrize("argv", [["-w"], ["-l"]])
def test_sprio_without_the_scheduler_configuration_weighs_nothing(capsys, monkeypatch, tmp_path, argv):
    """A refused qconf -ssconf is an empty configuration: every weight 0."""
    answers = []
    for rc in (1, 0):
        with replaying(monkeypatch, tmp_path, [(ops.priorities(), XML)]) as b:
            b.add(*ops.scheduler_config(), "", rc=rc, stderr="error: denied\n" if rc else "")
            answers.append(run_command(capsys, "sprio", *argv))
    assert answers[0] == answers[1] and answers[0][0] == 0 and answers[0][2] == ""
    with replaying(monkeypatch, tmp_path, [(ops.priorities(), XML), (ops.scheduler_config(), SCONF)]):
        assert run_command(capsys, "sprio", *argv) != answers[0]


def test_reservation_names_are_read_when_asked_on_replay():
    b = ReplayBackend()
    b.add(*ops.reservations(), SUMMARY)
    started = b.reservation_names()
    assert isinstance(started, ReservationNames) and b.calls == []  # a recorded answer is read when asked
    assert started.read() == {"1": "w7probe"} and started.read() is started.read()
    assert len(b.calls) == 1
    started.close()
    refused = ReplayBackend()
    refused.add(*ops.reservations(), "", rc=1, stderr="error: no qrstat\n")
    assert refused.reservation_names().read() == {}
    assert ReplayBackend().reservation_names().read() == {}  # no recording: KeyError read as "would not say"
