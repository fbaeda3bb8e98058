"""sreport's output: Slurm 22.05's report banner, fields and time printer. Reads nothing.

- src/sreport/cluster_reports.c: the AccountUtilizationByUser / UserUtilizationByAccount banner
  ("Cluster/Account/User Utilization START - END (N secs)", "Usage reported in CPU Minutes"),
  their fields (_setup_print_fields_list: Account 15, Cluster 9, Login 9, Proper Name 15, Used
  and Energy 10 or 18 with a percentage, TRES Name 14) and default lists;
- src/sreport/user_reports.c: TopUsage ("Top N Users ...", Account 15, default list);
- src/sreport/common.c: slurmdb_report_print_time (seconds, minutes and hours rounded with %.0f,
  percent of the total with two decimals, the /Percentage forms) and sreport_set_usage_col_width
  (Used widens by one column per decimal order above 10^8, +9 with a percentage);
- src/sreport/sreport.c: the -t names and their "Usage reported in" words.
"""

from __future__ import annotations

import time as _time

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Sequence

from .report import ENDING, NO_ENDING, Column

DASHES = "-" * 80

# -t: (accepted spelling, shortest prefix, key, "Usage reported in" words)
TIME_FORMATS = (("SecPer", 6, "secper", "Seconds/Percentage of Total"),
                ("MinPer", 6, "minper", "Minutes/Percentage of Total"),
                ("HourPer", 6, "hourper", "Hours/Percentage of Total"),
                ("Seconds", 1, "secs", "Seconds"), ("Minutes", 1, "mins", "Minutes"),
                ("Hours", 1, "hours", "Hours"), ("Percent", 1, "percent", "Percentage of Total"))
PERCENTS = ("secper", "minper", "hourper")


def time_format(text: str) -> tuple[str, str] | None:
    low = text.lower()
    for name, k, key, words in TIME_FORMATS:
        if name.lower().startswith(low) and len(low) >= k:
            return key, words
    return None


def time_text(value: float, total: float, fmt: str) -> str:
    total = total or 1
    pct = value / total * 100
    if fmt == "secs":
        return str(int(value))
    if fmt == "hours":
        return f"{value / 3600:.0f}"
    if fmt == "percent":
        return f"{pct:.2f}%"
    if fmt == "secper":
        return f"{int(value)}({pct:.2f}%)"
    if fmt == "minper":
        return f"{value / 60:.0f}({pct:.2f}%)"
    if fmt == "hourper":
        return f"{value / 3600:.0f}({pct:.2f}%)"
    return f"{value / 60:.0f}"


def usage_width(max_secs: float, fmt: str) -> int:
    """sreport_set_usage_col_width."""
    width, order = 8, 100000000
    while order < 100000000 * 100000000000000000 and max_secs >= order:
        width += 1
        order *= 10
    return width + (9 if fmt in PERCENTS else 0)


# report -> {field: (shortest prefix, header, width)}: the Used/Energy widths are set per report
CLUSTER_FIELDS = (("Accounts", 2, "Account", 15), ("Cluster", 2, "Cluster", 9), ("Login", 1, "Login", 9),
                  ("Proper", 2, "Proper Name", 15), ("TresName", 5, "TRES Name", 14), ("Used", 1, "Used", 10),
                  ("Energy", 1, "Energy", 10))
USER_FIELDS = (("Accounts", 1, "Account", 15), ("Cluster", 1, "Cluster", 9), ("Energy", 1, "Energy", 10),
               ("Login", 1, "Login", 9), ("Proper", 1, "Proper Name", 15), ("TresName", 5, "TRES Name", 14),
               ("Used", 1, "Used", 10))
ACCOUNT_BY_USER = "Cluster,Ac,Login,Proper,Used,Energy"
USER_BY_ACCOUNT = "Cluster,Login,Proper,Ac,Used,Energy"
TOP = "Cl,L,P,A,U,Energy"


class FieldError(ValueError):
    pass


def fields(spec: str, table: Sequence[tuple[str, int, str, int]]) -> list[Column]:
    out = []
    for item in [x for x in spec.split(",") if x]:
        name, _, width = item.partition("%")
        low = name.lower()
        for full, k, header, n in table:
            if full.lower().startswith(low) and len(low) >= k:
                w = int(width) if width.lstrip("-").isdigit() and int(width) else n
                out.append(Column(header, w, "time" if header in ("Used", "Energy") else "str"))
                break
        else:
            raise FieldError(item)
    return out


def size_usage(cols: list[Column], biggest: float, fmt: str) -> None:
    """sreport_set_usage_col_width: Used sized for the biggest usage shown, Energy for none."""
    for c in cols:
        if c.name in ("Used", "Energy"):
            c.len = usage_width(biggest if c.name == "Used" else 0, fmt)


def title(report: str, top: int = 10) -> str:
    """The banner's title of a report (cluster_reports.c, user_reports.c)."""
    return {"account_by_user": "Cluster/Account/User Utilization",
            "user_by_account": "Cluster/User/Account Utilization"}.get(report, f"Top {top} Users")


def stamp(ts: float) -> str:
    """slurm_make_time_str's default form."""
    return _time.strftime("%Y-%m-%dT%H:%M:%S", _time.localtime(ts))


def banner(title: str, start: int, end: int, fmt: str, words: str, tres: str = "CPU") -> str:
    usage = f"Usage reported in {words}" if fmt == "percent" else f"Usage reported in {tres} {words}"
    return (f"{DASHES}\n{title} {stamp(start)} - {stamp(end - 1)} ({end - start} secs)\n{usage}\n{DASHES}\n")


def cell(col: Column, value: Any, total: float, fmt: str, parsable: int, last: bool) -> str:
    if col.kind == "time":
        text = time_text(float(value or 0), total, fmt)
    else:
        text = "" if value is None else str(value)
    if parsable == NO_ENDING and last:
        return text
    if parsable:
        return text + "|"
    n = abs(col.len)
    if col.kind != "time":
        if value is None:
            text = " "
        elif len(text) > n:
            text = text[:n - 1] + "+"
    return (f"{text:<{n}.{n}}" if col.len < 0 else f"{text:>{n}.{n}}") + " "


def lines(cols: list[Column], rows: list[list[Any]], total: float, fmt: str, *, parsable: int = 0,
          header: bool = True) -> str:
    out = []
    if header:
        if parsable:
            out.append("|".join(c.name for c in cols) if parsable == NO_ENDING else "".join(c.name + "|" for c in cols))
        else:
            out.append("".join((f"{c.name:<{abs(c.len)}.{abs(c.len)}}" if c.len < 0 else
                                f"{c.name:>{abs(c.len)}.{abs(c.len)}}") + " " for c in cols))
            out.append("".join("-" * abs(c.len) + " " for c in cols))
    for r in rows:
        out.append("".join(cell(c, v, total, fmt, parsable, i == len(cols) - 1) for i, (c, v) in enumerate(zip(cols, r))))
    return "".join(x + "\n" for x in out)


__all__ = ["ENDING", "NO_ENDING"]
