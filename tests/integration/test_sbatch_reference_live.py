"""Every submission the reference Slurm 22.05 rejected (sbatch_err_*) or surprisingly accepted
(sbatch_accepted_*, sbatch_directive_bogus), replayed through our sbatch on the live cluster:
same stderr, same exit code; a rejected one leaves Grid Engine's queue unchanged."""

from __future__ import annotations

import json
import re
import shlex
import uuid

import pytest

from conftest import SLURM_REF, run

pytestmark = pytest.mark.gridengine

CASES = {k: v for k, v in json.loads((SLURM_REF / "cases.json").read_text()).items()
         if k.startswith(("sbatch_err_", "sbatch_accepted_", "sbatch_directive_"))}

JOB = "#!/bin/bash\nsleep 1\n"
WITH_DIRECTIVES = "#!/bin/bash\n#SBATCH --job-name=directives\n#SBATCH --bogus-directive\nsleep 1\n"


def jobs_named(name: str) -> int:
    return run("qstat", "-u", "*", "-xml").stdout.count(f"<JB_name>{name}</JB_name>")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_submission(name, workdir):
    case = CASES[name]
    (workdir / "job.sh").write_text(JOB)
    (workdir / "noshebang.sh").write_text("sleep 1\n")
    (workdir / "withdirectives.sh").write_text(WITH_DIRECTIVES)
    argv = shlex.split(case["cmd"])
    # a name of its own (through the input variable; no message shows it) to find the job by
    tag = f"ref{uuid.uuid4().hex[:8]}"
    cp = run(*argv, cwd=workdir, input=case.get("stdin", ""), env={"SBATCH_JOB_NAME": tag})
    try:
        assert (cp.returncode, cp.stderr) == (case["rc"], case["stderr"])
        if case["rc"] == 0:
            assert re.fullmatch(r"Submitted batch job \d+\n", cp.stdout)
        else:
            assert cp.stdout == ""
            assert jobs_named(tag) == 0
    finally:
        if cp.returncode == 0 and cp.stdout.split():
            run("scancel", cp.stdout.split()[-1])
