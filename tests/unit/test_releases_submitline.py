"""The job's submit line (issue 30): sbatch records its command line in the submit record, and
scontrol show job prints it as 26.05's SubmitLine= (the JSON's submit_line, sacct's SubmitLine);
each line compared with what real 26.05.5 printed for the same submission
(fixtures/slurm-26.05/cases.json, scontrol_show_job_*)."""

from __future__ import annotations

import json
import re

import pytest

from conftest import FIXTURES
from shim.operations import jobs
from shim.operations import submit as ops
from shim.slurm.model import JobRecord
from shim.slurm.render import scontrol as view
from shim.slurm.request import submit_line
from shim.store.records import Submitted


def captured_lines() -> dict[str, str]:
    """case -> the SubmitLine 26.05.5 printed (one per distinct submission)."""
    out = {}
    for case, c in json.loads((FIXTURES / "slurm-26.05" / "cases.json").read_text()).items():
        if case.startswith("scontrol_show_job_") and "\n   SubmitLine=" in c["stdout"]:
            line = c["stdout"].split("\n   SubmitLine=", 1)[1].split("\n", 1)[0]
            if line not in out.values():
                out[case] = line
    return out


LINES = captured_lines()


def argv_of(line: str) -> list[str]:
    """The arguments that gave ``line``: its words after ``sbatch``, --wrap='s text whole."""
    words = line.split(" ")[1:]
    for i, w in enumerate(words):
        if w.startswith("--wrap="):
            return words[:i] + [" ".join(words[i:])]
    return words


def kept(line: str) -> str:
    """What the shim keeps of a line Slurm printed: --wrap's text (the batch script, private in the
    shim: README, Security model) left out, ``--wrap`` itself kept."""
    return re.sub(r"--wrap=.*\Z", "--wrap", line)


@pytest.fixture
def site(release_site, monkeypatch, tmp_path):
    """The unit-test site config (release ``set(name)``), tmp_path as the working directory with
    the captures' scripts in it."""
    for script in ("sleep.sh", "job.sh"):
        (tmp_path / script).write_text("#!/bin/sh\nsleep 1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ops, "license_seats", lambda cfg, names: ({"matlab": 3}, {"matlab": 3}))
    return release_site


def test_the_captures_have_submit_lines():
    assert len(LINES) >= 10 and any("--wrap=" in x for x in LINES.values())


@pytest.mark.parametrize("case", sorted(LINES))
def test_sbatch_records_the_line_26_05_printed(site, tmp_path, case):
    """sbatch's record holds the line as Slurm joined its argv (22.05's site: nothing asks Grid
    Engine about the dependencies); the record other users read keeps it."""
    site("22.05")
    line = LINES[case]
    _o, sub, _cfg = ops.batch(argv_of(line), {}, cwd=str(tmp_path))
    assert sub.record.submit_line == kept(line)
    assert Submitted(sub.record.public().to_dict()).submit_line == kept(line)


def test_scontrol_prints_the_recorded_line_on_26_05_only(site, tmp_path):
    """The record's line reaches scontrol show job through jobs.detail: SubmitLine= on 26.05, no
    such line on 22.05 and 24.11."""
    line = LINES["scontrol_show_job_FAIL"]
    assert line == "sbatch --parsable -J failer --wrap=exit 1"
    for name, shown in (("22.05", False), ("24.11", False), ("26.05", True)):
        ctx = site(name)
        _o, sub, cfg = ops.batch(argv_of(line), {}, cwd=str(tmp_path))
        rec = JobRecord(7, name="failer", user="root", uid=0, gid=0, state="PENDING", reason="None",
                        partition="debug", num_cpus=1)
        rec.extra["submit"] = Submitted(sub.record.public().to_dict())
        jobs.detail(rec, cfg)
        assert rec.extra["submit_line"] == kept(line) == "sbatch --parsable -J failer --wrap"
        lines = view.job_lines(rec, view.JobFacts("root", "localhost", None, ctx), details=False, now=0.0)
        assert [x.strip() for x in lines if "SubmitLine=" in x] == ([f"SubmitLine={kept(line)}"] if shown else [])


@pytest.mark.parametrize("argv, script_args, line", [
    (["--export=ALL,TOKEN=secret", "--wrap=env"], 0, "sbatch --export=ALL,TOKEN --wrap"),
    (["--export", "TOKEN=secret,HOME", "job.sh"], 0, "sbatch --export TOKEN,HOME job.sh"),
    (["--expor=A=1", "job.sh"], 0, "sbatch --expor=A job.sh"),
    (["--exp=A=1", "job.sh"], 0, "sbatch --exp=A job.sh"),
    (["--export-file=/tmp/e", "job.sh", "secret=1"], 1, "sbatch --export-file=/tmp/e job.sh"),
    (["-J", "x", "--wrap", "echo secret"], 0, "sbatch -J x --wrap"),
    (["--wra=echo secret", "-J", "x"], 0, "sbatch --wra -J x"),
    (["job.sh", "--token", "secret"], 2, "sbatch job.sh"),
])
def test_what_the_shim_keeps_private_is_left_out_of_the_line(argv, script_args, line):
    """The record that holds the line is one other users read: --export's values are not kept
    (its names are, as squeue and sacct show --export elsewhere), nor --wrap's text (the batch
    script) or the script's arguments (the last ``script_args`` words), which travel only in the
    job's 0600 file."""
    assert submit_line("sbatch", argv, script_args) == line
    assert not re.search(r"secret", submit_line("sbatch", argv, script_args))


def test_sbatch_leaves_the_scripts_arguments_out(site, tmp_path):
    site("26.05")
    _o, sub, _cfg = ops.batch(["-J", "x", "job.sh", "--api-key", "secret"], {}, cwd=str(tmp_path))
    assert sub.record.submit_line == "sbatch -J x job.sh"
    assert "secret" not in json.dumps(sub.record.public().to_dict())


def test_sacct_prints_the_recorded_line_in_every_release(site, tmp_path):
    """sacct's SubmitLine (every release prints it: each sacct_P_more capture has the job's line,
    the batch step's is empty) comes from the same record."""
    from shim.operations.accounting import rows
    from shim.slurm.render import sacct as sview

    line = "sbatch --parsable -J exit7 -o /srv/sref/acct/%j.out --wrap=exit 7"
    for name in ("22.05", "24.11", "26.05"):
        ref = json.loads((FIXTURES / f"slurm-{name}" / "cases.json").read_text())["sacct_P_more"]["stdout"]
        head = ref.splitlines()[0].split("|")
        assert line in [dict(zip(head, x.split("|")))["SubmitLine"] for x in ref.splitlines()[1:]]
    site("22.05")
    _o, sub, cfg = ops.batch(argv_of(line), {}, cwd=str(tmp_path))
    s = Submitted(sub.record.public().to_dict())
    ident = rows._ident(rows.Lookups(cfg, 0.0), 7, s, "exit7", "root", "root", "", "")
    assert sview.Row(**ident).submit_line == kept(line)
    assert rows._ident(rows.Lookups(cfg, 0.0), 8, None, "x", "root", "root", "", "")["submit_line"] == ""
