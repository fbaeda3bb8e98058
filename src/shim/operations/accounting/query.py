"""What ``sacct`` is asked for: the selection grammar (states, job ids, users, groups, ranges, time
window) and the filter that decides whether a row is shown (``match``).

The grammar follows Slurm 22.05's sacct (``src/sacct/options.c``): comma lists with an optional
surrounding quote, ``N``, ``N_k``, ``N+h`` and ``N.step`` job selections (jobids.sacct_step), users and groups by
name or id, and the default time window (midnight today, or the whole history for ``-j``).
"""

from __future__ import annotations

import grp
import time

from ...errors import ShimError, for_command
from ...slurm.timespec import TimeSpecError, midnight, parse_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ...slurm.options.sources import Options
    from ...slurm.render.sacct import Row

PROG = "sacct"


def fatal(msg: str) -> ShimError:
    return ShimError(f"{PROG}: fatal: {msg}", code=1)


error = for_command(PROG)  # Slurm's "<prog>: error: ..." (errors.command_error)


def ended_states() -> frozenset[str]:
    """The ended states of Slurm's one state table (model.SLURM_STATES; loaded only when -s asks
    for states: the table's module costs the start of every sacct)."""
    from ...slurm.model import SLURM_STATES

    return frozenset(s.long for s in SLURM_STATES if s.ended)


LIVE_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "REQUEUED"})  # states a qstat listing can add


def parse_states(text: str) -> set[str]:
    """-s: state names or compact codes, any case (Slurm's job_state_num, model.state_named)."""
    from ...slurm.model import state_named

    items = split_list(text)
    out: set[str] = set()
    for i, item in enumerate(items):
        st = state_named(item)
        if st is None:
            # Slurm quotes the name only when it is the last of the list
            raise fatal(f"unrecognized job state value '{item}'" if i == len(items) - 1
                        else f"unrecognized job state value {item}")
        out.add(st.long)
    return out


def split_list(text: str) -> list[str]:
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


def parse_jobs(text: str) -> list[JobSel]:
    """-j: Slurm's comma list (split_list), each item read by the one grammar (jobids.sacct_step,
    slurm_parse_step_str): ``N``, ``N_k``, ``N.step``, ``N+h``; no bracket lists (22.05's sacct
    splits at every comma and refuses ``N_[...]``). Grid Engine has no hetjobs: ``N+h`` is job N."""
    from ...slurm.jobids import JobIdError, sacct_step

    out: list[JobSel] = []
    for item in split_list(text):
        try:
            j = sacct_step(item)
        except JobIdError as e:
            raise fatal(str(e)) from None
        out.append(JobSel(j.job, j.task, j.step))
    return out


def resolve_users(text: str) -> set[str] | None:
    """-u: names or uids (users.name_of) -> user names; "-1" means everyone (None)."""
    from ...slurm.users import name_of

    if text == "-1":
        return None
    out: set[str] = set()
    for item in split_list(text):
        name = name_of(item)
        if name is None:
            raise ShimError(f"Invalid user id: {item}", code=1)
        out.add(name)
    return out


def resolve_groups(text: str) -> set[str]:
    out: set[str] = set()
    for item in split_list(text):
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
# the selection


class Selection:
    """What to show: which jobs (ids, users, groups, names, states, ...), the time window, and
    whether steps and earlier runs are shown."""

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
        self.ended: frozenset[str] = frozenset()  # the ended states of Slurm's table (with states)
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
        self.array = False  # --array (24.11): a pending array's tasks on rows of their own
        self.expand = False  # --expand-patterns (24.11): StdOut, StdErr and StdIn expanded
        self.now = time.time()
        self._sels: dict[int, list[JobSel]] | None = None

    def sels(self, job: int) -> list[JobSel]:
        """The -j selections naming this job (jobs must be set)."""
        if self._sels is None:
            self._sels = {}
            for s in self.jobs or ():
                self._sels.setdefault(s.job, []).append(s)
        return self._sels.get(job, [])


def build_query(o: Options, uid: int, me: str) -> Selection:
    qy = Selection()
    qy.now = time.time()
    if o.jobs:
        qy.jobs = []
        for text in o.jobs:
            qy.jobs.extend(parse_jobs(text))
    if o.state:
        qy.states = parse_states(o.state)
        qy.ended = ended_states()
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
        qy.accounts = set(split_list(o.accounts))
    if o.partition:
        qy.partitions = set(split_list(o.partition))
    if o.qos:
        qy.qos = set(split_list(o.qos))
    if o.name:
        qy.names = set(split_list(o.name))
    if o.nodelist:
        from ...slurm.hostlist import expand

        qy.nodes = set(expand(o.nodelist))
    qy.array = bool(o.get("array"))
    qy.expand = bool(o.get("expand_patterns"))
    if o.reason:
        qy.reasons = {r.lower() for r in split_list(o.reason)}
    if o.ncpus:
        qy.ncpus = _range(o.ncpus, "cpu")
    if o.nnodes:
        qy.nnodes = _range(o.nnodes, "node")
    if o.timelimit_min:
        from ...slurm.options.values import time_minutes

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
# the filter


def in_window(r: Row, qy: Selection) -> bool:
    """Whether the row falls in the time window as Slurm's sacct decides it: with -s, each state
    has its own rule (pending: eligible before the end and waiting past the start; running or
    suspended: overlapping the window; an ended state: ending inside it); without -s, eligible by
    the end and not ended before the start."""
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
            elif want in qy.ended:
                if st == want and r.end and S <= r.end <= E:
                    return True
            elif st == want and r.start and ((S <= r.start <= E) or (r.end and S <= r.end <= E) or (
                    r.start <= S and (not r.end or r.end >= E))):
                return True
        return False
    if not r.eligible or r.eligible > E:  # Slurm: eligible < end; a job of this very second counts too
        return False
    return not r.end or r.end >= S


def match(r: Row, qy: Selection) -> bool:
    """Whether a job row passes every filter of the selection, the time window last."""
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
    return in_window(r, qy)


def _job_selected(r: Row, sels: list[JobSel]) -> bool:
    """Whether one of the selections (those of the row's job, or all) names the row."""
    for s in sels:
        if s.job != r.job_id:
            continue
        if s.task is not None and r.task != s.task and not _pending_covers(r, s.task):
            continue
        return True
    return False


def _pending_covers(r: Row, task: int) -> bool:
    return task in (r.extra.get("indices") or ())


def step_selected(step: Row, sels: list[JobSel] | None) -> bool | None:
    """None: no step was asked for this job (show the job and its steps); True/False otherwise."""
    if not sels:
        return None
    asked = [s for s in sels if s.job == step.job_id and (s.task is None or s.task == step.task)]
    if not asked or all(s.step is None for s in asked):
        return None
    return any(s.step == step.step for s in asked)


