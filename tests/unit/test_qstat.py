"""Reading Grid Engine's qstat XML (SGE 8.1.9 and Open Cluster Scheduler 9) and mapping its states.

All files are in ``fixtures/gridengine/``: ``sge-8.1.9`` holds the SGE 8.1.9 reference captures and this
project's live captures, ``ocs-9.1.4`` the outputs recorded on the project's own Open Cluster Scheduler 9.1.4 cell
(`slurm-shim cluster up --flavour ocs`; its capture.py records them)
(each directory's README.md says where every file came from).
"""

from __future__ import annotations

import os
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, REPO, SGE_REF
from shim import siteconf
from shim.gridengine import backends, qstat as q
from shim.gridengine.units import ge_time
from shim.slurm.model import STATE_CODES

OCS = FIXTURES / "gridengine" / "ocs-9.1.4"
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
            assert st in STATE_CODES
            if "d" in combo:
                assert st in ("COMPLETING", "CANCELLED")


def test_times_durations_memory_and_task_ranges():
    assert ge_time("2026-11-30T08:15:55") == datetime(2026, 11, 30, 8, 15, 55).timestamp()
    assert ge_time("2026-08-18T13:28:45.699554") == datetime(2026, 8, 18, 13, 28, 45, 699554).timestamp()
    assert ge_time("1796026555") == 1796026555.0
    assert ge_time("0") is None and ge_time("") is None and ge_time("junk") is None
    assert q.parse_task_ranges("3-5:1") == [3, 4, 5]
    assert q.parse_task_ranges("1-9:4") == [1, 5, 9]
    assert q.parse_task_ranges("1,3,4") == [1, 3, 4]
    assert q.parse_task_ranges("2") == [2]


def test_grid_engine_values_have_one_reader():
    """gridengine.units reads Grid Engine's values for qstat, qacct and qhost, as sge_types(1)
    defines them (k = 1000, K = 1024; h:m:s with empty fields; INFINITY)."""
    from shim.gridengine import qacct, qhost, units

    assert units.ge_seconds("3600") == 3600
    assert units.ge_seconds("1:0:0") == 3600
    assert units.ge_seconds("0:5:3") == 303
    assert units.ge_seconds("1::1") == 3601
    assert units.ge_seconds("INFINITY") == units.ge_seconds("infinity") == -1
    assert units.ge_seconds("") is None and units.ge_seconds("x:1") is None
    assert units.ge_memory_mb("1G") == 1024
    assert units.ge_memory_mb("512M") == 512
    assert units.ge_memory_mb("1g") == 954
    assert units.ge_memory_mb("1073741824") == 1024
    assert units.ge_memory_mb("INFINITY") is None and units.ge_memory_mb("junk") is None
    assert units.ge_memory_bytes("4g") == 4e9 and units.ge_memory_bytes("4G") == 4 * 2**30
    assert units.ge_memory_bytes("INFINITY") == float("inf")
    assert qhost.size_mb("23.5G") == 24064 and qhost.size_mb("353.9M") == 353 and qhost.size_mb("-") is None
    # time stamps: qstat's ISO and epoch forms, OCS milliseconds, qacct -j's text
    assert units.ge_time("1796026555123") == 1796026555.0
    assert units.ge_time("Mon Nov 30 08:15:55 2026") == datetime(2026, 11, 30, 8, 15, 55).timestamp()
    assert units.ge_time("-/-") is None
    # the twins disagreed: qacct read h_rt=INFINITY as no value and 4g as 4 GiB
    r = qacct.Record(category="-l h_rt=INFINITY", wallclock=10**9, maxvmem=0)
    assert not qacct._hit_limit(r)
    r = qacct.Record(category="-l h_vmem=4g", maxvmem=4e9)  # Grid Engine stops it at 4e9 bytes
    assert qacct._over_memory(r)
    r = qacct.Record(category="-l h_vmem=INFINITY", maxvmem=2**40)
    assert not qacct._over_memory(r)


XMLS = [SGE_REF / n for n in ("qstat-u-all-xml-mixed-states.xml", "qstat-u-all-xml-r-mixed-states.xml",
                              "qstat-dr-after-qdel.xml", "qstat-xml-pe-running.xml", "qstat-xml-as-user.xml",
                              "qstat-f-xml-ref.xml", "qstat-xml-g-t-pe-running.xml")] + \
    sorted(LIVE.glob("live-qstat-*.xml")) + [OCS / n for n in ("qstat.xml", "qstat-r.xml", "qstat-r-all-users.xml", "qstat-f.xml")]


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


@pytest.mark.parametrize("name", ["qstat.xml", "qstat-r.xml"])
def test_ocs9_job_list_with_jat_submission_time_and_microseconds(cfg, name):
    # OCS 9.1.4's `qstat -xml` (and `-r`): ISO times with microseconds, JAT_submission_time for pending jobs
    run, held = q.parse_jobs((OCS / name).read_text(), cfg)
    assert (run.job_id, run.name, run.user) == (500018, "ocs_test", "root")
    assert (run.state, run.nodes, run.num_cpus, run.partition) == ("RUNNING", ["vm"], 1, "debug")
    assert run.extra["start_ts"] == datetime(2026, 12, 2, 1, 12, 29, 179402).timestamp()
    assert (held.job_id, held.state, held.reason, held.nodes, held.num_cpus) == (500019, "PENDING", "JobHeldUser", [], 2)
    assert held.extra["submit_ts"] == datetime(2026, 12, 2, 1, 12, 29, 194615).timestamp()


@pytest.mark.parametrize("name", ["qstat.xml", "qstat-r.xml", "qstat-r-all-users.xml"])
def test_ocs9_job_lists_take_the_fast_reading(cfg, name):
    """OCS 9's pending rows (JAT_submission_time) match the one-regex layout as SGE 8.1.9's do, and
    give the same records as the element-by-element reading."""
    text = (OCS / name).read_text()
    r = q.RowReader()
    items = r.feed(text)
    assert r.finish() == ([], False)
    assert items and all(type(x) is tuple for x in items)
    assert any("JAT_submission_time" in x for x in items)
    want = [q.record_from_row(row, q.QueueMap(cfg), cfg) for row in q.parse_rows_tree(text)]
    got = _records(items, cfg)
    assert got == want and [x.extra for x in got] == [x.extra for x in want]
    assert all(x.extra["submit_ts"] and x.extra["start_ts"] is None for x in got if x.state == "PENDING")


def test_ocs9_job_list_requests():
    rows = q.parse_rows((OCS / "qstat-r.xml").read_text())
    assert rows[0]["hard_queues"] == ["debug"] and rows[0]["hard"] == {}
    assert (rows[1]["pe"], rows[1]["pe_slots"]) == ("smp", "2")
    assert rows[1]["hard"] == {"h_rt": "600", "mem_free": "100M"}  # <hard_request ... resource_contribution=...>


@pytest.mark.parametrize("name,num,submitted", [
    ("qstat-j.xml", 500018, datetime(2026, 12, 2, 1, 12, 29, 176472)),
    ("qstat-j-held.xml", 500019, datetime(2026, 12, 2, 1, 12, 29, 194615)),
])
def test_ocs9_detail_parses(name, num, submitted):
    d = q.parse_detail((OCS / name).read_text())
    assert list(d) == [num]
    job = d[num]
    assert job["JB_owner"] == "root"
    assert job["submit_ts"] == submitted.timestamp()  # ISO with microseconds
    assert job["hard_queues"] == ["debug"]  # from JB_request_set_list/*/JRS_hard_queue_list


def test_ocs9_detail_running_job_fields():
    job = q.parse_detail((OCS / "qstat-j.xml").read_text())[500018]
    assert (job["JB_job_name"], job["JB_script_file"], job["args"]) == ("ocs_test", "/bin/sleep", ["60"])
    assert job["stdout"] == ["/tmp/ocs-capture/job.out"] and job["JB_merge_stderr"] == "true"
    assert job["hard"] == {} and job["pe"] == ""
    assert job["tasks"] == [{"task": 1, "status": "128", "hosts": ["vm"],
                             "start": datetime(2026, 12, 2, 1, 12, 29, 179402).timestamp()}]


def test_ocs9_array_job_list_and_detail(cfg):
    # alice's `-t 1-4 -tc 2`: two tasks running, the rest one pending row; the throttle from XML
    recs = [r for r in q.parse_jobs((OCS / "qstat-r-all-users.xml").read_text(), cfg) if r.job_id == 500020]
    assert sorted((r.state, r.extra.get("ge_task")) for r in recs if r.state == "RUNNING") == [("RUNNING", 1), ("RUNNING", 2)]
    pend = [r for r in recs if r.state == "PENDING"]
    assert len(pend) == 1 and pend[0].extra["ge_tasks"] == [3, 4] and pend[0].user == "alice"
    job = q.parse_detail((OCS / "qstat-j-array.xml").read_text())[500020]
    assert job["JB_ja_task_concurrency"] == "2" and job["JB_owner"] == "alice"
    assert sorted(t["task"] for t in job["tasks"]) == [1, 2]


def test_ocs9_queue_listing_and_hosts():
    from shim.gridengine import qhost

    (vm,) = qhost.parse_qhost_xml((OCS / "qhost.xml").read_text())
    assert (vm.name, vm.arch, vm.ncpu, vm.sockets, vm.cores, vm.threads) == ("vm", "lx-amd64", 2, 1, 2, 2)
    (vm,) = qhost.parse_qhost_xml((OCS / "qhost-F-q-j.xml").read_text())
    assert vm.queues["debug"].slots_used == 3 and vm.queues["gpu"].slots_total == 8
    # OCS caps the exec host's slots (cluster up --flavour ocs sets 16: 2 queues x 8): 16 - 3 used
    assert (vm.resources["gpu"], vm.resources["slots"], vm.resources["matlab"]) == ("2", "13", "3")


def test_ocs9_detail_held_job_requests():
    job = q.parse_detail((OCS / "qstat-j-held.xml").read_text())[500019]
    # resources from JB_request_set_list/*/JRS_hard_resource_list, the PE and its range
    assert job["hard"] == {"h_rt": "600", "mem_free": "100M"}
    assert job["pe"] == "smp" and job["pe_slots"] == "2"
    assert job["tasks"] == []  # held: no task has started


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
    assert ge_time(later["JB_execution_time"]) > later["submit_ts"]
    dep = next(v for v in d.values() if v["JB_job_name"] == "fx_dep")
    run1 = next(k for k, v in d.items() if v["JB_job_name"] == "fx_run1")
    assert dep["predecessors"] == [str(run1)]
    eqw = next(v for v in d.values() if v["JB_job_name"] == "fx_eqw")
    assert eqw["stdout"] == ["/nonexistent/dir/out"]


def test_queue_list_and_hosts():
    """qhost.py's readers are the ones for queue instances and hosts (qstat.parse_queues and
    parse_hosts, their twins, are gone): the live captures read as before."""
    from shim.gridengine import qhost

    hosts = {h.name: h for h in qhost.parse_qhost_xml((LIVE / "live-qhost-xml.xml").read_text())}
    assert "vm" in hosts and "global" not in hosts and hosts["vm"].ncpu > 0


# ---------------------------------------------------------------------------------------------
# reading qstat's output while it runs: RowReader, record_from_match, Query


def _reader_rows(data, size):
    """parse_rows through a RowReader fed ``size`` bytes at a time (as qstat's pipe delivers them)."""
    r = q.RowReader()
    items = []
    for i in range(0, len(data), size):
        items += r.feed(data[i:i + size])
    more, again = r.finish()
    return more if again else [q._layout_row(x) if type(x) is tuple else x for x in items] + more, r


def _records(items, cfg):
    cache = q.RowCache(q.QueueMap(cfg), cfg)
    return [q.record_from_match(x, cache) if type(x) is tuple else q.record_from_row(x, cache.qmap, cfg, cache)
            for x in items]


@pytest.mark.parametrize("path", XMLS, ids=lambda p: p.name)
@pytest.mark.parametrize("size", [1, 13, 4096, 1 << 20])
def test_reader_in_pieces_equals_elementtree(path, size):
    data = path.read_bytes()
    rows, r = _reader_rows(data, size)
    assert rows == q.parse_rows_tree(data)
    assert r.plain and not r.blank


@pytest.mark.parametrize("path", XMLS, ids=lambda p: p.name)
def test_records_from_matches_equal_records_from_rows(path, cfg):
    text = path.read_text()
    r = q.RowReader()
    items = r.feed(text)
    assert r.finish() == ([], False)
    if path.name.startswith(("live-qstat-u-all", "qstat-u-all")):  # the job list: all in the fast layout
        assert all(type(x) is tuple for x in items)
    want = [q.record_from_row(row, q.QueueMap(cfg), cfg) for row in q.parse_rows_tree(text)]
    assert _records(items, cfg) == want
    assert [x.extra for x in _records(items, cfg)] == [x.extra for x in want]


# A job element as qstat -r writes it, with the variations the fast reading must keep exact or
# hand to the general one: entities, attributes, repeated and unknown elements, odd spacing.
_PARTS = st.sampled_from([
    "<tasks>3-5:1</tasks>", "<tasks>2</tasks>", "<full_job_name>a&amp;b</full_job_name>",
    "<full_job_name>x</full_job_name>", '<requested_pe name="mpi">2-4</requested_pe>',
    '<granted_pe name="smp">2</granted_pe>', '<hard_request name="h_rt" resource_contribution="0.0">60</hard_request>',
    '<hard_request name="gpu" resource_contribution="0.0">1</hard_request>',
    '<hard_request name="matlab" resource_contribution="0.0">2</hard_request>',
    '<soft_request name="x">1</soft_request>', "<hard_req_queue>gpu</hard_req_queue>",
    "<hard_req_queue>debug@vm</hard_req_queue>", "<predecessor_jobs_req>a</predecessor_jobs_req>",
    "<predecessor_jobs>5</predecessor_jobs>", "<predecessor_jobs>6,7</predecessor_jobs>",
    "<binding>NONE</binding>", "<JB_name>again</JB_name>", "<master>MASTER</master>", "<slots>3</slots>",
    "<empty></empty>", "<self/>", "<!-- note -->", "<pe>raw</pe>", "<section>s</section>",
    "<JAT_submission_time>2026-11-30T08:00:00.5</JAT_submission_time>", "<hard_request>9</hard_request>",
])


@st.composite
def _job(draw):
    state = draw(st.sampled_from(["r", "qw", "hqw", "Eqw", "dr", "s", "t", "dqw"]))
    running = state in ("r", "dr", "s", "t")
    name = draw(st.sampled_from(["queued", "a&amp;b", "sx_mfrggzdf", "x y", "&lt;n&gt;"]))
    head = [f"<JB_job_number>{draw(st.integers(1, 99))}</JB_job_number>",
            f"<JAT_prio>{draw(st.sampled_from(['0.25000', '0.00000', 'nan', '']))}</JAT_prio>",
            f"<JB_name>{name}</JB_name>", f"<JB_owner>{draw(st.sampled_from(['root', 'alice']))}</JB_owner>",
            f"<state>{state}</state>",
            "<JAT_start_time>2026-11-30T09:10:19</JAT_start_time>" if running
            else "<JB_submission_time>2026-11-30T09:00:00</JB_submission_time>",
            f"<queue_name>{draw(st.sampled_from(['debug@vm', 'gpu@vm', 'all.q@h2'])) if running else ''}</queue_name>",
            f"<slots>{draw(st.sampled_from(['1', '2', 'x']))}</slots>"]
    if draw(st.booleans()):
        head = draw(st.permutations(head))  # a layout the regex does not know
    body = head + draw(st.lists(_PARTS, max_size=6))
    sep = draw(st.sampled_from(["\n      ", "", " ", "\t"]))
    section = "running" if running else "pending"
    return f'    <job_list state="{section}">' + sep + sep.join(body) + sep + "</job_list>\n"


@settings(max_examples=300, deadline=None)
@given(jobs=st.lists(_job(), max_size=8), size=st.integers(1, 400), cfgs=st.just(None))
def test_any_job_list_reads_as_elementtree_reads_it(jobs, size, cfgs):
    doc = ("<?xml version='1.0'?>\n<job_info>\n  <queue_info>\n" + "".join(jobs) +
           "  </queue_info>\n  <job_info>\n  </job_info>\n</job_info>\n")
    data = doc.encode()
    rows, _ = _reader_rows(data, size)
    assert rows == q.parse_rows_tree(data)
    assert q.parse_rows(doc) == rows
    cfg = _site()
    r = q.RowReader()
    items = r.feed(doc)
    more, again = r.finish()
    if not again:
        want = [q.record_from_row(row, q.QueueMap(cfg), cfg) for row in rows]
        assert repr(_records(items, cfg)) == repr(want)  # repr: a "nan" priority is not equal to itself


_SITE = []


def _site():
    if not _SITE:
        import os

        was = os.environ.get("SLURM_SHIM_CONFIG")
        os.environ.setdefault("SLURM_SHIM_CONFIG", str(FIXTURES / "site" / "config.toml"))
        try:
            siteconf.reset()
            _SITE.append(siteconf.get())
        finally:  # never left behind: the live tests that follow in the same run pass the
            if was is None:  # environment on to the real commands (CI's second pass)
                del os.environ["SLURM_SHIM_CONFIG"]
            siteconf.reset()
    return _SITE[0]


def test_irregular_document_is_read_again_whole():
    doc = ('<job_info><queue_info><job_list state="running"><JB_job_number>7</JB_job_number>'
           '<JB_name><![CDATA[a<b]]></JB_name></job_list>'
           '<job_list state="pending"><JB_job_number>8</JB_job_number></job_list></queue_info></job_info>')
    rows, r = _reader_rows(doc.encode(), 20)
    assert not r.plain and [x["JB_job_number"] for x in rows] == ["7", "8"] and rows[0]["JB_name"] == "a<b"
    nested = doc.replace("<![CDATA[a<b]]>", "x").replace("</job_list><job_list", "<job_list", 1).replace(
        "</job_list></queue_info>", "</job_list></job_list></queue_info>")
    rows, r = _reader_rows(nested.encode(), 7)
    assert not r.plain and rows == q.parse_rows_tree(nested) and len(rows) == 2


def _fake_qstat(tmp_path, script):
    from shim.gridengine.process import GridEngineBackend

    (tmp_path / "qstat").write_text("#!/bin/sh\n" + script)
    (tmp_path / "qstat").chmod(0o755)
    cfg = _site()
    b = GridEngineBackend(cfg)
    b.bin_dir, b.timeout = str(tmp_path), 10
    return cfg, b


def test_query_streams_the_real_command(tmp_path):
    fixture = LIVE / "live-qstat-u-all-r-xml.mixed.xml"
    # written in three bursts, as qstat's buffered output arrives
    cfg, b = _fake_qstat(tmp_path, f'echo "$@" > {tmp_path}/args\nhead -c 3000 {fixture}\nsleep 0.1\n'
                                   f'tail -c +3001 {fixture} | head -c 5000\nsleep 0.1\ntail -c +8001 {fixture}\n')
    qy = backends.start_qstat(cfg, backend=b)
    assert qy.stream is not None
    r = q.RowReader()
    items = [x for data in qy.chunks() for x in r.feed(data)]
    qy.check(r.blank)
    assert (tmp_path / "args").read_text().split() == ["-u", "*", "-r", "-xml"]
    assert [q._layout_row(x) for x in items] == q.parse_rows_tree(fixture.read_bytes())


def test_query_failures_are_slurms_controller_errors(tmp_path):
    from shim.errors import BackendUnavailable, ShimError

    cfg, b = _fake_qstat(tmp_path, "echo 'error: commlib error: got select error (Connection refused)' >&2\n"
                                   "echo 'unable to contact qmaster' >&2\nexit 1\n")
    qy = backends.start_qstat(cfg, backend=b)
    r = q.RowReader()
    for data in qy.chunks():
        r.feed(data)
    with pytest.raises(ShimError) as e:
        qy.check(r.blank)
    assert e.value.lines == ["slurm_load_jobs error: Unable to contact slurm controller (connect failure): "
                             "unable to contact qmaster"]
    cfg, b = _fake_qstat(tmp_path, "sleep 5\n")
    b.timeout = 0.3
    with pytest.raises(BackendUnavailable, match=r"controller \(\S*/qstat: no answer within 0.3 s\)"):
        list(backends.start_qstat(cfg, backend=b).chunks())
    b.bin_dir = str(tmp_path / "nowhere")
    qy = backends.start_qstat(cfg, backend=b)  # a spawn failure surfaces where the output is read
    with pytest.raises(BackendUnavailable, match="command not found"):
        list(qy.chunks())


def test_query_close_stops_an_unread_qstat(tmp_path):
    cfg, b = _fake_qstat(tmp_path, "sleep 30\n")
    qy = backends.start_qstat(cfg, backend=b)
    p = qy.stream.popen
    qy.close()
    assert p.poll() is not None


def test_importing_the_reader_compiles_no_regex():
    import subprocess
    import sys

    code = ("import sys; import shim.gridengine.qstat as q; "
            "print(type(q._LAYOUT_RE).__name__, 'xml.etree.ElementTree' in sys.modules, 'shim.slurm.model' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))  # this checkout's package, not whichever is installed
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout.split()
    assert out == ["_Lazy", "False", "False"]
