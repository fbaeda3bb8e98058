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
from typing import Any

from .. import siteconf
from ..errors import ShimError
from ..options.getopt import Table
from ..options.spec import Arity, OptionSpec
from . import common
from ..render import report
from ..render import sreport as view

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


def rounded(ts: int) -> int:
    """slurmdb_report_set_start_end_time: a time given is rounded to the nearest hour."""
    lt = list(time.localtime(ts))
    sec, minute = lt[5], lt[4]
    if sec >= 30:
        minute += 1
    hour_up = minute >= 30
    base = time.mktime((lt[0], lt[1], lt[2], lt[3], 0, 0, 0, 0, -1))
    return int(base + (3600 if hour_up else 0))


def window(start_text: str | None, end_text: str | None, now: float) -> tuple[int, int]:
    from ..timespec import midnight, parse_time

    end = rounded(parse_time(end_text, now=now)) if end_text else midnight(now)
    if start_text:
        start = rounded(parse_time(start_text, now=now))
    else:
        lt = time.localtime(now)
        start = int(time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday - 1, 0, 0, 0, 0, 0, -1)))
    if end - start < 3600:
        end = start + 3600
    return start, end


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


NO_ACCOUNT = "(none)"  # jobs submitted without an account


def usage(cfg: Any, start: int, end: int, now: float, backend: Any = None) -> dict[tuple[str, str], float]:
    """(account, user) -> allocated CPU seconds within [start, end), from sacct's job rows."""
    from ..accounting.collect import collect
    from ..accounting.query import Selection

    qy = Selection()
    qy.now, qy.start, qy.end, qy.no_steps = now, start, end, True
    out: dict[tuple[str, str], float] = {}
    for job, _steps in collect(qy, cfg=cfg, backend=backend):
        if job is None or job.start is None:
            continue
        run_end = job.end if job.end is not None else now
        secs = max(0.0, min(run_end, end) - max(job.start, start)) * (job.ncpus or 1)
        if secs <= 0:
            continue
        key = (job.account or NO_ACCOUNT, job.user)
        out[key] = out.get(key, 0.0) + secs
    return out


def capacity(backend: Any, start: int, end: int) -> float:
    from ..backends.gridengine import nodes as ge_nodes

    try:
        return float(sum(ge_nodes.cpus(h) for h in ge_nodes.hosts(backend, []))) * (end - start)
    except (ShimError, OSError):
        return 0.0


def proper_name(user: str) -> str:
    import pwd

    try:
        gecos = pwd.getpwnam(user).pw_gecos
    except KeyError:
        return ""
    return gecos.split(",")[0]


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
        start, end = window(cond.get("start"), cond.get("end"), now)
    except ValueError as e:
        raise error(f"{PROG}: error: {e}") from None
    cfg = siteconf.get()
    from .. import backends

    backend = backends.get(cfg)
    used = usage(cfg, start, end, now, backend)
    if "users" in cond:
        wanted = {u for u in cond["users"].split(",") if u}
        used = {k: v for k, v in used.items() if k[1] in wanted}
    if "accounts" in cond:
        wanted = {a for a in cond["accounts"].split(",") if a}
        used = {k: v for k, v in used.items() if k[0] in wanted}
    total = capacity(backend, start, end) if fmt in ("percent",) + view.PERCENTS else 0.0
    cluster = cfg.cluster.name
    rows: list[dict[str, Any]] = []
    if report_name == "account_by_user":
        title = "Cluster/Account/User Utilization"
        rows.append({"Account": "root", "Login": None, "Used": sum(used.values())})
        for acct in sorted({a for a, _u in used}):
            rows.append({"Account": acct, "Login": None, "Used": sum(v for (a, _u), v in used.items() if a == acct)})
            for (a, u), v in sorted(used.items()):
                if a == acct:
                    rows.append({"Account": acct, "Login": u, "Used": v})
    elif report_name == "user_by_account":
        title = "Cluster/User/Account Utilization"
        for (a, u), v in sorted(used.items(), key=lambda kv: (-kv[1], kv[0][1], kv[0][0])):
            rows.append({"Account": a, "Login": u, "Used": v})
    else:
        try:
            top = int(cond.get("topcount", "10"))
        except ValueError:
            raise error(f"Invalid TopCount: {cond['topcount']}") from None
        title = f"Top {top} Users"
        if "group" in cond:
            per_user: dict[str, tuple[float, list[str]]] = {}
            for (a, u), v in used.items():
                t, accts = per_user.get(u, (0.0, []))
                per_user[u] = (t + v, sorted(set(accts + [a])))
            items = sorted(per_user.items(), key=lambda kv: (-kv[1][0], kv[0]))
            rows = [{"Account": ",".join(accts), "Login": u, "Used": t} for u, (t, accts) in items]
        else:
            rows = [{"Account": a, "Login": u, "Used": v}
                    for (a, u), v in sorted(used.items(), key=lambda kv: (-kv[1], kv[0][1], kv[0][0]))]
        rows = rows[:top]
    biggest = max([r["Used"] for r in rows] + [0])
    for c in cols:
        if c.name in ("Used", "Energy") and not any(x in (cond.get("format") or "") for x in ("%",)):
            c.len = view.usage_width(biggest if c.name == "Used" else 0, fmt)
    table_rows = []
    for r in rows:
        values = {"Cluster": cluster, "Account": r["Account"], "Login": r["Login"],
                  "Proper Name": proper_name(r["Login"]) if r["Login"] else None, "Used": r["Used"],
                  "Energy": 0, "TRES Name": "cpu"}
        table_rows.append([values.get(c.name) for c in cols])
    parsable = report.NO_ENDING if o.parsable2 else report.ENDING if o.parsable else 0
    if not o.noheader:
        sys.stdout.write(view.banner(title, start, end, fmt, words_t))
    sys.stdout.write(view.lines(cols, table_rows, total, fmt, parsable=parsable, header=not o.noheader))
    return 0
