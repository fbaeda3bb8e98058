"""``--yaml`` as Slurm 22.05 writes it, for squeue and sacct.

Both commands hand their OpenAPI document to one serializer plugin (serializer/yaml, libyaml), so
both print the same dialect: YAML 1.1 with every node tagged (``%YAML 1.1``, ``--- !!map``,
``!!str key: !!int 5``), two blanks per level, a sequence's items at their key's indent, an empty
string or a missing value as ``!!null null``, floats with six decimals, and ``...`` at the end
(tests/unit/test_squeue.py checks the dialect against the captured ``squeue --yaml``). The
document is a JSON value (what ``json.loads`` returns) and is only re-written.

24.11's and 26.05's serializer (``newer``) writes an empty string as a bare ``!!str``, folds a
long string at a blank past the 80th column onto a line indented two further (libyaml's
emitter), and ends with an empty line after ``...`` (tests/unit/test_releases_json.py re-writes
their captured ``squeue --yaml`` byte for byte).
"""

from __future__ import annotations

from .fmt import printable


def document(doc: dict, newer: bool = False) -> str:
    """The whole YAML document (without the final newline, as the JSON writers leave it)."""
    lines = ["%YAML 1.1", "--- !!map"]
    _map(doc, 0, lines, newer)
    return "\n".join(lines) + ("\n...\n" if newer else "\n...")


def scalar(v: object, newer: bool = False) -> str:
    if v is None or (v == "" and not newer):
        return "!!null null"
    if isinstance(v, bool):
        return f"!!bool {'true' if v else 'false'}"
    if isinstance(v, int):
        return f"!!int {v}"
    if isinstance(v, float):
        return f"!!float {v:f}"
    if v == "":
        return "!!str"
    return f"!!str {printable(str(v))}"  # a newline in a user's text must not start a YAML line


def _fold(line: str, indent: int) -> str:
    """A line whose string runs past the 80th column, broken at single blanks as libyaml breaks
    a plain scalar: at a blank found past column 80, not followed by another, the rest goes on a
    new line ``indent`` blanks in."""
    if len(line) <= 80:
        return line
    out: list[str] = []
    col = 0
    prev_space = False
    start = line.index("!!str ") + 6 if "!!str " in line else len(line)  # (the key's text never breaks)
    for i, ch in enumerate(line):
        if i >= start and ch == " " and not prev_space and col > 80 and line[i + 1:i + 2] not in (" ", ""):
            out.append("\n" + " " * indent)
            col = indent
            prev_space = True
            continue
        out.append(ch)
        col += 1
        prev_space = ch == " "
    return "".join(out)


def _node(head: str, v, indent: int, seq_indent: int, lines: list[str], newer: bool = False) -> bool:
    """A map or sequence value after ``head`` (``!!str key:`` or ``-``): its tag and its items,
    a map's keys at ``indent``, a sequence's items at ``seq_indent`` (``{}``/``[]`` when empty).
    False for a scalar (the caller writes it)."""
    if isinstance(v, dict):
        lines.append(f"{head} !!map" if v else f"{head} !!map {{}}")
        if v:
            _map(v, indent, lines, newer)
    elif isinstance(v, list):
        lines.append(f"{head} !!seq" if v else f"{head} !!seq []")
        if v:
            _seq(v, seq_indent, lines, newer)
    else:
        return False
    return True


def _map(d: dict, indent: int, lines: list[str], newer: bool = False) -> None:
    pad = " " * indent
    for k, v in d.items():
        if not _node(f"{pad}!!str {k}:", v, indent + 2, indent, lines, newer):
            line = f"{pad}!!str {k}: {scalar(v, newer)}"
            lines.append(_fold(line, indent + 2) if newer else line)


def _seq(items: list, indent: int, lines: list[str], newer: bool = False) -> None:
    """A sequence's items, each ``- `` at ``indent`` (a map's keys two further in)."""
    pad = " " * indent
    for item in items:
        if not _node(f"{pad}-", item, indent + 2, indent + 2, lines, newer):
            line = f"{pad}- {scalar(item, newer)}"
            lines.append(_fold(line, indent + 2) if newer else line)
