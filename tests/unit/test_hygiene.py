"""Design rules that must not erode: one module spawns processes; nothing builds shell strings."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "shim"
SPAWNERS = {"proc.py"}
FORKERS = ("os.system(", "os.popen(", "pty.spawn", "os.fork(", "os.forkpty(", "pty.fork(", "os.posix_spawn",
           "os.spawn", "os.exec")  # what starts or replaces a process without subprocess


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_only_proc_spawns_processes():
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name in SPAWNERS:
            continue
        text = path.read_text()
        if "subprocess" in _imports(path) or any(w in text for w in FORKERS):
            offenders.append(str(path.relative_to(SRC)))
    assert offenders == []


def test_no_shell_true_anywhere():
    for path in SRC.rglob("*.py"):
        assert "shell=True" not in path.read_text(), path


def test_hot_path_does_not_import_heavy_modules():
    """sbatch's parse and translate modules stay free of pydantic/click imports (start-up cost)."""
    for rel in ("slurm/options/getopt.py", "slurm/options/sources.py", "slurm/options/spec.py",
                "gridengine/translate/qsub.py", "runtime/jobwrap.py", "runtime/boot.py", "runtime/jobenv.py",
                "store/state.py", "gridengine/names.py", "siteconf.py", "gridengine/backends.py", "gridengine/engine.py",
                "gridengine/ops.py", "gridengine/process.py", "gridengine/refusal.py", "cli/sbatch.py"):
        assert not ({"pydantic", "click", "tabulate"} & _imports(SRC / rel)), rel


GE_COMMANDS = frozenset({"qsub", "qstat", "qdel", "qacct", "qhost", "qconf", "qmod", "qalter", "qhold", "qrls", "qrsh",
                         "qrstat", "qrsub"})


GE_FLAGS = frozenset({"-now", "-pty", "-terse", "-inherit", "-hold_jid", "-pe", "-wd", "-cwd", "-notify", "-sync",
                      "-xml", "-sj", "-usj", "-rj", "-sel", "-sconf", "-ssconf", "-ar", "-jc", "-binding", "-btype",
                      "-bunit", "-bamount", "-tc"})
"""Grid Engine's own flags that no Slurm command (nor ``slurm-shim``'s click options) spells: in a
command's module they would mean it builds a Grid Engine argv itself."""


def _ge_command_literals(text: str, label: str, names: frozenset = GE_COMMANDS) -> list[str]:
    """String literals (docstrings aside) that name a Grid Engine command: ``"qdel"``, ``"qstat -j"``,
    ``"qmod failed"`` (or, with ``names=GE_FLAGS``, start with one of its flags: ``"-now"``). The
    commands reach Grid Engine through gridengine/, which alone knows these names."""
    tree = ast.parse(text)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            words = node.value.split()
            if words and words[0] in names:
                out.append(f"{label}:{node.lineno}: {node.value[:30]!r}")
    return out


import pytest  # noqa: E402


def test_commands_name_no_grid_engine_command():
    offenders = [x for path in sorted((SRC / "cli").rglob("*.py"))
                 for x in _ge_command_literals(path.read_text(), str(path.relative_to(SRC)))]
    assert offenders == []


def test_commands_build_no_grid_engine_argv():
    """No Grid Engine flag in a command's module either (srun's qrsh ``-now``/``-pty``: backend ops)."""
    offenders = [x for path in sorted((SRC / "cli").rglob("*.py"))
                 for x in _ge_command_literals(path.read_text(), str(path.relative_to(SRC)), GE_FLAGS)]
    assert offenders == []


def test_the_flag_check_sees_literals_not_docstrings():
    text = '"""qrsh -now no."""\nargv = [*flags, "-now", "yes", "-pty", "y", "-p", "-h"]\n'
    assert sorted(_ge_command_literals(text, "x.py", GE_FLAGS)) == ["x.py:2: '-now'", "x.py:2: '-pty'"]


def test_the_q_command_check_sees_literals_not_docstrings():
    text = '"""Runs qdel."""\ndef f(b):\n    """qstat here."""\n    return b.run("qdel", ["5"]), "qmod -sj 5", "a qsub"\n'
    assert sorted(_ge_command_literals(text, "x.py")) == ["x.py:4: 'qdel'", "x.py:4: 'qmod -sj 5'"]


def _cli_imports(path: Path) -> list[int]:
    """The lines where a module imports from the commands' package (``shim.cli``, ``.cli``, ``..cli``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            mod = "." * node.level + (node.module or "")
            names = [a.name for a in node.names]
            if (mod.lstrip(".").split(".")[0] == "cli" and node.level in (1, 2)) or mod.startswith("shim.cli") \
                    or (mod in (".", "..", "shim") and "cli" in names):
                out.append(node.lineno)
        elif isinstance(node, ast.Import):
            out += [node.lineno for a in node.names if a.name.startswith("shim.cli")]
    return out


def test_nothing_below_the_commands_imports_them():
    """Commands sit on top (issue 14): they parse, call and render; what they share with a non-command
    module lives outside cli/ (jobs.fill_reservations, cancel.py, control.py, jobqueue.py, show.py)."""
    offenders = [f"{path.relative_to(SRC)}:{line}" for path in sorted(SRC.rglob("*.py"))
                 if "cli" not in path.relative_to(SRC).parts[:1]
                 for line in _cli_imports(path)]
    assert offenders == []


def test_the_cli_import_check_sees_each_spelling(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from .cli.common import x\nfrom ..cli import squeue\nfrom . import cli\nimport shim.cli.sbatch\n"
                 "from .client import y\nfrom .. import backends\n")
    assert _cli_imports(f) == [1, 2, 3, 4]


SLURM_COMMANDS = ("sbatch", "srun", "salloc", "squeue", "scancel", "scontrol", "sacct", "sinfo")


def test_click_is_for_slurm_shim_only():
    """click makes ``slurm-shim`` a conventional CLI; the Slurm commands (their getopt work-alike, their
    start-up time) never load it. Each command runs ``--version`` in a fresh isolated interpreter."""
    import subprocess
    import sys

    code = ("import io, sys; sys.path.insert(0, sys.argv[1]); from shim.__main__ import dispatch; "
            "out = sys.stdout; sys.stdout = io.StringIO(); rc = dispatch(sys.argv[2], ['--version']); "
            "sys.stdout = out; print(rc, 'click' in sys.modules)")
    for cmd in (*SLURM_COMMANDS, "slurm-shim"):
        cp = subprocess.run([sys.executable, "-I", "-c", code, str(SRC.parent), cmd], capture_output=True,
                            text=True, timeout=60)
        assert cp.stdout == ("0 True\n" if cmd == "slurm-shim" else "0 False\n"), (cmd, cp.stdout, cp.stderr)


# ---------------------------------------------------------------------------------------------
# issue 19: what a command's start may load. Each command runs whole, in a fresh isolated
# interpreter, against recorded Grid Engine answers (a qstat/qsub/qacct of the site's bin_dir that
# prints them); the modules it ends with are compared with the ones it must not need. (Guards,
# not timings: dataclasses, which imports inspect, ast and tokenize, costs ~10 ms of a start;
# typing ~4 ms; both were on every listing command's path.)

NEVER_LOADED = ("dataclasses", "inspect", "typing", "pydantic", "click", "tomllib")
SGE_FIXTURES = SRC.parents[1] / "fixtures" / "gridengine" / "sge-8.1.9"


def _command_modules(tmp_path: Path, cmd: str, argv: list[str], *, method: str = "qsub", src: Path = SRC
                     ) -> tuple[int, set[str], str]:
    import os
    import subprocess
    import sys

    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    listing = SGE_FIXTURES / "live-qstat-u-all-r-xml.mixed.xml"
    detail = SGE_FIXTURES / "live-qstat-j-xml.mixed.xml"
    scripts = {
        "qstat": f'case "$*" in *"-j "*) cat {detail} ;; *) cat {listing} ;; esac\n',
        "qsub": "cat >/dev/null; echo 4242\n",
        "qacct": "echo 'error: job id 5 not found' >&2; exit 1\n",
        "qconf": "exit 0\n",
        "qdel": 'echo "root has registered the job $1 for deletion"\n',
        "sge_share_mon": "exit 0\n",  # (no share tree)
    }
    for name, body in scripts.items():
        (bindir / name).write_text("#!/bin/sh\n" + body)
        (bindir / name).chmod(0o755)
    conf_text = (SRC.parents[1] / "fixtures" / "site" / "config.toml").read_text()
    conf_text = conf_text.replace("/tmp/slurm-shim-unit-state", str(tmp_path / "state"))
    conf_text = conf_text.replace("[gridengine]\n", f'[gridengine]\nbin_dir = "{bindir}"\n', 1)
    conf_text += f'\n[submit]\nmethod = "{method}"\n' if "[submit]" not in conf_text else ""
    conf = tmp_path / "config.toml"
    conf.write_text(conf_text)
    from shim.store import state

    state.make_layout(str(tmp_path / "state"))  # as cluster up does: sbatch refuses without a private directory
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SQUEUE_", "SBATCH_", "SACCT_"))}
    env.update(SLURM_SHIM_CONFIG=str(conf), XDG_CACHE_HOME=str(tmp_path / "cache"))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from shim.__main__ import dispatch; "
            "rc = dispatch(sys.argv[2], sys.argv[3:]); sys.stdout.flush(); "
            "print('\\nMODULES', rc, ' '.join(sorted(sys.modules)), file=sys.stderr)")
    run = [sys.executable, "-I", "-c", code, str(src.parent), cmd, *argv]
    # the first call validates the new config (pydantic) and caches it; the second is a warm start
    for _ in range(2):
        cp = subprocess.run(run, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60)
    line = [x for x in cp.stderr.splitlines() if x.startswith("MODULES ")]
    assert line, cp.stderr
    _, rc, mods = line[-1].split(" ", 2)
    if int(rc) != 0:  # what the command said, for the failure's message
        return int(rc), set(mods.split()), cp.stdout + cp.stderr.split("\nMODULES ")[0]
    return int(rc), set(mods.split()), cp.stdout


@pytest.mark.parametrize("cmd,argv", [
    ("squeue", []), ("squeue", ["-u", "root"]), ("squeue", ["-j", "105"]), ("squeue", ["-l"]),
    ("scontrol", ["show", "job", "105"]), ("sacct", ["-j", "5"]),
    ("sbatch", ["--wrap=true", "-J", "x"]), ("scancel", ["105"]),
    ("sprio", []), ("sshare", []), ("sreport", ["cluster", "AccountUtilizationByUser"]), ("sacctmgr", ["show", "qos"]),
])
def test_a_commands_start_loads_no_heavy_module(tmp_path, cmd, argv):
    rc, mods, out = _command_modules(tmp_path, cmd, argv)
    assert rc == 0 and (out or cmd == "scancel"), (cmd, argv, rc, out)  # it did its work (a listing, a job id)
    assert sorted(m for m in NEVER_LOADED if m in mods) == [], (cmd, argv)


def test_the_start_guard_sees_a_heavy_import(tmp_path):
    """The guard can fail: a module of squeue's path that imports typing is caught."""
    import shutil

    copy = tmp_path / "src" / "shim"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    hostlist = copy / "slurm" / "hostlist.py"
    hostlist.write_text(hostlist.read_text().replace("import itertools\n", "import itertools\nimport typing\n", 1))
    (tmp_path / "run").mkdir()
    rc, mods, out = _command_modules(tmp_path / "run", "squeue", [], src=copy)
    assert rc == 0 and "typing" in mods


def test_proc_imports_subprocess_only_to_start_a_process():
    """sbatch's agent path starts no process: loading shim.proc (and the backend, which imports
    it) must not import subprocess; its constants are subprocess's, Popen/TimeoutExpired its own."""
    import subprocess
    import sys

    code = ("import sys; sys.path.insert(0, sys.argv[1]); import shim.proc as p, shim.gridengine.process; "
            "before = 'subprocess' in sys.modules; import subprocess as sp; "
            "print(before, (p.PIPE, p.STDOUT, p.DEVNULL) == (sp.PIPE, sp.STDOUT, sp.DEVNULL), "
            "p.Popen is sp.Popen, p.TimeoutExpired is sp.TimeoutExpired)")
    cp = subprocess.run([sys.executable, "-I", "-c", code, str(SRC.parent)], capture_output=True, text=True, timeout=60)
    assert cp.stdout == "False True True True\n", cp.stderr
