"""What the policy commands show, gathered and computed from Grid Engine's policy objects (read by
gridengine.policy): render/{sacctmgr,sprio,sshare,sreport}.py format it and read
nothing; cli/ parses each command's options and words, calls these and prints.

- sacctmgr: projects, the share tree, users, managers, operators and resource quota sets as
  Slurm's accounts, associations, users and QOS (``gather_world``), and the rows of each entity
  for the conditions and columns asked (``assoc_rows``, ``account_rows``, ``user_rows``,
  ``qos_rows``);
- sprio: each pending job's tickets, urgency and POSIX priority as Slurm's weighted factors
  (``priority_rows``), the scheduler configuration's weights (``weights``), and -j/-u/-p's
  selection (``select_priorities``);
- sshare: the share tree, depth first, as fair-share associations (``shares``) and -u/-A/-U's
  selection (``select_shares``); which node is an account (``is_account``) and its name
  (``account_name``) are sacctmgr's rules too;
- sreport: the report window (``window``: Slurm's rounding to the hour), CPU time per account and
  user within it from sacct's job rows (``usage``, ``select_usage``), the cluster's capacity over
  it (``capacity``), and each report's rows (``utilization``, ``report_rows``).
"""

from __future__ import annotations

import time

from ..errors import ShimError
from ..plain import factory, record

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Iterable

    from ..slurm.render import sprio as sprio_view  # (imported where rows are made)
    from ..slurm.render import sshare as sshare_view


# --- the share tree: what sacctmgr and sshare read alike ----------------------------------------

def is_account(node: Any, projects: Iterable[str] = ()) -> bool:
    """Whether a share-tree node is a Slurm account: it has children, it is a project's node
    (sge_share_mon names a project and no user), or it is named as one of ``projects``; any other
    node is a user's leaf under its parent's account."""
    return bool(node.children) or (bool(node.project) and not node.user) or node.name in projects


def account_name(nodes: dict[str, Any], path: str) -> str:
    """The account a node is: the tree's root is Slurm's ``root``."""
    return "root" if path == "/" else nodes[path].name


# --- sacctmgr: projects, share tree, users and quotas as associations ---------------------------

@record
class Assoc:
    account: str
    user: str = ""
    parent: str = ""
    share: int | None = 1
    grp_tres: str = ""
    max_tres_pu: str = ""


@record
class World:
    cluster: str
    assocs: list[Assoc] = factory(list)
    accounts: dict[str, tuple[str, str]] = factory(dict)  # name -> (description, organization)
    users: dict[str, tuple[str, str]] = factory(dict)  # name -> (default account, admin level)
    qos: list[tuple[str, str, str]] = factory(list)  # (name, GrpTRES, MaxTRESPU)


def tres(limits: Iterable[tuple[str, str]], cfg: Any) -> str:
    """A quota rule's limits as Slurm's TRES list (``cpu=4,mem=8G,gres/gpu=1``)."""
    from ..gridengine import policy

    out = []
    for name, value in limits:
        k = policy.kind(name, cfg)
        key = {"cpu": "cpu", "mem": "mem", "gres": f"gres/{name}", "license": f"license/{name}"}.get(k, name)
        out.append(f"{key}={value}")
    return ",".join(out)


def gather_world(cfg: Any, backend: Any, need_users: bool = True) -> World:
    """sacctmgr's view of Grid Engine (cli/sacctmgr.py's docstring): the share tree, the projects
    with the users their access lists let in and the enabled quota rules naming them, the users
    with their default accounts and admin levels (only with ``need_users``), the quota sets as QOS."""
    from ..gridengine import policy

    w = World(cfg.cluster.name)
    nodes = backend.share_tree()
    sets = {k: v for k, v in backend.quota_sets().items() if v.enabled}
    projects = backend.projects()
    ge_users = backend.users() if need_users else []
    w.assocs.append(Assoc("root"))  # Share 1, as slurmdbd makes the cluster's root association
    w.accounts["root"] = ("default root account", "root")
    tree_parent: dict[str, str] = {}
    for path, n in nodes.items():
        if path == "/":
            continue
        parent = account_name(nodes, n.parent)
        if is_account(n, projects):
            w.assocs.append(Assoc(n.name, parent=parent, share=n.shares))
            w.accounts[n.name] = (n.name, parent)
        else:
            w.assocs.append(Assoc(parent, user=n.name, share=n.shares))
            tree_parent.setdefault(n.name, parent)
    if not any(a.account == "root" and a.user == "root" for a in w.assocs):
        # slurmdbd gives the user root an association under the root account when it adds the
        # cluster (every release): sacctmgr lists it second whatever else there is
        w.assocs.insert(1, Assoc("root", user="root"))
    memberships: dict[str, list[str]] = {}

    def members(listname: str) -> list[str]:
        if listname not in memberships:
            memberships[listname] = backend.userset_entries(listname) or []  # (none when Grid Engine would not say)
        return memberships[listname]

    for p in projects:
        conf = backend.project(p)
        acl, xacl = policy.names(conf.get("acl")), policy.names(conf.get("xacl"))
        grp, per_user = [], []
        for qs in sets.values():
            for r in qs.rules:
                f = r.filters.get("projects")
                if f is None or not (p in f.values or "*" in f.values):
                    continue
                users = r.filters.get("users")
                (per_user if users is not None and users.each else grp).append(tres(r.limits, cfg))
        if p not in w.accounts:
            w.assocs.append(Assoc(p, parent="root", grp_tres=",".join(grp), max_tres_pu=",".join(per_user)))
            w.accounts[p] = (p, "root")
        allowed = set(ge_users)
        if acl:
            allowed = {u for u in allowed if any(u in members(a) for a in acl)}
        allowed = {u for u in allowed if not any(u in members(a) for a in xacl)}
        for u in sorted(allowed):
            if not any(a.account == p and a.user == u for a in w.assocs):
                w.assocs.append(Assoc(p, user=u, share=1, max_tres_pu=",".join(per_user)))
    if need_users:
        managers = set(backend.managers())
        operators = set(backend.operators())
        for u in ge_users:
            default = tree_parent.get(u, "")
            admin = "Administrator" if u in managers else "Operator" if u in operators else "None"
            w.users[u] = (default, admin)
        for u in managers:
            w.users.setdefault(u, (tree_parent.get(u, ""), "Administrator"))
    w.qos.append(("normal", "", ""))
    for name, qs in sets.items():
        grp = [tres(r.limits, cfg) for r in qs.rules if "projects" not in r.filters and not (
            r.filters.get("users") and r.filters["users"].each)]
        per_user = [tres(r.limits, cfg) for r in qs.rules if "projects" not in r.filters and
                    r.filters.get("users") is not None and r.filters["users"].each]
        w.qos.append((name, ",".join(x for x in grp if x), ",".join(x for x in per_user if x)))
    return w


def assoc_rows(w: World, conds: dict[str, set[str]], cols: list) -> list[list[Any]]:
    out = []
    for a in w.assocs:
        if "users" in conds and a.user not in conds["users"]:
            continue
        if "accounts" in conds and a.account.lower() not in {x.lower() for x in conds["accounts"]}:
            continue
        if "clusters" in conds and w.cluster not in conds["clusters"]:
            continue
        if "parents" in conds and a.parent not in conds["parents"]:
            continue
        values = {"Cluster": w.cluster, "Account": a.account, "User": a.user, "Partition": "",
                  "Share": a.share, "Priority": None, "GrpJobs": None, "GrpTRES": a.grp_tres, "GrpSubmit": None,
                  "GrpWall": "", "GrpTRESMins": "", "MaxJobs": None, "MaxTRES": "", "MaxTRESPerNode": "",
                  "MaxSubmit": None, "MaxWall": "", "MaxTRESMins": "", "QOS": "normal", "Def QOS": "",
                  "GrpTRESRunMins": "", "ParentName": a.parent if not a.user else "", "MaxTRESPU": a.max_tres_pu,
                  "ID": None, "LFT": None, "RGT": None, "ParentID": None}
        out.append([values.get(c.name, "") for c in cols])
    return out


def account_rows(w: World, conds: dict[str, set[str]], cols: list) -> list[list[Any]]:
    out = []
    for name, (descr, org) in w.accounts.items():
        if "accounts" in conds and name.lower() not in {x.lower() for x in conds["accounts"]}:
            continue
        if "names" in conds and name not in conds["names"]:
            continue
        values = {"Account": name, "Descr": descr, "Org": org, "Coord Accounts": ""}
        out.append([values.get(c.name, "") for c in cols])
    return out


def user_rows(w: World, conds: dict[str, set[str]], cols: list) -> list[list[Any]]:
    out = []
    wanted = conds.get("users", set()) | conds.get("names", set())
    for name in sorted(w.users):
        if wanted and name not in wanted:
            continue
        default, admin = w.users[name]
        if "accounts" in conds and default not in conds["accounts"]:
            continue
        values = {"User": name, "Def Acct": default, "Admin": admin, "Def WCKey": "", "Coord Accounts": ""}
        out.append([values.get(c.name, "") for c in cols])
    return out


def qos_rows(w: World, conds: dict[str, set[str]], cols: list) -> list[list[Any]]:
    out = []
    for name, grp, per_user in w.qos:
        if "names" in conds and name not in conds["names"]:
            continue
        values = {"Name": name, "Priority": 0, "GraceTime": "00:00:00", "Preempt": "", "PreemptExemptTime": "",
                  "PreemptMode": "cluster", "Flags": "", "UsageThres": "", "UsageFactor": "1.000000",
                  "GrpTRES": grp, "MaxTRESPU": per_user, "GrpJobs": None, "GrpSubmit": None, "MaxJobsPU": None,
                  "MaxSubmitPU": None, "MaxJobsPA": None, "MaxSubmitPA": None}
        out.append([values.get(c.name, "") for c in cols])
    return out


# --- sprio: tickets, urgency and POSIX priority as weighted factors -----------------------------

def weight(sconf: dict[str, str], key: str) -> float:
    """A weight of the scheduler configuration (qconf -ssconf); 0 when absent or not a number."""
    try:
        return float(sconf.get(key, "0"))
    except ValueError:
        return 0.0


def weights(sconf: dict[str, str]) -> sprio_view.Weights:
    """The weights of sprio's factors (its -w row and which columns the default layout has)."""
    from ..slurm.render import sprio as view

    scale = view.PRIO_SCALE
    urgency = round(weight(sconf, "weight_urgency") * scale)
    return view.Weights(age=urgency, jobsize=urgency, fairshare=round(weight(sconf, "weight_ticket") * scale),
                        qos=round(weight(sconf, "weight_priority") * scale))


def priority_rows(cfg: Any, jobs: list, sconf: dict[str, str]) -> list[sprio_view.Row]:
    """Grid Engine's figures (gridengine.policy.JobPriority) as Slurm's weighted factors
    (cli/sprio.py's docstring); held jobs and jobs in error are not shown."""
    from ..slurm.render import sprio as view

    scale = view.PRIO_SCALE
    from ..gridengine.qstat import QueueMap

    wt, wu, wp = weight(sconf, "weight_ticket"), weight(sconf, "weight_urgency"), weight(sconf, "weight_priority")
    qmap = QueueMap(cfg) if jobs else None
    out = []
    for j in jobs:
        if "h" in j.state or "E" in j.state:
            continue
        urgency = wu * j.nurg * scale
        total = j.rrcontr + j.wtcontr + j.dlcontr
        part = (lambda x: urgency * x / total) if total > 0 else (lambda x: 0.0)
        out.append(view.Row(
            job_id=j.job, partition=qmap.of_request(j.queues), user=j.owner, account=j.project,
            nice=-j.ppri, priority=round(j.prio * scale), site=part(j.dlcontr), age=part(j.wtcontr),
            fairshare=wt * j.ntix * scale, jobsize=part(j.rrcontr), qos_prio=wp * j.nppri * scale,
            cluster=cfg.cluster.name))
    return out


def select_priorities(rows: list[sprio_view.Row], job_ids: list[int] | None = None, users: set[str] | None = None,
                      partitions: set[str] | None = None) -> list[sprio_view.Row]:
    """-j, -u and -p: the rows of these jobs, users and partitions (None: any)."""
    if job_ids is not None:
        rows = [r for r in rows if r.job_id in set(job_ids)]
    if users is not None:
        rows = [r for r in rows if r.user in users]
    if partitions is not None:
        rows = [r for r in rows if r.partition in partitions]
    return rows


# --- sshare: the share tree as fair-share associations ------------------------------------------

def shares(nodes: dict, cluster: str) -> list[sshare_view.Share]:
    """The tree, depth first: each account, then its users, then its sub-accounts (cli/sshare.py's
    docstring has each figure's rule)."""
    from ..slurm.render import sshare as view

    out: list[view.Share] = []
    if not nodes:
        return out
    total_usage = nodes["/"].usage if "/" in nodes else 0.0

    def level_fs(path: str) -> float | None:
        n = nodes[path]
        sibs = [nodes[p] for p in nodes[n.parent].children] if path != "/" else [n]
        shares_sum = sum(s.shares for s in sibs) or 1
        usage_sum = sum(s.usage for s in sibs)
        part = n.usage / usage_sum if usage_sum else 0.0
        return (n.shares / shares_sum) / part if part else float("inf")

    def fs(n) -> float:
        norm = n.total or 0.0
        eff = n.actual or 0.0
        return 2 ** (-eff / norm) if norm > 0 else 0.0

    def is_user(path: str) -> bool:
        return path != "/" and not is_account(nodes[path])

    def visit(path: str, depth: int) -> None:
        n = nodes[path]
        name = account_name(nodes, path)
        out.append(view.Share(name, "", depth, n.shares if path != "/" else None,
                              n.total if path != "/" else None, n.usage, n.actual,
                              n.actual if total_usage else 0.0, None, level_fs(path) if path != "/" else None,
                              cluster))
        for c in n.children:
            if is_user(c):
                u = nodes[c]
                out.append(view.Share(name, u.user or u.name, depth, u.shares, u.total, u.usage, u.actual,
                                      u.actual, fs(u), level_fs(c), cluster))
        for c in n.children:
            if not is_user(c):
                visit(c, depth + 1)

    visit("/", 0)
    return out


def select_shares(rows: list[sshare_view.Share], users: set[str] | None = None, accounts: set[str] | None = None,
                  users_only: bool = False, partition: bool = False) -> list[sshare_view.Share]:
    """-u (None: every user; account rows stay), -A (lower-case names, None: every account), -U
    (user rows only); with -m each row's partition is empty (shares are not per queue)."""
    if users is not None:
        rows = [r for r in rows if not r.user or r.user in users]
    if accounts is not None:
        rows = [r for r in rows if r.account.lower() in accounts]
    if users_only:
        rows = [r for r in rows if r.user]
    if partition:
        for r in rows:
            r.partition = ""
    return rows


# --- sreport: CPU time per account and user within a window -------------------------------------

NO_ACCOUNT = "(none)"  # jobs submitted without an account


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
    """start=/end= in Slurm's time forms (timespec.parse_time), each rounded to the hour; by
    default yesterday 00:00 to today 00:00; at least an hour. ValueError for a time not read."""
    from ..slurm.timespec import midnight, parse_time

    end = rounded(parse_time(end_text, now=now)) if end_text else midnight(now)
    if start_text:
        start = rounded(parse_time(start_text, now=now))
    else:
        lt = time.localtime(now)
        start = int(time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday - 1, 0, 0, 0, 0, 0, -1)))
    if end - start < 3600:
        end = start + 3600
    return start, end


def usage(cfg: Any, start: int, end: int, now: float, backend: Any = None) -> dict[tuple[str, str], float]:
    """(account, user) -> allocated CPU seconds within [start, end), from sacct's job rows
    (accounting.collect: the accounting file, the shim's records, the live queue)."""
    from .accounting.collect import collect
    from .accounting.query import Selection

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


def select_usage(used: dict[tuple[str, str], float], users: set[str] | None = None,
                 accounts: set[str] | None = None) -> dict[tuple[str, str], float]:
    """users= and accounts=: the usage of these (None: any)."""
    if users is not None:
        used = {k: v for k, v in used.items() if k[1] in users}
    if accounts is not None:
        used = {k: v for k, v in used.items() if k[0] in accounts}
    return used


def capacity(backend: Any, start: int, end: int) -> float:
    """CPU seconds the cluster offers over [start, end): every execution host's CPUs (one qhost;
    gridengine.nodes.cpus, sinfo's rule); 0 when Grid Engine would not say."""
    from ..gridengine import nodes as ge_nodes

    try:
        return float(sum(ge_nodes.cpus(h) for h in ge_nodes.hosts(backend, []))) * (end - start)
    except (ShimError, OSError):
        return 0.0


def proper_name(user: str) -> str:
    """The user's full name: the first field of the passwd entry's GECOS."""
    import pwd

    try:
        gecos = pwd.getpwnam(user).pw_gecos
    except KeyError:
        return ""
    return gecos.split(",")[0]


def utilization(used: dict[tuple[str, str], float], report: str, top: int = 10,
                group: bool = False) -> list[dict[str, Any]]:
    """The rows (Account, Login: None for an account's total, Used) of one report:
    ``account_by_user`` (root's total, then each account's total and its users), ``user_by_account``
    (most used first) or ``top`` (the ``top`` biggest; with ``group`` one row per user, its accounts
    joined)."""
    rows: list[dict[str, Any]] = []
    if report == "account_by_user":
        rows.append({"Account": "root", "Login": None, "Used": sum(used.values())})
        for acct in sorted({a for a, _u in used}):
            rows.append({"Account": acct, "Login": None, "Used": sum(v for (a, _u), v in used.items() if a == acct)})
            for (a, u), v in sorted(used.items()):
                if a == acct:
                    rows.append({"Account": acct, "Login": u, "Used": v})
    elif report == "user_by_account":
        for (a, u), v in sorted(used.items(), key=lambda kv: (-kv[1], kv[0][1], kv[0][0])):
            rows.append({"Account": a, "Login": u, "Used": v})
    else:
        if group:
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
    return rows


def report_rows(rows: list[dict[str, Any]], cols: list, cluster: str) -> list[list[Any]]:
    """Each report row's value of each column (a user's Proper Name from the passwd entry)."""
    out = []
    for r in rows:
        values = {"Cluster": cluster, "Account": r["Account"], "Login": r["Login"],
                  "Proper Name": proper_name(r["Login"]) if r["Login"] else None, "Used": r["Used"],
                  "Energy": 0, "TRES Name": "cpu"}
        out.append([values.get(c.name) for c in cols])
    return out
