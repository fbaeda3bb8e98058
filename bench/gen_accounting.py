#!/usr/bin/env python3
"""Write a synthetic Grid Engine accounting file: N records in the exact SGE 8.1.9 format.

The file has the header Grid Engine writes and one colon-separated line per finished job or array
task (45 fields, see accounting(5)), in end-time order as qmaster appends them. The mix is meant
to look like a busy cluster: several users, two queues, array jobs, PE jobs, failures (exit 1..3),
qdel'd jobs (failed 100, exit 137), h_rt kills (failed 37), and jobs that never started
(failed 26, start 0).

    python bench/gen_accounting.py -n 100000 -o /tmp/accounting
    SLURM_SHIM_ACCOUNTING=/tmp/accounting sacct -j 4242
    qacct -f /tmp/accounting -j 4242

Deterministic for a given --seed. Prints a summary (a few job ids, users) to stderr.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

HEADER = "# Version: 8.1.9\n# \n# DO NOT MODIFY THIS FILE MANUALLY!\n# \n"

USERS = [("alice", "alice"), ("bob", "bob"), ("root", "root"), ("carol", "users"), ("dave", "users")]
NAMES = ["train", "preprocess", "sx_mfrggzdfmztgcyq", "eval", "merge", "align", "bwa", "sort",
         "stress_test", "snakejob.map.7", "submitit", "wrap", "job.sh", "arr"]


def record(q: str, host: str, group: str, owner: str, name: str, job: int, submit: int, start: int,
           end: int, failed: int, exit_status: int, task: int, slots: int, pe: str, category: str,
           rng: random.Random) -> str:
    wall = max(0, end - start) if start else 0
    ut = round(rng.random() * wall * 0.9, 6) if wall else round(rng.random() * 0.05, 6)
    st = round(rng.random() * 0.05, 6)
    maxrss = float(rng.randint(3000, 900000)) if start else 0.0
    minflt = rng.randint(200, 90000) if start else 0
    oublock = rng.choice((0, 8, 16, 24, 40, 152))
    cpu = round(ut + st, 6)
    mem = round(rng.random() * 50, 6) if wall > 2 else 0.0
    io = round(rng.random() * 0.01, 6)
    maxvmem = float(rng.randint(1, 4000) * 4096 * 256) if wall > 2 else 0.0
    fields = [
        q, host, group, owner, name, str(job), "sge", "0",
        str(submit), str(start), str(end), str(failed), str(exit_status), str(wall),
        f"{ut:.6f}", f"{st:.6f}", f"{maxrss:.6f}", "0", "0", "0", "0",
        str(minflt), "0", "0", "0.000000", str(oublock), "0", "0", "0",
        str(rng.randint(1, 500) if start else 0), str(rng.randint(0, 60) if start else 0),
        "NONE", "defaultdepartment", pe, str(slots), str(task),
        f"{cpu:.6f}", f"{mem:.6f}", f"{io:.6f}", category, "0.000000", "NONE",
        f"{maxvmem:.6f}", "0", "0",
    ]
    return ":".join(fields) + "\n"


def generate(n: int, out, *, seed: int = 1, days: float = 30.0, first_job: int = 1000,
             end_time: int | None = None, hosts: list[str] | None = None) -> dict:
    rng = random.Random(seed)
    hosts = hosts or ["vm"]
    t_end = int(end_time if end_time is not None else time.time())
    t0 = t_end - int(days * 86400)
    span = t_end - t0
    out.write(HEADER)
    job = first_job
    written = 0
    step = span / max(1, n)
    t = float(t0)
    samples: dict[str, int] = {}
    while written < n:
        owner, group = rng.choice(USERS)
        name = rng.choice(NAMES)
        q = "gpu" if rng.random() < 0.15 else "debug"
        host = rng.choice(hosts)
        ntasks = rng.choice((1,) * 12 + (3, 10, 50)) if name == "arr" else 1
        ntasks = min(ntasks, n - written)
        pe, slots, category = "NONE", 1, f"-q {q}"
        if rng.random() < 0.1:
            pe, slots = "smp", rng.choice((2, 4, 8))
            category += f" -pe smp {slots}"
        if q == "gpu":
            category += " -l gpu=1"
        submit = int(t)
        for k in range(ntasks):
            t += step
            roll = rng.random()
            start = submit + rng.randint(0, 30)
            dur = rng.choice((0, 1, 2, 5, 30, 120, 600, 3600))
            end = max(int(t), start + dur)
            failed, status = 0, 0
            if roll < 0.70:
                pass
            elif roll < 0.85:
                status = rng.choice((1, 2, 3))
            elif roll < 0.93:
                failed, status = 100, 137
            elif roll < 0.98:
                failed, status = 37, 137
                category_k = category + " -l h_rt=60"
            else:
                failed, status, start, end = 26, 0, 0, 0
            cat = category_k if failed == 37 else category
            task = k + 1 if ntasks > 1 or name == "arr" else 0
            out.write(record(q, host, group, owner, name, job, submit, start, end, failed, status,
                             task, slots, pe, cat, rng))
            written += 1
            samples.setdefault("first_job", job)
            if written == n // 2:
                samples["middle_job"] = job
        samples["last_job"] = job
        job += 1
    return samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--records", type=int, default=100_000)
    ap.add_argument("-o", "--out", default="-", help="output file ('-' for stdout)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--days", type=float, default=30.0, help="time span the records cover, ending now")
    ap.add_argument("--first-job", type=int, default=1000)
    ap.add_argument("--hosts", default="vm", help="comma-separated execution hosts")
    a = ap.parse_args(argv)
    f = sys.stdout if a.out == "-" else open(a.out, "w", encoding="utf-8")
    try:
        info = generate(a.records, f, seed=a.seed, days=a.days, first_job=a.first_job,
                        hosts=a.hosts.split(","))
    finally:
        if f is not sys.stdout:
            f.close()
    print(" ".join(f"{k}={v}" for k, v in info.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
