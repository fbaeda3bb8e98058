"""Open MPI steps: srun starts an Open MPI program through Open MPI's own launcher.

Debian's Open MPI 4.1 speaks only PMIx to its launcher (no PMI-1/PMI-2 client: ``ompi_info``
lists pmix ext3x/isolated/flux and no s1/s2), and a PMIx server is not what srun serves. So, as
Slurm sites without PMIx do, the step is handed to ``mpirun``: srun recognises an Open MPI program
(its ELF file needs ``libmpi.so.40``, Open MPI's library) and runs one ``mpirun`` on its own host
with the step's placement (``--host h1:n1,h2:n2 -np N``, ``--map-by slot`` for block, ``--map-by
node`` for cyclic, ``--bind-to none``). Inside the job mpirun starts its daemons through Grid
Engine's tight integration (``--mca plm rsh``: ``qrsh -inherit -V``, so every rank sees srun's
environment); elsewhere (srun in a salloc shell) through srun, as under Slurm.

Each rank starts through a fixed ``/bin/sh`` trampoline (no user text in it: the command is its
argv) that sets the rank's Slurm variables from Open MPI's (SLURM_PROCID = OMPI_COMM_WORLD_RANK,
SLURM_LOCALID = OMPI_COMM_WORLD_LOCAL_RANK) and the node's from word lists srun computed
(SLURM_NODEID, SLURMD_NODENAME, SLURM_GTIDS, SLURM_CPUS_ON_NODE), and writes the rank's exit
status to a private directory, so srun reports failed ranks host by host as Slurm does.
"""

from __future__ import annotations

import os
import shutil
import struct
from typing import Mapping, Sequence

OPEN_MPI_SONAMES = (b"libmpi.so.40", b"libmpi.so.20", b"libopen-rte.so.40", b"libopen-pal.so.40")
"""DT_NEEDED names that mark an Open MPI program (4.x and 2.x-3.x)."""

RANK_LAUNCH = (
    'r=${OMPI_COMM_WORLD_RANK:-0}; i=0; node=0; '
    'for w in $SHIM_OMPI_NODE_OF; do [ "$i" = "$r" ] && node=$w; i=$((i+1)); done; '
    'i=0; for w in $SHIM_OMPI_HOSTS; do [ "$i" = "$node" ] && SLURMD_NODENAME=$w; i=$((i+1)); done; '
    'i=0; for w in $SHIM_OMPI_GTIDS; do [ "$i" = "$node" ] && SLURM_GTIDS=$w; i=$((i+1)); done; '
    'i=0; for w in $SHIM_OMPI_CPUS; do [ "$i" = "$node" ] && SLURM_CPUS_ON_NODE=$w; i=$((i+1)); done; '
    'SLURM_PROCID=$r; SLURM_LOCALID=${OMPI_COMM_WORLD_LOCAL_RANK:-0}; SLURM_NODEID=$node; '
    'SLURM_TOPOLOGY_ADDR=$SLURMD_NODENAME; SLURM_TASK_PID=$$; st=$SHIM_OMPI_STATUS; '
    'export SLURM_PROCID SLURM_LOCALID SLURM_NODEID SLURMD_NODENAME SLURM_TOPOLOGY_ADDR SLURM_GTIDS '
    'SLURM_CPUS_ON_NODE SLURM_TASK_PID; '
    'unset SHIM_OMPI_NODE_OF SHIM_OMPI_HOSTS SHIM_OMPI_GTIDS SHIM_OMPI_CPUS SHIM_OMPI_STATUS; '
    '"$0" "$@"; rc=$?; [ -n "$st" ] && echo "$rc" > "$st/$r"; exit $rc'
)
"""The rank trampoline (fixed text; the rank's command is "$0" "$@")."""


def _needed(path: str) -> list[bytes]:
    """The DT_NEEDED names of a 64- or 32-bit little/big-endian ELF file ([] for anything else)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 52 or head[:4] != b"\x7fELF":
                return []
            is64, end = head[4] == 2, "<" if head[5] == 1 else ">"
            if is64:
                phoff, = struct.unpack_from(end + "Q", head, 32)
                phentsize, phnum = struct.unpack_from(end + "HH", head, 54)
            else:
                phoff, = struct.unpack_from(end + "I", head, 28)
                phentsize, phnum = struct.unpack_from(end + "HH", head, 42)
            if phnum > 256:
                return []
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            loads, dynamic = [], None
            for i in range(phnum):
                ent = table[i * phentsize:(i + 1) * phentsize]
                if is64:
                    p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(end + "IIQQQQ", ent)
                else:
                    p_type, p_offset, p_vaddr, _, p_filesz = struct.unpack_from(end + "IIIII", ent)
                if p_type == 1:
                    loads.append((p_vaddr, p_offset, p_filesz))
                elif p_type == 2:
                    dynamic = (p_offset, p_filesz)
            if dynamic is None or dynamic[1] > 1 << 20:
                return []
            f.seek(dynamic[0])
            dyn = f.read(dynamic[1])
            size = 16 if is64 else 8
            fmt = end + ("qQ" if is64 else "iI")
            needed, strtab = [], None
            for i in range(0, len(dyn) - size + 1, size):
                tag, val = struct.unpack_from(fmt, dyn, i)
                if tag == 0:
                    break
                if tag == 1:
                    needed.append(val)
                elif tag == 5:
                    strtab = val
            if strtab is None:
                return []
            base = next((off + strtab - va for va, off, sz in loads if va <= strtab < va + sz), None)
            if base is None:
                return []
            out = []
            for n in needed[:64]:
                f.seek(base + n)
                out.append(f.read(256).split(b"\0", 1)[0])
            return out
    except (OSError, struct.error, ValueError):
        return []


def is_open_mpi(cmd: str, path: str | None, cwd: str) -> bool:
    """Whether the step's program is an Open MPI program (an ELF file that needs Open MPI's
    libmpi, libopen-rte or libopen-pal). A script or a wrapper cannot be told apart: it runs as
    an ordinary task."""
    if "/" in cmd:
        full = cmd if os.path.isabs(cmd) else os.path.join(cwd, cmd)
    else:
        full = shutil.which(cmd, path=path if path is not None else os.defpath) or ""
    if not full:
        return False
    names = _needed(full)
    if b"libmpich.so.12" in names:
        return False
    return any(n in OPEN_MPI_SONAMES for n in names)


def mpirun_path(path: str | None) -> str | None:
    """Open MPI's launcher: mpirun.openmpi (Debian's name), orterun, else mpirun."""
    for name in ("mpirun.openmpi", "orterun", "mpirun"):
        found = shutil.which(name, path=path if path is not None else os.defpath)
        if found:
            return found
    return None


def mpirun_argv(mpirun: str, layout: Sequence[tuple[str, int, Sequence[int]]], argv: Sequence[str], *,
                cyclic: bool, environ: Mapping[str, str]) -> list[str]:
    """mpirun with the step's placement, each rank through RANK_LAUNCH."""
    hosts = ",".join(f"{h}:{len(t)}" for h, _, t in layout)
    ntasks = sum(len(t) for _, _, t in layout)
    out = [mpirun, "--host", hosts, "-np", str(ntasks), "--map-by", "node" if cyclic else "slot",
           "--bind-to", "none", "--stdin", "all", "--oversubscribe"]  # srun placed the ranks (-O included)
    if all(environ.get(k) for k in ("JOB_ID", "PE_HOSTFILE", "SGE_ROOT", "ARC")):
        out += ["--mca", "plm", "rsh"]  # Grid Engine's tight integration: qrsh -inherit -V
    if os.getuid() == 0:
        out.append("--allow-run-as-root")  # srun runs root's tasks, as Slurm does
    return out + ["/bin/sh", "-c", RANK_LAUNCH, *argv]


def rank_env(layout: Sequence[tuple[str, int, Sequence[int]]], status_dir: str | None) -> dict[str, str]:
    """The word lists RANK_LAUNCH reads (host names, rank lists and CPU counts per node)."""
    ntasks = sum(len(t) for _, _, t in layout)
    node_of = [0] * ntasks
    for node, (_, _, tids) in enumerate(layout):
        for t in tids:
            node_of[t] = node
    env = {"SHIM_OMPI_NODE_OF": " ".join(map(str, node_of)),
           "SHIM_OMPI_HOSTS": " ".join(h for h, _, _ in layout),
           "SHIM_OMPI_GTIDS": " ".join(",".join(map(str, t)) for _, _, t in layout),
           "SHIM_OMPI_CPUS": " ".join(str(s) for _, s, _ in layout)}
    if status_dir:
        env["SHIM_OMPI_STATUS"] = status_dir
    return env


def rank_statuses(status_dir: str, ntasks: int) -> dict[int, tuple[int, int]]:
    """Each rank's (exit code, signal) from the trampoline's files (128+n from sh reads as signal
    n); the directory is removed."""
    out: dict[int, tuple[int, int]] = {}
    for r in range(ntasks):
        try:
            with open(os.path.join(status_dir, str(r)), encoding="ascii") as f:
                text = f.read(16).strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text.isdigit():
            code = int(text)
            out[r] = (0, code - 128) if 128 < code < 160 else (code, 0)
    shutil.rmtree(status_dir, ignore_errors=True)
    return out
