"""The package as people ship it: `python -m build` makes an sdist and a wheel (the wheel from the
sdist, so the sdist is complete), the wheel installs into a fresh venv whose commands run, whose man
pages `man` finds from PATH alone and whose completion files load; `pipx install .` works the same.

Tools (build, pipx) go into a venv of the test's own, never into the shim's installation. Needs the
package index, like scripts/setup. About 40 s: one build, one wheel install, one pipx install."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

import shim

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("sbatch", "srun", "salloc", "squeue", "scancel", "scontrol", "sacct", "sinfo")
BASE_PATH = "/usr/bin:/bin"
TIMINGS: dict[str, float] = {}


def sh(argv, *, env=None, cwd=None, timeout=600, check=True) -> subprocess.CompletedProcess:
    e = {"PATH": BASE_PATH, "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    for k in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONFIG_FILE", "SGE_ROOT", "SGE_CELL",
              "SLURM_SHIM_CONFIG"):  # (conftest's unit-test site config: 22.05, shim.SLURM_VERSION)
        if k in os.environ:
            e[k] = os.environ[k]
    e.update(env or {})
    cp = subprocess.run([str(a) for a in argv], env=e, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check:
        assert cp.returncode == 0, f"{argv}: rc {cp.returncode}\n{cp.stdout[-3000:]}\n{cp.stderr[-3000:]}"
    return cp


def timed(name: str, fn):
    t0 = time.monotonic()
    try:
        return fn()
    finally:
        TIMINGS[name] = time.monotonic() - t0


def venv(path: Path) -> Path:
    sh([sys.executable, "-m", "venv", path])
    return path


def pip_install(env_dir: Path, *what) -> None:
    sh([env_dir / "bin" / "pip", "install", "-q", "--disable-pip-version-check", *what])


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("package")
    yield d
    print("\npackage timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in TIMINGS.items()))


@pytest.fixture(scope="module")
def tools(work) -> Path:
    return timed("tools venv (build, pipx)", lambda: (venv(work / "tools"), pip_install(work / "tools", "build",
                                                                                          "pipx"))[0])


@pytest.fixture(scope="module")
def dist(tools, work) -> dict[str, Path]:
    out = work / "dist"
    timed("python -m build", lambda: sh([tools / "bin" / "python", "-m", "build", "--outdir", out, REPO]))
    got = {p.suffix: p for p in out.iterdir()}
    v = shim.__version__
    assert sorted(p.name for p in got.values()) == [f"slurm_shim-{v}-py3-none-any.whl", f"slurm_shim-{v}.tar.gz"]
    return {"wheel": got[".whl"], "sdist": got[".gz"]}


@pytest.fixture(scope="module")
def fresh(dist, work) -> Path:
    d = venv(work / "fresh")
    timed("wheel into a fresh venv", lambda: pip_install(d, dist["wheel"]))
    return d


def test_sdist_carries_what_the_wheel_is_built_from(dist):
    v = shim.__version__
    with tarfile.open(dist["sdist"]) as tf:
        names = {n.removeprefix(f"slurm_shim-{v}/") for n in tf.getnames()}
    want = {"pyproject.toml", "README.md", "CHANGELOG.md", "src/shim/__init__.py", "src/shim/__main__.py",
            "src/shim/admin/completion.py", "completion/slurm-shim", *(f"man/{c}.1" for c in COMMANDS),
            *(f"completion/{c}" for c in COMMANDS), *(f"completion/_{c}" for c in COMMANDS),
            "completion/_slurm_shim_values"}
    assert want <= names, sorted(want - names)


def test_wheel_puts_man_pages_and_completion_beside_bin(dist):
    v = shim.__version__
    with zipfile.ZipFile(dist["wheel"]) as zf:
        names = set(zf.namelist())
        meta = zf.read(f"slurm_shim-{v}.dist-info/METADATA").decode()
    data = f"slurm_shim-{v}.data/data/share"
    assert {f"{data}/man/man1/{c}.1" for c in COMMANDS} <= names
    assert {f"{data}/bash-completion/completions/{c}" for c in (*COMMANDS, "slurm-shim")} <= names
    zsh = {f"{data}/zsh/site-functions/_{c}" for c in (*COMMANDS, "slurm-shim", "slurm_shim_values")}
    assert zsh <= names  # where zsh's compinit finds them (fpath)
    assert not any(n.startswith(f"{data}/bash-completion/completions/_") for n in names)  # zsh's stay zsh's
    assert re.search(rf"^Version: {re.escape(v)}$", meta, re.M)
    entry = zf_text(dist["wheel"], f"slurm_shim-{v}.dist-info/entry_points.txt")
    assert all(re.search(rf"^{c} = shim.__main__:", entry, re.M) for c in COMMANDS)


def zf_text(path: Path, name: str) -> str:
    with zipfile.ZipFile(path) as zf:
        return zf.read(name).decode()


def test_the_wheels_commands_run(fresh):
    b = fresh / "bin"
    assert sh([b / "sbatch", "--version"]).stdout == f"slurm-wlm {shim.SLURM_VERSION}\n"
    assert sh([b / "squeue", "--help"]).stdout.startswith("Usage: squeue")
    for cmd in COMMANDS:
        cp = sh([b / cmd, "--version"])
        assert shim.SLURM_VERSION in cp.stdout, (cmd, cp.stdout)
    cp = sh([b / "slurm-shim", "--version"])
    assert cp.stdout == f"slurm-shim {shim.__version__} (the commands follow Slurm {shim.SLURM_VERSION})\n"
    # the installed package is the wheel's own copy, not this checkout
    code = "import shim, sys; print(shim.__file__)"
    where = sh([b / "python", "-I", "-c", code]).stdout.strip()
    assert where.startswith(str(fresh)) and not where.startswith(str(REPO))


def test_man_finds_the_pages_from_path_alone(fresh):
    """man-db looks in <dir>/../share/man for each <dir> on PATH: no MANPATH needed."""
    env = {"PATH": f"{fresh / 'bin'}:{BASE_PATH}"}
    for cmd in COMMANDS:
        cp = sh(["man", "-w", cmd], env=env)
        assert cp.stdout.strip() == str(fresh / "share" / "man" / "man1" / f"{cmd}.1"), cmd
    plain = sh(["man", "-w", "sbatch"], check=False)  # without our bin on PATH: not our page
    assert str(fresh) not in plain.stdout
    text = sh(["man", "sbatch"], env={**env, "MANPAGER": "cat", "MANWIDTH": "100"}).stdout
    assert "sbatch" in text and "Grid Engine" in text
    # the README's own install (scripts/setup, which the test command runs first): the same
    cp = sh(["man", "-w", "sbatch"], env={"PATH": f"/opt/slurm-shim/bin:{BASE_PATH}"})
    assert cp.stdout.strip() == "/opt/slurm-shim/share/man/man1/sbatch.1"


def test_the_installed_completion_files_load(fresh):
    comp = fresh / "share" / "bash-completion" / "completions"
    for cmd in COMMANDS:
        # what bash-completion does on the first TAB after <cmd>: source the file named after it
        cp = sh(["bash", "-c", f'. "$1" && complete -p {cmd} slurm-shim', "bash", comp / cmd])
        assert f"-F _slurm_shim_complete {cmd}" in cp.stdout and "_slurm_shim_admin slurm-shim" in cp.stdout
    # zsh: compinit finds the installed site-functions on fpath, each command's function and the helper
    site = fresh / "share" / "zsh" / "site-functions"
    cp = sh(["zsh", "-f", "-c", 'fpath=("$1" $fpath); autoload -Uz compinit; compinit -u -D; '
             'print -r -- ${_comps[sbatch]} ${_comps[sreport]} ${_comps[slurm-shim]}; whence -v _slurm_shim_values',
             "zsh", site])
    lines = cp.stdout.splitlines()
    assert lines[0] == "_sbatch _sreport _slurm-shim"
    assert lines[1] == f"_slurm_shim_values is an autoload shell function from {site}/_slurm_shim_values"


@pytest.mark.gridengine
def test_a_job_runs_from_the_wheel(fresh, work, tmp_path):
    """sbatch, squeue and sacct of the fresh venv against the live cluster (qsub path: the agent
    would be another installation's)."""
    site = Path("/etc/slurm-shim/config.toml").read_text()
    assert 'method = "agent"' in site
    conf = tmp_path / "config.toml"
    conf.write_text(site.replace('method = "agent"', 'method = "qsub"'))
    env = {"SLURM_SHIM_CONFIG": str(conf), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "SGE_ROOT": os.environ.get("SGE_ROOT", "/var/lib/gridengine"), "SGE_CELL": os.environ.get("SGE_CELL", "default"),
           "PATH": f"{fresh / 'bin'}:{BASE_PATH}"}
    b = fresh / "bin"
    cp = sh([b / "sbatch", "--wait", "--parsable", "-o", tmp_path / "out-%j.txt", "--wrap",
             "echo from-the-wheel $SLURM_JOB_ID"], env=env, cwd=tmp_path, timeout=180)
    job = cp.stdout.strip()
    assert job.isdigit(), cp.stdout
    assert (tmp_path / f"out-{job}.txt").read_text() == f"from-the-wheel {job}\n"
    acct = sh([b / "sacct", "-j", job, "-n", "-X", "-o", "JobID,State,ExitCode", "-P"], env=env)
    assert acct.stdout.split() == [f"{job}|COMPLETED|0:0"]


def test_pipx_install_of_the_source_tree(tools, work):
    """`pipx install .`: commands on pipx's bin dir, man pages linked where man finds them from it
    (pipx's defaults are ~/.local/bin and ~/.local/share/man; the test uses its own pair)."""
    home = work / "pipx-home"
    local = work / "local"
    env = {"PIPX_HOME": str(home), "PIPX_BIN_DIR": str(local / "bin"), "PIPX_MAN_DIR": str(local / "share" / "man")}
    timed("pipx install .", lambda: sh([tools / "bin" / "pipx", "install", REPO], env=env))
    for cmd in (*COMMANDS, "slurm-shim"):
        assert (local / "bin" / cmd).exists(), cmd
    assert sh([local / "bin" / "sbatch", "--version"]).stdout == f"slurm-wlm {shim.SLURM_VERSION}\n"
    assert shim.__version__ in sh([local / "bin" / "slurm-shim", "--version"]).stdout
    cp = sh(["man", "-w", "squeue"], env={"PATH": f"{local / 'bin'}:{BASE_PATH}"})
    page = home / "venvs" / "slurm-shim" / "share" / "man" / "man1" / "squeue.1"
    assert (local / "share" / "man" / "man1" / "squeue.1").resolve() == page  # pipx's link
    assert Path(cp.stdout.strip()).resolve() == page  # (man-db names the link's target)
