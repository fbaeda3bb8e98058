#!/usr/bin/env python3
"""Before/after of the one-job paths (squeue -j N, scontrol show job N, scancel N) and squeue -u ME, issue 19.

    sudo /opt/slurm-shim/bin/python3 bench/onejob.py [BEFORE_REV [AFTER_REV]]   # defaults 60486f7 HEAD
    W2_RUNS=15 W2_OTHERS=2000 W2_SAME=1 ...  # rounds; jobs added to the queue; whose (1: the caller's)

Run as root on the live single-host cluster. Users shimw2b (the caller, owner of the measured
jobs) and shimw2c (the other user's jobs; created if missing) get ~/.sge_request -h: every job is
held, nothing runs; both users' jobs are deleted at the start and the end. The two trees are
``git archive REV src`` under /tmp/w2bench/<before|after>, each run by the same ``python3 -I``
wrapper script (bin/squeue, ...), so both pay the same start-up. Interleaved rounds (before,
after, raw binary), median of W2_RUNS; then 100 concurrent scancels per tree. Prints a Markdown
table; raw numbers in /tmp/w2bench/results-<same|other>.json.
"""
import json
import os
import statistics
import subprocess
import sys
import time

SGE = {"SGE_ROOT": "/var/lib/gridengine", "SGE_CELL": "default", "SGE_QMASTER_PORT": "6444", "SGE_EXECD_PORT": "6445"}
RAW = "/usr/lib/gridengine"
ME = "shimw2b"
OTHER = "shimw2c"
W2 = "/tmp/w2bench"


def env_of(user):
    import pwd

    pw = pwd.getpwnam(user)
    return {**SGE, "PATH": "/usr/bin:/bin", "HOME": pw.pw_dir, "USER": user, "LOGNAME": user, "LANG": "C.UTF-8", "GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=4096"}


def as_user(user, argv, **kw):
    e = env_of(user)
    return subprocess.run(["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in e.items()], *argv],
                          capture_output=True, text=True, **kw)


def fill(user, n):
    code = (f"import drmaa,os\ns=drmaa.Session();s.initialize();jt=s.createJobTemplate();jt.remoteCommand='/bin/true'\n"
            f"jt.nativeSpecification='-b y -w n -N w2fill -o /dev/null -j y -q debug'\n"
            f"[s.runJob(jt) for _ in range({n})]\ns.exit()\n")
    e = env_of(user)
    e["DRMAA_LIBRARY_PATH"] = "/usr/lib/gridengine-drmaa/lib/libdrmaa.so.1.0"
    cp = subprocess.run(["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in e.items()],
                         "/opt/slurm-shim/bin/python3", "-c", code], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr


def held(user, n):
    ids = []
    for _ in range(n):
        cp = as_user(user, [f"{RAW}/qsub", "-terse", "-b", "y", "-o", "/dev/null", "-j", "y", "-N", "w2c", "/bin/true"],
                     cwd="/tmp")
        ids.append(cp.stdout.strip())
    return ids


def worker():
    spec = json.loads(sys.stdin.read())
    env = dict(os.environ)
    import resource

    out = {k: [] for k, _ in spec["cmds"]}
    cpu = {k: [] for k, _ in spec["cmds"]}  # user+system seconds of the command and its children (qstat)
    errs = []
    for i in range(spec["runs"]):
        for name, argvs in spec["cmds"]:
            argv = argvs[i] if isinstance(argvs[0], list) else argvs
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            p = subprocess.run(argv, env=env, capture_output=True, cwd="/tmp")
            out[name].append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
            if p.returncode != 0:
                errs.append(f"{name}: {p.returncode} {p.stderr[:200]!r}")
    print(json.dumps({"times": out, "cpu": cpu, "errors": errs}))


def run_worker(user, spec):
    e = env_of(user)
    cp = subprocess.run(["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in e.items()],
                         "/opt/slurm-shim/bin/python3", f"{W2}/onejob.py", "--worker"], input=json.dumps(spec),
                        capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout.strip().splitlines()[-1])


def concurrent(user, argvs):
    """Wall time of all argvs started at once (as user)."""
    code = ("import subprocess,sys,json,time\nargvs=json.loads(sys.stdin.read())\nt=time.perf_counter()\n"
            "ps=[subprocess.Popen(a,stdout=subprocess.DEVNULL,stderr=subprocess.PIPE) for a in argvs]\n"
            "bad=sum(1 for p in ps if p.wait()!=0)\nprint(json.dumps([time.perf_counter()-t,bad]))\n")
    e = env_of(user)
    cp = subprocess.run(["runuser", "-u", user, "--", "env", "-i", *[f"{k}={v}" for k, v in e.items()],
                         "/opt/slurm-shim/bin/python3", "-c", code], input=json.dumps(argvs), capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


def med(x):
    return statistics.median(x)


def table(label, runs, target, cancel_ids):
    b, a = f"{W2}/before/bin", f"{W2}/after/bin"
    cmds = [
        ["squeue_j.before", [f"{b}/squeue", "-j", target]], ["squeue_j.after", [f"{a}/squeue", "-j", target]],
        ["squeue_j.raw", [f"{RAW}/qstat", "-j", target]],
        ["scontrol.before", [f"{b}/scontrol", "show", "job", target]], ["scontrol.after", [f"{a}/scontrol", "show", "job", target]],
        ["scontrol.raw", [f"{RAW}/qstat", "-j", target]],
        ["squeue_u.before", [f"{b}/squeue", "-u", ME]], ["squeue_u.after", [f"{a}/squeue", "-u", ME]],
        ["squeue_u.raw", [f"{RAW}/qstat", "-u", ME, "-xml"]],
        ["scancel.before", [[f"{b}/scancel", j] for j in cancel_ids[0::3]]],
        ["scancel.after", [[f"{a}/scancel", j] for j in cancel_ids[1::3]]],
        ["scancel.raw", [[f"{RAW}/qdel", j] for j in cancel_ids[2::3]]],
    ]
    r = run_worker(ME, {"runs": runs, "cmds": cmds})
    t, c = r["times"], r["cpu"]
    rows = []
    for key, what in (("squeue_j", "`squeue -j N` vs `qstat -j N`"), ("scontrol", "`scontrol show job N` vs `qstat -j N`"),
                      ("scancel", "`scancel N` vs `qdel N`"), ("squeue_u", f"`squeue -u {ME}` vs `qstat -u {ME} -xml`")):
        bf, af, rw = med(t[f"{key}.before"]), med(t[f"{key}.after"]), med(t[f"{key}.raw"])
        cb, ca, cr = med(c[f"{key}.before"]), med(c[f"{key}.after"]), med(c[f"{key}.raw"])
        rows.append((label, what, bf, af, rw, cb, ca, cr))
        print(f"| {label} | {what} | {bf*1000:.0f} ms ({bf/rw:.1f}×) | {af*1000:.0f} ms ({af/rw:.1f}×) | {rw*1000:.1f} ms "
              f"| {cb*1000:.0f} / {ca*1000:.0f} / {cr*1000:.0f} ms |", flush=True)
    return rows, r["errors"]


def trees(before, after):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name, rev in (("before", before), ("after", after)):
        d = f"{W2}/{name}"
        subprocess.run(["rm", "-rf", d], check=True)
        os.makedirs(f"{d}/bin")
        arch = subprocess.run(["git", "-C", repo, "archive", rev, "src"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", d], input=arch, check=True)
        for c in ("squeue", "scontrol", "scancel"):
            with open(f"{d}/bin/{c}", "w") as f:
                f.write(f"#!/opt/slurm-shim/bin/python3 -I\nimport sys\nsys.path.insert(0, {d + '/src'!r})\n"
                        f"from shim.__main__ import {c}\nsys.exit({c}())\n")
            os.chmod(f"{d}/bin/{c}", 0o755)
    import shutil

    shutil.copy(os.path.abspath(__file__), f"{W2}/onejob.py")  # the worker's copy, readable by the bench users
    subprocess.run(["chmod", "-R", "a+rX", W2], check=True)
    for u in (ME, OTHER):
        if subprocess.run(["id", u], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "-m", "-s", "/bin/bash", u], check=True)
        import pwd

        pw = pwd.getpwnam(u)
        p = os.path.join(pw.pw_dir, ".sge_request")
        with open(p, "w") as f:
            f.write("-h\n")
        os.chown(p, pw.pw_uid, pw.pw_gid)


def main():
    if sys.argv[1:] == ["--worker"]:
        return worker()
    args = sys.argv[1:] + ["60486f7", "HEAD"][len(sys.argv[1:]):]
    trees(args[0], args[1])
    runs = int(os.environ.get("W2_RUNS", "15"))
    others = int(os.environ.get("W2_OTHERS", "2000"))
    out = {"load_before": os.getloadavg()}
    subprocess.run([f"{RAW}/qdel", "-u", f"{ME},{OTHER}"], env={**os.environ, **SGE}, capture_output=True)
    fill(ME, 100)
    target = held(ME, 1)[0]
    cancel = held(ME, 3 * runs)
    print(f"| queue | command | before ({args[0]}) | after ({args[1]}) | raw | CPU before / after / raw |\n"
          "|---|---|---|---|---|---|", flush=True)
    rows, errs = table("100 held jobs of the caller", runs, target, cancel)
    same = os.environ.get("W2_SAME") == "1"
    fill(ME if same else OTHER, others)
    cancel = held(ME, 3 * runs)
    rows2, errs2 = table(f"+ {others} held jobs of {'the caller' if same else 'another user'}", runs, target, cancel)
    # 100 concurrent scancels, before vs after
    conc = {}
    for t in ("before", "after"):
        ids = held(ME, 100)
        conc[t] = concurrent(ME, [[f"{W2}/{t}/bin/scancel", j] for j in ids])
    ids = held(ME, 100)
    conc["raw"] = concurrent(ME, [[f"{RAW}/qdel", j] for j in ids])
    print(f"100 concurrent scancel N, queue of {others + 100} (others' {others}): before {conc['before']}, "
          f"after {conc['after']}, raw qdel {conc['raw']}", flush=True)
    out.update(rows=rows + rows2, errors=errs + errs2, concurrent=conc, load_after=os.getloadavg(), runs=runs)
    subprocess.run([f"{RAW}/qdel", "-u", f"{ME},{OTHER}"], env={**os.environ, **SGE}, capture_output=True)
    json.dump(out, open(f"{W2}/results-{'same' if same else 'other'}.json", "w"), indent=1)
    print(json.dumps({k: out[k] for k in ("load_before", "load_after", "errors")}))


if __name__ == "__main__":
    main()
