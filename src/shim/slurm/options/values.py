"""Value grammars of Slurm options, with Slurm 22.05's exact messages and exit codes on bad input.

Every parser takes ``(text, prog)`` (``prog`` is sbatch, srun or salloc, used in messages) and returns
a plain value, or raises ShimError carrying the lines Slurm prints and its exit code:

* option-level checks (``Invalid --mem specification``) exit 255, like Slurm's ``exit(-1)``;
* Slurm's ``parse_int`` (``Invalid numeric value "0" for --ntasks.``) exits 1;
* checks Slurm leaves to the controller (arrays, dependencies, licenses) read like a refused
  submission (``Batch job submission failed: ...``, exit 1), worded per command.

The grammars follow Slurm's C parsers closely, including their leniencies (``strtol`` skips leading
blanks, ``--nice=abc`` means 0, unknown ``--mail-type`` words next to known ones are ignored).
"""

from __future__ import annotations

import itertools
import re
from datetime import datetime
from collections import namedtuple
from functools import partial

from ...errors import ShimError, command_error
from ..timespec import TimeSpecError

TYPE_CHECKING = False  # typing costs ~9 ms of sbatch's start (gridengine/backends.py): the value records are
if TYPE_CHECKING:      # collections.namedtuple's (what typing.NamedTuple makes), with the same fields
    from typing import Callable

INFINITE = -1
"""A time limit of UNLIMITED/INFINITE (or 0, which Slurm treats the same)."""
MAX_ARRAY_SIZE = 1001
"""Slurm's default MaxArraySize (also the reference cluster's): indices run 0..1000."""
_site = {"max_array_size": MAX_ARRAY_SIZE}


def use_site(max_array_size: int) -> None:
    """The site's MaxArraySize (``cluster.max_array_size``) for the parsers that follow: the
    commands set it from the site config before they parse their options."""
    _site["max_array_size"] = max_array_size
NICE_LIMIT = 2**31 - 3
"""|--nice| may not exceed NICE_OFFSET - 3."""
DEFAULT_IMMEDIATE = 1
"""Seconds ``-I`` waits when given without a value."""


# --- errors ---------------------------------------------------------------------------------------


def _err(prog: str, msg: str, code: int = 255) -> ShimError:
    """An option value Slurm's parser refuses: its error, exit 255 unless said otherwise."""
    return command_error(prog, msg, code=code)


_SUBMIT_FAILED = {
    "sbatch": "Batch job submission failed",
    "srun": "Unable to allocate resources",
    "salloc": "Job submit/allocate failed",
}


def submit_failed(prog: str, reason: str) -> ShimError:
    """A request the controller refuses: ``sbatch: error: Batch job submission failed: <reason>``."""
    return _err(prog, f"{_SUBMIT_FAILED.get(prog, _SUBMIT_FAILED['sbatch'])}: {reason}", 1)


# --- C-like number scanning ---------------------------------------------------------------------

_C_INT = re.compile(r"[ \t\n\r\f\v]*([+-]?)(\d+)")
LONG_MAX = 2**63 - 1


def _digits_value(digits: str) -> int:
    """The value of a run of digits, saturated at LONG_MAX as strtol does (so int() never sees
    more than 19 digits: Python refuses long ones, and converts them in quadratic time)."""
    significant = digits.lstrip("0")
    return LONG_MAX if len(significant) > 19 else min(int(significant or "0"), LONG_MAX)


def _strtol(text: str) -> tuple[int, str, bool]:
    """C ``strtol(text, &end, 10)``: (value, rest, converted). Without digits: (0, text, False)."""
    m = _C_INT.match(text)
    if not m:
        return 0, text, False
    significant = m.group(2).lstrip("0")
    value = int(significant or "0") if len(significant) <= 19 else LONG_MAX + 1
    value = -value if m.group(1) == "-" else value
    return max(min(value, LONG_MAX), -LONG_MAX - 1), text[m.end():], True


def _atoi(text: str) -> int:
    return _strtol(text)[0]


# --- integers -------------------------------------------------------------------------------------


def parse_int(text: str, prog: str, opt: str, positive: bool) -> int:
    """Slurm's parse_int: a whole decimal number, >= 1 if ``positive`` else >= 0; exit 1 otherwise."""
    value, rest, _ = _strtol(text)
    if rest or value < 0 or (positive and value <= 0):
        raise _err(prog, f'Invalid numeric value "{text}" for {opt}.', 1)
    if value == LONG_MAX:
        raise _err(prog, f"Numeric argument ({value}) to big for {opt}.", 1)
    return value


def positive_int(text: str, prog: str, opt: str) -> int:
    """A count that must be >= 1 (``-n``, ``-c``, ``--ntasks-per-node``, ...)."""
    return parse_int(text, prog, opt, True)


def nonneg_int(text: str, prog: str, opt: str) -> int:
    """A number that may be 0 (``--core-spec``, ``--relative``, srun ``--wait``, ...)."""
    return parse_int(text, prog, opt, False)


def positive(opt: str) -> Callable[[str, str], int]:
    """A parser for a positive count named ``opt`` in messages."""
    return partial(positive_int, opt=opt)


def nonneg(opt: str) -> Callable[[str, str], int]:
    """A parser for a non-negative number named ``opt`` in messages."""
    return partial(nonneg_int, opt=opt)


def node_count(text: str, prog: str) -> tuple[int, int]:
    """``-N``: ``N`` or ``MIN-MAX`` (``k``/``m`` multiply by 1024/1024²) -> (min, max)."""

    def one(part: str) -> int:
        value, rest, converted = _strtol(part)
        if not converted:
            value, rest = -1, part
        else:
            for suffix, scale in (("k", 1024), ("m", 1024 * 1024)):
                if rest[:1].lower() == suffix:
                    value, rest = value * scale, rest[1:]
        if rest.strip():
            raise _err(prog, f'"{part}" is not a valid node count')
        return value

    if "-" in text:
        low, _, high = text.partition("-")
        lo = one(low)
        lo = 1 if lo < 0 else lo
        hi = one(high)
    else:
        lo = hi = one(text)
        if lo < 0:
            raise _err(prog, f'"{text}" is not a valid node count')
    if hi != 0 and hi < lo:
        raise _err(prog, f"Maximum node count {hi} is less than minimum node count {lo}")
    return lo, hi


def nice(text: str, prog: str) -> int:
    """``--nice[=adjustment]``: any text reads as a number (garbage is 0); 100 without a value."""
    value = _atoi(text)
    if abs(value) > NICE_LIMIT:
        raise _err(prog, f"Invalid --nice value, out of range (+/- {NICE_LIMIT})")
    return value


def priority(text: str, prog: str) -> int:
    """``--priority``: a number 0..NO_VAL-1, or ``TOP`` (NO_VAL - 1). NO_VAL is jobids.py's
    (the one copy of Slurm's constant; loaded only when --priority is given)."""
    from ..jobids import NO_VAL

    if text.lower() == "top":
        return NO_VAL - 1
    value = _atoi(text)
    if value < 0:
        raise _err(prog, "Priority must be >= 0")
    if value >= NO_VAL:
        raise _err(prog, f"Priority must be < {NO_VAL}")
    return value


def wait_all_nodes(text: str, prog: str) -> int:
    """``--wait-all-nodes``: 0 or 1."""
    value = nonneg_int(text, prog, "--wait-all-nodes")
    if value > 1:
        raise _err(prog, "Invalid --wait-all-nodes specification")
    return value


# --- durations ------------------------------------------------------------------------------------


def _valid_timespec(text: str) -> bool:
    """Slurm's shape check: digits, at most one '-' (before any ':'), at most two ':'."""
    digits = dashes = colons = 0
    in_digit = False
    for ch in text:
        if ch.isdigit() and ch.isascii():
            if not in_digit:
                digits += 1
                in_digit = True
            continue
        in_digit = False
        if ch == "-":
            dashes += 1
            if colons:
                return False
        elif ch == ":":
            colons += 1
        else:
            return False
    if not digits or dashes > 1 or colons > 2:
        return False
    need = {1: 3, 2: 4} if dashes else {1: 2, 2: 3}
    return digits >= need.get(colons, 0)


def time_seconds(text: str) -> int | None:
    """Slurm's time_str2secs: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S -> seconds; INFINITE for
    -1/INFINITE/UNLIMITED; None when malformed."""
    if not text:
        return None
    if text.lower() in ("-1", "infinite", "unlimited"):
        return INFINITE
    if not _valid_timespec(text):
        return None
    fields = [_digits_value(f) for f in re.split(r"[-:]", text)]
    if "-" in text:
        if text.startswith("-"):
            return None  # a negative day count; Slurm would compute a negative limit
        days, hours, mins, secs = (fields + [0, 0, 0])[:4]
    elif len(fields) == 3:
        days, (hours, mins, secs) = 0, fields
    else:
        days, hours, (mins, secs) = 0, 0, (fields + [0])[:2]
    return ((days * 24 + hours) * 60 + mins) * 60 + secs


def time_minutes(text: str) -> int | None:
    """Slurm's time_str2mins: like time_seconds, rounded up to whole minutes."""
    secs = time_seconds(text)
    if secs is None or secs == INFINITE:
        return secs
    return (secs + 59) // 60


def time_limit(text: str, prog: str, opt: str = "--time") -> int:
    """``--time``/``--time-min`` in minutes; INFINITE for UNLIMITED and for 0."""
    mins = time_minutes(text)
    if mins is None:
        raise _err(prog, f"Invalid {opt} specification")
    return INFINITE if mins == 0 else mins


def delay_seconds(text: str, prog: str, opt: str = "--delay-boot") -> int:
    """A duration in seconds (``--delay-boot``)."""
    secs = time_seconds(text)
    if secs is None:
        raise _err(prog, f"Invalid {opt} specification")
    return secs


# --- memory ---------------------------------------------------------------------------------------

_MEM_SCALE = {"": 1, "k": None, "m": 1, "g": 1024, "t": 1024 * 1024}


def memory_mb(text: str) -> int | None:
    """Slurm's str_to_mbytes: a whole number, MB by default, K/M/G/T suffix (optionally + B)."""
    value, rest, converted = _strtol(text)
    if not converted or value < 0:
        return None
    unit, tail = rest[:1].lower(), rest[1:]
    if unit not in _MEM_SCALE or tail not in ("", "b", "B"):
        return None
    if unit == "k":
        return (value + 1023) // 1024
    return value * _MEM_SCALE[unit]


def mem_mb(text: str, prog: str, opt: str = "--mem") -> int:
    """``--mem``, ``--mem-per-cpu``, ``--mem-per-gpu``, ``--tmp`` in MB."""
    mb = memory_mb(text)
    if mb is None:
        raise _err(prog, f"Invalid {opt} specification")
    return mb


def memory(opt: str) -> Callable[[str, str], int]:
    return partial(mem_mb, opt=opt)


# --- job arrays -----------------------------------------------------------------------------------


def array_spec(text: str, prog: str, max_size: int | None = None) -> tuple[list[int], int | None] | None:
    """``--array``: ``a``, ``a-b``, ``a-b:step`` tokens joined by ``,``, optional ``%max_running``
    (read by ``jobids.array_indices``).

    Returns (sorted unique indices, throttle or None); None for an empty value (no array). Indices
    must be below MaxArraySize (``max_size``); a step must be in 1..max_size-1.
    """
    if text == "":
        return None
    from ..jobids import JobIdError, array_indices

    try:
        return array_indices(text, max_size or _site["max_array_size"])
    except JobIdError:
        raise submit_failed(prog, "Invalid job array specification") from None


# --- dependencies ---------------------------------------------------------------------------------

DEPENDENCY_KINDS = ("after", "afterany", "afterburstbuffer", "aftercorr", "afternotok", "afterok")


Dependency = namedtuple("Dependency", ['op', 'terms'])
Dependency.__doc__ = """``--dependency``: ``op`` is "and" (``,``) or "or" (``?``); ``terms`` lists (kind, job ids).

    Job ids are strings ``JOB``, ``JOB_TASK`` or ``JOB_*``, followed by ``+MINUTES`` when a delay was
    given (``after:12+5``); ``singleton`` has no ids; a bare id list means ``afterany``.
    """
# Dependency.op: str
# Dependency.terms: list[tuple[str, list[str]]]


_DEP_ID = re.compile(r"^(\d+)(?:_(\d+|\*))?(?:\+(\d+))?$", re.ASCII)


MAX_DEPENDENCY_TASKS = 1 << 16
"""The shim's cap on the job ids that ``JOB_[a-b]`` expressions of one --dependency expand to
(Slurm caps each at MaxArraySize; a 128 KB argument of brackets would otherwise name millions)."""


def _dep_tasks(spec: str, max_size: int) -> list[int] | None:
    """``1-3,7`` -> [1, 2, 3, 7] (sorted, unique); None when malformed or when a task is not below
    MaxArraySize (slurmctld fills a bitmap of that size and refuses what does not fit)."""
    spans: list[tuple[int, int]] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        hi = hi or lo
        if not _task_number(lo) or not _task_number(hi):
            return None
        first, last = _digits_value(lo), _digits_value(hi)
        if last < first or last >= max_size:
            return None
        spans.append((first, last))
    bits = bytearray(max(last for _, last in spans) + 1)
    for first, last in spans:
        bits[first:last + 1] = b"\1" * (last - first + 1)
    return list(itertools.compress(range(len(bits)), bits))


def _task_number(text: str) -> bool:
    return text.isdigit() and text.isascii() and len(text.lstrip("0")) <= 19


def _expand_array_dep(text: str, max_size: int = MAX_ARRAY_SIZE) -> str | None:
    """``afterok:12_[1-3]`` -> ``afterok:12_1:12_2:12_3``, as slurmctld's _xlate_array_dep does
    before parsing. None (a refused dependency) when a task list is malformed or reaches past
    MaxArraySize (``max_size``), or the expansion would exceed MAX_DEPENDENCY_TASKS ids.

    One left-to-right scan for ``_[`` (the job id is the run of digits just before it, the task
    list runs to the next ``]``), so the time is linear in the text plus the ids made."""
    if "_[" not in text:
        return text
    out: list[str] = []
    done = made = 0  # text[:done] is in out
    i = text.find("_[")
    while i >= 0:
        j = i
        while j > done and "0" <= text[j - 1] <= "9":
            j -= 1
        close = text.find("]", i + 2)
        if j == i or close < 0:  # no job id before it, or no end: not an array expression
            i = text.find("_[", i + 2)
            continue
        tasks = _dep_tasks(text[i + 2:close], max_size)
        made += len(tasks) if tasks is not None else 0
        if tasks is None or made > MAX_DEPENDENCY_TASKS:
            return None
        job = text[j:i]
        out.append(text[done:j])
        out.append(":".join([f"{job}_{t}" for t in tasks]))
        done = close + 1
        i = text.find("_[", done)
    out.append(text[done:])
    return "".join(out)


def _is_zero(digits: str) -> bool:
    return not digits.strip("0")


def dependency(text: str, prog: str, max_array_size: int | None = None) -> Dependency | None:
    """``--dependency``: ``kind:id[:id...]`` terms joined by ``,`` (all) or ``?`` (any).

    An empty value or ``0`` clears dependencies (returns None). ``JOB_[a-b]`` task lists are
    expanded first; tasks must be below MaxArraySize (``max_array_size``).
    """
    if text in ("", "0"):
        return None
    bad = submit_failed(prog, "Job dependency problem")
    expanded = _expand_array_dep(text, max_array_size or _site["max_array_size"])
    if expanded is None:
        raise bad
    text = expanded
    op = "or" if "?" in text else "and"
    terms: list[tuple[str, list[str]]] = []
    for part in re.split(r"[,?]", text):
        if part.lower() == "singleton":
            terms.append(("singleton", []))
            continue
        if ":" not in part:
            m = _DEP_ID.match(part)
            if not m or m.group(3) or _is_zero(m.group(1)) or not _dep_id_fits(m):
                raise bad
            terms.append(("afterany", [part]))
            continue
        kind, _, ids = part.partition(":")
        kind = kind.lower()
        if kind not in DEPENDENCY_KINDS:
            raise bad
        id_list = ids.split(":")
        for dep_id in id_list:
            m = _DEP_ID.match(dep_id)
            if not m or _is_zero(m.group(1)) or (m.group(3) is not None and _is_zero(m.group(3))) \
                    or not _dep_id_fits(m):
                raise bad
        terms.append((kind, id_list))
    return Dependency(op, terms)


def _dep_id_fits(m: re.Match) -> bool:
    """Job id, task and delay are numbers a job can have (no 5,000-digit ids reach int())."""
    return all(len(g.lstrip("0")) <= 19 for g in m.groups() if g is not None)


# --- generic resources, GPUs, licenses ------------------------------------------------------------


Gres = namedtuple("Gres", ['name', 'type', 'count'])
# Gres.name: str
# Gres.type: str | None
# Gres.count: int


_SUFFIX_MULT = {
    "": 1, "k": 1024, "kib": 1024, "kb": 1000, "m": 1024**2, "mib": 1024**2, "mb": 1000**2,
    "g": 1024**3, "gib": 1024**3, "gb": 1000**3, "t": 1024**4, "tib": 1024**4, "tb": 1000**4,
    "p": 1024**5, "pib": 1024**5, "pb": 1000**5,
}
_GRES_COUNT = re.compile(r"^(\d+)([A-Za-z]*)$", re.ASCII)


def _gres_count(text: str) -> int | None:
    m = _GRES_COUNT.match(text)
    if not m or m.group(2).lower() not in _SUFFIX_MULT:
        return None
    return _digits_value(m.group(1)) * _SUFFIX_MULT[m.group(2).lower()]


def gres_spec(text: str, prog: str) -> list[Gres]:
    """``--gres``: ``name[:type][:count]`` comma list (``gres:``/``gres/`` prefixes allowed); the
    count defaults to 1 and takes k/m/g/t/p suffixes; zero counts are dropped; ``none`` is []."""
    if text.lower() == "none":
        return []
    bad = _err(prog, "Invalid generic resource (gres) specification", 1)
    out: list[Gres] = []
    for tok in text.split(","):
        for prefix in ("gres:", "gres/"):
            if tok.startswith(prefix):
                tok = tok[len(prefix):]
        if not tok:
            continue
        name, _, rest = tok.partition(":")
        if not name or any(ch.isspace() for ch in tok):
            raise bad
        gtype: str | None = None
        count: int | None = 1
        if rest:
            first, colon, second = rest.partition(":")
            if colon:
                if not first or not second:
                    raise bad
                gtype, count = first, _gres_count(second)
            elif _gres_count(first) is not None:
                count = _gres_count(first)
            else:
                gtype = first
        elif tok.endswith(":"):
            raise bad
        if count is None:
            raise bad
        if count:
            out.append(Gres(name, gtype, count))
    return out


def gpu_spec(text: str, prog: str) -> tuple[str | None, int]:
    """``--gpus``, ``--gpus-per-node/-task/-socket``: ``[type:]count`` -> (type, count)."""
    bad = _err(prog, "Invalid generic resource (gres) specification", 1)
    gtype, colon, count_text = text.rpartition(":")
    if not colon:
        gtype, count_text = "", text
    count = _gres_count(count_text)
    if count is None:
        if colon or not count_text:
            raise bad
        gtype, count = count_text, 1  # a bare type means one of it
    if (colon and not gtype) or ":" in gtype or "," in text or any(ch.isspace() for ch in text):
        raise bad
    return gtype or None, count


def licenses(text: str, prog: str) -> dict:
    """``-L name[@db][:count],...`` (``,``/``;``: all of them) or ``a|b`` (any one of them, where
    the release has it: releases.EITHER_LICENSE; the others refuse every ``|``).

    Returns ``{"op": "and"|"or", "items": [(name, count), ...]}``; counts default to 1; repeated
    names add up in an "and" list, and an "or" list keeps every alternative in its order."""
    from ..releases import EITHER_LICENSE, current

    bad = submit_failed(prog, "Invalid license specification")
    has_or, has_and = "|" in text, ("," in text or ";" in text)
    if has_or and (has_and or not current().has(EITHER_LICENSE)):
        raise bad
    items: dict[str, int] = {}
    alternatives: list[tuple[str, int]] = []
    for tok in re.split(r"[,;|]", text):
        if not tok:
            continue
        name, colon, count_text = tok.partition(":")
        count = 1
        if colon:
            count, rest, _ = _strtol(count_text)
            if rest:
                raise bad
        if not name or count < 0 or any(ch.isspace() for ch in tok):
            raise bad
        items[name] = items.get(name, 0) + count
        alternatives.append((name, count))
    if not items:
        raise bad
    return {"op": "or", "items": alternatives} if has_or else {"op": "and", "items": list(items.items())}


def either_license(alternatives: list[tuple[str, int]], free: dict[str, int | None]) -> tuple[str, int]:
    """The one license of ``-L a:1|b:2`` a job asks Grid Engine for (it has no "any one of"): the
    first alternative with at least its count of seats free now (``free``: name -> free seats,
    None or absent where Grid Engine did not say), else the first."""
    for name, count in alternatives:
        seats = free.get(name)
        if seats is not None and seats >= count:
            return name, count
    return alternatives[0]


# --- notification, I/O, signals -------------------------------------------------------------------

MAIL_TYPES = (
    "ARRAY_TASKS", "BEGIN", "END", "FAIL", "INVALID_DEPEND", "REQUEUE", "STAGE_OUT",
    "TIME_LIMIT", "TIME_LIMIT_50", "TIME_LIMIT_80", "TIME_LIMIT_90",
)
_MAIL_ALL = frozenset({"BEGIN", "END", "FAIL", "INVALID_DEPEND", "REQUEUE", "STAGE_OUT"})


def mail_type(text: str, prog: str) -> frozenset[str]:
    """``--mail-type``: comma list of event names (ALL expanded); NONE is the empty set.

    Like Slurm, unknown words are skipped as long as one word is known."""
    events: set[str] = set()
    for tok in text.split(","):
        word = tok.upper()
        if word == "NONE":
            return frozenset()
        if word == "ALL":
            events |= _MAIL_ALL
        elif word in MAIL_TYPES:
            events.add(word)
    if not events:
        raise _err(prog, "Invalid --mail-type specification")
    return frozenset(events)


def open_mode(text: str, prog: str) -> str:
    """``--open-mode``: "append" or "truncate" (Slurm reads only the first letter)."""
    first = text[:1].lower()
    if first == "a":
        return "append"
    if first == "t":
        return "truncate"
    raise _err(prog, "Invalid --open-mode specification")


SIGNALS = {
    "HUP": 1, "INT": 2, "QUIT": 3, "ABRT": 6, "KILL": 9, "USR1": 10, "USR2": 12, "ALRM": 14,
    "TERM": 15, "CONT": 18, "STOP": 19, "TSTP": 20, "TTIN": 21, "TTOU": 22, "URG": 23, "XCPU": 24,
}
"""The signal names Slurm knows (Linux numbers)."""


def signal_number(text: str) -> int:
    """Slurm's sig_name2num: a number, or a name from SIGNALS with optional SIG prefix; 0 if bad."""
    value, rest, converted = _strtol(text)
    if converted:
        return value if not rest.strip() else 0
    name = text.lstrip()
    if name[:3].upper() == "SIG":
        name = name[3:]
    for sig, num in SIGNALS.items():
        if name[: len(sig)].upper() == sig and not name[len(sig):].strip():
            return num
    return 0


SignalSpec = namedtuple("SignalSpec", ['target', 'number', 'seconds'])
SignalSpec.__doc__ = """``--signal``: send signal ``number`` ``seconds`` before the time limit, to the batch shell
    only (``target`` "batch", from ``B:``) or to the whole job ("all"). ``R:`` (may overlap a
    reservation's end) is accepted and has no effect."""
# SignalSpec.target: str
# SignalSpec.number: int
# SignalSpec.seconds: int


def signal_spec(text: str, prog: str) -> SignalSpec:
    """``--signal=[{R|B}:]<sig_num|sig_name>[@sig_time]``; the time defaults to 60 seconds."""
    bad = _err(prog, "Invalid --signal specification")
    rest = text
    batch = False
    if rest[:1].upper() == "R":
        rest = rest[1:]
    if prog == "sbatch":  # B: exists for batch jobs only
        if rest[:1].upper() == "B":
            batch, rest = True, rest[1:]
        if rest[:1].upper() == "R":
            rest = rest[1:]
    if rest.startswith(":"):
        rest = rest[1:]
    sig_text, at, time_text = rest.partition("@")
    number = signal_number(sig_text)
    if not 1 <= number <= 0xFFFF:
        raise bad
    seconds = 60
    if at:
        seconds, tail, _ = _strtol(time_text)
        if tail or not 0 <= seconds <= 0xFFFF:
            raise bad
    return SignalSpec("batch" if batch else "all", number, seconds)


def kill_command(text: str, prog: str) -> int:
    """salloc ``-K``: the signal for the command when the allocation ends (TERM by default)."""
    number = signal_number(text)
    if not number:
        raise _err(prog, "Invalid --kill-command specification")
    return number


# --- points in time -------------------------------------------------------------------------------


def parse_time(text: str, now: datetime | None = None) -> datetime | None:
    """Slurm's parse_time looking forward (``timespec.parse_time(text, past=False)``), as a local
    ``datetime``; None when nothing was specified. Raises TimeSpecError when malformed, or when
    the time is past what a ``datetime`` holds (``timespec.as_datetime``)."""
    from ..timespec import as_datetime, parse_time as _parse

    return as_datetime(text, _parse(text, past=False, now=now.timestamp() if now is not None else None))


def point_in_time(text: str, prog: str, opt: str = "--begin", now: datetime | None = None) -> datetime:
    """``--begin``/``--deadline``: Slurm prints where parsing failed, then the option's error."""
    try:
        when = parse_time(text, now)
    except TimeSpecError as e:
        raise ShimError(
            f"Invalid time specification (pos={e.pos}): {text}", f"{prog}: error: Invalid {opt} specification",
            code=255,
        ) from None
    if when is None:
        raise _err(prog, f"Invalid {opt} specification")
    return when


def begin_time(text: str, prog: str) -> datetime:
    return point_in_time(text, prog, "--begin")


def deadline_time(text: str, prog: str) -> datetime:
    return point_in_time(text, prog, "--deadline")


# --- placement and sharing ------------------------------------------------------------------------

EXCLUSIVE_MODES = ("exclusive", "oversubscribe", "user", "mcs", "topo")


def exclusive(text: str, prog: str) -> str:
    """``--exclusive[={user|mcs|topo}]``: the sharing mode; "exclusive" without a value.

    ("oversubscribe" is accepted too and means the opposite: sharing allowed.)"""
    mode = text.lower()
    if mode not in EXCLUSIVE_MODES:
        raise _err(prog, "Invalid --exclusive specification")
    return mode


_DIST_NODE = ("block", "cyclic", "arbitrary", "hostfile")
_DIST_INNER = ("block", "cyclic", "fcyclic")


def distribution(text: str, prog: str) -> str:
    """``-m``: ``node[:socket[:core]][,Pack|NoPack]`` or ``plane=N``; returns it lower-cased with
    ``*`` resolved (node block, socket cyclic, core = socket)."""
    bad = _err(prog, "Invalid --distribution specification")
    low = text.lower()
    if low.startswith("plane"):
        size = low[5:]
        number = size[1:]
        if size == "" or (size.startswith("=") and number.isdigit() and number.isascii() and number.strip("0")):
            return low
        raise bad
    base, comma, flag = low.partition(",")
    if comma and flag not in ("pack", "nopack"):
        raise bad
    if base in ("pack", "nopack") and not comma:
        return base
    levels = base.split(":")
    if not base or len(levels) > 3 or "" in levels:
        raise bad
    defaults = ["block", "cyclic", None]
    resolved: list[str] = []
    for i, level in enumerate(levels):
        if level == "*":
            level = defaults[i] or resolved[1]
        allowed = _DIST_NODE if i == 0 and len(levels) == 1 else (_DIST_INNER if i else _DIST_NODE[:2])
        if level not in allowed:
            raise bad
        resolved.append(level)
    return ":".join(resolved) + (f",{flag}" if comma else "")


# --- small keyword options ------------------------------------------------------------------------


def yes_no(opt: str) -> Callable[[str, str], bool]:
    """A ``yes``/``no`` option such as ``--kill-on-invalid-dep``."""

    def parse(text: str, prog: str) -> bool:
        if text.lower() in ("yes", "no"):
            return text.lower() == "yes"
        raise _err(prog, f"Invalid {opt} specification")

    return parse


kill_on_invalid_dep = yes_no("--kill-on-invalid-dep")


def requeue_later(text: str) -> bool:
    """The values newer releases' ``--requeue[=expedite]`` takes (Slurm 25.11's arg_set_requeue:
    none, empty, or ``expedite`` in any case); 22.05's ``--requeue`` is a flag."""
    return text == "" or text.lower() == "expedite"


def pty_later(text: str) -> bool:
    """The values newer releases' ``--pty[=fd]`` takes (Slurm 23.02+: empty, the terminal on stdin
    as the bare flag; else a value starting with a digit, the descriptor ``atoi`` reads; any other
    is fatal there); 22.05's ``--pty`` is a flag."""
    return text == "" or "0" <= text[0] <= "9"


def requeue(text: str, prog: str) -> bool:
    """``--requeue`` with a value newer releases take: the job may be requeued, as with the bare
    flag (Grid Engine's ``-r y``; an expedited requeue is not Grid Engine's to give)."""
    return True


def pty(text: str, prog: str) -> bool:
    """``--pty`` with a value newer releases take: the terminal, as with the bare flag (srun's own
    standard input is the terminal the task gets; ``--pty=`` is ``--pty``)."""
    return True


def no_kill(text: str, prog: str) -> bool:
    """``-k[=off]``: True to keep the job on node failure (``set``), False for ``off``/``no``."""
    if text.lower() == "set":
        return True
    if text.lower() in ("off", "no"):
        return False
    raise _err(prog, "Invalid --no-kill specification")


GRES_FLAGS = ("disable-binding", "enforce-binding", "one-task-per-sharing", "multiple-tasks-per-sharing")


def gres_flags(text: str, prog: str) -> str:
    """``--gres-flags``: one of GRES_FLAGS."""
    if text.lower() not in GRES_FLAGS:
        raise _err(prog, "Invalid --gres-flags specification")
    return text.lower()


immediate = nonneg("immediate")
"""``-I[=seconds]`` (Slurm names it plainly "immediate" in its message)."""


_LEADING_NUMBER = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")  # what strtol reads (ASCII only)


def get_user_env(text: str, prog: str) -> str:
    """``--get-user-env[=timeout][mode]``: an optional timeout in seconds, then an optional mode,
    ``S`` or ``L`` in either case (Slurm reads the number as strtol does and looks only at the
    first character after it). Kept as given: the job wrapper loads the login environment either way."""
    m = _LEADING_NUMBER.match(text)
    rest = text[m.end():] if m else text
    if rest and rest[0] not in "sSlL":
        raise _err(prog, "Invalid --get-user-env specification")
    return text
