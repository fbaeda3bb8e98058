"""slurmstepd's lines in a job's output and in srun's stderr, as the site's Slurm release words
them (slurm/releases.py): 22.05 and 24.11 ``slurmstepd-<node>: error: <message>``; 26.05
(STEPD_STAMP) ``[<time>.<ms>] error: <message>``. The cancellation line
``*** JOB 7 ON vm CANCELLED AT <time> ***`` (``STEP 7.0`` for a step) says ``DUE TO TIME LIMIT``
at the time limit in every release, and in 26.05 (CANCEL_SIGNAL_NAMED) ``DUE to SIGNAL
Terminated`` where a signal ended it. Measured on real Slurm 24.11.5 and 26.05.5
(fixtures/slurm-*/oracle-messages.txt) and in the 22.05 capture (fixtures/slurm-22.05).

A site config that cannot be read gives the default release's words, never an error in the job.
"""

from __future__ import annotations

import errno
import os
import signal
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..slurm.releases import Release

def release() -> Release:
    """The site's release (releases.current); the default's where the config cannot be read."""
    from ..slurm import releases  # (the runtime's module level stays light: test_runtime_boot)

    try:
        return releases.current()
    except Exception:  # (a job must not fail over its config: the default release's words)
        return releases.get(releases.DEFAULT)


def stamp(now: float) -> str:
    """The time as Slurm's lines print it: 2026-12-07T03:04:12 (local time)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now))


def error(host: str, message: str, rel: Release | None = None, now: float | None = None) -> str:
    """One of slurmstepd's error lines, with its newline."""
    from ..slurm import releases

    rel = rel or release()
    if rel.has(releases.STEPD_STAMP):
        now = time.time() if now is None else now
        return f"[{stamp(now)}.{int(now * 1000) % 1000:03d}] error: {message}\n"
    return f"slurmstepd-{host}: error: {message}\n"


def cancelled(what: str, host: str, *, why: str | None = None, sig: int | None = None,
              rel: Release | None = None, now: float | None = None) -> str:
    """slurmstepd's ``*** <what> ON <host> CANCELLED AT <time>[ DUE ...] ***`` line: ``what`` is
    ``JOB 7`` or ``STEP 7.0``; ``why`` a reason every release names (``TIME LIMIT``); ``sig``
    the signal that ended it, named where the release does (``DUE to SIGNAL Terminated``)."""
    from ..slurm import releases

    rel = rel or release()
    now = time.time() if now is None else now
    due = ""
    if why:
        due = f" DUE TO {why}"
    elif sig and rel.has(releases.CANCEL_SIGNAL_NAMED):
        due = f" DUE to SIGNAL {signal_text(sig)}"
    return error(host, f"*** {what} ON {host} CANCELLED AT {stamp(now)}{due} ***", rel, now)


def failed(what: str, host: str, rel: Release | None = None, now: float | None = None) -> str:
    """slurmstepd's ``*** <what> ON <host> FAILED (non-zero exit code or other failure mode) ***``:
    a step (``STEP 7.0``) still running when its job failed (its batch script ended by a signal or
    a non-zero exit), the same words in every release (fixtures/slurm-*/scancel-signal-joboutput.txt,
    job 342: 26.05 too names no signal)."""
    return error(host, f"*** {what} ON {host} FAILED (non-zero exit code or other failure mode) ***", rel, now)


def step_ended_with_job(what: str, host: str, job_state: str, rel: Release | None = None,
                        now: float | None = None) -> str:
    """The line of a step (``STEP 7.0``) that its job's end ends: FAILED where the job failed,
    ``DUE TO TIME LIMIT`` at the job's time limit (K), ``DUE TO JOB REQUEUE`` (L), else CANCELLED AT (26.05: ``DUE to SIGNAL
    Terminated``, as a step whose batch script ended while it ran: fixtures/slurm-*/
    oracle-step-ends.txt, J)."""
    if job_state == "FAILED":
        return failed(what, host, rel, now)
    if job_state == "TIMEOUT":  # (the job's time limit: every release, K)
        return cancelled(what, host, why="TIME LIMIT", rel=rel, now=now)
    if job_state == "REQUEUE":  # (scontrol requeue of the running job: every release, L)
        return cancelled(what, host, why="JOB REQUEUE", rel=rel, now=now)
    return cancelled(what, host, sig=signal.SIGTERM, rel=rel, now=now)


def signal_text(sig: int) -> str:
    """A signal's description as strsignal gives it (SIGTERM: Terminated, SIGKILL: Killed)."""
    try:
        return signal.strsignal(sig) or f"Unknown signal {sig}"
    except ValueError:
        return f"Unknown signal {sig}"


def bad_interpreter(path: str, cwd: str = "") -> str | None:
    """What follows ``#!`` on the first line of the script at ``path`` when its interpreter does
    not exist: execve's ENOENT for a file that is there, which slurmstepd words ``execve(): bad
    interpreter(<that text>): No such file or directory`` and ends the task with exit code 2
    (ENOENT): FAILED 2:0, as real 22.05.8, 24.11.5 and 26.05.5 answer a batch script starting
    ``#!/nonexistent/interp`` (fixtures/slurm-*/oracle-messages.txt, section E). As Slurm, the
    file's first 255 bytes are read and the line is printed as written (its argument too). None
    for a file without ``#!``, one whose interpreter exists, or one that cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(255)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0]
    words = line.split(None, 1)  # (the kernel's: the interpreter, then at most one argument)
    if not words:
        return None  # no interpreter at all: ENOEXEC, not this line
    interp = os.fsdecode(words[0])
    if os.path.exists(interp if os.path.isabs(interp) else os.path.join(cwd or os.getcwd(), interp)):
        return None
    return line.decode("utf-8", "replace")


def bad_interpreter_line(host: str, text: str, rel: Release | None = None) -> str:
    """slurmstepd's line for a script whose interpreter is missing (``bad_interpreter``)."""
    return error(host, f"execve(): bad interpreter({text}): {os.strerror(errno.ENOENT)}", rel)


def launch_errors_first(rel: Release | None = None) -> bool:
    """Whether a task's launch failure line comes before srun's own line about that task (26.05),
    rather than after it (22.05, 24.11)."""
    from ..slurm import releases

    return (rel or release()).has(releases.STEPD_STAMP)
