"""The release captures' job actions, replayed (issue 30): each scancel and scontrol case that acts on
the captured cluster's jobs, and that fixtures/release-cases.json marks ``replayed`` here, runs through
the shim's dispatch on the queue of that moment (release_listing.py rebuilds it from
fixtures/release-listings/<release>.json, which names the moment of each case), with Grid Engine's
side answered on that queue as SGE 8.1.9 answers qdel, qhold, qrls, qalter and qmod
(release_listing.ge_action), and prints the release's exit code, stdout and stderr byte for byte.

The Grid Engine call each case makes is checked too (``ACTS``): a case that prints nothing and exits
0 could as well have done nothing."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES
from release_capture import RELEASES, cases
from release_listing import ge_action, table
from shim.proc import Result
from test_release_listing import CapturedQueue, _moment, replay_queue

TABLE = json.loads((FIXTURES / "release-cases.json").read_text())["releases"]
HERE = "test_release_actions.py::test_the_shim_acts_on_the_captured_queue"
ACTIONS = ("qdel", "qhold", "qrls", "qalter", "qmod")


class ActingQueue(CapturedQueue):
    """The captured queue's Grid Engine, which also acts on its jobs: qdel, qhold, qrls, qalter and
    qmod are answered as SGE 8.1.9 answers them on those jobs, by ``caller``."""

    def __init__(self, jobs: list[dict], caller: str):
        super().__init__()
        self.jobs, self.caller = jobs, caller

    def run(self, tool, args, *, input=None, timeout=None):
        if tool not in ACTIONS:
            return super().run(tool, args, input=input, timeout=timeout)
        key = (tool, *args)
        self.calls.append((key, input))
        rc, text = ge_action(self.jobs, self.caller, tool, list(args))
        return Result(key, rc, text, "")

    def acts(self) -> list[list[str]]:
        return [list(key) for key, _ in self.calls if key[0] in ACTIONS]


# What each case asks of Grid Engine (``J``: the case's job id; ``N:name``: the id of the job of that
# name in the moment's table). Signals other than KILL go through the shim's channel to the job
# wrapper, which asks Grid Engine nothing; ids that name no job to act on ask nothing either.
ACTS = {
    "scancel_all_root": None,  # (every root job of the queue: checked apart below)
    "scancel_already_done": [], "scancel_array_range": [["qdel", "A.5-6"]], "scancel_array_task_pending": [["qdel", "A.3"]],
    "scancel_array_task_running": [["qdel", "A.1"]], "scancel_array_whole": [["qdel", "A"]],
    "scancel_name": [["qdel", "N:lic1"]], "scancel_pending": [["qdel", "J"]], "scancel_running": [["qdel", "J"]],
    "scancel_signal_int_numeric_withstep": [],
    "scancel_state_pending_partition": [["qdel", "N:toolong", "N:gpu2"]], "scancel_step": [],
    "scancel_unknown_array_task": [], "scancel_bob_on_root_job": [["qdel", "J"]], "scancel_done_verbose": [],
    "scancel_me_bob_nothing": [],
    "scancel_u_bob": [["qdel", "N:bobjob", "N:bobheld"]], "scancel_verbose": [["qdel", "J"]],
    **{f"scancel_signal_{s}": [] for s in ("int_numeric", "term_batch", "term_batch_withstep", "usr1", "usr1_batch",
                                            "usr1_batch_withstep", "usr1_full", "usr1_full_withstep", "usr1_withstep")},
    # (root's hold is Grid Engine's operator hold; root's release lifts a user's and an operator's)
    "scontrol_hold": [["qhold", "-h", "o", "J"]], "scontrol_hold_again": [["qhold", "-h", "o", "J"]],
    "scontrol_release": [["qrls", "-h", "uo", "J"]], "scontrol_release_array_task": [["qrls", "-h", "uo", "J.3"]], "scontrol_requeue": [["qmod", "-rj", "J"]],
    "scontrol_suspend": [["qmod", "-sj", "J"]], "scontrol_uhold": [["qhold", "J"]],
    "scontrol_release_bob_other": [],  # (bob on root's job: the shim refuses it before asking Grid Engine)
    # (TimeLimit=00:30:00: the wrapper's limit, and Grid Engine's h_rt a minute behind it as the backstop;
    # qalter -l replaces the whole list, so the job's other request is asked again)
    "scontrol_update_timelimit": [["qalter", "-l", "h_rt=1860,mem_free=100M", "J"]],
}


def _want(release: str, name: str, jobs: list[dict]) -> list[list[str]]:
    import re

    ids = {j["name"]: j["id"] for j in jobs}
    found = re.findall(r"(?:^| |=)(\d+)(?:_\[?[-\d]*\]?)?(?:\.\d+)?(?= |$)", cases(release)[name]["cmd"])
    job = found[-1] if found else ""  # (the last number: the job id, after -s 2 and the like)
    arr = str(ids.get("arr", ""))

    def word(w: str) -> str:
        if w.startswith("N:"):
            return str(ids[w[2:]])
        return w.replace("A", arr, 1) if w.startswith("A") else w.replace("J", job, 1) if w.startswith("J") else w

    return [[call[0], *map(word, call[1:])] for call in ACTS[name]]


def rows(kind: str) -> list[tuple[str, str]]:
    return [(r, name) for r in RELEASES for name, (k, what) in TABLE[r].items() if k == kind and what == HERE]


def act(release: str, name: str, tmp_path, monkeypatch, capsys) -> tuple[tuple[int, str, str], ActingQueue]:
    """The shim's (exit code, stdout, stderr) for this case (run as the case's user: replay_queue), and its
    Grid Engine, which acts as that user."""
    user = cases(release)[name]["user"]
    made: list[ActingQueue] = []

    def grid_engine(jobs: list[dict]) -> ActingQueue:
        made.append(ActingQueue(jobs, user))
        return made[-1]

    got = replay_queue(release, name, tmp_path, monkeypatch, capsys, grid_engine=grid_engine)
    return got, made[0]


def named(found: list[tuple[str, str]], names: tuple[str, ...]) -> list[tuple[str, str]]:
    """The table's rows for this test, which names each case it replays (test_release_capture.py
    checks that a test named for a case names it), each with its Grid Engine calls in ACTS."""
    assert {n for _, n in found} == set(names) == set(ACTS), sorted({n for _, n in found} ^ set(names))
    assert all(table(r)["cases"].get(n) for r, n in found)  # (each on a moment of its own naming, not the default)
    return found


@pytest.mark.parametrize("release, name", named(rows("replayed"), (
    "scancel_all_root", "scancel_already_done", "scancel_array_range", "scancel_array_task_pending",
    "scancel_array_task_running", "scancel_array_whole", "scancel_name", "scancel_pending", "scancel_running",
    "scancel_signal_int_numeric_withstep", "scancel_state_pending_partition", "scancel_step",
    "scancel_unknown_array_task", "scancel_bob_on_root_job", "scancel_done_verbose", "scancel_u_bob", "scancel_verbose",
    "scancel_me_bob_nothing",
    "scancel_signal_int_numeric", "scancel_signal_term_batch", "scancel_signal_term_batch_withstep",
    "scancel_signal_usr1", "scancel_signal_usr1_batch", "scancel_signal_usr1_batch_withstep",
    "scancel_signal_usr1_full", "scancel_signal_usr1_full_withstep", "scancel_signal_usr1_withstep",
    "scontrol_hold", "scontrol_hold_again", "scontrol_release", "scontrol_release_array_task", "scontrol_requeue",
    "scontrol_suspend", "scontrol_uhold", "scontrol_update_timelimit", "scontrol_release_bob_other")))
def test_the_shim_acts_on_the_captured_queue(release, name, tmp_path, monkeypatch, capsys):
    case = cases(release)[name]
    got, ge = act(release, name, tmp_path, monkeypatch, capsys)
    assert got == (case["rc"], case["stdout"], case["stderr"])
    jobs = _moment(release, name)["jobs"]
    if ACTS[name] is None:  # scancel -u root: one qdel naming every job of root's in the queue
        assert [sorted(c[1:]) for c in ge.acts()] == [sorted({str(j["id"]) for j in jobs if j["user"] == "root"})]
    else:
        # (the ids of one call in the listing's order, which is Grid Engine's: compared as a set)
        assert [[c[0], *sorted(c[1:])] for c in ge.acts()] == [[c[0], *sorted(c[1:])] for c in _want(release, name, jobs)]


# Grid Engine's answers as release_listing.ge_action gives them, against the recorded ones
# (fixtures/gridengine/sge-8.1.9: live-qdel-mixed.txt, live-qdel-permission-denied.txt,
# live-qhold-array-task.txt, live-qmod-rj.txt, refusals.txt), on a table of the recorded jobs.
RECORDED = [
    {"id": 110, "user": "root", "state": "r", "task": 1, "indices": "1-5"},
    {"id": 110, "user": "root", "state": "qw", "tasks": "2-5", "indices": "1-5"},
    {"id": 119, "user": "root", "state": "qw", "tasks": "1-4", "indices": "1-4"},
    {"id": 112, "user": "root", "state": "qw"},
    {"id": 105, "user": "root", "state": "r"},
    {"id": 121, "user": "root", "state": "r"},
]


def test_the_answers_are_grid_engines_own():
    sge = FIXTURES / "gridengine" / "sge-8.1.9"
    assert ge_action(RECORDED, "root", "qdel", ["999999", "110.9", "119.3-4", "112"]) == \
        (1, (sge / "live-qdel-mixed.txt").read_text())
    assert ge_action(RECORDED, "alice", "qdel", ["105"]) == (1, (sge / "live-qdel-permission-denied.txt").read_text())
    assert ge_action(RECORDED, "root", "qhold", ["110.5"]) == (0, (sge / "live-qhold-array-task.txt").read_text())
    assert ge_action(RECORDED, "root", "qmod", ["-rj", "121"]) == (0, (sge / "live-qmod-rj.txt").read_text())
    refusals = (sge / "refusals.txt").read_text()
    for tool, args, rc in (("qhold", ["999999"], 3), ("qmod", ["-sj", "999999"], 1), ("qalter", ["-N", "x", "999999"], 1)):
        code, text = ge_action(RECORDED, "root", tool, args)
        assert code == rc and f"### as root: {tool} {' '.join(args)}\n{text}### rc={rc}\n" in refusals
