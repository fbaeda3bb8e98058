"""The whole capture of each release, accounted for (issue 30's first Done-when): every case of
fixtures/slurm-<release>/cases.json and every env-*.txt beside it has one disposition in
fixtures/release-cases.json:

- ``replayed``: the named test compares the shim's exit code, stdout and stderr with the
  capture's (here: ``test_the_shim_prints_the_captured_bytes``, through release_capture.replay,
  whose one normalisation is the job id Grid Engine gives a submission);
- ``uncontrolled``: the bytes are not the shim's, for the reason given;
- ``differs``: the shim controls the bytes and does not print the release's yet
  (``test_the_shim_still_differs`` holds it so: fixing one fails that test, and the table is updated).

docs/release-cases.md lists the uncontrolled and differing cases per release from the same table."""

from __future__ import annotations

import ast
import json

import pytest

from conftest import FIXTURES, REPO
from release_capture import RELEASES, cases, env_files, replay

TABLE = json.loads((FIXTURES / "release-cases.json").read_text())["releases"]
KINDS = ("replayed", "uncontrolled", "differs")
HERE = "test_release_capture.py::test_the_shim_prints_the_captured_bytes"
DOC = REPO / "docs" / "release-cases.md"


def rows(kind: str, test: str | None = None) -> list[tuple[str, str]]:
    return [(r, name) for r in RELEASES for name, (k, what) in TABLE[r].items()
            if k == kind and (test is None or what == test)]


def test_the_table_covers_every_case_of_every_release_and_nothing_else():
    assert tuple(TABLE) == RELEASES
    for r in RELEASES:
        assert sorted(TABLE[r]) == sorted([*cases(r), *env_files(r)]), r


def test_each_disposition_is_one_of_three_with_its_test_or_reason():
    for r in RELEASES:
        for name, (kind, what) in TABLE[r].items():
            assert kind in KINDS, (r, name)
            assert what.strip() and "\n" not in what, (r, name)
            if kind == "differs":
                assert name in cases(r), (r, name)  # a differing case is one this module replays


def _test_source(ref: str) -> str:
    """The named test's source, its decorators included (``file::function`` in tests/unit)."""
    file, _, func = ref.partition("::")
    src = (REPO / "tests" / "unit" / file).read_text()
    for node in ast.parse(src).body:
        if isinstance(node, ast.FunctionDef) and node.name == func:
            return "\n".join([*(ast.get_source_segment(src, d) for d in node.decorator_list),
                              ast.get_source_segment(src, node)])
    raise AssertionError(f"no test {ref}")


def test_each_test_named_exists_and_names_what_it_replays():
    """An existing test named for a case names that case (or, for a job environment, reads the
    release's env files of that kind)."""
    for r in RELEASES:
        for name, (kind, what) in TABLE[r].items():
            if kind != "replayed" or what == HERE:
                continue
            src = _test_source(what)
            if name.startswith("env-"):
                assert name.rsplit("-", 1)[0] + "-" in src or "env-sbatch-" in src and name.startswith("env-sbatch-"), \
                    (r, name, what)
            else:
                assert f'"{name}"' in src or f"'{name}'" in src, (r, name, what)


@pytest.mark.parametrize("release, name", rows("replayed", HERE))
def test_the_shim_prints_the_captured_bytes(release, name, tmp_path, monkeypatch, capsys):
    case = cases(release)[name]
    assert replay(release, name, tmp_path, monkeypatch, capsys) == (case["rc"], case["stdout"], case["stderr"])


@pytest.mark.parametrize("release, name", rows("differs"))
def test_the_shim_still_differs(release, name, tmp_path, monkeypatch, capsys):
    """The to-do list: each still differs from what the release printed. When one passes the
    release's bytes, this fails: move it to ``replayed`` in fixtures/release-cases.json."""
    case = cases(release)[name]
    rc, out, err = replay(release, name, tmp_path, monkeypatch, capsys)
    assert "internal error" not in err  # the shim's own answer, not the replay's lack of one
    assert (rc, out, err) != (case["rc"], case["stdout"], case["stderr"])


def render_doc() -> str:
    """docs/release-cases.md, from the table."""
    lines = ["# The captures the shim does not replay",
             "",
             "Issue 30: for each Slurm release, every captured command (fixtures/slurm-<release>/cases.json)",
             "and job environment (env-*.txt) replayed through the shim. The table is",
             "fixtures/release-cases.json; tests/unit/test_release_capture.py replays the cases it marks",
             "`replayed` here (or names the test that does), holds the `differs` cases to differing,",
             "and checks that this page is generated from it (`python -m pytest tests/unit/test_release_capture.py`",
             "prints nothing new: regenerate with `render_doc()`).",
             ""]
    for r in RELEASES:
        count = {k: sum(1 for v in TABLE[r].values() if v[0] == k) for k in KINDS}
        lines += [f"## Slurm {r}", "",
                  f"{len(TABLE[r])} captures: {count['replayed']} replayed, {count['differs']} differ,"
                  f" {count['uncontrolled']} not the shim's.", ""]
        for kind, title in (("differs", "Differs (the shim's bytes, not the release's yet)"),
                            ("uncontrolled", "Not controlled by the shim")):
            lines += [f"### {title}", ""]
            by_reason: dict[str, list[str]] = {}
            for name, (k, what) in TABLE[r].items():
                if k == kind:
                    by_reason.setdefault(what, []).append(name)
            if not by_reason:
                lines += ["None.", ""]
            for what, names in by_reason.items():
                lines += [f"- {what}: " + ", ".join(f"`{n}`" for n in names), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def test_the_doc_is_the_table():
    assert DOC.read_text() == render_doc()
