"""Attacks on the in-job runtime (the job wrapper, srun's launchers, salloc's holder, GPU claims)
and on the submit agent, replayed live as ``shimmallory`` against ``shimvictim`` and root.

Each test plants what the review's recipe planted (or the nearest thing the new layout still
lets a plain user make), runs the victim's real job, and asserts that the attack failed: the
victim's job ran its own script with its own environment, on a real device, with Slurm's result,
and nothing of mallory's was used, changed or read. Waiting is on real state, with bounds.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import EXECD_SPOOL, QMASTER_SPOOL, STATE_DIR, run, wait_until
from security.conftest import MALLORY, as_user, mallory_python, uid

pytestmark = pytest.mark.gridengine

STATE = STATE_DIR  # (the selected cell's)
HOST = os.uname().nodename.split(".")[0]
JOBSEQ = QMASTER_SPOOL / "jobseqnum"


# ---------------------------------------------------------------------------------------------
# helpers


def user_dir(user: str | None) -> Path:
    return STATE / "users" / str(uid(user) if user else 0)


def submit(user: str | None, *argv: str, cwd: Path, env: dict | None = None) -> int:
    """sbatch --parsable as user (None: root); the job id."""
    words = ["sbatch", "--parsable", *argv]
    cp = as_user(user, *words, cwd=cwd, env=env) if user else run(*words, cwd=cwd, env=env)
    assert cp.returncode == 0, cp.stderr
    return int(cp.stdout.strip().split(";")[0])


def end_event(user: str | None, job: int, timeout: float = 120) -> dict:
    path = user_dir(user) / "records" / "events" / str(job // 100) / f"{job}.x.end.json"  # (store/layout.py)
    wait_until(path.exists, timeout, f"the end record of job {job}")
    return json.loads(path.read_text())


def wait_text(path: Path, marker: str, timeout: float = 120) -> str:
    wait_until(lambda: path.exists() and marker in path.read_text(errors="replace"), timeout,
               f"{marker!r} in {path}")
    return path.read_text(errors="replace")


def gone(job: int) -> bool:
    return run("qstat", "-j", str(job)).returncode != 0


def running(job: int) -> bool:
    rows = [ln.split() for ln in run("qstat", "-u", "*").stdout.splitlines()[2:]]
    return any(r and r[0] == str(job) and r[4] == "r" for r in rows)


def next_job_id() -> int:
    """The id Grid Engine hands out next (world-readable, as the review's recipe used it)."""
    try:
        return int(JOBSEQ.read_text().split()[0]) + 1
    except (OSError, ValueError, IndexError):
        return 1


def mallory_background(code: str) -> subprocess.Popen:
    """A long-running attack tool of mallory's (stopped by the test through its Popen)."""
    return subprocess.Popen(["runuser", "-u", MALLORY, "--", "/usr/bin/python3", "-I", "-c", code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/",
                            start_new_session=True)


def kill(p: subprocess.Popen) -> None:
    """End a tool of mallory's: its own process group (runuser and her program under it)."""
    import signal

    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.communicate()


def stop(p: subprocess.Popen, stop_file: Path | None = None, timeout: float = 30) -> tuple[str, str]:
    if stop_file is not None:
        stop_file.touch()
        stop_file.chmod(0o644)
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        import signal

        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
        return "", f"{err}(still running {timeout:.0f} s after it was told to stop; killed; what it printed: {out!r})"


@pytest.fixture
def attack_dir(tmp_path_factory, mallory) -> Path:
    """A directory of mallory's own for her tools' logs and files (others can read it)."""
    d = Path(tmp_path_factory.mktemp("mallory", numbered=True))
    for parent in d.parents:
        if str(parent) in ("/", "/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o755)
    os.chown(d, uid(mallory), uid(mallory))
    d.chmod(0o755)
    return d


@pytest.fixture
def planted():
    """Paths mallory planted outside her own directories; removed (as root) afterwards."""
    paths: list[Path] = []
    yield paths
    import shutil

    for p in paths:
        if p.is_symlink() or p.is_file() or (p.exists() and not p.is_dir()):
            p.unlink(missing_ok=True)
        elif p.is_dir():
            shutil.rmtree(p, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# F-2: the script copy in a predictable /tmp directory


SWAPPER = r"""
import os, sys, time
dirs = sys.argv_dirs
evil = sys.argv_evil
log = open(sys.argv_log, "a")
deadline = time.time() + 90
while time.time() < deadline and not os.path.exists(sys.argv_stop):
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for root, subdirs, files in os.walk(d):
            for n in files:
                p = os.path.join(root, n)
                if n == "slurm_script" and not os.path.islink(p):
                    try:
                        tmp = p + ".m"
                        with open(tmp, "w") as f:
                            f.write(evil)
                        os.chmod(tmp, 0o755)
                        os.replace(tmp, p)
                        log.write("swapped %s\n" % p)
                        log.flush()
                    except OSError as e:
                        pass
    time.sleep(0.01)
"""


@pytest.mark.parametrize("who", ["victim", "root"])
@pytest.mark.parametrize("variant", ["dirs", "symlinks"])
def test_job_script_never_goes_where_mallory_planted(who, variant, victim, mallory, workdir, attack_dir,
                                                     planted, tmp_path_factory):
    """F-2. Mallory learns the id of a held job, then pre-creates the old script directory
    ``/tmp/slurm-shim-<id>.batch`` and Grid Engine's TMP name ``/tmp/<id>.1.debug`` (mode 0777,
    with ``slurm_script`` a symlink to a precious file of the job's owner), or makes the old name
    itself a symlink to a directory of the owner's; a swapper loop replaces any ``slurm_script``
    it can reach with her own program. The job must run its own script; the precious file and
    mallory's planted entries stay as they were."""
    user = victim if who == "victim" else None
    owner = uid(victim) if user else 0
    safe = Path(tmp_path_factory.mktemp(f"precious-{who}", numbered=True))
    for parent in safe.parents:  # the owner's jobs can reach it (the old code wrote through the link)
        if str(parent) in ("/", "/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o755)
    os.chown(safe, owner, owner)
    safe.chmod(0o700)
    precious = safe / "slurm_script"
    precious.write_text("precious data\n")
    os.chown(precious, owner, owner)
    precious.chmod(0o600)
    tag = uuid.uuid4().hex[:8]
    job = submit(user, "--hold", "-p", "debug", "--wrap", f"echo OWN-SCRIPT-RAN-{tag}", cwd=workdir)
    old = Path(f"/tmp/slurm-shim-{job}.batch")
    ge_tmp = Path(f"/tmp/{job}.1.debug")
    planted += [old, ge_tmp]
    plan = {"dirs": [str(old), str(ge_tmp)], "links": [], "target": str(precious)}
    if variant == "symlinks":
        plan = {"dirs": [str(ge_tmp)], "links": [str(old)], "target": str(precious)}
    setup = mallory_python(f"""
import json, os
plan = json.loads({json.dumps(json.dumps(plan))})
for d in plan["dirs"]:
    os.mkdir(d)
    os.chmod(d, 0o777)
    os.symlink(plan["target"], os.path.join(d, "slurm_script"))
for l in plan["links"]:
    os.symlink(os.path.dirname(plan["target"]), l)
print("planted")
""")
    assert setup.stdout.strip() == "planted", setup.stderr
    evil = f"#!/bin/sh\necho MALLORY-CODE-RAN-AS-$(id -un) > {attack_dir}/ran-{tag}\necho MALLORY-CODE-RAN\n"
    stop_file = attack_dir / f"stop-{tag}"
    log = attack_dir / f"swaps-{tag}"
    code = SWAPPER.replace("sys.argv_dirs", repr([str(old), str(ge_tmp)])).replace("sys.argv_evil", repr(evil)) \
        .replace("sys.argv_log", repr(str(log))).replace("sys.argv_stop", repr(str(stop_file)))
    swapper = mallory_background(code)
    try:
        assert run("qrls", str(job)).returncode == 0
        out = wait_text(workdir / f"slurm-{job}.out", f"OWN-SCRIPT-RAN-{tag}")
        end = end_event(user, job)
    finally:
        stop(swapper, stop_file)
    assert "MALLORY" not in out
    assert (end["state"], end["exit"]) == ("COMPLETED", 0)
    assert not (attack_dir / f"ran-{tag}").exists()
    assert not log.exists() or "swapped" not in log.read_text()
    assert precious.read_text() == "precious data\n"
    st = precious.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == owner
    # what mallory planted is as she left it: nothing was written into her directories
    for d in plan["dirs"]:
        if Path(d) == ge_tmp:
            continue  # Grid Engine's own per-job directory (execd adopts it; removed at the job's end)
        assert sorted(os.listdir(d)) == ["slurm_script"] and os.readlink(Path(d) / "slurm_script") == str(precious)
    for link in plan["links"]:
        assert os.readlink(link) == str(safe)
    assert sorted(os.listdir(safe)) == ["slurm_script"]


# ---------------------------------------------------------------------------------------------
# F-12: output files and the submitting user's umask


def test_output_files_follow_the_users_umask(victim, workdir):
    """F-12. The victim submits with umask 077: Slurm's output file is 0600, like what the job
    itself creates (the wrapper used to open it under the execd's umask: 0644)."""
    cp = as_user(victim, "/bin/sh", "-c", 'umask 077; exec "$@"', "sh", "sbatch", "--parsable",
                 "--wrap", "umask; touch made-by-job-$SLURM_JOB_ID", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    job = int(cp.stdout.strip())
    out = workdir / f"slurm-{job}.out"
    assert wait_text(out, "0077").strip() == "0077"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    made = workdir / f"made-by-job-{job}"
    wait_until(made.exists, 60, f"{made.name} (the job touches it after printing its umask)")
    assert stat.S_IMODE(made.stat().st_mode) == 0o600


# ---------------------------------------------------------------------------------------------
# F-16: the wrapper's last-resort record and the configured state directory


def test_wrapper_failure_is_recorded_in_the_configured_state_dir(victim, workdir, tmp_path_factory):
    """F-16. A wrapper that fails after reading its payload (here: a script that is not base64)
    records FAILED in the payload's state directory, not in a hard-coded default."""
    from shim.store import state
    from shim.cli.sbatch import wrapper_script

    sdir = Path(tmp_path_factory.mktemp("other-state", numbered=True))
    for parent in sdir.parents:
        if str(parent) in ("/", "/tmp"):
            break
        parent.chmod(parent.stat().st_mode | 0o755)
    assert state.make_layout(str(sdir)) == []
    payload = {"state_dir": str(sdir), "script": "x", "name": "broken", "workdir": "/",
               "stdout": "/dev/null", "umask": 0o022, "sub": time.time()}
    cp = as_user(victim, "qsub", "-terse", "-o", "/dev/null", "-j", "y", "-wd", "/", "-S", "/bin/sh",
                 cwd=workdir, input=wrapper_script(payload))
    assert cp.returncode == 0, cp.stderr
    job = int(cp.stdout.strip().split(".")[0])
    path = sdir / "users" / str(uid(victim)) / "records" / "events" / str(job // 100) / f"{job}.x.end.json"
    wait_until(path.exists, 90, f"the last-resort end record of job {job} in {sdir}")
    end = json.loads(path.read_text())
    assert (end["state"], end["reason"], end["exit"]) == ("FAILED", "JobLaunchFailure", 1)
    assert end.get("sub") == payload["sub"]
    assert not (user_dir(victim) / "records" / "events" / str(job // 100) / f"{job}.x.end.json").exists()
    assert not (STATE / "events").exists() and not (STATE / "records").exists()


# ---------------------------------------------------------------------------------------------
# F-14 and F-3 (wrapper side): dependency checks read only the dependency owner's records


def _plant_events(user_uid: int, job: int, events: dict[str, dict]) -> str:
    """As mallory: write forged events for another user's job wherever she can (her own
    directory; the victim's, which must fail). Returns what happened."""
    return mallory_python(f"""
import json, os
base = {str(STATE / "users")!r}
me = str(os.getuid())
out = []
for owner in (me, {str(user_uid)!r}, "0"):
    d = os.path.join(base, owner, "records", "events", str({job} // 100))  # the job's id shard (store/layout.py)
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as e:
        out.append(f"{{owner}}: mkdir {{e.errno}}")
    for kind, data in {json.dumps(events)}.items():
        try:
            with open(os.path.join(d, "{job}.x." + kind + ".json"), "w") as f:
                json.dump(data, f)
            out.append(f"{{owner}}: wrote {{kind}}")
        except OSError as e:
            out.append(f"{{owner}}: {{kind}} {{e.errno}}")
print(";".join(out))
""").stdout


def test_dependency_check_ignores_records_mallory_forged(victim, mallory, workdir):
    """F-3 (wrapper side) and F-14. Victim's job A fails; mallory forges a COMPLETED end for A.
    Victim's job B (afterok:A) must still be cancelled, with an end record that says CANCELLED,
    and sacct must say CANCELLED (it said COMPLETED 0:0). And the other way round: A succeeds,
    mallory forges a cancel and a FAILED end; B (afterok:A) must run."""
    now = time.time()
    a_bad = submit(victim, "--hold", "--wrap", "exit 3", cwd=workdir)
    a_good = submit(victim, "--hold", "--wrap", "true", cwd=workdir)
    forged_ok = {"end": {"t": now, "exit": 0, "signal": 0, "state": "COMPLETED", "reason": "None", "sub": now}}
    forged_bad = {"end": {"t": now, "exit": 9, "signal": 0, "state": "FAILED", "reason": "None", "sub": now},
                  "cancel": {"t": now, "uid": uid(victim), "user": victim, "was": "RUNNING", "sub": now}}
    res_ok = _plant_events(uid(victim), a_bad, forged_ok)
    res_bad = _plant_events(uid(victim), a_good, forged_bad)
    assert f"{uid(mallory)}: wrote end" in res_ok and f"{uid(victim)}: wrote" not in res_ok + res_bad
    assert "0: wrote" not in res_ok + res_bad
    b_bad = submit(victim, f"--dependency=afterok:{a_bad}", "--wrap", "echo B-RAN", cwd=workdir)
    b_good = submit(victim, f"--dependency=afterok:{a_good}", "--wrap", "echo B2-RAN", cwd=workdir)
    assert run("qrls", str(a_bad), str(a_good)).returncode == 0
    assert end_event(victim, a_bad)["state"] == "FAILED"
    end = end_event(victim, b_bad)
    assert (end["state"], end["reason"]) == ("CANCELLED", "DependencyNeverSatisfied")
    assert (user_dir(victim) / "records" / "events" / str(b_bad // 100) / f"{b_bad}.x.cancel.json").exists()
    assert not (workdir / f"slurm-{b_bad}.out").exists()  # its script never ran
    assert wait_text(workdir / f"slurm-{b_good}.out", "B2-RAN")
    assert end_event(victim, b_good)["state"] == "COMPLETED"
    wait_until(lambda: gone(b_bad), 60, f"job {b_bad} to leave Grid Engine")

    def sacct_state():
        cp = as_user(victim, "sacct", "-n", "-X", "-P", "-j", str(b_bad), "-o", "State")
        return cp.stdout.split() or None
    got = wait_until(sacct_state, 60, f"sacct of job {b_bad}")
    assert got[0].startswith("CANCELLED"), got


# ---------------------------------------------------------------------------------------------
# F-10: the step counter


def test_step_counter_cannot_be_blocked_by_mallory(victim, mallory, workdir):
    """F-10. Mallory creates world-writable counter files for the coming job ids wherever she
    can and holds LOCK_EX on them. The victim's counter lives in the victim's private 0700
    directory: her files cannot be there, and srun inside the job runs at once."""
    first = next_job_id()
    tool = mallory_background(f"""
import fcntl, os, sys, time
base = {str(STATE)!r}
held, refused = [], 0
for d in (os.path.join(base, "steps"), os.path.join(base, "users", {str(uid(victim))!r}, "steps"),
          os.path.join(base, "users", str(os.getuid()), "steps")):
    for n in range({first}, {first} + 30):
        try:
            os.makedirs(d, exist_ok=True)
            fd = os.open(os.path.join(d, str(n)), os.O_RDWR | os.O_CREAT, 0o666)
            fcntl.flock(fd, fcntl.LOCK_EX)
            held.append(os.path.join(d, str(n)))
        except OSError:
            refused += 1
print(len(held), refused, flush=True)
sys.stdout.write("\\n".join(held) + "\\n")
sys.stdout.flush()
time.sleep(120)
""")
    try:
        head = tool.stdout.readline().split()
        assert head and int(head[1]) >= 60, head  # nothing in the state root or the victim's directory
        job = submit(victim, "--wrap", "srun -n1 bash -c 'echo step-ran $SLURM_STEP_ID'; echo after-srun",
                     cwd=workdir)
        out = wait_text(workdir / f"slurm-{job}.out", "after-srun", timeout=90)
    finally:
        kill(tool)
    assert out.splitlines() == ["step-ran 0", "after-srun"]
    counter = user_dir(victim) / "steps" / str(job)
    st = counter.stat()
    assert st.st_uid == uid(victim) and stat.S_IMODE(st.st_mode) == 0o600
    assert stat.S_IMODE(counter.parent.stat().st_mode) == 0o700


# ---------------------------------------------------------------------------------------------
# F-4: allocation records and releases


def _plant_allocations(first: int, count: int, victim_uid: int) -> str:
    """As mallory: allocation records with her LD_PRELOAD, and release files, for the coming ids,
    in every steps/ directory she can reach."""
    rec = {"hosts": [[HOST, 1]], "env": {"LD_PRELOAD": "/tmp/mallory-evil.so", "MALLORY_MARK": "planted",
                                          "SLURM_JOB_ID": "0", "PATH": "/tmp/mallory-bin"},
           "start": 4102444800, "ge_task": "undefined"}
    return mallory_python(f"""
import json, os
base = {str(STATE)!r}
ok = bad = 0
for d in (os.path.join(base, "steps"), os.path.join(base, "users", {str(victim_uid)!r}, "steps"),
          os.path.join(base, "users", str(os.getuid()), "steps")):
    for n in range({first}, {first} + {count}):
        for name, text in ((f"{{n}}.alloc.json", json.dumps(dict({json.dumps(rec)}, job_id=n))), (f"{{n}}.release", "0")):
            try:
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
                os.chmod(os.path.join(d, name), 0o644)
                ok += 1
            except OSError:
                bad += 1
print(ok, bad)
""").stdout


def test_planted_allocation_records_give_srun_nothing(victim, mallory, workdir):
    """F-4. Mallory plants ``<id>.alloc.json`` (LD_PRELOAD, PATH, a mark) and ``<id>.release``
    for the coming job ids. The victim's salloc is granted and not revoked; srun inside and
    srun --jobid from outside run tasks without anything of mallory's in their environment."""
    first = next_job_id()
    ok, bad = map(int, _plant_allocations(first, 200, uid(victim)).split())
    assert bad >= 800 and ok <= 400  # only her own directory took them
    cp = as_user(victim, "salloc", "-n1", "bash", "-c", "sleep 4; srun -n1 env", cwd=workdir, timeout=180)
    assert cp.returncode == 0, cp.stderr
    assert "revoked" not in cp.stderr and "Granted job allocation" in cp.stderr
    job = int(re.search(r"Granted job allocation (\d+)", cp.stderr).group(1))
    assert first <= job < first + 200  # mallory's records were there for this very id
    env = dict(line.split("=", 1) for line in cp.stdout.splitlines() if "=" in line)
    assert "MALLORY_MARK" not in env and "LD_PRELOAD" not in env and "mallory" not in env.get("PATH", "")
    assert env["SLURM_JOB_ID"] == str(job)
    # srun --jobid into a running batch job, from outside it
    batch = submit(victim, "-n", "2", "--wrap", "sleep 60", cwd=workdir)  # -n2: a PE, so qrsh -inherit works
    _plant_allocations(batch, 1, uid(victim))
    try:
        wait_until(lambda: running(batch), 60, f"job {batch} to run")
        cp = as_user(victim, "srun", f"--jobid={batch}", "-n1", "env", cwd=workdir, timeout=120)
        assert cp.returncode == 0, cp.stderr
        env = dict(line.split("=", 1) for line in cp.stdout.splitlines() if "=" in line)
        assert "MALLORY_MARK" not in env and "LD_PRELOAD" not in env
        assert env["SLURM_JOB_ID"] == str(batch)
    finally:
        run("qdel", str(batch))


# ---------------------------------------------------------------------------------------------
# F-7b: the environment on command lines


SCANNER = r"""
import base64, binascii, json, os, stat, sys, time
with open(SECRET_FILE, "rb") as f:  # what she looks for (not on her own command line)
    secret = f.read().strip()
stop = STOP
seen_launch = set()
found = []
scans = 0
deadline = time.time() + 240
while not os.path.exists(stop) and time.time() < deadline:
    scans += 1
    with open(PROGRESS, "w") as f:  # (where it is, for a test whose wait for it ran out)
        f.write(f"scan {scans} at {time.time():.1f}: /proc\n")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        words = raw.split(b"\0")
        if any(w.endswith((b"job_main()", b"remote_main()")) or b"import job_main" in w or b"import remote_main" in w
               for w in words):
            seen_launch.add(pid)
        blobs = [raw]
        for w in words:
            try:
                blobs.append(base64.b64decode(w, validate=True))
            except (binascii.Error, ValueError):
                pass
        if any(secret in b for b in blobs):
            found.append(pid + ":" + os.path.basename(words[0].decode(errors="replace")))
    with open(PROGRESS, "w") as f:  # (the victim's tasks wait until she has seen them)
        f.write(f"scan {scans} at {time.time():.1f}: spools; launchers {len(seen_launch)}\n")
    for spool in SPOOLS:
        for root, dirs, files in os.walk(spool):
            for n in files:
                try:  # (never blocks on a FIFO: opened non-blocking, read only if a regular file)
                    fd = os.open(os.path.join(root, n), os.O_RDONLY | os.O_NONBLOCK)
                except OSError:
                    continue
                try:
                    data = os.read(fd, 4 << 20) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
                except OSError:
                    data = b""
                finally:
                    os.close(fd)
                blobs = [data]
                lines = data.split(b"\n")
                for i, line in enumerate(lines):  # a job wrapper's payload: base64 lines after the exec
                    if b"__SLURM_SHIM_PAYLOAD__" in line and line.startswith(b"exec "):
                        body = b"".join(ln for ln in lines[i + 1:] if ln and b"__SLURM_SHIM_PAYLOAD__" not in ln)
                        try:
                            blobs.append(base64.b64decode(body))
                        except (binascii.Error, ValueError):
                            pass
                if any(secret in b for b in blobs):
                    found.append(os.path.join(root, n))
print(json.dumps({"scans": scans, "launchers": len(seen_launch), "found": found}))
"""


def seen(progress: Path, launchers: int) -> str:
    """Shell words that wait (at most 120 s) until the scanner's progress file counts ``launchers``."""
    return (f'for i in $(seq 1200); do n=$(sed -n "s/.*launchers \\([0-9]*\\)$/\\1/p" {progress} 2>/dev/null); '
            f'[ "${{n:-0}}" -ge {launchers} ] && break; sleep 0.1; done; ')


def test_srun_never_puts_the_environment_on_a_command_line(victim, mallory, workdir, attack_dir):
    """F-7b. Mallory scans every /proc/*/cmdline (raw and base64-decoded) and the job scripts in
    Grid Engine's spool while the victim runs srun (a new job: qrsh -now no and job_main) and
    srun inside salloc (every task through qrsh -inherit and remote_main) with MYSECRET set. She
    sees the launchers start, and never the secret."""
    secret = f"hunter2-{uuid.uuid4().hex}"
    stop_file = attack_dir / f"stop-{secret[-6:]}"
    secret_file = attack_dir / f"target-{secret[-6:]}"
    secret_file.write_text(secret)
    secret_file.chmod(0o644)
    progress = attack_dir / f"progress-{secret[-6:]}"
    scanner = mallory_background(SCANNER.replace("SPOOLS", repr((str(QMASTER_SPOOL / "job_scripts"), str(EXECD_SPOOL))))
                                 .replace("SECRET_FILE", repr(str(secret_file)))
                                 .replace("PROGRESS", repr(str(progress)))
                                 .replace("STOP", repr(str(stop_file))))
    try:
        # the secret reaches the victim's srun in its environment (runuser passes it on), as a
        # user's exported variable would: never on any command line of the test's own either
        # each task lives until mallory's scanner has seen its launcher (at most 120 s), so that
        # what she reports is what she watched, however slow her scans are on a loaded machine
        cp = as_user(victim, "srun", "-n1", "bash", "-c", seen(progress, 1) + 'echo "task sees ${MYSECRET:0:7}"',
                     cwd=workdir, timeout=180, env={"MYSECRET": secret})
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout == "task sees hunter2\n"
        cp = as_user(victim, "salloc", "-n1", "srun", "-n1", "bash", "-c",
                     seen(progress, 2) + 'echo "step sees ${MYSECRET:0:7}"', cwd=workdir, timeout=180,
                     env={"MYSECRET": secret})
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout == "step sees hunter2\n"
        # control: a victim process with the old kind of payload (base64 JSON) on its command line
        old_style = base64.b64encode(json.dumps({"environ": {"MYSECRET": secret}}).encode()).decode()
        decoy = subprocess.Popen(["runuser", "-u", victim, "--", "/bin/sh", "-c", "sleep 3", "decoy", old_style])
        decoy.wait(30)
    finally:
        out, err = stop(scanner, stop_file, timeout=120)
    where = progress.read_text() if progress.exists() else "nothing"
    assert out.strip(), f"mallory's scanner reported nothing (stopped after 120 s, or failed): {err}; it was at: {where}"
    report = json.loads(out.strip().splitlines()[-1])
    assert report["scans"] >= 2 and report["launchers"] >= 2, (report, err)  # she watched the launches
    found = {f.partition(":")[2] for f in report["found"]}
    assert found and found <= {"runuser", "sh"}, report  # the decoy, and nothing of the victim's sruns
    # the launch files were private, and none is left
    srun_dir = user_dir(victim) / "srun"
    assert stat.S_IMODE(srun_dir.stat().st_mode) == 0o700
    assert [n for n in os.listdir(srun_dir) if n.endswith(("job_main.json", "remote_main.json"))] == []


# ---------------------------------------------------------------------------------------------
# F-9: GPU claims


GPUS = STATE / "gpus"


def gpu_job(user: str, workdir: Path, tag: str, extra: str = "") -> int:
    return submit(user, "-p", "gpu", "--gres=gpu:1", "--wrap",
                  f"echo GPU-{tag}=$CUDA_VISIBLE_DEVICES; {extra}", cwd=workdir)


def device_of(workdir: Path, job: int, tag: str, timeout: float = 120) -> str:
    out = wait_text(workdir / f"slurm-{job}.out", f"GPU-{tag}=", timeout)
    return re.search(rf"GPU-{tag}=(\S*)", out).group(1)


@pytest.fixture
def clean_gpus():
    """No claim files of earlier tests; mallory's planted ones removed afterwards (as root)."""
    def sweep():
        for p in GPUS.iterdir():
            if p.name.startswith(f"{HOST}.") or p.name.startswith(".claim-"):
                p.unlink(missing_ok=True)
    sweep()
    yield
    sweep()


def test_gpu_claim_fifo_does_not_hang_the_victims_job(victim, mallory, workdir, clean_gpus):
    """F-9. A FIFO (and a symlink, and junk) planted as claims of device 0: the victim's GPU job
    starts at once and gets a real device (0 or 1), never blocked on the FIFO."""
    r = mallory_python(f"""
import os
d = {str(GPUS)!r}
os.mkfifo(os.path.join(d, "{HOST}.0"))
os.symlink("/etc/passwd", os.path.join(d, "{HOST}.1"))
with open(os.path.join(d, "{HOST}.0.1"), "w") as f:
    f.write("garbage")
print("ok")
""")
    assert r.stdout.strip() == "ok", r.stderr
    tag = uuid.uuid4().hex[:6]
    job = gpu_job(victim, workdir, tag)
    assert device_of(workdir, job, tag, timeout=60) in ("0", "1")
    assert end_event(victim, job)["state"] == "COMPLETED"
    assert stat.S_ISFIFO(os.lstat(GPUS / f"{HOST}.0").st_mode)  # hers, untouched


def test_fake_live_gpu_claims_do_not_misdirect_the_victim(victim, mallory, workdir, clean_gpus):
    """F-9. Mallory claims devices 0 and 1 with her own live processes, once with a job id that
    does not exist and once with a real job of hers that holds no GPU. Grid Engine does not run
    such a GPU job of hers on this host, so the claims are not live: the victim's job gets a real
    device (the review saw CUDA_VISIBLE_DEVICES=4 on a 2-GPU host) and completes."""
    hers = submit(mallory, "-p", "debug", "--wrap", "sleep 120", cwd=workdir)
    try:
        wait_until(lambda: f"{hers}" in run("qstat", "-s", "r", "-u", mallory).stdout, 60, f"job {hers} to run")
        for fake_job in (9999999, hers):
            tool = mallory_background(f"""
import os, sys, time
d = {str(GPUS)!r}
for i in (0, 1):
    p = os.path.join(d, "{HOST}." + str(i))
    try:
        os.unlink(p)
    except OSError:
        pass
    with open(p, "w") as f:
        f.write("%d {fake_job}\\n" % os.getpid())
print("claimed", flush=True)
time.sleep(120)
""")
            try:
                assert tool.stdout.readline().strip() == "claimed"
                tag = uuid.uuid4().hex[:6]
                job = gpu_job(victim, workdir, tag)
                assert device_of(workdir, job, tag, timeout=60) in ("0", "1")
                assert end_event(victim, job)["state"] == "COMPLETED"
            finally:
                kill(tool)
    finally:
        run("qdel", str(hers))


def test_two_gpu_jobs_get_different_devices(victim, workdir, clean_gpus):
    """The claims still do their job: two GPU jobs running at once on a 2-GPU host get devices 0
    and 1; a third would find none (Grid Engine's consumable keeps it pending)."""
    tags = [uuid.uuid4().hex[:6] for _ in range(2)]
    jobs = [gpu_job(victim, workdir, t, "sleep 8") for t in tags]
    devices = sorted(device_of(workdir, j, t) for j, t in zip(jobs, tags))
    assert devices == ["0", "1"]
    for j in jobs:
        assert end_event(victim, j)["state"] == "COMPLETED"
    assert [p.name for p in GPUS.iterdir() if p.name.startswith(f"{HOST}.")] == []  # released


# ---------------------------------------------------------------------------------------------
# F-8: .sge_request in a shared submit directory, through the submit agent


def test_planted_sge_request_changes_nothing_through_the_agent(victim, mallory, shared_dir, tmp_path_factory):
    """F-8. Mallory writes ``.sge_request`` (hold the job, inject a variable) into a shared
    project directory. The victim's sbatch from there, through the submit agent (the site's
    method), queues a job that is not held and whose environment has nothing of hers."""
    r = mallory_python(f"""
with open({str(shared_dir / ".sge_request")!r}, "w") as f:
    f.write("-h -v MALLORY_MARK=planted\\n")
print("ok")
""")
    assert r.stdout.strip() == "ok"
    home = Path(f"/home/{victim}")
    agent_dir = home / f".shim-agent-{uuid.uuid4().hex[:6]}"
    env = {"SLURM_SHIM_AGENT_DIR": str(agent_dir)}
    script = "echo MARK=${MALLORY_MARK:-none}"
    first = submit(victim, "--wrap", script, cwd=shared_dir, env=env)  # no agent yet: qsub, and one starts

    def ping():
        cp = as_user(victim, "env", f"SLURM_SHIM_AGENT_DIR={agent_dir}", "/opt/slurm-shim/bin/python", "-m",
                     "shim.agent", "ping")
        return json.loads(cp.stdout) if cp.returncode == 0 else None
    try:
        served = wait_until(ping, 30, "the victim's submit agent")["submitted"]
        second = submit(victim, "--wrap", script, cwd=shared_dir, env=env)
        assert ping()["submitted"] == served + 1  # this one went through the agent
        for job in (first, second):
            assert wait_text(shared_dir / f"slurm-{job}.out", "MARK=").strip() == "MARK=none"
        info = run("qstat", "-j", str(second)).stdout
        assert "MALLORY_MARK" not in info
    finally:
        as_user(victim, "env", f"SLURM_SHIM_AGENT_DIR={agent_dir}", "/opt/slurm-shim/bin/python", "-m",
                "shim.agent", "stop")
