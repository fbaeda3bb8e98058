"""The user's private run directory: where the warm service (service/server.py) and the DRMAA
submit agent (gridengine/agent.py) keep their sockets, locks and logs. One rule for both, and
client.c's fallback_base follows it: ``service_dir`` is the directory, ``_private`` the check that
it is the user's own and nobody else's, ``_fallback_base`` where it goes when /tmp/slurm-shim-<uid>
is someone else's (F-29)."""

from __future__ import annotations

import os
import sys




def _private(path: str, create: bool) -> bool:
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (st.st_mode & 0o170000) == 0o040000 and st.st_uid == os.getuid() and not st.st_mode & 0o077


def cell_name(config_path: str) -> str:
    """The per-site-config subdirectory's name: ``cell-`` and the 64-bit FNV-1a hash of the config's
    path, in hex (client.c computes the same)."""
    h = 0xCBF29CE484222325
    for b in config_path.encode("utf-8", "surrogateescape"):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"cell-{h:016x}"


SOCKET_ROOM = len("/cell-0123456789abcdef/service.sock")  # what goes below the base directory
SUN_PATH = 108  # sockaddr_un.sun_path, its NUL included


def _owned(path: str, uid: int, follow: bool = False) -> bool:
    """A directory of ``uid`` that nobody else may write to (``follow``: the home, which may be a link)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError):
        return False
    return (st.st_mode & 0o170000) == 0o040000 and st.st_uid == uid and not st.st_mode & 0o022


def squatted_tmp(uid: int | None = None) -> str | None:
    """/tmp/slurm-shim-<uid> when it exists and is not the user's own private directory (someone
    else made it first: F-29), else None. For doctor and SLURM_SHIM_DEBUG."""
    d = f"/tmp/slurm-shim-{os.getuid() if uid is None else uid}"
    try:
        os.lstat(d)
    except OSError:
        return None
    return None if _private(d, False) else d


def _fallback_base(env, uid: int, create: bool) -> str | None:
    """Where $XDG_RUNTIME_DIR offers nothing: /tmp/slurm-shim-<uid>; where someone else holds that
    name, /run/user/<uid>/slurm-shim (when /run/user/<uid> is the user's), else
    $HOME/.cache/slurm-shim/run (in a home and a .cache of the user's own that others cannot
    write, and short enough for a socket path); None when none of these can be had. client.c's
    service_dir is the same rule."""
    d = f"/tmp/slurm-shim-{uid}"
    if _private(d, create):
        return d
    if env.get("SLURM_SHIM_DEBUG"):
        print(f"slurm-shim: service: {d} is not your own private directory (someone else made it?): "
              "using another one", file=sys.stderr)
    run = f"/run/user/{uid}"
    if _owned(run, uid) and _private(run + "/slurm-shim", create):
        return run + "/slurm-shim"
    home = env.get("HOME") or ""
    if not home.startswith("/") or not _owned(home, uid, follow=True):
        return None
    cache = home.rstrip("/") + "/.cache"
    if create:
        try:
            os.mkdir(cache, 0o700)
        except OSError:
            pass
    d = cache + "/slurm-shim/run"
    if len(d) + SOCKET_ROOM >= SUN_PATH or not _owned(cache, uid):
        return None
    return d if _private(cache + "/slurm-shim", create) and _private(d, create) else None


def service_dir(environ=None, create: bool = True) -> str | None:
    """The user's private directory for the service and the submit agent, or None when no safe
    one exists (then: in-process, and qsub): $SLURM_SHIM_AGENT_DIR as it is, else
    $XDG_RUNTIME_DIR/slurm-shim, else /tmp/slurm-shim-<uid> (or, where someone else holds that,
    ``_fallback_base``'s); each must be this user's directory with no access for others. A service and an agent serve one site config (one cell): with
    $SLURM_SHIM_CONFIG set, theirs are in a subdirectory of its own (cell_name), so a user who
    works with two cells has a warm service and an agent for each."""
    env = os.environ if environ is None else environ
    uid = os.getuid()
    if env.get("SLURM_SHIM_AGENT_DIR"):
        d = env["SLURM_SHIM_AGENT_DIR"]
        return d if _private(d, create) else None
    base = None
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        try:
            st = os.stat(runtime)
            if (st.st_mode & 0o170000) == 0o040000 and st.st_uid == uid:
                d = os.path.join(runtime, "slurm-shim")
                if _private(d, create):
                    base = d
        except OSError:
            pass
    if base is None:
        base = _fallback_base(env, uid, create)
        if base is None:
            return None
    conf = env.get("SLURM_SHIM_CONFIG")
    if not conf:
        return base
    d = os.path.join(base, cell_name(conf))
    return d if _private(d, create) else None
