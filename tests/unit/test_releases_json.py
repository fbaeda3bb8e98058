"""--json and --yaml in each release's layout (issue 30, render/openapi.py): 22.05's OpenAPI v0.0.38
(tests/unit/test_squeue.py, test_sacct.py, test_sinfo.py), 24.11's data_parser v0.0.42 and 26.05's
v0.0.45, compared with what each real release printed (fixtures/slurm-*/cases.json: squeue_json,
squeue_json_j, squeue_yaml, scontrol_show_job_json, sacct_json, sinfo_json).

Each job, row and step of a capture is made into the shim's record of it (the values the shim
reads from Grid Engine and its own records, taken from the capture), rendered, and compared field
for field with the capture, but for the fields ``NOT_CONTROLLED`` names: values the shim cannot
know from Grid Engine, each with its reason."""

from __future__ import annotations

import json
import re
from datetime import datetime
from types import SimpleNamespace

import pytest
import yaml

from conftest import release_cases
from shim.__main__ import dispatch
from shim.gridengine import backends
from shim.gridengine.replay import ReplayBackend
from shim.slurm import releases
from shim.slurm.model import JobRecord
from shim.slurm.render import openapi
from shim.slurm.render import sacct as sacct_view
from shim.slurm.render import sinfo as sinfo_view
from shim.slurm.render.yaml import document

NEWER = ("24.11", "26.05")

# What the shim does not control, and why (a path: keys joined by "."; a list's items by "[]").
NOT_CONTROLLED = {
    "association_id": "slurmdbd's row number of the user's association: Grid Engine has none (0)",
    "association.id": "the same, in sacct's association",
    "last_sched_evaluation": "when the scheduler last looked at the job (a Grid Engine scheduler run is not seen)",
    "max_nodes": "the controller's upper node bound of the request (1 after -H or -p, -N's on 26.05): not kept",
    "job_resources.nodes.allocation[].sockets": "which cores of which socket a job holds: Grid Engine does not say",
    "gres_detail": "the GPU indexes (IDX:n) a job holds: the record keeps their count, not their numbers",
    "state_description": "a reason the shim never gives (the nodes reserved for a partition of higher tier)",
    "step_id.sluid": "the shim's own sluid (releases.sluid, as SLURM_JOB_SLUID): checked against ours below",
    "sluid": "the same, in sacct", "original_sluid": "the same",
    "node.state": "24.11's PLANNED, the backfill's plan for the node: no backfill cycle to show",
    "memory.allocated": "the memory the node has given to jobs: Grid Engine's hosts report no such sum",
}
# an array task's own fields: its job id is the shim's (docs/array-ids.md), and so are the paths it
# expands and its step's id; the second the controller split it off is its accrual and eligibility
# (the last two: of the array's pending rest too)
ARRAY_TASK_OWN = ("job_id", "standard_output", "standard_error", "stdout_expanded", "step_id.job_id",
                  "accrue_time", "eligible_time")


cases = release_cases


def captured(release: str, case: str) -> dict:
    return json.loads(cases(release)[case]["stdout"])


@pytest.fixture
def site(release_site):
    """set(release): the unit-test site config with ``[slurm] release``; returns a squeue Ctx."""
    return release_site


def drop(value, path: str):
    """``value`` without the field at ``path`` (``a.b``, ``a[].b``), in place."""
    head, _, rest = path.partition(".")
    if head.endswith("[]"):
        for item in value.get(head[:-2]) or []:
            drop(item, rest)
    elif not rest:
        value.pop(head, None)
    elif isinstance(value.get(head), dict):
        drop(value[head], rest)
    return value


def controlled(doc: dict, extra: tuple[str, ...] = ()) -> dict:
    doc = json.loads(json.dumps(doc))
    for path in (*NOT_CONTROLLED, *extra):
        drop(doc, path)
    return doc


# --- the records of a capture --------------------------------------------------------------------------

def _n(v):
    return v["number"] if v["set"] else None


def _dt(v) -> datetime | None:
    return datetime.fromtimestamp(v["number"]) if v["set"] and v["number"] else None


def record_of(j: dict) -> JobRecord:
    """The shim's record of a captured job: what qstat and the submit record give."""
    started = bool(j["nodes"])
    dep = re.sub(r"\((unfulfilled|failed)\)", "", j["dependency"])
    arr = _n(j["array_job_id"])
    rec = JobRecord(
        arr or j["job_id"], array_task=_n(j["array_task_id"]), array_pending=j["array_task_string"] or None,
        array_max_tasks=_n(j["array_max_tasks"]) or None, name=j["name"], user=j["user_name"], uid=j["user_id"],
        group=j["group_name"], gid=j["group_id"], state=j["job_state"][0], reason=j["state_reason"],
        partition=j["partition"], submit_time=_dt(j["submit_time"]),
        start_time=_dt(j["start_time"]) if started else None,
        time_limit=_n(j["time_limit"]), nodes=[j["nodes"]] if started else [], num_nodes=_n(j["node_count"]),
        num_cpus=_n(j["cpus"]), num_tasks=_n(j["tasks"]), cpus_per_task=_n(j["cpus_per_task"]),
        min_memory_mb=_n(j["memory_per_cpu"]) or _n(j["memory_per_node"]), mem_per_cpu=j["memory_per_cpu"]["set"],
        priority=_n(j["priority"]), nice=j["nice"], account=j["account"], qos=j["qos"],
        work_dir=j["current_working_directory"], command=j["command"], std_out=j["standard_output"],
        std_err=j["standard_error"] or j["standard_output"], dependency=dep, licenses=j["licenses"],
        gres="gres:" + j["tres_per_node"][5:] if j["tres_per_node"] else "", batch_host=j["batch_host"])
    begin = j["start_time"]["number"] if not started and j["start_time"]["number"] else None
    rec.extra["submit"] = SimpleNamespace(sub=j["submit_time"]["number"] + 0.25, cluster="cluster", begin=begin,
                                          submit_host=j["allocating_node"])
    rec.extra["detailed"] = True
    if "submit_line" in j:
        rec.extra["submit_line"] = j["submit_line"]
    if dep:
        rec.extra["predecessors"] = {int(x) for x in re.findall(r":(\d+)", dep)}
    return rec


def _ours_and_theirs(ctx, j: dict) -> tuple[dict, dict]:
    rec = record_of(j)
    ours = openapi.job(rec, ctx, openapi.layout_of(ctx.release))
    own = ARRAY_TASK_OWN if _n(j["array_task_id"]) is not None else ARRAY_TASK_OWN[-2:] if _n(j["array_job_id"]) else ()
    if "step_id" in j:  # 26.05: the sluid is the shim's own, as its job wrapper sets it
        made = rec.extra["submit"].sub
        assert ours["step_id"]["sluid"] == releases.sluid("cluster", int(made * 1000), rec.job_id, rec.array_task)
    return controlled(ours, own), controlled(j, own)


# --- squeue --json, scontrol show job --json -------------------------------------------------------------

@pytest.mark.parametrize("name", NEWER)
@pytest.mark.parametrize("case", ["squeue_json", "squeue_json_j", "scontrol_show_job_json"])
def test_each_job_is_the_releases_layout(site, name, case):
    """Every job of the capture (running, suspended, pending held, dependent, throttled, begun
    later, with GPUs and licenses, bob's), field for field: numbers as {set, infinite, number},
    job_state a list, exit codes with their status, 26.05's stdout pattern beside the expanded
    path, step_id, submit_line."""
    ctx = site(name)
    jobs = captured(name, case)["jobs"]
    assert jobs
    for j in jobs:
        ours, theirs = _ours_and_theirs(ctx, j)
        assert list(ours) == list(theirs), j["job_id"]
        assert ours == theirs, j["job_id"]


@pytest.mark.parametrize("name", NEWER)
@pytest.mark.parametrize("case, argv, words", [
    ("squeue_json", ["squeue", "--json"], None),
    ("squeue_json_j", None, None),
    ("scontrol_show_job_json", None, "words"),
])
def test_the_document_and_its_meta_block(site, name, case, argv, words):
    """The top level (jobs, last_backfill, last_update, meta, errors, warnings) and meta: the
    data_parser, the client, its command line (24.11: without its last word; scontrol: of its
    command words), the release's version as strings, the cluster."""
    ctx = site(name)
    c = cases(name)[case]
    argv = argv or c["cmd"].split()
    ctx.client = openapi.Client(argv, "root", "root", argv[1:-1] if words else None)
    ref = json.loads(c["stdout"])
    recs = [record_of(j) for j in ref["jobs"]]
    doc = json.loads(openapi.squeue_text(recs, ctx))
    assert list(doc) == list(ref) == ["jobs", "last_backfill", "last_update", "meta", "errors", "warnings"]
    assert doc["meta"] == ref["meta"] and (doc["errors"], doc["warnings"]) == ([], [])
    for k in ("last_backfill", "last_update"):  # (the time of the listing)
        assert doc[k] == {"set": True, "infinite": False, "number": int(ctx.now)}


def test_22_05_keeps_its_openapi_document(site):
    """22.05's layout is its own (render/squeue.py), whatever openapi.py builds."""
    ctx = site("22.05")
    assert openapi.layout_of(ctx.release) is None
    rec = record_of(captured("24.11", "squeue_json_j")["jobs"][0])
    doc = json.loads(openapi.squeue_text([rec], ctx))
    ref = json.loads(cases("22.05")["squeue_json"]["stdout"])
    assert doc["meta"] == ref["meta"] and list(doc) == ["meta", "errors", "jobs"]
    assert list(doc["jobs"][0]) == list(ref["jobs"][0]) and doc["jobs"][0]["job_state"] == "RUNNING"


# --- the filters of squeue --json ------------------------------------------------------------------------

@pytest.fixture
def queue(site, monkeypatch):
    """set(release): squeue reads the queue of that release's squeue_json capture (22.05: of
    24.11's; no qstat)."""
    from shim.operations import jobqueue, jobs

    def set_queue(name: str):
        site(name)
        source = name if name in NEWER else "24.11"  # (the records are the same whatever the layout)
        recs = [record_of(j) for j in captured(source, "squeue_json")["jobs"]]
        monkeypatch.setattr(backends, "start_qstat", lambda *a, **k: None)
        monkeypatch.setattr(jobs, "fill_reservations", lambda *a, **k: None)
        monkeypatch.setattr(jobqueue, "listing", lambda cfg, qy, **k: jobs.JobList(
            [r for r in recs if qy.only is None or r.job_id in qy.only], {r.job_id for r in recs}))
        backends.use(ReplayBackend())
        return recs

    return set_queue


@pytest.mark.parametrize("name", NEWER)
def test_squeue_json_honours_j_as_the_release_does(queue, capsys, name):
    """squeue --json -j N lists job N alone (squeue_json_j); 22.05 listed every job."""
    queue(name)
    c = cases(name)["squeue_json_j"]
    assert dispatch("squeue", c["cmd"].split()[1:]) == c["rc"] == 0
    out, err = capsys.readouterr()
    doc, ref = json.loads(out), json.loads(c["stdout"])
    assert [j["job_id"] for j in doc["jobs"]] == [j["job_id"] for j in ref["jobs"]] and err == c["stderr"]
    assert doc["meta"]["command"] == ref["meta"]["command"]
    assert out.endswith("}\n") and c["stdout"].endswith("}\n")


@pytest.mark.parametrize("name", NEWER)
def test_squeue_json_keeps_what_the_other_filters_keep(queue, capsys, name):
    recs = queue(name)
    assert dispatch("squeue", ["--json", "-u", "root"]) == 0
    users = [j["user_name"] for j in json.loads(capsys.readouterr()[0])["jobs"]]
    assert users == ["root"] * sum(r.user == "root" for r in recs) and len(users) < len(recs)
    assert dispatch("squeue", ["--json", "-t", "PD"]) == 0
    pending = [j["job_id"] for j in json.loads(capsys.readouterr()[0])["jobs"]]
    assert len(pending) == sum(r.state == "PENDING" for r in recs) > 0


def test_on_22_05_squeue_json_lists_every_job_whatever_the_filters(queue, capsys):
    recs = queue("22.05")
    assert dispatch("squeue", ["--json", "-j", str(recs[0].job_id)]) == 0
    assert len(json.loads(capsys.readouterr()[0])["jobs"]) == len(recs)


# --- scontrol show job --json ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", NEWER)
def test_scontrol_show_job_json_through_the_command(site, capsys, monkeypatch, name):
    """The option exists from 24.11 on (22.05: unrecognized, test_scontrol.py), and prints the
    job in squeue's document, the meta block's command as the release names it."""
    from shim.operations import show
    from shim.slurm.render.scontrol import JobFacts

    ctx = site(name)
    c = cases(name)["scontrol_show_job_json"]
    ref = json.loads(c["stdout"])
    rec = record_of(ref["jobs"][0])
    monkeypatch.setattr(show, "jobs_shown", lambda s, ids: ([rec], 0.0, None))
    monkeypatch.setattr(show, "job_facts", lambda r, cfg, now: JobFacts("root", "localhost", None, ctx))
    backends.use(ReplayBackend())
    assert dispatch("scontrol", c["cmd"].split()[1:]) == c["rc"] == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert err == "" and out.endswith("}\n") and c["stdout"].endswith("}\n")
    assert doc["meta"]["command"] == ref["meta"]["command"]
    assert doc["meta"]["plugin"] == ref["meta"]["plugin"]
    assert controlled(doc["jobs"][0]) == controlled(ref["jobs"][0])
    assert dispatch("scontrol", ["show", "job", str(rec.job_id), "--yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr()[0])["jobs"][0]["job_state"] == [rec.state]


# --- --yaml ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NEWER)
def test_the_yaml_writer_rewrites_the_captured_yaml_byte_for_byte(name):
    """24.11's and 26.05's dialect: an empty string as a bare !!str, long strings folded past
    column 80, an empty line after the end."""
    ref = cases(name)["squeue_yaml"]["stdout"]
    assert "\n    for jobs in higher priority partitions\n" in ref and "!!str\n" in ref
    assert document(yaml.safe_load(ref), newer=True) + "\n" == ref


@pytest.mark.parametrize("name", NEWER)
def test_squeue_yaml_is_the_json_document(site, name):
    ctx = site(name)
    ctx.client = openapi.Client(["squeue", "--yaml"], "root", "root")
    ref = cases(name)["squeue_yaml"]["stdout"]
    recs = [record_of(j) for j in captured(name, "squeue_json")["jobs"]]
    out = openapi.squeue_text(recs, ctx, yaml=True) + "\n"
    assert yaml.safe_load(out) == json.loads(openapi.squeue_text(recs, ctx))
    assert out.endswith("\n...\n\n") and ref.endswith("\n...\n\n")
    meta = ref[ref.index("!!str meta: !!map"):ref.index("!!str errors:")]
    meta = meta.replace("\n  - !!str --yaml", "") if name == "24.11" else meta  # (24.11: one word fewer)
    assert meta.replace("  - !!str squeue\n", "") in out.replace("  - !!str squeue\n", "")


# --- sacct --json -----------------------------------------------------------------------------------------

def rows_of(j: dict, release: releases.Release) -> tuple[sacct_view.Row, list[sacct_view.Row]]:
    """The shim's accounting rows of a captured sacct job (the job row and its batch step), its
    output paths from what sbatch was given (-o as the capture's stdout; -e, -i where not merged,
    /dev/null): the expanded paths are the shim's own."""
    t = j["time"]
    mem = _n(j["required"]["memory_per_cpu"])
    usecs = {k: t[k]["seconds"] + t[k]["microseconds"] / 1e6 for k in ("total", "user", "system")}
    job = sacct_view.Row(
        job_id=j["job_id"], name=j["name"], partition=j["partition"], account=j["account"], user=j["user"],
        group=j["group"], state=j["state"]["current"][0], exit=_n(j["exit_code"]["return_code"]), signal=0,
        submit=t["submission"], eligible=t["eligible"], start=t["start"], end=t["end"], ncpus=j["required"]["CPUs"],
        nnodes=j["allocation_nodes"], nodes=[j["nodes"]], time_limit=_n(t["limit"]), req_mem_mb=mem,
        tres=(1, mem, 1, {}), total_cpu=usecs["total"], user_cpu=usecs["user"], sys_cpu=usecs["system"],
        reason=j["state"]["reason"], workdir=j["working_directory"], qos=j["qos"], priority=_n(j["priority"]),
        cluster=j["cluster"], submit_line=j["submit_line"], extra={},
        std=sacct_view.job_stdio(j["stdout"], j["stderr"] or None, None if j["stdin"] == "/dev/null" else j["stdin"],
                                 j["working_directory"], False, sacct_view.StdStyle.of(release)))
    steps = []
    for s in j["steps"]:
        st = s["time"]
        steps.append(sacct_view.Row(
            job_id=j["job_id"], step="batch", state=s["state"][0], exit=_n(s["exit_code"]["return_code"]),
            start=_n(st["start"]), end=_n(st["end"]), ncpus=1, nnodes=1, nodes=s["nodes"]["list"], ntasks=1,
            tres=(1, mem, 1, {}, False), total_cpu=st["total"]["seconds"] + st["total"]["microseconds"] / 1e6,
            user_cpu=st["user"]["seconds"] + st["user"]["microseconds"] / 1e6,
            sys_cpu=st["system"]["seconds"] + st["system"]["microseconds"] / 1e6, cluster=j["cluster"],
            name="batch"))
    return job, steps


@pytest.mark.parametrize("name", NEWER)
def test_sacct_json_is_the_releases_layout(site, name):
    """A failed job (exit 7) and its batch step: times, the exit code's status, the TRES lists by
    id with the job's energy, state {current, reason}, the paths, 26.05's sluid, exclusive,
    oversubscribe and the step's streams; the meta block as sacct --json -j N named it."""
    site(name)
    c = cases(name)["sacct_json"]
    ref = json.loads(c["stdout"])
    release = releases.get(name)
    groups = [rows_of(j, release) for j in ref["jobs"]]
    client = openapi.Client(c["cmd"].split(), "root", "root")
    text = openapi.sacct_text(groups, release, "cluster", client)
    doc = json.loads(text)
    assert list(doc) == list(ref) and doc["meta"] == ref["meta"] and text.endswith("}\n")
    assert controlled(doc["jobs"][0]) == controlled(ref["jobs"][0])
    assert doc["jobs"][0]["sluid" if name == "26.05" else "job_id"]  # (26.05: the job's own sluid)
    out = openapi.sacct_text(groups, release, "cluster", client, yaml=True)
    assert yaml.safe_load(out)["jobs"][0]["state"] == {"current": ["FAILED"], "reason": "None"}


def test_a_signalled_step_says_its_signal():
    assert openapi.exit_json(0, 15) == {"status": ["SIGNALED"], "return_code": openapi.num(None),
                                        "signal": {"id": openapi.num(15), "name": "TERM"}}
    assert openapi.exit_json(3, 0)["status"] == ["ERROR"] and openapi.exit_json(0, 0)["status"] == ["SUCCESS"]


# --- sinfo --json -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NEWER)
def test_sinfo_json_is_a_row_per_partition_and_node_state(site, name):
    """The node vm (8 CPUs, 7 allocated, 2 GPUs, one in use) in the partitions debug (default)
    and gpu (a default time of 60 minutes, at most 2880): each row as the release printed it."""
    site(name)
    ref = captured(name, "sinfo_json")
    layout = openapi.layout_of(releases.get(name))
    for r in ref["sinfo"]:
        p = r["partition"]
        part = sinfo_view.PartitionInfo(p["name"], default=p["name"] == "debug", max_time=_n(p["maximums"]["time"])
                                        or -1, default_time=_n(p["defaults"]["time"]))
        node = sinfo_view.NodeView("vm", p["name"], "mixed", cpus=8, cpus_alloc=7, sockets=1, cores_per_socket=8,
                                   threads_per_core=1, mem_mb=8000, free_mem_mb=_n(r["memory"]["free"]["minimum"]),
                                   load=r["cpus"]["load"]["minimum"] / 100, gres="gpu:2", gres_used="gpu:1")
        ours = openapi.sinfo_row(sinfo_view.SinfoRow(part, [node]), layout, "license/matlab=3")
        assert list(ours) == list(r)
        assert controlled(ours) == controlled(r)
        assert ours["node"]["state"] == ["MIXED"]
    client = openapi.Client(cases(name)["sinfo_json"]["cmd"].split(), "root", "root")
    doc = openapi.sinfo_document([], layout, releases.get(name), "cluster", client)
    assert doc["meta"] == ref["meta"] and list(doc) == list(ref)


def test_the_table_names_each_releases_layout():
    assert [releases.get(n).json for n in ("22.05", "24.11", "26.05")] == ["v0.0.38", "v0.0.42", "v0.0.45"]
    assert set(openapi.LAYOUTS) == {"v0.0.42", "v0.0.45"}
    assert all(len(why) > 20 for why in NOT_CONTROLLED.values() if not why.startswith("the same"))
