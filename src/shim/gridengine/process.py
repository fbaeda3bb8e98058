"""The real transport: Grid Engine's own commands, run through shim.proc."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence

    from ..config import SiteConfig

from .. import proc
from ..errors import BackendUnavailable
from .engine import GridEngine, ge_env

NO_QMASTER = frozenset({"qacct"})  # reads the accounting file: its slowness says nothing of qmaster


UTILBIN = frozenset({"sge_share_mon"})  # tools outside bin_dir in a $SGE_ROOT install


class GridEngineBackend(GridEngine):
    STREAMS = True  # (calls.streams: this class exactly, not a subclass)
    concurrent = True
    caches_help = True  # (its binaries' -help texts: capabilities.HelpCache)

    def __init__(self, cfg: SiteConfig):
        self.cfg = cfg
        ge = cfg.gridengine
        self.bin_dir = ge.bin_dir
        self.timeout = ge.timeout
        self.env = ge_env(cfg)
        # qmaster did not answer a call in time: it would not answer the next one either, so later
        # calls fail at once (a command may make several calls; each must not wait again)
        self.silent: proc.Timeout | None = None

    def why(self, tool: str) -> list[str]:
        """Why ``tool`` got no answer from qmaster (gridengine/diagnose.py)."""
        from .diagnose import silence

        return silence(self, tool)

    def submit_by_agent(self, args: list[str], script: str | bytes, seen=None) -> int | None:
        """Through the DRMAA session of the user's daemon, where the site uses it (``[submit]
        method = "agent"``): the job id, or None when the daemon did not submit (then qsub)."""
        if getattr(getattr(self.cfg, "submit", None), "method", "qsub") != "agent":
            return None
        from . import submitter

        return submitter.submit(args, script if isinstance(script, bytes) else script.encode(), self.cfg, self,
                                seen=seen)

    def argv(self, tool: str, args: Sequence[str]) -> list[str]:
        exe = os.path.join(self.bin_dir, tool) if self.bin_dir else tool
        if tool in UTILBIN and self.bin_dir and not os.path.exists(exe):
            # Debian puts sge_share_mon beside the clients; OCS (and SGE's own layout) in
            # $SGE_ROOT/utilbin/<arch>, bin_dir's sibling
            arch = os.path.basename(self.bin_dir.rstrip("/"))
            util = os.path.join(self.cfg.gridengine.sge_root, "utilbin", arch, tool)
            if os.path.exists(util):
                exe = util
        return [exe, *args]

    def run(self, tool: str, args: Sequence[str], *, input: str | bytes | None = None,
            timeout: float | None = None) -> proc.Result:
        """``tool args``; BackendUnavailable (in the running command's Slurm words) when it cannot
        start or qmaster does not answer within the site's ``gridengine.timeout``."""
        from .calls import call_timeout, unreachable

        if self.silent is not None and tool not in NO_QMASTER:
            raise BackendUnavailable(*unreachable(self.silent)) from self.silent
        try:
            return proc.run(self.argv(tool, args), input=input, timeout=call_timeout(timeout or self.timeout),
                            env=self.env)
        except proc.Timeout as e:
            if tool not in NO_QMASTER:
                self.silent = e
                e.hint = self.why(tool)  # once: later calls fail at once, with the same lines
            else:
                e.hint = []  # (nothing to ask qmaster about)
            raise BackendUnavailable(*unreachable(e)) from e
        except proc.SpawnError as e:
            raise BackendUnavailable(*unreachable(e)) from e
