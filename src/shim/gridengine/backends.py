"""Backends: how the shim reaches Grid Engine.

``get(cfg)`` gives the process's backend: a ``gridengine.GridEngine``, whose methods are every
Grid Engine operation (pure argv builders and answer parsers in ``gridengine/ops.py``) over a
transport: ``gridengine.GridEngineBackend`` runs the real q* commands, ``replay.ReplayBackend``
answers from recorded output (unit tests; ``SLURM_SHIM_REPLAY=<dir>``). How a silent or missing
Grid Engine is reported in the running command's Slurm words, and the process's deadline, are
calls.py's (the transports read them there; their names are kept here too).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs ~9 ms of every command's start; annotations are strings
if TYPE_CHECKING:
    from typing import Any

    from ..config import SiteConfig
    from .engine import GridEngine as Backend

from .calls import TIMED_OUT, _prefix, call_timeout, explain_silence, unreachable, within  # noqa: F401

_override: Backend | None = None


def use(backend: Backend | None) -> None:
    """Install a backend for this process (tests)."""
    global _override
    _override = backend


def get(cfg: SiteConfig) -> Backend:
    if _override is not None:
        return _override
    replay_dir = os.environ.get("SLURM_SHIM_REPLAY")
    if replay_dir:
        from .replay import ReplayBackend

        return ReplayBackend.from_dir(replay_dir)
    from .process import GridEngineBackend

    backend = GridEngineBackend(cfg)
    explain_silence(backend.why)  # (for its streamed calls, whose timeouts reach unreachable() bare)
    return backend


def start_qstat(cfg: SiteConfig, args: list[str] | None = None, backend: Backend | None = None) -> Any:
    """Start the listing qstat (``qstat.QSTAT_ARGS`` unless told otherwise) without waiting for
    it: a ``qstat.Query`` on ``backend``, else the process's (the reader does not choose one)."""
    from .qstat import QSTAT_ARGS, Query

    return Query(backend or get(cfg), QSTAT_ARGS if args is None else args)
