"""Launching a step's tasks on one host (slurmstepd's part): ``HostLaunch``, the far side of
``qrsh -inherit`` (``remote_main``, which reads its launch payload), Slurm's exit statuses and the
``srun: error: <host>: task N: ...`` lines."""

from __future__ import annotations

import errno
import fcntl
import os
import queue
import shlex
import shutil
import signal
import sys
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from ... import proc
from ...store import records, state
from .. import boot, jobenv, stepd
from ..jobenv import TASK_LAUNCH
from .allocation import short_host
from .io import Broadcast, LabelPump, PtyRelay, close_fd, set_winsize, write_all
from .plan import StepError, expand_io, ranges, task_env
from ...slurm.request import KILL_WAIT  # noqa: F401  (Slurm's KillWait, one definition with the translator's)

FORWARDED = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2,
             signal.SIGCONT)
"""The signals srun passes on to its tasks, as Slurm's srun does."""


# ---------------------------------------------------------------------------------------------
# Exit statuses and srun's messages


def outcome(code: int | None, sig: int | None) -> int:
    """A task's contribution to srun's exit code: its exit code, or 128+signal."""
    return 128 + sig if sig else (code or 0)


def global_rc(results: Iterable[tuple[int, int]]) -> int:
    """srun's exit code from its tasks' (exit code, signal) pairs, by Slurm's rule: a task killed
    by a signal outweighs every exit code (the highest signal wins, as 128+signal); otherwise the
    highest exit code."""
    results = list(results)
    sigs = [s for _, s in results if s]
    if sigs:
        return 128 + max(sigs)
    return max((c for c, _ in results), default=0)


def from_rc(rc: int) -> tuple[int, int]:
    """A launcher's exit code back as (exit code, signal): above 128 reads as 128+signal."""
    return (0, rc - 128) if 128 < rc < 160 else (rc, 0)


def _signame(sig: int) -> str:
    try:
        return signal.strsignal(sig) or f"Signal {sig}"
    except ValueError:
        return f"Signal {sig}"


def summary_lines(host: str, statuses: Mapping[int, tuple[int, int]], prog: str = "srun",
                  signals: bool = True) -> list[str]:
    """srun's lines for tasks that failed on one host, one line per distinct outcome:
    ``srun: error: vm: tasks 0-1: Exited with exit code 1``, ``srun: error: vm: task 0: Killed``.
    Tasks killed after srun itself was interrupted are not reported (``signals=False``), as in
    Slurm, where those lines are verbose-only."""
    groups: dict[tuple[int, int], list[int]] = {}
    for tid in sorted(statuses):
        code, sig = statuses[tid]
        if (sig and signals) or (code and not sig):
            groups.setdefault((code, sig), []).append(tid)
    lines = []
    for (code, sig), tids in groups.items():
        what = _signame(sig) if sig else f"Exited with exit code {code}"
        word = "task" if len(tids) == 1 else "tasks"
        lines.append(f"{prog}: error: {host}: {word} {ranges(tids)}: {what}")
    return lines


def resolve(cmd: str, path: str | None, cwd: str) -> int:
    """0 if argv[0] can be executed, else the errno execve would give (ENOENT, EACCES)."""
    if "/" in cmd:
        full = cmd if os.path.isabs(cmd) else os.path.join(cwd, cmd)
        if not os.path.exists(full):
            return errno.ENOENT
        if os.path.isdir(full) or not os.access(full, os.X_OK):
            return errno.EACCES
        return 0
    return 0 if shutil.which(cmd, path=path if path is not None else os.defpath) else errno.ENOENT


def executable(cmd: str, path: str | None, cwd: str) -> str:
    """The file execve runs for argv[0] ``cmd`` (resolve says it can): ``cmd`` in ``cwd`` where it
    names a path, else the first on ``path``."""
    if "/" in cmd:
        return cmd if os.path.isabs(cmd) else os.path.join(cwd, cmd)
    return shutil.which(cmd, path=path if path is not None else os.defpath) or cmd


class HostLaunch:
    """The tasks of one step on this host (slurmstepd's part).

    ``spec`` keys: argv (or argv_per_task), cwd, env (the host's environment), tasks (ranks),
    ntasks, host, node (index in the step), label, width, unbuffered, stdout/stderr/stdin (io_mode
    pairs), append, shared (file names written by several hosts: opened for append), vals
    (pattern values), own_group (each task in its own process group; srun forwards signals),
    pty (task 0 keeps this process's terminal), emulate_pty (task 0 gets a new pseudo-terminal,
    relayed to this process's stdin/stdout), winsize, umask, pmi (the step's PMI service, for a
    launcher on another host: host, port, token, size, jobid).

    ``pmi``: what gives each task its PMI_FD (``pmi.Server`` in srun, ``pmi.Relay`` elsewhere:
    ``task_fd(rank)`` and ``task_env(rank, fd)``), None for plain tasks (``--mpi=none``)."""

    def __init__(self, spec: Mapping[str, Any], events: queue.Queue, *, stdin: int = 0, stdout: int = 1,
                 stderr: int = 2, stdin_direct: bool = True, pmi: Any = None):
        self.spec = spec
        self.pmi = pmi
        self.events = events
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.stdin_direct = stdin_direct
        self.procs: dict[int, proc.Popen] = {}  # type: ignore[name-defined]
        self.statuses: dict[int, tuple[int, int]] = {}
        self.late_errors: list[str] = []
        self.pumps: list[threading.Thread] = []
        self.stdin_sinks: list[int] = []
        self.host = spec.get("host") or short_host()
        self._files: dict[str, int] = {}

    # -- files
    def _open(self, path: str, write: bool, shared: bool) -> int:
        if not write:
            return os.open(path, os.O_RDONLY)
        if path in self._files:
            return self._files[path]
        from ..outfile import open_output  # (a name planted in a directory others may write is refused)

        fd = open_output(path, bool(self.spec.get("append") or shared))
        self._files[path] = fd
        return fd

    def _target(self, which: str, tid: int, cwd: str, default_fd: int) -> int:
        mode, arg = self.spec.get(which) or ("inherit", None)
        if mode == "inherit":
            return default_fd
        if mode == "none":
            return self._devnull(True)
        if mode == "task":
            return default_fd if tid == arg else self._devnull(True)
        path = expand_io(arg, self.spec.get("vals") or {}, tid=tid, node=int(self.spec.get("node", 0)),
                         host=self.host)
        if not os.path.isabs(path):
            path = os.path.join(cwd, path)
        return self._open(path, True, bool(self.spec.get("shared", {}).get(which)))

    def _devnull(self, write: bool) -> int:
        key = "/dev/null" + ("w" if write else "r")
        if key not in self._files:
            self._files[key] = os.open(os.devnull, os.O_WRONLY if write else os.O_RDONLY)
        return self._files[key]

    # -- launch
    def start(self) -> None:
        """Start this host's tasks as slurmstepd does: a missing working directory is reported and
        /tmp used instead; each task's stdio from --output/--error/--input (-o without -e sends
        stderr to the same file); a file that cannot be opened or a command that cannot be
        executed fails that task with slurmstepd's message and execve's errno as its exit code."""
        spec = self.spec
        tids: list[int] = list(spec["tasks"])
        cwd = spec.get("cwd") or os.getcwd()
        if not os.path.isdir(cwd):
            write_all(self.stderr, stepd.error(self.host, f"couldn't chdir to `{cwd}': No such file or directory: "
                                                          "going to /tmp instead").encode())
            cwd = "/tmp"
        if spec.get("umask") is not None:
            os.umask(int(spec["umask"]))
        width = int(spec.get("width") or 1)
        label = bool(spec.get("label"))
        in_mode, in_arg = spec.get("stdin") or ("inherit", None)
        pty_task = tids[0] if (spec.get("pty") or spec.get("emulate_pty")) and 0 in tids else None
        per_task = {int(k): v for k, v in (spec.get("argv_per_task") or {}).items()}
        unit, verbose = spec.get("cpu_bind"), bool(spec.get("cpu_bind_verbose"))
        job_cpus = job_cpus_here()  # Grid Engine's grant on this host (None: the job is not bound)
        masks = task_cpus(unit, len(tids), int(spec.get("cpus_per_task") or 1), job_cpus) \
            if unit in ("cores", "threads") and job_cpus else None
        if masks is None and job_cpus and job_cpus != os.sched_getaffinity(0):
            masks = [sorted(job_cpus)] * len(tids)  # no --cpu-bind: every task on the job's CPUs here
            unit = None
        for local_id, tid in enumerate(tids):
            env = task_env(spec["env"], tid, local_id)
            if masks and unit:
                env.update(cpu_bind_env(unit, verbose, masks))
            argv = per_task.get(tid) or list(spec["argv"])
            try:
                if tid == pty_task:
                    out_fd = err_fd = in_fd = None
                else:
                    out_fd = self._target("stdout", tid, cwd, self.stdout)
                    err_mode = (spec.get("stderr") or ("inherit", None))[0]
                    if err_mode == "inherit" and (spec.get("stdout") or ("inherit",))[0] == "file":
                        err_fd = out_fd  # srun: -o without -e sends stderr to the same file
                    else:
                        err_fd = self._target("stderr", tid, cwd, self.stderr)
                    in_fd = self._stdin_for(tid, tids, in_mode, in_arg, cwd)
            except OSError as e:
                self._launch_failed(tid, stepd.error(self.host, f"Could not open stdio file "
                                                                f"{getattr(e, 'filename', '')}: {e.strerror}"),
                                    e.errno or errno.EIO, self.stderr)
                continue
            err = resolve(argv[0], env.get("PATH"), cwd) if argv else errno.ENOENT
            if err:
                msg = stepd.error(self.host, f"execve(): {argv[0] if argv else ''}: {os.strerror(err)}")
                self._launch_failed(tid, msg, err, err_fd if err_fd is not None else self.stderr)
                continue
            missing = stepd.bad_interpreter(executable(argv[0], env.get("PATH"), cwd), cwd)
            if missing is not None:  # a script whose #! names no file: execve's ENOENT, the task's exit 2
                self._launch_failed(tid, stepd.bad_interpreter_line(self.host, missing), errno.ENOENT,
                                    err_fd if err_fd is not None else self.stderr)
                continue
            pmi_fd = None
            if self.pmi is not None:
                try:
                    pmi_fd = self.pmi.task_fd(tid)
                except OSError as e:
                    self._launch_failed(tid, stepd.error(self.host, f"mpi/pmi2: failed to connect to srun: "
                                                                    f"{e.strerror or e}"), 1, self.stderr)
                    continue
                env.update(self.pmi.task_env(tid, pmi_fd))
            try:
                self._spawn(tid, argv, env, cwd, in_fd, out_fd, err_fd, label, width, tid == pty_task, pmi_fd,
                            cpus=masks[local_id] if masks else None)
            finally:
                if pmi_fd is not None:
                    close_fd(pmi_fd)  # the task has its copy
            if masks and unit and verbose and tid in self.procs:  # slurmstepd's task_slurm_chkaffinity line
                mask = format(sum(1 << c for c in masks[local_id]), "x")
                write_all(self.stderr, f"cpu-bind-{unit}=MASK - {self.host}, task {tid:2d} {local_id:2d} "
                                       f"[{self.procs[tid].pid}]: mask 0x{mask} set\n".encode())

    def _stdin_for(self, tid: int, tids: list[int], mode: str, arg: Any, cwd: str) -> int:
        if mode == "none" or (mode == "task" and tid != arg):
            return self._devnull(False)
        if mode == "file":
            path = expand_io(arg, self.spec.get("vals") or {}, tid=tid, node=int(self.spec.get("node", 0)),
                             host=self.host)
            return os.open(path if os.path.isabs(path) else os.path.join(cwd, path), os.O_RDONLY)
        if mode == "task" or (len(tids) == 1 and self.stdin_direct):
            return self.stdin
        r, w = os.pipe()
        self.stdin_sinks.append(w)
        return r

    def _launch_failed(self, tid: int, message: str, code: int, err_fd: int) -> None:
        """A task that could not start: slurmstepd's ``message`` (stepd.error's line) and the
        task's end with ``code``. On srun's stderr the line comes after srun's own line about the
        task (22.05, 24.11), or at once (26.05: stepd.launch_errors_first)."""
        if err_fd == self.stderr and not stepd.launch_errors_first():
            self.late_errors.append(message.rstrip("\n"))  # after srun's own line, as Slurm's output shows
        else:
            write_all(err_fd, message.encode())
        self.statuses[tid] = (code, 0)
        self.events.put(("task", tid, code, 0))

    def _spawn(self, tid: int, argv: list[str], env: dict[str, str], cwd: str, in_fd: int | None,
               out_fd: int | None, err_fd: int | None, label: bool, width: int, pty: bool,
               pmi_fd: int | None = None, cpus: Sequence[int] | None = None) -> None:
        """One task through the trampoline: on a new pseudo-terminal (--pty through qrsh), on this
        terminal (--pty here), or with its output through label pumps (-l, rank-width labels) and
        in its own process group when srun forwards signals; its end goes to the event queue.
        ``cpus``: the task's CPUs (--cpu-bind): this thread's affinity while it forks, which the
        task inherits (no preexec hook in a threaded process)."""
        kwargs: dict[str, Any] = {"env": env, "cwd": cwd, "close_fds": True}
        if pmi_fd is not None:
            kwargs["pass_fds"] = (pmi_fd,)  # PMI_FD: the same number in the task
        pipes_to_close: list[int] = []
        pumps: list[threading.Thread] = []
        master = None
        if pty and self.spec.get("emulate_pty"):
            import pty as ptymod
            import termios

            master, slave = ptymod.openpty()
            set_winsize(slave, self.spec.get("winsize"))
            kwargs.update(stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                          preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
            pipes_to_close.append(slave)
        elif pty:
            kwargs.update(stdin=self.stdin, stdout=self.stdout, stderr=self.stderr)
        else:
            if label:
                text = f"{tid:>{width}}: ".encode()
                r_out, w_out = os.pipe()
                pumps.append(LabelPump(r_out, out_fd, text, bool(self.spec.get("unbuffered"))))
                if err_fd == out_fd:
                    w_err = w_out
                else:
                    r_err, w_err = os.pipe()
                    pumps.append(LabelPump(r_err, err_fd, text, bool(self.spec.get("unbuffered"))))
                    pipes_to_close.append(w_err)
                pipes_to_close.append(w_out)
                out_fd, err_fd = w_out, w_err
            kwargs.update(stdin=in_fd, stdout=out_fd, stderr=err_fd)
            if in_fd is not None and in_fd not in (self.stdin,) and in_fd not in self._files.values():
                pipes_to_close.append(in_fd)
            if self.spec.get("own_group"):
                kwargs["process_group"] = 0
        old_cpus = None
        try:
            if cpus:
                old_cpus = os.sched_getaffinity(0)
                os.sched_setaffinity(0, cpus)  # this thread only (Linux: 0 is the calling thread)
            p = proc.popen([*TASK_LEASH, "/bin/sh", "-c", TASK_LAUNCH, *argv], **kwargs)
        except (proc.SpawnError, OSError) as e:
            for fd in pipes_to_close:
                close_fd(fd)
            for t in pumps:
                close_fd(t.src)  # type: ignore[attr-defined]
            self._launch_failed(tid, stepd.error(self.host, f"execve(): {argv[0]}: {e}"), 1, self.stderr)
            return
        finally:
            if old_cpus is not None:
                os.sched_setaffinity(0, old_cpus)
        for fd in pipes_to_close:
            close_fd(fd)
        for t in pumps:
            t.start()
            self.pumps.append(t)
        self.procs[tid] = p
        if master is not None:
            relay = PtyRelay(master, self.stdin, self.stdout)
            relay.start()
            self.pumps.append(relay)
        threading.Thread(target=self._wait, args=(tid, p), daemon=True).start()

    def _wait(self, tid: int, p) -> None:
        status = p.wait()
        sig = -status if status < 0 else 0
        code = status if status >= 0 else 0
        self.events.put(("task", tid, code, sig))

    def start_stdin(self, extra_sinks: Iterable[int] = ()) -> None:
        sinks = self.stdin_sinks + list(extra_sinks)
        if sinks:
            Broadcast(self.stdin, sinks).start()

    def done(self, tid: int, code: int, sig: int) -> None:
        self.statuses[tid] = (code, sig)

    def running(self) -> list[int]:
        return [t for t in self.procs if t not in self.statuses]

    def kill(self, sig: int) -> None:
        for tid in self.running():
            p = self.procs[tid]
            try:
                if self.spec.get("own_group") or self.spec.get("emulate_pty"):
                    os.killpg(p.pid, sig)
                else:
                    os.kill(p.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def finish(self, timeout: float = 2.0) -> None:
        """Let the output pumps drain (a task's background child may hold a pipe open: bounded)."""
        deadline = time.monotonic() + timeout
        for t in self.pumps:
            t.join(max(0.0, deadline - time.monotonic()))
        for fd in set(self._files.values()):
            close_fd(fd)
        self._files.clear()


# ---------------------------------------------------------------------------------------------
# The far side of qrsh -inherit


def boot_argv(state_dir: str, payload: Mapping[str, Any], entry: str = "remote_main") -> list[str]:
    """The command that runs far-side entry point ``entry`` (boot.ENTRIES) with a payload, on any
    host of the cluster (the shim is installed at the same path everywhere, as for the job
    wrapper). The payload goes to a 0600 file in the user's private ``srun/`` directory; the
    command line carries only the state directory and the file's name (``/proc/*/cmdline`` is
    world-readable). StepError when the file cannot be written."""
    name = state.write_launch(state_dir, entry, dict(payload))
    if name is None:
        raise StepError(f"cannot write the launch file in {os.path.join(state_dir, 'users')}")
    return boot.argv(entry, state_dir, name)


def drop_payload(state_dir: str, name: str) -> None:
    """Remove a launch file the far side did not take (it never started)."""
    state.drop_launch(state_dir, name)


def quoted(words: Sequence[str]) -> list[str]:
    """qrsh joins its command words with blanks and a shell splits them again on the far side:
    each word is quoted on its own, so each arrives as it was."""
    return [shlex.quote(str(w)) for w in words]


def read_payload(state_dir: str, name: str) -> dict[str, Any]:
    """A launch file of boot_argv (state.take_launch): the user's own, removed once read;
    ValueError for anything else."""
    return state.take_launch(state_dir, name)


def payload_or_exit(entry: str) -> dict[str, Any]:
    try:
        if len(sys.argv) < 3:
            raise ValueError("no launch file given")
        return read_payload(sys.argv[1], sys.argv[2])
    except ValueError as e:
        write_all(2, f"slurm-shim: {entry}: {e}\n".encode())
        os._exit(1)


# ---------------------------------------------------------------------------------------------
# srun --cpu-bind=cores|threads: each task bound to its share of the job's CPUs on this host


def granted_cpus(environ: Mapping[str, str] | None = None) -> set[int] | None:
    """The CPUs Grid Engine bound this job to on this host: OCS 9.1's execd exports
    SGE_BINDING_INSTANCE=set and SGE_BINDING_CPUSET (hwloc_bitmap_asprintf: 32-bit hex words,
    most significant first, comma separated) for a binding it scheduled. None without one: then
    the job's CPUs are not the job's alone, and a task pinned to some of them would only crowd them."""
    env = os.environ if environ is None else environ
    if env.get("SGE_BINDING_INSTANCE") != "set":
        return None
    value = 0
    try:
        for word in (env.get("SGE_BINDING_CPUSET") or "").split(","):
            value = (value << 32) | int(word, 16)
    except ValueError:
        return None
    return {i for i in range(value.bit_length()) if value >> i & 1} or None


def bound_here() -> bool:
    """Is this job bound on this host (granted_cpus)?"""
    return granted_cpus() is not None


def job_cpus_here() -> set[int] | None:
    """The granted CPUs this process may use (its affinity and the grant), None when unbound."""
    grant = granted_cpus()
    if grant is None:
        return None
    return (os.sched_getaffinity(0) & grant) or None


def apply_grant() -> None:
    """Bind this process (and all it starts) to the CPUs Grid Engine granted the job here. OCS
    9.1.4 built without systemd (as `cluster up --flavour ocs` builds it) schedules the binding and
    exports it, but its shepherd hands the CPU set to systemd properties that nothing applies
    (ocs_BindingShepherd.cc do_thread_binding: g_use_systemd stays true): the job would run on
    every CPU. Where execd did bind, this changes nothing."""
    cpus = job_cpus_here()
    try:
        if cpus and cpus != os.sched_getaffinity(0):
            os.sched_setaffinity(0, cpus)
    except OSError:
        pass


def _core_of(cpu: int) -> tuple[str, ...]:
    out = []
    for name in ("physical_package_id", "core_id"):
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/{name}", encoding="ascii") as f:
                out.append(f.read().strip())
        except OSError:
            return ("", str(cpu))  # no topology: each CPU its own core
    return tuple(out)


def task_cpus(unit: str, ntasks: int, cpus_per_task: int, allowed: Iterable[int]) -> list[list[int]]:
    """Slurm's automatic masks for --cpu-bind=threads|cores among the CPUs this host's share of
    the job may use: local task k gets the k-th run of ``cpus_per_task`` hardware threads, or of
    the cores (all their allowed threads) that hold that many CPUs, in CPU order, round again when
    the tasks need more than there are (Slurm's "sub-optimal binding")."""
    cpus = sorted(allowed)
    if unit == "threads":
        groups = [[c] for c in cpus]
    else:
        by_core: dict[tuple[str, ...], list[int]] = {}
        for c in cpus:
            by_core.setdefault(_core_of(c), []).append(c)
        groups = list(by_core.values())
    per = cpus_per_task if unit == "threads" else -(-cpus_per_task * len(groups) // len(cpus))
    per = max(1, min(per, len(groups)))
    return [sorted(c for i in range(per) for c in groups[(k * per + i) % len(groups)]) for k in range(ntasks)]


def cpu_bind_env(unit: str, verbose: bool, masks: Sequence[Sequence[int]]) -> dict[str, str]:
    """SLURM_CPU_BIND* as slurmstepd sets them after task/affinity made the masks (env.c:
    "<verbosity>,<unit>,mask_cpu:<masks of this host's tasks>", each mask as bit_fmt_hexmask
    writes it: 0x and one upper-case digit per 4 CPUs of the host)."""
    width = ((os.cpu_count() or 1) + 3) // 4
    masks_text = ",".join("0x" + format(sum(1 << c for c in m), f"0{width}X") for m in masks)
    words = "verbose" if verbose else "quiet"
    kind = f"{unit},mask_cpu:"
    return {"SLURM_CPU_BIND_VERBOSE": words, "SLURM_CPU_BIND_TYPE": kind, "SLURM_CPU_BIND_LIST": masks_text,
            "SLURM_CPU_BIND": f"{words},{kind}{masks_text}"}


def remote_main() -> None:
    """One host of a step, started by srun through ``qrsh -inherit``: start this host's tasks,
    print srun's lines for the ones that failed, exit with the highest task outcome."""
    spec = payload_or_exit("remote_main")
    jobenv.keep_ge(spec["env"], os.environ, here=("TMPDIR", "TMP"))
    events: queue.Queue = queue.Queue()
    relay = None
    if isinstance(spec.get("pmi"), dict):  # the step's PMI service is in srun, on another host
        from .. import pmi

        p = spec["pmi"]
        relay = pmi.Relay(str(p["host"]), int(p["port"]), str(p["token"]), int(p["size"]), str(p["jobid"]))
    launch = HostLaunch(spec, events, pmi=relay)
    handlers = forward_signals(lambda sig: launch.kill(sig))
    launch.start()
    launch.start_stdin()
    deadline = spec.get("deadline")
    pending = set(spec["tasks"])
    killed_at = None
    signals = _StepSignals(spec)
    while pending:
        timeout = None
        if deadline and killed_at is None:
            timeout = max(0.0, deadline - time.time())
        elif killed_at is not None:
            timeout = max(0.0, killed_at + KILL_WAIT - time.time())
        if signals.on:
            for sig in signals.take():
                launch.kill(sig)
            timeout = SIGNAL_POLL if timeout is None else min(timeout, SIGNAL_POLL)
        try:
            ev = events.get(timeout=timeout)
        except queue.Empty:
            now = time.time()
            if (killed_at is None and not (deadline and now >= deadline)) or \
                    (killed_at is not None and now < killed_at + KILL_WAIT):
                continue  # only the time to look for signal requests again
            if killed_at is None:
                killed_at = time.time()
                launch.kill(signal.SIGTERM)
            else:
                launch.kill(signal.SIGKILL)
            continue
        if ev[0] == "task":
            _, tid, code, sig = ev
            launch.done(tid, code, sig)
            pending.discard(tid)
            if (code or sig) and spec.get("kill_on_bad_exit") and killed_at is None and pending:
                killed_at = time.time()
                launch.kill(signal.SIGTERM)
    launch.finish()
    restore_signals(handlers)
    lines = summary_lines(launch.host, launch.statuses) + launch.late_errors
    if lines:
        write_all(2, ("\n".join(lines) + "\n").encode())
    rc = global_rc(launch.statuses.values())
    name = spec.get("status_name")
    if isinstance(name, str) and isinstance(spec.get("state_dir"), str):
        # tells srun the launcher ran, and how each task ended (the user's private steps/)
        state.write_status(spec["state_dir"], name,
                           {"rc": rc, "statuses": {str(t): list(v) for t, v in launch.statuses.items()}})
    sys.stdout.flush()
    os._exit(rc)


SIGNAL_POLL = 0.5  # seconds between looks for scancel's signal requests to the step

# A task dies with its launcher (PR_SET_PDEATHSIG, set by util-linux's setpriv before the task's
# exec; the task keeps its pid). Slurm's slurmstepd outlives a step's tasks and kills what is left
# of them; a launcher here can be killed outright: on another host qrsh -inherit's shepherd
# SIGKILLs the launcher's process group when srun goes (an MPI abort ends srun at once), and tasks
# in process groups of their own (own_group) were left running for good, reparented to init.
TASK_LEASH: tuple[str, ...] = ("/usr/bin/setpriv", "--pdeathsig", "KILL", "--") \
    if os.access("/usr/bin/setpriv", os.X_OK) else ()


class _StepSignals:
    """scancel -s's requests to a step's tasks on a host srun is not on (the launcher's own look
    at the state directory, as each node's slurmstepd gets the signal in Slurm): requests for the
    steps (neither --batch nor --full), and --full's signals that srun passes on to its tasks
    (FORWARDED: srun gets those in the batch shell's group). Requests older than the step
    (``signals_seen``, srun's look when it planned the step) are not the step's."""

    def __init__(self, spec: Mapping[str, Any]):
        self.key, self.state_dir = spec.get("signal_key"), spec.get("state_dir")
        self.on = isinstance(self.key, str) and isinstance(self.state_dir, str)
        seen = spec.get("signals_seen")
        self.seen = {str(x) for x in seen} if isinstance(seen, list) else set()
        self.next_look = 0.0

    def take(self) -> list[int]:
        now = time.monotonic()
        if now < self.next_look:
            return []
        self.next_look = now + SIGNAL_POLL
        return [r["sig"] for _, r in records.signal_requests(self.state_dir, None, self.key, self.seen)
                if ((r["sig"] in FORWARDED) if r["full"] else not r["batch"])]


def forward_signals(action: Callable[[int], None]) -> dict[int, Any]:
    old = {}
    for sig in FORWARDED:
        try:
            old[sig] = signal.signal(sig, lambda s, f: action(s))
        except (ValueError, OSError):
            pass
    return old


def restore_signals(handlers: Mapping[int, Any]) -> None:
    for sig, h in handlers.items():
        try:
            signal.signal(sig, h)
        except (ValueError, OSError, TypeError):
            pass


status_name = state.status_name
