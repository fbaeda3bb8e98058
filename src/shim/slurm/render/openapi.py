"""``--json`` and ``--yaml`` of Slurm 24.11 (data_parser v0.0.42) and 26.05 (v0.0.45): squeue's
and ``scontrol show job``'s jobs, sacct's jobs and steps, sinfo's rows.

Which layout a site prints is its release's (releases.Release.json: "v0.0.38", 22.05's OpenAPI
documents, stay in render/squeue.py, sacct.py and sinfo.py; the two newer ones are here). What the
two newer layouts have in common is written once; ``LAYOUTS`` names what v0.0.45 adds, moves or
drops. As measured on real 24.11.5 and 26.05.5 (fixtures/slurm-24.11, slurm-26.05: the cases
squeue_json, squeue_json_j, squeue_yaml, scontrol_show_job_json, sacct_json, sinfo_json):

- a number is ``{"set", "infinite", "number"}`` (``num``); a state, a list (``["RUNNING"]``);
  an exit code ``{"status": [...], "return_code": num, "signal": {"id": num, "name"}}``;
- the top level is ``jobs`` (or ``sinfo``), then ``last_backfill``/``last_update`` (squeue,
  scontrol), ``meta`` (the data_parser, the client's user and group, its command line, the
  release as strings), ``errors`` and ``warnings``;
- ``meta.command`` is the command line without its last word on 24.11 (scontrol: its command
  words, without the last), the whole of it on 26.05.

Renderers do no I/O: the command hands in the client's names and words (``Client``).
"""

from __future__ import annotations

import json
from datetime import datetime

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any

OLD = "v0.0.38"  # 22.05's OpenAPI documents (render/squeue.py, sacct.py, sinfo.py)


class Layout:
    """One data_parser version's differences from v0.0.42 (which has them all at their
    defaults): ``whole_command`` (meta.command is the whole command line; 24.11 drops its last
    word), ``select_type`` (job_resources.select_type), ``fields_45`` (the job fields v0.0.45 adds
    and moves: container_type, licenses_allocated, step_id with its sluid, the raw stdout pattern
    beside ``*_expanded``, submit_line; no power), ``sacct_45`` (sacct's sluid, exclusive,
    oversubscribe, segment_size, original_sluid; a step's submit_line, no pid), ``sinfo_45``."""

    __slots__ = ("name", "whole_command", "select_type", "fields_45")

    def __init__(self, name: str, whole_command: bool, select_type: str, fields_45: bool):
        self.name, self.whole_command, self.select_type, self.fields_45 = name, whole_command, select_type, fields_45


LAYOUTS = {
    "v0.0.42": Layout("v0.0.42", False, "CORE", False),
    "v0.0.45": Layout("v0.0.45", True, "CR_CORE_MEMORY", True),
}


class Client:
    """Who asks, as the command knows it: the command line (``argv``, its program first),
    scontrol's command words (``words``; None for the other commands), the user's and group's
    names."""

    __slots__ = ("argv", "words", "user", "group")

    def __init__(self, argv: list[str], user: str = "", group: str = "", words: list[str] | None = None):
        self.argv, self.words, self.user, self.group = list(argv), words, user, group


def layout_of(release: Any) -> Layout | None:
    """The release's newer layout, None for 22.05's OpenAPI v0.0.38."""
    return LAYOUTS.get(release.json)


# --- values -------------------------------------------------------------------------------------------

def num(v: Any = None, infinite: bool = False) -> dict[str, Any]:
    """A number as data_parser writes it: unset (None), infinite, or set."""
    if infinite:
        return {"set": False, "infinite": True, "number": 0}
    if v is None:
        return {"set": False, "infinite": False, "number": 0}
    return {"set": True, "infinite": False, "number": v}


def unset_float() -> dict[str, Any]:
    return {"set": False, "infinite": False, "number": 0.0}


def limit(minutes: int | None) -> dict[str, Any]:
    """A time limit in minutes: infinite for none (UNLIMITED)."""
    return num(infinite=True) if minutes is None or minutes < 0 else num(minutes)


def epoch(dt: datetime | None) -> int:
    return int(dt.timestamp()) if dt else 0


_SIGNALS = {1: "HUP", 2: "INT", 3: "QUIT", 4: "ILL", 6: "ABRT", 7: "BUS", 8: "FPE", 9: "KILL", 10: "USR1",
            11: "SEGV", 12: "USR2", 13: "PIPE", 14: "ALRM", 15: "TERM", 18: "CONT", 19: "STOP", 20: "TSTP",
            24: "XCPU", 25: "XFSZ"}


def exit_json(code: int | None, sig: int | None) -> dict[str, Any]:
    """An exit code: SUCCESS, ERROR with its return code, or SIGNALED with its signal."""
    if sig:
        return {"status": ["SIGNALED"], "return_code": num(None),
                "signal": {"id": num(sig), "name": _SIGNALS.get(sig, str(sig))}}
    return {"status": ["ERROR" if code else "SUCCESS"], "return_code": num(code or 0),
            "signal": {"id": num(None), "name": ""}}


def meta(layout: Layout, release: Any, cluster: str, client: Client | None) -> dict[str, Any]:
    """The ``meta`` block: the parser, the client, its command line, the release."""
    client = client or Client([])
    if layout.whole_command:
        command = client.argv
    else:  # 24.11 hands its dumper one word fewer than it has (scontrol: of its command words)
        command = (client.words if client.words is not None else client.argv)[:-1]
    major, minor, micro = release.version.split(".")
    return {
        "plugin": {"type": "", "name": "", "data_parser": f"data_parser/{layout.name}",
                   "accounting_storage": "accounting_storage/slurmdbd"},
        "client": {"source": "", "user": client.user, "group": client.group},
        "command": command,
        "slurm": {"version": {"major": major, "micro": micro, "minor": minor}, "release": release.version,
                  "cluster": cluster},
    }


def dumps(doc: dict[str, Any]) -> str:
    """Slurm's JSON text: two blanks an indent, ``/`` written ``\\/`` (no final newline)."""
    return json.dumps(doc, indent=2).replace("/", "\\/")


# --- squeue --json, scontrol show job --json ---------------------------------------------------------

_HELD = ("JobHeldUser", "JobHeldAdmin")


def _flags(rec: Any, ctx: Any, started: bool, layout: Layout) -> list[str]:
    """The job's flags: ran, the requests that defaulted, a dependency."""
    default_part = rec.partition == getattr(ctx.cfg, "default_partition", None)
    out = ["JOB_WAS_RUNNING"] if started else []
    exact_tasks = rec.num_tasks > max(1, rec.num_nodes)  # (-n N beyond a task a node)
    if exact_tasks:
        out.append("EXACT_TASK_COUNT_REQUESTED")
    if rec.min_memory_mb and not rec.mem_per_cpu:
        out.append("EXACT_MEMORY_REQUESTED")
    out += ["USING_DEFAULT_ACCOUNT"] + (["USING_DEFAULT_PARTITION"] if default_part else []) + \
        ["USING_DEFAULT_QOS", "USING_DEFAULT_WCKEY"]
    if rec.state == "PENDING" and (rec.dependency or rec.reason == "JobHeldUser"):
        out.append("DEPENDENT")  # (as 24.11 and 26.05 flag a job submitted held, -H)
    if default_part:
        out.append("PARTITION_ASSIGNED")
    if exact_tasks and layout.fields_45 and rec.state == "PENDING":
        out.append("JOB_IMPLICIT_MAX_NODES")
    return out


def _times(rec: Any, started: bool) -> dict[str, int]:
    """accrue, eligible, start and end times: a job held to --begin accrues and becomes eligible
    then (and starts then, while pending); otherwise a held job has not accrued, and a held,
    dependent or throttled one is not eligible. A job's end is its start plus its limit, or plus
    a year without one (a pending job's: the unsigned 32-bit sum Slurm makes of INFINITE minutes)."""
    pending = rec.state == "PENDING"
    sub = rec.extra.get("submit")
    begin = getattr(sub, "begin", None) if pending and sub is not None else None
    base = epoch(rec.eligible_time or rec.submit_time)
    if begin:
        accrue = eligible = int(float(begin))
    else:
        held = pending and rec.reason in _HELD + ("Dependency", "DependencyNeverSatisfied")
        accrue = 0 if held else base
        eligible = 0 if held or (pending and rec.reason == "JobArrayTaskLimit") else base
    start = epoch(rec.start_time) if started else int(float(begin)) if begin else 0
    lim = rec.time_limit
    if rec.end_time is not None:
        end = epoch(rec.end_time)
    elif started:
        end = start + (lim * 60 if lim is not None and lim >= 0 else 365 * 86400)
    elif start:
        end = start + ((lim * 60) if lim is not None and lim >= 0 else (0xFFFFFFFF * 60) & 0xFFFFFFFF)
    else:
        end = 0
    return {"accrue": accrue, "eligible": eligible, "start": start, "end": end}


def _resources(rec: Any, layout: Layout) -> dict[str, Any] | None:
    """job_resources of a job with an allocation (None before): its nodes, CPUs and memory.
    (Which cores a job holds, Grid Engine does not say: no per-socket core map.)"""
    from .squeue import nodes_text

    mem = rec.min_memory_mb or 0
    per_node = max(1, rec.num_nodes)
    alloc = [{"index": i, "name": n, "cpus": {"count": max(1, rec.num_cpus // per_node), "used": 0},
              "memory": {"used": 0, "allocated": mem * (rec.num_cpus if rec.mem_per_cpu else 1) // per_node},
              "sockets": []}
             for i, n in enumerate(rec.nodes)]
    return {"select_type": [layout.select_type],
            "nodes": {"count": len(rec.nodes), "select_type": ["ONE_ROW"], "list": nodes_text(rec), "whole": False,
                      "allocation": alloc},
            "cpus": rec.num_cpus, "threads_per_core": num(None)}


def job(rec: Any, ctx: Any, layout: Layout, alloc_host: str = "") -> dict[str, Any]:
    """One job of squeue's and scontrol's document, in the layout's field order."""
    from .squeue import nodes_text, tres_per_node, tres_text
    from ..jobids import task_job_id
    from ..model import shown_state

    started = rec.state != "PENDING" and bool(rec.nodes)
    t = _times(rec, started)
    mem = rec.min_memory_mb
    held = (rec.state == "PENDING" and rec.reason in _HELD) or rec.priority == 0  # (a suspended job's is 0)
    sub = rec.extra.get("submit")
    d: dict[str, Any] = {
        "account": rec.account or "", "accrue_time": num(t["accrue"]), "admin_comment": "",
        "allocating_node": alloc_host or getattr(sub, "submit_host", None) or "",
        "array_job_id": num(rec.job_id if rec.is_array else 0), "array_task_id": num(rec.array_task),
        "array_max_tasks": num(rec.array_max_tasks or 0), "array_task_string": rec.array_pending or "",
        "association_id": 0, "batch_features": "", "batch_flag": True,
        "batch_host": (rec.batch_host or (rec.nodes[0] if rec.nodes else "")) if started else "",
        "flags": _flags(rec, ctx, started, layout), "burst_buffer": "", "burst_buffer_state": "",
        "cluster": ctx.cfg.cluster.name, "cluster_features": "", "command": rec.command or "",
        "comment": rec.comment or "", "container": "", "container_id": "", "container_type": "",
        "contiguous": False, "core_spec": 0, "thread_spec": 32766, "cores_per_socket": num(None),
        "billable_tres": num(float(rec.num_cpus)) if started else unset_float(),
        "cpus_per_task": num(rec.cpus_per_task), "cpu_frequency_minimum": num(None),
        "cpu_frequency_maximum": num(None), "cpu_frequency_governor": num(None), "cpus_per_tres": "", "cron": "",
        "deadline": num(0), "delay_boot": num(0), "dependency": _dependency(rec, ctx),
        "derived_exit_code": exit_json(0, 0), "eligible_time": num(t["eligible"]), "end_time": num(t["end"]),
        "excluded_nodes": rec.exc_nodes or "", "exit_code": exit_json(rec.exit_code, rec.exit_signal),
        "extra": "", "failed_node": "", "features": rec.features or "", "federation_origin": "",
        "federation_siblings_active": "", "federation_siblings_viable": "",
        "gres_detail": [rec.gres.replace("gres:", "", 1)] if rec.gres and started else [],
        "group_id": rec.gid if rec.gid is not None else 0, "group_name": rec.group or "",
        "het_job_id": num(0), "het_job_id_set": "", "het_job_offset": num(0),
        "job_id": task_job_id(rec.job_id, rec.array_task),
        "job_resources": _resources(rec, layout) if started else None, "job_size_str": [],
        "job_state": [shown_state(rec)], "last_sched_evaluation": num(epoch(rec.start_time or rec.submit_time)),
        "licenses": rec.licenses or "", "licenses_allocated": (rec.licenses or "") if started else "",
        "mail_type": [], "mail_user": rec.user or "", "max_cpus": num(0), "max_nodes": num(0), "mcs_label": "",
        "memory_per_tres": "", "memory_update_delay": 0, "memory_update_margin": 0, "name": rec.name or "",
        "network": "", "nodes": nodes_text(rec) if started else "", "nice": rec.nice or 0,
        "tasks_per_core": num(infinite=True), "tasks_per_tres": num(0), "tasks_per_node": num(0),
        "tasks_per_socket": num(infinite=True), "tasks_per_board": num(0), "cpus": num(rec.num_cpus),
        "node_count": num(rec.num_nodes), "tasks": num(rec.num_tasks), "partition": rec.partition or "",
        "prefer": "", "memory_per_cpu": num(mem if mem and rec.mem_per_cpu else None),
        "memory_per_node": num(mem if mem and not rec.mem_per_cpu else None),
        "minimum_cpus_per_node": num(rec.cpus_per_task), "minimum_tmp_disk_per_node": num(0),
        "power": {"flags": []}, "preempt_time": num(0), "preemptable_time": num(0), "pre_sus_time": num(0),
        "hold": held, "priority": num(rec.priority), "priority_by_partition": [], "profile": ["NOT_SET"],
        "qos": rec.qos or "normal", "reboot": False, "required_nodes": rec.req_nodes or "", "required_switches": 0,
        "requeue": bool(rec.requeue), "resize_time": num(0), "restart_cnt": 0,
        "resv_name": rec.extra.get("reservation") or "", "scheduled_nodes": "", "segment_size": 0,
        "selinux_context": "", "shared": [], "step_id": None, "sockets_per_board": 0, "sockets_per_node": num(None),
        "start_time": num(t["start"]), "state_description": "", "state_reason": rec.reason or "None",
    }
    d.update(_std(rec, layout))
    d.update({
        "submit_time": num(epoch(rec.submit_time or rec.start_time)), "submit_line": rec.extra.get("submit_line") or "",
        "suspend_time": num(epoch(rec.start_time) if rec.state == "SUSPENDED" else 0), "system_comment": "",
        "time_limit": limit(rec.time_limit), "time_minimum": num(0), "threads_per_core": num(None), "tres_bind": "",
        "tres_freq": "", "tres_per_job": "", "tres_per_node": tres_per_node(rec, ctx, ""), "tres_per_socket": "",
        "tres_per_task": "", "tres_req_str": tres_text(rec, ctx),
        "tres_alloc_str": tres_text(rec, ctx) if started else "",
        "user_id": rec.uid if rec.uid is not None else 0, "user_name": rec.user or "", "maximum_switch_wait_time": 0,
        "wckey": "", "current_working_directory": rec.work_dir or "",
    })
    if layout.fields_45:
        d["step_id"] = _step_id(rec, ctx)
        drop = ("power",)
    else:
        drop = ("container_type", "licenses_allocated", "memory_update_delay", "memory_update_margin",
                "segment_size", "step_id", "submit_line")
    for k in drop:
        del d[k]
    return d


def _dependency(rec: Any, ctx: Any) -> str:
    """The dependency as squeue's %E shows it: unfulfilled, or failed (DependencyNeverSatisfied)."""
    from .squeue import dependency_text

    text = dependency_text(rec, ctx)
    if text == "(null)":
        return ""
    if rec.reason == "DependencyNeverSatisfied":
        return text.replace("(unfulfilled)", "(failed)")
    return text


def _std(rec: Any, layout: Layout) -> dict[str, str]:
    """The standard streams: the expanded paths (v0.0.42, stderr repeating stdout's when merged),
    or the patterns as given and the expanded paths beside them (v0.0.45, stderr empty when
    merged)."""
    out, err, inp = _path(rec.std_out, rec), _path(rec.std_err, rec), rec.std_in or "/dev/null"
    if not layout.fields_45:
        return {"standard_error": err or out, "standard_input": inp, "standard_output": out}
    merged = not rec.std_err or rec.std_err == rec.std_out
    return {"standard_input": inp, "standard_output": rec.std_out or "",
            "standard_error": "" if merged else rec.std_err,
            "stdin_expanded": inp, "stdout_expanded": out, "stderr_expanded": "" if merged else err}


def _path(pattern: str, rec: Any) -> str:
    """A stream's path: its pattern expanded, under the job's working directory where relative."""
    from .scontrol import _expand

    path = _expand(pattern, rec)
    if path and not path.startswith("/") and rec.work_dir:
        return rec.work_dir.rstrip("/") + "/" + path
    return path


def _step_id(rec: Any, ctx: Any) -> dict[str, Any]:
    """26.05's step_id of a job: its sluid (what its job wrapper sets as SLURM_JOB_SLUID, from the
    submit record's cluster and time), the job's id, the whole job ("entire")."""
    from .. import releases
    from ..jobids import task_job_id

    sub = rec.extra.get("submit")
    made = getattr(sub, "sub", None) if sub is not None else None
    sluid = releases.sluid(str(getattr(sub, "cluster", None) or ctx.cfg.cluster.name), int(made * 1000),
                           rec.job_id, rec.array_task) if isinstance(made, (int, float)) else ""
    return {"sluid": sluid, "job_id": num(task_job_id(rec.job_id, rec.array_task)),
            "step_het_component": num(None), "step_id": "entire"}


def jobs_document(records: list[Any], ctx: Any, layout: Layout, client: Client | None = None,
                  alloc_hosts: list[str] | None = None) -> dict[str, Any]:
    """squeue's (and scontrol show job's) document: the jobs, the controller's last backfill and
    update (the time of the listing: the shim has no backfill cycle), meta, errors, warnings.
    ``alloc_hosts``: each job's submitting host (else its submit record's)."""
    now = num(int(ctx.now))
    hosts = alloc_hosts or [""] * len(records)
    return {"jobs": [job(r, ctx, layout, h) for r, h in zip(records, hosts)], "last_backfill": now,
            "last_update": now, "meta": meta(layout, ctx.release, ctx.cfg.cluster.name, client), "errors": [],
            "warnings": []}


def job_document(records: list[Any], alloc_hosts: list[str], ctx: Any, client: Client | None,
                 yaml: bool = False) -> str:
    """``scontrol show job --json`` (``--yaml``): squeue's document of the jobs shown."""
    doc = jobs_document(records, ctx, layout_of(ctx.release) or LAYOUTS["v0.0.42"], client, alloc_hosts)
    return text_of(doc, yaml)


# --- sacct --json ---------------------------------------------------------------------------------------

_TRES_IDS = {"cpu": 1, "mem": 2, "energy": 3, "node": 4, "billing": 5, "fs/disk": 6, "vmem": 7, "pages": 8}
_ENERGY = {"type": "energy", "name": "", "id": 3, "count": 0}


def tres_list(text: str, energy: int | None = None) -> list[dict[str, Any]]:
    """A TRES text (``cpu=1,mem=100M,node=1``) as data_parser's list (memory in MB); ``energy``:
    an energy entry after mem (a job's allocation carries slurmdbd's -2, "not measured")."""
    from .sacct import _mem_to_mb

    out = []
    for item in filter(None, (text or "").split(",")):
        k, _, v = item.partition("=")
        typ, _, name = k.partition("/")
        count = _mem_to_mb(v) if typ == "mem" else int(v) if v.isdigit() else 0
        out.append({"type": typ, "name": name, "id": _TRES_IDS.get(typ, 1000), "count": count})
    if energy is not None and out:
        out.append(dict(_ENERGY, count=energy))
    return sorted(out, key=lambda x: x["id"])  # (by id, as slurmdbd lists them; the text: by name)


def _usecs(v: float | None) -> dict[str, int]:
    v = v or 0.0
    s = int(v)
    return {"seconds": s, "microseconds": int(round((v - s) * 1_000_000))}


def _licenses(row: Any) -> str:
    extra = (row.tres[3] if row.tres and len(row.tres) > 3 else None) or {}
    return ",".join(f"{k[8:]}:{v}" for k, v in extra.items() if k.startswith("license/"))


def _sluid(row: Any) -> str:
    """The job's sluid as sacct's SLUID field prints it (the milliseconds its wrapper used)."""
    from .sacct import _sluid as sacct_sluid

    return sacct_sluid(row)


def _sacct_std(row: Any) -> dict[str, str]:
    """A row's streams (render/sacct.Stdio) as sacct's JSON has them, in its order: each stream
    expanded, then as written; all empty where sacct knows none (a job not submitted by sbatch,
    srun's and salloc's own jobs, the batch step)."""
    std = row.std
    if std is None:
        return dict.fromkeys(("stdin_expanded", "stdout_expanded", "stderr_expanded", "stdout", "stderr", "stdin"), "")
    out, err, inp = std.written
    return {"stdin_expanded": std.expanded(2, row), "stdout_expanded": std.expanded(0, row),
            "stderr_expanded": std.expanded(1, row), "stdout": out, "stderr": err, "stdin": inp}


def sacct_job(row: Any, steps: list[Any], layout: Layout) -> dict[str, Any]:
    """One job of sacct's document, with its steps, in the layout's field order."""
    from .sacct import _nodelist

    started = bool(row.start)
    arrayed = row.task is not None or row.array_text is not None
    mem = int(row.req_mem_mb or 0)
    ncpus = row.ncpus or 1
    sluid = _sluid(row)
    d: dict[str, Any] = {
        "account": row.account or "",
        "comment": {"administrator": row.admin_comment or "", "job": row.comment or "", "system": ""},
        "allocation_nodes": (row.nnodes or 1) if started else 0,
        "array": {"job_id": row.job_id if arrayed else 0,
                  "limits": {"max": {"running": {"tasks": int(row.extra.get("throttle") or 0)}}},
                  "task_id": num(row.task), "task": (row.array_text or "").strip("[]")},
        "association": {"account": "" if layout.fields_45 else row.account or "", "cluster": row.cluster or "",
                        "partition": "", "user": "" if layout.fields_45 else row.user or "", "id": 0},
        "block": "", "cluster": row.cluster or "", "constraints": row.constraints or "", "container": "",
        "sluid": sluid, "derived_exit_code": exit_json(*(getattr(row, "derived", None) or (0, 0))),
        "time": {"elapsed": row.elapsed, "eligible": int(row.eligible or 0), "end": int(row.end or 0),
                 "planned": num(max(0, int(row.start - (row.eligible or row.submit or row.start)))
                                if started else None),
                 "start": int(row.start or 0), "submission": int(row.submit or 0), "suspended": 0,
                 "system": _usecs(row.sys_cpu), "limit": limit(row.time_limit), "total": _usecs(row.total_cpu),
                 "user": _usecs(row.user_cpu)},
        "exclusive": "NO", "exit_code": exit_json(row.exit, row.signal), "extra": "", "failed_node": "",
        "flags": ["STARTED_ON_SCHEDULE", "START_RECEIVED"] if started else [], "group": row.group or "",
        "het": {"job_id": 0, "job_offset": num(None)}, "job_id": row.job_id, "name": row.name or "",
        "licenses": _licenses(row), "mcs": {"label": ""}, "nodes": _nodelist(row), "oversubscribe": "NO",
        "partition": row.partition or "", "hold": row.state == "PENDING" and not row.eligible,
        "priority": num(row.priority or 0), "qos": row.qos or "", "qosreq": "",
        "required": {"CPUs": ncpus, "memory_per_cpu": num(mem // ncpus if mem else None),
                     "memory_per_node": num(None)},
        "kill_request_user": "" if row.cancel_uid is None else str(row.cancel_uid), "restart_cnt": 0,
        "reservation": {"id": 0, "name": "", "requested": ""} if layout.fields_45 else {"id": 0, "name": ""},
        "script": "", "segment_size": 0, "original_sluid": sluid,
        **_sacct_std(row), "state": {"current": [row.state or "PENDING"], "reason": row.reason or "None"},
        "steps": [sacct_step(s, layout) for s in steps], "submit_line": row.submit_line or "",
        "tres": {"allocated": tres_list(row.alloc_tres, energy=-2), "requested": tres_list(row.req_tres)},
        "used_gres": "", "user": row.user or "", "wckey": {"wckey": "", "flags": []},
        "working_directory": row.workdir or "",
    }
    if not layout.fields_45:
        for k in ("sluid", "exclusive", "oversubscribe", "segment_size", "original_sluid"):
            del d[k]
    return d


def sacct_step(s: Any, layout: Layout) -> dict[str, Any]:
    """One step (the batch step) of a sacct job."""
    from .sacct import _nodelist

    nodes = list(s.nodes or [])
    usage = {"max": [], "min": [], "average": [dict(_ENERGY)], "total": [dict(_ENERGY)]}
    t: dict[str, Any] = {"elapsed": s.elapsed, "end": num(int(s.end or 0)), "start": num(int(s.start or 0)),
                         "suspended": 0, "system": _usecs(s.sys_cpu)}
    if layout.fields_45:
        t["limit"] = limit(s.time_limit)
    t.update({"total": _usecs(s.total_cpu), "user": _usecs(s.user_cpu)})
    step: dict[str, Any] = {"id": f"{s.job_text.rsplit('.', 1)[0]}.{s.step}", "name": s.step}
    if layout.fields_45:  # (in this order; 24.11's steps have none)
        std = _sacct_std(s)
        step.update({k: std[k] for k in ("stderr", "stdin", "stdout", "stderr_expanded", "stdin_expanded",
                                         "stdout_expanded")})
    d: dict[str, Any] = {
        "time": t, "exit_code": exit_json(s.exit, s.signal),
        "nodes": {"count": len(nodes), "range": _nodelist(s) if nodes else "", "list": nodes},
        "tasks": {"count": s.ntasks or 1}, "pid": "",
        "CPU": {"requested_frequency": {"min": num(0), "max": num(0)}, "governor": "0"},
        "kill_request_user": "", "state": [s.state], "statistics": {"CPU": {"actual_frequency": 0},
                                                                     "energy": {"consumed": num(0)}},
        "step": step, "submit_line": "", "task": {"distribution": "Unknown"},
        "tres": {"requested": usage, "consumed": {k: [dict(x) for x in v] for k, v in usage.items()},
                 "allocated": tres_list(s.alloc_tres)},
    }
    del d["submit_line" if not layout.fields_45 else "pid"]
    return d


def sacct_document(groups: list[tuple[Any, list[Any]]], layout: Layout, release: Any, cluster: str,
                   client: Client | None) -> dict[str, Any]:
    """sacct's document: the jobs, meta, errors, warnings."""
    return {"jobs": [sacct_job(j, steps, layout) for j, steps in groups],
            "meta": meta(layout, release, cluster, client), "errors": [], "warnings": []}


# --- sinfo --json -----------------------------------------------------------------------------------------

def _span(values: list[int]) -> dict[str, int]:
    return {"minimum": min(values, default=0), "maximum": max(values, default=0)}


def _partition(part: Any, nodes: list[Any], layout: Layout, licenses: str) -> dict[str, Any]:
    """The partition block of a sinfo row: its nodes, TRES, defaults and limits."""
    from ..hostlist import compress

    names = sorted({n.name for n in nodes})
    cpus = sum(n.cpus for n in {n.name: n for n in nodes}.values())
    mem = sum(n.mem_mb or 0 for n in {n.name: n for n in nodes}.values())
    gpus = sum(int(n.gres.rsplit(":", 1)[1]) for n in {n.name: n for n in nodes}.values()
               if n.gres.startswith("gpu:") and n.gres.rsplit(":", 1)[1].isdigit())
    tres = f"cpu={cpus},mem={mem}M,node={len(names)},billing={cpus}" + (f",gres/gpu={gpus}" if gpus else "") + \
        (f",{licenses}" if licenses else "")
    d: dict[str, Any] = {
        "nodes": {"allowed_allocation": "", "configured": compress(names) if names else "", "total": len(names)},
        "accounts": {"allowed": "", "deny": ""}, "groups": {"allowed": ""},
        "qos": {"allowed": "", "deny": "", "assigned": ""}, "alternate": "",
        "tres": {"billing_weights": "", "configured": tres}, "cluster": "",
        "select_type": ["NONE"] if layout.fields_45 else [],
        "cpus": {"task_binding": [] if layout.fields_45 else 0, "total": cpus},
        "defaults": {"memory_per_cpu": 0, "partition_memory_per_cpu": num(None), "partition_memory_per_node": num(0),
                     "time": num(part.default_time), "job": ""},
    }
    if layout.fields_45:
        d["flags"] = ["DEFAULT"] if part.default else []
        d["partition"] = {"exclusive": "NO", "oversubscribe": "NO", "state": ["UP"]}
    shares = 0 if layout.fields_45 else 1
    d.update({
        "grace_time": 0,
        "maximums": {"cpus_per_node": num(infinite=True), "cpus_per_socket": num(infinite=True), "memory_per_cpu": 0,
                     "partition_memory_per_cpu": num(None), "partition_memory_per_node": num(0),
                     "nodes": num(infinite=True), "shares": shares, "oversubscribe": {"jobs": shares, "flags": []},
                     "time": limit(part.max_time), "over_time_limit": num(None)},
        "minimums": {"nodes": 0}, "name": part.name, "node_sets": "",
    })
    if layout.fields_45:
        d["preempt_mode"] = ["CLUSTER_GLOBAL"]
    d.update({"priority": {"job_factor": 1, "tier": 1}, "timeouts": {"resume": num(None), "suspend": num(None)}})
    if layout.fields_45:
        d["topology"] = ""
    else:
        d["partition"] = {"state": ["UP"]}
    d["suspend_time"] = num(None)
    return d


def sinfo_row(row: Any, layout: Layout, licenses: str = "") -> dict[str, Any]:
    """One sinfo row (a partition's nodes alike in state) as 24.11 and 26.05 list it."""
    nodes = row.nodes
    alloc = sum(1 for n in nodes if n.state in ("allocated", "mixed", "completing"))
    idle = sum(1 for n in nodes if n.state == "idle")
    other = len(nodes) - alloc - idle
    states = sorted({n.state_long.rstrip("*").upper() for n in nodes}) or ["IDLE"]
    loads = [int(round((n.load or 0.0) * 100)) for n in nodes]
    free = [n.free_mem_mb or 0 for n in nodes]
    first = nodes[0] if nodes else None
    d: dict[str, Any] = {
        "port": 6818, "node": {"state": states},
        "nodes": {"allocated": alloc, "idle": idle, "other": other, "total": len(nodes), "hostnames": [],
                  "addresses": [], "nodes": [n.name for n in nodes]},
        "cpus": {"allocated": sum(n.cpus_alloc for n in nodes),
                 "idle": sum(max(0, n.cpus - n.cpus_alloc) for n in nodes if not n.other),
                 "other": sum(n.cpus for n in nodes if n.other), "total": sum(n.cpus for n in nodes),
                 **_span([n.cpus for n in nodes]), "load": _span(loads), "per_node": {"max": num(infinite=True)}},
        "sockets": _span([n.sockets for n in nodes]), "cores": _span([n.cores_per_socket for n in nodes]),
        "threads": _span([n.threads_per_core for n in nodes]), "disk": {"minimum": 0, "maximum": 0},
        "memory": {**_span([n.mem_mb or 0 for n in nodes]),
                   "free": {"minimum": num(min(free, default=0)), "maximum": num(max(free, default=0))},
                   "allocated": 0},
        "weight": {"minimum": 1, "maximum": 1}, "features": {"total": "", "active": ""},
        "gres": {"total": first.gres if first else "", "used": first.gres_used if first else ""},
        "cluster": "", "comment": "", "extra": "",
        "reason": {"description": first.reason if first else "", "time": 0, "user": ""}, "reservation": "",
        "resource_spec": {"cpus": "", "memory": 0}, "partition": _partition(row.part, nodes, layout, licenses),
    }
    if layout.fields_45:  # the reason's user moved out of the reason, after the reservation
        del d["reason"]["user"]
        items = list(d.items())
        at = [k for k, _ in items].index("reservation") + 1
        d = dict(items[:at] + [("reason_set_by_user", "")] + items[at:])
    return d


def sinfo_document(rows: list[Any], layout: Layout, release: Any, cluster: str, client: Client | None,
                   licenses: str = "") -> dict[str, Any]:
    """sinfo's document: its rows, meta, errors, warnings."""
    return {"sinfo": [sinfo_row(r, layout, licenses) for r in rows], "meta": meta(layout, release, cluster, client),
            "errors": [], "warnings": []}


# --- the commands' texts, in the release's layout ----------------------------------------------------------

def text_of(doc: dict[str, Any], yaml: bool) -> str:
    """The document as JSON, or as YAML in 24.11's and 26.05's dialect (render/yaml.py)."""
    text = dumps(doc)
    if not yaml:
        return text
    from .yaml import document

    return document(json.loads(text), newer=True)


def squeue_text(records: list[Any], ctx: Any, yaml: bool = False) -> str:
    """``squeue --json``/``--yaml`` in the layout of the site's release (``ctx.release``; 22.05's:
    render/squeue.py), the client being ``ctx.client``. No final newline."""
    layout = layout_of(ctx.release)
    if layout is None:
        from . import squeue

        return squeue.yaml_document(records, ctx) if yaml else squeue.json_document(records, ctx)
    return text_of(jobs_document(records, ctx, layout, ctx.client), yaml)


def sacct_text(groups: list[tuple[Any, list[Any]]], release: Any, cluster: str, client: Client | None,
               yaml: bool = False) -> str:
    """``sacct --json``/``--yaml`` in the layout of ``release`` (22.05's: render/sacct.py)."""
    layout = layout_of(release)
    if layout is None:
        from . import sacct

        return sacct.yaml_document(groups) if yaml else sacct.json_document(groups)
    return text_of(sacct_document(groups, layout, release, cluster, client), yaml) + "\n"
