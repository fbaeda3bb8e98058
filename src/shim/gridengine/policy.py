"""Grid Engine's policies read in Slurm's terms: resource quota sets as association and QOS limits.

Pure functions over recorded text (the argv builders are in ``ops.py``):

- ``parse_scheduler_messages``: ``qstat -j`` with no job list, the scheduler's messages each with
  the jobs it concerns (one cheap call tells which jobs a quota holds);
- ``parse_quota_messages``: ``qstat -j <ids>``, which rule of which quota set holds each job;
- ``parse_quota_sets``: ``qconf -srqs``, the sets, their rules' filters and limits;
- ``quota_reason``: the Slurm pending reason of a rule, from its limited resource and its filter.

Grid Engine names the rule that holds a job only when the scheduler keeps job information
(``schedd_job_info true``, which ``slurm-shim cluster up`` sets); without it no job gets a quota
reason and squeue shows Resources/Priority as before.
"""

from __future__ import annotations

import re

from ..plain import factory, record

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any, Iterable

QUOTA_HEADING = "Jobs dropped because of exceeding limit in rule"
OCS_QUOTA_HEADING = "Jobs dropped because exceeds limit in rule"  # OCS 9.1's wording of the same
_QUOTA_MESSAGE = re.compile(r'cannot run because it exceeds limit "([^"]*)" in rule "([^"]*)"')


# --- qstat -j (no job list): the scheduler's messages ---------------------------------------------

def parse_scheduler_messages(text: str) -> dict[str, set[int]]:
    """``qstat -j``'s global answer: each message (a line at the margin) with the job numbers on
    the indented lines below it (``\\t7156,\\t7157``, wrapped over several lines for many jobs)."""
    out: dict[str, set[int]] = {}
    current: set[int] | None = None
    for line in text.splitlines():
        if not line.strip():
            current = None
            continue
        if line[0] not in " \t":
            current = out.setdefault(line.strip(), set())
            continue
        if current is None:
            continue
        for word in line.replace(",", " ").split():
            if word.isdigit():
                current.add(int(word))
    return out


def quota_held(text: str) -> set[int]:
    """The jobs the scheduler dropped because a quota rule was exhausted."""
    msgs = parse_scheduler_messages(text)
    return msgs.get(QUOTA_HEADING, set()) | msgs.get(OCS_QUOTA_HEADING, set())


# --- qstat -j <ids>: which rule holds each job ------------------------------------------------

@record(frozen=True)
class QuotaHold:
    job: int
    quota_set: str  # the resource quota set's name
    rule: str  # the rule: its number in the set (1, 2, ...) or its name
    limit: str  # Grid Engine's instance of the rule ("shimtester/////" for users {*})
    requested: tuple[str, ...] = ()  # the job's hard resource requests (complex names)


def parse_quota_messages(text: str) -> dict[int, QuotaHold]:
    """``qstat -j <ids>``'s plain text: for each job the scheduler holds for a quota, the first
    rule it names (``cannot run because it exceeds limit "..." in rule "set/rule"``)."""
    out: dict[int, QuotaHold] = {}
    job: int | None = None
    requested: tuple[str, ...] = ()
    for line in text.splitlines():
        if line.startswith("job_number:"):
            word = line.split(":", 1)[1].strip()
            job = int(word) if word.isdigit() else None
            requested = ()
            continue
        if job is None:
            continue
        if line.startswith(("hard resource_list:", "hard_resource_list:")):  # SGE 8.1.9's, OCS 9.1's
            items = line.split(":", 1)[1].strip().split(",")
            requested = tuple(x.split("=", 1)[0].strip() for x in items if x.strip())
            continue
        m = _QUOTA_MESSAGE.search(line)
        if m and job not in out:
            name, _, rule = m.group(2).partition("/")
            out[job] = QuotaHold(job, name, rule, m.group(1), requested)
    return out


# --- qconf -srqs: the sets --------------------------------------------------------------------

@record(frozen=True)
class Filter:
    values: tuple[str, ...]  # names as written (``*``, ``!bob``, ``@group``)
    each: bool  # ``{...}``: the limit applies to each one separately


@record(frozen=True)
class Rule:
    number: int
    name: str  # "" when the rule has none
    filters: dict[str, Filter]  # users, projects, pes, queues, hosts (departments are "projects" too)
    limits: tuple[tuple[str, str], ...]  # (complex, value) in the order written


@record(frozen=True)
class QuotaSet:
    name: str
    enabled: bool
    description: str = ""
    rules: tuple[Rule, ...] = factory(tuple)

    def rule(self, ref: str) -> Rule | None:
        """The rule ``ref`` names: its number or its name."""
        for r in self.rules:
            if ref == str(r.number) or (r.name and ref == r.name):
                return r
        return None


_FILTER_KEYS = ("users", "projects", "pes", "queues", "hosts")


def _filter(word: str) -> Filter:
    each = word.startswith("{") and word.endswith("}")
    inner = word[1:-1] if each else word
    return Filter(tuple(x.strip() for x in inner.split(",") if x.strip()), each)


def parse_rule(number: int, text: str) -> Rule:
    """One ``limit`` line's words after ``limit``: ``[name N] [users U] [projects P] ... to a=1,b=2``."""
    words = text.split()
    name = ""
    filters: dict[str, Filter] = {}
    limits: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w == "to":
            for item in " ".join(words[i + 1:]).split(","):
                key, _, value = item.strip().partition("=")
                if key:
                    limits.append((key.strip(), value.strip()))
            break
        if i + 1 < len(words):
            if w == "name":
                name = words[i + 1]
            elif w in _FILTER_KEYS:
                filters[w] = _filter(words[i + 1])
            i += 2
            continue
        i += 1
    return Rule(number, name, filters, tuple(limits))


def parse_quota_sets(text: str) -> dict[str, QuotaSet]:
    """``qconf -srqs``: every set by name. Long lines continued with ``\\`` are joined."""
    text = re.sub(r"\\\n\s*", " ", text)
    out: dict[str, QuotaSet] = {}
    for block in re.findall(r"\{(.*?)\n\s*\}", text, flags=re.S):
        name, enabled, description = "", True, ""
        rules: list[Rule] = []
        for line in block.splitlines():
            key, _, value = line.strip().partition(" ")
            value = value.strip()
            if key == "name":
                name = value
            elif key == "enabled":
                enabled = value.upper() == "TRUE"
            elif key == "description":
                description = value.strip('"')
            elif key == "limit":
                rules.append(parse_rule(len(rules) + 1, value))
        if name:
            out[name] = QuotaSet(name, enabled, description, tuple(rules))
    return out


# --- the Slurm reason -----------------------------------------------------------------------------

# (scope, kind) -> Slurm 22.05's reason (src/common/slurm_protocol_defs.c, job_reason_string).
# scope: "user" a limit for each user separately (users {...}), "assoc" a limit of accounts
# (projects or departments) or of named users together, "qos" a limit of everyone together.
REASONS: dict[tuple[str, str], str] = {
    ("user", "cpu"): "QOSMaxCpuPerUserLimit",
    ("user", "mem"): "QOSMaxMemoryPerUser",
    ("user", "gres"): "QOSMaxGRESPerUser",
    ("user", "license"): "QOSMaxLicensePerUser",
    ("user", "other"): "QOSMaxUnknownPerUser",
    ("assoc", "cpu"): "AssocGrpCpuLimit",
    ("assoc", "mem"): "AssocGrpMemLimit",
    ("assoc", "gres"): "AssocGrpGRES",
    ("assoc", "license"): "AssocGrpLicense",
    ("assoc", "other"): "AssocGrpUnknown",
    ("qos", "cpu"): "QOSGrpCpuLimit",
    ("qos", "mem"): "QOSGrpMemLimit",
    ("qos", "gres"): "QOSGrpGRES",
    ("qos", "license"): "QOSGrpLicense",
    ("qos", "other"): "QOSGrpUnknown",
}
MEMORY_COMPLEXES = frozenset({"mem_free", "h_vmem", "s_vmem", "virtual_free", "h_rss", "s_rss", "mem_used"})
UNKNOWN_RULE = "AssocGrpUnknown"  # a job a quota holds whose rule qconf no longer shows


def scope(rule: Rule) -> str:
    """Whose limit the rule is, in Slurm's terms: "user", "assoc" or "qos"."""
    if "projects" in rule.filters:
        return "assoc"
    users = rule.filters.get("users")
    if users is not None:
        if users.each:
            return "user"
        if any(v != "*" for v in users.values):
            return "assoc"
    return "qos"


def kind(complex_name: str, cfg: Any) -> str:
    """What a limited complex is for Slurm: cpu (slots), mem, gres, license or other."""
    if complex_name == "slots":
        return "cpu"
    memory = getattr(getattr(cfg, "memory", None), "complex", None)
    if complex_name == memory or complex_name in MEMORY_COMPLEXES:
        return "mem"
    for table, name in ((getattr(cfg, "gres", None) or {}, "gres"), (getattr(cfg, "licenses", None) or {}, "license")):
        if any(getattr(c, "complex", None) == complex_name for c in table.values()):
            return name
    return "other"


def limited(rule: Rule, requested: Iterable[str]) -> str:
    """The complex of the rule's limits that holds the job: one it requests (slots are always
    requested, so they come last), else the rule's first."""
    asked = set(requested)
    names = [k for k, _v in rule.limits]
    for name in names:
        if name != "slots" and name in asked:
            return name
    if "slots" in names:
        return "slots"
    return names[0] if names else "slots"


def quota_reason(hold: QuotaHold, sets: dict[str, QuotaSet], cfg: Any,
                 overrides: dict[str, str] | None = None) -> str:
    """The Slurm reason for a job this quota rule holds. The site's ``[reasons]`` map decides
    first (key ``set/rule``, by number or name, then ``set``); else ``REASONS``."""
    qs = sets.get(hold.quota_set)
    rule = qs.rule(hold.rule) if qs is not None else None
    if overrides:
        keys = [f"{hold.quota_set}/{hold.rule}"]
        if rule is not None:
            keys += [f"{hold.quota_set}/{rule.number}"] + ([f"{hold.quota_set}/{rule.name}"] if rule.name else [])
        keys.append(hold.quota_set)
        for k in keys:
            if k in overrides:
                return overrides[k]
    if rule is None:
        return UNKNOWN_RULE
    return REASONS[(scope(rule), kind(limited(rule, hold.requested), cfg))]


QUOTA_LOOKUPS = 200  # jobs per listing whose rule is looked up (one qstat -j for all of them)


def reasons_for(backend: Any, cfg: Any, candidates: Iterable[int]) -> dict[int, str]:
    """The Slurm reasons of the candidate jobs (waiting for Resources/Priority) that a quota
    holds. One ``qstat -j`` (the scheduler's messages); only if it names quota-held jobs among the
    candidates, one ``qstat -j <ids>`` and one ``qconf -srqs``. A reason is the listing's detail:
    if Grid Engine will not say, the jobs keep Resources/Priority and the listing goes on."""
    wanted = set(candidates)
    if not wanted:
        return {}
    try:
        return _reasons_for(backend, cfg, wanted)
    except Exception as e:  # noqa: BLE001 - an unanswered detail never fails squeue
        from ..proc import Timeout

        if isinstance(e, Timeout):
            raise
        return {}


def _reasons_for(backend: Any, cfg: Any, wanted: set[int]) -> dict[int, str]:
    from . import ops

    res = backend.call(ops.scheduler_messages())
    if res.returncode != 0:
        return {}
    held = sorted(quota_held(res.stdout) & wanted)[:QUOTA_LOOKUPS]
    if not held:
        return {}
    detail = backend.call(ops.detail_text(held))
    holds = parse_quota_messages(detail.stdout)
    if not holds:
        return {}
    rqs = backend.call(ops.quota_sets())
    sets = parse_quota_sets(rqs.stdout) if rqs.returncode == 0 else {}
    overrides = dict(getattr(cfg, "reasons", None) or {})
    return {job: quota_reason(h, sets, cfg, overrides) for job, h in holds.items() if job in held}


# --- priorities: qstat -pri -ext -urg -r -xml, qconf -ssconf -------------------------------------

@record
class JobPriority:
    """One pending job's priority as Grid Engine computed it (qstat -pri -ext -urg)."""

    job: int
    name: str
    owner: str
    state: str
    prio: float  # JAT_prio: weight_priority*nppri + weight_urgency*nurg + weight_ticket*ntix
    ntix: float  # normalized tickets (share tree, functional, override)
    nppri: float  # normalized POSIX priority (-p)
    nurg: float  # normalized urgency
    rrcontr: float = 0.0  # urgency from resource requests
    wtcontr: float = 0.0  # urgency from waiting time
    dlcontr: float = 0.0  # urgency from a deadline
    ppri: int = 0  # the POSIX priority, -1023..1024
    project: str = ""
    department: str = ""
    tickets: int = 0
    otickets: int = 0
    ftickets: int = 0
    stickets: int = 0
    queues: tuple[str, ...] = ()  # the hard queue request
    tasks: str = ""


def _num(text: str | None, default: float = 0.0) -> float:
    try:
        return float(text) if text not in (None, "") else default
    except ValueError:
        return default


def parse_priorities(xml: str | bytes) -> list[JobPriority]:
    """``qstat -u '*' -pri -ext -urg -r -s p -xml``: each pending job (or pending task range) with
    the figures its priority is made of, in qstat's order."""
    import xml.etree.ElementTree as ET

    if isinstance(xml, str):
        xml = xml.encode("utf-8", "replace")
    root = ET.fromstring(xml)
    out: list[JobPriority] = []
    for el in root.iter("job_list"):
        def t(tag: str) -> str:
            e = el.find(tag)
            return (e.text or "") if e is not None else ""

        number = t("JB_job_number")
        if not number.isdigit():
            continue
        out.append(JobPriority(
            job=int(number), name=t("JB_name"), owner=t("JB_owner"), state=t("state"),
            prio=_num(t("JAT_prio")), ntix=_num(t("JAT_ntix")), nppri=_num(t("JB_nppri")),
            nurg=_num(t("JB_nurg")), rrcontr=_num(t("JB_rrcontr")), wtcontr=_num(t("JB_wtcontr")),
            dlcontr=_num(t("JB_dlcontr")), ppri=int(_num(t("JB_priority"))), project=t("JB_project"),
            department=t("JB_department"), tickets=int(_num(t("tickets"))), otickets=int(_num(t("otickets"))),
            ftickets=int(_num(t("ftickets"))), stickets=int(_num(t("stickets"))),
            queues=tuple(e.text or "" for e in el.iter("hard_req_queue")), tasks=t("tasks")))
    return out


def parse_scheduler_config(text: str) -> dict[str, str]:
    """``qconf -ssconf``: key -> value (``weight_ticket 0.500000``, ...)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key and not key.startswith("#"):
            out[key] = value.strip()
    return out


# --- the share tree: qconf -sstree, sge_share_mon ------------------------------------------------

@record
class ShareNode:
    """One node of the share tree, with its live figures where sge_share_mon gave them."""

    path: str  # "/", "/teamA", "/teamA/alice"
    name: str
    shares: int
    user: str = ""  # a leaf's user (sge_share_mon's user_name)
    project: str = ""
    job_count: int = 0
    level: float = 0.0  # level%: the node's part of its parent's shares (0..1)
    total: float = 0.0  # total%: its part of the whole tree (0..1)
    actual: float = 0.0  # actual_share: its part of the tree's usage (0..1)
    usage: float = 0.0  # decayed usage (Grid Engine's usage_weight_list units)
    cpu: float = 0.0  # decayed cpu seconds
    ltcpu: float = 0.0  # long-term cpu seconds
    children: list[str] = factory(list)  # child paths

    @property
    def depth(self) -> int:
        return 0 if self.path == "/" else self.path.count("/")

    @property
    def parent(self) -> str:
        return "/" if self.depth <= 1 else self.path.rsplit("/", 1)[0]


def parse_share_tree(text: str) -> dict[str, ShareNode]:
    """``qconf -sstree``: the nodes (``id=``, ``name=``, ``type=``, ``shares=``, ``childnodes=``) by
    path, in depth-first order. Empty when there is no share tree."""
    raw: dict[int, dict[str, str]] = {}
    order: list[int] = []
    cur: dict[str, str] | None = None
    for line in text.splitlines():
        key, eq, value = line.strip().partition("=")
        if not eq:
            continue
        if key == "id":
            if not value.strip().isdigit():
                cur = None
                continue
            cur = raw.setdefault(int(value), {})
            order.append(int(value))
        elif cur is not None:
            cur[key] = value.strip()
    if not order:
        return {}
    out: dict[str, ShareNode] = {}

    def walk(nid: int, path: str, seen: frozenset[int]) -> None:
        node = raw.get(nid)
        if node is None or nid in seen:
            return
        out[path] = ShareNode(path, node.get("name", ""), int(_num(node.get("shares"))))
        kids = [int(x) for x in node.get("childnodes", "NONE").split(",") if x.strip().isdigit()]
        for k in kids:
            child = raw.get(k)
            if child is None:
                continue
            cpath = ("" if path == "/" else path) + "/" + child.get("name", str(k))
            out[path].children.append(cpath)
            walk(k, cpath, seen | {nid})

    walk(order[0], "/", frozenset())
    return out


def parse_share_monitor(text: str) -> list[dict[str, str]]:
    """``sge_share_mon -c 1 -h``: one dict per node (tab-separated, a header line first)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    header = [h for h in lines[0].split("\t")]
    out = []
    for ln in lines[1:]:
        cells = ln.split("\t")
        if len(cells) < len([h for h in header if h]):
            continue
        out.append({h: c for h, c in zip(header, cells) if h})
    return out


def share_nodes(tree_text: str, monitor_text: str = "") -> dict[str, ShareNode]:
    """The share tree with the monitor's live figures joined by path."""
    nodes = parse_share_tree(tree_text)
    for row in parse_share_monitor(monitor_text):
        n = nodes.get(row.get("node_name", ""))
        if n is None:
            continue
        n.user = row.get("user_name", "")
        n.project = row.get("project_name", "")
        n.job_count = int(_num(row.get("job_count")))
        n.level, n.total = _num(row.get("level%")), _num(row.get("total%"))
        n.actual, n.usage = _num(row.get("actual_share")), _num(row.get("usage"))
        n.cpu, n.ltcpu = _num(row.get("cpu")), _num(row.get("ltcpu"))
    return nodes


# --- projects, usersets --------------------------------------------------------------------------

def parse_keyvalues(text: str) -> dict[str, str]:
    """``qconf -sprj``/``-su``: ``key value`` lines, lines continued with ``\\`` joined."""
    text = re.sub(r"\\\n\s*", "", text)
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key:
            out[key] = value.strip()
    return out


def names(value: str | None) -> list[str]:
    """A Grid Engine list value (``a,b`` or ``a b``; ``NONE`` for none)."""
    if not value or value.strip().upper() == "NONE":
        return []
    return [x for x in re.split(r"[,\s]+", value.strip()) if x]
