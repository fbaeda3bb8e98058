"""SLURM_SHIM_DEBUG=1 on the live cluster: the installed commands log each Grid Engine command they
run (its argv, duration and exit code) to stderr, and print what they print without it."""

from __future__ import annotations

import re

import pytest

from conftest import SITE_CONFIG, run

pytestmark = pytest.mark.gridengine

LINE = re.compile(r"slurm-shim: debug: (?P<argv>\S+(?: .*)?)  \((?P<secs>\d+\.\d{3}) s, exit (?P<rc>-?\d+)\)")
SITE = SITE_CONFIG  # the selected cell's


def ge_calls(err: str) -> list[tuple[str, list[str], int]]:
    """(tool, argv words after it, exit code) of each debug line; every stderr line must be one."""
    calls = []
    for line in err.splitlines():
        m = LINE.fullmatch(line)
        assert m, f"not a debug line: {line!r}"
        words = m["argv"].split(" ")
        calls.append((words[0].rsplit("/", 1)[-1], words[1:], int(m["rc"])))
    return calls


@pytest.mark.parametrize("argv, first", [
    (["squeue"], ("qstat", "-xml")),  # the listing; which other q* calls a command makes is its business
    (["sinfo"], None),
    (["scontrol", "show", "partition"], None),
])
def test_read_commands_log_their_grid_engine_calls_and_print_the_same(argv, first):
    plain = run(*argv, env={"SLURM_SHIM_DEBUG": ""})
    debug = run(*argv, env={"SLURM_SHIM_DEBUG": "1"})
    assert plain.returncode == debug.returncode == 0, debug.stderr
    assert plain.stderr == ""
    calls = ge_calls(debug.stderr)
    assert calls, "no Grid Engine call logged"
    assert all(tool.startswith("q") and rc == 0 for tool, _, rc in calls), calls
    if first is not None:
        assert calls[0][0] == first[0] and first[1] in calls[0][1], calls
    # the listing itself is not changed by the log (the header, at least, is byte for byte)
    assert debug.stdout.splitlines()[:1] == plain.stdout.splitlines()[:1]


def test_sbatch_through_qsub_and_scancel_log_qsub_and_qdel(tmp_path):
    conf = tmp_path / "config.toml"
    text = SITE.read_text()
    assert 'method = "agent"' in text, "the CI site config submits through the agent"
    conf.write_text(text.replace('method = "agent"', 'method = "qsub"'))
    env = {"SLURM_SHIM_DEBUG": "1", "SLURM_SHIM_CONFIG": str(conf), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    sub = run("sbatch", "--hold", "--parsable", "-J", "debuglog", "--wrap", "true", env=env, cwd=tmp_path)
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip()
    assert job.isdigit()
    try:
        qsubs = [(words, rc) for tool, words, rc in ge_calls(sub.stderr) if tool == "qsub"]
        assert len(qsubs) == 1 and qsubs[0][1] == 0
        assert "-h" in qsubs[0][0] and "debuglog" in qsubs[0][0]
    finally:
        cancel = run("scancel", job, env=env)
    assert cancel.returncode == 0, cancel.stderr
    assert any(tool == "qdel" and job in words and rc == 0 for tool, words, rc in ge_calls(cancel.stderr))
