"""The submission path's shape: no command imports another command, and the modules every sbatch
loads stay light (dataclasses alone costs ~7 ms of a start; request.py's classes are written by
hand)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "shim"
COMMANDS = {p.stem for p in (SRC / "cli").glob("*.py")} - {"__init__", "common"}
SUBCOMMANDS = {("admin", "explain")}  # slurm-shim (cli/admin.py) dispatches to its explain subcommand


def _imported(path: Path) -> set[str]:
    """The shim modules a file imports, anywhere in it (lazy imports too), as dotted names under shim."""
    rel = path.relative_to(SRC).with_suffix("").parts
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = list(rel[:len(rel) - node.level]) if node.level else []
            mod = (node.module or "").split(".") if node.module else []
            if not node.level and mod[:1] == ["shim"]:
                mod = mod[1:]
            elif not node.level:
                continue
            for a in node.names:
                out.add(".".join([*base, *mod, a.name]))
                out.add(".".join([*base, *mod]))
    return out


def test_no_command_imports_a_command():
    offenders = []
    for path in sorted((SRC / "cli").glob("*.py")):
        for name in _imported(path):
            parts = name.split(".")
            if parts[:1] == ["cli"] and len(parts) > 1 and parts[1] in COMMANDS and parts[1] != path.stem \
                    and (path.stem, parts[1]) not in SUBCOMMANDS:
                offenders.append(f"cli/{path.name} -> {name}")
    assert offenders == []


def test_the_submission_modules_import_nothing_heavy():
    # what sbatch has loaded before it reaches them does not count (state: json; options: typing)
    code = ("import sys, shim.store.state, shim.gridengine.backends, shim.errors, shim.slurm.options.sources; base = set(sys.modules); "
            "import shim.slurm.request, shim.operations.submit, shim.slurm.options.export; "
            "print(sorted({'dataclasses', 'typing', 'pydantic', 'click', 'tabulate', 'subprocess', 'json'} "
            "& (set(sys.modules) - base)))")
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(SRC.parent)!r}); {code}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
