"""A qmaster that does not answer (security review F-17): every q* call the backend makes gives up
after ``gridengine.timeout`` (5 s by default), in the running command's Slurm words, and a command
never waits twice; the site config cache follows a new shim's defaults and trusts only the user's
own files."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from shim.gridengine import backends, calls
from shim import config, proc, siteconf
from shim.gridengine.process import GridEngineBackend
from shim.gridengine.diagnose import QPING_TIMEOUT
from shim.errors import BackendUnavailable, ShimError

TIMED_OUT = "Socket timed out on send/recv operation"


@pytest.fixture
def fake_ge(tmp_path, monkeypatch):
    """A backend whose qstat, qsub and qhost hang and whose qacct answers at once."""
    for tool in ("qstat", "qsub", "qhost", "qconf"):
        (tmp_path / tool).write_text("#!/bin/sh\nexec sleep 30\n")
        (tmp_path / tool).chmod(0o755)
    (tmp_path / "qacct").write_text("#!/bin/sh\necho accounting\n")
    (tmp_path / "qacct").chmod(0o755)
    b = GridEngineBackend(config.SiteConfig())
    b.bin_dir, b.timeout = str(tmp_path), 0.3
    monkeypatch.setattr(calls, "command", "")
    return b


@pytest.fixture
def spawned(monkeypatch):
    """Each Grid Engine program the backend starts, as (name, the timeout it was given): what a
    call waits for is the timeout it starts its program with (no clock needed)."""
    calls: list[tuple[str, float | None]] = []
    real = proc.run

    def spy(argv, **kw):
        calls.append((os.path.basename(argv[0]), kw.get("timeout")))
        return real(argv, **kw)

    monkeypatch.setattr(proc, "run", spy)
    return calls


def test_the_default_timeout_is_slurms_message_timeout():
    assert config.GridEngine().timeout == 10.0  # (MessageTimeout's default: 10 sec in every release's scontrol show config)
    assert config.parse('[gridengine]\ntimeout = 12\n', "x").gridengine.timeout == 12.0


@pytest.mark.parametrize("cmd, line", [
    ("squeue", f"slurm_load_jobs error: {TIMED_OUT}"),
    ("scontrol", f"slurm_load_jobs error: {TIMED_OUT}"),
    ("scancel", f"slurm_load_jobs error: {TIMED_OUT}"),
    ("sinfo", f"slurm_load_partitions: {TIMED_OUT}"),
    ("sbatch", f"sbatch: error: Batch job submission failed: {TIMED_OUT}"),
    ("srun", f"srun: error: Unable to allocate resources: {TIMED_OUT}"),
    ("salloc", f"salloc: error: Unable to allocate resources: {TIMED_OUT}"),
])
def test_a_hung_call_is_slurms_socket_timeout_in_the_commands_words(fake_ge, spawned, monkeypatch, cmd, line):
    monkeypatch.setattr(calls, "command", cmd)
    with pytest.raises(BackendUnavailable) as e:
        fake_ge.run("qstat", ["-u", "*"])
    assert spawned[0] == ("qstat", 0.3)  # given up after the site's timeout; then only the diagnosis's bounded probes
    assert {name for name, _ in spawned[1:]} <= {"qping", "qstat"} and all(t == QPING_TIMEOUT for _, t in spawned[1:])
    assert e.value.lines == [line]
    assert e.value.code == 1
    assert isinstance(e.value.__cause__, proc.Timeout)


def test_after_one_silent_call_the_next_fails_at_once(fake_ge, spawned):
    with pytest.raises(BackendUnavailable):
        fake_ge.run("qstat", [])
    with pytest.raises(BackendUnavailable, match=TIMED_OUT):
        fake_ge.run("qsub", ["-b", "y", "true"])
    assert "qsub" not in [name for name, _ in spawned]  # not another wait: qsub never started
    assert fake_ge.run("qacct", ["-j", "1"]).stdout == "accounting\n"  # the accounting file needs no qmaster
    assert GridEngineBackend(config.SiteConfig()).silent is None  # per backend, not for the process


def test_a_missing_command_is_unable_to_contact(fake_ge, monkeypatch):
    monkeypatch.setattr(calls, "command", "sbatch")
    fake_ge.bin_dir = str(Path(fake_ge.bin_dir) / "nowhere")
    with pytest.raises(BackendUnavailable) as e:
        fake_ge.run("qsub", [])
    assert e.value.lines == [f"sbatch: error: Batch job submission failed: Unable to contact slurm controller "
                             f"({fake_ge.bin_dir}/qsub: command not found)"]
    assert fake_ge.silent is None


def test_within_shares_one_wait_between_calls(fake_ge, spawned):
    fake_ge.timeout = 10
    with backends.within(time.monotonic() + 1.0):
        assert 0.8 < backends.call_timeout(10) <= 1.0
        with pytest.raises(BackendUnavailable):
            fake_ge.run("qstat", [])
    assert spawned[0][0] == "qstat" and spawned[0][1] <= 1.0  # not the backend's 10 s
    assert backends.call_timeout(10) == 10  # the limit ends with the block
    with backends.within(time.monotonic() - 5):
        assert backends.call_timeout(10) == 0.5  # each call still gets a moment


def test_dispatch_reports_a_timeout_raised_anywhere_in_slurms_words(monkeypatch, capsys):
    from shim import __main__ as entry

    class Boom:
        @staticmethod
        def main(argv):
            try:
                raise proc.Timeout("qstat: no answer within 5 s")
            except proc.Timeout as e:  # as gridengine/qstat.py wraps its streamed qstat's timeout
                raise BackendUnavailable("slurm_load_jobs error: Unable to contact slurm controller (x)") from e

    class Raw:
        @staticmethod
        def main(argv):
            raise proc.Timeout("qhost: no answer within 5 s")

    monkeypatch.setattr(entry.importlib, "import_module", lambda name: Boom)
    assert entry.dispatch("squeue", []) == 1
    assert capsys.readouterr().err == f"slurm_load_jobs error: {TIMED_OUT}\n"
    monkeypatch.setattr(entry.importlib, "import_module", lambda name: Raw)
    assert entry.dispatch("sinfo", []) == 1
    assert capsys.readouterr().err == f"slurm_load_partitions: {TIMED_OUT}\n"

    class Plain:
        @staticmethod
        def main(argv):
            raise ShimError("squeue: error: Invalid user: x")

    monkeypatch.setattr(entry.importlib, "import_module", lambda name: Plain)
    assert entry.dispatch("squeue", []) == 1
    assert capsys.readouterr().err == "squeue: error: Invalid user: x\n"  # other errors untouched


# ---------------------------------------------------------------------------------------------
# the per-user cache of the validated site config


@pytest.fixture
def cached(tmp_path, monkeypatch):
    conf = tmp_path / "config.toml"
    conf.write_text('[gridengine]\ntimeout = 7\n')
    monkeypatch.setenv("SLURM_SHIM_CONFIG", str(conf))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    siteconf.reset()
    yield conf
    siteconf.reset()


def _cache_files(conf: Path) -> list[Path]:
    return sorted((Path(os.environ["XDG_CACHE_HOME"]) / "slurm-shim").glob("config-*.json"))


def test_the_cache_is_written_atomically_and_read_back(cached):
    assert siteconf.get().gridengine.timeout == 7
    [f] = _cache_files(cached)
    assert [p.name for p in f.parent.iterdir()] == [f.name]  # no temporary left behind
    f.write_text('{"gridengine": {"timeout": 9}}')  # (the user's own file: believed)
    siteconf.reset()
    assert siteconf.get().gridengine.timeout == 9


def test_a_cache_that_is_a_link_or_someone_elses_is_ignored(cached, tmp_path):
    siteconf.get()
    [f] = _cache_files(cached)
    planted = tmp_path / "planted.json"
    planted.write_text('{"cluster": {"state_dir": "/tmp/mallory"}, "gridengine": {"timeout": 1}}')
    f.unlink()
    f.symlink_to(planted)
    siteconf.reset()
    assert siteconf.get().gridengine.timeout == 7  # the link was not followed
    f.unlink()
    f.write_text(planted.read_text())
    os.chown(f, 12345, 12345)
    siteconf.reset()
    assert siteconf.get().gridengine.timeout == 7  # not this user's file
    f.unlink()
    f.write_text("[1, 2]")
    os.chown(f, os.getuid(), os.getgid())
    siteconf.reset()
    assert siteconf.get().gridengine.timeout == 7  # not a config


def test_a_new_schema_invalidates_the_cache(cached, monkeypatch, tmp_path):
    siteconf.get()
    before = _cache_files(cached)
    fake = tmp_path / "shim"
    fake.mkdir()
    (fake / "config.py").write_text("# a newer schema\n")
    monkeypatch.setattr(siteconf, "__file__", str(fake / "siteconf.py"))
    siteconf.reset()
    siteconf.get()
    assert len(_cache_files(cached)) == len(before) + 1
