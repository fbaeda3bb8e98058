"""What the installed Grid Engine can do, probed from the Grid Engine itself, never guessed from a
version string.

A capability is asked for only where a feature needs it, probed once per process and kept: the
probes are cheap (``qsub -help`` is a local call that does not reach qmaster) but not free (~8 ms
of a multi-node sbatch), so no command pays for a probe it does not use, and a help text is kept
per user across commands (``HelpCache``: keyed by the binary's path, size and mtime, so a new Grid
Engine is probed again). A site may pin a capability in its config (``[gridengine.capabilities]``)
when a probe cannot tell.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from . import ops

# capability -> (tool whose -help lists it, the option, a word its line must hold, or "")
_HELP_FLAGS = {
    "par": ("qsub", "-par", ""),            # OCS 9.1: -par <per-node> slots per host (exact geometry)
    "binding": ("qsub", "-binding", ""),    # core binding requests
    "btype": ("qsub", "-btype", ""),        # OCS 9.1 binding options (-btype, -bamount, ...)
    "sync": ("qsub", "-sync", ""),          # qsub -sync y: wait for the job's end
    "retained_finished": ("qstat", "-s", "|f}"),  # OCS 9.2: qstat -s f lists finished jobs
}


def listed(help_text: str, flag: str, word: str = "") -> bool:
    """Does a ``-help`` text list ``flag`` (a line ``   [-par ...]``), with ``word`` on its line."""
    for line in help_text.splitlines():
        first = line.split(None, 1)[:1]
        if first and first[0].lstrip("[").rstrip("]") == flag and word in line:
            return True
    return False


MAX_HELP = 64 * 1024  # a help text is a few KB; a larger cache file is not one


class HelpCache:
    """A binary's ``-help`` text, kept per user: ``$XDG_CACHE_HOME/slurm-shim/help-<path>-<size>-<mtime>.txt``
    (``~/.cache`` without it, as siteconf keeps the validated config). Believed only from a
    regular file of the caller's own (not a link, at most MAX_HELP bytes) in a directory of the
    caller's own that no one else can write: nobody else can plant or change the text that
    decides the caller's qsub options. Written atomically (state.atomic_write), mode 0600 in a
    0700 directory; any failure only costs the probe."""

    def __init__(self, base: str | None = None):
        self.base = base if base is not None else os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "slurm-shim")

    def path(self, binary: str) -> str | None:
        """The cache file of this binary as it is now; None when it is not a file with an absolute path."""
        if not os.path.isabs(binary):
            return None
        try:
            st = os.stat(binary)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return os.path.join(self.base, f"help-{binary.replace('/', '%')}-{st.st_size}-{st.st_mtime_ns}.txt")

    def _dir_is_mine(self) -> bool:
        try:
            st = os.lstat(self.base)
        except OSError:
            return False
        return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022

    def read(self, binary: str) -> str | None:
        path = self.path(binary)
        if path is None or not self._dir_is_mine():
            return None
        from ..store.state import read_small_file

        got = read_small_file(path, MAX_HELP, (os.getuid(),))
        return got[0].decode("utf-8", "replace") if got and got[0] else None

    def write(self, binary: str, text: str) -> None:
        path = self.path(binary)
        if path is None or not text or len(text.encode()) > MAX_HELP:
            return
        try:
            os.makedirs(self.base, mode=0o700, exist_ok=True)
            if not self._dir_is_mine():
                return
            from ..store.state import atomic_write

            atomic_write(path, text, 0o600)
        except OSError:
            pass


class Capabilities:
    """``caps.par``, ``caps.binding``, ...: True when the installed Grid Engine offers it."""

    def __init__(self, backend: Any, pinned: dict[str, bool] | None = None, cache: HelpCache | None = None):
        self._backend = backend
        self._help: dict[str, str] = {}
        self._known: dict[str, bool] = dict(pinned or {})
        self._cache = cache

    def help_text(self, tool: str) -> str:
        if tool not in self._help:
            call = ops.help_of(tool)
            binary = ""
            if self._cache is not None:
                try:
                    binary = self._backend.argv(*call)[0]
                except Exception:
                    binary = ""
                cached = self._cache.read(binary) if binary else None
                if cached is not None:
                    self._help[tool] = cached
                    return cached
            try:
                res = self._backend.call(call)
                self._help[tool] = res.stdout + res.stderr
            except Exception:  # a Grid Engine that cannot even print its help offers nothing
                self._help[tool] = ""
            else:
                if binary and res.returncode == 0 and self._help[tool].strip():
                    self._cache.write(binary, self._help[tool])  # type: ignore[union-attr]
        return self._help[tool]

    def has(self, name: str) -> bool:
        if name not in self._known:
            tool, flag, word = _HELP_FLAGS[name]
            self._known[name] = listed(self.help_text(tool), flag, word)
        return self._known[name]

    def __getattr__(self, name: str) -> bool:
        if name.startswith("_") or name not in _HELP_FLAGS:
            raise AttributeError(name)
        return self.has(name)

    def probed(self) -> dict[str, bool]:
        """Every capability, probed now (``slurm-shim doctor``, ``install --plan``)."""
        return {name: self.has(name) for name in _HELP_FLAGS}
