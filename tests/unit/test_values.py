"""Value grammars, checked against Slurm 22.05's messages and exit codes."""

from __future__ import annotations

import json
import shlex
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import SLURM_REF
from shim.errors import ShimError
from shim.slurm.options import sources
from shim.runtime import jobenv
from shim.slurm.options import values as v
from shim.slurm.options.getopt import Table, getopt
from shim.slurm.options.table import OPTIONS

CASES = SLURM_REF / "cases.json"
SBATCH = Table("sbatch", OPTIONS)

# Failures Slurm only finds by looking at the cluster (partitions, nodes, features, licenses,
# configured GRES, memory, script files): decided later, not by the option parsers.
NOT_PARSE_LEVEL = {
    "sbatch_err_bad_gres",  # GRES name checked against the configured GresTypes
    "sbatch_err_constraint",
    "sbatch_err_empty_stdin",
    "sbatch_err_exclude_unknown_node",
    "sbatch_err_gpus_no_gpu_partition",
    "sbatch_err_invalid_partition",
    "sbatch_err_missing_script",
    "sbatch_err_no_shebang",
    "sbatch_err_nodelist_unknown",
    "sbatch_err_too_many_gpus",
    "sbatch_err_too_many_licenses",
    "sbatch_err_too_much_mem",
    "sbatch_err_unknown_license",
    "sbatch_err_wrap_and_script",
}


def _cases() -> dict:
    if not CASES.exists():
        raise FileNotFoundError(f"reference capture {CASES} is missing (see fixtures/slurm-22.05/README.md)")
    return json.loads(CASES.read_text())


def _argv(cmd: str) -> list[str]:
    argv = shlex.split(cmd)[1:]
    return argv[:-1] if argv and argv[-1] == "job.sh" else argv


def fails(fn, text, prog="sbatch", **kw) -> ShimError:
    with pytest.raises(ShimError) as info:
        fn(text, prog, **kw)
    return info.value


PARSE_CASES = {k: c for k, c in _cases().items() if k.startswith("sbatch_err_") and k not in NOT_PARSE_LEVEL}
ACCEPTED_CASES = {k: c for k, c in _cases().items() if k.startswith("sbatch_accepted_")}


def test_reference_cases_found():
    assert len(PARSE_CASES) >= 17
    assert sorted(ACCEPTED_CASES) == sorted(ACCEPTED)  # every accepted capture has its expected values


@pytest.mark.parametrize("name", sorted(PARSE_CASES))
def test_reference_parse_errors(name):
    case = PARSE_CASES[name]
    with pytest.raises(ShimError) as info:
        sources.collect(SBATCH, _argv(case["cmd"]), environ={})
    assert "\n".join(info.value.lines) + "\n" == case["stderr"]
    assert info.value.code == case["rc"]


# What each command line Slurm accepted (rc 0, "Submitted batch job N") parses to: option values
# (the cluster decides later whether the job can run) and the script words after them.
ACCEPTED = {
    "sbatch_accepted_bad_account": ({"account": "nope"}, ["job.sh"]),
    "sbatch_accepted_bad_dependency": (
        {"dependency": v.Dependency(op="and", terms=[("afterok", ["999999"])])}, ["job.sh"]),
    "sbatch_accepted_bad_export": (
        {"export": "NONE,FOO=1"}, ["job.sh"]),  # any text: options/export.py reads it
    "sbatch_accepted_bad_qos": ({"qos": "nope"}, ["job.sh"]),
    "sbatch_accepted_missing_optarg": ({}, ["job.sh", "--time"]),  # after the script: the script's
    "sbatch_accepted_time_over_partition": ({"partition": "gpu", "time": 3 * 24 * 60}, ["job.sh"]),
    "sbatch_accepted_too_many_cpus": ({"ntasks": 100}, ["job.sh"]),
    "sbatch_accepted_too_many_nodes": ({"nodes": (2, 2)}, ["job.sh"]),
    "sbatch_accepted_workdir_missing": ({"chdir": "/nonexistent/dir"}, ["job.sh"]),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_reference_accepted_values_parse(name):
    case = ACCEPTED_CASES[name]
    assert (case["rc"], case["stderr"]) == (0, "")
    assert case["stdout"].startswith("Submitted batch job ")
    argv = shlex.split(case["cmd"])[1:]
    values, words = ACCEPTED[name]
    _, positional = getopt(SBATCH, argv)
    assert positional == words
    opts = sources.collect(SBATCH, argv, environ={})
    assert dict(opts) == values
    assert opts.source == {key: "cli" for key in values}


# --- integers and counts --------------------------------------------------------------------------


def test_positive_int():
    assert v.positive_int("4", "sbatch", "--ntasks") == 4
    assert v.positive_int(" +4", "sbatch", "--ntasks") == 4
    for bad in ("0", "-1", "abc", "4x", "", "4 "):
        err = fails(v.positive_int, bad, opt="--ntasks")
        assert err.lines == [f'sbatch: error: Invalid numeric value "{bad}" for --ntasks.']
        assert err.code == 1
    assert fails(v.positive("--cpus-per-task"), "0", "srun").lines == [
        'srun: error: Invalid numeric value "0" for --cpus-per-task.'
    ]


def test_nonneg_int():
    assert v.nonneg_int("0", "srun", "--relative") == 0
    assert v.nonneg_int("", "srun", "--relative") == 0  # C's strtol("") is 0 with nothing left over
    assert fails(v.nonneg_int, "-1", "srun", opt="--relative").code == 1
    assert v.immediate("5", "salloc") == 5
    assert fails(v.immediate, "x", "salloc").lines == ['salloc: error: Invalid numeric value "x" for immediate.']


def test_node_count():
    assert v.node_count("2", "sbatch") == (2, 2)
    assert v.node_count("2-4", "sbatch") == (2, 4)
    assert v.node_count("1k", "sbatch") == (1024, 1024)
    assert v.node_count("-3", "sbatch") == (1, 3)
    # "2-": an empty maximum reads as -1, as in Slurm
    assert fails(v.node_count, "2-").lines == ["sbatch: error: Maximum node count -1 is less than minimum node count 2"]
    for bad, part in (("abc", "abc"), ("2-x", "x"), ("y-3", "y"), ("k", "k")):
        err = fails(v.node_count, bad)
        assert err.lines == [f'sbatch: error: "{part}" is not a valid node count']
        assert err.code == 255
    err = fails(v.node_count, "4-2")
    assert err.lines == ["sbatch: error: Maximum node count 2 is less than minimum node count 4"]


def test_nice_and_priority():
    assert v.nice("10", "sbatch") == 10
    assert v.nice("-5", "sbatch") == -5
    assert v.nice("abc", "sbatch") == 0
    assert fails(v.nice, "9999999999").lines == ["sbatch: error: Invalid --nice value, out of range (+/- 2147483645)"]
    assert v.priority("7", "sbatch") == 7
    assert v.priority("top", "sbatch") == 4294967293 == jobenv.NO_VAL - 1  # PRIORITY_TOP, jobenv's one NO_VAL
    assert fails(v.priority, "-1").lines == ["sbatch: error: Priority must be >= 0"]
    assert fails(v.priority, "4294967294").lines == ["sbatch: error: Priority must be < 4294967294"]


def test_nice_without_a_value_is_100():
    assert sources.collect(SBATCH, ["--nice", "job.sh"], environ={}).nice == 100
    assert sources.collect(SBATCH, ["--nice=3", "job.sh"], environ={}).nice == 3


# --- durations ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, minutes",
    [("10", 10), ("0", v.INFINITE), ("UNLIMITED", v.INFINITE), ("infinite", v.INFINITE), ("-1", v.INFINITE),
     ("1:30", 2), ("1:00", 1), ("0:59", 1), ("1:00:00", 60), ("1:02:03", 63), ("2-0", 2880), ("1-2", 1560),
     ("1-2:30", 1590), ("1-2:30:01", 1591), ("3-", 4320), ("00:00:30", 1)],
)
def test_time_limit(text, minutes):
    assert v.time_limit(text, "sbatch") == minutes


@pytest.mark.parametrize("text", ["abc", "1:2:3:4", "", "1:", ":5", "1-2-3", "1:2-3", " 5", "5m", "1::2", "1-:5"])
def test_time_limit_errors(text):
    err = fails(v.time_limit, text)
    assert err.lines == ["sbatch: error: Invalid --time specification"]
    assert err.code == 255
    assert fails(v.time_limit, text, opt="--time-min").lines == ["sbatch: error: Invalid --time-min specification"]


@given(st.integers(min_value=1, max_value=400 * 1440))
def test_time_round_trip(minutes):
    """What Slurm's mins2time_str prints, its --time parser reads back."""
    from shim.slurm.render.text import mins2time_str

    assert v.time_limit(mins2time_str(minutes), "sbatch") == minutes


@given(st.integers(0, 30), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_time_fields(days, hours, mins, secs):
    total = ((days * 24 + hours) * 60 + mins) * 60 + secs
    assert v.time_seconds(f"{days}-{hours}:{mins}:{secs}") == total
    assert v.time_seconds(f"{days * 24 + hours}:{mins}:{secs}") == total
    assert v.time_minutes(f"{days * 1440 + hours * 60 + mins}:{secs}") == (total + 59) // 60


# --- memory ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, mb", [("100", 100), ("100M", 100), ("100m", 100), ("100MB", 100), ("2G", 2048), ("1T", 1048576),
                 ("1k", 1), ("1025K", 2), ("2048KB", 2), ("0", 0), ("+5", 5)],
)
def test_memory(text, mb):
    assert v.mem_mb(text, "sbatch") == mb


@pytest.mark.parametrize("text", ["lots", "", "-5", "1.5G", "5P", "5 G", "5GBB", "5B", "G"])
def test_memory_errors(text):
    err = fails(v.mem_mb, text)
    assert err.lines == ["sbatch: error: Invalid --mem specification"]
    assert err.code == 255
    assert fails(v.memory("--mem-per-cpu"), text, "srun").lines == ["srun: error: Invalid --mem-per-cpu specification"]


@given(st.integers(0, 10**6), st.sampled_from(["", "K", "M", "G", "T"]), st.booleans(), st.booleans())
def test_memory_units(n, unit, lower, byte):
    scale = {"": 1, "M": 1, "G": 1024, "T": 1024**2}
    text = f"{n}{unit.lower() if lower else unit}{'B' if byte and unit else ''}"
    expected = -(-n // 1024) if unit == "K" else n * scale[unit]
    assert v.mem_mb(text, "sbatch") == expected


# --- arrays ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, indices, throttle",
    [("0-3", [0, 1, 2, 3], None), ("1-4%2", [1, 2, 3, 4], 2), ("1,3,5", [1, 3, 5], None),
     ("0-10:3", [0, 3, 6, 9], None), ("5,1-2,5", [1, 2, 5], None), ("[1-3]", [1, 2, 3], None),
     ("1000", [1000], None), ("1-3%0", [1, 2, 3], None), ("1-2:1%4", [1, 2], 4)],
)
def test_array(text, indices, throttle):
    assert v.array_spec(text, "sbatch") == (indices, throttle)


@pytest.mark.parametrize("text", ["x-y", "1-5000", "1001", "-1", "5-3", "1-10:0", "1-10:1001", "1x", "1-2x", ","])
def test_array_errors(text):
    err = fails(v.array_spec, text)
    assert err.lines == ["sbatch: error: Batch job submission failed: Invalid job array specification"]
    assert err.code == 1


def test_array_empty_is_no_array():
    assert v.array_spec("", "sbatch") is None


@given(st.sets(st.integers(0, 1000), min_size=1, max_size=40), st.one_of(st.none(), st.integers(1, 50)))
def test_array_lists(indices, throttle):
    text = ",".join(str(i) for i in sorted(indices)) + (f"%{throttle}" if throttle else "")
    assert v.array_spec(text, "sbatch") == (sorted(indices), throttle)


@given(st.integers(0, 1000), st.integers(0, 1000), st.integers(1, 1000))
def test_array_steps(a, b, step):
    lo, hi = min(a, b), max(a, b)
    assert v.array_spec(f"{lo}-{hi}:{step}", "sbatch") == (list(range(lo, hi + 1, step)), None)


# --- dependencies ---------------------------------------------------------------------------------


def test_dependency():
    assert v.dependency("afterok:12", "sbatch") == ("and", [("afterok", ["12"])])
    assert v.dependency("afterok:12:13,afterany:14", "sbatch") == (
        "and", [("afterok", ["12", "13"]), ("afterany", ["14"])])
    assert v.dependency("afternotok:5?aftercorr:6_2", "sbatch") == (
        "or", [("afternotok", ["5"]), ("aftercorr", ["6_2"])])
    assert v.dependency("after:7+10", "sbatch") == ("and", [("after", ["7+10"])])
    assert v.dependency("singleton", "sbatch") == ("and", [("singleton", [])])
    assert v.dependency("SINGLETON,AfterOK:3", "sbatch") == ("and", [("singleton", []), ("afterok", ["3"])])
    assert v.dependency("12,13", "sbatch") == ("and", [("afterany", ["12"]), ("afterany", ["13"])])
    assert v.dependency("afterburstbuffer:9", "sbatch").terms == [("afterburstbuffer", ["9"])]
    assert v.dependency("afterok:12_*", "sbatch").terms == [("afterok", ["12_*"])]
    assert v.dependency("afterok:12_[1-3,5]", "sbatch").terms == [("afterok", ["12_1", "12_2", "12_3", "12_5"])]
    assert v.dependency("", "sbatch") is None
    assert v.dependency("0", "sbatch") is None
    assert v.dependency("after:12_3+5", "sbatch").terms == [("after", ["12_3+5"])]  # job, task, delay: one id


@pytest.mark.parametrize(
    "text", ["whenever:1", "afterok", "afterok:", "afterok:0", "afterok:x", "afterok:1,", "after:1+0",
             "singletonx", "expand:5", "afterok:1;2", "abc"],
)
def test_dependency_errors(text):
    err = fails(v.dependency, text)
    assert err.lines == ["sbatch: error: Batch job submission failed: Job dependency problem"]
    assert err.code == 1
    assert fails(v.dependency, text, "srun").lines == [
        "srun: error: Unable to allocate resources: Job dependency problem"]
    assert fails(v.dependency, text, "salloc").lines == [
        "salloc: error: Job submit/allocate failed: Job dependency problem"]


# --- export ---------------------------------------------------------------------------------------


def test_export():
    """--export is read by options/export.py alone (values.export_spec, a second reader that kept a
    NAME alone as None and tracked one kind of quote at a time, is gone)."""
    from shim.slurm.options import export

    env = {"MYVAR": "m", "B": "b"}
    assert export.mode("ALL", env) == export.mode("all", env) == export.mode(None, env) == {"all": True, "vars": {}}
    assert export.mode("NONE", env) == export.mode("NIL", env) == {"all": False, "vars": {}}
    assert export.mode("MYVAR", env) == {"all": False, "vars": {"MYVAR": "m"}}
    assert export.mode("MYVAR", {}) == {"all": False, "vars": {}}  # not set where submitted: nothing
    assert export.mode("FOO=1,ALL", env) == {"all": True, "vars": {"FOO": "1"}}
    assert export.mode("ALL,A=x=y,B", env) == {"all": True, "vars": {"A": "x=y", "B": "b"}}
    assert export.mode("NONE,FOO=1", env) == {"all": False, "vars": {"FOO": "1"}}
    assert export.mode('A="1,2",B', env)["vars"] == {"A": '"1,2"', "B": "b"}
    assert export.mode("'A=1,2'", env)["vars"] == {"A": "1,2"}


# --- GRES, GPUs, licenses -------------------------------------------------------------------------


def test_gres():
    G = v.Gres
    assert v.gres_spec("gpu:1", "sbatch") == [G("gpu", None, 1)]
    assert v.gres_spec("gpu", "sbatch") == [G("gpu", None, 1)]
    assert v.gres_spec("gpu:tesla:2", "sbatch") == [G("gpu", "tesla", 2)]
    assert v.gres_spec("gpu:tesla", "sbatch") == [G("gpu", "tesla", 1)]
    assert v.gres_spec("gres:gpu:2,fpga:1", "sbatch") == [G("gpu", None, 2), G("fpga", None, 1)]
    assert v.gres_spec("mps:2k", "sbatch") == [G("mps", None, 2048)]
    assert v.gres_spec("gpu:0", "sbatch") == []
    assert v.gres_spec("none", "srun") == []


@pytest.mark.parametrize("text", ["gpu:", "gpu::1", "gpu:tesla:", "gpu:a:x", ":1", "gpu:1:2:3", "gpu 1"])
def test_gres_errors(text):
    err = fails(v.gres_spec, text)
    assert err.lines == ["sbatch: error: Invalid generic resource (gres) specification"]
    assert err.code == 1


def test_gpus():
    assert v.gpu_spec("2", "sbatch") == (None, 2)
    assert v.gpu_spec("a100:3", "sbatch") == ("a100", 3)
    assert v.gpu_spec("a100", "sbatch") == ("a100", 1)
    for bad in ("", "a100:", ":2", "a:b:2", "1,2", "a 1"):
        assert fails(v.gpu_spec, bad).lines == ["sbatch: error: Invalid generic resource (gres) specification"]


def test_licenses():
    assert v.licenses("matlab", "sbatch") == {"op": "and", "items": [("matlab", 1)]}
    assert v.licenses("matlab:2,fluent@db:1", "sbatch") == {"op": "and", "items": [("matlab", 2), ("fluent@db", 1)]}
    assert v.licenses("a:1;a:2", "sbatch") == {"op": "and", "items": [("a", 3)]}
    # (a:1|b:2, any one of them, is 26.05's: tests/unit/test_releases_submit.py; 22.05 refuses it)
    assert v.licenses("a:", "sbatch") == {"op": "and", "items": [("a", 0)]}  # strtol("") is 0 in Slurm too
    for bad in ("a:x", "a:-1", "a:1|b,c", "a b", ":3", "", "a: 1x", "a:1|b:2"):
        err = fails(v.licenses, bad)
        assert err.lines == ["sbatch: error: Batch job submission failed: Invalid license specification"]
        assert err.code == 1


# --- notification, I/O, signals -------------------------------------------------------------------


def test_mail_type():
    assert v.mail_type("END", "sbatch") == {"END"}
    assert v.mail_type("begin,end", "sbatch") == {"BEGIN", "END"}
    assert v.mail_type("ALL", "sbatch") == {"BEGIN", "END", "FAIL", "REQUEUE", "INVALID_DEPEND", "STAGE_OUT"}
    assert v.mail_type("NONE", "sbatch") == frozenset()
    assert v.mail_type("TIME_LIMIT_80,ARRAY_TASKS", "sbatch") == {"TIME_LIMIT_80", "ARRAY_TASKS"}
    assert v.mail_type("END,SOMETIMES", "sbatch") == {"END"}  # Slurm skips unknown words next to known ones
    for bad in ("SOMETIMES", "", ","):
        err = fails(v.mail_type, bad)
        assert err.lines == ["sbatch: error: Invalid --mail-type specification"]
        assert err.code == 255


def test_open_mode():
    assert v.open_mode("append", "sbatch") == "append"
    assert v.open_mode("a", "srun") == "append"  # SLURM_OPEN_MODE=a inside jobs
    assert v.open_mode("Truncate", "sbatch") == "truncate"
    assert fails(v.open_mode, "sideways").lines == ["sbatch: error: Invalid --open-mode specification"]
    assert fails(v.open_mode, "").code == 255


def test_signal():
    S = v.SignalSpec
    assert v.signal_spec("USR1", "sbatch") == S("all", 10, 60)
    assert v.signal_spec("USR1@120", "sbatch") == S("all", 10, 120)
    assert v.signal_spec("SIGTERM@5", "sbatch") == S("all", 15, 5)
    assert v.signal_spec("10", "sbatch") == S("all", 10, 60)
    assert v.signal_spec("B:USR2@30", "sbatch") == S("batch", 12, 30)
    assert v.signal_spec("R:INT", "sbatch") == S("all", 2, 60)
    assert v.signal_spec("RB:HUP", "sbatch") == S("batch", 1, 60)
    assert v.signal_spec("BR:HUP", "sbatch") == S("batch", 1, 60)
    assert v.signal_spec("usr1@", "sbatch") == S("all", 10, 0)
    assert v.signal_spec("R:USR1", "srun") == S("all", 10, 60)
    for bad in ("FOO@60", "USR1@x", "USR1@-1", "0", "B:USR1@70000", ""):
        err = fails(v.signal_spec, bad)
        assert err.lines == ["sbatch: error: Invalid --signal specification"]
        assert err.code == 255
    assert fails(v.signal_spec, "B:USR1", "srun").lines == ["srun: error: Invalid --signal specification"]
    # the job wrapper reads it as (target, signal number, seconds)
    target, signum, secs = v.signal_spec("B:USR1@90", "sbatch")
    assert (target, signum, secs) == ("batch", 10, 90)


def test_kill_command():
    assert v.kill_command("KILL", "salloc") == 9
    assert v.kill_command("2", "salloc") == 2
    assert fails(v.kill_command, "nope", "salloc").lines == ["salloc: error: Invalid --kill-command specification"]


# --- points in time -------------------------------------------------------------------------------

NOW = datetime(2024, 5, 10, 14, 30, 15)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("16:00", datetime(2024, 5, 10, 16, 0)),
        ("10:00", datetime(2024, 5, 11, 10, 0)),
        ("14:30", datetime(2024, 5, 11, 14, 30)),
        ("14:31:05", datetime(2024, 5, 10, 14, 31, 5)),
        ("4:00 PM", datetime(2024, 5, 10, 16, 0)),
        ("10:30pm", datetime(2024, 5, 10, 22, 30)),
        ("12:00AM", datetime(2024, 5, 11, 0, 0)),
        ("12:15pm", datetime(2024, 5, 11, 12, 15)),
        ("midnight", datetime(2024, 5, 11, 0, 0)),
        ("noon", datetime(2024, 5, 11, 12, 0)),
        ("elevenses", datetime(2024, 5, 11, 11, 0)),
        ("fika", datetime(2024, 5, 10, 15, 0)),
        ("teatime", datetime(2024, 5, 10, 16, 0)),
        ("today", datetime(2024, 5, 10, 0, 0)),
        ("tomorrow", datetime(2024, 5, 11, 0, 0)),
        ("now", NOW),
        ("now+60", NOW + timedelta(seconds=60)),
        ("now+1hour", NOW + timedelta(hours=1)),
        ("now+2days", NOW + timedelta(days=2)),
        ("now + 3 weeks", NOW + timedelta(weeks=3)),
        ("now-5minutes", NOW - timedelta(minutes=5)),
        ("0601", datetime(2024, 6, 1)),
        ("0301", datetime(2025, 3, 1)),
        ("06/01", datetime(2024, 6, 1)),
        ("06.01.26", datetime(2026, 6, 1)),
        ("060126", datetime(2026, 6, 1)),
        ("6/1/26-13:45", datetime(2026, 6, 1, 13, 45)),
        ("2025-01-02", datetime(2025, 1, 2)),
        ("2025-01-02T03:04:05", datetime(2025, 1, 2, 3, 4, 5)),
        ("2025-01-02T03:04", datetime(2025, 1, 2, 3, 4)),
        ("tomorrow 08:00", datetime(2024, 5, 11, 8, 0)),
        ("02/31/25", datetime(2025, 3, 3)),  # like mktime, the extra days roll over
        ("uts1700000000", datetime.fromtimestamp(1700000000)),
    ],
)
def test_parse_time(text, expected):
    assert v.parse_time(text, NOW) == expected


@pytest.mark.parametrize(
    "text, pos",
    [("notatime", 0), ("25:00", 0), ("12:60", 3), ("now+3x", 4), ("now+", 3), ("13/01", 0), ("x", 0),
     ("12:3", 4), ("uts5", 0), ("2024-13-01", 5), ("10:00 xm", 6)],
)
def test_parse_time_errors(text, pos):
    with pytest.raises(v.TimeSpecError) as info:
        v.parse_time(text, NOW)
    assert info.value.pos == pos


def test_begin_messages():
    err = fails(v.begin_time, "notatime")
    assert err.lines == ["Invalid time specification (pos=0): notatime", "sbatch: error: Invalid --begin specification"]
    assert err.code == 255
    # nothing specified: only the option's own line
    assert fails(v.begin_time, "").lines == ["sbatch: error: Invalid --begin specification"]
    assert fails(v.begin_time, " - ", "srun").lines == ["srun: error: Invalid --begin specification"]
    assert fails(v.deadline_time, "never").lines[1] == "sbatch: error: Invalid --deadline specification"


@given(st.datetimes(min_value=datetime(2024, 5, 11), max_value=datetime(2090, 1, 1)))
def test_time_round_trip_iso(when):
    when = when.replace(microsecond=0)
    assert v.parse_time(when.strftime("%Y-%m-%dT%H:%M:%S"), NOW) == when
    assert v.parse_time(when.strftime("%m/%d/%y-%H:%M:%S"), NOW) == when


@given(st.integers(0, 10**5), st.sampled_from([("seconds", 1), ("minutes", 60), ("hours", 3600), ("days", 86400)]))
def test_now_plus(count, unit):
    assert v.parse_time(f"now+{count}{unit[0]}", NOW) == NOW + timedelta(seconds=count * unit[1])


def test_now_plus_out_of_range():
    """Slurm's parse_time accepts it (the year 29405); a datetime cannot hold it, so --begin
    refuses it where Slurm's parser stands at the end of the text."""
    with pytest.raises(v.TimeSpecError) as info:
        v.parse_time("now+9999999days", NOW)
    assert info.value.pos == len("now+9999999days")
    assert fails(v.begin_time, "now+9999999days").lines[0] == "Invalid time specification (pos=15): now+9999999days"


def test_begin_keeps_slurms_absolute_index_after_now():
    """parse_time adds the absolute index of the sign after "now" (src/common/parse_time.c)."""
    assert fails(v.begin_time, "today now+1").lines == [
        "Invalid time specification (pos=15): today now+1", "sbatch: error: Invalid --begin specification"]
    assert v.parse_time("now+1", NOW) == NOW + timedelta(seconds=1)


# --- placement, sharing and keywords --------------------------------------------------------------


def test_exclusive():
    for mode in ("user", "mcs", "topo", "exclusive", "oversubscribe"):
        assert v.exclusive(mode.upper(), "sbatch") == mode
    assert fails(v.exclusive, "node").lines == ["sbatch: error: Invalid --exclusive specification"]


@pytest.mark.parametrize(
    "text, value",
    [("block", "block"), ("Cyclic", "cyclic"), ("arbitrary", "arbitrary"), ("*", "block"),
     ("block:cyclic", "block:cyclic"), ("cyclic:*:*", "cyclic:cyclic:cyclic"), ("*:block:*", "block:block:block"),
     ("block:fcyclic:block", "block:fcyclic:block"), ("cyclic,pack", "cyclic,pack"), ("nopack", "nopack"),
     ("plane=4", "plane=4")],
)
def test_distribution(text, value):
    assert v.distribution(text, "srun") == value


@pytest.mark.parametrize("text", ["", "diagonal", "arbitrary:block", "block:block:block:block", "block,tight",
                                  "plane=0", "plane=x", "fcyclic", "block:"])
def test_distribution_errors(text):
    err = fails(v.distribution, text)
    assert err.lines == ["sbatch: error: Invalid --distribution specification"]
    assert err.code == 255


def test_keywords():
    assert v.kill_on_invalid_dep("YES", "sbatch") is True
    assert v.kill_on_invalid_dep("no", "sbatch") is False
    assert fails(v.kill_on_invalid_dep, "maybe").lines == ["sbatch: error: Invalid --kill-on-invalid-dep specification"]
    assert v.no_kill("off", "sbatch") is False
    assert v.no_kill("set", "sbatch") is True
    assert fails(v.no_kill, "on").lines == ["sbatch: error: Invalid --no-kill specification"]
    assert v.gres_flags("enforce-binding", "sbatch") == "enforce-binding"
    assert fails(v.gres_flags, "tight").lines == ["sbatch: error: Invalid --gres-flags specification"]
    assert v.wait_all_nodes("1", "salloc") == 1
    assert fails(v.wait_all_nodes, "2", "salloc").lines == ["salloc: error: Invalid --wait-all-nodes specification"]
    assert fails(v.wait_all_nodes, "x", "salloc").code == 1
    assert v.delay_seconds("1:00", "sbatch") == 60
