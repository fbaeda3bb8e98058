"""squeue prints the same bytes whichever way the qstat listing is read.

The fast way (gridengine/qstat.py: one regex over a run of job elements, ``record_from_match``,
the row kept as its match, ``MatchRow``) against the reference ways: the element-by-element
reading (``_parse_rows_reference``, rows as dicts, ``record_from_row``) and ElementTree's
(``parse_rows_tree``). The listing is a big queue made of the recorded listings' rows
(fixtures/gridengine/sge-8.1.9 and ocs-9.1.4: running, suspended, pending, held, error, array,
PE and resource-request rows), each recorded job renumbered and given one of several owners, in
both Grid Engines' forms; squeue runs in-process on it with a frozen clock."""

from __future__ import annotations

import re

import pytest

from conftest import FIXTURES
from listing_replay import ListingReplay
from shim import siteconf
from shim.__main__ import dispatch
from shim.gridengine import backends
from shim.gridengine import qstat as q
from shim.operations import jobs
from shim_records import frozen_site

GE = FIXTURES / "gridengine"
SOURCES = {
    "sge": [GE / "sge-8.1.9" / "live-qstat-u-all-r-xml.mixed.xml", GE / "sge-8.1.9" / "qstat-u-all-xml-r-mixed-states.xml",
            GE / "sge-8.1.9" / "quota-qstat-u-all-r-xml.xml", GE / "sge-8.1.9" / "live-qstat-u-all-r-xml.dr.xml"],
    "ocs": [GE / "ocs-9.1.4" / "qstat-r-all-users.xml", GE / "ocs-9.1.4" / "quota-qstat-u-all-r-xml.xml",
            GE / "ocs-9.1.4" / "priority-qstat-pri-ext-urg-r-xml.xml"],
}
OWNERS = ("alice", "root", "nosuchuser", "averyverylongusername")
_ELEMENT = re.compile(r"[ \t]*<job_list state=\"(running|pending)\">.*?</job_list>\n", re.S)
_NUMBER = re.compile(r"<JB_job_number>(\d+)</JB_job_number>")
_OWNER = re.compile(r"<JB_owner>[^<]*</JB_owner>")
_TIME = re.compile(r"(<(?:JB_submission_time|JAT_start_time|JAT_submission_time)>[^<]*:)(\d\d)([^<]*<)")
FIRST = 500_000


def big_listing(form: str, copies: int) -> str:
    """``copies`` rounds of every recorded job of the form's listings, each a new job id and owner,
    each round's times that many seconds later (in the minute)."""
    recorded: dict[str, list[tuple[str, str]]] = {}
    for path in SOURCES[form]:
        for m in _ELEMENT.finditer(path.read_text()):
            recorded.setdefault(f"{path.name}:{_NUMBER.search(m.group(0))[1]}", []).append((m[1], m[0]))
    running: list[str] = []
    pending: list[str] = []
    i = 0
    for copy in range(copies):
        for rows in recorded.values():
            for section, text in rows:
                text = _NUMBER.sub(f"<JB_job_number>{FIRST + i}</JB_job_number>", text)
                text = _TIME.sub(lambda t: f"{t[1]}{(int(t[2]) + copy) % 60:02d}{t[3]}", text)
                text = _OWNER.sub(f"<JB_owner>{OWNERS[i % len(OWNERS)]}</JB_owner>", text)
                (running if section == "running" else pending).append(text)
            i += 1
    return ("<?xml version='1.0'?>\n<job_info>\n  <queue_info>\n" + "".join(running) + "  </queue_info>\n"
            "  <job_info>\n" + "".join(pending) + "  </job_info>\n</job_info>\n")


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    yield frozen_site(monkeypatch, tmp_path)
    siteconf.reset()
    backends.use(None)


def squeue(capsys, listing: str, argv: list[str]) -> str:
    b = ListingReplay()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=listing)
    backends.use(b)
    rc = dispatch("squeue", list(argv))
    out, err = capsys.readouterr()
    assert (rc, err) == (0, ""), err
    return out


def reference(monkeypatch, how: str) -> None:
    """Read every listing the reference way: no job element is taken as plain, so the reader
    reads the whole document again at its end (RowReader.finish) element by element, or by tree."""
    monkeypatch.setattr(q, "_plain_items", lambda text: None)
    if how == "tree":
        monkeypatch.setattr(q, "_parse_rows_reference", q.parse_rows_tree)


ARGS = [
    [],
    ["-t", "all"],
    ["-u", "alice"],
    ["-u", "root,alice", "-t", "PD"],
    ["-j", f"{FIRST + 3},{FIRST + 40},{FIRST + 41}"],
    ["-l"],
    ["-r"],
    ["--start"],
    ["-o", "%all"],
    ["-O", "JobID,ArrayJobID,Name:30,TimeLimit,tres-per-node,MinMemory,Licenses,NumCPUs,Priority,Dependency,ReasonList"],
    ["-S", "-M,u,i", "-o", "%.18i %.10M %u %p %Q"],
    ["--json"],
]


@pytest.mark.parametrize("form", ["sge", "ocs"])
@pytest.mark.parametrize("how", ["elements", "tree"])
def test_squeue_prints_the_same_as_the_reference_readings_over_a_big_queue(capsys, monkeypatch, form, how):
    listing = big_listing(form, 12)
    used = []
    fast = q.record_from_match

    def counted(m, cache):
        used.append(m[1])
        return fast(m, cache)

    monkeypatch.setattr(q, "record_from_match", counted)
    got = {tuple(a): squeue(capsys, listing, a) for a in ARGS}
    assert len(used) > 100  # the fast reading made the records
    assert len(got[()].splitlines()) > 100 and len(got[("-t", "all")].splitlines()) > 100
    used.clear()
    reference(monkeypatch, how)
    for a in ARGS:
        assert squeue(capsys, listing, a) == got[tuple(a)], a
    assert used == []  # (and the reference ones did)


@pytest.mark.parametrize("form", ["sge", "ocs"])
def test_the_fast_reading_makes_the_reference_reading_s_records(monkeypatch, form):
    """Every record field and extra, the row (``extra["ge_row"]``, read as the dict it stands
    for) included, equal to the element-by-element reading's."""
    listing = big_listing(form, 6)
    cfg = siteconf.get()
    fast = jobs.list_jobs(cfg, xml=listing, quotas=False, reasons=False, stopped=False).records
    copied = [r for r in fast if isinstance(r.extra["ge_row"], q.MatchRow) and r.extra["ge_row"].num is not None]
    assert len(copied) > 10  # rows made from an earlier row's record, their own times among them
    assert any(r.extra["ge_row"].time != r.extra["ge_row"].m[7] for r in copied)
    reference(monkeypatch, "elements")
    slow = jobs.list_jobs(cfg, xml=listing, quotas=False, reasons=False, stopped=False).records
    assert not any(isinstance(r.extra["ge_row"], q.MatchRow) for r in slow)
    assert len(fast) == len(slow) > 40
    for attr in ("nodes", "extra"):  # (rows copied from an earlier one: no container shared)
        assert len({id(getattr(r, attr)) for r in fast}) == len(fast)
    tasks = [r.extra["ge_tasks"] for r in fast if "ge_tasks" in r.extra]
    assert len(tasks) >= 4 and len({id(t) for t in tasks}) == len(tasks)
    for a, b in zip(fast, slow):
        a.extra.pop("submit_records"), b.extra.pop("submit_records")
        assert a == b, (a.job_id, a.extra["ge_row"].get("JB_name"))
        assert dict(a.extra["ge_row"].items()) == b.extra["ge_row"]


def test_a_row_kept_as_its_match_reads_as_its_dict():
    listing = big_listing("sge", 1)
    r = q.RowReader()
    items = [x for x in r.feed(listing) if type(x) is tuple]
    assert items
    for m in items:
        row, lazy = q._layout_row(m), q.MatchRow(m)
        assert lazy.get("pe") == row.get("pe") and lazy.get("pe", "x") == row.get("pe", "x")
        assert lazy == row and row == lazy and lazy["hard"] == row["hard"] and len(lazy) == len(row)
        assert list(lazy) == list(row) and ("hard_queues" in lazy) and lazy.get("nothing", 5) == 5
