"""Backends: how the shim reaches Grid Engine's commands.

The interface is one verb, ``run(tool, args, input=None) -> Result``: argv builders and output
parsers on top of it are pure functions, tested on recorded output. ``gridengine`` runs the real
q* commands; ``replay`` answers from recorded outputs (unit tests, ``--dry-run``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import SiteConfig

import os
from typing import Protocol, Sequence

from ..proc import Result


class Backend(Protocol):
    name: str

    def run(self, tool: str, args: Sequence[str], *, input: str | bytes | None = None,
            timeout: float | None = None) -> Result: ...

    def argv(self, tool: str, args: Sequence[str]) -> list[str]:
        """The full argv that ``run`` would execute (for exec-style callers such as srun --pty)."""
        ...


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
    from .gridengine import GridEngineBackend

    return GridEngineBackend(cfg)
