#!/usr/bin/env python3
"""The Python CPU one ``sbatch`` costs, in-process and as the warm service runs it (issue 29).

    /opt/slurm-shim/bin/python bench/sbatch_cpu.py                  # 500 submissions a mode
    /opt/slurm-shim/bin/python bench/sbatch_cpu.py -n 200 --profile 25 --json out.json

Grid Engine answers at once: a ReplayBackend whose qsub gives the next job id (``InstantGE``), so
only the shim's own work is measured. The store is a private state directory (under /dev/shm when
there is one) named by a private copy of the unit tests' site config (fixtures/site/config.toml),
with a private XDG_CACHE_HOME for siteconf's cache. Four forms of sbatch, in turn:

- ``wrap``: ``sbatch -o /dev/null -J w --wrap='echo hi'``
- ``script``: ``sbatch job.sh`` whose ``#SBATCH`` lines ask -J, -o, -t, --mem, -n
- ``resources``: ``sbatch -n 4 -c 2 --mem 4G -t 10 -p gpu --gres gpu:1 --wrap=hostname``
- ``array``: ``sbatch --array=1-10%2 job.sh``

Four measures, the forked ones first, from a parent that has run no sbatch (as the daemon):

- ``fork``: as the warm service runs a command (service/server.py). This process holds what the
  daemon holds before its first fork: the config read once from siteconf's cache (validated by
  another process first, so pydantic is not loaded here either), ``server.preload`` (the served
  modules, ``warm``'s tables, ``rehearse`` where the tree has it), the heap collected and frozen.
  Each submission runs in a child forked from it that forgets the site config
  (``siteconf.reset``, as the service's children start) and runs ``server._run`` (what the
  service's child runs). Reported: the child's ``process_time`` around ``_run``, its minor page
  faults there (copy-on-write copies of the parent's pages and new pages: most of the cost), and
  the child's whole CPU from ``os.wait4`` (the fork's aftermath and the exit included).
- ``service child``: the same, through ``Service.child`` whole (the request's descriptors put in
  place, the caller's environment, signals, TZ and sys.std* set up, ``_run``, the exit report):
  the child's CPU from ``os.wait4`` and the parent's CPU for the fork (the daemon's serial part).
  Not measured: the client, the daemon's accept and checks, the DRMAA submission's round trip.
- ``reused``: as the warm service runs a plain sbatch since issue 29's workers: one worker
  (``Service.worker``, started by ``Service.spare_wait`` as the daemon's spare) forked once from
  this parent and handed every request in turn (``server._send_request``), its D record read
  back. Reported: the worker's CPU per request (its whole life from ``os.wait4``, over the
  requests it ran: the snapshot it takes and what it puts back after each included), the parent's
  CPU per hand-over (the daemon's serial part, against the fork's above) and how many workers
  the n requests took. The last line adds daemon and child: forked against reused.
- ``daemon`` (``--daemon N``): the daemon's own CPU per request, whole: a real ``Service`` forked
  from this parent (its own start: the socket, the code's stamp and watch, the spare), N plain
  sbatch sent one after the other through its socket (``server._through``, what the Python client
  does; the C client's frames are the same), each run by its reused worker. Reported: the
  daemon's main thread's CPU over the N requests (``/proc/<pid>/task/<pid>/schedstat``, ns) per
  request, after 20 requests of warm-up: its accept, peer check, code check, request read and
  checks, the queue, the hand-over to the worker, the D record, the spares it forks. Not the
  worker's, nor the client's. The daemon leaves (and the bench stops) if the tree it runs from
  changes meanwhile: run it from a copy (``git archive``) where others edit the tree.
- ``loop``: every submission in this process (``shim.__main__.dispatch``, what the console
  script runs), one after the other: the first (cold for sbatch's own work; the imports were
  done by the preload) reported apart, then the steady state. This is NOT the warm path's cost:
  the service forks a child per command, and nothing a child caches outlives it.

``BENCH_SRC=<tree>/src`` measures another tree (a before), ``BENCH_KEEP=1`` keeps the temporary
directory (the children's profiles), ``BENCH_LOUD=1`` lets the forked children's output through.

``--profile N``: cProfile top-N of the steady-state loop by cumulative and by own time, and of
the fork mode's children (each child's profile merged), by both.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("BENCH_SRC") or str(REPO / "src"))  # (BENCH_SRC: another tree's, e.g. a before)

from shim import siteconf  # noqa: E402
from shim.__main__ import dispatch  # noqa: E402
from shim.gridengine import backends  # noqa: E402
from shim.gridengine.replay import ReplayBackend  # noqa: E402
from shim.proc import Result  # noqa: E402

FIRST_JOB = 7_000_000
SCRIPT = """#!/bin/bash
#SBATCH -J swarm-agent
#SBATCH -o /dev/null
#SBATCH -t 00:30:00
#SBATCH --mem=2G
#SBATCH -n 1
echo hello from $SLURM_JOB_ID
"""


class InstantGE(ReplayBackend):
    """qsub answers the next job id at once; qstat -j: every job exists; anything else: empty success."""

    def __init__(self):
        super().__init__()
        self.next = FIRST_JOB

    def run(self, tool, args, *, input=None, timeout=None):
        key = (tool, *args)
        if tool == "qsub":
            self.next += 1
            return Result(key, 0, f"{self.next}\n", "")  # (qsub -terse)
        return Result(key, 0, "", "")


def forms(work: str) -> list[tuple[str, list[str]]]:
    script = os.path.join(work, "job.sh")
    Path(script).write_text(SCRIPT)
    return [
        ("wrap", ["-o", "/dev/null", "-J", "w", "--wrap=echo hi"]),
        ("script", [script]),
        ("resources", ["-n", "4", "-c", "2", "--mem", "4G", "-t", "10", "-p", "gpu", "--gres", "gpu:1",
                       "--wrap=hostname"]),
        ("array", ["--array=1-10%2", script]),
    ]


def setup(top: str) -> str:
    """A private state directory, site config and cache; returns the work directory."""
    state = os.path.join(top, "state")
    os.makedirs(state, mode=0o755)
    for sub in ("users", "gpus"):  # as `slurm-shim cluster up` makes them: root's, sticky
        os.mkdir(os.path.join(state, sub))
        os.chmod(os.path.join(state, sub), 0o1777)
    text = (REPO / "fixtures" / "site" / "config.toml").read_text()
    text = text.replace('state_dir = "/tmp/slurm-shim-unit-state"', f'state_dir = "{state}"')
    assert state in text
    cfg = os.path.join(top, "config.toml")
    Path(cfg).write_text(text)
    os.environ["SLURM_SHIM_CONFIG"] = cfg
    os.environ["XDG_CACHE_HOME"] = os.path.join(top, "cache")
    for k in [k for k in os.environ if k.startswith(("SBATCH_", "SLURM_")) and k != "SLURM_SHIM_CONFIG"]:
        del os.environ[k]
    work = os.path.join(top, "work")
    os.makedirs(work)
    os.chdir(work)
    siteconf.reset()
    # the config validated and cached by another process (pydantic stays out of this one, as out
    # of the daemon, which finds the config cached by the command that started it)
    import subprocess

    subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); from shim import siteconf; "
                    "siteconf.get()", sys.path[0]], check=True)
    return work


class Quiet:
    """fd 1 and 2 to /dev/null while a submission runs (sbatch prints with print and os.write)."""

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved = os.dup(1), os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)

    def __exit__(self, *exc):
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        os.close(self.saved[0])
        os.close(self.saved[1])


def _ms(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"n": len(xs), "median_ms": round(statistics.median(xs) * 1000, 3),
            "mean_ms": round(statistics.fmean(xs) * 1000, 3), "p90_ms": round(xs[int(len(xs) * 0.9)] * 1000, 3)}


def loop(todo: list, n: int, profile: cProfile.Profile | None) -> dict:
    """Every submission in this process; the first (cold) apart."""
    per: dict[str, list[float]] = {name: [] for name, _ in todo}
    cold = None
    for i in range(n + 1):
        name, argv = todo[i % len(todo)]
        with Quiet():
            t0 = time.process_time()
            if profile is not None and i > 0:
                profile.enable()
            rc = dispatch("sbatch", list(argv))
            if profile is not None:
                profile.disable()
            dt = time.process_time() - t0
        if rc != 0:  # again, where its error shows
            raise SystemExit(f"sbatch {argv}: exit {rc} (again: exit {dispatch('sbatch', list(argv))})")
        if i == 0:
            cold = (name, dt)
        else:
            per[name].append(dt)
    every = [x for xs in per.values() for x in xs]
    return {"cold": {"form": cold[0], "ms": round(cold[1] * 1000, 3)}, "steady": _ms(every),
            "forms": {k: _ms(v) for k, v in per.items()}}


def _child(argv: list[str], wfd: int, prof_path: str | None) -> None:
    from shim.service import server

    try:
        import resource

        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.process_time()
        prof = cProfile.Profile() if prof_path else None
        with (Quiet() if not os.environ.get("BENCH_LOUD") else open(os.devnull)):
            if prof is not None:
                prof.enable()
            siteconf.reset()
            rc = server._run("sbatch", list(argv))
            if prof is not None:
                prof.disable()
        dt = time.process_time() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        if prof is not None:
            prof.dump_stats(prof_path)
        os.write(wfd, json.dumps({"rc": rc, "cpu": dt, "faults": r1.ru_minflt - r0.ru_minflt}).encode())
    finally:
        os._exit(0)


def forked(todo: list, n: int, profile_dir: str | None) -> dict:
    """Each submission in a child forked from a preloaded, frozen parent, as the warm service runs it."""
    per: dict[str, list[float]] = {name: [] for name, _ in todo}
    whole: list[float] = []
    faults: list[int] = []
    profiles = []
    for i in range(n):
        name, argv = todo[i % len(todo)]
        r, w = os.pipe()
        prof_path = os.path.join(profile_dir, f"{i}.prof") if profile_dir else None
        pid = os.fork()
        if pid == 0:
            os.close(r)
            _child(argv, w, prof_path)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            data = f.read()
        _, status, ru = os.wait4(pid, 0)
        got = json.loads(data or b'{"rc": -1, "cpu": 0}')
        if got["rc"] != 0 or status != 0:
            raise SystemExit(f"sbatch {argv} in a forked child: exit {got['rc']}, status {status}")
        per[name].append(got["cpu"])
        whole.append(ru.ru_utime + ru.ru_stime)
        faults.append(got["faults"])
        if prof_path:
            profiles.append(prof_path)
    every = [x for xs in per.values() for x in xs]
    return {"child_run": _ms(every), "child_whole": _ms(whole), "child_run_minor_faults": statistics.median(faults),
            "forms": {k: _ms(v) for k, v in per.items()},
            "profiles": profiles}


def _daemon(top: str):
    """What ``Service.child`` and ``Service.worker`` read of the daemon: its listening socket
    (detached in the child), the locale it coerced (none here), its directory (the log a worker's
    descriptors 1 and 2 go back to between requests)."""
    import socket

    from shim.service import server

    class _Daemon(server.Service):
        def __init__(self):
            self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.coerced = None
            self.d = top

    return _Daemon()


def _request(argv: list[str], env: list[bytes], work: str):
    """A run request as the daemon hands it on: the fields, /dev/null as 0-2, the directory."""
    from shim.service import server

    r = server.Request()
    r.cmd, r.argv, r.env = "sbatch", [b"sbatch", *(os.fsencode(a) for a in argv)], env
    null = os.open(os.devnull, os.O_RDWR)
    r.fds, r.targets = [os.dup(null), os.dup(null), os.dup(null)], [0, 1, 2]
    os.close(null)
    r.cwd_fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
    r.umask, r.ignored, r.blocked = 0o022, 0, 0
    return r


def served(todo: list, n: int, work: str, top: str) -> dict:
    """Each submission as the service's child runs it, whole: ``Service.child`` (the request's
    descriptors put in place, every other closed, signals, umask, the caller's environment, TZ,
    fresh sys.std*, then ``_run`` and the exit report), forked from this preloaded, frozen parent.
    Reported: the child's CPU from ``os.wait4`` and the parent's CPU of the fork."""
    import socket

    from shim.service import server

    daemon = _daemon(top)
    env = [k.encode() + b"=" + v.encode() for k, v in os.environ.items()]
    per: dict[str, list[float]] = {name: [] for name, _ in todo}
    forks: list[float] = []
    for i in range(n):
        name, argv = todo[i % len(todo)]
        r = _request(argv, env, work)
        mine, theirs = socket.socketpair()
        t0 = time.process_time()
        pid = os.fork()
        if pid == 0:
            try:
                server.Service.child(daemon, r, theirs.fileno())
            finally:
                os._exit(1)
        forks.append(time.process_time() - t0)
        theirs.close()
        for fd in (*r.fds, r.cwd_fd):
            os.close(fd)
        report = mine.recv(8)
        mine.close()
        _, status, ru = os.wait4(pid, 0)
        if status != 0 or len(report) != 8 or report[4:] != b"\0\0\0\0":
            raise SystemExit(f"sbatch {argv} as the service's child: status {status}, report {report!r}")
        per[name].append(ru.ru_utime + ru.ru_stime)
    every = [x for xs in per.values() for x in xs]
    return {"child_whole": _ms(every), "fork_in_parent": _ms(forks), "forms": {k: _ms(v) for k, v in per.items()}}


def reused(todo: list, n: int, work: str, top: str) -> dict:
    """Each submission handed to a reused worker (``Service.worker``: the spare that took a plain
    sbatch, as the service runs it since issue 29's worker), forked once from this preloaded,
    frozen parent and given every request in turn, as the daemon gives it (``_send_request``),
    its D record read back. Reported: the worker's CPU per request (``os.wait4`` of its whole
    life, its start and its ``Pristine`` snapshot included, over the requests it ran), the parent's
    CPU per request (the hand-over and the D record: the daemon's serial part), and how many
    workers ran the n requests (a request that left what cannot be put back ends its worker)."""
    import socket
    import struct

    from shim.service import server

    daemon = _daemon(top)
    env = [k.encode() + b"=" + v.encode() for k, v in os.environ.items()]
    hands: list[float] = []
    cpu = 0.0
    workers = 0
    sock = pid = None
    for i in range(n):
        name, argv = todo[i % len(todo)]
        if sock is None:
            sock, theirs = socket.socketpair()
            pid = os.fork()
            if pid == 0:
                try:
                    sock.close()
                    daemon.spare_wait(theirs)
                finally:
                    os._exit(1)
            theirs.close()
            workers += 1
        r = _request(argv, env, work)
        mine, theirs = socket.socketpair()
        t0 = time.process_time()
        server._send_request(sock, r, theirs, True)
        theirs.close()
        for fd in (*r.fds, r.cwd_fd):
            os.close(fd)
        done = sock.recv(8)
        hands.append(time.process_time() - t0)
        report = mine.recv(8)
        mine.close()
        if len(report) != 8 or report[4:] != b"\0\0\0\0" or len(done) != 8:
            raise SystemExit(f"sbatch {argv} in a reused worker: report {report!r}, D {done!r}")
        if not struct.unpack("=Ii", done)[1]:  # it leaves: the next request gets a new worker
            sock.close()
            _, _, ru = os.wait4(pid, 0)
            cpu += ru.ru_utime + ru.ru_stime
            sock = None
    if sock is not None:
        sock.close()
        _, _, ru = os.wait4(pid, 0)
        cpu += ru.ru_utime + ru.ru_stime
    return {"worker_per_request_ms": round(cpu / n * 1000, 3), "hand_in_parent": _ms(hands), "workers": workers}


def _thread_cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def daemon(todo: list, n: int, top: str) -> dict:
    """The daemon's own CPU per request: a real Service forked from this parent, n plain sbatch
    through its socket one after the other (``server._through``); its main thread's CPU from
    schedstat over the n, after a warm-up."""
    import signal

    from shim.service import server

    d = os.path.join(top, "svc")
    os.mkdir(d, 0o700)
    os.environ["SLURM_SHIM_AGENT_DIR"] = d
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(os.path.join(d, "service.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            sys.stdout = sys.stderr = open(2, "w", closefd=False)
            os.chdir("/")
            server.Service(d, 600.0).serve()
        finally:
            os._exit(0)
    try:
        deadline = time.monotonic() + 60
        while server.info(d) is None:
            if time.monotonic() > deadline or os.waitpid(pid, os.WNOHANG)[0] == pid:
                raise SystemExit(f"the daemon did not answer: {Path(d, 'service.log').read_text()}")
            time.sleep(0.05)

        def send(i: int) -> None:
            name, argv = todo[i % len(todo)]
            with Quiet():
                rc = server._through("sbatch", ["sbatch", *argv])
            if rc != 0:
                raise SystemExit(f"sbatch {argv} through the daemon: {'not served' if rc is None else f'exit {rc}'}"
                                 f"\n{Path(d, 'service.log').read_text()}")

        for i in range(20):
            send(i)
        t0, c0 = time.monotonic(), _thread_cpu_ns(pid)
        for i in range(n):
            send(i)
        c1, t1 = _thread_cpu_ns(pid), time.monotonic()
        log = Path(d, "service.log").read_text()
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        del os.environ["SLURM_SHIM_AGENT_DIR"]
    return {"n": n, "daemon_per_request_ms": round((c1 - c0) / n / 1e6, 4),
            "wall_per_request_ms": round((t1 - t0) / n * 1000, 3),
            "code_watched": hasattr(server.Service, "current_stamp") and "the code is not watched" not in log}


def top(stats: pstats.Stats, key: str, n: int) -> str:
    buf = io.StringIO()
    stats.stream = buf
    stats.sort_stats(key).print_stats(n)
    lines = buf.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return "\n".join(lines[start:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=500, help="submissions a mode (default 500)")
    ap.add_argument("--forked", type=int, default=None, help="submissions of each forked measure (default: -n)")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print cProfile's top N")
    ap.add_argument("--daemon", type=int, default=0, metavar="N",
                    help="also N requests through a real daemon: its own CPU per request (default: not measured)")
    ap.add_argument("--daemon-only", action="store_true", help="only the daemon measure (--daemon N)")
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    a = ap.parse_args()
    out: dict = {"python": sys.version.split()[0], "n": a.n}
    top_dir = tempfile.mkdtemp(prefix="sbatch-cpu-", dir=a.dir)  # (no TemporaryDirectory: its atexit
    try:  # hook would run in the forked children, whose _run runs the exit functions)
        work = setup(top_dir)
        todo = forms(work)
        ge = InstantGE()
        backends.use(ge)
        from shim.service import server

        siteconf.get()  # what the daemon holds before its first fork (server.serve, Service._begin):
        siteconf.reset()  # the config read once, every served module preloaded, the heap frozen;
        server.preload()  # no sbatch has run in it (the loop runs after the fork mode)
        gc.collect()
        gc.freeze()
        if a.daemon_only:
            out["daemon"] = daemon(todo, a.daemon or a.n, top_dir)
            _print_daemon(out["daemon"])
        else:
            _all(a, out, todo, work, top_dir)
    finally:
        if os.environ.get("BENCH_KEEP"):
            print(f"kept {top_dir}", file=sys.stderr)
        else:
            shutil.rmtree(top_dir, ignore_errors=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


def _all(a, out: dict, todo: list, work: str, top_dir: str) -> None:
    """Every measure but the daemon's alone (that one too with --daemon N)."""
    pdir = os.path.join(top_dir, "prof") if a.profile else None
    if pdir:
        os.makedirs(pdir)
    out["fork"] = forked(todo, a.forked or a.n, pdir)
    profiles = out["fork"].pop("profiles")
    out["service_child"] = served(todo, a.forked or a.n, work, top_dir)
    out["reused"] = reused(todo, a.forked or a.n, work, top_dir)
    if a.daemon:
        out["daemon"] = daemon(todo, a.daemon, top_dir)
    gc.unfreeze()
    prof = cProfile.Profile() if a.profile else None
    out["loop"] = loop(todo, a.n, prof)
    _print(out)
    if "daemon" in out:
        _print_daemon(out["daemon"])
    if a.profile:
        for label, stats in (("loop (steady state)", pstats.Stats(prof)),
                             ("fork (the children, merged)", pstats.Stats(*profiles) if profiles else None)):
            if stats is None:
                continue
            stats.strip_dirs()
            for key in ("cumulative", "tottime"):
                print(f"\n## {label}: top {a.profile} by {key}\n")
                print(top(stats, key, a.profile))


def _print_daemon(dm: dict) -> None:
    print(f"daemon (a real Service, {dm['n']} plain sbatch one after the other through its socket): "
          f"{dm['daemon_per_request_ms']} ms of its main thread's CPU a request; {dm['wall_per_request_ms']} ms "
          f"wall a request; code {'watched' if dm['code_watched'] else 'stamped every request'}")


def _print(out: dict) -> None:
    lp, fk = out["loop"], out["fork"]
    print(f"sbatch CPU per submission (python {out['python']}; ms of process_time)")
    print(f"loop: cold (first, {lp['cold']['form']}) {lp['cold']['ms']} ms; steady median "
          f"{lp['steady']['median_ms']} ms, mean {lp['steady']['mean_ms']}, p90 {lp['steady']['p90_ms']} "
          f"(n={lp['steady']['n']})")
    for k, v in lp["forms"].items():
        print(f"  {k:10s} median {v['median_ms']:7.3f} ms  mean {v['mean_ms']:7.3f}  p90 {v['p90_ms']:7.3f}")
    print(f"fork (as the warm service): in the child's _run median {fk['child_run']['median_ms']} ms, mean "
          f"{fk['child_run']['mean_ms']}; the child whole (wait4) median {fk['child_whole']['median_ms']} ms, "
          f"mean {fk['child_whole']['mean_ms']} (n={fk['child_run']['n']})")
    print(f"  in _run: {fk['child_run_minor_faults']:g} minor page faults (median; copy-on-write and new pages)")
    for k, v in fk["forms"].items():
        print(f"  {k:10s} median {v['median_ms']:7.3f} ms  mean {v['mean_ms']:7.3f}  p90 {v['p90_ms']:7.3f}")
    sc = out["service_child"]
    print(f"service child (Service.child, whole: wait4): median {sc['child_whole']['median_ms']} ms, mean "
          f"{sc['child_whole']['mean_ms']}; the parent's fork median {sc['fork_in_parent']['median_ms']} ms, "
          f"mean {sc['fork_in_parent']['mean_ms']}")
    ru = out["reused"]
    print(f"reused worker (Service.worker): {ru['worker_per_request_ms']} ms a request in the worker (its whole "
          f"life / requests, {ru['workers']} worker(s)); the parent's hand-over and D median "
          f"{ru['hand_in_parent']['median_ms']} ms, mean {ru['hand_in_parent']['mean_ms']}")
    print(f"per served sbatch, daemon + child: forked {sc['fork_in_parent']['mean_ms'] + sc['child_whole']['mean_ms']:.3f}"
          f" ms, reused {ru['hand_in_parent']['mean_ms'] + ru['worker_per_request_ms']:.3f} ms (means)")


if __name__ == "__main__":
    sys.exit(main())
