"""squeue's TIME of a job Grid Engine lists ``dr`` (being killed after scancel): it stops at the shim's
cancel event of that run, as Slurm's stops at the cancel (issue 30: squeue -r -t all after scancel of
a running array task, fixtures/slurm-*/cases.json squeue_array_after_whole_cancel, 112_1 CG 0:10,
replayed by test_release_listing.py); a cancel stamped with another run's start does not stop it."""

from __future__ import annotations

from datetime import datetime

import pytest

from conftest import FIXTURES
from listing_replay import ListingReplay
from shim import siteconf
from shim.__main__ import dispatch
from shim.gridengine import backends
from shim_records import NOW, event, frozen_site

DR = FIXTURES / "gridengine" / "sge-8.1.9" / "live-qstat-u-all-r-xml.dr.xml"  # job 120: dr since 09:10:26
STARTED = datetime(2026, 11, 30, 9, 10, 26).timestamp()


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    yield frozen_site(monkeypatch, tmp_path)
    siteconf.reset()
    backends.use(None)


def time_of_120(capsys) -> str:
    b = ListingReplay()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=DR.read_text())
    backends.use(b)
    assert dispatch("squeue", ["-h", "-j", "120", "-o", "%t %M"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def test_a_dr_jobs_time_counts_on_without_a_cancel_event(capsys):
    assert time_of_120(capsys) == "CG 9:34\n"  # (NOW 09:20:00 less its start)


def test_it_stops_at_the_cancel_of_that_run(site, capsys):
    event(site, 120, None, "cancel", age=300, uid=0, user="root", owner="root", was="RUNNING", start=STARTED)
    assert time_of_120(capsys) == "CG 4:34\n"


def test_a_cancel_of_another_run_does_not_stop_it(site, capsys):
    event(site, 120, None, "cancel", age=300, uid=0, user="root", owner="root", was="RUNNING", start=STARTED - 100)
    assert time_of_120(capsys) == "CG 9:34\n"
