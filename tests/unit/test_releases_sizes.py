"""Sizes no node of a partition could ever hold (issue 30): 24.11 alone refuses them at submission,
"Requested node configuration is not available", exit 1; 22.05 and 26.05 take them and they pend.
The cluster is the captures' (node vm, 8 CPUs, partitions debug and gpu), told to the shim the
way Grid Engine tells it: SGE 8.1.9's ``qhost -q -xml`` of that cluster, 8 slots in each queue.
What each release printed: its capture (fixtures/slurm-*/cases.json ``sbatch_accepted_too_many_cpus``)
and what 24.11.5 answered when asked (fixtures/slurm-24.11/oracle-sizes.txt)."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import FIXTURES, release_cases
from shim.proc import Result

NAMES = ("22.05", "24.11", "26.05")
QHOST = (FIXTURES / "gridengine" / "sge-8.1.9" / "qhost-q-xml-debug-gpu.xml").read_text()


def oracle_block(n: int) -> list[str]:
    """The output lines of block ``n`` of oracle-sizes.txt."""
    text = (FIXTURES / "slurm-24.11" / "oracle-sizes.txt").read_text()
    return text.split(f"## output (block {n})\n", 1)[1].split("## ", 1)[0].splitlines()


def sbatch_answers(block: int) -> list[tuple[list[str], int, str]]:
    """Each ``sbatch ARGS`` of an oracle block: (ARGS, exit code, its stderr; "" when it was taken)."""
    out, lines = [], oracle_block(block)
    for i, line in enumerate(lines):
        if line.startswith("-- sbatch "):
            rc, _, first = lines[i + 1].partition(" ")
            more = []
            for extra in lines[i + 2:]:
                if extra.startswith("-- "):
                    break
                more.append(extra)
            code = int(rc.removeprefix("rc="))
            out.append((shlex.split(line[len("-- sbatch "):]), code, "" if code == 0 else
                        "\n".join([first, *more]) + "\n"))
    return out


def alloc_answers(prog: str) -> list[tuple[list[str], int, str]]:
    """Each ``timeout -s INT 8 <prog> ARGS true`` of block 2: (ARGS, exit code, stderr), without
    salloc's "Job allocation N has been revoked." (the shim has no job to name)."""
    out, lines = [], oracle_block(2)
    for i, line in enumerate(lines):
        if line.startswith(f"-- timeout -s INT 8 {prog} "):
            err = []
            for extra in lines[i + 1:]:
                if extra.startswith("rc="):
                    out.append((shlex.split(line.split(f" {prog} ", 1)[1])[:-1], int(extra[3:]), "".join(err)))
                    break
                if not re.fullmatch(r"salloc: Job allocation \d+ has been revoked\.", extra):
                    err.append(extra + "\n")
    return out


def backend(job: int = 77):
    from shim.gridengine import backends
    from shim.gridengine.replay import ReplayBackend

    b = ReplayBackend(default=Result(("x",), 0, "", ""))
    b.add("qhost", ["-q", "-xml"], stdout=QHOST)
    b.add("qsub", [], stdout=f"{job}\n")
    backends.use(b)
    return b


def submitted(b) -> bool:
    return any(k[0] == "qsub" and "-help" not in k for k, _ in b.calls)


def asked_qhost(b) -> bool:
    return any(k[0] == "qhost" for k, _ in b.calls)


@pytest.mark.parametrize("name", NAMES)
def test_sbatch_n_100_on_the_8_cpu_node_replays_each_release(release_site, capsys, monkeypatch, tmp_path, name):
    """The captures' ``sbatch -n 100 job.sh``: 24.11 refuses it, nothing handed to Grid Engine;
    22.05 and 26.05 submit it."""
    from shim.__main__ import dispatch

    release_site(name)
    case = release_cases(name)["sbatch_accepted_too_many_cpus"]
    job = int(re.search(r"\d+", case["stdout"])[0]) if case["rc"] == 0 else 1
    b = backend(job)
    (tmp_path / "job.sh").write_text("#!/bin/sh\ntrue\n")
    monkeypatch.chdir(tmp_path)
    rc = dispatch("sbatch", case["cmd"].split()[1:])
    assert (rc, *capsys.readouterr()) == (case["rc"], case["stdout"], case["stderr"])
    assert submitted(b) == (name != "24.11")
    assert asked_qhost(b) == (name == "24.11")  # (the other releases never ask)


@pytest.mark.parametrize("block", (1, 2))
def test_sbatch_sizes_as_24_11_answered(release_site, capsys, block):
    """Every sbatch size asked of 24.11 (held at submission in block 1: all taken; block 2 without
    -H): the same exit code and stderr, and only what it took reaches Grid Engine."""
    from shim.__main__ import dispatch

    release_site("24.11")
    cases = sbatch_answers(block)
    assert len(cases) == (12 if block == 1 else 14)
    for args, rc, err in cases:
        args = [*args, "-H"] if block == 1 else args
        b = backend()
        got = dispatch("sbatch", ["--parsable", "-o", "/dev/null", *args, "--wrap", "true"])
        out, got_err = capsys.readouterr()
        assert (args, got, got_err) == (args, rc, err)
        assert submitted(b) == (rc == 0), args


@pytest.mark.parametrize("prog", ("srun", "salloc"))
def test_srun_and_salloc_sizes_as_24_11_answered(release_site, capsys, monkeypatch, prog):
    """``srun``/``salloc`` -c 9, -n 9, -N 1 -n 9 on 24.11: refused before any job, in each command's
    words, with "CPU count per node can not be satisfied" first for -c 9."""
    from shim.__main__ import dispatch

    release_site("24.11")
    cases = alloc_answers(prog)
    assert [a for a, _, _ in cases] == [["-c", "9"], ["-n", "9"], ["-N", "1", "-n", "9"]]
    for args, rc, err in cases:
        b = backend()
        assert dispatch(prog, [*args, "true"]) == rc
        assert capsys.readouterr().err == err
        assert not any(k[0] in ("qsub", "qrsh") and "-help" not in k for k, _ in b.calls)


@pytest.mark.parametrize("name", NAMES)
def test_a_one_cpu_job_asks_grid_engine_nothing_more(release_site, capsys, name):
    """The common sbatch (one task, one CPU, one node) costs no qhost on any release; on 24.11 a
    larger one asks it once, the others never."""
    from shim.__main__ import dispatch

    release_site(name)
    b = backend()
    assert dispatch("sbatch", ["--wrap", "true"]) == 0
    assert submitted(b) and not asked_qhost(b)
    b = backend()
    assert dispatch("sbatch", ["-n", "2", "--wrap", "true"]) == 0
    assert [k for k, _ in b.calls if k[0] == "qhost"] == ([("qhost", "-q", "-xml")] if name == "24.11" else [])
    capsys.readouterr()


def test_no_answer_from_grid_engine_refuses_nothing(release_site, capsys):
    """Where qhost does not answer, the sizes cannot be told: the job is submitted (it waits)."""
    from shim.__main__ import dispatch
    from shim.gridengine import backends
    from shim.gridengine.replay import ReplayBackend

    release_site("24.11")
    b = ReplayBackend(default=Result(("x",), 0, "", ""))
    b.add("qhost", ["-q", "-xml"], rc=1, stderr="error: commlib error: got select error (Connection refused)")
    b.add("qsub", [], stdout="5\n")
    backends.use(b)
    assert dispatch("sbatch", ["-n", "100", "--wrap", "true"]) == 0
    assert submitted(b)
    capsys.readouterr()


@pytest.mark.parametrize("cpus, lo, hi, ntasks, cpt, per_node, fault", [
    ([8, 8], 1, None, 16, 1, 0, None),  # -n 16 over two 8-CPU nodes fits
    ([8, 8], 1, 1, 16, 1, 0, ()),  # ... not on one (-N 1)
    ([8, 4], 2, 2, 12, 1, 0, None),
    ([8, 4], 3, None, 3, 1, 0, ()),  # -N 3 on two nodes
    ([8, 4], 1, None, 1, 9, 0, ("CPU count per node can not be satisfied",)),  # -c 9
    ([8, 4], 1, None, 2, 2, 5, ("CPU count per node can not be satisfied",)),  # --ntasks-per-node=5 -c 2
    ([], 5, None, 500, 1, 0, None),  # no node known: nothing refused
])
def test_node_config_fault(cpus, lo, hi, ntasks, cpt, per_node, fault):
    from shim.operations.nodeinfo import node_config_fault

    assert node_config_fault(cpus, lo, hi, ntasks, cpt, per_node) == fault
