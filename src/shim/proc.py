"""The only module that starts processes. Everything else passes argv lists here.

No shell ever sees user text: argv is a list and ``shell=False`` always.
"""

from __future__ import annotations

import os
import subprocess
from typing import Mapping, Sequence


class Result:
    """What a finished command left: its argv, exit code and decoded output."""

    __slots__ = ("argv", "returncode", "stdout", "stderr")

    def __init__(self, argv: tuple[str, ...], returncode: int, stdout: str, stderr: str):
        self.argv = argv
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr

    def __repr__(self) -> str:
        return f"Result(argv={self.argv!r}, returncode={self.returncode}, stdout={self.stdout!r}, stderr={self.stderr!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Result) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)


class SpawnError(OSError):
    """The program could not be started at all, or did not finish in time."""


class Timeout(SpawnError):
    """The program did not finish in time (for Grid Engine's commands: qmaster does not answer)."""


def run(
    argv: Sequence[str],
    *,
    input: str | bytes | None = None,
    timeout: float | None = 30,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> Result:
    """Run argv to completion and capture its output. A non-zero exit is a result, not an error."""
    argv = [str(a) for a in argv]
    data = input.encode() if isinstance(input, str) else input
    try:
        cp = subprocess.run(
            argv,
            input=data,
            stdin=None if data is not None else subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
    except FileNotFoundError as e:
        raise SpawnError(f"{argv[0]}: command not found") from e
    except subprocess.TimeoutExpired as e:
        raise Timeout(f"{argv[0]}: no answer within {timeout:g} s") from e
    except OSError as e:
        raise SpawnError(f"{argv[0]}: {e.strerror}") from e
    return Result(
        tuple(argv),
        cp.returncode,
        cp.stdout.decode("utf-8", "replace"),
        cp.stderr.decode("utf-8", "replace"),
    )


class Stream:
    """A started command whose stdout is read while it runs (``stream``): ``chunks()`` yields
    stdout as it arrives; afterwards ``returncode`` and ``stderr`` (decoded) are set. The
    command gets ``timeout`` seconds from its start; a slower one is killed (SpawnError)."""

    def __init__(self, argv: list[str], popen_: subprocess.Popen, timeout: float | None):
        import time

        self.argv = tuple(argv)
        self.popen = popen_
        self.deadline = time.monotonic() + timeout if timeout else None
        self.timeout = timeout
        self.returncode: int | None = None
        self.stderr = ""

    def chunks(self, size: int = 1 << 20):
        import select
        import time

        p = self.popen
        out_fd, err_fd = p.stdout.fileno(), p.stderr.fileno()
        poller = select.poll()
        poller.register(out_fd, select.POLLIN)
        poller.register(err_fd, select.POLLIN)
        live = 2
        err: list[bytes] = []
        late = Timeout(f"{self.argv[0]}: no answer within {self.timeout:g} s")
        try:
            while live:
                wait = None
                if self.deadline is not None:
                    wait = int((self.deadline - time.monotonic()) * 1000) + 1
                    if wait <= 0:
                        raise late
                events = poller.poll(wait)
                if not events:
                    raise late
                for fd, _ev in events:
                    data = os.read(fd, size)
                    if not data:
                        poller.unregister(fd)
                        live -= 1
                    elif fd == out_fd:
                        yield data
                    else:
                        err.append(data)
            try:
                wait_s = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
                self.returncode = p.wait(wait_s)
            except subprocess.TimeoutExpired:
                raise late from None
            self.stderr = b"".join(err).decode("utf-8", "replace")
        finally:
            self.close()

    def close(self) -> None:
        """Stop the command if it still runs (the reader gave up early) and release the pipes."""
        p = self.popen
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()


def stream(argv: Sequence[str], *, timeout: float | None = 30, env: Mapping[str, str] | None = None) -> Stream:
    """Start argv with its stdout and stderr on pipes, for reading while it runs (Stream.chunks)."""
    argv = [str(a) for a in argv]
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(env) if env is not None else None)
    except FileNotFoundError as e:
        raise SpawnError(f"{argv[0]}: command not found") from e
    except OSError as e:
        raise SpawnError(f"{argv[0]}: {e.strerror}") from e
    return Stream(argv, p, timeout)


def popen(argv: Sequence[str], **kwargs) -> subprocess.Popen:
    """Start argv without waiting (streaming output, interactive sessions, task fan-out)."""
    try:
        return subprocess.Popen([str(a) for a in argv], **kwargs)
    except FileNotFoundError as e:
        raise SpawnError(f"{argv[0]}: command not found") from e


def call(argv: Sequence[str], **kwargs) -> int:
    """Run argv with inherited stdio and return its exit status."""
    try:
        return subprocess.call([str(a) for a in argv], **kwargs)
    except FileNotFoundError as e:
        raise SpawnError(f"{argv[0]}: command not found") from e


def execvpe(argv: Sequence[str], env: Mapping[str, str]) -> None:
    """Replace this process with argv (never returns on success)."""
    os.execvpe(argv[0], list(argv), dict(env))


PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
STDOUT = subprocess.STDOUT
Popen = subprocess.Popen
TimeoutExpired = subprocess.TimeoutExpired


def shim_python(module: str, name: str, call: str | None = None) -> list[str]:
    """argv that runs ``from shim.<module> import <name>; <call or name()>`` in this installation's Python,
    isolated (``-I``): no cwd or script directory on ``sys.path``, no ``PYTHON*`` variables, no
    user site-packages. Job wrappers, step launchers, salloc's holder and the agent start in
    directories other users can write (a job's cwd, a shared project directory), so nothing
    there may be imported."""
    import sys

    import shim

    src = os.path.dirname(os.path.dirname(os.path.abspath(shim.__file__)))
    code = f"import sys; sys.path.insert(0, {src!r}); from shim.{module} import {name}; {call or name + '()'}"
    return [sys.executable or "/usr/bin/python3", "-I", "-c", code]
