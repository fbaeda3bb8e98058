"""Slurm's grammar for points in time: the one parser behind sbatch/salloc/srun ``--begin`` and
``--deadline`` (through ``options.values.point_in_time``), sacct ``-S``/``-E`` and scontrol
``update StartTime=``.

It follows ``parse_time`` in Slurm's ``src/common/parse_time.c`` (22.05), with its helpers
``_get_delta``, ``_get_time`` and ``_get_date``. Forms, case-insensitive, combinable the way Slurm
combines them (a date part and a time part):

- ``now``, ``now+N``, ``now-N`` with an optional unit ``seconds`` (the default), ``minutes``,
  ``hours``, ``days``, ``weeks`` (singular accepted too): ``now-1hour``, ``now+30minutes``;
- ``today``, ``tomorrow``; ``midnight``, ``noon``, ``elevenses`` (11:00), ``fika`` (15:00),
  ``teatime`` (16:00);
- ``HH:MM[:SS]`` with an optional ``AM``/``PM``;
- ``MMDD[YY]``, ``MM/DD[/YY]``, ``MM.DD[.YY]``, each optionally followed by ``-HH:MM[:SS]``;
- ``YYYY-MM-DD[THH:MM[:SS]]``;
- ``uts<seconds>``: a Unix time stamp.

A time without a date means today when looking into the past (sacct), else the next such time.
A date without a year means this year, or last year if that would be in the future (past mode),
or the next such date (future mode). Bad text raises TimeSpecError, whose text is Slurm's message
``Invalid time specification (pos=N): X`` with the position where Slurm's parser stopped.

Slurm's quirks are kept, because the position is part of the message users see:

- after ``now``, Slurm adds the *absolute* index of the ``+``/``-`` (or of the end) to the
  position instead of the distance from ``now`` (``pos += i`` in parse_time), so ``now+1`` at the
  start of the text works and ``today now+1`` is refused (pos=15): the text after the ``+`` is
  looked for beyond the end;
- a unit without a count (``now+hours``) is refused at the ``+``, not at the unit;
- a two-digit year ``00`` is no year (``_get_date`` keeps the year it had);
- ``now+N`` far in the future is a valid answer as long as the C library can represent it
  (``now+9999999days`` is in the year 29405); only a time the C library cannot convert is refused,
  at the position where the parse ended (parse_time's ``slurm_mktime(...) == -1`` branch).
  Commands that need a ``datetime`` (sbatch's ``-a`` for Grid Engine) refuse what it cannot hold.

(``elevenses`` comes from newer Slurm releases; 22.05.8 does not know it. It is kept as before.)
"""

from __future__ import annotations

import time as _time

_UNITS = (
    ("seconds", 1), ("second", 1),
    ("minutes", 60), ("minute", 60),
    ("hours", 3600), ("hour", 3600),
    ("days", 86400), ("day", 86400),
    ("weeks", 604800), ("week", 604800),
)

_WORDS = (  # word -> hour (minute 0)
    ("midnight", 0), ("noon", 12), ("elevenses", 11), ("fika", 15), ("teatime", 16),
)

_DELTA_CAP = 10**15
"""A count beyond this is out of every range anyway; saturating keeps a long run of digits from
growing one huge number digit by digit (quadratic)."""

_LONG_MAX = 2**63 - 1


class TimeSpecError(ValueError):
    """A bad time specification: ``pos`` is where Slurm's parser stopped, ``text`` the whole text."""

    def __init__(self, text: str, pos: int):
        self.text = text
        self.pos = pos
        super().__init__(f"Invalid time specification (pos={pos}): {text}")


def _at(s: str, i: int) -> str:
    return s[i] if i < len(s) else "\0"


def _digit(s: str, i: int) -> bool:
    return i < len(s) and "0" <= s[i] <= "9"


def _delta(s: str, pos: int) -> tuple[int, int]:
    """Slurm's _get_delta: the count and unit after the '+'/'-' at ``pos``.

    Returns (index of the last char used, seconds)."""
    cnt = digits = 0
    off = pos + 1
    n = len(s)
    while off < n and s[off] != "\n":
        c = s[off]
        if c.isspace():
            off += 1
            continue
        if "0" <= c <= "9":  # (no unit starts with a digit, so this may be tested first)
            cnt = min(cnt * 10 + ord(c) - 48, _DELTA_CAP)
            digits += 1
            off += 1
            continue
        low = s[off:off + 7].lower()
        unit = next(((name, mult) for name, mult in _UNITS if low.startswith(name)), None)
        if unit is None:
            raise TimeSpecError(s, off - 1)
        off += len(unit[0])
        cnt *= unit[1]
        break
    if not digits:  # Slurm leaves the position at the sign
        raise TimeSpecError(s, pos)
    return off - 1, cnt


def _clock(s: str, pos: int) -> tuple[int, int, int, int]:
    """Slurm's _get_time: ``HH:MM[:SS] [AM|PM]`` at ``pos``.

    Returns (index of the last char used, hour, minute, second)."""
    off = pos
    if not _digit(s, off):
        raise TimeSpecError(s, off)
    hour = ord(s[off]) - 48
    off += 1
    if _at(s, off) != ":":
        if not _digit(s, off):
            raise TimeSpecError(s, off)
        hour = hour * 10 + ord(s[off]) - 48
        off += 1
    if hour > 23:
        raise TimeSpecError(s, off - 2)
    if _at(s, off) != ":":
        raise TimeSpecError(s, off)
    off += 1

    def two_digits(off: int) -> tuple[int, int]:  # a minute or second: (value, next index)
        for i in (off, off + 1):
            if not _digit(s, i):
                raise TimeSpecError(s, i)
        value = int(s[off:off + 2])
        if value > 59:
            raise TimeSpecError(s, off)
        return value, off + 2

    minute, off = two_digits(off)
    second = 0
    if _at(s, off) == ":":
        second, off = two_digits(off + 1)
    while off < len(s) and s[off].isspace():
        off += 1
    meridian = s[off:off + 2].lower()
    if meridian == "pm":
        hour += 12
        if hour > 23:
            if hour != 24:
                raise TimeSpecError(s, off)
            hour = 12
        off += 2
    elif meridian == "am":
        if hour > 11:
            if hour != 12:
                raise TimeSpecError(s, off)
            hour = 0
        off += 2
    return off - 1, hour, minute, second


def _date(s: str, pos: int) -> tuple[int, int, int, int | None]:
    """Slurm's _get_date: ``YYYY-MM-DD``, ``MMDD[YY]``, ``MM/DD[/YY]``, ``MM.DD[.YY]`` at ``pos``.

    Returns (index of the last char used, month 1-12, day, year or None). Like Slurm, the month's
    first digit is not checked (a non-digit makes an out-of-range month or a one-digit one)."""
    off = pos
    year: int | None = None
    if len(s) >= off + 8 and s[off + 4] == "-" and s[off + 7] == "-":
        for _ in range(4):
            if not _digit(s, off):
                raise TimeSpecError(s, off)
            off += 1
        year = int(s[pos:pos + 4])
        off += 1  # the '-'

    def field(off: int, top: int) -> tuple[int, int]:  # one or two digits in 1..top: (value, next)
        value = ord(_at(s, off)) - 48
        off += 1
        if _digit(s, off):
            value = value * 10 + ord(s[off]) - 48
            off += 1
        if not 1 <= value <= top:
            raise TimeSpecError(s, off - 2)
        return value, off

    month, off = field(off, 12)
    if year is not None:
        off += 1  # the '-'
    elif _at(s, off) in "./":
        off += 1
    if not _digit(s, off):
        raise TimeSpecError(s, off)
    day, off = field(off, 31)
    if year is not None:
        return off - 1, month, day, year
    if _at(s, off) in "./":
        off += 1
    if _digit(s, off):
        if not _digit(s, off + 1):
            raise TimeSpecError(s, off + 1)
        yy = int(s[off:off + 2])
        off += 2
        year = 2000 + yy if yy else None  # "00" is no year
    return off - 1, month, day, year


def _uts(s: str) -> int:
    """``uts<seconds>``: strtol's reading of the rest, which must be all digits (after blanks and
    a sign) and at least 1000000."""
    rest = s[3:]
    body = rest.lstrip(" \t\n\v\f\r")
    sign = body[:1] if body[:1] in "+-" else ""
    digits = body[len(sign):]
    if not digits or not (digits.isascii() and digits.isdigit()):
        raise TimeSpecError(s, 0)
    value = int(digits) if len(digits) < 20 else _LONG_MAX
    value = -value if sign == "-" else value
    if value < 1000000 or value >= _LONG_MAX:
        raise TimeSpecError(s, 0)
    return value


def parse_time(text: str, past: bool = True, now: float | None = None) -> int:
    """Seconds since the epoch for a Slurm time specification (local time zone); 0 when the text
    names no time at all (empty, blanks, dashes: Slurm's "time 0").

    ``past``: a bare time or date means the most recent one (sacct) rather than the next one
    (``--begin``, ``StartTime``: Slurm's ``parse_time(text, 0)``).
    """
    s = text
    if s[:3].lower() == "uts":
        return _uts(s)
    t_now = int(now if now is not None else _time.time())
    lt = _time.localtime(t_now)
    hour = minute = month = mday = -1
    second = 0
    year: int | None = None
    pos = 0
    n = len(s)
    while pos < n and s[pos] != "\n":
        c = s[pos]
        if c in " \t-T":
            pos += 1
            continue
        low = s[pos:pos + 9].lower()  # enough for the longest word (the whole rest would be quadratic)
        if low.startswith("today") or low.startswith("tomorrow"):
            today = low.startswith("today")
            tm = lt if today else _time.localtime(t_now + 86400)
            month, mday, year = tm.tm_mon, tm.tm_mday, tm.tm_year
            pos += 5 if today else 8
            continue
        word = next(((w, h) for w, h in _WORDS if low.startswith(w)), None)
        if word:
            hour, minute, second = word[1], 0, 0
            pos += len(word[0])
            continue
        if low.startswith("now"):
            delta = 0
            i = pos + 3
            while True:
                ch = _at(s, i)
                if ch in "+-":
                    pos, delta = _delta(s, pos + i)  # (sic) Slurm adds the absolute index
                    delta = -delta if ch == "-" else delta
                    break
                if ch in " \t":
                    i += 1
                    continue
                if ch in "\0\n":
                    pos += i - 1
                    break
                raise TimeSpecError(s, pos + i)
            try:
                tm = _time.localtime(t_now + delta)
            except (OverflowError, OSError, ValueError):
                raise TimeSpecError(s, pos) from None
            month, mday, year = tm.tm_mon, tm.tm_mday, tm.tm_year
            hour, minute, second = tm.tm_hour, tm.tm_min, tm.tm_sec
            pos += 1
            continue
        if not "0" <= c <= "9":
            raise TimeSpecError(s, pos)
        if s[pos + 1:pos + 2] == ":" or s[pos + 2:pos + 3] == ":":
            pos, hour, minute, second = _clock(s, pos)
        else:
            pos, month, mday, got_year = _date(s, pos)
            if got_year is not None:
                year = got_year
        pos += 1

    if hour == -1 and month == -1:  # nothing given: Slurm's "time 0"
        return 0
    if hour == -1:
        hour, minute = 0, 0
    elif month == -1:
        if past or (hour, minute) > (lt.tm_hour, lt.tm_min):
            month, mday, year = lt.tm_mon, lt.tm_mday, lt.tm_year
        else:
            tm = _time.localtime(t_now + 86400)
            month, mday, year = tm.tm_mon, tm.tm_mday, tm.tm_year
    if year is None:
        if past:
            year = lt.tm_year - 1 if month > lt.tm_mon else lt.tm_year
        elif (month, mday, hour, minute) > (lt.tm_mon, lt.tm_mday, lt.tm_hour, lt.tm_min):
            year = lt.tm_year
        else:
            year = lt.tm_year + 1
    try:  # like mktime, a day past the end of the month rolls over into the next one
        return int(_time.mktime((year, month, mday, hour, minute, second, 0, 0, -1)))
    except (OverflowError, OSError, ValueError):
        raise TimeSpecError(s, pos) from None


def as_datetime(text: str, when: int):
    """``when`` (``parse_time(text)``'s answer) as a local ``datetime``; None for time 0.

    A time a ``datetime`` cannot hold (past the year 9999; Grid Engine's ``-a`` cannot express it
    either) raises TimeSpecError at the end of the text, where Slurm's parser stands when its
    mktime fails."""
    from datetime import datetime

    if not when:
        return None
    try:
        return datetime.fromtimestamp(when)
    except (OverflowError, OSError, ValueError):
        end = text.find("\n")
        raise TimeSpecError(text, len(text) if end < 0 else end) from None


def start_time(text: str, now: float | None = None):
    """scontrol ``update StartTime=`` (also ``EligibleTime``): the next such time as a local
    ``datetime``, never earlier than now; None when the text names no time (then Slurm changes
    nothing). Bad text raises TimeSpecError.

    As Slurm's scontrol (``src/scontrol/update_job.c``, ``scontrol_update_job``: ``parse_time(val,
    0)``, then a begin time in the past becomes now)."""
    t_now = int(now if now is not None else _time.time())
    when = parse_time(text, past=False, now=t_now)
    return as_datetime(text, max(when, t_now) if when else 0)


def midnight(now: float | None = None) -> int:
    """00:00:00 of the current day, local time."""
    lt = _time.localtime(now if now is not None else _time.time())
    return int(_time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1)))
