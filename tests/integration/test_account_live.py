"""Accounts Grid Engine refuses as they are (issue 15 part 5): ``-A project@gpu`` (the form of
several large European centres) is queued, stored reversibly as job names are (Grid Engine: "At
('@') not allowed in objectname"), and shown unchanged by squeue %a, scontrol and sacct, as Slurm
prints the job's account string as it is (src/squeue/print.c _print_job_account; src/api/job_info.c
slurm_sprint_job_info, "Account=%s")."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from conftest import run, wait_until

pytestmark = pytest.mark.gridengine

ACCOUNT = "project@gpu:x/y"


def test_account_with_characters_grid_engine_refuses(workdir):
    cp = run("sbatch", "-A", ACCOUNT, "-J", "acct", "-t", "2", "--wrap", "sleep 3", cwd=workdir)
    assert cp.returncode == 0, cp.stderr
    job = int(re.fullmatch(r"Submitted batch job (\d+)\n", cp.stdout).group(1))
    detail = run("qstat", "-j", str(job), "-xml").stdout  # (XML: the same on SGE 8.1.9 and OCS 9)
    ge_account = ET.fromstring(detail).findtext(".//djob_info/element/JB_account")
    assert ge_account, detail
    assert ge_account.startswith("sx_") and ge_account != ACCOUNT
    cp = run("squeue", "-h", "-j", str(job), "-o", "%a")
    assert cp.stdout == ACCOUNT + "\n"
    cp = run("squeue", "-h", "-A", ACCOUNT, "-o", "%i")
    assert cp.stdout == f"{job}\n"
    cp = run("scontrol", "show", "job", str(job))
    assert f" Account={ACCOUNT} " in cp.stdout
    wait_until(lambda: run("squeue", "-h", "-j", str(job), "-t", "all", "-o", "%T").stdout
               in ("COMPLETED\n", ""), 60, f"job {job} to end")

    def account():
        out = run("sacct", "-n", "-P", "-X", "-j", str(job), "-o", "Account,State").stdout
        return out if "COMPLETED" in out else None

    assert wait_until(account, 60, f"sacct to show job {job} ended") == f"{ACCOUNT}|COMPLETED\n"


def test_raw_grid_engine_job_with_an_encoded_account(jobs):
    """A job without the shim's record (raw qsub): its account is decoded from Grid Engine's
    detail (jobs.add_grid_engine_detail), as names are; a name encode would not write stays as
    Grid Engine holds it."""
    from shim.gridengine import names

    jid = jobs.qsub("acct", "-A", names.encode(ACCOUNT), "-h", "-b", "y", "/bin/true")
    jid2 = jobs.qsub("acct2", "-A", "sx_notbase32", "-h", "-b", "y", "/bin/true")
    assert f" Account={ACCOUNT} " in run("scontrol", "show", "job", jid).stdout
    assert " Account=sx_notbase32 " in run("scontrol", "show", "job", jid2).stdout
