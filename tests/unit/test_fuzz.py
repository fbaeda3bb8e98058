"""Fuzzing every command's parser and renderer: whatever the arguments, a user sees Slurm-style
messages and an exit code, never a traceback or an "internal error". Grid Engine is replaced by
recorded answers (an empty queue, recorded accounting), so nothing is submitted."""

from __future__ import annotations

import io
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, use_site_config
from shim import backends
from shim.__main__ import dispatch
from shim.backends.replay import ReplayBackend
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
VALUES = st.sampled_from(["", "0", "1", "-1", "abc", "1-3", "5%2", "x:y", "%.10i %j", "ALL", "NONE", "now",
                          "1:00:00", "UNLIMITED", "gpu:1", "999999", "1_2", "1.0", "a,b,,c", "=", "%", "%%5",
                          "é", "\n", "$(id)", "--", "-", "JobID%-5,State", "*", "[", "debug"])


def argv_for(cmd: str):
    # a real argv cannot hold a NUL byte
    text = st.text(alphabet=st.characters(blacklist_characters="\x00"), max_size=8)
    return st.lists(st.one_of(st.sampled_from(WORDS[cmd]), VALUES, text), max_size=8)


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
    b = ReplayBackend(default=Result(("",), 1, "", "error: simulated Grid Engine refusal"))
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=EMPTY_QSTAT)
    b.add("qstat", ["-u", "*", "-xml"], stdout=EMPTY_QSTAT)
    backends.use(b)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    yield
    backends.use(None)


@pytest.mark.parametrize("cmd", sorted(WORDS))
def test_no_traceback_ever_reaches_a_user(cmd, capsys):
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(argv=argv_for(cmd))
    def check(argv):
        if cmd in ("srun", "salloc") and not any(a.startswith("-") for a in argv[:1]):
            argv = ["--test-only", *argv] if cmd == "srun" else argv
        code = dispatch(cmd, list(argv))
        out, err = capsys.readouterr()
        assert isinstance(code, int)
        assert "Traceback" not in err and "internal error" not in err, (argv, err)
        # every message opens like Slurm's (a user's own text may follow, newlines included)
        assert err == "" or err.startswith((f"{cmd}:", "Invalid ", "invalid ", "slurm_", "Usage", "usage")), \
            (argv, err)

    check()
