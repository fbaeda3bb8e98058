"""The only module that starts processes. Everything else passes argv lists here.

No shell ever sees user text: argv is a list and ``shell=False`` always.

``SLURM_SHIM_DEBUG`` set (non-empty): every command started here is logged to stderr with its argv,
duration and exit code (``slurm-shim: debug: ...``), so a bug report can carry the exact Grid Engine
interaction. Unset, it costs one environment lookup per command.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    import subprocess
    from typing import Mapping, Sequence

# subprocess (with signal, threading, selectors: ~13 M instructions) is imported by the functions
# that start a process, not at the top: sbatch's agent path starts none (issue 19). Its constants
# are the documented values; Popen and TimeoutExpired are read from it when first asked for.
PIPE = -1
STDOUT = -2
DEVNULL = -3


def _debug(argv: Sequence[str], what: str) -> None:
    import sys

    shown = " ".join(_quote(str(a)) for a in argv)
    try:
        sys.stderr.write(f"slurm-shim: debug: {shown}  ({what})\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stderr never fails the command
        pass


def _quote(word: str) -> str:
    """A shell-style word, control characters shown as escapes (a user's text never moves the terminal)."""
    import shlex

    if any(c < " " or c == "\x7f" for c in word):
        return "$'" + word.encode("unicode_escape").decode("ascii").replace("'", "\\'") + "'"
    return shlex.quote(word)


def _took(t0: float, code: "int | str") -> str:
    import time

    return f"{time.monotonic() - t0:.3f} s, exit {code}"


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
    if os.environ.get("SLURM_SHIM_DEBUG"):
        return _logged(_run, argv, data, timeout, env, cwd)
    return _run(argv, data, timeout, env, cwd)


def _logged(fn, argv: list[str], *args):
    import time

    t0 = time.monotonic()
    try:
        res = fn(argv, *args)
    except SpawnError as e:
        _debug(argv, _took(t0, f"none: {e}"))
        raise
    _debug(argv, _took(t0, res.returncode))
    return res


def _run(argv: list[str], data: bytes | None, timeout: float | None, env: Mapping[str, str] | None,
         cwd: str | None) -> Result:
    import subprocess

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
        self.t0 = time.monotonic() if os.environ.get("SLURM_SHIM_DEBUG") else None

    def chunks(self, size: int = 1 << 20):
        import select
        import subprocess
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
        killed = p.poll() is None
        if killed:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
        if self.t0 is not None:  # SLURM_SHIM_DEBUG: logged once, when it ended
            _debug(self.argv, _took(self.t0, f"{p.returncode}, killed" if killed else p.returncode))
            self.t0 = None


def stream(argv: Sequence[str], *, timeout: float | None = 30, env: Mapping[str, str] | None = None) -> Stream:
    """Start argv with its stdout and stderr on pipes, for reading while it runs (Stream.chunks)."""
    import subprocess

    argv = [str(a) for a in argv]
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=dict(env) if env is not None else None)
    except OSError as e:
        err = SpawnError(f"{argv[0]}: command not found" if isinstance(e, FileNotFoundError) else f"{argv[0]}: {e.strerror}")
        if os.environ.get("SLURM_SHIM_DEBUG"):
            _debug(argv, f"not started: {err}")
        raise err from e
    return Stream(argv, p, timeout)


def _logged_popen() -> type:
    """Popen that logs (SLURM_SHIM_DEBUG) its argv, pid, duration and exit code once it is reaped
    (the class is made on first use: it subclasses subprocess.Popen)."""
    global _LoggedPopen
    if _LoggedPopen is None:
        import subprocess

        class _LoggedPopen(subprocess.Popen):  # noqa: F811
            __init__ = _lp_init
            _ended = _lp_ended
            poll = _lp_poll
            wait = _lp_wait

    return _LoggedPopen


_LoggedPopen = None


def _lp_init(self, argv: list[str], **kwargs):
    import subprocess
    import time

    self._t0 = time.monotonic()
    subprocess.Popen.__init__(self, argv, **kwargs)
    _debug(argv, f"started, pid {self.pid}")


def _lp_ended(self) -> None:
    if self._t0 is not None and self.returncode is not None:
        _debug(self.args, _took(self._t0, self.returncode))
        self._t0 = None


def _lp_poll(self):
    import subprocess

    rc = subprocess.Popen.poll(self)
    self._ended()
    return rc


def _lp_wait(self, timeout=None):
    import subprocess

    rc = subprocess.Popen.wait(self, timeout)
    self._ended()
    return rc


def popen(argv: Sequence[str], **kwargs) -> subprocess.Popen:
    """Start argv without waiting (streaming output, interactive sessions, task fan-out)."""
    import subprocess

    argv = [str(a) for a in argv]
    try:
        if os.environ.get("SLURM_SHIM_DEBUG"):
            return _logged_popen()(argv, **kwargs)
        return subprocess.Popen(argv, **kwargs)
    except FileNotFoundError as e:
        if os.environ.get("SLURM_SHIM_DEBUG"):
            _debug(argv, "not started: command not found")
        raise SpawnError(f"{argv[0]}: command not found") from e


def start_once(d: str, marker: str, fresh: float, argv: Sequence[str], env: dict, log: str) -> bool:
    """Start a per-user daemon (the warm service, which also submits) detached: its own session,
    cwd "/", stdin /dev/null, stdout and stderr appended to ``d/log`` (0600). Unless another
    caller is starting one: ``d/marker``, made exclusively, younger than ``fresh`` seconds (an
    older one is a start that died, and is taken over). False when nothing was started."""
    import time

    now = time.time()
    path = os.path.join(d, marker)
    for _ in range(2):
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            break
        except FileExistsError:
            try:
                if now - os.stat(path).st_mtime < fresh:
                    return False
                os.unlink(path)
            except OSError:
                pass
        except OSError:
            return False
    else:
        return False
    try:
        fd = os.open(os.path.join(d, log), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            popen(argv, stdin=DEVNULL, stdout=fd, stderr=fd, cwd="/", env=env, start_new_session=True, close_fds=True)
        finally:
            os.close(fd)
    except (OSError, SpawnError):
        try:
            os.unlink(path)
        except OSError:
            pass
        return False
    return True


def call(argv: Sequence[str], **kwargs) -> int:
    """Run argv with inherited stdio and return its exit status."""
    argv = [str(a) for a in argv]
    if os.environ.get("SLURM_SHIM_DEBUG"):
        return _logged(_call, argv, kwargs).returncode
    return _call(argv, kwargs).returncode


def _call(argv: list[str], kwargs: dict) -> subprocess.CompletedProcess:
    import subprocess

    try:
        return subprocess.CompletedProcess(argv, subprocess.call(argv, **kwargs))
    except FileNotFoundError as e:
        raise SpawnError(f"{argv[0]}: command not found") from e


def fork() -> int:
    """``os.fork``: 0 in the child, the child's pid in the parent (the warm service's children,
    service.py; the one other way this package makes a process)."""
    return os.fork()


def execvpe(argv: Sequence[str], env: Mapping[str, str]) -> None:
    """Replace this process with argv (never returns on success)."""
    if os.environ.get("SLURM_SHIM_DEBUG"):
        _debug(argv, "exec: this process becomes it")
    os.execvpe(argv[0], list(argv), dict(env))


def __getattr__(name: str):
    """``proc.Popen`` and ``proc.TimeoutExpired``: subprocess's own, imported when first read."""
    if name in ("Popen", "TimeoutExpired"):
        import subprocess

        return getattr(subprocess, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def reexec(argv: list[str], env: dict[str, str]) -> None:
    """Replace this process by this interpreter running ``argv`` with only ``env`` (the warm
    service's start with more than service.start_env, F-33): here, as every other start."""
    import sys

    os.execve(sys.executable, argv, env)
