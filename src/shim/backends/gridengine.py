"""The real backend: Grid Engine's own commands, run through shim.proc."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import SiteConfig

import os
from typing import Sequence

from .. import proc
from ..errors import BackendUnavailable

NO_QMASTER = frozenset({"qacct"})  # reads the accounting file: its slowness says nothing of qmaster


class GridEngineBackend:
    name = "gridengine"

    def __init__(self, cfg: SiteConfig):
        self.cfg = cfg
        ge = cfg.gridengine
        self.bin_dir = ge.bin_dir
        self.timeout = ge.timeout
        env = dict(os.environ)
        env.setdefault("SGE_ROOT", ge.sge_root)
        env.setdefault("SGE_CELL", ge.sge_cell)
        self.env = env
        # qmaster did not answer a call in time: it would not answer the next one either, so later
        # calls fail at once (a command may make several calls; each must not wait again)
        self.silent: proc.Timeout | None = None

    def argv(self, tool: str, args: Sequence[str]) -> list[str]:
        exe = os.path.join(self.bin_dir, tool) if self.bin_dir else tool
        return [exe, *args]

    def run(self, tool: str, args: Sequence[str], *, input: str | bytes | None = None,
            timeout: float | None = None) -> proc.Result:
        """``tool args``; BackendUnavailable (in the running command's Slurm words) when it cannot
        start or qmaster does not answer within the site's ``gridengine.timeout``."""
        from . import call_timeout, unreachable

        if self.silent is not None and tool not in NO_QMASTER:
            raise BackendUnavailable(*unreachable(self.silent)) from self.silent
        try:
            return proc.run(self.argv(tool, args), input=input, timeout=call_timeout(timeout or self.timeout),
                            env=self.env)
        except proc.Timeout as e:
            if tool not in NO_QMASTER:
                self.silent = e
            raise BackendUnavailable(*unreachable(e)) from e
        except proc.SpawnError as e:
            raise BackendUnavailable(*unreachable(e)) from e
