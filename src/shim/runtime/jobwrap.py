"""The job wrapper: what Grid Engine runs for every job submitted through sbatch.

It turns a Grid Engine job into what a Slurm batch job looks like from inside: the script copied at
submit time runs with its own interpreter, arguments and working directory; stdout/stderr go to
Slurm's files (patterns, truncate or append, merged by default); the environment holds Slurm's
SLURM_* variables with Slurm's values (array indices are Slurm's, never Grid Engine's task
numbers); the time limit and --signal are enforced as Slurm does (signal, SIGTERM, then SIGKILL
after KillWait); qdel (sent as a notify signal) becomes SIGTERM first. It records start and end,
with the real exit code, in the shim's state directory, and never exits 99/100 (Grid Engine's
requeue/error codes).

Reads its payload (base64 JSON) on stdin: the job's submit record, read typed (``SubmitRecord``,
as the submitting command wrote it; request.py). Imports only the standard library and light shim
modules.
"""

from __future__ import annotations

import base64
import errno
import os
import pwd
import signal
import sys
import time

from ..slurm import hostlist
from ..slurm.request import SubmitRecord
from .. import proc
from ..store import records, state
from . import boot, jobenv, stepd

LAUNCH_FAILED_SIGNAL = 53  # Slurm shows a job whose launch failed as ExitCode 0:53
LIMIT_RECHECK = 15.0  # seconds between looks at the job's record for a changed time limit
SIGNAL_POLL = 0.5  # seconds between looks for scancel's signal requests (records.signal_requests)


_last: dict = {}
"""What the last-resort end record needs, kept as soon as the payload is read: the configured
state directory (never a default) and the submission stamp."""


def read_payload() -> SubmitRecord:
    """The payload sbatch's job script carries on stdin (boot.payload_text): the job's submit
    record (``SubmitRecord``, its fields as the command wrote them), remembered for run()'s
    last-resort record."""
    p = SubmitRecord.from_dict(boot.payload_from(sys.stdin.buffer.read()))
    if isinstance(p.state_dir, str):
        _last["state_dir"] = p.state_dir
    _last["stamp"] = _stamp(p)
    return p


def _stamp(p: SubmitRecord) -> dict:
    """What every event this job writes carries: {"sub": sbatch's clock at submission} when known,
    and "owner", the job's owner as Grid Engine runs it (the user the wrapper runs as): whose
    job a reader takes it for once Grid Engine has forgotten it (records.candidates)."""
    sub = p.get("sub")
    out = {"sub": sub} if isinstance(sub, (int, float)) and not isinstance(sub, bool) else {}
    try:
        out["owner"] = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        pass
    return out


def _environ(p: SubmitRecord, state_dir: str) -> tuple[dict[str, str], SubmitRecord]:
    """The submission environment: from the job's private file sbatch wrote (``env_file``, which
    must be in an ``env/`` directory of the user's own, the user's own file, and have the SHA-256
    ``env_hash`` the payload carries), else from the payload (older payloads). The file also holds
    --export's values, the script and its arguments: the record returned has them."""
    path = p.env_file
    if isinstance(path, str):
        digest = p.env_hash
        data = state.read_env_file(state_dir, path, digest if isinstance(digest, str) else None)
        if data is not None:
            p = p.replace(**{k: data[k] for k in ("export", "export_raw", "export_file", "script", "args")
                             if k in data})
            env = data.get("environ")
            if isinstance(env, dict):
                return {str(k): str(v) for k, v in env.items()}, p
    env = p.environ
    return ({str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}), p


def _drop_private(p: SubmitRecord, state_dir: str, task: int | None) -> None:
    """The job's private file, at its end (F-31): removed, for an array when its last task ends
    (state.drop_env_file). A job submitted with --requeue keeps it for its next run: prune
    removes it once Grid Engine no longer has the job."""
    path = p.env_file
    if isinstance(path, str) and p.requeue is not True:
        state.drop_env_file(state_dir, path, task=task is not None)


def _ge_task(p: SubmitRecord) -> int | None:
    array = p.array
    t = os.environ.get("SGE_TASK_ID", "undefined")
    if not array or not t.isdigit():
        return None
    return int(array[int(t) - 1])


def login_env(user: pwd.struct_passwd, timeout: float = 8) -> dict[str, str]:
    """The user's login environment, read as Slurm does for --get-user-env and --export=NONE: a
    login shell that prints its environment (a fixed program; no user text), with a time limit."""
    base = {"HOME": user.pw_dir, "USER": user.pw_name, "LOGNAME": user.pw_name,
            "SHELL": user.pw_shell or "/bin/sh", "PATH": "/usr/local/bin:/usr/bin:/bin"}
    try:
        r = proc.run([user.pw_shell or "/bin/sh", "-l", "-c", "env -0"], env=base, timeout=timeout, cwd=user.pw_dir)
    except proc.SpawnError:
        r = None
    env = dict(base, MAIL=f"/var/mail/{user.pw_name}")
    if r is not None and r.returncode == 0:
        for item in r.stdout.split("\0"):
            k, eq, v = item.partition("=")
            if eq and k not in ("_", "PWD", "OLDPWD", "SHLVL"):
                env[k] = v
    return env


def _base_env(p: SubmitRecord, user: pwd.struct_passwd) -> tuple[dict[str, str], SubmitRecord]:
    """Slurm's --export: ALL (default) is the submission environment; NONE (or a list without ALL)
    is the user's login environment plus the listed variables; --export-file replaces both. With
    the record, now holding what the job's private file kept (_environ)."""
    environ, p = _environ(p, p.state_dir)  # may also bring --export's values
    mode = p.export or {"all": True, "vars": {}}
    if p.get("export_file") is not None:  # (get: an unset field reads as None)
        env = dict(p.export_file)
    elif mode.get("all"):
        env = environ
        raw = p.get("export_raw")
        listed = raw is not None and raw.strip().upper() != "ALL"  # e.g. --export=FOO=1,ALL
        if p.get_user_env or listed:
            env = {**login_env(user), **env}
            env["SLURM_GET_USER_ENV"] = "1"
        if listed:
            env["SLURM_EXPORT_ENV"] = raw
    else:
        env = login_env(user)
        env["SLURM_GET_USER_ENV"] = "1"
        env["SLURM_EXPORT_ENV"] = p.export_raw or "NONE"
    env.update(mode.get("vars") or {})
    return env, p


OUTPUT_DIR_GRACE = 10.0  # seconds to wait for a missing output directory (see _open_output)


class NoGpu(Exception):
    """No device is free for the job on this host: the launch fails (a device is never shared)."""


def granted_gpus(environ, count: int, complex_name: "str | tuple[str, ...] | None" = None) -> list[int] | None:
    """The device indices Grid Engine granted the job, where a GPU complex is a resource map
    (RSMAP: Open Cluster Scheduler, Gridware, Univa): execd sets ``SGE_HGR_<complex>`` to the ids
    it granted on this host, space-separated (``0 1``). Every complex the site maps GPUs to counts
    (``gpu_complexes``: a typed request asks for its type's complex), their ids together. None
    where there is no such grant (SGE 8.1.9 has no RSMAP: then the shim claims devices itself,
    ``claim_gpus``), or where the ids are not device indices or not the count asked for (a map of
    names such as ``gpu0``, or a grant for another host's share): then too the shim's own claims
    decide."""
    if count <= 0 or not any(k.startswith("SGE_HGR_") for k in environ):
        return None
    if complex_name is None:
        from .. import siteconf

        complex_name = gpu_complexes(siteconf.get())
    names = (complex_name,) if isinstance(complex_name, str) else complex_name
    words = [w for cx in names for w in environ.get(f"SGE_HGR_{cx}", "").split()]
    if len(words) != count or not all(w.isdigit() and w.isascii() for w in words):
        return None
    ids = [int(w) for w in words]
    return ids if len(set(ids)) == count else None


def gpu_complexes(cfg) -> tuple[str, ...]:
    """Every Grid Engine complex the site config counts GPUs with: ``[gres.gpu].complex`` (an
    untyped request, and a typed one where the type selects the model with ``select``) and each
    ``[gres.gpu.types.<type>].complex`` (a typed request's own consumable), in that order, once
    each. The host complex that ``select`` names holds a model's name, not a count: not one."""
    gres = (cfg.get("gres") or {}).get("gpu") or {}
    out = [gres.get("complex") or "gpu"]
    for t in (gres.get("types") or {}).values():
        cx = (t or {}).get("complex") or ""
        if cx and cx not in out:
            out.append(cx)
    return tuple(out)


def gpus_in(values, complexes: "str | tuple[str, ...]") -> int:
    """How many GPUs ``values`` ({complex: value}) hold through the GPU complexes: for a job, its
    hard requests (qstat's ``hard_request``), the GPUs it holds; for a host, its
    ``complex_values``, the GPUs it has. The sum over the complexes (a per-type complex counts
    its type's devices, disjoint from the others'); a value that is no number, or below 0, is 0."""
    n = 0
    for cx in (complexes,) if isinstance(complexes, str) else complexes:
        v = values.get(cx)
        if v is None:
            continue
        try:
            n += max(0, int(float(v)))
        except (ValueError, OverflowError):
            pass
    return n


GPU_TRIES = 20
_held: dict[tuple[str, int], str] = {}  # (host, index) -> the claim file this process made
_lock_fds: dict[str, int] = {}  # claim file -> the open fd whose flock says the claim is alive


def claim_gpus(state_dir: str, host: str, count: int, job_id: int, backend=None) -> list[int]:
    """Pick device indices for a GPU job, as Slurm's gres plugin binds devices. Grid Engine counts
    the host's GPUs as a consumable but binds none, so jobs on one host claim the lowest free
    indices with files ``<state_dir>/gpus/<host>.<index>[.<n>]`` (``gpus/`` is root's sticky
    directory made at install) holding ``pid jobid``, made with exclusive creation. The claimant
    (the job wrapper, or srun's job, which lives as long as the job) holds an ``flock`` on its
    claim file from before the name exists until the job ends; the kernel lets it go when that
    process goes, however it ends.

    Nobody can remove another user's file there, so a claim that is not live (its lock gone,
    or not a job Grid Engine runs here) is superseded by a new file beside it (the first free ``<n>``),
    never deleted; names that are no claim (a FIFO, a link) are skipped the same way. A claim is live
    only if someone holds a lock on it (``LOCK_EX|LOCK_NB`` fails), and Grid Engine runs that
    job on this host for the file's owner with GPUs (asked once, only when there is such a
    claim; no answer: the lock alone). Nothing is judged through ``/proc``, which ``hidepid=2``
    hides (security review 3, F-24). After creating its claim, a job looks again: if another live claim of the index
    appeared meanwhile, it withdraws and tries again, so two jobs never keep one device.
    Indices stay below the host's GPU count. NoGpu when no device is free."""
    if count <= 0:
        return []
    d = state.gpu_dir(state_dir)
    if d is None:
        raise NoGpu(f"{os.path.join(state_dir, 'gpus')} is not the shim's GPU directory (made by slurm-shim cluster up)")
    judge = _GpuJudge(host, backend)
    mine: list[int] = []
    bound = count
    try:
        for attempt in range(GPU_TRIES):
            claims, names = _scan_claims(d, host)
            taken = {i for i, cs in sorted(claims.items()) if any(judge.live(c) for c in cs)}
            free = [i for i in range(bound) if i not in taken and i not in mine]
            if len(free) < count - len(mine) and bound == count:
                bound = max(count, judge.capacity())
                free = [i for i in range(bound) if i not in taken and i not in mine]
            if len(free) < count - len(mine):
                raise NoGpu(f"no free GPU on {host} ({count} requested, {len(taken)} of {bound} in use)")
            made = []
            for i in free[:count - len(mine)]:
                used = names.get(i, set())
                gen = next(g for g in range(len(used) + 1) if g not in used)  # a name not in use
                path = _create_claim(d, host, i, gen, job_id)
                if path is not None:
                    made.append(i)
            judge.may_refresh = judge.running is not None
            again, _names = _scan_claims(d, host)
            for i in made:
                ours = _held[(host, i)]
                if any(c.path != ours and judge.live(c) for c in again.get(i, [])):
                    _drop(host, i)  # someone claimed it at the same time: both withdraw, both retry
                else:
                    mine.append(i)
            if len(mine) == count:
                return sorted(mine)
            time.sleep(0.01 * (attempt + 1) * (1 + os.getpid() % 7))
        raise NoGpu(f"could not claim {count} GPU(s) on {host}: too many jobs claiming at once")
    except BaseException:
        for i in mine:
            _drop(host, i)
        raise


class _Claim:
    __slots__ = ("path", "index", "gen", "uid", "pid", "job", "locked")

    def __init__(self, path: str, index: int, gen: int, uid: int, pid: int, job: int, locked: bool):
        self.path, self.index, self.gen, self.uid, self.pid, self.job = path, index, gen, uid, pid, job
        self.locked = locked  # someone holds an flock on it: its claimant lives


def _scan_claims(d: str, host: str) -> tuple[dict[int, list["_Claim"]], dict[int, set[int]]]:
    """The claims of this host's devices: ({index: [claim]}, {index: the generations whose names
    exist}). Anything that is not a small regular file holding ``pid jobid`` (a FIFO, a link, a
    directory, junk) is no claim and is ignored, but its name is taken."""
    import re

    pat = re.compile(re.escape(host) + r"\.([0-9]{1,4})(?:\.([0-9]{1,9}))?")
    out: dict[int, list[_Claim]] = {}
    gens: dict[int, set[int]] = {}
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return out, gens
    for n in names:
        m = pat.fullmatch(n)
        if m is None:
            continue
        index, gen = int(m[1]), int(m[2] or 0)
        gens.setdefault(index, set()).add(gen)
        c = _read_claim(os.path.join(d, n), index, gen)
        if c is not None:
            out.setdefault(c.index, []).append(c)
    return out, gens


def _read_claim(path: str, index: int, gen: int) -> "_Claim | None":
    """A claim: a regular file of at most 64 bytes (opened without following a link or blocking
    on a FIFO), its owner from fstat, and whether a lock is held on it (LOCK_EX|LOCK_NB fails;
    when it succeeds, the lock is let go at once). Never raises."""
    import fcntl
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 64:
            return None
        raw = os.read(fd, 65)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            locked = False
        except BlockingIOError:
            locked = True
    except OSError:
        return None
    finally:
        os.close(fd)  # (our own test lock, if we got it, goes with the fd)
    parts = raw.split()
    if len(raw) > 64 or len(parts) != 2 or not all(x.isdigit() and len(x) <= 12 for x in parts):
        return None
    return _Claim(path, index, gen, st.st_uid, int(parts[0]), int(parts[1]), locked)


def _create_claim(d: str, host: str, index: int, gen: int, job_id: int) -> str | None:
    """Make a claim file with its content in place from the first moment (a temporary file of
    ours, hard-linked to the claim's name, which fails if the name exists). None if it exists."""
    import tempfile

    import fcntl

    name = f"{host}.{index}" if gen == 0 else f"{host}.{index}.{gen}"
    path = os.path.join(d, name)
    fd, tmp = tempfile.mkstemp(prefix=".claim-", dir=d)  # (not inherited by the job's processes)
    try:
        os.fchmod(fd, 0o644)
        os.write(fd, f"{os.getpid()} {int(job_id)}\n".encode())
        fcntl.flock(fd, fcntl.LOCK_EX)  # held from before the name exists until _drop (or our end)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return None
        _lock_fds[path], fd = fd, -1
    finally:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
    _held[(host, index)] = path
    return path


def _drop(host: str, index: int) -> None:
    path = _held.pop((host, index), None)
    if path is not None:
        try:
            os.unlink(path)
        except OSError:
            pass
        fd = _lock_fds.pop(path, None)
        if fd is not None:
            os.close(fd)


class _GpuJudge:
    """Whether a claim is live: locked, and Grid Engine runs its job here with GPUs (asked once,
    only when a claim of another process is locked)."""

    def __init__(self, host: str, backend=None):
        self.host = host
        self.backend = backend
        self.uid = os.getuid()
        self.running: dict[tuple[str, int], int] | None = None  # (owner, job) -> GPUs granted here
        self.counted: dict[tuple[int, int], set[str]] = {}
        self.may_refresh = False

    def live(self, c: "_Claim") -> bool:
        if c.path in _held.values():
            return True
        if not c.locked:  # its claimant is gone (the kernel let its lock go)
            if c.uid == self.uid:
                self._cleanup(c)  # our own stale claim: we may remove it
            return False
        # someone holds its lock: the claimant, or anyone who can open the file (it is readable
        # to all, and a planted file can be locked by its planter); Grid Engine says whether
        # the owner's job runs here with GPUs
        owner = _user_name(c.uid)
        if owner is None:
            return False
        grants = self._running(owner)
        if grants is not None and (owner, c.job) not in grants and self.may_refresh:
            self.may_refresh = False  # a job that started after we asked: ask once more
            self.running = None
            grants = self._running(owner)
        if grants is None:
            return True  # Grid Engine cannot tell: assume the worst, never share a device
        granted = grants.get((owner, c.job), 0)
        seen = self.counted.setdefault((c.uid, c.job), set())
        if c.path in seen:
            return True
        if len(seen) >= granted:
            return False  # more claims than the job has GPUs: the extra ones are not real
        seen.add(c.path)
        return True

    def _cleanup(self, c: "_Claim") -> None:
        try:
            os.unlink(c.path)  # our own stale claim: we may remove it
        except OSError:
            pass

    def _running(self, owner: str) -> dict[tuple[str, int], int] | None:
        if self.running is None:
            self.running = _running_gpu_jobs(self.host, self.backend)
        return self.running

    def capacity(self) -> int:
        return _gpu_capacity(self.host, self.backend)


def _user_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def _backend_and_complex(backend):
    """(backend, the GPU complexes (gpu_complexes), the GPU resource's scope)."""
    from ..gridengine import backends
    from .. import siteconf

    cfg = siteconf.get()
    gres = (cfg.get("gres") or {}).get("gpu") or {}
    return (backend or backends.get(cfg)), gpu_complexes(cfg), gres.get("scope") or "job"


def _running_gpu_jobs(host: str, backend=None) -> dict[tuple[str, int], int] | None:
    """{(owner, job): GPUs it holds on this host} for the running jobs (one qstat), None when
    Grid Engine cannot be asked."""
    try:
        be, cx, scope = _backend_and_complex(backend)
        tasks = be.running_requests(host)
    except Exception:
        return None
    if tasks is None:
        return None
    out: dict[tuple[str, int], int] = {}
    for owner, job, hard in tasks:
        n = gpus_in(hard, cx)
        if n <= 0:
            continue
        key = (owner, job)
        out[key] = out.get(key, 0) + n if scope == "slot" else max(out.get(key, 0), n)
    return out


def _gpu_capacity(host: str, backend=None) -> int:
    """The host's GPU count (its complex values of the GPU complexes, summed: gpus_in), 0 when
    unknown."""
    try:
        be, cx, _scope = _backend_and_complex(backend)
        values = be.host_complex_values(host)
    except Exception:
        return 0
    return 0 if values is None else gpus_in(values, cx)


def release_gpus(state_dir: str, host: str, ids: list[int]) -> None:
    for i in ids:
        _drop(host, i)


def _open_output(path: str, append: bool) -> int:
    """Open a Slurm output file. Tools such as submitit create the log directory only after sbatch
    returns, counting on the scheduler being slower than they are; Grid Engine here starts a job
    within a second, so a missing directory gets a short grace period before the launch fails as
    Slurm's would (FAILED, ExitCode 0:53). A name planted in a directory others may write is
    refused (outfile.open_output)."""
    from .outfile import open_output

    deadline = time.monotonic() + OUTPUT_DIR_GRACE
    delay = 0.05
    while True:
        try:
            return open_output(path, append)
        except FileNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _dep_ids(p: SubmitRecord) -> list[tuple[str, int, str]]:
    """(kind, job, task or "") of the afterok/afternotok checks; malformed entries are skipped."""
    out = []
    checks = p.dep_checks
    for item in checks if isinstance(checks, list) else []:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], list)):
            continue
        kind, ids = item
        for ident in ids:
            job, _, task = str(ident).partition("_")
            if job.isascii() and job.isdigit() and (not task or (task.isascii() and task.isdigit())):
                out.append((str(kind), int(job), task))
    return out


def dep_owners(jobs: list[int], backend=None) -> dict[int, tuple[int | str, float | None]]:
    """{job: (owner, Grid Engine's submission time)} of dependency jobs, from Grid Engine: qstat
    for jobs it still holds, else the accounting file. Jobs it does not know are absent."""
    out: dict[int, tuple[int | str, float | None]] = {}
    try:
        from ..gridengine import backends
        from .. import siteconf
        from ..gridengine import qacct

        cfg = siteconf.get()
        be = backend or backends.get(cfg)
        for j, d in be.details(jobs).items():
            uid = d.get("JB_uid") or ""
            if j in jobs and (d.get("JB_owner") or uid.isdigit()):  # Grid Engine's uid where it gives one
                out[j] = (int(uid) if uid.isascii() and uid.isdigit() else d["JB_owner"], d.get("submit_ts"))
        missing = [j for j in jobs if j not in out]
        if missing:
            for r in qacct.scan_file(qacct.accounting_path(cfg), jobs=missing):
                if r.owner and (r.job not in out or (out[r.job][1] or 0) < r.submit):
                    out[r.job] = (r.owner, float(r.submit) if r.submit else None)
    except Exception:  # Grid Engine cannot tell: the checks fall back to the user's own records
        pass
    return out


def _deps_unsatisfied(p: SubmitRecord, backend=None) -> bool:
    """afterok/afternotok, checked at start (Grid Engine's -hold_jid already waited for the end).
    A dependency's events are read from its owner's directory (its owner as Grid Engine tells
    it; the user's own when Grid Engine no longer knows the job), never from anyone else's."""
    deps = _dep_ids(p)
    if not deps:
        return False
    owners = dep_owners(sorted({j for _, j, _ in deps}), backend)
    for kind, job, task in deps:
        owner, ge_submit = owners.get(job, (os.getuid(), None))
        events = records.Reader(p.state_dir).events(job, owner, ge_submit)
        ends = [d for (t, k), d in events.items() if k == "end" and (not task or str(t) == task)]
        cancelled = any(k == "cancel" for (_t, k) in events)
        if not ends and not cancelled:
            continue  # unknown to the shim: Slurm treats an unknown job as done
        ok = ends and all(d.get("state") == "COMPLETED" for d in ends) and not cancelled
        if (kind == "afterok" and not ok) or (kind == "afternotok" and ok):
            return True
    return False


class Runner:
    def __init__(self, p: SubmitRecord):
        self.p = p
        self.child: proc.Popen | None = None  # type: ignore[name-defined]
        self.cancelled = False
        self.timed_out = False
        self.err_fd: int | None = None  # the job's stderr, for slurmstepd's CANCELLED line
        self.signals_seen: set[str] = set()
        self.next_signal_look = 0.0
        self.cancel_line = False
        self.host = ""  # this host and the job's own id (an array task's), for that line
        self.label = ""
        self.key = ""  # the job's key among its steps' records (state.signal_key), for end_steps
        self.started = 0.0  # when the script started (schedule): a requeue asked before is an earlier run's
        self.requeued = False  # the cancel is scontrol requeue's (on_cancel)

    def say_cancelled(self, sig: int | None = None, why: str | None = None) -> None:
        """slurmstepd's ``*** JOB N ON host CANCELLED AT <time> ... ***`` line on the job's stderr,
        once (slurmstepd's msg_sent), in the release's words (stepd.cancelled)."""
        if self.err_fd is None or self.cancel_line:
            return
        self.cancel_line = True
        try:
            os.write(self.err_fd, stepd.cancelled(f"JOB {self.label}", self.host, why=why, sig=sig).encode())
        except OSError:
            pass

    def poll_signals(self, sdir: str, key: str, ge_sub: float | None, host: str, job_label: str,
                     started: float | None = None) -> None:
        """scancel -s's requests to this job, at most every SIGNAL_POLL seconds (a few directory
        looks; no process is started). As slurmstepd does for the batch step: ``--batch`` signals
        the batch shell alone (kill), ``--full`` the batch shell's whole process group (killpg:
        srun's in it too, and passes the signal on to its tasks as srun does); a request with
        neither is for the steps, which srun's launchers take themselves. SIGTERM or SIGKILL to
        the batch step prints slurmstepd's ``*** JOB ... CANCELLED AT ... ***`` line (26.05: ``DUE to
        SIGNAL Terminated``, or ``Killed``)."""
        now = time.monotonic()
        if now < self.next_signal_look or self.child is None:
            return
        self.next_signal_look = now + SIGNAL_POLL
        for _name, req in records.signal_requests(sdir, None, key, self.signals_seen, ge_sub, started):
            if not (req["batch"] or req["full"]):
                continue
            sig = req["sig"]
            if sig in (signal.SIGTERM, signal.SIGKILL):
                self.host, self.label = host, job_label
                self.say_cancelled(sig)
            try:
                if req["full"]:
                    os.killpg(self.child.pid, sig)
                else:
                    os.kill(self.child.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _group(self, sig: int) -> None:
        if self.child is not None:
            try:
                os.killpg(self.child.pid, sig)
            except ProcessLookupError:
                pass

    def on_cancel(self, signum, frame) -> None:
        # qdel of a -notify job: Grid Engine sends SIGUSR2, then SIGKILL after the queue's notify
        # time. Slurm's scancel sends SIGTERM, then SIGKILL; slurmstepd's line says so first. A
        # requeue (qmod -rj: scontrol requeue's event) says DUE TO JOB REQUEUE, its steps too.
        self.cancelled = True
        requeue = self.requeued = bool(self.key) and requeue_asked(self.p.state_dir, self.key, self.started)
        if requeue:
            tell_steps(self.p.state_dir, self.key, "REQUEUE")
        self.say_cancelled(signal.SIGTERM, why="JOB REQUEUE" if requeue else None)
        self._group(signal.SIGTERM)
        signal.signal(signal.SIGALRM, lambda *a: self._group(signal.SIGKILL))
        signal.alarm(max(1, int(self.p.get("notify_kill", 4))))

    def on_suspend(self, signum, frame) -> None:
        self._group(signal.SIGSTOP)

    def on_continue(self, signum, frame) -> None:
        self._group(signal.SIGCONT)

    def schedule(self, start: float) -> None:
        """Time limit and --signal, as Slurm: SIG at limit-secs, SIGTERM at the limit, SIGKILL after KillWait."""
        self.started = start
        events: list[tuple[float, str, int]] = []
        limit = int(self.p.get("time", -1))
        if limit > 0:
            events.append((start + limit * 60, "term", signal.SIGTERM))
            events.append((start + limit * 60 + int(self.p.get("kill_wait", 30)), "kill", signal.SIGKILL))
        sig = self.p.get("signal")
        if sig and limit > 0:
            target, signum, secs = sig
            events.append((start + max(0, limit * 60 - int(secs)), target, int(signum)))
        self.events = sorted(events)

    def next_timeout(self) -> float | None:
        return max(0.0, self.events[0][0] - time.time()) if self.events else None

    def fire(self) -> None:
        now = time.time()
        while self.events and self.events[0][0] <= now:
            _t, what, sig = self.events.pop(0)
            if what == "term":
                self.timed_out = True
                self.say_cancelled(why="TIME LIMIT")
                if self.key:  # the steps say DUE TO TIME LIMIT as they take the SIGTERM (end_steps)
                    tell_steps(self.p.state_dir, self.key, "TIMEOUT")
                self._group(signal.SIGTERM)
            elif what == "kill":
                self._group(signal.SIGKILL)
            elif what == "batch" and self.child is not None:
                os.kill(self.child.pid, sig)
            else:
                self._group(sig)


def _trusted_dir(path: str, uid: int) -> str | None:
    """``path`` itself, never through a link (every part is lstat'ed and must be a real
    directory), when it is a directory of ``uid`` that nobody else may write, in a directory of
    root's that only root can write, under directories only root or ``uid`` own (others may write
    to one only when it is sticky): Grid Engine's per-job TMPDIR under a tmpdir of root's, where
    nobody can plant, swap or remove anything. None otherwise: under /tmp anyone can make the
    predictable ``<job>.<task>.<queue>`` first, as a link or as a directory of her own, and
    execd takes it (security review 3, F-20)."""
    import stat

    if not path or not os.path.isabs(path):
        return None
    norm = os.path.normpath(path)
    parts = norm.split("/")
    for n in range(1, len(parts) + 1):
        p = "/".join(parts[:n]) or "/"
        try:
            st = os.lstat(p)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return None
        if n == len(parts):
            if st.st_uid != uid or st.st_mode & 0o022:
                return None
        elif n == len(parts) - 1:
            if st.st_uid != 0 or st.st_mode & 0o022:
                return None
        elif st.st_uid not in (0, uid) or (st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX):
            return None
    return norm


def private_base(state_dir: str) -> str | None:
    """Where the job's private files go: Grid Engine's per-job TMPDIR, else its TMP, when
    _trusted_dir trusts it; else the user's private directory in the shim's state directory."""
    uid = os.getuid()
    for var in ("TMPDIR", "TMP"):
        d = _trusted_dir(os.environ.get(var, ""), uid)
        if d is not None:
            return d
    return state.own_dir(state_dir, "srun")


def job_tmpdir(state_dir: str, job_id: int, task: int | None) -> tuple[str, bool] | None:
    """The job's TMPDIR: Grid Engine's per-job directory when _trusted_dir trusts it ((dir,
    False): execd removes it), else a new directory (0700) of the wrapper's own in the user's
    private directory of the state dir ((dir, True): the wrapper removes it at the end); None
    when there is neither. A TMPDIR someone else could have planted is never handed to the job.
    (Grid Engine's directory is in TMPDIR, or only in TMP: root's jobs get only that.)"""
    uid = os.getuid()
    for var in ("TMPDIR", "TMP"):
        d = _trusted_dir(os.environ.get(var, ""), uid)
        if d is not None:
            return d, False
    base = state.own_dir(state_dir, "srun")  # (the user's own, 0700: state.own_dir checks it)
    if base is None:
        return None
    for _ in range(100):
        d = os.path.join(base, f"tmp.{job_id}.{task or 1}.{os.urandom(6).hex()}")
        try:
            os.mkdir(d, 0o700)
            os.chmod(d, 0o700)
            return d, True
        except FileExistsError:
            continue
        except OSError:
            return None
    return None


def write_script(state_dir: str, data: bytes) -> tuple[str, str]:
    """The script, as Slurm copies it: a private file that runs with its own #! interpreter, in a
    new directory (mode 0700) of a private place. (directory, script path); OSError if none."""
    base = private_base(state_dir)
    if base is None:
        raise OSError("no private directory for the job script (TMPDIR, TMP or the state directory)")
    for _ in range(100):  # tempfile.mkdtemp's way (a new name, mode 0700), without its imports
        d = os.path.join(base, f"slurm-shim-{os.urandom(6).hex()}")
        try:
            os.mkdir(d, 0o700)
            os.chmod(d, 0o700)  # whatever the job's umask (the place is private: nobody can swap d)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"no new directory name in {base}")
    path = os.path.join(d, "slurm_script")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o700)
    try:
        os.fchmod(fd, 0o700)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    return d, path


def remove_script(d: str) -> None:
    """The script's directory, at the job's end (whatever else the job put there goes too)."""
    try:
        os.unlink(os.path.join(d, "slurm_script"))
        os.rmdir(d)
    except OSError:
        import shutil

        shutil.rmtree(d, ignore_errors=True)


def _umask_of(p: SubmitRecord) -> int:
    m = p.umask
    return m if isinstance(m, int) and not isinstance(m, bool) and 0 <= m <= 0o777 else 0o022


def _time_of(rec: records.Submitted | None) -> int | None:
    t = rec.time if rec else None
    return t if isinstance(t, int) and not isinstance(t, bool) else None


def main() -> None:
    """The batch step, as Slurm's slurmstepd runs it: record the start; a dependency that can never
    be satisfied cancels the job (DependencyNeverSatisfied); a missing working directory fails
    the launch (JobLaunchFailure); the output files from their patterns with the user's umask; GPUs claimed
    and bound; the script started with the job's SLURM_* environment in its own session; the time
    limit (re-read when scontrol updates it), --signal and scancel's signals enforced (Runner);
    the end recorded with the script's real exit code and state (COMPLETED, FAILED, TIMEOUT,
    CANCELLED). Exit codes 99 and 100 leave as 1 (Grid Engine would requeue or hold the job)."""
    p = read_payload()
    sdir = p.state_dir
    job_id = int(os.environ.get("JOB_ID", "0"))
    task = _ge_task(p)
    _last["task"] = task
    this_host = hostlist.this_host()
    user = pwd.getpwuid(os.getuid())
    start = time.time()
    stamp = _stamp(p)
    # Slurm creates the output files with the submitting user's umask: set before anything is made.
    os.umask(_umask_of(p))
    if os.environ.get("SGE_BINDING_INSTANCE") == "set":  # OCS's CPU binding (--hint, ...), applied here
        from .steps.launch import apply_grant  # where its execd did not (steps/launch.apply_grant)

        apply_grant()

    gpu_ids: list[int] | None = None
    script_dir: list[str] = []
    tmp_made: list[str] = []  # the job's own TMPDIR, when the wrapper made it (job_tmpdir)

    def event(kind: str, data: dict) -> None:
        state.record_event(sdir, job_id, task, kind, {**data, **stamp})

    def finish(exit_code: int, sig: int, st: str, reason: str = "None") -> None:
        state.drop_signals(sdir, state.signal_key(job_id, task))  # scancel's requests to this job
        if gpu_ids:
            release_gpus(sdir, this_host, gpu_ids)
        if script_dir:
            remove_script(script_dir[0])
        if tmp_made:
            import shutil

            shutil.rmtree(tmp_made[0], ignore_errors=True)  # (the user's own 0700 directory; no link is followed)
        _drop_private(p, sdir, task)
        event("end", {"exit": exit_code, "signal": sig, "state": st, "reason": reason, "node": this_host,
                      "start": start})
        code = 128 + sig if sig else exit_code
        os._exit(1 if code in (99, 100) else code)

    def launch_failed(message: str = "", fd: int = -1, sig: int = LAUNCH_FAILED_SIGNAL) -> None:
        """Slurm's JobLaunchFailure: slurmstepd's ``message`` on the job's stderr (``fd``), a start
        event, and the end (FAILED)."""
        if message:
            os.write(fd, stepd.error(this_host, message).encode())
        event("start", {"node": this_host})
        finish(0, sig, "FAILED", "JobLaunchFailure")

    if _deps_unsatisfied(p):
        _never_satisfied(p, sdir, task, event, user.pw_name, this_host)

    env, p = _base_env(p, user)  # (the record now holds what the job's private file kept)
    if env.get("SLURM_SHIM_CONFIG") and "SLURM_SHIM_CONFIG" not in os.environ:
        # the site config the job's own commands use (execd does not pass it to the wrapper): what
        # the wrapper asks of the config (the GPU complex) is then of the job's cell, not the default's
        os.environ["SLURM_SHIM_CONFIG"] = env["SLURM_SHIM_CONFIG"]
    jobenv.keep_ge(env, os.environ)
    hosts = jobenv.pe_hosts(os.environ, this_host)

    # slurmstepd opens the output files (under the working directory where relative), making their
    # missing directories first where the release does (OUTPUT_DIRS_MADE); one it cannot open fails
    # the launch (0:53, nothing written). Then a working directory that does not exist is said twice
    # on the job's stderr and the script runs in /tmp (every release: fixtures/slurm-*/oracle-ends.txt).
    try:
        out_fd, err_fd, in_fd = _stdio(p, job_id, task, user.pw_name, this_host)
    except OSError:
        launch_failed()
    env["PWD"] = _enter_workdir(p.workdir, err_fd, this_host)

    try:
        gpu_ids = _gpus(p, sdir, this_host, job_id)
    except NoGpu as e:
        launch_failed(str(e), err_fd)
    env.update(jobenv.batch_env(p, job_id=job_id, task=task, hosts=hosts, this_host=this_host,
                                user=user.pw_name, uid=user.pw_uid, gid=os.getgid(), gpu_ids=gpu_ids,
                                start=start, environ=env))
    tmp = job_tmpdir(sdir, job_id, task)
    if tmp is None:
        launch_failed("no private TMPDIR: Grid Engine's is not the job's own directory in one of root's, and the "
                      "state directory has no private place for one", err_fd)
    _use_tmpdir(env, tmp, tmp_made)
    _metrics_file(env, user.pw_uid)

    if not isinstance(p.script, str):  # the private file is gone, or not the user's own
        launch_failed(f"cannot read the job's private file {p.get('env_file')}", err_fd)
    try:
        d, script_path = write_script(sdir, base64.b64decode(p.script))
        script_dir.append(d)
    except OSError as e:
        launch_failed(f"cannot write the job script: {e}", err_fd)

    r = _runner(p)
    r.host, r.label, r.key = this_host, env["SLURM_JOB_ID"], state.signal_key(job_id, task)  # (a task's own id)
    event("start", {"node": this_host})
    try:
        r.child = _launch(p, env, script_path, in_fd, out_fd, err_fd)
    except OSError as e:  # a missing #! interpreter (BadInterpreter), or nothing could be started
        finish(*_exec_failed(e, err_fd, this_host, script_path))
    try:
        r.err_fd = os.dup(err_fd)
    except OSError:
        pass
    for fd in {out_fd, err_fd, in_fd}:
        os.close(fd)
    r.schedule(start)
    status = _wait(r, sdir, job_id, task, stamp.get("sub"), this_host, env["SLURM_JOB_ID"], start)
    signal.alarm(0)
    finish(*_ended(r, status, sdir, state.signal_key(job_id, task)))


def _never_satisfied(p: SubmitRecord, sdir: str, task: int | None, event, user_name: str, this_host: str) -> None:
    """Slurm cancels a job whose dependency can never be satisfied (DependencyNeverSatisfied): a
    cancel event, and an end event that says CANCELLED so that accounting does not read the
    wrapper's exit 0 as COMPLETED. The wrapper then leaves (exit 0)."""
    event("cancel", {"uid": os.getuid(), "user": user_name, "was": "PENDING",
                     "reason": "DependencyNeverSatisfied"})
    event("end", {"exit": 0, "signal": 0, "state": "CANCELLED", "reason": "DependencyNeverSatisfied",
                  "node": this_host})
    _drop_private(p, sdir, task)
    os._exit(0)


def _use_tmpdir(env: dict[str, str], tmp: tuple[str, bool], made: list[str]) -> None:
    """The job's private TMPDIR (job_tmpdir: the directory, and whether the wrapper made it) as
    TMPDIR, and TMP where Grid Engine set TMP; one the wrapper made goes at the end (``made``)."""
    env["TMPDIR"] = tmp[0]
    if "TMP" in env:
        env["TMP"] = tmp[0]
    if tmp[1]:
        made.append(tmp[0])


def _gpus(p: SubmitRecord, sdir: str, this_host: str, job_id: int) -> list[int] | None:
    """The job's GPUs: those Grid Engine granted, else claimed on this host (NoGpu when too few
    are free); None when the job asked for none."""
    gpu_ids = None
    if p.gpus:
        gpu_ids = granted_gpus(os.environ, int(p.gpus or 0))
    if p.gpus and gpu_ids is None:
        gpu_ids = claim_gpus(sdir, this_host, int(p.gpus or 0), job_id)
    return gpu_ids


def _stdio(p: SubmitRecord, job_id: int, task: int | None, user_name: str, this_host: str) -> tuple[int, int, int]:
    """The script's stdout, stderr and stdin, opened from Slurm's patterns (slurm-%j.out, or
    slurm-%A_%a.out in an array, when none is given; --open-mode=append); OSError if one cannot be."""
    array_job = bool(p.array)
    default_out = "slurm-%A_%a.out" if array_job else "slurm-%j.out"
    expand = lambda pat: jobenv.expand_pattern(pat, job_id=job_id, task=task, name=p.name,  # noqa: E731
                                               user=user_name, host=this_host, array_job=array_job)
    append = str(p.open_mode or "").startswith("a")
    out_pat = p.stdout or (None if p.stderr and not p.stdout else default_out)
    err_pat = p.stderr
    if out_pat is None:  # only -e given: stdout goes to the default file (Slurm does the same)
        out_pat = default_out
    under = lambda pat: os.path.join(p.workdir or "/", expand(pat))  # noqa: E731  (the wrapper's cwd is /)
    paths = [under(out_pat)] + ([under(err_pat)] if err_pat else [])
    from ..slurm import releases

    if stepd.release().has(releases.OUTPUT_DIRS_MADE):
        for path in paths:
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)  # (0777 less the user's umask)
            except OSError:
                pass  # (the open below says it)
    out_fd = _open_output(paths[0], append)
    err_fd = _open_output(paths[1], append) if err_pat else out_fd
    in_fd = os.open(under(p.stdin), os.O_RDONLY) if p.stdin else os.open(os.devnull, os.O_RDONLY)
    return out_fd, err_fd, in_fd


def _enter_workdir(workdir: str, err_fd: int, host: str) -> str:
    """The job's working directory made the wrapper's, or /tmp where it cannot be, as slurmstepd
    does: "couldn't chdir to `<dir>': <error>: going to /tmp instead", twice on the job's stderr
    (every release printed it twice: fixtures/slurm-*/oracle-ends.txt W). The directory entered."""
    try:
        os.chdir(workdir)
        return workdir
    except OSError as e:
        for _ in range(2):
            os.write(err_fd, stepd.error(host, f"couldn't chdir to `{workdir}': {e.strerror}: going to /tmp "
                                               "instead").encode())
        os.chdir("/tmp")
        return "/tmp"


def _metrics_file(env: dict[str, str], uid: int) -> None:
    """Where the job may leave its own metrics: a file in Grid Engine's TMPDIR (or TMP) when that
    directory is the user's own (``metrics.ENV`` in the job's environment)."""
    from ..gridengine import metrics  # (os only: the file of the job's own metrics)

    for var in ("TMPDIR", "TMP"):
        if (mdir := _trusted_dir(os.environ.get(var, ""), uid)) is not None:
            env[metrics.ENV] = os.path.join(mdir, metrics.FILE_NAME)
            break


def _runner(p: SubmitRecord) -> Runner:
    """The job's Runner, with Grid Engine's notify signals (SIGUSR1, SIGUSR2), SIGCONT and SIGTERM
    handed to it: the wrapper turns them into Slurm's signals."""
    r = Runner(p)
    signal.signal(signal.SIGUSR2, r.on_cancel)
    signal.signal(signal.SIGUSR1, r.on_suspend)
    signal.signal(signal.SIGCONT, r.on_continue)
    signal.signal(signal.SIGTERM, r.on_cancel)
    return r


class BadInterpreter(OSError):
    """The script's ``#!`` names no file (stepd.bad_interpreter): what execve would fail with."""

    def __init__(self, text: str):
        super().__init__(errno.ENOENT, os.strerror(errno.ENOENT))
        self.text = text


def _exec_failed(e: OSError, err_fd: int, host: str, script_path: str) -> tuple[int, int, str, str]:
    """slurmstepd's line on the job's stderr for a script that did not start, and the job's end
    (finish's arguments): a missing interpreter ends the task as execve's ENOENT would, FAILED
    2:0 (every release, oracle-messages.txt E); anything else is the launch's failure (0:53)."""
    if isinstance(e, BadInterpreter):
        os.write(err_fd, stepd.bad_interpreter_line(host, e.text).encode())
        return errno.ENOENT, 0, "FAILED", "None"
    os.write(err_fd, stepd.error(host, f"execve(): {script_path}: {e.strerror}").encode())
    return 0, LAUNCH_FAILED_SIGNAL, "FAILED", "JobLaunchFailure"


def _launch(p: SubmitRecord, env: dict[str, str], script_path: str, in_fd: int, out_fd: int, err_fd: int):
    """The batch script started in its own session: Grid Engine's notify signals reach the wrapper,
    which turns them into Slurm's signals; Grid Engine's final SIGKILL still reaches every process
    of the job through its additional group id (execd_params ENABLE_ADDGRP_KILL). sh only sets
    SLURM_TASK_PID to its own pid and execs the script in place: no user text is part of the
    shell's program, the script and its arguments are plain argv. A script whose ``#!`` names no
    file is not started (BadInterpreter: sh's exec would say ``not found``, exit 127)."""
    missing = stepd.bad_interpreter(script_path, p.workdir)
    if missing is not None:
        raise BadInterpreter(missing)
    launcher = ["/bin/sh", "-c", jobenv.TASK_LAUNCH, script_path]
    return proc.popen([*launcher, *(p.args or [])], env=env, stdin=in_fd, stdout=out_fd,
                      stderr=err_fd, start_new_session=True, close_fds=True)


def _wait(r: Runner, sdir: str, job_id: int, task: int | None, ge_sub: Any, this_host: str,
          slurm_job_id: str, start: float) -> int:
    """The script's wait status, while the wrapper enforces what Slurm's slurmstepd would: the
    time limit (re-read every LIMIT_RECHECK s, since scontrol update may change it), --signal's
    and the limit's timers (``Runner.fire``) and scancel's signal requests (every SIGNAL_POLL s).
    A changed limit goes into the Runner's record (``r.p``), which its timers are made from."""
    sig_key = state.signal_key(job_id, task)
    next_look = time.time() + LIMIT_RECHECK
    while True:
        timeout = r.next_timeout()
        timeout = min(SIGNAL_POLL, LIMIT_RECHECK if timeout is None else timeout)
        try:
            return r.child.wait(timeout=timeout)
        except proc.TimeoutExpired:
            if time.time() >= next_look:  # scontrol update TimeLimit=... changes the record
                next_look = time.time() + LIMIT_RECHECK
                limit = _time_of(records.Reader(sdir).submit(job_id, os.getuid(), ge_sub))
                if limit is not None and limit != r.p.get("time") and not r.timed_out:
                    r.p = r.p.replace(time=limit)  # (the Runner's record: what schedule reads)
                    r.schedule(start)
            r.fire()
            r.poll_signals(sdir, sig_key, ge_sub, this_host, slurm_job_id, start)  # a task's own id


def _end_state(r: Runner, status: int) -> tuple[int, int, str, str]:
    """(exit code, signal, Slurm state, reason) of the script's wait status: TIMEOUT or CANCELLED
    when the wrapper ended it so, else COMPLETED for exit 0 without a signal, else FAILED; a
    script a signal ended fails with the release's reason (signal_reason), any other "None"."""
    sig = -status if status < 0 else 0
    code = status if status >= 0 else 0
    if r.timed_out:
        st = "TIMEOUT"
    elif r.cancelled:
        st = "CANCELLED"
    elif code == 0 and sig == 0:
        st = "COMPLETED"
    else:
        st = "FAILED"
    return code, sig, st, signal_reason(sig) if st == "FAILED" and sig else "None"


def signal_reason(sig: int) -> str:
    """The reason of a job whose batch script signal ``sig`` ended: RaisedSignal:9(Killed), the
    signal's strsignal, where the release says so (RAISED_SIGNAL: 24.11, 26.05); 22.05 says
    JobLaunchFailure for every signal (fixtures/slurm-*/oracle-ends.txt K9, K15, K11, K6)."""
    from ..slurm import releases

    if not stepd.release().has(releases.RAISED_SIGNAL):
        return "JobLaunchFailure"
    try:
        name = signal.strsignal(sig) or f"Unknown signal {sig}"
    except ValueError:
        name = f"Unknown signal {sig}"
    return f"RaisedSignal:{sig}({name})"


STEPS_END_WAIT = 0.2  # seconds between looks at the steps a job's end is ending


def _ended(r: Runner, status: int, sdir: str, key: str) -> tuple[int, int, str, str]:
    """The script's end (``_end_state``), once the job's srun steps that were still running have
    been ended with it (``end_steps``)."""
    code, sig, st, reason = _end_state(r, status)
    if st != "CANCELLED" or r.requeued:  # (scancel's steps have had their signal, each its line)
        end_steps(sdir, key, "REQUEUE" if r.requeued else st)
    return code, sig, st, reason


def running_steps(sdir: str, key: str) -> list[int]:
    """The job's srun steps whose record has no end yet (the ids count up from 0), but for those
    whose srun ran on this host and is gone (killed hard, or an earlier job's of the same id):
    nobody would end them, and waiting for them would hold the job's end (end_steps)."""
    out = []
    here = hostlist.this_host()
    for step_id in range(100000):
        rec = state.read_step(sdir, key, step_id)
        if rec is None:
            break
        if "end" not in rec and not (rec.get("srun_host") == here and _srun_gone(rec)):
            out.append(step_id)
    return out


def _srun_gone(rec: dict) -> bool:
    """Whether the srun a step record names (srun_pid, started at srun_since) no longer runs here."""
    from ..store import waits

    pid = rec.get("srun_pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False  # (a record that does not say: as running)
    since = waits.start_time(pid)
    return since is None or bool(since and rec.get("srun_since") and since != rec.get("srun_since"))


def tell_steps(sdir: str, key: str, job_state: str) -> bool:
    """``steps/<key>.ended`` with the job's state (or REQUEUE) and the time, where a step of the job
    is still running (at the time limit, or a requeue, the wrapper writes it before its SIGTERM
    reaches srun; a step started later ignores it). Whether it was written."""
    return bool(running_steps(sdir, key)) and state.write_own(sdir, "steps", f"{key}.ended",
                                                              {"state": job_state, "t": time.time()})


def requeue_asked(sdir: str, key: str, since: float) -> bool:
    """Whether scontrol requeue asked for this job (its ``requeue`` event, in the owner's records or
    root's: control.requeue) since ``since`` (this run's start)."""
    job, _, task = key.partition("_")
    name = f"{job}.{task or 'x'}.requeue.json"
    for owner in (os.getuid(), 0):
        path = state.record_file(sdir, "events", name, owner)
        data = state.read_json(path, owner) if path else None
        if data is not None and isinstance(data.get("t"), (int, float)) and data["t"] >= since:
            return True
    return False


def end_steps(sdir: str, key: str, job_state: str, clock=time.monotonic, sleep=time.sleep) -> bool:
    """The batch script ended while srun steps of its job still run: as Slurm ends a job's steps
    with the job, each such srun is told (``steps/<key>.ended``, the job's state, which it looks
    for as it looks for scancel's requests) and prints slurmstepd's line (CANCELLED AT, or FAILED
    where the job failed: stepd.step_ended_with_job) and ends its tasks; the wrapper waits for
    their ends up to KillWait (+2 s, srun's own wait), then leaves the rest to Grid Engine's end
    of the job. Whether any step was told."""
    from .steps.launch import KILL_WAIT

    if not tell_steps(sdir, key, job_state):
        return False
    deadline = clock() + KILL_WAIT + 2
    try:
        while running_steps(sdir, key) and clock() < deadline:
            sleep(STEPS_END_WAIT)
    finally:
        state.remove_own(sdir, "steps", f"{key}.ended")  # (a later job of the same id is not ended)
    return True


def _fallback_state_dir() -> str | None:
    """The site config's state directory, for a wrapper that could not even read its payload."""
    try:
        from .. import siteconf

        return siteconf.get().cluster.state_dir
    except Exception:
        return None


def run() -> None:
    """main(), with a last-resort record: a wrapper failure must never vanish silently. It goes to
    the payload's state directory (kept as soon as the payload was read), else the site config's."""
    try:
        main()
    except Exception as e:
        import traceback

        sys.stderr.write(traceback.format_exc())
        try:
            sdir = _last.get("state_dir") or _fallback_state_dir()
            if sdir:
                state.record_event(sdir, int(os.environ.get("JOB_ID", "0") or 0), _last.get("task"), "end", {
                    "exit": 1, "signal": 0, "state": "FAILED", "reason": "JobLaunchFailure",
                    "error": f"{type(e).__name__}: {e}", **(_last.get("stamp") or {})})
        finally:
            os._exit(1)


if __name__ == "__main__":
    run()
