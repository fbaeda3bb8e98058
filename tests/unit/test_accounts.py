"""Accounts Grid Engine refuses (issue 15 part 5): sbatch hands Grid Engine the reversible form
of names.encode; sacct's rows from Grid Engine's accounting decode it (only what encode writes).
Slurm shows the account string as the job gave it (src/squeue/print.c _print_job_account,
src/api/job_info.c slurm_sprint_job_info "Account=%s")."""

from __future__ import annotations

import io

import pytest

from shim.gridengine import names
from shim.operations.accounting import rows
from shim.cli import sbatch


pytestmark = pytest.mark.usefixtures("unit_site")


@pytest.mark.parametrize("account", ["project@gpu", "a b", "x:y", "a/b", "a*b"])
def test_sbatch_encodes_an_account_grid_engine_refuses(account):
    _o, sub, _cfg = sbatch.prepare(["-A", account], {}, stdin=io.StringIO("#!/bin/sh\n"), cwd="/srv")
    ge = sub.argv[sub.argv.index("-A") + 1]
    assert ge.startswith("sx_") and names.decode(ge) == account
    assert sub.record.account == account  # the record keeps Slurm's text


def test_plain_account_passes_unchanged():
    _o, sub, _cfg = sbatch.prepare(["-A", "research"], {}, stdin=io.StringIO("#!/bin/sh\n"), cwd="/srv")
    assert sub.argv[sub.argv.index("-A") + 1] == "research"


class _Ctx:
    default_partition = "debug"

    def partition_of(self, queue):
        return "debug"

    def uid(self, user):
        return 0

    def __getattr__(self, name):
        return lambda *a, **k: None


def test_accounting_rows_decode_grid_engines_account():
    ident = rows._ident(_Ctx(), 1, None, "job", "root", "root", "debug", names.encode("project@gpu"))
    assert ident["account"] == "project@gpu"
    ident = rows._ident(_Ctx(), 1, None, "job", "root", "root", "debug", "sx_notbase32")
    assert ident["account"] == "sx_notbase32"
