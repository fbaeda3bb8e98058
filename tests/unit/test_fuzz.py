"""Fuzzing every command's parser and renderer: whatever the arguments, a user sees Slurm-style
messages and an exit code, never a traceback or an "internal error". Grid Engine is replaced by
recorded answers (an empty queue, recorded accounting), so nothing is submitted.

Every example is also bounded in CPU time and memory (issue 13, item 7): the value parsers get long,
repetitive inputs built to find super-linear work (backtracking patterns, quadratic scans, int() of
thousands of digits, lists built before they are counted)."""

from __future__ import annotations

import io
import sys
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, use_site_config
from shim.gridengine import backends
from shim.__main__ import dispatch
from shim.gridengine.replay import ReplayBackend
from shim.proc import Result

EMPTY_QSTAT = (FIXTURES / "gridengine" / "sge-8.1.9" / "live-qstat-u-all-r-xml.empty.xml").read_text()

WORDS = {
    "sbatch": ["-n", "-c", "-N", "--mem", "-t", "--array", "--dependency", "--gres", "-L", "--export", "--wrap",
               "-p", "-J", "-o", "--begin", "--signal", "--exclusive", "--parsable", "--test-only", "-H", "--nice",
               "--mail-type", "--open-mode", "-D", "-w", "-x", "-C", "--gpus", "-v"],
    "squeue": ["-o", "-O", "-t", "-u", "-j", "-n", "-p", "-A", "-S", "-h", "-l", "--me", "-r", "--start",
               "--json", "-a", "-i", "-M", "--format", "--Format", "-L", "-w"],
    "scancel": ["-u", "-n", "-p", "-t", "-A", "-w", "--me", "-Q", "-b", "-f", "-s", "-v", "-M"],
    "sacct": ["-o", "-j", "-S", "-E", "-s", "-u", "-X", "-P", "-p", "-n", "-b", "-l", "--name", "--json",
              "--delimiter", "-a", "-N", "-r"],
    "sinfo": ["-N", "-l", "-o", "-O", "-p", "-h", "-s", "-t", "-R", "--json", "-n", "-S"],
    "scontrol": ["show", "job", "hostnames", "hostlist", "config", "partition", "node", "hold", "release",
                 "update", "JobId=1", "TimeLimit=5", "-o", "-d"],
    "srun": ["-n", "-N", "-l", "-o", "--pty", "--mem", "-c", "--export", "-K", "-W"],
    "salloc": ["-n", "-N", "--mem", "-t", "--no-shell", "-p"],
}
# a real argv holds no NUL byte, and no lone surrogate (Python decodes undecodable bytes to
# U+DC80..U+DCFF, which the commands print back as the bytes they were)
ARGV_CHARS = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))
# pieces that, repeated, have made parsers super-linear (or would): digit runs, separators, brackets
UNITS = ["9", "0", " ", "\t", ",", ":", "-", "_", "[", "]", "%", "+", "=", "'", '"', "1-", "1,", "1:", "1_",
         "_[", "1_[1]:", "0-65535,", "n[0-65535],", "n1", "a[1]", "now+", "gpu:", "x", "é", "\n"]
LONG = st.builds(
    lambda head, unit, n, tail: head + unit * n + tail,
    st.sampled_from(["", "n[", "afterok:", "1_[", "now+", "plane=", "gpu:", "sx_", "0-", "%"]),
    st.one_of(st.sampled_from(UNITS), st.text(alphabet=ARGV_CHARS, min_size=1, max_size=3)),
    st.one_of(st.sampled_from([1, 2, 4301, 20000]), st.integers(0, 20000)),  # past int()'s 4300 digits
    st.sampled_from(["", "x", "]", "!", "9", "-1", "\n"]),
)
VALUES = st.sampled_from(["", "0", "1", "-1", "abc", "1-3", "5%2", "x:y", "%.10i %j", "ALL", "NONE", "now",
                          "1:00:00", "UNLIMITED", "gpu:1", "999999", "1_2", "1.0", "a,b,,c", "=", "%", "%%5",
                          "é", "\n", "$(id)", "--", "-", "JobID%-5,State", "*", "[", "debug"])


# per-example bounds: CPU seconds of a plain run (process time, not the wall clock), bytes
# allocated at peak in a second run under tracemalloc (which slows Python down several times, so it
# does not time the first). They catch growth faster than the input (a quadratic parse of 120,000
# characters takes minutes), not speed: each is about 4x what the slowest interpreter the README
# names needs (3.13's hostlist.expand of 120,000 characters: 0.40 s, 17.8 MB; 3.11: 0.2 s, 16 MB).
COMMAND_CPU, COMMAND_MEM = 2.0, 64 << 20
PARSER_CPU, PARSER_MEM = 1.5, 64 << 20


def within(cpu: float, mem: int, fn, what):
    """fn() twice: timed, then traced; returns the first run's result."""
    t0 = time.process_time()
    result = fn()
    used = time.process_time() - t0
    assert used < cpu, (f"{used:.2f} s CPU", what)
    tracemalloc.start()
    try:
        fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < mem, (f"{peak / 2**20:.1f} MB", what)
    return result


def argv_for(cmd: str):
    text = st.text(alphabet=ARGV_CHARS, max_size=8)
    return st.lists(st.one_of(st.sampled_from(WORDS[cmd]), VALUES, text, LONG), max_size=8)


class Repeats(Exception):
    """The report would now repeat (-i): what the command printed so far is the answer."""


class _Once:
    """The time module, but a sleep ends the command."""

    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def sleep(_seconds):
        raise Repeats


def _dispatch(cmd: str, argv: list[str]) -> int:
    try:
        return dispatch(cmd, argv)
    except Repeats:
        return 0


@pytest.fixture(autouse=True)
def quiet_cluster(monkeypatch, tmp_path):
    use_site_config(monkeypatch, tmp_path)
    empty = tmp_path / "nobin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # a command that tries the real Grid Engine finds none
    monkeypatch.chdir(tmp_path)  # and whatever a command writes lands here
    monkeypatch.setenv("SLURM_SHIM_ACCOUNTING", str(FIXTURES / "gridengine" / "sge-8.1.9" / "qacct-accounting-file-records.txt"))
    for var in ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NODELIST", "SQUEUE_FORMAT", "SACCT_FORMAT"):
        monkeypatch.delenv(var, raising=False)
    # squeue/sinfo -i N report again every N seconds, forever, as Slurm's do: the fuzz stops the
    # loop at its first wait (a test that hung on `squeue -i 1` otherwise)
    from shim.cli import sinfo as sinfo_cli, squeue as squeue_cli

    for mod in (squeue_cli, sinfo_cli):
        monkeypatch.setattr(mod, "time", _Once())
    b = ReplayBackend(default=Result(("",), 1, "", "error: simulated Grid Engine refusal"))
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=EMPTY_QSTAT)
    b.add("qstat", ["-u", "*", "-xml"], stdout=EMPTY_QSTAT)
    backends.use(b)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    yield
    backends.use(None)


@pytest.mark.parametrize("cmd", sorted(WORDS))
def test_no_traceback_ever_reaches_a_user(cmd, capsys):
    dispatch(cmd, ["--version"] if cmd != "scontrol" else ["version"])  # imports, outside the bounds
    capsys.readouterr()

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(argv=argv_for(cmd))
    def check(argv):
        if cmd in ("srun", "salloc") and not any(a.startswith("-") for a in argv[:1]):
            argv = ["--test-only", *argv] if cmd == "srun" else argv
        code = _dispatch(cmd, list(argv))
        out, err = capsys.readouterr()
        within(COMMAND_CPU, COMMAND_MEM, lambda: _dispatch(cmd, list(argv)), argv)  # warm: imports done
        capsys.readouterr()
        assert isinstance(code, int)
        assert "Traceback" not in err and "internal error" not in err, (argv, err)
        # every message opens like Slurm's (a user's own text may follow, newlines included)
        # ("Unknown job signal: X" is scancel's own, without its name: src/scancel/opt.c, 22.05;
        # "scontrol_print_job error: ..." is scontrol show job's slurm_perror, info_job.c)
        assert err == "" or err.startswith((f"{cmd}:", "Invalid ", "invalid ", "slurm_", "Usage", "usage",
                                            "Partition ", "Unknown job signal: ", "scontrol_print_job error: ")), \
            (argv, err)

    check()


def _parsers():
    from shim.slurm import hostlist
    from shim.gridengine import names
    from shim.slurm.options import values as v
    from shim.slurm.options.table import OPTIONS

    out = {f"--{o.long}": o.parse for o in OPTIONS if o.parse is not None}
    out.update({
        "hostlist.expand": lambda t, p: hostlist.expand(t),
        "hostlist.count": lambda t, p: hostlist.count(t),
        "hostlist.compress": lambda t, p: hostlist.compress(t.split(",")),
        "hostlist.compress-unsorted": lambda t, p: hostlist.compress(t.split(","), sort=False),
        "names.decode": lambda t, p: names.decode(t),
        "names.encode": lambda t, p: names.encode(t),
        "parse_time": lambda t, p: v.parse_time(t),
        "dependency(max_array_size=100000)": lambda t, p: v.dependency(t, p, max_array_size=100000),
        "array_spec(max_size=100000)": lambda t, p: v.array_spec(t, p, 100000),
    })
    return out


PARSERS = _parsers()


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_value_parsers_are_bounded_in_time_and_memory(name):
    """Each value grammar, on long repetitive text: a result or Slurm's error (ShimError, a
    hostlist's ValueError, a time spec's error) within PARSER_CPU seconds and PARSER_MEM bytes."""
    from shim.errors import ShimError
    from shim.slurm.options.values import TimeSpecError

    parse = PARSERS[name]

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=st.one_of(LONG, LONG, LONG, st.text(max_size=64)))
    def check(text):
        def attempt():
            try:
                parse(text, "sbatch")
            except (ShimError, TimeSpecError):
                pass
            except ValueError as e:
                from shim.slurm.hostlist import HostlistError

                assert isinstance(e, HostlistError), (name, text[:80], e)

        within(PARSER_CPU, PARSER_MEM, attempt, (name, text[:80], len(text)))

    check()
