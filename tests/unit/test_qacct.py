"""Grid Engine accounting: the file format, qacct's text, and what each outcome means in Slurm's
words (the failed/exit_status table of shared/research/sge.md), on recorded SGE 8.1.9 output."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO
from shim.gridengine import qacct

SGE = FIXTURES / "gridengine" / "sge-8.1.9"


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    time.tzset()


def file_records() -> list[qacct.Record]:
    return qacct.scan((SGE / "qacct-accounting-file-records.txt").read_bytes())


def test_file_records_parse():
    recs = file_records()
    assert len(recs) == 13
    r = next(x for x in recs if x.job == 20)
    assert (r.qname, r.hostname, r.owner, r.group, r.jobname) == ("all.q", "vm", "alice", "alice", "exit3")
    assert (r.failed, r.exit_status, r.slots, r.task) == (0, 3, 1, 0)
    assert (r.submit, r.start, r.end) == (1796026550, 1796026550, 1796026550)
    assert r.maxrss_kb == 4688
    arr = [x for x in recs if x.job == 9]
    assert sorted(x.task for x in arr) == [1, 2, 3, 4, 5]
    pe = next(x for x in recs if x.job == 11)
    assert (pe.granted_pe, pe.slots, pe.category) == ("smp", 2, "-pe smp 2")


def test_file_and_qacct_text_agree():
    """The same jobs read from the file and from ``qacct -j`` give the same values."""
    by_job = {(r.job, r.task): r for r in file_records()}
    for name, job in (("exit3", 20), ("exit0", 21), ("qdel-running", 36), ("h_rt-killed", 33)):
        [t] = qacct.parse_qacct((SGE / f"qacct-j-{name}.txt").read_text())
        f = by_job[(job, 0)]
        for attr in ("qname", "hostname", "owner", "group", "jobname", "job", "failed", "exit_status",
                     "wallclock", "slots", "task", "category", "submit", "start", "end"):
            assert getattr(t, attr) == getattr(f, attr), (name, attr)
        assert abs(t.maxrss_kb - f.maxrss_kb) <= 1
        assert abs(t.maxvmem - f.maxvmem) <= 0.001 * max(1.0, f.maxvmem) + 1024
        assert abs(t.utime - f.utime) < 0.001


def test_qacct_text_array_and_unstarted():
    recs = qacct.parse_qacct((SGE / "qacct-j-array.txt").read_text())
    assert sorted(r.task for r in recs) == [1, 2, 3, 4, 5]
    [bad] = qacct.parse_qacct((SGE / "qacct-j-bad-output-dir.txt").read_text())
    assert (bad.start, bad.end, bad.failed) == (0, 0, 26)
    [pe] = qacct.parse_qacct((SGE / "qacct-j-pe-mpi.txt").read_text())
    assert (pe.granted_pe, pe.slots) == ("mpi", 3)


def _outcome(name: str, **kw) -> qacct.Outcome:
    [r] = qacct.parse_qacct((SGE / f"qacct-j-{name}.txt").read_text())
    return qacct.outcome(r, **kw)


@pytest.mark.parametrize("name,state,code,batch", [
    ("exit0", "COMPLETED", "0:0", "COMPLETED 0:0"),
    ("exit3", "FAILED", "3:0", "FAILED 3:0"),
    ("qdel-running", "CANCELLED", "0:0", "CANCELLED 0:9"),
    ("h_rt-killed", "TIMEOUT", "0:0", "CANCELLED 0:9"),
    ("bad-output-dir", "FAILED", "0:53", "CANCELLED 0:53"),
    ("h_vmem", "FAILED", "1:0", "FAILED 1:0"),
    ("exit100-then-qdel", "FAILED", "100:0", "FAILED 100:0"),
])
def test_grid_engine_outcomes(name, state, code, batch):
    o = _outcome(name)
    assert (o.state, f"{o.exit}:{o.signal}", f"{o.batch_state} {o.batch_exit}:{o.batch_signal}") == (state, code, batch)


def test_cancel_event_names_the_canceller():
    o = _outcome("qdel-running", cancel={"uid": 1002, "was": "RUNNING"})
    assert (o.state, o.cancel_uid) == ("CANCELLED", 1002)


def test_end_event_wins_over_grid_engine():
    # the job wrapper remaps exit 99/100 and records the script's real code
    o = _outcome("exit0", end={"exit": 100, "signal": 0, "state": "FAILED"})
    assert (o.state, o.exit) == ("FAILED", 100)
    o = _outcome("exit0", end={"exit": 0, "signal": 15, "state": "TIMEOUT"})
    assert (o.state, o.batch_state, o.batch_signal) == ("TIMEOUT", "CANCELLED", 15)
    o = _outcome("exit0", end={"exit": 0, "signal": 9, "state": "FAILED"})
    assert (o.state, o.exit, o.signal, o.batch_state) == ("FAILED", 0, 9, "CANCELLED")


def test_a_dependency_cancel_by_the_wrapper_wins_over_failed_0():
    """F-14: the wrapper cancelled the job before its script (afterok/afternotok unmet) and exited
    0, so Grid Engine says failed 0 exit 0; Slurm says CANCELLED (by nobody: slurmctld did it)."""
    dep = {"uid": 1001, "user": "alice", "was": "PENDING", "reason": "DependencyNeverSatisfied"}
    o = _outcome("exit0", cancel=dep)
    assert (o.state, f"{o.exit}:{o.signal}", o.batch_state, o.cancel_uid) == ("CANCELLED", "0:0", "CANCELLED", None)
    o = _outcome("exit0", end={"exit": 0, "signal": 0, "state": "CANCELLED", "reason": "DependencyNeverSatisfied"})
    assert (o.state, f"{o.exit}:{o.signal}", o.cancel_uid) == ("CANCELLED", "0:0", None)
    # any other cancel event of a job that then completed (scancel lost the race) leaves COMPLETED
    assert _outcome("exit0", cancel={"uid": 0, "was": "RUNNING"}).state == "COMPLETED"


def test_other_failed_codes():
    r = file_records()[0]
    for failed, state in ((19, "NODE_FAIL"), (25, "REQUEUED"), (1, "FAILED"), (37, "TIMEOUT")):
        r.failed, r.exit_status = failed, 137
        assert qacct.outcome(r).state == state
    r.failed, r.exit_status, r.category, r.maxvmem = 37, 137, "-l h_vmem=200M", 200 * 1024 * 1024
    assert qacct.outcome(r).state == "OUT_OF_MEMORY"
    r.failed, r.exit_status = 0, 137
    o = qacct.outcome(r)
    assert (o.state, o.exit, o.signal) == ("FAILED", 0, 9)


def test_category_requests():
    assert qacct.category_requests("-q debug -l h_rt=360,mem_free=50M -pe smp 2 -l gpu=1") == {
        "h_rt": "360", "mem_free": "50M", "gpu": "1"}


def test_colon_in_category_keeps_fields_aligned():
    line = ("debug:vm:root:root:x:7:sge:0:100:101:105:0:0:4:0.1:0.2:4000.000000:0:0:0:0:1:0:0:0.000000:0:0:0:0:1:1:"
            "NONE:defaultdepartment:NONE:1:0:0.3:0:0:-l h_rt=0:0:3:0.000000:NONE:123.000000:0:0")
    r = qacct.parse_line(line)
    assert (r.category, r.maxvmem, r.job) == ("-l h_rt=0:0:3", 123.0, 7)


def test_milliseconds_timestamps():
    line = ("debug:vm:root:root:x:7:sge:0:1796026550000:1796026551000:1796026555000:0:0:4:0.1:0.2:4000:0:0:0:0:"
            "1:0:0:0:0:0:0:0:1:1:NONE:defaultdepartment:NONE:1:0:0.3:0:0:NONE:0:NONE:0:0:0")
    r = qacct.parse_line(line)
    assert (r.submit, r.start, r.end) == (1796026550, 1796026551, 1796026555)


def _synthetic(tmp_path: Path, n: int = 3000) -> bytes:
    sys.path.insert(0, str(REPO / "bench"))
    import gen_accounting

    path = tmp_path / "acct"
    with open(path, "w") as f:
        gen_accounting.generate(n, f, seed=7, days=10, end_time=1796026550)
    return path.read_bytes()


def test_scan_filters_agree_with_a_full_parse(tmp_path):
    data = _synthetic(tmp_path)
    every = qacct.scan(data)
    assert len(every) == 3000
    job = every[1500].job
    assert [(r.job, r.task) for r in qacct.scan(data, jobs=[job])] == [
        (r.job, r.task) for r in every if r.job == job]
    assert len(qacct.scan(data, owners=["alice"])) == sum(r.owner == "alice" for r in every)
    assert len(qacct.scan(data, ge_names=["merge"], owners=["bob"])) == sum(
        r.jobname == "merge" and r.owner == "bob" for r in every)
    cut = 1796026550 - 86400
    assert len(qacct.scan(data, not_before=cut)) == sum((r.end or r.submit) >= cut for r in every)
    # a number that is everywhere on the lines (slots=1) still finds only job 1's records
    assert qacct.scan(data, jobs=[1]) == []


def test_missing_file_reads_as_nothing(tmp_path):
    assert qacct.scan_file(str(tmp_path / "nope")) == []


def test_bench_generator_matches_the_real_format(tmp_path):
    data = _synthetic(tmp_path, 50)
    lines = data.decode().splitlines()
    assert lines[:4] == ["# Version: 8.1.9", "# ", "# DO NOT MODIFY THIS FILE MANUALLY!", "# "]
    real = (SGE / "qacct-accounting-file-records.txt").read_text().splitlines()[4]
    assert all(len(ln.split(":")) == len(real.split(":")) == 45 for ln in lines[4:])


def test_accounting_path_override(monkeypatch):
    from shim.siteconf import NS

    cfg = NS.wrap({"gridengine": {"sge_root": "/x", "sge_cell": "c"}})
    monkeypatch.delenv(qacct.ENV, raising=False)
    assert qacct.accounting_path(cfg) == "/x/c/common/accounting"
    monkeypatch.setenv(qacct.ENV, "/tmp/acct")
    assert qacct.accounting_path(cfg) == "/tmp/acct"


def test_qacct_args():
    assert qacct.qacct_args(12) == ["-j", "12"]
    assert qacct.qacct_args(owner="alice", path="/f") == ["-f", "/f", "-o", "alice", "-j"]


@pytest.mark.parametrize("block", [7, 64, 300, 1 << 20])
def test_scan_of_a_file_reads_blocks_of_whole_lines(tmp_path, monkeypatch, block):
    """The file is read block by block (not whole): every block size gives the in-memory result,
    with lines longer than a block, a comment, a CRLF line and no newline at the end."""
    data = _synthetic(tmp_path, 400)
    lines = data.split(b"\n")
    lines[10] = lines[10] + b"\r"
    lines.insert(20, b"# a comment in the middle")
    data = b"\n".join(lines).rstrip(b"\n")
    path = tmp_path / "acct2"
    path.write_bytes(data)
    monkeypatch.setattr(qacct, "_BLOCK", block)
    every = qacct.scan(data)
    job = every[200].job
    cut = every[300].end
    for kw in ({}, {"jobs": [job]}, {"jobs": [job, every[5].job]}, {"owners": ["alice"]},
               {"ge_names": ["merge"], "owners": ["bob"]}, {"not_before": cut}, {"not_after": cut},
               {"jobs": [1]}, {"owners": ["alice"], "not_before": cut}):
        want = [(r.job, r.task, r.owner, r.end, r.maxvmem, r.category) for r in qacct.scan(data, **kw)]
        got = [(r.job, r.task, r.owner, r.end, r.maxvmem, r.category) for r in qacct.scan(str(path), **kw)]
        with open(path, "rb") as f:
            got_f = [(r.job, r.task, r.owner, r.end, r.maxvmem, r.category) for r in qacct.scan(f, **kw)]
        assert got == got_f == want, kw
    assert len(qacct.scan(str(path))) == 400


def test_scan_keeps_the_old_records_out_by_bisecting_the_file(tmp_path):
    data = _synthetic(tmp_path, 3000)
    path = tmp_path / "acct"
    cut = qacct.scan(data)[2500].end
    with open(path, "rb") as f:
        assert qacct._start_offset(f, cut) > len(data) // 2
    assert [r.job for r in qacct.scan(str(path), not_before=cut)] == [
        r.job for r in qacct.scan(data) if (r.end or r.submit) >= cut]
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert qacct.scan(str(empty), not_before=cut) == []


def test_repeated_text_fields_are_shared():
    recs = file_records()
    assert len({id(r.owner) for r in recs if r.owner == "alice"}) == 1
    assert qacct.category_requests("-l h_rt=3") == {"h_rt": "3"}
    d = qacct.category_requests("-l h_rt=3")
    d["x"] = "1"  # the public function gives the caller its own dict
    assert qacct.category_requests("-l h_rt=3") == {"h_rt": "3"}
