"""What each release prints where the shim ends, stops or fails to start a job (issue 30), against
what real 22.05.8, 24.11.5 and 26.05.5 answered when asked (fixtures/slurm-*/oracle-messages.txt,
oracle-step-ends.txt, oracle-control.txt): scontrol suspend, resume, requeue and requeuehold's
failures; a batch script (or a step's command) whose ``#!`` interpreter is missing; srun's and
salloc's lines at -v; slurmstepd's line for a step ended with its job."""

from __future__ import annotations

import os
import re
import time

import pytest

from conftest import FIXTURES
from shim.runtime import stepd
from shim.slurm import releases
from shim.store import records, state

NAMES = ("22.05", "24.11", "26.05")


def section(name: str, file: str, key: str) -> str:
    """The answer to the question ``### <key>: ...`` of a release's oracle file."""
    text = (FIXTURES / f"slurm-{name}" / file).read_text()
    m = re.search(rf"^### {re.escape(key)}: [^\n]*\n(.*?)(?=^### )", text, re.S | re.M)
    assert m, (file, key)
    return m[1]


def answers(text: str) -> dict[str, tuple[int, str]]:
    """``-- <command>`` blocks of a section: the command -> (its rc, what it printed), the job's
    id written N; a command asked twice keeps its last answer under its name and the first
    under ``<name> (first)``."""
    out: dict[str, tuple[int, str]] = {}
    for m in re.finditer(r"^-- ([^\n]*)\n(.*?)^rc=(\d+)\n", text, re.S | re.M):
        said = re.sub(r"for job \d+", "for job N", m[2])
        if m[1] in out:
            out[f"{m[1]} (first)"] = out[m[1]]
        out[m[1]] = (int(m[3]), said)
    return out


# --- scontrol suspend, resume, requeue, requeuehold --------------------------------------------------

@pytest.fixture
def verbs(release_site, monkeypatch):
    """scontrol on test_scontrol's Grid Engine listing (105 running, 107 suspended, 112 held
    pending) plus job 300, ended 5 s ago, in the release named."""
    import test_scontrol

    monkeypatch.setattr(time, "time", lambda: test_scontrol.NOW)

    def set_release(name: str):
        from shim import siteconf

        release_site(name)
        sdir = siteconf.get().cluster.state_dir
        state.record_submit(sdir, 300, {"name": "done", "partition": "debug", "user": "root", "workdir": "/srv"})
        state.record_event(sdir, 300, None, "end", {"exit": 0, "signal": 0, "state": "COMPLETED", "node": "vm",
                                                    "start": test_scontrol.NOW - 30})
        os.utime(state.record_file(sdir, "events", "300.x.end.json"), (test_scontrol.NOW - 5,) * 2)

    return set_release


def said(capsys, *argv, answers_=None) -> tuple[int, str]:
    import test_scontrol

    rc, out, err, _calls = test_scontrol.scontrol(capsys, *argv, answers=answers_)
    assert out == ""
    return rc, re.sub(r"for job \d+", "for job N", err)


@pytest.mark.parametrize("name", NAMES)
def test_suspend_and_resume_fail_as_each_release_words_it(verbs, capsys, name):
    """No ``scontrol: error:`` before the line, in any release: an id no job has is the controller's
    ``Unexpected message received``, a word that is no id ``Invalid job id specified``, a pending
    job ``Job is pending execution``, resuming a running job ``Job is not suspended``, an ended
    one ``Job/step already completing or completed``, another user's ``Access/permission
    denied``."""
    from test_scancel import recorded_refusal

    verbs(name)
    unknown = answers(section(name, "oracle-messages.txt", "S"))
    pending = answers(section(name, "oracle-messages.txt", "U"))
    running = answers(section(name, "oracle-step-ends.txt", "M"))
    word = answers(section(name, "oracle-control.txt", "P"))
    assert said(capsys, "suspend", "999999") == unknown["scontrol suspend 999999"]
    assert said(capsys, "resume", "999999") == unknown["scontrol resume 999999"]
    assert said(capsys, "suspend", "abc") == word["scontrol suspend abc"]
    assert said(capsys, "resume", "abc") == word["scontrol resume abc"]
    assert said(capsys, "suspend", "112") == pending["scontrol suspend PENDING"]
    assert said(capsys, "resume", "112") == pending["scontrol resume PENDING"]
    assert said(capsys, "resume", "105") == running["scontrol resume RUNNING"] == (1, "Job is not suspended for job N\n")
    assert said(capsys, "suspend", "300") == running["scontrol suspend ENDED"]
    assert said(capsys, "resume", "300") == running["scontrol resume ENDED"]
    denied = {"qmod": (1, recorded_refusal("qmod -sj JOB", 105))}
    assert said(capsys, "suspend", "105", answers_=denied) == running["scontrol suspend RUNNING (as bob)"]
    assert said(capsys, "resume", "107", answers_=denied) == running["scontrol resume RUNNING (as bob)"]
    assert said(capsys, "requeue", "105", answers_=denied) == running["scontrol requeue RUNNING (as bob)"]
    # and what succeeds says nothing
    assert said(capsys, "suspend", "105") == running["scontrol suspend RUNNING"] == (0, "")
    assert said(capsys, "resume", "107") == (0, "")


@pytest.mark.parametrize("name", NAMES)
def test_requeue_of_a_pending_job_fails_as_each_release(verbs, capsys, name):
    """requeue and requeuehold of a pending job: ``Job is pending execution for job N``, exit 1,
    and nothing asked of Grid Engine; a word that is no id: ``Invalid job id specified``."""
    import test_scontrol

    verbs(name)
    pending = answers(section(name, "oracle-messages.txt", "U"))
    word = answers(section(name, "oracle-control.txt", "P"))
    assert said(capsys, "requeue", "112") == pending["scontrol requeue PENDING"]
    assert said(capsys, "requeuehold", "112") == word["scontrol requeuehold PENDING"]
    assert said(capsys, "requeue", "abc") == word["scontrol requeue abc"]
    assert said(capsys, "requeuehold", "abc") == word["scontrol requeuehold abc"]
    rc, _out, _err, calls = test_scontrol.scontrol(capsys, "requeuehold", "112")
    assert (rc, calls) == (1, [])


# --- a missing #! interpreter ------------------------------------------------------------------------

def bad_interp_line(name: str) -> str:
    [line] = [ln for ln in section(name, "oracle-messages.txt", "E").splitlines() if "execve()" in ln]
    return line


def shape(line: str) -> str:
    return re.sub(r"^\[[^]]*\]", "[T]", line)


@pytest.mark.parametrize("name", NAMES)
def test_a_batch_script_whose_interpreter_is_missing_fails_2_0_as_each_release(release_site, tmp_path, name):
    """``sbatch bad.sh`` starting ``#!/nonexistent/interp``: slurmstepd's ``execve(): bad
    interpreter(/nonexistent/interp): No such file or directory`` in the job's output (the
    release's prefix), and the job FAILED with exit code 2 (ENOENT), reason None, as every release
    answers (sacct: ``FAILED|2:0|None``)."""
    from test_runtime_batch_step import a_record, run_wrapper
    import base64

    release_site(name)
    sdir = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    script = b"#!/nonexistent/interp\necho hi\n"
    cp = run_wrapper(sdir, work, a_record(sdir, work, script=base64.b64encode(script).decode("ascii"), args=[]))
    assert cp.returncode == 2, cp.stderr
    out = (work / "out-77.txt").read_text()
    assert [shape(ln) for ln in out.splitlines()] == [shape(bad_interp_line(name))]
    assert out.splitlines()[0].startswith("slurmstepd-") == (name != "26.05")
    end = records.Reader(str(sdir)).events(77, os.getuid())[(None, "end")]
    assert (end["state"], end["exit"], end["signal"], end["reason"]) == ("FAILED", 2, 0, "None")
    assert section(name, "oracle-messages.txt", "E").splitlines()[-1] == "FAILED|2:0|None"


def test_the_interpreters_line_is_printed_as_written(tmp_path):
    """Slurm prints what follows ``#!`` up to the line's end (an argument too); a script whose
    interpreter exists, without ``#!``, or with nothing after it, is no bad interpreter."""
    cases = {b"#!/nonexistent/interp\necho\n": "/nonexistent/interp", b"#! /no/such -x\n": " /no/such -x",
             b"#!/bin/sh\necho\n": None, b"echo hi\n": None, b"#!\n": None, b"#!/no/such": "/no/such"}
    for n, (text, want) in enumerate(cases.items()):
        p = tmp_path / f"s{n}"
        p.write_bytes(text)
        assert stepd.bad_interpreter(str(p), str(tmp_path)) == want, text
    assert stepd.bad_interpreter(str(tmp_path / "gone")) is None
    (tmp_path / "rel").write_bytes(b"#!interp\n")
    assert stepd.bad_interpreter(str(tmp_path / "rel"), str(tmp_path)) == "interp"
    (tmp_path / "interp").write_bytes(b"")
    assert stepd.bad_interpreter(str(tmp_path / "rel"), str(tmp_path)) is None
    rel = releases.get("22.05")
    assert stepd.bad_interpreter_line("vm", "/x", rel) == \
        "slurmstepd-vm: error: execve(): bad interpreter(/x): No such file or directory\n"


@pytest.mark.parametrize("name", NAMES)
def test_a_step_whose_script_has_no_interpreter_exits_2(release_site, tmp_path, name):
    """srun of such a script: the same line from the task's launcher, and the task's exit code 2
    (srun then says ``Exited with exit code 2``)."""
    from test_releases_messages import _launch

    release_site(name)
    script = tmp_path / "bad.sh"
    script.write_bytes(b"#!/nonexistent/interp\necho hi\n")
    script.chmod(0o755)
    launch, err = _launch([str(script)], str(tmp_path))
    assert launch.statuses == {0: (2, 0)}
    lines = err.splitlines() + launch.late_errors
    assert [shape(ln) for ln in lines] == [shape(bad_interp_line(name))]


# --- a step ended with its job -----------------------------------------------------------------------

def task(started: str) -> list[str]:
    """A step's task that says it has started (the file ``started``), then sleeps 60 s."""
    return ["sh", "-c", 'echo > "$0"; exec sleep 60', started]


def step_ended(capfd, job_state: str) -> tuple[object, list[str]]:
    """srun's step (``task``) of batch job 7 on this host, whose job ends under it: the job
    wrapper's word that the job ended (``steps/7.ended``, as jobwrap.end_steps writes it) once the
    task has started; the step's result and srun's stderr lines."""
    import os
    import threading

    from conftest import wait_until
    from shim import siteconf
    from shim.runtime import jobwrap, steps
    from shim.runtime.steps import run as run_mod

    sdir = siteconf.get().cluster.state_dir
    alloc = steps.Allocation(7, [(steps.short_host(), 1)], inside=True)

    started = os.path.join(sdir, "started")

    def end_the_job():
        wait_until(lambda: os.path.exists(started), what="the step's task")
        assert jobwrap.tell_steps(sdir, "7", job_state)

    t = threading.Thread(target=end_the_job)
    t.start()
    res = run_mod.run_step(steps.StepRequest(argv=task(started)), alloc, base_env={"PATH": os.defpath},
                           state_dir=sdir)
    t.join()
    return res, capfd.readouterr().err.splitlines()


def ends(name: str, key: str, file: str = "oracle-step-ends.txt") -> list[str]:
    return section(name, file, key).splitlines()


@pytest.mark.parametrize("name", NAMES)
def test_a_step_running_when_its_batch_script_ends_is_cancelled_as_each_release(release_site, capfd, name):
    """The batch script ends (exit 0) while ``srun sleep 300`` runs: srun's ``Job step aborted``
    notice, slurmstepd's ``*** STEP N.0 ON vm CANCELLED AT <time> ***`` (26.05: ``DUE to SIGNAL
    Terminated``), then ``task 0: Terminated``, no ``Force Terminated``; the step is CANCELLED
    (sacct: 0:15), as every release answered (J)."""
    from shim.runtime import steps

    release_site(name)
    res, got = step_ended(capfd, "COMPLETED")
    host = steps.short_host()
    ref = [ln for ln in ends(name, "J") if ln.startswith(("srun:", "slurmstepd", "["))]
    job = re.search(r"STEP (\d+)\.0", "\n".join(ref))[1]
    want = [re.sub(r"\bvm\b", host, ln.replace(f"STEP {job}.0", "STEP 7.0")) for ln in ref]
    assert [shape(stamped(ln)) for ln in got] == [shape(stamped(ln)) for ln in want]
    assert res.cancelled and res.statuses == {0: (0, 15)}
    assert f"{job}.0|CANCELLED|0:15" in ends(name, "J")


@pytest.mark.parametrize("name", NAMES)
def test_a_step_running_when_its_job_fails_says_failed_as_each_release(release_site, capfd, name):
    """The job failed under the step (its batch shell ended by a signal or an exit code): the
    step's line is ``*** STEP N.0 ON vm FAILED (non-zero exit code or other failure mode) ***`` in
    every release, 26.05's with its stamp and no signal named (scancel-signal-joboutput.txt, job
    342's step after ``scancel -b -s TERM``)."""
    from shim.runtime import steps

    release_site(name)
    _res, got = step_ended(capfd, "FAILED")
    captured = (FIXTURES / f"slurm-{name}" / "scancel-signal-joboutput.txt").read_text()
    [ref] = [ln for ln in captured.splitlines() if "FAILED (non-zero" in ln]
    job = re.search(r"STEP (\d+)\.0", ref)[1]
    want = re.sub(r"\bvm\b", steps.short_host(), ref.replace(f"STEP {job}.0", "STEP 7.0"))
    assert [shape(ln) for ln in got if "*** STEP" in ln] == [shape(want)]


def stamped(line: str) -> str:
    """A line with its CANCELLED AT time written T (the moment differs; its form is compared)."""
    return re.sub(r"AT \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", "AT T", line)


def test_a_step_whose_srun_is_gone_from_this_host_is_not_waited_for(unit_site):
    """A step record without an end whose srun ran on this host and no longer runs (killed hard,
    or an earlier job's of the same id, its pid gone or now another process's) is not a running
    step: the wrapper would wait for it in vain at the job's end. One whose srun lives, or ran on
    another host, or whose record does not say, is."""
    import subprocess

    from shim.runtime import jobwrap
    from shim.runtime.steps import run
    from shim.slurm import hostlist

    sdir = str(unit_site)
    me = run.srun_process()
    assert me["srun_host"] == hostlist.this_host() and me["srun_pid"] == os.getpid() and me["srun_since"]
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert state.write_step(sdir, "8", 0, {"start": 1.0, **me})  # this srun: alive
    assert state.write_step(sdir, "8", 1, {"start": 1.0, **me, "srun_pid": dead.pid})  # gone
    assert state.write_step(sdir, "8", 2, {"start": 1.0, **me, "srun_since": "1"})  # the pid is another process now
    assert state.write_step(sdir, "8", 3, {"start": 1.0, **me, "srun_pid": dead.pid, "srun_host": "elsewhere"})
    assert state.write_step(sdir, "8", 4, {"start": 1.0})  # (a record that does not say)
    assert jobwrap.running_steps(sdir, "8") == [0, 3, 4]


def test_the_wrapper_tells_the_running_steps_and_waits_for_their_ends(unit_site):
    """jobwrap.end_steps: a step without an end gets ``steps/<key>.ended`` (the job's state) and
    the wrapper waits for its end, then removes the word; with none running it writes nothing."""
    from shim.runtime import jobwrap

    sdir = str(unit_site)
    assert jobwrap.end_steps(sdir, "7", "COMPLETED") is False  # no step: nothing to tell
    assert state.write_step(sdir, "7", 0, {"start": 1.0, "end": 2.0})
    assert state.write_step(sdir, "7", 1, {"start": 1.0})
    assert jobwrap.running_steps(sdir, "7") == [1]
    seen = []

    def sleep(_s):  # srun ends its step once told
        seen.append(state.read_from(sdir, None, "steps", "7.ended"))
        assert state.write_step(sdir, "7", 1, {"start": 1.0, "end": 3.0})

    assert jobwrap.end_steps(sdir, "7", "FAILED", clock=lambda: 0.0, sleep=sleep) is True
    assert [w["state"] for w in seen] == ["FAILED"] and state.read_from(sdir, None, "steps", "7.ended") is None
    # a step that never ends is waited for KillWait and 2 s at most
    assert state.write_step(sdir, "7", 2, {"start": 1.0})
    now = [0.0]

    def later(s):
        now[0] += s

    assert jobwrap.end_steps(sdir, "7", "COMPLETED", clock=lambda: now[0], sleep=later) is True
    assert 32.0 <= now[0] < 32.0 + 2 * jobwrap.STEPS_END_WAIT


@pytest.mark.parametrize("name", NAMES)
def test_a_step_at_its_jobs_time_limit_says_so_as_each_release(release_site, capfd, name):
    """The job's time limit (the wrapper's word, then its SIGTERM to the batch shell's group, srun
    in it): slurmstepd's ``*** STEP N.0 ON vm CANCELLED AT <time> DUE TO TIME LIMIT ***`` in every
    release, srun's ``Job step aborted`` notice after it, ``task 0: Terminated``; the step is
    CANCELLED 0:15 (K)."""
    import os
    import signal
    import threading

    from conftest import wait_until
    from shim import siteconf
    from shim.runtime import jobwrap, steps
    from shim.runtime.steps import run as run_mod

    release_site(name)
    sdir = siteconf.get().cluster.state_dir
    host = steps.short_host()

    started = os.path.join(sdir, "started")

    def time_limit():
        wait_until(lambda: os.path.exists(started), what="the step's task")
        assert jobwrap.tell_steps(sdir, "7", "TIMEOUT")
        os.kill(os.getpid(), signal.SIGTERM)  # (srun's handler takes it in the main thread)

    t = threading.Thread(target=time_limit)
    t.start()
    res = run_mod.run_step(steps.StepRequest(argv=task(started)), steps.Allocation(7, [(host, 1)], inside=True),
                           base_env={"PATH": os.defpath}, state_dir=sdir)
    t.join()
    got = capfd.readouterr().err.splitlines()
    ref = [ln for ln in ends(name, "K") if "STEP" in ln or ln.startswith(("srun: Job step", "srun: error"))]
    job = re.search(r"STEP (\d+)\.0", "\n".join(ref))[1]
    want = [re.sub(r"\bvm\b", host, ln.replace(f"STEP {job}.0", "STEP 7.0")) for ln in ref]
    assert [shape(stamped(ln)) for ln in got] == [shape(stamped(ln)) for ln in want]
    assert res.cancelled and res.statuses == {0: (0, 15)}
    assert f"{job}.0|CANCELLED|0:15" in ends(name, "K")


# --- scontrol requeue of a running job ----------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_a_requeued_job_and_its_step_say_due_to_job_requeue_as_each_release(release_site, capfd, name):
    """scontrol requeue of a running job: its event (control.requeue) makes the job wrapper's line
    ``*** JOB N ON vm CANCELLED AT <time> DUE TO JOB REQUEUE ***`` where Grid Engine's notice comes
    (on_cancel), and the step's ``*** STEP N.0 ... DUE TO JOB REQUEUE ***`` (srun: the wrapper's
    word before its SIGTERM), in every release (L); a cancel without that event keeps its line."""
    import os
    import signal
    import threading

    from conftest import wait_until
    from shim import siteconf
    from shim.runtime import jobwrap, steps
    from shim.runtime.steps import run as run_mod
    from shim.slurm.request import SubmitRecord

    release_site(name)
    sdir = siteconf.get().cluster.state_dir
    host = steps.short_host()
    ref = ends(name, "L")
    job = re.search(r"JOB (\d+) ON", "\n".join(ref))[1]
    want = {k: re.sub(r"\bvm\b", host, ln.replace(f"{k} {job}", f"{k} 7"))
            for k in ("JOB", "STEP") for ln in ref if f"*** {k} " in ln}

    def runner(when: float):
        r = jobwrap.Runner(SubmitRecord(state_dir=sdir))
        rfd, wfd = os.pipe()
        r.err_fd, r.host, r.label, r.key, r.started = wfd, host, "7", "7", when
        old = signal.getsignal(signal.SIGALRM)
        try:
            r.on_cancel(signal.SIGUSR2, None)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        os.close(wfd)
        with os.fdopen(rfd) as f:
            return r, f.read()

    r, said = runner(time.time())
    assert "REQUEUE" not in said and not r.requeued  # a plain cancel (scancel)
    assert state.record_event(sdir, 7, None, "requeue", {"user": "root"})
    r, said = runner(time.time() + 3600)  # a later run of the job: that requeue was an earlier run's
    assert not r.requeued
    r, said = runner(time.time() - 60)
    assert r.requeued and [shape(stamped(said.rstrip("\n")))] == [shape(stamped(want["JOB"]))]

    started = os.path.join(sdir, "started")

    def requeue():
        wait_until(lambda: os.path.exists(started), what="the step's task")
        assert jobwrap.tell_steps(sdir, "7", "REQUEUE")
        os.kill(os.getpid(), signal.SIGTERM)

    t = threading.Thread(target=requeue)
    t.start()
    res = run_mod.run_step(steps.StepRequest(argv=task(started)), steps.Allocation(7, [(host, 1)], inside=True),
                           base_env={"PATH": os.defpath}, state_dir=sdir)
    t.join()
    got = capfd.readouterr().err.splitlines()
    assert [shape(stamped(ln)) for ln in got if "*** STEP" in ln] == [shape(stamped(want["STEP"]))]
    assert res.cancelled and res.statuses == {0: (0, 15)}


def test_a_word_from_an_earlier_run_of_the_job_is_not_taken(release_site, capfd):
    """A requeued job's wrapper may be killed before it takes its word back: a step started after
    that word runs to its end."""
    import os

    from shim import siteconf
    from shim.runtime import steps
    from shim.runtime.steps import run as run_mod

    release_site("24.11")
    sdir = siteconf.get().cluster.state_dir
    assert state.write_own(sdir, "steps", "7.ended", {"state": "REQUEUE", "t": time.time() - 600})
    res = run_mod.run_step(steps.StepRequest(argv=["sh", "-c", "sleep 1"]),
                           steps.Allocation(7, [(steps.short_host(), 1)], inside=True),
                           base_env={"PATH": os.defpath}, state_dir=sdir)
    assert (res.rc, res.cancelled) == (0, False) and capfd.readouterr().err == ""


def test_scontrol_requeue_leaves_the_jobs_wrapper_its_word(capsys, monkeypatch, unit_site):
    """control.requeue writes the running job's ``requeue`` event before qmod -rj."""
    import test_scontrol

    monkeypatch.setattr(time, "time", lambda: test_scontrol.NOW)
    rc, _out, err, calls = test_scontrol.scontrol(capsys, "requeue", "105")
    assert (rc, err, calls) == (0, "", [["qmod", "-rj", "105"]])
    assert os.path.exists(state.record_file(str(unit_site), "events", "105.x.requeue.json"))
