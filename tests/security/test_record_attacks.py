"""The review's attacks on the shim's job records, replayed live: mallory (a plain user) plants
records for the jobs of shimvictim (a plain user) and of root, reads what they leave behind, and
plants a ``.sge_request`` in a shared submit directory. Every attack must fail: the victim's
commands give the right answers, never crash or hang, and nothing secret is readable.

F-3 a-f  forged end/cancel/start events and submit records (``sbatch --wait``, afterok, sacct,
         a failing ``sbatch``, a job killed or never started, the array index map, invented jobs)
F-6      files that crashed or hung every command (Unicode digits, non-objects, FIFOs, links,
         huge files, future mtimes), in mallory's own directory and in ``users/``
F-7a/c   ``--export`` values and ``--export-file`` contents in the record, the environment in the
         job script Grid Engine spools world-readable
F-8      ``./.sge_request`` in a shared directory, through the submit agent and through qsub
F-14     a job cancelled by its own afterok check is CANCELLED in sacct
scancel/scontrol by root are recorded as root's and believed for the victim's job
bookkeeping that cannot be done (mallory squats the victim's directory) never fails sbatch
"""

from __future__ import annotations

import base64
import datetime
import glob
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import conftest
from conftest import run, shim_env, wait_until
from security.conftest import MALLORY, VICTIM, as_user, mallory_python, uid

pytestmark = pytest.mark.gridengine

SITE_CONFIG = Path(os.environ.get("SLURM_SHIM_CONFIG") or conftest.SITE_CONFIG)  # (the selected cell's)
STATE = str(conftest.STATE_DIR)
SPOOLS = (f"{conftest.EXECD_SPOOL}/*/job_scripts/{{id}}", f"{conftest.QMASTER_SPOOL}/job_scripts/{{id}}")
CMD_TIMEOUT = 25  # seconds: a command that hangs on a planted FIFO fails the test instead


def _state_dir(config: Path) -> str:
    m = re.search(r'^state_dir\s*=\s*"([^"]+)"', config.read_text(), re.M)
    return m.group(1) if m else STATE


# ---------------------------------------------------------------------------------------------
# plumbing


class Jobs:
    """The jobs a test submits (as whoever), deleted at teardown."""

    def __init__(self):
        self.ids: list[int] = []

    def sbatch(self, user: str, *argv: str, cwd: str | Path | None = None, env: dict | None = None,
               check_stderr: bool = True) -> int:
        cp = as_user(user, "sbatch", "--parsable", *argv, cwd=cwd or _home(user), env=env, timeout=CMD_TIMEOUT)
        assert cp.returncode == 0, cp.stderr
        if check_stderr:
            assert cp.stderr == "", cp.stderr
        job = int(cp.stdout.strip().split(";")[0])
        self.ids.append(job)
        return job

    def cleanup(self):
        if self.ids:
            run("qdel", *map(str, self.ids))


@pytest.fixture
def jobs():
    j = Jobs()
    yield j
    j.cleanup()


_made: list[str] = []


def open_dir(_factory, name: str) -> Path:
    """A directory every user's jobs can write their output in (conftest.open_dir), removed after
    the test."""
    d = conftest.open_dir(f"sec-{name}", 0o777)
    _made.append(str(d))
    return d


@pytest.fixture(autouse=True)
def _remove_dirs():
    yield
    while _made:
        shutil.rmtree(_made.pop(), ignore_errors=True)


def _home(user: str) -> str:
    import pwd

    return pwd.getpwnam(user).pw_dir


def spawn(user: str, *argv: str, cwd: str | None = None, env: dict | None = None) -> subprocess.Popen:
    """A command of ``user`` left running (as conftest.run starts it, but not waited for)."""
    e = shim_env(env)
    return subprocess.Popen(conftest.as_user_argv(user, e, argv), cwd=cwd or _home(user), env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def in_ge(job: int) -> bool:
    return run("qstat", "-j", str(job)).returncode == 0


def running(job: int) -> bool:
    out = run("qstat", "-u", "*").stdout
    return any(ln.split()[:1] == [str(job)] and ln.split()[4] == "r" for ln in out.splitlines()[2:] if ln.split())


def sacct_state(user: str, job: int | str) -> str:
    cp = as_user(user, "sacct", "-j", str(job), "-X", "-n", "-P", "-o", "JobID,State,ExitCode", timeout=CMD_TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


def ended_in_sacct(user: str, job: int, want: str) -> str:
    """Wait until sacct's row of the job says ``want`` (Grid Engine writes its accounting record
    a moment after the job ends); the row."""
    def row():
        out = sacct_state(user, job)
        return out if want in out else None

    return wait_until(row, 90, f"sacct -j {job} to say {want}")


def next_ids(n: int = 40) -> range:
    """The ids Grid Engine hands out next (mallory reads qmaster's world-readable counter)."""
    seq = int((conftest.QMASTER_SPOOL / "jobseqnum").read_text().strip() or 0)
    return range(seq + 1, seq + 1 + n)


def plant(items: list[dict], user: str = MALLORY) -> dict:
    """As mallory: make her own record directory (as any shim command of hers would) and put the
    given files in it; try the victim's and root's directories too. Each item: {"path": relative
    to her directory or absolute, "kind": file|fifo|symlink|dir, "data": text, "mtime": float}.
    A relative ``jobs/<name>`` or ``events/<name>`` goes where the shim keeps records (store/layout.py):
    its id shard ``records/<kind>/<id // 100>/`` (a name without an id: shard 0), hard-linked into the
    10-minute time bucket of its mtime (else now), so that readers by id and by window both meet it.
    Returns what the attempts on other users' directories gave."""
    code = f"""
import json, os, re, time
items = json.loads({json.dumps(json.dumps(items))})
users = {json.dumps(_state_dir(SITE_CONFIG) + "/users")}
me = os.getuid()
mine = os.path.join(users, str(me))
for sub in ("", "records"):
    try:
        os.mkdir(os.path.join(mine, sub), 0o755)
    except FileExistsError:
        pass

def place(rel):
    m = re.fullmatch(r"(jobs|events)/(.*)", rel)
    if m is None:
        return os.path.join(mine, rel), None
    j = re.match(r"([0-9]{{1,12}})[.]", m[2])
    d = os.path.join(mine, "records", m[1], str(int(j[1]) // 100) if j else "0")
    os.makedirs(d, 0o755, exist_ok=True)
    return os.path.join(d, m[2]), m[1]

for it in items:
    p, kind = (it["path"], None) if it["path"].startswith("/") else place(it["path"])
    k = it.get("kind", "file")
    if os.path.lexists(p) and not os.path.isdir(p):
        os.unlink(p)
    if k == "file":
        with open(p, "wb") as f:
            f.write(it.get("data", "").encode("latin-1") * it.get("repeat", 1))
    elif k == "fifo":
        os.mkfifo(p)
    elif k == "symlink":
        os.symlink(it["data"], p)
    elif k == "dir":
        os.makedirs(p, exist_ok=True)
        os.chmod(p, 0o777)
    if "mtime" in it:
        os.utime(p, (it["mtime"], it["mtime"]), follow_symlinks=False)
    if kind is not None and k != "dir":
        b = int(it.get("mtime", time.time()) // 600)
        t = os.path.join(mine, "records", kind, "t", str(b // 144), str(b))
        os.makedirs(t, 0o755, exist_ok=True)
        try:
            os.link(p, os.path.join(t, os.path.basename(p)), follow_symlinks=False)
        except FileExistsError:
            pass
others = {{}}
for who in ({uid(VICTIM)}, 0):
    p = os.path.join(users, str(who), "records", "events", "0", "1.x.end.json")
    try:
        with open(p, "w") as f:
            f.write("{{}}")
        others[who] = "written"
    except OSError as e:
        others[who] = type(e).__name__
print(json.dumps(others))
"""
    cp = mallory_python(code) if user == MALLORY else as_user(user, "/usr/bin/python3", "-I", "-c", code)
    assert cp.returncode == 0, cp.stderr
    others = json.loads(cp.stdout)
    assert "written" not in others.values(), others  # nobody writes into another user's directory
    return others


@pytest.fixture
def mallory_dir(mallory, victim):
    """Mallory's record directory, emptied after the test (with anything she put in users/)."""
    users = Path(_state_dir(SITE_CONFIG)) / "users"
    junk = [users / "²", users / "12345", users / "4343"]
    yield users / str(uid(MALLORY))
    shutil.rmtree(users / str(uid(MALLORY)), ignore_errors=True)
    for p in junk:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        elif os.path.lexists(p):
            p.unlink()


def ev(job: int | str, kind: str = "end", task: str = "x") -> str:
    return f"events/{job}.{task}.{kind}.json"


# ---------------------------------------------------------------------------------------------
# F-3 a: a forged end event does not end the victim's --wait, nor change sacct


@pytest.mark.parametrize("target", [VICTIM, "root"])
def test_forged_end_event_does_not_end_sbatch_wait(target, victim, mallory_dir, jobs):
    p = spawn(target, "sbatch", "--parsable", "--wait", "-J", "f3a", "-o", "/dev/null", "--wrap", "sleep 8; exit 3")
    first = p.stdout.readline()
    job = int(first.strip())
    jobs.ids.append(job)
    forged = json.dumps({"t": time.time(), "exit": 0, "signal": 0, "state": "COMPLETED", "node": "vm"})
    plant([{"path": ev(job), "data": forged}, {"path": ev(job, "cancel"), "data": forged}])
    try:
        rc = p.wait(timeout=90)
    finally:
        if p.poll() is None:
            p.kill()
    returned = time.time()
    assert rc == 3, p.stderr.read()
    assert ended_in_sacct(target, job, "FAILED") == f"{job}|FAILED|3:0\n"
    # it waited for the real end: sbatch returned after the job's end as Grid Engine accounts it
    end = as_user(target, "sacct", "-j", str(job), "-X", "-n", "-P", "-o", "End", timeout=CMD_TIMEOUT).stdout.strip()
    assert datetime.datetime.fromisoformat(end).timestamp() <= returned + 1, (end, returned)
    wait_until(lambda: not in_ge(job), 30, "Grid Engine to let the job go")
    cp = as_user(target, "squeue", "-t", "all", "-j", str(job), "-h", "-o", "%i %T", timeout=CMD_TIMEOUT)
    assert cp.stdout in ("", f"{job} FAILED\n")  # gone after min_job_age; never COMPLETED


# ---------------------------------------------------------------------------------------------
# F-3 b: a forged cancel of the victim's job A does not stop its afterok dependent B


def test_forged_cancel_does_not_stop_a_dependent(victim, mallory_dir, jobs, tmp_path_factory):
    out = open_dir(tmp_path_factory, "f3b")
    a = jobs.sbatch(VICTIM, "--hold", "-J", "f3b_a", "-o", str(out / "a.out"), "--wrap", "echo A-RAN")
    b = jobs.sbatch(VICTIM, f"--dependency=afterok:{a}", "-J", "f3b_b", "-o", str(out / "b.out"),
                    "--wrap", "echo B-RAN")
    now = time.time()
    plant([{"path": ev(a, "cancel"), "data": json.dumps({"t": now, "uid": 0, "user": "root", "owner": VICTIM,
                                                          "was": "PENDING", "reason": "DependencyNeverSatisfied"})}])
    assert as_user(VICTIM, "scontrol", "release", str(a)).returncode == 0
    wait_until(lambda: (out / "b.out").exists() and "B-RAN" in (out / "b.out").read_text(), 90, "B to run")
    assert ended_in_sacct(VICTIM, a, "COMPLETED") == f"{a}|COMPLETED|0:0\n"
    assert ended_in_sacct(VICTIM, b, "COMPLETED") == f"{b}|COMPLETED|0:0\n"


# ---------------------------------------------------------------------------------------------
# F-3 c, d: records planted for the next job ids (a bad time limit, a start event) change nothing


def test_records_planted_for_future_ids_change_nothing(victim, mallory_dir, jobs, tmp_path_factory):
    out = open_dir(tmp_path_factory, "f3cd")
    items = []
    for n in next_ids():
        items += [{"path": f"jobs/{n}.json", "data": json.dumps({"time": "x", "user": VICTIM, "array": [7, 8]})},
                  {"path": ev(n, "start"), "data": "{}"}]
    plant(items)
    job = jobs.sbatch(VICTIM, "-J", "f3cd", "-t", "2", "-o", str(out / "o.out"), "--wrap", "sleep 18; echo SURVIVED")
    # 18 s: past the wrapper's 15 s look at the record for a changed time limit
    assert ended_in_sacct(VICTIM, job, "COMPLETED") == f"{job}|COMPLETED|0:0\n"
    assert "SURVIVED" in (out / "o.out").read_text()


# ---------------------------------------------------------------------------------------------
# F-3 e: the array index map comes only from the owner's record


def test_array_task_cancel_uses_only_the_owners_index_map(victim, mallory_dir, jobs):
    job = jobs.sbatch(VICTIM, "--array=10,20,30", "--hold", "-J", "f3e", "-o", "/dev/null", "--wrap", "true")
    plant([{"path": f"jobs/{job}.json", "data": json.dumps({"array": [20, 10, 30], "user": VICTIM})}])
    cp = as_user(VICTIM, "scancel", f"{job}_20", timeout=CMD_TIMEOUT)
    assert cp.returncode == 0, cp.stderr

    def left():
        cp = as_user(VICTIM, "squeue", "-j", str(job), "-h", "-r", "-o", "%i", timeout=CMD_TIMEOUT)
        return cp.stdout.split() if cp.stdout.count("\n") == 2 else None

    assert sorted(wait_until(left, 30, "one task to go")) == [f"{job}_10", f"{job}_30"]
    # in Grid Engine's own numbering, task 2 (index 20) went
    rows = run("qstat", "-g", "d", "-u", VICTIM).stdout.splitlines()[2:]
    assert sorted(ln.split()[-1] for ln in rows if ln.split()[:1] == [str(job)]) == ["1", "3"]


# ---------------------------------------------------------------------------------------------
# F-3 f: a job invented in mallory's directory is never the victim's


def test_invented_job_is_never_the_victims(victim, mallory_dir):
    now = time.time()
    plant([{"path": ev(888888, "cancel"), "data": json.dumps(
        {"t": now, "owner": VICTIM, "user": VICTIM, "name": "crypto-miner", "cpus": 64, "was": "RUNNING",
         "start": now - 86400, "node": "vm", "partition": "debug"})}])
    for who in (VICTIM, "root"):
        for argv in (["sacct", "-X", "-n", "-P"], ["sacct", "-a", "-X", "-n", "-P"],
                     ["squeue", "-t", "all", "-u", VICTIM], ["squeue", "-t", "all"]):
            cp = as_user(who, *argv, timeout=CMD_TIMEOUT)
            assert cp.returncode == 0, (argv, cp.stderr)
            assert "888888" not in cp.stdout and "crypto" not in cp.stdout, (who, argv)
        cp = as_user(who, "squeue", "-t", "all", "-j", "888888", timeout=CMD_TIMEOUT)
        assert (cp.returncode, cp.stderr) == (1, "slurm_load_jobs error: Invalid job id specified\n")


# ---------------------------------------------------------------------------------------------
# F-6: files that crashed or hung every command


def f6_items(victim_job: int) -> list[dict]:
    far = time.time() + 86400 * 365 * 70
    users = _state_dir(SITE_CONFIG) + "/users"
    return [
        {"path": "events/².x.end.json", "data": "{}", "mtime": far},  # a Unicode digit
        {"path": "jobs/².json", "data": "{}"},
        {"path": ev(999997), "data": "[]", "mtime": far},  # not an object
        {"path": ev(victim_job), "data": "[]", "mtime": far},
        {"path": f"jobs/{victim_job}.json", "data": '{"time": "x", "array": "x", "name": 5}'},
        {"path": ev(999998), "kind": "fifo", "mtime": far},  # an open() would block for ever
        {"path": ev(victim_job, "cancel"), "kind": "fifo", "mtime": far},
        {"path": f"jobs/{victim_job + 1}.json", "kind": "fifo"},
        {"path": ev(999996), "kind": "symlink", "data": f"{users}/{uid(VICTIM)}/records/jobs/{victim_job // 100}/{victim_job}.json"},
        {"path": ev(999995), "data": "{" + " " * 1024 + "}", "repeat": 1, "mtime": time.time()},
        {"path": ev(999994), "data": " " * 4096, "repeat": 600},  # 2.4 MB
        {"path": ev(999993), "data": '{"t": 1e999, "exit": "x", "signal": NaN, "state": 7, "start": -1}'},
        {"path": ev(999992), "data": '{"t": 1}', "mtime": far},  # "recent" for ever, once
        {"path": f"{users}/²", "kind": "dir"},  # junk in users/ itself
        {"path": f"{users}/12345", "kind": "fifo"},
        {"path": f"{users}/4343", "kind": "symlink", "data": f"{users}/{uid(VICTIM)}"},
    ]


@pytest.mark.parametrize("target", [VICTIM, "root"])
def test_planted_files_never_crash_or_hang_a_command(target, victim, mallory_dir, jobs):
    job = jobs.sbatch(target, "--hold", "-J", "f6", "-o", "/dev/null", "--wrap", "true")
    plant(f6_items(job))
    commands = [
        (["squeue"], 0), (["squeue", "-t", "all"], 0), (["squeue", "-j", str(job)], 0),
        (["squeue", "-t", "all", "-j", "999997"], 1),
        # (-t RUNNING: CONT to a pending job is Slurm's ~95 s of retries before "can not be altered
        # now"; the filter reads the same listing and records and signals nothing)
        (["scancel", "-t", "RUNNING", "-s", "CONT", str(job)], 0), (["scontrol", "show", "job", str(job)], 0),
        (["scontrol", "hold", str(job)], 0), (["sacct"], 0), (["sacct", "-a"], 0), (["sacct", "-j", str(job)], 0),
        (["sacct", "-j", "999998,999997,999993"], 0),
    ]
    for argv, want in commands:
        try:
            cp = as_user(target, *argv, timeout=CMD_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{argv} hung on a planted file")
        assert want is None or cp.returncode == want, (argv, cp.stdout, cp.stderr)
        assert "internal error" not in cp.stderr and "Traceback" not in cp.stderr, (argv, cp.stderr)
    cp = as_user(target, "squeue", "-j", str(job), "-h", "-o", "%i %T %j", timeout=CMD_TIMEOUT)
    assert cp.stdout == f"{job} PENDING f6\n"
    cp = as_user(target, "squeue", "-t", "all", "-h", "-o", "%i", timeout=CMD_TIMEOUT)
    assert not {"999992", "999993", "999997", "999998"} & set(cp.stdout.split())
    cp = as_user(target, "scontrol", "release", str(job), timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stderr) == (0, "")


# ---------------------------------------------------------------------------------------------
# F-7 a, c: nothing secret in what mallory can read while the job runs; the job has it all


def test_secrets_are_readable_only_by_the_job(victim, mallory, jobs, tmp_path_factory):
    out = open_dir(tmp_path_factory, "f7")
    ef = Path(_home(VICTIM)) / "f7-exports"
    ef.write_text("DB_PASSWORD=from-export-file-s3cr3t\nPATH=/usr/bin:/bin\n")
    os.chown(ef, uid(VICTIM), uid(VICTIM))
    ef.chmod(0o600)
    secrets = ("tok-123", "hunter2-sbatch", "from-export-file-s3cr3t")
    show = 'sleep 25; echo "T=$API_TOKEN M=$MYSECRET D=$DB_PASSWORD E=$SLURM_EXPORT_ENV"'
    env = {"MYSECRET": "hunter2-sbatch"}
    j1 = jobs.sbatch(VICTIM, "--export=ALL,API_TOKEN=tok-123", "-o", str(out / "1.out"), "--wrap", show, env=env)
    j2 = jobs.sbatch(VICTIM, f"--export-file={ef}", "--export=API_TOKEN=tok-123", "-o", str(out / "2.out"),
                     "--wrap", show, env=env)
    j3 = jobs.sbatch(VICTIM, "--hold", "--export=ALL,API_TOKEN=tok-123", "-o", "/dev/null", "--wrap", show, env=env)
    wait_until(lambda: running(j1) and running(j2), 60, "both jobs to run")
    state = _state_dir(SITE_CONFIG)
    paths = [f"{state}/users/{uid(VICTIM)}/records/jobs/{j // 100}/{j}.json" for j in (j1, j2, j3)]
    paths += [p for j in (j1, j2, j3) for pat in SPOOLS for p in glob.glob(pat.format(id=j))]
    paths += glob.glob(f"{state}/users/{uid(VICTIM)}/env/*")
    # a classically spooled qmaster (the OCS cell's) keeps each job, its environment included, in
    # world-readable files under jobs/ (Debian's cell spools to Berkeley DB)
    paths += [p for p in glob.glob(f"{conftest.QMASTER_SPOOL}/jobs/**", recursive=True) if os.path.isfile(p)]
    scripts = [p for p in paths if "job_scripts" in p]
    # the running two's, in the execd spool; a held job's is in qmaster's spool (where it spools
    # classically, the OCS cell's) or its database (Debian's)
    scripted = {int(Path(p).name) for p in scripts}
    assert {j1, j2} <= scripted, paths
    env_files = set()
    for p in scripts:  # the env files the scripts name (root reads the scripts here, as mallory could)
        body = b"".join(ln for ln in Path(p).read_bytes().split(b"\n") if re.fullmatch(rb"[A-Za-z0-9+/=]+", ln))
        env_files.update(re.findall(rb'"env_file":"([^"]+)"', base64.b64decode(body)))
    assert len(env_files) == len(scripted)  # one private file per job
    paths += [f.decode() for f in env_files]
    code = f"""
import base64, json, re, subprocess
paths = {paths!r}
found = {{}}
for p in paths:
    try:
        data = open(p, "rb").read()
    except OSError as e:
        found[p] = type(e).__name__
        continue
    text = data.decode("latin-1")
    body = b"".join(ln for ln in data.split(b"\\n") if re.fullmatch(rb"[A-Za-z0-9+/=]+", ln))
    try:
        text += base64.b64decode(body).decode("latin-1")
    except Exception:
        pass
    found[p] = [s for s in {list(secrets)!r} if s in text] or "read, nothing secret"
for j in {[j1, j2, j3]!r}:
    cp = subprocess.run(["qstat", "-j", str(j)], capture_output=True, text=True)
    found[f"qstat -j {{j}}"] = [s for s in {list(secrets)!r} if s in cp.stdout] or "nothing secret"
print(json.dumps(found))
"""
    cp = mallory_python(code)
    assert cp.returncode == 0, cp.stderr
    found = json.loads(cp.stdout)
    leaks = {p: v for p, v in found.items() if isinstance(v, list)}
    assert leaks == {}, leaks
    for f in env_files:  # the private files exist, and only the victim can read them
        assert found[f.decode()] == "PermissionError"
    assert any(found[p] == "read, nothing secret" for p in scripts)  # the scripts were readable: checked
    # the jobs still see every variable they were given
    wait_until(lambda: all((out / f"{n}.out").exists() and "T=" in (out / f"{n}.out").read_text() for n in (1, 2)),
               90, "the jobs' output")
    assert (out / "1.out").read_text() == "T=tok-123 M=hunter2-sbatch D= E=ALL,API_TOKEN=tok-123\n"
    assert (out / "2.out").read_text().startswith("T=tok-123 M= D=from-export-file-s3cr3t ")


# ---------------------------------------------------------------------------------------------
# F-8: a .sge_request planted in a shared submit directory changes nothing


@pytest.fixture(params=["site", "qsub"])
def submit_method(request, tmp_path_factory):
    """The site config (the submit agent), or a copy that submits with qsub."""
    if request.param == "site":
        return {}
    d = open_dir(tmp_path_factory, "qsubconf")
    d.chmod(0o755)
    text = SITE_CONFIG.read_text()
    text = re.sub(r'(?m)^method\s*=.*$', 'method = "qsub"', text)
    (d / "config.toml").write_text(text)
    (d / "config.toml").chmod(0o644)
    return {"SLURM_SHIM_CONFIG": str(d / "config.toml")}


def test_planted_sge_request_changes_nothing(submit_method, victim, mallory, shared_dir, jobs):
    evil = shared_dir / "evil"
    code = f"""
import os
os.makedirs({str(evil)!r}, exist_ok=True)
open({str(evil / "base64.py")!r}, "w").write("raise SystemExit('MALLORY')\\n")
open({str(shared_dir / ".sge_request")!r}, "w").write("-l h_rt=1 -v PYTHONPATH={evil},MALLORY=1 -p -500\\n")
"""
    assert mallory_python(code).returncode == 0
    held = jobs.sbatch(VICTIM, "--hold", "-o", "/dev/null", "--wrap", "true", cwd=shared_dir, env=submit_method)
    detail = run("qstat", "-j", str(held)).stdout
    assert "h_rt=1\n" not in detail and "h_rt=1," not in detail, detail
    assert "PYTHONPATH" not in detail and "MALLORY" not in detail, detail
    assert not re.search(r"^priority:\s+-500", detail, re.M), detail
    show = 'sleep 3; echo "PWD=$(pwd) PP=${PYTHONPATH-unset} M=${MALLORY-unset}"'
    job = jobs.sbatch(VICTIM, "-J", "f8", "--wrap", show,
                      cwd=shared_dir, env=submit_method)
    assert ended_in_sacct(VICTIM, job, "COMPLETED") == f"{job}|COMPLETED|0:0\n"  # h_rt=1 would have killed it
    assert (shared_dir / f"slurm-{job}.out").read_text() == f"PWD={shared_dir} PP=unset M=unset\n"


# ---------------------------------------------------------------------------------------------
# F-14: a job cancelled by its own afterok check is CANCELLED in sacct


def test_dependency_cancelled_job_is_cancelled_in_sacct(victim, jobs):
    a = jobs.sbatch(VICTIM, "-J", "f14a", "-o", "/dev/null", "--wrap", "exit 1")
    b = jobs.sbatch(VICTIM, f"--dependency=afterok:{a}", "-J", "f14b", "-o", "/dev/null", "--wrap", "echo never")
    assert ended_in_sacct(VICTIM, a, "FAILED") == f"{a}|FAILED|1:0\n"
    assert ended_in_sacct(VICTIM, b, "CANCELLED") == f"{b}|CANCELLED|0:0\n"
    wait_until(lambda: not in_ge(b), 30, "Grid Engine to let the job go")
    cp = as_user(VICTIM, "squeue", "-t", "all", "-j", str(b), "-h", "-o", "%i %T", timeout=CMD_TIMEOUT)
    assert cp.stdout in (f"{b} CANCELLED\n", "")


# ---------------------------------------------------------------------------------------------
# scancel/scontrol by root: root's records, believed for the victim's job


def test_roots_cancel_and_update_of_the_victims_job_are_read_as_roots(victim, jobs):
    job = jobs.sbatch(VICTIM, "--hold", "-J", "rootcx", "-o", "/dev/null", "--wrap", "true")
    cp = run("scontrol", "update", f"JobId={job}", "Comment=set-by-root", timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stderr) == (0, "")
    state = Path(_state_dir(SITE_CONFIG))
    assert json.loads((state / "users" / "0" / "records" / "jobs" / str(job // 100) / f"{job}.json").read_text(
    ))["comment"] == "set-by-root"
    cp = as_user(VICTIM, "squeue", "-j", str(job), "-h", "-o", "%i %k", timeout=CMD_TIMEOUT)
    assert cp.stdout == f"{job} set-by-root\n"
    cp = run("scancel", str(job), timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stderr) == (0, "")
    assert (state / "users" / "0" / "records" / "events" / str(job // 100) / f"{job}.x.cancel.json").exists()
    wait_until(lambda: not in_ge(job), 30, "the job to go")
    cp = as_user(VICTIM, "squeue", "-t", "all", "-j", str(job), "-h", "-o", "%i %T %u", timeout=CMD_TIMEOUT)
    assert cp.stdout == f"{job} CANCELLED {VICTIM}\n"
    assert sacct_state(VICTIM, job) == f"{job}|CANCELLED by 0|0:0\n"


# ---------------------------------------------------------------------------------------------
# issue 13 item 4: bookkeeping that cannot be done never fails a submission Grid Engine took


def test_a_squatted_directory_never_fails_sbatch_nor_leaks_its_secrets(victim, mallory, jobs, tmp_path_factory):
    """Mallory makes the victim's directory first in a fresh state directory (F-21): the victim's
    sbatch still succeeds without a warning, its records and private file go to a directory of
    the victim's own beside the squat, the job runs with its environment, and the script Grid
    Engine spools (world-readable) does not carry it. (tests/security/test_private_dirs.py replays
    the rest: --export values, script text, arguments, srun and salloc.)"""
    from shim.store import state

    d = open_dir(tmp_path_factory, "squat")
    d.chmod(0o755)
    sdir = d / "state"
    assert state.make_layout(str(sdir)) == []
    conf = d / "config.toml"
    conf.write_text(re.sub(r'(?m)^state_dir\s*=.*$', f'state_dir = "{sdir}"', SITE_CONFIG.read_text()))
    conf.chmod(0o644)
    squat = str(sdir / "users" / str(uid(VICTIM)))
    code = f"import os; os.mkdir({squat!r}); os.chmod({squat!r}, 0o777)"
    assert mallory_python(code).returncode == 0
    out = d / "out"
    out.mkdir()
    out.chmod(0o777)
    env = {"SLURM_SHIM_CONFIG": str(conf), "MYVAR": "still-here-sq"}
    cp = as_user(VICTIM, "sbatch", "-o", str(out / "o.out"), "--wrap", 'sleep 5; echo "V=$MYVAR"', env=env,
                 timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stderr) == (0, ""), cp.stderr
    m = re.fullmatch(r"Submitted batch job (\d+)\n", cp.stdout)
    assert m, cp.stdout
    job = int(m.group(1))
    jobs.ids.append(job)
    assert os.listdir(squat) == []  # nothing of the victim's in mallory's directory
    wait_until(lambda: any(glob.glob(pat.format(id=job)) for pat in SPOOLS), 60, "the job's spooled script")
    spooled = [p for pat in SPOOLS for p in glob.glob(pat.format(id=job))]
    read = mallory_python(f"import sys; sys.stdout.write(''.join(open(p, 'rb').read().decode('latin-1') for p in {spooled!r}))")
    assert read.returncode == 0 and read.stdout
    body = "".join(ln for ln in read.stdout.splitlines() if re.fullmatch(r"[A-Za-z0-9+/=]+", ln))
    assert "still-here-sq" not in read.stdout + base64.b64decode(body).decode("latin-1")
    wait_until(lambda: (out / "o.out").exists() and "V=" in (out / "o.out").read_text(), 60, "the job's output")
    assert (out / "o.out").read_text() == "V=still-here-sq\n"


# ---------------------------------------------------------------------------------------------
# Grid Engine's refusals of mallory's signals, holds and suspends are read as refusals


def test_mallorys_stop_hold_and_suspend_of_the_victims_job_are_refused(victim, mallory_dir, jobs):
    """qmod's "you have no permission to modify job" was not recognised by scancel: mallory's
    ``scancel -s STOP`` of the victim's job exited 0 and wrote a suspend event. Now each verb is
    refused in Slurm's words, Grid Engine leaves the job as it was, and mallory writes no event."""
    job = jobs.sbatch(VICTIM, "-J", "refused", "-o", "/dev/null", "--wrap", "sleep 300")
    wait_until(lambda: running(job), 60, f"job {job} to run")
    for sig in ("STOP", "CONT"):
        cp = as_user(MALLORY, "scancel", "-s", sig, str(job), timeout=CMD_TIMEOUT)
        assert (cp.returncode, cp.stdout, cp.stderr) == (
            210, "", f"scancel: error: Kill job error on job id {job}: Access/permission denied\n"), sig
    cp = as_user(MALLORY, "scontrol", "suspend", str(job), timeout=CMD_TIMEOUT)  # (every release: no prefix,
    # fixtures/slurm-*/oracle-step-ends.txt "scontrol suspend RUNNING (as bob)")
    assert (cp.returncode, cp.stdout, cp.stderr) == (1, "", f"Access/permission denied for job {job}\n")
    cp = as_user(MALLORY, "scontrol", "hold", str(job), timeout=CMD_TIMEOUT)  # Slurm's words for another's job
    assert (cp.returncode, cp.stdout, cp.stderr) == (1, "", f"Invalid user id for job {job}\n"
                                                            "slurm_suspend error: Invalid user id\n")
    cp = as_user(MALLORY, "scancel", str(job), timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stderr) == (210, f"scancel: error: Kill job error on job id {job}: "
                                               "Access/permission denied\n")
    assert running(job)  # Grid Engine's state is still exactly "r": not suspended, held or deleted
    assert sorted(p.name for p in (mallory_dir / "records" / "events").glob(f"*/{job}.*")) == []
    cp = as_user(VICTIM, "squeue", "-h", "-j", str(job), "-o", "%T", timeout=CMD_TIMEOUT)
    assert cp.stdout == "RUNNING\n"
