"""Resource quotas in Slurm's words (issue 20): the scheduler's messages, the rule that holds a job,
the quota sets, and the Slurm pending reason chosen from the rule's resource and filter.

Recorded on the local SGE 8.1.9 cell (fixtures/gridengine/sge-8.1.9/README.md, "quota-*"). The
reason names are Slurm 22.05's job_reason_string (src/common/slurm_protocol_defs.c)."""

from pathlib import Path

import pytest

from shim.operations import jobs
from shim.gridengine import ops, policy
from shim.gridengine.replay import ReplayBackend
from shim.siteconf import NS

SGE = Path(__file__).resolve().parents[2] / "fixtures" / "gridengine" / "sge-8.1.9"
CFG = NS.wrap({
    "memory": {"complex": "mem_free"},
    "gres": {"gpu": {"complex": "gpu"}},
    "licenses": {"anthropic_api": {"complex": "anthropic_api"}, "matlab": {"complex": "matlab"}},
})


def text(name: str) -> str:
    return (SGE / name).read_text()


def test_global_messages_name_the_quota_held_jobs():
    msgs = policy.parse_scheduler_messages(text("quota-qstat-j-global.txt"))
    assert msgs[policy.QUOTA_HEADING] == {7156, 7157, 7159}
    assert msgs["Jobs dropped because of hold state"] == {7158}
    assert policy.quota_held(text("quota-qstat-j-global.txt")) == {7156, 7157, 7159}


def test_wrapped_id_lists_are_read_whole():
    wrapped = f"{policy.QUOTA_HEADING}\n\t1,\t2,\t3,\n\t4,\t5\n\nJobs dropped because of hold state\n\t9\n"
    assert policy.quota_held(wrapped) == {1, 2, 3, 4, 5}


def test_each_job_names_its_rule():
    holds = policy.parse_quota_messages(text("quota-qstat-j-three.txt"))
    assert set(holds) == {7156, 7157, 7159}
    assert (holds[7156].quota_set, holds[7156].rule, holds[7156].limit) == ("w2_lic", "1", "shimtester/////")
    assert holds[7156].requested == ("anthropic_api",)
    assert (holds[7157].quota_set, holds[7157].rule) == ("w2_lic", "2")
    assert (holds[7159].quota_set, holds[7159].rule, holds[7159].requested) == ("w2_slots", "1", ())


def test_a_named_rule_is_cited_by_name():
    holds = policy.parse_quota_messages(text("quota-qstat-j-named-rule.txt"))
    (hold,) = holds.values()
    assert (hold.quota_set, hold.rule, hold.limit) == ("w2_named", "team_cap", "/w2quota////")


def test_quota_sets_and_rule_forms():
    sets = policy.parse_quota_sets(text("quota-qconf-srqs-forms.txt"))
    qs = sets["w2_forms"]
    assert not qs.enabled and qs.description == "W2 capture: rule forms, disabled"
    assert len(qs.rules) == 7
    r1 = qs.rule("per_user")
    assert r1 is qs.rule("1") and r1.filters["users"] == policy.Filter(("*",), True)
    assert r1.filters["queues"] == policy.Filter(("debug",), False) and r1.limits == (("slots", "4"),)
    assert qs.rules[1].filters["users"] == policy.Filter(("alice", "shimtester"), True)
    assert qs.rules[1].limits == (("anthropic_api", "2"), ("slots", "8"))
    assert qs.rules[5].filters == {} and qs.rules[5].limits == (("matlab", "1"),)
    last = qs.rules[6]  # written over two lines with a backslash
    assert last.filters["users"].values == ("!shimmallory",) and last.filters["hosts"].values == ("vm",)
    assert last.filters["queues"].values == ("debug", "gpu") and last.filters["pes"].values == ("smp",)
    assert dict(last.limits) == {"slots": "16", "anthropic_api": "96", "matlab": "3", "gpu": "2", "mem_free": "100G"}
    two = policy.parse_quota_sets(text("quota-qconf-srqs.txt"))
    assert set(two) == {"w2_slots", "w2_lic"} and all(s.enabled for s in two.values())


@pytest.mark.parametrize("rule, requested, want", [
    ("per_user", (), "QOSMaxCpuPerUserLimit"),  # users {*}: each user's own limit
    ("2", ("anthropic_api",), "QOSMaxLicensePerUser"),  # the limit the job asks for, not slots
    ("2", (), "QOSMaxCpuPerUserLimit"),
    ("3", ("gpu",), "AssocGrpGRES"),  # projects {*}: each account's limit
    ("4", ("mem_free",), "AssocGrpMemLimit"),  # named users together: their association
    ("5", (), "QOSGrpCpuLimit"),  # hosts only: everyone's
    ("6", ("matlab",), "QOSGrpLicense"),  # no filter
    ("7", ("matlab", "gpu"), "AssocGrpLicense"),  # a project filter makes it an account's limit
])
def test_reason_from_resource_and_filter(rule, requested, want):
    sets = policy.parse_quota_sets(text("quota-qconf-srqs-forms.txt"))
    hold = policy.QuotaHold(1, "w2_forms", rule, "", requested)
    assert policy.quota_reason(hold, sets, CFG) == want


def test_recorded_holds_map_to_reasons():
    sets = policy.parse_quota_sets(text("quota-qconf-srqs.txt"))
    holds = policy.parse_quota_messages(text("quota-qstat-j-three.txt"))
    got = {j: policy.quota_reason(h, sets, CFG) for j, h in holds.items()}
    # users {*} projects w2quota -> anthropic_api; users shimtester queues debug -> slots; projects w2quota -> slots
    assert got == {7156: "AssocGrpLicense", 7157: "AssocGrpCpuLimit", 7159: "AssocGrpCpuLimit"}


def test_site_overrides_win_by_rule_then_set():
    sets = policy.parse_quota_sets(text("quota-qconf-srqs-forms.txt"))
    hold = policy.QuotaHold(1, "w2_forms", "per_user", "", ())
    assert policy.quota_reason(hold, sets, CFG, {"w2_forms/1": "QOSMaxJobsPerUserLimit"}) == "QOSMaxJobsPerUserLimit"
    assert policy.quota_reason(hold, sets, CFG, {"w2_forms/per_user": "A", "w2_forms": "B"}) == "A"
    assert policy.quota_reason(hold, sets, CFG, {"w2_forms": "B"}) == "B"
    assert policy.quota_reason(policy.QuotaHold(1, "gone", "1", "", ()), sets, CFG) == policy.UNKNOWN_RULE


def test_site_config_validates_reason_words(tmp_path):
    from shim import config
    from shim.errors import ShimError

    ok = config.parse('[reasons]\n"agents/1" = "QOSMaxJobsPerUserLimit"\n', "x.toml")
    assert ok.reasons == {"agents/1": "QOSMaxJobsPerUserLimit"}
    with pytest.raises(ShimError) as e:
        config.parse('[reasons]\nagents = "two words"\n', "x.toml")
    assert "not a Slurm reason word" in str(e.value.lines)


def _backend() -> ReplayBackend:
    b = ReplayBackend()
    b.add(*ops.scheduler_messages(), text("quota-qstat-j-global.txt"))
    b.add(*ops.detail_text([7156, 7157, 7159]), text("quota-qstat-j-three.txt"))
    b.add(*ops.quota_sets(), text("quota-qconf-srqs.txt"))
    return b


@pytest.fixture
def site(monkeypatch, tmp_path):
    from conftest import use_site_config
    from shim import siteconf

    use_site_config(monkeypatch, tmp_path)
    return siteconf.get()


def test_listing_shows_the_mapped_reasons(site):
    cfg = site
    b = _backend()
    jl = jobs.list_jobs(cfg, backend=b, xml=text("quota-qstat-u-all-r-xml.xml"), quotas=True)
    assert {r.job_id: r.reason for r in jl.records} == {
        7156: "AssocGrpLicense", 7157: "AssocGrpCpuLimit", 7159: "AssocGrpCpuLimit"}
    assert [c[0] for c in b.calls] == [("qstat", "-j"), ("qstat", "-j", "7156,7157,7159"), ("qconf", "-srqs")]


def test_no_quota_lookup_unless_asked_and_one_call_when_none_hold(site):
    cfg = site
    b = _backend()
    jl = jobs.list_jobs(cfg, backend=b, xml=text("quota-qstat-u-all-r-xml.xml"), quotas=False)
    assert sorted(r.reason for r in jl.records) == ["Priority", "Priority", "Resources"] and b.calls == []
    b = ReplayBackend()
    b.add(*ops.scheduler_messages(), "Jobs dropped because of hold state\n\t7158\n")
    jl = jobs.list_jobs(cfg, backend=b, xml=text("quota-qstat-u-all-r-xml.xml"), quotas=True)
    assert "Resources" in {r.reason for r in jl.records} and len(b.calls) == 1


def test_quota_held_jobs_leave_the_line_for_resources(site):
    """Slurm ranks only the jobs a limit does not hold: the first other job waits for Resources."""
    cfg = site
    b = ReplayBackend()
    b.add(*ops.scheduler_messages(), f"{policy.QUOTA_HEADING}\n\t7156,\t7157\n")
    b.add(*ops.detail_text([7156, 7157]), text("quota-qstat-j-three.txt"))
    b.add(*ops.quota_sets(), text("quota-qconf-srqs.txt"))
    jl = jobs.list_jobs(cfg, backend=b, xml=text("quota-qstat-u-all-r-xml.xml"), quotas=True)
    assert {r.job_id: r.reason for r in jl.records}[7159] == "Resources"


def test_a_quota_wins_over_the_licenses_guess(site):
    """squeue says Licenses when a running job holds a license the pending job wants (a guess: the
    seats may not be out). When Grid Engine says a quota holds the job, that is the reason shown.
    The recorded listing gets one running job holding anthropic_api (the element of a running
    job from the quota capture's moment, its request renamed)."""
    xml = text("quota-qstat-u-all-r-xml.xml")
    running = ('<queue_info>\n    <job_list state="running">\n      <JB_job_number>7155</JB_job_number>\n'
               '      <JAT_prio>0.75000</JAT_prio>\n      <JB_name>seat_holder</JB_name>\n'
               '      <JB_owner>root</JB_owner>\n      <state>r</state>\n'
               '      <JAT_start_time>2026-12-02T01:21:11</JAT_start_time>\n      <queue_name>debug@vm</queue_name>\n'
               '      <slots>1</slots>\n      <full_job_name>seat_holder</full_job_name>\n'
               '      <hard_request name="anthropic_api" resource_contribution="0.000000">1</hard_request>\n'
               '    </job_list>\n')
    xml = xml.replace("<queue_info>\n", running, 1)
    jl = jobs.list_jobs(site, backend=ReplayBackend(), xml=xml, quotas=False)
    assert {r.job_id: r.reason for r in jl.records}[7156] == "Licenses"
    jl = jobs.list_jobs(site, backend=_backend(), xml=xml, quotas=True)
    assert {r.job_id: r.reason for r in jl.records}[7156] == "AssocGrpLicense"


def test_ocs_words_its_quota_heading_otherwise():
    # OCS 9.1.4's qstat -j (recorded on the project's OCS cell with a slots=0 quota on a project)
    text = "Jobs dropped because exceeds limit in rule\n\t500434\n"
    assert policy.quota_held(text) == {500434}
    held = policy.parse_quota_messages(
        "job_number:                      500434\n"
        'scheduling info:                 cannot run because it exceeds limit "/////" in rule "w8_cpu/1"\n')
    assert (held[500434].quota_set, held[500434].rule, held[500434].limit) == ("w8_cpu", "1", "/////")
