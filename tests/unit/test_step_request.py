"""srun's step request as a typed record (runtime/steps/plan.StepRequest): built from srun's
options, carried as JSON to the job srun makes (``job_main``), read back exactly, and refused
when the JSON holds a key that is no field or a value of the wrong type."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shim.cli import srun
from shim.runtime import steps
from shim.slurm.options import sources
from shim.slurm.options.getopt import getopt

SRC = Path(__file__).resolve().parents[2] / "src"


def request(argv: list[str], environ: dict[str, str] | None = None) -> steps.StepRequest:
    t = srun.table()
    cli, positional = getopt(t, argv)
    o = sources.collect(t, argv, environ=environ or {}, cli=cli)
    return srun.request(o, positional, environ or {})


REALISTIC = ["-n4", "-c2", "-N2", "-l", "-u", "-o", "out-%j.%t", "-e", "err-%j", "-i", "0", "--open-mode=append",
             "-K", "-W", "10", "-t", "1:30:00", "--mpi=pmi2", "--export=NONE,FOO=1", "-D", "/tmp",
             "--distribution=cyclic", "-w", "node[1-2]", "-x", "node3", "-J", "named", "-v", "-O",
             "python3", "train.py", "--epochs", "3"]


def test_a_request_from_srun_s_options_comes_back_equal_from_its_json():
    req = request(REALISTIC, {"FOO": "x"})
    assert (req.ntasks, req.cpus_per_task, req.nodes, req.time, req.mpi) == (4, 2, 2, 90, "pmi2")
    assert req.argv == ["python3", "train.py", "--epochs", "3"] and req.export == {"all": False, "vars": {"FOO": "1"}}
    wire = json.loads(json.dumps(req.to_json()))  # as the payload file carries it
    back = steps.StepRequest.from_json(wire)
    assert back == req and back.to_json() == req.to_json()
    assert back != req.replace(ntasks=5)


def test_a_multi_prog_request_round_trips(tmp_path):
    conf = tmp_path / "multi.conf"
    conf.write_text("0 hostname\n1-2 echo %t %o\n")
    req = request(["-n3", "--mpi=none", "--multi-prog", str(conf)])
    assert req.argv == ["hostname"] and req.argv_per_task == {"0": ["hostname"], "1": ["echo", "1", "0"],
                                                              "2": ["echo", "2", "1"]}
    assert steps.StepRequest.from_json(json.loads(json.dumps(req.to_json()))) == req


def test_defaults_are_those_of_an_empty_request():
    req = steps.StepRequest()
    assert (req.prog, req.argv, req.ntasks, req.cpus_per_task, req.relative, req.mpi, req.pty) == (
        "srun", [], None, 1, 0, "none", False)
    assert steps.StepRequest.from_json({}) == req and req.argv is not steps.StepRequest().argv  # a fresh list each


def test_a_request_is_frozen_and_replace_makes_a_changed_copy():
    req = steps.StepRequest(argv=["true"], ntasks=2)
    with pytest.raises(AttributeError, match="frozen"):
        req.ntasks = 3  # type: ignore[misc]
    other = req.replace(ntasks=3)
    assert (req.ntasks, other.ntasks, other.argv) == (2, 3, ["true"])


def test_an_unknown_key_is_refused():
    wire = steps.StepRequest(argv=["true"]).to_json()
    with pytest.raises(steps.StepError, match="no field ntasks_set"):
        steps.StepRequest.from_json({**wire, "ntasks_set": True})


@pytest.mark.parametrize("key,value", [
    ("ntasks", "2"), ("ntasks", True), ("cpus_per_task", None), ("pty", 1), ("argv", "true"), ("argv", [1]),
    ("argv_per_task", {"x": ["a"]}), ("export", {"all": True}), ("export", {"all": True, "vars": {"A": 1}}),
    ("time", 1.5), ("mpi", None), ("output", 3),
])
def test_a_value_of_the_wrong_type_is_refused(key, value):
    wire = steps.StepRequest(argv=["true"]).to_json()
    with pytest.raises(steps.StepError, match=f"step request's {key} must be"):
        steps.StepRequest.from_json({**wire, key: value})


def test_a_request_that_is_no_object_is_refused():
    with pytest.raises(steps.StepError, match="must be an object, not list"):
        steps.StepRequest.from_json([])


def test_srun_and_the_host_launcher_do_not_load_dataclasses():
    """The request is written out, not a dataclass: ``dataclasses`` (and ``inspect``) would add
    milliseconds to srun's start and to every host launcher's (a guard on modules, not a timing)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import shim.cli.srun, shim.runtime.steps.launch, "
            "shim.runtime.steps.job; print(sorted(m for m in ('dataclasses', 'inspect') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-I", "-c", code, str(SRC)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_plain_replace_copies_a_request_too():
    from shim import plain

    req = steps.StepRequest(argv=["true"], label=True)
    assert plain.replace(req, ntasks=4) == req.replace(ntasks=4) != req
