"""F-1: nothing from the current directory or /tmp is ever imported by the shim's interpreters.

Mallory plants modules named like the standard library's (``base64.py``, ``json.py``, ...) in
``/tmp`` and in a shared project directory, and puts her directory on ``PYTHONPATH``. The victim's
and root's batch jobs (job wrapper) and srun (step launcher), submitted from that directory, must
run normally and import none of them: each planted module would leave a marker naming the uid it
ran as. Before the fix every one of these ran (the wrapper started with ``''`` on ``sys.path`` in
``-wd /tmp``; with both put back, the batch tests here fail). ``-wd /`` and ``python -I`` each
close the route; the commands themselves run ``-I`` too (their shebang, set by scripts/setup), so
a PYTHONPATH naming someone's directory never reaches sbatch either."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import run
from security.conftest import MALLORY, VICTIM, as_user, uid

pytestmark = pytest.mark.gridengine

MODULES = ("base64", "json", "socket", "tempfile", "shutil", "signal", "secrets", "struct", "stat")


@pytest.fixture
def hijack(mallory, victim, shared_dir, tmp_path_factory):
    """Mallory's modules in /tmp, in the shared directory and in her own PYTHONPATH directory;
    the directory their markers go to. Removed afterwards."""
    marks = shared_dir / "marks"
    lib = shared_dir / "lib"
    for d in (marks, lib):
        d.mkdir()
        d.chmod(0o777)
    planted = []
    for d in (Path("/tmp"), shared_dir, lib):
        for m in MODULES:
            p = d / f"{m}.py"
            if p.exists():
                continue  # never touch a file that is not ours
            p.write_text(f"import os\nopen(os.path.join({str(marks)!r}, {m!r} + '-' + str(os.getuid())), 'w').close()\n"
                         f"raise ImportError('mallory was here')\n")
            os.chown(p, uid(MALLORY), -1)
            planted.append(p)
    try:
        yield {"marks": marks, "dir": shared_dir, "lib": lib}
    finally:
        for p in planted:
            p.unlink(missing_ok=True)
        shutil.rmtree(lib, ignore_errors=True)


def marks_left(h) -> list[str]:
    return sorted(os.listdir(h["marks"]))


@pytest.mark.parametrize("who", [VICTIM, "root"])
def test_batch_jobs_import_nothing_of_mallorys(hijack, who):
    out = hijack["dir"] / f"out-{who}.txt"
    env = {"PYTHONPATH": str(hijack["lib"])}
    argv = ["sbatch", "--wait", "-o", str(out), "--wrap", "echo job-ran; exit 4"]
    if who == "root":
        cp = run(*argv, cwd=hijack["dir"], env=env, timeout=180)
    else:
        cp = as_user(who, "env", f"PYTHONPATH={hijack['lib']}", *argv, cwd=hijack["dir"], timeout=180)
    assert cp.returncode == 4, cp.stderr  # the job's own exit code: the wrapper ran to the end
    assert out.read_text() == "job-ran\n"
    assert marks_left(hijack) == []


def test_srun_imports_nothing_of_mallorys(hijack, victim):
    cp = as_user(VICTIM, "env", f"PYTHONPATH={hijack['lib']}", "srun", "-n1", "echo", "step-ran",
                 cwd=hijack["dir"], timeout=180)
    assert (cp.returncode, cp.stdout) == (0, "step-ran\n"), cp.stderr
    assert marks_left(hijack) == []


def test_srun_steps_inside_a_job_import_nothing_of_mallorys(hijack, victim):
    out = hijack["dir"] / "steps.txt"
    cp = as_user(VICTIM, "sbatch", "--wait", "-o", str(out), "--wrap", "srun -n1 echo step-ran; echo after",
                 cwd=hijack["dir"], timeout=180)
    assert cp.returncode == 0, cp.stderr
    assert out.read_text() == "step-ran\nafter\n"
    assert marks_left(hijack) == []


def test_every_installed_command_runs_its_interpreter_isolated():
    """Each console script pyproject.toml declares (the Slurm commands, the policy commands and
    slurm-shim) starts ``python -I`` where the README's commands installed it: a new command
    missing from scripts/setup's list would run with the caller's PYTHONPATH and user site."""
    import tomllib

    from conftest import REPO, command_dir

    names = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    bindir = command_dir()
    # where scripts/setup compiled the warm service's thin client (docs/service.md) into bin/, the
    # Python scripts it falls back to are in libexec/slurm-shim/, and the service it starts is -I too
    libexec = bindir.parent / "libexec" / "slurm-shim"

    def script(n):
        p = bindir / n
        if p.read_bytes()[:4] == b"\x7fELF":
            assert b"-I\0" in p.read_bytes() and b"shim.service" in p.read_bytes(), f"{p}: not the thin client"
            p = libexec / n
        return p.read_text()

    assert script("sbatch").startswith("#!/opt/"), f"{bindir} is not the installed venv"
    plain = [n for n in names if not script(n).splitlines()[0].endswith(" -I")]
    assert len(names) >= 13 and plain == [], f"{bindir}: {plain} start without -I"
    wrappers = [n for n in names if " -I " not in (REPO / "bin" / n).read_text()]
    assert wrappers == [], f"bin/: {wrappers} start python without -I"
