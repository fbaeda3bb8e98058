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


def _map(d: dict, indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for k, v in d.items():
        if isinstance(v, dict):
            if v:
                lines.append(f"{pad}!!str {k}: !!map")
                _map(v, indent + 2, lines)
            else:
                lines.append(f"{pad}!!str {k}: !!map {{}}")
        elif isinstance(v, list):
            if not v:
                lines.append(f"{pad}!!str {k}: !!seq []")
                continue
            lines.append(f"{pad}!!str {k}: !!seq")
            _seq(v, indent, lines)
        else:
            lines.append(f"{pad}!!str {k}: {scalar(v)}")


def _seq(items: list, indent: int, lines: list[str]) -> None:
    """A sequence's items, each ``- `` at ``indent`` (a map's keys two further in)."""
    pad = " " * indent
    for item in items:
        if isinstance(item, dict):
            if item:
                lines.append(f"{pad}- !!map")
                _map(item, indent + 2, lines)
            else:
                lines.append(f"{pad}- !!map {{}}")
        elif isinstance(item, list):
            if item:
                lines.append(f"{pad}- !!seq")
                _seq(item, indent + 2, lines)
            else:
                lines.append(f"{pad}- !!seq []")
        else:
            lines.append(f"{pad}- {scalar(item)}")
