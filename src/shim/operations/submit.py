"""One submission path, for sbatch, salloc, srun (outside an allocation) and ``slurm-shim explain``:

    options -> translate.qsub.build (a JobRequest and the qsub argv) -> SubmitRecord (the facts of
    this submission) -> the job script (runtime.boot) -> the backend (the daemon's DRMAA session, else qsub) ->
    Grid Engine's refusal in Slurm's words -> the job id -> the submit record (state)

What the commands share before that is here too: the first pass (--help/--usage/--version), the
"No cluster '...' known" check, the submission context (user, host, directory) and umask, and
--export (``options/export.py``). Commands call these and never name a Grid Engine command.
"""

from __future__ import annotations

import os
import sys
import time

from ..gridengine import backends
from ..store import state
from ..errors import ShimError
from ..slurm.request import MISSING, SECRET, SubmitRecord, submit_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..slurm.options.getopt import Parsed, Table
    from ..slurm.options.sources import Options
    from ..gridengine.translate.qsub import Context, Submission

RECORD_MAX_AGE = 90 * 86400  # the user's records older than this are pruned (a job may wait long)
WRAP_SCRIPT = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{}\n"


# --- before translation ---------------------------------------------------------------------------

def first_pass(t: Table, cli: Parsed) -> Options | None:
    """--help, --usage or --version on the command line: the Options that say which (the command
    prints it and exits before anything else is read), else None."""
    from ..slurm.options import sources

    first = sources.Options()
    sources.apply(first, t, [(s, v) for s, v in cli if s.long in ("help", "usage", "version")], "cli")
    return first if first.help or first.usage or first.version else None


def command_options(t: Table, argv: list[str], environ: dict[str, str]):
    """salloc's and srun's options (they read no script): (first, None, None) when the first pass
    found --help/--usage/--version, else (None, options from every source, positional words)."""
    from .. import siteconf
    from ..slurm.options import sources, values
    from ..slurm.options.getopt import getopt

    cli, positional = getopt(t, argv)
    first = first_pass(t, cli)
    if first is not None:
        return first, None, None
    values.use_site(siteconf.get().cluster.max_array_size)
    return None, sources.collect(t, argv, environ=environ, cli=cli), positional


def check_cluster(prog: str, cluster: str | None, cfg) -> None:
    """-M/--clusters naming another cluster than this site's."""
    if cluster and cluster != cfg.cluster.name:
        raise ShimError(f"{prog}: error: No cluster '{cluster}' known; this site has only {cfg.cluster.name}", code=1)


def umask() -> int:
    m = os.umask(0o022)
    os.umask(m)
    return m


def context(prog: str, script_name: str, environ: dict[str, str], cwd: str | None = None) -> Context:
    """The facts of the submission that are not options: who, where from."""
    import pwd

    from ..gridengine.translate import qsub

    user = pwd.getpwuid(os.getuid())
    return qsub.Context(prog=prog, cwd=cwd or os.getcwd(), script_name=script_name, user=user.pw_name,
                        uid=user.pw_uid, gid=os.getgid(), host=os.uname().nodename.split(".")[0], environ=environ,
                        capabilities=_Capabilities())


class _Capabilities:
    """The site's Grid Engine's capabilities for the translator, probed (qsub -help) only when a
    translation asks for one (a multi-node layout asks for ``par``)."""

    __slots__ = ("_caps",)

    def __init__(self):
        self._caps = None

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if self._caps is None:
            from .. import siteconf

            self._caps = backends.get(siteconf.get()).capabilities
        return getattr(self._caps, name)


def capabilities() -> _Capabilities:
    """The capabilities as the translator sees them (srun and salloc: before their translation)."""
    return _Capabilities()


def export_mode(text: str | None, environ: dict[str, str]) -> dict:
    """--export's text as the job gets it: {"all": bool, "vars": {name: value}} (options/export.py)."""
    from ..slurm.options import export

    return export.mode(text, environ)


def read_export_file(spec: str | None, prog: str = "sbatch") -> dict[str, str] | None:
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
        raise ShimError(f"{prog}: error: Unable to read --export-file {spec}", code=1) from None
    sep = b"\0" if b"\0" in data else b"\n"
    env = {}
    for item in data.split(sep):
        k, eq, v = item.decode("utf-8", "replace").partition("=")
        if eq and k:
            env[k] = v
    return env


def check_hosts(prog: str, o: Options, cfg) -> None:
    """-w/-x name hosts Grid Engine must know (Slurm: "Invalid node name specified")."""
    names: list[str] = []
    for key in ("nodelist", "exclude"):
        v = o.get(key)
        if v:
            from ..slurm.hostlist import expand

            names += v if isinstance(v, list) else expand(str(v))
    if not names:
        return
    known = backends.get(cfg).exec_hosts()
    if known is not None and any(n not in known for n in names):
        raise ShimError(f"{prog}: error: Batch job submission failed: Invalid node name specified", code=1)


def check_dependency(prog: str, checks, cfg, known=None) -> None:
    """The release's KNOWN_DEPENDENCY rule (24.11, 26.05): an afterok/afternotok dependency
    (``checks``, the request's ``dep_checks``: (kind, ["G" or "G_t", ...])) on a job the controller
    does not know is refused: ``<prog>: error: <lead-in>: Job dependency problem``, exit 1, nothing
    submitted. A job is known while Grid Engine has it, and for MinJobAge after it ended (the shim's
    end and cancel records), as a job stays in slurmctld. ``known(ids)``: of these ids the ones
    known, None when that cannot be told (then nothing is refused, as 22.05 refuses nothing)."""
    from ..slurm import releases

    if not checks or not releases.current().has(releases.KNOWN_DEPENDENCY):
        return
    ids = sorted({int(str(i).partition("_")[0]) for _kind, named in checks for i in named})
    found = (known or _known_jobs(cfg))(ids)
    if found is not None and set(ids) - found:
        from ..slurm.options.values import submit_failed

        raise submit_failed(prog, "Job dependency problem")


def check_fits(prog: str, o: Options, cfg) -> None:
    """A job no partition of its request could ever hold, refused at submission where the release
    does so (releases.NODE_CONFIG_AT_SUBMIT: 24.11 alone; 22.05 and 26.05 take it and it pends):
    "Requested node configuration is not available", exit 1, in each command's words (sbatch
    "Batch job submission failed", srun "Unable to allocate resources", salloc "Job
    submit/allocate failed"), after "CPU count per node can not be satisfied" where one node's
    share is too many CPUs (nodeinfo.node_config_fault; fixtures/slurm-24.11/oracle-sizes.txt).
    A job held at submission (-H) is not looked at, as 24.11 does not. A minimum node count (-N)
    above every partition's ``nodes`` list is told from the site config alone; the CPUs of the
    partitions' nodes only by asking Grid Engine (nodeinfo.partition_cpus, one qhost -q -xml),
    and only for a request of more than one CPU or node, never for the common one-CPU job."""
    from ..slurm import releases

    if not releases.current().has(releases.NODE_CONFIG_AT_SUBMIT) or o.hold:
        return
    lo, hi = o.nodes if isinstance(o.nodes, tuple) else (o.nodes, o.nodes) if isinstance(o.nodes, int) else (0, None)
    members = [m for m in str(o.partition or cfg.default_partition).split(",") if m in cfg.partitions]
    sizes = [len(cfg.partitions[m].nodes or ()) for m in members]
    cpt, per_node = o.cpus_per_task or 1, o.ntasks_per_node or 0
    ntasks = o.ntasks or (per_node or 1) * (lo or 1)
    if sizes and lo and all(0 < n < lo for n in sizes):
        fault: tuple[str, ...] | None = ()
    elif not members or (ntasks * cpt <= 1 and (lo or 1) <= 1):
        return  # (one CPU on one node: every node holds it, no question asked)
    else:
        from . import nodeinfo

        known = nodeinfo.partition_cpus(cfg, members) or {}
        faults = [nodeinfo.node_config_fault(known.get(m, []), lo or 1, hi, ntasks, cpt, per_node) for m in members]
        fault = faults[0] if all(f is not None for f in faults) else None
    if fault is not None:
        from ..gridengine.translate.qsub import refused

        raise refused(prog, "Requested node configuration is not available", *fault)


def _known_jobs(cfg):
    """``check_dependency``'s default ``known``: Grid Engine's jobs (one qstat -j), then the ones
    it lacks that ended or were cancelled within MinJobAge (the shim's records)."""
    def known(ids: list[int]) -> set[int] | None:
        try:
            found = backends.get(cfg).find_jobs(ids).found()
        except Exception:  # BackendUnavailable and the like: Grid Engine cannot tell
            return None
        if found is None:
            return None
        missing = set(ids) - found
        if missing:
            from . import jobs

            found |= set(jobs.recent_events(cfg, time.time(), only=missing))
        return found
    return known


def free_seats(o: Options, cfg) -> None:
    """-L a:1|b:1 (any one of them, 26.05): the free seats and the totals of each alternative now,
    for the translation (values.either_license: the first with its seats free, else the first; an
    alternative above its license's total is refused, as 26.05 does), as ``o.licenses["free"]``
    and ``["total"]``. Grid Engine has no "any one of": the job asks for the one chosen."""
    lic = o.licenses
    if isinstance(lic, dict) and lic.get("op") == "or":
        free, total = license_seats(cfg, [name for name, _ in lic["items"]])
        o.licenses = {**lic, "free": free, "total": total}


def license_free(cfg, names: list[str]) -> dict[str, int]:
    """{license: free seats} of these licenses (license_seats)."""
    return license_seats(cfg, names)[0]


def license_seats(cfg, names: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """({license: free seats}, {license: total}) of these licenses of the site config: the global
    host's total (complex_values), less the seats of the jobs Grid Engine runs; ({}, {}) when it
    would not say."""
    from . import jobs

    try:
        totals = backends.get(cfg).host_complex_values("global") or {}
        used: dict[str, int] = {}
        for r in jobs.list_jobs(cfg).records:
            if r.state in ("RUNNING", "SUSPENDED", "COMPLETING") and r.licenses and "|" not in r.licenses:
                for item in r.licenses.split(","):
                    name, _, count = item.partition(":")
                    used[name] = used.get(name, 0) + int(count or 1)
    except Exception:  # Grid Engine cannot tell: the first alternative
        return {}, {}
    free, total = {}, {}
    for name in names:
        c = cfg.licenses.get(name)
        value = totals.get(c.complex) if c is not None else None
        if value is not None:
            try:
                total[name] = int(float(value))
            except ValueError:
                continue
            free[name] = total[name] - used.get(name, 0)
    return free, total


def reservation_flags(prog: str, o: Options, cfg, user: str) -> list[str]:
    """--reservation=NAME[,NAME...] as Grid Engine's ``-ar <id>``: the advance reservation of that
    name (``qrsub -N``) that the user may use (its ``acl_list`` names the user or an access list
    holding the user, or is empty; its ``xacl_list`` does not). As Slurm 22.05's
    validate_job_resv/_valid_job_access_resv (reservation.c): a name no reservation has is
    ESLURM_RESERVATION_INVALID, one the user may not use ESLURM_RESERVATION_ACCESS; every name of
    a list must pass (_get_resv_list), and the job goes to the first (Grid Engine takes one -ar)."""
    text = o.get("reservation")
    if not text:
        return []
    from ..gridengine.translate.qsub import refused

    backend = backends.get(cfg)
    chosen: str | None = None
    for name in [w for w in text.split(",") if w]:
        ars = backend.reservations(name)
        if ars is None:
            raise refused(prog, "Unable to contact slurm controller (connect failure)")
        ars = [ar for ar in ars if ar["state"] not in ("d", "x")]
        if not ars:
            raise refused(prog, "Requested reservation is invalid")
        usable = [ar for ar in ars if _may_use(backend, ar, user)]
        if not usable:
            raise refused(prog, "Access denied to requested reservation")
        chosen = chosen or usable[0]["id"]
    return ["-ar", chosen] if chosen else []


def _may_use(backend, ar: dict, user: str) -> bool:
    """Grid Engine's rule for submitting into an advance reservation: in its acl (a user or an
    @access list) when it has one, and not in its xacl."""
    def member(words: list[str]) -> bool:
        for w in words:
            if w == user or (w.startswith("@") and user in (backend.userset_entries(w[1:]) or [])):
                return True
        return False

    if member(ar.get("xacl") or []):
        return False
    return not ar.get("acl") or member(ar["acl"])


# --- sbatch's batch script ---------------------------------------------------------------------------

def read_script(prog: str, positional: list[str], wrap: str | None, stdin) -> tuple[bytes, str, list[str]]:
    """(script bytes, job name default, script args)."""
    if wrap is not None:
        if positional:
            raise ShimError(f"{prog}: error: Script arguments not permitted with --wrap option", code=1)
        return WRAP_SCRIPT.format(wrap).encode(), "wrap", []
    if positional:
        path = positional[0]
        try:
            with open(path, "rb") as f:
                data = f.read()
        except (OSError, ValueError):  # ValueError: a NUL in the name
            raise ShimError(f"{prog}: error: Unable to open file {path}", code=1) from None
        return data, os.path.basename(path), positional[1:]
    data = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read()
    if isinstance(data, str):
        data = data.encode()
    return data, "sbatch", []


def check_script(prog: str, data: bytes) -> None:
    if not data:
        raise ShimError(f"{prog}: error: Batch script is empty!", code=1)
    if not data.startswith(b"#!"):
        raise ShimError(
            f"{prog}: error: This does not look like a batch script.  The first",
            f"{prog}: error: line must start with #! followed by the path to an interpreter.",
            f"{prog}: error: For instance: #!/bin/sh",
            code=1,
        )


def batch(argv: list[str], environ: dict[str, str], stdin=None, cwd: str | None = None, prog: str = "sbatch"):
    """sbatch's request, everything up to Grid Engine: (options, submission, site config); the
    submission is None for --help/--usage/--version. Pure but for reading the script (and, for
    -w/-x, asking Grid Engine which hosts it has)."""
    import base64

    from .. import siteconf
    from ..slurm.options import sources, values
    from ..slurm.options.getopt import getopt
    from ..slurm.options.table import command_table
    from ..gridengine.translate import qsub

    t = command_table(prog)
    cli, positional = getopt(t, argv)
    first = first_pass(t, cli)
    if first is not None:
        return first, None, None
    pre = sources.Options()
    sources.apply(pre, t, [(s, v) for s, v in cli if s.long == "wrap"], "cli")
    wrap = pre.wrap if pre.wrap is not None else environ.get("SBATCH_WRAP")
    data, default_name, args = read_script(prog, positional, wrap, stdin if stdin is not None else sys.stdin)
    check_script(prog, data)
    text = data.decode("utf-8", "replace")
    cfg = siteconf.get()
    values.use_site(cfg.cluster.max_array_size)
    o = sources.collect(t, argv, script_words=sources.directive_words(text), environ=environ, cli=cli)
    ctx = context(prog, default_name, environ, cwd)
    warnings = sources.fates(o, t, prog)
    free_seats(o, cfg)
    sub = qsub.build(o, cfg, ctx)
    check_fits(prog, o, cfg)
    warnings = qsub.bound_warnings(warnings, o, prog, ctx.capabilities)  # --hint etc. that Grid Engine binds
    check_hosts(prog, o, cfg)
    resv = reservation_flags(prog, o, cfg, ctx.user)
    sub.argv += resv
    sub.record = SubmitRecord.of(
        sub.request,
        ar=resv[1] if resv else "",
        script=base64.b64encode(data).decode("ascii"),
        args=args,
        environ=environ,
        export=export_mode(o.raw.get("export"), environ),
        export_raw=o.raw.get("export"),
        export_file=read_export_file(o.raw.get("export_file"), prog),
        get_user_env=o.get_user_env is not None,
        umask=umask(),
        user=ctx.user,
        uid=ctx.uid,
        submit_time=time.time(),
        command=os.path.abspath(positional[0]) if positional and o.wrap is None else None,
        submit_line=submit_line(prog, argv, len(args or ())),
    )
    sub.warnings = warnings + list(sub.warnings)  # the options' fates, then the translation's (a dependency on one task)
    return o, sub, cfg


# --- the job script and the call to Grid Engine ----------------------------------------------------

def job_script(payload: dict) -> bytes:
    """The script Grid Engine runs: the shim's job wrapper with the payload on its stdin."""
    import base64
    import json

    from ..runtime import boot

    body = base64.b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode("ascii")
    lines = [body[i:i + 76] for i in range(0, len(body), 76)]
    return boot.script("run", comment="slurm-shim job wrapper: runs the Slurm batch script carried below as Slurm would.",
                       stdin="\n".join(lines))


class submit_cwd:
    """qsub reads ./.sge_request from its working directory, and the daemon's DRMAA session submits from
    the client's: a request file planted in a shared directory would add options to the job.
    So every submission is made from "/" (the job's own working directory is in the payload, and
    the job wrapper changes to it, as Slurm's --chdir does); the site's and the user's own
    request files still apply. The old directory is restored for callers that go on (tests)."""

    def __enter__(self) -> None:
        try:
            self.fd = os.open(".", getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            self.fd = None
        os.chdir("/")

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            try:
                os.fchdir(self.fd)
            except OSError:
                pass
            os.close(self.fd)


def queue(prog: str, failed: str, argv: list[str], script: bytes, cfg, asked: dict, agent: bool = False,
          sub: float | None = None) -> int:
    """Hand a job to Grid Engine (from "/"; through the daemon's DRMAA session when ``agent`` and the site
    uses one): its id, or Grid Engine's refusal in Slurm's words (``failed`` is the command's
    lead-in: "Batch job submission failed", "Job submit/allocate failed"). ``sub``: the clock the
    job's payload carries, by which its job wrapper's records name this submission."""
    from ..gridengine.engine import Refused

    backend = backends.get(cfg)
    seen = None
    if sub is not None:
        def seen() -> int | None:
            return state.job_of_submission(cfg, sub, sub - 1)
    try:
        with submit_cwd():
            return backend.submit(argv, script, agent=agent, seen=seen)
    except Refused as e:
        raise refusal(prog, failed, e.text, asked or {}) from None


def command_line(prog: str, argv: list[str], interactive: bool = False, **how) -> str:
    """-v's line: the Grid Engine command the submission runs (its name, not its path); ``how``:
    ops.interactive's ``now`` and ``pty``."""
    from ..gridengine import ops

    tool, args = ops.interactive(argv, **how) if interactive else ops.submit(argv)
    return f"{prog}: {tool} {' '.join(args)}"


def shell_words(argv: list[str]) -> str:
    """The submission as one shell line (``slurm-shim explain``)."""
    import shlex

    from ..gridengine import ops

    tool, args = ops.submit(argv)
    return shlex.join([tool, *args])


def record(cfg, job_id: int, rec: SubmitRecord) -> bool:
    """The submit record other users may read (squeue, sacct): False when it could not be written."""
    return state.record_submit(cfg, job_id, rec.public().to_dict())


NO_PRIVATE = ("{prog}: error: {failed}: no private directory of your own under {where} for the job's "
              "environment and script (see `slurm-shim doctor`)")


def private_payload(rec: SubmitRecord, cfg, prog: str, failed: str = "Batch job submission failed"
                    ) -> tuple[SubmitRecord, str]:
    """(what the job script carries, the job's private file). The environment, --export's values,
    the script and its arguments go to a file of the user's own (0600 in a 0700 directory:
    ``state.write_private``); the job script, which Grid Engine keeps world-readable in its spool,
    names the file and carries its SHA-256. Without such a file nothing is submitted: ShimError."""
    name = f"{os.urandom(16).hex()}.json"  # secrets.token_hex(16), without importing secrets
    path = state.write_private(cfg, "env", name, rec.secrets())
    if path is None:
        raise ShimError(NO_PRIVATE.format(prog=prog, failed=failed, where=os.path.join(cfg.cluster.state_dir, "users")),
                        code=1)
    if rec.array:  # an array's tasks share the file: the last to end removes it (state.drop_env_file)
        _count(path, len(rec.array))
    with open(path, "rb") as f:  # the bytes just written, in the user's own 0700 directory
        digest = state.sha256_hex(f.read())
    return rec.without_secrets(path, digest), path


def _count(path: str, n: int) -> None:
    """``<name>.tasks`` beside an array job's private file: how many tasks have yet to end."""
    try:
        state.atomic_write(path[:-5] + state.ENV_TASKS, str(int(n)), 0o600)
    except OSError:
        pass  # the file then stays until prune finds the job gone


def alive_jobs(cfg):
    """For state.prune: which of some job ids Grid Engine still has (one qstat), None when it
    would not say."""
    def alive(ids: list[int]) -> set[int] | None:
        try:
            return backends.get(cfg).find_jobs(ids).found()
        except Exception:  # BackendUnavailable and the like: prune nothing
            return None
    return alive


def note_job(path: str, job_id: int) -> None:
    """``<name>.job`` beside a job's private file: the job id, by which prune asks Grid Engine
    whether the job is gone."""
    try:
        state.atomic_write(path[:-5] + ".job", str(int(job_id)), 0o600)
    except OSError:
        pass


# --- the commands' submissions -----------------------------------------------------------------------

FAILED = "Batch job submission failed"


def submit_batch(sub: Submission, cfg, prog: str = "sbatch") -> tuple[int, SubmitRecord, list[str]]:
    """sbatch: hand the job to Grid Engine; (its id, the record, warnings to print after the id).
    Once Grid Engine has the job, nothing fails the submission: bookkeeping that cannot be done
    adds a warning (tools resubmit on a non-zero exit, and would make duplicates)."""
    rec = sub.record
    check_dependency(prog, rec.get("dep_checks"), cfg)
    carried, env_file = private_payload(rec, cfg, prog)
    after: list[str] = []
    now = time.time()  # ties the job's records to this Grid Engine job
    rec, carried = rec.replace(sub=now), carried.replace(sub=now)
    try:
        job_id = queue(prog, FAILED, sub.argv, job_script(carried.to_dict()), cfg, rec.asked, agent=True, sub=now)
    except BaseException:
        for f in (env_file, env_file[:-5] + state.ENV_TASKS):
            _unlink(f)  # no job (or none known) will read it
        raise
    note_job(env_file, job_id)
    # the user's records of an older job that had this number (not the new job's, should it
    # have started already: those are written after "sub")
    state.forget(cfg, job_id, before=now - 1, tasks=rec.array or ())
    if not record(cfg, job_id, rec):
        after.append(f"{prog}: warning: job {job_id} is queued, but its record could not be written under "
                     f"{cfg.cluster.state_dir}: squeue and sacct show it with Grid Engine's details only")
    sub.record = rec
    return job_id, rec, after


def test_only(sub: Submission, cfg, prog: str = "sbatch") -> int:
    """--test-only: Grid Engine checks the job can ever run (-w e) and gives it an id, which is
    released at once (Slurm, too, spends a job id on a test)."""
    argv = [a for a in sub.argv if a != "-h"]
    if "-w" not in argv:
        argv += ["-w", "e"]
    rec = sub.record
    carried = rec.replace(**{k: MISSING for k in SECRET})  # the job never runs: no script, nothing secret
    job_id = queue(prog, FAILED, ["-h", *argv], job_script(carried.to_dict()), cfg, rec.asked)
    backends.get(cfg).cancel([str(job_id)])
    print(will_run_line(prog, job_id, rec.ntasks * rec.cpus_per_task, os.uname().nodename.split('.')[0],
                        rec.partition), file=sys.stderr)
    return 0


def will_run_line(prog: str, job_id: int, cpus: int, nodes: str, partition: str, now: float | None = None) -> str:
    """--test-only's answer, as slurm_job_will_run words it: "Job N to start at <time> using C
    processors on nodes H in partition P"; 26.05 has a stray "a" after the time
    (releases.TEST_ONLY_STRAY_A: sbatch's and srun's, as asked of 26.05.5)."""
    from ..slurm import releases

    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now))
    stray = " a" if releases.current().has(releases.TEST_ONLY_STRAY_A) else ""
    return f"{prog}: Job {job_id} to start at {stamp}{stray} using {cpus} processors on nodes {nodes} in partition " \
           f"{partition}"


# sbatch --wait asks Grid Engine whether its job still exists first this long after it starts
# waiting, then at doubling intervals up to the second figure (seconds): its answer comes from the
# job's end records in the store (local files, read every 0.2-2 s), and qmaster is asked only for a
# job killed so hard that nothing wrote its end (raw qdel of a waiting job, a lost host).
QMASTER_ASKS = (2.0, 60.0)
# ... and the waiting sbatch of one user on one host share one answer (store/waits.py): an answer
# younger than this (seconds) is every waiter's, so N of them cost qmaster at most one qstat -j
# every QMASTER_SHARE seconds together, not N/60 a second (issue 29: a swarm's waiters).
QMASTER_SHARE = 5.0


def wait_for(job_id: int, rec: SubmitRecord, cfg, clock=time.monotonic, sleep=time.sleep) -> int:
    """sbatch --wait: block until every task has ended; the highest exit code, as Slurm. A job
    Grid Engine no longer has and that left no end record ended unseen: 1. QMASTER_ASKS says how
    often that is asked; the question is shared (store/waits.py): N waiters of one user on one
    host cost qmaster at most one ``qstat -j`` of all their jobs every QMASTER_SHARE seconds
    together, not N. Without a private directory of the user's own, each waiter asks for its job
    alone, as before."""
    from ..store import waits
    from ..store.records import Reader

    backend = backends.get(cfg)
    tasks = rec.array or [None]
    delay = 0.2
    me, sub_t = os.getuid(), rec.sub
    ask_in, interval_max = QMASTER_ASKS
    next_ask = clock() + ask_in
    shared, registered = None, False

    def load() -> dict:
        # the caller's own events of this job (and root's naming the caller): nobody else's
        return Reader(cfg).events(job_id, me, sub_t)

    def found(ids: list[int]) -> set[int] | None:
        owners = backend.job_owners(ids)
        return None if owners is None else set(owners)

    try:
        while True:
            events = load()
            ends = [events.get((t, "end")) for t in tasks]
            cancels = [events.get((t, "cancel")) or events.get((None, "cancel")) for t in tasks]
            if all(e is not None or c is not None for e, c in zip(ends, cancels)):
                codes = [(e.get("exit") or (128 + e["signal"] if e.get("signal") else 0)) if e else 0 for e in ends]
                return max(codes) if codes else 0
            if not registered:  # still running at the first read: a waiter the next asker asks about
                shared, registered = waits.register(cfg, job_id, QMASTER_SHARE, clock, sleep), True
            if clock() >= next_ask:
                # True/False; None: Grid Engine would not say (asked again at the next ask)
                there, again = shared.ask(found) if shared else (backend.exists(job_id), None)
                if there is False:  # gone from Grid Engine: its end may have been written since
                    events = load()
                    if all(events.get((t, "end")) for t in tasks):
                        continue
                    return 1
                if again is None:
                    ask_in = min(ask_in * 2, interval_max)
                next_ask = again if again is not None else clock() + ask_in
            sleep(delay)
            delay = min(delay * 1.5, 2.0)
    finally:
        if shared is not None:
            shared.close()


def allocate(o: Options, environ: dict[str, str], cfg, holder: bytes, prog: str = "salloc") -> tuple[int, SubmitRecord]:
    """salloc: submit the allocation job, whose script ``holder`` (run by the job wrapper) holds
    the slots; (job id, its record)."""
    import base64

    from ..gridengine.translate import qsub

    ctx = context(prog, "interactive", environ)
    free_seats(o, cfg)
    sub = qsub.build(o, cfg, ctx)
    check_fits(prog, o, cfg)
    check_dependency(prog, sub.request.get("dep_checks"), cfg)
    resv = reservation_flags(prog, o, cfg, ctx.user)
    sub.argv += resv
    backend = backends.get(cfg)
    partition = sub.request.partition
    pe = None if "-pe" in sub.argv else backend.first_task_pe(qsub.allocation_pes(cfg, partition))
    argv = qsub.allocation_argv(sub.argv, cfg, partition, pe)
    now = time.time()
    rec = SubmitRecord.of(
        sub.request.replace(stdout="/dev/null", stderr=None, stdin=None),
        ar=resv[1] if resv else "",
        script=base64.b64encode(holder).decode("ascii"),
        args=[],
        **env_carrier(cfg, environ, prog),
        export={"all": True, "vars": {}},
        export_raw=None,
        umask=umask(),
        user=ctx.user,
        uid=ctx.uid,
        submit_time=now,
        sub=now,
        command="salloc",
        interactive=True,
    )
    if (o.verbose or 0) > 1:  # (the shim's own line, from -vv: -v prints the release's lines alone)
        print(command_line(prog, argv), file=sys.stderr)
    try:
        job_id = queue(prog, "Job submit/allocate failed", argv, job_script(rec.to_dict()), cfg, rec.asked)
    except BaseException:
        _unlink(rec.get("env_file"))  # no job (or none known) will read it
        raise
    record(cfg, job_id, rec)
    return job_id, rec


def env_carrier(cfg, environ: dict[str, str], prog: str = "salloc") -> dict:
    """How an allocation job gets salloc's environment: a 0600 file in the user's private
    ``env/`` directory named in the payload (the job script Grid Engine spools is world-readable;
    salloc removes the file once the allocation is granted). Without one, nothing is submitted:
    ShimError."""
    name = f"{os.urandom(16).hex()}.json"
    path = state.write_private(cfg, "env", name, {"environ": environ})
    if path is None:
        raise ShimError(NO_PRIVATE.format(prog=prog, failed="Job submit/allocate failed",
                                          where=os.path.join(cfg.cluster.state_dir, "users")), code=1)
    return {"env_file": path}


def interactive(o: Options, environ: dict[str, str], cfg, script_name: str, command: str,
                prog: str = "srun") -> tuple[Submission, list[str], SubmitRecord]:
    """srun outside an allocation: the job's translation as qrsh flags, checked with Grid Engine
    first when resources were asked for (or --test-only), and its record (which the job writes
    when it starts: srun's job has no script for Grid Engine to keep)."""
    from ..gridengine.translate import qsub

    ctx = context(prog, script_name, environ)
    free_seats(o, cfg)
    sub = qsub.build(o, cfg, ctx)
    backend = backends.get(cfg)
    # qrsh prints Grid Engine's own commlib errors to the terminal when qmaster is away; ask a
    # cheap question first so that srun can say it as Slurm does.
    if backend.scheduler().returncode != 0:
        raise ShimError(f"{prog}: error: Unable to allocate resources: Unable to contact slurm controller "
                        "(connect failure)", code=1)
    check_fits(prog, o, cfg)
    check_dependency(prog, sub.request.get("dep_checks"), cfg)
    resv = reservation_flags(prog, o, cfg, ctx.user)
    sub.argv += resv
    flags = qsub.qrsh_flags(sub.argv)
    asked = sub.request.asked or {}
    if any(asked.values()) or o.test_only:
        res = backend.verify_interactive(flags)
        if res.returncode != 0:
            raise refusal(prog, "Unable to allocate resources", res.stderr + res.stdout, asked)
    now = time.time()
    rec = SubmitRecord.of(sub.request, user=ctx.user, uid=ctx.uid, submit_time=now, sub=now, umask=umask(),
                          command=command, interactive=True, ar=resv[1] if resv else "")
    return sub, flags, rec


def interactive_job(o: Options, req, environ: dict[str, str], cfg, prog: str = "srun") -> int:
    """srun outside an allocation: a new job whose one process, the shim's step launcher
    (``runtime.steps.job_main``), runs the step ``req`` (a ``steps.StepRequest``) as the job's
    step 0, in the foreground (``GridEngine.interactive``: streaming output, stdin, a terminal for
    --pty, waiting in the queue unless -I); srun's exit code.

    The job's protocol: the payload (the request, the record, the exported environment) goes in a
    private file that the far side takes (``steps.boot_argv``; never on a command line, nor left
    behind when the job never started); the job reports its id, and at its end its exit code, in a
    token file of the user's private ``srun/`` (``state.write_token``). The exit code is the job's
    when it reported one; else 128+signal when srun was signalled (or qrsh killed); -I's qrsh
    failing before the job started is Slurm's "Requested nodes are busy"; a job that started and
    ended without reporting (killed from outside) is 1 even when qrsh says 0; else qrsh's."""
    from ..runtime import steps

    sub, flags, rec = interactive(o, environ, cfg, os.path.basename(str(req.argv[0])), " ".join(req.argv), prog)
    backend = backends.get(cfg)
    if o.test_only:
        print(will_run_line(prog, 0, rec.ntasks * rec.cpus_per_task, steps.short_host(), rec.partition),
              file=sys.stderr)
        return 0
    sdir = cfg.cluster.state_dir
    token = os.urandom(16).hex()  # uuid.uuid4().hex's 32 hex digits, without importing uuid
    payload = dict(  # what steps.job_main reads; qrsh: how the job's own tasks reach other hosts
        req=req.to_json(),
        record=rec.to_dict(),
        environ=steps.export_env(environ, req.export),
        state_dir=sdir,
        token=token,
        qrsh=backend.interactive_argv([]),
    )
    immediate = o.immediate is not None
    try:  # the payload (the whole exported environment) goes in a private file, never on argv
        boot = steps.boot_argv(sdir, payload, "job_main")
    except steps.StepError as e:
        raise ShimError(f"{prog}: error: Unable to allocate resources: {e}", code=1) from None
    if (o.verbose or 0) > 1:  # (the shim's own line, from -vv, as sbatch's and salloc's)
        print(command_line(prog, flags, interactive=True, now=immediate, pty=req.pty) + " ...", file=sys.stderr)

    def started() -> int | None:
        job = _token(sdir, token).get("job_id")
        return job if isinstance(job, int) else None

    try:
        rc, sig = backend.interactive(flags, now=immediate, pty=bool(req.pty), command=steps.quoted(boot),
                                      started=started)
    finally:
        steps.drop_payload(sdir, boot[-1])  # the job never started (or it took the file already)
    info = _token(sdir, token)
    state.remove_token(sdir, token)
    if isinstance(info.get("rc"), int) and not isinstance(info["rc"], bool):
        return info["rc"]
    if sig is not None:
        return 128 + sig
    if rc < 0:
        return 128 - rc
    if immediate and rc == 1 and not info:
        raise ShimError(f"{prog}: error: Unable to allocate resources: Requested nodes are busy", code=1)
    if rc == 0 and "job_id" in info:
        return 1  # the job started but ended without reporting (killed from outside): qrsh's 0 is no success
    return rc


def _token(state_dir: str, token: str) -> dict:
    """What the job srun made says about itself (its id; at the end its exit code), from the
    user's private ``srun/`` directory."""
    return state.read_token(state_dir, token) or {}


def _unlink(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass


def refusal(prog: str, failed: str, text: str, asked: dict) -> ShimError:
    """Grid Engine's refusal of a job in Slurm's words. With -w e/-w v Grid Engine only says "no
    suitable queues"; what was asked for tells which of Slurm's messages applies. ``failed`` is the
    command's own lead-in ("Batch job submission failed", "Unable to allocate resources", ...)."""
    msg = " ".join(line for line in text.splitlines() if line and line != "Exiting.")
    if "no suitable queues" in msg:
        if asked.get("licenses") and not (asked.get("mem") or asked.get("gpus")):
            return ShimError(f"{prog}: error: {failed}: Invalid license specification", code=1)
        lines = [f"{prog}: error: Memory specification can not be satisfied"] if asked.get("mem") else []
        lines.append(f"{prog}: error: {failed}: Requested node configuration is not available")
        return ShimError(*lines, code=1)
    return ShimError(f"{prog}: error: {failed}: {msg or 'Grid Engine refused the job'}", code=1)
