"""The real backend: Grid Engine's own commands, run through shim.proc."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import SiteConfig

import os
from typing import Sequence

from .. import proc
from ..errors import BackendUnavailable


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

    def argv(self, tool: str, args: Sequence[str]) -> list[str]:
        exe = os.path.join(self.bin_dir, tool) if self.bin_dir else tool
        return [exe, *args]

    def run(self, tool: str, args: Sequence[str], *, input: str | bytes | None = None,
            timeout: float | None = None) -> proc.Result:
        try:
            return proc.run(self.argv(tool, args), input=input, timeout=timeout or self.timeout, env=self.env)
        except proc.SpawnError as e:
            raise BackendUnavailable(f"slurm_load_jobs error: Unable to contact slurm controller ({e})") from e
