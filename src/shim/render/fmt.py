"""Slurm's output-format engine, shared by squeue, sinfo and sacct renderers.

Two spellings select columns from one field registry: ``-o "%[.][width]X[suffix]"`` (a letter per
field, literal text kept) and ``-O "Name[:[.][width][suffix]],..."`` (long names, 20 wide by
default). Text is left-justified unless ``.`` is given, and every value is cut to its width, as
Slurm's ``_print_str`` does; width 0 means natural width.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

Getter = Callable[[Any, Any], str]


@dataclass(frozen=True)
class FieldSpec:
    """One printable field: its ``%`` letter (or None), ``-O`` name, column header and getter.

    ``get(row, ctx)`` returns the display text; ``key(row, ctx)`` (optional) a sort key. ``cut``
    false marks Slurm's fields that a right-justified column does not cut (times, node lists);
    left-justified values are always cut to the width, and so are headers.
    """

    letter: str | None
    name: str
    header: str
    get: Getter
    key: Callable[[Any, Any], Any] | None = None
    aliases: tuple[str, ...] = ()
    cut: bool = True

    def sort_key(self, row: Any, ctx: Any) -> Any:
        return self.key(row, ctx) if self.key is not None else self.get(row, ctx)


class Registry:
    """Fields indexed by letter and by case-insensitive long name."""

    def __init__(self, fields: Iterable[FieldSpec]):
        self.fields = list(fields)
        self.by_letter: dict[str, FieldSpec] = {}
        self.by_name: dict[str, FieldSpec] = {}
        for f in self.fields:
            if f.letter and f.letter not in self.by_letter:
                self.by_letter[f.letter] = f
            for n in (f.name, *f.aliases):
                self.by_name.setdefault(n.lower(), f)

    def letter(self, c: str) -> FieldSpec | None:
        return self.by_letter.get(c)

    def named(self, name: str) -> FieldSpec | None:
        return self.by_name.get(name.lower())


@dataclass
class Column:
    field: FieldSpec
    width: int = 0
    right: bool = False
    suffix: str = ""


@dataclass
class Format:
    columns: list[Column] = field(default_factory=list)
    prefix: str = ""


class FormatError(ValueError):
    """An unknown letter or field name; ``spec`` is the offending text."""

    def __init__(self, spec: str):
        super().__init__(spec)
        self.spec = spec


def parse_percent(fmt: str, registry: Registry, *, all_letters: str | None = None,
                  errors: list[str] | None = None) -> Format:
    """Parse a ``-o`` format. Text before the first ``%`` is a prefix; text after a field's letter
    up to the next ``%`` is that field's suffix. ``%all`` is every letter in ``all_letters`` order,
    joined by ``|``. Unknown letters raise FormatError, or are skipped and noted in ``errors``."""
    if fmt.strip().lower() == "%all":
        letters = all_letters if all_letters is not None else "".join(
            f.letter for f in registry.fields if f.letter)
        fmt = "|".join(f"%{c}" for c in letters)
    out = Format()
    first = fmt.find("%")
    if first < 0:
        out.prefix = fmt
        return out
    out.prefix = fmt[:first]
    # like strtok(fmt, "%"): runs of '%' separate tokens, empty tokens vanish
    for token in fmt[first:].split("%"):
        if not token:
            continue
        i = 0
        right = token.startswith(".")
        if right:
            i = 1
        j = i
        while j < len(token) and token[j].isdigit():
            j += 1
        width = int(token[i:j]) if j > i else 0
        if j >= len(token):
            continue
        letter, suffix = token[j], token[j + 1:]
        spec = registry.letter(letter)
        if spec is None:
            if errors is None:
                raise FormatError(letter)
            errors.append(letter)
            if out.columns:
                out.columns[-1].suffix += suffix
            continue
        out.columns.append(Column(spec, width, right, suffix))
    return out


def parse_long(fmt: str, registry: Registry, *, default_width: int = 20,
               errors: list[str] | None = None) -> Format:
    """Parse a ``-O`` format: comma-separated ``Name[:[.][width][suffix]]``."""
    out = Format()
    for token in fmt.split(","):
        if not token:
            continue
        name, colon, rest = token.partition(":")
        right = False
        suffix = ""
        if colon:
            if rest.startswith("."):
                right = True
                rest = rest[1:]
            j = 0
            while j < len(rest) and rest[j].isdigit():
                j += 1
            width = int(rest[:j]) if j else 0
            suffix = rest[j:]
        else:
            width = default_width
        spec = registry.named(name.strip())
        if spec is None:
            if errors is None:
                raise FormatError(name)
            errors.append(name)
            continue
        out.columns.append(Column(spec, width, right, suffix))
    return out


def cell(text: str, width: int, right: bool, cut: bool = True) -> str:
    """Slurm's ``_print_str``: right-justified ``%Ns`` (cut only if ``cut``), left-justified
    ``%.Ns`` (always cut), padded to ``width``; width 0 prints the text as it is."""
    if not width:
        return text
    if right:
        return (text[:width] if cut else text).rjust(width)
    return text[:width].ljust(width)


def render_header(fmt: Format) -> str:
    return fmt.prefix + "".join(cell(c.field.header, c.width, c.right) + c.suffix for c in fmt.columns)


def render_row(fmt: Format, row: Any, ctx: Any = None) -> str:
    return fmt.prefix + "".join(
        cell(c.field.get(row, ctx), c.width, c.right, c.field.cut) + c.suffix for c in fmt.columns)


def render(fmt: Format, rows: Iterable[Any], ctx: Any = None, *, header: bool = True) -> Iterator[str]:
    """Lines (without newline): the header unless ``header`` is false, then one line per row."""
    if header:
        yield render_header(fmt)
    cols = [(c.field.get, c.width, c.right, c.field.cut or not c.right, c.suffix) for c in fmt.columns]
    prefix = fmt.prefix
    for row in rows:
        parts = [prefix]
        for get, width, right, cut, suffix in cols:
            text = get(row, ctx)
            if width:
                if cut:
                    text = text[:width]
                text = text.rjust(width) if right else text.ljust(width)
            parts.append(text)
            if suffix:
                parts.append(suffix)
        yield "".join(parts)


def parse_sort(spec: str, registry: Registry) -> list[tuple[FieldSpec, bool]]:
    """A ``-S`` list: comma-separated letters or long names, each optionally prefixed by ``+``
    (ascending, the default) or ``-`` (descending). Returns (field, descending) pairs."""
    out: list[tuple[FieldSpec, bool]] = []
    for token in spec.split(","):
        token = token.strip()
        if not token:
            continue
        desc = False
        while token and token[0] in "+-":
            desc = token[0] == "-"
            token = token[1:]
        if token.startswith("%"):
            token = token[1:]
        f = registry.letter(token) if len(token) == 1 else registry.named(token)
        if f is None:
            raise FormatError(token)
        out.append((f, desc))
    return out


def sort_rows(rows: Sequence[Any], keys: list[tuple[FieldSpec, bool]], ctx: Any = None) -> list[Any]:
    """Stable multi-key sort, each key ascending or descending (least significant key first)."""
    out = list(rows)
    for f, desc in reversed(keys):
        out.sort(key=lambda r, f=f: _comparable(f.sort_key(r, ctx)), reverse=desc)
    return out


def _comparable(v: Any) -> Any:
    # mixed None/number/str keys would not compare; None sorts first
    if v is None:
        return (0, 0)
    if isinstance(v, tuple):
        return (1, tuple(_comparable(x) for x in v))
    if isinstance(v, (int, float)):
        return (1, v)
    return (2, v)
