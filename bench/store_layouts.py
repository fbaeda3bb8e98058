#!/usr/bin/env python3
"""Issue 29's recommended store layout (docs/store-scale.md), prototyped beside today's, for the
store's share of the worst calls: the events of a time window (sacct's default window, -S
now-1hours, squeue -t all's recently ended jobs) and the events of one job (sacct -j N, squeue
-j N, scontrol show job N).

    /opt/slurm-shim/bin/python bench/store_layouts.py --sizes 0,10000,100000

For each size N, one user's N end events (ended evenly over 89 days), each written with the
shim's atomic write (``state.atomic_write``: a fresh exclusive name, then rename) in

- ``flat``: today's ``events/<job>.<task>.end.json``, read as ``state.scan_events`` (a listing of
  the whole directory, an lstat of each end event to filter by mtime) and ``state.named_events``
  (a listing of the whole directory, the job's names picked by prefix) read them;
- ``sharded``: the record in ``events/id/<job // 1000>/<job>.<task>.end.json`` (by id), and a
  hard link to it in ``events/t/<YYYYMMDD>/<HHM>0/`` (by the 10-minute bucket of its time):
  one more link(2) per write, no second copy. A window lists the buckets it overlaps (and lstats
  what they hold, as today); one job is an lstat by name (an array: a listing of its id shard).

Only the directory work is timed (no command, no Grid Engine); each query's median of --runs, in
one run, with the ratio against the empty store. Runs as any user, in a temporary directory
(``--dir``, default /dev/shm), removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from shim.store import state  # noqa: E402

DAY = 86400
SPAN = 89 * DAY
BUCKET = 600  # seconds a time bucket spans
SHARD = 1000  # job ids an id shard holds
T1, T2 = 5_000_001, 5_000_000


def bucket(t: float) -> str:
    b = int(t) // BUCKET * BUCKET
    return time.strftime("%Y%m%d/%H%M", time.gmtime(b))


def write_flat(root: str, job: int, t: float) -> None:
    p = os.path.join(root, "events", f"{job}.x.end.json")
    state.atomic_write(p, f'{{"t":{t},"state":"COMPLETED","exit":0}}')
    os.utime(p, (t, t))


def write_sharded(root: str, job: int, t: float, made: set[str]) -> None:
    d = os.path.join(root, "events", "id", str(job // SHARD))
    tb = os.path.join(root, "events", "t", bucket(t))
    for x in (d, tb):
        if x not in made:
            os.makedirs(x, 0o755, exist_ok=True)
            made.add(x)
    name = f"{job}.x.end.json"
    p = os.path.join(d, name)
    state.atomic_write(p, f'{{"t":{t},"state":"COMPLETED","exit":0}}')
    os.utime(p, (t, t))
    try:
        os.link(p, os.path.join(tb, name))
    except FileExistsError:
        pass


# the reads


def window_flat(root: str, since: float, now: float) -> int:
    ev = os.path.join(root, "events")
    n = 0
    for name in os.listdir(ev):
        m = state.EVENT_NAME.fullmatch(name)
        if m is None or m[3] != "end":
            continue
        st = os.lstat(os.path.join(ev, name))
        if since <= st.st_mtime <= now + 60:
            n += 1
    return n


def window_sharded(root: str, since: float, now: float) -> int:
    tdir = os.path.join(root, "events", "t")
    n = 0
    lo, hi = int(since) // BUCKET * BUCKET, int(now + 60)
    days = sorted({time.strftime("%Y%m%d", time.gmtime(t)) for t in range(lo, hi + DAY, DAY) if t <= hi + DAY})
    first, last = bucket(lo), bucket(hi)
    for day in days:
        try:
            slots = os.listdir(os.path.join(tdir, day))
        except FileNotFoundError:
            continue
        for slot in slots:
            if not first <= f"{day}/{slot}" <= last:
                continue
            d = os.path.join(tdir, day, slot)
            for name in os.listdir(d):
                m = state.EVENT_NAME.fullmatch(name)
                if m is None or m[3] != "end":
                    continue
                st = os.lstat(os.path.join(d, name))
                if since <= st.st_mtime <= now + 60:
                    n += 1
    return n


def job_flat(root: str, job: int) -> int:
    names = os.listdir(os.path.join(root, "events"))
    return len(state.parse_event_names(names, {job}).get(job, {}))


def job_sharded(root: str, job: int) -> int:
    try:
        os.lstat(os.path.join(root, "events", "id", str(job // SHARD), f"{job}.x.end.json"))
        return 1
    except FileNotFoundError:
        return 0


def job_sharded_array(root: str, job: int) -> int:
    try:
        names = os.listdir(os.path.join(root, "events", "id", str(job // SHARD)))
    except FileNotFoundError:
        return 0
    return len(state.parse_event_names(names, {job}).get(job, {}))


def timed(fn, runs: int) -> tuple[float, int]:
    got = fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        got = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1000, got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="0,10000,100000")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",") if s.strip()]
    top = tempfile.mkdtemp(prefix="store-layouts-", dir=a.dir)
    now = time.time()
    midnight = now - (now % DAY)
    rows: dict[str, dict[int, tuple[float, int]]] = {}
    seeded: dict[int, tuple[float, float]] = {}
    try:
        for n in sizes:
            flat, shard = os.path.join(top, f"flat{n}"), os.path.join(top, f"shard{n}")
            os.makedirs(os.path.join(flat, "events"))
            os.makedirs(os.path.join(shard, "events"))
            made: set[str] = set()
            jobs = [(1_000_000 + i, now - 60 - SPAN * (n - 1 - i) / max(n - 1, 1)) for i in range(n)]
            jobs += [(T2, now - 30 * DAY), (T1, now - 30)]
            t0 = time.perf_counter()
            for j, t in jobs:
                write_flat(flat, j, t)
            t1 = time.perf_counter()
            for j, t in jobs:
                write_sharded(shard, j, t, made)
            t2 = time.perf_counter()
            seeded[n] = ((t1 - t0) / len(jobs) * 1e6, (t2 - t1) / len(jobs) * 1e6)
            cases = {
                "window: today (sacct)": (lambda: window_flat(flat, midnight, now), lambda: window_sharded(shard, midnight, now)),
                "window: last hour (sacct -S now-1hours)": (lambda: window_flat(flat, now - 3600, now),
                                                            lambda: window_sharded(shard, now - 3600, now)),
                "window: last 300 s (squeue -t all)": (lambda: window_flat(flat, now - 300, now),
                                                       lambda: window_sharded(shard, now - 300, now)),
                "one job T1 (sacct -j, squeue -j)": (lambda: job_flat(flat, T1), lambda: job_sharded(shard, T1)),
                "one array job T2 (its id shard listed)": (lambda: job_flat(flat, T2), lambda: job_sharded_array(shard, T2)),
            }
            for label, (f, s) in cases.items():
                rows.setdefault(f"{label}, flat", {})[n] = timed(f, a.runs)
                rows.setdefault(f"{label}, sharded", {})[n] = timed(s, a.runs)
            shutil.rmtree(flat)
            shutil.rmtree(shard)
            print(f"size {n}: done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print("| store part of | " + " | ".join(f"{n:,} events" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for label, by in rows.items():
        base = by[sizes[0]][0]
        cells = [f"{ms:.2f} ms ({ms / base:.1f}×, {found:,} found)" for ms, found in (by[n] for n in sizes)]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print("| one write, flat / sharded (µs, mean of the seeding) | "
          + " | ".join(f"{seeded[n][0]:.0f} / {seeded[n][1]:.0f}" for n in sizes) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
