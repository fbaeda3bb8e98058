"""Issue 20's policy readers on Open Cluster Scheduler 9.1.4's own output: the resource quota
messages of qstat -j, qstat -pri -ext -urg, the share tree and sge_share_mon, recorded on the
project's OCS cell by fixtures/gridengine/ocs-9.1.4/capture_policy.py (README.md there, "Policy
captures"). The SGE 8.1.9 counterparts are tests/unit/test_quota_reasons.py, test_sprio.py and
test_sshare.py; what OCS words or formats differently is asserted here.

Slurm's side: the reason words are Slurm 22.05's job_reason_string (src/common/slurm_protocol_defs.c);
sprio's layout src/sprio/sprio.c main and src/sprio/print.c; sshare's src/sshare/process.c
(process), printed through src/common/print_fields.c."""

from __future__ import annotations

from pathlib import Path

import pytest

from policy_replay import replaying, run_command
from shim.operations import jobs
from shim.gridengine import ops, policy
from shim.gridengine.replay import ReplayBackend
from shim.siteconf import NS

OCS = Path(__file__).resolve().parents[2] / "fixtures" / "gridengine" / "ocs-9.1.4"
CFG = NS.wrap({
    "memory": {"complex": "mem_free"},
    "gres": {"gpu": {"complex": "gpu"}},
    "licenses": {"anthropic_api": {"complex": "anthropic_api"}, "matlab": {"complex": "matlab"}},
})
SLOTS, LIC, NAMED = 500693, 500694, 500695  # -P ocsq1; -P ocsq2 -l anthropic_api=1; -P ocsq3 (shimtester)
ROOT, BIG, PLAIN, LOW = 500699, 500698, 500696, 500697  # -p 500; alice -pe smp 2; shimtester; -p -100


def text(name: str) -> str:
    return (OCS / name).read_text()


def test_ocs_scheduler_messages_name_the_quota_held_jobs():
    """OCS words the heading "Jobs dropped because exceeds limit in rule" (SGE 8.1.9: "... of
    exceeding limit ...")."""
    msgs = policy.parse_scheduler_messages(text("quota-qstat-j-global.txt"))
    assert msgs[policy.OCS_QUOTA_HEADING] == {SLOTS, LIC, NAMED}
    assert policy.quota_held(text("quota-qstat-j-global.txt")) == {SLOTS, LIC, NAMED}


def test_ocs_jobs_name_their_rules_and_map_to_slurms_reasons():
    holds = policy.parse_quota_messages(text("quota-qstat-j-three.txt"))
    assert {j: (h.quota_set, h.rule, h.limit) for j, h in holds.items()} == {
        SLOTS: ("ocs_slots", "1", "/////"), LIC: ("ocs_lic", "1", "shimtester/////"),
        NAMED: ("ocs_named", "team_cap", "/ocsq3////")}
    # OCS writes "hard_resource_list:" (SGE 8.1.9 "hard resource_list:"): the rule's resource the job asked for
    assert holds[LIC].requested == ("anthropic_api",) and holds[SLOTS].requested == ()
    sets = policy.parse_quota_sets(text("quota-qconf-srqs.txt"))
    assert set(sets) == {"ocs_slots", "ocs_lic", "ocs_named"} and all(s.enabled for s in sets.values())
    got = {j: policy.quota_reason(h, sets, CFG) for j, h in holds.items()}
    # projects -> slots: the account's CPU limit; a seat complex -> licenses; a named rule by its rule
    assert got == {SLOTS: "AssocGrpCpuLimit", LIC: "AssocGrpLicense", NAMED: "AssocGrpCpuLimit"}


@pytest.fixture
def site(monkeypatch, tmp_path):
    from conftest import use_site_config
    from shim import siteconf

    use_site_config(monkeypatch, tmp_path)
    return siteconf.get()


def test_ocs_listing_shows_the_mapped_reasons(site):
    b = ReplayBackend()
    b.add(*ops.scheduler_messages(), text("quota-qstat-j-global.txt"))
    b.add(*ops.detail_text([SLOTS, LIC, NAMED]), text("quota-qstat-j-three.txt"))
    b.add(*ops.quota_sets(), text("quota-qconf-srqs.txt"))
    jl = jobs.list_jobs(site, backend=b, xml=text("quota-qstat-u-all-r-xml.xml"), quotas=True)
    assert {r.job_id: r.reason for r in jl.records} == {
        SLOTS: "AssocGrpCpuLimit", LIC: "AssocGrpLicense", NAMED: "AssocGrpCpuLimit"}


def test_ocs_priorities_are_read():
    """OCS 9.1.4's qstat -pri -ext -urg -xml: weight_priority 1 on this cell, so -p moves npprior."""
    got = {j.job: j for j in policy.parse_priorities(text("priority-qstat-pri-ext-urg-r-xml.xml"))}
    assert set(got) == {ROOT, BIG, PLAIN, LOW}
    assert (got[BIG].owner, got[BIG].nurg, got[BIG].rrcontr, got[BIG].ntix) == ("alice", 1.0, 2000.0, 0.5)
    assert (got[ROOT].ppri, got[LOW].ppri) == (500, -100)
    assert got[ROOT].nppri == pytest.approx(0.74414) and got[LOW].nppri == pytest.approx(0.45117)
    assert sorted(got, key=lambda j: -got[j].prio) == [ROOT, BIG, PLAIN, LOW]  # as qstat -pri listed them
    w = policy.parse_scheduler_config(text("priority-qconf-ssconf.txt"))
    assert (w["weight_ticket"], w["weight_urgency"], w["weight_priority"]) == ("0.010000", "0.100000", "1.000000")


def test_ocs_sprio_ranks_by_grid_engines_priority(capsys, monkeypatch, tmp_path):
    with replaying(monkeypatch, tmp_path, [(ops.priorities(), text("priority-qstat-pri-ext-urg-r-xml.xml")),
                                          (ops.scheduler_config(), text("priority-qconf-ssconf.txt"))]):
        rc, out, err = run_command(capsys, "sprio", "-S", "-Y", "-h", "-o", "%i %Y")
    assert (rc, err) == (0, "")
    ranked = [ln.split() for ln in out.splitlines()]
    assert [int(r[0]) for r in ranked] == [ROOT, BIG, PLAIN, LOW]
    assert int(ranked[0][1]) == round(0.74914 * 0xFFFFFFFF)


def test_ocs_share_monitor_and_tree_are_joined():
    """OCS's sge_share_mon gives its times in microseconds (SGE 8.1.9: seconds); the shim reads
    neither, only the shares, usage and actual share."""
    rows = policy.parse_share_monitor(text("share-sge_share_mon-h.txt"))
    assert [r["node_name"] for r in rows] == ["/", "/ocsteamA", "/ocsteamA/alice", "/ocsteamB", "/ocsteamB/shimtester"]
    assert len(rows[0]["curr_time"]) == 16  # microseconds since the epoch
    nodes = policy.share_nodes(text("share-qconf-sstree.txt"), text("share-sge_share_mon-h.txt"))
    assert list(nodes) == ["/", "/ocsteamA", "/ocsteamA/alice", "/ocsteamB", "/ocsteamB/shimtester"]
    a = nodes["/ocsteamA/alice"]
    assert (a.shares, a.user, a.total, a.actual) == (1, "alice", 0.6, 0.498936)
    assert a.usage == pytest.approx(1.521716) and nodes["/ocsteamB/shimtester"].usage == pytest.approx(1.528208)
    assert nodes["/"].children == ["/ocsteamA", "/ocsteamB"]


def test_ocs_sshare_shows_the_teams(capsys, monkeypatch, tmp_path):
    with replaying(monkeypatch, tmp_path, [(ops.share_tree(), text("share-qconf-sstree.txt")),
                                          (ops.share_monitor(), text("share-sge_share_mon-h.txt"))]):
        rc, out, err = run_command(capsys, "sshare", "-a", "-P", "-o", "Account,User,RawShares,RawUsage")
    assert (rc, err) == (0, "")
    # RawUsage is Slurm's usage_raw as an integer (print_fields_uint64 of a truncated long double)
    assert out.splitlines()[1:] == ["root|||3", " ocsteamA||60|1", "  ocsteamA|alice|1|1",
                                    " ocsteamB||40|1", "  ocsteamB|shimtester|1|1"]
