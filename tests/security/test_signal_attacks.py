"""The signal channel (scancel -s, issue 15 part 6) against a second plain user, live: mallory
(shimmallory) tries to signal shimvictim's running batch job through scancel, by planting
forged requests where she can write, by writing where the victim's and root's requests live, by
linking there, and by flooding. Nothing reaches the victim's job; the victim's own signals still
do, promptly. Slurm's answer to a signal from someone who does not own the job is job_signal_id's
ESLURM_ACCESS_DENIED (src/slurmctld/job_mgr.c): "Access/permission denied", exit 210."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from conftest import STATE_DIR, run, wait_until
from security.conftest import MALLORY, VICTIM, as_user, mallory_python, uid

pytestmark = pytest.mark.gridengine

STATE = STATE_DIR  # (the selected cell's)
CMD_TIMEOUT = 25

SCRIPT = """#!/bin/bash
trap 'echo "got USR1"' USR1
trap 'echo "got USR2"' USR2
trap 'echo "got HUP"' HUP
echo started
for i in $(seq 1800); do sleep 0.1; done
"""


@pytest.fixture
def victim_job(victim, mallory):
    """A running batch job of the victim's that traps USR1, USR2 and HUP; its output file."""
    import pwd

    home = Path(pwd.getpwnam(VICTIM).pw_dir)
    script = home / "sigjob.sh"
    script.write_text(SCRIPT)
    os.chown(script, uid(VICTIM), uid(VICTIM))
    script.chmod(0o755)
    cp = as_user(VICTIM, "sbatch", "--parsable", "-t", "10", "-o", "sig-%j.out", str(script), timeout=CMD_TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    job = int(cp.stdout.strip())
    out = home / f"sig-{job}.out"
    try:
        wait_until(lambda: out.exists() and "started" in out.read_text(), 60, "the victim's job to start")
        yield job, out
    finally:
        run("qdel", str(job))
        shutil.rmtree(STATE / "users" / str(uid(MALLORY)) / "signals", ignore_errors=True)


def victim_signals(job: int, sig: str, out: Path, marker: str) -> str:
    """The victim's own -b signal, as a probe: once its trap ran, every request written before it
    was looked at (the wrapper reads requests oldest first)."""
    cp = as_user(VICTIM, "scancel", "-b", "-s", sig, str(job), timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stderr) == (0, ""), cp.stderr
    wait_until(lambda: marker in out.read_text(), 30, f"{marker!r} from the victim's own signal")
    return out.read_text()


def test_mallorys_scancel_signal_is_access_denied_and_reaches_nothing(victim_job):
    job, out = victim_job
    for argv in (["-s", "USR1"], ["-b", "-s", "USR1"], ["-f", "-s", "USR1"], ["--signal=TERM"], ["-s", "HUP", "-b"]):
        cp = as_user(MALLORY, "scancel", *argv, str(job), timeout=CMD_TIMEOUT)
        assert (cp.returncode, cp.stdout, cp.stderr) == (
            210, "", f"scancel: error: Kill job error on job id {job}: Access/permission denied\n"), argv
    signals = STATE / "users" / str(uid(MALLORY)) / "signals"
    assert not signals.exists() or list(signals.iterdir()) == []  # scancel wrote nothing for her
    text = victim_signals(job, "USR2", out, "got USR2")
    assert "got USR1" not in text and "got HUP" not in text
    assert run("squeue", "-h", "-j", str(job), "-o", "%T").stdout == "RUNNING\n"


def test_forged_linked_and_flooded_requests_are_ignored(victim_job):
    """Mallory's own directory may hold anything: requests naming the victim as owner, links to
    the victim's files, FIFOs, a flood. The wrapper never reads her directory. She cannot add a
    file to the victim's ``signals/`` or root's, nor replace one there."""
    job, out = victim_job
    vdir = STATE / "users" / str(uid(VICTIM)) / "signals"
    rdir = STATE / "users" / "0" / "signals"
    req = {"t": time.time(), "sig": 10, "batch": True, "full": False, "owner": VICTIM, "uid": 0, "sub": None}
    code = f"""
import json, os, sys
users = {str(STATE / 'users')!r}
mine = os.path.join(users, str(os.getuid()))
os.makedirs(os.path.join(mine, "signals"), exist_ok=True)
req = json.loads({json.dumps(json.dumps(req))})
for i in range(3000):   # a flood, forged as the victim's and as root's word
    with open(os.path.join(mine, "signals", f"{job}.{{i:05d}}.deadbeef.json"), "w") as f:
        json.dump(req, f)
os.mkfifo(os.path.join(mine, "signals", f"{job}.99999.00000000.json"))
results = []
for d in ({str(vdir)!r}, {str(rdir)!r}, os.path.join(users, {str(uid(VICTIM))!r}), os.path.join(users, "0")):
    for how in ("create", "link", "mkdir"):
        target = os.path.join(d, f"{job}.1.cafebabe.json") if how != "mkdir" else os.path.join(d, "signals")
        try:
            if how == "create":
                with open(target, "x") as f:
                    json.dump(req, f)
            elif how == "link":
                os.symlink(os.path.join(mine, "signals", f"{job}.00000.deadbeef.json"), target)
            else:
                os.mkdir(target)
            results.append(f"{{how}} {{target}}: done")
        except OSError as e:
            results.append(f"{{how}} {{target}}: {{type(e).__name__}}")
print("\\n".join(results))
"""
    cp = mallory_python(code, timeout=120)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert len(lines) == 12 and not any(ln.endswith(": done") for ln in lines), lines
    # she can write nowhere but her own directory (the victim's signals/ may not exist yet: then
    # its parent refuses her mkdir)
    text = victim_signals(job, "USR2", out, "got USR2")
    assert "got USR1" not in text
    # and the victim's own signals still arrive promptly through her flood
    t0 = time.monotonic()
    text = victim_signals(job, "HUP", out, "got HUP")
    assert time.monotonic() - t0 < 10 and "got USR1" not in text
    assert run("squeue", "-h", "-j", str(job), "-o", "%T").stdout == "RUNNING\n"


def test_a_request_the_victim_did_not_write_in_her_own_directory_is_not_believed(victim_job):
    """Even in the victim's directory (where only she or root can write), a request must name her
    job's owner: root's copy of a forged request naming someone else is ignored (records.speaks_for)."""
    job, out = victim_job
    vdir = STATE / "users" / str(uid(VICTIM)) / "signals"
    vdir.mkdir(exist_ok=True)
    os.chown(vdir, uid(VICTIM), uid(VICTIM))
    bad = vdir / f"{job}.1.abcdef01.json"
    bad.write_text(json.dumps({"t": time.time(), "sig": 10, "batch": True, "owner": MALLORY}))
    os.chown(bad, uid(VICTIM), uid(VICTIM))
    try:
        text = victim_signals(job, "USR2", out, "got USR2")
        assert "got USR1" not in text
    finally:
        bad.unlink(missing_ok=True)
