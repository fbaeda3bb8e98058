"""A job's reservation in squeue (``%v``, ``-O reservation``, ``-R``) and scontrol show job
(``Reservation=``), brief S5-X item 1 (issue 15).

Slurm 22.05: squeue's _print_job_reservation prints ``job->resv_name`` (``(null)`` when the job
has none: _print_str of NULL), and its filter keeps a job for ``-R NAME`` only when resv_name is
that name; scontrol's slurm_sprint_job_info (src/api/job_info.c) adds a ``Reservation=NAME`` line
between ``Features=... DelayBoot=`` and ``OverSubscribe=`` only when the job has one. The shim
submits ``--reservation=NAME`` as Grid Engine's ``-ar <id>`` of the advance reservation named
NAME (submit.reservation_flags), so a job's reservation is its ``JB_ar`` (qstat -j -xml) by the
name qrstat gives that id. The qrstat answer is test_reservation's recording (SGE 8.1.9, AR 1
``w7probe``); the qstat -j answer is the recorded mixed detail (live-qstat-j-xml.mixed.xml) with
job 105's JB_ar set to that AR (every recorded job has 0)."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, SLURM_REF
from listing_replay import ListingReplay
from shim.gridengine import backends
from shim.__main__ import dispatch
from shim.proc import Result
from shim_records import frozen_site
from test_reservation import SUMMARY

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
MIXED = (SGE / "live-qstat-u-all-r-xml.mixed.xml").read_text()
DETAIL = (SGE / "live-qstat-j-xml.mixed.xml").read_text()
IN_AR = DETAIL.replace("<JB_job_number>105</JB_job_number>\n      <JB_ar>0</JB_ar>",
                       "<JB_job_number>105</JB_job_number>\n      <JB_ar>1</JB_ar>", 1)
NO_AR = "<?xml version='1.0'?>\n<qrstat xmlns:xsd=\"http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qrstat/qrstat.xsd\">\n</qrstat>\n"
CASES = json.loads((SLURM_REF / "cases.json").read_text())


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    yield frozen_site(monkeypatch, tmp_path)
    backends.use(None)


class Backend(ListingReplay):
    def __init__(self, qrstat: str, detail: str = IN_AR):
        super().__init__()
        self.detail = detail
        self.add("qstat", ["-u", "*", "-r", "-xml"], stdout=MIXED)
        self.add("qrstat", ["-u", "*", "-xml"], stdout=qrstat)

    def run(self, tool, args, *, input=None, timeout=None):
        if tool == "qstat" and args and args[0] == "-j" and "-xml" in args:
            self.calls.append(((tool, *args), input))
            return Result((tool, *args), 0, self.detail, "")
        return super().run(tool, args, input=input, timeout=timeout)


def run(capsys, cmd, *argv, qrstat=SUMMARY):
    b = Backend(qrstat)
    backends.use(b)
    rc = dispatch(cmd, list(argv))
    out, err = capsys.readouterr()
    return rc, out, err, [k for k, _ in b.calls]


def rows(out: str) -> dict[str, str]:
    return dict(ln.split(None, 1) for ln in out.splitlines()[1:])


def test_squeue_v_shows_the_reservation_name(capsys):
    rc, out, err, calls = run(capsys, "squeue", "-o", "%i %v")
    assert (rc, err) == (0, "")
    assert out.splitlines()[0] == "JOBID RESERVATION"
    got = rows(out)
    assert got["105"] == "w7probe"
    assert {v for k, v in got.items() if k != "105"} == {"(null)"}
    assert ("qrstat", "-u", "*", "-xml") in calls


def test_squeue_format_reservation_and_filter(capsys):
    rc, out, err, _ = run(capsys, "squeue", "-O", "jobid,reservation")
    assert rc == 0 and out.splitlines()[0].split() == ["JOBID", "RESERVATION"]
    assert "w7probe" in [ln.split()[1] for ln in out.splitlines()[1:] if ln.split()[0] == "105"]
    rc, out, err, _ = run(capsys, "squeue", "-h", "-R", "w7probe", "-o", "%i")
    assert (rc, out, err) == (0, "105\n", "")
    rc, out, err, _ = run(capsys, "squeue", "-h", "-R", "nosuch", "-o", "%i")
    assert (rc, out, err) == (0, "", "")


def test_squeue_reads_reservations_only_for_the_field(capsys):
    detail = lambda calls: [c for c in calls if c[:2] == ("qstat", "-j") and "-xml" in c]  # noqa: E731
    rc, out, err, calls = run(capsys, "squeue")
    assert rc == 0 and not [c for c in calls if c[0] == "qrstat"] and not detail(calls)
    # no advance reservation at all: qrstat only, no job detail
    rc, out, err, calls = run(capsys, "squeue", "-o", "%i %v", qrstat=NO_AR)
    assert set(rows(out).values()) == {"(null)"}
    assert [c for c in calls if c[0] == "qrstat"] and not detail(calls)


def test_scontrol_show_job_has_slurms_reservation_line(capsys):
    rc, out, err, _ = run(capsys, "scontrol", "show", "job", "105")
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    i = lines.index("   Reservation=w7probe")
    assert lines[i - 1].startswith("   Features=") and lines[i + 1].startswith("   OverSubscribe=")
    rc, out, err, _ = run(capsys, "scontrol", "show", "job", "106")
    assert "Reservation=" not in out  # the line is Slurm's optional one
    assert CASES["scontrol_show_job_R1"]["stdout"].count("Reservation=") == 0


def test_squeue_json_resv_name(capsys):
    rc, out, err, _ = run(capsys, "squeue", "--json")
    jobs = {j["job_id"]: j for j in json.loads(out)["jobs"]}
    assert jobs[105]["resv_name"] == "w7probe" and jobs[106]["resv_name"] == ""


def test_the_recorded_answers_tie_a_job_to_its_reservation():
    """A real job in a real advance reservation (fixtures' README: live-qstat-j-xml.ar.xml and
    live-qrstat-u-all-xml.ar.xml): qstat -j's JB_ar is the reservation's id, qrstat names it, and
    fill_reservations puts them together."""
    from shim.gridengine import ops
    from shim.gridengine.qstat import parse_detail
    from shim.operations.jobs import fill_reservations
    from shim.slurm.model import JobRecord

    detail = (SGE / "live-qstat-j-xml.ar.xml").read_text()
    qrstat = (SGE / "live-qrstat-u-all-xml.ar.xml").read_text()
    (job, facts), = parse_detail(detail).items()
    (ar,) = ops.parse_reservations(qrstat)
    assert facts["JB_ar"] == ar["id"] != "0" and ar["name"] == "s5xprobe"
    b = Backend(qrstat, detail)
    rec = JobRecord(job, name="s5xprobe_j", user="root", state="PENDING")
    from shim import siteconf

    fill_reservations([rec], siteconf.get(), b)  # (no submit record: Grid Engine's own answers)
    assert rec.extra["reservation"] == "s5xprobe"
    assert [k[0] for k, _ in b.calls] == ["qrstat", "qstat"]


@pytest.mark.parametrize("ar, shown, asks_qrstat", [("", None, False), ("1", "w7probe", True), (None, "w7probe", True)])
def test_scontrol_show_job_of_a_shim_job_reads_its_reservation_from_the_record(capsys, site, ar, shown, asks_qrstat):
    """A job the shim submitted: its record says which advance reservation sbatch gave it (``ar``,
    "" none), so Grid Engine's detail is not asked for, and qrstat only where there is one to
    name. A record from before the field (None here) says nothing: qrstat, then Grid Engine's
    detail (JB_ar 1 in this answer), as before."""
    from shim_records import submit

    submit(site, 105, name="fx_run1", **({} if ar is None else {"ar": ar}))
    rc, out, err, calls = run(capsys, "scontrol", "show", "job", "105")
    assert (rc, err) == (0, "")
    got = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("Reservation=")]
    assert got == ([f"Reservation={shown}"] if shown else [])
    assert (("qrstat", "-u", "*", "-xml") in calls) == asks_qrstat
    assert bool([c for c in calls if c[:2] == ("qstat", "-j")]) == (ar is None)


def test_the_record_field_is_checked():
    from shim.store.records import clean_submit

    assert clean_submit({"ar": "12"}).ar == "12" and clean_submit({"ar": ""}).ar == ""
    for bad in ("x", "1 2", 3, None, "-1"):
        assert not isinstance(clean_submit({"ar": bad}).ar, str), bad

