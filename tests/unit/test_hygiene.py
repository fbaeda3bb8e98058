"""Design rules that must not erode: one module spawns processes; nothing builds shell strings."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "shim"
SPAWNERS = {"proc.py"}


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
        if "subprocess" in _imports(path) or "os.system(" in text or "os.popen(" in text or "pty.spawn" in text:
            offenders.append(str(path.relative_to(SRC)))
    assert offenders == []


def test_no_shell_true_anywhere():
    for path in SRC.rglob("*.py"):
        assert "shell=True" not in path.read_text(), path


def test_hot_path_does_not_import_heavy_modules():
    """sbatch's parse and translate modules stay free of pydantic/click imports (start-up cost)."""
    for rel in ("options/getopt.py", "options/sources.py", "options/spec.py", "translate/qsub.py", "jobwrap.py",
                "jobenv.py", "state.py", "names.py", "siteconf.py", "backends/__init__.py",
                "backends/gridengine.py", "cli/sbatch.py"):
        assert not ({"pydantic", "click", "tabulate"} & _imports(SRC / rel)), rel
