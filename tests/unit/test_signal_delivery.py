"""Delivery of scancel -s's requests inside the job, on real processes (no Grid Engine): the job
wrapper's Runner.poll_signals and the far-side step launcher's _StepSignals, as slurmstepd's
_handle_signal_container does it (src/slurmd/slurmstepd/req.c, Slurm 22.05): --batch is
kill(pgid) (the batch shell alone), --full killpg(pgid) (the shell and its children), neither is
for the steps' containers, never the batch shell (slurmd's _kill_all_active_steps with
KILL_STEPS_ONLY)."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from conftest import use_site_config, wait_until
from shim import proc
from shim.store import state
from shim.runtime import jobwrap
from shim.runtime.steps import launch


@pytest.fixture()
def sdir(monkeypatch, tmp_path):
    return str(use_site_config(monkeypatch, tmp_path))


SCRIPT = """
trap 'echo shell >> "$0"' USR1
(trap 'echo child >> "$0"; exit 0' USR1; echo ready > "$0.ready"; while :; do sleep 0.05; done) &
while :; do sleep 0.05; done
"""


def wait_for(cond, timeout: float = 10.0, what: str = ""):
    return wait_until(cond, timeout, what, delay=0.02, cap=0.1)


@pytest.fixture()
def batch(tmp_path):
    """A batch shell that traps USR1, with a child (in its process group) that traps it too."""
    out = tmp_path / "trace"
    out.write_text("")
    child = proc.popen(["/bin/sh", "-c", SCRIPT, str(out)], start_new_session=True)
    ready = tmp_path / "trace.ready"
    wait_for(lambda: ready.exists() and ready.read_text() == "ready\n", what="the child's trap")
    yield child, out
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()


def runner_for(child, err_fd=None) -> jobwrap.Runner:
    r = jobwrap.Runner({})
    r.child = child
    r.err_fd = err_fd
    return r


def poll_until(r, sdir, cond, what):
    def step():
        r.next_signal_look = 0.0
        r.poll_signals(sdir, "7", None, "vm", "7")
        return cond()
    return wait_for(step, what=what)


def test_batch_reaches_the_shell_alone(sdir, batch):
    child, out = batch
    r = runner_for(child)
    assert state.send_signal(sdir, "7", {"sig": signal.SIGUSR1, "batch": True, "full": False, "owner": os.getuid()})
    poll_until(r, sdir, lambda: "shell" in out.read_text(), "the shell's trap")
    time.sleep(0.3)  # what the child would have written by now
    assert out.read_text().split() == ["shell"]


def test_full_reaches_the_shell_and_its_children(sdir, batch):
    child, out = batch
    r = runner_for(child)
    assert state.send_signal(sdir, "7", {"sig": signal.SIGUSR1, "batch": False, "full": True})
    poll_until(r, sdir, lambda: sorted(out.read_text().split()) == ["child", "shell"], "both traps")


def test_a_request_for_the_steps_leaves_the_batch_shell_alone(sdir, batch):
    child, out = batch
    r = runner_for(child)
    assert state.send_signal(sdir, "7", {"sig": signal.SIGUSR1, "batch": False, "full": False})
    assert state.send_signal(sdir, "8", {"sig": signal.SIGUSR1, "batch": True, "full": False})  # another job's
    for _ in range(3):
        r.next_signal_look = 0.0
        r.poll_signals(sdir, "7", None, "vm", "7")
    assert len(r.signals_seen) == 1  # looked at once, not delivered here
    assert state.send_signal(sdir, "7", {"sig": signal.SIGUSR1, "batch": True, "full": False})
    poll_until(r, sdir, lambda: out.read_text().split() == ["shell"], "the later -b request")
    r.next_signal_look = 0.0
    r.poll_signals(sdir, "7", None, "vm", "7")
    time.sleep(0.2)
    assert out.read_text().split() == ["shell"]  # each request once


def test_term_to_the_batch_step_prints_slurmstepds_line(sdir, batch, tmp_path):
    """_handle_signal_container: SIGTERM/SIGKILL print "*** JOB N ON host CANCELLED AT time ***",
    once per step (msg_sent)."""
    child, out = batch
    err = tmp_path / "err"
    fd = os.open(err, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        r = runner_for(child, fd)
        state.send_signal(sdir, "7", {"sig": signal.SIGTERM, "batch": True, "full": False})
        poll_until(r, sdir, lambda: child.poll() is not None, "the shell's end")
        state.send_signal(sdir, "7", {"sig": signal.SIGTERM, "batch": True, "full": False})
        r.next_signal_look = 0.0
        r.poll_signals(sdir, "7", None, "vm", "7")
    finally:
        os.close(fd)
    lines = err.read_text().splitlines()
    assert len(lines) == 1 and re.fullmatch(
        r"slurmstepd-vm: error: \*\*\* JOB 7 ON vm CANCELLED AT \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d \*\*\*", lines[0])
    assert child.returncode == -signal.SIGTERM


def test_the_far_side_launcher_takes_step_requests_and_fulls_forwarded_signals(sdir):
    """On a host srun is not on, the launcher looks itself: a request for the steps, and --full's
    signals srun passes on to its tasks (launch.FORWARDED); -b and requests older than the step
    are not its."""
    state.send_signal(sdir, "7", {"sig": signal.SIGUSR2, "batch": False, "full": False})
    seen = sorted(state.seen_signals(sdir, None, "7"))
    s = launch._StepSignals({"signal_key": "7", "state_dir": sdir, "signals_seen": seen})
    assert s.on and s.take() == []
    for sig, b, f in ((signal.SIGUSR1, False, False), (signal.SIGUSR1, True, False), (signal.SIGINT, False, True),
                      (signal.SIGWINCH, False, True), (signal.SIGHUP, True, True)):
        state.send_signal(sdir, "7", {"sig": sig, "batch": b, "full": f})
    s.next_look = 0.0
    assert s.take() == [signal.SIGUSR1, signal.SIGINT, signal.SIGHUP]
    assert not launch._StepSignals({"state_dir": sdir}).on  # a launcher of an older srun: no key, no look
