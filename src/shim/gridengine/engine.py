"""Grid Engine, the backend: every Grid Engine operation the shim makes, in one place.

``GridEngine`` is the operations (submit, cancel, suspend, resume, hold, release, requeue, alter,
the job list and detail, hosts, accounting, configuration, interactive jobs), each the pair of a
pure argv builder and a pure answer parser from ``ops.py``, with Grid Engine's refusals read by
``refusal.py`` and the installed Grid Engine's features probed by ``capabilities.py``. A subclass
supplies only the transport, ``run(tool, args)``:

* ``process.GridEngineBackend``: Grid Engine's own commands, through ``shim.proc``;
* ``gridengine.replay.ReplayBackend``: recorded answers (unit tests);
* the per-user daemon's DRMAA submissions (``submitter.py``) are a second transport for ``submit`` only.

Commands call these methods and never name a q* command (tests/unit/test_hygiene.py).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of every command's start; annotations are strings

from . import ops, refusal
from .calls import streams
from .ops import parse_job_id, task_ids  # noqa: F401  (the commands' names for them)

if TYPE_CHECKING:
    from typing import Any, Callable

    from ..proc import Result


class Refused(Exception):
    """Grid Engine would not do it. ``text`` is its answer (stdout and stderr), ``kind`` one of
    refusal.DENIED / GONE / OTHER."""

    def __init__(self, text: str, returncode: int = 1):
        super().__init__(text)
        self.text = text
        self.returncode = returncode
        self.kind = refusal.kind(text) or refusal.OTHER

    @property
    def last_line(self) -> str:
        return refusal.last_line(self.text)


class Outcome:
    """Grid Engine's answer to an operation on many jobs: per job id, DENIED or GONE (jobs it does
    not name were done), plus the answer itself."""

    __slots__ = ("ok", "text", "jobs")

    def __init__(self, ok: bool, text: str, jobs: dict[int, str]):
        self.ok, self.text, self.jobs = ok, text, jobs

    def of(self, job: int) -> str | None:
        return self.jobs.get(job)

    @property
    def kind(self) -> str | None:
        """The kind of the whole answer (an operation on one job): None when it was done."""
        return None if self.ok and not self.jobs else (refusal.kind(self.text) or refusal.OTHER)

    @property
    def last_line(self) -> str:
        return refusal.last_line(self.text)


class Found:
    """A started ``qstat -j <ids>`` (a ``gridengine.qstat.Query``) and its reading."""

    __slots__ = ("query",)

    def __init__(self, query: Any):
        self.query = query

    def found(self) -> set[int] | None:
        """The ids Grid Engine still has (ops.parse_found_jobs); BackendUnavailable, in Slurm's
        words, when qstat could not run or did not answer in time."""
        q = self.query
        parts = list(q.chunks())
        out = b"".join(parts).decode("utf-8", "replace") if parts and type(parts[0]) is bytes else "".join(parts)
        return ops.parse_found_jobs(q.returncode, out, q.stderr)

    def close(self) -> None:
        self.query.close()


class ReservationNames:
    """A started ``qrstat -u '*' -xml`` and its reading: {advance reservation id: its name, or its
    id where it has none}. With the real transport the process runs while the caller works; any
    other transport (replay, tests) answers when read."""

    __slots__ = ("backend", "stream", "names")

    def __init__(self, backend: Any):
        self.backend, self.stream, self.names = backend, None, None
        tool, args = ops.reservations()
        if streams(backend):
            from .. import proc

            try:
                self.stream = proc.stream(backend.argv(tool, args), env=backend.env, timeout=backend.timeout)
            except proc.SpawnError:
                self.names = {}

    def read(self) -> dict[str, str]:
        """The names; {} when Grid Engine would not say (no qrstat, or it would not answer)."""
        if self.names is not None:
            return self.names
        try:
            if self.stream is not None:
                text = b"".join(c if isinstance(c, bytes) else c.encode() for c in self.stream.chunks())
                ok = self.stream.returncode == 0
                out = text.decode("utf-8", "replace")
            else:
                res = self.backend.call(ops.reservations())
                ok, out = res.returncode == 0, res.stdout
        except Exception:  # noqa: BLE001  (no qrstat here, or it would not answer: no reservation is shown)
            ok, out = False, ""
        self.names = {ar["id"]: ar["name"] or ar["id"] for ar in ops.parse_reservations(out)} if ok else {}
        return self.names

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


def ge_env(cfg: Any, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment Grid Engine's commands run with: ours, with the site's cell named
    completely. The one place that decides which Grid Engine a command reaches: the site config's
    ``sge_root`` and ``sge_cell`` win over the user's, and so do its ports where it names them; where
    it does not (0), a user's ``SGE_QMASTER_PORT``/``SGE_EXECD_PORT`` are dropped, so Grid Engine
    finds the cell's own ports (``$SGE_ROOT/$SGE_CELL/common``, /etc/services). A user's
    environment left over from another cell never sends a command there."""
    import os

    ge = cfg.gridengine
    env = dict(os.environ if base is None else base)
    env["SGE_ROOT"] = ge.sge_root
    env["SGE_CELL"] = ge.sge_cell
    for key, port in (("SGE_QMASTER_PORT", getattr(ge, "qmaster_port", 0)),
                      ("SGE_EXECD_PORT", getattr(ge, "execd_port", 0))):
        if port:
            env[key] = str(port)
        else:
            env.pop(key, None)
    return env


class GridEngine:
    """The operations. Subclasses provide ``run(tool, args, *, input=None, timeout=None) -> Result``
    and ``argv(tool, args) -> list[str]`` (the argv ``run`` would execute)."""

    name = "gridengine"
    _caps: Any = None
    # Its calls are processes that run while the caller works (a qstat started early overlaps
    # reading the accounting file); a recorded transport answers only when asked.
    concurrent = False

    # --- transport ------------------------------------------------------------------------------
    def run(self, tool: str, args: list[str], *, input: str | bytes | None = None,
            timeout: float | None = None) -> Result:  # pragma: no cover - abstract
        raise NotImplementedError

    def argv(self, tool: str, args: list[str]) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def call(self, c: ops.Call, *, input: str | bytes | None = None, timeout: float | None = None) -> Result:
        tool, args = c
        return self.run(tool, args, input=input, timeout=timeout)

    # the -help texts of the capability probes are kept per user across commands (capabilities.HelpCache):
    # only for a transport that runs the installed binaries
    caches_help = False

    @property
    def capabilities(self):
        if self._caps is None:
            from .capabilities import Capabilities, HelpCache

            cfg = getattr(self, "cfg", None)
            pinned = getattr(getattr(cfg, "gridengine", None), "capabilities", None) if cfg is not None else None
            self._caps = Capabilities(self, dict(pinned) if pinned else None,
                                      HelpCache() if self.caches_help else None)
        return self._caps

    # --- jobs -------------------------------------------------------------------------------------
    def submit(self, args: list[str], script: str | bytes, *, agent: bool = False, seen=None) -> int:
        """Queue a job (qsub argv from the translator, the job script on stdin): its id. Refused
        carries Grid Engine's answer for the command to put in Slurm's words. With ``agent``, the
        per-user daemon's DRMAA session takes it first where the transport has one (``submit_by_agent``);
        qsub whenever the agent did not submit. ``seen``: () -> the id of this submission's job if
        its job wrapper has recorded itself, else None (the agent's lookup of a job that already
        ended and left qstat)."""
        if agent:
            job = self.submit_by_agent(args, script, seen)
            if job is not None:
                return job
        res = self.call(ops.submit(args), input=script)
        if res.returncode != 0:
            raise Refused(res.stderr + res.stdout, res.returncode)
        try:
            return ops.parse_job_id(res.stdout)
        except ValueError:
            raise Refused(f"unexpected qsub output {res.stdout!r}") from None

    def submit_by_agent(self, args: list[str], script: str | bytes, seen=None) -> int | None:
        """The job id if the daemon's DRMAA session submitted the job, None if it did not (only the real
        transport has an agent: ``process.GridEngineBackend``)."""
        return None

    def _many(self, build, ids: list[str]) -> Outcome:
        ok, texts, jobs = True, [], {}
        for chunk in ops.batches(list(ids)):
            res = self.call(build(chunk))
            text = res.stdout + "\n" + res.stderr
            texts.append(text)
            ok = ok and res.returncode == 0
            for job, kind in refusal.per_job(text).items():
                if kind == refusal.DENIED or jobs.get(job) != refusal.DENIED:
                    jobs[job] = kind
        return Outcome(ok, "\n".join(texts).strip(), jobs)

    def cancel(self, ids: list[str]) -> Outcome:
        return self._many(ops.cancel, ids)

    def suspend(self, ids: list[str]) -> Outcome:
        return self._many(ops.suspend, ids)

    def resume(self, ids: list[str]) -> Outcome:
        return self._many(ops.resume, ids)

    def requeue(self, ids: list[str]) -> Outcome:
        return self._many(ops.requeue, ids)

    def hold(self, ids: list[str], kind: str = "") -> Outcome:
        return self._many(lambda chunk: ops.hold(chunk, kind), ids)

    def release(self, ids: list[str], kind: str = "") -> Outcome:
        return self._many(lambda chunk: ops.release(chunk, kind), ids)

    def signal(self, ids: list[str], sig: int | None) -> Outcome:
        """Deliver Slurm signal ``sig`` (None: SIGKILL) the one way Grid Engine can
        (``ops.signal_operation``); ValueError for a signal it cannot deliver."""
        op = ops.signal_operation(sig)
        if op is None:
            raise ValueError(f"Grid Engine cannot deliver signal {sig}")
        return getattr(self, op)(ids)

    def alter(self, job: str, args: list[str]) -> Outcome:
        res = self.call(ops.alter(job, args))
        text = (res.stdout + "\n" + res.stderr).strip()
        return Outcome(res.returncode == 0, text, refusal.per_job(text))

    # --- queries -----------------------------------------------------------------------------------
    def exists(self, job: int | str) -> bool:
        return self.call(ops.exists(job)).returncode == 0

    def detail_xml(self, ids: list[int | str]) -> Result:
        return self.call(ops.detail(ids))

    def details(self, ids: list[int | str]) -> dict[int, dict[str, Any]]:
        """``qstat -j <ids> -xml`` read (``gridengine.qstat.parse_detail``): job number -> its facts
        (cwd, paths, script and args, name, account, submission and begin times, ...); jobs Grid
        Engine no longer has are absent."""
        from .qstat import parse_detail

        return parse_detail(self.detail_xml(ids).stdout) if ids else {}

    def detail_text(self, ids: list[int | str]) -> Result:
        return self.call(ops.detail_text(ids))

    def job_owners(self, ids: list[int]) -> dict[int, str] | None:
        """Which of these jobs qmaster has, and whose they are (``qstat -j <ids>``: it asks about
        these jobs only): {job number: owner}; None when the answer is not one to read
        (ops.parse_job_owners)."""
        if not ids:
            return {}
        res = self.call(ops.detail_text(sorted(ids)))
        return ops.parse_job_owners(res.returncode, res.stdout, res.stderr)

    def user_jobs(self, user: str) -> Result:
        return self.call(ops.user_jobs(user))

    def user_job_ids(self, user: str) -> list[int]:
        """The user's job numbers, from ``qstat -u``; Refused when qstat would not say."""
        res = self.user_jobs(user)
        if res.returncode != 0:
            raise Refused((res.stderr or res.stdout).strip(), res.returncode)
        return ops.parse_user_job_ids(res.stdout)

    def running_job_hosts(self, job_id: int, ge_task: str, total: int | None) -> list[tuple[str, int]]:
        """A running job's hosts and slots as Grid Engine granted them (srun from outside the job)."""
        return ops.parse_running_hosts(self.call(ops.running_tasks()).stdout, job_id, ge_task, total)

    def running_requests(self, host: str) -> list[tuple[str, int, dict[str, str]]] | None:
        """The running tasks on ``host`` (a short name) with their hard resource requests:
        (owner, job number, {complex: value}) per slot (``ops.parse_running_requests``); None when
        Grid Engine would not say."""
        res = self.call(ops.running_tasks(requests=True))
        return ops.parse_running_requests(res.stdout, host) if res.returncode == 0 else None

    def hosts(self, args: list[str] | None = None) -> Result:
        return self.call(ops.hosts(args))

    def ping(self) -> Result:
        return self.call(ops.ping())

    def accounting(self, args: list[str], timeout: float | None = None) -> Result:
        return self.call(ops.accounting(args), timeout=timeout)

    def list_jobs(self, args: list[str] | None = None):
        """The job listing qstat (``gridengine.qstat.QSTAT_ARGS`` unless told otherwise), started now
        and read while it runs (``gridengine.qstat.Query``)."""
        from .qstat import QSTAT_ARGS, Query

        return Query(self, QSTAT_ARGS if args is None else args)

    def find_jobs(self, ids: list[int]) -> "Found":
        """Which of these jobs qmaster still has: ``qstat -j`` started now, to run while the caller
        does something else; ``found()`` waits for the answer, ``close()`` stops it."""
        from .qstat import Query

        return Found(Query(self, ops.detail_text(ids)[1]))

    # --- configuration -------------------------------------------------------------------------------
    def exec_hosts(self) -> set[str] | None:
        """The execution hosts by full and short name; None when Grid Engine would not say."""
        res = self.call(ops.exec_hosts())
        return ops.parse_exec_hosts(res.stdout) if res.returncode == 0 else None

    def exec_host(self, host: str) -> Result:
        return self.call(ops.exec_host(host))

    def host_complex_values(self, host: str) -> dict[str, str] | None:
        """An execution host's complex_values (``qconf -se``, ``qhost.parse_complex_values``);
        None when Grid Engine would not say."""
        from .qhost import parse_complex_values

        res = self.exec_host(host)
        return parse_complex_values(res.stdout) if res.returncode == 0 else None

    def parallel_env(self, name: str) -> Result:
        return self.call(ops.parallel_env(name))

    def first_task_pe(self, names: list[str]) -> str | None:
        """The first of these parallel environments whose job script is not a task (salloc)."""
        for name in names:
            if ops.first_task_is_free(self.call(ops.parallel_env(name)).stdout):
                return name
        return None

    def reservations(self, name: str) -> list[dict] | None:
        """The advance reservations named ``name`` (``ops.parse_reservations``, with their access
        lists); None when Grid Engine would not say."""
        res = self.call(ops.reservations())
        if res.returncode != 0:
            return None
        ids = [ar["id"] for ar in ops.parse_reservations(res.stdout) if ar["name"] == name]
        if not ids:
            return []
        res = self.call(ops.reservation_detail(ids))
        return ops.parse_reservations(res.stdout) if res.returncode == 0 else None

    def reservation_names(self) -> ReservationNames:
        """Every advance reservation's name by its id (``qrstat -u '*' -xml``), started now to run
        while the caller works; ``read()`` waits for the answer, ``close()`` stops it."""
        return ReservationNames(self)

    def userset_entries(self, name: str) -> list[str] | None:
        """An access list's entries (users and @groups), None when Grid Engine would not say."""
        from .policy import names, parse_keyvalues

        res = self.call(ops.userset(name))
        return names(parse_keyvalues(res.stdout).get("entries")) if res.returncode == 0 else None

    def scheduler(self) -> Result:
        return self.call(ops.scheduler())

    def complexes(self) -> Result:
        return self.call(ops.complexes())

    # --- policy: priorities, scheduler, share tree, projects, users, quotas ----------------------------
    def _text(self, c: ops.Call) -> str:
        """A configuration's text; empty when Grid Engine would not say."""
        res = self.call(c)
        return res.stdout if res.returncode == 0 else ""

    def priorities(self) -> list[Any]:
        """Every pending job's priority and the figures it is made of (``policy.parse_priorities``);
        Refused, with Grid Engine's answer, when qstat would not say."""
        from .policy import parse_priorities

        res = self.call(ops.priorities())
        if res.returncode != 0:
            raise Refused((res.stderr or res.stdout).strip(), res.returncode)
        return parse_priorities(res.stdout)

    def scheduler_config(self) -> dict[str, str] | None:
        """The scheduler configuration (``qconf -ssconf``, ``policy.parse_scheduler_config``); None
        when Grid Engine would not say."""
        from .policy import parse_scheduler_config

        res = self.call(ops.scheduler_config())
        return parse_scheduler_config(res.stdout) if res.returncode == 0 else None

    def share_tree(self) -> dict[str, Any]:
        """The share tree's nodes by path (``qconf -sstree``, ``policy.share_nodes``); empty when
        there is none or Grid Engine would not say."""
        from .policy import share_nodes

        return share_nodes(self._text(ops.share_tree()))

    def share_usage(self) -> tuple[dict[str, Any], str | None]:
        """The share tree with each node's usage (``sge_share_mon``, asked only when qconf showed
        the tree), and why there is no usage where the monitor gave none (its answer, or why it
        could not start), else None."""
        from .policy import share_nodes

        tree = self.call(ops.share_tree())
        if tree.returncode != 0:
            return share_nodes(""), None
        monitor, why = "", None
        try:
            mon = self.call(ops.share_monitor())
        except OSError as e:
            why = f"{e}"
        else:
            if mon.returncode == 0:
                monitor = mon.stdout
            else:
                why = (mon.stderr or mon.stdout).strip()
        return share_nodes(tree.stdout, monitor), why

    def quota_sets(self) -> dict[str, Any]:
        """The resource quota sets by name (``qconf -srqs``, ``policy.parse_quota_sets``); empty
        when Grid Engine would not say."""
        from .policy import parse_quota_sets

        return parse_quota_sets(self._text(ops.quota_sets()))

    def projects(self) -> list[str]:
        """The projects' names (``qconf -sprjl``); empty when Grid Engine would not say."""
        from .policy import names

        return names(self._text(ops.project_list()).replace("\n", ","))

    def project(self, name: str) -> dict[str, str]:
        """A project's configuration (``qconf -sprj``: key -> value); empty when Grid Engine would
        not say."""
        from .policy import parse_keyvalues

        return parse_keyvalues(self._text(ops.project(name)))

    def users(self) -> list[str]:
        """Grid Engine's users (``qconf -suserl``); empty when Grid Engine would not say."""
        from .policy import names

        return names(self._text(ops.user_list()).replace("\n", ","))

    def managers(self) -> list[str]:
        """Grid Engine's managers (``qconf -sm``); empty when Grid Engine would not say."""
        return self._text(ops.managers()).split()

    def operators(self) -> list[str]:
        """Grid Engine's operators (``qconf -so``); empty when Grid Engine would not say (as when
        there is none)."""
        return self._text(ops.operators()).split()

    # --- interactive -----------------------------------------------------------------------------------
    def interactive_argv(self, args: list[str]) -> list[str]:
        """The full qrsh argv, for a caller that runs it under its own terminal (srun, salloc)."""
        tool, a = ops.interactive(args)
        return self.argv(tool, a)

    def verify_interactive(self, flags: list[str]) -> Result:
        return self.call(ops.verify_interactive(flags))

    def interactive(self, flags: list[str], *, now: bool, pty: bool, command: list[str],
                    started: Callable[[], int | None]) -> tuple[int, int | None]:
        """Run a new interactive job (``ops.interactive``: qrsh with the translation's ``flags``,
        ``now`` or waiting in the queue, a terminal when ``pty``) in the foreground, with our
        standard input, output and terminal, until it ends: (qrsh's exit status, as
        ``Popen.returncode``; the first of SIGINT, SIGTERM, SIGHUP that came meanwhile, else None).

        SIGINT is qrsh's own (the terminal sends it to both of us): it is only noted. SIGTERM and
        SIGHUP end the job: cancelled (``-notify``: its tasks get SIGTERM first) once ``started()``
        names its id, else SIGINT to qrsh, which deletes its pending job. qrsh runs without the
        JOB_ID and SGE_TASK_ID of a Grid Engine job around the caller: this is a job of its own.
        SpawnError when qrsh cannot be started."""
        import os
        import signal as signals

        from .. import proc

        tool, args = ops.interactive(flags, now=now, pty=pty, command=command)
        env = getattr(self, "env", None) or dict(os.environ)
        env = {k: v for k, v in env.items() if k not in ("JOB_ID", "SGE_TASK_ID")}
        got: dict[str, int] = {}

        def on_signal(sig, frame):
            got.setdefault("sig", sig)
            job = started()
            if job is not None:
                self.cancel([str(job)])
            elif p.poll() is None:
                p.send_signal(signals.SIGINT)

        p = proc.popen(self.argv(tool, args), env=env)
        old = {s: signals.signal(s, on_signal) for s in (signals.SIGTERM, signals.SIGHUP)}
        old[signals.SIGINT] = signals.signal(signals.SIGINT, lambda s, f: got.setdefault("sig", s))
        try:
            rc = p.wait()
        finally:
            for s, h in old.items():
                signals.signal(s, h)
        return rc, got.get("sig")
