"""Reading Grid Engine's qstat XML (SGE 8.1.9 and Open Cluster Scheduler 9) and mapping its states.

SGE files: the shared reference (``../shared/reference/sge-8.1.9``) and this project's live captures
(``fixtures/gridengine/sge-8.1.9``). OCS 9 files are read where they are (``../shared/reference/ocs-9.x``),
never copied.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from conftest import FIXTURES, SGE_REF, SHARED
from shim import siteconf
from shim.backends import qstat as q

OCS = SHARED / "reference" / "ocs-9.x"
LIVE = FIXTURES / "gridengine" / "sge-8.1.9"


@pytest.fixture
def cfg(monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_SHIM_CONFIG", str(FIXTURES / "site" / "config.toml"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    siteconf.reset()
    yield siteconf.get()
    siteconf.reset()


@pytest.mark.parametrize("letters, state, reason", [
    ("qw", "PENDING", "None"),
    ("hqw", "PENDING", "JobHeldUser"),
    ("hRwq", "PENDING", "JobHeldUser"),
    ("Rq", "PENDING", "None"),
    ("Eqw", "PENDING", "launch failed requeued held"),
    ("hEqw", "PENDING", "launch failed requeued held"),
    ("t", "RUNNING", "None"),
    ("r", "RUNNING", "None"),
    ("Rr", "RUNNING", "None"),
    ("Rt", "RUNNING", "None"),
    ("hr", "RUNNING", "None"),
    ("s", "SUSPENDED", "None"),
    ("S", "SUSPENDED", "None"),
    ("T", "SUSPENDED", "None"),
    ("St", "SUSPENDED", "None"),
    ("Rs", "SUSPENDED", "None"),
    ("dr", "COMPLETING", "None"),
    ("dt", "COMPLETING", "None"),
    ("ds", "COMPLETING", "None"),
    ("dRr", "COMPLETING", "None"),
    ("dqw", "CANCELLED", "None"),
    ("dhqw", "CANCELLED", "None"),
    ("dEqw", "CANCELLED", "None"),
    ("Er", "PENDING", "launch failed requeued held"),
    ("z", "COMPLETED", "None"),
    ("", "PENDING", "None"),
])
def test_state_letters_by_precedence(letters, state, reason):
    assert q.map_state(letters) == (state, reason)


def test_every_letter_combination_maps_to_a_slurm_state():
    import itertools

    letters = "dEsStTrRhqwz"
    for n in range(1, 4):
        for combo in itertools.combinations(letters, n):
            st, _ = q.map_state("".join(combo))
            assert st in q.STATE_CODES
            if "d" in combo:
                assert st in ("COMPLETING", "CANCELLED")


def test_times_durations_memory_and_task_ranges():
    assert q.parse_time("2026-11-30T08:15:55") == datetime(2026, 11, 30, 8, 15, 55).timestamp()
    assert q.parse_time("2026-08-18T13:28:45.699554") == datetime(2026, 8, 18, 13, 28, 45, 699554).timestamp()
    assert q.parse_time("1796026555") == 1796026555.0
    assert q.parse_time("0") is None and q.parse_time("") is None and q.parse_time("junk") is None
    assert q.parse_duration("3600") == 3600
    assert q.parse_duration("1:0:0") == 3600
    assert q.parse_duration("0:5:3") == 303
    assert q.parse_duration("INFINITY") == -1
    assert q.parse_memory_mb("1G") == 1024
    assert q.parse_memory_mb("512M") == 512
    assert q.parse_memory_mb("1g") == 954
    assert q.parse_memory_mb("1073741824") == 1024
    assert q.parse_task_ranges("3-5:1") == [3, 4, 5]
    assert q.parse_task_ranges("1-9:4") == [1, 5, 9]
    assert q.parse_task_ranges("1,3,4") == [1, 3, 4]
    assert q.parse_task_ranges("2") == [2]


XMLS = [SGE_REF / n for n in ("qstat-u-all-xml-mixed-states.xml", "qstat-u-all-xml-r-mixed-states.xml",
                              "qstat-dr-after-qdel.xml", "qstat-xml-pe-running.xml", "qstat-xml-as-user.xml",
                              "qstat-f-xml.xml", "qstat-xml-g-t-pe-running.xml")] + sorted(LIVE.glob("live-qstat-*.xml"))


@pytest.mark.parametrize("path", XMLS, ids=lambda p: p.name)
def test_fast_reader_equals_elementtree(path):
    text = path.read_text()
    rows = q.parse_rows(text)
    assert rows == q.parse_rows_tree(text)
    assert len(rows) == text.count("<job_list")


def test_fast_reader_decodes_entities_and_falls_back_on_cdata():
    doc = ("<?xml version='1.0'?>\n<job_info><queue_info>\n<job_list state=\"running\">\n"
           "<JB_job_number>7</JB_job_number><JB_name>a&amp;b</JB_name><state>r</state>"
           "<hard_request name=\"h_rt\" resource_contribution=\"0.0\">60</hard_request>"
           "</job_list></queue_info><job_info></job_info></job_info>")
    rows = q.parse_rows(doc)
    assert rows[0]["JB_name"] == "a&b" and rows[0]["hard"] == {"h_rt": "60"}
    cdata = doc.replace("a&amp;b", "<![CDATA[a&b]]>")
    assert q.parse_rows(cdata)[0]["JB_name"] == "a&b"


def test_reference_mixed_states_with_requests(cfg):
    recs = {(r.job_id, r.extra.get("ge_task"), r.state): r
            for r in q.parse_jobs((SGE_REF / "qstat-u-all-xml-r-mixed-states.xml").read_text(), cfg)}
    run = recs[(25, None, "RUNNING")]
    assert (run.name, run.user, run.partition, run.queue, run.nodes, run.num_cpus) == \
        ("notify_sleep", "alice", "all.q", "all.q", ["vm"], 1)
    assert run.extra["start_ts"] == datetime(2026, 11, 30, 8, 15, 55).timestamp()
    assert recs[(26, None, "SUSPENDED")].user == "root"
    assert recs[(27, 1, "RUNNING")].extra["ge_task"] == 1
    pend = recs[(27, None, "PENDING")]
    assert pend.extra["ge_tasks"] == [3, 4, 5] and pend.nodes == [] and pend.batch_host == ""
    pe = recs[(28, None, "PENDING")]
    assert pe.num_cpus == 2 and pe.partition == "debug"  # no queue request: the default partition
    assert recs[(23, None, "PENDING")].reason == "launch failed requeued held"
    assert recs[(31, None, "PENDING")].extra["predecessors"] == [25]
    assert "predecessors" not in recs[(32, None, "PENDING")].extra
    gpu = recs[(29, None, "PENDING")]
    assert (gpu.gres, gpu.licenses) == ("gres:gpu:1", "matlab:1")


def test_live_capture_queues_limits_and_names(cfg):
    recs = {r.job_id: r for r in q.parse_jobs((LIVE / "live-qstat-u-all-r-xml.mixed.xml").read_text(), cfg)}
    assert recs[105].time_limit == 60  # h_rt=3600
    assert recs[108].partition == "gpu" and recs[108].gres == "gres:gpu:1"
    assert recs[117].partition == "gpu" and recs[117].time_limit == 120  # pending: from the hard queue request
    assert recs[118].name == "my job/1"  # Grid Engine name sx_... decoded
    assert recs[111].num_cpus == 64  # -pe smp 64
    assert recs[107].state == "SUSPENDED"


def test_unmapped_queue_shows_its_own_name(cfg):
    qmap = q.QueueMap(cfg)
    assert qmap.partition("debug@vm") == "debug"
    assert qmap.partition("all.q@vm") == "all.q"
    assert not qmap.ambiguous("debug")


def test_ocs9_job_list_with_jat_submission_time_and_microseconds(cfg):
    # the job list as OCS 9's XML writer emits it for pending jobs (JAT_submission_time, microseconds)
    doc = """<?xml version='1.0'?>
<job_info  xmlns:xsd="https://github.com/hpc-gridware/clusterscheduler/raw/master/source/dist/util/resources/schemas/qstat/qstat.xsd">
  <queue_info>
    <job_list state="running">
      <JB_job_number>7</JB_job_number>
      <JAT_prio>0.55500</JAT_prio>
      <JB_name>e2e-capture-gpu.sh</JB_name>
      <JB_owner>gridware</JB_owner>
      <state>r</state>
      <JAT_start_time>2026-08-18T13:28:45.700858</JAT_start_time>
      <queue_name>all.q@ocs-worker1</queue_name>
      <slots>2</slots>
    </job_list>
  </queue_info>
  <job_info>
    <job_list state="pending">
      <JB_job_number>8</JB_job_number>
      <JAT_prio>0.00000</JAT_prio>
      <JB_name>later</JB_name>
      <JB_owner>gridware</JB_owner>
      <state>qw</state>
      <JAT_submission_time>2026-08-18T13:29:01.123456</JAT_submission_time>
      <queue_name></queue_name>
      <slots>1</slots>
    </job_list>
  </job_info>
</job_info>
"""
    run, pend = q.parse_jobs(doc, cfg)
    assert (run.state, run.nodes, run.num_cpus, run.partition) == ("RUNNING", ["ocs-worker1"], 2, "all.q")
    assert run.extra["start_ts"] == datetime(2026, 8, 18, 13, 28, 45, 700858).timestamp()
    assert pend.extra["submit_ts"] == datetime(2026, 8, 18, 13, 29, 1, 123456).timestamp()


@pytest.mark.parametrize("name", ["9.0.10_qstat-xml-j.xml", "9.1.4_qstat-xml-j.xml", "unit-qstat_j_gpu1.xml",
                                  "unit-qstat_j_gpu2.xml", "unit-qstat_j_mem.xml"])
def test_ocs9_detail_parses(name):
    d = q.parse_detail((OCS / name).read_text())
    assert len(d) == 1
    (num, job), = d.items()
    assert num > 0 and job["JB_owner"]
    assert job["submit_ts"] is not None  # ISO with microseconds
    assert job["hard"]  # resources from JB_request_set_list/*/JRS_hard_resource_list


def test_ocs9_detail_gpu_job_fields():
    d = q.parse_detail((OCS / "9.1.4_qstat-xml-j.xml").read_text())
    job = next(iter(d.values()))
    assert job["hard"].get("gpu") == "1"
    assert job["hard_queues"] == ["all.q@ocs-worker1"]
    assert job["pe"] == "make" and job["pe_slots"] == "2"
    assert job["tasks"] and job["tasks"][0]["start"] is not None


def test_sge_detail_epoch_times_paths_and_tasks():
    d = q.parse_detail((SGE_REF / "qstat-j-array-running.xml").read_text())
    job = d[27]
    assert job["JB_cwd"] == "/home/alice/sgeref"
    assert job["submit_ts"] == 1796026556.0 or job["submit_ts"] > 1.7e9
    assert [t["task"] for t in job["tasks"]] == [1, 2]
    assert job["JB_ja_task_concurrency"] == "2"
    gpu = q.parse_detail((SGE_REF / "qstat-j-pending-gpu.xml").read_text())[29]
    assert gpu["hard"] == {"gpu": "1", "matlab": "1"}
    assert q.parse_detail((SGE_REF / "qstat-j-nonexistent-xml.xml").read_text()) == {}


def test_live_detail_has_begin_time_and_predecessors():
    d = q.parse_detail((LIVE / "live-qstat-j-xml.mixed.xml").read_text())
    later = next(v for v in d.values() if v["JB_job_name"] == "fx_later")
    assert q.parse_time(later["JB_execution_time"]) > later["submit_ts"]
    dep = next(v for v in d.values() if v["JB_job_name"] == "fx_dep")
    run1 = next(k for k, v in d.items() if v["JB_job_name"] == "fx_run1")
    assert dep["predecessors"] == [str(run1)]
    eqw = next(v for v in d.values() if v["JB_job_name"] == "fx_eqw")
    assert eqw["stdout"] == ["/nonexistent/dir/out"]


def test_queue_list_and_hosts():
    queues = q.parse_queues((LIVE / "live-qstat-f-xml.xml").read_text())
    assert {(x["queue"], x["host"]) for x in queues} >= {("debug", "vm"), ("gpu", "vm")}
    assert all(x["slots_total"] > 0 for x in queues)
    hosts = q.parse_hosts((LIVE / "live-qhost-xml.xml").read_text())
    assert "vm" in hosts and "global" not in hosts and hosts["vm"]["num_proc"]
    ocs = q.parse_queues((OCS / "9.1.4_qstat-xml-f.xml").read_text())
    assert [x["host"] for x in ocs] == ["ocs-master", "ocs-worker1", "ocs-worker2"]
    assert ocs[0]["slots_total"] == 14
