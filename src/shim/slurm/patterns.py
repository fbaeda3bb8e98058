"""Slurm's file name patterns (%j %J %A %a %x %u %N %n %t %s %%): the one expander of sbatch's
--output/--error/--input, srun's and scontrol's StdOut. Pure functions."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings
if TYPE_CHECKING:
    from typing import Any, Mapping

from .jobids import NO_VAL, task_job_id

MAX_PAD = 10  # Slurm's widest zero padding in a file name pattern (%12j pads to 10)


def expand(pattern: str, fields: Mapping[str, Any], keep_unknown: bool = False) -> str:
    """Slurm's file name patterns (``--output``, ``--error``, ``--input``), for the letters in
    ``fields`` (letter -> value). ``%%`` is one ``%``. A width (``%4j``) zero-pads an integer
    value, at most to MAX_PAD; text values (``%N``, ``%x``) are never padded, and a callable value
    is given the width and returns the text. A ``%`` before any other letter stays as written
    (``%q``); with a width, Slurm drops the ``%`` and every digit but the last (``%5q`` -> ``5q``,
    ``%12q`` and ``%12`` at the end -> ``2q`` and ``2``): its batch and step parsers
    (``_create_batch_fname`` in src/slurmd/common/fname.c, ``fname_create`` in
    src/srun/libsrun/fname.c) do this alike. ``keep_unknown``: such a width and letter stay as
    written (``%5q``), as 26.05's sacct --expand-patterns prints them."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch != "%" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        if pattern[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        j = i + 1
        while j < n and pattern[j].isdigit():
            j += 1
        key = pattern[j] if j < n else ""
        if key and key in fields:
            width = min(int(pattern[i + 1:j]), MAX_PAD) if j > i + 1 else 0
            value = fields[key]
            if callable(value):
                out.append(value(width))
            elif isinstance(value, int) and not isinstance(value, bool):
                out.append(f"{value:0{width}d}")
            else:
                out.append(str(value))
            i = j + 1
        elif j > i + 1:
            out.append(pattern[i:j] if keep_unknown else pattern[j - 1])
            i = j
        else:
            out.append("%")
            i += 1
    return "".join(out)


def expand_pattern(pattern: str, *, job_id: int, task: int | None, name: str, user: str, host: str,
                   array_job: bool) -> str:
    """A batch job's file name pattern: %j %J %A %a %x %u %N %n %t %s %% as Slurm's batch step
    expands them (``_batch_path_check``; ``expand_stdio_fields`` in src/common/print_fields.c):
    %j and %J are the job's own id (an array task's: ``jobids.task_job_id``), %A the array's
    (``job_id``, Grid Engine's job), %s is ``batch``, %n and %t are 0, %a is NO_VAL outside an array."""
    own = task_job_id(job_id, task) if array_job and task is not None else job_id
    return expand(pattern, {
        "j": own, "J": own, "A": job_id, "a": task if (array_job and task is not None) else NO_VAL,
        "n": 0, "t": 0, "s": "batch", "x": name, "u": user, "N": host,
    })
