"""What sbatch no longer redoes at every submission (bench/sbatch_cpu.py measures the CPU): each
release's option tables built once a process, the cached site config not read and parsed again
while its file is unchanged, and the warm service's daemon holding what its forked children would
otherwise build (and copying no heap of modules they never use), with nothing of it changing what
a command does."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, use_site_config
from shim import siteconf
from shim.gridengine import backends
from shim.gridengine.replay import ReplayBackend
from shim.service import server
from shim.slurm import releases
from shim.slurm.options import values
from shim.slurm.options.getopt import Table
from shim.slurm.options.table import GETOPT_ORDER, OPTIONS, command_table


@pytest.fixture
def site(monkeypatch, tmp_path):
    yield use_site_config(monkeypatch, tmp_path)
    siteconf.reset()
    backends.use(None)


def _rows(t: Table) -> list[tuple]:
    return [(s.long, s.short, s.key, s.arity) for s in t.specs]


@pytest.mark.parametrize("release", releases.NAMES)
@pytest.mark.parametrize("prog", ["sbatch", "srun", "salloc"])
def test_a_release_s_option_table_is_built_once_and_is_the_table_built_anew(prog, release):
    rel = releases.get(release)
    t = command_table(prog, rel)
    assert command_table(prog, rel) is t
    fresh = Table(prog, [o for o in OPTIONS if rel.knows(prog, o.long)], order=GETOPT_ORDER)
    assert _rows(t) == _rows(fresh)
    assert t.by_long.keys() == fresh.by_long.keys() and t.by_short.keys() == fresh.by_short.keys()


def test_a_release_not_in_the_table_of_releases_gets_a_table_of_its_own():
    """A Release made elsewhere under a known name (the table of releases is what is cached)."""
    other = releases.Release("22.05", "22.05.99", options={"sbatch": ()})
    mine = command_table("sbatch", other)
    assert mine is not command_table("sbatch", releases.get("22.05"))
    assert command_table("sbatch", other) is not mine
    varying = releases.VARYING_OPTIONS["sbatch"]
    assert not {s.long for s in mine.specs} & varying
    assert {s.long for s in command_table("sbatch", releases.get("22.05")).specs} & varying


def test_the_config_read_again_is_a_fresh_copy(site):
    cfg = siteconf.get()
    cfg.cluster["name"] = "changed"
    cfg.partitions.pop("gpu")
    siteconf.reset()
    again = siteconf.get()
    assert again.cluster.name == "cluster" and "gpu" in again.partitions


def test_an_unchanged_cache_file_is_not_read_again(site, monkeypatch):
    siteconf.get()  # (validated, and cached)
    siteconf.reset()
    first = siteconf.get()  # (read from the cache)
    siteconf.reset()

    def unread(cache):
        raise AssertionError(f"read {cache} again")

    monkeypatch.setattr(siteconf, "_read_cache", unread)
    assert siteconf.get() == first


def test_a_changed_config_file_is_read_again(site, monkeypatch):
    conf = Path(os.environ["SLURM_SHIM_CONFIG"])
    assert siteconf.get().gridengine.timeout == 10
    conf.write_text(conf.read_text().replace('sge_cell = "default"\n', 'sge_cell = "default"\ntimeout = 12\n'))
    siteconf.reset()
    assert siteconf.get().gridengine.timeout == 12


def test_a_replaced_cache_file_is_read_and_checked_again(site):
    siteconf.get()
    [cache] = (Path(os.environ["XDG_CACHE_HOME"]) / "slurm-shim").glob("config-*.json")
    data = json.loads(cache.read_text())
    data["gridengine"]["timeout"] = 3
    new = cache.with_name("new.json")
    new.write_text(json.dumps(data))
    new.replace(cache)  # (the user's own file: believed, as before)
    siteconf.reset()
    assert siteconf.get().gridengine.timeout == 3
    os.chown(cache, 12345, 12345)  # someone else's: not believed, the config validated again
    siteconf.reset()
    assert siteconf.get().gridengine.timeout == 10


def test_the_rehearsal_writes_nothing_asks_grid_engine_nothing_and_leaves_nothing_set(site, tmp_path):
    siteconf.get()  # as the daemon has before it preloads (server.serve): the config read and cached
    siteconf.reset()
    ge = ReplayBackend()
    backends.use(ge)
    values.use_site(values.MAX_ARRAY_SIZE)
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    cwd, mask = os.getcwd(), os.umask(0o027)
    try:
        server.rehearse(times=2)
        assert os.umask(0o027) == 0o027
    finally:
        os.umask(mask)
    assert os.getcwd() == cwd
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    assert ge.calls == []
    assert siteconf._loaded is None
    assert values._site == {"max_array_size": values.MAX_ARRAY_SIZE}


def test_the_rehearsal_goes_through_sbatch_s_translation(site):
    """It rehearses what a served sbatch runs: the script's directives and --wrap translated."""
    from shim.operations import submit

    _o, sub, _cfg = submit.batch([], {}, stdin=io.BytesIO(server.REHEARSAL), cwd="/")
    assert sub.argv[sub.argv.index("-N") + 1] == "rehearsal" and "-pe" in sub.argv
    _o, sub, _cfg = submit.batch(["-o", "/dev/null", "--wrap=true"], {}, stdin=io.BytesIO(b""), cwd="/")
    assert sub.record.get("name") == "wrap"


def test_the_daemon_preloads_the_served_commands_and_not_what_only_slurm_shim_uses(tmp_path):
    """pydantic (the config's validation), click and tabulate (slurm-shim's commands) stay out of
    the daemon that every served command is forked from; what sbatch imports is in."""
    conf = tmp_path / "config.toml"
    conf.write_text((FIXTURES / "site" / "config.toml").read_text().replace("/tmp/slurm-shim-unit-state",
                                                                             str(tmp_path / "state")))
    code = ("import json, sys; from shim.service import server; server.preload(); "
            "print(json.dumps(sorted(m for m in sys.argv[1:] if m in sys.modules)))")
    names = ["pydantic", "click", "tabulate", "shim.config", "shim.cli.admin", "shim.cli.explain",
             "shim.cli.sbatch", "shim.operations.submit", "shim.runtime.boot", "atexit"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src"), "SLURM_SHIM_CONFIG": str(conf),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    cached = subprocess.run([sys.executable, "-c", "from shim import siteconf; siteconf.get()"], env=env, timeout=120)
    assert cached.returncode == 0  # (the daemon reads the config before it preloads: server.serve)
    cp = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, env=env, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout) == ["atexit", "shim.cli.sbatch", "shim.operations.submit", "shim.runtime.boot"]
