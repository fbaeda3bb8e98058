"""Issue 28: one per-user daemon. A served command (the C client's ``run`` request) and a DRMAA
submission (sbatch's ``submit`` request) go to one process over one socket; the DRMAA session
lives in that process, and a served sbatch (a forked child) reaches it back over the socket. The
drmaa package is test_submitter's stub; the commands are test_service's probe."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from shim.gridengine import submitter
from shim.service import server as service
from shim.store import rundir
from test_service import _dead, _probe, cbin, client, stop_service, wait_for, world  # noqa: F401 (fixtures)
from test_submitter import ARGV, STUB, Cfg, FakeBackend

SERVES_THE_MACHINES_CONFIG = True  # (conftest._unit_site_config; test_service.py's)


def _dispatch(cmd, argv):
    """The probe's commands, and ``submit LOG``: a submission from inside the served command."""
    if argv[:1] == ["submit"]:
        job = submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, FakeBackend(Path(argv[1])))
        print(job)
        return 0
    return _probe(cmd, argv)


@pytest.fixture
def daemon(tmp_path, monkeypatch):
    """A daemon (forked from this process) with the probe's commands and the stub's drmaa."""
    stub = tmp_path / "stub"
    stub.mkdir()
    log = tmp_path / "jobs.log"
    (stub / "drmaa.py").write_text(STUB.replace("__STUB_LOG__", repr(str(log))))
    (stub / "libdrmaa.so.1.0").write_bytes(b"")
    d = tmp_path / "daemon"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("SLURM_SHIM_AGENT_DIR", str(d))
    monkeypatch.delenv("STUB_LOG", raising=False)
    monkeypatch.delenv("STUB_DIE", raising=False)
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(str(d / rundir.LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            sys.stdout = sys.stderr = open(2, "w", closefd=False)  # (not pytest's capture)
            sys.path.insert(0, str(stub))
            os.environ["DRMAA_LIBRARY_PATH"] = str(stub / "libdrmaa.so.1.0")
            import shim.__main__ as m

            m.dispatch = _dispatch
            os.environ["SLURM_SHIM_SERVICE_IDLE"] = "60"
            service.serve(str(d))  # (from "/", as main's)
        finally:
            os._exit(0)
    wait_for(lambda: service.info(str(d)) is not None or _dead(pid), what="the daemon to answer")
    assert not _dead(pid), (d / rundir.LOG).read_text()
    yield {"dir": d, "pid": pid, "log": log}
    stop_service(pid)


def _jobs(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_one_socket_takes_a_command_and_a_submission(daemon, cbin):
    d = daemon["dir"]
    cp = client(cbin, d, "exit", "3")
    assert (cp.returncode, cp.stdout, cp.stderr) == (3, b"out\n", b"err\n")  # run: the service's child
    b = FakeBackend(daemon["log"])
    assert submitter.submit(ARGV, b"#!/bin/sh\necho hi\n", Cfg, b) == 100  # submit: the same process
    [rec] = _jobs(daemon["log"])
    assert rec["pid"] == daemon["pid"] and rec["cwd"] == "/" and b.calls == []
    ping = rundir.ask(str(d), "ping")
    assert (ping["pid"], ping["served"], ping["submitted"], ping["drmaa"]) == (daemon["pid"], 1, 1, True)
    assert rundir.SOCKET in os.listdir(d)
    assert not [n for n in os.listdir(d) if n.startswith("agent.")]  # one directory, one socket


def test_a_served_sbatch_reaches_the_session_through_the_socket(daemon, cbin):
    """The command runs in a forked child, which never touches the session: its submission goes
    back over the socket to the daemon's own process, where runJob runs."""
    cp = client(cbin, daemon["dir"], "submit", str(daemon["log"]))
    assert (cp.returncode, cp.stdout) == (0, b"100\n"), cp.stderr
    [rec] = _jobs(daemon["log"])
    assert rec["pid"] == daemon["pid"]  # runJob ran in the daemon, not in the command's child
    ping = rundir.ask(str(daemon["dir"]), "ping")
    assert (ping["served"], ping["submitted"]) == (1, 1)


def test_json_requests_of_no_known_kind_are_refused(daemon):
    d = str(daemon["dir"])
    sock, pid = rundir.connect(d, 5)
    with sock:
        rundir.send_json(sock, {"kind": "format-disk"})
        assert rundir.recv_json(sock) == {"status": "refused", "reason": "unknown kind 'format-disk'"}
    assert pid == daemon["pid"]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:  # a tag, then no JSON: closed, no answer
        s.settimeout(10)
        s.connect(os.path.join(d, rundir.SOCKET))
        s.sendall(rundir.TAG_JSON + (rundir.MAX_HEADER + 1).to_bytes(4, "big"))
        assert s.recv(16) == b""
    assert service.info(d)[0] == daemon["pid"]  # and it goes on serving


def test_stop_is_a_request_and_the_daemon_leaves(daemon):
    d = daemon["dir"]
    assert rundir.ask(str(d), "stop") == {"status": "ok", "pid": daemon["pid"]}
    wait_for(lambda: _dead(daemon["pid"]), what="the daemon to leave")
    assert not (d / rundir.SOCKET).exists()
    assert "exit after 0 requests" in (d / rundir.LOG).read_text()


def test_stop_of_a_daemon_that_does_not_answer_is_sigterm_and_the_same_json(tmp_path, monkeypatch, capsys):
    """``python -m shim.service stop`` where no socket answers (a daemon still starting, or one whose
    socket is gone) sends SIGTERM to the pid its lock names, and prints what an answered stop
    prints (CI run 13: a test's reader of that JSON got a bare pid)."""
    import subprocess

    d = tmp_path / "quiet"
    d.mkdir(mode=0o700)
    holder = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600); "
              "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, f'{os.getpid()}\\n'.encode()); "
              "print('held', flush=True); time.sleep(120)")
    p = subprocess.Popen([sys.executable, "-c", holder, str(d / "service.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "held\n"
        monkeypatch.setenv("SLURM_SHIM_AGENT_DIR", str(d))
        assert service.main(["stop"]) == 0
        assert json.loads(capsys.readouterr().out) == {"status": "ok", "pid": p.pid}
        assert p.wait(timeout=30) == -signal.SIGTERM
    finally:
        p.kill()
        p.wait()


def test_sigterm_still_stops_it(daemon):
    os.kill(daemon["pid"], signal.SIGTERM)
    wait_for(lambda: _dead(daemon["pid"]), what="the daemon to leave")
