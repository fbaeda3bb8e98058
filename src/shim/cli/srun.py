"""srun: run parallel tasks, as Slurm's srun, on Grid Engine.

Inside an allocation (SLURM_JOB_ID set, or --jobid): a job step over the allocation's hosts
(shim.steps). Outside: a new job with the same translation as sbatch, started with ``qrsh -now no``
(streaming output, stdin, the real exit code, ``-pty y`` for --pty), whose one process runs the
shim's step launcher (``shim.steps.job_main``) as the job's step 0.
"""

from __future__ import annotations

import os
import pwd
import signal
import sys
import time
import uuid

from .. import backends, jobenv, proc, records, siteconf, state, steps
from ..errors import ShimError
from ..options import sources, values
from ..options.getopt import Table, getopt
from ..options.table import command_table
from ..options.values import INFINITE
from . import common

PROG = "srun"
# Inside a job, srun's input variables are mostly the job's own output variables
# (SLURM_DISTRIBUTION, SLURM_CPU_BIND, ...): only the command line counts for fates and -v.
CLI_ONLY = ("cli",)


def table() -> Table:
    return command_table(PROG)


def export_mode(raw: str | None, environ: dict[str, str]) -> dict:
    from .sbatch import export_mode as mode

    return mode(raw, environ)


def request(o: sources.Options, positional: list[str], environ: dict[str, str]) -> steps.StepRequest:
    """srun's options as plain data for the step launcher."""
    argv = list(positional)
    per_task = None
    if o.multi_prog:
        try:
            with open(argv[0], encoding="utf-8") as f:
                text = f.read()
        except OSError:
            raise ShimError(f"{PROG}: error: Unable to open multi-prog file {argv[0]}", code=1) from None
        ntasks = o.ntasks or 1
        per_task = steps.parse_multi_prog(text, ntasks)
        missing = [t for t in range(ntasks) if t not in per_task]
        if missing:
            raise ShimError(f"{PROG}: error: Configuration file {argv[0]} invalid, no record for task id "
                            f"{missing[0]}", code=1)
        argv = per_task[0]
    nodes = o.nodes[0] if isinstance(o.nodes, tuple) else o.nodes
    chdir = o.chdir
    if chdir and not os.path.isabs(chdir):
        chdir = os.path.normpath(os.path.join(os.getcwd(), chdir))
    kill_bad = o.kill_on_bad_exit
    return steps.StepRequest(
        prog=PROG,
        argv=argv,
        argv_per_task={str(k): v for k, v in per_task.items()} if per_task else None,
        ntasks=o.ntasks,
        cpus_per_task=o.cpus_per_task or 1,
        cpus_per_task_set=o.cpus_per_task is not None,
        nodes=nodes or None,
        ntasks_per_node=o.ntasks_per_node,
        relative=o.relative or 0,
        label=bool(o.label),
        unbuffered=bool(o.unbuffered or o.pty is not None),
        output=o.output,
        error=o.error,
        input=o.input,
        append=o.open_mode == "append",
        kill_on_bad_exit=bool(kill_bad) if kill_bad is not None else False,
        wait=o.wait or 0,
        pty=o.pty is not None,
        time=o.time if o.time not in (None, INFINITE) else None,
        chdir=chdir or os.getcwd(),
        export=export_mode(o.raw.get("export"), environ),
        distribution=o.raw.get("distribution"),
        name=o.job_name if o.source.get("job_name") == "cli" else os.path.basename(str(argv[0])),
        quiet=bool(o.quiet),
        verbose=int(o.verbose or 0),
    )


def job_id_of(text: str) -> int:
    head = str(text).strip().split(".")[0].split("_")[0].split("+")[0]
    if not head.isdigit():
        raise ShimError(f"{PROG}: error: Invalid job id specified: {text}", code=1)
    return int(head)


# ---------------------------------------------------------------------------------------------
# Inside an allocation


def job_variables(alloc: steps.Allocation, cfg) -> dict[str, str]:
    """The job's SLURM_* variables when srun's environment lost them (snakemake strips all but
    SLURM_JOB_ID): as the job's own processes had them, else rebuilt from the shim's record."""
    out = dict(alloc.job_env)
    if alloc.record and "SLURM_JOB_NODELIST" not in out:
        user = pwd.getpwuid(os.getuid())
        env = jobenv.batch_env(alloc.record, job_id=alloc.job_id, task=alloc.task, hosts=alloc.hosts,
                               this_host=steps.short_host(), user=user.pw_name, uid=user.pw_uid, gid=os.getgid())
        for k in ("ENVIRONMENT", "HOSTNAME", "SLURM_TASK_PID"):
            env.pop(k, None)
        for k, v in env.items():
            out.setdefault(k, v)
    return out


def in_allocation(o: sources.Options, req: steps.StepRequest, environ: dict[str, str], cfg, job_id: int) -> int:
    backend = backends.get(cfg)
    record = records.Reader(cfg).submit(job_id, os.getuid())  # srun steps only into its user's own jobs

    def qstat() -> str:
        return backend.run("qstat", ["-g", "t", "-s", "r", "-u", "*", "-xml"]).stdout

    alloc = steps.find_allocation(cfg.cluster.state_dir, job_id, environ, record=record, qstat=qstat)
    if alloc is None:
        raise ShimError(f"{PROG}: error: Unable to confirm allocation for job {job_id}: Invalid job id specified",
                        f"{PROG}: Check SLURM_JOB_ID environment variable. Expired or invalid job {job_id}", code=1)
    base = steps.export_env(environ, req.export)
    for k, v in job_variables(alloc, cfg).items():
        base.setdefault(k, v)
    qrsh_env = getattr(backend, "env", None) or dict(os.environ)
    deadline = time.time() + req.time * 60 if req.get("time") else None
    try:
        res = steps.run_step(req, alloc, base_env=base, state_dir=cfg.cluster.state_dir,
                             qrsh=lambda words: backend.argv("qrsh", words), qrsh_env=qrsh_env, deadline=deadline)
    except steps.StepError as e:
        raise ShimError(f"{PROG}: error: Unable to create step for job {job_id}: {e}", code=1) from None
    return res.rc


# ---------------------------------------------------------------------------------------------
# Outside an allocation: a new job


QRSH_NO_ARG = frozenset({"-h", "-notify"})
QRSH_DROPPED = frozenset({"-o", "-e", "-j", "-wd", "-S", "-w", "-t", "-tc", "-r", "-a", "-cwd"})


def qrsh_flags(qsub_argv: list[str]) -> list[str]:
    """qsub's resource translation, as qrsh flags: qrsh takes the same -q/-N/-pe/-l/-hold_jid/-A/
    -P/-p/-m/-M/-h/-notify; the batch-only ones (output files, shell, array, rerun, start time)
    go; the job's own process chdirs itself, so Grid Engine starts it in / (never a directory others can write)."""
    out: list[str] = []
    i = 0
    while i < len(qsub_argv):
        a = qsub_argv[i]
        if a == "-terse":
            i += 1
        elif a in QRSH_NO_ARG:
            out.append(a)
            i += 1
        elif a == "-pe":
            out += qsub_argv[i:i + 3]
            i += 3
        elif a in QRSH_DROPPED:
            i += 1 if a == "-cwd" else 2
        else:
            out += qsub_argv[i:i + 2]
            i += 2
    return out + ["-wd", "/"]


def token_name(token: str) -> str:
    return f"{token}.json"


def read_token(state_dir: str, token: str) -> dict:
    """What the job srun made says about itself (its id; at the end its exit code), from the
    user's private ``srun/`` directory."""
    return state.read_from(state_dir, None, "srun", token_name(token)) or {}


def new_job(o: sources.Options, req: steps.StepRequest, environ: dict[str, str], cfg, t: Table) -> int:
    from ..translate import qsub

    user = pwd.getpwuid(os.getuid())
    host = steps.short_host()
    ctx = qsub.Context(prog=PROG, cwd=os.getcwd(), script_name=os.path.basename(str(req.argv[0])),
                       user=user.pw_name, uid=user.pw_uid, gid=os.getgid(), host=host, environ=environ)
    sub = qsub.build(o, cfg, ctx)
    backend = backends.get(cfg)
    # qrsh prints Grid Engine's own commlib errors to the terminal when qmaster is away; ask a
    # cheap question first so that srun can say it as Slurm does.
    if backend.run("qconf", ["-ss"]).returncode != 0:
        raise ShimError(f"{PROG}: error: Unable to allocate resources: Unable to contact slurm controller "
                        "(connect failure)", code=1)
    flags = qrsh_flags(sub.argv)
    asked = sub.payload.get("asked") or {}
    if any(asked.values()) or o.test_only:
        res = backend.run("qrsh", ["-w", "v", *flags, "-now", "no", "true"])
        if res.returncode != 0:
            raise common.refusal(PROG, "Unable to allocate resources", res.stderr + res.stdout, asked)
    if o.test_only:
        slots = sub.payload["ntasks"] * sub.payload["cpus_per_task"]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        print(f"{PROG}: Job 0 to start at {stamp} using {slots} processors on nodes {host} in partition "
              f"{sub.payload['partition']}", file=sys.stderr)
        return 0
    sdir = cfg.cluster.state_dir
    token = uuid.uuid4().hex
    record = {k: v for k, v in sub.payload.items() if k not in ("script", "environ", "args")}
    now = time.time()
    record.update({"user": user.pw_name, "uid": user.pw_uid, "submit_time": now, "sub": now, "umask": _umask(),
                   "command": " ".join(req.argv), "interactive": True})
    payload = {
        "req": dict(req),
        "record": record,
        "environ": steps.export_env(environ, req.export),
        "state_dir": sdir,
        "token": token,
        "qrsh": backend.argv("qrsh", []),
    }
    immediate = o.immediate is not None
    try:  # the payload (the whole exported environment) goes in a private file, never on argv
        boot = steps.boot_argv(sdir, payload, "job_main")
    except steps.StepError as e:
        raise ShimError(f"{PROG}: error: Unable to allocate resources: {e}", code=1) from None
    argv = [*flags, "-now", "yes" if immediate else "no", "-pty", "y" if req.pty else "n", *steps.quoted(boot)]
    if o.verbose:
        print(f"{PROG}: qrsh {' '.join(argv[:len(flags) + 4])} ...", file=sys.stderr)
    env = getattr(backend, "env", None) or dict(os.environ)
    env = {k: v for k, v in env.items() if k not in ("JOB_ID", "SGE_TASK_ID")}
    got: dict[str, int] = {}

    def on_signal(sig, frame):
        got.setdefault("sig", sig)
        info = read_token(sdir, token)
        if isinstance(info.get("job_id"), int):
            backend.run("qdel", [str(info["job_id"])])  # -notify: the step's tasks get SIGTERM first
        elif p.poll() is None:
            p.send_signal(signal.SIGINT)  # qrsh deletes its pending job on SIGINT

    try:
        p = proc.popen(backend.argv("qrsh", argv), env=env)
        old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGHUP)}
        old[signal.SIGINT] = signal.signal(signal.SIGINT, lambda s, f: got.setdefault("sig", s))  # qrsh has it too
        try:
            rc = p.wait()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
    finally:
        steps.drop_payload(sdir, boot[-1])  # the job never started (or it took the file already)
    info = read_token(sdir, token)
    path = state.own_path(sdir, "srun", token_name(token))
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass
    if isinstance(info.get("rc"), int) and not isinstance(info["rc"], bool):
        return info["rc"]
    if "sig" in got:
        return 128 + got["sig"]
    if rc < 0:
        return 128 - rc
    if immediate and rc == 1 and not info:
        raise ShimError(f"{PROG}: error: Unable to allocate resources: Requested nodes are busy", code=1)
    return rc


def _umask() -> int:
    m = os.umask(0o022)
    os.umask(m)
    return m


# ---------------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    environ = dict(os.environ)
    t = table()
    cli, positional = getopt(t, argv)
    first = sources.Options()
    sources.apply(first, t, [(s, v) for s, v in cli if s.long in ("help", "usage", "version")], "cli")
    if first.help or first.usage or first.version:
        return common.usage(first, PROG)
    values.use_site(siteconf.get().cluster.max_array_size)
    o = sources.collect(t, argv, environ=environ, cli=cli)
    warnings = common.fates(o, t, PROG, CLI_ONLY)
    if not positional:
        raise ShimError(f"{PROG}: fatal: No command given to execute.", code=1)
    if not o.quiet:
        for w in warnings:
            print(w, file=sys.stderr)
    if o.verbose:
        common.print_defined_options(o, t, PROG, CLI_ONLY)
    cfg = siteconf.get()
    cluster = o.clusters
    if cluster and cluster != cfg.cluster.name:
        raise ShimError(f"{PROG}: error: No cluster '{cluster}' known; this site has only {cfg.cluster.name}",
                        code=1)
    req = request(o, positional, environ)
    if o.jobid is not None:
        return in_allocation(o, req, environ, cfg, job_id_of(o.jobid))
    return new_job(o, req, environ, cfg, t)
