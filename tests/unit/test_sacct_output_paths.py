"""sacct's output paths per Slurm release (issue 30): the fields StdOut, StdErr and StdIn (24.11 on)
as written and with --expand-patterns, and --json's stdout, stderr, stdin with their *_expanded,
from sbatch's submit record (and, on 26.05, a srun step's own -o, -e, -i from its end event),
each compared with what real Slurm 24.11.5 and 26.05.5 answered for the same submissions
(fixtures/slurm-*/oracle-sacct-stdio.json: the jobs, the questions and the answers)."""

from __future__ import annotations

import json
import os
import shlex

import pytest

from conftest import FIXTURES
from shim import siteconf
from shim.__main__ import dispatch
from shim.gridengine import backends
from shim.slurm import releases
from shim.slurm.jobids import task_job_id
from shim.slurm.options import sources
from shim.slurm.render import openapi
from shim.slurm.render import sacct as view
from shim.store import state
from test_releases_sacct import event, run, site  # noqa: F401  (site: the fixture)
from test_sacct import SUBMIT, acct_line
from test_step_rows import write_event

NEWER = ("24.11", "26.05")


def oracle(release: str) -> dict:
    return json.loads((FIXTURES / f"slurm-{release}" / "oracle-sacct-stdio.json").read_text())


def request(words: list[str], workdir: str = "/tmp/w5") -> dict:
    """sbatch's options (those the questions used) as the submit record keeps them: -o, -e, -i as
    written, the working directory (-D), the name, the array's indices."""
    rec = {"name": "", "workdir": workdir, "stdout": None, "stderr": None, "stdin": None, "array": None}
    keys = {"-J": "name", "-o": "stdout", "-e": "stderr", "-i": "stdin", "-D": "workdir"}
    i = 0
    while i < len(words):
        w = words[i]
        if w in keys:
            rec[keys[w]] = words[i + 1]
            i += 2
        elif w == "-a":
            lo, hi = words[i + 1].split("-")
            rec["array"] = list(range(int(lo), int(hi) + 1))
            i += 2
        elif w == "--wrap":
            i += 2
        else:
            i += 1
    return rec


def submitted(site, jobs: dict[int, dict], *, interactive: tuple[int, ...] = ()) -> None:
    """The jobs' submit records (as root), and their runs on node vm in the accounting file (an
    array's tasks each a record)."""
    cfg = siteconf.get()
    lines = []
    for job, req in jobs.items():
        sub = SUBMIT + 0.25
        rec = {**req, "partition": "debug", "ntasks": 1, "cpus_per_task": 1, "nodes": 1, "account": "research",
               "user": "root", "uid": 0, "submit_time": sub, "sub": sub, "cluster": "cluster"}
        if job in interactive:
            rec.update(interactive=True, command="srun")
        assert state.record_submit(cfg, job, rec)
        for task in range(1, len(req["array"]) + 1) if req["array"] else [0]:
            lines.append(acct_line(job, req["name"], submit=SUBMIT, start=SUBMIT + 2, end=SUBMIT + 3, task=task))
    (site.dir / "accounting").write_text("# Version: 8.1.9\n" + "".join(lines))


def batch_jobs(release: str) -> dict[int, dict]:
    """The first question's jobs that ran (not the held one), by their ids on that cluster."""
    out = {}
    for name, j in oracle(release)["jobs"].items():
        words = shlex.split(j["submit"].split("sbatch --parsable ", 1)[1])
        if name != "held":
            out[int(j["job"])] = request(words)
    return out


def answer(release: str, case: str) -> dict:
    return oracle(release)["cases"][case]


def own_ids(text: str, job: int, tasks: dict[int, int]) -> str:
    """An answer about array ``job`` with each task's own id on that cluster (``tasks``: task ->
    id) as the shim's (jobids.task_job_id: the id its job wrapper named the file with)."""
    for task, theirs in tasks.items():
        text = text.replace(f"{job}_{task}-{theirs}.out", f"{job}_{task}-{task_job_id(job, task)}.out")
    return text


def json_lines(out: str) -> str:
    """The --json answer as the question printed it: each job's stream keys, job_id and working
    directory, then its steps' stream keys."""
    lines = []
    for x in json.loads(out)["jobs"]:
        keys = {k: v for k, v in x.items() if "std" in k or k in ("job_id", "working_directory")}
        steps = [(s["step"]["id"], {k: v for k, v in s["step"].items() if "std" in k}) for s in x["steps"]]
        lines.append(f"{json.dumps(keys, sort_keys=True)} {steps}")
    return "".join(line + "\n" for line in lines)


# --- batch jobs: the job's row and its batch step's ---------------------------------------------------------

CASES = ("dflt", "rel", "sep", "same", "eonly", "wd", "pad", "inp", "user")


@pytest.mark.parametrize("name", NEWER)
@pytest.mark.parametrize("case", CASES)
def test_the_paths_are_each_releases_as_written_and_expanded(site, monkeypatch, capsys, name, case):
    """-o, -e, -i as written, relative ones under the working directory (-D's too); without -o
    slurm-%j.out (26.05: as it is; 24.11 under the working directory); StdErr empty unless -e was
    given (even naming the stdout's file); StdIn /dev/null unless -i; --expand-patterns' %j, %x,
    %u, %N (the node), %n, %t, %s (batch), %%, %a outside an array (NO_VAL), %4j's zeros, %5q
    (24.11: 5q; 26.05: as written); the batch step's row empty."""
    site(name)
    jobs = batch_jobs(name)
    submitted(site, jobs)
    job = oracle(name)["jobs"][case]["job"]
    for suffix in ("_P", "_expand_P"):
        c = answer(name, case + suffix)
        assert run(monkeypatch, capsys, "sacct", *shlex.split(c["cmd"])[1:]) == (0, c["stdout"], c["stderr"]), suffix
    c = answer(name, case + "_json")
    rc, out, err = run(monkeypatch, capsys, "sacct", "--json", "-j", job)
    assert (rc, json_lines(out), err) == (0, c["stdout"], "")


@pytest.mark.parametrize("name", NEWER)
def test_the_fixed_width_layout_cuts_a_long_path(site, monkeypatch, capsys, name):
    site(name)
    submitted(site, batch_jobs(name))
    for case in ("dflt_fixed", "dflt_expand_fixed"):
        c = answer(name, case)
        assert run(monkeypatch, capsys, "sacct", *shlex.split(c["cmd"])[1:]) == (0, c["stdout"], c["stderr"]), case


@pytest.mark.parametrize("name", NEWER)
@pytest.mark.parametrize("case", ["arr", "arrdf"])
def test_an_array_tasks_paths_expand_its_array_task_and_own_ids(site, monkeypatch, capsys, name, case):
    """%A the array's id, %a the task, %j the task's own id (the shim's: jobids.task_job_id, as its
    job wrapper named the file; Slurm's own ids differ); the default slurm-%A_%a.out."""
    site(name)
    submitted(site, batch_jobs(name))
    job = int(oracle(name)["jobs"][case]["job"])
    theirs = {t: int(x["job_id"]) for t, x in enumerate(
        sorted((json.loads(line.split(" [")[0]) for line in answer(name, case + "_json")["stdout"].splitlines()),
               key=lambda x: x["stdout_expanded"]), 1)}
    for suffix in ("_P", "_expand_P"):
        c = answer(name, case + suffix)
        assert run(monkeypatch, capsys, "sacct", *shlex.split(c["cmd"])[1:]) == (
            0, own_ids(c["stdout"], job, theirs), ""), suffix


@pytest.mark.parametrize("name", NEWER)
def test_a_job_cancelled_before_it_ran_expands_its_node_as_the_release(site, monkeypatch, capsys, name):
    """%N of a job that never had a node: (null) on 24.11, None on 26.05 (releases.SACCT_NODE_NONE)."""
    site(name)
    c = answer(name, "cancelled_pending")
    job = int(c["stdout"].splitlines()[1].split("|")[0])
    cmd = c["cmd"]
    state.record_submit(siteconf.get(), job, {
        **request(shlex.split(cmd.split("sbatch --parsable ", 1)[1].split(")")[0])), "partition": "debug",
        "user": "root", "uid": 0, "submit_time": SUBMIT, "sub": SUBMIT, "cluster": "cluster"})
    event(siteconf.get(), job, None, "cancel", {"t": SUBMIT + 1, "uid": 0, "user": "root", "was": "PENDING"})
    asked = [shlex.split(part.strip()) for part in cmd.split(";") if part.strip().startswith("sacct")]
    outs = [run(monkeypatch, capsys, *[w.replace("$j", str(job)) for w in argv]) for argv in asked]
    assert [o[0] for o in outs] == [0, 0] and "".join(o[1] for o in outs) == c["stdout"]


@pytest.mark.parametrize("name", NEWER)
def test_srun_and_salloc_jobs_show_no_paths(site, monkeypatch, capsys, name):
    """A job srun or salloc made for itself: StdOut, StdErr, StdIn empty (srun's -o included), in
    both releases; and --json's six keys empty."""
    site(name)
    submitted(site, {98: request(["-J", "srj", "-o", "/tmp/w5/sr-%j.out"]), 99: request(["-J", "sal"])},
              interactive=(98, 99))
    for case in ("srun_job", "srun_plain", "salloc_job"):  # (the job's rows; 26.05's step 0: below)
        rows = [ln for ln in answer(name, case)["stdout"].splitlines() if ln.split("|")[0].isdigit()]
        assert len(rows) == 2 and all(ln.endswith("|||") for ln in rows), case
    for expand in ([], ["--expand-patterns"]):
        assert run(monkeypatch, capsys, "sacct", *expand, "-X", "-P", "-j", "98,99", "-o", "JobID,StdOut,StdErr,StdIn") \
            == (0, "JobID|StdOut|StdErr|StdIn\n98|||\n99|||\n", "")
    rc, out, err = run(monkeypatch, capsys, "sacct", "--json", "-j", "98")
    job = json.loads(out)["jobs"][0]
    assert {k: v for k, v in job.items() if "std" in k} == dict.fromkeys(
        ("stdin_expanded", "stdout_expanded", "stderr_expanded", "stdout", "stderr", "stdin"), "")


def test_22_05_has_no_path_fields(site, monkeypatch, capsys):
    site("22.05")
    submitted(site, batch_jobs("24.11"))
    rc, out, err = run(monkeypatch, capsys, "sacct", "-X", "-j", "83", "-o", "JobID,StdOut")
    assert (rc, out, err) == (1, "", 'sacct: error: Invalid field requested: "StdOut"\n')
    rc, out, err = run(monkeypatch, capsys, "sacct", "--json", "-j", "83")
    assert rc == 0 and "stdout" not in json.loads(out)["jobs"][0]


# --- srun steps -------------------------------------------------------------------------------------------

STEP_IO = [{"stdout": "rel-%j-%s.out", "cwd": "/tmp/w5"},
           {"stdout": "/tmp/w5/abs-%j-%s-%t-%N-%x.out", "stderr": "/tmp/w5/err-%s.err", "cwd": "/tmp/w5"},
           {"stdin": "/tmp/w5/in2.txt", "cwd": "/tmp/w5"}, {"cwd": "/tmp/w5"}]


def steps_ran(site, job: int, name: str, out: str, io: list[dict]) -> None:
    """Batch job ``job`` (-o ``out``) ran its srun steps, each end event with srun's -o, -e, -i."""
    cfg = siteconf.get()
    submitted(site, {job: request(["-J", name, "-o", out])})
    write_event(cfg, job, "end", {"t": SUBMIT + 5, "exit": 0, "signal": 0, "node": "vm", "start": SUBMIT + 2,
                                  "state": "COMPLETED", "sub": SUBMIT + 0.25})
    for i, paths in enumerate(io):
        write_event(cfg, job, state.step_kind(i), {
            "state": "COMPLETED", "exit": 0, "signal": 0, "step": i, "name": "true", "start": SUBMIT + 3,
            "t": SUBMIT + 4, "node": "vm", "nodes": 1, "ntasks": 1, "cpus": 1, "sub": SUBMIT + 0.25, "owner": "root",
            **paths})


@pytest.mark.parametrize("name", NEWER)
def test_a_srun_steps_own_paths_are_on_its_row_in_26_05(site, monkeypatch, capsys, name):
    """26.05: each step's -o, -e, -i (the fields under its working directory, --json's as written,
    expanded with %j, %s the step, %t 0, %N its node, %x the job's name); 24.11: every step's row
    empty, and --json's steps without the keys (releases.SACCT_STEP_STDIO)."""
    site(name)
    c = answer(name, "steps_io")
    job = int(c["stdout"].splitlines()[1].split("|")[0])
    steps_ran(site, job, "stio", "/tmp/w5/stio-%j.out", STEP_IO)
    want = c["stdout"].splitlines(keepends=True)
    n = len(STEP_IO) + 2  # (a header, the job, its batch step, the srun steps)
    for i, expand in enumerate(([], ["--expand-patterns"])):
        rc, out, err = run(monkeypatch, capsys, "sacct", *expand, "-P", "-j", str(job), "-o", "JobID,StdOut,StdErr,StdIn")
        assert (rc, out, err) == (0, "".join(want[i * (n + 1):(i + 1) * (n + 1)]), "")
    rc, out, err = run(monkeypatch, capsys, "sacct", "--json", "-j", str(job))
    steps = [f"{s['step']['id']} {json.dumps({k: v for k, v in s['step'].items() if 'std' in k}, sort_keys=True)}\n"
             for s in json.loads(out)["jobs"][0]["steps"]]
    assert "".join(steps) == "".join(want[2 * (n + 1):])


def test_a_steps_J_is_the_job_and_the_step(site, monkeypatch, capsys):
    site("26.05")
    c = answer("26.05", "step_J")
    job = int(c["stdout"].splitlines()[1].split("|")[0])
    steps_ran(site, job, "bigj", "/tmp/w5/bj-%J.out", [{"stdout": "/tmp/w5/sj-%J-%j-%A-%a.out", "cwd": "/tmp/w5"}])
    outs = [run(monkeypatch, capsys, "sacct", *expand, "-P", "-j", str(job), "-o", "JobID,StdOut")[1]
            for expand in ([], ["--expand-patterns"])]
    assert "".join(outs) == c["stdout"]


def test_a_step_event_with_other_than_text_shows_no_path(site, monkeypatch, capsys):
    """What another user's records say is read as text only: a number or a list is no path."""
    site("26.05")
    steps_ran(site, 40, "odd", "/tmp/o.out", [{"stdout": 7, "stderr": ["x"], "stdin": "/tmp/in", "cwd": 3}])
    rc, out, err = run(monkeypatch, capsys, "sacct", "-P", "-j", "40", "-o", "JobID,StdOut,StdErr,StdIn")
    assert out.splitlines()[-1] == "40.0|||/tmp/in"


def srun_here(job: int, words: list[str]) -> int:
    """srun ``words`` as a step of job ``job`` on this host, through srun's own options
    (cli.srun.request) and run_step, which writes the step's end event; srun's exit code."""
    from shim.cli import srun
    from shim.runtime import steps
    from shim.runtime.steps import run as run_mod
    from shim.slurm.options.getopt import getopt

    t = srun.table()
    cli, positional = getopt(t, words)
    req = srun.request(sources.collect(t, words, environ={}, cli=cli), positional, {})
    host = steps.short_host()
    res = run_mod.run_step(req, steps.Allocation(job, [(host, 1)], inside=True),
                           base_env={"PATH": os.defpath, "SLURM_JOB_NODELIST": host},
                           state_dir=siteconf.get().cluster.state_dir)
    return res.rc


@pytest.mark.parametrize("name", NEWER)
def test_srun_records_its_own_paths_for_sacct(site, monkeypatch, capsys, tmp_path, name):
    """The oracle's steps.sh run for real (run_step's own end events): srun -o, -e, -i as written
    and its working directory; sacct prints them on 26.05's step rows (relative under the
    directory, --json's as written) and nothing on 24.11's, byte for byte as the release did
    (its /tmp/w5 here the test's directory, its node vm this host)."""
    from shim.runtime import steps

    site(name)
    c = answer(name, "steps_io")
    job = int(c["stdout"].splitlines()[1].split("|")[0])
    d = str(tmp_path)
    monkeypatch.chdir(tmp_path)
    submitted(site, {job: request(["-J", "stio", "-o", f"{d}/stio-%j.out"], workdir=d)})
    write_event(siteconf.get(), job, "end", {"t": SUBMIT + 5, "exit": 0, "signal": 0, "node": "vm",
                                             "start": SUBMIT + 2, "state": "COMPLETED", "sub": SUBMIT + 0.25})
    (tmp_path / "in2.txt").write_text("hi\n")
    for words in (["-o", "rel-%j-%s.out", "true"],
                  ["-o", f"{d}/abs-%j-%s-%t-%N-%x.out", "-e", f"{d}/err-%s.err", "true"],
                  ["-i", f"{d}/in2.txt", "cat"], ["true"]):
        assert srun_here(job, words) == 0
    capsys.readouterr()
    host = steps.short_host()
    want = c["stdout"].replace("/tmp/w5", d).replace("-0-vm-stio.out", f"-0-{host}-stio.out")
    outs = [run(monkeypatch, capsys, "sacct", *expand, "-P", "-j", str(job), "-o", "JobID,StdOut,StdErr,StdIn")
            for expand in ([], ["--expand-patterns"])]
    assert [(rc, err) for rc, _, err in outs] == [(0, ""), (0, "")]
    rc, out, err = run(monkeypatch, capsys, "sacct", "--json", "-j", str(job))
    steps_json = [f"{s['step']['id']} {json.dumps({k: v for k, v in s['step'].items() if 'std' in k}, sort_keys=True)}\n"
                  for s in json.loads(out)["jobs"][0]["steps"]]
    assert outs[0][1] + outs[1][1] + "".join(steps_json) == want


def test_srun_D_is_made_absolute_against_the_current_directory(site, monkeypatch, capsys, tmp_path):
    """srun -D sub: the step's relative -o is under <cwd>/sub on 26.05's row; the event keeps -o as
    written and no -e or -i (absent, not empty)."""
    site("26.05")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    submitted(site, {41: request(["-J", "dd", "-o", "/tmp/dd.out"], workdir="/elsewhere")})
    write_event(siteconf.get(), 41, "end", {"t": SUBMIT + 5, "exit": 0, "signal": 0, "node": "vm",
                                            "start": SUBMIT + 2, "state": "COMPLETED", "sub": SUBMIT + 0.25})
    assert srun_here(41, ["-D", "sub", "-o", "x-%s.out", "true"]) == 0
    assert (tmp_path / "sub" / "x-0.out").exists()
    capsys.readouterr()
    rc, out, err = run(monkeypatch, capsys, "sacct", "-P", "-j", "41", "-o", "JobID,StdOut,StdErr,StdIn")
    assert (rc, out.splitlines()[-1], err) == (0, f"41.0|{tmp_path}/sub/x-%s.out||", "")
    rc, out, err = run(monkeypatch, capsys, "sacct", "--json", "-j", "41")
    step = json.loads(out)["jobs"][0]["steps"][-1]["step"]
    assert (step["stdout"], step["stdout_expanded"], step["stderr"], step["stdin"]) == \
        ("x-%s.out", f"{tmp_path}/sub/x-0.out", "", "")


# --- the expansion itself -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NEWER)
def test_a_width_before_a_letter_that_is_no_pattern(name):
    style = view.StdStyle.of(releases.get(name))
    std = view.job_stdio("/o/%5q-%q-%%5q-%3j", None, None, "/w", False, style)
    row = view.Row(job_id=7, name="n", user="u", nodes=["vm"])
    want = "/o/5q-%q-%5q-007" if name == "24.11" else "/o/%5q-%q-%5q-007"
    assert std.expanded(0, row) == want


def test_the_json_of_a_job_without_a_record_has_empty_paths():
    row = view.Row(job_id=5, name="qsub", user="u", state="COMPLETED", extra={})
    doc = openapi.sacct_job(row, [], openapi.LAYOUTS["v0.0.45"])
    assert [doc[k] for k in ("stdout", "stdout_expanded", "stdin", "stdin_expanded")] == ["", "", "", ""]


# --- live jobs ----------------------------------------------------------------------------------------------

MIXED = (FIXTURES / "gridengine" / "sge-8.1.9" / "live-qstat-u-all-r-xml.mixed.xml").read_text()


@pytest.mark.parametrize("name", NEWER)
def test_a_pending_and_a_running_jobs_paths(site, monkeypatch, capsys, name):
    """A job Grid Engine holds (112, hqw): its paths as written, %N expanded as the release's text
    for no node (oracle held_expand_P, job 95 there); a running one's (105 on vm) with its node."""
    from shim.gridengine.replay import ReplayBackend
    from shim.proc import Result
    from test_sacct import ts

    site(name)
    cfg = siteconf.get()
    sub = ts("2026-11-30T09:10:21")
    for job, words in ((112, ["-J", "fx_held", "-o", "/tmp/w5/h-%j-%N.out"]),
                       (105, ["-J", "fx_run1", "-o", "r-%j-%N-%x.out"])):
        assert state.record_submit(cfg, job, {**request(words), "partition": "debug", "user": "root", "uid": 0,
                                              "submit_time": sub, "sub": sub, "cluster": "cluster"})
    monkeypatch.setattr(backends, "_override", ReplayBackend({("qstat",): Result(("qstat",), 0, MIXED, "")}))
    for case in ("held_P", "held_expand_P"):
        c = answer(name, case)
        job = c["stdout"].splitlines()[1].split("|")[0]
        argv = [w.replace(job, "112") for w in shlex.split(c["cmd"])[1:]]
        assert dispatch("sacct", argv) == 0
        assert capsys.readouterr() == (c["stdout"].replace(f"{job}|", "112|").replace(f"-{job}-", "-112-"), "")
    assert dispatch("sacct", ["--expand-patterns", "-X", "-P", "-n", "-j", "105", "-o", "StdOut,StdIn"]) == 0
    assert capsys.readouterr().out == "/tmp/w5/r-105-vm-fx_run1.out|/dev/null\n"
