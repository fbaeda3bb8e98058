"""Slurm's output-format engine, shared by squeue, sinfo and sacct renderers.

Two spellings select columns from one field registry: ``-o "%[.][width]X[suffix]"`` (a letter per
field, literal text kept) and ``-O "Name[:[.][width][suffix]],..."`` (long names, 20 wide by
default). Text is left-justified unless ``.`` is given, and every value is cut to its width, as
Slurm's ``_print_str`` does; width 0 means natural width.

Values can be other users' text (job names, comments, paths), so every value is passed through
``printable`` before it is cut: a control character cannot move the cursor, clear a screen or start
a line that looks like another job's row. (The format's own text, the user's ``-o``, is kept.)
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Iterator, Sequence

    Getter = Callable[[Any, Any], str]


def printable(text: str) -> str:
    """``text`` with each non-printable character (C0/C1 controls such as ESC, CR and newline, DEL,
    line and paragraph separators, format characters such as U+202E) written as a Python-style
    escape: ``\\x1b``, ``\\n`` -> ``\\x0a``, ``\\u202e``. Printable text is returned as it is (one
    C-level check). The one escaping of user text in text output: squeue, sinfo, sacct and scontrol."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class FieldSpec:
    """One printable field: its ``%`` letter (or None), ``-O`` name, column header and getter.

    ``get(row, ctx)`` returns the display text; ``key(row, ctx)`` (optional) a sort key. ``cut``
    false marks Slurm's fields that a right-justified column does not cut (times, node lists);
    left-justified values are always cut to the width, and so are headers.

    Immutable, compared and hashed by its fields, as the frozen dataclass it was; ``replace``
    makes a changed copy. (Written out: ``dataclasses`` costs ~10 ms of a command's start.)
    """

    __slots__ = ("letter", "name", "header", "get", "key", "aliases", "cut")

    letter: str | None
    name: str
    header: str
    get: Getter
    key: Callable[[Any, Any], Any] | None
    aliases: tuple[str, ...]
    cut: bool

    def __init__(self, letter: str | None, name: str, header: str, get: Getter,
                 key: Callable[[Any, Any], Any] | None = None, aliases: tuple[str, ...] = (), cut: bool = True):
        setattr_ = object.__setattr__
        setattr_(self, "letter", letter)
        setattr_(self, "name", name)
        setattr_(self, "header", header)
        setattr_(self, "get", get)
        setattr_(self, "key", key)
        setattr_(self, "aliases", aliases)
        setattr_(self, "cut", cut)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: a FieldSpec is immutable (use replace)")

    __delattr__ = __setattr__

    def _values(self) -> tuple:
        return (self.letter, self.name, self.header, self.get, self.key, self.aliases, self.cut)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return (f"FieldSpec(letter={self.letter!r}, name={self.name!r}, header={self.header!r}, get={self.get!r}, "
                f"key={self.key!r}, aliases={self.aliases!r}, cut={self.cut!r})")

    def replace(self, **changes: Any) -> FieldSpec:
        """A copy with ``changes`` (field=value), as ``dataclasses.replace``."""
        values = dict(zip(self.__slots__, self._values()))
        values.update(changes)
        return FieldSpec(**values)

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


PLUS = "+"  # Column.overflow: a longer value is cut to width - 1 and ``+`` (sacct; width 0 prints nothing)
FULL = "full"  # Column.overflow: never cut, only padded (sacct's numbers)


class Column:
    """One column: a field, its width (0: natural), justification, the text after it, and what
    a value wider than the column becomes (``overflow``): None is squeue's rule (cut to the width,
    except a right-justified field that is not ``cut``), PLUS or FULL sacct's."""

    __slots__ = ("field", "width", "right", "suffix", "overflow")

    def __init__(self, field: FieldSpec, width: int = 0, right: bool = False, suffix: str = "",
                 overflow: str | None = None):
        self.field = field
        self.width = width
        self.right = right
        self.suffix = suffix
        self.overflow = overflow

    def _values(self) -> tuple:
        return (self.field, self.width, self.right, self.suffix, self.overflow)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None

    def __repr__(self) -> str:
        return (f"Column(field={self.field!r}, width={self.width!r}, right={self.right!r}, suffix={self.suffix!r}, "
                f"overflow={self.overflow!r})")


class Format:
    __slots__ = ("columns", "prefix")

    def __init__(self, columns: list[Column] | None = None, prefix: str = ""):
        self.columns = [] if columns is None else columns
        self.prefix = prefix

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.columns, self.prefix) == (other.columns, other.prefix)

    __hash__ = None

    def __repr__(self) -> str:
        return f"Format(columns={self.columns!r}, prefix={self.prefix!r})"


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


def column_cell(c: Column, text: str) -> str:
    """``text`` in column ``c``, by its overflow rule (see Column)."""
    w = c.width
    if c.overflow == PLUS:
        if len(text) > w:
            text = text[:w - 1] + "+" if w > 0 else ""
    elif c.overflow != FULL:
        return cell(text, w, c.right, c.field.cut)
    return text.rjust(w) if c.right else text.ljust(w)


def render_row(fmt: Format, row: Any, ctx: Any = None) -> str:
    return fmt.prefix + "".join(column_cell(c, printable(c.field.get(row, ctx))) + c.suffix for c in fmt.columns)


def render(fmt: Format, rows: Iterable[Any], ctx: Any = None, *, header: bool = True) -> Iterator[str]:
    """Lines (without newline): the header unless ``header`` is false, then one line per row."""
    if header:
        yield render_header(fmt)
    line = compile_row(fmt)
    for row in rows:
        yield line(row, ctx)


def render_lines(fmt: Format, rows: Iterable[Any], ctx: Any = None, *, header: bool = True) -> list[str]:
    """render() as a list, built in one pass (the fast way for many rows)."""
    line = compile_row(fmt)
    out = [render_header(fmt)] if header else []
    out += [line(row, ctx) for row in rows]
    return out


def compile_row(fmt: Format) -> Callable[..., str]:
    """One function ``line(row, ctx=None)`` that renders a row as render_row does, compiled for the
    format: a join of the cells, each its getter's text cut and padded in place (``t[:W].rjust(W)``,
    twice as fast as format specs). A getter made by ``getter`` (the same getter as an expression
    over ``r`` and ``c``) is inlined, which saves a call per cell. Each value goes through
    ``printable``, inlined as its fast path (``v if v.isprintable() else E(v)``)."""
    own: dict[str, Any] = {"P": fmt.prefix, "E": printable}
    names: dict[str, Any] | None = None  # the namespace of the inlined getters (one, shared)
    parts = ["P"] if fmt.prefix else []
    for i, c in enumerate(fmt.columns):
        get = c.field.get
        expr = getattr(get, "expr", None)
        if expr is not None and (names is None or get.__globals__ is names):
            names = get.__globals__
            value = f"({expr})"
        else:
            own[f"g{i}"] = get
            value = f"g{i}(r, c)"
        value = f"(v{i} if (v{i} := {value}).isprintable() else E(v{i}))"
        w = c.width
        pad = "rjust" if c.right else "ljust"
        if c.overflow == PLUS:
            if w:  # (width 0: every value is cut to nothing)
                parts.append(f"(t{i} if len(t{i} := {value}) <= {w} else t{i}[:{w - 1}] + '+').{pad}({w})")
        elif c.overflow == FULL:
            parts.append(f"{value}.{pad}({w})" if w else value)
        elif not w:
            parts.append(value)
        elif c.right:
            parts.append(f"{value}[:{w}].rjust({w})" if c.field.cut else f"{value}.rjust({w})")
        else:
            parts.append(f"{value}[:{w}].ljust({w})")
        if c.suffix:
            own[f"s{i}"] = c.suffix
            parts.append(f"s{i}")
    if not parts:
        body = '""'
    elif len(parts) == 1:
        body = f"str.__str__({parts[0]})"
    else:
        body = '"".join((' + ", ".join(parts) + "))"
    src = f"def line(r, c=None):\n    return {body}\n"
    code: dict[str, Any] = {}
    exec(compile(src, "<format>", "exec"), {**(names or {}), **own}, code)
    return code["line"]


def getter(expr: str, namespace: dict[str, Any]) -> Getter:
    """A getter written as an expression over the row ``r`` and the context ``c`` (names resolved in
    ``namespace``); compile_row inlines it into the line function."""
    get = eval(compile(f"lambda r, c: {expr}", "<field>", "eval"), namespace)
    get.expr = expr
    return get


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
