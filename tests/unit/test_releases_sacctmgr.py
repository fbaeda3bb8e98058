"""sacctmgr's associations as real Slurm shows them (issue 30): the root user's association under
the root account is always there (slurmdbd adds it with the cluster, every release), so
``sacctmgr show assoc`` lists it and ``show assoc user=root`` finds it even where Grid Engine's
share tree and projects never name root. Compared with what 24.11.5 and 26.05.5 printed for the
same accounts (fixtures/slurm-24.11 and slurm-26.05, oracle-sacctmgr.json: account research with
users root and bob; the two releases printed the same bytes; 22.05.8's slurmdbd adds the same
association, as_mysql_cluster.c)."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, release_setter
from policy_replay import replaying, run_command
from shim import siteconf
from shim.gridengine import ops

NAMES = ("22.05", "24.11", "26.05")


def oracle(release: str) -> dict:
    return json.loads((FIXTURES / f"slurm-{release}" / "oracle-sacctmgr.json").read_text())["cases"]


@pytest.fixture
def research(monkeypatch, tmp_path):
    """The oracle's accounts in Grid Engine's words: no share tree, one project ``research`` open
    to every user, the users root and bob, root a manager. set(release) picks the release."""
    answers = [(ops.share_tree(), ""), (ops.quota_sets(), ""), (ops.project_list(), "research\n"),
               (ops.project("research"), "name research\noticket 0\nfshare 0\nacl NONE\nxacl NONE\n"),
               (ops.user_list(), "bob\nroot\n"), (ops.managers(), "root\n")]
    with replaying(monkeypatch, tmp_path, answers) as b:
        b.add(*ops.operators(), "", rc=1, stderr="no operator defined\n")
        conf = tmp_path / "config.toml"

        set_release = release_setter(conf)

        yield set_release
    siteconf.reset()


CASES = ["show_assoc", "show_assoc_user_root", "show_assoc_user_bob", "show_assoc_user_nobody", "p_show_assoc",
         "np_show_assoc_user_root_format_account", "np_show_assoc_user_nobody_format_account",
         "p_show_assoc_format_cluster_account_user_share_parentname_qos_defaultqos"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", CASES)
def test_associations_as_the_release_printed_them(capsys, research, name, case):
    """22.05 is compared with 24.11's bytes (its capture has no sacctmgr; its slurmdbd adds the
    same root association and its sacctmgr the same columns)."""
    research(name)
    c = oracle("24.11" if name == "22.05" else name)[case]
    argv = c["cmd"].split()[1:]
    assert run_command(capsys, "sacctmgr", *argv) == (c["rc"], c["stdout"], c["stderr"])


def test_the_releases_printed_the_same():
    assert oracle("24.11") == oracle("26.05")
