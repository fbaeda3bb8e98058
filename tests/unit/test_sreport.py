"""sreport on recorded Grid Engine accounting (fixtures/gridengine/sge-8.1.9/
qacct-accounting-file-records.txt, a real SGE 8.1.9 accounting file of 2026-11-30) with an empty
queue: the bill equals the sum of sacct's CPUTimeRAW over the same jobs.

Banner, fields and printers: Slurm 22.05 src/sreport/cluster_reports.c (cluster_account_by_user,
cluster_user_by_account, _setup_print_fields_list), user_reports.c (user_top), common.c
(slurmdb_report_print_time, sreport_set_usage_col_width), sreport.c (_set_time_format, the
report names, "Not valid report", "too few arguments for keyword"), and
src/common/slurmdb_defs.c slurmdb_report_set_start_end_time (rounding to the hour)."""

import time
from pathlib import Path

import pytest

from shim.gridengine import backends
from shim.__main__ import dispatch
from shim.gridengine.replay import ReplayBackend
from shim.proc import Result
from shim.slurm.render import sreport as view

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "gridengine" / "sge-8.1.9"
WINDOW = ("start=2026-11-29T00:00:00", "end=2026-12-01T00:00:00")


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    from conftest import use_site_config

    use_site_config(monkeypatch, tmp_path)
    monkeypatch.setenv("SLURM_SHIM_ACCOUNTING", str(FIX / "qacct-accounting-file-records.txt"))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    b = ReplayBackend({
        ("qstat",): Result(("qstat",), 0, (FIX / "live-qstat-u-all-r-xml.empty.xml").read_text(), ""),
        ("qhost",): Result(("qhost",), 0, (FIX / "qhost-q-xml-debug-gpu.xml").read_text(), "")})
    backends.use(b)
    yield b
    backends.use(None)
    monkeypatch.delenv("TZ")
    time.tzset()


def run(capsys, prog, *argv):
    rc = dispatch(prog, list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def sacct_totals(capsys) -> dict[tuple[str, str], int]:
    rc, out, err = run(capsys, "sacct", "-a", "-X", "-n", "-P", "-o", "Account,User,CPUTimeRAW",
                       "-S", "2026-11-29T00:00:00", "-E", "2026-12-01T00:00:00")
    assert rc == 0, err
    got: dict[tuple[str, str], int] = {}
    for line in out.splitlines():
        acct, user, secs = line.split("|")
        key = (acct or "(none)", user)
        got[key] = got.get(key, 0) + int(secs)
    return got


def test_totals_equal_the_sum_over_sacct_rows(capsys, recorded):
    want = sacct_totals(capsys)
    assert sum(want.values()) > 0
    rc, out, err = run(capsys, "sreport", "-n", "-P", "-t", "seconds", "cluster", "UserUtilizationByAccount",
                       *WINDOW, "format=Account,Login,Used")
    assert (rc, err) == (0, "")
    got = {(a, u): int(s) for a, u, s in (line.split("|") for line in out.splitlines())}
    assert got == {k: v for k, v in want.items() if v}
    rc, out, _ = run(capsys, "sreport", "-n", "-P", "-t", "seconds", "cluster", "AccountUtilizationByUser",
                     *WINDOW, "format=Account,Login,Used")
    rows = [line.split("|") for line in out.splitlines()]
    assert rows[0] == ["root", "", str(sum(want.values()))]
    for acct in {a for a, _u in want}:
        assert [r for r in rows if r[0] == acct and r[1] == ""] == [[acct, "", str(sum(
            v for (a, _u), v in want.items() if a == acct))]]


def test_banner_and_default_layout(capsys, recorded):
    rc, out, err = run(capsys, "sreport", "cluster", "AccountUtilizationByUser", *WINDOW)
    lines = out.splitlines()
    assert lines[0] == "-" * 80 and lines[3] == "-" * 80
    assert lines[1] == ("Cluster/Account/User Utilization 2026-11-29T00:00:00 - 2026-11-30T23:59:59 "
                        "(172800 secs)")
    assert lines[2] == "Usage reported in CPU Minutes"
    assert lines[4] == "  Cluster         Account     Login     Proper Name     Used   Energy "
    assert lines[5] == "--------- --------------- --------- --------------- -------- -------- "
    assert lines[6].split()[:2] == ["cluster", "root"]
    rc, out, _ = run(capsys, "sreport", "-t", "percent", "user", "TopUsage", *WINDOW, "TopCount=1")
    lines = out.splitlines()
    assert lines[1].startswith("Top 1 Users 2026-11-29T00:00:00") and lines[2] == "Usage reported in Percentage of Total"
    assert len(lines) == 7 and lines[6].rstrip().endswith("%")


def test_bad_words(capsys, recorded):
    assert run(capsys, "sreport", "cluster")[:2] == (1, "")
    assert run(capsys, "sreport", "cluster")[2] == "too few arguments for keyword:cluster\n"
    rc, out, err = run(capsys, "sreport", "cluster", "Bogus")
    assert rc == 1 and err.startswith("Not valid report Bogus\n")
    assert run(capsys, "sreport", "user", "Bottom")[2].startswith("Not valid report Bottom\nValid user reports are")
    assert run(capsys, "sreport", "frob", "x") == (1, "", "invalid keyword: frob\n")
    assert run(capsys, "sreport", "-t", "fortnights", "cluster", "a") == (1, "", "unknown time format fortnights\n")
    assert run(capsys, "sreport", "cluster", "a", "format=Nope")[2] == " Unknown field 'Nope'\n"


@pytest.mark.parametrize("fmt, want", [
    ("secs", "5400"), ("mins", "90"), ("hours", "2"), ("percent", "25.00%"), ("secper", "5400(25.00%)"),
    ("minper", "90(25.00%)"), ("hourper", "2(25.00%)")])
def test_time_printer(fmt, want):
    assert view.time_text(5400, 21600, fmt) == want


def test_usage_width_and_names():
    assert view.usage_width(99999999, "mins") == 8 and view.usage_width(100000000, "mins") == 9
    assert view.usage_width(0, "minper") == 17
    assert view.time_format("h") == ("hours", "Hours") and view.time_format("minp") is None
    assert view.time_format("MinPer") == ("minper", "Minutes/Percentage of Total")


def test_window_rounds_to_the_hour(monkeypatch):
    from shim.operations import policies

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        now = 1796169600 + 5 * 3600 + 17 * 60  # 2026-12-02T05:17 UTC
        assert policies.window(None, None, now) == (1796169600 - 86400, 1796169600)  # yesterday to today 00:00
        s, e = policies.window("2026-12-01T10:29:30", "2026-12-01T10:31", now)
        assert (s, e) == (1796119200 + 3600, 1796119200 + 7200)  # 10:29:30 -> 11:00; end at least an hour later
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
