#!/usr/bin/env python3
"""What one user's records cost everyone else (security review 3, F-26), before and after a change.

    sudo /opt/slurm-shim/bin/python bench/record_flood.py --src OLD/src --src /work/main/src

A flooder (``shimbench``, created if missing) puts ``--valid`` recent end events of her own
(valid names and content) and ``--junk`` other names in her own events/ directory, as any user
can. For each source tree, a plain reader (``nobody``) and root run ``squeue -t all``, ``squeue
-t all -j <id>`` and root ``sacct -a -X``, in-process (the tree's ``shim`` imported with ``python
-I``; no warm service), median of ``--runs`` whole-process timings, and the rows each printed.
Baseline first (her directory empty), then flooded. Her directory is emptied at the end. Needs
root and the live cluster; touches no other user's files and submits nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import time

FLOODER, READER = "shimbench", "nobody"
STATE = "/var/spool/slurm-shim"


def _env() -> dict[str, str]:
    e = {"PATH": "/usr/lib/gridengine:/usr/sbin:/usr/bin:/sbin:/bin", "SGE_ROOT": "/var/lib/gridengine", "SGE_CELL": "default",
         "SLURM_SHIM_SERVICE": "off", "LANG": os.environ.get("LANG", "C.UTF-8")}
    return e


def timed(src: str, user: str, cmd: str, argv: list[str], runs: int) -> tuple[float, int]:
    code = (f"import sys; sys.path.insert(0, {src!r}); from shim.__main__ import dispatch; "
            f"sys.exit(dispatch({cmd!r}, {argv!r}))")
    args = [sys.executable, "-I", "-c", code]
    if user != "root":
        args = ["runuser", "-u", user, "--", *args]
    times, rows = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        cp = subprocess.run(args, capture_output=True, text=True, env=_env(), cwd="/", timeout=600)
        times.append(time.perf_counter() - t0)
        rows = len(cp.stdout.splitlines())
        if cp.returncode != 0 and not (cmd == "squeue" and "-j" in argv):
            raise SystemExit(f"{user} {cmd} {argv} ({src}): exit {cp.returncode}: {cp.stderr}")
    return statistics.median(times), rows


def flood(valid: int, junk: int) -> None:
    pw = pwd.getpwnam(FLOODER)
    code = f"""
import json, os, time
d = os.path.join({STATE + '/users'!r}, str(os.getuid()))
for sub in ("", "events"):
    os.makedirs(os.path.join(d, sub), 0o755, exist_ok=True)
ev = os.path.join(d, "events")
body = json.dumps({{"t": time.time(), "exit": 0, "signal": 0, "state": "COMPLETED", "node": "vm"}})
for i in range({valid}):
    with open(os.path.join(ev, f"{{7000000 + i}}.x.end.json"), "w") as f:
        f.write(body)
for i in range({junk}):
    open(os.path.join(ev, f"junk-{{i}}"), "w").close()
"""
    subprocess.run(["runuser", "-u", pw.pw_name, "--", sys.executable, "-I", "-c", code], check=True, cwd="/")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", action="append", required=True, help="a source tree's src/ (repeatable)")
    ap.add_argument("--valid", type=int, default=20_000)
    ap.add_argument("--junk", type=int, default=30_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--job", default="1", help="the id squeue -j asks about (a forgotten one)")
    a = ap.parse_args()
    if subprocess.run(["id", "-u", FLOODER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", FLOODER], check=True)
    mine = os.path.join(STATE, "users", str(pwd.getpwnam(FLOODER).pw_uid))
    cases = [(READER, "squeue", ["-t", "all", "-h"]), ("root", "squeue", ["-t", "all", "-h"]),
             (READER, "squeue", ["-t", "all", "-j", a.job, "-h"]), ("root", "sacct", ["-a", "-X", "-n"])]
    out = []
    try:
        shutil.rmtree(os.path.join(mine, "events"), ignore_errors=True)
        for phase in ("baseline", "flooded"):
            if phase == "flooded":
                flood(a.valid, a.junk)
            for src in a.src:
                for user, cmd, argv in cases:
                    t, rows = timed(src, user, cmd, argv, a.runs)
                    out.append({"phase": phase, "src": src, "user": user, "command": " ".join([cmd, *argv]),
                                "seconds": round(t, 3), "rows": rows})
                    print(f"| {phase} | {src} | {user} `{cmd} {' '.join(argv)}` | {t:.2f} s | {rows} rows |", flush=True)
    finally:
        shutil.rmtree(os.path.join(mine, "events"), ignore_errors=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
