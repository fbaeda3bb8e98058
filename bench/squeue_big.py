#!/usr/bin/env python3
"""squeue over a big queue without the cell (issue 29, "a big queue"): the shim's own cost.

    /opt/slurm-shim/bin/python bench/squeue_big.py                       # 100,000 rows, both forms
    /opt/slurm-shim/bin/python bench/squeue_big.py -n 20000 --runs 3 --form sge --kind held
    /opt/slurm-shim/bin/python bench/squeue_big.py --profile 30          # cProfile top 30 of one run
    /opt/slurm-shim/bin/python bench/squeue_big.py --write /tmp/q.xml    # the document alone

The document is a ``qstat -u '*' -r -xml`` listing of N job rows made by repeating the rows of
recorded listings (fixtures/gridengine/sge-8.1.9 and ocs-9.1.4: running, suspended, pending,
held, error, array, PE, GPU/license/memory requests, dependencies), each recorded job (its rows
together) renumbered to a new id and given one of several owners in turn. ``--kind held`` is the
live bench's queue instead: N held jobs of one user (``hqw``, as bench/run.py's fill makes, about
128 a second; OCS's times to the microsecond, each job's own).

Each run is a fresh child process (its peak RSS is its own) that runs ``squeue`` in-process as
the console script does (``shim.__main__.dispatch``) with a private state directory and the unit
tests' site config; its qstat is ``cat <document>`` streamed through a pipe exactly as the real
qstat is (a transport class that streams, as process.GridEngineBackend does), other Grid Engine
calls answer empty. Reported per form: the baseline (``cat <document>`` read whole through a pipe
by a child of this process: the bytes alone), the squeue time (the child's wall time around
dispatch, imports before it excluded as for the baseline's interpreter), their ratio, the
per-row cost, its CPU time (``process_time``: the measure that holds on a loaded machine), and the child's peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) against
an idle child's (the same imports, no squeue). Median of ``--runs``.

``BENCH_SRC=<tree>/src`` measures another tree; ``--before <tree>/src`` runs that tree in turn with
this one, each round (baseline, after, before). ``--args`` gives squeue's arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = os.environ.get("BENCH_SRC") or str(REPO / "src")
GE = REPO / "fixtures" / "gridengine"
TEMPLATES = {
    "sge": [GE / "sge-8.1.9" / "live-qstat-u-all-r-xml.mixed.xml", GE / "sge-8.1.9" / "qstat-u-all-xml-r-mixed-states.xml",
            GE / "sge-8.1.9" / "quota-qstat-u-all-r-xml.xml"],
    "ocs": [GE / "ocs-9.1.4" / "qstat-r-all-users.xml", GE / "ocs-9.1.4" / "quota-qstat-u-all-r-xml.xml",
            GE / "ocs-9.1.4" / "priority-qstat-pri-ext-urg-r-xml.xml"],
}
OWNERS = ("alice", "root", "swarmsvc", "bob", "averyverylongusername")  # (known and unknown to passwd)
HEAD = {"sge": "http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qstat/qstat.xsd",
        "ocs": "https://github.com/hpc-gridware/clusterscheduler/raw/master/source/dist/util/resources/schemas/qstat/qstat.xsd"}
_ELEMENT = re.compile(r"[ \t]*<job_list state=\"(running|pending)\">.*?</job_list>\n", re.S)
_NUMBER = re.compile(r"<JB_job_number>(\d+)</JB_job_number>")
_OWNER = re.compile(r"<JB_owner>[^<]*</JB_owner>")
FIRST = 1_000_000


def template_jobs(form: str) -> list[list[tuple[str, str]]]:
    """The recorded jobs of a form: each a list of (section, element text) rows, in document order."""
    jobs: dict[str, list[tuple[str, str]]] = {}
    order: list[str] = []
    for path in TEMPLATES[form]:
        for m in _ELEMENT.finditer(path.read_text()):
            key = f"{path.name}:{_NUMBER.search(m.group(0)).group(1)}"
            if key not in jobs:
                jobs[key] = []
                order.append(key)
            jobs[key].append((m.group(1), m.group(0)))
    return [jobs[k] for k in order]


def document(form: str, n: int, kind: str = "mix") -> str:
    """A listing of ``n`` job rows (see the module's doc)."""
    running: list[str] = []
    pending: list[str] = []
    if kind == "held":
        ttag = "JAT_submission_time" if form == "ocs" else "JB_submission_time"
        for i in range(n):  # (about 128 submissions a second, as the live fill; OCS's to the microsecond)
            sec = i // 128
            stamp = f"2026-12-07T18:{sec // 60 % 60:02d}:{sec % 60:02d}" + (f".{i * 7919 % 1000000:06d}" if form == "ocs" else "")
            pending.append(f"""    <job_list state="pending">
      <JB_job_number>{FIRST + i}</JB_job_number>
      <JAT_prio>0.00000</JAT_prio>
      <JB_name>bench</JB_name>
      <JB_owner>shimbench</JB_owner>
      <state>hqw</state>
      <{ttag}>{stamp}</{ttag}>
      <queue_name></queue_name>
      <slots>1</slots>
      <full_job_name>bench</full_job_name>
      <hard_req_queue>debug</hard_req_queue>{"" if form == "ocs" else chr(10) + "      <binding>NONE</binding>"}
    </job_list>
""")
    else:
        jobs = template_jobs(form)
        made = i = 0
        while made < n:
            rows = jobs[i % len(jobs)]
            num, owner = FIRST + i, OWNERS[i % len(OWNERS)]
            for section, text in rows:
                if made >= n:
                    break
                text = _NUMBER.sub(f"<JB_job_number>{num}</JB_job_number>", text)
                text = _OWNER.sub(f"<JB_owner>{owner}</JB_owner>", text)
                (running if section == "running" else pending).append(text)
                made += 1
            i += 1
    return (f"<?xml version='1.0'?>\n<job_info  xmlns:xsd=\"{HEAD[form]}\">\n  <queue_info>\n" + "".join(running)
            + "  </queue_info>\n  <job_info>\n" + "".join(pending) + "  </job_info>\n</job_info>\n")


# ---------------------------------------------------------------------------------------------
# the child: one squeue, in-process


def child(spec: dict) -> dict:
    import resource

    sys.path.insert(0, spec.get("src") or SRC)
    top = spec["top"]
    os.environ["SLURM_SHIM_CONFIG"] = os.path.join(top, "config.toml")
    os.environ["XDG_CACHE_HOME"] = os.path.join(top, "cache")
    for var in list(os.environ):
        if var.startswith("SQUEUE_") or var == "SLURM_TIME_FORMAT":
            del os.environ[var]
    from shim.__main__ import dispatch
    from shim.gridengine import backends
    from shim.gridengine.replay import ReplayBackend
    from shim.proc import Result
    import shim.cli.squeue  # noqa: F401  (the imports squeue makes before its qstat, as the baseline's)
    import shim.operations.jobqueue  # noqa: F401
    import shim.slurm.render.squeue  # noqa: F401

    path = spec["doc"]

    class Streamed(ReplayBackend):
        """qstat's listing is ``cat <document>``, streamed (calls.streams: this class says so)."""

        STREAMS = True
        env = None
        timeout = 600.0

        def argv(self, tool, args):
            return ["cat", path] if tool == "qstat" and "-xml" in args and "-j" not in args else [tool, *args]

        def run(self, tool, args, *, input=None, timeout=None):
            return Result((tool, *args), 0, "", "")

    backends.use(Streamed())
    idle = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if spec.get("idle"):
        return {"rss_kb": idle}
    out = open(spec.get("out") or os.devnull, "w")
    saved = sys.stdout
    prof = None
    if spec.get("profile"):
        import cProfile

        prof = cProfile.Profile()
    t0, c0 = time.perf_counter(), time.process_time()
    sys.stdout = out
    try:
        if prof:
            prof.enable()
        rc = dispatch("squeue", list(spec["args"]))
        if prof:
            prof.disable()
        sys.stdout.flush()
    finally:
        sys.stdout = saved
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    out.close()
    res = {"seconds": dt, "cpu_seconds": cpu, "rc": rc, "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "idle_kb": idle}
    if prof:
        import io
        import pstats

        for order in ("cumulative", "tottime"):
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats(order).print_stats(spec["profile"])
            res[f"profile_{order}"] = s.getvalue()
    return res


def run_child(spec: dict) -> dict:
    p = subprocess.run([sys.executable, __file__, "--child"], input=json.dumps(spec), capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"child failed: {p.stderr[-2000:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    if res.get("rc", 0) != 0:
        raise SystemExit(f"squeue failed (rc {res['rc']}): {p.stderr[-2000:]}")
    return res


def baseline(path: str) -> float:
    """``cat <document>`` read whole through a pipe (the bytes alone)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(["cat", path], stdout=subprocess.PIPE)
    while p.stdout.read(65536):
        pass
    p.wait()
    return time.perf_counter() - t0


def setup(top: str) -> None:
    state = os.path.join(top, "state")
    os.makedirs(state, mode=0o755)
    for sub in ("users", "gpus"):
        os.mkdir(os.path.join(state, sub))
        os.chmod(os.path.join(state, sub), 0o1777)
    text = (REPO / "fixtures" / "site" / "config.toml").read_text()
    text = text.replace('state_dir = "/tmp/slurm-shim-unit-state"', f'state_dir = "{state}"')
    assert state in text
    Path(top, "config.toml").write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("-n", type=int, default=100_000, help="job rows in the listing")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--form", choices=("sge", "ocs", "both"), default="both")
    ap.add_argument("--kind", choices=("mix", "held"), default="mix")
    ap.add_argument("--args", default="", help="squeue's arguments (split on white space)")
    ap.add_argument("--profile", type=int, default=0, help="cProfile top N of one run (each form)")
    ap.add_argument("--write", help="write the document here and stop")
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("--before", metavar="SRC", help="another tree's src/ (a before), run in turn with this one")
    o = ap.parse_args()
    if o.child:
        print(json.dumps(child(json.loads(sys.stdin.read()))))
        return
    forms = ("sge", "ocs") if o.form == "both" else (o.form,)
    if o.write:
        Path(o.write).write_text(document(forms[0], o.n, o.kind))
        return
    results = {}
    with tempfile.TemporaryDirectory(prefix="squeue-big-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as top:
        setup(top)
        for form in forms:
            doc = os.path.join(top, f"{form}.xml")
            # (written by a child: the kernel keeps a parent's peak RSS as its spawned children's start)
            subprocess.run([sys.executable, __file__, "--write", doc, "--form", form, "-n", str(o.n), "--kind", o.kind],
                           check=True)
            spec = {"top": top, "doc": doc, "args": o.args.split()}
            run_child({**spec, "runs": 1})  # (a warm-up: the page cache, siteconf's cache)
            idle = run_child({**spec, "idle": True})["rss_kb"]
            trees = {"after": SRC, "before": o.before} if o.before else {"this": SRC}
            base: list[float] = []
            shim: dict[str, list[float]] = {t: [] for t in trees}
            cpu: dict[str, list[float]] = {t: [] for t in trees}
            rss: dict[str, list[int]] = {t: [] for t in trees}
            for _ in range(o.runs):  # (in turn: the load other work puts on the machine falls on each alike)
                base.append(baseline(doc))
                for t, src in trees.items():
                    r = run_child({**spec, "src": src})
                    shim[t].append(r["seconds"])
                    cpu[t].append(r["cpu_seconds"])
                    rss[t].append(r["rss_kb"])
            b = statistics.median(base)
            results[form] = {"rows": o.n, "bytes": os.path.getsize(doc), "baseline_s": base, "squeue_s": shim,
                             "squeue_cpu_s": cpu, "rss_kb": rss, "idle_rss_kb": idle}
            for t in trees:
                s = statistics.median(shim[t])
                print(f"{form} {o.kind} {o.n} rows ({os.path.getsize(doc) / 1e6:.1f} MB), {t}: cat {b * 1000:.0f} ms, "
                      f"squeue {s * 1000:.0f} ms ({s / b:.1f}x the baseline, {s / o.n * 1e6:.1f} us a row; CPU "
                      f"{statistics.median(cpu[t]) * 1000:.0f} ms), "
                      f"peak RSS {max(rss[t]) / 1024:.0f} MB (idle child {idle / 1024:.0f} MB)", flush=True)
            if o.profile:
                r = run_child({**spec, "profile": o.profile})
                print(r["profile_tottime"])
                print(r["profile_cumulative"])
    if o.json:
        Path(o.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
