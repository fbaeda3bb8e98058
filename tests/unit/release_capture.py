"""Replays one case of a release's capture (fixtures/slurm-<release>/cases.json) through the shim's
command, in-process, on the unit-test site config with ``[slurm] release`` set to that release.

Grid Engine is a ``ReplayBackend`` with no recordings (a command that asks it anything fails with
an internal error, so a case replayed here is one the shim answers from its own tables), except
``submit``: it returns the job id the release gave the same submission (the one named
normalisation, job ids: the controller numbers jobs), and ``exec_hosts``: the capture's one node
``vm``. The case runs in a directory holding the capture's ``job.sh`` (a shell script) and
``noshebang.sh`` (one without ``#!``) and
``withdirectives.sh`` (one whose ``#SBATCH`` line has an option no release has), with the case's stdin (none: empty)."""

from __future__ import annotations

import io
import json
import re
import shlex
import sys

from conftest import FIXTURES, use_site_config
from shim import siteconf
from shim.__main__ import dispatch
from shim.gridengine import backends
from shim.gridengine.replay import ReplayBackend

RELEASES = ("22.05", "24.11", "26.05")
_ID = re.compile(r"\d+")


def cases(release: str) -> dict:
    return json.loads((FIXTURES / f"slurm-{release}" / "cases.json").read_text())


def env_files(release: str) -> list[str]:
    """The release's captured job environments (env-*.txt; the submission arguments file is not one)."""
    return sorted(p.name for p in (FIXTURES / f"slurm-{release}").glob("env-*.txt"))


class CaptureGridEngine(ReplayBackend):
    """No recordings; a submission gets the id the release gave it."""

    def __init__(self, job_id: int):
        super().__init__()
        self.job_id = job_id

    def submit(self, args, script, *, agent=False, seen=None) -> int:
        return self.job_id

    def exec_hosts(self):
        return {"vm"}


def replay(release: str, name: str, tmp_path, monkeypatch, capsys) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the shim for this case of this release."""
    case = cases(release)[name]
    use_site_config(monkeypatch, tmp_path)
    conf = tmp_path / "config.toml"
    conf.write_text(conf.read_text() + f'\n[slurm]\nrelease = "{release}"\n')
    siteconf.reset()
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "job.sh").write_text("#!/bin/bash\nsleep 1\n")
    (wd / "noshebang.sh").write_text("sleep 1\n")
    (wd / "withdirectives.sh").write_text("#!/bin/bash\n#SBATCH --bogus-directive\nsleep 1\n")
    monkeypatch.chdir(wd)
    stdin = case.get("stdin") or ""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    found = _ID.search(case["stdout"])
    backends.use(CaptureGridEngine(int(found.group(0)) if found else 1))
    argv = shlex.split(case["cmd"])
    try:
        rc = dispatch(argv[0], argv[1:])
    finally:
        siteconf.reset()
        backends.use(None)
    out, err = capsys.readouterr()
    return rc, out, err
