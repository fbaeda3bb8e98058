"""Entry points. ``python -m shim <command> args...`` or a console script named after the command.

Each command module exposes ``main(argv) -> int``; it is imported only when called, so every
command pays only for what it uses. A ShimError prints its lines and exits with its code; any
other exception becomes a one-line Slurm-style error, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys

COMMANDS = {
    "sbatch": "shim.cli.sbatch",
    "srun": "shim.cli.srun",
    "salloc": "shim.cli.salloc",
    "squeue": "shim.cli.squeue",
    "scancel": "shim.cli.scancel",
    "scontrol": "shim.cli.scontrol",
    "sacct": "shim.cli.sacct",
    "sinfo": "shim.cli.sinfo",
    "sprio": "shim.cli.sprio",
    "sshare": "shim.cli.sshare",
    "sacctmgr": "shim.cli.sacctmgr",
    "sreport": "shim.cli.sreport",
    "slurm-shim": "shim.cli.admin",
}


def dispatch(cmd: str, argv: list[str]) -> int:
    from .errors import ShimError
    from .gridengine import calls

    calls.command = cmd  # Grid Engine's silence is reported in this command's words
    try:
        try:
            module = importlib.import_module(COMMANDS[cmd])
        except ModuleNotFoundError as e:
            if e.name != COMMANDS[cmd]:
                raise
            raise ShimError(f"{cmd}: error: {cmd} is not implemented by slurm-shim yet") from None
        return module.main(argv)
    except ShimError as e:
        lines = e.lines
        if _timed_out(e.__cause__):  # a q* call qmaster never answered, wherever it was made
            lines = calls.unreachable(e.__cause__, cmd)
        for line in lines:
            print(line, file=sys.stderr)
        return e.code
    except ValueError as e:
        from .slurm.hostlist import HostlistError

        if isinstance(e, HostlistError):  # a user's bad host list, wherever it was read
            print(f"{cmd}: error: {e}", file=sys.stderr)
            return 1
        return _internal(cmd, e)
    except BrokenPipeError:  # e.g. squeue | head -1
        return 0
    except OSError as e:  # proc.SpawnError included: a Grid Engine command missing or hung
        if _timed_out(e):
            print(*calls.unreachable(e, cmd), sep="\n", file=sys.stderr)
        else:
            print(f"{cmd}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # the last line of defence: no traceback reaches a user
        return _internal(cmd, e)


def _timed_out(e: BaseException | None) -> bool:
    proc = sys.modules.get("shim.proc")  # loaded by whatever ran a command that could time out
    return proc is not None and isinstance(e, proc.Timeout)


def _internal(cmd: str, e: Exception) -> int:
    if os.environ.get("SLURM_SHIM_DEBUG"):
        raise e
    print(f"{cmd}: error: internal error: {type(e).__name__}: {e}", file=sys.stderr)
    return 1


def _entry(cmd: str):
    def main() -> None:
        code = dispatch(cmd, sys.argv[1:])
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            pass
        sys.exit(code)

    return main


sbatch = _entry("sbatch")
srun = _entry("srun")
salloc = _entry("salloc")
squeue = _entry("squeue")
scancel = _entry("scancel")
scontrol = _entry("scontrol")
sacct = _entry("sacct")
sinfo = _entry("sinfo")
sprio = _entry("sprio")
sshare = _entry("sshare")
sacctmgr = _entry("sacctmgr")
sreport = _entry("sreport")
admin = _entry("slurm-shim")

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(f"usage: python -m shim {{{','.join(COMMANDS)}}} [args...]", file=sys.stderr)
        sys.exit(2)
    sys.exit(dispatch(sys.argv[1], sys.argv[2:]))
