"""Grid Engine's operations as pure functions: what to run, and how to read the answer.

Each operation has an argv builder, ``<op>(...) -> (tool, args)``, and, where the answer carries
more than success, a parser of Grid Engine's answer. Nothing here runs a process or reads a file:
``GridEngine`` (``gridengine/engine.py``) pairs them with a transport, and the unit
tests check both halves on recorded answers.

The q* command names appear here and in the transports only (a unit test forbids them in
``cli/``).
"""

from __future__ import annotations

QDEL_BATCH = 500  # job ids per qdel/qmod call: one call for many jobs, but argv stays well under ARG_MAX

Call = tuple  # (tool, args): what a transport runs


# --- jobs: submit, signal, hold, release, suspend, resume, requeue, alter ------------------------

def submit(args: list[str]) -> Call:
    """qsub with the translator's argv; the job script comes on stdin."""
    return "qsub", list(args)


def parse_job_id(stdout: str) -> int:
    """``qsub -terse``'s answer: ``5`` or, for an array, ``5.1-3:1``. ValueError if it is neither."""
    first = stdout.strip().splitlines()[0] if stdout.strip() else ""
    return int(first.split(".")[0])


def cancel(ids: list[str]) -> Call:
    """End jobs or tasks (``5``, ``5.1-3``): qdel. Jobs sent with -notify get SIGUSR2 first, which
    the shim's job wrapper turns into Slurm's SIGTERM-then-SIGKILL."""
    return "qdel", list(ids)


def suspend(ids: list[str]) -> Call:
    return "qmod", ["-sj", *ids]


def resume(ids: list[str]) -> Call:
    return "qmod", ["-usj", *ids]


def requeue(ids: list[str]) -> Call:
    return "qmod", ["-rj", *ids]


def hold(ids: list[str], kind: str = "") -> Call:
    """qhold: the user hold, or the hold list ``kind`` (``o``: an operator's, which the owner's qrls
    leaves in place)."""
    return "qhold", [*(["-h", kind] if kind else []), *ids]


def release(ids: list[str], kind: str = "") -> Call:
    """qrls: the user hold, or the hold list ``kind`` (``uo``: both, as root's scontrol release)."""
    return "qrls", [*(["-h", kind] if kind else []), *ids]


def alter(job: str, args: list[str]) -> Call:
    """qalter with translated changes (``-l h_rt=..``, ``-q``, ``-N``, ``-p``, ``-A``, ``-a``)."""
    return "qalter", [*args, job]


# Slurm's signals -> what Grid Engine can do with them: end the job (qdel: SIGKILL, or the shim's
# wrapper's SIGTERM-then-SIGKILL for jobs sent with -notify), stop it, continue it. No other signal
# can be delivered. Numbers are Linux's (signal.SIG*).
CANCEL, SUSPEND, RESUME = "cancel", "suspend", "resume"
SIGNAL_OPERATIONS = {9: CANCEL, 15: CANCEL, 2: CANCEL, 1: CANCEL, 3: CANCEL,  # KILL TERM INT HUP QUIT
                     19: SUSPEND, 20: SUSPEND, 18: RESUME}  # STOP TSTP CONT


def signal_operation(sig: int | None) -> str | None:
    """The operation that delivers Slurm signal ``sig`` (None: scancel's default, SIGKILL), or None
    when Grid Engine cannot deliver it."""
    return CANCEL if sig is None else SIGNAL_OPERATIONS.get(sig)


def task_ids(job: int, tasks: list[int]) -> list[str]:
    """Grid Engine's ids for some tasks of an array job: ``5.1-3:1``-style ranges, one per run of
    consecutive task numbers (jobids.runs; a task list Grid Engine takes in one argument per run)."""
    from ..slurm.jobids import runs

    return [f"{job}.{a}" if a == b else f"{job}.{a}-{b}" for a, b in runs(tasks)]


def batches(ids: list[str], size: int = QDEL_BATCH) -> list[list[str]]:
    return [ids[i:i + size] for i in range(0, len(ids), size)] or [[]]


# --- queries --------------------------------------------------------------------------------------

def exists(job: int | str) -> Call:
    """Is the job still known to qmaster (rc 0) — the cheapest question (sbatch --wait, salloc)."""
    return "qstat", ["-j", str(job)]


def detail(ids: list[int | str]) -> Call:
    """qstat -j's XML for some jobs (working directory, paths, script, begin time, ...)."""
    return "qstat", ["-j", ",".join(map(str, ids)), "-xml"]


def detail_text(ids: list[int | str]) -> Call:
    """qstat -j's plain text, where its scheduling messages are what is wanted."""
    return "qstat", ["-j", ",".join(map(str, ids))]


def parse_found_jobs(returncode: int, stdout: str, stderr: str) -> set[int] | None:
    """``qstat -j <ids>``'s plain answer: the ids it found (rc 0, a ``job_number:`` line each), or
    none (rc 1, "Following jobs do not exist"); None when the answer is neither of those two."""
    if returncode == 0:
        found = {int(line.split()[1]) for line in stdout.splitlines()
                 if line.startswith("job_number:") and len(line.split()) == 2 and line.split()[1].isdigit()}
        return found or None
    if returncode == 1 and "do not exist" in stderr and "job_number:" not in stdout:
        return set()
    return None


def parse_job_owners(returncode: int, stdout: str, stderr: str) -> dict[int, str] | None:
    """``qstat -j <ids>``'s plain answer: {job number: owner} of the jobs it found (a block of
    ``job_number:`` then ``owner:`` lines each; rc 0 even when some ids were not found, and those
    are absent), {} when it found none (rc 1, "Following jobs do not exist"); None when the answer
    is neither (the caller then asks the way it did before)."""
    if returncode == 0:
        out: dict[int, str] = {}
        job = None
        for line in stdout.splitlines():
            if line.startswith("job_number:"):
                f = line.split()
                job = int(f[1]) if len(f) == 2 and f[1].isdigit() else None
            elif line.startswith("owner:") and job is not None:
                f = line.split()
                if len(f) == 2:
                    out[job] = f[1]
                job = None
        return out or None
    if returncode == 1 and "do not exist" in stderr and "job_number:" not in stdout:
        return {}
    return None


def user_jobs(user: str) -> Call:
    return "qstat", ["-u", user]


def parse_user_job_ids(stdout: str) -> list[int]:
    """``qstat -u user``'s table: the job numbers (two header lines, then one row per job or task)."""
    ids = {int(f[0]) for f in (line.split() for line in stdout.splitlines()[2:]) if f and f[0].isdigit()}
    return sorted(ids)


def running_tasks(requests: bool = False) -> Call:
    """Every running task with its queue instances (srun finds its allocation's hosts); with
    ``requests``, each with its hard resource requests too (``-r``: the job wrapper's GPU claims)."""
    return "qstat", ["-g", "t", "-s", "r", "-u", "*", *(["-r"] if requests else []), "-xml"]


def parse_running_hosts(xml: str, job_id: int, ge_task: str, total: int | None) -> list[tuple[str, int]]:
    """running_tasks' answer -> the hosts and slots of running job ``job_id`` (task ``ge_task``,
    or "undefined"): ``qstat -g t -s r -u '*' -xml``: one line per slot
    (MASTER and SLAVE); a parallel environment with job_is_first_task FALSE adds a MASTER line
    that holds no slot, which the job's known slot count (``total``) tells apart."""
    import xml.etree.ElementTree as ET

    counts: dict[str, int] = {}
    master = None
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return []
    for jl in root.iter("job_list"):
        if (jl.findtext("JB_job_number") or "").strip() != str(job_id):
            continue
        tasks = (jl.findtext("tasks") or "").strip()
        if ge_task.isdigit() and tasks and tasks != ge_task:
            continue
        host = (jl.findtext("queue_name") or "").rpartition("@")[2].split(".")[0]
        if not host:
            continue
        counts[host] = counts.get(host, 0) + 1
        if (jl.findtext("master") or "").strip() == "MASTER" and master is None:
            master = host
    if total is not None and master is not None and sum(counts.values()) == total + 1:
        counts[master] -= 1
        if counts[master] == 0:
            del counts[master]
    order = [master] if master in counts else []
    order += [h for h in counts if h != master]
    return [(h, counts[h]) for h in order]


def parse_running_requests(xml: str, host: str) -> list[tuple[str, int, dict[str, str]]] | None:
    """``running_tasks(requests=True)``'s answer -> the running tasks on ``host`` (a short name),
    one per slot line: (owner, job number, {complex: value} of its hard requests). None when the
    answer is not XML."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return None
    out = []
    for jl in root.iter("job_list"):
        if (jl.findtext("queue_name") or "").rpartition("@")[2].split(".")[0] != host:
            continue
        try:
            job = int((jl.findtext("JB_job_number") or "").strip())
        except ValueError:
            continue
        out.append(((jl.findtext("JB_owner") or "").strip(), job,
                    {hr.get("name"): hr.text or "0" for hr in jl.iter("hard_request")}))
    return out


def hosts(args: list[str] | None = None) -> Call:
    """qhost (``-xml`` by default; sinfo passes qhost.qhost_args)."""
    return "qhost", list(args) if args is not None else ["-xml"]


def ping() -> Call:
    """A question every qmaster answers quickly and that touches no job (scontrol ping)."""
    return "qstat", ["-u", "nobody-slurm-shim-ping"]


def accounting(args: list[str]) -> Call:
    return "qacct", list(args)


# --- advance reservations (Slurm's --reservation) ------------------------------------------------

def reservations() -> Call:
    """Every advance reservation, any owner's (id, name, owner, state, times): ``qrstat -u '*'``."""
    return "qrstat", ["-u", "*", "-xml"]


def reservation_detail(ids: list[str]) -> Call:
    """The named reservations in full (their ``acl_list``/``xacl_list`` besides the summary)."""
    return "qrstat", ["-ar", ",".join(ids), "-xml"]


def parse_reservations(xml: str) -> list[dict]:
    """qrstat -xml's ``ar_summary`` elements as dicts: id, name, owner, state (``r`` running,
    ``w`` waiting, ``E``/``x``/...), start/end (as Grid Engine writes them), acl and xacl (user or
    ``@access_list`` words). Unknown ids (``ar_unknown``) and a text that is not XML give []."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return []
    out = []
    for el in root.iter("ar_summary"):
        ar = {k: (el.findtext(k) or "").strip() for k in ("id", "name", "owner", "state", "start_time", "end_time")}
        for key in ("acl", "xacl"):
            holder = el.find(f"{key}_list")
            ar[key] = [a.get("user") or (a.text or "").strip() for a in holder] if holder is not None else []
        out.append(ar)
    return out


# --- configuration --------------------------------------------------------------------------------

def exec_hosts() -> Call:
    return "qconf", ["-sel"]


def parse_exec_hosts(stdout: str) -> set[str]:
    """``qconf -sel``: the execution hosts, by full and by short name."""
    names = stdout.split()
    return {h.split(".")[0] for h in names} | set(names)


def exec_host(host: str) -> Call:
    return "qconf", ["-se", host]


def parallel_env(name: str) -> Call:
    return "qconf", ["-sp", name]


def first_task_is_free(stdout: str) -> bool:
    """``qconf -sp``: is ``job_is_first_task`` FALSE, so that a one-slot job may still start one
    task with qrsh -inherit (with TRUE the job script holds the slot)?"""
    for line in stdout.splitlines():
        key, _, value = line.partition(" ")
        if key == "job_is_first_task":
            return value.strip().upper() == "FALSE"
    return False


def scheduler() -> Call:
    return "qconf", ["-ss"]


def complexes() -> Call:
    return "qconf", ["-sc"]


def scheduler_messages() -> Call:
    """``qstat -j`` without a job list: the scheduler's messages, each with the jobs it concerns
    (``policy.parse_scheduler_messages``; empty unless ``schedd_job_info`` is true)."""
    return "qstat", ["-j"]


def quota_sets() -> Call:
    """The resource quota sets (``policy.parse_quota_sets``); rc 1 "no resource quota set list
    defined" when there are none."""
    return "qconf", ["-srqs"]


def priorities() -> Call:
    """Every pending job with its priority's parts (``policy.parse_priorities``): tickets,
    normalized urgency with its three contributions, POSIX priority, project, queue request."""
    return "qstat", ["-u", "*", "-pri", "-ext", "-urg", "-r", "-s", "p", "-xml"]


def scheduler_config() -> Call:
    """The scheduler configuration (``policy.parse_scheduler_config``): policy weights, halftime."""
    return "qconf", ["-ssconf"]


def share_tree() -> Call:
    """The share tree's nodes (``policy.parse_share_tree``); rc 1 "no sharetree element" if none."""
    return "qconf", ["-sstree"]


def share_monitor() -> Call:
    """One snapshot of the live share tree: shares, usage, actual share per node, tab-separated
    with a header (``policy.parse_share_monitor``)."""
    return "sge_share_mon", ["-c", "1", "-i", "1", "-h"]


def project_list() -> Call:
    """The projects (Slurm's accounts, with ``-P``); rc 1 "no project list defined" if none."""
    return "qconf", ["-sprjl"]


def project(name: str) -> Call:
    """One project: ``name``, ``oticket``, ``fshare``, ``acl``, ``xacl`` (``policy.parse_keyvalues``)."""
    return "qconf", ["-sprj", name]


def user_list() -> Call:
    """The Grid Engine user objects (share-tree and functional-policy users)."""
    return "qconf", ["-suserl"]


def userset(name: str) -> Call:
    """One access list or department: ``type``, ``entries`` (``policy.parse_keyvalues``)."""
    return "qconf", ["-su", name]


def managers() -> Call:
    return "qconf", ["-sm"]


def operators() -> Call:
    return "qconf", ["-so"]


# What `slurm-shim install` reads and writes (cluster.py parses the listings: parse_list, parse_attrs,
# parse_complexes). A write is one argv: its plan shows exactly what --apply runs.

def queue_list() -> Call:
    """The cluster queues' names, one a line; rc 1 "no cqueue list defined" if none."""
    return "qconf", ["-sql"]


def queue_config(name: str) -> Call:
    """One cluster queue's configuration (``qname``, ``hostlist``, ``pe_list``, ``h_rt``, ...)."""
    return "qconf", ["-sq", name]


def pe_names() -> Call:
    """The parallel environments' names; rc 1 "no parallel environment defined" if none."""
    return "qconf", ["-spl"]


def cell_config(host: str = "global") -> Call:
    """The global (or a host's) cluster configuration: ``reporting_params``, ``min_uid``, ..."""
    return "qconf", ["-sconf", host]


def host_group_hosts(name: str) -> Call:
    """A host group's hosts, nested groups resolved (``-shgrp_resolved``: the hosts, blank-separated)."""
    return "qconf", ["-shgrp_resolved", name]


def add_from_file(flag: str, path: str) -> Call:
    """Add an object described by a file: ``-Ap`` (a PE), ``-Aq`` (a queue), ``-Ae`` (an exec host)."""
    return "qconf", [flag, path]


def replace_complexes(path: str) -> Call:
    """The whole complex list from a file (SGE 8.1.9 has no command that adds one row)."""
    return "qconf", ["-Mc", path]


def add_to_list(obj: str, attr: str, value: str, name: str) -> Call:
    """``qconf -aattr``: add ``value`` to a list attribute (``queue pe_list smp all.q``,
    ``exechost complex_values exclusive=true node1``)."""
    return "qconf", ["-aattr", obj, attr, value, name]


def set_attr(obj: str, attr: str, value: str, name: str) -> Call:
    """``qconf -mattr``: set one attribute (``queue tmpdir /var/spool/slurm-shim-tmp debug``)."""
    return "qconf", ["-mattr", obj, attr, value, name]


def delete_from_list(obj: str, attr: str, value: str, name: str) -> Call:
    """``qconf -dattr``, the inverse of add_to_list (a complex_values entry is named without its value)."""
    return "qconf", ["-dattr", obj, attr, value, name]


def delete_pe(name: str) -> Call:
    return "qconf", ["-dp", name]


def help_of(tool: str) -> Call:
    """``qsub -help`` and friends: what the installed Grid Engine offers (capabilities)."""
    return tool, ["-help"]


# --- interactive ------------------------------------------------------------------------------------

def interactive(args: list[str], *, now: bool | None = None, pty: bool | None = None,
                command: list[str] | tuple = ()) -> Call:
    """qrsh: an interactive job or a task of a running job (``-inherit``). ``args`` are qrsh's own
    flags (the translation's ``qsub.qrsh_flags``, or ``-inherit <host>``); ``now``: start at once or
    fail (``-now yes``), else wait in the queue for resources (``-now no``); ``pty``: a terminal for
    the command (``-pty y``) or none (``-pty n``); None leaves either to qrsh. ``command``: the
    words of the remote command line (qrsh joins them with blanks, and a shell on the far side
    splits them: quote them first)."""
    words = list(args)
    if now is not None:
        words += ["-now", "yes" if now else "no"]
    if pty is not None:
        words += ["-pty", "y" if pty else "n"]
    return "qrsh", [*words, *command]


def verify_interactive(flags: list[str]) -> Call:
    """Would Grid Engine ever run this interactive request (``qrsh -w v``), without running it."""
    return "qrsh", ["-w", "v", *flags, "-now", "no", "true"]
