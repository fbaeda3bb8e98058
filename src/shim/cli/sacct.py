"""``sacct``: Slurm's accounting view of Grid Engine's finished, running and pending jobs.

Sources, merged per job (or array task):

1. Grid Engine's accounting file (``backends.qacct``): every job or task that ended, read directly
   and filtered while reading (``-f FILE`` or ``$SLURM_SHIM_ACCOUNTING`` name another file);
2. the shim's own records (``state``): what sbatch was asked (Slurm name, partition, account,
   comment, time limit, memory, array indices) and the job wrapper's end events (the script's
   real exit code and signal, TIMEOUT) and scancel's cancel events (who cancelled; a job cancelled
   while pending has no Grid Engine record at all);
3. the live queue (``shim.jobs``, one qstat call) for PENDING/RUNNING/SUSPENDED jobs, asked only
   when the selection can contain such jobs: not for -j of jobs that have ended (the file and the
   shim's records tell). A Grid Engine array that sbatch did not submit, or an id nothing here
   knows, is first asked about alone (``qstat -j``); the qstat is started before the file is read.

Output is made job by job as the rows are complete (only text is kept), then sorted by job id.
"""

from __future__ import annotations

import gc
import grp
import json
import os
import pwd
import re
import sys
import time
from typing import Any, Iterable

from .. import names as jobnames
from .. import siteconf
from ..backends import qacct
from ..errors import ShimError
from ..options.getopt import Table, getopt
from ..options.sources import Options, apply
from ..options.spec import Arity, OptionSpec
from ..render import sacct as view
from ..timespec import TimeSpecError, midnight, parse_time

PROG = "sacct"
N, R, O = Arity.NONE, Arity.REQUIRED, Arity.OPTIONAL


def _o(long: str, short: str | None = None, arity: Arity = R, dest: str = "", help: str = "",
       count: bool = False) -> OptionSpec:
    return OptionSpec(long, short, arity, commands=frozenset({PROG}), dest=dest, help=help, count=count)


OPTIONS: tuple[OptionSpec, ...] = (
    _o("allusers", "a", N, help="jobs of every user (root's default)"),
    _o("accounts", "A", help="comma-separated accounts to select"),
    _o("allocations", "X", N, help="job allocations only, no steps"),
    _o("brief", "b", N, help="fields JobID, State, ExitCode"),
    _o("batch-script", "B", N, help="print the batch script (not kept by Grid Engine)"),
    _o("completion", "c", N, help="completion data (the same data here)"),
    _o("constraints", "C", help="comma-separated constraints to select"),
    _o("delimiter", None, help="field separator for -p/-P (default '|')"),
    _o("duplicates", "D", N, help="also show earlier runs of requeued jobs"),
    _o("env-vars", None, N, help="print the job's environment (not kept)"),
    _o("federation", None, N, help="accepted; one cluster"),
    _o("helpformat", "e", N, help="list the field names"),
    _o("help-fields", None, N, dest="helpformat"),
    _o("endtime", "E", help="end of the time window"),
    _o("file", "f", help="read this Grid Engine accounting file"),
    _o("flags", "F", help="accepted, ignored"),
    _o("gid", None, dest="group"),
    _o("group", "g", help="comma-separated groups (names or gids) to select"),
    _o("help", "h", N, help="show this help"),
    _o("local", None, N, help="accepted; one cluster"),
    _o("name", None, help="comma-separated job names to select"),
    _o("nnodes", "i", help="jobs that ran on N nodes (min[-max])"),
    _o("ncpus", "I", help="jobs that ran on N CPUs (min[-max])"),
    _o("jobs", "j", help="comma-separated jobs (N, N_k, N.batch) to select"),
    _o("json", None, N, help="JSON output"),
    _o("timelimit-min", "k", help="jobs with at least this time limit"),
    _o("timelimit-max", "K", help="with -k: jobs with at most this time limit"),
    _o("long", "l", N, help="many fields"),
    _o("allclusters", "L", N, help="accepted; one cluster"),
    _o("cluster", None, dest="clusters"),
    _o("clusters", "M", help="accepted; one cluster"),
    _o("nodelist", "N", help="jobs that ran on any of these nodes"),
    _o("noconvert", None, N, help="print memory in the unit it was stored in"),
    _o("units", None, help="print memory in this unit (K, M, G, T, P)"),
    _o("noheader", "n", N, help="no header"),
    _o("fields", None, dest="format"),
    _o("format", "o", help="comma-separated fields, each optionally %WIDTH"),
    _o("parsable", "p", N, help="'|' after every field"),
    _o("parsable2", "P", N, help="'|' between fields"),
    _o("qos", "q", help="comma-separated QOS to select"),
    _o("partition", "r", help="comma-separated partitions to select"),
    _o("reason", "R", help="comma-separated pending reasons to select"),
    _o("state", "s", help="comma-separated states to select"),
    _o("starttime", "S", help="start of the time window"),
    _o("truncate", "T", N, help="clip start and end times to the window"),
    _o("uid", None, dest="user"),
    _o("usage", "U", N, help="brief usage"),
    _o("user", "u", help="comma-separated users (names or uids) to select"),
    _o("verbose", "v", N, count=True, help="report the time window"),
    _o("version", "V", N, help="print the version"),
    _o("wckeys", "W", help="accepted, ignored"),
    _o("whole-hetjob", None, O, help="accepted; no heterogeneous jobs"),
    _o("associations", "x", help="accepted, ignored"),
    _o("yaml", None, N, help="YAML output"),
    _o("", "t", N, dest="allocations"),
)


class _Table(Table):
    """sacct reports getopt errors and exits 1, with no "Try --help" line."""

    def fail(self, message: str) -> ShimError:
        return ShimError(f"{self.prog}: {message}", code=1)


TABLE = _Table(PROG, [s for s in OPTIONS if s.long], error_code=1)
TABLE.by_short["t"] = OPTIONS[-1]

USAGE = "Usage: sacct [OPTIONS]  (sacct --help lists them)\n"


def help_text() -> str:
    lines = ["Usage: sacct [OPTIONS]", "",
             "Accounting of Grid Engine jobs, as Slurm's sacct shows it.", ""]
    for s in OPTIONS:
        if s.long in ("", "gid", "uid", "fields", "cluster", "help-fields"):
            continue
        flag = (f"-{s.short}, " if s.short else "    ") + f"--{s.long}"
        if s.arity is Arity.REQUIRED:
            flag += "=value"
        elif s.arity is Arity.OPTIONAL:
            flag += "[=value]"
        lines.append(f"  {flag:<28}{s.help}")
    lines += ["", "Times (-S, -E): HH:MM[:SS][AM|PM], MMDD[YY], MM/DD[/YY], MM.DD[.YY], any of those",
              "with -HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], today, midnight, noon, fika, teatime,",
              "now[+|-count[seconds|minutes|hours|days|weeks]].",
              "Environment: SACCT_FORMAT (default --format), SLURM_SHIM_ACCOUNTING (accounting file)."]
    return "\n".join(lines) + "\n"


def fatal(msg: str) -> ShimError:
    return ShimError(f"{PROG}: fatal: {msg}", code=1)


def error(msg: str) -> ShimError:
    return ShimError(f"{PROG}: error: {msg}", code=1)


# ---------------------------------------------------------------------------------------------
# option values

STATES = [  # (long, compact), Slurm's base job states in order
    ("PENDING", "PD"), ("RUNNING", "R"), ("SUSPENDED", "S"), ("COMPLETED", "CD"), ("CANCELLED", "CA"),
    ("FAILED", "F"), ("TIMEOUT", "TO"), ("NODE_FAIL", "NF"), ("PREEMPTED", "PR"), ("BOOT_FAIL", "BF"),
    ("DEADLINE", "DL"), ("OUT_OF_MEMORY", "OOM"),
]
STATE_FLAGS = [("COMPLETING", "CG"), ("CONFIGURING", "CF"), ("RESIZING", "RS"), ("REQUEUED", "RQ"),
               ("REQUEUE_FED", "RF"), ("REQUEUE_HOLD", "RH"), ("REVOKED", "RV"), ("SPECIAL_EXIT", "SE"),
               ("STAGE_OUT", "SO"), ("STOPPED", "ST"), ("SIGNALING", "SI"), ("RESV_DEL_HOLD", "RD")]
ENDED = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                   "DEADLINE", "OUT_OF_MEMORY"})


def parse_states(text: str) -> set[str]:
    items = [x for x in _split_list(text)]
    out: set[str] = set()
    for i, item in enumerate(items):
        u = item.upper()
        name = next((lng for lng, short in STATES + STATE_FLAGS if u in (lng, short)), None)
        if name is None:
            # Slurm quotes the name only when it is the last of the list
            raise fatal(f"unrecognized job state value '{item}'" if i == len(items) - 1
                        else f"unrecognized job state value {item}")
        out.add(name)
    return out


def _split_list(text: str) -> list[str]:
    """Slurm's comma lists: an optional surrounding quote, empty items dropped."""
    if text and text[0] in "\"'":
        q = text[0]
        text = text[1:]
        if q in text:
            text = text[:text.index(q)]
    return [x for x in text.split(",") if x]


class JobSel:
    __slots__ = ("job", "task", "step")

    def __init__(self, job: int, task: int | None = None, step: str | None = None):
        self.job, self.task, self.step = job, task, step

    def __repr__(self) -> str:
        return f"JobSel({self.job}, {self.task}, {self.step})"


_JOB_RE = re.compile(r"^(\d+)(?:_(\d+|\[[0-9,\-%:]+\]))?(?:\.(batch|extern|\d+))?$")


def parse_jobs(text: str) -> list[JobSel]:
    out: list[JobSel] = []
    for item in _split_list(text):
        m = _JOB_RE.match(item.strip())
        if not m:
            raise fatal(f"Bad job/step specified: {item}")
        job = int(m.group(1))
        step = m.group(3)
        t = m.group(2)
        if t is None:
            out.append(JobSel(job, None, step))
        elif t.startswith("["):
            for part in t[1:-1].split("%")[0].split(","):
                a, dash, b = part.partition("-")
                if not a.isdigit() or (dash and not b.split(":")[0].isdigit()):
                    raise fatal(f"Bad job/step specified: {item}")
                hi = int(b.split(":")[0]) if dash else int(a)
                stride = int(b.split(":")[1]) if dash and ":" in b else 1
                for k in range(int(a), hi + 1, max(1, stride)):
                    out.append(JobSel(job, k, step))
        else:
            out.append(JobSel(job, int(t), step))
    return out


def resolve_users(text: str) -> set[str] | None:
    """-u: names or uids -> user names; "-1" means everyone (None)."""
    if text == "-1":
        return None
    out: set[str] = set()
    for item in _split_list(text):
        try:
            if item.isdigit():
                out.add(pwd.getpwuid(int(item)).pw_name)
            else:
                out.add(pwd.getpwnam(item).pw_name)
        except KeyError:
            raise ShimError(f"Invalid user id: {item}", code=1) from None
    return out


def resolve_groups(text: str) -> set[str]:
    out: set[str] = set()
    for item in _split_list(text):
        try:
            out.add(grp.getgrgid(int(item)).gr_name if item.isdigit() else grp.getgrnam(item).gr_name)
        except KeyError:
            raise ShimError(f"Invalid group id: {item}", code=1) from None
    return out


def _range(text: str, what: str) -> tuple[int, int]:
    a, dash, b = text.partition("-")
    try:
        lo = int(a)
        hi = int(b) if dash and b else (lo if not dash else 1 << 31)
    except ValueError:
        raise error(f"invalid {what} range -i '{text}'") from None
    return lo, hi


def _time(text: str) -> int:
    try:
        return parse_time(text, past=True)
    except TimeSpecError as e:
        raise ShimError(str(e), code=1) from None


# ---------------------------------------------------------------------------------------------
# the query


class Query:
    """What to show: selection, time window, layout."""

    def __init__(self) -> None:
        self.jobs: list[JobSel] | None = None
        self.users: set[str] | None = None
        self.groups: set[str] | None = None
        self.accounts: set[str] | None = None
        self.partitions: set[str] | None = None
        self.qos: set[str] | None = None
        self.names: set[str] | None = None
        self.nodes: set[str] | None = None
        self.states: set[str] | None = None
        self.reasons: set[str] | None = None
        self.ncpus: tuple[int, int] | None = None
        self.nnodes: tuple[int, int] | None = None
        self.limit_min: int | None = None
        self.limit_max: int | None = None
        self.start: int = 0  # window start (0 = none)
        self.end: int = 0  # window end
        self.window = True
        self.no_steps = False
        self.duplicates = False
        self.truncate = False
        self.now = time.time()
        self._sels: dict[int, list[JobSel]] | None = None

    def sels(self, job: int) -> list[JobSel]:
        """The -j selections naming this job (jobs must be set)."""
        if self._sels is None:
            self._sels = {}
            for s in self.jobs or ():
                self._sels.setdefault(s.job, []).append(s)
        return self._sels.get(job, [])


def build_query(o: Options, uid: int, me: str) -> Query:
    qy = Query()
    qy.now = time.time()
    if o.jobs:
        qy.jobs = []
        for text in o.jobs:
            qy.jobs.extend(parse_jobs(text))
    if o.state:
        qy.states = parse_states(o.state)
    if o.starttime is not None:
        qy.start = _time(o.starttime)
    if o.endtime is not None:
        qy.end = _time(o.endtime)
    now = int(qy.now)
    if o.starttime is None:
        if qy.jobs:
            qy.start = 0
        elif qy.states:
            qy.start = now
        else:
            qy.start = midnight(qy.now)
    if o.endtime is None:
        qy.end = qy.start if (qy.states and o.starttime is not None) else now
    # -j without -S: every record of those jobs, whatever its time
    qy.window = not (qy.jobs and o.starttime is None and o.endtime is None)
    all_users = bool(o.allusers)
    if o.user is not None:
        users = resolve_users(o.user)
        if users is None:
            all_users = True
        else:
            qy.users = users
            all_users = False
    if qy.users is None and not all_users:
        if not (qy.jobs or o.nodelist or uid == 0):
            qy.users = {me}
    if o.group:
        qy.groups = resolve_groups(o.group)
    if o.accounts:
        qy.accounts = set(_split_list(o.accounts))
    if o.partition:
        qy.partitions = set(_split_list(o.partition))
    if o.qos:
        qy.qos = set(_split_list(o.qos))
    if o.name:
        qy.names = set(_split_list(o.name))
    if o.nodelist:
        from ..hostlist import expand

        qy.nodes = set(expand(o.nodelist))
    if o.reason:
        qy.reasons = {r.lower() for r in _split_list(o.reason)}
    if o.ncpus:
        qy.ncpus = _range(o.ncpus, "cpu")
    if o.nnodes:
        qy.nnodes = _range(o.nnodes, "node")
    if o.timelimit_min:
        from ..options.values import time_minutes

        v = time_minutes(o.timelimit_min)
        if v is None or (v <= 0 and v != -1):
            raise fatal("Invalid time limit specification")
        qy.limit_min = v
        if o.timelimit_max:
            w = time_minutes(o.timelimit_max)
            if w is None or (w <= 0 and w != -1):
                raise fatal("Invalid time limit specification")
            qy.limit_max = w
    qy.no_steps = bool(o.allocations)
    qy.duplicates = bool(o.duplicates)
    qy.truncate = bool(o.truncate)
    return qy


# ---------------------------------------------------------------------------------------------
# assembling rows


_UNREAD: Any = object()


class Ctx:
    def __init__(self, cfg: Any, now: float):
        self.cfg = cfg
        self.now = now
        self.cluster = cfg.cluster.name
        self.by_queue: dict[str, str] = {}
        for pname, p in cfg.partitions.items():
            self.by_queue.setdefault(p.queue, pname)
        self.default_partition = getattr(cfg, "default_partition", None) or next(iter(cfg.partitions))
        self._uid: dict[str, int | None] = {}
        self._gid: dict[str, int | None] = {}
        self._submit: dict[int, dict | None] = {}
        self._ident: dict[tuple, dict[str, Any]] = {}
        self._geom: dict[tuple, tuple] = {}
        self._limits: dict[str, int] = {}
        self._limit_cache: dict[tuple, int | None] = {}
        self._outcomes: dict[tuple[int, int], qacct.Outcome] = {}
        self._templates: dict[tuple, tuple[dict[str, Any], dict[str, Any]]] = {}
        self._group_of_uid: dict[int, str] = {}
        self.reader: Any = None  # records.Reader, made at first use
        self.eager = False  # list each user's records at first use (a listing that reads most of them)
        self.owners: dict[int, str] = {}  # job -> its owner, as Grid Engine reported it
        self.me = os.getuid()

    def uid(self, user: str) -> int | None:
        if user not in self._uid:
            try:
                self._uid[user] = pwd.getpwnam(user).pw_uid
            except KeyError:
                self._uid[user] = None
        return self._uid[user]

    def gid(self, group: str) -> int | None:
        if group not in self._gid:
            try:
                self._gid[group] = grp.getgrnam(group).gr_gid
            except KeyError:
                self._gid[group] = None
        return self._gid[group]

    def group_of_uid(self, uid: int) -> str:
        """The name of the user's primary group ("" when unknown)."""
        g = self._group_of_uid.get(uid)
        if g is None:
            try:
                g = grp.getgrgid(pwd.getpwuid(uid).pw_gid).gr_name
            except KeyError:
                g = ""
            self._group_of_uid[uid] = g
        return g

    def outcome(self, rec: qacct.Record) -> qacct.Outcome:
        """qacct.outcome of a record without shim events; shared by the records with the same
        failed/exit_status pair when nothing else of the record decides it."""
        f = rec.failed
        if f == qacct.KILLED_CODE or f == qacct.LIMIT_CODE:
            return qacct.outcome(rec)
        key = (f, rec.exit_status)
        oc = self._outcomes.get(key)
        if oc is None:
            oc = self._outcomes[key] = qacct.outcome(rec)
        return oc

    def records(self) -> Any:
        if self.reader is None:
            from ..records import Reader

            self.reader = Reader(self.cfg, eager=self.eager)
        return self.reader

    def owner(self, job: int, owner: Any = None) -> Any:
        """The owner to read a job's records for: the one given (Grid Engine's), else the one
        Grid Engine reported for the job earlier in this command, else the caller."""
        if owner not in (None, ""):
            return owner
        return self.owners.get(job, self.me)

    def submit(self, job: int, owner: Any = None, ge_submit: float | None = None) -> dict | None:
        """sbatch's record of a job of ``owner`` (see Ctx.owner) submitted at ``ge_submit`` (when
        known): records.Reader.submit, cached."""
        owner = self.owner(job, owner)
        key = (job, owner, ge_submit)
        s = self._submit.get(key, _UNREAD)  # type: ignore[call-overload]
        if s is not _UNREAD:
            return s
        s = self._submit[key] = self.records().submit(job, owner, ge_submit)  # type: ignore[index]
        return s  # (the Reader reads each job's files once, whatever the submission time asked)

    def ident(self, job: int, s: dict | None, ge_name: str, owner: str, group: str, queue: str,
              ge_account: str) -> dict[str, Any]:
        key = (id(s) if s else None, ge_name, owner, group, queue, ge_account)
        v = self._ident.get(key)
        if v is None:
            v = self._ident[key] = _ident(self, job, s, ge_name, owner, group, queue, ge_account)
        return v

    def geometry(self, job: int, s: dict | None, ncpus: int, category: str) -> tuple:
        key = (job if s else None, ncpus, category)
        v = self._geom.get(key)
        if v is None:
            v = self._geom[key] = _geometry(self, s, ncpus, category)
        return v

    @staticmethod
    def gres_only(extra: dict[str, int]) -> dict[str, int]:
        return {k: v for k, v in extra.items() if k.startswith("gres/")} if extra else extra

    def partition_of(self, queue: str) -> str:
        q = queue.split("@", 1)[0]
        return self.by_queue.get(q, q)

    def partition_limit(self, partition: str) -> int:
        """The time limit a job without -t gets in this partition (minutes, -1 unlimited)."""
        if partition in self._limits:
            return self._limits[partition]
        self._limits[partition] = v = self._partition_limit(partition)
        return v

    def _partition_limit(self, partition: str) -> int:
        from ..options.values import time_minutes

        p = self.cfg.partitions.get(partition)
        if p is None:
            return -1
        for text in (p.get("default_time"), p.get("max_time")):
            if text:
                v = time_minutes(str(text))
                if v is not None:
                    return v
        return -1


def _scan_events(d: str, uid: int, jobs: set[int] | None, min_mtime: float | None,
                 out: dict[int, dict[tuple[int | None, str], dict[int, str]]]) -> None:
    """Add one user's end, cancel and start events to ``out`` ({job: {(task, kind): {uid:
    path}}}): one listing; with ``min_mtime``, only events written since then. Nothing is read
    here: Events.get reads and checks a file when it is needed."""
    from ..records import EVENT_NAME

    try:
        it = os.scandir(os.path.join(d, "events"))
    except OSError:
        return
    kinds = ("end", "cancel", "start")
    with it:
        for e in it:
            m = EVENT_NAME.fullmatch(e.name)
            if m is None or m[3] not in kinds:
                continue
            job = int(m[1])
            if jobs is not None and job not in jobs:
                continue
            if min_mtime is not None:
                try:
                    if e.stat(follow_symlinks=False).st_mtime < min_mtime:
                        continue
                except OSError:
                    continue
            task = None if m[2] == "x" else int(m[2])
            out.setdefault(job, {}).setdefault((task, m[3]), {})[uid] = e.path


class Events:
    """The shim's end/cancel/start events, read lazily. An event counts for a job of user U
    when it is in U's directory, or in root's and names U (records.speaks_for), and when it can
    be about the Grid Engine job submitted at ``ge_submit`` (records.of_job).

    The directories are listed as they are needed: for -j, the caller's and root's first, a job
    owner's when Grid Engine names the owner, and every user's only when a job is left that
    nobody has named (``complete``); without -j, all of them (of ``uids`` only, when the query
    is about those users' jobs) at once."""

    def __init__(self, cfg: Any, jobs: set[int] | None, min_mtime: float | None = None,
                 uids: set[int] | None = None, first: Iterable[int] | None = None):
        self.cfg = cfg
        self.jobs = jobs
        self.min_mtime = min_mtime
        self.allowed = uids
        self.index: dict[int, dict[tuple[int | None, str], dict[int, str]]] = {}
        self.cache: dict[str, dict | None] = {}
        self.scanned: set[int] = set()
        self.all = False
        if first is None:
            self.complete()
        else:
            self.scan(first)

    def scan(self, uids: Iterable[int]) -> None:
        from .. import state

        for uid in uids:
            if uid in self.scanned or self.all or (self.allowed is not None and uid not in self.allowed):
                continue
            self.scanned.add(uid)
            d = state.user_dir(self.cfg, uid)
            if d is not None:
                _scan_events(d, uid, self.jobs, self.min_mtime, self.index)

    def complete(self) -> None:
        """Every user's directory (of ``uids``) listed."""
        if self.all:
            return
        from .. import state

        for uid, d in state.user_dirs(self.cfg):
            if uid not in self.scanned and (self.allowed is None or uid in self.allowed):
                self.scanned.add(uid)
                _scan_events(d, uid, self.jobs, self.min_mtime, self.index)
        self.all = True

    def knows(self, job: int, owner: Any) -> bool:
        """Are there events of ``job`` in the owner's or root's directory (listing them if need be)?"""
        from .. import state

        uid = state.uid_of(owner) if owner not in (None, "") else None
        if uid is not None and not self.all and uid not in self.scanned:
            self.scan((uid, 0))
        return job in self.index

    def _load(self, path: str, uid: int) -> dict | None:
        if path not in self.cache:
            from .. import state
            from ..records import clean_event

            self.cache[path] = clean_event(state.read_json(path, uid))
        return self.cache[path]

    def get(self, job: int, task: int | None, kind: str, owner: Any, ge_submit: float | None = None) -> dict | None:
        if not self.knows(job, owner):
            return None
        paths = self.index[job]
        from .. import state
        from ..records import of_job, speaks_for

        uid = state.uid_of(owner) if owner not in (None, "") else None
        if uid is None:
            return None
        keys = [(task, kind)]
        if kind == "cancel" and task is not None:
            keys.append((None, kind))
        for key in keys:
            by = paths.get(key)
            if not by:
                continue
            for u in dict.fromkeys((uid, 0)):
                p = by.get(u)
                if p is None:
                    continue
                data = self._load(p, u)
                if data is not None and speaks_for(data, u, uid, "owner") and of_job(data, ge_submit, True):
                    return data
        return None

    def tasks(self, job: int, owner: Any = None) -> set[int | None]:
        """The tasks with events in the owner's or root's directory (all, without an owner)."""
        paths = self.index.get(job, {})
        if owner is None:
            return {t for t, _k in paths}
        from .. import state

        uid = state.uid_of(owner)
        return {t for (t, _k), by in paths.items() if uid in by or 0 in by}

    def owners(self, job: int, me: int) -> list[int]:
        """Whose job this may be when Grid Engine has no record of it (records.candidates)."""
        from ..records import candidates

        paths = self.index.get(job, {})
        uids = {u for by in paths.values() for u in by}
        root = [self._load(by[0], 0) for (_t, k), by in paths.items() if 0 in by and k != "start"]
        return candidates(uids, root, me)


STALE = 3600  # seconds between Grid Engine's and the shim's times beyond which they are different jobs


def fresh_submit(s: dict | None, rec: qacct.Record) -> dict | None:
    """The submit record, unless it belongs to an earlier job that had the same number."""
    if s and s.get("submit_time") and rec.submit and abs(float(s["submit_time"]) - rec.submit) > STALE:
        return None
    return s


def _slurm_task(ge_task: int, submit: dict | None) -> int | None:
    if not ge_task:
        return None
    array = (submit or {}).get("array")
    if array and 1 <= ge_task <= len(array):
        return int(array[ge_task - 1])
    return ge_task


def _mem_mb(text: str | None) -> float | None:
    if not text:
        return None
    m = re.match(r"^([0-9.]+)([kKmMgGtT]?)$", text.strip())
    if not m:
        return None
    mult = {"": 1 / (1024 * 1024), "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}[m.group(2).lower()]
    return float(m.group(1)) * mult


def _geometry(ctx: Ctx, s: dict | None, ncpus: int, category: str = "") -> tuple[int, float | None, dict[str, int]]:
    """(nodes, requested memory in MB for the whole job, extra TRES) from the submit record, else
    from the Grid Engine request (category)."""
    extra: dict[str, int] = {}
    if s:
        nodes = int(s.get("nodes") or 1)
        mem: float | None = None
        if s.get("mem_mb"):
            mem = float(s["mem_mb"]) * nodes
        elif s.get("mem_per_cpu_mb"):
            mem = float(s["mem_per_cpu_mb"]) * ncpus
        elif s.get("default_mem_per_cpu"):
            mem = float(s["default_mem_per_cpu"]) * ncpus
        gpus = s.get("gpus")
        if gpus:
            try:
                extra["gres/gpu"] = int(gpus)
            except (TypeError, ValueError):
                pass
        lic = s.get("licenses")
        if lic:
            for item in str(lic).split(","):
                name, _, cnt = item.partition(":")
                if name:
                    extra[f"license/{name}"] = int(cnt) if cnt.isdigit() else 1
        return nodes, mem, extra
    req = qacct.category_requests(category) if category else {}
    cfg = ctx.cfg
    mem = None
    mc = cfg.memory.complex
    if req.get(mc):
        per = _mem_mb(req[mc])
        if per is not None:
            mem = per * (ncpus if cfg.memory.scope == "slot" else 1)
    for gname, c in cfg.gres.items():
        if req.get(c.complex, "").isdigit():
            extra[f"gres/{gname}"] = int(req[c.complex])
    for lname, c in cfg.licenses.items():
        if req.get(c.complex, "").isdigit():
            extra[f"license/{lname}"] = int(req[c.complex])
    return 1, mem, extra


def _limit(ctx: Ctx, s: dict | None, category: str, partition: str, started: bool) -> int | None:
    key = (id(s) if s else None, category, partition, started)
    if key not in ctx._limit_cache:
        ctx._limit_cache[key] = _limit_of(ctx, s, category, partition, started)
    return ctx._limit_cache[key]


def _limit_of(ctx: Ctx, s: dict | None, category: str, partition: str, started: bool) -> int | None:
    t = None
    if s and s.get("time") is not None:
        t = int(s["time"])
    elif category:
        h = qacct.category_requests(category).get("h_rt")
        if h:
            secs = qacct._duration(h)
            if secs is not None:
                t = (secs + 59) // 60
    if t is None or t < 0:
        if not started:
            return None  # Partition_Limit until the job starts
        return ctx.partition_limit(partition)
    return t


def _ident(ctx: Ctx, job: int, s: dict | None, ge_name: str, owner: str, group: str, queue: str,
           ge_account: str) -> dict[str, Any]:
    name = (s or {}).get("name") or jobnames.decode(ge_name)
    partition = (s or {}).get("partition") or (ctx.partition_of(queue) if queue else ctx.default_partition)
    account = (s or {}).get("account") or (ge_account if ge_account not in ("", "sge", "NONE") else "")
    user = owner or (s or {}).get("user") or ""
    uid = ctx.uid(user) if user else None
    if uid is None and s and s.get("uid") is not None:
        uid = int(s["uid"])
    if not group and uid is not None:
        group = ctx.group_of_uid(uid)
    return {
        "name": name, "partition": partition, "account": account, "user": user, "uid": uid,
        "group": group, "gid": ctx.gid(group) if group else None,
        "comment": (s or {}).get("comment") or "", "workdir": (s or {}).get("workdir") or "",
        "qos": (s or {}).get("qos") or "normal", "cluster": ctx.cluster,
    }


_REQUEUED = qacct.Outcome("REQUEUED", 0, 0, "CANCELLED", 0, 9)
_new_row = object.__new__


def _row(d: dict[str, Any]) -> view.Row:
    """A Row holding exactly the attributes of ``d`` (as ``view.Row(**d)``, without the copy)."""
    r = _new_row(view.Row)
    r.__dict__ = d
    return r


def _templates(ctx: Ctx, rec: qacct.Record, s: dict | None, ncpus: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the job row and the batch row of a record share with every record of the same submit
    record, names, owner, queue, slots and request: (job attributes, batch attributes)."""
    ident = ctx.ident(rec.job, s, rec.jobname, rec.owner, rec.group, rec.qname, rec.account)
    nodes, mem, extra = ctx.geometry(rec.job, s, ncpus, rec.category)
    limit = _limit(ctx, s, rec.category, ident["partition"], True)
    job = dict(ident)
    job.update(now=ctx.now, ncpus=ncpus, nnodes=nodes, time_limit=limit, req_mem_mb=mem,
               tres=(ncpus, mem, nodes, extra), reason="None")
    batch = {"step": "batch", "now": ctx.now, "ncpus": ncpus, "nnodes": 1, "ntasks": 1,
             "tres": (ncpus, mem, 1, ctx.gres_only(extra), False), "cluster": ctx.cluster, "name": "batch",
             "partition": ident["partition"], "account": ident["account"], "user": ident["user"],
             "uid": ident["uid"], "group": ident["group"]}
    return job, batch


def rows_from_record(ctx: Ctx, rec: qacct.Record, s: dict | None, ev: Events, *, requeued: bool = False,
                     order: int = 0, steps: bool = True) -> tuple[view.Row, view.Row | None]:
    """A finished job or array task (one accounting record) -> its job row and .batch row."""
    task = _slurm_task(rec.task, s)
    end_ev = cancel_ev = None
    if not requeued and ev.knows(rec.job, rec.owner):
        end_ev = ev.get(rec.job, task, "end", rec.owner, rec.submit or None)
        cancel_ev = ev.get(rec.job, task, "cancel", rec.owner, rec.submit or None)
        if end_ev is not None and rec.end and abs(float(end_ev.get("t") or 0) - rec.end) > STALE:
            end_ev = None  # a record of an earlier job with the same number (Grid Engine reinstalled)
        if cancel_ev is not None and abs(float(cancel_ev.get("t") or 0) - (rec.end or rec.submit)) > STALE:
            cancel_ev = None
    if requeued:
        oc = _REQUEUED
    elif end_ev is None and cancel_ev is None:
        oc = ctx.outcome(rec)
    else:
        oc = qacct.outcome(rec, end_ev, cancel_ev)
    ncpus = rec.slots or 1
    key = (id(s) if s else None, rec.jobname, rec.owner, rec.group, rec.qname, rec.account, ncpus, rec.category)
    tmpl = ctx._templates.get(key)
    if tmpl is None:
        tmpl = ctx._templates[key] = _templates(ctx, rec, s, ncpus)
    start, end = rec.start, rec.end
    if not start:  # never started (Grid Engine could not launch it): Slurm shows the launch moment
        start = end = end or rec.submit
    host = [rec.hostname] if rec.hostname else []
    utime, stime = rec.utime, rec.stime
    cpu = utime + stime
    d = tmpl[0].copy()
    d["job_id"] = rec.job
    d["task"] = task
    d["state"] = oc.state
    d["cancel_uid"] = oc.cancel_uid
    d["exit"] = oc.exit
    d["signal"] = oc.signal
    d["submit"] = d["eligible"] = rec.submit
    d["start"] = start
    d["end"] = end
    d["nodes"] = host
    d["total_cpu"] = cpu
    d["user_cpu"] = utime
    d["sys_cpu"] = stime
    d["priority"] = rec.priority
    d["order"] = order
    d["extra"] = {"throttle": s.get("throttle") if s else None}
    job = _row(d)
    if not steps:
        return job, None
    d = tmpl[1].copy()
    d["job_id"] = rec.job
    d["task"] = task
    d["state"] = oc.batch_state
    d["exit"] = oc.batch_exit
    d["signal"] = oc.batch_signal
    d["submit"] = d["eligible"] = d["start"] = start
    d["end"] = end
    d["nodes"] = host
    d["maxrss_kb"] = rec.maxrss_kb
    d["maxvmem_kb"] = int(rec.maxvmem // 1024)
    d["total_cpu"] = cpu
    d["user_cpu"] = utime
    d["sys_cpu"] = stime
    d["order"] = order
    d["extra"] = {}
    return job, _row(d)


def rows_from_events(ctx: Ctx, job_id: int, task: int | None, s: dict | None, ev: Events, owner: str
                     ) -> tuple[view.Row, view.Row | None] | None:
    """A job of ``owner`` Grid Engine has no record of (cancelled while pending) or whose record
    is not there (yet): rebuilt from the shim's end and cancel events."""
    end_ev = ev.get(job_id, task, "end", owner)
    cancel_ev = ev.get(job_id, task, "cancel", owner)
    start_ev = ev.get(job_id, task, "start", owner)
    if end_ev is None and cancel_ev is None:
        return None
    info = cancel_ev or {}
    ident = _ident(ctx, job_id, s, info.get("name", ""), owner, "", "", "")
    if not s and info.get("partition"):
        ident["partition"] = info["partition"]
    ncpus = int((s or {}).get("ntasks") or 1) * int((s or {}).get("cpus_per_task") or 1) if s else int(
        info.get("cpus") or 1)
    nodes, mem, extra = _geometry(ctx, s, ncpus)
    submit = int(float((s or {}).get("submit_time") or info.get("t") or 0)) or None
    if end_ev is None and info.get("was") == "PENDING":
        ran = False
    else:
        ran = end_ev is not None or start_ev is not None or info.get("was") in ("RUNNING", "SUSPENDED", "COMPLETING")
    if end_ev is not None:
        oc = qacct._from_end_event(end_ev, cancel_ev)
        start = int(float(end_ev.get("start") or (start_ev or {}).get("t") or 0)) or None
        end = int(float(end_ev.get("t") or 0)) or None
        node = end_ev.get("node") or (start_ev or {}).get("node") or ""
    else:
        oc = qacct.Outcome("CANCELLED", 0, 0, "CANCELLED", 0, 9, reason=info.get("reason") or "None",
                           cancel_uid=qacct._opt_int(info.get("uid")))
        start = (int(float(info.get("start") or (start_ev or {}).get("t") or 0)) or None) if ran else None
        end = int(float(info.get("t") or 0)) or None
        node = info.get("node") or (start_ev or {}).get("node") or ""
    limit = _limit(ctx, s, "", ident["partition"], bool(start))
    reason = oc.reason if not start else "None"
    if reason == "DependencyNeverSatisfied":
        reason = "None"
    host = [node] if node and start else []
    job = view.Row(
        job_id=job_id, task=task, step=None, state=oc.state, cancel_uid=oc.cancel_uid, exit=oc.exit,
        signal=oc.signal, submit=submit, eligible=submit, start=start, end=end, now=ctx.now, ncpus=ncpus,
        nnodes=nodes, nodes=host, time_limit=limit, req_mem_mb=mem, tres=(ncpus, mem, nodes, extra),
        allocated=bool(start), total_cpu=0.0, user_cpu=0.0, sys_cpu=0.0, reason=reason,
        priority=0, order=0, extra={"throttle": (s or {}).get("throttle")}, **ident)
    if not start:
        return job, None
    batch = view.Row(
        job_id=job_id, task=task, step="batch", state=oc.batch_state, exit=oc.batch_exit,
        signal=oc.batch_signal, submit=start, eligible=start, start=start, end=end, now=ctx.now,
        ncpus=ncpus, nnodes=1, nodes=host, ntasks=1,
        tres=(ncpus, mem, 1, ctx.gres_only(extra), False), total_cpu=0.0, user_cpu=0.0, sys_cpu=0.0,
        cluster=ctx.cluster, name="batch", partition=ident["partition"], account=ident["account"],
        user=ident["user"], uid=ident["uid"], group=ident["group"])
    return job, batch


def rows_from_live(ctx: Ctx, rec: Any) -> tuple[view.Row, view.Row | None]:
    """A pending, running or suspended job from the live queue (a shim.jobs JobRecord)."""
    from .. import jobs

    jobs.detail(rec, ctx.cfg)
    s = rec.extra.get("submit")
    ncpus = rec.num_cpus or 1
    nodes, mem, extra = _geometry(ctx, s, ncpus)
    if not s and rec.min_memory_mb:
        mem = rec.min_memory_mb * (ncpus if rec.mem_per_cpu else 1)
    submit = int(rec.submit_time.timestamp()) if rec.submit_time else None
    start = int(rec.start_time.timestamp()) if rec.start_time and rec.state != "PENDING" else None
    held = rec.state == "PENDING" and rec.reason in ("JobHeldUser", "JobHeldAdmin", "Dependency")
    limit = rec.time_limit if rec.time_limit not in (None, -1) else (
        (ctx.partition_limit(rec.partition) if start else None))
    if s and s.get("time") is not None and int(s["time"]) >= 0:
        limit = int(s["time"])
    state_ = rec.state if rec.state in ("PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "REQUEUED") else rec.state
    # pending tasks not yet split out: one row, <id>_[<indices>[%<throttle>]] as Slurm prints it
    array_text = f"[{rec.array_pending}]" if rec.array_pending is not None else None
    job = view.Row(
        job_id=rec.job_id, task=rec.array_task, array_text=array_text, step=None, state=state_,
        exit=0, signal=0, submit=submit, eligible=None if held else submit, start=start, end=None,
        now=ctx.now, ncpus=ncpus, nnodes=nodes, nodes=list(rec.nodes) if start else [], time_limit=limit,
        req_mem_mb=mem, tres=(ncpus, mem, nodes, extra), allocated=bool(start), total_cpu=0.0,
        user_cpu=0.0, sys_cpu=0.0, reason=rec.reason if rec.state == "PENDING" else "None",
        name=rec.name, partition=rec.partition, account=rec.account or "", user=rec.user, uid=rec.uid,
        group=rec.group or (jobs.group_name(rec.gid) if rec.gid is not None else ""), gid=rec.gid,
        comment=rec.comment, workdir=rec.work_dir, qos=rec.qos or "normal", cluster=ctx.cluster,
        priority=rec.priority, extra={"throttle": rec.array_max_tasks, "live": True})
    if not start:
        return job, None
    batch = view.Row(
        job_id=rec.job_id, task=rec.array_task, step="batch", state=state_, exit=0, signal=0, submit=start,
        eligible=start, start=start, end=None, now=ctx.now, ncpus=ncpus, nnodes=1, nodes=list(rec.nodes[:1]),
        ntasks=1, tres=(ncpus, mem, 1, ctx.gres_only(extra), False), total_cpu=0.0, user_cpu=0.0,
        sys_cpu=0.0, cluster=ctx.cluster, name="batch", partition=rec.partition, account=rec.account or "",
        user=rec.user, uid=rec.uid, group=job.group)
    return job, batch


# ---------------------------------------------------------------------------------------------
# selection


def _in_window(r: view.Row, qy: Query) -> bool:
    if not qy.window:
        return True
    S, E = qy.start, qy.end
    if qy.states:
        st = r.state
        for want in qy.states:
            if want == "PENDING":
                waited_until = r.start or r.end  # a job cancelled while pending waited until then
                if r.eligible and r.eligible <= E and (not waited_until or waited_until > S):
                    return True
            elif want in ("RUNNING", "SUSPENDED"):
                if r.start and r.start < E and (not r.end or r.end >= S):
                    return True
            elif want in ENDED:
                if st == want and r.end and S <= r.end <= E:
                    return True
            elif st == want and r.start and ((S <= r.start <= E) or (r.end and S <= r.end <= E) or (
                    r.start <= S and (not r.end or r.end >= E))):
                return True
        return False
    if not r.eligible or r.eligible > E:  # Slurm: eligible < end; a job of this very second counts too
        return False
    return not r.end or r.end >= S


def _match(r: view.Row, qy: Query) -> bool:
    if qy.users is not None and r.user not in qy.users:
        return False
    if qy.names is not None and r.name not in qy.names:
        return False
    if qy.partitions is not None and r.partition not in qy.partitions:
        return False
    if qy.accounts is not None and (r.account or "") not in qy.accounts:
        return False
    if qy.groups is not None and r.group not in qy.groups:
        return False
    if qy.qos is not None and (r.qos or "") not in qy.qos:
        return False
    if qy.nodes is not None and not (set(r.nodes or ()) & qy.nodes):
        return False
    if qy.reasons is not None and (r.reason or "None").lower() not in qy.reasons:
        return False
    if qy.ncpus is not None and not (qy.ncpus[0] <= (r.ncpus or 0) <= qy.ncpus[1]):
        return False
    if qy.nnodes is not None and not (qy.nnodes[0] <= (r.nnodes or 0) <= qy.nnodes[1]):
        return False
    if qy.limit_min is not None:
        lim = r.time_limit if r.time_limit is not None else -1
        lim_v = float("inf") if lim < 0 else lim
        lo = float("inf") if qy.limit_min < 0 else qy.limit_min
        hi = float("inf") if (qy.limit_max is None or qy.limit_max < 0) else qy.limit_max
        if qy.limit_max is None:
            if lim_v != lo:
                return False
        elif not (lo <= lim_v <= hi):
            return False
    if qy.jobs is not None and not _job_selected(r, qy.sels(r.job_id)):
        return False
    return _in_window(r, qy)


def _job_selected(r: view.Row, sels: list[JobSel]) -> bool:
    """Whether one of the selections (those of the row's job, or all) names the row."""
    for s in sels:
        if s.job != r.job_id:
            continue
        if s.task is not None and r.task != s.task and not _pending_covers(r, s.task):
            continue
        return True
    return False


def _pending_covers(r: view.Row, task: int) -> bool:
    return task in (r.extra.get("indices") or ())


def _step_selected(step: view.Row, sels: list[JobSel] | None) -> bool | None:
    """None: no step was asked for this job (show the job and its steps); True/False otherwise."""
    if not sels:
        return None
    asked = [s for s in sels if s.job == step.job_id and (s.task is None or s.task == step.task)]
    if not asked or all(s.step is None for s in asked):
        return None
    return any(s.step == step.step for s in asked)


# ---------------------------------------------------------------------------------------------
# main


def parse_args(argv: list[str]) -> tuple[Options, list[str]]:
    parsed, positional = getopt(TABLE, argv, stop_at_positional=False)
    o = Options()
    jobs: list[str] = []
    formats: list[str] = []
    parsable = None
    for spec, raw in parsed:
        if spec.key == "jobs" and raw is not None:
            jobs.append(raw)
        elif spec.key == "format" and raw is not None:
            formats.append(raw)
        elif spec.key == "parsable":
            parsable = "ending"
        elif spec.key == "parsable2":
            parsable = "no_ending"
    apply(o, TABLE, parsed, "cli")
    o["jobs"] = jobs or None
    o["format"] = formats or None
    o["layout"] = parsable
    return o, positional


def field_spec(o: Options) -> str:
    parts: list[str] = []
    if o.format:
        parts.extend(o.format)
    if o.brief:
        parts.append(view.BRIEF_FIELDS)
    if o.long:
        parts.append(view.LONG_FIELDS)
    if not parts:
        parts.append(os.environ.get("SACCT_FORMAT") or view.DEFAULT_FIELDS)
    return ",".join(parts)


def main(argv: list[str]) -> int:
    o, positional = parse_args(argv)
    if o.help:
        sys.stdout.write(help_text())
        return 0
    if o.usage:
        sys.stdout.write(USAGE)
        return 0
    if o.version:
        sys.stdout.write(f"slurm-wlm {view.SLURM_VERSION}\n")
        return 0
    if o.helpformat:
        sys.stdout.write(view.helpformat())
        return 0
    uid = os.getuid()
    try:
        me = pwd.getpwuid(uid).pw_name
    except KeyError:
        me = str(uid)
    qy = build_query(o, uid, me)
    try:
        cols = view.parse_fields(field_spec(o))
    except view.FieldError as e:
        raise error(f'Invalid field requested: "{e.name}"') from None
    if positional:
        raise ShimError(f"{PROG}: error: Unknown arguments:", *(f"{PROG}: error:  {a}" for a in positional),
                        code=1)
    if o.verbose:
        end = time.ctime(qy.end) if qy.end else "Now"
        print(f"{PROG}: Jobs eligible from {time.ctime(qy.start)} - {end}", file=sys.stderr)
    # Tens of thousands of rows are made and dropped, none of them in a reference cycle: the cyclic
    # collector would only walk them again and again.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        return _output(o, qy, cols)
    finally:
        if gc_was_on:
            gc.enable()


def _output(o: Options, qy: Query, cols: list[view.Column]) -> int:
    view.reset()
    clip = qy.truncate and qy.window
    if o.json or o.yaml:
        groups = collect(qy, accounting=o.file, cfg=None)
        if clip:
            for job, steps in groups:
                _clip(qy, job, steps)
        sys.stdout.write(view.json_document(groups) if o.json else view.yaml_document(groups))
        return 0
    unit_error = None
    if o.noconvert or o.units:
        try:
            _units(cols, o)
        except ShimError as e:
            unit_error = e  # reported where Slurm does: after the records were read
    parsable = o.layout
    delim = o.delimiter if (parsable and o.delimiter is not None) else "|"
    line = view.line_function(cols, parsable=parsable, delimiter=delim)

    def emit(item: tuple[view.Row | None, list[view.Row]]) -> str:
        """One job (or its selected steps) as text, made as soon as it is known: only text is kept."""
        job, steps = item
        if clip:
            _clip(qy, job, steps)
        if job is not None:
            if not steps:
                return line(job) + "\n"
            if len(steps) == 1:
                return f"{line(job)}\n{line(steps[0])}\n"
            steps = [job, *steps]
        return "".join(line(r) + "\n" for r in steps)

    texts = collect(qy, accounting=o.file, cfg=None, emit=emit)
    if unit_error is not None:
        raise unit_error
    head = view.header_lines(cols, parsable=parsable, delimiter=delim) if not o.noheader else []
    out = sys.stdout
    if head:
        out.write("".join(h + "\n" for h in head))
    for i in range(0, len(texts), 4096):
        out.write("".join(texts[i:i + 4096]))
    return 0


def _clip(qy: Query, job: view.Row | None, steps: list[view.Row]) -> None:
    """-T: start and end times clipped to the window."""
    for r in (job, *steps) if job is not None else steps:
        if r.start and r.start < qy.start:
            r.start = qy.start
        if r.end and qy.end and r.end > qy.end:
            r.end = qy.end


def _units(cols: list[view.Column], o: Options) -> None:
    """--noconvert / --units: memory fields in one unit."""
    target = (o.units or "").upper()[:1]
    order = "KMGTP"
    if o.units and target not in order:
        raise fatal("Invalid unit type")

    def conv(v: float | None, unit: int) -> str:
        if v is None:
            return ""
        if not target:
            return f"{int(v)}{' KMGTP'[unit].strip()}"
        k = order.index(target) + 1
        val = v / (1024 ** (k - unit))
        return f"{int(val)}{target}" if val == int(val) else f"{val:.2f}{target}"

    for c in cols:
        if c.name == "ReqMem":
            c.get = lambda r: "" if r.step or not r.req_mem_mb else conv(r.req_mem_mb, 2)
        elif c.name == "MaxRSS":
            c.get = lambda r: "" if not r.step or r.maxrss_kb is None else conv(r.maxrss_kb, 1)
        elif c.name == "MaxVMSize":
            c.get = lambda r: "" if not r.step or r.maxvmem_kb is None else conv(r.maxvmem_kb, 1)


LIVE_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "REQUEUED"})


def collect(qy: Query, *, accounting: str | None = None, cfg: Any = None, backend: Any = None,
            live: list | None = None, emit: Any = None) -> list:
    """Every matching job with its step rows, in job order: ``(job, steps)`` pairs (``job`` None when
    only steps were asked for). With ``emit``, each pair is handed to ``emit`` as soon as it is
    complete and its results are returned instead, in the same order (the rows themselves are not
    kept)."""
    cfg = cfg if cfg is not None else siteconf.get()
    ctx = Ctx(cfg, qy.now)
    path = accounting or qacct.accounting_path(cfg)
    job_ids = {s.job for s in qy.jobs} if qy.jobs is not None else None
    # the shim's end and cancel events (one directory listing), and the qstat this will likely
    # need, started now to run while the file is read (-j looks at the events first)
    since = (qy.start - qacct.SLACK) if (qy.window and qy.start) else None
    uids = _uids_of(qy.users)
    # -j: the caller's and root's events first, others' as their owners become known
    ev = Events(cfg, job_ids, since, uids, first=(ctx.me, 0)) if job_ids is not None else None
    pending = _prefetch(qy, ctx, job_ids, backend, ev) if live is None else None
    try:
        if ev is None:
            ev = Events(cfg, job_ids, since, uids)
        # a listing reads most users' records: each directory is listed once instead
        ctx.eager = job_ids is None
        return _collect(qy, ctx, path, job_ids, backend, live, emit, pending, ev)
    finally:
        if pending is not None:
            pending.close()


def _user_name(uid: int) -> str:
    from ..records import user_name

    return user_name(uid)


def _uids_of(users: set[str] | None) -> set[int] | None:
    """Whose directories can hold events of these users' jobs: theirs and root's (None: all)."""
    if users is None:
        return None
    from .. import state

    return {u for u in map(state.uid_of, users) if u is not None} | {0}


def _collect(qy: Query, ctx: Ctx, path: str, job_ids: set[int] | None, backend: Any, live: list | None,
             emit: Any, pending: _Pending | None, ev: Events) -> list:
    cfg = ctx.cfg
    # 1. Grid Engine's accounting, filtered while reading
    ge_names = None
    if qy.names is not None:
        ge_names = {jobnames.encode(n) for n in qy.names} | set(qy.names)
    not_before = qy.start if (qy.window and not qy.states and qy.start) else None
    if qy.window and qy.states and qy.start:
        # a state filter looks at what happened inside the window: nothing that ended before it
        not_before = qy.start
    records = _read_accounting(path, cfg, job_ids, qy.users, ge_names, not_before,
                               qy.end if qy.window else None, backend)

    # 2. with the shim's records
    by_key: dict[tuple[int, int | None], list[qacct.Record]] = {}
    submit = ctx.submit
    owners = ctx.owners
    for r in records:
        owners[r.job] = r.owner
        s = submit(r.job, r.owner, r.submit or None)
        if s is not None:
            s = fresh_submit(s, r)
        t = r.task
        key = (r.job, (t or None) if s is None else _slurm_task(t, s))
        same = by_key.get(key)
        if same is None:
            by_key[key] = [r]
        else:
            same.append(r)
    del records
    for recs in by_key.values():
        if len(recs) > 1:
            recs.sort(key=_written)

    # 3. the live queue, unless nothing live can match
    live_recs: list = []
    if live is not None:
        live_recs = live
    else:
        need = _need_live(qy, by_key, ev, ctx)
        if need is not True and need and pending is not None and pending.probe is not None:
            live_recs = _live_if_any(cfg, backend, need, pending)
        elif need:
            live_recs = _live_listed(cfg, pending) if pending is not None and pending.listing else _live(cfg, backend)
    live_keys: dict[tuple[int, int | None], Any] = {}
    for lr in live_recs:
        if job_ids is not None and lr.job_id not in job_ids:
            continue
        owners.setdefault(lr.job_id, lr.user)
        if lr.array_pending is None and lr.state != "PENDING":
            end_ev = ev.get(lr.job_id, lr.array_task, "end", lr.user, lr.extra.get("submit_ts"))
            started = lr.start_time.timestamp() if lr.start_time else 0
            if end_ev is not None and float(end_ev.get("t") or 0) >= started - 1:
                continue  # the script has ended (Grid Engine is still cleaning up): the end event tells
        if lr.array_pending is not None:
            live_keys[(lr.job_id, ("pending",))] = lr  # type: ignore[index]
        else:
            live_keys[(lr.job_id, lr.array_task)] = lr

    out: list = []
    add = out.append
    no_steps = qy.no_steps
    step_jobs = {s.job for s in qy.jobs if s.step} if qy.jobs is not None else set()

    def finish(job: view.Row, steps: list[view.Row]) -> None:
        """Keep a job that matches, with the steps asked for."""
        if not _match(job, qy):
            return
        if no_steps:
            shown_steps: list[view.Row] = []
        elif qy.jobs is None:
            shown_steps = steps  # a list of its own
        else:
            shown_steps = [st for st in steps if _step_selected(st, qy.sels(st.job_id)) is not False]
        item: tuple[view.Row | None, list[view.Row]] = (job, shown_steps)
        if job.job_id in step_jobs:
            sels = qy.sels(job.job_id)
            if all(s.step for s in sels if s.task is None or s.task == job.task):
                if not shown_steps:
                    return
                item = (None, shown_steps)
        if emit is None:
            add(item)
        else:
            add((_order(item), emit(item)))

    seen: set[tuple[int, int | None]] = set()
    seen_requeued: set[tuple[int, int | None]] = set()
    steps_too = not no_steps
    for key, recs in by_key.items():
        final = recs[-1]
        s = submit(key[0], final.owner, final.submit or None)
        if s is not None:
            s = fresh_submit(s, final)
        lr = live_keys.get(key) if live_keys else None
        if lr is not None and "E" in (lr.ge_state or "") and lr.state == "PENDING":
            live_keys.pop(key)  # Eqw after a failed start: the accounting record tells what happened
            lr = None
        if lr is not None:
            final = None
        last = recs[-1]
        c = ev.get(key[0], key[1], "cancel", last.owner, last.submit or None) if ev.knows(key[0], last.owner) else None
        if final is not None and c is not None and c.get("was") == "PENDING" and float(c.get("t") or 0) > (
                final.end or final.submit) + 1:
            final = None  # requeued, then cancelled while pending again: the events tell the end
            seen_requeued.add(key)
        for i, rec in enumerate(recs):
            earlier = rec is not final
            if earlier and not qy.duplicates:
                continue
            job, batch = rows_from_record(ctx, rec, s, ev, requeued=earlier, order=i, steps=steps_too)
            finish(job, [batch] if batch else [])
        if key not in seen_requeued:
            seen.add(key)
    del by_key
    pending_tasks: dict[int, set[int]] = {}
    for key, lr in live_keys.items():
        job, batch = rows_from_live(ctx, lr)
        if key[1] == ("pending",):
            job.extra["indices"] = lr.extra.get("pending_indices") or []
            pending_tasks.setdefault(key[0], set()).update(lr.extra.get("pending_indices") or ())
        finish(job, [batch] if batch else [])
        seen.add(key)
    # events without a Grid Engine record: cancelled while pending, or the record is not there yet
    never_ran: dict[int, list[tuple[view.Row, list[view.Row]]]] = {}
    if job_ids is not None:
        from .. import state

        ev.scan({u for u in map(state.uid_of, {owners[j] for j in job_ids if j in owners}) if u is not None})
        if not job_ids <= {k[0] for k in seen}:
            ev.complete()  # a job no accounting record or live job names an owner for: anyone's
    for job_id in sorted(ev.index):
        if job_ids is not None and job_id not in job_ids:
            continue
        # whose: Grid Engine's owner where it knows the job, else whoever's events speak for it
        known = owners.get(job_id)
        cands: list[Any] = [known] if known else ev.owners(job_id, ctx.me)
        for owner in cands:
            name = owner if isinstance(owner, str) else _user_name(owner)
            if qy.users is not None and name not in qy.users:
                continue  # none of its rows could match
            tasks = ev.tasks(job_id, owner)
            if any(t is not None for t in tasks):
                tasks.discard(None)
            todo = [t for t in tasks if (job_id, t) not in seen and t not in pending_tasks.get(job_id, ())]
            if not todo:
                continue
            s = ctx.submit(job_id, owner)
            made_any = False
            for t in sorted(todo, key=lambda x: -1 if x is None else x):
                made = rows_from_events(ctx, job_id, t, s, ev, name)
                if made is None:
                    continue
                made_any = True
                job, batch = made
                if t is not None and batch is None and job.state == "CANCELLED":
                    never_ran.setdefault(job_id, []).append((job, []))
                else:
                    finish(job, [batch] if batch else [])
            if made_any:
                break
    for job_id, items in never_ran.items():
        if len(items) == 1:
            finish(*items[0])
            continue
        # array tasks cancelled before they ran stay one row, as Slurm's array record
        from ..jobs import compress_indices

        first = min(items, key=lambda x: x[0].task)[0]
        idx = sorted(x[0].task for x in items)
        first.array_text = f"[{compress_indices(idx)}]"
        first.extra["indices"] = idx
        first.task = None
        finish(first, [])

    if emit is None:
        out.sort(key=_order)
        return out
    out.sort(key=_first)
    return [text for _key, text in out]


def _written(rec: qacct.Record) -> int:
    return rec.end or rec.submit


def _first(item: tuple) -> Any:
    return item[0]


_NEVER = float("inf")


def _order(item: tuple[view.Row | None, list[view.Row]]) -> tuple:
    """Output order: job id, array index (a pending array's first), run (-D), end."""
    job, steps = item
    r = job if job is not None else steps[0]
    t = r.task
    if t is None:
        indices = r.extra.get("indices")
        t = min(indices) if indices else -1
    return (r.job_id, t, r.order or 0, r.end or _NEVER)


# Grid Engine's failed codes after which the same job can run again (rescheduled): its accounting
# record is not its end.
_RUNS_AGAIN = qacct.RESCHEDULED_CODES


def _need_live(qy: Query, by_key: dict, ev: Events, ctx: Ctx) -> bool | set[int]:
    """Whether a qstat call can add anything: not when the state filter asks only for ended states,
    nor when every requested job has ended.

    True: list the queue. A set: the ids (of jobs that sbatch did not submit) that only Grid Engine
    can tell about -- an array whose tasks in the file may not be all of them, a job the file and the
    shim's records do not know; asking qstat about them alone says whether to list the queue.
    ``by_key``'s lists must be in the order the records were written (the last is the latest)."""
    if qy.states is not None and not (qy.states & LIVE_STATES):
        return False
    if qy.jobs is None:
        return True
    ask: set[int] = set()
    of_job: dict[int, dict[tuple[int, int | None], list[qacct.Record]]] = {}
    for k, recs in by_key.items():
        of_job.setdefault(k[0], {})[k] = recs
    for job_id in sorted({s.job for s in qy.jobs}):
        keys = of_job.get(job_id, {})
        last = max((recs[-1] for recs in keys.values()), key=_written, default=None)
        owner = last.owner if last is not None else ctx.owner(job_id)
        s = ctx.submit(job_id, owner, (last.submit or None) if last is not None else None)
        if s is not None:
            # sbatch's record names every task; records of an older job with the same number do not count
            done = {k for k, recs in keys.items() if fresh_submit(s, recs[-1]) is not None
                    and recs[-1].failed not in _RUNS_AGAIN}
            array = s.get("array")
            tasks_needed: set[int | None] = {int(x) for x in array} if array else {None}
            for t in tasks_needed:
                if (job_id, t) in done:
                    continue
                if ev.get(job_id, t, "end", owner) is not None:
                    continue
                c = ev.get(job_id, t, "cancel", owner)
                if c is not None and c.get("was") in ("PENDING", None):
                    continue
                return True
            continue
        if not keys or any(k[1] is not None for k in keys):
            ask.add(job_id)  # unknown here, or a Grid Engine array whose size only qstat knows
            continue
        if any(recs[-1].failed in _RUNS_AGAIN for recs in keys.values()):
            ask.add(job_id)
    return ask or False


def _live(cfg: Any, backend: Any) -> list:
    from .. import jobs

    try:
        return jobs.list_jobs(cfg, backend=backend).records
    except ShimError as e:
        # accounting still answers when qmaster does not: warn and show what the file holds
        for line in e.lines:
            print(line, file=sys.stderr)
        return []


_LIVE_QSTAT = _live


def _live_if_any(cfg: Any, backend: Any, ids: set[int], pending: _Pending | None) -> list:
    """The live queue, if Grid Engine still has one of these jobs (``qstat -j``, started earlier)."""
    if pending is None or pending.probe is None or not ids <= pending.probe:
        return _live(cfg, backend)
    try:
        res = pending.result()
    except ShimError as e:  # no answer in time: the listing would not answer either
        for line in e.lines:
            print(line, file=sys.stderr)
        return []
    live_ids = _probe_answer(res)
    if live_ids is not None and not (live_ids & ids):
        return []
    return _live(cfg, backend)


_PROBE_MAX = 500  # more ids than this: list the queue instead of naming them all to qstat -j
_JOB_NUMBER_RE = re.compile(r"^job_number:\s+(\d+)\s*$", re.M)


def _probe_answer(res: Any) -> set[int] | None:
    """The ids ``qstat -j <ids>`` found; None when its answer is not one of the two expected."""
    if res.returncode == 0:
        found = {int(x) for x in _JOB_NUMBER_RE.findall(res.stdout)}
        return found or None
    if res.returncode == 1 and "do not exist" in res.stderr and "job_number:" not in res.stdout:
        return set()
    return None


def _prefetch(qy: Query, ctx: Ctx, job_ids: set[int] | None, backend: Any, ev: Events | None) -> _Pending | None:
    """Start the qstat that the live part will likely need, while the file is read, if Grid Engine's
    own commands are what answers (not a replaced ``_live`` or backend): the listing of the queue
    (a time window; or -j of an sbatch job the job wrapper has not yet seen end), else for -j
    ``qstat -j`` about the ids sbatch did not submit. Whether it is needed is decided afterwards
    (_need_live); one not needed is stopped."""
    if _live is not _LIVE_QSTAT or (qy.states is not None and not (qy.states & LIVE_STATES)):
        return None
    from .. import backends
    from ..backends.gridengine import GridEngineBackend

    b = backend or backends.get(ctx.cfg)
    if not isinstance(b, GridEngineBackend):
        return None
    if job_ids is None or any(_running_maybe(ctx.submit(j), j, ev, ctx.owner(j))  # type: ignore[arg-type]
                              for j in job_ids):
        from ..backends import qstat

        return _Pending.start(b, list(qstat.QSTAT_ARGS))
    unsure = sorted(j for j in job_ids if ctx.submit(j) is None)
    if not unsure or len(unsure) > _PROBE_MAX:
        return None
    return _Pending.start(b, ["-j", ",".join(str(j) for j in unsure)], probe=set(unsure))


def _running_maybe(s: dict | None, job_id: int, ev: Events, owner: Any) -> bool:
    """An sbatch job (of ``owner``) with a task that has neither ended nor been cancelled, as far
    as the shim's events tell: most likely still pending or running."""
    if s is None:
        return False
    array = s.get("array")
    for t in ({int(x) for x in array} if array else {None}):
        if ev.get(job_id, t, "end", owner) is None and ev.get(job_id, t, "cancel", owner) is None:
            return True
    return False


class _Pending:
    """A qstat started ahead of time; ``result()`` is what ``backend.run`` would have returned."""

    def __init__(self, backend: Any, popen: Any, argv: list[str], args: list[str], timeout: float,
                 probe: set[int] | None):
        self.backend = backend
        self.popen = popen
        self.argv = argv
        self.args = args
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.probe = probe
        self.listing = probe is None

    @classmethod
    def start(cls, b: Any, args: list[str], probe: set[int] | None = None) -> _Pending | None:
        from .. import proc

        argv = b.argv("qstat", args)
        try:
            p = proc.popen(argv, stdin=proc.subprocess.DEVNULL, stdout=proc.subprocess.PIPE,
                           stderr=proc.subprocess.PIPE, env=dict(b.env))
        except OSError:
            return None  # the ordinary call reports it
        return cls(b, p, [str(a) for a in argv], args, b.timeout, probe)

    def result(self) -> Any:
        from .. import proc
        from ..errors import BackendUnavailable

        p = self.popen
        try:
            out, err = p.communicate(timeout=max(0.0, self.deadline - time.monotonic()))
        except proc.subprocess.TimeoutExpired:
            self.close()
            raise BackendUnavailable("slurm_load_jobs error: Unable to contact slurm controller "
                                     f"({self.argv[0]}: no answer within {self.timeout:g} s)") from None
        self.popen = None
        return proc.Result(tuple(self.argv), p.returncode, out.decode("utf-8", "replace"),
                           err.decode("utf-8", "replace"))

    def close(self) -> None:
        """Stop it if it still runs (its answer is not needed), without waiting for anything it
        started: its pipes are closed, the process reaped."""
        p = self.popen
        if p is None:
            return
        self.popen = None
        if p.poll() is None:
            p.kill()
        p.stdout.close()
        p.stderr.close()
        p.wait()


def _live_listed(cfg: Any, pending: _Pending) -> list:
    """_live, with the queue listing started earlier as its qstat's answer."""
    try:
        res = pending.result()
    except ShimError as e:  # no answer in time: as _live reports it
        for line in e.lines:
            print(line, file=sys.stderr)
        return []
    if res.returncode == 0 and "<job_info" in res.stdout and "<job_list" not in res.stdout:
        return []  # nothing queued at all: nothing to read
    return _live(cfg, _Prefetched(pending.backend, pending.args, res))


class _Prefetched:
    """The backend, except that the queue listing already made is the answer to its first
    ``qstat`` with the same arguments."""

    def __init__(self, real: Any, args: list[str], result: Any):
        self._real = real
        self._args: list[str] | None = args
        self._result = result

    def run(self, tool: str, args: Any, *, input: Any = None, timeout: float | None = None) -> Any:
        if self._args is not None and tool == "qstat" and list(args) == self._args and input is None:
            self._args = None
            return self._result
        return self._real.run(tool, args, input=input, timeout=timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _read_accounting(path: str, cfg: Any, job_ids: set[int] | None, users: set[str] | None,
                     ge_names: set[str] | None, not_before: int | None, not_after: int | None,
                     backend: Any) -> list[qacct.Record]:
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        if os.environ.get(qacct.ENV):
            raise error(f"{path}: no such file") from None
        return _qacct_fallback(cfg, job_ids, users, backend, path)
    except (PermissionError, IsADirectoryError):
        return _qacct_fallback(cfg, job_ids, users, backend, path)
    with f:  # read block by block, never whole
        return qacct.scan(f, jobs=job_ids, owners=users, ge_names=ge_names, not_before=not_before,
                          not_after=not_after)


def _qacct_fallback(cfg: Any, job_ids: set[int] | None, users: set[str] | None, backend: Any,
                    path: str) -> list[qacct.Record]:
    """The accounting file is not readable here: ask qacct (slower, same data)."""
    from .. import backends

    b = backend or backends.get(cfg)
    out: list[qacct.Record] = []
    calls: list[list[str]] = []
    if job_ids is not None:
        calls = [qacct.qacct_args(j) for j in sorted(job_ids)]
    elif users is not None and len(users) == 1:
        calls = [qacct.qacct_args(owner=next(iter(users)))]
    else:
        calls = [qacct.qacct_args()]
    for args in calls:
        try:
            res = b.run("qacct", args, timeout=120)
        except ShimError:
            return out
        if res.returncode == 0:
            out.extend(qacct.parse_qacct(res.stdout))
    return out


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
