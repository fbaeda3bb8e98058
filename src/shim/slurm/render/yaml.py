"""``--yaml`` as Slurm 22.05 writes it, for squeue and sacct.

Both commands hand their OpenAPI document to one serializer plugin (serializer/yaml, libyaml), so
both print the same dialect: YAML 1.1 with every node tagged (``%YAML 1.1``, ``--- !!map``,
``!!str key: !!int 5``), two blanks per level, a sequence's items at their key's indent, an empty
string or a missing value as ``!!null null``, floats with six decimals, and ``...`` at the end
(tests/unit/test_squeue.py checks the dialect against the captured ``squeue --yaml``). The
document is a JSON value (what ``json.loads`` returns) and is only re-written.
"""

from __future__ import annotations

from .fmt import printable


def document(doc: dict) -> str:
    """The whole YAML document (without the final newline, as the JSON writers leave it)."""
    lines = ["%YAML 1.1", "--- !!map"]
    _map(doc, 0, lines)
    return "\n".join(lines) + "\n..."


def scalar(v: object) -> str:
    if v is None or v == "":
        return "!!null null"
    if isinstance(v, bool):
        return f"!!bool {'true' if v else 'false'}"
    if isinstance(v, int):
        return f"!!int {v}"
    if isinstance(v, float):
        return f"!!float {v:f}"
    return f"!!str {printable(str(v))}"  # a newline in a user's text must not start a YAML line


def _node(head: str, v, indent: int, seq_indent: int, lines: list[str]) -> bool:
    """A map or sequence value after ``head`` (``!!str key:`` or ``-``): its tag and its items,
    a map's keys at ``indent``, a sequence's items at ``seq_indent`` (``{}``/``[]`` when empty).
    False for a scalar (the caller writes it)."""
    if isinstance(v, dict):
        lines.append(f"{head} !!map" if v else f"{head} !!map {{}}")
        if v:
            _map(v, indent, lines)
    elif isinstance(v, list):
        lines.append(f"{head} !!seq" if v else f"{head} !!seq []")
        if v:
            _seq(v, seq_indent, lines)
    else:
        return False
    return True


def _map(d: dict, indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for k, v in d.items():
        if not _node(f"{pad}!!str {k}:", v, indent + 2, indent, lines):
            lines.append(f"{pad}!!str {k}: {scalar(v)}")


def _seq(items: list, indent: int, lines: list[str]) -> None:
    """A sequence's items, each ``- `` at ``indent`` (a map's keys two further in)."""
    pad = " " * indent
    for item in items:
        if not _node(f"{pad}-", item, indent + 2, indent + 2, lines):
            lines.append(f"{pad}- {scalar(item)}")
