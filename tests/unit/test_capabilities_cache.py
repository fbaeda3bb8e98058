"""The capability probe's ``-help`` text is kept per user across commands (issue 19: a multi-node
sbatch paid ~8 ms for ``qsub -help`` each time): keyed by the binary's path, size and mtime,
believed only from the caller's own private file in the caller's own private directory. The help
texts are SGE 8.1.9's (fixtures/gridengine/sge-8.1.9/qsub-help.txt)."""

from __future__ import annotations

import os

import pytest

from conftest import FIXTURES
from shim.gridengine.capabilities import Capabilities, HelpCache
from shim.gridengine.replay import ReplayBackend

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
HELP = (SGE / "qsub-help.txt").read_text()


class Installed(ReplayBackend):
    """Recorded answers, run as binaries of a bin_dir (as GridEngineBackend names them)."""

    caches_help = True

    def __init__(self, bin_dir, **kw):
        super().__init__(**kw)
        self.bin_dir = bin_dir

    def argv(self, tool, args):
        return [os.path.join(self.bin_dir, tool), *args]


@pytest.fixture
def cell(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "qsub").write_text("#!/bin/sh\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return bin_dir


def probe(bin_dir, text=HELP, rc=0):
    b = Installed(str(bin_dir))
    b.add("qsub", ["-help"], stdout=text, rc=rc)
    caps = Capabilities(b, None, HelpCache())
    return caps.par, caps.binding, len(b.calls)


def test_the_second_command_needs_no_probe(cell, tmp_path):
    assert probe(cell) == (False, True, 1)
    assert probe(cell) == (False, True, 0)  # a new process: the kept text
    base = tmp_path / "cache" / "slurm-shim"
    (kept,) = base.iterdir()
    assert kept.read_text() == HELP and kept.stat().st_mode & 0o777 == 0o600
    assert base.stat().st_mode & 0o777 == 0o700
    assert str(cell / "qsub").replace("/", "%") in kept.name


def test_a_changed_binary_is_probed_again(cell):
    probe(cell)
    st = os.stat(cell / "qsub")
    os.utime(cell / "qsub", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert probe(cell, HELP.replace("[-binding", "[-par <n>]\n   [-binding"))[2] == 1
    assert probe(cell)[:1] == (True,)  # the new binary's text is the one kept


def test_a_file_someone_else_can_write_is_not_believed(cell, tmp_path):
    probe(cell)
    base = tmp_path / "cache" / "slurm-shim"
    (kept,) = base.iterdir()
    lying = HELP.replace("[-binding", "[-par <n>]\n   [-binding")
    kept.write_text(lying)
    os.chown(kept, 65534, 65534)  # another user's file at that name (the tests run as root)
    assert probe(cell) == (False, True, 1)
    kept.unlink()
    other = tmp_path / "other.txt"
    other.write_text(lying)
    kept.symlink_to(other)  # a link
    assert probe(cell) == (False, True, 1)
    kept.unlink()
    kept.write_text(lying)
    base.chmod(0o777)  # a directory others may write
    assert probe(cell) == (False, True, 1)
    base.chmod(0o700)
    os.chown(base, 65534, 65534)  # a directory of another user's
    assert probe(cell) == (False, True, 1)


def test_a_failed_or_empty_probe_is_not_kept(cell, tmp_path):
    assert probe(cell, "error: something\n", rc=2)[2] == 1
    assert probe(cell, "", rc=0)[2] == 1
    assert not (tmp_path / "cache" / "slurm-shim").exists() or not list((tmp_path / "cache" / "slurm-shim").iterdir())
    assert probe(cell)[2] == 1 and probe(cell)[2] == 0


def test_only_the_real_transport_keeps_help_texts(cell, tmp_path):
    b = ReplayBackend()
    b.add("qsub", ["-help"], stdout=HELP)
    assert b.capabilities.binding is True and len(b.calls) == 1
    assert not (tmp_path / "cache").exists()
    from shim.gridengine.process import GridEngineBackend

    assert GridEngineBackend.caches_help is True
