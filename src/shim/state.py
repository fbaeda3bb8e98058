"""What the shim remembers that Grid Engine does not: the Slurm side of each job.

One directory (site config ``cluster.state_dir``, mode 1777 like /tmp) holds small JSON files:
``jobs/<id>.json`` written by sbatch at submission (name, comment, array index map, requested
geometry, ...), and ``events/<id>.<task>.<kind>.json`` written by the job wrapper (start, end with
the real exit code) and by scancel (a cancel, which Grid Engine does not account for pending
jobs). Each file is written to a temporary name and renamed, so concurrent writers never see or
leave a torn record.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from .config import SiteConfig

Where = Union["SiteConfig", str]  # a site config, or the state directory itself


def _dir(cfg: Where, sub: str) -> str:
    root = cfg if isinstance(cfg, str) else cfg.cluster.state_dir
    return os.path.join(root, sub)


def _write(path: str, data: dict[str, Any]) -> None:
    d = os.path.dirname(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        f = open(tmp, "w", encoding="utf-8")
    except FileNotFoundError:
        _make_shared_dir(d)
        f = open(tmp, "w", encoding="utf-8")
    with f:
        json.dump(data, f, separators=(",", ":"))
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _make_shared_dir(d: str) -> None:
    """Like /tmp: every user may add files, none may remove another's (mode 1777, umask aside)."""
    for path in (os.path.dirname(d), d):
        try:
            os.mkdir(path)
            os.chmod(path, 0o1777)
        except FileExistsError:
            pass


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (FileNotFoundError, ValueError, PermissionError):
        return None


def record_submit(cfg: Where, job_id: int, data: dict[str, Any]) -> None:
    _write(os.path.join(_dir(cfg, "jobs"), f"{job_id}.json"), data)


def load_submit(cfg: Where, job_id: int) -> dict[str, Any] | None:
    return _read(os.path.join(_dir(cfg, "jobs"), f"{job_id}.json"))


def record_event(cfg: Where, job_id: int, task: int | None, kind: str, data: dict[str, Any]) -> None:
    """kind: "start", "end" (job wrapper), "cancel" (scancel). task: Slurm's array index or None."""
    t = "x" if task is None else str(task)
    data = {"t": time.time(), **data}
    _write(os.path.join(_dir(cfg, "events"), f"{job_id}.{t}.{kind}.json"), data)


def load_events(cfg: Where, job_id: int) -> dict[tuple[int | None, str], dict[str, Any]]:
    """All events of a job: {(task, kind): data}."""
    out: dict[tuple[int | None, str], dict[str, Any]] = {}
    d = _dir(cfg, "events")
    prefix = f"{job_id}."
    try:
        names = [n for n in os.listdir(d) if n.startswith(prefix) and n.endswith(".json")]
    except FileNotFoundError:
        return out
    for n in names:
        parts = n[:-5].split(".")
        if len(parts) != 3:
            continue
        task = None if parts[1] == "x" else int(parts[1])
        data = _read(os.path.join(d, n))
        if data is not None:
            out[(task, parts[2])] = data
    return out


def list_submitted(cfg: Where) -> list[int]:
    try:
        return sorted(int(n[:-5]) for n in os.listdir(_dir(cfg, "jobs")) if n.endswith(".json") and n[:-5].isdigit())
    except FileNotFoundError:
        return []
