"""Errors that end a command: each carries the exact text and exit code Slurm would give."""


class ShimError(Exception):
    """A user-facing failure. ``lines`` are printed to stderr verbatim, then the command exits."""

    def __init__(self, *lines: str, code: int = 1):
        super().__init__(lines[0] if lines else "")
        self.lines = list(lines)
        self.code = code


def command_error(prog: str, msg: str, *more: str, code: int = 1) -> ShimError:
    """Slurm's error of a command: ``<prog>: error: <msg>`` (its ``error()``), any further lines
    verbatim after it."""
    return ShimError(f"{prog}: error: {msg}", *more, code=code)


def for_command(prog: str):
    """A command's ``error(msg, *more, code=1)``: command_error with its name filled in."""
    def error(msg: str, *more: str, code: int = 1) -> ShimError:
        return command_error(prog, msg, *more, code=code)
    return error


class BackendUnavailable(ShimError):
    """Grid Engine could not be reached (qmaster down, commands missing, timeout)."""
