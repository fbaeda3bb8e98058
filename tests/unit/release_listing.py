"""The captured cluster's queue, rebuilt as Grid Engine and the shim would hold it, so that a
release's listing cases (squeue, scontrol show job, sacct) replay through the shim's dispatch
(issue 30's first Done-when, the cases "the captured cluster's own jobs").

fixtures/release-listings/<release>.json holds, per release, the queue at the moments its cases
were captured: a small job table per moment (``moments``) and the moment each replayed case saw
(``cases``). A table is derived from the capture itself (``from_all``: the rows of the release's
``squeue -o %all``, the ids, names, users, partitions, states, times, limits and requests it
printed; test_release_listing.py checks each table against those rows). ``build`` turns a
moment's table into

- Grid Engine's answer to ``qstat -u '*' -r -xml`` in SGE 8.1.9's layout (the elements and order
  of fixtures/gridengine/sge-8.1.9/live-qstat-u-all-r-xml.*.xml: running jobs and array tasks in
  ``queue_info``, waiting ones in ``job_info``), served by listing_replay.ListingReplay (which
  answers the narrower ``-u U`` and ``qstat -j`` questions from it);
- the shim's submit records of those jobs, written through the shim's own store writer
  (state.record_submit) into the test's state directory, as sbatch writes them;

and the clock the moment was captured at (``now``; the test fixes time.time to it)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from xml.sax.saxutils import escape

from conftest import FIXTURES
from shim.store import state

LISTINGS = FIXTURES / "release-listings"
# squeue -o %all's fields, in order (22.05's %s is empty, 24.11 has none, 26.05's is the SLUID)
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
USERS = {"root": (0, 0, "root"), "bob": (1001, 1001, "bob")}  # the captured cluster's users (its %U, %G, %g)


def table(release: str) -> dict:
    return json.loads((LISTINGS / f"{release}.json").read_text())


def all_rows(release: str, stdout: str) -> list[dict[str, str]]:
    """``squeue -o %all``'s rows as {letter: value}."""
    letters = LETTERS.replace("s", "") if release == "24.11" else LETTERS
    return [dict(zip(letters, line.split("|"))) for line in stdout.splitlines()[1:]]


def _seconds(used: str) -> int:
    """squeue's %M (``0:07``, ``1:02:03``, ``1-00:00:00``) in seconds."""
    days, _, rest = used.rpartition("-")
    total = 0
    for x in rest.split(":"):
        total = total * 60 + int(x)
    return int(days or 0) * 86400 + total


def _minutes(limit: str) -> int | None:
    """squeue's %l (``UNLIMITED``, ``10:00``, ``1:00:00``, ``1-00:00:00``) in minutes."""
    if limit in ("UNLIMITED", "NOT_SET", "N/A"):
        return None
    days, _, rest = limit.rpartition("-")
    parts = [int(x) for x in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    h, m, s = parts
    return (int(days or 0) * 24 + h) * 60 + m + (1 if s else 0)


HELD = {"JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied"}


def from_all(row: dict[str, str]) -> dict:
    """One job-table entry from a ``%all`` row: what Grid Engine's listing and the submit record
    say of that job (the Slurm-only facts, priorities and reasons, are left to the shim)."""
    state_ = {"RUNNING": "r", "SUSPENDED": "s", "PENDING": "qw"}[row["T"]]
    if state_ == "qw" and row["r"] in HELD:
        state_ = "hqw"
    job: dict = {"id": int(row["F"]), "name": row["j"], "user": row["u"], "partition": row["P"], "state": state_,
                 "submit": row["V"], "cpus": int(row["C"]), "nodes": int(row["D"]), "workdir": row["Z"],
                 "command": row["o"], "mem_mb": int(row["m"].rstrip("M"))}
    if state_ in ("r", "s"):
        job["start"] = row["S"]
    if state_ == "s":  # suspended after its TIME had run (scontrol suspend: the shim's suspend event)
        job["suspended"] = (datetime.fromisoformat(row["S"]) + timedelta(seconds=_seconds(row["M"]))).isoformat()
    task = row["K"]
    if task != "N/A":
        if "%" in task or "-" in task or "," in task:
            indices, _, throttle = task.partition("%")
            job["tasks"] = indices
            if throttle:
                job["throttle"] = int(throttle)
        else:
            job["task"] = int(task)
    limit = _minutes(row["l"])
    if limit is not None:
        job["time"] = limit
    if row["W"] != "(null)":
        job["licenses"] = row["W"]
    if row["b"] != "N/A":
        job["gres"] = row["b"].replace("gres/", "").replace("gres:", "")
    if row["y"] not in ("0", ""):
        job["nice"] = int(row["y"])
    if row["E"] != "(null)":
        dep = row["E"].split("(")[0]
        job["dependency"] = dep
        if row["r"] == "Dependency":
            job["after"] = [int(x) for x in dep.split(":")[1:]]
    if row["r"] == "BeginTime":
        job["begin"] = row["S"]
    if row["r"] == "JobHeldAdmin":
        job["hold"] = "admin"
    return job


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _hard(job: dict) -> list[tuple[str, str]]:
    out = []
    if job.get("time") is not None:
        out.append(("h_rt", str(job["time"] * 60)))
    out.append(("mem_free", f"{job['mem_mb']}M"))
    if job.get("gres"):
        name, _, count = job["gres"].rpartition(":")
        out.append((name, count))
    for lic in (job.get("licenses") or "").split(","):
        if lic:
            name, _, count = lic.partition(":")
            out.append((name, count or "1"))
    return out


def indices(job: dict) -> list[int]:
    """The array's whole index list as submitted (``indices``: sbatch -a's list), else 1-N up to
    the highest index the entry names (sbatch -a 1-N)."""
    from shim.slurm.jobids import expand

    if "indices" in job:
        return expand(job["indices"])
    top = job["task"] if "task" in job else max(expand(job["tasks"]))
    return list(range(1, top + 1))


def _ge_tasks(job: dict) -> str:
    """Grid Engine's task numbers of a pending array's indices: their places in the array's index
    list (1-based), as the shim submits an array (qsub -t 1-N, its record mapping index to task)."""
    from shim.slurm.jobids import compress, expand

    whole = indices(job)
    tasks = [whole.index(i) + 1 for i in expand(job["tasks"])]
    text = compress(tasks)
    return f"{text}:1" if "-" in text and "," not in text else text


def job_element(job: dict) -> str:
    """One ``job_list`` element in SGE 8.1.9's layout."""
    running = bool(set(job["state"]) & set("rsS"))  # (dr: being deleted while it runs)
    prio = "0.00000" if job["state"].startswith("h") else "0.50000"
    lines = [f'    <job_list state="{"running" if running else "pending"}">',
             f"      <JB_job_number>{job['id']}</JB_job_number>",
             f"      <JAT_prio>{prio}</JAT_prio>",
             f"      <JB_name>{escape(job['name'])}</JB_name>",
             f"      <JB_owner>{job['user']}</JB_owner>",
             f"      <state>{job['state']}</state>",
             (f"      <JAT_start_time>{job['start']}</JAT_start_time>" if running
              else f"      <JB_submission_time>{job['submit']}</JB_submission_time>"),
             f"      <queue_name>{job['partition'] + '@vm' if running else ''}</queue_name>",
             f"      <slots>{job['cpus']}</slots>"]
    if "task" in job:
        lines.append(f"      <tasks>{indices(job).index(job['task']) + 1}</tasks>")
    elif "tasks" in job:
        lines.append(f"      <tasks>{_ge_tasks(job)}</tasks>")
    lines.append(f"      <full_job_name>{escape(job['name'])}</full_job_name>")
    if job["cpus"] > 1 or job["nodes"] > 1:
        pe = "mpi" if job["nodes"] > 1 else "smp"
        lines.append(f'      <requested_pe name="{pe}">{job["cpus"]}</requested_pe>')
        if running:
            lines.append(f'      <granted_pe name="{pe}">{job["cpus"]}</granted_pe>')
    lines += [f'      <hard_request name="{n}" resource_contribution="0.000000">{v}</hard_request>'
              for n, v in _hard(job)]
    lines.append(f"      <hard_req_queue>{job['partition']}</hard_req_queue>")
    for p in job.get("after", ()):
        lines += [f"      <predecessor_jobs_req>{p}</predecessor_jobs_req>", f"      <predecessor_jobs>{p}</predecessor_jobs>"]
    lines += ["      <binding>NONE</binding>", "    </job_list>"]
    return "\n".join(lines) + "\n"


def listing(jobs: list[dict]) -> str:
    """``qstat -u '*' -r -xml`` holding these jobs (running ones first, as qstat lists them)."""
    run = [j for j in jobs if set(j["state"]) & set("rsS")]
    wait = [j for j in jobs if not set(j["state"]) & set("rsS")]
    return ("<?xml version='1.0'?>\n<job_info  xmlns:xsd=\"http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/"
            "resources/schemas/qstat/qstat.xsd\">\n  <queue_info>\n" + "".join(map(job_element, run))
            + "  </queue_info>\n  <job_info>\n" + "".join(map(job_element, wait)) + "  </job_info>\n</job_info>\n")


def submit_record(job: dict, array: list[int] | None) -> dict:
    """The shim's submit record of a job (the keys sbatch writes, store/records.py SUBMIT_TYPES)."""
    uid = USERS[job["user"]][0]
    rec = {"name": job["name"], "user": job["user"], "uid": uid, "partition": job["partition"],
           "account": "research", "qos": "normal", "workdir": job["workdir"], "script_path": job["command"],
           "ntasks": 1, "cpus_per_task": 1, "nodes": job["nodes"], "time": job.get("time", -1),
           "submit_time": _ts(job["submit"]), "sub": _ts(job["submit"]), "mem_mb": job["mem_mb"]}
    if job["cpus"] > 1:
        rec["ntasks"] = job["cpus"]
    for key in ("licenses", "dependency", "nice", "throttle"):
        if key in job:
            rec[key] = job[key]
    if job.get("gres"):
        rec["gres"] = job["gres"]
    if "begin" in job:
        rec["begin"] = _ts(job["begin"])
    if array:
        rec["array"] = array
    return rec


def jobs_of(moments: dict, name: str) -> list[dict]:
    """A moment's job table: its own (``jobs``), or its ``base`` moment's with ``edits`` (job id ->
    the fields that changed, from the case's own rows; ``null`` drops a field) and without the
    jobs ``gone`` (ended: the shim's events say how, ``ended``)."""
    m = moments[name]
    if "jobs" in m:
        return m["jobs"]
    out = []
    for j in jobs_of(moments, m["base"]):
        if j["id"] in m.get("gone", ()):
            continue
        key = f"{j['id']}_{j['task']}" if "task" in j else str(j["id"])
        edit = m.get("edits", {}).get(key, {})
        if edit is None:
            continue  # (that entry gone: a pending array's remainder cancelled)
        out.append({k: v for k, v in {**j, **edit}.items() if v is not None})
    return out


def ended(state_dir, jobs: list[dict]) -> None:
    """The shim's records of jobs that ended, which Grid Engine no longer lists: their submit
    record, and the events as the shim writes them (runtime/jobwrap.py's start and end of a run,
    scancel's cancel: ``cancel`` is what it says, ``was`` the job's state then). An entry is a job,
    or one task of an array (``task``; ``indices``: the array's)."""
    for j in jobs:
        assert j["user"] == "root"  # (another user's would be in that user's directory, as its wrapper writes them)
        _ended(state_dir, j)


def _ended(state_dir, j: dict) -> None:
    task = j.get("task")
    if task is None or task == indices(j)[0]:
        assert state.record_submit(str(state_dir), j["id"], submit_record(j, indices(j) if task else None))
    written = []
    if "start" in j:
        start = _ts(j["start"])
        written.append(("start", {"t": start, "node": "vm"}))
    if "cancel" in j:
        written.append(("cancel", {"t": _ts(j["end"]), "uid": 0, "user": "root", **j["cancel"]}))
    if "ended" in j:
        written.append(("end", {"t": _ts(j["end"]), "exit": j.get("exit", 0), "signal": j.get("signal", 0),
                                "state": j["ended"], "reason": j.get("reason", "None"), "node": "vm",
                                "start": _ts(j["start"])}))
    for kind, data in written:  # (written when they happened: their files' times too)
        assert state.record_event(str(state_dir), j["id"], task, kind, data)
        name = f"{j['id']}.{'x' if task is None else task}.{kind}.json"
        os.utime(state.record_file(str(state_dir), "events", name), (data["t"], data["t"]))


def accounting_lines(jobs: list[dict]) -> str:
    """Grid Engine's accounting file records (SGE 8.1.9's accounting(5): qname, hostname, group,
    owner, job_name, job_number, account, priority, submission, start and end times, failed,
    exit_status, ru_wallclock, ..., slots, task_number, ...) of the ended jobs that ran."""
    out = []
    for j in jobs:
        if "start" not in j or "ended" not in j:
            continue
        sub, start, end = (int(_ts(j[k])) for k in ("submit", "start", "end"))
        status = 128 + j["signal"] if j.get("signal") else j.get("exit", 0)
        out.append(":".join(str(x) for x in [
            j["partition"], "vm", j["user"], j["user"], j["name"], j["id"], "sge", 0, sub, start, end, 0, status,
            end - start, "0.001000", "0.000000", "0.000000", 0, 0, 0, 0, 300, 0, 0, "0.000000", 16, 0, 0, 0, 2, 1,
            "NONE", "defaultdepartment", "NONE", j["cpus"], j.get("task", 0), "0.001000", "0.000000", "0.000000",
            f"-q {j['partition']}", "0.000000", "NONE", "0.000000", 0, 0]) + "\n")
    return "".join(out)


def build(state_dir, jobs: list[dict]) -> str:
    """Write the jobs' submit records into ``state_dir`` (as their submitter: the test runs as
    root, whose copy speaks for every user's job) and return Grid Engine's listing of them."""
    from shim.slurm.jobids import expand

    arrays: dict[int, set[int]] = {}
    for j in jobs:
        if "task" in j:
            arrays.setdefault(j["id"], set()).add(j["task"])
        elif "tasks" in j:
            arrays.setdefault(j["id"], set()).update(expand(j["tasks"]))
    done: set[int] = set()
    for j in jobs:
        if j["id"] in done:
            continue
        done.add(j["id"])
        same = [x for x in jobs if x["id"] == j["id"]]
        arr = max((indices(x) for x in same if "task" in x or "tasks" in x), key=len) if j["id"] in arrays else None
        merged = {**j, **{k: x[k] for x in same for k in ("throttle",) if k in x}}
        assert state.record_submit(str(state_dir), j["id"], submit_record(merged, arr))
    for j in jobs:
        if "suspended" in j:
            assert state.record_event(str(state_dir), j["id"], j.get("task"), "suspend",
                                      {"t": _ts(j["suspended"]), "uid": 0, "user": "root", "owner": j["user"],
                                       "sub": _ts(j["submit"])})
    return listing(jobs)


# --- Grid Engine's answers to the job actions, on a moment's jobs ----------------------------------
# SGE 8.1.9's own words (shared/reference/sge-8.1.9: qdel-root.txt, qdel-array-task.txt,
# qdel-all-of-user.txt, qdel-pending-multiple.txt, qhold-user.txt, qrls-user.txt, qmod-suspend-job.txt,
# qalter-running-hrt.txt, qalter-pending.txt, qdel-nonexistent.txt, qhold-nonexistent.txt, each with its
# exit code in INDEX.tsv; and this repository's fixtures/gridengine/sge-8.1.9/live-qdel-mixed.txt,
# live-qmod-rj.txt, live-qmod-usj.txt, live-qhold-array-task.txt, refusals.txt), job and task numbers put in.

def _ge_task_numbers(job: dict) -> set[int]:
    """Grid Engine's task numbers of a job-table entry (none for a job that is no array)."""
    from shim.slurm.jobids import expand

    if "task" in job:
        return {indices(job).index(job["task"]) + 1}
    if "tasks" in job:
        whole = indices(job)
        return {whole.index(i) + 1 for i in expand(job["tasks"])}
    return set()


def _ge_id(word: str) -> tuple[int, set[int] | None]:
    """``5`` -> (5, None); ``5.3`` / ``5.3-4`` / ``5.1-6:1`` -> (5, {task numbers})."""
    job, _, tasks = word.partition(".")
    if not tasks:
        return int(job), None
    span, _, step = tasks.partition(":")
    lo, _, hi = span.partition("-")
    return int(job), set(range(int(lo), int(hi or lo) + 1, int(step or 1)))


def ge_action(jobs: list[dict], caller: str, tool: str, args: list[str]) -> tuple[int, str]:
    """(exit code, text) of Grid Engine's qdel, qhold, qrls, qalter or qmod -sj/-usj/-rj by
    ``caller`` on these jobs (a job-table moment), as SGE 8.1.9 words it."""
    if tool == "qalter":
        words, target = args[:-1], [args[-1]]
    elif tool == "qmod":
        words, target = args[:1], args[1:]
    elif tool in ("qhold", "qrls") and args[:1] == ["-h"]:
        words, target = args[:2], args[2:]
    else:
        words, target = [], args
    rc, out = 0, []
    for word in target:
        num, tasks = _ge_id(word)
        rows = [j for j in jobs if j["id"] == num]
        if not rows:
            out.append(f'invalid queue or job "{num}"' if tool == "qmod" else f'denied: job "{num}" does not exist')
            rc = {"qhold": 3, "qrls": 3}.get(tool, 1)
            continue
        owner = rows[0]["user"]
        if caller not in ("root", owner):
            rc = {"qhold": 18, "qrls": 18}.get(tool, 1)
            out.append(f'{caller} - you do not have the necessary privileges to delete the job "{num}"' if tool == "qdel"
                       else f'{caller} - you have no permission to modify job "{num}"' if tool == "qmod"
                       else f'denied: "{caller}" must be at least owner of job {num} to change job attributes')
            continue
        if tasks is not None:
            have = set().union(*map(_ge_task_numbers, rows))
            missing = sorted(tasks - have)
            if missing:
                out.append(f'job "{num}" task "{missing[0]}" does not exist')
                rc = 1
                continue
        out += _done(tool, words, caller, num, tasks, rows)
    return rc, "".join(line + "\n" for line in out)


def _done(tool: str, words: list[str], caller: str, num: int, tasks: set[int] | None, rows: list[dict]) -> list[str]:
    """What Grid Engine says it did to job ``num`` (or some of its tasks)."""
    if tool in ("qhold", "qrls"):
        return [f"modified hold of job-array task {num}.{t}" for t in sorted(tasks)] if tasks else [f"modified hold of job {num}"]
    if tool == "qalter":
        what = "hard resource list" if "-l" in words else "job name" if "-N" in words else "job"
        return [f"modified {what} of job {num}"]
    if tool == "qmod":
        return [{"-sj": f"{caller} - suspended job {num}", "-usj": f"{caller} - unsuspended job {num}",
                 "-rj": f"Pushed rescheduling of job {num} on host vm"}[words[0]]]
    out, waiting = [], []
    for j in rows:
        mine = _ge_task_numbers(j) if tasks is None else _ge_task_numbers(j) & tasks
        if tasks is not None and not mine:
            continue  # (another task of the array)
        if "d" in j["state"]:
            out.append(f"job {num} is already in deletion")
        elif set(j["state"]) & set("rs"):
            out += ([f"{caller} has registered the job-array task {num}.{t} for deletion" for t in sorted(mine)]
                    if "task" in j else [f"{caller} has registered the job {num} for deletion"])
        else:
            waiting += sorted(mine)
    if tasks is None and (waiting or not out):
        out.append(f"{caller} has deleted job {num}")
    elif len(waiting) > 1:
        out.append(f"{caller} has deleted job-array tasks {','.join(map(str, waiting))} of job {num}")
    elif waiting:
        out.append(f"{caller} has deleted job-array task {num}.{waiting[0]}")
    return out
