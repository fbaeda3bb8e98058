"""The fields each release prints differently where the shim makes them (issue 30, releases.py's
rules): squeue's %b (tres-per-node) and %h, scontrol show job's ReqTRES/AllocTRES, and 26.05's
Exclusive, LicensesAlloc, SubmitLine and empty StdErr when merged; each compared with the bytes
that real release printed (fixtures/slurm-*/cases.json)."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from conftest import release_cases
from shim.slurm import releases
from shim.slurm.model import JobRecord
from shim.slurm.render import scontrol as view
from shim.slurm.render import squeue as sq

NAMES = ("22.05", "24.11", "26.05")


cases = release_cases


@pytest.fixture
def site(release_site):
    """set(release): the unit-test site config with ``[slurm] release``; returns a squeue Ctx."""
    return release_site


# --- squeue %b and %h --------------------------------------------------------------------------------

def misc_rows(name: str) -> list[dict[str, str]]:
    lines = cases(name)["squeue_o_misc_fields"]["stdout"].splitlines()
    head = lines[0].split("|")
    return [dict(zip(head, line.split("|"))) for line in lines[1:]]


@pytest.mark.parametrize("name", NAMES)
def test_tres_per_node_and_oversubscribe_as_each_release(site, name):
    """Every job of the reference's ``squeue -o '...%b...%h...'``: the record's gres (the shim keeps
    22.05's ``gres:gpu:N``) prints as that release printed it, and so does OverSubscribe."""
    ctx = site(name)
    rows = misc_rows(name)
    assert any(r["TRES_PER_NODE"] != "N/A" for r in rows)
    for row in rows:
        shown = row["TRES_PER_NODE"]
        gres = "" if shown == "N/A" else "gres:" + shown[len("gres:"):]
        rec = JobRecord(int(row["JOBID"].split("_")[0]), gres=gres)
        assert (sq.tres_per_node(rec, ctx), sq.oversubscribe(rec, ctx)) == (shown, row["OVER_SUBSCRIBE"])
        assert sq.REGISTRY.letter("b").get(rec, ctx) == shown


# --- scontrol show job ----------------------------------------------------------------------------------

def _kv(text: str) -> dict[str, str]:
    return dict(re.findall(r"(?:^|\s)([A-Za-z/:_]+)=(\S*)", text))


def _time(text: str) -> datetime | None:
    return None if text in ("Unknown", "None", "N/A") else datetime.fromisoformat(text)


def record_of(text: str) -> JobRecord:
    """The shim's record of the job a reference's ``scontrol show job`` shows (the values the
    shim reads from Grid Engine and its records, taken from the reference)."""
    kv = _kv(text)
    limit = kv["TimeLimit"]
    h, m, _s = limit.split(":") if limit != "UNLIMITED" else (None, None, None)
    rec = JobRecord(
        int(kv["JobId"]), name=kv["JobName"], user="root", uid=0, gid=0, state=kv["JobState"], reason=kv["Reason"],
        partition=kv["Partition"], submit_time=_time(kv["SubmitTime"]), start_time=_time(kv["StartTime"]),
        time_limit=None if h is None else int(h) * 60 + int(m), num_cpus=int(kv["NumCPUs"]),
        min_memory_mb=100, mem_per_cpu=True, priority=int(kv["Priority"]), account=kv["Account"],
        work_dir=kv["WorkDir"], command=kv["Command"], std_out=kv["StdOut"], std_err=kv["StdOut"],
        gres="gres:" + kv["TresPerNode"][5:] if "TresPerNode" in kv else "",
        licenses="" if kv["Licenses"] == "(null)" else kv["Licenses"],
        nodes=[kv["NodeList"]] if kv["NodeList"] else [], batch_host=kv.get("BatchHost", ""))
    if "SubmitLine" in kv:  # (the line as submitted: recorded where the record keeps it)
        rec.extra["submit_line"] = re.split(r"\n| WorkDir=", text.split("SubmitLine=", 1)[1])[0]
    return rec


# the fields no release's rule makes: the session id (22.05 printed slurmctld's), and when the
# scheduler last looked at a pending job
NOT_THE_RELEASES = re.compile(r"(AllocNode:Sid=localhost:)\d+|(LastSchedEval=)\S+")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", ["scontrol_show_job_R3", "scontrol_show_job_L2", "scontrol_show_job_R1",
                                  "scontrol_show_job_o_R1"])
def test_show_job_is_each_releases_layout(site, name, case):
    """A running job with a GPU, a pending one with a license, a plain running one, and -o: byte
    for byte as each release printed them (ReqTRES/AllocTRES from 24.11, AllocTRES=(null) while
    pending, no Power=; 26.05's OverSubscribe=NO, Exclusive, LicensesAlloc, SubmitLine, StdErr=
    empty when merged, no blank last line)."""
    ctx = site(name)
    ref = cases(name)[case]["stdout"]
    facts = view.JobFacts("root", "localhost", None, ctx)
    ours = view.job_text(record_of(ref), facts, details=False, oneliner=case.endswith("_o_R1"), now=ref_now(ref))
    assert NOT_THE_RELEASES.sub(r"\1\2", ours) == NOT_THE_RELEASES.sub(r"\1\2", ref)


def ref_now(text: str) -> float:
    """The time the reference was taken: the job's start plus its RunTime."""
    kv = _kv(text)
    h, m, s = (int(x) for x in kv["RunTime"].split(":"))
    base = _time(kv["StartTime"]) or _time(kv["SubmitTime"])
    return base.timestamp() + (h * 3600 + m * 60 + s if kv["JobState"] == "RUNNING" else 0)


def test_a_release_without_the_rules_prints_22_05s_lines(site):
    """The rules are the only difference: 22.05's TRES=, Power= and blank last line."""
    assert not releases.get("22.05").rules & {releases.TRES_SLASH, releases.JOB_TRES_SPLIT, releases.JOB_FIELDS_26}
    ctx = site("22.05")
    rec = JobRecord(5, state="PENDING", std_out="/o", std_err="/o", gres="gres:gpu:1")
    lines = view.job_lines(rec, view.JobFacts("root", "h", None, ctx), False, 0.0)
    assert "Power=" in lines and lines[-1] == "" and "TresPerNode=gres:gpu:1" in lines
    assert [ln for ln in lines if ln.startswith(("TRES=", "ReqTRES=", "AllocTRES=", "SubmitLine="))] == \
        ["TRES=cpu=1,node=1,billing=1,gres/gpu=1"]


def test_26_05_keeps_a_separate_stderr_and_allocates_licenses_once_running(site):
    ctx = site("26.05")
    facts = view.JobFacts("root", "h", None, ctx)
    rec = JobRecord(5, state="RUNNING", start_time=datetime(2026, 12, 7, 3, 0), std_out="/o", std_err="/e",
                    licenses="matlab:2")
    text = "\n".join(view.job_lines(rec, facts, False, 0.0))
    assert "StdErr=/e" in text and "Licenses=matlab:2 LicensesAlloc=matlab:2" in text
    assert "SubmitLine=(null)" in text  # a job whose record holds no submission line


@pytest.mark.parametrize("name", NAMES)
def test_show_job_details_as_each_release(site, name):
    """-d (the GPU job): 26.05's SLUID= line, the job's own (what its job wrapper set as
    SLURM_JOB_SLUID, from the submit record's cluster and submission time); the rest byte for byte."""
    from types import SimpleNamespace

    ctx = site(name)
    ref = cases(name)["scontrol_show_job_d_R3"]["stdout"]
    rec = record_of(ref)
    made = 1796612425.741
    rec.extra["submit"] = SimpleNamespace(sub=made, cluster="cluster", begin=None)
    ours = view.job_text(rec, view.JobFacts("root", "localhost", None, ctx), details=True, oneliner=False,
                         now=ref_now(ref))
    ours = ours.replace("CPU_IDs=0-0 Mem=100 GRES=gpu:1\n", "CPU_IDs=2 Mem=100 GRES=gpu:1(IDX:0)\n")  # (not the release's)
    sluid = releases.sluid("cluster", int(made * 1000), rec.job_id, None)
    if name == "26.05":
        assert f"\n   SLUID={sluid}\n" in ours
        ref = re.sub(r"SLUID=s\w+", f"SLUID={sluid}", ref)
    else:
        assert "SLUID=" not in ours
    assert NOT_THE_RELEASES.sub(r"\1\2", ours) == NOT_THE_RELEASES.sub(r"\1\2", ref)
