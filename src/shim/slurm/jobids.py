"""Job ids and array index lists: the one grammar, with Slurm's rules per command.

Index lists (Slurm's array text and Grid Engine's task ranges):

- ``compress([1, 3, 5, 6, 7])`` is ``"1,3,5-7"`` (squeue's ``110_[3-6]``, srun's task lists);
- ``expand("1-9:4,12")`` is ``[1, 5, 9, 12]``: ``a``, ``a-b`` and ``a-b:step`` joined by commas,
  as Grid Engine prints task ranges (``qstat``'s ``tasks``) and Slurm writes array ranges;
- ``array_indices`` reads ``--array`` the lenient way Slurm does (strtol, ``]``, ``%throttle``).

Job ids as the commands take them: ``7``, ``7_3`` (an array index), ``7_[1-3,5]``, ``7_*``,
``7.batch`` / ``7.0`` (a step), ``7+1`` (a hetjob component). Slurm has no one reader of these:
each command parses them its own way, with its own leniency and message, and so does this module
(one function per Slurm parser, named after it):

- ``squeue_jobs`` (squeue ``-j``, ``src/squeue/opts.c:_build_job_list``): split on commas only;
  the job is read as ``strtol`` reads it and the text after it is ignored unless it is ``_N``
  (``7x`` and ``7.batch`` are job 7, ``7_[1-3]`` is index 0, ``7 8`` is job 7); a job id <= 0 is
  ``Invalid job id: X``;
- ``squeue_steps`` (``--steps``, ``_build_step_list``): ``job[_index].step``;
- ``scancel_ids`` (``src/scancel/opt.c:_xlate_job_step_ids``): ``job[_index|_[list]|_*|+het][.step]``,
  comma separated outside brackets; the bracket list is a hostlist (no ``:step``, no ``%``); any
  other trailing text is ``Invalid job id X``;
- ``sacct_step`` (sacct ``-j``, ``src/common/slurm_protocol_defs.c:slurm_parse_step_str`` behind
  ``_addto_step_list_internal``): ``job[_index|+het][.step]`` read with ``atoi``; no brackets
  (``7_[1-5:2]`` is ``Bad job array element specified``);
- ``scontrol_job`` (``src/scontrol/info_job.c:scontrol_print_job``): digits, ``_`` and ``+``
  only; ``job[_index][+het]``;
- ``scontrol_step`` (``scontrol show step``, ``info_job.c:scontrol_print_step``): ``job``,
  ``job_index`` or ``job.step``, each read with strtol (text after them ignored);
- ``xlate_job_id`` (sprio ``-j``, ``src/api/job_info.c:slurm_xlate_job_id``): ``N``, ``N_k``,
  ``N+h`` (job N + h) and nothing after; anything else is job 0;
- ``scontrol_job_list`` (scontrol hold/release/suspend/resume/requeue,
  ``src/scontrol/update_job.c:_is_job_id/_next_job_id``): ids separated by commas or blanks
  outside brackets, ``job[_tasks]``, ``[a-b][_tasks]``, ``job+het``; None for a job name.

Each raises JobIdError with Slurm's message (without the command's ``prog: error:`` prefix).

Array tasks have job ids of their own, as in Slurm (docs/array-ids.md): task ``t`` (t >= 1) of
Grid Engine job ``G`` is job ``t * 10**10 + G`` (``task_job_id``; task 4 of 29140 is 40000029140),
task 0 keeps ``G``. Grid Engine's ids stay below 10**10 (SGE wraps at 9,999,999, OCS at 2**32 - 1),
so no task id is ever a Grid Engine id and the two read back with no shared state
(``split_task_id``). Every reader above takes a task's id where it takes ``G_t``: a plain number
at or above 10**10 reads as ``JobId(G, t)``, the same structure as ``G_t`` (``G_t`` written with a
task's id as ``G`` names nothing, as in Slurm, where a task's own id is no array's id).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Iterable

NO_VAL = 4294967294  # Slurm's NO_VAL (0xfffffffe): what %a expands to outside an array

_SPACE = " \t\n\v\f\r"
_LONG_MAX = 2**63 - 1
TASK_ID_BASE = 10**10
"""Above every Grid Engine job id (SGE 8.1.9 wraps at 9,999,999; OCS 9.x at 2**32 - 1): the low ten
digits of a task's id are its Grid Engine job, the digits above them its array index."""


class JobIdError(ValueError):
    """A job id a command refuses; ``str()`` is Slurm's message."""


class JobId:
    """One job id as a command took it.

    ``task``: one array index (None: none given); ``tasks``: the indices of a bracket list
    (``7_[1-3]``, scancel); ``all_tasks``: ``7_*`` (scancel); ``step``: the step as written
    (``batch``, ``extern``, ``interactive``, ``0``); ``het``: a hetjob component.
    (A plain class: a NamedTuple costs a millisecond to define, at every command's start.)"""

    __slots__ = ("job", "task", "step", "het", "tasks", "all_tasks", "own_id")

    def __init__(self, job: int, task: int | None = None, step: str | None = None, het: int | None = None,
                 tasks: tuple[int, ...] | None = None, all_tasks: bool = False, own_id: int | None = None):
        self.job, self.task, self.step, self.het, self.tasks, self.all_tasks = job, task, step, het, tasks, all_tasks
        self.own_id = own_id  # a task named by its own job id (task_job_id) as typed: how messages echo it

    def _key(self) -> tuple:
        return (self.job, self.task, self.step, self.het, self.tasks, self.all_tasks)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobId) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        names = ("task", "step", "het", "tasks", "all_tasks")
        extra = "".join(f", {n}={v!r}" for n, v in zip(names, self._key()[1:]) if v not in (None, False))
        return f"JobId({self.job}{extra})"


# --- array tasks' own job ids -------------------------------------------------------------------


def task_job_id(job: int, task: int | None) -> int:
    """The Slurm job id of array task ``task`` of Grid Engine job ``job`` (SLURM_JOB_ID, %j,
    JobIDRaw, scontrol's JobId): ``task * 10**10 + job``; task 0, and no task, keep ``job``."""
    return task * TASK_ID_BASE + job if task else job


def split_task_id(job_id: int) -> tuple[int, int | None]:
    """A Slurm job id -> (Grid Engine job, array index or None): ``task_job_id``'s inverse for every
    task id (``40000029140`` -> (29140, 4)); any other id is itself, with no index (an id whose low
    ten digits are 0 names no Grid Engine job and stays as it is)."""
    if job_id >= TASK_ID_BASE:
        task, job = divmod(job_id, TASK_ID_BASE)
        if job:
            return job, task
    return job_id, None


def _job(job: int, task: int | None = None, step: str | None = None) -> JobId:
    """``JobId(job)`` for a plain id, ``JobId(G, t)`` for a task's own id (no ``_index`` given)."""
    if task is None and job >= TASK_ID_BASE:
        job, task = split_task_id(job)
    return JobId(job, task, step)


def array_step(text: str) -> int:
    """SLURM_ARRAY_TASK_STEP of ``--array=text``: what ``atoi`` reads after the first ``:`` of the
    whole text, else 1 (slurmctld's ``_create_job_array``, src/slurmctld/job_mgr.c). So ``0,5,10``
    has step 1, not 5, and ``1-9:4,20`` and ``1-3,10-20:5`` have the first range's step (4, 5)."""
    head, colon, rest = text.partition(":")
    return _atoi(rest) if colon else 1


# --- index lists ------------------------------------------------------------------------------


def runs(indices: Iterable[int]) -> list[tuple[int, int]]:
    """Indices sorted, duplicates dropped, as runs of consecutive numbers: (first, last) each."""
    xs = sorted(set(indices))
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append((xs[i], xs[j]))
        i = j + 1
    return out


def compress(indices: Iterable[int]) -> str:
    """Indices as Slurm lists them: sorted, duplicates dropped, runs as ``a-b``."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs(indices))


def _number(text: str) -> bool:
    return text.isdigit() and text.isascii() and len(text) <= 18


def expand(text: str, limit: int | None = None) -> list[int]:
    """``a``, ``a-b``, ``a-b:step`` joined by commas (blanks around tokens and empty tokens
    ignored) -> the indices in the order written. Raises JobIdError for any other token, and
    when there would be more than ``limit`` indices."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        rng, colon, step = part.partition(":")
        a, dash, b = rng.partition("-")
        if not _number(a) or (dash and not _number(b)) or \
                (colon and not (dash and _number(step) and int(step) > 0)):
            raise JobIdError(f"Invalid index list: {text}")
        lo = int(a)
        span = range(lo, (int(b) if dash else lo) + 1, int(step) if colon else 1)
        if limit is not None and len(out) + len(span) > limit:
            raise JobIdError(f"Too many indices: {text}")
        out.extend(span)
    return out


def array_indices(text: str, max_size: int) -> tuple[list[int], int | None]:
    """sbatch/salloc/srun ``--array``: ``a``, ``a-b``, ``a-b:step`` tokens joined by ``,`` (each
    number read as strtol reads it, a ``]`` after it skipped), then an optional ``%max_running``.

    Returns (sorted unique indices, throttle or None). Indices must be below ``max_size``
    (MaxArraySize), a step in 1..max_size-1; anything else raises JobIdError."""
    import itertools

    bad = JobIdError("Invalid job array specification")
    spans: list[range] = []

    def number(tok: str) -> tuple[int, str]:  # strtol, then an optional ']'
        value, end = strtol(tok)
        rest = tok[end:]
        return value, rest[1:] if rest.startswith("]") else rest

    for tok in text.split(","):
        if not tok:
            continue
        first, rest = number(tok[1:] if tok.startswith("[") else tok)
        step = 1
        if first < 0:
            raise bad
        if rest.startswith("-"):
            last, rest = number(rest[1:])
            if rest.startswith(":"):
                step, rest = number(rest[1:])
                if step <= 0 or step >= max_size:
                    raise bad
            if last < first:
                raise bad
        else:
            last = first
        if rest and not rest.startswith("%"):
            raise bad
        if last >= max_size:
            raise bad
        spans.append(range(first, last + 1, step))
    if not spans:
        raise bad
    # one byte per index up to the highest: each token is a slice assignment, not a loop, so a
    # long list of wide ranges costs no more than max_size per token in C
    bits = bytearray(max(r.stop for r in spans))
    for r in spans:
        bits[r.start:r.stop:r.step] = b"\1" * len(r)
    throttle = None
    if "%" in text:
        throttle = _atoi(text.split("%", 1)[1])
        throttle = throttle if throttle > 0 else None
    return list(itertools.compress(range(len(bits)), bits)), throttle


# --- job ids, per command ---------------------------------------------------------------------


def strtol(s: str, i: int = 0) -> tuple[int, int]:
    """C's ``strtol(s + i, &end, 10)``: (value, index of end); no digits: (0, i). Saturates at
    LONG_MAX/LONG_MIN as strtol does."""
    j = i
    n = len(s)
    while j < n and s[j] in _SPACE:
        j += 1
    sign = 1
    if j < n and s[j] in "+-":
        sign = -1 if s[j] == "-" else 1
        j += 1
    k = j
    while k < n and "0" <= s[k] <= "9":
        k += 1
    if k == j:
        return 0, i
    digits = s[j:k].lstrip("0")
    value = int(digits or "0") if len(digits) <= 19 else _LONG_MAX + 1  # (no 5000-digit int)
    return max(min(sign * value, _LONG_MAX), -_LONG_MAX - 1), k


def _atoi(s: str) -> int:
    return strtol(s)[0]


def squeue_jobs(text: str) -> list[JobId]:
    """squeue ``-j``: comma separated; ``N`` or ``N_k`` read as strtol reads them."""
    out: list[JobId] = []
    for tok in text.split(","):
        if not tok:
            continue
        job, end = strtol(tok)
        task = None
        if tok[end:end + 1] == "_":
            task, end = strtol(tok, end + 1)
        if job <= 0:
            raise JobIdError(f"Invalid job id: {tok}")
        out.append(_job(job, task))
    return out


def squeue_steps(text: str) -> list[JobId]:
    """squeue ``--steps``: comma separated ``N[_k].S``."""
    out: list[JobId] = []
    for tok in text.split(","):
        if not tok:
            continue
        parts = [p for p in tok.split(".") if p]
        if not parts:
            break
        name = parts[0]
        job, end = strtol(name)
        task = None
        if name[end:end + 1] == "_":
            task, end = strtol(name, end + 1)
        if len(parts) < 2:
            raise JobIdError(f"Invalid job_step id: {name}.??")
        step = _atoi(parts[1])
        if job <= 0 or step < 0:
            raise JobIdError(f"Invalid job_step id: {name}.{parts[1]}")
        out.append(_job(job, task, str(step)))
    return out


def scancel_ids(args: Iterable[str]) -> list[JobId]:
    """scancel's positional job ids (each may hold more, comma separated outside brackets)."""
    from .hostlist import HostlistError, expand as hostlist_expand

    out: list[JobId] = []
    pending = list(args)
    while pending:
        arg = pending.pop(0)

        def bad() -> JobIdError:
            return JobIdError(f"Invalid job id {arg}")

        job, end = strtol(arg)
        if job <= 0:
            raise bad()
        rest = arg[end:]
        task = het = None
        all_tasks = False
        if rest.startswith("_["):
            close = rest.find("]", 2)
            if close < 0 or close + 1 != len(rest):
                raise bad()
            try:
                names = hostlist_expand(rest[1:])
            except (HostlistError, ValueError):
                raise bad() from None
            tasks = []
            for name in names:
                value, _ = strtol(name)
                if value < 0:
                    raise bad()
                tasks.append(value)
            out.append(JobId(job, tasks=tuple(tasks)))  # (no step with a range)
            continue
        if rest.startswith("_*"):
            all_tasks, rest = True, rest[2:]
        elif rest.startswith("_"):
            task, e = strtol(rest, 1)
            if task < 0:
                raise bad()
            rest = rest[e:]
        elif rest.startswith("+"):
            het, e = strtol(rest, 1)
            if het < 0:
                raise bad()
            rest = rest[e:]
        step = None
        if rest.startswith("."):
            value, e = strtol(rest, 1)
            if value < 0:
                raise bad()
            step, rest = str(value), rest[e:]
        own = None
        if task is None and het is None and not all_tasks:
            own = job
            job, task = split_task_id(job)
        out.append(JobId(job, task, step, het, all_tasks=all_tasks, own_id=own if task is not None else None))
        if rest.startswith(","):
            pending.insert(0, rest[1:])
        elif rest:
            raise bad()
    return out


def sacct_step(name: str) -> JobId:
    """One item of sacct ``-j`` (already split at commas)."""
    if not name[:1].isdigit() or not name[:1].isascii():
        raise JobIdError(f"Bad job/step specified: {name}")
    head, dot, step_text = name.partition(".")
    step = het = task = None
    plus = ""
    if dot:
        if step_text in ("batch", "extern", "interactive"):
            step = step_text
        elif step_text[:1].isdigit() and step_text[:1].isascii():
            step = str(_atoi(step_text))
        else:
            raise JobIdError(f"Bad step specified: {head}")
        _, plus, het_text = step_text.partition("+")
        if plus:
            het = _atoi(het_text)
    base, under, task_text = head.partition("_")
    if under:
        if not (task_text[:1].isdigit() and task_text[:1].isascii()):
            raise JobIdError(f"Bad job array element specified: {base}")
        task = _atoi(task_text)
    elif not plus and "+" in head:
        base, _, het_text = head.partition("+")
        if not (het_text[:1].isdigit() and het_text[:1].isascii()):
            raise JobIdError(f"Bad hetjob offset specified: {base}")
        het = _atoi(het_text)
    job = _atoi(base)
    if task is None and het is None:
        job, task = split_task_id(job)
    return JobId(job, task, step, het)


def scontrol_job(text: str) -> JobId:
    """``scontrol show job`` (and the verbs that name one job): ``N``, ``N_k``, ``N+h``."""
    if any(not ("0" <= c <= "9" or c in "_+") for c in text):
        raise JobIdError("Invalid job id specified")
    job, end = strtol(text)
    task = het = None
    if text[end:end + 1] == "_":
        task, end = strtol(text, end + 1)
    if text[end:end + 1] == "+":
        het, end = strtol(text, end + 1)
    if task is None and het is None:
        job, task = split_task_id(job)
    return JobId(job, task, het=het)


def scontrol_job_list(text: str) -> list[JobId] | None:
    """The job list of ``scontrol hold/release/suspend/resume/requeue``
    (``src/scontrol/update_job.c``: ``_is_job_id`` then ``_next_job_id``): ids separated by ``,``
    or blanks outside brackets, each ``N``, ``N_k``, ``N_a-b,c`` / ``N_[a-b,c]`` (the tasks),
    ``[a-b]`` / ``[a-b]_k`` (a range of jobs) or ``N+h``; at most one ``_`` and one ``+`` per id,
    ``-`` only after ``_`` or inside brackets, digits otherwise. None when the text is no such
    list (scontrol then reads it as a job name, or refuses it)."""
    from .hostlist import HostlistError, expand as hostlist_expand

    tokens: list[str] = []
    cur: list[str] = []
    plus = under = False
    depth = 0
    for ch in text:
        if ch == "+":
            if plus:
                return None
            plus = True
        elif ch == "_":
            if under:
                return None
            under = True
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "-":
            if depth == 0 and not under:
                return None
        elif ch in ", " and depth == 0:
            tokens.append("".join(cur))
            cur, plus, under = [], False, False
            continue
        elif not ("0" <= ch <= "9") and ch not in ", ":
            return None
        cur.append(ch)
    if depth != 0:
        return None
    tokens.append("".join(cur))
    out: list[JobId] = []
    for tok in filter(None, tokens):
        head, us, spec = tok.partition("_")
        if spec.startswith("["):
            spec = spec[1:].partition("]")[0]
        if "[" in head:
            try:
                jobs = hostlist_expand(head)
            except (HostlistError, ValueError):
                raise JobIdError(f"Invalid job id: {tok}") from None
        else:
            jobs = [head]
        for j in jobs:
            job, end = strtol(j)
            het = strtol(j, end + 1)[0] if j[end:end + 1] == "+" else None
            if not us:
                out.append(JobId(job, het=het) if het is not None else _job(job))
            elif spec.isdigit():
                out.append(JobId(job, int(spec), het=het))
            else:
                try:
                    tasks = expand(spec, limit=1 << 16)
                except JobIdError:
                    raise JobIdError(f"Invalid job id: {tok}") from None
                out.append(JobId(job, het=het, tasks=tuple(tasks)))
    return out


def xlate_job_id(text: str) -> JobId:
    """slurm_xlate_job_id: ``N``, ``N_k`` or ``N+h`` read with strtol, nothing after them; any
    other text is job 0 (the caller's "Invalid job id"). ``N+h`` is job N + h, as Slurm numbers a
    hetjob's components (``het`` keeps h)."""
    job, end = strtol(text)
    rest = text[end:]
    if not rest:
        return _job(job)
    if rest[0] in "_+":
        value, e = strtol(rest, 1)
        if e != len(rest):
            return JobId(0)
        return JobId(job, value) if rest[0] == "_" else JobId(job + value, het=value)
    return JobId(0)


def scontrol_step(text: str) -> JobId:
    """``scontrol show step ID``: the job read with strtol, then ``_index`` or ``.step`` (strtol:
    ``7.batch`` is step 0, as Slurm reads it); the rest is ignored."""
    job, end = strtol(text)
    if text[end:end + 1] == "_":
        return JobId(job, strtol(text, end + 1)[0])
    if text[end:end + 1] == ".":
        return _job(job, step=str(strtol(text, end + 1)[0]))
    return _job(job)
