"""sprio's output: Slurm 22.05's format letters, headers, widths and number forms. Reads nothing.

Follows src/sprio/opts.c (parse_format, _parse_token: ``%[.][width]letter`` with the text after the
letter kept as a suffix, an unknown letter reported and skipped), src/sprio/print.c (_print_str:
right-justified ``%Ns`` or left ``%.Ns`` padded, always cut at the width; integers ``%.0f``,
normalized factors ``%.7lf``, normalized priority ``%16.14f``; the ``-w`` row) and src/sprio/sort.c
(sort letters read from the end, ``-`` descending; default job id).
"""

from __future__ import annotations

from ...plain import factory, record  # (dataclasses costs ~10 ms of a start)

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Callable

    Printer = Callable[["Row", "Weights"], str]

NICE_OFFSET = 0x80000000  # only in the sums; the rows carry plain nice values
PRIO_SCALE = 0xFFFFFFFF


@record
class Row:
    """One pending job's priority factors, each already weighted (Slurm's priority_* values)."""

    job_id: int
    partition: str
    user: str
    account: str = ""
    qos: str = ""
    nice: int = 0
    priority: float = 0.0  # the job's priority (Slurm's integer scale)
    site: float = 0.0
    age: float = 0.0
    assoc: float = 0.0
    fairshare: float = 0.0
    jobsize: float = 0.0
    part: float = 0.0
    qos_prio: float = 0.0
    tres: dict[str, float] = factory(dict)
    cluster: str = ""


@record
class Weights:
    age: int = 0
    assoc: int = 0
    fairshare: int = 0
    jobsize: int = 0
    partition: int = 0
    qos: int = 0
    tres: str = ""  # PriorityWeightTRES, "" for none
    tres_each: dict[str, float] = factory(dict)


def pad(text: str, width: int, right: bool) -> str:
    """_print_str with cut_output: right-justified or left, always cut at the width."""
    if width == 0:
        return text
    if right:
        return f"{text:>{width}}"[:width]
    return f"{text[:width]:<{width}}"


def _int(v: float) -> str:
    return f"{v:.0f}"


def _norm(v: float) -> str:
    return f"{v:.7f}"


def _ratio(v: float, w: float) -> float:
    return v / w if w else 0.0


# letter -> (header, weights-row text (w) or None for "", value text (row, weights))
LETTERS: dict[str, tuple[str, Callable[[Weights], str], Printer]] = {
    "a": ("AGE", lambda w: _int(w.age), lambda r, w: _norm(_ratio(r.age, w.age))),
    "A": ("AGE", lambda w: _int(w.age), lambda r, w: _int(r.age)),
    "b": ("ASSOC", lambda w: _int(w.assoc), lambda r, w: _norm(_ratio(r.assoc, w.assoc))),
    "B": ("ASSOC", lambda w: _int(w.assoc), lambda r, w: _int(r.assoc)),
    "c": ("CLUSTER", lambda w: "", lambda r, w: r.cluster),
    "f": ("FAIRSHARE", lambda w: _int(w.fairshare), lambda r, w: _norm(_ratio(r.fairshare, w.fairshare))),
    "F": ("FAIRSHARE", lambda w: _int(w.fairshare), lambda r, w: _int(r.fairshare)),
    "i": ("JOBID", lambda w: "Weights", lambda r, w: str(r.job_id)),
    "j": ("JOBSIZE", lambda w: _int(w.jobsize), lambda r, w: _norm(_ratio(r.jobsize, w.jobsize))),
    "J": ("JOBSIZE", lambda w: _int(w.jobsize), lambda r, w: _int(r.jobsize)),
    "n": ("QOSNAME", lambda w: "", lambda r, w: r.qos),
    "N": ("NICE", lambda w: "", lambda r, w: _int(r.nice)),
    "o": ("ACCOUNT", lambda w: "", lambda r, w: r.account),
    "p": ("PARTITION", lambda w: _int(w.partition), lambda r, w: _norm(_ratio(r.part, w.partition))),
    "P": ("PARTITION", lambda w: _int(w.partition), lambda r, w: _int(r.part)),
    "r": ("PARTITION", lambda w: "", lambda r, w: r.partition),
    "S": ("SITE", lambda w: _int(1), lambda r, w: _int(r.site)),
    "q": ("QOS", lambda w: _int(w.qos), lambda r, w: _norm(_ratio(r.qos_prio, w.qos))),
    "Q": ("QOS", lambda w: _int(w.qos), lambda r, w: _int(r.qos_prio)),
    "u": ("USER", lambda w: "", lambda r, w: r.user),
    "y": ("PRIORITY", lambda w: "", lambda r, w: f"{r.priority / PRIO_SCALE:16.14f}"),
    "Y": ("PRIORITY", lambda w: "", lambda r, w: str(int(r.priority))),
    "t": ("TRES", lambda w: "", lambda r, w: ",".join(
        f"{k}={_ratio(v, w.tres_each.get(k, 0)):.2f}" for k, v in r.tres.items() if v)),
    "T": ("TRES", lambda w: w.tres, lambda r, w: ",".join(f"{k}={v:.0f}" for k, v in r.tres.items() if v)),
}


@record
class Field:
    letter: str | None  # None: the format's prefix (text before the first %)
    width: int = 0
    right: bool = False
    suffix: str = ""


def parse_format(fmt: str, errors: list[str] | None = None) -> list[Field]:
    """opts.c parse_format: the prefix, then one field per ``%`` token; unknown letters are
    reported (``errors``) and dropped, their suffix with them."""
    out: list[Field] = []
    pos = fmt.find("%")
    if pos != 0:
        out.append(Field(None, suffix=fmt if pos < 0 else fmt[:pos]))
    if pos < 0:
        return out
    for token in [t for t in fmt[pos:].split("%") if t]:
        i, right = 0, False
        if token[0] == ".":
            right, i = True, 1
        width = 0
        while i < len(token) and token[i].isdigit():
            width = width * 10 + int(token[i])
            i += 1
        letter = token[i] if i < len(token) else ""
        suffix = token[i + 1:]
        if letter in LETTERS:
            out.append(Field(letter, width, right, suffix))
        elif errors is not None:
            errors.append(letter)
    return out


def default_format(normalized: bool, long: bool, users: bool, w: Weights) -> str:
    """sprio.c main: the layout when there is no -o (columns only for factors with a weight)."""
    if normalized:
        if long:
            return "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t"
        parts = ["%.15i %9r"] + (["%.8u"] if users else []) + ["%10y"]
        letters = "abfjpqt"
    else:
        if long:
            return "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T"
        parts = ["%.15i %9r"] + (["%.8u"] if users else []) + ["%.10Y %.10S"]
        letters = "ABFJPQT"
    weights = {"a": w.age, "b": w.assoc, "f": w.fairshare, "j": w.jobsize, "p": w.partition, "q": w.qos,
               "t": w.tres}
    for c in letters:
        if weights[c.lower()]:
            width = 20 if c in "tT" else 10
            parts.append(f"%.{width}{c}" if c.isupper() else f"%{width}{c}")
    return " ".join(parts)


def line(fields: list[Field], cells: Callable[[str], str]) -> str:
    out = []
    for f in fields:
        if f.letter is not None:
            out.append(pad(cells(f.letter), f.width, f.right))
        out.append(f.suffix)
    return "".join(out)


def render(fields: list[Field], rows: list[Row], w: Weights, *, header: bool = True,
           weights_only: bool = False) -> str:
    """print_jobs_array: the header, then either the weights row (-w) or every job."""
    lines = []
    if header:
        lines.append(line(fields, lambda c: LETTERS[c][0]))
    if weights_only:
        lines.append(line(fields, lambda c: LETTERS[c][1](w)))
    else:
        for r in rows:
            lines.append(line(fields, lambda c, r=r: LETTERS[c][2](r, w)))
    return "".join(x + "\n" for x in lines)


_SORT_KEYS: dict[str, Callable[[Row], object]] = {
    "c": lambda r: r.cluster, "i": lambda r: r.job_id, "N": lambda r: r.nice, "r": lambda r: r.partition,
    "u": lambda r: r.user, "A": lambda r: r.age, "F": lambda r: r.fairshare, "J": lambda r: r.jobsize,
    "P": lambda r: r.part, "Q": lambda r: r.qos_prio, "T": lambda r: sum(r.tres.values()),
    "Y": lambda r: r.priority,
}


def sort_rows(rows: list[Row], spec: str | None) -> list[Row]:
    """sort.c sort_job_list: letters applied from the last to the first (so the first decides),
    ``-`` before a letter sorts it descending; weighted and normalized letters sort alike."""
    spec = spec or "i"
    out = list(rows)
    for i in range(len(spec) - 1, -1, -1):
        c = spec[i]
        if c in ",-+":
            continue
        key = _SORT_KEYS.get(c.upper() if c in "afjpqty" else c)
        if key is None:
            continue
        out.sort(key=key, reverse=i > 0 and spec[i - 1] == "-")  # type: ignore[arg-type]
    return out
