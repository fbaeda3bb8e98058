"""The one bootstrap of the in-job runtime: how a command on the submit side starts shim code on
the far side (a Grid Engine job script, a ``qrsh`` command line).

``ENTRIES`` names every far-side entry point. The far side imports them by name, at run time, on
an execution host, so no import graph shows the dependency: ``tests/unit/test_runtime_boot.py``
imports every entry, and a rename breaks that unit test instead of jobs.

The interpreter and its isolation (``python -I``, the installation's ``sys.path`` only) come
from ``proc.shim_python``; this module only chooses what it runs and how a job script carries it.
"""

from __future__ import annotations

from .. import proc

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Sequence

ENTRIES: dict[str, tuple[str, str]] = {
    "run": ("runtime.jobwrap", "run"),               # sbatch's job script: the payload on stdin
    "hold_main": ("runtime.steps.job", "hold_main"),        # salloc's job script: holds the slots until released
    "job_main": ("runtime.steps.job", "job_main"),          # srun outside an allocation: the new job's step 0
    "remote_main": ("runtime.steps.launch", "remote_main"),  # one host's tasks of a step (qrsh -inherit)
}
"""Far-side entry points, each named after its callable: name -> (module under ``shim``, the
callable, which takes no arguments and reads ``sys.argv``/stdin)."""

HEREDOC = "__SLURM_SHIM_PAYLOAD__"


def payload_text(payload: dict) -> str:
    """A payload as a job script carries it on the entry point's stdin: compact JSON in base64,
    76 characters a line (nothing a here-document or a shell could read as its own)."""
    import base64
    import json

    body = base64.b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode("ascii")
    return "\n".join(body[i:i + 76] for i in range(0, len(body), 76))


def payload_from(data: bytes) -> dict:
    """payload_text read back (what the entry point gets on stdin); ValueError unless a JSON object."""
    import base64
    import json

    p = json.loads(base64.b64decode(data))
    if not isinstance(p, dict):
        raise ValueError("the job's payload is not an object")
    return p


def argv(entry: str, *words: str) -> list[str]:
    """The argv that runs entry point ``entry`` with ``words`` as its ``sys.argv[1:]``."""
    module, name = ENTRIES[entry]
    return [*proc.shim_python(module, name), *words]


def script(entry: str, words: Sequence[str] = (), comment: str = "", stdin: str | None = None) -> bytes:
    """A ``/bin/sh`` job script that execs ``entry`` (each word quoted on its own). ``stdin`` (text
    without a line equal to the here-document's delimiter, e.g. base64) becomes its standard input
    through a quoted here-document, so the shell expands nothing in it."""
    import shlex

    head = "#!/bin/sh\n" + "".join(f"# {line}\n" for line in comment.splitlines())
    command = "exec " + " ".join(shlex.quote(w) for w in argv(entry, *words))
    if stdin is None:
        return (head + command + "\n").encode()
    if any(line == HEREDOC for line in stdin.splitlines()):
        raise ValueError("the job script's standard input contains its here-document delimiter")
    return (head + f"{command} <<'{HEREDOC}'\n" + stdin.rstrip("\n") + f"\n{HEREDOC}\n").encode()
