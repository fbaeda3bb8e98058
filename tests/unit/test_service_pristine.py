"""Issue 29's reused sbatch worker puts back what a request changed (server.Pristine), so the next
request starts from the state a freshly forked child starts from. Held here over the real sbatch
path, in-process (Grid Engine answered by a ReplayBackend): after requests of other callers
(environments with SBATCH_* input variables and SLURM_SHIM_* settings, directories, umasks,
failures), every value reachable from every ``shim`` module's globals (to a depth of five: the
module-level caches, the objects they hold, class attributes) is what it was before the first,
and a request run after them prints what it prints as the first request of a process."""

from __future__ import annotations

import itertools
import os
import sys
import types

import pytest

from conftest import use_site_config
from shim import siteconf
from shim.__main__ import dispatch
from shim.gridengine import backends
from shim.gridengine.replay import ReplayBackend
from shim.proc import Result
from shim.service import server

SCRIPT = "#!/bin/sh\n#SBATCH -J pristine\n#SBATCH -o /dev/null\n#SBATCH -t 10\n#SBATCH --mem=1G\ntrue\n"


class InstantGE(ReplayBackend):
    """qsub answers the next job id; anything else an empty success (bench/sbatch_cpu.py's)."""

    def __init__(self):
        super().__init__()
        self.ids = itertools.count(7_000_001)  # (no attribute changes: the fingerprint holds it by identity)

    def run(self, tool, args, *, input=None, timeout=None):
        if tool == "qsub":
            return Result((tool, *args), 0, f"{next(self.ids)}\n", "")
        return Result((tool, *args), 0, "", "")


@pytest.fixture
def worker(monkeypatch, tmp_path):
    """This process as a worker before its first request: the site config, the backend, what
    the daemon preloads; the test takes the snapshot (``pristine``: in the test's own phase,
    whose streams are capfd's)."""
    use_site_config(monkeypatch, tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "job.sh").write_text(SCRIPT)
    backends.use(InstantGE())
    siteconf.get()
    siteconf.reset()
    server.preload()  # (what the daemon holds when it forks: every served module, warm tables, rehearsal)
    cwd, umask = os.getcwd(), os.umask(0o022)
    os.umask(umask)
    taken: list = []
    yield tmp_path, taken
    if taken:
        taken[0].restore()
    os.chdir(cwd)
    os.umask(umask)
    siteconf.reset()
    backends.use(None)


SCALARS = (type(None), bool, int, float, complex, str, bytes)


def fingerprint() -> dict:
    """path -> what is there, for every value reachable from the shim modules' globals (this test
    module and the worker's own module, server, aside)."""
    out: dict = {}
    for name, mod in sorted(sys.modules.items()):
        if mod is None or not name.startswith("shim") or name == server.__name__:
            continue
        for k, v in sorted(vars(mod).items()):
            if k in ("__builtins__", "__loader__", "__spec__"):
                continue
            _walk(f"{name}.{k}", v, 5, out, set())
    return out


def _walk(path: str, v, depth: int, out: dict, seen: set) -> None:
    if isinstance(v, SCALARS):
        out[path] = v
        return
    if isinstance(v, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)):
        out[path] = ("id", id(v))
        return
    if id(v) in seen or depth == 0:
        out[path] = ("id", id(v), type(v).__name__)
        return
    seen = seen | {id(v)}
    if isinstance(v, dict):
        out[path] = ("dict", id(v), len(v))
        for k, x in list(v.items()):
            _walk(f"{path}[{k!r}]", x, depth - 1, out, seen)
    elif isinstance(v, (list, tuple)):
        out[path] = (type(v).__name__, id(v), len(v))
        for i, x in enumerate(v):
            _walk(f"{path}[{i}]", x, depth - 1, out, seen)
    elif isinstance(v, (set, frozenset)):
        out[path] = (type(v).__name__, id(v), sorted(map(repr, v)))
    elif isinstance(v, type):
        out[path] = ("class", id(v))
        if v.__module__.startswith("shim"):
            for k, x in list(vars(v).items()):
                if not k.startswith("__") and not callable(x):
                    _walk(f"{path}.{k}", x, depth - 1, out, seen)
    else:
        out[path] = ("obj", id(v), type(v).__name__)
        state = getattr(v, "__dict__", None)
        if isinstance(state, dict):
            for k, x in list(state.items()):
                _walk(f"{path}.{k}", x, depth - 1, out, seen)
        for slot in getattr(type(v), "__slots__", ()):
            if isinstance(slot, str) and hasattr(v, slot):
                _walk(f"{path}.{slot}", getattr(v, slot), depth - 1, out, seen)


def pristine(taken: list) -> server.Pristine:
    taken.append(server.Pristine())
    return taken[0]


def run(argv, env, cwd, umask, capfd) -> tuple[int, str, str]:
    """One request as the worker runs it: the caller's environment (replaced), directory, umask."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    os.umask(umask)
    sys.argv = ["sbatch", *argv]
    code = dispatch("sbatch", list(argv))
    out, err = capfd.readouterr()
    return code, out, err


def callers(top) -> list:
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "SLURM_SHIM_CONFIG", "XDG_CACHE_HOME",
                                                         "USER", "LOGNAME")}
    a, b = str(top / "a"), str(top / "b")
    return [
        (["job.sh"], {**base, "SBATCH_PARTITION": "gpu", "SBATCH_ACCOUNT": "acct", "TZ": "Asia/Tokyo"}, a, 0o077),
        (["--parsable", "-o", "/dev/null", "--wrap=true"], {**base, "SBATCH_TIMELIMIT": "5",
                                                            "SLURM_SHIM_DEBUG": ""}, b, 0o022),
        (["--array=1-4%2", f"{a}/job.sh"], {**base, "SBATCH_EXPORT": "NONE", "W1_X": "1"}, b, 0o027),
        (["--bogus"], {**base, "SBATCH_PARTITION": "gpu"}, a, 0o022),
        (["-p", "no-such-partition", "--wrap=true"], base, b, 0o022),
        (["--array=1-99999999", "--wrap=true"], {**base, "SBATCH_QOS": "high"}, a, 0o002),
        (["-n", "4", "-c", "2", "--mem", "4G", "-t", "10", "-p", "gpu", "--gres", "gpu:1", "--wrap=hostname"],
         {**base, "SLURM_SHIM_SERVICE": "off"}, b, 0o022),
    ]


def test_every_module_value_is_put_back_after_requests_of_other_callers(worker, capfd):
    top, taken = worker
    snap = pristine(taken)
    before = fingerprint()
    for argv, env, cwd, umask in callers(top):
        run(argv, env, cwd, umask, capfd)
        snap.restore()
        after = fingerprint()
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        assert not changed, (argv, changed[:20])
    assert snap.clean()  # (nothing imported, no thread or child left)


def test_a_request_after_others_prints_what_it_prints_first(worker, capfd):
    """The same caller's submission, first in the worker and after the others, says the same
    (the job id aside: the replayed qmaster counts on)."""
    top, taken = worker
    snap = pristine(taken)
    plain = callers(top)[2]
    first = run(*plain, capfd)
    snap.restore()
    for c in callers(top):
        run(*c, capfd)
        snap.restore()
    again = run(*plain, capfd)
    snap.restore()
    assert first[0] == again[0] == 0 and first[2] == again[2]
    assert first[1].split()[:-1] == again[1].split()[:-1] and first[1] != ""
