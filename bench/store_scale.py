#!/usr/bin/env python3
"""The shim's store at scale (issue 29): each command's cost against the number of records kept.

    sudo /opt/slurm-shim/bin/python bench/store_scale.py                 # 0, 10k, 100k records
    sudo /opt/slurm-shim/bin/python bench/store_scale.py --sizes 0,1000000 --users 20x50000
    sudo /opt/slurm-shim/bin/python bench/store_scale.py --sizes 0,1000000@1d,1000000 --one-at-a-time

For each store (``--sizes``: one user holding N recorded jobs; ``--users KxN``: K users holding N
each) a private state directory is made under ``--dir`` (default /dev/shm: a tmpfs, so the disk is
not what is measured) with a private copy of the unit-test site config pointing at it, and seeded
THROUGH the shim's writers (``state.record_submit``, ``state.record_event`` "start" and "end",
each written with the writer's clock set to its own time, so it is linked into the time bucket
of that time, and its mtime set to it, which is what the readers check), in a child process
that has become the
record owner (setresuid: the files are the user's own, as on a real cluster). Jobs end spread
evenly over 89 days up to a minute ago. Two target jobs are seeded in every store: T1 ended 30 s
ago, T2 ended 30 days ago (the "0" store holds only them). Before seeding, the owner runs
``state.prune`` once on the empty store, so that its hourly stamp is fresh while the calls are
measured (the ``prune (hourly)`` row ages it itself).

Rate without history: a ``--sizes`` (or ``--users``) entry ``N@D`` (``D`` in days ``1d`` or hours
``6h``) is the N-job store's last D only: the same jobs at the same rate (N over 89 days), with the
same ids and the same end times relative to its seeding clock as the N-job store's jobs that ended
in its last D, and none before (T1 and T2 as in every store). It answers "does a call pay for the
jobs that came before, or for the rate jobs end?": a window of recent buckets is the same in both.
Where a run holds both ``N`` and ``N@D``, the N-job store is seeded in two parts, its jobs older
than D first, then its last D with the clock of that moment (so its recent jobs are as old when
measured as the N@D store's, not older by the minutes its history took to seed: a gap of those
minutes at the D boundary, no job ends there), and its cells give a second ratio, against the
N@D store (``1.1× of N@D``). A run without an ``@`` entry seeds as it always did.

Every store is seeded first (``--one-at-a-time``: each in turn, measured and removed, for stores
too big to sit side by side in ``--dir``: a job is three files, three inodes, and a 24 GB /dev/shm
has ~3.1 million, so 1,000,000 jobs fit alone, not beside 200,000 more); then each call is measured on every store in turn, so
the columns of a row share the same minute's load. For each, a fresh child that has become the
bench user (``shimbench``, the first of the K users) runs the call IN-PROCESS
(``shim.__main__.dispatch``) against a recorded Grid Engine (``ReplayBackend``: an empty queue, "no such job" for ``qstat -j``, an accounting file holding no record), so Grid
Engine's cost is the same at every size and only the store varies. Each call: one untimed
warm-up, then the median of ``--runs``; then one more run with os.listdir/os.scandir/os.open/
os.lstat/os.stat counted (names listed, files opened, files stat'ed): why a call grows.

The sbatch and scancel rows are their store side only (no submission): sbatch's ``state.forget``,
``state.record_submit`` and ``state.prune`` with its hourly stamp fresh; scancel's
``state.record_event`` "cancel"; ``sbatch --wait``'s is its wait (``submit.wait_for``) for a
short job that has ended, with its record's ``sub`` as sbatch has it (T1: its events looked up by
name, records.Reader._direct). ``prune
(hourly)`` is sbatch's prune once its stamp is an hour old: it runs last (with nothing past its
bounds, it counts the buckets) and is timed once.

The warm path (columns ", warm"; ``--no-warm`` leaves them out): the same command calls through the
compiled client (``/opt/slurm-shim/bin/<cmd>``, or ``$SLURM_SHIM_CLIENT_BIN``) and the bench user's
warm service (one per store, in its work directory: it runs the call in a forked child with the
caller's environment), timed whole from the client's fork to its exit, median of ``--runs``
after one warm-up. Its Grid Engine is ``SLURM_SHIM_REPLAY``: ConstantGE's answer to every call
the in-process run of the same call made (``answers.json``), so both paths see the same Grid
Engine. The service runs the INSTALLED package (the in-process path runs this tree): compare the
two only where they are the same code. The line under the table says how many of the timed warm
calls the service ran (a refused call runs in-process and is not the warm path). The store-side
rows and prune are functions, not commands: in-process only; ``sbatch -H --wrap`` is the whole
command (qsub answered ``NEW_JOB``) on both paths.

Needs root (it makes the users' own files); touches nothing outside its temporary directory, which
is removed at the end (``--keep`` keeps it). Prints the table (call x store: ms, ratio to the
first store, rows printed) and, with ``--json``, the raw numbers.
"""

from __future__ import annotations

import argparse
import builtins
import json
import os
import pwd
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from shim import siteconf  # noqa: E402
from shim.__main__ import dispatch  # noqa: E402
from shim.gridengine import backends  # noqa: E402
from shim.gridengine.replay import ReplayBackend  # noqa: E402
from shim.proc import Result  # noqa: E402
from shim.store import state  # noqa: E402

BENCH_USER = "shimbench"
DAY = 86400
SPAN = 89 * DAY          # background jobs end within this (the 90-day prune keeps them all)
T1, T2 = 5_000_001, 5_000_000  # today's target job (ended 30 s ago), last month's (30 days ago)
BASE = T1 + 1            # background job ids: BASE + i, in the order they ended (T1's id shard is full)
NEW_JOB = 9_100_000      # the id qsub gives the whole-sbatch row's job (the same in every run)
CLIENT_BIN = Path(os.environ.get("SLURM_SHIM_CLIENT_BIN", "/opt/slurm-shim/bin"))  # the compiled clients
FAKE_UIDS = 60001        # the other users of --users KxN (no passwd entry needed: a directory is a uid)
EMPTY_QUEUE = (REPO / "fixtures" / "gridengine" / "sge-8.1.9" / "live-qstat-u-all-r-xml.empty.xml").read_text()
ACCOUNTING_HEADER = "# Version: 8.1.9\n# \n# DO NOT MODIFY THIS FILE MANUALLY!\n# \n"


def parse_size(text: str) -> tuple[int, int | None, str]:
    """``N`` or ``N@D`` (D: ``<days>d`` or ``<hours>h``): (N, D in seconds or None, the store's label)."""
    n, _, keep = text.strip().partition("@")
    if not keep:
        return int(n), None, f"{int(n):,}"
    unit = {"d": DAY, "h": 3600}.get(keep[-1:].lower())
    if unit is None or not keep[:-1].isdigit() or int(keep[:-1]) <= 0:
        raise SystemExit(f"--sizes: {text!r}: N@D wants D as <days>d or <hours>h")
    return int(n), int(keep[:-1]) * unit, f"{int(n):,}@{keep.lower()}"


def ages(n: int) -> list[float]:
    """How long before the seeding clock's minute each of ``n`` background jobs ended (job i: BASE + i)."""
    return [SPAN * (n - 1 - i) / max(n - 1, 1) for i in range(n)]


# ---------------------------------------------------------------------------------------------
# Grid Engine, recorded: the same answers at every size


class ConstantGE(ReplayBackend):
    """An empty queue for every listing, "no such job" for ``qstat -j``, empty success otherwise."""

    def run(self, tool, args, *, input=None, timeout=None):
        key = (tool, *args)
        self.calls.append((key, input))
        a = list(args)
        if tool == "qstat" and a[:1] == ["-j"]:
            ids = a[1] if len(a) > 1 else ""
            return Result(key, 1, "", "Following jobs do not exist: \n" + ids + "\n")
        if tool == "qstat":
            return Result(key, 0, EMPTY_QUEUE, "")
        if tool == "qsub":
            return Result(key, 0, f"{NEW_JOB}\n", "")
        return Result(key, 0, "", "")


def replay_dir(path: str, keys: set[tuple[str, ...]]) -> None:
    """The same answers for the warm path: ``SLURM_SHIM_REPLAY`` (answers.json) holding
    ConstantGE's answer to every Grid Engine call the in-process calls made, and one for each tool
    alone (a call the in-process run did not make)."""
    ge = ConstantGE()
    items = []
    for key in sorted(keys) + [(t,) for t in ("qstat", "qsub", "qdel", "qacct", "qconf", "qalter", "qrstat")]:
        r = ge.run(key[0], key[1:])
        items.append({"argv": list(key), "rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr})
    os.makedirs(path, mode=0o755, exist_ok=True)
    Path(path, "answers.json").write_text(json.dumps(items))
    os.chmod(os.path.join(path, "answers.json"), 0o644)


# ---------------------------------------------------------------------------------------------
# seeding, through the shim's writers


def _become(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


_clock = time.time


def _at(t: float) -> None:
    """The seeding writer's clock: each record is written "at" its own time (its time bucket)."""
    time.time = lambda: t


def _job(state_dir: str, user: str, uid: int, job: int, end: float) -> None:
    sub = end - 120
    rec = {"sub": sub, "submit_time": sub, "name": f"swarm{job % 97}", "partition": "debug", "user": user,
           "uid": uid, "workdir": "/srv/swarm", "ntasks": 1, "cpus_per_task": 1, "nodes": 1, "time": -1}
    _at(sub)
    state.record_submit(state_dir, job, rec)
    _at(end - 60)
    state.record_event(state_dir, job, None, "start", {"sub": sub, "node": "vm", "owner": user, "uid": uid})
    _at(end)
    state.record_event(state_dir, job, None, "end", {"sub": sub, "start": end - 60, "exit": 0, "signal": 0,
                                                     "state": "COMPLETED", "node": "vm", "owner": user, "uid": uid})
    time.time = _clock
    for kind, name, t in (("jobs", f"{job}.json", sub), ("events", f"{job}.x.start.json", end - 60),
                          ("events", f"{job}.x.end.json", end)):
        os.utime(state.record_file(state_dir, kind, name), (t, t))


def seed(state_dir: str, user: str, uid: int, gid: int, n: int, now: float, targets: bool,
         stride: int = 1, offset: int = 0, part: tuple[float, float] = (0, float("inf"))) -> None:
    """In a child that has become ``uid``: ``n`` jobs ended over SPAN, and (``targets``) T1 and T2.
    Job ids are Grid Engine's, one sequence for the cluster: of K users submitting side by side,
    user ``offset`` has every ``stride``-th id (no two users ever hold the same id). ``part``: only
    the jobs whose age (``ages``) is in ``[lo, hi)`` (a store's history, or its last D)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _become(uid, gid)
            assert state.own_dir(state_dir, "records") is not None, "no directory of the user's own"
            # sbatch's hourly prune, run now on the empty store: its stamp is fresh for an hour, so
            # the store measured is the one seeded (the "prune (hourly)" row ages the stamp itself)
            state.prune(state_dir, 90 * DAY)
            for i, age in enumerate(ages(n)):
                if part[0] <= age < part[1]:
                    _job(state_dir, user, uid, BASE + i * stride + offset, now - 60 - age)
            if targets:  # (their times from the clock now: seeding a million jobs takes minutes, and
                t = _clock()  # a T1 that ended before them would be past squeue's 300 s of ended jobs)
                _job(state_dir, user, uid, T2, t - 30 * DAY)
                _job(state_dir, user, uid, T1, t - 30)
            code = 0
        except BaseException:  # (say why: a tmpfs out of inodes is the usual cause, see --one-at-a-time)
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(code)
    _pid, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit(f"seeding uid {uid} failed ({status})")


# ---------------------------------------------------------------------------------------------
# counting what a call lists, opens and stats


class Counts:
    def __init__(self) -> None:
        self.listed = self.opened = self.stated = self.dirs = 0
        self._saved: dict = {}

    def __enter__(self) -> "Counts":
        real = {"listdir": os.listdir, "scandir": os.scandir, "open": os.open, "lstat": os.lstat, "stat": os.stat}
        self._saved = dict(real, bopen=builtins.open)
        c = self

        def listdir(p="."):
            got = real["listdir"](p)
            c.dirs += 1
            c.listed += len(got)
            return got

        class _Scan:
            def __init__(self, it):
                self.it = it

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.it.close()

            def __iter__(self):
                return self

            def __next__(self):
                e = next(self.it)
                c.listed += 1
                return e

            def close(self):
                self.it.close()

        def scandir(p="."):
            c.dirs += 1
            return _Scan(real["scandir"](p))

        def open_(*a, **k):
            c.opened += 1
            return real["open"](*a, **k)

        def bopen(*a, **k):
            c.opened += 1
            return self._saved["bopen"](*a, **k)

        def lstat(*a, **k):
            c.stated += 1
            return real["lstat"](*a, **k)

        def stat_(*a, **k):
            c.stated += 1
            return real["stat"](*a, **k)

        os.listdir, os.scandir, os.open, os.lstat, os.stat = listdir, scandir, open_, lstat, stat_
        builtins.open = bopen
        return self

    def __exit__(self, *exc) -> None:
        s = self._saved
        os.listdir, os.scandir, os.open, os.lstat, os.stat = s["listdir"], s["scandir"], s["open"], s["lstat"], s["stat"]
        builtins.open = s["bopen"]


# ---------------------------------------------------------------------------------------------
# the calls


def calls(now: float) -> list[tuple[str, object]]:
    month = time.strftime("%Y-%m-%d", time.localtime(now - 30 * DAY))
    out: list[tuple[str, object]] = [
        ("sbatch (store side)", "sbatch"),
        ("sbatch -H --wrap (whole; qsub answered)", ("sbatch", ["-H", "-o", "/dev/null", "-J", "new", "--wrap=true"])),
        ("squeue", ("squeue", [])),
        ("squeue -t all", ("squeue", ["-t", "all"])),
        ("squeue -j T1", ("squeue", ["-j", str(T1)])),
        ("scontrol show job T1", ("scontrol", ["show", "job", str(T1)])),
        ("scancel T1", ("scancel", [str(T1)])),
        ("scancel (store side)", "cancel"),
        ("sacct -j T1 (today)", ("sacct", ["-j", str(T1)])),
        ("sacct -j T2 (last month)", ("sacct", ["-j", str(T2)])),
        ("sacct (default window)", ("sacct", [])),
        ("sacct -S now-1hours", ("sacct", ["-S", "now-1hours"])),
        (f"sacct -S {month} (a month)", ("sacct", ["-S", month])),
        ("sbatch --wait (store side: a short job's end)", "wait"),
    ]
    return out


class _Out:
    """fd 1 and 2 into files while a call runs (the shim prints with print and os.write alike)."""

    def __init__(self, tmp: str):
        self.out = os.path.join(tmp, "out")
        self.err = os.path.join(tmp, "err")

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved = os.dup(1), os.dup(2)
        fo = os.open(self.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        fe = os.open(self.err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fo, 1)
        os.dup2(fe, 2)
        os.close(fo)
        os.close(fe)
        return self

    def __exit__(self, *exc):
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        os.close(self.saved[0])
        os.close(self.saved[1])

    def rows(self) -> int:
        with open(self.out, "rb") as f:
            return f.read().count(b"\n")

    def first_error(self) -> str:
        with open(self.err, "rb") as f:
            return f.read().decode(errors="replace").strip().splitlines()[0:1][0] if os.path.getsize(self.err) else ""


_T1_SUB: dict[str, float] = {}


def _store_side(kind: str, state_dir: str, cfg, seq: list[int], user: str, uid: int) -> int:
    seq[0] += 1
    job = 9_000_000 + seq[0]
    now = time.time()
    if kind == "sbatch":
        state.forget(cfg, job, before=now - 1)
        state.record_submit(cfg, job, {"sub": now, "submit_time": now, "name": "new", "partition": "debug",
                                       "user": user, "uid": uid, "workdir": "/srv/swarm", "ntasks": 1})
        state.prune(cfg, 90 * DAY)  # the hourly stamp is fresh: what every sbatch pays
    elif kind == "wait":
        from types import SimpleNamespace

        from shim.operations import submit

        sub = _T1_SUB.get(state_dir)  # (sbatch --wait holds its record's sub: read once, in the warm-up)
        if sub is None:
            from shim.store.records import Reader

            sub = _T1_SUB[state_dir] = Reader(cfg).submit(T1, uid).sub
        return submit.wait_for(T1, SimpleNamespace(array=None, sub=sub), cfg)
    else:
        state.record_event(cfg, T1, None, "cancel", {"uid": uid, "user": user, "owner": user, "sub": now - 150})
    return 0


def measure(st: dict, runs: int, user: str, uid: int, gid: int, todo: list, prune: bool, warm: bool) -> dict:
    """In a child that has become the bench user, with store ``st``'s environment: each call of
    ``todo`` ({call: {ms, rows, rc, err, listed, opened, stated, and with ``warm`` warm_ms,
    warm_rows, warm_rc, warm_err, served}}), then (``prune``) the prune rows."""
    use_store(st)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 1
        try:
            _become(uid, gid)
            res = _measure_here(st["state_dir"], st["work"], runs, user, uid, todo, prune, warm)
            with os.fdopen(w, "w") as f:
                json.dump(res, f)
            code = 0
        except BaseException as e:  # reported by the parent
            try:
                os.write(w, json.dumps({"error": repr(e)}).encode())
            except OSError:
                pass
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        got = json.loads(f.read() or "{}")
    os.waitpid(pid, 0)
    if "error" in got:
        raise SystemExit(f"measuring failed: {got['error']}")
    return got


class Warm:
    """The warm path: the compiled client (CLIENT_BIN/<cmd>) hands the call to the bench user's warm
    service (one per store: its own directory), which runs it in a forked child with the caller's
    environment; Grid Engine is ``SLURM_SHIM_REPLAY``: ConstantGE's answers written out (replay_dir).
    Timed whole, from the client's fork to its exit, as a user's call is."""

    def __init__(self, work: str, user: str):
        from shim.service import server

        self.server = server
        self.work = work
        self.svc = os.path.join(work, "service")
        if not os.path.isdir(self.svc):
            os.mkdir(self.svc, 0o700)
        self.replay = os.path.join(work, "replay")
        self.env = {"PATH": f"{CLIENT_BIN}:/usr/bin:/bin", "HOME": work, "USER": user, "LOGNAME": user,
                    "LANG": os.environ.get("LANG", "C.UTF-8"), "SLURM_SHIM_REPLAY": self.replay,
                    "SLURM_SHIM_AGENT_DIR": self.svc, "SLURM_SHIM_SERVICE_IDLE": "300",
                    **{k: os.environ[k] for k in ("SLURM_SHIM_CONFIG", "SLURM_SHIM_ACCOUNTING", "XDG_CACHE_HOME")}}
        self.out = os.path.join(work, "warm.out")
        self.err = os.path.join(work, "warm.err")

    def call(self, cmd: str, argv: list[str]) -> tuple[float, int]:
        import subprocess

        with open(self.out, "wb") as fo, open(self.err, "wb") as fe:
            t0 = time.perf_counter()
            rc = subprocess.call([str(CLIENT_BIN / cmd), *argv], env=self.env, cwd=self.work, stdout=fo, stderr=fe)
            return time.perf_counter() - t0, rc

    def start(self) -> None:
        """The first call starts the service (and runs in-process); wait until it answers."""
        if self.server.info(self.svc) is not None:
            return  # (started by an earlier call's child: one service per store for the whole run)
        replay_dir(self.replay, set())
        self.call("squeue", ["--version"])
        deadline = time.monotonic() + 60
        while self.server.info(self.svc) is None and time.monotonic() < deadline:
            time.sleep(0.1)

    def served(self) -> tuple[int | None, int]:
        got = self.server.info(self.svc)
        return (got[0], got[1]) if got else (None, 0)

    def rows(self) -> int:
        with open(self.out, "rb") as f:
            return f.read().count(b"\n")

    def first_error(self) -> str:
        with open(self.err, "rb") as f:
            lines = f.read().decode(errors="replace").strip().splitlines()
        return lines[0] if lines else ""


def _measure_here(state_dir: str, work: str, runs: int, user: str, uid: int, todo: list, prune: bool,
                  warm: bool) -> dict:
    siteconf.reset()
    cfg = siteconf.get()
    assert cfg.cluster.state_dir == state_dir
    os.chdir(work)
    out = _Out(work)
    seq = [0]
    res: dict = {}
    seen: set[tuple[str, ...]] = set()  # every Grid Engine call the in-process calls made
    w = Warm(work, user) if warm and todo else None
    if w:
        w.start()
    for label, what in todo:
        res[label] = _one(label, what, state_dir, cfg, seq, user, uid, runs, out, seen)
        if w and not isinstance(what, str):
            res[label].update(_one_warm(w, what, runs, seen))
    if prune:
        d = state.user_dir(cfg, None)
        stamp = os.path.join(d, ".pruned")
        for label in ("prune (hourly, its first count)", "prune (hourly)"):
            old = time.time() - 2 * state.PRUNE_EVERY
            if os.path.exists(stamp):
                os.utime(stamp, (old, old))
            with Counts() as c:
                t0 = time.perf_counter()
                gone = state.prune(cfg, 90 * DAY)
                ms = (time.perf_counter() - t0) * 1000
            res[label] = {"ms": round(ms, 2), "rows": gone, "rc": 0, "err": "", "listed": c.listed,
                          "dirs": c.dirs, "opened": c.opened, "stated": c.stated}
    return res


def _one(label, what, state_dir, cfg, seq, user, uid, runs, out, seen) -> dict:
    """One call in-process: a warm-up, the median of ``runs``, one more counted."""

    def once() -> int:
        ge = ConstantGE()
        backends.use(ge)
        try:
            if isinstance(what, str):
                return _store_side(what, state_dir, cfg, seq, user, uid)
            cmd, argv = what
            return dispatch(cmd, list(argv))
        finally:
            seen.update(k for k, _ in ge.calls)

    with out:
        rc = once()  # warm-up: imports, caches of a process
    times = []
    for _ in range(runs):
        with out:
            t0 = time.perf_counter()
            rc = once()
            times.append(time.perf_counter() - t0)
    with out:
        with Counts() as c:
            once()
    return {"ms": round(statistics.median(times) * 1000, 2), "rows": out.rows(), "rc": rc,
            "err": out.first_error(), "listed": c.listed, "dirs": c.dirs, "opened": c.opened, "stated": c.stated}


def _one_warm(w: Warm, what, runs: int, seen: set) -> dict:
    """The same call through the client and the warm service: a warm-up, the median of ``runs``;
    ``served``: how many of the timed calls the service ran (the rest ran in-process)."""
    replay_dir(w.replay, seen)
    cmd, argv = what
    w.call(cmd, list(argv))
    pid0, n0 = w.served()
    times = []
    for _ in range(runs):
        dt, rc = w.call(cmd, list(argv))
        times.append(dt)
    pid1, n1 = w.served()
    return {"warm_ms": round(statistics.median(times) * 1000, 2), "warm_rows": w.rows(), "warm_rc": rc,
            "warm_err": w.first_error(), "warm_runs": runs, "served": (n1 - n0) if pid0 == pid1 and pid0 else 0}


# ---------------------------------------------------------------------------------------------


def _dir_size(path: str) -> tuple[int, int]:
    files = size = 0
    for root, _dirs, names in os.walk(path):
        files += len(names)
        for n in names:
            try:
                size += os.lstat(os.path.join(root, n)).st_blocks * 512
            except OSError:
                pass
    return files, size


def make_store(top: str, i: int, pw) -> dict:
    """A private state directory, site config, accounting file and work directory."""
    base = os.path.join(top, f"s{i}")
    os.mkdir(base, 0o755)
    state_dir = os.path.join(base, "state")
    assert state.make_layout(state_dir) == []
    conf = os.path.join(base, "config.toml")
    Path(conf).write_text((REPO / "fixtures" / "site" / "config.toml").read_text()
                          .replace("/tmp/slurm-shim-unit-state", state_dir))
    os.chmod(conf, 0o644)
    acct = os.path.join(base, "accounting")
    Path(acct).write_text(ACCOUNTING_HEADER)
    os.chmod(acct, 0o644)
    work = os.path.join(base, "work")
    os.mkdir(work, 0o700)
    os.chown(work, pw.pw_uid, pw.pw_gid)
    return {"base": base, "state_dir": state_dir, "conf": conf, "acct": acct, "work": work}


def use_store(st: dict) -> None:
    """This process's environment for store ``st`` (what its measuring child inherits)."""
    os.environ.update({"SLURM_SHIM_CONFIG": st["conf"], "XDG_CACHE_HOME": os.path.join(st["work"], "cache"),
                       "SLURM_SHIM_ACCOUNTING": st["acct"], "SLURM_SHIM_SERVICE": "off", "HOME": st["work"]})
    for var in [v for v in os.environ if v.startswith(("SQUEUE_", "SACCT_", "SLURM_TIME_FORMAT"))]:
        del os.environ[var]


def stop_service(st: dict) -> None:
    """Stop the store's warm service (its lock names its pid) and wait for it to go."""
    from shim.service import server

    pid = server.pid_of(os.path.join(st["work"], "service"))
    if not pid:
        return
    try:
        os.kill(pid, 15)
    except OSError:
        return
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="0,10000,100000",
                    help="one user's recorded jobs, comma-separated; N@D (1d, 6h): the N-job store's last D only")
    ap.add_argument("--users", action="append", default=[],
                    help="KxN (or KxN@D): K users with N jobs each (repeatable)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ap.add_argument("--only", default="", help="comma-separated call labels (their text before ' (')")
    ap.add_argument("--json", help="write the raw numbers here")
    ap.add_argument("--keep", action="store_true", help="keep the state directories")
    ap.add_argument("--no-warm", dest="warm", action="store_false",
                    help="in-process only (no columns for the compiled client and the warm service)")
    ap.add_argument("--one-at-a-time", action="store_true",
                    help="seed, measure and remove each store in turn (stores too big to sit side by side); "
                    "by default every store is seeded first and each call measured on each store in turn")
    a = ap.parse_args()
    if os.getuid() != 0:
        raise SystemExit("needs root: the records are made as their owners")
    if a.warm and (CLIENT_BIN / "squeue").read_bytes()[:4] != b"\x7fELF":
        raise SystemExit(f"{CLIENT_BIN}/squeue is not the compiled client: --no-warm, or SLURM_SHIM_CLIENT_BIN")
    pw = pwd.getpwnam(BENCH_USER)
    only = {x.strip() for x in a.only.split(",") if x.strip()} or None
    stores: list[tuple[str, int, int, int | None]] = [(lab, 1, n, keep) for n, keep, lab in
                                                       map(parse_size, filter(str.strip, a.sizes.split(",")))]
    for spec in a.users:
        k, size = spec.lower().split("x")
        n, keep, lab = parse_size(size)
        stores.append((f"{int(k)}x{lab}", int(k), n, keep))
    # a store N beside a store N@D (the same K): seeded in two parts, its last D with a fresh clock
    split = {(k, n): keep for _lab, k, n, keep in stores if keep is not None}
    top = tempfile.mkdtemp(prefix="store-scale-", dir=a.dir)
    os.chmod(top, 0o755)
    results: dict[str, dict] = {label: {} for label, *_ in stores}
    meta: dict[str, dict] = {}
    made: list[tuple[str, dict]] = []
    prune = only is None or "prune" in only

    def todo() -> list:
        return [(label, what) for label, what in calls(time.time())
                if only is None or label.split(" (")[0] in only or label in only]

    def fill(label: str, st: dict, k: int, n: int, part: tuple[float, float]) -> None:
        """Seed the jobs of ``part`` (ages) for each of the store's K users, with the clock of now."""
        now = time.time()
        t0 = time.perf_counter()
        seed(st["state_dir"], BENCH_USER, pw.pw_uid, pw.pw_gid, n, now, False, k, 0, part)
        for j in range(1, k):
            seed(st["state_dir"], f"u{FAKE_UIDS + j}", FAKE_UIDS + j, FAKE_UIDS + j, n, now, False, k, j, part)
        m = meta.setdefault(label, {"seed_s": 0.0})
        m["seed_s"] = round(m["seed_s"] + time.perf_counter() - t0, 1)
        m["jobs"] = m.get("jobs", 0) + k * sum(part[0] <= x < part[1] for x in ages(n))

    def recent(label: str, st: dict, k: int, n: int, keep: int | None) -> None:
        """An N@D store's jobs, or the last D of a store N beside one (its history came first)."""
        last = keep if keep is not None else split.get((k, n))
        if last is not None:
            fill(label, st, k, n, (0, last))

    def targets(st: dict, k: int) -> None:
        # T1 and T2 last, with the clock of that moment (T1 within squeue's 300 s of ended jobs)
        seed(st["state_dir"], BENCH_USER, pw.pw_uid, pw.pw_gid, 0, time.time(), True, k, 0)

    def sized(label: str, st: dict) -> None:
        # (after measuring: a walk of a million jobs' files takes seconds, and the recent jobs and
        # T1 would be that much older when measured than a small store's)
        files, size = _dir_size(st["state_dir"])
        meta[label].update(files=files, bytes=size)
        print(f"store {label}: {meta[label]['jobs'] + 2:,} jobs, {files:,} files ({size / 1e6:.0f} MB); "
              f"seeded in {meta[label]['seed_s']:.0f} s", file=sys.stderr, flush=True)

    try:
        for i, (label, k, n, keep) in enumerate(stores):
            st = make_store(top, i, pw)
            history = split.get((k, n), 0) if keep is None else float("inf")  # (an N@D store has none)
            fill(label, st, k, n, (history, float("inf")))
            if a.one_at_a_time:
                recent(label, st, k, n, keep)
                targets(st, k)
                try:
                    results[label] = measure(st, a.runs, BENCH_USER, pw.pw_uid, pw.pw_gid, todo(), prune, a.warm)
                finally:
                    stop_service(st)
                sized(label, st)
                print(f"store {label}: measured", file=sys.stderr, flush=True)
                if not a.keep:
                    shutil.rmtree(st["base"], ignore_errors=True)
            else:
                made.append((label, st))
        try:
            for label, st in made:  # the last D of every store that has one, after all histories
                _lab, k, n, keep = next(x for x in stores if x[0] == label)
                recent(label, st, k, n, keep)
            for label, st in made:
                targets(st, dict((s_, k_) for s_, k_, *_ in stores)[label])
            for call in todo():  # each call on every store in turn: the same minute's load for all
                for label, st in made:
                    results[label].update(measure(st, a.runs, BENCH_USER, pw.pw_uid, pw.pw_gid, [call], False,
                                                  a.warm))
                print(f"measured: {call[0]}", file=sys.stderr, flush=True)
            for label, st in made if prune else ():
                results[label].update(measure(st, a.runs, BENCH_USER, pw.pw_uid, pw.pw_gid, [], True, False))
            for label, st in made:
                sized(label, st)
        finally:
            for _label, st in made:
                stop_service(st)
    finally:
        if not a.keep:
            shutil.rmtree(top, ignore_errors=True)
    _table(results, meta)
    if a.json:
        Path(a.json).write_text(json.dumps({"stores": meta, "results": results}, indent=1))
    return 0


def _table(results: dict[str, dict], meta: dict[str, dict]) -> None:
    """The times (in-process columns, then the warm path's where it was measured: each path's ratio
    against its own first store, and a store N's against the N@D store of the run too, if any), then
    what each call listed, opened and stat'ed in-process."""
    labels = list(results)
    first = labels[0]
    rate = {s: next(x for x in labels if x.startswith(s + "@")) for s in labels
            if any(x.startswith(s + "@") for x in labels)}  # store N -> its same-rate store N@D
    warm = any("warm_ms" in r for r in results[first].values())
    cols = [(s, "ms", "rows", "") for s in labels] + ([(s, "warm_ms", "warm_rows", ", warm") for s in labels]
                                                      if warm else [])
    print("| call | " + " | ".join(f"{s} jobs{tag}" for s, _, _, tag in cols) + " |")
    print("|---|" + "---|" * len(cols))
    for call in results[first]:
        cells = []
        for s, ms, rows, _tag in cols:
            r = results[s].get(call)
            if r is None or ms not in r:
                cells.append("—")
                continue
            base = results[first][call][ms]
            ratio = f"{r[ms] / base:.1f}×" if base else "—"
            same = results[rate[s]].get(call, {}).get(ms) if s in rate else None
            if same:
                ratio += f", {r[ms] / same:.2f}× of {rate[s]}"
            extra = (f", {r[rows]:,} rows" if call.startswith(("sacct", "squeue"))
                     else f", {r[rows]:,} files removed" if call.startswith("prune") else "")
            cells.append(f"{r[ms]:.1f} ms ({ratio}{extra})")
        print(f"| `{call}` | " + " | ".join(cells) + " |")
    if warm:
        served = sum(r.get("served", 0) for s in labels for r in results[s].values())
        timed = sum(r["warm_runs"] for s in labels for r in results[s].values() if "warm_ms" in r)
        print(f"\nwarm: the service ran {served} of the {timed} timed calls (the rest ran in-process)")
    print()
    print("| call: names listed / files opened / stat'ed | " + " | ".join(f"{s} jobs" for s in labels) + " |")
    print("|---|" + "---|" * len(labels))
    for call in results[first]:
        cells = []
        for s in labels:
            r = results[s].get(call)
            cells.append("—" if r is None else f"{r['listed']:,} / {r['opened']:,} / {r['stated']:,}")
        print(f"| `{call}` | " + " | ".join(cells) + " |")
    errs = {(s, c, k): r[k] for s in labels for c, r in results[s].items() for k in ("err", "warm_err") if r.get(k)}
    for (s, c, k), e in sorted(errs.items()):
        print(f"note: {c} at {s}{', warm' if k == 'warm_err' else ''}: {e}")


if __name__ == "__main__":
    sys.exit(main())
