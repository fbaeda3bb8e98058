"""Slurm's time-of-day grammar, as sacct -S/-E (and sbatch --begin) accept it.

Forms, case-insensitive, combinable the way Slurm combines them (a date part and a time part):

- ``now``, ``now+N``, ``now-N`` with an optional unit ``seconds`` (the default), ``minutes``,
  ``hours``, ``days``, ``weeks`` (singular accepted too): ``now-1hour``, ``now+30minutes``;
- ``today``, ``tomorrow``; ``midnight``, ``noon``, ``elevenses`` (11:00), ``fika`` (15:00),
  ``teatime`` (16:00);
- ``HH:MM[:SS]`` with an optional ``AM``/``PM``;
- ``MMDD[YY]``, ``MM/DD[/YY]``, ``MM.DD[.YY]``, each optionally followed by ``-HH:MM[:SS]``;
- ``YYYY-MM-DD[THH:MM[:SS]]``;
- ``uts<seconds>``: a Unix time stamp.

A time without a date means today when looking into the past (sacct), else the next such time.
A date without a year means this year, or last year if that would be in the future (past mode).
Bad text raises TimeSpecError carrying Slurm's message, ``Invalid time specification (pos=N): X``.
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

_WORDS = {  # word -> (hour, minute) or a date keyword
    "midnight": (0, 0),
    "noon": (12, 0),
    "elevenses": (11, 0),
    "fika": (15, 0),
    "teatime": (16, 0),
}


class TimeSpecError(ValueError):
    def __init__(self, text: str, pos: int):
        self.text = text
        self.pos = pos
        super().__init__(f"Invalid time specification (pos={pos}): {text}")


def _digit(s: str, i: int) -> bool:
    return i < len(s) and "0" <= s[i] <= "9"


def _delta(s: str, pos: int) -> tuple[int, int]:
    """The count and unit after a '+'/'-' at ``pos``: (seconds, index of the last char used)."""
    cnt = 0
    digits = 0
    i = pos + 1
    n = len(s)
    while i < n and s[i] != "\n":
        c = s[i]
        if c.isspace():
            i += 1
            continue
        low = s[i:].lower()
        for name, mult in _UNITS:
            if low.startswith(name):
                i += len(name)
                cnt *= mult
                if not digits:
                    raise TimeSpecError(s, i - 1)
                return cnt, i - 1
        if "0" <= c <= "9":
            cnt = cnt * 10 + (ord(c) - 48)
            digits += 1
            i += 1
            continue
        raise TimeSpecError(s, i - 1)
    if not digits:
        raise TimeSpecError(s, pos)
    return cnt, i - 1


def _clock(s: str, pos: int) -> tuple[int, int, int, int]:
    """HH:MM[:SS] [AM|PM] at ``pos``: (hour, minute, second, index of the last char used)."""
    i = pos

    def bad(at: int):
        raise TimeSpecError(s, at)

    if not _digit(s, i):
        bad(i)
    hr = ord(s[i]) - 48
    i += 1
    if i < len(s) and s[i] != ":":
        if not _digit(s, i):
            bad(i)
        hr = hr * 10 + ord(s[i]) - 48
        i += 1
    if hr > 23:
        bad(i - 2)
    if i >= len(s) or s[i] != ":":
        bad(i)
    i += 1
    if not _digit(s, i):
        bad(i)
    mn = ord(s[i]) - 48
    i += 1
    if not _digit(s, i):
        bad(i)
    mn = mn * 10 + ord(s[i]) - 48
    i += 1
    if mn > 59:
        bad(i - 2)
    sec = 0
    if i < len(s) and s[i] == ":":
        i += 1
        if not _digit(s, i):
            bad(i)
        sec = ord(s[i]) - 48
        i += 1
        if not _digit(s, i):
            bad(i)
        sec = sec * 10 + ord(s[i]) - 48
        i += 1
        if sec > 59:
            bad(i - 2)
    while i < len(s) and s[i].isspace():
        i += 1
    tail = s[i:i + 2].lower()
    if tail == "pm":
        hr += 12
        if hr > 23:
            if hr == 24:
                hr = 12
            else:
                bad(i)
        i += 2
    elif tail == "am":
        if hr > 11:
            if hr == 12:
                hr = 0
            else:
                bad(i)
        i += 2
    return hr, mn, sec, i - 1


def _date(s: str, pos: int) -> tuple[int, int, int | None, int]:
    """A date at ``pos``: (month 1-12, day, year or None, index of the last char used)."""
    i = pos
    n = len(s)

    def bad(at: int):
        raise TimeSpecError(s, at)

    if n >= i + 8 and s[i + 4:i + 5] == "-" and s[i + 7:i + 8] == "-":
        yr = 0
        for _ in range(4):
            if not _digit(s, i):
                bad(i)
            yr = yr * 10 + ord(s[i]) - 48
            i += 1
        i += 1  # the '-'
        if not _digit(s, i):
            bad(i)
        mon = ord(s[i]) - 48
        i += 1
        if _digit(s, i):
            mon = mon * 10 + ord(s[i]) - 48
            i += 1
        if not 1 <= mon <= 12:
            bad(i - 2)
        i += 1  # the '-'
        if not _digit(s, i):
            bad(i)
        day = ord(s[i]) - 48
        i += 1
        if _digit(s, i):
            day = day * 10 + ord(s[i]) - 48
            i += 1
        if not 1 <= day <= 31:
            bad(i - 2)
        return mon, day, yr, i - 1

    if not _digit(s, i):
        bad(i)
    mon = ord(s[i]) - 48
    i += 1
    if _digit(s, i):
        mon = mon * 10 + ord(s[i]) - 48
        i += 1
    if not 1 <= mon <= 12:
        bad(i - 2)
    if i < n and s[i] in "./":
        i += 1
    if not _digit(s, i):
        bad(i)
    day = ord(s[i]) - 48
    i += 1
    if _digit(s, i):
        day = day * 10 + ord(s[i]) - 48
        i += 1
    if not 1 <= day <= 31:
        bad(i - 2)
    if i < n and s[i] in "./":
        i += 1
    yr = None
    if _digit(s, i):
        y = ord(s[i]) - 48
        i += 1
        if not _digit(s, i):
            bad(i)
        y = y * 10 + ord(s[i]) - 48
        i += 1
        yr = 2000 + y if y else None
    return mon, day, yr, i - 1


def parse_time(text: str, past: bool = True, now: float | None = None) -> int:
    """Seconds since the epoch for a Slurm time specification (local time zone).

    ``past``: a bare time or date means the most recent one (sacct) rather than the next one.
    """
    s = text
    if s[:3].lower() == "uts":
        try:
            v = int(s[3:], 10)
        except ValueError:
            raise TimeSpecError(s, 0) from None
        if v < 1000000:
            raise TimeSpecError(s, 0)
        return v
    t_now = int(now if now is not None else _time.time())
    lt = _time.localtime(t_now)
    hour = minute = -1
    second = 0
    month = mday = -1
    year: int | None = -1
    pos = 0
    n = len(s)
    while pos < n and s[pos] != "\n":
        c = s[pos]
        if c in " \t-T":
            pos += 1
            continue
        low = s[pos:].lower()
        if low.startswith("today"):
            month, mday, year = lt.tm_mon, lt.tm_mday, lt.tm_year
            pos += 5
            continue
        if low.startswith("tomorrow"):
            tm = _time.localtime(t_now + 86400)
            month, mday, year = tm.tm_mon, tm.tm_mday, tm.tm_year
            pos += 8
            continue
        word = next((w for w in _WORDS if low.startswith(w)), None)
        if word:
            hour, minute = _WORDS[word]
            second = 0
            pos += len(word)
            continue
        if low.startswith("now"):
            delta = 0
            i = pos + 3
            while True:
                if i >= n or s[i] == "\n":
                    pos = i
                    break
                ch = s[i]
                if ch in "+-":
                    delta, last = _delta(s, i)
                    if ch == "-":
                        delta = -delta
                    pos = last + 1
                    break
                if ch in " \t":
                    i += 1
                    continue
                raise TimeSpecError(s, i)
            tm = _time.localtime(t_now + delta)
            month, mday, year = tm.tm_mon, tm.tm_mday, tm.tm_year
            hour, minute, second = tm.tm_hour, tm.tm_min, tm.tm_sec
            continue
        if not ("0" <= c <= "9"):
            raise TimeSpecError(s, pos)
        if s[pos + 1:pos + 2] == ":" or s[pos + 2:pos + 3] == ":":
            hour, minute, second, last = _clock(s, pos)
        else:
            month, mday, year, last = _date(s, pos)
        pos = last + 1

    if hour == -1 and month == -1:  # nothing given: Slurm's "time 0"
        return 0
    if hour == -1:
        hour, minute = 0, 0
    elif month == -1:
        if past or hour > lt.tm_hour or (hour == lt.tm_hour and minute > lt.tm_min):
            month, mday, year = lt.tm_mon, lt.tm_mday, lt.tm_year
        else:
            tm = _time.localtime(t_now + 86400)
            month, mday, year = tm.tm_mon, tm.tm_mday, tm.tm_year
    if year is None or year == -1:
        if past:
            year = lt.tm_year - 1 if month > lt.tm_mon else lt.tm_year
        elif (month, mday, hour, minute) > (lt.tm_mon, lt.tm_mday, lt.tm_hour, lt.tm_min):
            year = lt.tm_year
        else:
            year = lt.tm_year + 1
    try:
        return int(_time.mktime((year, month, mday, hour, minute, second, 0, 0, -1)))
    except (OverflowError, ValueError):
        raise TimeSpecError(s, pos) from None


def midnight(now: float | None = None) -> int:
    """00:00:00 of the current day, local time."""
    lt = _time.localtime(now if now is not None else _time.time())
    return int(_time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, 0, 0, 0, 0, 0, -1)))
