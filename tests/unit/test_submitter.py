"""DRMAA submissions without Grid Engine: a real daemon process over its real unix socket, with a stub
``drmaa`` module that records what it was asked to submit. The failure modes of the no-loss /
no-double protocol (the daemon dies before or after runJob, before or after its journal, hangs, refuses)
are driven deterministically, and the fake backend answers the qstat token lookup from the stub's
record of what was "submitted"."""

from __future__ import annotations

import json
import os
import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import wait_until
from shim import proc, siteconf
from shim.gridengine import submitter
from shim.service import server
from shim.store import rundir
from shim.gridengine.engine import GridEngine
from shim.errors import BackendUnavailable
from shim.proc import Result

STUB = textwrap.dedent('''
    """A stand-in for the drmaa package: each runJob appends {id, native, script, cwd, env} to $STUB_LOG.
    $STUB_DIE makes the daemon die at one moment of a request (SIGKILL): before runJob reaches
    qmaster, after qmaster took the job (before the agent's journal), or after the journal (before
    the reply). The daemon itself has no such hook: the stub reaches into it from here."""
    import json, os, signal, sys, time

    STUB_LOG = os.environ.get("STUB_LOG") or __STUB_LOG__  # (a daemon a client started has no STUB_LOG)

    _DIE = os.environ.get("STUB_DIE", "")

    def _die():
        os.kill(os.getpid(), signal.SIGKILL)

    if _DIE == "after_journal":
        _agent = sys.modules["shim.gridengine.submitter"]
        _orig_send = _agent._send

        def _send(sock, obj, data=b""):
            if obj.get("status") == "ok" and "job" in obj:
                _die()
            return _orig_send(sock, obj, data)

        _agent._send = _send

    class errors:
        class DrmaaException(Exception): pass
        class DeniedByDrmException(DrmaaException): pass
        class DrmCommunicationException(DrmaaException): pass
        class InternalException(DrmaaException): pass
        class InvalidArgumentException(DrmaaException): pass
        class InvalidAttributeValueException(DrmaaException): pass
        class InvalidAttributeFormatException(DrmaaException): pass
        class ConflictingAttributeValuesException(DrmaaException): pass
        class UnsupportedAttributeException(DrmaaException): pass
        class InvalidJobTemplateException(DrmaaException): pass
        class AuthorizationException(DrmaaException): pass
        class TryLaterException(DrmaaException): pass
        class NoActiveSessionException(DrmaaException): pass

    class JobTemplate:
        remoteCommand = ""
        nativeSpecification = ""

    class Session:
        def initialize(self):
            if os.environ.get("STUB_INIT_FAIL"):
                raise errors.DrmCommunicationException("no qmaster")
            while os.environ.get("STUB_INIT_GATE") and not os.path.exists(os.environ["STUB_INIT_GATE"]):
                time.sleep(0.05)  # (a qmaster slow to take the session: until the test opens the gate)
        def createJobTemplate(self): return JobTemplate()
        def deleteJobTemplate(self, jt): pass
        def exit(self):
            if os.environ.get("STUB_EXIT_HANG"):
                time.sleep(3600)
        def _submit(self, jt):
            if "-q nosuch" in jt.nativeSpecification:
                raise errors.DeniedByDrmException('Job was rejected because job requests unknown queue "nosuch"')
            if "-q flaky" in jt.nativeSpecification:
                raise errors.InternalException("Error reading answer list from qmaster")
            if "-q slow" in jt.nativeSpecification:
                time.sleep(30)
            if _DIE == "before_submit":
                _die()
            log = STUB_LOG
            try:
                n = 100 + len(open(log).read().splitlines())
            except FileNotFoundError:
                n = 100
            with open(jt.remoteCommand, "rb") as f:
                script = f.read().decode()
            rec = {"id": n, "native": jt.nativeSpecification, "script": script, "cwd": os.getcwd(),
                   "path": os.environ.get("PATH"), "file": jt.remoteCommand, "pid": os.getpid()}
            with open(log, "a") as f:
                f.write(json.dumps(rec) + "\\n")
            if _DIE == "after_submit":
                _die()
            return n
        def runJob(self, jt): return str(self._submit(jt))
        def runBulkJobs(self, jt, a, b, c):
            n = self._submit(jt)
            return [f"{n}.{i}" for i in range(a, b + 1, c)]
''')


class Cfg:
    """The bits of a site config the client reads."""

    class gridengine:
        sge_root = "/var/lib/gridengine"
        sge_cell = "default"
        timeout = 5.0

    class submit:
        method = "agent"
        agent_idle_minutes = 10


class FakeBackend(GridEngine):  # the real operations (user_job_ids, detail_text, ...) over this transport
    """qstat answers from the stub's log (the jobs "in Grid Engine"); qsub submits with a new id."""

    name = "gridengine"

    def __init__(self, log: Path, down: bool = False, ended: bool = False):
        """ended: every job the stub submitted has already run and left qstat."""
        self.log, self.down, self.ended, self.calls = log, down, ended, []

    def jobs(self) -> list[dict]:
        if self.ended:
            return []
        try:
            return [json.loads(line) for line in self.log.read_text().splitlines()]
        except FileNotFoundError:
            return []

    def run(self, tool, args, *, input=None, timeout=None):
        self.calls.append((tool, list(args)))
        if self.down:
            return Result((tool,), 1, "", "error: commlib error: got select error (Connection refused)\n")
        if tool == "qstat" and args[0] == "-u":
            rows = "".join(f"{j['id']:>7} 0.00000 job        root         hqw   11/30/2026 09:00:00    1\n"
                           for j in self.jobs())
            return Result((tool,), 0, "job-ID  prior   name ...\n------\n" + rows, "")
        if tool == "qstat" and args[0] == "-j":
            want = set(args[1].split(","))
            out = ""
            for j in self.jobs():
                if str(j["id"]) in want:
                    ctx = j["native"].split("-ac ")[1].split()[0]
                    out += f"==============================================================\njob_number:    {j['id']}\n" \
                           f"owner:    root\ncontext:                    {ctx}\n"
            return Result((tool,), 0, out, "")
        if tool == "qsub":
            n = 100 + len(self.jobs())
            with open(self.log, "a") as f:
                f.write(json.dumps({"id": n, "native": "-ac via=qsub", "qsub": True}) + "\n")
            return Result((tool,), 0, f"{n}\n", "")
        raise AssertionError(f"unexpected {tool} {args}")


@pytest.fixture
def env(tmp_path, monkeypatch):
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "drmaa.py").write_text(STUB.replace("__STUB_LOG__", repr(str(tmp_path / "jobs.log"))))
    (stub / "libdrmaa.so.1.0").write_bytes(b"")  # what the agent finds before it imports drmaa (the stub's)
    d = tmp_path / "agent"
    d.mkdir(mode=0o700)
    e = {
        "SLURM_SHIM_AGENT_DIR": str(d),
        "STUB_LOG": str(tmp_path / "jobs.log"),
        "PYTHONPATH": str(stub),
        "GLIBC_TUNABLES": rundir.STATIC_TLS,
        "SGE_ROOT": "/var/lib/gridengine",
        "SGE_CELL": "default",
        "SLURM_SHIM_SERVICE_IDLE": "60",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "DRMAA_LIBRARY_PATH": str(stub / "libdrmaa.so.1.0"),  # (no libdrmaa needed on the machine)
    }
    for k, v in e.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    procs = []
    yield {"dir": d, "log": tmp_path / "jobs.log", "env": e, "procs": procs, "tmp": tmp_path}
    try:
        rundir.ask(str(d), "stop", timeout=2)
    except OSError:
        pass
    for p in procs:
        try:
            p.wait(10)
        except proc.TimeoutExpired:
            p.kill()
            p.wait()


def stub_serve_argv(env) -> list[str]:
    """A daemon (server.serve: without main's start_env re-exec, so the stub's variables stay)
    with the stub drmaa first on sys.path (it runs isolated, -I, so PYTHONPATH cannot bring it in)."""
    argv = proc.shim_python("service.server", "serve",
                            "from shim.store.rundir import service_dir; sys.exit(serve(service_dir()))")
    return _stub_argv(argv, env)


def _stub_argv(argv, env) -> list[str]:
    assert argv[1:3] == ["-I", "-c"]
    stub = str(env["tmp"] / "stub")
    return [argv[0], "-I", "-c", f"import sys; sys.path.insert(0, {stub!r}); " + argv[3]]


def serve(env, **extra) -> proc.Popen:
    """Run a daemon on the fixture's directory and wait until it answers."""
    e = {**os.environ, **env["env"], **extra}
    p = proc.popen(stub_serve_argv(env), env=e, stdin=proc.DEVNULL, stdout=proc.DEVNULL, stderr=proc.DEVNULL)
    env["procs"].append(p)

    def answers() -> bool:
        try:
            rundir.ask(str(env["dir"]), "ping", timeout=2)
            return True
        except OSError:
            assert p.poll() is None, (env["dir"] / rundir.LOG).read_text()
            return False

    wait_until(answers, 30, "the daemon to answer", delay=0.02, cap=0.2)
    return p


def wait_empty(d: Path, timeout: float = 5) -> None:
    wait_until(lambda: not os.listdir(d), timeout, lambda: f"{d} to be empty: {os.listdir(d)}", delay=0.01, cap=0.1)


def jobs(env) -> list[dict]:
    return FakeBackend(env["log"]).jobs()


ARGV = ["-terse", "-q", "debug", "-N", "job", "-o", "/dev/null", "-j", "y", "-wd", "/tmp", "-S", "/bin/sh", "-notify"]


# --------------------------------------------------------------------------------------------
# Pure parts


def test_native_spec_is_the_qsub_argv_minus_terse_plus_token():
    native, bulk = submitter.native_spec(ARGV, "abc")
    assert native.startswith("-w n -shell yes -q debug -N job ")
    assert native.endswith("-notify -b n -ac slurm_shim_token=abc")
    assert "-terse" not in native and bulk is None


def test_native_spec_takes_the_task_range_out_for_run_bulk_jobs():
    native, bulk = submitter.native_spec(["-t", "1-7", "-tc", "2"], "t")
    assert bulk == (1, 7, 1) and "-t " not in native and "-tc 2" in native
    assert submitter.native_spec(["-t", "3"], "t")[1] == (3, 3, 1)
    assert submitter.native_spec(["-t", "2-10:4"], "t")[1] == (2, 10, 4)


@pytest.mark.parametrize("argv", [["-N", "a b"], ["-M", "x'y"], ["-A", ""], ["-sync", "y"], ["-t", "5-1"]])
def test_native_spec_refuses_what_qsub_would_read_differently(argv):
    with pytest.raises(ValueError):
        submitter.native_spec(argv, "t")


def test_native_spec_gives_cwd_as_an_explicit_directory():
    """The agent submits from "/": -cwd (the client's directory) becomes -wd <that directory>."""
    native, _ = submitter.native_spec(["-cwd", "-N", "j"], "t", "/home/alice/proj")
    assert " -wd /home/alice/proj -N j " in native and "-cwd" not in native
    with pytest.raises(ValueError):
        submitter.native_spec(["-cwd"], "t", None)
    with pytest.raises(ValueError):
        submitter.native_spec(["-cwd"], "t", "/a dir")


def test_the_agent_has_no_test_hook():
    """F-19: nothing in the agent lets a variable kill it (the tests' dying agent is the stub's)."""
    text = Path(submitter.__file__).read_text()
    assert "TEST_DIE" not in text and "_die" not in text


def test_parse_contexts():
    text = ("==============================================================\njob_number:                 7\n"
            "context:                    a=b,slurm_shim_token=xyz\n"
            "==============================================================\njob_number:                 8\n")
    assert submitter.parse_contexts(text) == [(7, ["a=b", "slurm_shim_token=xyz"]), (8, [])]


def test_agent_dir_must_be_private(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    d = tmp_path / "a"
    assert rundir.service_dir({"SLURM_SHIM_AGENT_DIR": str(d)}) == str(d)
    assert d.stat().st_mode & 0o777 == 0o700
    d.chmod(0o755)
    assert rundir.service_dir({"SLURM_SHIM_AGENT_DIR": str(d)}) is None
    if os.getuid() == 0:
        d.chmod(0o700)
        os.chown(d, 65534, 65534)
        assert rundir.service_dir({"SLURM_SHIM_AGENT_DIR": str(d)}) is None
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    assert rundir.service_dir({"SLURM_SHIM_AGENT_DIR": str(link)}) is None


def test_agent_dir_prefers_the_users_runtime_dir(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert rundir.service_dir({"XDG_RUNTIME_DIR": str(run)}) == str(run / "slurm-shim")


def test_find_token_scans_the_users_jobs_newest_first(tmp_path):
    log = tmp_path / "jobs.log"
    log.write_text("".join(json.dumps({"id": 100 + i, "native": f"-ac slurm_shim_token=t{i}"}) + "\n"
                           for i in range(60)))
    b = FakeBackend(log)
    assert submitter.find_token("t59", b, "root") == 159
    assert [c[1][0] for c in b.calls] == ["-u", "-j"]
    assert b.calls[1][1][1].split(",")[0] == "159"
    assert submitter.find_token("t0", b, "root") == 100
    assert submitter.find_token("nope", b, "root") is None
    with pytest.raises(submitter.Unresolved):
        submitter.find_token("t1", FakeBackend(log, down=True), "root")


# --------------------------------------------------------------------------------------------
# Client against a real agent process


def test_submit_through_the_agent(env, tmp_path, monkeypatch):
    serve(env)
    monkeypatch.chdir(tmp_path)
    b = FakeBackend(env["log"])
    job = submitter.submit(ARGV, b"#!/bin/sh\necho hi\n", Cfg, b)
    [rec] = jobs(env)
    assert job == rec["id"] == 100
    assert rec["script"] == "#!/bin/sh\necho hi\n"
    assert rec["cwd"] == "/"  # F-8: never the client's directory (a planted ./.sge_request would apply)
    assert rec["path"] == os.environ["PATH"]
    assert " -ac slurm_shim_token=" in rec["native"]
    assert b.calls == []  # no qstat, no qsub
    assert os.listdir(env["dir"] / "spool") == []
    wait_empty(env["dir"] / "tokens")  # the agent removes its journal entry just after replying


def test_array_goes_through_run_bulk_jobs(env):
    serve(env)
    assert submitter.submit(["-t", "1-3", *ARGV], b"#!/bin/sh\n", Cfg, FakeBackend(env["log"])) == 100


def test_refused_means_qsub(env):
    serve(env)
    assert submitter.submit(["-N", "a b"], b"#!/bin/sh\n", Cfg, FakeBackend(env["log"])) is None
    assert submitter.submit(["-q", "nosuch"], b"#!/bin/sh\n", Cfg, FakeBackend(env["log"])) is None
    assert jobs(env) == []


@pytest.mark.parametrize("moment", ["before_submit", "after_submit", "after_journal"])
def test_agent_killed_mid_request_never_loses_or_doubles(env, moment):
    p = serve(env, STUB_DIE=moment)
    b = FakeBackend(env["log"])
    job = submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b)
    p.wait(10)
    assert p.returncode == -9
    if moment == "before_submit":  # nothing submitted: two looks say so, and sbatch will use qsub
        assert job is None and jobs(env) == []
        assert [c[0] for c in b.calls] == ["qstat", "qstat"]
    else:  # submitted: the journal or the context lookup finds the job, no qsub
        [rec] = jobs(env)
        assert job == rec["id"]
        tools = [c[0] for c in b.calls]
        assert "qsub" not in tools
        assert tools == ([] if moment == "after_journal" else ["qstat", "qstat"])
    wait_empty(env["dir"] / "tokens")


@pytest.mark.parametrize("found_at", [1, 2, None])
def test_a_job_that_already_ended_is_found_by_its_wrappers_record(env, monkeypatch, found_at):
    """The CI case: the answer to runJob was lost, and by the time sbatch looked the job (a
    ``true``) had run and left qstat. Its job wrapper's record of the submission (``seen``) finds
    it, at the first look or at the second (SETTLE later); only when neither look finds it does
    sbatch use qsub."""
    monkeypatch.setattr(submitter, "SETTLE", 0.05)
    p = serve(env, STUB_DIE="after_submit")
    b = FakeBackend(env["log"], ended=True)
    looks, events = [], []

    def seen():
        looks.append(1)
        events.append("look")
        return jobs(env)[0]["id"] if len(looks) == found_at else None

    real_sleep = time.sleep

    def sleep(s):
        events.append(s)
        real_sleep(s)

    monkeypatch.setattr(submitter.time, "sleep", sleep)
    job = submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b, seen=seen)
    monkeypatch.setattr(submitter.time, "sleep", real_sleep)
    p.wait(10)
    [rec] = jobs(env)
    assert job == (None if found_at is None else rec["id"])
    assert len(looks) == (found_at or 2)
    assert [c[0] for c in b.calls] == ["qstat"] * (found_at or 2)  # and never qsub
    if len(looks) == 2:  # the second look after SETTLE's wait
        assert [e for e in events if e in ("look", 0.05)] == ["look", 0.05, "look"]


def test_uncertain_drmaa_error_is_resolved_before_falling_back(env):
    serve(env)
    b = FakeBackend(env["log"])
    assert submitter.submit(["-q", "flaky"], b"#!/bin/sh\n", Cfg, b) is None
    assert [c[0] for c in b.calls] == ["qstat", "qstat"]


def test_an_uncertain_answer_retires_the_agents_session(env):
    """An answer lost on its way (a qmaster restarted under the session) means the session is not
    to be trusted again: the agent exits once it has answered, and the next client starts afresh."""
    p = serve(env)
    b = FakeBackend(env["log"])
    assert submitter.submit(["-q", "flaky"], b"#!/bin/sh\n", Cfg, b) is None
    assert p.wait(10) == 0


def test_unresolvable_outcome_is_a_slurm_error_not_a_fallback(env):
    p = serve(env, STUB_DIE="after_submit")
    b = FakeBackend(env["log"], down=True)
    with pytest.raises(BackendUnavailable) as ei:
        submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b)
    p.wait(10)
    assert ei.value.lines[0] == ("sbatch: error: Batch job submission failed: "
                                 "Unable to contact slurm controller (connect failure)")
    assert "qsub" not in [c[0] for c in b.calls]


def test_hung_agent_is_killed_then_resolved(env, monkeypatch):
    p = serve(env)

    class Quick(Cfg):
        class gridengine(Cfg.gridengine):
            timeout = 1.0

    b = FakeBackend(env["log"])
    assert submitter.submit(["-q", "slow"], b"#!/bin/sh\n", Quick, b) is None
    p.wait(5)
    assert p.returncode == -9  # killed after the site's timeout, not waited for
    assert [c[0] for c in b.calls] == ["qstat", "qstat"]


def test_no_agent_starts_one_and_uses_qsub(env, monkeypatch):
    started = []
    monkeypatch.setattr(proc, "popen", lambda argv, **kw: started.append((argv, kw)))
    b = FakeBackend(env["log"])
    assert submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b) is None
    assert submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b) is None  # one is starting: no second start
    [(argv, kw)] = started
    assert argv == rundir.serve_argv() and kw["start_new_session"] is True and kw["cwd"] == "/"
    assert kw["env"]["SLURM_SHIM_AGENT_DIR"] == str(env["dir"])
    assert "optional_static_tls" in kw["env"]["GLIBC_TUNABLES"]
    assert "STUB_LOG" not in kw["env"] and "PYTHONPATH" not in kw["env"]  # rundir.start_env's only
    os.utime(env["dir"] / rundir.STARTING, (time.time() - 60, time.time() - 60))  # a start that died
    assert submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b) is None
    assert len(started) == 2


def test_no_agent_is_started_inside_a_grid_engine_job(env, monkeypatch):
    started = []
    monkeypatch.setattr(proc, "popen", lambda argv, **kw: started.append(argv))
    e = dict(os.environ, JOB_ID="42", ENVIRONMENT="BATCH")
    assert submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, FakeBackend(env["log"]), environ=e) is None
    assert started == []


def test_started_agent_serves_the_next_call(env, monkeypatch):
    real_serve_argv = rundir.serve_argv()
    monkeypatch.setattr(rundir, "serve_argv", lambda: _stub_argv(real_serve_argv, env))
    # the daemon starts with rundir.start_env's variables only: the library is the site config's
    # (the stub's: no libdrmaa needed on the machine)
    monkeypatch.setattr(Cfg.gridengine, "drmaa_library", str(env["tmp"] / "stub" / "libdrmaa.so.1.0"), raising=False)
    b = FakeBackend(env["log"])
    assert submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b) is None

    def answers() -> bool:  # (its socket, and a daemon behind it that has finished starting)
        try:
            rundir.ask(str(env["dir"]), "ping", timeout=2)
            return True
        except OSError:
            return False

    wait_until(answers, 30, lambda: f"the started daemon to answer: {(env['dir'] / rundir.LOG).read_text()}",
               delay=0.05, cap=0.2)
    assert submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b) == 100
    assert not (env["dir"] / rundir.STARTING).exists()


def test_drmaa_failure_sends_submissions_to_qsub_for_a_while(env, monkeypatch):
    """DRMAA cannot start: the submission is refused (qsub), the daemon goes on serving, and until
    the time it wrote in submit.disabled sbatch does not even ask it (nor start one)."""
    serve(env, STUB_INIT_FAIL="1")
    b = FakeBackend(env["log"])
    assert submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b) is None
    assert (env["dir"] / rundir.DISABLED).exists() and b.calls == []  # refused: no lookup needed
    assert rundir.ask(str(env["dir"]), "ping")["drmaa"] is False
    asked, started = [], []
    monkeypatch.setattr(rundir, "connect", lambda *a: asked.append(a))
    monkeypatch.setattr(proc, "popen", lambda argv, **kw: started.append(argv))
    assert submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b) is None
    assert asked == started == [] and jobs(env) == []
    monkeypatch.undo()  # (the fixture's teardown stops the daemon through the real connect)


def test_a_session_slow_to_open_refuses_the_submission_rather_than_leave_it_uncertain(env, tmp_path):
    """The session takes longer than OPEN_WAIT to open: the submission is refused (nothing
    submitted, no lookup: the client uses qsub), the session goes on opening, and once it is open
    the next submission goes through it."""
    gate = tmp_path / "gate"
    serve(env, STUB_INIT_GATE=str(gate))
    b = FakeBackend(env["log"])
    assert submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b) is None
    assert b.calls == [] and jobs(env) == []  # refused, not uncertain
    assert not (env["dir"] / rundir.DISABLED).exists()  # (not a failure: no back-off)
    assert rundir.ask(str(env["dir"]), "ping")["drmaa"] is False
    gate.touch()
    wait_until(lambda: rundir.ask(str(env["dir"]), "ping")["drmaa"], 30, "the session to open", delay=0.05, cap=0.2)
    job = submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b)
    assert [j["id"] for j in jobs(env)] == [job]


def test_one_daemon_per_directory(env):
    serve(env)
    e = dict(os.environ, **env["env"])
    second = proc.popen(stub_serve_argv(env), env=e, stdin=proc.DEVNULL, stdout=proc.DEVNULL, stderr=proc.DEVNULL)
    assert second.wait(20) == 0
    assert rundir.ask(str(env["dir"]), "ping")["status"] == "ok"


def test_idle_daemon_exits_and_removes_its_socket(env):
    """A daemon no one asks: it serves (its log line names its socket), leaves by itself once idle
    and takes its socket with it. Not through serve(): its first ping raced the 0.5 s idle under
    load (the daemon had rightly left before the ping landed)."""
    log = env["tmp"] / "idle.log"
    with open(log, "wb") as err:
        p = proc.popen(stub_serve_argv(env), env={**os.environ, **env["env"], "SLURM_SHIM_SERVICE_IDLE": "0.5"},
                       stdin=proc.DEVNULL, stdout=proc.DEVNULL, stderr=err)
    env["procs"].append(p)
    assert p.wait(60) == 0
    assert f"serving {env['dir'] / rundir.SOCKET} (idle exit 0.5 s)" in log.read_text()
    assert not (env["dir"] / rundir.SOCKET).exists()


def test_daemon_exits_even_when_drmaa_exit_hangs(env):
    """drmaa_exit blocks while qmaster is unreachable: the daemon still ends, lock released first."""
    p = serve(env, SLURM_SHIM_SERVICE_IDLE="2", STUB_EXIT_HANG="1")
    assert submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, FakeBackend(env["log"])) == 100  # a session to close
    assert p.wait(30) == 0
    serve(env)  # the lock is free again
    assert rundir.ask(str(env["dir"]), "ping")["status"] == "ok"


def test_concurrent_clients_get_distinct_jobs(env):
    import threading

    serve(env)
    out, b = [], FakeBackend(env["log"])

    def one():
        out.append(submitter.submit(ARGV, b"#!/bin/sh\n", Cfg, b))

    threads = [threading.Thread(target=one) for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out) == list(range(100, 130))
    assert b.calls == []
    assert rundir.ask(str(env["dir"]), "ping")["submitted"] == 30


def test_other_users_are_turned_away(env):
    """The agent checks SO_PEERCRED; a peer of another uid gets no answer (needs root to fake one)."""
    if os.getuid() != 0:
        pytest.skip("needs root to connect as another uid")
    serve(env)
    os.chmod(env["dir"], 0o711)  # let uid 65534 reach the socket file, as a misconfigured dir would
    for parent in env["dir"].parents:
        if str(parent) in ("/", "/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o711)
    os.chmod(env["dir"] / rundir.SOCKET, 0o777)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child becomes nobody and tries
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(str(env["dir"] / rundir.SOCKET))
            try:
                rundir.send_json(s, {"kind": "ping"})
                msg = s.recv(100)
            except (BrokenPipeError, ConnectionResetError):
                msg = b""
            os.write(w, b"answered" if msg else b"refused")
        except BaseException as e:  # noqa: BLE001 - report anything to the parent
            os.write(w, repr(e).encode()[:200])
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    assert os.read(r, 300) == b"refused"
    os.chmod(env["dir"], 0o700)


def _raw_request(env, header: dict, script: bytes = b"") -> dict | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(env["dir"] / rundir.SOCKET))
    try:
        rundir.send_json(s, header, script)
        try:
            return rundir.recv_json(s)
        except (EOFError, ConnectionResetError):
            return None  # dropped without an answer
    finally:
        s.close()


def test_malformed_requests_leave_nothing_behind(env):
    """F-19: a request whose fields have the wrong types is refused before the agent writes or
    changes anything (no spool file left, no directory change); the agent goes on serving."""
    p = serve(env)
    base = {"kind": "submit", "token": "abc123", "argv": ["-N", "j"], "env": {}, "cwd": "/tmp",
            "sge_root": "/var/lib/gridengine", "sge_cell": "default", "script_len": 3}
    for bad in ({"env": "PATH=/x"}, {"env": {"PATH": 5}}, {"argv": "-N j"}, {"argv": [1]}, {"cwd": 7},
                {"token": ["x"]}, {"script_len": [3]}):
        reply = _raw_request(env, {**base, **bad}, b"#!\n")
        assert reply is None or reply["status"] == "refused", (bad, reply)
        assert os.listdir(env["dir"] / "spool") == []
    assert rundir.ask(str(env["dir"]), "ping")["status"] == "ok"
    assert os.readlink(f"/proc/{p.pid}/cwd") == "/"
    assert jobs(env) == []


# --------------------------------------------------------------------------------------------
# sbatch's routing


NS = siteconf.NS


def test_sbatch_routes_through_the_agent_only_when_configured(monkeypatch, tmp_path):
    """The agent is a transport of the real backend: GridEngineBackend.submit(agent=True) asks it
    first when the site says method = "agent", and runs qsub when it did not submit."""
    from shim.gridengine import backends
    from shim.operations import submit
    from shim.gridengine import process

    calls = []
    monkeypatch.setattr(submitter, "submit", lambda argv, script, cfg, backend, **kw: calls.append(argv) or 4242)

    class GE(process.GridEngineBackend):
        def __init__(self, cfg):
            self.cfg = cfg

        def run(self, tool, args, *, input=None, timeout=None):
            calls.append(tool)
            return Result((tool,), 0, "77\n", "")

    agent_cfg = NS(submit=NS(method="agent"))
    assert GE(agent_cfg).submit(["-terse"], b"#!/bin/sh\n", agent=True) == 4242
    assert calls == [["-terse"]]
    calls.clear()
    assert GE(agent_cfg).submit(["-terse"], b"#!/bin/sh\n") == 77  # salloc, --test-only: never the agent
    assert GE(NS(submit=NS(method="qsub"))).submit(["-terse"], b"#!/bin/sh\n", agent=True) == 77
    assert GE(NS()).submit(["-terse"], b"#!/bin/sh\n", agent=True) == 77  # an old cached config
    assert calls == ["qsub", "qsub", "qsub"]
    calls.clear()
    monkeypatch.setattr(submitter, "submit", lambda *a, **kw: None)  # the agent did not submit: qsub
    assert GE(agent_cfg).submit(["-terse"], b"#!/bin/sh\n", agent=True) == 77
    assert calls == ["qsub"]
    # sbatch's path asks for the agent; a transport without one (replay) just runs qsub
    calls.clear()
    backends.use(GE(agent_cfg))
    try:
        monkeypatch.setattr(submitter, "submit", lambda argv, script, cfg, backend, **kw: calls.append("agent") or 4243)
        assert submit.queue("sbatch", submit.FAILED, ["-terse"], b"#!/bin/sh\n", agent_cfg, {}, agent=True) == 4243
        assert submit.queue("salloc", "x", ["-terse"], b"#!/bin/sh\n", agent_cfg, {}) == 77
        assert calls == ["agent", "qsub"]
        from shim.gridengine.replay import ReplayBackend

        rb = ReplayBackend()
        rb.add("qsub", [], "78\n")
        backends.use(rb)
        assert submit.queue("sbatch", submit.FAILED, ["-terse"], b"#!/bin/sh\n", agent_cfg, {}, agent=True) == 78
    finally:
        backends.use(None)
        siteconf.reset()


def test_client_path_imports_stay_light():
    """sbatch pays for the client only: no drmaa, threading or pwd until a lookup is needed."""
    # what the interpreter loads by itself (a site hook may import threading) and the backend
    # sbatch has loaded already (its process transport) do not count
    code = ("import sys, shim.gridengine.process; base = set(sys.modules); import shim.gridengine.submitter; "
            "bad = {'drmaa', 'threading', 'fcntl', 'glob'} & (set(sys.modules) - base); print(sorted(bad))")
    out = proc.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(Path(submitter.__file__).parents[2])))
    assert out.stdout.strip() == "[]", out
