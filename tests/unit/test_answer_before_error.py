"""Where Slurm's option loop answers --help, --usage or -V as it meets them (squeue, sinfo,
scontrol and scancel: `_help(); exit(0)` in their getopt loops; sacct: -V only, its -h and -U
are flags read after the loop), a bad option word after them is never reached: the answer is
printed and the command exits 0. Before them, or in sacct for --help, glibc's error wins. No
Grid Engine command runs either way (the replay backend has no answers)."""

from __future__ import annotations

import pytest

from shim.gridengine import backends
from shim.gridengine.replay import ReplayBackend
from shim.__main__ import dispatch


def run(capsys, prog, *argv):
    b = ReplayBackend()
    backends.use(b)
    rc = dispatch(prog, list(argv))
    out, err = capsys.readouterr()
    return rc, out, err, b.calls


@pytest.mark.parametrize("prog", ["squeue", "sinfo", "scontrol", "scancel"])
def test_usage_and_version_before_a_bad_option_are_answered(capsys, prog):
    usage = run(capsys, prog, "--usage")
    assert usage[0] == 0 and usage[1].startswith(f"Usage: {prog} ")
    assert run(capsys, prog, "--usage", "--bogus") == usage
    rc, out, err, calls = run(capsys, prog, "-V", "-Z")
    assert (rc, out, err, calls) == (0, "slurm-wlm 22.05.8\n", "", [])
    alone = run(capsys, prog, "--help")
    assert alone[0] == 0 and alone[1]
    assert run(capsys, prog, "--help", "--bogus=1") == alone


@pytest.mark.parametrize("prog", ["squeue", "sinfo", "scontrol", "scancel", "sacct"])
def test_a_bad_option_before_them_is_the_error(capsys, prog):
    alone = run(capsys, prog, "--bogus")
    assert alone[0] == 1 and alone[1] == "" and alone[2].startswith(f"{prog}: unrecognized option '--bogus'\n")
    assert run(capsys, prog, "--bogus", "--usage") == alone


def test_sacct_answers_only_its_version_first(capsys):
    rc, out, err, _ = run(capsys, "sacct", "-V", "--bogus")
    assert (rc, out, err) == (0, "slurm-wlm 22.05.8\n", "")
    for first in ("--help", "--usage"):
        assert run(capsys, "sacct", first, "--bogus")[:3] == (1, "", "sacct: unrecognized option '--bogus'\n")
