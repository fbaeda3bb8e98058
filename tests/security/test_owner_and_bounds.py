"""Review 3's F-25, F-26 and F-28 replayed live: whose records speak for a job, and what one
user's records may cost everyone else. Every attack must fail.

F-25  a user named with digits ("47113") is not uid 47113: the records of her jobs come from
      her own directory, and the user who holds uid 47113 can forge none of them (afterok,
      scancel's and scontrol's owner checks, squeue, sacct)
F-26  mallory's 20,000 valid recent end events and 30,000 junk names in her own directory put
      at most state.ENDED_MAX rows of hers in the victim's and root's views, which stay right
F-28  mallory's cancel event for the victim's held-and-cancelled job, which Grid Engine has
      forgotten, never makes root see it as hers
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import time
from pathlib import Path

import pytest

from conftest import run, test_user, wait_until
from security.conftest import MALLORY, VICTIM, as_user, mallory_python, uid
from security.test_record_attacks import (  # noqa: F401  (fixtures: jobs, mallory_dir, _remove_dirs)
    CMD_TIMEOUT, SITE_CONFIG, _remove_dirs, _state_dir, ended_in_sacct, ev, in_ge, jobs, mallory_dir, open_dir,
    plant)
from shim.store import state

pytestmark = pytest.mark.gridengine

USERS = Path(_state_dir(SITE_CONFIG)) / "users"
DIGITS = "47113"          # a user whose name is digits ...
HOLDER = "shimnumuid"     # ... and the user whose uid those digits are


@pytest.fixture(scope="module")
def digit_users():
    """DIGITS (any uid but 47113) and HOLDER (uid 47113), made if missing; the holder's records
    removed afterwards."""
    test_user(DIGITS, "-s", "/bin/bash", "--badname")
    test_user(HOLDER, "-s", "/bin/bash", "-u", DIGITS)
    assert uid(HOLDER) == int(DIGITS) != uid(DIGITS)
    yield
    shutil.rmtree(USERS / DIGITS, ignore_errors=True)


def squeue(user: str, *argv: str) -> str:
    cp = as_user(user, "squeue", *argv, timeout=CMD_TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


# ---------------------------------------------------------------------------------------------
# F-25: names are names


def test_a_digits_name_is_never_taken_for_a_uid(digit_users, jobs, tmp_path_factory):
    out = open_dir(tmp_path_factory, "f25")
    a = jobs.sbatch(DIGITS, "--hold", "-J", "f25a", "-o", str(out / "a.out"), "--wrap", "echo A-RAN")
    b = jobs.sbatch(DIGITS, f"--dependency=afterok:{a}", "-J", "f25b", "-o", str(out / "b.out"),
                    "--wrap", "echo B-RAN")
    now = time.time()
    # the holder of uid 47113 writes, in her own directory (users/47113), what would end A
    plant([{"path": ev(a, "cancel"), "data": json.dumps({"t": now, "uid": int(DIGITS), "user": HOLDER,
                                                         "owner": DIGITS, "was": "PENDING",
                                                         "reason": "DependencyNeverSatisfied"})},
           {"path": ev(a), "data": json.dumps({"t": now, "exit": 3, "signal": 0, "state": "FAILED",
                                               "node": "vm", "owner": DIGITS})},
           {"path": f"jobs/{a}.json", "data": json.dumps({"t": now, "user": DIGITS, "name": "forged"})}],
          user=HOLDER)
    assert (USERS / DIGITS / "records" / "events" / str(a // 100) / f"{a}.x.cancel.json").stat().st_uid == int(DIGITS)
    # scancel's owner check: the holder is not the job's owner
    cp = as_user(HOLDER, "scancel", str(a), timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stderr) == (210, f"scancel: error: Kill job error on job id {a}: Access/permission denied\n")
    # scontrol's: the same
    cp = as_user(HOLDER, "scontrol", "update", f"JobId={a}", "TimeLimit=5", timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stderr) == (1, f"Access/permission denied for job {a}\n")
    assert squeue(DIGITS, "-j", str(a), "-h", "-o", "%i %u %j %T %l") == f"{a} {DIGITS} f25a PENDING UNLIMITED\n"
    # afterok: B runs once A completes, the planted cancel notwithstanding
    assert as_user(DIGITS, "scontrol", "release", str(a), timeout=CMD_TIMEOUT).returncode == 0
    wait_until(lambda: (out / "b.out").exists() and "B-RAN" in (out / "b.out").read_text(), 90, "B to run")
    for who in (DIGITS, "root"):
        assert ended_in_sacct(who, a, "COMPLETED") == f"{a}|COMPLETED|0:0\n"
        assert ended_in_sacct(who, b, "COMPLETED") == f"{b}|COMPLETED|0:0\n"
    wait_until(lambda: not in_ge(a), 30, "Grid Engine to let A go")
    for who in (DIGITS, "root"):
        assert squeue(who, "-t", "all", "-j", str(a), "-h", "-o", "%i %j %T") in (f"{a} f25a COMPLETED\n", "")


# ---------------------------------------------------------------------------------------------
# F-26: one user's records cannot fill or slow anyone else's view


FLOOD, JUNK, FIRST = 20_000, 30_000, 5_000_000


def test_one_users_flood_of_records_is_bounded_in_everyone_elses_view(victim, mallory_dir, jobs):
    job = jobs.sbatch(VICTIM, "--hold", "-J", "f26", "-o", "/dev/null", "--wrap", "true")
    code = f"""
import json, os, time
d = os.path.join({str(USERS)!r}, str(os.getuid()))
rec = os.path.join(d, "records", "events")  # the store's layout (store/layout.py): id shards, 10-minute buckets
now = time.time()
b = int(now // 600)
ev = os.path.join(rec, "t", str(b // 144), str(b))  # the bucket every window of now lists
os.makedirs(ev, 0o755, exist_ok=True)
before = set(os.listdir(ev))  # (what earlier tests left in her directory is not counted)
body = json.dumps({{"t": now, "exit": 0, "signal": 0, "state": "COMPLETED", "node": "vm", "name": "flood"}})
for i in range({FLOOD}):
    j = {FIRST} + i
    shard = os.path.join(rec, str(j // 100))
    os.makedirs(shard, 0o755, exist_ok=True)
    p = os.path.join(shard, f"{{j}}.x.end.json")
    with open(p, "w") as f:
        f.write(body)
    os.link(p, os.path.join(ev, f"{{j}}.x.end.json"))
for i in range({JUNK}):
    open(os.path.join(ev, f"junk-{{i}}"), "w").close()
print(len(set(os.listdir(ev)) - before))
"""
    cp = mallory_python(code, timeout=300)
    assert (cp.returncode, cp.stdout) == (0, f"{FLOOD + JUNK}\n"), cp.stderr
    assert len(squeue(MALLORY, "-t", "all", "-h", "-u", MALLORY, "-o", "%i")) > 0  # her own view: hers
    for who in (VICTIM, "root"):
        rows = squeue(who, "-t", "all", "-h", "-o", "%i|%u|%T").splitlines()
        hers = [r for r in rows if r.split("|")[1] == MALLORY]
        assert len(hers) == state.ENDED_MAX, (who, len(hers))  # her newest, of 20,000 (50,000 names: all listed)
        assert f"{job}|{VICTIM}|PENDING" in rows
        assert squeue(who, "-t", "all", "-j", str(job), "-h", "-o", "%i %u %T") == f"{job} {VICTIM} PENDING\n"
    cp = run("sacct", "-a", "-X", "-n", "-P", "-o", "JobID,User", timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert sum(1 for ln in cp.stdout.splitlines() if ln.endswith(f"|{MALLORY}")) <= state.ENDED_MAX


# ---------------------------------------------------------------------------------------------
# F-28: a forgotten job is never taken over by a plant


def test_a_planted_cancel_never_makes_a_forgotten_job_the_planters(victim, mallory_dir, jobs):
    # the review's order: mallory's uid below the victim's, so that "the lowest uid" was hers
    assert uid(MALLORY) < uid(VICTIM)
    job = jobs.sbatch(VICTIM, "--hold", "-J", "f28", "-o", "/dev/null", "--wrap", "true")
    cp = as_user(VICTIM, "scancel", str(job), timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stderr) == (0, "")
    wait_until(lambda: not in_ge(job), 30, "Grid Engine to forget the job")
    now = time.time()
    plant([{"path": ev(job, "cancel"), "data": json.dumps(
        {"t": now, "uid": uid(MALLORY), "user": MALLORY, "owner": MALLORY, "name": "sr3-spoofed", "cpus": 64,
         "partition": "gpu", "was": "PENDING"})},
           {"path": f"jobs/{job}.json", "data": json.dumps({"t": now, "user": MALLORY, "name": "sr3-spoofed",
                                                             "partition": "gpu", "ntasks": 64})}])
    cp = as_user("root", "squeue", "-t", "all", "-j", str(job), "-h", "-o", "%i|%u|%j", timeout=CMD_TIMEOUT)
    # nothing (the id is contested and no authority names its owner), or the victim's job: never hers
    assert (cp.returncode, cp.stdout, cp.stderr) in ((1, "", "slurm_load_jobs error: Invalid job id specified\n"),
                                                     (0, f"{job}|{VICTIM}|f28\n", "")), cp
    everyone = squeue("root", "-t", "all", "-h", "-o", "%i|%u|%j").splitlines()
    assert not [r for r in everyone if r.startswith(f"{job}|") and (MALLORY in r or "spoofed" in r)], everyone
    cp = run("sacct", "-j", str(job), "-X", "-n", "-P", "-o", "JobID,User,JobName,Partition", timeout=CMD_TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    assert MALLORY not in cp.stdout and "spoofed" not in cp.stdout, cp.stdout
    # the victim still sees her own job as it was
    assert squeue(VICTIM, "-t", "all", "-j", str(job), "-h", "-o", "%i|%u|%j|%T") == f"{job}|{VICTIM}|f28|CANCELLED\n"
