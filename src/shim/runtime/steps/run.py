"""Running one step of an allocation: srun's whole life inside an allocation (or the job srun
made): plan it, give it an id and a record, start its hosts' tasks (here directly, elsewhere through
``qrsh -inherit``), wait for them under the time limit, ``--wait`` and ``--kill-on-bad-exit``, and
report their ends as Slurm's srun does."""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from typing import Any, Callable, Mapping

from ... import proc
from ...store import records, state
from ...slurm.jobids import task_job_id
from .. import stepd
from .allocation import Allocation, short_host
from .io import Broadcast, get_winsize, isatty, raw_mode, restore_tty
from .launch import KILL_WAIT, HostLaunch, boot_argv, drop_payload, forward_signals, from_rc, global_rc, quoted, restore_signals, status_name, summary_lines
from .plan import NO_VAL, StepError, StepRequest, expand_io, host_env, io_mode, plan_step, step_env, varies_per_task

STEP_LOCK_WAIT = 10.0  # seconds srun waits for the step counter before it says so
SIGNAL_POLL = 0.5  # seconds between looks for scancel's signal requests to the steps


def next_step_id(state_dir: str, key: str) -> int:
    """The next step id of a job (0, 1, 2, ...; state.next_step_id). OSError when the counter
    cannot be used (srun then warns and carries on with step 0)."""
    return state.next_step_id(state_dir, key, STEP_LOCK_WAIT)


def srun_process() -> dict[str, Any]:
    """Which process runs the step (this srun: its host, pid and the pid's start time), so that the
    job wrapper waits at the job's end only for a step whose srun still lives (jobwrap.running_steps)."""
    from ...slurm import hostlist
    from ...store import waits

    pid = os.getpid()
    return {"srun_host": hostlist.this_host(), "srun_pid": pid, "srun_since": waits.start_time(pid) or ""}


def record_step(state_dir: str, key: str, step_id: int, data: dict[str, Any]) -> bool:
    """The step's record (the user's private ``steps/``): name, tasks, nodes, start; at the end,
    its state and exit code."""
    return state.write_step(state_dir, key, step_id, data)


def load_step(state_dir: str, key: str, step_id: int) -> dict[str, Any] | None:
    return state.read_step(state_dir, key, step_id)


class StepResult:
    def __init__(self, rc: int, statuses: dict[int, tuple[int, int]], timed_out: bool, cancelled: bool):
        self.rc, self.statuses, self.timed_out, self.cancelled = rc, statuses, timed_out, cancelled


def run_step(req: StepRequest, alloc: Allocation, *, base_env: Mapping[str, str], state_dir: str,
             qrsh: Callable[[list[str]], list[str]] | None = None, qrsh_env: Mapping[str, str] | None = None,
             step_id: int | None = None, deadline: float | None = None, gpu_ids: str | None = None,
             job_mode: bool = False, on_start: Callable[[int], None] | None = None,
             cancelled: Callable[[], bool] | None = None) -> StepResult:
    """Run one step of an allocation and wait for it: srun's whole life inside an allocation.

    ``qrsh(args)`` gives the argv of a Grid Engine command (``backends.argv``); ``deadline`` is a
    time limit (epoch seconds); ``job_mode`` marks the step a job srun made for itself;
    ``cancelled()`` is polled (twice a second) for a cancellation from outside."""
    step = _Step(req, alloc, base_env=base_env, state_dir=state_dir, qrsh=qrsh, qrsh_env=qrsh_env,
                 deadline=deadline, job_mode=job_mode, cancelled=cancelled)
    step.plan(step_id, gpu_ids)
    if on_start:
        on_start(step.step_id)
    step.start()
    step.wait()
    return step.report()


class _Step:
    """One step from plan to report (run_step's phases, sharing what they know)."""

    def __init__(self, req: StepRequest, alloc: Allocation, *, base_env: Mapping[str, str], state_dir: str,
                 qrsh: Callable[[list[str]], list[str]] | None, qrsh_env: Mapping[str, str] | None,
                 deadline: float | None, job_mode: bool, cancelled: Callable[[], bool] | None):
        self.req, self.alloc, self.base_env, self.state_dir = req, alloc, base_env, state_dir
        self.qrsh, self.qrsh_env, self.deadline, self.job_mode, self.cancelled = qrsh, qrsh_env, deadline, job_mode, cancelled
        self.prog = req.prog or "srun"
        self.this_host = short_host()
        self.events: queue.Queue = queue.Queue()
        self.local: HostLaunch | None = None
        self.remotes: dict[str, Any] = {}
        self.launch_files: list[str] = []
        self.extra_sinks: list[int] = []
        self.flags = {"timed_out": False, "cancel": False, "killed_at": None, "job_ended": False}
        self.bad_exit_seen = False
        self.remote_rc: dict[str, int] = {}
        self.pmi: Any = None  # the step's PMI service (--mpi=pmi2)
        self.aborted = False  # a task called PMI_Abort
        self.ompi: dict[str, Any] | None = None  # an Open MPI step: its mpirun and rank status directory
        # an array task's own Slurm job id: the steps' SLURM_JOB_ID, %j and srun's StepId messages
        self.own_id = task_job_id(alloc.job_id, alloc.task)
        self.began = time.time() - 1.0  # (a job end word older than the step is an earlier run's)

    def plan(self, step_id: int | None, gpu_ids: str | None) -> None:
        """The layout (StepError when it cannot be made), the step id (step 0, with a warning,
        when the counter cannot be used: bookkeeping never fails a step), the step's environment,
        its file patterns and modes (--pty: only task 0 talks to the terminal, as in Slurm; a
        file shared by all tasks is truncated once, unless --open-mode=append), and its record."""
        req, alloc, prog = self.req, self.alloc, self.prog
        self.layout = plan_step(req, alloc)
        if step_id is None:
            try:
                step_id = next_step_id(self.state_dir, alloc.key)
            except OSError as e:  # the shim's bookkeeping must not fail the user's step
                print(f"{prog}: warning: step ids unavailable ({e.strerror}: {getattr(e, 'filename', '')}); "
                      "using step 0", file=sys.stderr)
                step_id = 0
        self.step_id = step_id
        # scancel -s's requests already there are not this step's (Slurm signals the steps that exist)
        self.sig_seen = state.seen_signals(self.state_dir, None, alloc.key)
        self.next_signal_look = 0.0
        self.local_here = alloc.inside and any(h == self.this_host for h, _, _ in self.layout)
        cpt_env = req.cpus_per_task if req.cpus_per_task_set else None
        umask = os.umask(0o022)
        os.umask(umask)
        own_id = self.own_id
        self.common = step_env(self.base_env, job_id=own_id, step_id=step_id, plan=self.layout,
                               cpus_per_task=cpt_env, in_allocation=not self.job_mode,
                               distribution=req.distribution, umask=umask,
                               debug=3 + req.verbose - (1 if req.quiet else 0), gpu_ids=gpu_ids)
        ntasks = sum(len(t) for _, _, t in self.layout)
        if req.mpi and req.mpi != "none":
            self.common["SLURM_MPI_TYPE"] = req.mpi  # srun's own, as Slurm's tasks see it
        else:
            self.common.pop("SLURM_MPI_TYPE", None)  # slurmstepd removes "none"
        if req.mpi in ("pmi2", "pmix") and not req.argv_per_task:
            self.ompi = self._open_mpi(req)
        if req.mpi in ("pmi2", "pmix") and self.ompi is None:
            # Slurm's mpi/pmi2: PMI-1 and PMI-2 for every task, served here
            from .. import pmi

            node_of = [0] * ntasks
            for node, (_, _, tids) in enumerate(self.layout):
                for t in tids:
                    node_of[t] = node
            self.pmi = pmi.Server(ntasks, node_of, f"{alloc.job_id}.{step_id}",
                                  on_abort=lambda rank, code, msg: self.events.put(("abort", rank, code, 0)))
        width = len(str(ntasks - 1))
        cwd = req.chdir or os.getcwd()
        user = self.common.get("USER") or self.common.get("SLURM_JOB_USER") or ""
        base_env = self.base_env
        vals = {"j": own_id, "s": step_id, "A": base_env.get("SLURM_ARRAY_JOB_ID", alloc.job_id),
                "a": base_env.get("SLURM_ARRAY_TASK_ID", NO_VAL),
                "x": base_env.get("SLURM_JOB_NAME", req.name or ""), "u": user}
        out_mode, err_mode, in_mode = io_mode(req.output), io_mode(req.error), io_mode(req.input)
        if req.pty:  # Slurm: only task 0 talks to the terminal
            out_mode = out_mode if out_mode[0] != "inherit" else ("task", 0)
            err_mode = err_mode if err_mode[0] != "inherit" else ("task", 0)
            in_mode = in_mode if in_mode[0] != "inherit" else ("task", 0)
        self.in_mode = in_mode
        shared = {}
        for which, (mode, pattern) in (("stdout", out_mode), ("stderr", err_mode)):
            if mode == "file" and not varies_per_task(pattern):
                shared[which] = True
                if not req.append:
                    _truncate(expand_io(pattern, vals), cwd)
        self.spec_base: dict[str, Any] = {
            "argv": list(req.argv), "argv_per_task": req.argv_per_task, "cwd": cwd, "ntasks": ntasks,
            "label": req.label, "width": width, "unbuffered": req.unbuffered,
            "stdout": out_mode, "stderr": err_mode, "stdin": in_mode, "append": req.append,
            "shared": shared, "vals": vals, "umask": umask, "deadline": self.deadline,
            # --cpu-bind=cores|threads: each host's launcher binds its tasks (launch.task_cpus)
            "cpu_bind": req.cpu_bind, "cpu_bind_verbose": req.cpu_bind_verbose,
            "cpus_per_task": req.cpus_per_task or 1,
        }
        record_step(self.state_dir, alloc.key, step_id, {
            "job_id": alloc.job_id, "task": alloc.task, "step_id": step_id, "name": req.name or
            os.path.basename(str(req.argv[0])), "ntasks": ntasks, "nodelist": self.common["SLURM_STEP_NODELIST"],
            "nodes": len(self.layout), "cpus": ntasks * (req.cpus_per_task or 1), "start": time.time(),
            "state": "RUNNING", "user": user, **srun_process(),
        })

    def _open_mpi(self, req: StepRequest) -> dict[str, Any] | None:
        """An Open MPI program goes through Open MPI's mpirun (steps/ompi.py), when it is there."""
        from . import ompi

        path = self.common.get("PATH")
        cwd = req.chdir or os.getcwd()
        if not ompi.is_open_mpi(str(req.argv[0]), path, cwd):
            return None
        mpirun = ompi.mpirun_path(path)
        return {"mpirun": mpirun} if mpirun else None

    def _start_open_mpi(self) -> None:
        """One mpirun on this host for the whole step, as this host's one local 'task'."""
        import tempfile

        from . import ompi

        req = self.req
        private = state.own_dir(self.state_dir, "srun")
        status_dir = tempfile.mkdtemp(prefix="ompi-", dir=private) if private else None
        assert self.ompi is not None
        self.ompi["status_dir"] = status_dir
        host, slots, tids = self.layout[0]
        env = host_env(self.common, host, 0, slots, tids)
        env.update(ompi.rank_env(self.layout, status_dir))
        cyclic = str(req.distribution or "").split(":")[0].strip().lower() == "cyclic"
        argv = ompi.mpirun_argv(self.ompi["mpirun"], self.layout, list(req.argv), cyclic=cyclic, environ=env)
        spec = dict(self.spec_base, env=env, tasks=[0], host=self.this_host, node=0, argv=argv, argv_per_task=None,
                    label=False, kill_on_bad_exit=False, own_group=not isatty(0), pty=False)
        self.local = HostLaunch(spec, self.events, stdin_direct=True)

    def start(self) -> None:
        """Each host's launcher: this host's tasks (srun inside the job) in this process, every
        other host through ``qrsh -inherit`` with a launch payload. srun's stdin goes straight to
        the one consumer when there is one (to a remote one only when it is no terminal), else
        it is copied to all (Slurm's default ``--input``).
        An Open MPI step is one mpirun here instead."""
        req, prog, in_mode = self.req, self.prog, self.in_mode
        if self.ompi is not None:
            self.stdin_tty = isatty(0)
            self.raw_tty = None
            self._start_open_mpi()
            return
        if req.verbose:  # srun -v: the release's lines (verbose.start_lines)
            sys.stderr.write("".join(line + "\n" for line in self._verbose_start()))
        self.stdin_tty = isatty(0)
        stdin_consumers = 0
        for host, _, tids in self.layout:
            if self.local_here and host == self.this_host:
                stdin_consumers += len(tids)
            else:
                stdin_consumers += 1
        in_direct = in_mode[0] == "inherit" and stdin_consumers == 1
        if self.pmi is not None:
            self.pmi.start()
        for node, (host, slots, tids) in enumerate(self.layout):
            henv = host_env(self.common, host, node, slots, tids)
            spec = dict(self.spec_base, env=henv, tasks=tids, host=host, node=node,
                        kill_on_bad_exit=req.kill_on_bad_exit)
            if self.local_here and host == self.this_host:
                spec["own_group"] = not self.stdin_tty and not req.pty
                spec["pty"] = req.pty
                self.local = HostLaunch(spec, self.events, stdin_direct=in_direct, pmi=self.pmi)
                continue
            if self.qrsh is None:
                raise StepError("Requested node configuration is not available")
            if self.pmi is not None:  # that host's launcher relays its tasks' PMI to this srun
                addr, port = self.pmi.listen(host)  # (the address this host uses toward that one)
                spec["pmi"] = {"host": addr, "port": port, "token": self.pmi.token,
                               "size": self.pmi.size, "jobid": self.pmi.jobid}
            self._start_remote(spec, host, tids, in_direct)
        self.raw_tty = None
        if req.pty and self.remotes and self.stdin_tty:
            self.raw_tty = raw_mode(0)

    def _verbose_start(self) -> list[str]:
        """srun -v's lines before the tasks start (verbose.start_lines), for this job and step."""
        from ...slurm.hostlist import compress
        from .verbose import cpu_counts, start_lines

        hosts = self.alloc.hosts
        return start_lines(self.prog, stepd.release(), job_id=self.own_id, step_id=self.step_id,
                           nodes=self.base_env.get("SLURM_JOB_NODELIST") or compress([h for h, _ in hosts]),
                           cpu_counts=cpu_counts([n for _, n in hosts]), nnodes=len(hosts), layout=self.layout,
                           own_job=self.job_mode, cpu_bind=self.req.cpu_bind)

    def _start_remote(self, spec: dict[str, Any], host: str, tids: list[int], in_direct: bool) -> None:
        """``qrsh -inherit <host>`` with the host launcher (``remote_main``), in the job (JOB_ID,
        SGE_TASK_ID), in its own session."""
        req, alloc, in_mode = self.req, self.alloc, self.in_mode
        spec["own_group"] = True
        spec["state_dir"] = self.state_dir
        spec["status_name"] = status_name(alloc.key, self.step_id, host)
        spec["signal_key"], spec["signals_seen"] = alloc.key, sorted(self.sig_seen)  # scancel -s reaches it
        if req.pty and 0 in tids:
            spec["emulate_pty"] = True
            spec["winsize"] = get_winsize(0)
        boot = boot_argv(self.state_dir, spec)
        self.launch_files.append(boot[-1])
        words = ["-inherit", host, *quoted(boot)]
        env = dict(self.qrsh_env or os.environ)
        env["JOB_ID"] = str(alloc.job_id)
        env["SGE_TASK_ID"] = alloc.ge_task
        wants_stdin = (in_mode[0] == "inherit") or (in_mode[0] == "task" and in_mode[1] in tids) \
            or (req.pty and 0 in tids)
        feed = None
        if not wants_stdin:
            stdin = proc.DEVNULL
        elif in_direct and not self.stdin_tty:
            stdin = 0
        else:
            # a pipe that srun feeds: never a terminal (srun's own, in raw mode for --pty), whose
            # input OCS 9.1.4's qrsh -inherit forwards to no task (a pipe's it does; SGE 8.1.9 both)
            stdin, feed = os.pipe()
        try:
            # its own session: a hangup or Ctrl-C of srun's terminal reaches the remote tasks
            # through srun (which ends the qrsh), never half of them directly
            p = proc.popen(self.qrsh(words), env=env, stdin=stdin, close_fds=True, start_new_session=True)
        finally:
            if feed is not None:
                os.close(stdin)
        if feed is not None:
            self.extra_sinks.append(feed)  # the broadcaster writes srun's stdin there, and closes it
        self.remotes[host] = p
        threading.Thread(target=lambda h=host, pp=p: self.events.put(("remote", h, pp.wait(), 0)), daemon=True).start()

    def kill_all(self, sig: int) -> None:
        if self.local is not None:
            self.local.kill(sig)
        for p in self.remotes.values():
            if p.returncode is None:
                try:
                    p.send_signal(signal.SIGTERM if sig != signal.SIGKILL else signal.SIGKILL)
                except (ProcessLookupError, OSError):
                    pass

    def on_signal(self, sig: int) -> None:
        """srun passes signals on to its tasks. In a job srun made, Grid Engine's SIGUSR1 (a coming
        suspension) is nothing for the tasks and SIGUSR2 (qdel, i.e. scancel, before its SIGKILL)
        cancels the step as Slurm's scancel does. SIGINT/TERM/HUP/QUIT end the step (KillWait)."""
        flags, local = self.flags, self.local
        if self.job_mode and sig == signal.SIGUSR1:
            return  # Grid Engine's notice of a coming suspension: nothing for the tasks
        if sig == signal.SIGTERM and not self.job_mode:  # the job wrapper's, at the job's time limit?
            ended = None if flags["job_ended"] else self._job_end_word()
            if ended is not None:
                self._job_ended(ended)
            if flags["job_ended"]:
                return  # (the step is ending with its job already)
        if self.job_mode and sig == signal.SIGUSR2:
            # qdel (scancel) of the job srun made: Grid Engine's notice before its SIGKILL
            if not flags["cancel"]:
                _step_cancelled_line(self.own_id, self.step_id, self.this_host, sig=signal.SIGTERM)
            sig = signal.SIGTERM
        if local is not None and (local.spec.get("own_group") or self.job_mode):
            local.kill(sig)
        if sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            flags["cancel"] = True
            if flags["killed_at"] is None:
                flags["killed_at"] = time.time()
            for p in self.remotes.values():
                if p.returncode is None:
                    try:
                        p.send_signal(signal.SIGTERM)
                    except (ProcessLookupError, OSError):
                        pass

    def wait(self) -> None:
        """Until every task and remote launcher has ended, enforcing Slurm's rules: at the time limit
        slurmstepd's ``CANCELLED ... DUE TO TIME LIMIT`` line, srun's notice, SIGTERM, and SIGKILL
        KillWait (30 s) later; ``--wait=N`` after the first task ends; ``--kill-on-bad-exit`` on the
        first task that fails."""
        req, prog, flags, local, deadline = self.req, self.prog, self.flags, self.local, self.deadline
        handlers = forward_signals(self.on_signal)
        try:
            if local is not None:
                local.start()
                local.start_stdin(self.extra_sinks)
            if req.verbose and self.ompi is None:  # srun -v: "Node vm, 1 tasks started"
                from .verbose import started_lines

                sys.stderr.write("".join(line + "\n" for line in started_lines(prog, stepd.release(), self.layout)))
            if local is None and self.extra_sinks:
                Broadcast(0, self.extra_sinks).start()
            pending_tasks = set(local.procs) if local is not None else set()
            if local is not None:
                pending_tasks |= {t for t in local.statuses}  # launch failures already queued
            pending_remote = set(self.remotes)
            first_end = None
            while pending_tasks or pending_remote:
                timeout = None
                now = time.time()
                if flags["killed_at"] is not None:
                    timeout = max(0.0, flags["killed_at"] + KILL_WAIT - now)
                elif deadline:
                    timeout = max(0.0, deadline - now)
                if req.wait and first_end is not None and flags["killed_at"] is None:
                    t2 = max(0.0, first_end + req.wait - now)
                    timeout = t2 if timeout is None else min(timeout, t2)
                if self.cancelled is not None:
                    timeout = 0.5 if timeout is None else min(timeout, 0.5)
                if local is not None:  # this host's tasks take scancel -s's requests from here
                    self._poll_signals()
                    timeout = SIGNAL_POLL if timeout is None else min(timeout, SIGNAL_POLL)
                try:
                    ev = self.events.get(timeout=timeout)
                except queue.Empty:
                    self._on_timeout(first_end)
                    continue
                kind, who, code, sig = ev
                if kind == "abort":  # a task called PMI_Abort: the step is killed, as Slurm's pmi2 does
                    self.aborted = True
                    if flags["killed_at"] is None:
                        if local is not None:
                            local.kill(signal.SIGKILL)
                        self.kill_all(signal.SIGTERM)  # the other hosts' launchers end their tasks
                        flags["killed_at"] = time.time()
                    continue
                if kind == "task":
                    if local is not None:
                        local.done(who, code, sig)
                    pending_tasks.discard(who)
                    bad = code != 0 or sig != 0
                else:
                    self.remote_rc[who] = code if code >= 0 else 128 - code
                    pending_remote.discard(who)
                    bad = code != 0
                if first_end is None:
                    first_end = time.time()
                if bad and req.kill_on_bad_exit and not self.bad_exit_seen:
                    self.bad_exit_seen = True
                    if (pending_tasks or pending_remote) and not req.quiet:
                        print(f"{prog}: Terminating StepId={self.own_id}.{self.step_id}", file=sys.stderr, flush=True)
                    self.kill_all(signal.SIGTERM)
                    flags["killed_at"] = time.time()
                if local is not None:
                    pending_tasks |= {t for t in local.procs if t not in local.statuses}
            if local is not None:
                local.finish()
        finally:
            restore_signals(handlers)
            if self.raw_tty is not None:
                restore_tty(0, self.raw_tty)

    def _poll_signals(self) -> None:
        """scancel -s's requests to the job's steps (neither ``--batch`` nor ``--full``): this host's
        tasks get the signal, every process of each task's group, as slurmstepd signals a step's
        processes; SIGTERM and SIGKILL print slurmstepd's ``*** STEP ... CANCELLED AT ... ***``.
        (With ``--full`` srun itself gets the signal, in the batch shell's group, and passes it on.)"""
        now = time.monotonic()
        if now < self.next_signal_look or self.local is None:
            return
        self.next_signal_look = now + SIGNAL_POLL
        for _name, sreq in records.signal_requests(self.state_dir, None, self.alloc.key, self.sig_seen):
            if sreq["batch"] or sreq["full"]:
                continue
            if sreq["sig"] in (signal.SIGTERM, signal.SIGKILL):
                _step_cancelled_line(self.own_id, self.step_id, self.this_host, sig=sreq["sig"])
            self.local.kill(sreq["sig"])
        if not self.job_mode and self.flags["killed_at"] is None:
            ended = self._job_end_word()
            if ended is not None:
                self._job_ended(ended)

    def _job_end_word(self) -> str | None:
        """The job's state where the job wrapper says the job ended under its steps
        (``steps/<key>.ended``: jobwrap.tell_steps), else None."""
        ended = state.read_from(self.state_dir, None, "steps", f"{self.alloc.key}.ended")
        if ended is None or not isinstance(ended.get("t", 0), (int, float)) or ended.get("t", 0) < self.began:
            return None  # (none, or an earlier run's: a requeued job's word its wrapper could not take back)
        return str(ended.get("state") or "")

    def _job_ended(self, job_state: str) -> None:
        """The job ended under the step (its batch script ended: jobwrap.end_steps): srun's notice,
        slurmstepd's line (CANCELLED AT, or FAILED where the job failed), SIGTERM to the tasks and
        SIGKILL after KillWait; the step ends CANCELLED, its tasks' signals reported (as the
        releases answer: fixtures/slurm-*/oracle-step-ends.txt, J)."""
        self.flags["job_ended"] = True
        aborted = f"{self.prog}: Job step aborted: Waiting up to {KILL_WAIT + 2} seconds for job step to finish.\n"
        line = stepd.step_ended_with_job(f"STEP {self.own_id}.{self.step_id}", self.this_host, job_state)
        sys.stderr.write(aborted + line if job_state in ("COMPLETED", "FAILED") else line + aborted)  # (as seen)
        sys.stderr.flush()
        self.kill_all(signal.SIGTERM)
        self.flags["killed_at"] = time.time()

    def _on_timeout(self, first_end: float | None) -> None:
        """What a quiet moment in wait() means: a cancellation seen by ``cancelled()``, KillWait over
        (SIGKILL), the time limit reached, or ``--wait``'s time up."""
        req, prog, flags, deadline = self.req, self.prog, self.flags, self.deadline
        now = time.time()
        if self.cancelled is not None and self.cancelled() and not flags["cancel"]:
            flags["cancel"] = True
            _step_cancelled_line(self.own_id, self.step_id, self.this_host, sig=signal.SIGTERM)
            self.kill_all(signal.SIGTERM)
            flags["killed_at"] = now
            return
        if flags["killed_at"] is not None and now >= flags["killed_at"] + KILL_WAIT:
            self.kill_all(signal.SIGKILL)
            flags["killed_at"] = now + 3600
        elif deadline and now >= deadline and flags["killed_at"] is None:
            flags["timed_out"] = True
            _step_cancelled_line(self.own_id, self.step_id, self.this_host, why="TIME LIMIT")
            print(f"{prog}: Job step aborted: Waiting up to {KILL_WAIT + 2} seconds for job step to finish.",
                  file=sys.stderr)
            self.kill_all(signal.SIGTERM)
            flags["killed_at"] = now
        elif req.wait and first_end is not None and flags["killed_at"] is None \
                and now >= first_end + req.wait:
            print(f"{prog}: error: Timed out waiting for job step to complete", file=sys.stderr)
            self.kill_all(signal.SIGTERM)
            flags["killed_at"] = now

    def report(self) -> StepResult:
        """srun's lines for this host's failed tasks (none for tasks killed after srun was
        interrupted, as in Slurm), the remote hosts' statuses (a launcher that never ran is a
        launch failure), ``Force Terminated`` when a signal ended a task, the exit code by
        Slurm's rule (global_rc), and the step's final record."""
        alloc, prog, flags, local, state_dir = self.alloc, self.prog, self.flags, self.local, self.state_dir
        step_id = self.step_id
        if self.pmi is not None:
            self.pmi.close()
        statuses = dict(local.statuses) if local is not None else {}
        if self.ompi is not None:  # the ranks' own ends, host by host (mpirun's, when none said)
            from . import ompi

            ntasks = sum(len(t) for _, _, t in self.layout)
            ranks = ompi.rank_statuses(self.ompi["status_dir"], ntasks) if self.ompi.get("status_dir") else {}
            launcher = statuses.get(0, (0, 0))
            if not any(c or sg for c, sg in ranks.values()) and (launcher[0] or launcher[1]):
                ranks = {0: launcher} if not ranks else {**ranks, -1: launcher}
            lines = []
            for host, _, tids in self.layout:
                lines += summary_lines(host, {t: ranks[t] for t in tids if t in ranks}, prog,
                                       signals=not flags["cancel"])
            statuses = {t: v for t, v in ranks.items()}
        elif self.req.verbose:  # srun -v: each outcome's notification and "Completed" (verbose.end_lines)
            from .verbose import end_lines

            lines = end_lines(prog, stepd.release(), self.this_host, f"{self.own_id}.{step_id}", statuses,
                              signals=not flags["cancel"])
        else:
            lines = summary_lines(self.this_host, statuses, prog, signals=not flags["cancel"])
        lines += local.late_errors if local is not None else []
        if lines:
            sys.stderr.write("\n".join(lines) + "\n")
            sys.stderr.flush()
        for name in self.launch_files:  # a launcher that never started left its file
            drop_payload(state_dir, name)
        remote_results: list[tuple[int, int]] = []
        for host, rrc in self.remote_rc.items():
            got = _remote_statuses(state_dir, status_name(alloc.key, step_id, host))
            if got is not None:
                remote_results += got
            elif self.aborted:  # killed with the step before its launcher could say how its tasks ended
                killed = {t: (0, int(signal.SIGKILL)) for t in self._tids(host)}
                remote_results += killed.values()
                for line in summary_lines(host, killed, prog):
                    print(line, file=sys.stderr)
            elif flags["cancel"] or flags["timed_out"] or self.bad_exit_seen:
                remote_results.append(from_rc(rrc))
            else:  # qrsh -inherit did not start the launcher (the job ended, no free task slot, ...)
                print(f"{prog}: error: Task launch for StepId={self.own_id}.{step_id} failed on node {host}: "
                      f"Grid Engine did not start the tasks (qrsh -inherit exit code {rrc})", file=sys.stderr)
                remote_results.append((max(rrc, 1), 0))
        results = list(statuses.values()) + remote_results
        rc = global_rc(results)
        signaled = any(s for _, s in results) and not self.bad_exit_seen
        if signaled and not flags["timed_out"] and not flags["cancel"] and not flags["job_ended"] and not self.req.quiet:
            print(f"{prog}: Force Terminated StepId={self.own_id}.{step_id}", file=sys.stderr)
        cancelled = flags["cancel"] or flags["job_ended"]
        st = "TIMEOUT" if flags["timed_out"] else "CANCELLED" if cancelled else \
            "COMPLETED" if rc == 0 else "FAILED"
        rec = load_step(state_dir, alloc.key, step_id) or {}
        rec.update({"end": time.time(), "state": st, "exit": rc})
        record_step(state_dir, alloc.key, step_id, rec)
        try:
            self._end_event(rec, results, flags["timed_out"], cancelled)
        except (OSError, TypeError, ValueError):  # bookkeeping never fails the step
            pass
        return StepResult(rc, statuses, flags["timed_out"], cancelled)

    def _end_event(self, rec: Mapping[str, Any], results: list[tuple[int, int]], timed_out: bool,
                   cancelled: bool) -> None:
        """The step's end as sacct reads it (its ``N.s`` row, the job's DerivedExitCode): one event,
        ``step<id>``, in the owner's records beside the job's own (its id shard; state.record_event,
        which never fails the step). See ``step_end``."""
        alloc = self.alloc
        sub = alloc.record.get("sub") if alloc.record is not None else None
        hosts = {h for h, _, _ in self.layout}
        cpus = sum(n for h, n in alloc.hosts if h in hosts)
        data = step_end(results, timed_out=timed_out, cancelled=cancelled)
        data.update({"step": self.step_id, "name": rec.get("name") or "", "start": rec.get("start"),
                     "node": self.common.get("SLURM_STEP_NODELIST", ""), "nodes": len(self.layout),
                     "ntasks": rec.get("ntasks"), "cpus": cpus or rec.get("cpus"),
                     "submit_line": self.req.submit_line or ""})
        if isinstance(sub, (int, float)) and not isinstance(sub, bool):
            data["sub"] = sub
        data.update(step_paths(self.req))
        try:
            import pwd

            data["owner"] = pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            pass
        state.record_event(self.state_dir, alloc.job_id, alloc.task, state.step_kind(self.step_id), data)


    def _tids(self, host: str) -> list[int]:
        return next((list(t) for h, _, t in self.layout if h == host), [])


def step_paths(req: StepRequest) -> dict[str, str]:
    """The step's output paths as sacct shows them (26.05's step rows: rows._step_std): srun's
    -o, -e, -i as written (the pattern, not expanded; absent when not given) under ``stdout``,
    ``stderr``, ``stdin``, and ``cwd``, its working directory (-D made absolute against the
    current directory, else the current directory). Paths the user gave, world-readable like
    sbatch's submit record, which keeps -o, -e, -i too."""
    cwd = req.chdir or os.getcwd()
    out = {"cwd": cwd if os.path.isabs(cwd) else os.path.normpath(os.path.join(os.getcwd(), cwd))}
    for key, value in (("stdout", req.output), ("stderr", req.error), ("stdin", req.input)):
        if isinstance(value, str) and value:
            out[key] = value
    return out


def step_end(results: list[tuple[int, int]], *, timed_out: bool = False, cancelled: bool = False) -> dict[str, Any]:
    """A step's state, exit code and signal as Slurm's accounting keeps them, from its tasks'
    (exit code, signal): a task killed by a signal makes the step CANCELLED with that signal (the
    highest), whoever sent it (scancel, or the task itself: 0:9, 0:15, as real 22.05.8, 24.11.5
    and 26.05.5 answer it: fixtures/slurm-*/oracle-step-rows.json); else the highest exit code,
    FAILED when not 0; TIMEOUT past the time limit, CANCELLED when srun was told to end it."""
    sigs = [sg for _, sg in results if sg]
    if sigs:
        code, sig = 0, max(sigs)
    else:
        code, sig = max((c for c, _ in results), default=0), 0
    if timed_out:
        st = "TIMEOUT"
    elif sig or cancelled:
        st = "CANCELLED"
    else:
        st = "COMPLETED" if code == 0 else "FAILED"
    return {"state": st, "exit": code, "signal": sig}


def _remote_statuses(state_dir: str, name: str) -> list[tuple[int, int]] | None:
    """A remote launcher's (exit code, signal) per task, from the user's own ``steps/``; the file
    is removed. None when there is none (the launcher never ran) or it is not well formed."""
    got = state.take_status(state_dir, name)
    if got is None or not isinstance(got.get("statuses"), dict):
        return None
    out = []
    for v in got["statuses"].values():
        if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
            return None
        out.append((v[0], v[1]))
    return out


def _step_cancelled_line(job_id: int, step_id: int, host: str, *, why: str | None = None, sig: int | None = None
                         ) -> None:
    """slurmstepd's ``*** STEP N.s ON host CANCELLED AT <time> ... ***`` in the release's words
    (stepd.cancelled: ``DUE TO TIME LIMIT``; 26.05 ``DUE to SIGNAL Terminated``)."""
    sys.stderr.write(stepd.cancelled(f"STEP {job_id}.{step_id}", host, why=why, sig=sig))
    sys.stderr.flush()


def _truncate(path: str, cwd: str) -> None:
    from ..outfile import open_output  # (a name planted in a directory others may write is refused)

    full = path if os.path.isabs(path) else os.path.join(cwd, path)
    try:
        os.close(open_output(full, False))
    except OSError:
        pass
