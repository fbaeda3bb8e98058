"""Why qmaster did not answer (issue 16): after a Grid Engine call timed out, one ``qping -info``
of the cell's qmaster tells a qmaster that is not there from one that is up but did not answer
this client. The second is what a Grid Engine of another version looks like (SGE 8.1.9's qstat
against an OCS 9 qmaster, or the other way round, waits for ever: their wire formats differ),
or a qmaster too busy to answer. qping speaks only the communication layer, which both share,
so it answers across versions, in milliseconds.

It runs once per command, only after a timeout: the normal path pays nothing. Its line follows
Slurm's own ("Socket timed out on send/recv operation"), which tools look for, and names what to
check: the site config's ``gridengine.bin_dir`` and ``qmaster_port``.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

QPING_TIMEOUT = 0.5  # seconds: qping -info answers in ~10 ms where a qmaster listens; what it adds to a timeout
ACT_QMASTER_MAX = 4096  # bytes of $SGE_ROOT/$SGE_CELL/common/act_qmaster read (a host name)


def master_host(sge_root: str, sge_cell: str) -> str | None:
    """The cell's qmaster host, from ``common/act_qmaster`` (a regular file; its first word)."""
    path = os.path.join(sge_root, sge_cell, "common", "act_qmaster")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        words = os.read(fd, ACT_QMASTER_MAX).decode("utf-8", "replace").split()
    except OSError:
        return None
    finally:
        os.close(fd)
    return words[0] if words else None


def qmaster_port(env: dict[str, str]) -> int | None:
    """The port Grid Engine's clients use: SGE_QMASTER_PORT (ge_env sets the site's), else the
    ``sge_qmaster`` service (/etc/services)."""
    v = env.get("SGE_QMASTER_PORT", "")
    if v.isdigit():
        return int(v)
    import socket

    try:
        return socket.getservbyname("sge_qmaster", "tcp")
    except OSError:
        return None


def client_version(help_text: str) -> str:
    """The first line of a q* command's ``-help``: "SGE 8.1.9", "OCS 9.1.4" (empty if none)."""
    first = help_text.lstrip().split("\n", 1)[0].strip()
    return first if len(first) <= 64 else ""


def explain(answered: bool, host: str, port: int, tool: str, bin_dir: str, version: str, timeout: float,
            config: str) -> str:
    """The line that follows Slurm's timeout message. Pure."""
    if not answered:
        return (f"slurm-shim: no Grid Engine qmaster answers at {host}:{port} (qping -info): is sge_qmaster "
                f"running there? (gridengine.qmaster_port in {config})")
    client = f"{tool} from {bin_dir}" if bin_dir else tool
    if version:
        client += f" ({version})"
    return (f"slurm-shim: the qmaster at {host}:{port} is up (qping answers), but {client} got no answer "
            f"in {timeout:g} s: a Grid Engine of another version than the client's, or a qmaster too busy "
            f"to answer; check gridengine.bin_dir and gridengine.qmaster_port in {config}")


def silence(backend: Any, tool: str) -> list[str]:
    """The line that says why ``tool`` got no answer (empty when nothing can be told)."""
    from .. import proc
    from ..config import config_path

    ge = backend.cfg.gridengine
    env = backend.env
    host = master_host(env.get("SGE_ROOT", ge.sge_root), env.get("SGE_CELL", ge.sge_cell))
    port = qmaster_port(env)
    if host is None or port is None:
        return []
    try:
        r = proc.run(backend.argv("qping", ["-info", host, str(port), "qmaster", "1"]), timeout=QPING_TIMEOUT,
                     env=env)
        answered = r.returncode == 0 and "status:" in r.stdout
    except proc.Timeout:  # it hung too: nothing answers there
        answered = False
    except proc.SpawnError:  # no qping beside the clients: say nothing more
        return []
    version = ""
    if answered:
        try:
            h = proc.run(backend.argv("qstat", ["-help"]), timeout=QPING_TIMEOUT, env=env)
            version = client_version(h.stdout)
        except proc.SpawnError:
            pass
    return [explain(answered, host, port, tool, backend.bin_dir, version, backend.timeout, config_path())]
