#!/usr/bin/env python3
"""slurm-shim benchmarks: each figure is a ratio against the raw Grid Engine command doing the same
work, measured in the same run (interleaved), median of several runs. Prints Markdown tables and
writes the raw numbers as JSON.

    sudo /opt/slurm-shim/bin/python bench/run.py            # issue 19's table (~3 min on 2 cores)
    sudo /opt/slurm-shim/bin/python bench/run.py --only all # every section (~20 min)
    sudo /opt/slurm-shim/bin/python bench/run.py --only submit,startup --quick
    /opt/slurm-shim/bin/python bench/run.py --profile "squeue -u alice"   # where one call's time goes

Needs root and the live single-host cluster (``slurm-shim cluster up``). Submissions run as a
dedicated user (``shimbench``, created if missing) whose ``~/.sge_request`` holds ``-h``, so every
benchmark job is held (never runs) and the clean-up is ``qdel -u shimbench``: other users' jobs are
never touched. The sbatch state records of that user are removed at the end too.

Rows:
  table     issue 19's table: each command (sbatch -H job.sh by agent and by qsub, squeue, squeue -u U,
            squeue -j N, scancel N, sacct -j N, scontrol show job N), median of 15 whole-process
            timings, against the raw Grid Engine binary answering the same question
            (gridengine.bin_dir of the site config, SGE_ROOT/SGE_CELL as it says) and Debian's
            /usr/bin wrapper of it, on a queue of 100 held jobs; each goal marked met or not
  submit    sbatch job.sh vs qsub job.sh (qsub path and submit-agent path), single-call latency
  rate      N sequential sbatch vs N sequential qsub
  rate_raw  N sequential sbatch (agent) vs N sequential raw qsub (bin_dir): issue 19's rate goal
  burst     100 concurrent sbatch through the per-user daemon's submissions vs 100 concurrent qsub
  swarm     256 concurrent sbatch (agent) vs 256 concurrent raw qsub, all queued: issue 19's swarm goal
  waiters   256 concurrent sbatch --wait (held jobs): the processes that poll qmaster and qmaster's
            event clients while they wait (issue 29: a few pollers, not 256)
  squeue    squeue over Q queued jobs vs qstat -u '*' -xml; peak RSS
  sacct     sacct over R accounting records vs qacct (bench/gen_accounting.py)
  agent     the agent's own costs: cold start, runJob, token lookup, the no-double margin
  startup   python -X importtime of every command: the top imports and who pulls them in

--profile CMD (no root, no set-up: the command runs as you, against the live cluster and the site
config) times CMD (median of 5 whole processes) and prints where its start-up goes: a summary of
``python -X importtime`` (total, shim's share, the costliest modules and who imports them) and the
top of a cProfile run, by cumulative and by own time.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("SLURM_SHIM_BIN") or ("/opt/slurm-shim/bin" if Path("/opt/slurm-shim/bin/sbatch").exists()
                                                 else REPO / "bin"))
# SLURM_SHIM_BIN=<dir of wrapper scripts of a frozen copy of src/> with SLURM_SHIM_BENCH_PYTHON=<the
# interpreter they run>: a tree others edit meanwhile makes the warm service refuse (its code stamp
# changes) and its calls run in-process; a frozen copy keeps it serving (RESULTS.md, S5's run).
PY = os.environ.get("SLURM_SHIM_BENCH_PYTHON") or (str(BIN / "python") if (BIN / "python").exists() else sys.executable)
CLIENT_PYTHON = os.environ.get("SLURM_SHIM_BENCH_PYTHON") or str(BIN / "python3")  # the client's SHIM_PYTHON
USER = os.environ.get("SLURM_SHIM_BENCH_USER", "shimbench")
BASE = Path("/tmp/slurm-shim-bench")
SITE = Path("/etc/slurm-shim/config.toml")
SGE = {"SGE_ROOT": os.environ.get("SGE_ROOT", "/var/lib/gridengine"), "SGE_CELL": os.environ.get("SGE_CELL", "default")}
DEBIAN_BIN = Path("/usr/bin")  # Debian's wrappers: they probe the architecture, then exec bin_dir's binary


def site_gridengine() -> dict:
    """sge_root, sge_cell and bin_dir as the site config gives them (the raw binaries' set-up)."""
    import tomllib

    ge = {}
    try:
        ge = tomllib.loads(SITE.read_text()).get("gridengine", {})
    except (OSError, tomllib.TOMLDecodeError):
        pass
    return {"SGE_ROOT": ge.get("sge_root", SGE["SGE_ROOT"]), "SGE_CELL": ge.get("sge_cell", SGE["SGE_CELL"]),
            "bin_dir": ge.get("bin_dir", "/usr/lib/gridengine")}
JOB = "#!/bin/bash\n#SBATCH --job-name=benchjob\ntrue\n"
COMMANDS = ["sbatch", "squeue", "scancel", "scontrol", "sacct", "sinfo", "srun", "salloc", "slurm-shim"]
COMMAND_MODULES = {c: f"shim.cli.{c}" for c in COMMANDS} | {"slurm-shim": "shim.cli.admin"}
# A typical, read-only invocation of each command for the start-up table.
STARTUP_ARGS = {
    "sbatch": ["--test-only", "--wrap=true"], "squeue": [], "scancel": ["--help"], "scontrol": ["show", "partition"],
    "sacct": ["-j", "1"], "sinfo": [], "srun": ["--help"], "salloc": ["--help"], "slurm-shim": ["--help"],
}


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def sh(argv, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 600)
    return subprocess.run(argv, **kw)


# --------------------------------------------------------------------------------------------
# The worker: runs as the bench user, times commands that are its direct children


def worker_env(extra: dict | None = None) -> dict:
    pw = pwd.getpwuid(os.getuid())
    env = {"PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": pw.pw_dir, "USER": pw.pw_name,
           "LOGNAME": pw.pw_name, "SHELL": "/bin/bash", "LANG": "C.UTF-8", **SGE,
           "SLURM_SHIM_AGENT_DIR": str(BASE / "agent")}
    env.update(extra or {})
    return env


def timed(argv, env, cwd) -> tuple[float, str, int, int]:
    """(seconds, stdout, exit code, peak RSS in KB) of one run."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=600)
    dt = time.perf_counter() - t0
    return dt, out.decode(errors="replace") + err.decode(errors="replace"), p.returncode, _rss(p)


def _rss(p) -> int:
    return getattr(p, "maxrss", 0)


class RPopen(subprocess.Popen):
    """Popen that keeps the child's peak RSS (ru_maxrss, KB) from wait4."""

    maxrss = 0

    def _try_wait(self, wait_flags):
        try:
            pid, sts, ru = os.wait4(self.pid, wait_flags)
        except ChildProcessError:
            return self.pid, 0
        if pid == self.pid:
            self.maxrss = ru.ru_maxrss
        return pid, sts


subprocess.Popen = RPopen  # the worker's and the root side's timed children report their peak RSS


def w_latency(args) -> dict:
    """Interleaved single calls: {name: [seconds...]}, plus failures."""
    out: dict[str, list[float]] = {name: [] for name, _ in args["cmds"]}
    errors = []
    for i in range(args["runs"]):
        for name, spec in args["cmds"]:
            argv = spec["argvs"][i] if "argvs" in spec else spec["argv"]  # "argvs": one argv per run
            dt, text, rc, _ = timed(argv, worker_env(spec.get("env")), args["cwd"])
            if rc != 0:
                errors.append(f"{name}: rc={rc}: {text.strip()[:300]}")
            out[name].append(dt)
            if spec.get("stop_agent"):
                _stop_agent(worker_env(spec.get("env")), wait_up=True)
    return {"times": out, "errors": errors}


def _children_cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def w_rate(args) -> dict:
    env = worker_env(args.get("env"))
    c0 = _children_cpu()
    t0 = time.perf_counter()
    bad = 0
    for _ in range(args["n"]):
        if subprocess.run(args["argv"], env=env, cwd=args["cwd"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode != 0:
            bad += 1
    return {"seconds": time.perf_counter() - t0, "failed": bad, "cpu_children_s": _children_cpu() - c0}


def w_burst(args) -> dict:
    env = worker_env(args.get("env"))
    c0 = _children_cpu()
    t0 = time.perf_counter()
    ps = [subprocess.Popen(args["argv"], env=env, cwd=args["cwd"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
          for _ in range(args["n"])]
    outs = [p.communicate(timeout=600) for p in ps]
    dt = time.perf_counter() - t0
    ids = [int(m.group(1)) for o, _ in outs if (m := re.search(rb"job (\d+)", o))]
    return {"seconds": dt, "ids": len(ids), "distinct": len(set(ids)), "failed": sum(p.returncode != 0 for p in ps),
            "cpu_children_s": _children_cpu() - c0}


def w_waiters(args) -> dict:
    """args["n"] concurrent ``sbatch --wait`` (their jobs held by ~/.sge_request: they wait until the
    root side qdels them): started at once, then waited for; their exit codes."""
    env = worker_env(args.get("env"))
    t0 = time.perf_counter()
    ps = [subprocess.Popen(args["argv"], env=env, cwd=args["cwd"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
          for _ in range(args["n"])]
    print(json.dumps({"started": len(ps), "seconds": time.perf_counter() - t0}), flush=True)
    outs = [p.communicate(timeout=args.get("timeout", 900)) for p in ps]
    codes: dict[str, int] = {}
    for p in ps:
        codes[str(p.returncode)] = codes.get(str(p.returncode), 0) + 1
    ids = [int(m.group(1)) for o, _ in outs if (m := re.search(rb"job (\d+)", o))]
    errs = [e.decode(errors="replace").strip() for _, e in outs if e.strip()]
    return {"seconds": time.perf_counter() - t0, "codes": codes, "ids": len(set(ids)), "first_error": errs[:1]}


def w_agent(args) -> dict:
    env = worker_env(args.get("env"))
    cp = sh([PY, "-m", "shim.agent", args["op"]], env=env)
    return json.loads(cp.stdout) if cp.returncode == 0 else {"error": cp.stderr.strip()}


def _stop_agent(env, wait_up: bool = False) -> None:
    """Stop the agent (after waiting for one that is starting, with wait_up) and wait for its exit."""
    deadline = time.monotonic() + (15 if wait_up else 0)
    while True:
        cp = sh([PY, "-m", "shim.agent", "stop"], env=env)
        if cp.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if cp.returncode == 0:
        pid = json.loads(cp.stdout)["pid"]
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            try:
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX":
                    break
            except OSError:
                break
            time.sleep(0.02)


def w_stop_agent(args) -> dict:
    _stop_agent(worker_env(args.get("env")))
    return {}


def _agent_module():
    """The submission side of the per-user daemon (shim.gridengine.submitter: the DRMAA session,
    its token and lookup)."""
    sys.path.insert(0, str(REPO / "src"))
    from shim.gridengine import submitter

    return submitter


def w_fill(args) -> dict:
    """Submit args["n"] held jobs through one DRMAA session (this user's ~/.sge_request holds -h)."""
    sys.path.insert(0, str(REPO / "src"))
    agent = _agent_module()

    os.environ.setdefault("DRMAA_LIBRARY_PATH", agent.find_library())
    import drmaa

    script = Path(tempfile.mkdtemp()) / "fill.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    t0 = time.perf_counter()
    s = drmaa.Session()
    s.initialize()
    jt = s.createJobTemplate()
    jt.remoteCommand = str(script)
    jt.nativeSpecification = "-b n -w n -N queued -o /dev/null -j y -q debug"  # held by ~/.sge_request
    for _ in range(args["n"]):
        s.runJob(jt)
    s.deleteJobTemplate(jt)
    s.exit()
    return {"seconds": time.perf_counter() - t0}


def w_lookup(args) -> dict:
    """The cost of the no-double lookup (agent.find_token) with the queue as it is."""
    sys.path.insert(0, str(REPO / "src"))
    from shim import siteconf

    agent = _agent_module()
    from shim.gridengine.process import GridEngineBackend

    b = GridEngineBackend(siteconf.get())
    out = {}
    for what, token in (("miss", "0" * 24), ("hit", args.get("token"))):
        if not token:
            continue
        ts = []
        for _ in range(args["runs"]):
            t0 = time.perf_counter()
            found = agent.find_token(token, b)
            ts.append(time.perf_counter() - t0)
        out[what] = {"median": median(ts), "found": found}
    return out


def w_token_job(args) -> dict:
    """Submit one held job through the agent path directly and return (id, token) for the lookup."""
    sys.path.insert(0, str(REPO / "src"))
    agent = _agent_module()

    os.environ.setdefault("DRMAA_LIBRARY_PATH", agent.find_library())
    import drmaa

    s = drmaa.Session()
    s.initialize()
    jt = s.createJobTemplate()
    script = Path(tempfile.mkdtemp()) / "tok.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    jt.remoteCommand = str(script)
    token = os.urandom(12).hex()
    jt.nativeSpecification = f"-b n -w n -N tokjob -o /dev/null -j y -ac {agent.TOKEN_KEY}={token}"
    job = s.runJob(jt)
    s.exit()
    return {"job": int(job), "token": token}


def w_held(args) -> dict:
    """Submit args["n"] held jobs with the raw qsub (each a job for one scancel/qdel to remove), or
    with the shim's sbatch where args["sbatch"] names it (its site config in args["env"])."""
    env = worker_env(args.get("env"))
    ids = []
    for _ in range(args["n"]):
        argv = ([args["sbatch"], "--parsable", "-H", "-o", "/dev/null", "-J", "tocancel", "--wrap=true"]
                if args.get("sbatch") else
                [args["qsub"], "-h", "-terse", "-b", "y", "-o", "/dev/null", "-j", "y", "-N", "tocancel", "/bin/true"])
        cp = sh(argv, env=env, cwd="/tmp")
        if cp.returncode != 0 or not cp.stdout.strip().isdigit():
            raise RuntimeError(f"qsub failed: {cp.stderr.strip()[:300]}")
        ids.append(cp.stdout.strip())
    return {"ids": ids}


def w_finished(args) -> dict:
    """One sbatch job that runs (released from the user's default hold) so that sacct has a whole
    record of it: returns its id; the caller waits for its accounting."""
    env = worker_env(args.get("env"))
    cp = sh([str(BIN / "sbatch"), "--parsable", "-J", "benchdone", "-o", "/dev/null", "--wrap=true"], env=env,
            cwd=args["cwd"])
    job = cp.stdout.strip().split(";")[0]
    if cp.returncode != 0 or not job.isdigit():
        raise RuntimeError(f"sbatch failed: {(cp.stderr or cp.stdout).strip()[:300]}")
    rel = sh([args["qrls"], job], env=env)
    if rel.returncode != 0:
        raise RuntimeError(f"qrls {job} failed: {rel.stderr.strip()[:300]}")
    return {"job": job}


SERVICE_DIRS = ("agent", "agent-qsub")  # one warm service per site config (a service serves one)


def w_service(args) -> dict:
    """The bench user's warm services, one per site config (config-agent's in BASE/agent,
    config-qsub's in BASE/agent-qsub): {"pid": their pids, "served": the sum} (info; {} when
    none answers), or stop them."""
    sys.path.insert(0, str(REPO / "src"))
    from shim.service import server as service

    dirs = [str(BASE / n) for n in SERVICE_DIRS]
    if args.get("op") == "stop":
        pids = [service.pid_of(d) for d in dirs]
        for pid in pids:
            if pid:
                os.kill(pid, 15)
        return {"stopped": pids}
    got = [service.info(d) for d in dirs]
    if not any(got):
        return {}
    return {"pid": tuple(g[0] if g else None for g in got), "served": sum(g[1] for g in got if g)}


WORKERS = {"waiters": w_waiters, "service": w_service, "held": w_held, "finished": w_finished, "latency": w_latency, "rate": w_rate, "burst": w_burst, "agent": w_agent, "stop_agent": w_stop_agent,
           "fill": w_fill, "lookup": w_lookup, "token_job": w_token_job}


# --------------------------------------------------------------------------------------------
# Root side: set-up, clean-up, and the rows


class Bench:
    def __init__(self, opts):
        self.o = opts
        self.raw: dict = {}
        self.rows: list[tuple[str, str, str, str, str]] = []  # what, shim, raw, ratio, goal/note
        self.notes: list[str] = []
        self.pw = None

    # -- plumbing
    def worker(self, task: str, args: dict, timeout: float = 3600) -> dict:
        env = {**SGE, "PATH": f"{BIN}:/usr/bin:/bin", "HOME": self.pw.pw_dir, "LANG": "C.UTF-8",
               "GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=4096"}
        env.update({k: os.environ[k] for k in ("SLURM_SHIM_BIN", "SLURM_SHIM_BENCH_PYTHON") if k in os.environ})
        argv = ["runuser", "-u", USER, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
                PY, str(Path(__file__).resolve()), "--worker", task]
        cp = sh(argv, input=json.dumps(args), timeout=timeout, cwd=str(BASE))
        if cp.returncode != 0:
            raise RuntimeError(f"worker {task} failed: {cp.stderr.strip()[-2000:]}")
        return json.loads(cp.stdout.strip().splitlines()[-1])

    def worker_start(self, task: str, args: dict) -> subprocess.Popen:
        """A worker that runs while the root side watches (``worker_finish`` collects its answer)."""
        env = {**SGE, "PATH": f"{BIN}:/usr/bin:/bin", "HOME": self.pw.pw_dir, "LANG": "C.UTF-8",
               "GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=4096"}
        argv = ["runuser", "-u", USER, "--", "env", "-i", *[f"{k}={v}" for k, v in env.items()],
                PY, str(Path(__file__).resolve()), "--worker", task]
        p = subprocess.Popen(argv, cwd=str(BASE), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        p.stdin.write(json.dumps(args))
        p.stdin.close()
        return p

    def worker_finish(self, p: subprocess.Popen, timeout: float = 900) -> dict:
        out = p.stdout.read()
        err = p.stderr.read()
        p.wait(timeout=timeout)
        if p.returncode != 0:
            raise RuntimeError(f"worker failed: {err.strip()[-2000:]}")
        return json.loads(out.strip().splitlines()[-1])

    def setup(self) -> None:
        if os.getuid() != 0:
            sys.exit("bench/run.py: run as root (it creates the bench user and cleans up as root)")
        try:
            self.pw = pwd.getpwnam(USER)
        except KeyError:
            sh(["useradd", "-m", "-s", "/bin/bash", USER], check=True)
            self.pw = pwd.getpwnam(USER)
        home = Path(self.pw.pw_dir)
        (home / ".sge_request").write_text("-h\n")  # every job of the bench user is held: nothing runs
        os.chown(home / ".sge_request", self.pw.pw_uid, self.pw.pw_gid)
        BASE.mkdir(mode=0o755, exist_ok=True)
        BASE.chmod(0o755)
        work = BASE / "work"
        work.mkdir(exist_ok=True)
        (work / "job.sh").write_text(JOB)
        os.chown(work, self.pw.pw_uid, self.pw.pw_gid)
        for name in SERVICE_DIRS:  # the agent's directory, and the qsub config's own warm service's
            agent_dir = BASE / name
            agent_dir.mkdir(mode=0o700, exist_ok=True)
            agent_dir.chmod(0o700)
            os.chown(agent_dir, self.pw.pw_uid, self.pw.pw_gid)
        text = re.sub(r"(?ms)^\[submit\].*?(?=^\[|\Z)", "", SITE.read_text() if SITE.exists() else "")
        for method in ("qsub", "agent"):
            p = BASE / f"config-{method}.toml"
            p.write_text(f"{text}\n[submit]\nmethod = \"{method}\"\n")
            p.chmod(0o644)
        self.build_client()
        self.cleanup()

    def build_client(self) -> None:
        """The thin C client (src/shim/client/client.c) for the warm columns, in BASE/cbin; its
        fallback is the Python console scripts (BIN, or libexec/ where BIN holds installed clients)."""
        self.cbin = BASE / "cbin"
        self.cbin.mkdir(exist_ok=True)
        fb = BIN
        if (BIN / "squeue").read_bytes()[:4] == b"\x7fELF":
            fb = BIN.parent / "libexec" / "slurm-shim"
        src = REPO / "src" / "shim" / "client" / "client.c"
        out = self.cbin / "squeue"
        defs = [f'-DSHIM_FALLBACK="{fb}"', f'-DSHIM_PYTHON="{CLIENT_PYTHON}"', "-o", str(out), str(src)]
        if sh(["cc", "-O2", "-static", *defs]).returncode != 0:  # as scripts/setup builds it
            sh(["cc", "-O2", *defs], check=True)
        for c in ("sbatch", "scancel", "scontrol", "sacct"):
            sh(["cp", str(out), str(self.cbin / c)], check=True)
        self.cbin.chmod(0o755)

    def cleanup(self) -> None:
        sh(["qdel", "-u", USER], timeout=300)
        self.wait_empty()

    def wait_empty(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not sh(["qstat", "-u", USER]).stdout.strip():
                return
            time.sleep(0.2)

    def final_cleanup(self) -> None:
        if self.pw is None:
            return
        try:
            self.worker("service", {"op": "stop"}, timeout=60)
        except Exception:
            pass
        try:
            self.worker("stop_agent", {"env": self.env("agent")}, timeout=60)
        except Exception:
            pass
        self.cleanup()
        # the bench user's records (store/layout.py: users/<uid>/records/, or users/<uid>@<suffix>)
        users = Path(self.site_state_dir()) / "users"
        removed = 0
        for home in [users / str(self.pw.pw_uid), *users.glob(f"{self.pw.pw_uid}@*")]:
            records = home / "records"
            try:
                if records.is_symlink() or not records.is_dir() or records.stat().st_uid != self.pw.pw_uid:
                    continue
            except OSError:
                continue
            for root, _dirs, files in os.walk(records):
                removed += len(files)
            shutil.rmtree(records, ignore_errors=True)
        self.raw["cleanup_state_files"] = removed

    def site_state_dir(self) -> str:
        m = re.search(r'(?m)^state_dir\s*=\s*"([^"]+)"', SITE.read_text())
        return m.group(1) if m else "/var/spool/slurm-shim"

    def env(self, method: str, **extra) -> dict:
        # a warm service serves the site config it was started for: each config has its own
        # directory (a service started by a config-qsub call refused every config-agent call)
        d = {} if method == "agent" else {"SLURM_SHIM_AGENT_DIR": str(BASE / f"agent-{method}")}
        return {"SLURM_SHIM_CONFIG": str(BASE / f"config-{method}.toml"), **d, **extra}

    def row(self, what, shim, raw, ratio, goal) -> None:
        self.rows.append((what, shim, raw, ratio, goal))
        print(f"  {what}: {shim} vs {raw} -> {ratio} ({goal})", file=sys.stderr, flush=True)

    # -- issue 19's table
    def table(self) -> None:
        """Each command against the raw binary answering the same question and Debian's wrapper of it,
        interleaved round by round (shim, raw, wrapper), median of 15, on a queue of 100 held jobs."""
        ge = site_gridengine()
        raw, deb = Path(ge["bin_dir"]), DEBIAN_BIN
        runs = self.o.runs_latency
        cwd = str(BASE / "work")
        t_start = time.perf_counter()
        self.raw["table_load_before"] = os.getloadavg()
        fin = self.worker("finished", {"env": self.env("qsub"), "cwd": cwd, "qrls": str(raw / "qrls")})["job"]
        self.worker("fill", {"n": self.o.table_queue}, timeout=600)
        # The timed commands hold their jobs themselves (qsub -h, sbatch -H). Grid Engine 8.1.9 cancels
        # a -h given both in ~/.sge_request and on the command line (the job runs), so the user's
        # default hold is off while they run, and back on afterwards.
        sge_request = Path(self.pw.pw_dir) / ".sge_request"
        sge_request.write_text("")
        try:
            self._table(ge, raw, deb, runs, cwd, t_start, fin)
        finally:
            sge_request.write_text("-h\n")
        self.cleanup()

    def _table(self, ge, raw, deb, runs, cwd, t_start, fin) -> None:
        held = self.worker("held", {"n": 5 * runs + 1, "qsub": str(raw / "qsub")})["ids"]
        job, cancel = held[0], held[1:]
        off = {"SLURM_SHIM_SERVICE": "off"}  # the shim column: in-process, whatever BIN holds
        shim_job = self.worker("held", {"n": 1, "sbatch": str(BIN / "sbatch"), "env": self.env("agent", **off)})["ids"][0]
        accounted = self.wait_accounted(fin, raw)
        queue_before = self.queue_size()
        q = {"squeue": ([str(BIN / "squeue")], ["qstat", "-u", "*", "-xml"]),
             "squeue_u": ([str(BIN / "squeue"), "-u", USER], ["qstat", "-u", USER, "-xml"]),
             "squeue_j": ([str(BIN / "squeue"), "-j", job], ["qstat", "-j", job]),
             "sacct_j": ([str(BIN / "sacct"), "-j", fin], ["qacct", "-j", fin]),
             "scontrol_job": ([str(BIN / "scontrol"), "show", "job", job], ["qstat", "-j", job]),
             "scontrol_shim": ([str(BIN / "scontrol"), "show", "job", shim_job], ["qstat", "-j", shim_job])}

        def warm(name: str, argv: list[str], method: str = "agent") -> list:
            """The warm service's two clients: Python (shim.service.server.client) and C (BASE/cbin), both
            with the interpreter the C client names (a service serves the clients of its own
            installation: one started through another interpreter path refused the other's calls)."""
            cmd, rest = Path(argv[0]).name, argv[1:]
            py = [CLIENT_PYTHON, "-I", "-c", f"from shim.service import client; client({cmd!r})", *rest]
            return [[f"{name}.py", {"argv": py, "env": self.env(method)}],
                    [f"{name}.c", {"argv": [str(self.cbin / cmd), *rest], "env": self.env(method)}]]

        cmds = []
        for name, (shim, ge_argv) in q.items():
            cmds += [[name, {"argv": shim, "env": self.env("agent", **off)}], *warm(name, shim),
                     [f"{name}.raw", {"argv": [str(raw / ge_argv[0]), *ge_argv[1:]]}],
                     [f"{name}.deb", {"argv": [str(deb / ge_argv[0]), *ge_argv[1:]]}]]
        py_cancel = [CLIENT_PYTHON, "-I", "-c", "from shim.service import client; client('scancel')"]
        cmds += [["scancel", {"argvs": [[str(BIN / "scancel"), j] for j in cancel[0::5]], "env": self.env("agent", **off)}],
                 ["scancel.py", {"argvs": [[*py_cancel, j] for j in cancel[3::5]], "env": self.env("agent")}],
                 ["scancel.c", {"argvs": [[str(self.cbin / "scancel"), j] for j in cancel[4::5]], "env": self.env("agent")}],
                 ["scancel.raw", {"argvs": [[str(raw / "qdel"), j] for j in cancel[1::5]]}],
                 ["scancel.deb", {"argvs": [[str(deb / "qdel"), j] for j in cancel[2::5]]}]]
        warmup = [[n, spec] for n, spec in cmds if "argv" in spec]
        self.worker("latency", {"runs": 2, "cwd": cwd, "cmds": warmup})
        served0 = self.worker("service", {})
        r1 = self.worker("latency", {"runs": runs, "cwd": cwd, "cmds": cmds})
        served1 = self.worker("service", {})
        queue_mid = self.queue_size()
        sbatch = [str(BIN / "sbatch"), "-H", "job.sh"]
        sub = [["sbatch_agent", {"argv": sbatch, "env": self.env("agent", **off)}], *warm("sbatch_agent", sbatch),
               ["sbatch_agent.raw", {"argv": [str(raw / "qsub"), "-h", "-terse", "job.sh"]}],
               ["sbatch_agent.deb", {"argv": [str(deb / "qsub"), "-h", "-terse", "job.sh"]}],
               ["sbatch_qsub", {"argv": sbatch, "env": self.env("qsub", **off)}], *warm("sbatch_qsub", sbatch, "qsub")]
        self.worker("latency", {"runs": 2, "cwd": cwd, "cmds": sub})
        self.wait_agent()
        served2 = self.worker("service", {})
        r2 = self.worker("latency", {"runs": runs, "cwd": cwd, "cmds": sub})
        served3 = self.worker("service", {})
        queue_after = self.queue_size()
        times = {**r1["times"], **r2["times"]}
        n_warm = sum(1 for n, _ in cmds if n.endswith((".py", ".c"))) * runs + sum(
            1 for n, _ in sub if n.endswith((".py", ".c"))) * runs
        # a service that found its code changed (an edit of the tree during the run) refuses, and its
        # clients run in-process: the count says how many timed warm calls the service really ran
        self.raw["warm_served"] = {"expected": n_warm, "served": sum(
            b["served"] - a["served"] if a.get("pid") == b.get("pid") else b.get("served", 0)  # (restarted: at least)
            for a, b in ((served0, served1), (served2, served3)))}
        for k in ("raw", "deb"):
            times[f"sbatch_qsub.{k}"] = times[f"sbatch_agent.{k}"]
        calls = self.ge_calls({"sbatch_agent": sub[0][1], "sbatch_qsub": sub[3][1], **dict(cmds)}, cwd)
        rows = [
            ("sbatch_agent", "`sbatch -H job.sh` (agent) vs `qsub -h -terse job.sh`", 2.0),
            ("sbatch_qsub", "`sbatch -H job.sh` (method = qsub) vs `qsub -h -terse job.sh`", 3.0),
            ("squeue", "`squeue` vs `qstat -u '*' -xml`", 2.0),
            ("squeue_u", f"`squeue -u {USER}` vs `qstat -u {USER} -xml`", 2.0),
            ("squeue_j", "`squeue -j N` vs `qstat -j N`", 2.0),
            ("scancel", "`scancel N` vs `qdel N`", 2.0),
            ("sacct_j", "`sacct -j N` vs `qacct -j N`", 2.0),
            ("scontrol_job", "`scontrol show job N` vs `qstat -j N`", 2.0),
            ("scontrol_shim", "`scontrol show job N` of a job sbatch submitted vs `qstat -j N`", 2.0),
        ]
        self.table_rows = []
        errors = r1["errors"] + r2["errors"]
        for key, label, goal in rows:
            s_, p_, c_, r_, d_ = (median(times[k]) for k in (key, f"{key}.py", f"{key}.c", f"{key}.raw", f"{key}.deb"))
            ratio, ratio_c = s_ / r_, c_ / r_
            met = "in-process " + ("met" if ratio <= goal else "**not met**")
            met += ", warm C client " + ("met" if ratio_c <= goal else "**not met**")
            keys = (key, f"{key}.py", f"{key}.c", f"{key}.raw", f"{key}.deb")
            failed = sum(e.split(":")[0] in keys for e in errors)
            if failed:
                met += f"; **{failed} of its timed calls failed** (see the JSON)"
            self.table_rows.append((label, f"{s_*1000:.0f} ms", f"{p_*1000:.0f} ms", f"{c_*1000:.1f} ms",
                                    f"{r_*1000:.1f} ms", f"{d_*1000:.0f} ms", f"{ratio:.1f}×", f"{p_ / r_:.1f}×",
                                    f"{ratio_c:.2f}×", f"≤ {goal:.1f}× — {met}", calls.get(key, "")))
            print(f"  {label}: {s_*1000:.0f} ms, warm {p_*1000:.0f} ms (Python client) {c_*1000:.1f} ms (C client) "
                  f"vs {r_*1000:.1f} ms (wrapper {d_*1000:.0f} ms) -> {ratio:.1f}×, warm C {ratio_c:.2f}×",
                  file=sys.stderr, flush=True)
        self.raw["table"] = {"times": times, "errors": errors, "queue": {
            "before": queue_before, "after_queries": queue_mid, "after_submits": queue_after},
            "job": job, "shim_job": shim_job, "finished_job": fin, "accounted_after_s": accounted, "ge": ge, "ge_calls": calls,
            "seconds": time.perf_counter() - t_start, "load_before": self.raw["table_load_before"],
            "load_after": os.getloadavg(), "cpus": os.cpu_count()}

    def queue_size(self) -> int:
        """Jobs in the whole queue now (every user's: the other users' jobs are part of the load)."""
        return max(0, len(sh(["qstat", "-u", "*"]).stdout.splitlines()) - 2)

    def wait_accounted(self, job: str, raw: Path, timeout: float = 300) -> float:
        """Wait (bounded) until qacct knows the job sacct is asked about; seconds waited."""
        t0 = time.monotonic()
        env = dict(os.environ, **SGE)
        while time.monotonic() - t0 < timeout:
            if sh([str(raw / "qacct"), "-j", job], env=env).returncode == 0:
                return time.monotonic() - t0
            time.sleep(0.5)
        raise RuntimeError(f"job {job} was not accounted within {timeout:.0f} s (is the debug queue busy?)")

    def ge_calls(self, specs: dict, cwd: str) -> dict:
        """The Grid Engine programs each shim command starts (strace of one more call, as the bench user)."""
        if not Path("/usr/bin/strace").exists():
            return {}
        out = {}
        for key, spec in specs.items():
            if "." in key:
                continue
            argv = spec["argvs"][-1] if "argvs" in spec else spec["argv"]
            if key == "scancel":  # a job of its own: the measured ones are gone
                qsub = str(Path(site_gridengine()["bin_dir"]) / "qsub")
                argv = [argv[0], self.worker("held", {"n": 1, "qsub": qsub})["ids"][0]]
            trace = BASE / "trace.txt"
            env = {**SGE, **worker_env(spec.get("env"))} | {"HOME": self.pw.pw_dir, "USER": USER, "LOGNAME": USER}
            sh(["strace", "-f", "-qq", "-e", "trace=execve", "-o", str(trace), "runuser", "-u", USER, "--",
                "env", "-i", *[f"{k}={v}" for k, v in env.items()], *argv], cwd=cwd)
            progs = []
            for line in trace.read_text().splitlines():
                m = re.search(r'execve\("([^"]+)", \[(.*?)\]', line)
                if m and "= 0" in line.rsplit(")", 1)[-1] and Path(m.group(1)).name.startswith("q"):
                    words = re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(2))
                    progs.append(" ".join([Path(words[0]).name, *words[1:]]))
            _unlink_quiet(trace)
            out[key] = "; ".join(f"`{p}`" for p in progs) or "none"
        return out

    # -- rows
    def submit(self) -> None:
        runs = self.o.runs_latency
        cwd = str(BASE / "work")
        qsub = {"argv": ["/usr/bin/qsub", "job.sh"]}
        sb_q = {"argv": [str(BIN / "sbatch"), "job.sh"], "env": self.env("qsub")}
        sb_a = {"argv": [str(BIN / "sbatch"), "job.sh"], "env": self.env("agent")}
        # warm: config cache for both configs, and a running agent
        self.worker("latency", {"runs": 2, "cwd": cwd, "cmds": [["q", qsub], ["sq", sb_q], ["sa", sb_a]]})
        self.wait_agent()
        r = self.worker("latency", {"runs": runs, "cwd": cwd, "cmds": [["qsub", qsub], ["sbatch_qsub", sb_q],
                                                                       ["sbatch_agent", sb_a]]})
        t = {k: median(v) for k, v in r["times"].items()}
        self.raw["submit"] = r
        self.row("`sbatch job.sh` vs `qsub job.sh` (method = qsub)", f"{t['sbatch_qsub']*1000:.0f} ms",
                 f"{t['qsub']*1000:.0f} ms", f"{t['sbatch_qsub']/t['qsub']:.2f}×", "goal ≤ 1.25×")
        self.row("`sbatch job.sh` vs `qsub job.sh` (method = agent, agent running)", f"{t['sbatch_agent']*1000:.0f} ms",
                 f"{t['qsub']*1000:.0f} ms", f"{t['sbatch_agent']/t['qsub']:.2f}×", "goal ≤ 1.25×")
        # cold: no agent running: the call starts one and uses qsub
        cold = {"argv": sb_a["argv"], "env": sb_a["env"], "stop_agent": True}
        self.worker("stop_agent", {"env": self.env("agent")})
        r = self.worker("latency", {"runs": max(3, runs // 3), "cwd": cwd, "cmds": [["qsub", qsub], ["cold", cold]]})
        t2 = {k: median(v) for k, v in r["times"].items()}
        self.raw["submit_cold"] = r
        self.row("`sbatch job.sh`, no agent yet (starts one, submits by qsub)", f"{t2['cold']*1000:.0f} ms",
                 f"{t2['qsub']*1000:.0f} ms", f"{t2['cold']/t2['qsub']:.2f}×", "once per idle period")
        self.cleanup()

    def wait_agent(self, timeout: float = 30) -> dict:
        """Wait until the bench user's daemon answers with its DRMAA session open. Since issue 28
        the daemon is the warm service too, and a ping answers before any submission has opened
        the session (it opens at the first): one held sbatch opens it, else the timed calls would
        wait for it (or fall back to qsub) and measure the opening."""
        deadline = time.monotonic() + timeout
        opened = 0.0
        while time.monotonic() < deadline:
            r = self.worker("agent", {"op": "ping", "env": self.env("agent")})
            if "pid" in r and r.get("drmaa", True):
                return r
            if "pid" in r and time.monotonic() - opened > 5:
                opened = time.monotonic()
                # held: by ~/.sge_request, or (the table empties it) by -H; not both (8.1.9 then runs it)
                held = "-h" in (Path(self.pw.pw_dir) / ".sge_request").read_text().split()
                argv = [str(BIN / "sbatch"), *([] if held else ["-H"]), "job.sh"]
                self.worker("latency", {"runs": 1, "cwd": str(BASE / "work"), "cmds": [
                    ["open", {"argv": argv, "env": self.env("agent")}]]})
            time.sleep(0.2)
        raise RuntimeError("the per-user daemon did not start, or its DRMAA session did not open")

    def rate(self) -> None:
        n, runs = self.o.n, self.o.runs_rate
        cwd = str(BASE / "work")
        sides = {"qsub": {"argv": ["/usr/bin/qsub", "job.sh"]},
                 "sbatch_qsub": {"argv": [str(BIN / "sbatch"), "job.sh"], "env": self.env("qsub")},
                 "sbatch_agent": {"argv": [str(BIN / "sbatch"), "job.sh"], "env": self.env("agent")}}
        res: dict[str, list[float]] = {k: [] for k in sides}
        self.worker("latency", {"runs": 1, "cwd": cwd, "cmds": [["w", sides["sbatch_agent"]]]})
        self.wait_agent()
        for i in range(runs):
            for name, spec in sides.items():
                r = self.worker("rate", {"n": n, "cwd": cwd, **spec})
                res[name].append(n / r["seconds"])
                print(f"  rate run {i + 1}/{runs} {name}: {n / r['seconds']:.1f}/s ({r['failed']} failed)",
                      file=sys.stderr, flush=True)
                self.cleanup()
        self.raw["rate"] = res
        q = median(res["qsub"])
        for name, label in (("sbatch_qsub", "method = qsub"), ("sbatch_agent", "method = agent")):
            s = median(res[name])
            self.row(f"{n} sequential `sbatch` vs {n} `qsub` ({label})", f"{s:.1f} jobs/s", f"{q:.1f} jobs/s",
                     f"{s / q:.2f}× the rate", "goal ≥ 0.9×")

    def burst(self) -> None:
        cwd = str(BASE / "work")
        out = {}
        for mode in ("threaded",):  # (the daemon's submissions: one thread a connection)
            env = self.env("agent")
            self.worker("stop_agent", {"env": env})
            self.worker("latency", {"runs": 1, "cwd": cwd, "cmds": [["w", {"argv": [str(BIN / "sbatch"), "job.sh"],
                                                                         "env": env}]]})
            self.wait_agent()
            walls = []
            for _ in range(self.o.runs_burst):
                before = self.worker("agent", {"op": "ping", "env": env})
                r = self.worker("burst", {"n": 100, "cwd": cwd, "argv": [str(BIN / "sbatch"), "job.sh"], "env": env})
                after = self.worker("agent", {"op": "ping", "env": env})
                r["served"] = after["submitted"] - before["submitted"]
                r["runjob_ms"] = 1000 * (after["run_seconds"] - before["run_seconds"]) / max(1, r["served"])
                walls.append(r)
                self.cleanup()
            out[mode] = walls
        q = self.worker("burst", {"n": 100, "cwd": cwd, "argv": ["/usr/bin/qsub", "job.sh"]})
        self.cleanup()
        out["qsub"] = q
        self.raw["burst"] = out
        self.worker("stop_agent", {"env": self.env("agent")})
        for mode in ("threaded",):
            rs = out[mode]
            wall = median([r["seconds"] for r in rs])
            ok = all(r["distinct"] == 100 and r["failed"] == 0 for r in rs)
            self.row(f"100 concurrent `sbatch` (agent {mode}) vs 100 concurrent `qsub`", f"{wall:.2f} s",
                     f"{q['seconds']:.2f} s", f"{wall / q['seconds']:.2f}×",
                     f"{median([r['served'] for r in rs]):.0f}/100 via agent; ids distinct: {ok}")

    def held_flags(self) -> tuple[list[str], list[str], str]:
        """``--held``: the rate and swarm sections submit held jobs (``qsub -h``, ``sbatch -H``), so
        that what is timed is the submission alone. Without it the jobs run as they are queued, and
        on a one-host cell their execution (for sbatch's jobs, the job wrapper: a Python start
        each) shares the submitting host's cores; on a cluster they run on execution hosts."""
        return (["-h"], ["-H"], "-H ") if self.o.held else ([], [], "")

    def swarm(self) -> None:
        """Issue 19's agent swarm: ``--swarm`` (256) concurrent ``sbatch job.sh`` processes through the
        (threaded) agent against as many concurrent raw ``qsub job.sh`` (the site's bin_dir), the
        same way, in the same run: wall time from the first fork to the last exit, and every job
        in the queue (distinct ids, counted in qstat) before the clean-up."""
        ge = site_gridengine()
        raw = Path(ge["bin_dir"])
        n, runs, cwd = self.o.swarm, self.o.runs_burst, str(BASE / "work")
        env = self.env("agent")
        self.worker("stop_agent", {"env": env})
        self.worker("latency", {"runs": 1, "cwd": cwd, "cmds": [["w", {"argv": [str(BIN / "sbatch"), "job.sh"],
                                                                     "env": env}]]})
        self.wait_agent()
        self.cleanup()
        self.warm_service(env, cwd)
        out: dict[str, list[dict]] = {"sbatch": [], "sbatch_warm": [], "qsub": []}
        h, H, what = self.held_flags()
        sides = {"sbatch": {"argv": [str(BIN / "sbatch"), *H, "job.sh"], "env": {**env, "SLURM_SHIM_SERVICE": "off"}},
                 "sbatch_warm": {"argv": [str(self.cbin / "sbatch"), *H, "job.sh"], "env": env},
                 "qsub": {"argv": [str(raw / "qsub"), *h, "job.sh"]}}
        for i in range(runs):
            for name, spec in sides.items():
                c0 = self.cpu()
                r = self.worker("burst", {"n": n, "cwd": cwd, **spec})
                c1 = self.cpu()
                r["cpu_daemon_s"], r["cpu_qmaster_s"] = c1["daemon"] - c0["daemon"], c1["qmaster"] - c0["qmaster"]
                r["queued"] = max(0, len(sh(["qstat", "-u", USER]).stdout.splitlines()) - 2)
                out[name].append(r)
                print(f"  swarm run {i + 1}/{runs} {name}: {r['seconds']:.2f} s, {r['distinct']}/{n} distinct, "
                      f"{r['queued']} queued, {r['failed']} failed", file=sys.stderr, flush=True)
                self.cleanup()
        self.raw["swarm"] = out
        q = median([r["seconds"] for r in out["qsub"]])
        for key, how in (("sbatch", "in-process"), ("sbatch_warm", "warm service, C client")):
            s = median([r["seconds"] for r in out[key]])
            ok = all(r["distinct"] == n and r["failed"] == 0 and r["queued"] >= n for r in out[key])
            self.row(f"{n} concurrent `sbatch {what}job.sh` (agent; {how}) vs {n} concurrent `qsub {what.lower()}job.sh` (raw binary)",
                     f"{s:.2f} s", f"{q:.2f} s", f"{s / q:.2f}×",
                     f"goal ≤ 1.5× (issue 29) — **{'met' if s <= 1.5 * q and ok else 'not met'}**; issue 19's ≤ 2.6 s "
                     f"— {'met' if s <= 2.6 and ok else 'not met'}; all {n} queued, ids distinct: {ok}; "
                     f"{self.cpu_note(out[key], n)} (raw qsub: {self.cpu_note(out['qsub'], n)})")

    def waiters(self) -> None:
        """Issue 29's swarm of waiters: ``--swarm`` (256) concurrent ``sbatch --wait job.sh`` (agent;
        in-process, then through the warm service's C client), their jobs held by ~/.sge_request so
        that they wait for as long as the root side watches. Once every job is queued, the root side
        samples /proc every 20 ms for ``--waiters-window`` seconds: each ``qstat`` process of the
        bench user and its parent (a poller: a process that asks qmaster), and asks qmaster for its
        event clients (``qconf -secl``). Then ``qdel -u`` ends the waits. The goal: a few pollers,
        not one per waiting command; no event client per waiting command."""
        n, cwd = self.o.swarm, str(BASE / "work")
        env = self.env("agent")
        self.worker("latency", {"runs": 1, "cwd": cwd, "cmds": [["w", {"argv": [str(BIN / "sbatch"), "job.sh"],
                                                                     "env": env}]]})
        self.wait_agent()
        self.warm_service(env, cwd)
        self.cleanup()
        out = {}
        sides = {"in-process": {"argv": [str(BIN / "sbatch"), "--wait", "job.sh"], "env": {**env, "SLURM_SHIM_SERVICE": "off"}},
                 "warm service, C client": {"argv": [str(self.cbin / "sbatch"), "--wait", "job.sh"], "env": env}}
        secl0 = self.event_clients()
        for how, spec in sides.items():
            p = self.worker_start("waiters", {"n": n, "cwd": cwd, **spec})
            try:
                t0 = time.monotonic()
                queued = 0
                while time.monotonic() - t0 < 180 and p.poll() is None:
                    queued = max(0, len(sh(["qstat", "-u", USER]).stdout.splitlines()) - 2)
                    if queued >= n:
                        break
                    time.sleep(0.5)
                submit_s = time.monotonic() - t0
                seen = self.sample_pollers(self.o.waiters_window)
                secl = self.event_clients()
            finally:
                self.cleanup()
            r = self.worker_finish(p)
            r.update(queued=queued, submit_s=submit_s, **seen, event_clients=secl)
            out[how] = r
            print(f"  waiters ({how}): {queued} queued in {submit_s:.1f} s; {seen['pollers']} pollers, "
                  f"{seen['qstat_seen']} qstat processes seen in {seen['window_s']:.0f} s; "
                  f"{len(secl)} event clients; exit codes {r['codes']}", file=sys.stderr, flush=True)
        self.raw["waiters"] = {"event_clients_before": secl0, **out}
        for how, r in out.items():
            few = r["pollers"] <= 4 and len(r["event_clients"]) <= len(secl0) + 4
            self.row(f"{n} concurrent `sbatch --wait job.sh` (agent; {how}): processes polling qmaster "
                     f"(`qstat`'s parents, /proc every 20 ms for {r['window_s']:.0f} s) and event clients "
                     f"(`qconf -secl`)", f"{r['pollers']} pollers ({r['qstat_seen']} `qstat` seen, "
                     f"≥ {r['qstat_seen'] / r['window_s']:.0f}/s); {len(r['event_clients'])} event clients",
                     f"{len(secl0)} event clients idle", "—",
                     f"goal: a few pollers, not {n} — **{'met' if few else 'not met'}**; {r['queued']} queued")

    def event_clients(self) -> list[str]:
        """qmaster's event clients (``qconf -secl``, as root: a manager), one line each."""
        cp = sh([str(Path(site_gridengine()["bin_dir"]) / "qconf"), "-secl"], env=dict(os.environ, **SGE))
        lines = [x.strip() for x in cp.stdout.splitlines() if x.strip() and not x.strip().startswith(("ID ", "-"))]
        return lines if cp.returncode == 0 else [f"qconf -secl failed: {cp.stderr.strip()[:200]}"]

    def sample_pollers(self, window: float) -> dict:
        """/proc every 20 ms for ``window`` s: the bench user's ``qstat`` processes and their parents."""
        uid = self.pw.pw_uid
        qstats: dict[int, int] = {}
        waiting = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < window:
            alive = 0
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    if os.stat(f"/proc/{name}").st_uid != uid:
                        continue
                    with open(f"/proc/{name}/stat", "rb") as f:
                        stat = f.read()
                except OSError:
                    continue
                comm = stat[stat.index(b"(") + 1:stat.rindex(b")")]
                ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
                if comm == b"qstat":
                    qstats[int(name)] = ppid
                elif comm == b"sbatch":
                    alive += 1
            waiting = max(waiting, alive)
            time.sleep(0.02)
        return {"pollers": len(set(qstats.values())), "qstat_seen": len(qstats), "window_s": time.monotonic() - t0,
                "sbatch_processes": waiting}

    def cpu(self) -> dict:
        """CPU seconds so far of the bench user's daemon (with its reaped children: the warm calls)
        and of this cell's qmaster (``bin_dir``'s sge_qmaster): where a submission's time goes."""
        tick = os.sysconf("SC_CLK_TCK")

        def of(pid) -> float:
            try:
                f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                return sum(int(x) for x in f[11:15]) / tick  # utime stime cutime cstime
            except (OSError, ValueError, IndexError):
                return float("nan")

        try:
            daemon = int((BASE / "agent" / "service.lock").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            daemon = None
        qmaster = str(Path(site_gridengine()["bin_dir"]) / "sge_qmaster")
        qm = None
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    if os.readlink(f"/proc/{name}/exe") == qmaster:
                        qm = name
                        break
                except OSError:
                    continue
        return {"daemon": of(daemon) if daemon else float("nan"), "qmaster": of(qm) if qm else float("nan")}

    def cpu_note(self, runs: list[dict], jobs: int) -> str:
        """CPU a job, median over the runs: the commands (the worker's children), the daemon, qmaster."""
        per = {k: median([r[k] for r in runs if k in r]) * 1000 / jobs
               for k in ("cpu_children_s", "cpu_daemon_s", "cpu_qmaster_s")}
        return (f"CPU a job: commands {per['cpu_children_s']:.1f} ms, daemon (its calls' children included) "
                f"{per['cpu_daemon_s']:.1f} ms, qmaster {per['cpu_qmaster_s']:.1f} ms")

    def warm_service(self, env: dict, cwd: str) -> None:
        """Start the bench user's warm service (its first call runs in-process) and wait for it."""
        self.worker("latency", {"runs": 1, "cwd": cwd, "cmds": [["w", {"argv": [str(self.cbin / "squeue"), "--version"],
                                                                     "env": env}]]})
        deadline = time.monotonic() + 60
        while not self.worker("service", {}) and time.monotonic() < deadline:
            time.sleep(0.2)

    def rate_raw(self) -> None:
        """Issue 19's rate goal: ``--n`` sequential ``sbatch job.sh`` (agent) against as many sequential
        raw ``qsub job.sh`` (the site's bin_dir), interleaved run by run."""
        ge = site_gridengine()
        raw = Path(ge["bin_dir"])
        n, runs, cwd = self.o.n, self.o.runs_rate, str(BASE / "work")
        h, H, what = self.held_flags()
        sides = {"qsub": {"argv": [str(raw / "qsub"), *h, "job.sh"]},
                 "sbatch_agent": {"argv": [str(BIN / "sbatch"), *H, "job.sh"], "env": self.env("agent", SLURM_SHIM_SERVICE="off")},
                 "sbatch_warm": {"argv": [str(self.cbin / "sbatch"), *H, "job.sh"], "env": self.env("agent")}}
        self.warm_service(self.env("agent"), cwd)
        res: dict[str, list[float]] = {k: [] for k in sides}
        cpu: dict[str, list[dict]] = {}
        self.worker("latency", {"runs": 1, "cwd": cwd, "cmds": [["w", sides["sbatch_agent"]]]})
        self.wait_agent()
        self.cleanup()
        for i in range(runs):
            for name, spec in sides.items():
                c0 = self.cpu()
                r = self.worker("rate", {"n": n, "cwd": cwd, **spec})
                c1 = self.cpu()
                r["cpu_daemon_s"], r["cpu_qmaster_s"] = c1["daemon"] - c0["daemon"], c1["qmaster"] - c0["qmaster"]
                cpu.setdefault(name, []).append(r)
                res[name].append(n / r["seconds"])
                print(f"  rate_raw run {i + 1}/{runs} {name}: {n / r['seconds']:.1f}/s ({r['failed']} failed)",
                      file=sys.stderr, flush=True)
                self.cleanup()
        self.raw["rate_raw"] = res
        self.raw["rate_raw_cpu"] = cpu
        q = median(res["qsub"])
        for key, how in (("sbatch_agent", "in-process"), ("sbatch_warm", "warm service, C client")):
            sb = median(res[key])
            self.row(f"{n} sequential `sbatch {what}job.sh` (agent; {how}) vs {n} sequential `qsub {what.lower()}job.sh` (raw binary)",
                     f"{sb:.1f} jobs/s", f"{q:.1f} jobs/s", f"{sb / q:.2f}× the rate",
                     f"goal ≥ 1.0× — **{'met' if sb >= q else 'not met'}**; {self.cpu_note(cpu[key], n)} "
                     f"(raw qsub: {self.cpu_note(cpu['qsub'], n)})")

    def squeue(self) -> None:
        n = self.o.queued
        probe = sh([str(BIN / "squeue"), "--help"])
        if "not implemented" in probe.stderr:
            self.row(f"`squeue` over {n} queued jobs", "—", "—", "skipped", "squeue not implemented yet")
            return
        t0 = time.perf_counter()
        fill = self.worker("fill", {"n": n}, timeout=1800)
        self.raw["squeue_fill_seconds"] = time.perf_counter() - t0
        try:
            count = len(sh(["qstat", "-u", USER]).stdout.splitlines()) - 2
            sq, qs, qr, rss_s, rss_q = [], [], [], [], []
            env = dict(os.environ, **SGE)
            for _ in range(self.o.runs_squeue):
                dt, _, rc, rss = timed(["qstat", "-u", "*", "-xml"], env, "/")
                qs.append(dt)
                rss_q.append(rss)
                qr.append(timed(["qstat", "-u", "*", "-r", "-xml"], env, "/")[0])
                dt, out, rc, rss = timed([str(BIN / "squeue")], env, "/")
                if rc != 0:
                    raise RuntimeError(f"squeue failed: {out[:500]}")
                sq.append(dt)
                rss_s.append(rss)
            lines = len(out.splitlines())
            self.raw["squeue"] = {"queued": count, "squeue": sq, "qstat": qs, "qstat_r": qr, "rss_squeue_kb": rss_s,
                                  "rss_qstat_kb": rss_q, "lines": lines, "fill": fill}
            s, q = median(sq), median(qs)
            self.row(f"`squeue` over {count} queued jobs vs `qstat -u '*' -xml`", f"{s*1000:.0f} ms",
                     f"{q*1000:.0f} ms", f"{s/q:.2f}×", "goal ≤ 1.25×")
            self.row("  … peak RSS of `squeue`", f"{max(rss_s)/1024:.1f} MB", f"{max(rss_q)/1024:.1f} MB", "—",
                     "goal ≤ 60 MB")
            self.row("  … the qstat squeue runs (`qstat -u '*' -r -xml`) alone", "—", f"{median(qr)*1000:.0f} ms",
                     f"{median(qr)/q:.2f}× of the baseline", "part of the gap that is Grid Engine's")
            self.one_job_on_a_full_queue(env, count)
            self.squeue_lookup()
            if self.o.cprofile:
                self.raw["squeue_profile"] = self.profile([str(BIN / "squeue")], env)
        finally:
            t0 = time.perf_counter()
            self.cleanup()
            self.raw["squeue_cleanup_seconds"] = time.perf_counter() - t0

    def one_job_on_a_full_queue(self, env: dict, count: int) -> None:
        """Issue 29's big queue: ``scontrol show job N`` and ``scancel N`` against ``qstat -j N`` and
        ``qdel N`` on the full queue (goal: at most 2×), interleaved, each on jobs of its own."""
        ids = [ln.split()[0] for ln in sh(["qstat", "-u", USER]).stdout.splitlines()[2:] if ln.strip()]
        runs = self.o.runs_squeue
        mid = len(ids) // 2
        show, qj, sc, qd = [], [], [], []
        for i in range(runs):
            job = ids[mid + i]
            show.append(timed([str(BIN / "scontrol"), "show", "job", job], env, "/")[0])
            qj.append(timed(["qstat", "-j", job], env, "/")[0])
            dt, out, rc, _ = timed([str(BIN / "scancel"), ids[mid + runs + 2 * i]], env, "/")
            if rc != 0:
                raise RuntimeError(f"scancel failed: {out[:500]}")
            sc.append(dt)
            qd.append(timed(["qdel", ids[mid + runs + 2 * i + 1]], env, "/")[0])
        self.raw["one_job_full_queue"] = {"queued": count, "scontrol_show_job": show, "qstat_j": qj, "scancel": sc,
                                          "qdel": qd}
        for what, s, r in ((f"`scontrol show job N` on {count} queued vs `qstat -j N`", show, qj),
                           (f"`scancel N` on {count} queued vs `qdel N`", sc, qd)):
            self.row(what, f"{median(s)*1000:.0f} ms", f"{median(r)*1000:.0f} ms", f"{median(s)/median(r):.2f}×",
                     f"goal ≤ 2× — {'met' if median(s) <= 2 * median(r) else 'not met'}")

    def squeue_lookup(self) -> None:
        """While the queue is full: the cost of the agent's no-double lookup (the rare path)."""
        tok = self.worker("token_job", {})
        r = self.worker("lookup", {"runs": 3, "token": tok["token"], "env": {}})
        self.raw["lookup_full_queue"] = r
        self.agent_rows.append(("token lookup, found (newest of the user's jobs), "
                                f"{self.o.queued} queued", f"{r['hit']['median']*1000:.0f} ms",
                                "found" if r["hit"]["found"] == tok["job"] else "NOT FOUND"))
        self.agent_rows.append((f"token lookup, absent (scans all {self.o.queued} of the user's jobs)",
                                f"{r['miss']['median']*1000:.0f} ms", "the agent-died-before-runJob path"))

    def sacct(self) -> None:
        gen = REPO / "bench" / "gen_accounting.py"
        probe = sh([str(BIN / "sacct"), "--help"])
        if "not implemented" in probe.stderr or not gen.exists():
            why = "sacct not implemented yet" if gen.exists() else "bench/gen_accounting.py not there yet"
            self.row(f"`sacct` over {self.o.records} records", "—", "—", "skipped", why)
            return
        path = BASE / f"accounting-{self.o.records}"
        cp = sh([PY, str(gen), "-n", str(self.o.records), "-o", str(path)])
        if cp.returncode != 0:
            self.row(f"`sacct` over {self.o.records} records", "—", "—", "skipped",
                     f"gen_accounting failed: {cp.stderr.strip()[:200]}")
            return
        info = dict(kv.split("=", 1) for kv in cp.stderr.split() if "=" in kv)
        job = info.get("middle_job") or info.get("first_job") or "1000"
        env = dict(os.environ, **SGE, SLURM_SHIM_ACCOUNTING=str(path))
        questions = [
            (f"one job (`sacct -j {job}` vs `qacct -j {job}`)", [str(BIN / "sacct"), "-j", job],
             ["qacct", "-f", str(path), "-j", job]),
            ("one user's jobs (`sacct -u alice -S 2000-01-01 -E now` vs `qacct -o alice -j`)",
             [str(BIN / "sacct"), "-u", "alice", "-S", "2000-01-01", "-E", "now"],
             ["qacct", "-f", str(path), "-o", "alice", "-j"]),
        ]
        self.raw["sacct"] = {}
        for label, s_argv, q_argv in questions:
            s_t, q_t, s_rss = [], [], []
            for _ in range(self.o.runs_sacct):
                dt, out, rc, _ = timed(q_argv, env, "/")
                q_t.append(dt)
                dt, out, rc, rss = timed(s_argv, env, "/")
                if rc != 0:
                    raise RuntimeError(f"sacct failed: {out[:500]}")
                s_t.append(dt)
                s_rss.append(rss)
            s, q = median(s_t), median(q_t)
            self.raw["sacct"][label] = {"sacct": s_t, "qacct": q_t, "rss_kb": s_rss}
            self.row(f"`sacct` over {self.o.records} records: {label}", f"{s*1000:.0f} ms", f"{q*1000:.0f} ms",
                     f"{s/q:.2f}×", f"goal ≤ 1.5×; peak RSS {max(s_rss)/1024:.0f} MB")
            if self.o.cprofile:
                self.raw.setdefault("sacct_profile", {})[label] = self.profile(s_argv, env)

    def profile(self, argv: list[str], env: dict) -> list[tuple[str, float, float]]:
        """cProfile of a console-script command: the top functions by cumulative time."""
        out = BASE / "profile.out"
        cmd = Path(argv[0]).name
        script = BASE / "profile_main.py"
        script.write_text(f"import sys\nfrom shim.__main__ import dispatch\nsys.argv = {[cmd, *argv[1:]]!r}\n"
                          f"sys.exit(dispatch({cmd!r}, sys.argv[1:]))\n")
        _unlink_quiet(out)
        cp = sh([PY, "-m", "cProfile", "-o", str(out), str(script)], env=env, cwd="/")
        if not out.exists():
            return [(f"profile failed: {cp.stderr.strip()[-300:]}", 0.0, 0.0)]
        import pstats

        st = pstats.Stats(str(out))
        rows = []
        for (fn, line, name), (cc, nc, tt, ct, _) in st.stats.items():
            rows.append((f"{Path(fn).name}:{line}({name})", ct, tt))
        rows.sort(key=lambda r: -r[1])
        return rows[:25]

    def agent_costs(self) -> None:
        cwd = str(BASE / "work")
        env = self.env("agent")
        # cold start: from `serve` to answering a ping
        self.worker("stop_agent", {"env": env})
        t0 = time.perf_counter()
        self.worker("latency", {"runs": 1, "cwd": cwd, "cmds": [["w", {"argv": [str(BIN / "sbatch"), "job.sh"],
                                                                     "env": env}]]})
        ping = self.wait_agent()
        self.agent_rows.append(("agent start-up (sbatch → agent answering), incl. worker overheads",
                                f"{(time.perf_counter() - t0)*1000:.0f} ms", "once per idle period"))
        # runJob inside the agent vs qsub, over a run of submissions
        before = ping
        self.worker("rate", {"n": 50, "cwd": cwd, "argv": [str(BIN / "sbatch"), "job.sh"], "env": env})
        after = self.worker("agent", {"op": "ping", "env": env})
        per = (after["run_seconds"] - before["run_seconds"]) / max(1, after["submitted"] - before["submitted"])
        self.agent_rows.append(("DRMAA runJob inside the agent (median over 50 sbatch)", f"{per*1000:.2f} ms",
                                "vs a qsub process: see the submit row"))
        # the no-double margin: the lookup after a SIGKILL right after runJob
        r = self.worker("latency", {"runs": 5, "cwd": cwd, "cmds": [
            ["normal", {"argv": [str(BIN / "sbatch"), "job.sh"], "env": env}],
            ["killed", {"argv": [str(BIN / "sbatch"), "job.sh"],
                        "env": {**env, "SLURM_SHIM_AGENT_TEST_DIE": "after_submit"}}],
        ]})
        self.raw["agent_killed"] = r
        self.agent_rows.append(("sbatch when the agent is SIGKILLed after runJob (journal miss → qstat lookup)",
                                f"{median(r['times']['killed'])*1000:.0f} ms",
                                f"normal: {median(r['times']['normal'])*1000:.0f} ms; errors: {len(r['errors'])}"))
        self.cleanup()
        # the shortest life of a job (submit → gone from qstat): what the lookup must beat
        self.agent_rows.append(("shortest job life seen (submit → gone from qstat), trivial job, idle cluster",
                                f"{self.job_life()*1000:.0f} ms", "the lookup above must finish before this"))
        self.worker("stop_agent", {"env": env})

    def job_life(self) -> float:
        lives = []
        env = dict(os.environ, **SGE)
        for _ in range(3):
            t0 = time.perf_counter()
            job = sh(["qsub", "-terse", "-b", "y", "-o", "/dev/null", "-j", "y", "-q", "debug", "/bin/true"],
                     env=env).stdout.strip()
            if not job.isdigit():
                continue
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if sh(["qstat", "-j", job], env=env).returncode != 0:
                    break
            lives.append(time.perf_counter() - t0)
        return min(lives) if lives else float("nan")

    def startup(self) -> None:
        base = []
        for _ in range(5):
            t0 = time.perf_counter()
            sh([PY, "-c", "pass"])
            base.append(time.perf_counter() - t0)
        self.startup_rows = []
        self.raw["python_startup_ms"] = median(base) * 1000
        for cmd in COMMANDS:
            args = STARTUP_ARGS.get(cmd, ["--help"])
            code = (f"import sys; from shim.__main__ import dispatch; sys.argv = {[cmd, *args]!r}; "
                    f"sys.exit(dispatch({cmd!r}, sys.argv[1:]))")
            walls = []
            for _ in range(5):
                t0 = time.perf_counter()
                cp = sh([PY, "-c", code], cwd="/")
                walls.append(time.perf_counter() - t0)
            if "not implemented" in cp.stderr:
                self.startup_rows.append((cmd, "—", "—", "not implemented yet"))
                continue
            cp = sh([PY, "-X", "importtime", "-c", code], cwd="/")
            tree = parse_importtime(cp.stderr)
            total = sum(r["self"] for r in tree) / 1000
            shim_ms = sum(r["self"] for r in tree if r["name"].startswith("shim")) / 1000
            tops = top_imports(tree, 6, COMMAND_MODULES.get(cmd, cmd))
            self.raw.setdefault("startup", {})[cmd] = {"wall_ms": median(walls) * 1000, "import_ms": total,
                                                      "top": tops}
            desc = "; ".join(f"`{t['name']}` {t['cum']/1000:.1f} ms"
                             + (f" (mostly `{t['mostly']}`)" if t["mostly"] else "") + f" ← {t['why']}" for t in tops)
            self.startup_rows.append((f"{cmd} {' '.join(args)}".strip(), f"{median(walls)*1000:.0f} ms",
                                      f"{total:.0f} ms ({shim_ms:.0f} ms in shim.*)", desc))

    # -- report
    def save(self, path: str) -> None:
        Path(path).write_text(json.dumps({"table_rows": getattr(self, "table_rows", []), "rows": self.rows,
                                          "agent_rows": self.agent_rows,
                                          "startup_rows": getattr(self, "startup_rows", []), "raw": self.raw},
                                         indent=1))

    def report(self) -> str:
        lines = []
        if getattr(self, "table_rows", None):
            t = self.raw["table"]
            qu = t["queue"]
            lines += [f"Issue 19's table: median of {self.o.runs_latency} whole-process timings, interleaved (shim, raw, "
                      f"wrapper); queue {qu['before']} jobs for the queries (held; every user's), "
                      f"{qu['after_queries']}–{qu['after_submits']} for the submissions; raw binaries in "
                      f"`{t['ge']['bin_dir']}` (SGE_ROOT={t['ge']['SGE_ROOT']}, SGE_CELL={t['ge']['SGE_CELL']}); "
                      f"N = held job {t['job']} (raw qsub; {t.get('shim_job')} from sbatch for its scontrol row), "
                      f"sacct's N = finished job {t['finished_job']}; load average "
                      f"{t['load_before'][0]:.1f} before, {t['load_after'][0]:.1f} after, on {t['cpus']} CPUs. "
                      f"Warm columns: the per-user service (docs/service.md) through the Python client "
                      f"(`python3 -I -c 'from shim.service import client; ...'`) and the C client "
                      f"(src/shim/client/client.c, cc -O2); the service ran {self.raw['warm_served']['served']} "
                      f"of the {self.raw['warm_served']['expected']} timed warm calls (the rest: refused, "
                      f"in-process).", "",
                      "| command | slurm-shim in-process | warm, Python client | warm, C client "
                      "| raw Grid Engine binary | Debian `/usr/bin` wrapper | ratio in-process/raw | ratio warm Python/raw "
                      "| ratio warm C/raw | goal | Grid Engine programs the shim starts |",
                      "|---|---|---|---|---|---|---|---|---|---|---|"]
            lines += [f"| {' | '.join(r)} |" for r in self.table_rows]
            if t["errors"]:
                lines += ["", f"{len(t['errors'])} timed calls failed; first: `{t['errors'][0][:200]}`"]
            if self.rows:
                lines.append("")
        if self.rows:
            lines += ["| what | slurm-shim | Grid Engine | ratio | goal / note |", "|---|---|---|---|---|"]
            lines += [f"| {' | '.join(r)} |" for r in self.rows]
        if getattr(self, "agent_rows", None):
            lines += ["", "Submit agent internals:", "", "| what | value | note |", "|---|---|---|"]
            lines += [f"| {' | '.join(r)} |" for r in self.agent_rows]
        if getattr(self, "startup_rows", None):
            lines += ["", f"Start-up (python alone: {self.raw['python_startup_ms']:.0f} ms; median of 5; imports from "
                      "`python -X importtime`, cumulative, with the shim module that pulls each in):", "",
                      "| command (args) | wall, incl. its q* calls | imports | top imports ← imported by |", "|---|---|---|---|"]
            lines += [f"| {' | '.join(r)} |" for r in self.startup_rows]
        return "\n".join(lines)


def _unlink_quiet(p: Path) -> None:
    try:
        p.unlink()
    except OSError:
        pass


def parse_importtime(text: str) -> list[dict]:
    """-X importtime lines, in order, with depth; each row gets its parent (the importer)."""
    rows = []
    for line in text.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            rows.append({"self": int(m.group(1)), "cum": int(m.group(2)), "depth": len(m.group(3)) // 2,
                         "name": m.group(4)})
    # In importtime output a module is printed after its children; its parent is the next row
    # (further down) with a smaller depth.
    for i, r in enumerate(rows):
        r["parent"] = None
        for j in range(i + 1, len(rows)):
            if rows[j]["depth"] < r["depth"]:
                r["parent"] = j
                break
    return rows


def top_imports(rows: list[dict], k: int, cmd_module: str) -> list[dict]:
    """The k costliest non-shim modules that a shim module imports directly, with that module.

    importlib.import_module (how shim.__main__ loads the command) does not nest in -X importtime:
    the command module's own imports print at depth 0 after shim.__main__, so those are credited to
    the command module; depth-0 rows before shim.__main__ are the interpreter's start-up."""
    main = next((i for i, r in enumerate(rows) if r["name"] == "shim.__main__"), None)
    out = []
    for i, r in enumerate(rows):
        if r["name"].startswith("shim"):
            continue
        p = r["parent"]
        if p is None:
            if main is None or i < main:
                continue  # python's own start-up (site, encodings, ...)
            parent = cmd_module
        else:
            parent = rows[p]["name"]
            if not parent.startswith("shim"):
                continue  # counted in its ancestor's cumulative time
        kids = [c for c in rows if c["parent"] == i]
        big = max(kids, key=lambda c: c["cum"], default=None)
        mostly = big["name"] if big and big["cum"] * 2 > r["cum"] else None
        out.append({"name": r["name"], "cum": r["cum"], "why": parent, "mostly": mostly})
    out.sort(key=lambda r: -r["cum"])
    return out[:k]


def profile_command(cmdline: str, top: int = 20) -> int:
    """--profile CMD: wall time, a -X importtime summary and a cProfile top list of one command,
    run as the caller (python -I, as the console scripts run)."""
    import pstats
    import shlex

    words = shlex.split(cmdline)
    if not words or words[0] not in COMMAND_MODULES:
        sys.exit(f"bench/run.py: --profile takes a shim command line, e.g. \"squeue -j 5\" ({', '.join(COMMANDS)})")
    cmd, args = words[0], words[1:]
    code = (f"import sys; from shim.__main__ import dispatch; sys.argv = {[cmd, *args]!r}; "
            f"sys.exit(dispatch({cmd!r}, sys.argv[1:]))")
    base, walls = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        sh([PY, "-I", "-c", "pass"])
        base.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        cp = sh([PY, "-I", "-c", code])
        walls.append(time.perf_counter() - t0)
    print(f"# {cmdline}\n\nexit {cp.returncode}; wall {median(walls)*1000:.1f} ms (median of 5; python -I -c pass: "
          f"{median(base)*1000:.1f} ms)\n")
    cp = sh([PY, "-I", "-X", "importtime", "-c", code])
    rows = parse_importtime(cp.stderr)
    total = sum(r["self"] for r in rows) / 1000
    shim = sum(r["self"] for r in rows if r["name"].startswith("shim")) / 1000
    main_at = next((i for i, r in enumerate(rows) if r["name"] == "shim.__main__"), len(rows))
    before = sum(r["self"] for r in rows[:main_at] if not r["name"].startswith("shim")) / 1000
    print(f"## imports (python -X importtime)\n\n{len(rows)} modules, {total:.1f} ms of own time: {shim:.1f} ms in "
          f"shim.*, {before:.1f} ms before shim.__main__ (the interpreter's start-up), "
          f"{total - shim - before:.1f} ms of other modules the command pulls in.\n")
    print("| module | cumulative | own | imported by |\n|---|---|---|---|")
    for r in top_imports(rows, top, COMMAND_MODULES[cmd]):
        own = next(x["self"] for x in rows if x["name"] == r["name"])
        print(f"| `{r['name']}` | {r['cum']/1000:.2f} ms | {own/1000:.2f} ms | `{r['why']}` |")
    shim_rows = sorted((r for r in rows if r["name"].startswith("shim")), key=lambda r: -r["self"])[:top // 2]
    print("\nshim modules by own import time: " + ", ".join(f"`{r['name']}` {r['self']/1000:.2f} ms" for r in shim_rows))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile.out"
        script = Path(tmp) / "profile_main.py"
        script.write_text(f"import sys\nfrom shim.__main__ import dispatch\nsys.argv = {[cmd, *args]!r}\n"
                          f"sys.exit(dispatch({cmd!r}, sys.argv[1:]))\n")
        sh([PY, "-I", "-m", "cProfile", "-o", str(out), str(script)])
        if not out.exists():
            print("\ncProfile wrote nothing")
            return 1
        st = pstats.Stats(str(out))
    stats = [(f"{Path(fn).name}:{line}({name})" if line else name, nc, tt, ct)
             for (fn, line, name), (_cc, nc, tt, ct, _) in st.stats.items()]
    print(f"\n## cProfile ({st.total_tt*1000:.1f} ms profiled, with cProfile's own overhead)\n")
    for title, key in (("cumulative", 3), ("own time", 2)):
        print(f"top {top} by {title}:\n\n| function | calls | own | cumulative |\n|---|---|---|---|")
        for fn, nc, tt, ct in sorted(stats, key=lambda r: -r[key])[:top]:
            print(f"| `{fn}` | {nc} | {tt*1000:.2f} ms | {ct*1000:.2f} ms |")
        print()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker")
    ap.add_argument("--quick", action="store_true", help="fewer and shorter runs")
    ap.add_argument("--only", default="table", help="sections, comma separated, or all (default: table)")
    ap.add_argument("--table-queue", type=int, default=100, help="held jobs in the queue for the table")
    ap.add_argument("--n", type=int, default=1000, help="sequential submissions per rate run")
    ap.add_argument("--swarm", type=int, default=256, help="concurrent sbatch processes in the swarm section")
    ap.add_argument("--held", action="store_true",
                    help="rate_raw and swarm: held jobs (sbatch -H, qsub -h): the submission alone, no execution")
    ap.add_argument("--waiters-window", type=float, default=10.0,
                    help="seconds the waiters section watches the waiting sbatch --wait processes")
    ap.add_argument("--queued", type=int, default=10000, help="queued jobs for squeue")
    ap.add_argument("--records", type=int, default=100000, help="accounting records for sacct")
    ap.add_argument("--cprofile", action="store_true", help="cProfile the squeue and sacct sections (in the JSON)")
    ap.add_argument("--profile", metavar="CMD", help='where one command\'s time goes, e.g. --profile "squeue -j 5"')
    ap.add_argument("--json", help="raw numbers (default: bench/results-table.json for the table alone, "
                    "else bench/results.json)")
    o = ap.parse_args()
    if o.worker:
        args = json.loads(sys.stdin.read() or "{}")
        print(json.dumps(WORKERS[o.worker](args)))
        return 0
    if o.profile:
        return profile_command(o.profile)
    SGE.update({k: v for k, v in site_gridengine().items() if k.startswith("SGE_")})  # as the site says
    o.runs_latency, o.runs_rate, o.runs_burst, o.runs_squeue, o.runs_sacct = (15, 3, 3, 7, 7)
    if o.quick:
        o.n, o.queued, o.runs_latency, o.runs_rate, o.runs_burst, o.runs_squeue, o.runs_sacct = (
            100, 2000, 7, 1, 1, 3, 3)
    b = Bench(o)
    b.agent_rows = []
    sections = ("table", "submit", "rate", "rate_raw", "burst", "swarm", "waiters", "squeue", "sacct", "agent",
                "startup")
    only = set(sections) if o.only == "all" else set(o.only.split(","))
    if only - set(sections):
        ap.error(f"unknown sections: {', '.join(sorted(only - set(sections)))}")
    o.json = o.json or str(REPO / "bench" / ("results-table.json" if only == {"table"} else "results.json"))
    started = time.time()
    try:
        b.setup()
        for name in sections:
            if name in only:
                print(f"[{time.time() - started:6.0f} s] {name}", file=sys.stderr, flush=True)
                try:
                    getattr(b, {"agent": "agent_costs"}.get(name, name))()
                except Exception as e:  # one broken section must not lose the others
                    import traceback

                    traceback.print_exc()
                    b.row(f"section {name}", "—", "—", "failed", f"{type(e).__name__}: {e}"[:200])
                b.save(o.json)
    finally:
        b.final_cleanup()
    b.raw["elapsed_s"] = time.time() - started
    b.raw["options"] = {k: v for k, v in vars(o).items()}
    b.save(o.json)
    print(b.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
