"""The test suite's own rules (issue 27), held to the tree: what CI's second pass runs, what
scripts/test runs, which imports the tests may make, and how test files are named."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import ONE_PATH_FILES, ONE_PATH_TESTS, REPO, SERVICE_PATH_DIRS

TESTS = REPO / "tests"
# a distribution's top-level module, where it is not its name with "_" for "-"
DIST_MODULE = {"pyyaml": "yaml", "pytest-xdist": "xdist"}
# modules tests/clients imports that its clients' own requirements install, and which client
# requires each (its Requires-Dist): the client tests use them as the client does
CLIENT_REQUIRES = {"distributed": "dask-jobqueue"}


def test_the_second_pass_leaves_out_only_named_files_of_the_service_path_dirs():
    """.ci/run's SLURM_SHIM_SERVICE=off pass runs the tests marked service_path; each file left out
    (ONE_PATH_FILES) is a file of those directories, and says why."""
    here = {p.name for d in SERVICE_PATH_DIRS for p in (TESTS / d).glob("test_*.py")}
    assert set(ONE_PATH_FILES) <= here, set(ONE_PATH_FILES) - here
    assert all(len(why) > 20 for why in ONE_PATH_FILES.values())
    for test, why in ONE_PATH_TESTS.items():  # and each single test left out is a test of such a file
        name, _, func = test.partition("::")
        assert name in here - set(ONE_PATH_FILES), test
        files = [TESTS / d / name for d in SERVICE_PATH_DIRS if (TESTS / d / name).exists()]
        assert any(f"\ndef {func}(" in f.read_text() for f in files), test
        assert len(why) > 20, test
    # .ci/run splits the pass between its two cells: each directory once, on one of them
    ci = (REPO / ".ci" / "run").read_text()
    off = re.findall(r"^service_off=\(env SLURM_SHIM_SERVICE=off .* -m service_path\)$", ci, re.M)
    assert len(off) == 1
    split = [re.search(rf'^{k}="([^"]*)"$', ci, re.M)[1].split() for k in ("OFF_DEBIAN", "OFF_OCS")]
    assert sorted(split[0] + split[1]) == sorted(f"tests/{d}" for d in SERVICE_PATH_DIRS)
    assert 'OFF_DEBIAN="$OFF_DEBIAN $OFF_OCS"' in ci  # (one cell only: all of them on it)
    runs = [ln.strip() for ln in ci.splitlines() if '"${service_off[@]}"' in ln]
    assert [r.split('"${service_off[@]}"')[1].split()[0] for r in runs] == ["$OFF_OCS", "$OFF_DEBIAN"]


def test_scripts_test_runs_every_test_directory_once():
    """A new directory of tests runs: scripts/test names each directory under tests/ that holds
    test files exactly once, either in the parallel run (no cluster) or in the serial one."""
    script = (REPO / "scripts" / "test").read_text()
    runs = [ln for ln in script.splitlines() if ln.startswith('"${pytest[@]}"') and "tests/" in ln]
    assert len(runs) == 2 and "-n 2" in runs[0] and "-n " not in runs[1]
    named = [w for ln in runs for w in re.findall(r"tests/(\w+)", ln)]
    have = sorted(d.name for d in TESTS.iterdir() if d.is_dir() and any(d.glob("test_*.py")))
    assert sorted(named) == have
    assert set(re.findall(r"tests/(\w+)", runs[0])) == {"unit", "package"}


def _requirement_modules(reqs: list[str]) -> set[str]:
    names = {re.match(r"[A-Za-z0-9_.-]+", r)[0].lower() for r in reqs}
    return {DIST_MODULE.get(n, n.replace("-", "_").replace(".", "_")) for n in names}


def _imports(path: Path) -> set[str]:
    got = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            got |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            got.add(node.module.split(".")[0])
    return got


def test_every_import_in_tests_is_declared():
    """Every module a test imports is the standard library's, the package's, a module of the
    suite's own (tests/, bench/), or a declared extra's: `pip install ".[test]"` alone runs
    tests/unit and tests/package; the client tests add the clients extra, the live ones the agent
    extra too."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = {k: _requirement_modules(v) for k, v in project["optional-dependencies"].items()}
    base = set(sys.stdlib_module_names) | _requirement_modules(project["dependencies"]) | {"shim"}
    base |= {p.stem for d in (TESTS, REPO / "bench") for p in d.rglob("*.py")}
    base |= {d.name for d in TESTS.iterdir() if (d / "__init__.py").exists()}  # (tests/security, ...: packages)
    allowed = {"unit": base | extras["test"], "package": base | extras["test"]}
    live = base | extras["test"] | extras["agent"]
    allowed |= {d: live for d in ("integration", "security", "interactive")}
    allowed["clients"] = live | extras["clients"] | set(CLIENT_REQUIRES)
    assert {r.lower() for r in CLIENT_REQUIRES.values()} <= {
        re.match(r"[A-Za-z0-9_.-]+", r)[0].lower() for r in project["optional-dependencies"]["clients"]}
    wrong = {}
    for path in sorted(TESTS.rglob("*.py")):
        where = path.relative_to(TESTS).parts
        ok = allowed.get(where[0], live) if len(where) > 1 else live  # (tests/conftest.py: every run's)
        bad = _imports(path) - ok
        if bad:
            wrong[str(path.relative_to(REPO))] = sorted(bad)
    assert wrong == {}


def test_the_check_of_imports_sees_an_undeclared_one(tmp_path):
    """(The check above fails on what it is meant to catch: a module no extra declares.)"""
    p = tmp_path / "t.py"
    p.write_text("import os\nimport yaml.constructor\nfrom requests import get\nfrom . import local\n")
    assert _imports(p) == {"os", "yaml", "requests"}
    assert _requirement_modules(["PyYAML>=6", "pytest-xdist>=3", "snakemake-executor-plugin-slurm==2.8.0"]) == {
        "yaml", "xdist", "snakemake_executor_plugin_slurm"}


@pytest.mark.parametrize("where", ["unit", "integration", "clients", "interactive", "package", "security"])
def test_test_files_are_named_after_behaviour_not_issue_items(where):
    """Files named after an issue's item (test_s5_*, test_i3_*) or number (test_issue27_*) say
    nothing of what they test."""
    named = [p.name for p in (TESTS / where).glob("*.py") if re.match(r"test_([a-z]\d+|issue_?\d+)(_|\.py)", p.name)]
    assert named == []
