"""Security review 3, replayed live as mallory against the victim: srun's PMI listener (F-23),
GPU claims under ``/proc`` hidepid=2 (F-24, in a mount namespace the test makes) and
``srun --jobid`` into another user's job (F-34). Every attack must fail.

F-23's counting and deadline are also unit-tested with the real Server on loopback
(tests/unit/test_pmi.py); F-30 (scancel -w's hostfile) is in test_parser_bounds.py."""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess

import pytest

from conftest import as_user_argv, open_dir, shim_env, wait_until
from shim.runtime import pmi
from integration.conftest import two_hosts  # noqa: F401  (the second execution host, a fixture)

from .conftest import MALLORY, VICTIM, as_user, uid

PYTHON = "/opt/slurm-shim/bin/python"  # the installed venv: its .pth reaches the checkout's src

# A PMI-1 task over PMI_FD: init, put its card, barrier, read every rank's card.
PMI_TASK = r"""
import os, socket
s = socket.socket(fileno=int(os.environ["PMI_FD"]))
f = s.makefile("rwb", buffering=0)
rank, size = os.environ["PMI_RANK"], int(os.environ["PMI_SIZE"])
def ask(line):
    f.write((line + "\n").encode())
    return f.readline().decode().strip()
assert "rc=0" in ask("cmd=init pmi_version=1 pmi_subversion=1")
kvs = ask("cmd=get_my_kvsname").split("kvsname=")[1]
assert "rc=0" in ask(f"cmd=put kvsname={kvs} key=k{rank} value=v{rank}")
assert "barrier_out" in ask("cmd=barrier_in")
for r in range(size):
    assert f"value=v{r}" in ask(f"cmd=get kvsname={kvs} key=k{r}")
os.write(1, f"rank {rank}: PMI OK on {socket.gethostname().split('.')[0]}\n".encode())  # one write
"""

# Mallory's watcher (the review's B-5): every new TCP listener of the victim's uid in
# /proc/net/tcp gets PER idle connections that never send a byte; those the listener closes are
# opened again while it listens. Runs until its stdin closes, then says what it did.
WATCHER = r"""
import json, select, socket, sys, threading, time
victim, per = int(sys.argv[1]), int(sys.argv[2])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
def listening():
    found = set()
    for path, fam in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            rows = open(path).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if f[3] == "0A" and int(f[7]) == victim:
                a, p = f[1].split(":")
                raw = bytes.fromhex(a)
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.add((fam, socket.inet_ntop(fam, raw), int(p, 16)))
    return found
def alive(s):
    if not select.select([s], [], [], 0)[0]:
        return True
    try:
        return s.recv(1) != b""
    except OSError:
        return False
before = listening()
print("ready", flush=True)
seen, held, opened, most = set(), {}, 0, 0
while not stop.is_set():
    now = listening() - before
    seen |= now
    for l in now:
        socks = held.setdefault(l, [])
        socks[:] = [s for s in socks if alive(s) or s.close()]
        while len(socks) < per:
            s = socket.socket(l[0], socket.SOCK_STREAM)
            s.settimeout(1)
            try:
                s.connect(l[1:])
            except OSError:
                s.close()
                break
            socks.append(s)
            opened += 1
    most = max(most, sum(len(v) for v in held.values()))
    time.sleep(0.002)
print(json.dumps({"listeners": sorted([a, p] for _, a, p in seen), "opened": opened, "most": most}), flush=True)
"""


@pytest.fixture
def pmi_task():
    d = open_dir("pmi", 0o755)
    path = d / "pmi_task.py"
    path.write_text(PMI_TASK)
    path.chmod(0o644)
    return path


def test_f23_an_mpi_step_gets_through_while_mallory_crowds_its_pmi_listener(victim, mallory, pmi_task,
                                                                            two_hosts):  # noqa: F811
    """The review: mallory's 64 idle connections to srun's listener broke every relay (ranks got
    EPIPE, srun exit 1). The victim's ``salloc -N2 srun --mpi=pmi2`` across both hosts (each
    host's ranks through its relay) now succeeds while mallory opens 100 idle connections to
    every listener she finds, and opens them again as they are closed."""
    watcher = subprocess.Popen(as_user_argv(MALLORY, shim_env(), ["/usr/bin/python3", "-I", "-c", WATCHER,
                                                                  str(uid(VICTIM)), "100"]),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert watcher.stdout.readline().strip() == "ready"
        cp = as_user(VICTIM, "salloc", "-p", "twohost", "-N2", "-n4", "srun", "--mpi=pmi2", "-n4", "python3",
                     str(pmi_task), env=two_hosts, timeout=240)
    finally:
        out, _ = watcher.communicate("", timeout=60)
    report = json.loads(out.strip().splitlines()[-1])
    assert cp.returncode == 0, (cp.stdout, cp.stderr, report)
    ranks = dict(re.findall(r"rank (\d+): PMI OK on (\w+)", cp.stdout))
    assert sorted(ranks) == ["0", "1", "2", "3"], cp.stdout
    assert set(ranks.values()) == {os.uname().nodename.split(".")[0], two_hosts.node}, cp.stdout
    # the attack was made: mallory found the listeners and connected. How many she gets in before
    # the listener closes (every rank connected) is chance; that 100 idle strangers on one listener
    # keep no relay out is tests/unit/test_pmi.py's, without a race
    assert report["listeners"] and report["opened"] >= 1, report
    # srun's listener is bound where the step's hosts reach it, on one port: the address toward
    # the second host (the veth) and toward this one (loopback), not every address. (The victim's
    # other listeners on 0.0.0.0 are Grid Engine's qrsh -inherit's own; crowded too, to no effect.)
    toward = pmi.source_address(two_hosts.node)
    port = next(p for a, p in report["listeners"] if a == toward)
    assert sorted(a for a, p in report["listeners"] if p == port) == sorted(
        {toward, pmi.source_address(os.uname().nodename)}), report


# --- F-24 ----------------------------------------------------------------------------------------

# The real claim_gpus, as one user, for one job; Grid Engine's answer (a stand-in: no real GPU
# job exists) says both users' jobs run on h1 with one GPU each of its two. Prints its claim,
# and whether the other claimant's /proc/<pid> is visible to it, then holds the claim until its
# stdin closes (as a job wrapper holds it for the job's life).
CLAIM = r"""
import json, os, sys
from shim.runtime import jobwrap
class GE:
    def running_requests(self, host):
        return [(sys.argv[3], 501, {"gpu": "1"}), (sys.argv[4], 502, {"gpu": "1"})]
    def host_complex_values(self, host):
        return {"gpu": "2"}
ids = jobwrap.claim_gpus(sys.argv[1], "h1", 1, int(sys.argv[2]), backend=GE())
other = sys.argv[5] if len(sys.argv) > 5 else ""
print(json.dumps({"ids": ids, "pid": os.getpid(), "uid": os.getuid(),
                  "sees_other": os.path.exists(f"/proc/{other}") if other else None}), flush=True)
sys.stdin.read()
"""


def _claimant(user: str, sdir, job: int, other_pid: int | None = None, hidepid: bool = False) -> subprocess.Popen:
    """A claim_gpus process as ``user`` (setpriv from root); with hidepid, inside a private mount
    namespace whose /proc is mounted hidepid=2 (the host's /proc is untouched)."""
    pw = pwd.getpwnam(user)
    argv = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups",
            PYTHON, "-I", "-c", CLAIM, str(sdir), str(job), VICTIM, MALLORY,
            *([str(other_pid)] if other_pid else [])]
    if hidepid:
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount -t proc -o hidepid=2 proc /proc && exec "$@"', "sh", *argv]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd="/", env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": pw.pw_dir})


def _claimed(p: subprocess.Popen) -> dict:
    line = p.stdout.readline()
    assert line, p.stderr.read() if p.poll() is not None else "no answer"
    return json.loads(line)


def test_f24_two_users_claims_never_share_a_gpu_under_hidepid(victim, mallory):
    """The review: with /proc mounted hidepid=2, the victim's live claim looked dead to mallory
    (her /proc/<pid> check found nothing), and both got GPU 0. Now the victim's claimant holds a
    lock on its claim: mallory, in a namespace whose /proc hides the victim's processes, gets
    GPU 1; once the victim's claimant is gone, GPU 0 is free again."""
    sdir = open_dir("gpu-claims", 0o755)
    (sdir / "gpus").mkdir()
    os.chmod(sdir / "gpus", 0o1777)  # root's sticky directory, as install makes it
    held = []
    try:
        held.append(_claimant(VICTIM, sdir, 501))
        first = _claimed(held[-1])
        assert first["ids"] == [0] and first["uid"] == uid(VICTIM)
        held.append(_claimant(MALLORY, sdir, 502, other_pid=first["pid"], hidepid=True))
        second = _claimed(held[-1])
        assert second["sees_other"] is False  # hidepid=2 hides the victim's process from her
        assert second["ids"] == [1] and second["uid"] == uid(MALLORY)
        held[0].communicate("", timeout=30)  # the victim's job ends: its lock goes with it
        held.append(_claimant(MALLORY, sdir, 503, hidepid=True))
        assert _claimed(held[-1])["ids"] == [0]
    finally:
        for p in held:
            if p.poll() is None:
                p.communicate("", timeout=30)


# --- F-34 ----------------------------------------------------------------------------------------


@pytest.fixture
def victims_running_job(victim, workdir):
    cp = as_user(VICTIM, "sbatch", "--parsable", "-n2", "-o", "/dev/null", "--wrap", "sleep 300", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    job = int(cp.stdout.strip().split(";")[0])
    wait_until(lambda: as_user(VICTIM, "squeue", "-h", "-j", str(job), "-o", "%T").stdout.strip() == "RUNNING",
               120, f"job {job} running")
    yield job
    as_user(VICTIM, "scancel", str(job))


def test_f34_srun_into_another_users_job_is_refused_before_grid_engine_runs_anything(victims_running_job,
                                                                                      mallory):
    """The review: mallory's ``srun --jobid=<victim's job>`` went as far as qrsh -inherit, which
    execd refused ("Task launch failed"). Now it is slurmctld's answer, exit 1, with the job's
    owner asked of Grid Engine (qstat -j) and no qrsh started: also with the job's JOB_ID and
    SLURM_JOB_ID forged in her environment (srun "inside" the job)."""
    job = victims_running_job
    want = f"srun: error: Unable to create step for job {job}: Access/permission denied"
    for env in ({}, {"JOB_ID": str(job), "SLURM_JOB_ID": str(job)}):
        cp = as_user(MALLORY, "env", "SLURM_SHIM_DEBUG=1", *(f"{k}={v}" for k, v in env.items()),
                     "srun", f"--jobid={job}", "-n1", "id", cwd="/tmp")
        logged = [ln for ln in cp.stderr.splitlines() if ln.startswith("slurm-shim: debug: ")]
        said = [ln for ln in cp.stderr.splitlines() if not ln.startswith("slurm-shim: debug: ")]
        assert (cp.returncode, said, cp.stdout) == (1, [want], ""), cp.stderr
        assert any(f"qstat -j {job}" in ln for ln in logged), logged
        assert not [ln for ln in logged if "qrsh" in ln], logged
    # the victim's own steps still run in it
    cp = as_user(VICTIM, "srun", f"--jobid={job}", "-n1", "id", "-un", cwd="/tmp", timeout=120)
    assert (cp.returncode, cp.stdout) == (0, f"{VICTIM}\n"), cp.stderr
