"""sprio, sshare, sacctmgr and sreport under random argv: no traceback or internal error reaches a
user, whatever the words (the same promise tests/unit/test_fuzz.py checks for the other commands).
Grid Engine is a recording of an empty cell: no pending jobs, no share tree, no projects."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shim.gridengine import backends
from shim.__main__ import dispatch
from shim.gridengine import ops
from shim.gridengine.replay import ReplayBackend
from shim.proc import Result

EMPTY_PRI = "<?xml version='1.0'?>\n<job_info>\n  <queue_info>\n  </queue_info>\n  <job_info>\n  </job_info>\n</job_info>\n"
WORDS = {
    "sprio": ["-l", "-n", "-w", "-h", "-j", "-u", "-o", "-S", "-p", "-v", "--jobs=1", "%i", "%.5Y", "%Z", "root",
              "-Y", "1,x", "--format", "--long", "--norm", "--usage", "--helpformat"],
    "sshare": ["-a", "-l", "-A", "-u", "-U", "-P", "-p", "-n", "-o", "-m", "-v", "Account%3", "User,Fair", "-1",
               "root", "x%y", "--format", "--all"],
    "sacctmgr": ["show", "list", "assoc", "account", "user", "qos", "add", "modify", "user=root", "format=acc",
                 "format=", "where", "-n", "-P", "-p", "x=y", "name=normal", "bogus", "format=GrpTRES%-4"],
    "sreport": ["cluster", "user", "a", "ua", "top", "AccountUtilizationByUser", "start=now-1hour", "end=now",
                "-t", "percent", "minper", "hours", "format=Used%3", "TopCount=x", "TopCount=2", "group", "-P",
                "-n", "accounts=x", "users=root", "start=bogus"],
}


@pytest.fixture(autouse=True)
def empty_cell(monkeypatch, tmp_path):
    from conftest import use_site_config

    use_site_config(monkeypatch, tmp_path)
    monkeypatch.setenv("SLURM_SHIM_ACCOUNTING", str(tmp_path / "no-accounting"))
    b = ReplayBackend(default=Result(("x",), 1, "", "no such thing\n"))
    b.add(*ops.priorities(), EMPTY_PRI)
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=EMPTY_PRI)
    backends.use(b)
    yield
    backends.use(None)


@pytest.mark.parametrize("cmd", sorted(WORDS))
def test_no_traceback_ever_reaches_a_user(cmd, capsys):
    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(argv=st.lists(st.sampled_from(WORDS[cmd]) | st.text(max_size=6), max_size=6))
    def check(argv):
        code = dispatch(cmd, list(argv))
        out, err = capsys.readouterr()
        assert isinstance(code, int) and code in (0, 1), (argv, code, err)
        assert "Traceback" not in err and "internal error" not in err, (argv, err)

    check()
