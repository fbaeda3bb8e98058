"""Slurm's time grammar for sacct -S/-E (shim.timespec), and the import weight of sacct's path."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest

from shim.timespec import TimeSpecError, midnight, parse_time

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
    for rel in ("timespec.py", "backends/qacct.py", "backends/qhost.py", "render/sacct.py", "render/sinfo.py",
                "cli/sacct.py", "cli/sinfo.py"):
        assert not ({"pydantic", "click", "tabulate", "subprocess"} & _imports(SRC / rel)), rel
