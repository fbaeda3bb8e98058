"""Jobs that are one shim process: salloc's allocation holder (``hold_main``, with the process
tree helpers salloc uses to signal its command) and the job srun makes outside an allocation
(``job_main``, which runs step 0 over the job's hosts)."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any, Mapping

from ...slurm.request import SubmitRecord
from ...store import state
from .. import jobenv
from .allocation import Allocation, hosts_from_ge_env, parent_pid, release_path, alloc_path, save_allocation, short_host
from .io import write_all
from .launch import outcome, payload_or_exit
from .plan import StepError, StepRequest
from .run import run_step

# ---------------------------------------------------------------------------------------------
# salloc's allocation holder: the batch "script" of an allocation job


def hold_main() -> None:
    """The body of a salloc allocation: runs as the job's batch script (under the job wrapper),
    records where the allocation is (hosts, Grid Engine task) for salloc and srun, and waits until
    salloc releases it (a file whose content is the exit code to end with), or until salloc is
    gone from this host. Exits with salloc's command's exit code."""
    args = sys.argv[1:]
    state_dir = args[0]
    origin_host = args[1] if len(args) > 1 else ""
    origin_pid = int(args[2]) if len(args) > 2 and args[2].isdigit() else 0
    job_id = int(os.environ.get("JOB_ID", "0"))
    host = short_host()
    hosts = hosts_from_ge_env(os.environ, host)
    key = str(job_id)
    job_env = {k: v for k, v in os.environ.items() if k.startswith(("SLURM_", "SLURMD_"))}
    rel = release_path(state_dir, key)
    if rel is not None:
        try:
            os.unlink(rel)  # a stale release (a reused job id) must not end this one
        except OSError:
            pass
    if rel is None or not save_allocation(state_dir, key, {
            "job_id": job_id, "task": None, "ge_task": os.environ.get("SGE_TASK_ID", "undefined"), "hosts": hosts,
            "env": job_env, "holder_host": host, "holder_pid": os.getpid(), "start": time.time()}):
        write_all(2, f"slurm-shim: cannot record the allocation in {state_dir}\n".encode())
        os._exit(1)
    stop: dict[str, Any] = {"rc": None}

    def on_term(sig, frame):
        stop["rc"] = 128 + sig

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    while stop["rc"] is None:
        if os.path.lexists(rel):  # salloc's release (in the user's own private directory)
            got = state.read_json(rel, os.getuid()) or {}
            code = got.get("rc")
            stop["rc"] = code if isinstance(code, int) and not isinstance(code, bool) else 0
            break
        if origin_pid and origin_host == host and not _alive(origin_pid):
            stop["rc"] = 0
            break
        time.sleep(0.25)
    for path in (rel, alloc_path(state_dir, key)):
        try:
            os.unlink(path)
        except (OSError, TypeError):
            pass
    os._exit(max(0, min(255, int(stop["rc"] or 0))))


def descendants(pid: int) -> list[int]:
    """pid and every process below it (one pass over /proc), parents first."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return [pid]
    for name in names:
        if name.isdigit():
            children.setdefault(parent_pid(int(name)), []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def signal_tree(pid: int, sig: int) -> None:
    for p in descendants(pid):
        try:
            os.kill(p, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


# ---------------------------------------------------------------------------------------------
# The job srun makes outside an allocation: its one process, started by qrsh -now no


def job_main() -> None:
    """The job srun made for itself (``qrsh -now no``): record it as sbatch's wrapper records a
    batch job (submit record, start, end with the real exit code), give the step the job's SLURM_*
    variables, run step 0 over the job's hosts, and pass the exit code back to srun through the
    state directory (Grid Engine would park a job that exits 100 in an error state, so such codes
    leave as 1 and srun takes the real one from there)."""
    from .. import jobwrap

    pl = payload_or_exit("job_main")
    sdir = sys.argv[1]
    job_id = int(os.environ.get("JOB_ID", "0"))
    conf = (pl.get("environ") or {}).get("SLURM_SHIM_CONFIG")
    if isinstance(conf, str) and conf and "SLURM_SHIM_CONFIG" not in os.environ:
        # the site config srun's user named (execd does not pass it on), as the job wrapper takes
        # it: the job's Slurm release (its variables) is then that config's, not the default's
        os.environ["SLURM_SHIM_CONFIG"] = conf
    host = short_host()
    start = time.time()
    if not isinstance(pl.get("record"), dict):
        write_all(2, b"slurm-shim: job_main: the payload holds no submit record\n")
        os._exit(1)
    record = SubmitRecord.from_dict(pl["record"])  # what srun made (operations/submit.interactive), typed
    sub = record.sub
    stamp = {"sub": sub} if isinstance(sub, (int, float)) and not isinstance(sub, bool) else {}
    try:
        req = StepRequest.from_json(pl.get("req"))
    except StepError as e:
        write_all(2, f"slurm-shim: job_main: {e}\n".encode())
        os._exit(1)
    token = str(pl.get("token") or "")
    state.record_submit(sdir, job_id, record.to_dict())
    state.record_event(sdir, job_id, None, "start", {"node": host, **stamp})
    state.write_token(sdir, token, {"job_id": job_id, "start": start})
    hosts = hosts_from_ge_env(os.environ, host)
    user = pwd_entry()
    gpus = int(record.gpus or 0)
    rc, sig, st, reason = 1, 0, "FAILED", "None"
    gpu_ids = None
    try:
        gpu_ids = jobwrap.claim_gpus(sdir, host, gpus, job_id) if gpus else None
    except jobwrap.NoGpu as e:
        sys.stderr.write(f"{req.prog or 'srun'}: error: Unable to create step for job {job_id}: {e}\n")
        sig, reason = jobwrap.LAUNCH_FAILED_SIGNAL, "JobLaunchFailure"
    if not reason == "JobLaunchFailure":
        env = new_job_env(pl["environ"], record, job_id=job_id, hosts=hosts, host=host, user=user[0], uid=user[1],
                          gid=os.getgid(), gpu_ids=gpu_ids, ge_environ=os.environ, start=start)
        alloc = Allocation(job_id, hosts, ge_task=os.environ.get("SGE_TASK_ID", "undefined"), record=record,
                           inside=True)
        limit = int(record.time or -1)
        deadline = start + limit * 60 if limit > 0 else None
        qrsh_cmd = list(pl.get("qrsh") or ["qrsh"])
        try:
            res = run_step(req, alloc, base_env=env, state_dir=sdir, qrsh=lambda words: [*qrsh_cmd, *words],
                           qrsh_env=os.environ, deadline=deadline, job_mode=True,
                           gpu_ids=",".join(str(i) for i in gpu_ids) if gpu_ids else None)
            rc = res.rc
            worst = max(res.statuses.values(), key=lambda cs: outcome(*cs), default=(rc, 0))
            sig = worst[1] if outcome(*worst) == rc else 0
            st = "TIMEOUT" if res.timed_out else "CANCELLED" if res.cancelled else "COMPLETED" if rc == 0 else "FAILED"
        except StepError as e:
            sys.stderr.write(f"{req.prog or 'srun'}: error: Unable to create step for job {job_id}: {e}\n")
        finally:
            if gpu_ids:
                jobwrap.release_gpus(sdir, host, gpu_ids)
    state.record_event(sdir, job_id, None, "end", {"exit": 0 if sig else rc, "signal": sig, "state": st,
                                                  "reason": reason, "node": host, "start": start, **stamp})
    state.write_token(sdir, token, {"job_id": job_id, "start": start, "rc": rc})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if rc in (99, 100) else rc)


def new_job_env(environ: Mapping[str, str], record: SubmitRecord, *, job_id: int, hosts: list[tuple[str, int]],
                host: str, user: str, uid: int, gid: int, gpu_ids: list[int] | None = None,
                ge_environ: Mapping[str, str] | None = None, start: float | None = None) -> dict[str, str]:
    """The environment (before step and task variables) of the tasks of a job srun made: srun's
    exported environment and the job's SLURM_* variables as Slurm's srun gives them, which are
    a batch job's minus the batch-only ones (ENVIRONMENT, HOSTNAME, SLURM_NODE_ALIASES,
    SLURM_JOB_GPUS, the default SLURM_MEM_PER_CPU); Grid Engine's own variables stay, so that an
    srun inside a task finds the job."""
    env = dict(environ)
    job = jobenv.batch_env(record, job_id=job_id, task=None, hosts=hosts, this_host=host, user=user,
                           uid=uid, gid=gid, gpu_ids=gpu_ids, start=start, environ=environ)
    from ...slurm import releases

    if releases.current().sets("SLURM_JOB_GROUP"):  # (24.11 on: the tasks of the job srun made)
        job["SLURM_JOB_GROUP"] = jobenv.group_name(gid)
    for k in ("ENVIRONMENT", "HOSTNAME", "SLURM_NODE_ALIASES", "SLURM_JOB_GPUS", "SLURM_TASK_PID",
              "SLURM_JOB_EXCLUSIVE", "SLURM_JOB_OVERSUBSCRIBE"):  # (26.05 sets those two in batch jobs only)
        job.pop(k, None)
    if not record.mem_per_cpu_mb:
        job.pop("SLURM_MEM_PER_CPU", None)  # srun's tasks see only an explicit memory request
    env.update(job)
    jobenv.keep_ge(env, ge_environ or {})
    return env


def pwd_entry() -> tuple[str, int]:
    import pwd

    try:
        pw = pwd.getpwuid(os.getuid())
        return pw.pw_name, pw.pw_uid
    except KeyError:
        return str(os.getuid()), os.getuid()
