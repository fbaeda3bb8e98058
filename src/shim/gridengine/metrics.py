"""A job's own metrics (token counts, tool calls, cost) in Grid Engine's accounting, and in sacct.

How they get there (Open Cluster Scheduler / Gridware Cluster Scheduler 9, ``usage_patterns``):

1. The job appends ``name=value`` lines to the file ``$SLURM_SHIM_METRICS`` (the job wrapper sets
   it: ``slurm-shim-metrics`` in the job's private ``TMPDIR``), e.g. ``echo tokens_in=1200 >>
   "$SLURM_SHIM_METRICS"``. Each line adds to its metric (a counter per name, summed), so many
   processes of the job may append at once (one short ``write`` with O_APPEND each).
2. After the job, the shepherd writes the job's ``usage`` file (getrusage's values, ``name=value``
   lines) into its spool directory, then starts the epilog. This module's ``epilog`` (as root:
   the spool directory is Grid Engine's) appends each metric there as ``metric_<name>=<value>``.
   (``cluster up --flavour ocs`` writes the epilog script; a queue runs it when its ``epilog`` is
   ``cluster_ocs.epilog_conf``: only batch-only queues, as OCS 9.1.4 fails every ``qrsh -pty n``
   job of a queue with an epilog, see cluster_ocs.py.)
3. The execd reads the usage file at the job's end and reports every line it does not know as
   "additional usage"; qmaster writes the values that a usage pattern matches into the job's
   record of accounting.jsonl, here ``reporting_params usage_patterns=metrics:metric_*``: under
   ``usage.metrics`` (OCS's sge_conf(5), sge_accounting(5); the source: ``read_dusage`` in
   execd's reaper_execd.cc, ``sge_write_rusage`` in qmaster's sge_rusage.cc).
4. sacct shows them in the job row's ``AdminComment`` as ``name=value,name=value`` (``text``),
   from the record (``from_usage``, read by ``gridengine.qacct.jsonl_record``).

A Grid Engine without usage patterns (SGE 8.1.9, or OCS with ``old_accounting=true``: the colon
file has no room for them) keeps no such values: the file is then read by nobody, and AdminComment
is empty.

The epilog trusts nothing of the job's environment (it runs as root in it): the spool directory
is its shepherd's working directory (``/proc/<shepherd>/cwd``), the job's owner and TMPDIR come
from the shepherd's ``config`` there, and the metrics file is read only if it is a regular file
of the job's owner, small, never through a link (``state.read_small_file``). It always exits 0:
any other exit of an epilog puts the queue into error state (sge_conf(5)).

Imports only ``os`` at the top: the job wrapper reads ``ENV``/``FILE_NAME`` from here, and the
epilog runs after every job of the cell.
"""

from __future__ import annotations

import os

ENV = "SLURM_SHIM_METRICS"
FILE_NAME = "slurm-shim-metrics"  # in the job's private TMPDIR
CONTAINER = "metrics"  # the usage pattern's name: the key of the values in the accounting record
PREFIX = "metric_"  # each metric's name in the usage file (apart from Grid Engine's own names)
USAGE_PATTERN = f"{CONTAINER}:{PREFIX}*"  # reporting_params usage_patterns=...
MAX_BYTES = 1 << 16  # a larger metrics file is ignored
MAX_METRICS = 64  # distinct names kept (the rest are ignored)
MAX_NAME = 64

TYPE_CHECKING = False
if TYPE_CHECKING:
    pass

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_ALPHA = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def valid_name(name: str) -> bool:
    """A metric's name: a letter, then letters, digits, ``_``, ``.`` or ``-``; at most 64."""
    return 0 < len(name) <= MAX_NAME and name[0] in _ALPHA and _NAME_CHARS.issuperset(name)


def number(text: str) -> float | None:
    """A finite decimal number (``12``, ``-0.5``, ``1e6``); None for anything else (no ``inf``,
    ``nan``, hex or ``1_000``, which float() would take)."""
    import re

    if not re.fullmatch(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", text):
        return None
    v = float(text)
    return v if v not in (float("inf"), float("-inf")) else None


def parse(data: bytes) -> tuple[dict[str, float], int]:
    """The metrics file's lines -> ({name: sum of its values}, lines ignored). Blank lines and
    ``#`` comments are skipped; a line that is not ``name=number`` is ignored (and counted), as is
    every name past the first MAX_METRICS."""
    out: dict[str, float] = {}
    bad = 0
    for raw in data.split(b"\n"):
        line = raw.decode("utf-8", "replace").strip()
        if not line or line.startswith("#"):
            continue
        name, eq, value = line.partition("=")
        name, value = name.strip(), value.strip()
        v = number(value) if eq and valid_name(name) else None
        if v is None or (name not in out and len(out) >= MAX_METRICS):
            bad += 1
            continue
        out[name] = out.get(name, 0.0) + v
    return out, bad


def value_text(v: float) -> str:
    """A value as sacct prints it: whole numbers without a fraction (``1200``), others to 12
    significant digits (``0.42``, not the ``0.42000000000000004`` of 0.25 + 0.17)."""
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.12g}"


def usage_lines(metrics: dict[str, float]) -> str:
    """The lines the epilog appends to the job's usage file."""
    return "".join(f"{PREFIX}{k}={value_text(v)}\n" for k, v in metrics.items())


# ---------------------------------------------------------------------------------------------
# reading them back: an accounting.jsonl record's ``usage`` -> sacct's AdminComment

_OWN = ("rusage", "eusage")  # Grid Engine's own usage containers; the others are usage patterns'


def from_usage(usage: dict) -> dict[str, float] | None:
    """The usage patterns' values of one accounting record: this module's (``usage.metrics``,
    ``metric_`` taken off) by their names, any other pattern's as ``<pattern>/<name>`` (as Slurm
    names a TRES of a type: ``gres/gpu``). None when there are none."""
    out: dict[str, float] | None = None
    for key, box in usage.items():
        if not box or key in _OWN or not isinstance(box, dict):
            continue
        for name, v in box.items():
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not isinstance(name, str):
                continue
            if key == CONTAINER and name.startswith(PREFIX):
                name = name[len(PREFIX):]
            elif _plain(key):
                name = f"{key}/{name}"
            else:
                continue
            if not _NAME_CHARS.issuperset(name.replace("/", "_")):
                continue
            if out is None:
                out = {}
            out[name] = float(v)
    return out


def _plain(name: str) -> bool:
    """A name that cannot break ``name=value,name=value`` (nor a ``|``-delimited line)."""
    return bool(name) and _NAME_CHARS.issuperset(name)


def text(metrics: dict[str, float] | None) -> str:
    """sacct's AdminComment: ``name=value`` pairs, sorted by name, joined by commas (the form of a
    TRES string), empty without metrics."""
    if not metrics:
        return ""
    return ",".join(f"{k}={value_text(metrics[k])}" for k in sorted(metrics))


# ---------------------------------------------------------------------------------------------
# the epilog (as root, in the job's environment: see the module's docstring)


def _stat_fields(pid: int) -> tuple[str, int] | None:
    """(command name, parent pid) of a process, from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text_ = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    name = text_[text_.find("(") + 1:text_.rfind(")")]
    try:
        return name, int(text_[text_.rfind(")") + 2:].split()[1])
    except (IndexError, ValueError):
        return None


def shepherd_dir(pid: int | None = None, hops: int = 4) -> str | None:
    """The job's spool directory: the working directory of the nearest ``sge_shepherd`` among
    this process's ancestors (a site's own epilog may start this one), if that shepherd is root's.
    None outside a shepherd."""
    pid = os.getppid() if pid is None else pid
    for _ in range(hops):
        if pid <= 1:
            return None
        got = _stat_fields(pid)
        if got is None:
            return None
        name, parent = got
        if name == "sge_shepherd":
            try:
                if os.stat(f"/proc/{pid}").st_uid != 0:
                    return None
                return os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                return None
        pid = parent
    return None


def _config(jobdir: str) -> dict[str, str]:
    """The shepherd's ``config`` (``name=value`` lines, written by the execd)."""
    out: dict[str, str] = {}
    try:
        fd = os.open(os.path.join(jobdir, "config"), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return out
    try:
        data = b""
        while len(data) < (1 << 22):
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    for line in data.decode("utf-8", "replace").splitlines():
        k, eq, v = line.partition("=")
        if eq and k not in out:
            out[k] = v
    return out


def record(jobdir: str) -> str:
    """Append the job's metrics to the usage file in ``jobdir`` (a shepherd's spool directory).
    What happened, in a few words (for tests)."""
    conf = _config(jobdir)
    tmpdir, owner = conf.get("tmpdir", ""), conf.get("job_owner", "")
    if not tmpdir or not owner or not os.path.isabs(tmpdir):
        return "no tmpdir or job_owner in the shepherd's config"
    path = os.path.join(tmpdir, FILE_NAME)
    try:
        os.lstat(path)
    except OSError:
        return "no metrics"  # the common case, before anything heavier is imported
    import pwd

    from ..store import state

    try:
        uid = pwd.getpwnam(owner).pw_uid
    except KeyError:
        return f"no user {owner}"
    got = state.read_small_file(path, MAX_BYTES, (uid,))
    if got is None:
        return f"{path} ignored (not a regular file of {owner}'s of at most {MAX_BYTES} bytes)"
    metrics, bad = parse(got[0])
    if not metrics:
        return f"no metrics ({bad} lines ignored)"
    usage = os.path.join(jobdir, "usage")
    try:
        fd = os.open(usage, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        return f"no usage file ({e.strerror})"  # the job never ran: Grid Engine has no usage to add to
    try:
        import stat

        st, top = os.fstat(fd), os.lstat(jobdir)
        if not stat.S_ISREG(st.st_mode) or st.st_uid not in (0, top.st_uid):
            return "usage file not Grid Engine's"
        os.write(fd, usage_lines(metrics).encode())
    finally:
        os.close(fd)
    return f"{len(metrics)} metrics" + (f", {bad} lines ignored" if bad else "")


def epilog() -> int:
    """The epilog's entry point: the job's metrics into its usage file. Returns 0 whatever
    happens (see the module's docstring); a failure is one line on stderr (Grid Engine's -e file
    of the job, /dev/null for sbatch's jobs)."""
    import sys

    try:
        jobdir = shepherd_dir()
        if jobdir is None:
            return 0
        record(jobdir)  # (nothing printed: the job's own -o/-e files may be the epilog's)
    except Exception as e:  # never fail the queue for a metric
        try:
            sys.stderr.write(f"slurm-shim epilog: {type(e).__name__}: {e}\n")
        except Exception:
            pass
    return 0


# The epilog script ``cluster up --flavour ocs`` writes (cluster_ocs.epilog_script): an
# executable file, so that the epilog line holds no arguments that Grid Engine would split.
EPILOG_SCRIPT = """#!{python} -I
# The Grid Engine epilog of slurm-shim, written by `slurm-shim cluster up --flavour ocs`: a job's
# metrics ($SLURM_SHIM_METRICS) into its accounting (see shim/gridengine/metrics.py). It runs as
# root after every job of a queue whose epilog names it, and exits 0 whatever happens: any other
# exit of an epilog puts the queue into error state.
import sys
try:
    from shim.gridengine.metrics import epilog
except Exception:  # the interpreter has no shim, or another one: the shim that wrote this
    for name in [m for m in sys.modules if m == "shim" or m.startswith("shim.")]:
        del sys.modules[name]
    sys.path.insert(0, {src!r})
    try:
        from shim.gridengine.metrics import epilog
    except Exception as e:
        sys.stderr.write("slurm-shim epilog: %s: %s\\n" % (type(e).__name__, e))
        sys.exit(0)
sys.exit(epilog())
"""


def epilog_script(python: str, src: str) -> str:
    """The epilog script for the interpreter ``python`` (whose site-packages hold the shim) and
    the shim's source directory ``src`` (the fallback)."""
    if any(c.isspace() for c in python):
        raise ValueError(f"the interpreter's path has a blank in it: {python!r}")
    return EPILOG_SCRIPT.format(python=python, src=src)
