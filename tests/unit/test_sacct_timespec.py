"""Slurm's time grammar (shim.slurm.timespec) for sacct -S/-E, --begin/--deadline and scontrol StartTime,
and the import weight of sacct's path."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shim.slurm.timespec import TimeSpecError, midnight, parse_time

SRC = Path(__file__).resolve().parents[2] / "src" / "shim"


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    time.tzset()


NOW = time.mktime((2026, 11, 30, 9, 0, 0, 0, 0, -1))


def iso(text: str, past: bool = True) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(parse_time(text, past=past, now=NOW)))


@pytest.mark.parametrize("text,want", [
    ("now", "2026-11-30T09:00:00"),
    ("now-1hour", "2026-11-30T08:00:00"),
    ("now-90", "2026-11-30T08:58:30"),
    ("now+2days", "2026-12-02T09:00:00"),
    ("now-1week", "2026-11-23T09:00:00"),
    ("NOW - 10 minutes", "2026-11-30T08:50:00"),
    ("2020-01-01", "2020-01-01T00:00:00"),
    ("2026-11-30T07:48:11", "2026-11-30T07:48:11"),
    ("2026-11-28T07:00", "2026-11-28T07:00:00"),
    ("11/29", "2026-11-29T00:00:00"),
    ("1129", "2026-11-29T00:00:00"),
    ("11.29.25", "2025-11-29T00:00:00"),
    ("11/29/25-10:00", "2025-11-29T10:00:00"),
    ("12/01", "2025-12-01T00:00:00"),  # no year, in the past: last year's
    ("10:00", "2026-11-30T10:00:00"),
    ("07:30:15", "2026-11-30T07:30:15"),
    ("10:00pm", "2026-11-30T22:00:00"),
    ("12:00am", "2026-11-30T00:00:00"),
    ("midnight", "2026-11-30T00:00:00"),
    ("noon", "2026-11-30T12:00:00"),
    ("elevenses", "2026-11-30T11:00:00"),
    ("fika", "2026-11-30T15:00:00"),
    ("teatime", "2026-11-30T16:00:00"),
    ("today", "2026-11-30T00:00:00"),
    ("tomorrow", "2026-12-01T00:00:00"),
    ("uts1796026550", "2026-11-30T08:15:50"),
])
def test_forms(text, want):
    assert iso(text) == want


def test_future_mode_picks_the_next_occurrence():
    assert iso("08:00", past=False) == "2026-12-01T08:00:00"
    assert iso("12/01", past=False) == "2026-12-01T00:00:00"


@pytest.mark.parametrize("text,pos", [("notatime", 0), ("2026-13-01", 5), ("25:00", 0), ("now+x", 3),
                                      ("now-", 3), ("10:7", 4)])
def test_errors_carry_slurms_message(text, pos):
    with pytest.raises(TimeSpecError) as e:
        parse_time(text, now=NOW)
    assert str(e.value) == f"Invalid time specification (pos={pos}): {text}"


@pytest.mark.parametrize("text,pos", [
    # after "now" Slurm adds the absolute index of the sign (parse_time: pos += i), so "now+N" only
    # works at the very start of the text (the old sacct parser took all three)
    ("today now+1", 15), (" now+1", 5), ("12:00 now+1", 15), ("now+1", None),
    # a unit without a count: refused at the sign (_get_delta returns before moving pos)
    ("now+hours", 3),
    # the ISO month's first character is not checked (_get_date): "x1" is month 721
    ("2026-x1-01", 5), ("2026-1x-01", 7),
    # strtol's reading of uts: blanks before the number, nothing after it, no '_'
    ("uts 1796026550", None), ("uts1_796_026_550", 0), ("uts1796026550 ", 0),
])
def test_slurms_positions_where_the_two_old_parsers_disagreed(text, pos):
    """Slurm's src/common/parse_time.c (parse_time, _get_delta, _get_date) decides."""
    if pos is None:
        assert parse_time(text, now=NOW) > 0
        return
    with pytest.raises(TimeSpecError) as e:
        parse_time(text, now=NOW)
    assert e.value.pos == pos


def test_far_future_is_a_time_as_in_slurm():
    """now+9999999days: Slurm's parse_time answers a time in the year 29405 (localtime/mktime
    manage it); sbatch --begin refuses it only because no datetime (nor Grid Engine's -a) holds it."""
    from shim.slurm.options import values

    assert time.localtime(parse_time("now+9999999days", now=NOW)).tm_year == 29405
    with pytest.raises(TimeSpecError) as e:
        values.parse_time("now+9999999days")
    assert e.value.pos == len("now+9999999days")


def test_a_date_after_today_keeps_todays_year():
    """_get_date leaves the year alone when none is given, so "tomorrow 12/05" is in tomorrow's
    year, not last year's (the old sacct parser forgot the year and guessed)."""
    assert iso("tomorrow 12/05") == "2026-12-05T00:00:00"
    assert iso("today 010100") == "2026-01-01T00:00:00"  # "00" is no year


def test_scontrol_start_time():
    """scontrol's StartTime (update_job.c: parse_time(val, 0); a past time becomes now)."""
    from datetime import datetime

    from shim.slurm.timespec import start_time

    assert start_time("16:00", now=NOW) == datetime(2026, 11, 30, 16, 0)
    assert start_time("08:00", now=NOW) == datetime(2026, 12, 1, 8, 0)
    assert start_time("2020-01-01", now=NOW) == datetime.fromtimestamp(NOW)
    assert start_time("now+1hour", now=NOW) == datetime(2026, 11, 30, 10, 0)
    assert start_time("", now=NOW) is None
    with pytest.raises(TimeSpecError):
        start_time("now+1h", now=NOW)


def test_a_one_digit_month_is_refused_before_the_text():
    with pytest.raises(TimeSpecError) as e:
        parse_time("0", now=NOW)
    assert str(e.value) == "Invalid time specification (pos=-1): 0"


def test_empty_is_time_zero():
    assert parse_time("", now=NOW) == 0


def test_midnight():
    assert midnight(NOW) == time.mktime((2026, 11, 30, 0, 0, 0, 0, 0, -1))


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_sacct_and_sinfo_paths_stay_light():
    """No pydantic/click on the way to reading the accounting file or qhost output."""
    for rel in ("slurm/timespec.py", "gridengine/qacct.py", "gridengine/qhost.py", "slurm/render/sacct.py",
                "slurm/render/sinfo.py",
                "cli/sacct.py", "cli/sinfo.py"):
        assert not ({"pydantic", "click", "tabulate", "subprocess"} & _imports(SRC / rel)), rel


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789:-/.T +nowtdaymrsechukpa\n\t_x")), max_size=24),
       st.booleans())
def test_any_text_is_a_time_or_slurms_message(text, past):
    """The one parser never fails otherwise, in either direction, and a refusal names a position
    in the text, past it (after "now" Slurm adds an absolute index) or just before it (a one-digit
    month out of range steps back two characters, as Slurm's _get_date does: "0" is pos=-1)."""
    try:
        assert isinstance(parse_time(text, past=past, now=NOW), int)
    except TimeSpecError as e:
        assert -1 <= e.pos <= 2 * len(text) + 1 and str(e) == f"Invalid time specification (pos={e.pos}): {text}"
