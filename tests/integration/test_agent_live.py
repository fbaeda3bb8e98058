"""DRMAA submissions through the user's daemon against the live Grid Engine: sbatch with
``[submit] method = "agent"`` (the daemon is still "the agent" in these tests' names).

Each test has its own agent directory (``SLURM_SHIM_AGENT_DIR``) and a site config that differs
from the cluster's only by the submit method, and stops its agents at the end. Jobs that need not
run are submitted held (``--hold``): a ``.sge_request`` in the submit directory no longer counts,
neither for qsub nor for the agent (security F-8).
"""

from __future__ import annotations

import json
import os
import re
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import SITE_CONFIG, job_array, run, shim_env, wait_until

pytestmark = pytest.mark.gridengine

SITE = SITE_CONFIG  # the selected cell's
SCRIPT = "#!/bin/bash\necho \"hello from $SLURM_JOB_ID as $(id -un)\"\n"


def site_config(d: Path, method: str, extra: str = "") -> Path:
    """The cell's site config with another submit method, and ``[gridengine] timeout = 60``: a
    client that hears nothing from the daemon for 0.8 of the timeout kills it to settle the
    submission (gridengine/submitter.submit), and on a loaded machine a first submission (the
    DRMAA session's opening, then runJob) can take longer than the default 10 s allows (CI run
    10, both cells' suites at once: the daemon a test waited for had been killed by its first
    sbatch). These tests are about what the daemon does, not about that deadline."""
    text = SITE.read_text() if SITE.exists() else ""
    text = re.sub(r"(?ms)^\[submit\].*?(?=^\[|\Z)", "", text)
    if re.search(r"(?m)^\[gridengine\]\n", text) and not re.search(r"(?m)^timeout\s*=", text):
        text = re.sub(r"(?m)^\[gridengine\]\n", "[gridengine]\ntimeout = 60\n", text, count=1)
    p = d / f"config-{method}.toml"
    p.write_text(f"{text}\n{extra}\n[submit]\nmethod = \"{method}\"\n")
    p.chmod(0o644)
    return p


class Setup:
    """Environment for one user's sbatch calls through one agent directory."""

    def __init__(self, workdir: Path, user: str | None = None, method: str = "agent", extra: str = "",
                 hold: bool = False):
        self.workdir, self.user, self.hold = workdir, user, hold
        self.agent_dir = workdir / f"agent-{user or 'root'}"
        self.env = {"SLURM_SHIM_CONFIG": str(site_config(workdir, method, extra)),
                    "SLURM_SHIM_AGENT_DIR": str(self.agent_dir)}

    def sbatch(self, *argv: str, cwd: Path | None = None, env: dict | None = None):
        hold = ("--hold",) if self.hold else ()
        return run("sbatch", *hold, *argv, cwd=cwd or self.workdir, user=self.user, env={**self.env, **(env or {})})

    def submit(self, *argv: str, **kw) -> int:
        cp = self.sbatch(*argv, **kw)
        assert cp.returncode == 0, cp.stderr
        m = re.fullmatch(r"Submitted batch job (\d+)\n", cp.stdout)
        assert m, cp.stdout
        return int(m.group(1))

    def agent(self, op: str = "ping") -> dict | None:
        cp = run("python", "-m", "shim.agent", op, user=self.user, env=self.env)
        self.said = f"{op}: exit {cp.returncode}: {cp.stderr.strip()}"
        return json.loads(cp.stdout) if cp.returncode == 0 else None

    def ready(self, timeout: float = 30) -> dict:
        return wait_until(self.agent, timeout, self.what)

    def what(self) -> str:
        """The wait's name, with the daemon's log (why it is not there)."""
        try:
            log = (self.agent_dir / "service.log").read_text(errors="replace")[-3000:]
        except OSError as e:
            log = f"({e})"
        try:
            pid = int((self.agent_dir / "service.lock").read_text().split()[0])
            state = f"daemon {pid} {'alive' if _alive(pid) else 'gone'}"
        except (OSError, ValueError, IndexError):
            state = "no daemon pid"
        sock = "a socket" if (self.agent_dir / "service.sock").exists() else "no socket"
        return f"the submit agent in {self.agent_dir} ({getattr(self, 'said', '')}; {state}, {sock}); its service.log ends:\n{log}"

    def stop(self) -> None:
        reply = self.agent("stop")
        if reply:
            wait_until(lambda: not Path(f"/proc/{reply['pid']}").exists() or _zombie(reply["pid"]), 30,
                       "the agent to exit")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and not _zombie(pid)


def jobs_named(name: str) -> dict[int, str]:
    """{job id: state} of every job called name, of any user."""
    out = run("qstat", "-u", "*", "-xml").stdout
    found = {}
    for jl in ET.fromstring(out).iter("job_list"):
        if jl.findtext("JB_name") == name:
            found[int(jl.findtext("JB_job_number"))] = jl.findtext("state")
    return found


def qstat_j(job: int) -> dict[str, str]:
    out = run("qstat", "-j", str(job)).stdout
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines()) if _}


@pytest.fixture
def setups():
    made: list[Setup] = []
    yield made
    for s in made:
        s.stop()


@pytest.fixture
def cleanup():
    names: list[str] = []
    yield names
    for name in names:
        ids = jobs_named(name)
        if ids:
            run("qdel", *map(str, ids))


def test_first_call_starts_the_agent_next_calls_use_it(workdir, setups, cleanup):
    s = Setup(workdir)
    setups.append(s)
    (workdir / "hello.sh").write_text(SCRIPT)
    first = s.submit("-J", "agent-hello", "hello.sh")  # no daemon yet: one starts
    cleanup.append("agent-hello")
    # (the first call ran in-process: its submission went to qsub, or to the daemon the compiled
    # client started meanwhile, whichever came first)
    base = s.ready()["submitted"]
    assert base in (0, 1)
    second = s.submit("-J", "agent-hello", "hello.sh")
    assert s.agent()["submitted"] == base + 1
    for job in (first, second):
        out = workdir / f"slurm-{job}.out"
        wait_until(lambda: out.exists() and "hello" in out.read_text(), 90, f"output of job {job}")
        assert out.read_text() == f"hello from {job} as root\n"


def test_agent_job_is_the_qsub_job(workdir, setups, cleanup):
    """Same script, same options: Grid Engine records the same job either way, but for the script
    file's name (DRMAA submits a spooled file; qsub reads stdin) and the agent's token."""
    name = f"parity-{uuid.uuid4().hex[:6]}"
    cleanup.append(name)
    (workdir / "job.sh").write_text(SCRIPT)
    argv = ("-J", name, "-n", "2", "--mem=100M", "-t", "5", "--comment=x y", "-o", "out-%j.txt", "job.sh")
    via_qsub = Setup(workdir, method="qsub", hold=True).submit(*argv)
    a = Setup(workdir, hold=True)
    setups.append(a)
    a.submit("-J", "warmup", "--wrap=true")
    cleanup.append("warmup")
    base = a.ready()["submitted"]
    via_agent = a.submit(*argv)
    assert a.agent()["submitted"] == base + 1
    q, d = qstat_j(via_qsub), qstat_j(via_agent)
    assert d.pop("context").startswith("slurm_shim_token=")
    assert q.pop("script_file") == "STDIN" and d.pop("script_file").startswith(str(a.agent_dir / "spool"))
    # (OCS 9 also prints the command line each came from: qsub's, and DRMAA's own)
    for k in ("job_number", "exec_file", "submission_time", "submit_cmd_line", "effective_submit_cmd_line"):
        q.pop(k, None), d.pop(k, None)
    assert d == q
    assert q["sge_o_workdir"] == "/"  # both submit from "/" (F-8); the job's directory is in its payload


def test_plain_user_gets_a_private_agent(workdir, setups, cleanup):
    s = Setup(workdir, user="alice")
    setups.append(s)
    (workdir / "hello.sh").write_text(SCRIPT)
    name = f"alice-{uuid.uuid4().hex[:6]}"
    cleanup.append(name)
    first = s.submit("-J", name, "hello.sh")
    ping = s.ready()
    base = ping["submitted"]  # (0 or 1: see test_first_call_starts_the_agent_next_calls_use_it)
    status = Path(f"/proc/{ping['pid']}/status").read_text()
    uid = re.search(r"^Uid:\s+(\d+)", status, re.M).group(1)
    assert uid == str(run("id", "-u", "alice").stdout.strip())
    st = s.agent_dir.stat()
    assert st.st_mode & 0o777 == 0o700 and str(st.st_uid) == uid
    second = s.submit("-J", name, "hello.sh")
    assert s.agent()["submitted"] == base + 1
    for job in (first, second):
        out = workdir / f"slurm-{job}.out"
        wait_until(lambda: out.exists() and "hello" in out.read_text(), 90, f"output of job {job}")
        assert out.read_text() == f"hello from {job} as alice\n"
    # root's agent directory is no way in for alice
    root = Setup(workdir)
    setups.append(root)
    root.submit("--hold", "-J", name, "hello.sh")
    root.ready()
    cp = run("python", "-m", "shim.agent", "ping", user="alice", env=root.env)
    assert cp.returncode == 1 and "no private directory" in cp.stderr


DIE_HOOK = """
import os, signal
from shim.gridengine import submitter

MOMENT = os.environ["AGENT_DIE_AT"]


def _die():
    os.kill(os.getpid(), signal.SIGKILL)


_run_job, _send = submitter.Submitter.run_job, submitter._send


def run_job(self, native, bulk, path):
    if MOMENT == "before_submit":
        _die()
    job = _run_job(self, native, bulk, path)
    if MOMENT == "after_submit":
        _die()
    if MOMENT == "after_the_job_ended":  # as a runJob whose answer came too late: the job is gone
        import subprocess, time
        deadline = time.monotonic() + 60
        while subprocess.run([os.environ["AGENT_QSTAT"], "-j", str(job)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL).returncode == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        _die()
    return job


def send(sock, obj, data=b""):
    if MOMENT == "after_journal" and obj.get("status") == "ok" and "job" in obj:
        _die()
    return _send(sock, obj, data)


submitter.Submitter.run_job, submitter._send = run_job, send
"""


def start_dying_agent(s: "Setup", moment: str, tmp: Path) -> int:
    """An agent for s's directory that SIGKILLs itself at one moment of its first request. The
    agent has no test hook of its own (security F-19): this test-only module wraps it."""
    import subprocess
    import sys

    hook = tmp / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "die_hook.py").write_text(DIE_HOOK)
    src = str(Path(__file__).resolve().parents[2] / "src")
    code = (f"import sys; sys.path[:0] = [{str(hook)!r}, {src!r}]; import die_hook; "
            "from shim.service.server import serve; from shim.store.rundir import service_dir; "
            "sys.exit(serve(service_dir()))")  # (serve: no start_env re-exec, the hook's variables stay)
    import tomllib

    ge = tomllib.loads(SITE.read_text()).get("gridengine", {})
    env = {**shim_env(), **s.env, "AGENT_DIE_AT": moment,  # (the selected cell's SGE_ROOT, SGE_CELL, ports)
           "AGENT_QSTAT": os.path.join(ge.get("bin_dir", ""), "qstat"),
           "GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=4096", "SLURM_SHIM_SERVICE_IDLE": "120"}
    if ge.get("drmaa_library"):  # as sbatch starts the agent: the cell's own libdrmaa
        env["DRMAA_LIBRARY_PATH"] = ge["drmaa_library"]
    for key, port in (("SGE_QMASTER_PORT", ge.get("qmaster_port")), ("SGE_EXECD_PORT", ge.get("execd_port"))):
        if port:  # and the cell's ports as the site config names them (engine.ge_env):
            env[key] = str(port)  # an agent of another port refuses sbatch's requests
        else:
            env.pop(key, None)
    s.agent_dir.mkdir(mode=0o700, exist_ok=True)
    with open(s.agent_dir / "service.log", "ab") as log:
        subprocess.Popen([sys.executable, "-I", "-c", code], env=env, cwd="/", stdin=subprocess.DEVNULL,
                         stdout=log, stderr=log, start_new_session=True)
    return s.ready()["pid"]


@pytest.mark.parametrize("moment", ["before_submit", "after_submit", "after_journal"])
def test_agent_killed_at_the_worst_moment(workdir, setups, cleanup, moment, tmp_path):
    """SIGKILL inside the request (before runJob, between runJob and the journal, between the
    journal and the reply): sbatch still prints the id of exactly one job."""
    s = Setup(workdir, hold=True)
    setups.append(s)
    name = f"kill-{uuid.uuid4().hex[:6]}"
    cleanup.append(name)
    pid = start_dying_agent(s, moment, tmp_path)
    job = s.submit("-J", name, "--wrap=true")
    wait_until(lambda: not _alive(pid), 10, "the agent to die")
    ids = jobs_named(name)
    assert list(ids) == [job], ids
    assert all(state == "hqw" for state in ids.values())
    assert os.listdir(s.agent_dir / "tokens") == []


def test_a_job_that_ended_before_sbatch_looked_is_not_doubled(workdir, setups, cleanup, tmp_path):
    """The agent's answer is lost after qmaster took the job, and the job (a ``true``) runs and
    leaves qstat before sbatch looks for it (CI saw such a job doubled by the qsub fallback):
    sbatch finds it by its job wrapper's record and prints its id; no second job is made."""
    s = Setup(workdir)
    assert "\ntimeout = 60\n" in Path(s.env["SLURM_SHIM_CONFIG"]).read_text()  # room for the job to run in sbatch's wait
    setups.append(s)
    name = f"ended-{uuid.uuid4().hex[:6]}"
    cleanup.append(name)
    pid = start_dying_agent(s, "after_the_job_ended", tmp_path)
    job = s.submit("-J", name, "-o", "/dev/null", "--wrap=true")
    wait_until(lambda: not _alive(pid), 10, "the agent to die")
    assert jobs_named(name) == {}  # nothing queued after it: no qsub fallback
    cp = wait_until(lambda: (c := run("sacct", "-n", "-X", "-P", "--name", name, "-o", "JobID,State",
                                      env=s.env)).stdout.strip() and c, 60, f"job {job} in sacct")
    assert cp.stdout.splitlines() == [f"{job}|COMPLETED"]


def test_rejected_job_gets_qsubs_message(workdir, setups):
    extra = '[partitions.nowhere]\nqueue = "no_such_queue"\n'
    a = Setup(workdir, extra=extra)
    setups.append(a)
    a.submit("--hold", "-J", "warmup", "--wrap=true")
    a.ready()
    via_agent = a.sbatch("-p", "nowhere", "--wrap=true")
    via_qsub = Setup(workdir, method="qsub", extra=extra).sbatch("-p", "nowhere", "--wrap=true")
    assert via_agent.returncode == via_qsub.returncode == 1
    assert via_agent.stderr == via_qsub.stderr
    assert "unknown queue" in via_agent.stderr
    ids = jobs_named("warmup")
    run("qdel", *map(str, ids))


def test_array_through_the_agent(workdir, setups, cleanup):
    s = Setup(workdir, hold=True)
    setups.append(s)
    name = f"arr-{uuid.uuid4().hex[:6]}"
    cleanup.append(name)
    s.submit("-J", name, "--wrap=true")
    base = s.ready()["submitted"]  # (0 or 1: see test_first_call_starts_the_agent_next_calls_use_it)
    job = s.submit("-J", name, "--array=1-5%2", "--wrap=true")
    assert s.agent()["submitted"] == base + 1
    assert job_array(job) == ((1, 5, 1), 2)


def test_idle_agent_exits_then_restarts(workdir, setups, cleanup):
    s = Setup(workdir, hold=True)
    setups.append(s)
    name = f"idle-{uuid.uuid4().hex[:6]}"
    cleanup.append(name)
    s.submit("-J", name, "--wrap=true", env={"SLURM_SHIM_SERVICE_IDLE": "2"})
    # the daemon this call started idles out 2 s later, maybe before a ping could reach it (CI run
    # 8): its pid is in its lock file, which it writes once it listens and leaves behind
    lock = s.agent_dir / "service.lock"
    pid = int(wait_until(lambda: lock.exists() and lock.read_text().strip(), 30, "the daemon's pid in its lock file"))
    wait_until(lambda: not _alive(pid), 30, "the idle daemon to exit")
    # and no daemon at all: the first call may have started a second one (the first had already
    # idled out under load when it looked), which idles out too; the lock names the newest
    def none_left() -> bool:
        newest = lock.read_text().split()  # (empty for a moment while a daemon writes it)
        return bool(newest) and not _alive(int(newest[0])) and not (s.agent_dir / "service.sock").exists() \
            and not (s.agent_dir / "service.starting").exists()

    wait_until(none_left, 30, "no daemon left in the directory")
    s.submit("-J", name, "--wrap=true")
    assert s.ready()["pid"] != pid
    assert len(jobs_named(name)) == 2
