"""Interactive use through a terminal, driven with pexpect: ``srun --pty bash`` (a new job, with
Grid Engine's qrsh -pty), ``salloc`` with no command (the user's shell) and ``srun --pty`` inside an
allocation (a pseudo-terminal made by the shim's launcher on the far side of qrsh -inherit).

As in Slurm's own testsuite, each shell gets a unique prompt (PS1) to wait for, and every expect
has a timeout."""

from __future__ import annotations

import os
import re

import pexpect
import pytest

from conftest import run, shim_env, wait_until

pytestmark = [pytest.mark.interactive, pytest.mark.gridengine]

PROMPT = f"SHIMPTY{os.getpid()}> "
TIMEOUT = 60


def spawn(argv: list[str], cwd, shell: str = "/bin/bash") -> pexpect.spawn:
    env = shim_env({"PS1": PROMPT, "TERM": "dumb", "SHELL": shell, "HOME": str(cwd)})
    child = pexpect.spawn(argv[0], argv[1:], cwd=str(cwd), env=env, timeout=TIMEOUT, encoding="utf-8",
                          dimensions=(30, 120))
    return child


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF, timeout=TIMEOUT)
    child.close()
    return child.exitstatus if child.exitstatus is not None else 128 + (child.signalstatus or 0)


def shell_cmd(child: pexpect.spawn, command: str, marker: str) -> str:
    """Run a command at the prompt; the line of its output that starts with marker (the command
    spells the marker with a quote inside, so the terminal's echo of it never matches)."""
    child.sendline(command)
    child.expect(re.escape(marker) + r"[^\r\n]*\r?\n", timeout=TIMEOUT)
    line = child.after.strip()
    child.expect_exact(PROMPT, timeout=TIMEOUT)
    return line


@pytest.mark.parametrize("pty", ["--pty", "--pty=", "--pty=0", "--pty=1"])
def test_srun_pty_bash(workdir, pty):
    """'--pty=' is '--pty' (newer releases' empty value: the terminal on stdin); '--pty=0' and
    '--pty=1' name that terminal by a descriptor (23.02+; here stdout is the same terminal)."""
    child = spawn(["srun", pty, "bash", "--norc", "--noprofile", "-i"], workdir)
    try:
        child.expect_exact(PROMPT)
        line = shell_cmd(child, 'echo "ANS""WER=$((6*7)) TTY=$(tty) STEP=$SLURM_STEP_ID JOB=$SLURM_JOB_ID"', "ANSWER=")
        m = re.fullmatch(r"ANSWER=42 TTY=(/dev/\S+) STEP=0 JOB=(\d+)", line)
        assert m and m.group(1) != "not", line
        job = int(m.group(2))
        child.sendline("exit 3")
        assert finish(child) == 3
        assert "srun: error:" in (child.before or "") and "Exited with exit code 3" in child.before
        wait_until(lambda: run("qstat", "-j", str(job)).returncode != 0, 30, "the job to end")
    finally:
        if child.isalive():
            child.terminate(force=True)


def test_salloc_runs_the_users_shell(workdir):
    child = spawn(["salloc", "-n2"], workdir, shell="/bin/sh")
    try:
        child.expect(r"salloc: Granted job allocation (\d+)")
        job = int(child.match.group(1))
        child.expect_exact(PROMPT)
        assert shell_cmd(child, 'echo "I""D=$SLURM_JOB_ID N=$SLURM_NTASKS"', "ID=") == f"ID={job} N=2"
        line = shell_cmd(child, "srun -l hostname | sort | tr '\\n' ' '; echo", "0: ")
        assert line.startswith("0: ") and "1: " in line
        child.sendline("exit 4")
        child.expect(rf"salloc: Relinquishing job allocation {job}")
        assert finish(child) == 4
        wait_until(lambda: run("qstat", "-j", str(job)).returncode != 0, 30, "the allocation to end")
    finally:
        if child.isalive():
            child.terminate(force=True)


def test_srun_pty_inside_an_allocation(workdir):
    """salloc runs outside the job: srun reaches it with qrsh -inherit, which gives no terminal;
    the launcher makes one for task 0 and relays it, srun puts the local terminal in raw mode."""
    child = spawn(["salloc", "-n1", "srun", "--pty", "bash", "--norc", "--noprofile", "-i"], workdir)
    try:
        child.expect(r"salloc: Granted job allocation (\d+)")
        child.expect_exact(PROMPT)
        line = shell_cmd(child, 'echo "T""TY=$(tty) COLS=$(tput cols 2>/dev/null || stty size) STEP=$SLURM_STEP_ID"',
                         "TTY=")
        assert re.match(r"TTY=/dev/pts/\d+ COLS=\S+", line) and line.endswith("STEP=0"), line
        child.sendline("exit 5")
        child.expect(r"salloc: Relinquishing job allocation \d+")
        assert finish(child) == 5
    finally:
        if child.isalive():
            child.terminate(force=True)
