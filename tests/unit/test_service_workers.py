"""Issue 29: a warm ``sbatch`` without a fork each. A plain sbatch (server.reusable) runs in a
reused worker, which then takes the next one, its process state put back as a freshly forked
child's (server.Pristine); everything else still gets a child of its own. Driven over a real
socket with the compiled client and a real daemon, as test_service.py does; the command is a
probe that reports (``state``) or dirties (``dirty``) the process state, and ``real ...`` runs
the real sbatch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import shim.__main__ as shim_main
from shim.service import server as service
from test_service import (NOBODY, _dead, _mntns, _ok, _probe, cbin, client, client_env, served,  # noqa: F401
                          log_to, stop_service, stranger_is_refused, wait_for, world)

SERVES_THE_MACHINES_CONFIG = True  # (conftest._unit_site_config; test_service.py's)
REAL = shim_main.dispatch  # the real commands (the daemon's children run the probe below)


def _state() -> dict:
    import fcntl
    import warnings

    from shim import siteconf
    from shim.gridengine import calls
    from shim.slurm.options import values
    from shim.store import state

    fds = [fd for fd in sorted(int(n) for n in os.listdir("/proc/self/fd")) if _ok(fd)]
    cloexec = [fd for fd in fds if fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC]
    umask = os.umask(0o22)
    os.umask(umask)
    return {"pid": os.getpid(), "argv": sys.argv, "cwd": os.getcwd(), "umask": umask,
            "env": {k: v for k, v in os.environ.items() if k.startswith("W1_")},
            "fds": [fd for fd in fds if fd not in cloexec],
            "cloexec": [os.readlink(f"/proc/self/fd/{fd}")[:7] for fd in cloexec],
            "usr2_ignored": signal.getsignal(signal.SIGUSR2) == signal.SIG_IGN,
            "hup_ignored": signal.getsignal(signal.SIGHUP) == signal.SIG_IGN,
            "usr1_blocked": signal.SIGUSR1 in signal.pthread_sigmask(signal.SIG_BLOCK, []),
            "command": calls.command, "why": calls._why, "uids_leak": "leak" in state._uids,
            "site_limit": values._site["max_array_size"], "config": type(siteconf._loaded).__name__,
            "filters": len(warnings.filters), "tz": os.environ.get("TZ"), "tzname": list(time.tzname)}


def _work(cmd, argv):
    """The daemon's command in these tests (options, words starting with "-", are skipped)."""
    words = [a for a in argv if not a.startswith("-")]
    what = words[0] if words else ""
    if what == "state":
        print(json.dumps(_state()))
        return 0
    if what in ("dirty", "sysexit", "raise"):  # everything a request could leave behind
        import warnings

        from shim import siteconf
        from shim.gridengine import calls
        from shim.slurm.options import values
        from shim.store import state

        os.environ["W1_LEAK"] = "left"
        os.environ.pop("W1_FIRST", None)
        os.umask(0)
        os.chdir("/")
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
        calls.command, calls._why = "dirty", "left"
        state._uids["leak"] = 1
        values.use_site(5)
        siteconf._loaded = object()
        sys.argv.append("left")
        os.open(os.devnull, os.O_RDONLY)  # a descriptor never closed
        warnings.simplefilter("ignore")
        print("dirty")
        if what == "sysexit":
            sys.exit(1)
        if what == "raise":
            raise RuntimeError("boom")
        return 3
    if what == "real":
        return REAL(cmd, argv[argv.index("real") + 1:])
    if what == "import":
        import colorsys  # noqa: F401 (not preloaded: its import-time state is this request's)
        return 0
    if what == "thread":
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        return 0
    if what == "child":
        subprocess.Popen(["sleep", "30"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return 0
    return _probe(cmd, words)


def start(d: Path, **bounds) -> int:
    """A daemon for d (forked from this test process) running _work, with the worker bounds given
    (server's WORKERS, WORKER_REQUESTS, WORKER_SECONDS; WORKERS=1 unless said: sequential calls
    then go to one worker, whose D the daemon reads before it hands the next); returns its pid."""
    bounds.setdefault("WORKERS", 1)
    d.mkdir(mode=0o700, exist_ok=True)
    pid = os.fork()
    if pid == 0:
        try:
            log_to(d)
            shim_main.dispatch = _work
            for k, v in bounds.items():
                setattr(service, k, v)
            os.chdir("/")  # (as server.serve)
            # a fixed stamp: this tree is edited while the tests run, and a changed package (tested in
            # test_service.py) would turn every request away in the middle of a test here
            service.code_stamp = lambda root=None, mapped=None: 0
            service.Service(str(d), 60.0).serve()
        finally:
            os._exit(0)
    wait_for(lambda: service.info(str(d)) is not None or _dead(pid), what="the service to answer")
    assert not _dead(pid)
    return pid


@pytest.fixture
def daemon(world, request):
    d = world / f"w-{request.node.name[:40]}"
    pid = start(d, **getattr(request, "param", {}))
    yield d
    stop_service(pid)


def state(cbin, d, *argv, env=None, **kw):
    cp = client(cbin, d, *argv, "state", cmd="sbatch", env=env, **kw)
    assert cp.returncode == 0, cp
    return json.loads(cp.stdout)


def test_two_plain_sbatch_in_a_row_each_run_in_their_own_state_in_one_worker(cbin, daemon, tmp_path):
    """The second request runs in the process the first ran in, with its own environment (the
    first's variables, set or left, absent), directory, umask, descriptors, argv, TZ, signals,
    and every module-level value the first changed put back."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    out_a, out_b = tmp_path / "out-a", tmp_path / "out-b"
    with open(out_a, "wb") as f:
        cp = client(cbin, daemon, "--job-name=x", "dirty", cmd="sbatch", env={"W1_FIRST": "1", "TZ": "UTC"}, cwd=a,
                    stdout=f, capture_output=False, stderr=subprocess.PIPE, preexec_fn=lambda: os.umask(0o077))
    assert cp.returncode == 3 and out_a.read_bytes() == b"dirty\n"
    first = state(cbin, daemon)  # (after the dirty one: the same worker, put back)
    with open(out_b, "wb") as f:
        cp = client(cbin, daemon, "--parsable", "state", cmd="sbatch", env={"W1_SECOND": "2", "TZ": "EST5EDT"},
                    cwd=b, stdout=f, capture_output=False, stderr=subprocess.PIPE,
                    preexec_fn=lambda: os.umask(0o027))
    assert cp.returncode == 0 and out_a.read_bytes() == b"dirty\n"
    second = json.loads(out_b.read_text())
    assert first["pid"] == second["pid"]  # reused: no fork for either
    assert first["env"] == {} and second["env"] == {"W1_SECOND": "2"}
    sbatch = str(cbin / "sbatch")
    assert (second["cwd"], second["umask"], second["argv"]) == (str(b), 0o027, [sbatch, "--parsable", "state"])
    assert (first["cwd"], first["argv"]) == (str(Path.cwd()), [sbatch, "state"])
    assert second["tz"] == "EST5EDT" and second["tzname"] == ["EST", "EDT"]
    for got in (first, second):
        assert got["fds"] == [0, 1, 2] and got["cloexec"] == ["socket:", "socket:"]  # (the report, the daemon's)
        assert not got["usr2_ignored"] and not got["usr1_blocked"] and not got["hup_ignored"]
        assert got["command"] != "dirty" and got["why"] != "left" and not got["uids_leak"]
        assert got["site_limit"] != 5 and got["config"] != "object"
    for k in ("command", "why", "site_limit", "config", "filters"):  # (the daemon's, as a fresh child has them)
        assert first[k] == second[k], k


def test_an_ignored_signal_of_one_caller_is_not_the_next_callers(cbin, daemon):
    held = state(cbin, daemon, preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    after = state(cbin, daemon)
    assert held["pid"] == after["pid"] and held["hup_ignored"] and not after["hup_ignored"]


def test_exit_codes_and_streams_are_each_callers(cbin, daemon):
    got = [client(cbin, daemon, "exit", str(n), cmd="sbatch") for n in (0, 5, 0, 2)]
    assert [(c.returncode, c.stdout, c.stderr) for c in got] == [(n, b"out\n", b"err\n") for n in (0, 5, 0, 2)]


@pytest.mark.parametrize("what, code, words", [("sysexit", 1, b""), ("raise", 1, b"internal error: RuntimeError: boom"),
                                               ("real", 255, b"sbatch: unrecognized option")])
def test_a_failing_request_leaves_the_next_one_clean(cbin, daemon, what, code, words):
    before = state(cbin, daemon)
    argv = ["real", "--bogus-option"] if what == "real" else [what]
    cp = client(cbin, daemon, *argv, cmd="sbatch", env={"W1_FIRST": "1"})
    assert cp.returncode == code and words in cp.stderr
    after = state(cbin, daemon)
    assert after["pid"] == before["pid"]
    assert after == before


@pytest.mark.parametrize("argv, env", [(["--wait"], {}), (["-W"], {}), (["--wai"], {}), (["-vW"], {}),
                                       (["--test-only"], {}), (["--test"], {}), ([], {"SBATCH_WAIT": "1"})])
def test_a_request_that_must_not_be_reused_forks(cbin, daemon, argv, env):
    worker = state(cbin, daemon)["pid"]
    once = state(cbin, daemon, *argv, env=env)
    assert once["pid"] != worker and state(cbin, daemon)["pid"] == worker
    assert _dead_soon(once["pid"])


def _dead_soon(pid: int) -> bool:
    wait_for(lambda: not os.path.exists(f"/proc/{pid}") or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2],
             timeout=10, what=f"process {pid} to exit")
    return True


def test_only_a_plain_sbatch_is_reusable():
    def req(cmd, *argv, env=()):
        r = service.Request()
        r.cmd, r.argv, r.env = cmd, [cmd.encode(), *argv], list(env)
        return r

    assert service.reusable(req("sbatch", b"-J", b"x", b"--wrap=sleep 1 -W", b"--wckey=a", b"job.sh"))
    assert service.reusable(req("sbatch", b"--time=5", b"-t", b"5", env=[b"SBATCH_WAIT_ALL_NODES=1"]))
    for argv in ([b"--wait"], [b"--w"], [b"--wait=1"], [b"-W"], [b"-JW"], [b"--test-only"], [b"--te"], [b"job.sh", b"-W"]):
        assert not service.reusable(req("sbatch", *argv)), argv
    assert not service.reusable(req("sbatch", env=[b"SBATCH_WAIT=1"]))
    assert not service.reusable(req("sbatch", env=[b"SBATCH_TEST_ONLY=1"]))
    assert not service.reusable(req("squeue"))


@pytest.mark.parametrize("daemon", [{"WORKER_REQUESTS": 3}], indirect=True)
def test_a_worker_runs_at_most_its_bound_of_requests(cbin, daemon):
    pids = [state(cbin, daemon)["pid"] for _ in range(7)]
    runs = [len(list(g)) for _, g in __import__("itertools").groupby(pids)]
    assert runs == [3, 3, 1] and len(set(pids)) == 3


@pytest.mark.parametrize("daemon", [{"WORKER_SECONDS": 0.0}], indirect=True)
def test_a_worker_past_its_age_takes_no_more_requests(cbin, daemon):
    pids = [state(cbin, daemon)["pid"] for _ in range(3)]
    assert len(set(pids)) == 3


@pytest.mark.parametrize("what", ["import", "thread", "child"])
def test_a_request_that_leaves_what_cannot_be_put_back_ends_its_worker(cbin, daemon, what):
    first = state(cbin, daemon)["pid"]
    assert client(cbin, daemon, what, cmd="sbatch").returncode == 0
    assert state(cbin, daemon)["pid"] != first
    assert _dead_soon(first)


def test_two_workers_run_two_requests_at_once(cbin, world, tmp_path):
    d = world / "two-workers"
    pid = start(d, WORKERS=2)
    try:
        marks = [tmp_path / "m1", tmp_path / "m2"]
        procs = [subprocess.Popen([str(cbin / "sbatch"), "sleep", str(m)], env=client_env(d)) for m in marks]
        wait_for(lambda: all(m.exists() and m.read_text() for m in marks), what="both commands to run")
        held = {int(m.read_text()) for m in marks}
        assert len(held) == 2  # at once, in two processes
        for p in procs:
            p.send_signal(signal.SIGINT)
        assert [p.wait(30) for p in procs] == [130, 130]
        after = {state(cbin, d)["pid"] for _ in range(4)}
        assert after <= held  # (the interrupted requests' workers stayed, clean)
    finally:
        stop_service(pid)


def test_a_killed_client_takes_its_workers_command_along_and_the_next_gets_a_new_worker(cbin, daemon, tmp_path):
    worker = state(cbin, daemon)["pid"]
    mark = tmp_path / "pid"
    p = subprocess.Popen([str(cbin / "sbatch"), "sleep", str(mark)], env=client_env(daemon))
    wait_for(lambda: mark.exists() and mark.read_text(), what="the command to run")
    assert int(mark.read_text()) == worker
    p.kill()
    p.wait()
    assert _dead_soon(worker)
    assert state(cbin, daemon)["pid"] != worker


def test_a_queued_request_whose_client_leaves_is_never_run(cbin, daemon, tmp_path):
    """WORKERS=1: a second request waits for the busy worker; its client killed meanwhile, it
    never runs (nothing was handed over to a process yet)."""
    mark, late = tmp_path / "pid", tmp_path / "late"
    busy = subprocess.Popen([str(cbin / "sbatch"), "sleep", str(mark)], env=client_env(daemon))
    wait_for(lambda: mark.exists() and mark.read_text(), what="the first command to run")
    queued = subprocess.Popen([str(cbin / "sbatch"), "sleep", str(late)], env=client_env(daemon))
    wait_for(lambda: _queued(daemon), what="the second request to be queued")
    queued.kill()
    queued.wait()
    busy.send_signal(signal.SIGINT)
    assert busy.wait(30) == 130
    state(cbin, daemon)  # (after the daemon read the queued client's end: nothing ran for it)
    assert not late.exists()


def _queued(d) -> bool:
    return served(d) >= 2  # (the busy one and the queued one: each counted at its go)


def test_a_foreign_uid_or_installation_never_reaches_a_worker(cbin, daemon, world):
    """The peer check and the installation check come before any worker: a connection of
    another uid is closed unanswered, a client of another installation runs its own code."""
    worker = state(cbin, daemon)["pid"]
    before = served(daemon)
    stranger_is_refused(daemon)
    other = world / "other-install-bin"
    if not other.exists():
        other.mkdir()
        fb = world / "other-install-fallback"
        fb.mkdir()
        (fb / "sbatch").write_text('#!/bin/sh\necho "other $*"\nexit 43\n')
        (fb / "sbatch").chmod(0o755)
        subprocess.run(["cc", "-O2", f'-DSHIM_FALLBACK="{fb}"', '-DSHIM_PYTHON="/opt/elsewhere/bin/python3"',
                        "-o", str(other / "sbatch"), str(service.package_root() + "/client/client.c")], check=True)
    cp = client(other, daemon, "state", cmd="sbatch")
    assert (cp.returncode, cp.stdout) == (43, b"other state\n")
    assert served(daemon) == before and state(cbin, daemon)["pid"] == worker
    assert _mntns()  # (the installation a request names: test_service's rule)


def test_a_service_lost_while_its_worker_runs_a_request_is_an_error_never_a_second_run(cbin, world):
    d = world / "lost-worker"
    pid = start(d)
    try:
        state(cbin, d)
        cp = client(cbin, d, "kill-service", cmd="sbatch")
        line = "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"
        assert (cp.returncode, cp.stdout, cp.stderr.decode()) == (1, b"", line + "\n")
    finally:
        stop_service(pid)
