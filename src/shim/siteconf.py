"""Fast access to the site config for every command.

Validating TOML with pydantic costs a command ~0.2 s of imports, more than ``qsub`` itself takes.
So the validated config is cached as JSON per user, keyed by the file's path, size and mtime, and
read back as plain attribute-dicts; pydantic runs only when the file changed (config.py). Code
reads ``cfg.cluster.state_dir`` and ``cfg.partitions["debug"].queue`` either way.
"""

from __future__ import annotations

import json
import os

from .plain import NS  # (a leaf: config.py reads it too, without this module)

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any

DEFAULT_PATH = "/etc/slurm-shim/config.toml"
_loaded: "NS | None" = None
# The cache file last read in this process: (its key, its contents). Kept across reset(), so the
# warm service's children (forked from a daemon that read the config) and a process that reads the
# config again skip the read and the JSON parse while the cache file is the same file, unchanged:
# the key is its lstat (device, inode, size, times, owner, mode) and this process's uid, so a
# rewritten, replaced, relinked or chowned cache file is read (and checked) again.
_memo: "tuple[tuple, Any] | None" = None


def _memo_key(cache: str) -> tuple | None:
    try:
        st = os.lstat(cache)
    except OSError:
        return None
    return (cache, os.getuid(), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_uid,
            st.st_mode)


def _cache_path(path: str, st: os.stat_result) -> str:
    key = f"{os.path.abspath(path).replace('/', '%')}-{st.st_size}-{st.st_mtime_ns}"
    try:  # the schema too: a new shim's defaults (e.g. gridengine.timeout) apply at once
        schema = os.stat(os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.py"))
        key += f"-{schema.st_size}-{schema.st_mtime_ns}"
    except OSError:
        pass
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "slurm-shim", f"config-{key}.json")


def _read_cache(cache: str) -> Any:
    """The cached config, if it is a regular file of this user's (not a link, not planted)."""
    fd = os.open(cache, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not (st.st_mode & 0o170000 == 0o100000 and st.st_uid == os.getuid() and st.st_size < 1 << 20):
            raise ValueError("not this user's cache file")
        data = json.loads(f.read())
    if not isinstance(data, dict):
        raise ValueError("not a cached config")
    return data


def _write_cache(cache: str, cfg: Any) -> None:
    from .store import state

    os.makedirs(os.path.dirname(cache), mode=0o700, exist_ok=True)
    state.atomic_write(cache, json.dumps(cfg), 0o600)


def get() -> NS:
    """The site config of this process (validated once per change of the file)."""
    global _loaded, _memo
    if _loaded is not None:
        return _loaded
    path = os.environ.get("SLURM_SHIM_CONFIG") or DEFAULT_PATH
    try:
        st = os.stat(path)
    except OSError:
        st = None
    cache = _cache_path(path, st) if st is not None else None
    if cache:
        key = _memo_key(cache)
        if key is not None and _memo is not None and _memo[0] == key:
            _loaded = NS.wrap(_memo[1])  # (a fresh copy: callers may change theirs)
            return _loaded
        try:
            data = _read_cache(cache)
            _loaded = NS.wrap(data)
            _memo = (key, data) if key is not None else None
            return _loaded
        except (OSError, ValueError):
            pass
    from . import config  # pydantic: only when the file is new or changed

    cfg = config.plain(config.load())
    if cache:
        try:
            _write_cache(cache, cfg)
        except (OSError, TypeError, ValueError):
            pass  # an unwritable home only costs speed
    _loaded = cfg
    return cfg


def reset() -> None:
    global _loaded
    _loaded = None
