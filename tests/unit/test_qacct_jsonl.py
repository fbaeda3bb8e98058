"""Open Cluster Scheduler 9's accounting as it ships: ``accounting.jsonl`` (times in microseconds,
``usage.rusage``/``usage.eusage``, ``deleted_by``) read by the same scan as the colon file, on the
lines recorded from our own OCS 9.1.4 cell (fixtures/gridengine/ocs-9.1.4)."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from conftest import FIXTURES, use_site_config
from shim.gridengine import backends
from shim import siteconf
from shim.gridengine import qacct
from shim.gridengine.replay import ReplayBackend
from shim.proc import Result

OCS = FIXTURES / "gridengine" / "ocs-9.1.4"
JSONL = OCS / "accounting.jsonl"


def records() -> dict[int, qacct.Record]:
    return {r.job: r for r in qacct.scan(JSONL.read_bytes())}


def test_jsonl_lines_are_records():
    recs = records()
    assert sorted(recs) == [500021, 500022, 500023]
    done = recs[500021]
    assert (done.qname, done.hostname, done.owner, done.group, done.jobname) == (
        "debug", "vm", "root", "root", "ocs_jsonl_done")
    # microseconds since the epoch -> seconds
    assert (done.submit, done.start, done.end) == (1796173953, 1796173953, 1796173953)
    assert (done.failed, done.exit_status, done.slots, done.task, done.granted_pe) == (0, 0, 1, 0, "NONE")
    assert done.maxrss_kb == 4112 and done.utime == 0.004054
    assert done.request("h_rt") == "60"  # from OCS's "-scope global -hard -l h_rt=60" category
    dele = recs[500023]
    assert (dele.granted_pe, dele.slots, dele.failed, dele.deleted_by) == ("smp", 2, 100, "root@vm")
    assert dele.maxvmem == 2990080.0 and dele.wallclock == 1
    assert recs[500022].owner == "alice" and recs[500022].deleted_by == ""


def test_jsonl_and_qacct_text_agree():
    """OCS's qacct -j of the same jobs (its 9.x time format, deleted_by) gives the same values."""
    recs = records()
    for name in ("done", "fail", "del"):
        [t] = qacct.parse_qacct((OCS / f"qacct-j-jsonl-{name}.txt").read_text())
        f = recs[t.job]
        for attr in ("qname", "hostname", "owner", "group", "jobname", "job", "failed", "exit_status",
                     "wallclock", "slots", "task", "submit", "start", "end", "granted_pe", "maxrss_kb",
                     "deleted_by", "department"):
            assert getattr(t, attr) == getattr(f, attr), (name, attr)
        assert abs(t.maxvmem - f.maxvmem) <= 1
        assert abs(t.cpu - f.cpu) < 0.001


def _many(n: int = 400) -> bytes:
    """n JSONL lines made from the recorded ones (job numbers, owners and times varied)."""
    base = [json.loads(ln) for ln in JSONL.read_text().splitlines()]
    out = []
    for i in range(n):
        o = dict(base[i % 3])
        o["job_number"] = 600000 + i
        o["owner"] = ("root", "alice", "bob")[i % 3]
        o["job_name"] = f"j{i % 7}"
        o["end_time"] = (1796000000 + i * 60) * 1_000_000
        o["submission_time"] = o["end_time"] - 5_000_000
        out.append(json.dumps(o, separators=(",", ":")))
    return ("\n".join(out) + "\n").encode()


def test_jsonl_scan_filters_agree_with_a_full_parse(tmp_path):
    data = _many()
    every = qacct.scan(data)
    assert len(every) == 400
    assert [r.job for r in qacct.scan(data, jobs=[600007, 600100])] == [600007, 600100]
    # 60000 is inside other numbers: only exact job numbers match
    assert qacct.scan(data, jobs=[60000, 6000071]) == []
    assert len(qacct.scan(data, owners=["alice"])) == sum(r.owner == "alice" for r in every)
    assert len(qacct.scan(data, ge_names=["j3"], owners=["bob"])) == sum(
        r.jobname == "j3" and r.owner == "bob" for r in every)
    cut = 1796000000 + 200 * 60
    assert len(qacct.scan(data, not_before=cut)) == sum(r.end >= cut for r in every) == 200
    assert len(qacct.scan(data, not_after=cut)) == sum(r.submit <= cut for r in every)
    # a file, read in blocks that cut lines, gives the same records as the bytes
    path = tmp_path / "accounting.jsonl"
    path.write_bytes(data)
    with open(path, "rb") as f:
        assert [(r.job, r.owner) for r in qacct.scan(f, owners=["bob"])] == [
            (r.job, r.owner) for r in every if r.owner == "bob"]


def test_jsonl_scan_in_small_blocks(tmp_path, monkeypatch):
    data = _many(50)
    path = tmp_path / "accounting.jsonl"
    path.write_bytes(data)
    monkeypatch.setattr(qacct, "_BLOCK", 97)
    assert [r.job for r in qacct.scan(str(path))] == [600000 + i for i in range(50)]
    assert [r.job for r in qacct.scan(str(path), jobs=[600049, 600001])] == [600001, 600049]


def test_malformed_jsonl_lines_are_skipped():
    good = JSONL.read_text().splitlines()[0]
    data = ("{not json\n" + good + "\n[1,2]\n{\"job_number\": \"x\"}\n\n").encode()
    assert [r.job for r in qacct.scan(data)] == [500021]
    assert qacct.parse_jsonl_line("{broken") is None
    assert qacct.parse_jsonl_line(good).job == 500021


def test_scan_file_reads_the_colon_file_and_the_jsonl_beside_it(tmp_path):
    """A cell that went from old_accounting=true to OCS's default has both files, each with the
    jobs of its time; either alone is read too."""
    acct = tmp_path / "accounting"
    shutil.copy(OCS / "accounting.colon", acct)
    shutil.copy(JSONL, tmp_path / "accounting.jsonl")
    jobs = sorted({r.job for r in qacct.scan_file(str(acct))})
    assert jobs == [500021, 500022, 500023, 500024, 500025, 500026]
    acct.unlink()
    assert sorted(r.job for r in qacct.scan_file(str(acct))) == [500021, 500022, 500023]
    assert [r.job for r in qacct.scan_file(str(acct), jobs=[500022])] == [500022]


def test_deleted_by_is_a_cancel_by_that_user():
    dele = records()[500023]
    o = qacct.outcome(dele)
    assert (o.state, o.cancel_uid, o.batch_state) == ("CANCELLED", 0, "CANCELLED")
    # a qdel at the very end of the time limit is still the user's cancel: OCS says who
    dele.category = "-scope global -hard -l h_rt=1"
    assert qacct.outcome(dele).state == "CANCELLED"
    # the same record without deleted_by (SGE 8.1.9's colon file cannot say): the time limit
    dele.deleted_by = ""
    assert (qacct.outcome(dele).state, qacct.outcome(dele).reason) == ("TIMEOUT", "TimeLimit")
    # the shim's own cancel event names the canceller first
    dele.deleted_by = "root@vm"
    assert qacct.outcome(dele, cancel={"uid": 1234}).cancel_uid == 1234
    # a user this host does not know: cancelled, by nobody it can name
    dele.deleted_by = "no-such-user-w8@vm"
    o = qacct.outcome(dele)
    assert (o.state, o.cancel_uid) == ("CANCELLED", None)


def test_the_execd_enforcing_h_rt_is_no_cancel():
    """OCS 9.1.4 signs the job its execd killed at h_rt as deleted_by execd@vm (recorded live:
    failed 100, exit 137, -l h_rt=3 and a 4 s run): Slurm's TIMEOUT, not CANCELLED."""
    [r] = qacct.scan((OCS / "accounting-h_rt-killed.jsonl").read_bytes())
    assert (r.job, r.failed, r.exit_status, r.deleted_by, r.wallclock, r.request("h_rt")) == (
        500267, 100, 137, "execd@vm", 4, "3")
    o = qacct.outcome(r)
    assert (o.state, o.reason, o.cancel_uid) == ("TIMEOUT", "TimeLimit", None)


def test_a_reschedule_is_no_cancel():
    r = records()[500021]
    r.failed = 25
    assert qacct.outcome(r).state == "REQUEUED"


@pytest.fixture
def ocs_site(monkeypatch, tmp_path):
    """A site whose Grid Engine writes only accounting.jsonl (OCS 9 as it ships), nothing queued."""
    use_site_config(monkeypatch, tmp_path)
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("SACCT_FORMAT", raising=False)
    monkeypatch.delenv("SLURM_TIME_FORMAT", raising=False)
    monkeypatch.delenv(qacct.ENV, raising=False)
    time.tzset()
    siteconf.reset()
    root = tmp_path / "sge"
    common = root / "default" / "common"
    common.mkdir(parents=True)
    shutil.copy(JSONL, common / "accounting.jsonl")
    conf = tmp_path / "config.toml"
    conf.write_text(conf.read_text().replace('sge_root = "/var/lib/gridengine"', f'sge_root = "{root}"'))
    siteconf.reset()
    cfg = siteconf.get()
    empty = (FIXTURES / "gridengine" / "sge-8.1.9" / "live-qstat-u-all-r-xml.empty.xml").read_text()
    monkeypatch.setattr(backends, "_override", ReplayBackend({("qstat",): Result(("qstat",), 0, empty, "")}))
    monkeypatch.setattr(time, "time", lambda: 1796173953 + 120)
    yield cfg
    siteconf.reset()
    time.tzset()


def test_sacct_reads_jsonl_only_accounting(ocs_site, capsys, monkeypatch):
    from shim.cli import sacct

    assert qacct.accounting_path(ocs_site).endswith("/default/common/accounting")
    assert not os.path.exists(qacct.accounting_path(ocs_site))
    monkeypatch.setattr(os, "getuid", lambda: 0)
    rc = sacct.main(["-j", "500021,500022,500023", "-X", "-n", "-P", "-o",
                     "JobID,JobName,State,ExitCode,Start,End,AllocCPUS"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.splitlines() == [
        "500021|ocs_jsonl_done|COMPLETED|0:0|2026-12-02T01:12:33|2026-12-02T01:12:33|1",
        "500022|ocs_jsonl_fail|COMPLETED|0:0|2026-12-02T01:12:33|2026-12-02T01:12:33|1",
        "500023|ocs_jsonl_del|CANCELLED by 0|0:0|2026-12-02T01:12:33|2026-12-02T01:12:34|2",
    ]
    # a listing by window and by name finds them too (it found nothing on JSONL-only cells)
    rc = sacct.main(["-X", "-n", "-P", "-a", "-S", "2026-12-02T01:00:00", "-o", "JobID,State",
                     "--name", "ocs_jsonl_del"])
    assert capsys.readouterr().out.splitlines() == ["500023|CANCELLED by 0"]
