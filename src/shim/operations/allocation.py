"""salloc's allocation, its lifecycle: the holder job's script, the wait for it to run and record
its hosts, the notice of its end under the command, its release with the command's exit code.

The allocation is a Grid Engine job (submitted by ``submit.allocate``) whose batch script,
``runtime.steps.hold_main``, records the job's hosts in the user's private ``steps/`` and waits
for the release file there. Slurm's messages ("Pending job allocation N", "Job allocation N has
been revoked.", ...) go out through the caller's ``say(text)`` (salloc prints them unless -Q).
"""

from __future__ import annotations

import os
import time

from ..gridengine import backends
from ..store import state
from ..errors import ShimError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from typing import Any, Callable

PENDING_NOTICE = 2.0
"""Seconds before salloc says the job is queued: Grid Engine starts even an idle cluster's jobs
about a second after submission, which Slurm would not call pending."""

STALE = 300.0
"""An allocation record older than the submission by this much is another job's (a reused id)."""


def holder_script(state_dir: str, watch_pid: bool = True) -> bytes:
    """The allocation job's batch script: shim.steps.hold_main, told where salloc runs (so that an
    allocation whose salloc died on the same host ends; --no-shell allocations outlive salloc)."""
    from ..runtime import boot, steps

    return boot.script("hold_main", [state_dir, steps.short_host(), str(os.getpid() if watch_pid else 0)],
                       comment="slurm-shim: this job holds a salloc allocation until salloc releases it.")


def wait_granted(job_id: int, cfg, immediate: int | None, say: Callable[[str], None], submitted: float | None = None,
                 env_file: str | None = None, prog: str = "salloc") -> dict:
    """Wait until the allocation job runs and has recorded its hosts (its record: hosts, env, ...);
    Slurm's messages on the way. SIGINT, SIGTERM or SIGHUP while waiting, or the job gone, revoke
    it; -I's ``immediate`` seconds passing cancel it (Slurm's "Requested nodes are busy").
    ``env_file``, the environment the holder's job wrapper reads, is removed when the wait is over
    (it has been read, or the job is gone)."""
    import signal

    from ..runtime import steps

    submitted = time.time() if submitted is None else submitted
    backend = backends.get(cfg)
    sdir = cfg.cluster.state_dir
    start = time.monotonic()
    delay = 0.05
    said_pending = False
    next_check = start + 2.0
    interrupted: dict[str, int] = {}
    old = {s: signal.signal(s, lambda sig, f: interrupted.setdefault("sig", sig))
           for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        while True:
            data = steps.load_allocation(sdir, str(job_id))
            began = (data or {}).get("start")
            if data and isinstance(began, (int, float)) and began >= submitted - STALE:
                if said_pending:
                    say(f"job {job_id} has been allocated resources")
                return data
            now = time.monotonic()
            if interrupted:
                backend.cancel([str(job_id)])
                say(f"Job allocation {job_id} has been revoked.")
                raise ShimError(code=1)
            if immediate is not None and now - start > immediate:
                backend.cancel([str(job_id)])
                if said_pending:
                    say(f"Job allocation {job_id} has been revoked.")
                raise ShimError(f"{prog}: error: Unable to allocate resources: Requested nodes are busy", code=1)
            if not said_pending and now - start > PENDING_NOTICE and immediate is None:
                say(f"Pending job allocation {job_id}")
                say(f"job {job_id} queued and waiting for resources")
                said_pending = True
            if now >= next_check:
                next_check = now + 2.0
                if not backend.exists(job_id) and not steps.load_allocation(sdir, str(job_id)):
                    say(f"Job allocation {job_id} has been revoked.")
                    raise ShimError(code=1)
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if env_file:
            try:
                os.unlink(env_file)
            except OSError:
                pass


def nodes_ready(alloc: dict) -> str:
    """What salloc says after "Granted job allocation N" where the release says it
    (releases.NODES_READY, 24.11 on): "Nodes <the job's nodes> are ready for job"; "" before."""
    from ..slurm import hostlist, releases

    if not releases.current().has(releases.NODES_READY):
        return ""
    nodes = (alloc.get("env") or {}).get("SLURM_JOB_NODELIST") or \
        hostlist.compress([h[0] for h in alloc.get("hosts") or [] if isinstance(h, (list, tuple)) and h])
    return f"Nodes {nodes} are ready for job"


def verbose_lines(job_id: int, when: str) -> list[str]:
    """What salloc -v says about its job where the release says it (fixtures/slurm-*/
    oracle-step-ends.txt, N): ``when`` "submitted", "JobId=N returned by the controller" (26.05:
    releases.JOB_ID_RETURNED); ``when`` "released", after "Relinquishing job allocation N", "Job
    allocation N has been revoked." (22.05: releases.REVOKED_AFTER_RELEASE)."""
    from ..slurm import releases

    rel = releases.current()
    if when == "submitted" and rel.has(releases.JOB_ID_RETURNED):
        return [f"JobId={job_id} returned by the controller"]
    if when == "released" and rel.has(releases.REVOKED_AFTER_RELEASE):
        return [f"Job allocation {job_id} has been revoked."]
    return []


def release(cfg, job_id: int, rc: int) -> None:
    """End the allocation with the command's exit code: a file in the user's private ``steps/``
    that the holder watches (written atomically); the job is cancelled when it cannot be written."""
    from ..runtime import steps

    path = steps.release_path(cfg.cluster.state_dir, str(job_id))
    if path is None or not state.write_json(path, {"rc": int(rc)}, 0o600):
        backends.get(cfg).cancel([str(job_id)])


def watch(cfg, job_id: int, child: Any, kill_sig: int | None, stop: threading.Event,
          say: Callable[[str], None]) -> None:
    """The allocation ending under the command (scancel, time limit): Slurm's notice, and the
    --kill-command signal for the command (``child``, a Popen) and what it started. Returns when
    ``stop`` is set (the command ended) or the allocation has gone; polls once a second."""
    from ..runtime import steps

    path = steps.alloc_path(cfg.cluster.state_dir, str(job_id))
    while not stop.wait(1.0):
        if path is None or not os.path.lexists(path):
            if stop.is_set():
                return
            say(f"Job allocation {job_id} has been revoked.")
            if kill_sig and child.poll() is None:
                steps.signal_tree(child.pid, kill_sig)  # the command and what it started
            return


def watching(cfg, job_id: int, child: Any, kill_sig: int | None, say: Callable[[str], None]) -> threading.Event:
    """``watch`` in a daemon thread; the event that stops it (set it when the command has ended)."""
    import threading

    stop = threading.Event()
    threading.Thread(target=watch, args=(cfg, job_id, child, kill_sig, stop, say), daemon=True).start()
    return stop
