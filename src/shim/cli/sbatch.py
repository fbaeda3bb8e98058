"""sbatch: submit a batch script to Grid Engine as Slurm would.

Pipeline: argv -> script -> #SBATCH directives -> input variables -> options (one table) ->
fates (refuse/warn) -> translate.qsub -> qsub (the backend) -> state record -> Slurm's output.
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import shlex
import sys
import time

from .. import backends, proc, siteconf, state
from ..errors import ShimError
from ..options import sources
from ..options.getopt import Table, getopt
from ..options.table import command_table
from ..translate import qsub
from . import common

PROG = "sbatch"
FAILED = "Batch job submission failed"
WRAP_SCRIPT = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{}\n"


def table() -> Table:
    return command_table(PROG)


def read_script(positional: list[str], o: sources.Options, stdin) -> tuple[bytes, str, list[str]]:
    """(script bytes, job name default, script args)."""
    if o.wrap is not None:
        if positional:
            raise ShimError(f"{PROG}: error: Script arguments not permitted with --wrap option", code=1)
        return WRAP_SCRIPT.format(o.wrap).encode(), "wrap", []
    if positional:
        path = positional[0]
        try:
            with open(path, "rb") as f:
                data = f.read()
        except (OSError, ValueError):  # ValueError: a NUL in the name
            raise ShimError(f"{PROG}: error: Unable to open file {path}", code=1) from None
        return data, os.path.basename(path), positional[1:]
    data = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read()
    if isinstance(data, str):
        data = data.encode()
    return data, "sbatch", []


def check_script(data: bytes) -> None:
    if not data:
        raise ShimError(f"{PROG}: error: Batch script is empty!", code=1)
    if not data.startswith(b"#!"):
        raise ShimError(
            f"{PROG}: error: This does not look like a batch script.  The first",
            f"{PROG}: error: line must start with #! followed by the path to an interpreter.",
            f"{PROG}: error: For instance: #!/bin/sh",
            code=1,
        )


def export_mode(raw: str | None, environ: dict[str, str]) -> dict:
    """--export: {"all": bool, "vars": {name: value}} as Slurm reads ALL, NONE and lists."""
    if raw is None or raw.strip().upper() == "ALL":
        return {"all": True, "vars": {}}
    items = [x for x in raw.split(",") if x]
    mode = {"all": False, "vars": {}}
    for item in items:
        if item.upper() in ("ALL",):
            mode["all"] = True
        elif item.upper() in ("NONE", "NIL"):
            continue
        elif "=" in item:
            k, _, v = item.partition("=")
            mode["vars"][k] = v
        elif item in environ:
            mode["vars"][item] = environ[item]
    return mode


def read_export_file(spec: str | None) -> dict[str, str] | None:
    """--export-file=<file|fd>: NUL- or newline-separated NAME=value lines."""
    if spec is None:
        return None
    try:
        if spec.isdigit():
            with os.fdopen(os.dup(int(spec)), "rb") as f:
                data = f.read()
        else:
            with open(spec, "rb") as f:
                data = f.read()
    except OSError:
        raise ShimError(f"{PROG}: error: Unable to read --export-file {spec}", code=1) from None
    sep = b"\0" if b"\0" in data else b"\n"
    env = {}
    for item in data.split(sep):
        k, eq, v = item.decode("utf-8", "replace").partition("=")
        if eq and k:
            env[k] = v
    return env


def prepare(argv: list[str], environ: dict[str, str], stdin=None, cwd: str | None = None):
    """Everything up to the qsub call: (options, submission, script args). Pure but for reading the script."""
    t = table()
    cli, positional = getopt(t, argv)
    cli_opts = sources.Options()
    sources.apply(cli_opts, t, [(s, v) for s, v in cli if s.long in ("help", "usage", "version")], "cli")
    if cli_opts.help or cli_opts.usage or cli_opts.version:
        return cli_opts, None, None
    pre = sources.Options()
    sources.apply(pre, t, [(s, v) for s, v in cli if s.long == "wrap"], "cli")
    if pre.wrap is None and "SBATCH_WRAP" in environ:
        pre["wrap"] = environ["SBATCH_WRAP"]
    data, default_name, args = read_script(positional, pre, stdin if stdin is not None else sys.stdin)
    check_script(data)
    text = data.decode("utf-8", "replace")
    o = sources.collect(t, argv, script_words=sources.directive_words(text), environ=environ, cli=cli)
    cfg = siteconf.get()
    user = pwd.getpwuid(os.getuid())
    ctx = qsub.Context(prog=PROG, cwd=cwd or os.getcwd(), script_name=default_name, user=user.pw_name,
                       uid=user.pw_uid, gid=os.getgid(), host=os.uname().nodename.split(".")[0],
                       environ=environ)
    warnings = common.fates(o, t, PROG)
    sub = qsub.build(o, cfg, ctx)
    check_hosts(o, cfg)
    sub.payload.update({
        "script": base64.b64encode(data).decode("ascii"),
        "args": args,
        "environ": environ,
        "export": export_mode(o.raw.get("export"), environ),
        "export_raw": o.raw.get("export"),
        "export_file": read_export_file(o.raw.get("export_file")),
        "get_user_env": o.get_user_env is not None,
        "umask": _umask(),
        "user": user.pw_name,
        "uid": user.pw_uid,
        "submit_time": time.time(),
        "command": os.path.abspath(positional[0]) if positional and o.wrap is None else None,
    })
    sub.warnings = warnings
    return o, sub, cfg


def _umask() -> int:
    m = os.umask(0o022)
    os.umask(m)
    return m


def wrapper_script(payload: dict) -> bytes:
    """The script Grid Engine runs: the shim's job wrapper with the payload on its stdin."""
    body = base64.b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode("ascii")
    lines = [body[i:i + 76] for i in range(0, len(body), 76)]
    return (
        "#!/bin/sh\n"
        "# slurm-shim job wrapper: runs the Slurm batch script carried below as Slurm would.\n"
        f"exec {' '.join(shlex.quote(w) for w in proc.shim_python('jobwrap', 'run'))} <<'__SLURM_SHIM_PAYLOAD__'\n"
        + "\n".join(lines)
        + "\n__SLURM_SHIM_PAYLOAD__\n"
    ).encode()


def parse_job_id(out: str) -> int:
    first = out.strip().splitlines()[0] if out.strip() else ""
    return int(first.split(".")[0])


def submit(sub: qsub.Submission, cfg) -> int:
    backend = backends.get(cfg)
    script = wrapper_script(sub.payload)
    if getattr(getattr(cfg, "submit", None), "method", "qsub") == "agent" and backend.name == "gridengine":
        from .. import agent  # the per-user DRMAA submit agent; None: it did not submit, so qsub

        job_id = agent.submit(sub.argv, script, cfg, backend)
        if job_id is not None:
            record = {k: v for k, v in sub.payload.items() if k not in ("script", "environ", "args")}
            state.record_submit(cfg, job_id, record)
            return job_id
    res = backend.run("qsub", sub.argv, input=script)
    if res.returncode != 0:
        raise common.refusal(PROG, FAILED, res.stderr + res.stdout, sub.payload.get("asked") or {})
    try:
        job_id = parse_job_id(res.stdout)
    except ValueError:
        raise ShimError(f"{PROG}: error: Batch job submission failed: unexpected qsub output {res.stdout!r}",
                        code=1) from None
    record = {k: v for k, v in sub.payload.items() if k not in ("script", "environ", "args")}
    state.record_submit(cfg, job_id, record)
    return job_id


def check_hosts(o: sources.Options, cfg) -> None:
    """-w/-x name hosts Grid Engine must know (Slurm: "Invalid node name specified")."""
    names = []
    for key in ("nodelist", "exclude"):
        v = o.get(key)
        if v:
            from ..hostlist import expand

            names += v if isinstance(v, list) else expand(str(v))
    if not names:
        return
    res = backends.get(cfg).run("qconf", ["-sel"])
    known = {h.split(".")[0] for h in res.stdout.split()} | set(res.stdout.split())
    if res.returncode == 0 and any(n not in known for n in names):
        raise ShimError(f"{PROG}: error: Batch job submission failed: Invalid node name specified", code=1)


def wait_for(job_id: int, sub: qsub.Submission, cfg) -> int:
    """--wait: block until every task has ended; the highest exit code, as Slurm."""
    backend = backends.get(cfg)
    tasks = sub.array or [None]
    delay = 0.2
    while True:
        events = state.load_events(cfg, job_id)
        ends = [events.get((t, "end")) for t in tasks]
        cancels = [events.get((t, "cancel")) or events.get((None, "cancel")) for t in tasks]
        if all(e is not None or c is not None for e, c in zip(ends, cancels)):
            codes = [(e["exit"] or (128 + e["signal"] if e["signal"] else 0)) if e else 0 for e in ends]
            return max(codes) if codes else 0
        res = backend.run("qstat", ["-j", str(job_id)])
        if res.returncode != 0:  # gone from Grid Engine without an end record: killed hard
            events = state.load_events(cfg, job_id)
            ends = [events.get((t, "end")) for t in tasks]
            if all(ends):
                continue
            return 1
        time.sleep(delay)
        delay = min(delay * 1.5, 2.0)


def main(argv: list[str]) -> int:
    environ = dict(os.environ)
    o, sub, cfg = prepare(argv, environ)
    if sub is None:
        return common.usage(o, PROG)
    for w in sub.warnings:
        print(w, file=sys.stderr)
    cluster = o.clusters or o.cluster
    if cluster and cluster != cfg.cluster.name:
        raise ShimError(f"{PROG}: error: No cluster '{cluster}' known; this site has only {cfg.cluster.name}",
                        code=1)
    if o.verbose:
        common.print_defined_options(o, table(), PROG)
    if o.test_only:
        return test_only(sub, cfg)
    job_id = submit(sub, cfg)
    if o.verbose:
        print(f"{PROG}: qsub {' '.join(sub.argv)}", file=sys.stderr)
    if o.parsable:
        print(f"{job_id};{cluster}" if cluster else str(job_id))
    elif not o.quiet:
        suffix = f" on cluster {cluster}" if cluster else ""
        print(f"Submitted batch job {job_id}{suffix}")
    sys.stdout.flush()
    if o.wait:
        return wait_for(job_id, sub, cfg)
    return 0


def test_only(sub: qsub.Submission, cfg) -> int:
    """--test-only: Grid Engine checks the job can ever run (-w e) and gives it an id, which is
    released at once (Slurm, too, spends a job id on a test)."""
    backend = backends.get(cfg)
    argv = [a for a in sub.argv if a != "-h"]
    if "-w" not in argv:
        argv += ["-w", "e"]
    res = backend.run("qsub", ["-h", *argv], input=wrapper_script(sub.payload))
    if res.returncode != 0:
        raise common.refusal(PROG, FAILED, res.stderr + res.stdout, sub.payload.get("asked") or {})
    job_id = parse_job_id(res.stdout)
    backend.run("qdel", [str(job_id)])
    slots = sub.payload["ntasks"] * sub.payload["cpus_per_task"]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    print(f"{PROG}: Job {job_id} to start at {stamp} using {slots} processors on nodes "
          f"{os.uname().nodename.split('.')[0]} in partition {sub.payload['partition']}", file=sys.stderr)
    return 0


