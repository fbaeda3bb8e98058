"""Option argument forms on the installed commands (issue 15 part 1): the forms of Slurm's own
option table (src/common/slurm_opt.c common_options[], each entry's has_arg; the unit tests,
tests/unit/test_option_arity.py, compare every row with the table of 22.05.8, 26.05 and the
development head, fixtures/slurm-options/). Here the real sbatch takes the spellings job
templates write, on the command line and in #SBATCH lines, and refuses a value no Slurm version
takes with glibc getopt_long's message and exit 255 (src/sbatch/opt.c _set_options hands
getopt_long's '?' to slurm_process_option_or_exit, src/common/slurm_opt.c, which prints "Try
"sbatch --help" ..." and exits -1), nothing queued."""

from __future__ import annotations

import uuid

import pytest

from conftest import run

pytestmark = pytest.mark.gridengine


def test_optional_arguments_of_every_version_are_taken(workdir):
    """--get-user-env is optional_argument in every version (arg_set_get_user_env: "[timeout][S|L]");
    --requeue is no_argument in 22.05 and optional_argument since (arg_set_requeue: "expedite")."""
    name = "arity" + uuid.uuid4().hex[:6]
    script = workdir / f"{name}.sh"
    script.write_text("#!/bin/sh\n#SBATCH --get-user-env=L\n#SBATCH --requeue=expedite\ntrue\n")
    ids = []
    try:
        for argv in ([str(script)], ["--get-user-env=10L", "--wrap", "true"], ["--get-user-env", "--wrap", "true"],
                     ["--requeue", "--wrap", "true"]):
            cp = run("sbatch", "--parsable", "-H", "-J", name, "-o", "/dev/null", *argv, cwd=workdir)
            assert (cp.returncode, cp.stderr) == (0, ""), (argv, cp.stderr)
            ids.append(cp.stdout.strip())
        shown = run("scontrol", "show", "job", ids[0]).stdout
        assert "Requeue=1" in shown, shown  # --requeue=expedite requeues, as the bare flag
    finally:
        if ids:
            run("scancel", *ids)


@pytest.mark.parametrize("argv", [["--requeue=bogus"], ["--get-user-env", "--requeue=1"]])
def test_a_value_no_version_takes_is_getopts_error(workdir, argv):
    name = "arity" + uuid.uuid4().hex[:6]
    cp = run("sbatch", "-H", "-J", name, *argv, "--wrap", "true", cwd=workdir)
    assert (cp.returncode, cp.stdout) == (255, "")
    assert cp.stderr == ("sbatch: option '--requeue' doesn't allow an argument\n"
                         'Try "sbatch --help" for more information\n')
    assert name not in run("qstat", "-u", "*", "-r").stdout  # nothing queued
