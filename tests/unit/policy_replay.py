"""What the policy commands' unit tests (sprio, sshare, sacctmgr) share: the site config in
tmp_path and a replay backend of recorded Grid Engine answers, and a command run in-process."""

from __future__ import annotations

from contextlib import contextmanager

from shim.gridengine import backends
from shim.__main__ import dispatch
from shim.gridengine.replay import ReplayBackend


@contextmanager
def replaying(monkeypatch, tmp_path, answers):
    """``answers``: (ops call, recorded stdout) pairs; yields the ReplayBackend in use."""
    from conftest import use_site_config

    use_site_config(monkeypatch, tmp_path)
    b = ReplayBackend()
    for call, stdout in answers:
        b.add(*call, stdout)
    backends.use(b)
    try:
        yield b
    finally:
        backends.use(None)


def run_command(capsys, prog: str, *argv: str) -> tuple[int, str, str]:
    rc = dispatch(prog, list(argv))
    out, err = capsys.readouterr()
    return rc, out, err
