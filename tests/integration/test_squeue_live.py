"""squeue against the live Grid Engine: jobs submitted with raw qsub (no shim record) in every state
the cluster can be driven into, seen through each filter. Every job is named uniquely and deleted at
the end; other people's jobs on the cluster are filtered away by name or id."""

from __future__ import annotations

import json
import uuid

import pytest

from conftest import RawJobs, run, wait_until

pytestmark = pytest.mark.gridengine

SLEEP = ["-b", "y", "/bin/sleep"]




def squeue(*argv: str, user: str | None = None) -> str:
    cp = run("squeue", *argv, user=user)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


def rows(jobs: RawJobs, *argv: str) -> dict[str, str]:
    """{jobid: "ST REASON/NODES"} of this test's jobs."""
    out = squeue("-h", "-o", "%i %t %R", "-u", "root,alice", *argv)
    res = {}
    for line in out.splitlines():
        jid, rest = line.split(" ", 1)
        if jid.split("_")[0] in jobs.ids:
            res[jid] = rest
    return res


def test_states_and_reasons(jobs):
    run1 = jobs.qsub("run", "-q", "debug", "-l", "h_rt=600", *SLEEP, "300")
    held = jobs.qsub("held", "-q", "debug", "-h", *SLEEP, "300")
    dep = jobs.qsub("dep", "-q", "debug", "-hold_jid", run1, *SLEEP, "300")
    eqw = jobs.qsub("eqw", "-q", "debug", "-o", "/nonexistent/dir/out", *SLEEP, "1")
    gpu = jobs.qsub("gpu", "-q", "gpu", *SLEEP, "300")
    wait_until(lambda: jobs.ge_state(run1) == "r" and jobs.ge_state(gpu) == "r", 60, "jobs to run")
    wait_until(lambda: "E" in jobs.ge_state(eqw), 60, "Eqw")
    got = rows(jobs)
    assert got[run1] == "R vm"
    assert got[gpu] == "R vm"
    assert got[held] == "PD (JobHeldUser)"
    assert got[dep] == "PD (Dependency)"
    assert got[eqw] == "PD (launch failed requeued held)"
    out = squeue("-h", "-o", "%i %P %j %l %T", "-j", f"{run1},{gpu}")
    # a raw qsub job has the limit of its h_rt, or none (Grid Engine applies no partition default)
    assert out.splitlines() == [f"{run1} debug {jobs.name('run')} 10:00 RUNNING",
                                f"{gpu} gpu {jobs.name('gpu')} UNLIMITED RUNNING"]
    # suspend through Grid Engine, see SUSPENDED
    assert run("qmod", "-sj", run1).returncode == 0
    wait_until(lambda: rows(jobs, "-t", "S").get(run1) == "S vm", 30, "suspended")
    run("qmod", "-usj", run1)


def test_default_layout_and_filters(jobs):
    a = jobs.qsub("a", "-q", "debug", "-h", *SLEEP, "300")
    b = jobs.qsub("b", "-q", "gpu", "-h", *SLEEP, "300")
    c = jobs.qsub("c", "-q", "debug", "-h", *SLEEP, "300", user="alice")
    out = squeue("-j", a)
    assert out == ("             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
                   f"{a:>18}     debug {jobs.name('a')[:8]:>8}     root PD       0:00      1 (JobHeldUser)\n")
    assert set(squeue("-h", "-o", "%i", "-n", f"{jobs.name('a')},{jobs.name('b')}").split()) == {a, b}
    assert squeue("-h", "-o", "%i", "-p", "gpu", "-n", jobs.name("b")).split() == [b]
    assert squeue("-h", "-o", "%i", "-u", "alice", "-n", jobs.name("c")).split() == [c]
    assert squeue("-h", "-o", "%i", "--me", "-n", jobs.name("c"), user="alice").split() == [c]
    assert squeue("-h", "-o", "%i", "--me", "-n", jobs.name("a"), user="alice").split() == []
    assert squeue("-h", "-t", "R", "-n", jobs.name("a")) == ""
    long = squeue("-l", "-j", a).splitlines()
    assert len(long) == 3 and long[1].split()[4] == "STATE" and " PENDING " in long[2]
    assert squeue("-h", "-o", "%i|%u|%U", "-j", c) == f"{c}|alice|1001\n"


def test_arrays(jobs):
    arr = jobs.qsub("arr", "-q", "debug", "-t", "1-4", "-tc", "2", *SLEEP, "300")
    wait_until(lambda: jobs.ge_state(arr).count("r") == 2, 60, "two tasks running")
    got = rows(jobs)
    assert got[f"{arr}_1"] == "R vm" and got[f"{arr}_2"] == "R vm"
    assert got[f"{arr}_[3-4]"].startswith("PD (")
    expanded = rows(jobs, "-r")
    assert {f"{arr}_3", f"{arr}_4"} <= set(expanded)
    assert squeue("-h", "-o", "%i %K %F", "-j", f"{arr}_4") == f"{arr}_4 4 {arr}\n"


def test_job_ids_unknown_and_bad():
    cp = run("squeue", "-j", "999999")
    assert (cp.returncode, cp.stdout, cp.stderr) == (1, "", "slurm_load_jobs error: Invalid job id specified\n")
    cp = run("squeue", "-j", "abc")
    assert (cp.returncode, cp.stderr) == (1, "squeue: error: Invalid job id: abc\n")
    cp = run("squeue", "-t", "FOO")
    assert cp.returncode == 1 and cp.stderr.startswith("squeue: error: Invalid job state specified: FOO\n")
    cp = run("squeue", "-u", "nosuchuser")
    assert (cp.returncode, cp.stderr) == (0, "squeue: error: Invalid user: nosuchuser\n\n")


def test_cancelled_job_stays_visible_with_t_all(jobs):
    jid = jobs.qsub("gone", "-q", "debug", "-h", *SLEEP, "300")
    assert run("scancel", jid).returncode == 0
    wait_until(lambda: not jobs.ge_state(jid), 30, "qdel")
    assert squeue("-h", "-j", jid) == ""
    out = squeue("-h", "-t", "all", "-j", jid, "-o", "%i %t %j")
    assert out == f"{jid} CA {jobs.name('gone')}\n"


def test_running_job_being_killed_is_completing(jobs, tmp_path):
    """qdel of a running -notify job: Grid Engine's "dr" for the queue's notify time (5 s in
    cluster up's queues), while the job, which ignores the notice (SIGUSR2), is still running.
    A job that died of the notice left "dr" before one squeue could look (1 run in 11 failed)."""
    script = tmp_path / "ignores-notice.sh"
    script.write_text("#!/bin/bash\ntrap '' USR2\n/bin/sleep 300\n")
    jid = jobs.qsub("notify", "-q", "debug", "-notify", "-S", "/bin/bash", str(script))
    wait_until(lambda: jobs.ge_state(jid) == "r", 60, "running")
    run("qdel", jid)
    def completing():
        row = rows(jobs).get(jid, "")  # one look: the job may be gone by a second one
        return row if row.startswith("CG") else None

    seen = wait_until(completing, 30, "CG")
    assert seen == "CG vm"


def test_json_and_formats(jobs):
    jid = jobs.qsub("js", "-q", "gpu", "-h", "-l", "h_rt=120", *SLEEP, "300")
    doc = json.loads(squeue("--json"))
    mine = [j for j in doc["jobs"] if j["job_id"] == int(jid)]
    assert mine and mine[0]["job_state"] == "PENDING" and mine[0]["partition"] == "gpu"
    assert mine[0]["time_limit"] == 2 and mine[0]["state_reason"] == "JobHeldUser"
    out = squeue("-O", "JobID:10,Partition:.6,TimeLimit", "-j", jid)
    assert out.splitlines() == ["JOBID     PARTITTIME_LIMIT          ", f"{jid:<10}   gpu2:00                "]


def test_ties_come_in_slurms_order(tmp_path):
    """squeue's default order on jobs that tie on its keys (issue 15 part 4), on the cell's 22.05.
    Slurm's squeue sorts by "P,t,-p" (partition, compact state, priority down) with stable sorts,
    after its sort by start time (latest first; jobs without one in the controller's list order
    backwards). Under 22.05's priority/basic each job's priority falls with its submission and an
    array's tasks share the array's, so ties of Grid Engine's priority go by job id; a held job's
    priority is 0, below every other: held jobs come after the others of their partition and
    state, newest first (22.05's capture: squeue -t PD lists the held 132 131 120;
    tests/unit/test_release_listing.py replays it).

    Submitted in this order: A (array 1-3, held), h1 (gpu, held), h2, h3 (array 1-2, held), B
    (runs), h4 (gpu, held), h5; then A is released and its three tasks start."""
    name = "tie" + uuid.uuid4().hex[:6]
    ids: list[str] = []

    def sbatch(*argv: str) -> str:
        cp = run("sbatch", "--parsable", "-J", name, "-o", "/dev/null", *argv, cwd=tmp_path)
        assert cp.returncode == 0, cp.stderr
        ids.append(cp.stdout.strip())
        return ids[-1]

    try:
        a = sbatch("-H", "-a", "1-3", "--wrap", "sleep 300")
        h1 = sbatch("-H", "-p", "gpu", "--wrap", "sleep 300")
        h2 = sbatch("-H", "--wrap", "sleep 300")
        h3 = sbatch("-H", "-a", "1-2", "--wrap", "sleep 300")
        b = sbatch("--wrap", "sleep 300")
        h4 = sbatch("-H", "-p", "gpu", "--wrap", "sleep 300")
        h5 = sbatch("-H", "--wrap", "sleep 300")
        wait_until(lambda: squeue("-h", "-j", b, "-o", "%t").strip() == "R", 120, "B to run")
        assert run("scontrol", "release", a).returncode == 0
        wait_until(lambda: squeue("-h", "-j", a, "-o", "%t").split() == ["R"] * 3, 120, "A's three tasks to run")
        shown = [ln.split() for ln in squeue("-h", "-n", name, "-o", "%i %P %t %Q").splitlines()]
        keys = {jid: (part, st, int(prio)) for jid, part, st, prio in shown}
        running = [f"{a}_1", f"{a}_2", f"{a}_3", b]
        assert sorted(keys) == sorted([*running, h1, h2, f"{h3}_[1-2]", h4, h5]), shown
        order = [jid for jid, *_ in shown]
        # by partition (debug, gpu), then state (PD before R): the held jobs newest first
        assert [j for j in order if j not in running] == [h5, f"{h3}_[1-2]", h2, h4, h1], shown
        assert order[:3] == [h5, f"{h3}_[1-2]", h2] and order[-2:] == [h4, h1], shown
        assert {keys[j][2] for j in order if keys[j][1] == "PD"} == {0}
        assert sorted(order[3:7]) == sorted(running) and all(keys[j][1] == "R" for j in order[3:7])
        if len({keys[j][2] for j in running}) == 1:  # (Grid Engine gave all four one priority: the usual case)
            assert order[6] == b  # the ties by job id: A's tasks before B
    finally:
        if ids:
            run("scancel", *ids)
