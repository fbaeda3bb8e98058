"""translate.alter: scontrol update's fields -> qalter's flags, a pure function of the fields, the
site config and the facts about the job (no Grid Engine, no state directory); and the one Grid
Engine date (``-a``) that sbatch --begin and scontrol update StartTime share."""

from __future__ import annotations

import ast
import io
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import use_site_config
from shim.gridengine import backends, names
from shim import siteconf
from shim.gridengine.translate import alter, qsub

CFG = SimpleNamespace(partitions={"debug": SimpleNamespace(queue="all.q"), "gpu": SimpleNamespace(queue="gpu.q")})
FACTS = dict(privileged=False, pending=True, hard={}, time_limit=None, wrapped=True)


def args_of(fields, **facts):
    return alter.qalter_args(fields, CFG, **{**FACTS, **facts})


def test_time_limit_is_h_rt_with_the_wrappers_backstop_and_keeps_the_other_requests():
    a = args_of({"timelimit": (0, 30)}, hard={"gpu": "3", "h_rt": "7200"})
    assert (a.args, a.record, a.not_pending) == (["-l", "gpu=3,h_rt=1860"], {"time": 30}, False)
    assert a.args[1].endswith(f"h_rt={qsub.h_rt_backstop(30)}")
    # a job without the shim's wrapper has only h_rt: the limit itself
    assert args_of({"timelimit": (0, 30)}, wrapped=False).args == ["-l", "h_rt=1800"]
    # UNLIMITED
    assert args_of({"timelimit": (0, -1)}, hard={"gpu": "1"}).args == ["-l", "gpu=1,h_rt=INFINITY"]


def test_time_limit_increments_from_the_jobs_limit_and_stop_at_zero():
    assert args_of({"timelimit": (1, 5)}, time_limit=10).record == {"time": 15}
    assert args_of({"timelimit": (-1, 5)}, time_limit=10).args == ["-l", "h_rt=360"]
    assert args_of({"timelimit": (-1, 500)}, time_limit=10).record == {"time": 0}
    assert args_of({"timelimit": (1, 5)}, time_limit=None).record == {"time": 5}  # no limit: from 0
    assert args_of({"timelimit": (1, 5)}, time_limit=-1).record == {"time": 5}


def test_partition_is_the_partitions_queue_while_pending_only():
    a = args_of({"partition": "gpu"})
    assert (a.args, a.record, a.not_pending) == (["-q", "gpu.q"], {"partition": "gpu"}, False)
    a = args_of({"partition": "gpu", "jobname": "zz"}, pending=False)  # refused; the rest still goes
    assert (a.args, a.record, a.not_pending) == (["-N", "zz"], {"name": "zz"}, True)


def test_job_name_and_account_are_encoded_as_sbatch_stores_them():
    a = args_of({"jobname": "renamed x", "account": "lab@x:y"})
    assert a.args == ["-N", names.encode("renamed x"), "-A", names.encode("lab@x:y")]
    assert a.args[1] != "renamed x" and a.args[3] != "lab@x:y"
    assert a.record == {"name": "renamed x", "account": "lab@x:y"}
    assert args_of({"jobname": "plain"}).args == ["-N", "plain"]


def test_nice_is_the_one_priority_mapping_and_negative_is_for_operators():
    assert args_of({"nice": 10}).args == ["-p", "-10"]
    assert args_of({"nice": 5000}).args == ["-p", "-1023"]
    assert args_of({"nice": -5}, privileged=True).args == ["-p", str(qsub.nice_priority(-5, True))] == ["-p", "5"]
    assert args_of({"nice": 3}).record == {"nice": 3}
    assert alter.nice_denied({"nice": -5}, privileged=False)
    assert not alter.nice_denied({"nice": -5}, privileged=True)
    assert not alter.nice_denied({"nice": 5}, privileged=False) and not alter.nice_denied({}, privileged=False)
    with pytest.raises(ValueError):
        args_of({"nice": -5})


def test_start_time_is_grid_engines_date():
    when = datetime(2026, 12, 24, 13, 45, 7)
    a = args_of({"starttime": when})
    assert (a.args, a.record) == (["-a", "202612241345.07"], {"begin": when.timestamp()})


def test_comment_and_qos_are_the_shims_record_only():
    a = args_of({"comment": "c", "qos": "high"})
    assert (a.args, a.record, a.not_pending) == ([], {"comment": "c", "qos": "high"}, False)


def test_flags_follow_the_fields_order():
    when = datetime(2026, 12, 1)
    a = args_of({"partition": "debug", "nice": 3, "account": "acc", "jobname": "n", "timelimit": (0, 5),
                 "starttime": when, "comment": "x"})
    assert a.args == ["-q", "all.q", "-p", "-3", "-A", "acc", "-N", "n", "-l", "h_rt=360", "-a", "202612010000.00"]
    assert list(a.record) == ["partition", "nice", "account", "name", "time", "begin", "comment"]


def test_ge_date_is_grid_engines_date_time():
    assert qsub.ge_date(datetime(2026, 1, 2, 3, 4, 5)) == "202601020304.05"
    assert qsub.ge_date(datetime(2026, 12, 31, 23, 59)) == "202612312359.00"


def test_sbatch_begin_and_scontrol_starttime_share_the_date(monkeypatch, tmp_path):
    from shim.cli import sbatch

    use_site_config(monkeypatch, tmp_path)
    monkeypatch.setattr(time, "time", lambda: datetime(2026, 11, 30, 9, 20).timestamp())
    try:
        o, sub, _cfg = sbatch.prepare(["--begin=2026-12-24T13:45:07"], {}, stdin=io.StringIO("#!/bin/sh\ntrue\n"),
                                      cwd="/srv/x")
        got = sub.argv[sub.argv.index("-a") + 1]
        assert got == qsub.ge_date(o.begin) == "202612241345.07"
        assert args_of({"starttime": o.begin}).args == ["-a", got]
    finally:
        siteconf.reset()
        backends.use(None)


def test_sbatch_time_uses_the_same_backstop():
    assert qsub.h_rt_backstop(60) == 60 * 60 + qsub.KILL_WAIT + 30
    assert qsub.h_rt_backstop(60, wrapped=False) == 3600


def test_alter_is_pure():
    """No I/O: the module imports only the names encoding and the submission's rules."""
    src = Path(alter.__file__).read_text()
    mods = set()
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.ImportFrom):
            mods.add(("." * n.level) + (n.module or ""))
        elif isinstance(n, ast.Import):
            mods.update(a.name for a in n.names)
    assert mods <= {"__future__", "typing", "...config", "..", ".qsub"}, mods
    assert "open(" not in src and "os." not in src
