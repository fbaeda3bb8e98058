"""--reservation (issue 15 part 5): the Grid Engine advance reservation of that name, submitted
with -ar, or Slurm's refusal (reservation.c validate_job_resv / _valid_job_access_resv: no such
reservation is ESLURM_RESERVATION_INVALID, no access ESLURM_RESERVATION_ACCESS; a list's every
member must pass, _get_resv_list). The qrstat answers are SGE 8.1.9's, recorded on this host
(qrsub -N w7acl -d 600 -q debug -u root,alice; qrsub -u '!alice' for the xacl)."""

from __future__ import annotations

import io

import pytest

from shim.gridengine import backends
from shim.gridengine import ops
from shim.cli import sbatch
from shim.errors import ShimError

SUMMARY = """<?xml version='1.0'?>
<qrstat xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qrstat/qrstat.xsd">
   <ar_summary>
      <id>1</id>
      <name>w7probe</name>
      <owner>root</owner>
      <state>r</state>
      <start_time>2026-12-02T01:54:42</start_time>
      <end_time>2026-12-02T02:04:42</end_time>
      <duration>00:10:00</duration>
   </ar_summary>
</qrstat>
"""

DETAIL = """<?xml version='1.0'?>
<qrstat xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qrstat/qrstat.xsd">
   <ar_summary>
      <id>3</id>
      <name>w7acl</name>
      <owner>root</owner>
      <state>r</state>
      <start_time>2026-12-02T01:55:20</start_time>
      <end_time>2026-12-02T02:05:20</end_time>
      <duration>00:10:00</duration>
      <submission_time>2026-12-02T01:55:20</submission_time>
      <group>sgeadmin</group>
      <account>sge</account>
      <granted_slots_list>
         <granted_slots  queue_instance="debug@vm" slots="1"/>
      </granted_slots_list>
      <acl_list>
         <acl  user="root"/>
         <acl  user="alice"/>
      </acl_list>
   </ar_summary>
</qrstat>
"""

XACL = """<?xml version='1.0'?>
<qrstat>
   <ar_summary>
      <id>6</id>
      <name>w7x</name>
      <owner>root</owner>
      <state>r</state>
      <xacl_list>
         <acl  user="alice"/>
      </xacl_list>
   </ar_summary>
</qrstat>
"""

UNKNOWN = """<?xml version='1.0'?>
<qrstat xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qrstat/qrstat.xsd">
   <ar_unknown>
      <id>2</id>
   </ar_unknown>
</qrstat>
"""


def test_qrstat_argv_and_answers():
    assert ops.reservations() == ("qrstat", ["-u", "*", "-xml"])
    assert ops.reservation_detail(["3", "7"]) == ("qrstat", ["-ar", "3,7", "-xml"])
    (ar,) = ops.parse_reservations(SUMMARY)
    assert (ar["id"], ar["name"], ar["owner"], ar["state"], ar["acl"], ar["xacl"]) == ("1", "w7probe", "root", "r", [], [])
    (ar,) = ops.parse_reservations(DETAIL)
    assert ar["acl"] == ["root", "alice"] and ar["xacl"] == []
    assert ops.parse_reservations(XACL)[0]["xacl"] == ["alice"]
    assert ops.parse_reservations(UNKNOWN) == [] == ops.parse_reservations("error: not xml")


class FakeGE:
    """Answers the reservation questions from recorded qrstat answers; no job is submitted."""

    def __init__(self, ars, usersets=None):
        self.ars, self.usersets, self.calls = ars, usersets or {}, []

    def reservations(self, name):
        self.calls.append(name)
        return [a for a in self.ars if a["name"] == name]

    def userset_entries(self, name):
        return self.usersets.get(name)

    def __getattr__(self, name):
        raise AssertionError(f"no Grid Engine call expected ({name})")


pytestmark = pytest.mark.usefixtures("unit_site")


def prepare(argv, user="alice", monkeypatch=None):
    import shim.operations.submit as submit

    real = submit.context

    def ctx(*a, **kw):
        c = real(*a, **kw)
        c.user = user
        return c

    monkeypatch.setattr(submit, "context", ctx)
    return sbatch.prepare(argv, {}, stdin=io.StringIO("#!/bin/sh\ntrue\n"), cwd="/srv")[1]


def refused(argv, monkeypatch, user="alice"):
    with pytest.raises(ShimError) as e:
        prepare(argv, user, monkeypatch)
    assert e.value.code == 1
    return e.value.lines


def test_reservation_becomes_minus_ar(monkeypatch):
    backends.use(FakeGE(ops.parse_reservations(DETAIL)))
    sub = prepare(["--reservation=w7acl"], "alice", monkeypatch)
    assert sub.argv[sub.argv.index("-ar") + 1] == "3"
    assert sub.record.public().ar == "3"  # the record others read says it (jobs.fill_reservations)


def test_no_such_reservation(monkeypatch):
    backends.use(FakeGE(ops.parse_reservations(DETAIL)))
    assert refused(["--reservation=nope"], monkeypatch) == [
        "sbatch: error: Batch job submission failed: Requested reservation is invalid"]


def test_reservation_the_user_may_not_use(monkeypatch):
    backends.use(FakeGE(ops.parse_reservations(DETAIL) + ops.parse_reservations(XACL)))
    access = ["sbatch: error: Batch job submission failed: Access denied to requested reservation"]
    assert refused(["--reservation=w7acl"], monkeypatch, user="mallory") == access
    assert refused(["--reservation=w7x"], monkeypatch, user="alice") == access
    sub = prepare(["--reservation=w7x"], "bob", monkeypatch)  # no acl: anyone Grid Engine lets in
    assert sub.argv[sub.argv.index("-ar") + 1] == "6"


def test_access_list_in_the_acl(monkeypatch):
    ar = dict(ops.parse_reservations(DETAIL)[0], acl=["@course"])
    backends.use(FakeGE([ar], {"course": ["alice", "bob"]}))
    assert prepare(["--reservation=w7acl"], "bob", monkeypatch).argv[-2:] == ["-ar", "3"]
    assert refused(["--reservation=w7acl"], monkeypatch, user="carol")[0].endswith("Access denied to requested reservation")


def test_every_member_of_a_list_must_pass_and_the_first_is_used(monkeypatch):
    ars = ops.parse_reservations(DETAIL) + ops.parse_reservations(SUMMARY)
    backends.use(FakeGE(ars))
    sub = prepare(["--reservation=w7probe,w7acl"], "alice", monkeypatch)
    assert sub.argv[sub.argv.index("-ar") + 1] == "1" and sub.record.ar == "1"
    assert refused(["--reservation=w7probe,nope"], monkeypatch)[0].endswith("Requested reservation is invalid")


def test_no_reservation_asks_nothing(monkeypatch):
    backends.use(FakeGE([]))
    sub = prepare([], "alice", monkeypatch)
    assert "-ar" not in sub.argv and sub.record.public().ar == ""
