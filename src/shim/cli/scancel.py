"""``scancel``: cancel or signal jobs through ``qdel`` / ``qmod`` (few calls for many jobs).

Grid Engine can end a job (qdel: SIGKILL, or the shim wrapper's SIGTERM-then-SIGKILL for jobs sent
with ``-notify``) and stop or continue it (``qmod -sj``/``-usj``); it cannot deliver any other
signal, so ``--signal`` accepts KILL, TERM, INT, HUP, QUIT (all: cancel), STOP and CONT, and
refuses the rest with an error. Every cancelled job or array task gets a "cancel" event in the
shim's state directory: Grid Engine keeps no record of pending jobs it deleted, sacct needs one.
"""

from __future__ import annotations

import os
import re
import signal as _signal
import sys
from dataclasses import dataclass, field

from .. import jobs, state
from ..errors import ShimError
from ..model import JobRecord
from ..options.getopt import Table, getopt
from ..options.sources import Options, apply, env_parsed
from ..options.spec import Arity, Fate, OptionSpec

PROG = "scancel"
N, R = Arity.NONE, Arity.REQUIRED
ACCESS_DENIED_RC = 210  # ESLURM_ACCESS_DENIED (2002) as an exit status
QDEL_BATCH = 400  # ids per qdel call


def _o(long: str, short: str | None = None, arity: Arity = R, env: str = "", dest: str = "", help: str = "",
       fate: Fate = Fate.MAP, count: bool = False) -> OptionSpec:
    return OptionSpec(long, short, arity, commands=frozenset({PROG}), env={PROG: tuple(env.split())} if env else {},
                      dest=dest, help=help, fate=fate, count=count)


OPTIONS: tuple[OptionSpec, ...] = (
    _o("account", "A", env="SCANCEL_ACCOUNT", help="act only on jobs charging this account"),
    _o("batch", "b", N, env="SCANCEL_BATCH", help="signal batch shell for specified job"),
    _o("clusters", "M", env="SLURM_CLUSTERS", help="clusters to issue commands to (this one)"),
    _o("cluster", None, dest="clusters"),
    _o("cron", "c", N, help="cancel a cron job (accepted)"),
    _o("ctld", None, N, env="SCANCEL_CTLD", help="send the request through the controller (accepted)"),
    _o("full", "f", N, env="SCANCEL_FULL", help="signal batch shell and all steps for specified job"),
    _o("help", None, N, fate=Fate.LOCAL, help="show this help message"),
    _o("hurry", "H", N, env="SCANCEL_HURRY", help="avoid burst buffer stage out (accepted)"),
    _o("interactive", "i", N, env="SCANCEL_INTERACTIVE", help="require response from user for each job"),
    _o("jobname", None, dest="name"),
    _o("me", None, N, help="act only on jobs of the calling user"),
    _o("name", "n", env="SCANCEL_NAME", help="act only on jobs with this name"),
    _o("nodelist", "w", help="act only on jobs on these nodes"),
    _o("partition", "p", env="SCANCEL_PARTITION", help="act only on jobs in this partition"),
    _o("qos", "q", env="SCANCEL_QOS", help="act only on jobs with this quality of service"),
    _o("quiet", "Q", N, help="disable warnings"),
    _o("reservation", "R", help="act only on jobs with this reservation (Grid Engine has none)"),
    _o("sibling", None, help="remove an active sibling job from a federated job (accepted)"),
    _o("signal", "s", help="signal to send to job, default is SIGKILL"),
    _o("state", "t", env="SCANCEL_STATE", dest="states", help="act only on jobs in this state"),
    _o("states", None, dest="states"),
    _o("usage", None, N, fate=Fate.LOCAL, help="display brief usage message"),
    _o("user", "u", env="SCANCEL_USER", help="act only on jobs of this user"),
    _o("verbose", "v", N, count=True, env="SCANCEL_VERBOSE", help="verbosity level"),
    _o("version", "V", N, fate=Fate.LOCAL, help="output version information and exit"),
    _o("wckey", None, env="SCANCEL_WCKEY", help="act only on jobs with this workload characterization key"),
)
TABLE = Table(PROG, OPTIONS, error_code=1)

USAGE = """\
Usage: scancel [-A account] [--batch] [--full] [--interactive] [-n job_name]
               [-p partition] [-Q] [-q qos] [-R reservation] [-s signal | integer]
               [-t PENDING | RUNNING | SUSPENDED] [--usage] [-u user_name]
               [--hurry] [-V] [-v] [-w hosts...] [--wckey=wckey]
               [job_id[_array_id][.step_id]]
"""

CANCEL_SIGNALS = {_signal.SIGKILL, _signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP, _signal.SIGQUIT}
STATE_NAMES = {"PENDING": "PENDING", "PD": "PENDING", "RUNNING": "RUNNING", "R": "RUNNING",
               "SUSPENDED": "SUSPENDED", "S": "SUSPENDED"}


def help_text() -> str:
    lines = ["Usage: scancel [OPTIONS] [job_id[_array_id][.step_id]]"]
    for s in OPTIONS:
        if not s.help:
            continue
        short = f"-{s.short}, " if s.short else "    "
        arg = "" if s.arity is N else "=value"
        lines.append(f"  {short}--{s.long}{arg}".ljust(34) + s.help)
    lines += ["", "Help options:", "  --help                          show this help message",
              "  --usage                         display brief usage message", ""]
    return "\n".join(lines)


def error(msg: str, code: int = 1) -> ShimError:
    return ShimError(f"{PROG}: error: {msg}", code=code)


@dataclass
class Target:
    """One job id as given: a whole job, some array tasks (Slurm indices), or a step."""

    text: str
    job_id: int
    tasks: list[int] | None = None  # None: the whole job
    step: str | None = None


_ID = re.compile(r"^(\d+)(?:_(\d+|\[[0-9,\-%]+\]))?(?:\.(\w+))?$")


def parse_target(text: str) -> Target:
    m = _ID.match(text.strip())
    if not m or int(m.group(1)) == 0:
        raise error(f"Invalid job id {text}")
    job = int(m.group(1))
    tasks = None
    if m.group(2):
        t = m.group(2)
        if t.startswith("["):
            tasks = []
            for part in t[1:-1].split("%")[0].split(","):
                if not part:
                    continue
                a, dash, b = part.partition("-")
                if not a.isdigit() or (dash and not b.isdigit()):
                    raise error(f"Invalid job id {text}")
                tasks.extend(range(int(a), int(b if dash else a) + 1))
        else:
            tasks = [int(t)]
    return Target(text.strip(), job, tasks, m.group(3))


def parse_signal(text: str) -> int:
    t = text.strip().upper()
    if t.isdigit():
        n = int(t)
        if 0 < n < 65:
            return n
        raise error(f"Unknown job signal: {text}")
    if t.startswith("SIG"):
        t = t[3:]
    try:
        return int(getattr(_signal, "SIG" + t))
    except AttributeError:
        raise error(f"Unknown job signal: {text}") from None


def signal_name(n: int) -> str:
    try:
        return _signal.Signals(n).name[3:]
    except ValueError:
        return str(n)


def current_user() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


@dataclass
class Plan:
    """What to do to one job: the records hit and the Grid Engine ids to name."""

    job_id: int
    label: str  # Slurm id as shown in messages
    records: list[JobRecord] = field(default_factory=list)
    tasks: list[int] | None = None  # Slurm indices, None: the whole job
    ge_ids: list[str] = field(default_factory=list)
    owner: str = ""


def ge_task_numbers(cfg, job_id: int, indices: list[int], rec: JobRecord | None) -> list[int]:
    """Slurm array indices -> Grid Engine task numbers (the index list of the submit record of
    the job's owner, as Grid Engine reports the owner: nobody else's record maps the tasks)."""
    s = jobs.submit_record(cfg, rec) if rec is not None else None
    array = (s or {}).get("array") or []
    if not array:
        return list(indices)
    pos = {int(v): i + 1 for i, v in enumerate(array)}
    return [pos[i] for i in indices if i in pos]


def task_ranges(job_id: int, tasks: list[int]) -> list[str]:
    out = []
    xs = sorted(set(tasks))
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(f"{job_id}.{xs[i]}" if i == j else f"{job_id}.{xs[i]}-{xs[j]}")
        i = j + 1
    return out


def parse_args(argv: list[str]) -> tuple[Options, list[str]]:
    parsed, positional = getopt(TABLE, argv, stop_at_positional=False)
    opts = Options()
    apply(opts, TABLE, env_parsed(TABLE, os.environ), "env")
    apply(opts, TABLE, parsed, "cli")
    ids: list[str] = []
    for word in positional:
        if "[" in word:  # 12_[1-3,5]: the commas belong to the index list
            ids.append(word)
        else:
            ids.extend(w for w in re.split(r"[\s,]+", word) if w)
    return opts, ids


def main(argv: list[str]) -> int:
    opts, words = parse_args(argv)
    if opts.help:
        sys.stdout.write(help_text())
        return 0
    if opts.usage:
        sys.stdout.write(USAGE)
        return 0
    if opts.version:
        sys.stdout.write("slurm-wlm 22.05.8\n")
        return 0
    sig = parse_signal(opts.signal) if opts.signal else None
    targets = [parse_target(w) for w in words]
    states = None
    if opts.states:
        states = set()
        for tok in opts.states.split(","):
            st = STATE_NAMES.get(tok.strip().upper())
            if st is None:
                raise ShimError(f"{PROG}: error: Invalid job state specified: {tok}",
                                f"{PROG}: error: Valid job states are PENDING, RUNNING and SUSPENDED", code=1)
            states.add(st)
    users = None
    if opts.user:
        import pwd

        users = set()
        for u in opts.user.split(","):
            try:
                users.add(pwd.getpwuid(int(u)).pw_name if u.isdigit() else pwd.getpwnam(u).pw_name)
            except (KeyError, ValueError):
                raise error(f"Invalid user name: {u}") from None
    if opts.me:
        users = (users or set()) | {current_user()}
    filters = any(x is not None for x in (states, users, opts.name, opts.partition, opts.account, opts.qos,
                                          opts.nodelist, opts.reservation, opts.wckey))
    if not targets and not filters:
        raise error("No job identification provided")

    from ..siteconf import get

    cfg = get()
    jl = jobs.list_jobs(cfg, ended=bool(targets))
    by_job: dict[int, list[JobRecord]] = {}
    for r in jl.records:
        by_job.setdefault(r.job_id, []).append(r)

    def active(rs: list[JobRecord]) -> list[JobRecord]:
        return [r for r in rs if not r.extra.get("ended") and r.state in jobs.ACTIVE_STATES]

    def keep(r: JobRecord) -> bool:
        if states is not None and r.state not in states:
            return False
        if users is not None and r.user not in users:
            return False
        if opts.name and r.name not in opts.name.split(","):
            return False
        if opts.partition and r.partition not in opts.partition.split(","):
            return False
        if opts.account and (jobs.detail(r, cfg).account or "").lower() not in opts.account.lower().split(","):
            return False
        if opts.qos and (jobs.detail(r, cfg).qos or "normal").lower() not in opts.qos.lower().split(","):
            return False
        if opts.nodelist:
            from ..hostlist import expand

            if not set(r.nodes) & set(expand(opts.nodelist)):
                return False
        if opts.reservation or opts.wckey:
            return False
        return True

    verbose = bool(opts.verbose)
    quiet = bool(opts.quiet)
    strict = sig is not None or bool(opts.batch)  # errors on unknown ids count only then
    rc = 0
    plans: list[Plan] = []
    messages: list[str] = []

    if targets:
        for t in targets:
            if t.step is not None:
                # Grid Engine has no job steps: there is nothing smaller than the job to signal
                if verbose:
                    messages.append(f"{PROG}: Terminating StepId={t.job_id}.{t.step}")
                continue
            rs = by_job.get(t.job_id, [])
            live = [r for r in active(rs) if keep(r)]
            label = t.text if t.tasks is None or len(t.tasks) != 1 else f"{t.job_id}_{t.tasks[0]}"
            if verbose:
                messages.append(f"{PROG}: Terminating job {label}")
            if t.tasks is not None:
                hit: list[JobRecord] = []
                for r in live:
                    if r.array_task is not None and r.array_task in t.tasks:
                        hit.append(r)
                    elif r.array_pending is not None and set(r.extra.get("pending_indices", ())) & set(t.tasks):
                        hit.append(r)
                live = hit
            if not live:
                if t.job_id in jl.known and rs:
                    why = "Job/step already completing or completed"
                else:
                    why = "Invalid job id specified"
                if filters and rs and active(rs):
                    continue  # filtered out: not an error in Slurm
                if verbose or strict:
                    messages.append(f"{PROG}: error: Kill job error on job id {label}: {why}")
                if strict:
                    rc = max(rc, 1)
                continue
            plans.append(Plan(t.job_id, label, live, t.tasks, owner=live[0].user))
    else:
        seen: dict[int, Plan] = {}
        for r in jl.records:
            if r.extra.get("ended") or r.state not in jobs.ACTIVE_STATES or not keep(r):
                continue
            p = seen.get(r.job_id)
            if p is None:
                p = seen[r.job_id] = Plan(r.job_id, str(r.job_id), [], None, owner=r.user)
                plans.append(p)
            p.records.append(r)
        # a filter that hits only some tasks of an array cancels just those tasks
        for p in plans:
            whole = by_job.get(p.job_id, [])
            if len(active(whole)) != len(p.records) and any(r.is_array for r in p.records):
                idx: list[int] = []
                for r in p.records:
                    idx.extend([r.array_task] if r.array_task is not None else r.extra.get("pending_indices", []))
                p.tasks = idx

    if opts.interactive:
        plans = [p for p in plans if _confirm(p)]

    for m in messages:
        if not (quiet and ": error: " in m):
            print(m, file=sys.stderr)
    if not plans:
        return rc

    for p in plans:
        if p.tasks is None:
            p.ge_ids = [str(p.job_id)]
        else:
            ge = ge_task_numbers(cfg, p.job_id, p.tasks, p.records[0])
            p.ge_ids = task_ranges(p.job_id, ge)

    if sig is None or sig in CANCEL_SIGNALS:
        tool, extra = "qdel", []
    elif sig == _signal.SIGSTOP or sig == _signal.SIGTSTP:
        tool, extra = "qmod", ["-sj"]
    elif sig == _signal.SIGCONT:
        tool, extra = "qmod", ["-usj"]
    else:
        for p in plans:
            print(f"{PROG}: error: Kill job error on job id {p.label}: Grid Engine cannot deliver signal "
                  f"{signal_name(sig)} (only KILL, TERM, INT, HUP, QUIT, STOP and CONT)", file=sys.stderr)
        return 1

    from .. import backends

    backend = backends.get(cfg)
    outcome: dict[int, str] = {}  # job id -> "denied" | "gone"
    ids = [g for p in plans for g in p.ge_ids]
    for i in range(0, len(ids), QDEL_BATCH):
        res = backend.run(tool, [*extra, *ids[i:i + QDEL_BATCH]])
        for line in (res.stdout + "\n" + res.stderr).splitlines():
            m = re.search(r'privileges to \w+ the job(?:-array task)? "?(\d+)', line) or \
                re.search(r'must be manager or owner .*?(\d+)', line)
            if m:
                outcome[int(m.group(1))] = "denied"
                continue
            m = re.search(r'job "?(\d+)"? does not exist', line) or re.search(r'job "(\d+)" task "\d+" does not exist', line)
            if m:
                outcome.setdefault(int(m.group(1)), "gone")

    me = current_user()
    uid = os.getuid()
    unrecorded: list[str] = []
    for p in plans:
        what = outcome.get(p.job_id)
        if what == "denied":
            if not quiet:
                print(f"{PROG}: error: Kill job error on job id {p.label}: Access/permission denied", file=sys.stderr)
            rc = max(rc, ACCESS_DENIED_RC)
            continue
        if what == "gone":
            if (verbose or strict) and not quiet:
                print(f"{PROG}: error: Kill job error on job id {p.label}: Invalid job id specified", file=sys.stderr)
            if strict:
                rc = max(rc, 1)
            continue
        written = True
        if tool == "qdel":
            written = _record_cancels(cfg, p, me, uid)
        elif extra == ["-sj"]:
            sub = p.records[0].extra.get("submit_ts") if p.records else None
            for t in (p.tasks or [None]):
                ev = {"uid": uid, "user": me, "owner": p.owner}
                if sub:
                    ev["sub"] = sub
                written = state.record_event(cfg, p.job_id, t, "suspend", ev) and written
        if not written:
            unrecorded.append(p.label)
    if unrecorded:  # Grid Engine has acted: the command succeeded, only the shim's note is missing
        print(f"{PROG}: warning: could not record the {'cancel' if tool == 'qdel' else 'suspend'} of job "
              f"{', '.join(unrecorded)} in {cfg.cluster.state_dir}", file=sys.stderr)
    return rc


def _record_cancels(cfg, p: Plan, user: str, uid: int) -> bool:
    """One "cancel" event per job, or per array task (Slurm index), with the state it was in, in
    the caller's own directory (root's for an admin: readers take it as root's word). False when
    one could not be written."""
    wanted = set(p.tasks) if p.tasks is not None else None
    ok = True
    for r in p.records:
        base = {"uid": uid, "user": user, "was": r.state, "owner": r.user, "name": r.name,
                "partition": r.partition, "cpus": r.num_cpus}
        if r.extra.get("submit_ts"):
            base["sub"] = r.extra["submit_ts"]  # Grid Engine's submission time: ties it to this job
        if r.nodes:
            base["node"] = r.nodes[0]
        if r.start_time is not None:
            base["start"] = r.start_time.timestamp()
        if r.array_task is not None:
            if wanted is None or r.array_task in wanted:
                ok = state.record_event(cfg, p.job_id, r.array_task, "cancel", base) and ok
        elif r.array_pending is not None:
            for i in r.extra.get("pending_indices", ()):
                if wanted is None or i in wanted:
                    ok = state.record_event(cfg, p.job_id, i, "cancel", base) and ok
        else:
            ok = state.record_event(cfg, p.job_id, None, "cancel", base) and ok
    return ok


def _confirm(p: Plan) -> bool:
    r = p.records[0]
    sys.stdout.write(f"Cancel job_id={p.label} name={r.name} partition={r.partition} [y/n]? ")
    sys.stdout.flush()
    answer = sys.stdin.readline().strip().lower()
    return answer.startswith("y")

