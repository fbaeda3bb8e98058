"""The job wrapper: what Grid Engine runs for every job submitted through sbatch.

It turns a Grid Engine job into what a Slurm batch job looks like from inside: the script copied at
submit time runs with its own interpreter, arguments and working directory; stdout/stderr go to
Slurm's files (patterns, truncate or append, merged by default); the environment holds Slurm's
SLURM_* variables with Slurm's values (array indices are Slurm's, never Grid Engine's task
numbers); the time limit and --signal are enforced as Slurm does (signal, SIGTERM, then SIGKILL
after KillWait); qdel (sent as a notify signal) becomes SIGTERM first. It records start and end,
with the real exit code, in the shim's state directory, and never exits 99/100 (Grid Engine's
requeue/error codes).

Reads its payload (base64 JSON) on stdin. Imports only the standard library and light shim modules.
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import signal
import socket
import sys
import time

from . import jobenv, proc, state

LAUNCH_FAILED_SIGNAL = 53
LIMIT_RECHECK = 15.0  # seconds between looks at the job's record for a changed time limit  # Slurm shows a job whose launch failed as ExitCode 0:53


def read_payload() -> dict:
    data = sys.stdin.buffer.read()
    return json.loads(base64.b64decode(data))


def _ge_task(p: dict) -> int | None:
    array = p.get("array")
    t = os.environ.get("SGE_TASK_ID", "undefined")
    if not array or not t.isdigit():
        return None
    return int(array[int(t) - 1])


def _hosts(this_host: str) -> list[tuple[str, int]]:
    path = os.environ.get("PE_HOSTFILE")
    if path:
        try:
            with open(path) as f:
                hosts = jobenv.read_pe_hostfile(f.read())
            if hosts:
                return [(this_host if h in ("localhost",) else h, s) for h, s in hosts]
        except OSError:
            pass
    return [(this_host, int(os.environ.get("NSLOTS", "1")))]


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


def _base_env(p: dict, user: pwd.struct_passwd) -> dict[str, str]:
    """Slurm's --export: ALL (default) is the submission environment; NONE (or a list without ALL)
    is the user's login environment plus the listed variables; --export-file replaces both."""
    mode = p.get("export") or {"all": True, "vars": {}}
    if p.get("export_file") is not None:
        env = dict(p["export_file"])
    elif mode.get("all"):
        env = dict(p.get("environ", {}))
        raw = p.get("export_raw")
        listed = raw is not None and raw.strip().upper() != "ALL"  # e.g. --export=FOO=1,ALL
        if p.get("get_user_env") or listed:
            env = {**login_env(user), **env}
            env["SLURM_GET_USER_ENV"] = "1"
        if listed:
            env["SLURM_EXPORT_ENV"] = raw
    else:
        env = login_env(user)
        env["SLURM_GET_USER_ENV"] = "1"
        env["SLURM_EXPORT_ENV"] = p.get("export_raw") or "NONE"
    env.update(mode.get("vars") or {})
    return env


def _keep_ge(env: dict[str, str]) -> None:
    """Grid Engine's own variables stay visible: srun inside the job needs them (qrsh -inherit)."""
    for k, v in os.environ.items():
        if k.startswith(("SGE_", "PE", "NSLOTS", "NHOSTS", "JOB_", "QUEUE", "REQUEST", "RESTARTED", "ARC")) \
                or k in ("TMPDIR", "TMP", "NQUEUES", "ENVIRONMENT"):
            env.setdefault(k, v)
    env["TMPDIR"] = os.environ.get("TMPDIR", "/tmp")


OUTPUT_DIR_GRACE = 10.0  # seconds to wait for a missing output directory (see _open_output)


def claim_gpus(state_dir: str, host: str, count: int, owner: str) -> list[int]:
    """Pick device indices for a GPU job, as Slurm's gres plugin binds devices. Grid Engine counts
    the host's GPUs as a consumable but binds none, so jobs on one host claim the lowest free
    indices with O_EXCL files (a claim whose wrapper is gone is stale and reused)."""
    d = os.path.join(state_dir, "gpus", host)
    try:
        os.makedirs(d, exist_ok=True)
        os.chmod(d, 0o1777)
    except OSError:
        pass
    ids: list[int] = []
    i = 0
    while len(ids) < count and i < 4096:
        path = os.path.join(d, str(i))
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            if _stale_claim(path):
                try:
                    os.unlink(path)
                    continue
                except OSError:
                    pass
            i += 1
            continue
        except OSError:
            return list(range(count))
        os.write(fd, f"{os.getpid()} {owner}\n".encode())
        os.close(fd)
        ids.append(i)
        i += 1
    return ids


def _stale_claim(path: str) -> bool:
    try:
        with open(path) as f:
            pid = int(f.read().split()[0])
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True
    except (OSError, ValueError, IndexError):
        return False


def release_gpus(state_dir: str, host: str, ids: list[int]) -> None:
    for i in ids:
        try:
            os.unlink(os.path.join(state_dir, "gpus", host, str(i)))
        except OSError:
            pass


def _open_output(path: str, append: bool) -> int:
    """Open a Slurm output file. Tools such as submitit create the log directory only after sbatch
    returns, counting on the scheduler being slower than they are; Grid Engine here starts a job
    within a second, so a missing directory gets a short grace period before the launch fails as
    Slurm's would (FAILED, ExitCode 0:53)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    deadline = time.monotonic() + OUTPUT_DIR_GRACE
    delay = 0.05
    while True:
        try:
            return os.open(path, flags, 0o644)
        except FileNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def _deps_unsatisfied(p: dict) -> bool:
    """afterok/afternotok, checked at start (Grid Engine's -hold_jid already waited for the end)."""
    for kind, ids in p.get("dep_checks") or []:
        for ident in ids:
            job, _, task = str(ident).partition("_")
            events = state.load_events(p["state_dir"], int(job))
            ends = [d for (t, k), d in events.items() if k == "end" and (not task or str(t) == task)]
            cancelled = any(k == "cancel" for (_t, k) in events)
            if not ends and not cancelled:
                continue  # unknown to the shim: Slurm treats an unknown job as done
            ok = ends and all(d.get("state") == "COMPLETED" for d in ends) and not cancelled
            if (kind == "afterok" and not ok) or (kind == "afternotok" and ok):
                return True
    return False


class Runner:
    def __init__(self, p: dict):
        self.p = p
        self.child: proc.Popen | None = None  # type: ignore[name-defined]
        self.cancelled = False
        self.timed_out = False

    def _group(self, sig: int) -> None:
        if self.child is not None:
            try:
                os.killpg(self.child.pid, sig)
            except ProcessLookupError:
                pass

    def on_cancel(self, signum, frame) -> None:
        # qdel of a -notify job: Grid Engine sends SIGUSR2, then SIGKILL after the queue's notify
        # time. Slurm's scancel sends SIGTERM, then SIGKILL.
        self.cancelled = True
        self._group(signal.SIGTERM)
        signal.signal(signal.SIGALRM, lambda *a: self._group(signal.SIGKILL))
        signal.alarm(max(1, int(self.p.get("notify_kill", 4))))

    def on_suspend(self, signum, frame) -> None:
        self._group(signal.SIGSTOP)

    def on_continue(self, signum, frame) -> None:
        self._group(signal.SIGCONT)

    def schedule(self, start: float) -> None:
        """Time limit and --signal, as Slurm: SIG at limit-secs, SIGTERM at the limit, SIGKILL after KillWait."""
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
                self._group(signal.SIGTERM)
            elif what == "kill":
                self._group(signal.SIGKILL)
            elif what == "batch" and self.child is not None:
                os.kill(self.child.pid, sig)
            else:
                self._group(sig)


def main() -> None:
    p = read_payload()
    sdir = p["state_dir"]
    job_id = int(os.environ.get("JOB_ID", "0"))
    task = _ge_task(p)
    this_host = socket.gethostname().split(".")[0]
    user = pwd.getpwuid(os.getuid())
    start = time.time()

    gpu_ids: list[int] | None = None

    def finish(exit_code: int, sig: int, st: str, reason: str = "None") -> None:
        if gpu_ids:
            release_gpus(sdir, this_host, gpu_ids)
        state.record_event(sdir, job_id, task, "end", {
            "exit": exit_code, "signal": sig, "state": st, "reason": reason, "node": this_host, "start": start,
        })
        code = 128 + sig if sig else exit_code
        os._exit(1 if code in (99, 100) else code)

    if _deps_unsatisfied(p):
        state.record_event(sdir, job_id, task, "cancel", {"uid": os.getuid(), "user": user.pw_name,
                                                          "was": "PENDING", "reason": "DependencyNeverSatisfied"})
        os._exit(0)

    env = _base_env(p, user)
    _keep_ge(env)
    hosts = _hosts(this_host)
    gpu_ids = claim_gpus(sdir, this_host, int(p.get("gpus") or 0), f"{job_id}.{task}") if p.get("gpus") else None
    env.update(jobenv.batch_env(p, job_id=job_id, task=task, hosts=hosts, this_host=this_host,
                                user=user.pw_name, uid=user.pw_uid, gid=os.getgid(), gpu_ids=gpu_ids))

    # Slurm: a working directory that does not exist fails the launch (ExitCode 0:53), with no output.
    workdir = p["workdir"]
    try:
        os.chdir(workdir)
    except OSError:
        state.record_event(sdir, job_id, task, "start", {"node": this_host})
        finish(0, 0, "FAILED", "JobLaunchFailure")
    env["PWD"] = workdir

    array_job = bool(p.get("array"))
    default_out = "slurm-%A_%a.out" if array_job else "slurm-%j.out"
    expand = lambda pat: jobenv.expand_pattern(pat, job_id=job_id, task=task, name=p["name"],  # noqa: E731
                                               user=user.pw_name, host=this_host, array_job=array_job)
    append = str(p.get("open_mode") or "").startswith("a")
    out_pat = p.get("stdout") or (None if p.get("stderr") and not p.get("stdout") else default_out)
    err_pat = p.get("stderr")
    try:
        if out_pat is None:  # only -e given: stdout goes to the default file (Slurm does the same)
            out_pat = default_out
        out_fd = _open_output(expand(out_pat), append)
        err_fd = _open_output(expand(err_pat), append) if err_pat else out_fd
        in_fd = os.open(expand(p["stdin"]), os.O_RDONLY) if p.get("stdin") else os.open(os.devnull, os.O_RDONLY)
    except OSError:
        state.record_event(sdir, job_id, task, "start", {"node": this_host})
        finish(0, LAUNCH_FAILED_SIGNAL, "FAILED", "JobLaunchFailure")

    # The script, as Slurm copies it: a private file that runs with its own #! interpreter.
    tmp = os.environ.get("TMPDIR") or "/tmp"
    script_dir = os.path.join(tmp, f"slurm-shim-{job_id}.{task if task is not None else 'batch'}")
    os.makedirs(script_dir, mode=0o700, exist_ok=True)
    script_path = os.path.join(script_dir, "slurm_script")
    with open(script_path, "wb") as f:
        f.write(base64.b64decode(p["script"]))
    os.chmod(script_path, 0o700)

    r = Runner(p)
    signal.signal(signal.SIGUSR2, r.on_cancel)
    signal.signal(signal.SIGUSR1, r.on_suspend)
    signal.signal(signal.SIGCONT, r.on_continue)
    signal.signal(signal.SIGTERM, r.on_cancel)
    os.umask(int(p.get("umask", 0o022)))
    state.record_event(sdir, job_id, task, "start", {"node": this_host})
    try:
        # Its own session: Grid Engine's notify signals reach the wrapper, which turns them into
        # Slurm's signals; Grid Engine's final SIGKILL still reaches every process of the job
        # through its additional group id (execd_params ENABLE_ADDGRP_KILL).
        # sh only sets SLURM_TASK_PID to its own pid and execs the script in place: no user text is
        # part of the shell's program, the script and its arguments are plain argv.
        launcher = ["/bin/sh", "-c", 'SLURM_TASK_PID=$$; export SLURM_TASK_PID; exec "$0" "$@"', script_path]
        r.child = proc.popen([*launcher, *p.get("args", [])], env=env, stdin=in_fd, stdout=out_fd,
                             stderr=err_fd, start_new_session=True, close_fds=True)
    except OSError as e:
        os.write(err_fd, f"slurmstepd: error: execve(): {script_path}: {e.strerror}\n".encode())
        finish(0, LAUNCH_FAILED_SIGNAL, "FAILED", "JobLaunchFailure")
    for fd in {out_fd, err_fd, in_fd}:
        os.close(fd)
    r.schedule(start)
    next_look = time.time() + LIMIT_RECHECK
    while True:
        timeout = r.next_timeout()
        timeout = LIMIT_RECHECK if timeout is None else min(timeout, LIMIT_RECHECK)
        try:
            status = r.child.wait(timeout=timeout)
            break
        except proc.TimeoutExpired:
            if time.time() >= next_look:  # scontrol update TimeLimit=... changes the record
                next_look = time.time() + LIMIT_RECHECK
                rec = state.load_submit(sdir, job_id) or {}
                if "time" in rec and rec["time"] != p.get("time") and not r.timed_out:
                    p["time"] = rec["time"]
                    r.schedule(start)
            r.fire()
    signal.alarm(0)
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
    finish(code, sig, st)


def run() -> None:
    """main(), with a last-resort record: a wrapper failure must never vanish silently."""
    try:
        main()
    except Exception as e:
        import traceback

        sys.stderr.write(traceback.format_exc())
        try:
            p_dir = os.environ.get("SLURM_SHIM_STATE_DIR", "/var/spool/slurm-shim")
            state.record_event(p_dir, int(os.environ.get("JOB_ID", "0")), None, "end", {
                "exit": 1, "signal": 0, "state": "FAILED", "reason": "JobLaunchFailure",
                "error": f"{type(e).__name__}: {e}"})
        finally:
            os._exit(1)


if __name__ == "__main__":
    run()
