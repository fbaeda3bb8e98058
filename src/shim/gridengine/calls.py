"""The process's Grid Engine calls: which Slurm command runs them (``command``, set by
``shim.__main__.dispatch``), how their failure reads in that command's words (``unreachable``),
and the deadline they share (``within``, ``call_timeout``). A leaf of gridengine/: the transports
(process.py, agent.py) and the backend chooser (backends.py) read it.
"""

from __future__ import annotations

import os

# The Slurm command this process runs (set by shim.__main__.dispatch): Grid Engine's silence is
# reported in that command's words.
command = ""
TIMED_OUT = "Socket timed out on send/recv operation"  # Slurm's words for a controller that does not answer
_deadline: float | None = None
# Why qmaster did not answer a call (``tool`` -> lines after Slurm's), from the process's Grid
# Engine transport (gridengine/diagnose.py: one qping): asked only after a timeout, for a timeout
# that does not carry its ``hint`` already (a streamed qstat's).
_why = None


def explain_silence(why) -> None:
    global _why
    _why = why


def _prefix(cmd: str) -> str:
    """How each Slurm command starts its report of a failed controller call (Slurm 22.05)."""
    if cmd == "sbatch":
        return "sbatch: error: Batch job submission failed: "
    if cmd in ("srun", "salloc"):
        return f"{cmd}: error: Unable to allocate resources: "
    if cmd == "sinfo":
        return "slurm_load_partitions: "
    return "slurm_load_jobs error: "


def unreachable(error: BaseException, cmd: str | None = None) -> list[str]:
    """Slurm's lines for a Grid Engine command that could not run (``Unable to contact slurm
    controller``) or did not answer in time (``Socket timed out on send/recv operation``)."""
    from ..proc import Timeout

    cmd = command if cmd is None else cmd
    if isinstance(error, Timeout):
        hint = getattr(error, "hint", None)
        if hint is None and _why is not None:  # once per error: asked again, it says the same
            hint = error.hint = _why(os.path.basename(str(error).partition(":")[0]))
        return [_prefix(cmd) + TIMED_OUT, *(hint or ())]
    return [f"{_prefix(cmd)}Unable to contact slurm controller ({error})"]


class within:
    """``with within(t):`` the Grid Engine calls of this process inside the block end by the
    ``time.monotonic()`` value ``t`` (each still gets ``floor`` seconds). For a command that has
    already waited once: sbatch looks its job up, after the daemon's submission did not answer, in what
    is left of the one wait instead of waiting all over again."""

    def __init__(self, t: float):
        self.t = t

    def __enter__(self) -> "within":
        global _deadline
        self.saved, _deadline = _deadline, self.t
        return self

    def __exit__(self, *exc: object) -> None:
        global _deadline
        _deadline = self.saved


def call_timeout(timeout: float, floor: float = 0.5) -> float:
    """``timeout``, cut to what is left before the deadline (but at least ``floor`` seconds)."""
    if _deadline is None:
        return timeout
    import time

    return max(floor, min(timeout, _deadline - time.monotonic()))


def streams(backend) -> bool:
    """Does ``backend`` run Grid Engine's commands itself, so that a call is streamed while the
    caller works (qstat's listing, qrstat)? Exactly ``process.GridEngineBackend``, not a subclass
    (install's cell, a test's) nor a replay: the class says so in its own body, so the readers
    (qstat.py, engine.py) need not import the transport that imports them."""
    return vars(type(backend)).get("STREAMS") is True
