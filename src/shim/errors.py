"""Errors that end a command: each carries the exact text and exit code Slurm would give."""


class ShimError(Exception):
    """A user-facing failure. ``lines`` are printed to stderr verbatim, then the command exits."""

    def __init__(self, *lines: str, code: int = 1):
        super().__init__(lines[0] if lines else "")
        self.lines = list(lines)
        self.code = code


class BackendUnavailable(ShimError):
    """Grid Engine could not be reached (qmaster down, commands missing, timeout)."""
