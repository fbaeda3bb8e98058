"""Root's holds: which jobs an admin held with ``scontrol hold`` (Slurm's JobHeldAdmin).

Slurm tells an admin's hold from a user's: the listing says JobHeldAdmin, and the job's owner may
not release it ("Access/permission denied": fixtures/slurm-*/oracle-hold.txt, asked of 22.05.8,
24.11.5 and 26.05.5). Grid Engine keeps the two apart too (an operator hold, ``qhold -h o``, which
the owner's ``qrls`` leaves in place, silently), but its listing (``qstat -u '*' -r -xml``) shows
every hold as ``h``; telling them apart would cost another Grid Engine call per listing. So root's
``scontrol hold`` writes the jobs it held into one small file of root's own,
``users/0/holds/admin.json``, read once per listing that shows a held job (``admin_held``).

The file is believed only from root's verified directory (state.user_dir: a real directory of uid
0 that nobody else may write to), as a regular file of root's, at most ``LIMIT`` bytes, opened
without following a link (state.read_small_file); anything else reads as no admin holds. It is
written atomically (state.write_json) by root alone, and bounded: at most ``MAX_JOBS`` jobs, the
jobs Grid Engine no longer has pruned when it grows past ``PRUNE_AT`` (one qstat for them).

Its form: ``{"jobs": {"<job id>": null | [Slurm array indices]}, "submitted": {"<job id>": <Grid
Engine's submission time>}}``: null for the whole job, else the array tasks root held. An entry
whose submission time is not that of the job Grid Engine lists under its id now is an earlier
job's (Grid Engine reuses ids; a job root held and that ended unreleased stays until pruned), and
is not believed (``current``).
"""

from __future__ import annotations

import json
import os

from . import state

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Callable, Iterable

    from .state import Where

    Holds = dict[int, "frozenset[int] | None"]

SUB = "holds"
NAME = "admin.json"
MAX_JOBS = 20000      # jobs the file names at most (~20 bytes each): the newest ids are kept
PRUNE_AT = 1000       # past this many, a write asks Grid Engine which of them it still has
LIMIT = 1 << 20       # bytes: a larger file is no record of root's


def path_of(cfg: Where) -> str | None:
    """Where root's record is, if root's directory is one to trust (None otherwise)."""
    d = state.user_dir(cfg, 0)
    return None if d is None else os.path.join(d, SUB, NAME)


def _by_job(raw: bytes, field: str) -> dict[int, object]:
    """The record's ``field``: job id -> value, for keys that are job ids; {} for anything that is
    not the record's form."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
    got = data.get(field) if isinstance(data, dict) else None
    if not isinstance(got, dict):
        return {}
    return {int(k): v for k, v in got.items() if isinstance(k, str) and k.isascii() and k.isdigit() and len(k) <= 12}


def parse(raw: bytes) -> Holds:
    """The record's jobs, or {} for anything that is not the record's form."""
    out: Holds = {}
    for job, v in _by_job(raw, "jobs").items():
        if v is None:
            out[job] = None
        elif isinstance(v, list) and all(type(i) is int and i >= 0 for i in v):
            out[job] = frozenset(v)
    return out


def submitted(raw: bytes) -> dict[int, float]:
    """The record's ``submitted``: each held job's Grid Engine submission time, where root's hold
    knew it (a job id Grid Engine reuses is another job: ``current``)."""
    return {job: float(v) for job, v in _by_job(raw, "submitted").items() if type(v) in (int, float) and v > 0}


def read_all(cfg: Where) -> tuple[Holds, dict[int, float]]:
    """Root's admin holds and their jobs' submission times, from root's own directory only (the
    module's trust rule)."""
    p = path_of(cfg)
    if p is None or not state._trusted_dir(os.path.dirname(p), 0):
        return {}, {}
    got = state.read_small_file(p, LIMIT, (0,))
    return ({}, {}) if got is None else (parse(got[0]), submitted(got[0]))


def read(cfg: Where) -> Holds:
    """Root's admin holds, from root's own directory only (the module's trust rule)."""
    return read_all(cfg)[0]


def current(holds: Holds, times: dict[int, float], records: list) -> Holds:
    """``holds`` less the entries of another job of the same id: one whose recorded submission
    time is not that of the job Grid Engine lists now (root held an earlier job of that id, which
    ended without root's release; Grid Engine reuses ids)."""
    out = dict(holds)
    for r in records:
        t = times.get(r.job_id)
        if r.job_id in out and t is not None and r.submit_time is not None \
                and abs(r.submit_time.timestamp() - t) > 1:
            out.pop(r.job_id)
    return out


def held(holds: Holds, job_id: int, tasks: Iterable[int] | None) -> bool:
    """Does root's hold hold this job (``tasks`` None) or every one of these array tasks."""
    if job_id not in holds:
        return False
    mine = holds[job_id]
    if mine is None:
        return True
    want = list(tasks) if tasks is not None else []
    return bool(want) and all(t in mine for t in want)


def record_tasks(r) -> list[int] | None:
    """A listing record's Slurm array indices (None: a job that is no array)."""
    if r.array_task is not None:
        return [r.array_task]
    idx = r.extra.get("pending_indices")
    return list(idx) if idx else None


def mark(cfg: Where, records: list, split: Callable | None = None) -> int:
    """Listing records a user hold shows as held (JobHeldUser) that root held: JobHeldAdmin. The
    record is read once, and only when a held job is listed. From a pending array's record of
    which root held some tasks only, each of those tasks is split off (``split(record, indices)``:
    a copy for those indices) into a record of its own appended to ``records``, as Slurm splits a
    held task off its array's pending record. The count marked."""
    if not any(r.reason == "JobHeldUser" for r in records):  # (a pending job's reason alone)
        return 0
    holds, times = read_all(cfg)
    holds = current(holds, times, [r for r in records if r.reason == "JobHeldUser"])
    n = 0
    for r in [r for r in records if r.job_id in holds and r.reason == "JobHeldUser"] if holds else ():
        some = holds[r.job_id]
        tasks = None if some is None else record_tasks(r)
        if some is None or held(holds, r.job_id, tasks):
            r.reason = "JobHeldAdmin"
            n += 1
            continue
        mine = [t for t in tasks or () if t in some]
        if split is not None and mine:  # (held() said: not every one of them)
            rest = split(r, [t for t in tasks or () if t not in some])
            for t in mine:  # each task root held: a record of its own, as Slurm's
                part = split(r, [t])
                part.reason, part.array_task, part.array_pending = "JobHeldAdmin", t, None
                records.append(part)
                n += 1
            r.extra, r.array_pending = rest.extra, rest.array_pending
    return n


def change(holds: Holds, job_id: int, tasks: list[int] | None, add: bool) -> None:
    """Root held (``add``) or released this job or these of its tasks."""
    cur = holds.get(job_id, frozenset())
    if add:
        holds[job_id] = None if tasks is None or cur is None else frozenset(cur | set(tasks))
    elif tasks is None:
        holds.pop(job_id, None)
    elif cur is not None:
        rest = frozenset(cur - set(tasks))
        if rest:
            holds[job_id] = rest
        else:
            holds.pop(job_id, None)


def update(cfg: Where, held_now: list[tuple[int, list[int] | None]], released: list[tuple[int, list[int] | None]],
           alive: Callable[[list[int]], set[int] | None] | None = None,
           when: dict[int, float] | None = None) -> bool:
    """Root's write: these jobs (tasks) held, those released. Past PRUNE_AT jobs, those ``alive``
    says Grid Engine no longer has are dropped; past MAX_JOBS, the oldest ids. False when it could
    not be written (root's hold still holds; the listing then says JobHeldUser)."""
    if os.getuid() != 0:
        return False
    holds, times = read_all(cfg)
    for job, tasks in released:
        change(holds, job, tasks, False)
    for job, tasks in held_now:
        if when and job in when and times.get(job) not in (None, when[job]):
            holds.pop(job, None)  # (an earlier job of that id: its entry is not this one's)
        change(holds, job, tasks, True)
    times.update({j: t for j, t in (when or {}).items() if j in holds})
    if len(holds) > PRUNE_AT and alive is not None:
        have = alive(sorted(holds))
        if have is not None:
            holds = {j: v for j, v in holds.items() if j in have}
    if len(holds) > MAX_JOBS:
        holds = {j: holds[j] for j in sorted(holds)[-MAX_JOBS:]}
    d = state.own_dir(cfg, SUB)
    if d is None:
        return False
    data = {"jobs": {str(j): (None if v is None else sorted(v)) for j, v in sorted(holds.items())},
            "submitted": {str(j): times[j] for j in sorted(holds) if j in times}}
    return state.write_json(os.path.join(d, NAME), data, 0o644)
