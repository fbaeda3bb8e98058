"""-v's lines of sbatch, srun and salloc as each release prints them: the defined options between two
separator lines, then what the release prints next (22.05's sbatch: its select plugins' lines;
fixtures/slurm-22.05/oracle-sbatch-verbose.json). The shim's own line, the qsub command a
submission runs, comes from -vv on: at -v the bytes are the release's (test_release_capture.py
replays each release's ``sbatch -v job.sh``)."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, use_site_config, with_release
from release_capture import RELEASES, CaptureGridEngine, cases
from shim import siteconf
from shim.__main__ import dispatch
from shim.cli import common
from shim.gridengine import backends
from shim.slurm.options.sources import Options, apply
from shim.slurm.options.table import command_table


@pytest.fixture
def release(monkeypatch, tmp_path):
    """set(name): the unit-test site config with ``[slurm] release = name``; the working
    directory holds ``job.sh``."""
    use_site_config(monkeypatch, tmp_path)
    conf = tmp_path / "config.toml"
    base = conf.read_text()
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "job.sh").write_text("#!/bin/bash\nsleep 1\n")
    monkeypatch.chdir(wd)

    def set_release(name: str) -> None:
        conf.write_text(with_release(base, name))
        siteconf.reset()

    yield set_release
    siteconf.reset()
    backends.use(None)


@pytest.mark.parametrize("name", RELEASES)
def test_sbatch_vv_adds_the_qsub_line_after_the_releases_lines(release, capsys, name):
    release(name)
    backends.use(CaptureGridEngine(5))
    assert dispatch("sbatch", ["-vv", "job.sh"]) == 0
    out, err = capsys.readouterr()
    want = cases(name)["sbatch_verbose"]["stderr"].replace("verbose             : 1", "verbose             : 2")
    assert out == "Submitted batch job 5\n"
    assert err.startswith(want)
    tail = err[len(want):]
    assert tail.startswith("sbatch: qsub -terse -q debug -N job.sh ") and tail.count("\n") == 1


@pytest.mark.parametrize("name", RELEASES)
@pytest.mark.parametrize("prog", ["srun", "salloc", "sbatch"])
def test_the_defined_options_are_between_two_separator_lines(release, capsys, name, prog):
    """srun's as each release printed it (srun_verbose's first lines; salloc and sbatch list theirs
    the same way); only 22.05's sbatch prints more before its submission."""
    release(name)
    t = command_table(prog)
    o = Options()
    apply(o, t, [(next(s for s in t.specs if s.long == "verbose"), None)], "cli")
    common.print_defined_options(o, t, prog, ("cli",))
    srun_lines = "".join(cases(name)["srun_verbose"]["stderr"].splitlines(keepends=True)[:5])
    more = json.loads((FIXTURES / "slurm-22.05" / "oracle-sbatch-verbose.json").read_text())["cases"]["sbatch_v"]
    extra = "".join(more["stderr"].splitlines(keepends=True)[5:]) if (prog, name) == ("sbatch", "22.05") else ""
    assert capsys.readouterr() == ("", srun_lines.replace("srun: ", f"{prog}: ") + extra)
