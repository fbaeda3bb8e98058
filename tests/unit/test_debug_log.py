"""SLURM_SHIM_DEBUG=1: proc.py logs every command it starts (argv, duration, exit code) to stderr,
whichever way it was started; unset, nothing is logged and the log code is never reached."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from shim import proc

LINE = re.compile(r"slurm-shim: debug: (?P<argv>.*)  \((?P<what>.*)\)")


def logged(err: str) -> list[tuple[str, str]]:
    out = []
    for line in err.splitlines():
        m = LINE.fullmatch(line)
        assert m, f"not a debug line: {line!r}"
        out.append((m["argv"], m["what"]))
    return out


@pytest.fixture
def debug(monkeypatch):
    monkeypatch.setenv("SLURM_SHIM_DEBUG", "1")


def took(what: str, code: int) -> float:
    m = re.fullmatch(rf"(\d+\.\d{{3}}) s, exit {code}", what)
    assert m, what
    return float(m[1])


def test_run_logs_argv_duration_and_exit_code(debug, capsys):
    res = proc.run(["/bin/sh", "-c", "sleep 0.2; echo out; exit 3", "a b"])
    assert (res.returncode, res.stdout) == (3, "out\n")
    cap = capsys.readouterr()
    assert cap.out == ""
    [(argv, what)] = logged(cap.err)
    assert argv == "/bin/sh -c 'sleep 0.2; echo out; exit 3' 'a b'"
    assert 0.2 <= took(what, 3) < 5


def test_a_command_that_is_missing_or_hangs_is_logged_and_still_raises(debug, capsys):
    with pytest.raises(proc.SpawnError):
        proc.run(["/nonexistent/qstat", "-xml"])
    with pytest.raises(proc.Timeout):
        proc.run(["/bin/sleep", "5"], timeout=0.2)
    [(a1, w1), (a2, w2)] = logged(capsys.readouterr().err)
    assert a1 == "/nonexistent/qstat -xml" and w1.endswith("exit none: /nonexistent/qstat: command not found")
    assert a2 == "/bin/sleep 5" and re.fullmatch(r"0\.\d{3} s, exit none: /bin/sleep: no answer within 0.2 s", w2)


def test_stream_is_logged_when_it_ends_and_when_it_is_killed(debug, capsys):
    s = proc.stream(["/bin/sh", "-c", "echo hi; exit 4"])
    assert b"".join(s.chunks()) == b"hi\n" and s.returncode == 4
    s = proc.stream(["/bin/sleep", "5"])
    s.close()  # the reader gave up
    [(a1, w1), (a2, w2)] = logged(capsys.readouterr().err)
    assert a1 == "/bin/sh -c 'echo hi; exit 4'" and took(w1, 4) < 5
    assert a2 == "/bin/sleep 5" and w2.endswith("exit -9, killed")


def test_popen_is_logged_at_start_and_when_reaped(debug, capsys):
    p = proc.popen(["/bin/sh", "-c", "exit 7"])
    assert p.wait() == 7
    p.wait()  # reaped once, logged once
    p = proc.popen(["/bin/true"])
    while p.poll() is None:
        pass
    [(a1, w1), (a2, w2), (a3, w3), (a4, w4)] = logged(capsys.readouterr().err)
    assert (a1, a2, a3, a4) == ("/bin/sh -c 'exit 7'", "/bin/sh -c 'exit 7'", "/bin/true", "/bin/true")
    assert re.fullmatch(r"started, pid \d+", w1) and took(w2, 7) < 5
    assert re.fullmatch(r"started, pid \d+", w3) and took(w4, 0) < 5


def test_call_and_exec_are_logged(tmp_path):
    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); from shim import proc; "
            "rc = proc.call(['/bin/sh', '-c', 'exit 2']); "
            "proc.execvpe(['/bin/sh', '-c', 'exit ' + str(rc + 1)], dict(os.environ))")
    src = str(proc.__file__).rsplit("/shim/", 1)[0]
    env = {"PATH": "/usr/bin:/bin", "SLURM_SHIM_DEBUG": "1"}
    cp = subprocess.run([sys.executable, "-I", "-c", code, src], env=env, capture_output=True, text=True, timeout=30)
    assert cp.returncode == 3, cp.stderr
    [(a1, w1), (a2, w2)] = logged(cp.stderr)
    assert a1 == "/bin/sh -c 'exit 2'" and took(w1, 2) < 5
    assert (a2, w2) == ("/bin/sh -c 'exit 3'", "exec: this process becomes it")


def test_control_characters_in_argv_are_shown_escaped(debug, capsys):
    proc.run(["/bin/echo", "job\x1b[2Jname\n", "it's"])
    [(argv, _)] = logged(capsys.readouterr().err)
    assert argv == "/bin/echo $'job\\x1b[2Jname\\n' 'it'\"'\"'s'"


@pytest.mark.parametrize("value", [None, ""])
def test_unset_or_empty_logs_nothing_and_never_reaches_the_log_code(monkeypatch, capsys, value):
    if value is None:
        monkeypatch.delenv("SLURM_SHIM_DEBUG", raising=False)
    else:
        monkeypatch.setenv("SLURM_SHIM_DEBUG", value)

    def boom(*_a, **_k):
        raise AssertionError("debug logging reached with SLURM_SHIM_DEBUG unset")

    monkeypatch.setattr(proc, "_debug", boom)
    monkeypatch.setattr(proc, "_logged", boom)
    monkeypatch.setattr(proc, "_LoggedPopen", boom)
    assert proc.run(["/bin/sh", "-c", "exit 1"]).returncode == 1
    assert b"".join(proc.stream(["/bin/echo", "x"]).chunks()) == b"x\n"
    assert proc.popen(["/bin/true"]).wait() == 0
    assert proc.call(["/bin/true"]) == 0
    assert type(proc.popen(["/bin/true"])) is subprocess.Popen
    assert capsys.readouterr().err == ""
