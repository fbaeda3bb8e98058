"""Where a user's submit records and events live: by id, and by time (issue 29, docs/store-scale.md).

Under a user's directory (state.py: ``users/<uid>``, checked by its readers)::

    records/                              0755
      jobs/<shard>/<id>.json              sbatch's record of job <id> (shard = id // SHARD)
      jobs/t/<day>/<bucket>/<id>.json     a hard link to it, in the 10-minute bucket of its writing
      events/<shard>/<id>.<task>.<kind>.json
      events/t/<day>/<bucket>/<id>.<task>.<kind>.json
      deps/<id>.json                      a hard link to the submit record of a job with --dependency
      .counts.json                        prune's count of each bucket (with the bucket's mtime)

``bucket`` is ``int(t // BUCKET)`` of the writer's clock and ``day`` is ``bucket // PER_DAY``:
plain numbers, no time zone. A record is one atomic write (a fresh name, then rename) into its id
shard, then one ``link(2)`` into its time bucket (EEXIST: already there); both are single
operations on an NFS server, so several hosts write one user's store without a lock. By id a
reader opens or lstats the shard's name (an array's tasks: one listing of its shard); by time it
lists the buckets a window overlaps, widened by ``SKEW`` on both sides (a writer's clock may be
off), and still checks each file's own mtime. The name in a bucket is only an index: the record
read is always the one under the shard, so a record rewritten later (a new job with a reused id,
scontrol update) is read as it is now, and a bucket's stale names cost a failed lstat.

The old layout (``jobs/<id>.json``, ``events/<name>``: one flat directory per kind) is read too
while it exists; ``migrate`` moves it over (link, then unlink: at every moment one of the two
names holds the record) a bounded batch at a time, and removes the flat directory once empty.

This module knows paths and directory listings only; reading and checking a file is state.py's.
"""

from __future__ import annotations

import os
import re
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterator

ROOT = "records"
KINDS = ("jobs", "events")
SHARD = 100           # ids per shard: a swarm's shard holds ~300 names (start, end, cancel), listed in ~60 us
                      # on tmpfs; 1000 ids' ~3000 names take ~0.6 ms, a whole squeue -j's time (docs/store-scale.md)
BUCKET = 600          # seconds per time bucket (min_job_age's 300 s spans at most 2)
PER_DAY = 86400 // BUCKET
SKEW = 300            # seconds a writer's clock may differ from a reader's (state.SKEW)
TIME = "t"
NARROW = 12           # buckets (2 hours) a window names rather than looks up in its days' listings
DEPS = "deps"
COUNTS = ".counts.json"
_DIGITS = re.compile(r"[0-9]{1,12}")
ID_OF = re.compile(r"([0-9]{1,12})\.")  # the job id a record's name starts with


def records_dir(home: str) -> str:
    return os.path.join(home, ROOT)


def kind_dir(home: str, kind: str) -> str:
    return os.path.join(home, ROOT, kind)


def shard(job_id: int) -> str:
    return str(int(job_id) // SHARD)


def id_path(home: str, kind: str, job_id: int, name: str) -> str:
    """Where record ``name`` of job ``job_id`` lives."""
    return os.path.join(home, ROOT, kind, str(int(job_id) // SHARD), name)


def path_of(home: str, kind: str, name: str) -> str | None:
    """``id_path`` of a record's file name (its job id is the name's first number)."""
    m = ID_OF.match(name)
    return None if m is None else id_path(home, kind, int(m[1]), name)


def bucket_of(t: float) -> int:
    return int(t // BUCKET)


def bucket_dir(home: str, kind: str, b: int) -> str:
    return os.path.join(home, ROOT, kind, TIME, str(b // PER_DAY), str(b))


def old_dir(home: str, kind: str) -> str:
    """The old layout's flat directory of ``kind`` (``jobs/``, ``events/``)."""
    return os.path.join(home, kind)


def has_old(home: str, kind: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(os.path.join(home, kind)).st_mode)
    except (OSError, ValueError):
        return False


def listing(path: str, limit: int | None = None) -> list[str]:
    """The names in a directory, at most ``limit`` (None: all). OSError as os.listdir."""
    if limit is None:
        return os.listdir(path)
    names: list[str] = []
    with os.scandir(path) as it:
        for e in it:
            if len(names) >= limit:
                break
            names.append(e.name)
    return names


def _numbers(path: str) -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(path) if _DIGITS.fullmatch(n))
    except OSError:
        return []


def buckets(home: str, kind: str, lo: int | None = None, hi: int | None = None,
            newest_first: bool = False) -> list[int]:
    """The buckets of ``kind`` in [lo, hi] (None: open) that exist: one listing of ``t/`` where
    the range is open, else of each day it spans; never a listing of a bucket. A range of fewer
    than NARROW buckets is given whole (the caller's listing of one that does not exist fails
    in ~2 us: cheaper than listing its day)."""
    t = os.path.join(home, ROOT, kind, TIME)
    if lo is not None and hi is not None and hi - lo < NARROW:  # a few buckets: named, not looked for
        out = list(range(lo, hi + 1))
        return out[::-1] if newest_first else out
    if lo is None or hi is None or hi // PER_DAY - lo // PER_DAY > 400:
        days = [d for d in _numbers(t) if (lo is None or d >= lo // PER_DAY) and (hi is None or d <= hi // PER_DAY)]
    else:
        days = list(range(lo // PER_DAY, hi // PER_DAY + 1))
    out: list[int] = []
    for d in days:
        for b in _numbers(os.path.join(t, str(d))):
            if b // PER_DAY == d and (lo is None or b >= lo) and (hi is None or b <= hi):
                out.append(b)
    return out[::-1] if newest_first else out


def window(home: str, kind: str, since: float | None, until: float | None, limit: int | None = None
           ) -> Iterator[tuple[int, str]]:
    """(bucket, name) of the names in the buckets of [since - SKEW, until + SKEW] (None: open),
    newest bucket first, at most ``limit`` names in all. Each name is that of a record whose
    writer's clock was within the window give or take SKEW: the caller checks the record's own
    time (and that it is a regular file of its owner's, when it reads it)."""
    lo = None if since is None else bucket_of(since - SKEW)
    hi = None if until is None else bucket_of(until + SKEW)
    left = limit
    for b in buckets(home, kind, lo, hi, newest_first=True):
        try:
            names = listing(bucket_dir(home, kind, b), left)
        except OSError:
            continue
        for n in names:
            yield b, n
        if left is not None:
            left -= len(names)
            if left <= 0:
                return


def shard_names(home: str, kind: str, shard_name: str, limit: int | None = None) -> list[str]:
    """The names in one id shard ([] without it)."""
    try:
        return listing(os.path.join(home, ROOT, kind, shard_name), limit)
    except OSError:
        return []


def _mkdirs(path: str, top: str) -> None:
    """Make ``path`` and its parents below ``top`` (which exists), 0755, as the caller's own."""
    if path == top or not path.startswith(top):
        return
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        return
    except FileNotFoundError:
        _mkdirs(os.path.dirname(path), top)
        try:
            os.mkdir(path, 0o755)
        except FileExistsError:
            pass


def ensure_dir(path: str, top: str) -> None:
    _mkdirs(path, top)


def link_into(src: str, home: str, kind: str, b: int, name: str) -> bool:
    """Hard-link the record ``src`` into bucket ``b`` as ``name``; a name already there is fine
    (the same record, or a stale one: the reader reads ``src``'s shard name in any case)."""
    d = bucket_dir(home, kind, b)
    dst = os.path.join(d, name)
    for _ in range(2):
        try:
            os.link(src, dst, follow_symlinks=False)
            return True
        except FileExistsError:
            return True
        except FileNotFoundError:
            _mkdirs(d, records_dir(home))
        except OSError:
            return False
    return False


def same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return a.st_ino == b.st_ino and a.st_dev == b.st_dev
