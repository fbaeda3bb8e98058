"""The messages each release words differently where the shim makes them (issue 30, releases.py's
rules): slurmstepd's lines in a job's output and srun's stderr (STEPD_STAMP, CANCEL_SIGNAL_NAMED),
each compared with the bytes that real release printed: its capture (fixtures/slurm-*/cases.json,
timeout-job-output.txt, scancel-signal-joboutput.txt) and what it answered when asked
(fixtures/slurm-{24.11,26.05}/oracle-messages.txt)."""

from __future__ import annotations

import calendar
import os
import queue
import re
import signal
import time

import pytest

from conftest import FIXTURES, release_cases, wait_until
from shim import proc
from shim.runtime import jobwrap, stepd, steps
from shim.slurm import releases

NAMES = ("22.05", "24.11", "26.05")


@pytest.fixture
def utc(monkeypatch):
    """Local time is UTC, as on the machines the references were captured on."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def fixture_text(name: str, file: str) -> str:
    return (FIXTURES / f"slurm-{name}" / file).read_text()


def oracle(name: str, key: str) -> str:
    """The answer to the question ``### <key>: ...`` of oracle-messages.txt (up to the next one)."""
    text = fixture_text(name, "oracle-messages.txt")
    m = re.search(rf"^### {re.escape(key)}: [^\n]*\n(.*?)(?=^### )", text, re.S | re.M)
    assert m, key
    return m[1]


def line_with(text: str, marker: str) -> str:
    [line] = [ln for ln in text.splitlines() if marker in ln]
    return line


def when(line: str) -> float:
    """The moment a captured line was written: its [stamp.ms] (26.05), else its CANCELLED AT time
    (UTC, as captured)."""
    m = re.match(r"\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})\]", line) or \
        re.search(r"CANCELLED AT (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)()", line)
    if not m:
        return 0.0
    return calendar.timegm(time.strptime(m[1], "%Y-%m-%dT%H:%M:%S")) + int(m[2] or 0) / 1000 + 0.0004


def redo(line: str, rel, *, why: str | None = None, sig: int | None = None) -> str:
    """stepd's cancellation line for what and where the captured ``line`` names, at its moment."""
    m = re.search(r"\*\*\* ((?:JOB|STEP) \S+) ON (\S+) CANCELLED AT ", line)
    assert m, line
    return stepd.cancelled(m[1], m[2], why=why, sig=sig, rel=rel, now=when(line)).rstrip("\n")


def test_the_rules_are_26_05s():
    assert [releases.get(n).has(releases.STEPD_STAMP) for n in NAMES] == [False, False, True]
    assert [releases.get(n).has(releases.CANCEL_SIGNAL_NAMED) for n in NAMES] == [False, False, True]


# --- the lines, against each release's own ------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_execve_line_as_each_release(utc, name):
    """``srun nosuchcommand``: slurmstepd's execve line (22.05, 24.11 ``slurmstepd-vm: error:``;
    26.05 ``[time.ms] error:``)."""
    err = release_cases(name)["srun_err_command_not_found"]["stderr"]
    line = line_with(err, "execve()")
    made = stepd.error("vm", "execve(): nosuchcommand: No such file or directory", releases.get(name), when(line))
    assert made == line + "\n"


@pytest.mark.parametrize("name", NAMES)
def test_time_limit_lines_as_each_release(utc, name):
    """A step past its limit (``srun -t 1 sleep 300``) and a batch job past its limit: ``DUE TO
    TIME LIMIT`` in every release, in that release's frame."""
    rel = releases.get(name)
    step = line_with(release_cases(name)["srun_time_limit"]["stderr"], "CANCELLED AT")
    assert redo(step, rel, why="TIME LIMIT") == step
    job = line_with(fixture_text(name, "timeout-job-output.txt"), "CANCELLED AT")
    assert redo(job, rel, why="TIME LIMIT") == job


@pytest.mark.parametrize("name", NAMES)
def test_scancel_b_s_term_line_as_each_release(utc, name):
    """``scancel -b -s TERM`` of a batch job: 22.05 and 24.11 end at the time, 26.05 names the
    signal (``DUE to SIGNAL Terminated``)."""
    text = fixture_text(name, "scancel-signal-joboutput.txt")
    first = next(ln for ln in text.splitlines() if "CANCELLED AT" in ln and "*** JOB" in ln)
    assert redo(first, releases.get(name), sig=signal.SIGTERM) == first


@pytest.mark.parametrize("name", ["24.11", "26.05"])
def test_cancel_lines_asked_of_each_release(utc, name):
    """What the release answered: ``scancel N`` of a batch job (TERM), ``scancel -b -s KILL``,
    ``scancel N.0`` (the step gets KILL), srun's own job cancelled (TERM), ``scancel -s TERM`` of
    a step, a step's missing working directory."""
    rel = releases.get(name)
    for key, what, sig in (("A", "*** JOB", signal.SIGTERM), ("I", "*** JOB", signal.SIGKILL),
                           ("D", "*** STEP", signal.SIGKILL), ("G", "*** STEP", signal.SIGTERM),
                           ("C", "*** STEP", signal.SIGTERM), ("H", "*** STEP", signal.SIGTERM)):
        line = line_with(oracle(name, key), what)
        assert redo(line, rel, sig=sig) == line, key
    chdir = oracle(name, "F").splitlines()[0]
    msg = "couldn't chdir to `/nonexistent/dir': No such file or directory: going to /tmp instead"
    assert stepd.error("vm", msg, rel, when(chdir)) == chdir + "\n"
    if name == "26.05":
        assert "DUE to SIGNAL Killed" in line_with(oracle(name, "D"), "*** STEP")


def test_a_signal_without_a_name():
    assert stepd.signal_text(signal.SIGTERM) == "Terminated"
    assert stepd.signal_text(999) == "Unknown signal 999"


# --- where the shim writes them -------------------------------------------------------------------------

def shape(line: str) -> str:
    """A line with its times and ids as placeholders."""
    line = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?", lambda m: "T.ms" if m[1] else "T", line)
    return re.sub(r"\b(JOB|STEP) [\d.]+", r"\1 N", line)


@pytest.fixture
def sleeper():
    child = proc.popen(["sleep", "60"], start_new_session=True)
    yield child
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()


def runner(child, err_fd: int) -> jobwrap.Runner:
    r = jobwrap.Runner({"notify_kill": 30})
    r.child, r.err_fd, r.host, r.label = child, err_fd, "vm", "7"
    return r


@pytest.mark.parametrize("name", NAMES)
def test_the_batch_step_at_its_time_limit_prints_the_releases_line(release_site, tmp_path, sleeper, name):
    """The job wrapper's time limit: slurmstepd's ``DUE TO TIME LIMIT`` line (as the release's
    timeout-job-output.txt has it), then SIGTERM to the script."""
    release_site(name)
    err = tmp_path / "err"
    fd = os.open(err, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        r = runner(sleeper, fd)
        r.events = [(time.time() - 1, "term", signal.SIGTERM)]
        r.fire()
    finally:
        os.close(fd)
    wait_until(lambda: sleeper.poll() is not None, 10, "the script's end")
    want = line_with(fixture_text(name, "timeout-job-output.txt"), "CANCELLED AT")
    assert [shape(ln) for ln in err.read_text().splitlines()] == [shape(want)]
    assert r.timed_out and sleeper.returncode == -signal.SIGTERM


@pytest.mark.parametrize("name", NAMES)
def test_scancel_of_the_batch_step_prints_the_releases_line_once(release_site, tmp_path, sleeper, name):
    """scancel (Grid Engine's notice before its kill, SIGUSR2): slurmstepd's CANCELLED line once
    (22.05 and 24.11 end at the time; 26.05 says ``DUE to SIGNAL Terminated``, as asked of it)."""
    release_site(name)
    err = tmp_path / "err"
    fd = os.open(err, os.O_WRONLY | os.O_CREAT, 0o644)
    old = signal.getsignal(signal.SIGALRM)
    try:
        r = runner(sleeper, fd)
        r.on_cancel(signal.SIGUSR2, None)
        r.on_cancel(signal.SIGUSR2, None)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        os.close(fd)
    text = err.read_text()
    if name == "26.05":
        assert re.fullmatch(r"\[T\.ms\] error: \*\*\* JOB N ON vm CANCELLED AT T DUE to SIGNAL Terminated \*\*\*\n",
                            shape(text)), text
        assert shape(line_with(oracle(name, "A"), "*** JOB")) + "\n" == shape(text)
    else:
        assert shape(text) == "slurmstepd-vm: error: *** JOB N ON vm CANCELLED AT T ***\n", text
    assert r.cancelled


def _launch(argv: list[str], cwd: str):
    """One task of a host launcher (no Grid Engine): its statuses, late lines, and srun's stderr."""
    r, w = os.pipe()
    er, ew = os.pipe()
    spec = {"argv": argv, "cwd": cwd, "env": {"PATH": os.defpath}, "tasks": [0], "host": "vm", "node": 0,
            "label": False, "width": 1, "stdout": ("inherit", None), "stderr": ("inherit", None),
            "stdin": ("none", None), "vals": {"j": 1, "s": 0}, "own_group": True}
    events: queue.Queue = queue.Queue()
    launch = steps.HostLaunch(spec, events, stdin=os.open(os.devnull, os.O_RDONLY), stdout=w, stderr=ew)
    launch.start()
    _, tid, code, sig = events.get(timeout=30)
    launch.done(tid, code, sig)
    launch.finish()
    os.close(w)
    os.close(ew)
    with os.fdopen(r) as f, os.fdopen(er) as g:
        f.read()
        return launch, g.read()


@pytest.mark.parametrize("name", NAMES)
def test_a_task_that_cannot_start_as_each_release(release_site, tmp_path, name):
    """``srun nosuchcommand``: 22.05 and 24.11 print slurmstepd's line after srun's line about the
    task (the launcher keeps it for then); 26.05 prints it at once, before it. A missing working
    directory is the release's line too."""
    release_site(name)
    launch, err = _launch(["nosuchcommand"], str(tmp_path / "gone"))
    ref = release_cases(name)["srun_err_command_not_found"]["stderr"].splitlines()
    chdir, execve = (shape(stepd.error("vm", m, releases.get(name)).rstrip("\n")) for m in (
        f"couldn't chdir to `{tmp_path / 'gone'}': No such file or directory: going to /tmp instead",
        "execve(): nosuchcommand: No such file or directory"))
    assert launch.statuses == {0: (2, 0)}
    if name == "26.05":
        assert [shape(ln) for ln in err.splitlines()] == [chdir, execve] and launch.late_errors == []
        assert shape(ref[0]) == execve and ref[1].startswith("srun: error: vm: task 0: Exited")
    else:
        assert [shape(ln) for ln in err.splitlines()] == [chdir]
        assert launch.late_errors == [ref[1]] and ref[0].startswith("srun: error: vm: task 0: Exited")


# --- scontrol hold, uhold, release ---------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_scontrol_hold_of_an_unknown_job_as_each_release(release_site, capsys, monkeypatch, name):
    """``scontrol hold 999999``: the release's lines and exit code (26.05: ``slurm_suspend
    error:Invalid job id specified``, no space); uhold and release say the same (asked of 24.11
    and 26.05)."""
    from test_scontrol import NOW, scontrol

    release_site(name)
    monkeypatch.setattr(time, "time", lambda: NOW)
    case = release_cases(name)["scontrol_hold_unknown"]
    assert scontrol(capsys, "hold", "999999")[:3] == (case["rc"], case["stdout"], case["stderr"])
    for verb in ("uhold", "release"):
        got = scontrol(capsys, verb, "999999")[:3]
        assert got == (case["rc"], case["stdout"], case["stderr"])
        if name != "22.05":
            assert "".join(got[1:]) in oracle(name, "S")


@pytest.mark.parametrize("name", NAMES)
def test_slurm_suspend_error_lines_as_each_release(release_site, name):
    """The line after each failed word (here: bob releasing root's job)."""
    from shim.operations import control

    release_site(name)
    err = release_cases(name)["scontrol_release_bob_other"]["stderr"].splitlines()
    assert control.suspend_error("Invalid user id") == err[1]


# --- --test-only ----------------------------------------------------------------------------------------

def _at(line: str) -> float:
    return calendar.timegm(time.strptime(re.search(r"start at (\S+)", line)[1], "%Y-%m-%dT%H:%M:%S"))


@pytest.mark.parametrize("name", NAMES)
def test_sbatch_test_only_as_each_release(release_site, capsys, monkeypatch, tmp_path, utc, name):
    """``sbatch --test-only job.sh`` on an idle cluster: the release's line (26.05's stray "a"
    after the time), with the job id Grid Engine gave, this host and the capture's moment."""
    from shim.__main__ import dispatch
    from shim.gridengine import backends
    from shim.gridengine.replay import ReplayBackend
    from shim.proc import Result

    release_site(name)
    case = release_cases(name)["sbatch_test_only_idle"]
    job = int(re.search(r"Job (\d+)", case["stderr"])[1])
    b = ReplayBackend(default=Result(("x",), 0, "", ""))
    b.add("qsub", [], stdout=f"{job}\n")
    backends.use(b)
    (tmp_path / "job.sh").write_text("#!/bin/sh\ntrue\n")
    monkeypatch.chdir(tmp_path)
    at, real = _at(case["stderr"]), time.localtime
    monkeypatch.setattr(time, "localtime", lambda t=None: real(at if t is None else t))
    rc = dispatch("sbatch", ["--test-only", "job.sh"])
    out, err = capsys.readouterr()
    host = os.uname().nodename.split(".")[0]
    assert (rc, out, err) == (case["rc"], case["stdout"], case["stderr"].replace(" nodes vm ", f" nodes {host} "))
    assert any(k[0] == "qsub" and "-w" in k for k, _ in b.calls)


@pytest.mark.parametrize("name", NAMES)
def test_the_will_run_line_of_sbatch_and_srun(release_site, utc, name):
    """The line itself, for sbatch (its captures) and srun (asked of 24.11 and 26.05: srun's
    --test-only has the same stray "a" on 26.05)."""
    from shim.operations import submit

    release_site(name)
    lines = [release_cases(name)[c]["stderr"].rstrip("\n") for c in ("sbatch_test_only_gpu", "sbatch_test_only_idle")]
    if name != "22.05":
        text = fixture_text(name, "oracle-testonly.txt")
        lines += [ln for ln in text.splitlines() if ln.startswith("srun: Job ")]
    assert len(lines) == (2 if name == "22.05" else 4)
    for line in lines:
        m = re.fullmatch(r"(\w+): Job (\d+) to start at \S+(?: a)? using (\d+) processors on nodes (\S+) in "
                         r"partition (\S+)", line)
        assert m, line
        assert submit.will_run_line(m[1], int(m[2]), int(m[3]), m[4], m[5], _at(line)) == line


# --- salloc's and srun -v's "Nodes ... are ready for job" ---------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_salloc_says_the_nodes_are_ready_as_each_release(release_site, capsys, monkeypatch, name):
    """``salloc -n2 srun -l hostname`` (here: ``true``): 24.11 and 26.05 say ``salloc: Nodes vm are
    ready for job`` right after ``Granted job allocation N``; -Q says neither (as asked of them)."""
    import threading

    from shim.__main__ import dispatch
    from shim.gridengine import backends
    from shim.gridengine.replay import ReplayBackend
    from shim.operations import allocation, submit
    from shim.proc import Result

    release_site(name)
    case = release_cases(name)["salloc_srun"]
    job = int(re.search(r"allocation (\d+)", case["stderr"])[1])
    backends.use(ReplayBackend(default=Result(("x",), 0, "", "")))
    rec = type("Rec", (), {"env_file": ""})()
    monkeypatch.setattr(submit, "allocate", lambda *a, **k: (job, rec))
    granted = {"hosts": [["vm", 2]], "env": {"SLURM_JOB_NODELIST": "vm"}}
    monkeypatch.setattr(allocation, "wait_granted", lambda *a, **k: granted)
    monkeypatch.setattr(allocation, "watching", lambda *a, **k: threading.Event())
    released = []
    monkeypatch.setattr(allocation, "release", lambda cfg, j, rc: released.append((j, rc)))
    assert dispatch("salloc", ["-n2", "true"]) == case["rc"]
    assert capsys.readouterr().err == case["stderr"]
    assert dispatch("salloc", ["-Q", "-n2", "true"]) == 0
    assert capsys.readouterr().err == "" and released == [(job, 0), (job, 0)]
    if name != "22.05":
        assert "salloc: Nodes vm are ready for job\n" in oracle(name, "V")
    # the nodes as the job's own variable names them, else compressed from its hosts
    assert allocation.nodes_ready({"hosts": [["n1", 1], ["n2", 1]]}) == (
        "" if name == "22.05" else "Nodes n[1-2] are ready for job")


@pytest.mark.parametrize("name", NAMES)
def test_srun_v_in_a_job_of_its_own_says_the_nodes_are_ready(release_site, capfd, name):
    """``srun -v true``: 24.11 and 26.05 say ``srun: Nodes vm are ready for job`` before the
    launching line, in the job srun made for itself (job_mode); a step in an existing allocation
    (``salloc srun -v``) does not (as asked of them)."""
    from shim import siteconf
    from shim.runtime.steps import run as run_mod

    release_site(name)
    sdir = siteconf.get().cluster.state_dir
    host = steps.short_host()
    ref = release_cases(name)["srun_verbose"]["stderr"].splitlines()
    for job_mode in (True, False):
        alloc = steps.Allocation(7, [(host, 1)], inside=True)
        req = steps.StepRequest(argv=["true"], verbose=1)
        res = run_mod.run_step(req, alloc, base_env={"PATH": os.defpath, "SLURM_JOB_NODELIST": host},
                               state_dir=sdir, job_mode=job_mode)
        assert res.rc == 0
        got = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("srun: ")]
        ready = [ln for ln in got if "are ready for job" in ln]
        launching = [i for i, ln in enumerate(got) if ln.startswith("srun: launching StepId=")]
        if job_mode and name != "22.05":
            assert ready == [f"srun: Nodes {host} are ready for job"] and got.index(ready[0]) < launching[0]
            assert "srun: Nodes vm are ready for job" in ref
            assert ref.index("srun: Nodes vm are ready for job") < [i for i, ln in enumerate(ref) if "launching" in ln][0]
        else:
            assert ready == [] and not any("are ready for job" in ln for ln in ref if name == "22.05")
    if name != "22.05":
        inside = oracle(name, "V").split("salloc: Granted job allocation", 2)[2]
        assert "srun: launching StepId=" in inside and "srun: Nodes" not in inside


# --- 24.11: sizes no node could ever hold ----------------------------------------------------------------

def one_node_site(release_site, tmp_path, name: str) -> None:
    """The release's site, its partitions holding the one node of the reference cluster (vm)."""
    from shim import siteconf

    release_site(name)
    conf = tmp_path / "config.toml"
    text = conf.read_text()
    for part in ("debug", "gpu"):
        text = text.replace(f"[partitions.{part}]\n", f'[partitions.{part}]\nnodes = ["vm"]\n')
    conf.write_text(text)
    siteconf.reset()


@pytest.mark.parametrize("name", NAMES)
def test_sbatch_n_2_on_one_node_as_each_release(release_site, capsys, monkeypatch, tmp_path, name):
    """``sbatch -N 2 job.sh`` where the partition has one node: 24.11 refuses it at once
    (``Requested node configuration is not available``, exit 1, nothing handed to Grid Engine);
    22.05 and 26.05 take it (it pends)."""
    from shim.__main__ import dispatch
    from shim.gridengine import backends
    from shim.gridengine.replay import ReplayBackend
    from shim.proc import Result

    one_node_site(release_site, tmp_path, name)
    case = release_cases(name)["sbatch_accepted_too_many_nodes"]
    job = int(re.search(r"\d+", case["stdout"])[0]) if case["rc"] == 0 else 1
    b = ReplayBackend(default=Result(("x",), 0, "", ""))
    b.add("qsub", [], stdout=f"{job}\n")
    backends.use(b)
    (tmp_path / "job.sh").write_text("#!/bin/sh\ntrue\n")
    monkeypatch.chdir(tmp_path)
    rc = dispatch("sbatch", case["cmd"].split()[1:])
    out, err = capsys.readouterr()
    assert (rc, out, err) == (case["rc"], case["stdout"], case["stderr"])
    assert any(k[0] == "qsub" and "-help" not in k for k, _ in b.calls) == (name != "24.11")
    # a range whose minimum fits is taken (as asked of 24.11: sbatch -N 1-2)
    assert dispatch("sbatch", ["-N", "1-2", "job.sh"]) == 0
    capsys.readouterr()


def test_srun_n_2_on_one_node_is_refused_at_once_on_24_11(release_site, capsys, tmp_path):
    """``srun -N 2 hostname`` and ``srun -I5 -N 2 hostname`` on 24.11: ``Unable to allocate
    resources: Requested node configuration is not available``, exit 1, before any job."""
    from shim.__main__ import dispatch
    from shim.gridengine import backends
    from shim.gridengine.replay import ReplayBackend
    from shim.proc import Result

    one_node_site(release_site, tmp_path, "24.11")
    b = ReplayBackend(default=Result(("x",), 0, "", ""))
    backends.use(b)
    for case in ("srun_err_too_many_nodes", "srun_err_too_many_nodes_immediate"):
        want = release_cases("24.11")[case]
        argv = want["cmd"].split()
        argv = argv[argv.index("srun") + 1:]
        assert dispatch("srun", argv) == want["rc"]
        assert capsys.readouterr() == (want["stdout"], want["stderr"])
    assert [k for k, _ in b.calls if k[0] in ("qsub", "qrsh") and "-help" not in k] == []  # (-help: capabilities)


def test_salloc_n_2_on_one_node_is_refused_on_24_11(release_site, capsys, tmp_path):
    """``salloc -N 2 true`` on 24.11: its first line as asked of it (24.11 then says ``Job
    allocation N has been revoked.``: the shim has no job to name)."""
    from shim.__main__ import dispatch
    from shim.gridengine import backends
    from shim.gridengine.replay import ReplayBackend
    from shim.proc import Result

    one_node_site(release_site, tmp_path, "24.11")
    backends.use(ReplayBackend(default=Result(("x",), 0, "", "")))
    assert dispatch("salloc", ["-N", "2", "true"]) == 1
    err = capsys.readouterr().err
    assert err == "salloc: error: Job submit/allocate failed: Requested node configuration is not available\n"
    assert err in oracle("24.11", "X")
