"""Reliability against the live Grid Engine: bursts of concurrent commands lose and double nothing,
through qsub and through the submit agent (also when the agent is SIGKILLed mid-burst), and with
qmaster stopped every command fails fast with Slurm's kind of error, then works again.

Submitted jobs are held (a ``.sge_request`` with ``-h`` in the submit directory; qsub and the
agent's DRMAA both read it), so counting them never runs anything. Each test deletes its own jobs
by id. The qmaster test is the last in this file: it stops the shared cluster's qmaster for a few
seconds and restarts it in a finally block.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import run, shim_env, wait_until

pytestmark = pytest.mark.gridengine

N = 100
SITE = Path("/etc/slurm-shim/config.toml")
COMMANDS = ("sbatch", "squeue", "scancel", "scontrol", "sacct", "sinfo", "srun", "salloc")


def site_config(d: Path, method: str, qmaster_port: int = 0) -> Path:
    """The site config with ``[submit] method``, and (``qmaster_port``) another qmaster port: the
    site config names the cell, a user's SGE_QMASTER_PORT does not."""
    text = re.sub(r"(?ms)^\[submit\].*?(?=^\[|\Z)", "", SITE.read_text() if SITE.exists() else "")
    if qmaster_port:
        text = re.sub(r"(?m)^qmaster_port\s*=.*\n?", "", text)
        text = text.replace("[gridengine]\n", f"[gridengine]\nqmaster_port = {qmaster_port}\n", 1)
    p = d / f"config-{method}{'-' + str(qmaster_port) if qmaster_port else ''}.toml"
    p.write_text(f"{text}\n[submit]\nmethod = \"{method}\"\n")
    p.chmod(0o644)
    return p


def env_for(workdir: Path, method: str, qmaster_port: int = 0) -> dict[str, str]:
    return {"SLURM_SHIM_CONFIG": str(site_config(workdir, method, qmaster_port)),
            "SLURM_SHIM_AGENT_DIR": str(workdir / "agent")}


def burst(argvs: list[list[str]], env: dict[str, str], cwd: Path, timeout: float = 300) -> list[tuple[int, str, str]]:
    """Start every argv at once; (exit code, stdout, stderr) of each."""
    e = shim_env(env)
    procs = [subprocess.Popen(a, cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for a in argvs]
    deadline = time.monotonic() + timeout
    out = []
    for p in procs:
        o, r = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        out.append((p.returncode, o.decode(errors="replace"), r.decode(errors="replace")))
    return out


def jobs_named(name: str) -> dict[int, str]:
    found = {}
    for jl in ET.fromstring(run("qstat", "-u", "*", "-xml").stdout).iter("job_list"):
        if jl.findtext("JB_name") == name:
            found[int(jl.findtext("JB_job_number"))] = jl.findtext("state")
    return found


def agent_ping(env: dict[str, str]) -> dict | None:
    cp = run("python", "-m", "shim.agent", "ping", env=env)
    return json.loads(cp.stdout) if cp.returncode == 0 else None


def stop_agent(env: dict[str, str]) -> None:
    cp = run("python", "-m", "shim.agent", "stop", env=env)
    if cp.returncode == 0:
        pid = json.loads(cp.stdout)["pid"]
        wait_until(lambda: not _alive(pid), 30, "the agent to exit")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.fixture
def held_dir(workdir):
    (workdir / ".sge_request").write_text("-h\n")
    return workdir


@pytest.fixture
def named():
    """A unique job name per test; every job of that name is deleted at the end."""
    name = f"rel-{uuid.uuid4().hex[:8]}"
    yield name
    ids = jobs_named(name)
    if ids:
        run("qdel", *map(str, ids))


@pytest.mark.parametrize("path", ["qsub", "agent", "agent-cold", "agent-killed"])
def test_concurrent_sbatch_lose_and_double_nothing(held_dir, named, path):
    """100 sbatch at once -> 100 distinct ids, exactly those 100 jobs in Grid Engine.

    qsub: every call forks qsub. agent: all go through a running agent. agent-cold: no agent at
    first (calls race to start one; the first ones use qsub). agent-killed: the daemon is SIGKILLed
    while the burst's submissions are in flight, so some die mid-way and are resolved by token."""
    env = env_for(held_dir, "qsub" if path == "qsub" else "agent")
    served0, warmup = 0, set()
    if path in ("agent", "agent-killed"):
        cp = run("sbatch", "--hold", "-J", named, "--wrap=true", cwd=held_dir, env=env)
        assert cp.returncode == 0, cp.stderr
        warmup = {int(cp.stdout.split()[-1])}
        served0 = wait_until(lambda: agent_ping(env), 30, "the agent")["submitted"]
    try:
        argv = ["sbatch", "--hold", "-J", named, "--wrap=true"]  # sbatch ignores a cwd .sge_request (F-8)
        if path == "agent-killed":
            pid = agent_ping(env)["pid"]
            # the sbatch processes run in-process: what dies mid-way is their submissions. (Commands
            # the daemon itself was running die with it: lost after the hand-over, an error, never
            # run twice: tests/unit/test_service.py.)
            e = shim_env({**env, "SLURM_SHIM_SERVICE": "off"})
            procs = [subprocess.Popen(argv, cwd=held_dir, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                     for _ in range(N)]
            wait_until(lambda: (agent_ping(env) or {"submitted": 10**9})["submitted"] - served0 >= 10, 120,
                       "the agent to serve some of the burst")
            os.kill(pid, signal.SIGKILL)
            results = []
            for p in procs:
                o, r = p.communicate(timeout=300)
                results.append((p.returncode, o.decode(errors="replace"), r.decode(errors="replace")))
        else:
            results = burst([argv] * N, env, held_dir)
        failures = [(rc, err) for rc, _, err in results if rc != 0]
        assert failures == []
        ids = [int(re.fullmatch(r"Submitted batch job (\d+)\n", out).group(1)) for _, out, _ in results]
        assert len(set(ids)) == N
        queued = jobs_named(named)
        expected = set(ids) | warmup
        assert set(queued) == expected, f"lost: {expected - set(queued)}, extra: {set(queued) - expected}"
        assert set(queued.values()) == {"hqw"}
        if path == "agent":
            assert agent_ping(env)["submitted"] - served0 == N  # really all through the agent
        if path == "agent-killed":
            assert not _alive(pid)
    finally:
        stop_agent(env)


def test_concurrent_scancel_of_different_jobs(held_dir, named):
    """100 scancel at once, each of a different job: all 100 gone, nothing else touched."""
    qsub = burst([["qsub", "-terse", "-N", named, "-b", "y", "/bin/true"]] * (N + 1), {}, held_dir)
    ids = [int(out.strip()) for rc, out, _ in qsub if rc == 0]
    assert len(ids) == N + 1
    keep, victims = ids[0], ids[1:]
    results = burst([["scancel", str(j)] for j in victims], {}, held_dir)
    assert [(rc, err) for rc, _, err in results if rc != 0] == []
    assert all(out == "" for _, out, _ in results)
    remaining = wait_until(lambda: (lambda q: q if set(q) == {keep} else None)(jobs_named(named)), 60,
                           "exactly the 100 cancelled jobs to be gone")
    assert remaining == {keep: "hqw"}


# --------------------------------------------------------------------------------------------
# qmaster hung: accepting connections, never answering. Only the test's own clients see it: they
# reach qmaster through a loopback proxy (SGE_QMASTER_PORT), which is switched to silence.


class QmasterProxy:
    """A loopback TCP proxy in front of qmaster. ``hang()``: existing connections stop moving
    bytes and new ones are accepted but never answered, as a hung qmaster would do."""

    def __init__(self, upstream: tuple[str, int] = ("127.0.0.1", 6444)):
        import socket
        import threading

        self.upstream = upstream
        self.hung = False
        self.stopped = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.held: list = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        import socket
        import threading

        while not self.stopped.is_set():
            try:
                c, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.held.append(c)
            if self.hung:
                continue  # accepted, never answered
            try:
                u = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                c.close()
                continue
            self.held.append(u)
            for a, b in ((c, u), (u, c)):
                t = threading.Thread(target=self._pump, args=(a, b), daemon=True)
                t.start()
                self.threads.append(t)

    def _pump(self, src, dst) -> None:
        import select

        while not self.stopped.is_set():
            if self.hung:
                self.stopped.wait(0.2)
                continue
            if not select.select([src], [], [], 0.2)[0] or self.hung:
                continue  # (checked again: what arrives after hang() stays unread)
            try:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
            except OSError:
                break
        for s in (src, dst):
            try:
                s.shutdown(2)
            except OSError:
                pass

    def hang(self) -> None:
        self.hung = True

    def close(self) -> None:
        self.stopped.set()
        for t in self.threads:
            t.join(timeout=5)
        for s in [self.sock, *self.held]:
            try:
                s.close()
            except OSError:
                pass


def timed_burst(calls: dict[str, tuple[list[str], dict[str, str]]], cwd: Path) -> dict[str, tuple[float, int, str]]:
    """Start every call at once; (seconds until it ended, exit code, stderr) of each."""
    import selectors

    sel = selectors.DefaultSelector()
    t0 = time.monotonic()
    procs = {}
    for what, (argv, env) in calls.items():
        p = subprocess.Popen(argv, cwd=cwd, env=shim_env(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs[what] = [p, b"", None]
        sel.register(p.stderr, selectors.EVENT_READ, what)
    while sel.get_map() and time.monotonic() - t0 < 120:
        for key, _ in sel.select(timeout=1):
            data = os.read(key.fileobj.fileno(), 65536)
            if data:
                procs[key.data][1] += data
            else:
                sel.unregister(key.fileobj)
                procs[key.data][2] = time.monotonic() - t0  # stderr closed: the command ended
    out = {}
    for what, (p, err, dt) in procs.items():
        p.wait(timeout=30)
        p.stderr.close()
        out[what] = (dt if dt is not None else time.monotonic() - t0, p.returncode, err.decode(errors="replace"))
    return out


def test_hung_qmaster_costs_each_command_at_most_the_timeout(held_dir, named):
    """F-17: qmaster accepts and never answers. Every command gives up after gridengine.timeout
    (10 s by default, Slurm's MessageTimeout) plus its own start-up, in Slurm's words ("Socket timed out on send/recv
    operation", what Slurm's commands print when slurmctld does not answer), exit 1. sbatch
    through a live submit agent included: the agent's silence and the token lookup after it
    share the one wait."""
    from shim import config
    from shim.gridengine.diagnose import QPING_TIMEOUT

    limit = config.GridEngine().timeout  # (the commands run at once: the test waits about this long)
    (held_dir / "job.sh").write_text("#!/bin/sh\ntrue\n")
    job = int(run("qsub", "-terse", "-N", named, "-b", "y", "/bin/true", cwd=held_dir).stdout.strip())
    proxy = QmasterProxy()
    # the site config names the proxy as the cell's qmaster port (a user's SGE_QMASTER_PORT would
    # not count: engine.ge_env); a stale one in the environment changes nothing
    agent_env = {**env_for(held_dir, "agent", proxy.port), "SGE_QMASTER_PORT": "1"}
    qsub_env = {**env_for(held_dir, "qsub", proxy.port), "SGE_QMASTER_PORT": "1"}
    port = qsub_env
    words = {
        "sbatch": "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
        "squeue": "slurm_load_jobs error: Socket timed out on send/recv operation",
        "scancel": "slurm_load_jobs error: Socket timed out on send/recv operation",
        "scontrol": "slurm_load_jobs error: Socket timed out on send/recv operation",
        "sinfo": "slurm_load_partitions: Socket timed out on send/recv operation",
        "srun": "srun: error: Unable to allocate resources: Socket timed out on send/recv operation",
        "salloc": "salloc: error: Unable to allocate resources: Socket timed out on send/recv operation",
    }
    calls = {
        "sbatch (agent)": (["sbatch", "--hold", "-J", named, "job.sh"], agent_env),
        "sbatch (qsub)": (["sbatch", "--hold", "-J", named, "job.sh"], qsub_env),
        "squeue": (["squeue"], port),
        "squeue -j": (["squeue", "-j", str(job)], port),
        "scancel": (["scancel", str(job)], port),
        "scontrol show job": (["scontrol", "show", "job", str(job)], port),
        "sinfo": (["sinfo"], port),
        "sacct -j": (["sacct", "-j", str(job)], port),
        "srun": (["srun", "true"], port),
        "salloc": (["salloc", "true"], port),
    }
    outcomes = {}
    try:
        cp = run("sbatch", "--hold", "-J", named, "job.sh", cwd=held_dir, env=agent_env)  # starts the agent
        assert cp.returncode == 0, cp.stderr
        wait_until(lambda: agent_ping(agent_env), 30, "the agent")
        cp = run("sbatch", "--hold", "-J", named, "job.sh", cwd=held_dir, env=agent_env)
        assert cp.returncode == 0, cp.stderr  # through the agent, whose session now uses the proxy
        # the qsub-path site config validated and cached once (siteconf), while qmaster still
        # answers: a command's first read of a new config file is not what this test times
        cp = run("squeue", "-h", "-j", str(job), cwd=held_dir, env=qsub_env)
        assert cp.returncode == 0, cp.stderr
        # all at once (each waits on its own), after the same burst of `<cmd> --usage`: its times
        # are what starting that many commands together costs on this machine
        startup = {w: dt for w, (dt, _, _) in timed_burst(
            {w: ([argv[0], "--usage"], env) for w, (argv, env) in calls.items()}, held_dir).items()}
        proxy.hang()
        for what, (dt, rc, err) in timed_burst(calls, held_dir).items():
            outcomes[what] = (dt, startup[what], rc, err)
    finally:
        proxy.close()
        stop_agent(agent_env)
    print("\n".join(f"{w}: {dt:.2f} s (start-up {st:.2f} s), exit {rc}" for w, (dt, st, rc, _) in outcomes.items()))
    # after Slurm's line, why (gridengine/diagnose.py): qping gets no answer either (at
    # most QPING_TIMEOUT more), so this is no qmaster of another version but one that does not answer
    why = re.compile(rf"slurm-shim: no Grid Engine qmaster answers at \S+:{proxy.port} \(qping -info\): "
                     r"is sge_qmaster running there\? \(gridengine\.qmaster_port in \S+\)")
    problems = []
    for what, (dt, startup, rc, err) in outcomes.items():
        cmd = what.split()[0]
        lines = err.strip().splitlines()
        if what in ("squeue", "sinfo", "scontrol show job") and not (len(lines) == 2 and why.fullmatch(lines[1])):
            problems.append(f"{what}: no line that says why after Slurm's: {err!r}")
        if len(lines) == 2 and why.fullmatch(lines[1]):
            err = lines[0]
        # a hang guard, not a timing: that each program waits at most gridengine.timeout (one wait
        # shared between its calls) is tests/unit/test_qmaster_timeout.py's, without a clock; here
        # a command that waited on qmaster twice over, or for good, fails
        if dt > 2 * (limit + QPING_TIMEOUT) + startup:
            problems.append(f"{what}: took {dt:.1f} s (start-up {startup:.1f} s)")
        if cmd == "sacct":
            if rc == 0 and "Socket timed out" not in err and "no answer within" not in err:
                problems.append(f"{what}: no warning that qmaster did not answer: {err!r}")
            continue  # sacct answers from the accounting file (Slurm's talks to slurmdbd)
        if rc != 1:
            problems.append(f"{what}: exit {rc}: {err.strip()[:200]}")
        if err.strip() != words[cmd]:
            problems.append(f"{what}: {err.strip()[:300]!r}, not {words[cmd]!r}")
    assert problems == [], "\n".join(problems)


# --------------------------------------------------------------------------------------------
# Last: qmaster down. Stops the shared cluster's qmaster for a few seconds; always restarts it.


def implemented(cmd: str) -> bool:
    return "not implemented" not in run(cmd, "--help").stderr


# Slurm's shapes: "sbatch: error: ...", "slurm_load_jobs error: ...", "slurm_load_partitions: ..."
SLURM_ERROR = re.compile(r"^(s[a-z]+|slurm-shim): (error|fatal): |^slurm_load_[a-z_]+( error)?: Unable to contact", re.M)


def test_qmaster_down_fails_fast_and_recovers(held_dir, named):
    from shim.admin import cluster

    if os.getuid() != 0:
        pytest.skip("stopping qmaster needs root")
    (held_dir / "job.sh").write_text("#!/bin/sh\ntrue\n")
    agent_env = env_for(held_dir, "agent")
    job = int(run("qsub", "-terse", "-N", named, "-b", "y", "/bin/true", cwd=held_dir).stdout.strip())
    cp = run("sbatch", "--hold", "-J", named, "job.sh", cwd=held_dir, env=agent_env)  # starts the agent
    assert cp.returncode == 0, cp.stderr
    wait_until(lambda: agent_ping(agent_env), 30, "the agent")
    calls = {
        "sbatch (qsub)": (["sbatch", "--hold", "-J", named, "job.sh"], env_for(held_dir, "qsub")),
        "sbatch (agent)": (["sbatch", "--hold", "-J", named, "job.sh"], agent_env),
        "squeue": (["squeue"], {}),
        "squeue -j": (["squeue", "-j", str(job)], {}),
        "scancel": (["scancel", str(job)], {}),
        "scontrol show job": (["scontrol", "show", "job", str(job)], {}),
        "sinfo": (["sinfo"], {}),
        "sacct -j": (["sacct", "-j", str(job)], {}),
        "srun": (["srun", "true"], {}),
        "salloc": (["salloc", "true"], {}),
    }
    calls = {k: v for k, v in calls.items() if implemented(v[0][0])}
    pid = cluster.daemon_pid("qmaster")
    assert pid, "qmaster is not running"
    outcomes = {}
    try:
        cluster.ge("qconf", "-km")
        cluster.stop_pids([pid], grace=30)
        for what, (argv, env) in calls.items():
            t0 = time.monotonic()
            cp = run(*argv, cwd=held_dir, env=env, timeout=30)
            outcomes[what] = (time.monotonic() - t0, cp.returncode, cp.stdout, cp.stderr)
    finally:
        cluster.ensure_qmaster()
        stop_agent(agent_env)
    problems = []
    for what, (dt, rc, out, err) in outcomes.items():
        if dt > 5:
            problems.append(f"{what}: took {dt:.1f} s")
        if "Traceback" in err or "Traceback" in out:
            problems.append(f"{what}: traceback: {err[-300:]}")
        if what.startswith("sacct") and rc == 0:
            continue  # the accounting file needs no qmaster (Slurm's sacct talks to slurmdbd, not slurmctld)
        if rc != 1:
            problems.append(f"{what}: exit {rc}: {err.strip()[:200]}")
        elif not SLURM_ERROR.search(err):
            problems.append(f"{what}: not a Slurm-style error: {err.strip()[:200]!r}")
    # and back again (checked before reporting the outage's problems, so both are seen)
    def works():
        return run("squeue", "-j", str(job)).returncode == 0 and \
            run("sbatch", "--hold", "-J", named, "job.sh", cwd=held_dir, env=agent_env).returncode == 0

    try:
        wait_until(works, 60, "squeue and sbatch to work again after qmaster's restart")

        # A fresh daemon, and its session: the outage's submission found DRMAA unable to start,
        # so for DISABLED_FOR's back-off (30 s) sbatch uses qsub without asking (nor starting) one;
        # then a submission starts the daemon (with the warm service off, nothing else does) and
        # the next opens its session (one that finds it still opening goes to qsub)
        def session_open() -> bool:
            assert run("sbatch", "--hold", "-J", named, "job.sh", cwd=held_dir, env=agent_env).returncode == 0
            return bool((agent_ping(agent_env) or {}).get("drmaa"))

        wait_until(session_open, 120, "a fresh daemon's DRMAA session after the outage", delay=1, cap=3)
        served = agent_ping(agent_env)["submitted"]
        cp = run("sbatch", "--hold", "-J", named, "job.sh", cwd=held_dir, env=agent_env)
        assert cp.returncode == 0, cp.stderr
        assert agent_ping(agent_env)["submitted"] == served + 1  # submitted through the fresh agent
    finally:
        stop_agent(agent_env)
    assert problems == [], "\n".join(problems) + "\n" + json.dumps(
        {k: v[:2] + (v[3],) for k, v in outcomes.items()}, indent=1)
