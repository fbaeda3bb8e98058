"""``scontrol update`` of a job -> qalter's flags, driven by the site config.

``qalter_args(fields, cfg, ...)`` is pure: given the update's parsed fields and the facts about the
job that the command read (its state, its hard requests, its time limit, whether the shim's
wrapper runs it), it returns qalter's flags (the job id goes after them), what the shim's submit
record takes, and whether a Partition change was refused. The rules are the submission's
(``translate.qsub``): one nice mapping, one h_rt backstop, one Grid Engine date, one encoding of
names and accounts.

The fields are ``scontrol``'s parse of ``Key=value`` words, in the order given, each once:
``timelimit`` (increment -1/0/1, minutes; -1 is UNLIMITED), ``partition`` (a configured name),
``jobname``, ``nice`` (int), ``account``, ``starttime`` (a datetime), ``comment``, ``qos``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Mapping

    from ...config import SiteConfig

from .. import names
from .qsub import ge_date, h_rt_backstop, nice_priority


class Alteration:
    """What one job's update asks: ``args`` for qalter (empty: no call), ``record`` for the shim's
    submit record (``time``, ``partition``, ``name``, ``nice``, ``account``, ``begin``, ``comment``,
    ``qos``), and ``not_pending``: a Partition change was refused because the job is no longer
    pending (Slurm's error; the other fields still go)."""

    __slots__ = ("args", "record", "not_pending")

    def __init__(self, args: list[str], record: dict[str, object], not_pending: bool):
        self.args, self.record, self.not_pending = args, record, not_pending

    def __repr__(self) -> str:
        return f"Alteration(args={self.args!r}, record={self.record!r}, not_pending={self.not_pending!r})"


def nice_denied(fields: Mapping[str, object], privileged: bool) -> bool:
    """A negative Nice from a caller who is not an operator: Slurm refuses the update of the job
    (job_mgr.c: Access/permission denied), nothing of it is changed."""
    return "nice" in fields and nice_priority(int(fields["nice"]), privileged=privileged) is None  # type: ignore[call-overload]


def qalter_args(fields: Mapping[str, object], cfg: SiteConfig, *, privileged: bool, pending: bool,
                hard: Mapping[str, str], time_limit: int | None, wrapped: bool) -> Alteration:
    """The update of one job. ``privileged``: the caller is an operator (root); ``pending``: the job
    is PENDING; ``hard``: the job's hard resource requests as Grid Engine lists them (qalter -l
    replaces the whole list, so they are asked again beside the new h_rt); ``time_limit``: the
    job's time limit in minutes (None or negative: none, for a TimeLimit=+/-N); ``wrapped``: the job
    has the shim's submit record, so its wrapper ends it at the limit and h_rt is the backstop.
    A denied nice (``nice_denied``) is the caller's to refuse first: it raises ValueError here."""
    if nice_denied(fields, privileged):
        raise ValueError("a negative nice is for operators (nice_denied)")
    args: list[str] = []
    record: dict[str, object] = {}
    not_pending = False
    for k, v in fields.items():
        if k == "timelimit":
            inc, m = v  # type: ignore[misc]
            if inc:
                base = time_limit if time_limit is not None and time_limit >= 0 else 0
                m = max(0, base + inc * m)
            record["time"] = m
            req = dict(hard)
            if m == -1:
                req["h_rt"] = "INFINITY"
            else:
                # the shim's jobs keep Grid Engine's h_rt as a backstop behind the wrapper's limit
                req["h_rt"] = str(h_rt_backstop(m, wrapped=wrapped))
            args += ["-l", ",".join(f"{a}={b}" for a, b in req.items())]
        elif k == "partition":
            if not pending:
                not_pending = True
                continue
            args += ["-q", cfg.partitions[v].queue]  # type: ignore[index]
            record["partition"] = v
        elif k == "jobname":
            args += ["-N", names.encode(str(v))]
            record["name"] = v
        elif k == "nice":
            args += ["-p", str(nice_priority(int(v), privileged=privileged))]  # type: ignore[call-overload]
            record["nice"] = v
        elif k == "account":
            args += ["-A", names.encode(str(v))]  # as sbatch stores it (Grid Engine refuses '@', ':', ...)
            record["account"] = v
        elif k == "starttime":
            args += ["-a", ge_date(v)]  # type: ignore[arg-type]
            record["begin"] = v.timestamp()  # type: ignore[attr-defined]
        elif k in ("comment", "qos"):
            record[k] = v
    return Alteration(args, record, not_pending)
