"""The warm per-user service (src/shim/service.py) and its thin C client (src/shim/client/client.c),
driven over a real socket: a real service process (its command replaced by a probe that reports
the process state it runs in, where a test says so), the compiled client, real fork children,
real descriptor passing, exit codes, signals, and each fallback before and after the hand-over.

The client under test is compiled here with a fake fallback (a shell script that prints
``fallback`` and exits 42), so a test tells "ran in the service" from "ran in-process" exactly.
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import as_foreground, wait_until

from shim.service import server as service

# the services these tests start serve the machine's site config, as a user's would (conftest._unit_site_config)
SERVES_THE_MACHINES_CONFIG = True

REPO = Path(__file__).resolve().parents[2]
CLIENT_C = REPO / "src" / "shim" / "client" / "client.c"
NOBODY = 65534


def wait_for(pred, timeout=20.0, what="condition"):
    """conftest.wait_until, polling faster (a local process, not Grid Engine's scheduler)."""
    return wait_until(pred, timeout, what, delay=0.01, cap=0.2)


@pytest.fixture(scope="module")
def world():
    """A world-readable scratch tree (other uids run the client in some tests)."""
    d = Path(tempfile.mkdtemp(prefix="shim-service-test-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def cbin(world):
    """The C client, built with a fallback that says so (exit 42) and this test's Python."""
    fb = world / "fallback"
    fb.mkdir()
    for c in (*service.SERVED, "srun"):
        p = fb / c
        p.write_text('#!/bin/sh\necho "fallback $(basename "$0") $*"\nexit 42\n')
        p.chmod(0o755)
    b = world / "bin"
    b.mkdir()
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", f'-DSHIM_FALLBACK="{fb}"', f'-DSHIM_PYTHON="{sys.executable}"',
                    "-o", str(b / "squeue"), str(CLIENT_C)], check=True)
    for c in (*service.SERVED, "srun"):
        if c != "squeue":
            shutil.copy2(b / "squeue", b / c)
    return b


def _probe(cmd, argv):
    """The command the probe services run: what the tests look at."""
    import fcntl

    what = argv[0] if argv else ""
    if what == "state":
        fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
        fds = [fd for fd in fds if _ok(fd)]
        cloexec = [fd for fd in fds if fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC]
        fds = [fd for fd in fds if fd not in cloexec]
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        out = {"cmd": cmd, "argv": sys.argv, "cwd": os.getcwd(), "umask": os.umask(0o22), "pid": os.getpid(),
               "env": {k: v for k, v in os.environ.items() if k.startswith("W1_")}, "fds": fds, "cloexec": [os.readlink(f"/proc/self/fd/{fd}")[:7] for fd in cloexec],
               "tty": [os.isatty(i) for i in range(3)], "hup_ignored": signal.getsignal(signal.SIGHUP) == signal.SIG_IGN,
               "usr1_blocked": signal.SIGUSR1 in mask, "stdout": [sys.stdout.encoding, sys.stdout.errors,
                                                                sys.stdout.line_buffering],
               "fd3_flags": fcntl.fcntl(3, fcntl.F_GETFL) if _ok(3) else None, "tz": os.environ.get("TZ"),
               "tzname": list(__import__("time").tzname)}
        print(json.dumps(out))
        return 0
    if what == "exit":
        print("out")
        print("err", file=sys.stderr)
        return int(argv[1])
    if what == "read":
        data = sys.stdin.buffer.read(int(argv[1]))
        sys.stdout.buffer.write(data[::-1])
        return 0
    if what == "fd3":
        os.write(3, b"through fd 3")
        return 0
    if what == "sleep":
        Path(argv[1]).write_text(str(os.getpid()))
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            return 130
        return 0
    if what == "kill-service":  # the service and then the command die: nobody reports an exit
        os.kill(os.getppid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    if what == "kill-service-only":  # the command outlives its service: its own exit code still counts
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(0.2)
        return 7
    return 9


def _ok(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def log_to(d: Path) -> None:
    """In a forked service: its stdout and stderr to d's service.log, its directory d."""
    fd = os.open(str(d / "service.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = sys.stderr = open(2, "w", closefd=False)  # (not pytest's capture)
    os.environ["SLURM_SHIM_AGENT_DIR"] = str(d)


def start_service(d: Path, probe=True, idle=60.0, root: Path | None = None, wait=True):
    """A service process for directory d (forked from this test process); returns its pid."""
    d.mkdir(mode=0o700, exist_ok=True)
    pid = os.fork()
    if pid == 0:
        try:
            log_to(d)
            if probe:
                import shim.__main__ as m

                m.dispatch = _probe
            if root is not None:
                service.package_root = lambda: str(root)
            service.Service(str(d), idle).serve()
        finally:
            os._exit(0)
    if wait:
        wait_for(lambda: service.info(str(d)) is not None or _dead(pid), what="the service to answer")
        assert not _dead(pid)
    return pid


def _dead(pid):
    try:
        got, _ = os.waitpid(pid, os.WNOHANG)
        return got == pid
    except ChildProcessError:
        return True


def stop_service(pid):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    wait_for(lambda: _dead(pid), what="the service to exit")


@pytest.fixture(scope="module")
def probe(world):
    d = world / "probe"
    pid = start_service(d)
    yield d
    stop_service(pid)


def served(d):
    got = service.info(str(d))
    assert got is not None, "the service does not answer"
    return got[1]


def client_env(d, env=None):
    e = {"PATH": "/usr/bin:/bin", "SLURM_SHIM_AGENT_DIR": str(d)}
    e.update({k: os.environ[k] for k in service.LOCALE_VARS if k in os.environ})  # the service's locale
    e.update(env or {})
    return e


def client(cbin, d, *argv, cmd="squeue", env=None, **kw):
    e = client_env(d, env)
    kw.setdefault("capture_output", True)
    kw.setdefault("timeout", 60)
    return subprocess.run([str(cbin / cmd), *argv], env=e, **kw)


def test_the_command_runs_in_the_clients_process_state(cbin, probe, tmp_path):
    before = served(probe)
    r, w = os.pipe()
    os.set_blocking(w, False)
    work = tmp_path / "work dir"
    work.mkdir()

    def prep():
        os.umask(0o027)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
        os.dup2(w, 3)

    cp = client(cbin, probe, "state", b"caf\xe9 \xff", cwd=work, env={"W1_X": "a b\nc", "TZ": "Asia/Tokyo"},
                preexec_fn=prep, close_fds=False)
    os.close(r)
    os.close(w)
    assert cp.returncode == 0, cp.stderr
    st = json.loads(cp.stdout)
    assert served(probe) == before + 1  # the service ran it, once
    assert st["pid"] != os.getpid() and st["cmd"] == "squeue"
    assert st["argv"] == [str(cbin / "squeue"), "state", os.fsdecode(b"caf\xe9 \xff")]
    assert st["cwd"] == str(work)
    assert st["umask"] == 0o027
    assert st["env"] == {"W1_X": "a b\nc"}
    assert st["tz"] == "Asia/Tokyo" and st["tzname"][0] == "JST"  # the zone as the client has it
    mine = {int(n) for n in os.listdir("/proc/self/fd") if _ok(int(n)) and os.get_inheritable(int(n))}
    assert st["fds"] == sorted(mine | {0, 1, 2, 3})  # the client's descriptors at their numbers, none of the service's
    assert st["cloexec"] == ["socket:"]  # but its report channel, which no program it starts inherits
    assert st["fd3_flags"] & os.O_NONBLOCK  # the same open file (its flags are the pipe's)
    assert st["tty"] == [False, False, False]
    assert st["hup_ignored"] and st["usr1_blocked"]


def test_exit_codes_and_both_streams(cbin, probe):
    for code in (0, 3, 255):
        cp = client(cbin, probe, "exit", str(code))
        assert (cp.returncode, cp.stdout, cp.stderr) == (code, b"out\n", b"err\n")


def _drain(master: int) -> bytes:
    """What a terminal's master side still has, up to the slave's last close (EIO or EOF)."""
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            return out
        if not chunk:
            return out
        out += chunk


def test_the_terminal_is_the_clients(cbin, probe):
    master, slave = pty.openpty()
    try:
        cp = client(cbin, probe, "state", stdin=slave, stdout=slave, stderr=subprocess.PIPE, capture_output=False)
        os.close(slave)
        slave = -1
        out = _drain(master)
        assert cp.returncode == 0, cp.stderr
        st = json.loads(out.decode().strip().splitlines()[-1])
        assert st["tty"] == [True, True, False]
        assert st["stdout"][2] is True  # line-buffered on a terminal, as a fresh interpreter's
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)


def test_stdin_is_the_clients_open_file(cbin, probe, tmp_path):
    f = tmp_path / "job.sh"
    f.write_bytes(b"0123456789abcdef")
    with open(f, "rb") as fh:
        fh.seek(2)
        cp = client(cbin, probe, "read", "4", stdin=fh)
        assert cp.stdout == b"5432"
        assert os.lseek(fh.fileno(), 0, os.SEEK_CUR) >= 6  # one file description: the offset moved here too


def test_a_descriptor_beyond_2_is_passed(cbin, probe):
    r, w = os.pipe()
    try:
        cp = client(cbin, probe, "fd3", preexec_fn=lambda: os.dup2(w, 3), close_fds=False)
        os.close(w)
        w = -1
        assert cp.returncode == 0, cp.stderr
        assert os.read(r, 100) == b"through fd 3"
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM),
                                       (signal.SIGHUP, -signal.SIGHUP)])
def test_signals_reach_the_command(cbin, probe, tmp_path, sig, code):
    pidfile = tmp_path / "pid"
    p = subprocess.Popen([str(cbin / "squeue"), "sleep", str(pidfile)], preexec_fn=as_foreground,
                         env=client_env(probe), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: pidfile.exists() and pidfile.read_text(), what="the command to start")
    child = int(pidfile.read_text())
    p.send_signal(sig)
    p.communicate(timeout=20)
    assert p.returncode == code  # as an in-process command: 130 after KeyboardInterrupt, else the signal's death
    wait_for(lambda: not Path(f"/proc/{child}").exists() or _zombie(child), what="the command to end")


def test_an_ignored_interrupt_stays_ignored(cbin, probe, tmp_path):
    """As in-process: a client that ignores SIGINT (started in the background) runs a command that
    ignores it too; the signal changes nothing, and SIGTERM still ends it."""
    pidfile = tmp_path / "pid"

    def background():
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    p = subprocess.Popen([str(cbin / "squeue"), "sleep", str(pidfile)], preexec_fn=background,
                         env=client_env(probe), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: pidfile.exists() and pidfile.read_text(), what="the command to start")
    child = int(pidfile.read_text())
    assert int(Path(f"/proc/{child}/status").read_text().split("SigIgn:")[1].split()[0], 16) & (1 << 1)
    p.send_signal(signal.SIGINT)
    with pytest.raises(subprocess.TimeoutExpired):
        p.wait(timeout=1)  # (nothing to wait on but the absence of an end: one bounded second)
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=20)
    assert p.returncode == -signal.SIGTERM
    wait_for(lambda: not Path(f"/proc/{child}").exists() or _zombie(child), what="the command to end")


def _zombie(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_a_killed_client_takes_its_command_along(cbin, probe, tmp_path):
    pidfile = tmp_path / "pid"
    p = subprocess.Popen([str(cbin / "squeue"), "sleep", str(pidfile)],
                         env=client_env(probe))
    wait_for(lambda: pidfile.exists() and pidfile.read_text(), what="the command to start")
    child = int(pidfile.read_text())
    p.kill()
    p.wait(timeout=20)
    wait_for(lambda: not Path(f"/proc/{child}").exists() or _zombie(child), what="the orphaned command to die")


def test_the_switch_forces_in_process(cbin, probe):
    before = served(probe)
    cp = client(cbin, probe, "exit", "0", env={"SLURM_SHIM_SERVICE": "off"})
    assert (cp.returncode, cp.stdout) == (42, "fallback squeue exit 0\n".encode())
    assert served(probe) == before


def test_commands_not_served_go_straight_to_python(cbin, probe):
    before = served(probe)
    cp = client(cbin, probe, "--pty", "true", cmd="srun")
    assert (cp.returncode, cp.stdout) == (42, b"fallback srun --pty true\n")
    assert served(probe) == before


def test_no_service_runs_in_process_and_starts_one(cbin, world):
    d = world / "fresh"
    d.mkdir(mode=0o700)
    cp = client(cbin, d, "exit", "0", env={"JOB_ID": "5", "ENVIRONMENT": "BATCH"})
    assert cp.returncode == 42
    assert not (d / "service.starting").exists() and not (d / "service.log").exists()  # never from a job
    cp = client(cbin, d, "exit", "0")
    assert (cp.returncode, cp.stdout) == (42, b"fallback squeue exit 0\n")  # in-process, once
    got = wait_for(lambda: service.info(str(d)), timeout=60, what="the started service")
    assert not (d / "service.starting").exists()
    os.kill(got[0], signal.SIGTERM)
    wait_for(lambda: service.info(str(d)) is None and not (d / "service.sock").exists(), what="its exit")


def test_each_site_config_has_a_directory_and_a_service_of_its_own(cbin, world):
    """A service serves one site config (the cell it was started for). With SLURM_SHIM_CONFIG set,
    the C client and service_dir (the daemon's one rule, sbatch's submissions' too) agree on a subdirectory
    of the user's private directory named for that config, so the commands of two cells (Debian's
    and OCS's) each get their own daemon instead of one refusing the other's."""
    from shim.gridengine import submitter

    rt = world / "rt-cells"
    rt.mkdir(mode=0o700)
    env = {"PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": str(rt)}
    env.update({k: os.environ[k] for k in service.LOCALE_VARS if k in os.environ})
    started = []
    try:
        for conf in ("/etc/slurm-shim/config.toml", "/etc/slurm-shim/ocs.toml"):
            e = {**env, "SLURM_SHIM_CONFIG": conf}
            want = rt / "slurm-shim" / service.cell_name(conf)
            cp = subprocess.run([str(cbin / "squeue"), "exit", "0"], env=e, capture_output=True, timeout=60)
            assert (cp.returncode, cp.stdout) == (42, b"fallback squeue exit 0\n")  # in-process; starts one
            got = wait_for(lambda: service.info(str(want)), timeout=60, what=f"the service of {conf}")
            started.append(got[0])
            assert service.service_dir(e) == submitter.service_dir(e) == str(want)
            assert want.stat().st_mode & 0o777 == 0o700
        assert len(set(started)) == 2
        assert service.service_dir(env) == str(rt / "slurm-shim")  # no config named: the directory itself
    finally:
        for pid in started:
            os.kill(pid, signal.SIGTERM)


def test_a_directory_others_may_enter_is_not_used(cbin, world):
    d = world / "open"
    d.mkdir(mode=0o700)
    d.chmod(0o755)
    cp = client(cbin, d, "exit", "0")
    assert cp.returncode == 42
    assert not (d / "service.starting").exists()  # no service is started there either


def stranger_is_refused(d: Path) -> None:
    """Make the service's socket in ``d`` reachable by anyone (a misconfigured directory), and check
    that nobody, connecting from a forked child, is closed on without a word; ``d`` and the socket
    are put back to 0700 and 0600 after."""
    d.chmod(0o711)
    sock = d / "service.sock"
    sock.chmod(0o666)
    try:
        # nobody connects from a forked child (no exec: this venv's interpreter may sit where
        # nobody cannot run it, e.g. under root's home) and reports what it heard by its exit code
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                s = socket.socket(socket.AF_UNIX)
                s.settimeout(10)
                s.connect(str(sock))
                code = 0 if s.recv(100) == b"" else 1  # 0: closed without a word
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        d.chmod(0o700)
        sock.chmod(0o600)


def test_the_service_serves_only_its_own_uid(world, probe):
    """A socket another user can reach (a misconfigured directory): the service says nothing to them."""
    before = served(probe)
    stranger_is_refused(probe)
    assert served(probe) == before


def test_the_client_talks_only_to_a_service_of_its_uid(cbin, world):
    d = world / "nobody"
    d.mkdir(mode=0o700)
    os.chown(d, NOBODY, NOBODY)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(d / "service.sock"))  # root's socket in nobody's directory
    os.chmod(d / "service.sock", 0o666)
    listener.listen(8)
    listener.settimeout(0.2)
    try:
        cp = client(cbin, d, "exit", "0", user=NOBODY)
        assert (cp.returncode, cp.stdout) == (42, b"fallback squeue exit 0\n")
        try:
            conn, _ = listener.accept()
            conn.settimeout(2)
            assert conn.recv(100) == b""  # the client sent nothing to root's socket
            conn.close()
        except socket.timeout:
            pass
    finally:
        listener.close()


def test_no_go_no_run(probe):
    """A request answered O runs only after the client's G: a client that leaves first ran nothing."""
    before = served(probe)
    s = _answered_o(probe)
    s.close()
    time.sleep(0.2)  # give a wrong service the time to run it anyway
    assert served(probe) == before


def test_a_client_that_stalls_before_its_go_holds_up_no_one(cbin, probe):
    before = served(probe)
    stalled = _answered_o(probe)  # answered O, no G yet
    try:
        t0 = time.monotonic()
        cp = client(cbin, probe, "exit", "0")
        assert cp.returncode == 0 and time.monotonic() - t0 < service.REQUEST_TIMEOUT
        assert served(probe) == before + 1
    finally:
        stalled.close()
    time.sleep(0.2)
    assert served(probe) == before + 1  # the stalled one never ran


def _answered_o(probe):
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(probe / "service.sock"))
    cwd = os.open(".", os.O_PATH | os.O_DIRECTORY)
    env = [f"{k}={os.environ[k]}".encode() for k in service.LOCALE_VARS if k in os.environ]
    words = b"\0".join([b"squeue", b"squeue", b"exit", b"0", *env, _mntns()]) + b"\0"
    body = struct.pack(f"={len(os.getgroups())}I", *os.getgroups()) + struct.pack(
        f"={2 * service.NLIMITS}Q", *[x for pair in service._limits() for x in pair]) + words
    head = struct.pack(service.HEADER, service.MAGIC, len(body), 3, len(env), 0, len(os.getgroups()), 0o22,
                       os.getuid(), os.getgid(), 0, 0, 0)
    s.sendmsg([head], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", cwd))])
    s.sendall(body)
    kind, _ = struct.unpack("=Ii", s.recv(8))
    os.close(cwd)
    assert kind == ord("O")
    return s


def _mntns():
    return os.fsencode(os.readlink("/proc/self/ns/mnt")) + b"\n" + os.fsencode(sys.executable)


def test_a_client_of_another_installation_runs_its_own_code(world, probe):
    """One service per user, but maybe two installations (a second prefix, a pipx one): a client
    built for another interpreter is refused before anything runs and falls back to its own
    Python command, never served by this installation's code."""
    fb = world / "other-fallback"
    fb.mkdir()
    (fb / "squeue").write_text('#!/bin/sh\necho "other $*"\nexit 43\n')
    (fb / "squeue").chmod(0o755)
    other = world / "other-bin"
    other.mkdir()
    subprocess.run(["cc", "-O2", "-Wall", "-Werror", f'-DSHIM_FALLBACK="{fb}"', '-DSHIM_PYTHON="/opt/elsewhere/bin/python3"',
                    "-o", str(other / "squeue"), str(CLIENT_C)], check=True)
    before = served(probe)
    cp = client(other, probe, "exit", "0")
    assert (cp.returncode, cp.stdout) == (43, b"other exit 0\n")
    assert served(probe) == before


def test_bounded_frames_are_refused(probe):
    before = served(probe)
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(probe / "service.sock"))
    cwd = os.open(".", os.O_PATH | os.O_DIRECTORY)
    head = struct.pack(service.HEADER, service.MAGIC, service.MAX_BODY + 1, 1, 0, 0, 0, 0o22, os.getuid(),
                       os.getgid(), 0, 0, 0)
    s.sendmsg([head], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", cwd))])
    os.close(cwd)
    assert struct.unpack("=Ii", s.recv(8)) == (ord("R"), service.R_BAD)
    s.close()
    assert served(probe) == before


def test_different_limits_or_locale_run_in_process(cbin, probe):
    before = served(probe)
    cp = client(cbin, probe, "exit", "0", preexec_fn=lambda: __import__("resource").setrlimit(
        __import__("resource").RLIMIT_NOFILE, (256, 256)))
    assert cp.returncode == 42
    cp = client(cbin, probe, "exit", "0", env={"LC_ALL": "POSIX"})
    assert cp.returncode == 42
    assert served(probe) == before


def test_another_site_config_runs_in_process(cbin, probe):
    """A service serves the site config (the cell) it was started for: a command of another cell
    (SLURM_SHIM_CONFIG=/etc/slurm-shim/ocs.toml beside Debian's) runs in-process. A precaution:
    the service's preloaded modules were made under its first caller's environment, and the OCS
    suite runs after the Debian one with the same user's service."""
    before = served(probe)
    cp = client(cbin, probe, "exit", "0", env={"SLURM_SHIM_CONFIG": "/etc/slurm-shim/other.toml"})
    assert cp.returncode == 42
    assert served(probe) == before
    # and the service's log says why, once per kind (a warm path that is never taken is visible)
    log = (probe / "service.log").read_text()
    assert log.count("refusing a request: another identity, mount namespace or site config") == 1


def test_a_changed_package_is_never_served(cbin, world, tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    mod = root / "sub" / "mod.py"
    mod.write_text("x = 1\n")
    d = world / "stale"
    pid = start_service(d, root=root)
    try:
        assert client(cbin, d, "exit", "0").returncode == 0
        mod.write_text("x = 22\n")  # an edit of the tree (or an upgrade)
        cp = client(cbin, d, "exit", "0")
        assert (cp.returncode, cp.stdout) == (42, b"fallback squeue exit 0\n")  # not the old code: in-process
        wait_for(lambda: _dead(pid), what="the stale service to leave")
        assert not (d / "service.sock").exists()
    finally:
        stop_service(pid)


@pytest.mark.parametrize("cmd, line", [
    ("squeue", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"),
    ("sbatch", "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"),
    ("sinfo", "slurm_load_partitions: Unable to contact slurm controller (connect failure)"),
])
def test_a_service_lost_after_the_handover_is_an_error_never_a_second_run(cbin, world, cmd, line):
    from shim.gridengine.calls import _prefix

    assert line.startswith(_prefix(cmd))  # the C client's words are the Python commands'
    d = world / f"lost-{cmd}"
    pid = start_service(d)
    try:
        cp = client(cbin, d, "kill-service", cmd=cmd)
        assert (cp.returncode, cp.stdout, cp.stderr.decode()) == (1, b"", line + "\n")  # no "fallback"
    finally:
        stop_service(pid)


def test_a_command_that_outlives_its_service_reports_its_own_exit(cbin, world):
    d = world / "outlive"
    pid = start_service(d)
    try:
        cp = client(cbin, d, "kill-service-only")
        assert (cp.returncode, cp.stdout) == (7, b"")
    finally:
        stop_service(pid)


def test_the_spare_child_is_used_and_replaced(cbin, probe):
    """The service forks its next child ahead; each call still gets a fresh process."""
    pids = {json.loads(client(cbin, probe, "state").stdout)["pid"] for _ in range(4)}
    assert len(pids) == 4


def test_the_spare_holds_nothing_of_the_service_and_leaves_with_it(world):
    """The spare child waits with one descriptor of its own (besides 0-2): never the service's
    lock, socket or another connection. A spare that held the lock once kept a service that was
    leaving (stale code) waiting on it for good, and no new service could start for the user."""
    import fcntl

    d = world / "spare"
    pid = start_service(d)
    children = Path(f"/proc/{pid}/task/{pid}/children")
    spare = int(wait_for(lambda: children.read_text().split(), what="the spare child")[0])

    def fds():
        return {int(n): os.readlink(f"/proc/{spare}/fd/{n}") for n in os.listdir(f"/proc/{spare}/fd")}

    def settled():  # the spare closes what it inherited right after the fork: wait for that, bounded
        held = fds()
        return held if len([n for n in held if n > 2]) == 1 else None

    held = wait_for(settled, timeout=10, what="the spare to close all it inherited but its own end")
    assert not any(t.endswith(("service.lock", "service.sock")) for t in held.values()), held
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: _dead(pid), timeout=10, what="the service to leave")
    fd = os.open(str(d / "service.lock"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free: a new service may start
    finally:
        os.close(fd)


def test_the_service_exits_when_idle(world):
    d = world / "idle"
    pid = start_service(d, idle=0.5, wait=False)
    wait_for(lambda: _dead(pid), timeout=60, what="the idle service to exit")
    assert not (d / "service.sock").exists()
    log = (d / "service.log").read_text()
    assert "serving" in log and "exit after 0 requests" in log


def test_the_private_directory_rules(tmp_path):
    """One rule for every caller of the daemon (sbatch's DRMAA submissions use service.service_dir
    too): the user's own directory, mode 0700, not a link."""
    from shim.gridengine import submitter

    assert submitter.service_dir is service.service_dir
    good = tmp_path / "good"
    cases = {"SLURM_SHIM_AGENT_DIR": str(good)}
    assert service.service_dir(cases) == str(good) and good.stat().st_mode & 0o777 == 0o700
    (tmp_path / "wide").mkdir(mode=0o755)
    (tmp_path / "wide").chmod(0o755)
    os.symlink(good, tmp_path / "link")
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    os.chown(other, NOBODY, NOBODY)
    for name in ("wide", "link", "other"):
        env = {"SLURM_SHIM_AGENT_DIR": str(tmp_path / name)}
        assert service.service_dir(env) is None, name
    rt = tmp_path / "run"
    rt.mkdir()
    env = {"XDG_RUNTIME_DIR": str(rt)}
    assert service.service_dir(env) == str(rt / "slurm-shim")


@pytest.fixture(scope="module")
def real(world):
    """A service running the real commands."""
    d = world / "real"
    static = world / "real-package"  # (its stamp: edits of the tree elsewhere do not restart it)
    static.mkdir()
    pid = start_service(d, probe=False, root=static)
    yield d
    stop_service(pid)


@pytest.mark.parametrize("argv", [["squeue", "--version"], ["squeue", "--usage"], ["sbatch", "--badopt"],
                                  ["scontrol", "--help"], ["sacct", "--helpformat"], ["scancel"],
                                  ["sinfo", "--bogus=1"], ["sbatch", "--wrap"]])
def test_real_commands_say_the_same_bytes_as_in_process(cbin, real, argv):
    before = served(real)
    warm = client(cbin, real, *argv[1:], cmd=argv[0])
    py = [sys.executable, "-I", "-c", f"from shim.__main__ import {argv[0]} as m; m()", *argv[1:]]
    cold = subprocess.run(py, capture_output=True, timeout=60,
                          env=client_env(real, {"SLURM_SHIM_AGENT_DIR": ""}))
    assert served(real) == before + 1
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)


def test_the_python_client_is_the_same_protocol(real):
    before = served(real)
    env = client_env(real)
    cp = subprocess.run([sys.executable, "-I", "-c", "from shim.service import client; client('squeue')", "--version"],
                        capture_output=True, env=env, timeout=60)
    assert cp.returncode == 0 and cp.stdout == f"slurm-wlm {served_release()}\n".encode()
    assert served(real) == before + 1


def served_release() -> str:
    """The Slurm version the machine's site config follows (what the service serves: 22.05.8 on a
    cell scripts/setup brought up, 26.05.5 with no config: client_env names none)."""
    from shim import config
    from shim.admin import cluster
    from shim.slurm import releases

    return releases.get(cluster.kept_release(config.DEFAULT_PATH) or releases.DEFAULT).version


def test_a_reader_that_leaves_early_gets_what_in_process_gives(cbin, real):
    """``sacct --helpformat | (exit)``: stdout's reader is gone; the exit code (120) and the
    interpreter's last words on stderr are the in-process ones."""
    out = []
    for argv in ([str(cbin / "sacct")], [sys.executable, "-I", "-c", "from shim.__main__ import sacct as m; m()"]):
        r, w = os.pipe()
        os.close(r)
        before = served(real)
        cp = subprocess.run([*argv, "--helpformat"], stdout=w, stderr=subprocess.PIPE, env=client_env(real),
                            timeout=60)
        os.close(w)
        out.append((cp.returncode, cp.stderr, served(real) - before))
    assert out[0][2] == 1 and out[1][2] == 0
    assert out[0][:2] == out[1][:2]


def _on_a_terminal(argv, env, typed: bytes) -> tuple[int, bytes]:
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    out = b""
    while b"scontrol: " not in out:  # typed after the first prompt: the echo's place is fixed
        chunk = os.read(master, 65536)
        assert chunk, out
        out += chunk
    os.write(master, typed)
    out += _drain(master)
    os.close(master)
    return p.wait(timeout=60), out


def test_scontrol_prompts_on_the_callers_terminal(cbin, real):
    """scontrol with no command reads commands, with its prompt when stdin is a terminal: the
    terminal is the caller's, so the prompt and the answers are the in-process ones."""
    before = served(real)
    warm = _on_a_terminal([str(cbin / "scontrol")], client_env(real), b"version\nquit\n")
    assert served(real) == before + 1
    cold = _on_a_terminal([sys.executable, "-I", "-c", "from shim.__main__ import scontrol as m; m()"],
                          client_env(real), b"version\nquit\n")
    assert warm == cold
    assert warm[1] == f"scontrol: version\r\nquit\r\nslurm-wlm {served_release()}\r\nscontrol: ".encode()


def test_install_client_does_what_setup_does(tmp_path):
    """service.install_client (for `slurm-shim install`): each served command's pip script moves
    to libexec/slurm-shim and the compiled client takes its place; run twice, the same."""
    b = tmp_path / "bin"
    b.mkdir()
    for c in (*service.SERVED, "srun"):
        (b / c).write_text("#!/opt/slurm-shim/bin/python3 -I\nprint('python')\n")
        (b / c).chmod(0o755)
    for _ in range(2):
        assert service.install_client(str(tmp_path)) == list(service.SERVED)
    lx = tmp_path / "libexec" / "slurm-shim"
    for c in service.SERVED:
        assert (b / c).read_bytes()[:4] == b"\x7fELF"
        assert (lx / c).read_text().startswith("#!/opt/slurm-shim/bin/python3 -I\n")
        assert str(lx).encode() in (b / c).read_bytes()  # its fallback
    assert (b / "srun").read_text().startswith("#!")  # not served: untouched
    assert not (lx / "srun").exists() and not (lx / ".client.new").exists()


HELPER = r"""
import fcntl, os, sys, termios
slave = os.open(sys.argv[1], os.O_RDWR)
os.setsid()
fcntl.ioctl(slave, termios.TIOCSCTTY, 0)  # the terminal's session; this process's group in the foreground
pid = os.fork()
if pid == 0:
    if sys.argv[2] == "background":
        os.setpgid(0, 0)  # a job of its own, not the terminal's foreground
    os.dup2(slave, 0)
    os.execv(sys.argv[3], sys.argv[3:])
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("where, served_it", [("foreground", True), ("background", False)])
def test_a_background_job_of_its_terminal_runs_in_process(cbin, probe, where, served_it):
    """Job control is the terminal driver's: a client in the background of its controlling
    terminal runs the command itself (SIGTTIN would stop an in-process reader there)."""
    master, slave = pty.openpty()
    try:
        before = served(probe)
        cp = subprocess.run([sys.executable, "-I", "-c", HELPER, os.ttyname(slave), where, str(cbin / "squeue"),
                             "exit", "0"], capture_output=True, env=client_env(probe), timeout=60)
        assert cp.returncode == (0 if served_it else 42), cp.stderr
        assert served(probe) == before + served_it
    finally:
        os.close(master)
        os.close(slave)
