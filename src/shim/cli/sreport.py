"""``sreport``: the bill per account and user, from Grid Engine's accounting.

``cluster AccountUtilizationByUser``, ``cluster UserUtilizationByAccount`` and ``user TopUsage``
with ``start=``/``end=`` (Slurm's time forms; default yesterday 00:00 to today 00:00, rounded to
the hour as Slurm rounds), ``accounts=``, ``users=``, ``format=``, ``TopCount=``; ``-t`` seconds,
minutes, hours, percent and the /percentage forms; ``-n``, ``-p``, ``-P``.

Usage is CPU time allocated within the window: for every job sacct knows (Grid Engine's
accounting file, the shim's records, running jobs), its allocated CPUs times the part of its run
inside [start, end) -- the same rows ``sacct -X -o Account,CPUTimeRAW`` shows, so for jobs that
ran wholly inside the window the totals agree. A job without an account is billed to ``(none)``.
Percentages are of the cluster's CPU capacity over the window (the slots of every execution host,
from one ``qhost``), as Slurm's are of the cluster's reported time.
"""

from __future__ import annotations

import sys
import time

from ..operations import policies
from .. import siteconf
from ..errors import ShimError
from ..slurm.options.getopt import Table
from ..slurm.options.spec import Arity, OptionSpec
from . import common
from ..slurm.render import report
from ..slurm.render import sreport as view

PROG = "sreport"
N, R = Arity.NONE, Arity.REQUIRED


_o = common.own_options(PROG, N)


# sreport.c's long_options, in its order, then the short-only -t
OPTIONS: tuple[OptionSpec, ...] = (
    _o("all_clusters", "a", help="accepted: one cluster"),
    _o("cluster", "M", R, help="accepted: one cluster"),
    _o("federation", None, help="accepted: one cluster"),
    _o("help", "h", help="show this help"),
    _o("immediate", "i", help="accepted"),
    _o("local", None, help="accepted: one cluster"),
    _o("noheader", "n", help="no banner and no header"),
    _o("parsable", "p", help="'|' after every field"),
    _o("parsable2", "P", help="'|' between fields"),
    _o("quiet", "Q", help="no messages"),
    _o("sort", "s", R, help="accepted (usage order)"),
    _o("tres", "T", R, help="only cpu is reported"),
    _o("usage", None, dest="help", help="the same as --help"),
    _o("verbose", "v", count=True, help="verbosity"),
    _o("version", "V", help="print the version"),
    _o("time-format", "t", R, dest="time_format",
       help="seconds, minutes (default), hours, percent, secper, minper, hourper"),
)
TABLE = Table(PROG, OPTIONS, error_code=1)


def help_text() -> str:
    return report.help_text(PROG, OPTIONS, "CPU time per account and user from Grid Engine's accounting: "
                            "cluster AccountUtilizationByUser, cluster UserUtilizationByAccount, user TopUsage.",
                            usage="[OPTIONS] cluster|user REPORT [start=...] [end=...] [format=...]")


def error(*lines: str) -> ShimError:
    return ShimError(*lines, code=1)


CONDITIONS = (("accounts", 2, "accounts"), ("acct", 4, "accounts"), ("clusters", 1, "clusters"),
              ("end", 1, "end"), ("format", 1, "format"), ("start", 1, "start"), ("users", 1, "users"),
              ("topcount", 1, "topcount"), ("tree", 4, "tree"), ("group", 1, "group"),
              ("all_clusters", 1, "all_clusters"), ("withdeleted", 5, "withdeleted"))


def conditions(words: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for w in words:
        key, eq, value = w.partition("=")
        low = key.lower()
        for name, k, dest in CONDITIONS:
            if name.startswith(low) and len(low) >= k:
                if dest == "format" and "format" in out:
                    value = out["format"] + "," + value
                out[dest] = value if eq else "yes"
                break
        else:
            raise error(f" Unknown condition: {w}", "Use keyword set to modify value")
    return out


def main(argv: list[str]) -> int:
    o, words = common.command_line(TABLE, argv)
    if common.answered(o, help_text, version="slurm"):
        return 0
    fmt, words_t = "mins", "Minutes"
    if o.time_format:
        tf = view.time_format(o.time_format)
        if tf is None:
            raise error(f"unknown time format {o.time_format}")
        fmt, words_t = tf
    if not words:
        raise error(f"{PROG}: error: slurm-shim's sreport has no interactive mode: give a report, "
                    "e.g. sreport cluster AccountUtilizationByUser")
    kind = words[0].lower()
    if len(words) < 2 and (("cluster".startswith(kind) and len(kind) >= 2) or "user".startswith(kind)):
        raise error(f"too few arguments for keyword:{words[0]}")
    if "cluster".startswith(kind) and len(kind) >= 2:
        name = words[1].lower()
        if name[:1] == "a":
            report_name = "account_by_user"
        elif "userutilizationbyaccount"[:18].startswith(name[:18]) and len(name) >= 18 or name[:2] == "ua":
            report_name = "user_by_account"
        else:
            raise error(f"Not valid report {words[1]}", 'Valid cluster reports are, "AccountUtilizationByUser", '
                        '"UserUtilizationByAccount" (the ones slurm-shim\'s sreport makes)')
    elif "user".startswith(kind) and kind:
        if words[1][:1].lower() != "t":
            raise error(f"Not valid report {words[1]}", 'Valid user reports are, "Top"')
        report_name = "top"
    else:
        raise error(f"invalid keyword: {words[0]}")
    cond = conditions(words[2:])
    table = view.USER_FIELDS if report_name == "top" else view.CLUSTER_FIELDS
    default = {"account_by_user": view.ACCOUNT_BY_USER, "user_by_account": view.USER_BY_ACCOUNT,
               "top": view.TOP}[report_name]
    try:
        cols = view.fields(cond.get("format") or default, table)
    except view.FieldError as e:
        raise error(f" Unknown field '{e}'") from None
    now = time.time()
    try:
        start, end = policies.window(cond.get("start"), cond.get("end"), now)
    except ValueError as e:
        raise error(f"{PROG}: error: {e}") from None
    cfg = siteconf.get()
    from ..gridengine import backends

    backend = backends.get(cfg)
    used = policies.select_usage(
        policies.usage(cfg, start, end, now, backend),
        users={u for u in cond["users"].split(",") if u} if "users" in cond else None,
        accounts={a for a in cond["accounts"].split(",") if a} if "accounts" in cond else None)
    total = policies.capacity(backend, start, end) if fmt in ("percent",) + view.PERCENTS else 0.0
    top = 10
    if report_name == "top":
        try:
            top = int(cond.get("topcount", "10"))
        except ValueError:
            raise error(f"Invalid TopCount: {cond['topcount']}") from None
    rows = policies.utilization(used, report_name, top, group="group" in cond)
    if "%" not in (cond.get("format") or ""):
        view.size_usage(cols, max([r["Used"] for r in rows] + [0]), fmt)
    parsable = report.NO_ENDING if o.parsable2 else report.ENDING if o.parsable else 0
    if not o.noheader:
        sys.stdout.write(view.banner(view.title(report_name, top), start, end, fmt, words_t))
    sys.stdout.write(view.lines(cols, policies.report_rows(rows, cols, cfg.cluster.name), total, fmt,
                                parsable=parsable, header=not o.noheader))
    return 0
