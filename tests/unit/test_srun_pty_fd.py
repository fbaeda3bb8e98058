"""``srun --pty=<fd>`` (brief S5-X item 4). Slurm 23.02 (src/srun/srun.c _setup_one_job_env,
src/srun/srun_pty.c set_winsize): the value is ``atoi``'d into a descriptor whose window size
(``ioctl(TIOCGWINSZ)``) and raw mode the step's pseudo-terminal follows; when that ioctl fails,
srun says ``error: ioctl(TIOCGWINSZ): %m`` and ``error: Not using a pseudo-terminal, disregarding
--pty=<value> option`` and runs without one (still unbuffered: --pty implied -u). Grid Engine's
qrsh, and the shim's step launcher, take the terminal on standard input: another terminal than
that one cannot be honoured, which a warning says (the option table row's note)."""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest

from shim.gridengine import backends
from shim.gridengine.replay import ReplayBackend
from shim.errors import ShimError
from shim.slurm.options import sources
from shim.cli import srun
from test_srun_cli import qrsh_that_never_starts, site, steps_result  # noqa: F401  (the site fixture)


def request(argv):
    o = sources.collect(srun.table(), [*argv, "bash"], environ={})
    return srun.request(o, ["bash"], {})


@contextmanager
def terminal_on_stdin():
    """A pseudo-terminal's slave as this process's fd 0 for the block."""
    master, slave = os.openpty()
    saved = os.dup(0)
    os.dup2(slave, 0)
    try:
        yield slave
    finally:
        os.dup2(saved, 0)
        for fd in (saved, master, slave):
            os.close(fd)


def test_a_descriptor_that_is_no_terminal_disregards_pty(capsys):
    r, w = os.pipe()
    try:
        req = request([f"--pty={r}"])
    finally:
        os.close(r)
        os.close(w)
    assert (req.pty, req.unbuffered) == (False, True)
    assert capsys.readouterr().err == ("srun: error: ioctl(TIOCGWINSZ): Inappropriate ioctl for device\n"
                                       f"srun: error: Not using a pseudo-terminal, disregarding --pty={r} option\n")


def test_a_closed_descriptor_says_why(capsys):
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)  # a number no file has now
    req = request([f"--pty={fd}x"])  # atoi: the digits count, the value is echoed whole
    assert req.pty is False
    assert capsys.readouterr().err == ("srun: error: ioctl(TIOCGWINSZ): Bad file descriptor\n"
                                       f"srun: error: Not using a pseudo-terminal, disregarding --pty={fd}x option\n")


def test_stdins_terminal_by_any_descriptor_is_the_terminal(capsys):
    with terminal_on_stdin() as slave:
        assert request(["--pty=0"]).pty is True
        assert request([f"--pty={slave}"]).pty is True  # the same terminal under another number
    assert capsys.readouterr().err == ""


def test_another_terminal_is_warned_about_and_stdins_is_used(capsys):
    master, slave = os.openpty()
    try:
        with terminal_on_stdin():
            req = request([f"--pty={slave}"])
    finally:
        os.close(master)
        os.close(slave)
    assert req.pty is True
    assert capsys.readouterr().err == (f"srun: warning: --pty={slave}: Grid Engine gives task 0 the terminal on "
                                       f"standard input; descriptor {slave} is another terminal and is not used\n")


def test_a_new_job_with_pty_0_on_a_terminal_is_qrsh_pty(monkeypatch):
    backends.use(ReplayBackend(default=steps_result()))
    seen = qrsh_that_never_starts(monkeypatch)
    with terminal_on_stdin(), pytest.raises(ShimError, match="Requested nodes are busy"):
        srun.main(["--pty=0", "-I", "bash"])
    argv = seen["argv"]
    assert argv[argv.index("-pty") + 1] == "y"
    r, w = os.pipe()
    try:
        with pytest.raises(ShimError, match="Requested nodes are busy"):
            srun.main([f"--pty={r}", "-I", "bash"])
    finally:
        os.close(r)
        os.close(w)
    argv = seen["argv"]
    assert argv[argv.index("-pty") + 1] == "n"  # disregarded: no terminal for task 0
