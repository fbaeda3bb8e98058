"""The layer rule (issue 28): src/shim's folders are the layers of the house, and imports run down.

The import graph is read with ``ast`` from every module of src/shim: module-level imports and
those inside functions alike (a lazy import is still an arrow). Imports under ``if TYPE_CHECKING:``
never run (annotations are strings) and are left out. From the top floor down:

    cli/          the commands' command lines (and ``slurm-shim``'s)
    admin/        the site's tools: cells, install, doctor, completion
    service/      the warm per-user service (it runs ``__main__.dispatch``)
    __main__.py,  the entry points
    agent.py
    operations/   what each command does
    runtime/      inside the job
    gridengine/   Grid Engine's words and the one way to reach it
    store/        the shim's own records
    slurm/        Slurm's words: options, grammars, model, renderers
    the leaves    config, siteconf, errors, proc, plain, the package itself

A module may import its own floor (no circle) and any floor below; ``UPWARD`` lists the only
arrows that run up, each with its reason.
"""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "shim"

FLOORS = ("leaf", "slurm", "store", "gridengine", "runtime", "operations", "entry", "service", "admin", "cli")
ROOT_FLOORS = {"__main__": "entry", "agent": "entry"}  # the other root modules are leaves
IO_FLOORS = {"store", "gridengine", "runtime", "operations", "entry", "service", "admin", "cli"}

UPWARD = {
    # siteconf caches the validated config as JSON and writes that cache the store's way (an
    # atomic, owner-checked write), rather than keep a second copy of the rule in a leaf.
    ("shim.siteconf", "shim.store.state"),
}


def _module(path: Path, src: Path) -> str:
    parts = ["shim", *path.relative_to(src).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runs(tree: ast.AST):
    """The import statements of ``tree`` that can run: not those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """{module: the shim modules it imports} (a name imported from a package that is a module of
    it counts as that module; ``from x import name`` otherwise counts as ``x``)."""
    files = {_module(p, src): p for p in src.rglob("*.py")}
    graph = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        out = set()
        for node in _runs(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
                names = [None] * len(targets)
            else:
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [base] * len(node.names)
                names = [a.name for a in node.names]
            for target, name in zip(targets, names):
                if not (target == "shim" or target.startswith("shim.")):
                    continue
                if name and f"{target}.{name}" in files:
                    target = f"{target}.{name}"
                while target not in files:
                    target = target.rpartition(".")[0]
                if target != mod:
                    out.add(target)
        graph[mod] = out
    return graph


def floor(mod: str) -> str:
    parts = mod.split(".")
    if len(parts) == 1:
        return "leaf"
    if len(parts) == 2 and not (SRC / parts[1]).is_dir():
        return ROOT_FLOORS.get(parts[1], "leaf")
    return parts[1]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def upward(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(m, t) for m, ts in graph.items() for t in ts if FLOORS.index(floor(t)) > FLOORS.index(floor(m))}


GRAPH = import_graph()


def test_every_module_is_on_a_floor():
    assert {floor(m) for m in GRAPH} <= set(FLOORS), sorted({floor(m) for m in GRAPH} - set(FLOORS))


def test_at_most_eight_modules_at_the_root():
    root = sorted(p.name for p in SRC.glob("*.py"))
    assert len(root) <= 8, root


def test_no_import_circle():
    assert cycles(GRAPH) == []


def test_only_the_listed_imports_run_up_the_house():
    assert upward(GRAPH) == UPWARD and len(UPWARD) <= 2


def test_the_slurm_side_imports_nothing_of_grid_engine_or_the_store():
    offenders = sorted((m, t) for m, ts in GRAPH.items() if floor(m) == "slurm" for t in ts
                       if floor(t) in {"gridengine", "store"} | IO_FLOORS)
    assert offenders == []


def test_renderers_import_no_io_layer():
    """slurm/render/ formats what a command gathered: Slurm's words and the leaves that do no I/O."""
    offenders = sorted((m, t) for m, ts in GRAPH.items() if m.startswith("shim.slurm.render") for t in ts
                       if floor(t) in IO_FLOORS or t in ("shim.proc", "shim.siteconf"))
    assert offenders == []


def test_the_rule_sees_each_spelling_and_can_fail(tmp_path):
    """A copy of the house with three planted arrows: a renderer reaching the store (relative, in a
    function), a leaf importing the Grid Engine side (absolute, module level), and a circle; one
    more import under TYPE_CHECKING that must not count."""
    import shutil

    copy = tmp_path / "shim"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    fmt = copy / "slurm" / "render" / "fmt.py"
    fmt.write_text(fmt.read_text() + "\n\ndef _planted():\n    from ...store import state\n")
    errors = copy / "errors.py"
    errors.write_text(errors.read_text() + "\nimport shim.gridengine.names\n")
    names = copy / "gridengine" / "names.py"
    names.write_text(names.read_text() + "\n\ndef _planted():\n    from .. import errors\n\n\n"
                     "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    from ..operations import jobs\n")
    graph = import_graph(copy)
    assert "shim.store.state" in graph["shim.slurm.render.fmt"]
    assert "shim.operations.jobs" not in graph["shim.gridengine.names"]
    assert upward(graph) - UPWARD == {("shim.slurm.render.fmt", "shim.store.state"),
                                      ("shim.errors", "shim.gridengine.names")}
    assert any({"shim.errors", "shim.gridengine.names"} <= set(c) for c in cycles(graph))


MAX_FUNCTION_LINES = 120  # issue 28: a longer function splits along its own sections


def test_no_function_is_longer_than_120_lines():
    long = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(SRC)}:{node.name} {n} lines")
    assert long == []
