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
from contextlib import contextmanager

from .. import backends, proc, siteconf, state
from ..errors import ShimError
from ..options import sources, values
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
    cfg = siteconf.get()
    values.use_site(cfg.cluster.max_array_size)
    o = sources.collect(t, argv, script_words=sources.directive_words(text), environ=environ, cli=cli)
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


# What the job needs but nobody else may read: the submission environment and --export's values.
# They go to a file of the user's own (state.write_own: 0600 in a 0700 directory); the job script,
# which Grid Engine keeps world-readable in its spool, names the file ("env_file") instead.
SECRET = ("environ", "export", "export_raw", "export_file")
RECORD_MAX_AGE = 90 * 86400  # the user's records older than this are pruned (a job may wait long)


def names_only(raw: str | None) -> str | None:
    """--export's text with the values left out: "ALL,TOKEN=x,HOME" -> "ALL,TOKEN,HOME"."""
    if raw is None:
        return None
    return ",".join(item.partition("=")[0] for item in raw.split(","))


def public_payload(payload: dict, cfg) -> tuple[dict, str | None, str | None]:
    """(the payload the job script carries, the private file that holds the rest or None, a
    warning). Without the file (the state directory is not set up, or full), the environment
    stays in the script, and the warning says so."""
    name = f"{os.urandom(16).hex()}.json"  # secrets.token_hex(16), without importing secrets
    data = {k: payload.get(k) for k in SECRET}
    if not state.write_own(cfg, "env", name, data):
        return payload, None, (f"{PROG}: warning: could not write the job's environment to a private file under "
                               f"{cfg.cluster.state_dir}: the job script carries it, and other users can read that")
    path = state.own_path(cfg, "env", name)
    out = {k: v for k, v in payload.items() if k not in SECRET}
    mode = payload.get("export") or {}
    out.update({"env_file": path, "export": {"all": bool(mode.get("all", True)), "vars": {}},
                "export_raw": names_only(payload.get("export_raw")), "export_file": None})
    return out, path, None


def public_record(payload: dict) -> dict:
    """The submit record other users may read (squeue, sacct): no environment, no script, and of
    --export and --export-file only the variable names."""
    rec = {k: v for k, v in payload.items() if k not in ("script", "args", "env_file", *SECRET)}
    mode = payload.get("export") or {}
    rec["export"] = {"all": bool(mode.get("all", True)), "vars": sorted(mode.get("vars") or {})}
    rec["export_raw"] = names_only(payload.get("export_raw"))
    ef = payload.get("export_file")
    rec["export_file"] = sorted(ef) if isinstance(ef, dict) else None
    return rec


@contextmanager
def submit_cwd():
    """qsub reads ./.sge_request from its working directory, and the submit agent submits from
    the client's: a request file planted in a shared directory would add options to the job.
    So both submit from "/" (the job's own working directory is in the payload, and the job
    wrapper changes to it, as Slurm's --chdir does); the site's and the user's own request
    files still apply. The old directory is restored for callers that go on (tests)."""
    try:
        fd = os.open(".", getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        fd = None
    os.chdir("/")
    try:
        yield
    finally:
        if fd is not None:
            try:
                os.fchdir(fd)
            except OSError:
                pass
            os.close(fd)


def submit(sub: qsub.Submission, cfg) -> int:
    """Hand the job to Grid Engine; its id. Once Grid Engine has the job, nothing fails the
    submission: bookkeeping that cannot be done adds a warning to ``sub.warnings`` (tools
    resubmit on a non-zero exit, and would make duplicates)."""
    backend = backends.get(cfg)
    payload, env_file, warning = public_payload(sub.payload, cfg)
    sub.after = [warning] if warning else []
    sub.payload["sub"] = payload["sub"] = time.time()  # ties the job's records to this Grid Engine job
    script = wrapper_script(payload)
    job_id = None
    try:
        with submit_cwd():
            if getattr(getattr(cfg, "submit", None), "method", "qsub") == "agent" and backend.name == "gridengine":
                from .. import agent  # the per-user DRMAA submit agent; None: it did not submit, so qsub

                job_id = agent.submit(sub.argv, script, cfg, backend)
            if job_id is None:
                res = backend.run("qsub", sub.argv, input=script)
                if res.returncode != 0:
                    raise common.refusal(PROG, FAILED, res.stderr + res.stdout, sub.payload.get("asked") or {})
                try:
                    job_id = parse_job_id(res.stdout)
                except ValueError:
                    raise ShimError(f"{PROG}: error: Batch job submission failed: unexpected qsub output "
                                    f"{res.stdout!r}", code=1) from None
    except BaseException:
        _unlink(env_file)  # no job (or none known) will read it
        raise
    # the user's records of an older job that had this number (not the new job's, should it
    # have started already: those are written after "sub")
    state.forget(cfg, job_id, before=sub.payload["sub"] - 1, tasks=sub.payload.get("array") or ())
    if not state.record_submit(cfg, job_id, public_record(sub.payload)):
        sub.after.append(f"{PROG}: warning: job {job_id} is queued, but its record could not be written under "
                         f"{cfg.cluster.state_dir}: squeue and sacct show it with Grid Engine's details only")
    return job_id


def _unlink(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass


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
    from ..records import Reader

    backend = backends.get(cfg)
    tasks = sub.array or [None]
    delay = 0.2
    me, sub_t = os.getuid(), sub.payload.get("sub")

    def load() -> dict:
        # the caller's own events of this job (and root's naming the caller): nobody else's
        return Reader(cfg).events(job_id, me, sub_t)

    while True:
        events = load()
        ends = [events.get((t, "end")) for t in tasks]
        cancels = [events.get((t, "cancel")) or events.get((None, "cancel")) for t in tasks]
        if all(e is not None or c is not None for e, c in zip(ends, cancels)):
            codes = [(e.get("exit") or (128 + e["signal"] if e.get("signal") else 0)) if e else 0 for e in ends]
            return max(codes) if codes else 0
        res = backend.run("qstat", ["-j", str(job_id)])
        if res.returncode != 0:  # gone from Grid Engine without an end record: killed hard
            events = load()
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
    for w in sub.after:
        print(w, file=sys.stderr)
    state.prune(cfg, RECORD_MAX_AGE)  # at most once an hour (state keeps the time)
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
    payload = {k: v for k, v in sub.payload.items() if k not in SECRET}  # the job never runs
    with submit_cwd():
        res = backend.run("qsub", ["-h", *argv], input=wrapper_script(payload))
    if res.returncode != 0:
        raise common.refusal(PROG, FAILED, res.stderr + res.stdout, sub.payload.get("asked") or {})
    job_id = parse_job_id(res.stdout)
    backend.run("qdel", [str(job_id)])
    slots = sub.payload["ntasks"] * sub.payload["cpus_per_task"]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    print(f"{PROG}: Job {job_id} to start at {stamp} using {slots} processors on nodes "
          f"{os.uname().nodename.split('.')[0]} in partition {sub.payload['partition']}", file=sys.stderr)
    return 0


