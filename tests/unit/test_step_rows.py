"""sacct's srun step rows (``N.0``, ``N.1``, ...) and the job's DerivedExitCode, from the end event
each srun step writes in its owner's records (runtime/steps/run.py: kind ``step<id>``), and the
ExitCode of 128 or more as each release prints it (releases.SACCT_EXIT_AS_IS), compared with what
real Slurm 22.05.8, 24.11.5 and 26.05.5 answered (fixtures/slurm-*/oracle-step-rows.json: srun's
exit status after ``scancel --signal=TERM``, steps ended by their own signal, exits 128, 129, 143,
200). Issue 30."""

from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURES
from shim import siteconf
from shim.runtime.steps.launch import global_rc
from shim.runtime.steps.run import step_end
from shim.store import layout, state
from test_releases_sacct import NAMES, run, site  # noqa: F401  (site: the fixture)
from test_sacct import SUBMIT, acct_line

STEP_COLS = "JobID,JobName,State,ExitCode,DerivedExitCode,NTasks,NCPUS,NNodes,NodeList,SubmitLine"


def transcript(release: str, script: str) -> dict[str, list[str]]:
    """One question's output, by section: '### <command>' -> its lines."""
    text = json.loads((FIXTURES / f"slurm-{release}" / "oracle-step-rows.json").read_text())["transcripts"][script]
    out: dict[str, list[str]] = {}
    head = None
    for line in text.splitlines():
        if line.startswith("### "):
            head = line[4:]
            out[head] = []
        elif head is not None:
            out[head].append(line)
    return out


def rows_of(lines: list[str], job: str, columns: int, as_id: int = 30) -> list[list[str]]:
    """The -P rows of job ``job`` (its steps too), each cut to ``columns`` values, the job id as ``as_id``."""
    out = []
    for line in lines:
        vals = line.split("|")
        if vals[0] == job or vals[0].startswith(job + "."):
            out.append([vals[0].replace(job, str(as_id), 1), *vals[1:columns]])
    return out


def parsable(release: str, script: str) -> list[tuple[str, list[str]]]:
    """(job id, lines) of each ``sacct -j <id> -P ...`` the question asked, in order."""
    return [(head.split()[2], lines) for head, lines in transcript(release, script).items()
            if head.startswith("sacct -j") and " -P " in head]


def job_ids(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(line.split("|")[0].split(".")[0] for line in lines[1:]))


def submit(cfg, job: int, name: str) -> None:
    sub = SUBMIT + 0.25
    assert state.record_submit(cfg, job, {
        "name": name, "partition": "debug", "workdir": "/tmp", "ntasks": 1, "cpus_per_task": 1, "nodes": 1,
        "account": "research", "user": "root", "uid": 0, "submit_time": sub, "sub": sub, "cluster": "cluster",
        "submit_line": f"sbatch {name}.sh"})


def write_event(cfg, job: int, kind: str, data: dict) -> None:
    name = f"{job}.x.{kind}.json"
    assert state.EVENT_NAME.fullmatch(name)
    assert state.write_record(cfg, "events", job, name, data)
    os.utime(state.record_file(cfg, "events", name), (data["t"], data["t"]))


def ran(site, cfg, job: int, name: str, *, exit_: int, steps: list[tuple[str, list[tuple[int, int]], str]]) -> None:
    """Job ``job`` ran its script (exit status ``exit_``) and srun steps: (command name, its tasks'
    (exit code, signal), srun's line), each step's end event as run.step_end makes it."""
    submit(cfg, job, name)
    (site.dir / "accounting").write_text("# Version: 8.1.9\n" + acct_line(
        job, name, submit=SUBMIT, start=SUBMIT + 2, end=SUBMIT + 5, status=exit_))
    write_event(cfg, job, "end", {"t": SUBMIT + 5, "exit": exit_, "signal": 0, "node": "vm", "start": SUBMIT + 2,
                                  "state": "COMPLETED" if exit_ == 0 else "FAILED", "sub": SUBMIT + 0.25})
    for i, (cmd, results, line) in enumerate(steps):
        data = step_end(results)
        data.update({"step": i, "name": cmd, "start": SUBMIT + 3, "t": SUBMIT + 4, "node": "vm", "nodes": 1,
                     "ntasks": len(results), "cpus": 1, "submit_line": line, "sub": SUBMIT + 0.25, "owner": "root"})
        write_event(cfg, job, state.step_kind(i), data)


# --- srun's own exit status ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_srun_exits_128_plus_the_signal_that_ended_its_step_in_every_release(name):
    """scancel --signal=TERM of the step: srun exits 143 on 22.05, 24.11 and 26.05 alike (the job's
    15:0 on 22.05 and 24.11 is sacct's way of printing 143: see below); a task that kills itself,
    137; the shim's rule (launch.global_rc) gives the same."""
    term = next(lines for head, lines in transcript(name, "ask1.sh").items() if head.startswith("cat ")
                and any("srun rc=" in x for x in lines))
    assert "srun rc=143" in term
    assert "srun: error: vm: task 0: Terminated" in term
    assert global_rc([(0, 15)]) == 143
    self_kill = [lines for head, lines in transcript(name, "ask1.sh").items() if head.startswith("cat ")][1]
    assert [x for x in self_kill if x.startswith("rc=")] == ["rc=137", "rc=143", "rc=3"]
    assert [global_rc([r]) for r in ((0, 9), (0, 15), (3, 0))] == [137, 143, 3]


def test_a_step_ended_by_a_signal_is_cancelled_whoever_sent_it():
    assert step_end([(0, 9)]) == {"state": "CANCELLED", "exit": 0, "signal": 9}
    assert step_end([(0, 15), (1, 0)]) == {"state": "CANCELLED", "exit": 0, "signal": 15}
    assert step_end([(3, 0), (1, 0)]) == {"state": "FAILED", "exit": 3, "signal": 0}
    assert step_end([(0, 0), (0, 0)]) == {"state": "COMPLETED", "exit": 0, "signal": 0}
    assert step_end([(0, 0)], cancelled=True)["state"] == "CANCELLED"
    assert step_end([(0, 15)], timed_out=True)["state"] == "TIMEOUT"


# --- sacct's step rows ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_the_steps_rows_and_derived_exit_code_are_each_releases(site, monkeypatch, capsys, name):
    """A job whose steps died of kill -9 $$, of kill -TERM $$ and exited 3 (ask1.sh's h6self): each
    step's row (CANCELLED 0:9, CANCELLED 0:15, FAILED 3:0, the command's name, its tasks, CPUs,
    node and srun's line) and the job's DerivedExitCode 3:0, as the release printed them."""
    site(name)
    cfg = siteconf.get()
    ran(site, cfg, 30, "h6self", exit_=0, steps=[
        ("bash", [(0, 9)], "srun bash -c kill -9 $$"), ("bash", [(0, 15)], "srun bash -c kill -TERM $$"),
        ("bash", [(3, 0)], "srun -n1 bash -c exit 3")])
    self_job, ref = parsable(name, "ask1.sh")[1]  # (the TERM job's first, then h6self's)
    assert ref[1].startswith(f"{self_job}|h6self|")
    want = [r[:9] + [r[10]] for r in rows_of(ref, self_job, 12)]  # (not Elapsed: the times are the shim's)
    _rc, out, _err = run(monkeypatch, capsys, "sacct", "-j", "30", "-n", "-P", "-o", STEP_COLS)
    got = [line.split("|") for line in out.splitlines()]
    assert [g[:5] for g in got] == [w[:5] for w in want]
    assert [g[5:9] for g in got[2:]] == [w[5:9] for w in want[2:]]
    assert [g[9] for g in got[2:]] == [w[9] for w in want[2:]]
    assert got[1][9] == ""  # (the batch step has no SubmitLine)
    _rc, out, _err = run(monkeypatch, capsys, "sacct", "-j", "30", "--json")
    derived = json.loads(out)["jobs"][0]["derived_exit_code"]  # the JSON's DerivedExitCode: the same 3:0
    assert derived["return_code"] in (3, {"set": True, "infinite": False, "number": 3})
    assert derived["status"] in ("FAILED", ["ERROR"])


@pytest.mark.parametrize("name", NAMES)
def test_scancel_term_of_a_step_shows_as_each_release(site, monkeypatch, capsys, name):
    """ask2.sh's h6plain: its script's last command is srun, ended by scancel --signal=TERM: srun and
    the script exit 143, sacct prints FAILED 15:0 on 22.05 and 24.11, 143:0 on 26.05, the step
    CANCELLED 0:15, DerivedExitCode 0:15."""
    site(name)
    cfg = siteconf.get()
    ran(site, cfg, 30, "h6plain", exit_=143, steps=[("sleep", [(0, 15)], "srun sleep 300")])
    job, lines = parsable(name, "ask2.sh")[1]  # (h6rc's, h6plain's, h6exit143's)
    ref = rows_of(lines, job, 5)
    assert ref[0][1] == "h6plain"
    _rc, out, _err = run(monkeypatch, capsys, "sacct", "-j", "30", "-n", "-P", "-o",
                         "JobID,JobName,State,ExitCode,DerivedExitCode")
    assert [line.split("|") for line in out.splitlines()] == ref
    assert ref[0][3] == ("143:0" if name == "26.05" else "15:0")


@pytest.mark.parametrize("name", NAMES)
def test_exit_codes_of_128_and_more_are_each_releases(site, monkeypatch, capsys, name):
    """ask3.sh: scripts that exit 128 and 129, a step that exits 200: 0:0, 1:0 and 72:0 on 22.05 and
    24.11 (sacct prints them less 128), as they are on 26.05; DerivedExitCode keeps 200:0."""
    site(name)
    cfg = siteconf.get()
    lines = next(ls for h, ls in transcript(name, "ask3.sh").items() if h.startswith("sacct -j") and "-P" in h)
    ids = job_ids(lines)
    assert len(ids) == 3
    for i, (job, (jname, exit_, steps)) in enumerate(zip(ids, [("h6exit128", 128, []),
                                                               ("h6step200", 0, [("bash", [(200, 0)], "")]),
                                                               ("h6exit129", 129, [])])):
        ran(site, cfg, 30 + i, jname, exit_=exit_, steps=steps)
        _rc, out, _err = run(monkeypatch, capsys, "sacct", "-j", str(30 + i), "-n", "-P", "-o",
                             "JobID,JobName,State,ExitCode,DerivedExitCode")
        assert [line.split("|") for line in out.splitlines()] == rows_of(lines, job, 5, 30 + i), jname


def test_allocations_alone_keep_the_derived_exit_code(site, monkeypatch, capsys):
    """-X: no step rows, the job's DerivedExitCode all the same (Slurm keeps it on the job)."""
    site("24.11")
    cfg = siteconf.get()
    ran(site, cfg, 30, "h6self", exit_=0, steps=[("bash", [(0, 15)], ""), ("bash", [(3, 0)], "")])
    _rc, out, _err = run(monkeypatch, capsys, "sacct", "-X", "-j", "30", "-n", "-P", "-o", "JobID,DerivedExitCode")
    assert out == "30|3:0\n"


def test_sacct_j_reads_only_that_jobs_shard(site, monkeypatch, capsys):
    """Issue 29's flat cost: the steps of -j N's job are found in N's id shard, listed with its other
    events; another job's step events (another shard) are neither listed nor read."""
    site("22.05")
    cfg = siteconf.get()
    other = 30 + 10 * layout.SHARD
    ran(site, cfg, other, "other", exit_=0, steps=[("bash", [(1, 0)], "")])
    ran(site, cfg, 30, "h6self", exit_=0, steps=[("bash", [(0, 15)], "")])
    seen: list[str] = []
    real_read, real_list = state.read_json, layout.shard_names
    monkeypatch.setattr(state, "read_json", lambda path, *a, **k: (seen.append(path), real_read(path, *a, **k))[1])
    monkeypatch.setattr(layout, "shard_names",
                        lambda home, kind, sh, *a, **k: (seen.append(f"{kind}/{sh}/"), real_list(home, kind, sh, *a, **k))[1])
    _rc, out, _err = run(monkeypatch, capsys, "sacct", "-j", "30", "-n", "-P", "-o", "JobID,State,ExitCode")
    assert out.splitlines() == ["30|COMPLETED|0:0", "30.batch|COMPLETED|0:0", "30.0|CANCELLED|0:15"]
    assert not [p for p in seen if f"{other}." in p or f"/{layout.shard(other)}/" in p]
    assert any(f"/{layout.shard(30)}/" in p for p in seen)


def test_a_step_event_of_an_earlier_job_with_the_same_id_does_not_speak(site, monkeypatch, capsys):
    """Each step event carries the job's submission stamp (sub): one of an earlier job that had the
    same number (Grid Engine reinstalled) is not this job's."""
    site("22.05")
    cfg = siteconf.get()
    ran(site, cfg, 30, "h6self", exit_=0, steps=[])
    write_event(cfg, 30, state.step_kind(0), {**step_end([(0, 15)]), "step": 0, "name": "old", "start": SUBMIT - 9000,
                                                "t": SUBMIT - 8000, "sub": SUBMIT - 9999})
    _rc, out, _err = run(monkeypatch, capsys, "sacct", "-j", "30", "-n", "-P", "-o", "JobID,DerivedExitCode")
    assert out.splitlines() == ["30|0:0", "30.batch|"]


def test_a_step_run_here_writes_the_end_sacct_shows(site, monkeypatch, capsys):
    """run_step's own event: two steps run on this host (a task that kills itself with TERM, one that
    exits 3) become 30.0 CANCELLED 0:15 and 30.1 FAILED 3:0, with the command's name, tasks, CPUs and
    node, and the job's DerivedExitCode 3:0."""
    from shim.runtime import steps
    from shim.runtime.steps import run as run_mod

    site("26.05")
    cfg = siteconf.get()
    ran(site, cfg, 30, "h6self", exit_=0, steps=[])
    host = steps.short_host()
    for argv in (["sh", "-c", "kill -TERM $$"], ["sh", "-c", "exit 3"]):
        alloc = steps.Allocation(30, [(host, 1)], inside=True)
        req = steps.StepRequest(argv=argv, submit_line="srun " + " ".join(argv))
        res = run_mod.run_step(req, alloc, base_env={"PATH": os.defpath, "SLURM_JOB_NODELIST": host},
                               state_dir=cfg.cluster.state_dir)
        assert res.rc in (143, 3)
    capsys.readouterr()
    _rc, out, _err = run(monkeypatch, capsys, "sacct", "-j", "30", "-n", "-P", "-o", STEP_COLS)
    assert [line.split("|") for line in out.splitlines()] == [
        ["30", "h6self", "COMPLETED", "0:0", "3:0", "", "1", "1", "vm", "sbatch h6self.sh"],
        ["30.batch", "batch", "COMPLETED", "0:0", "", "1", "1", "1", "vm", ""],
        ["30.0", "sh", "CANCELLED", "0:15", "", "1", "1", "1", host, "srun sh -c kill -TERM $$"],
        ["30.1", "sh", "FAILED", "3:0", "", "1", "1", "1", host, "srun sh -c exit 3"]]
