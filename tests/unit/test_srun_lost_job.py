"""srun outside an allocation, when the job it made is killed from outside before its step ends:
the job's step launcher (runtime.steps.job_main) never writes its exit code, and qrsh may still
return 0 (test_srun_live.py::test_time_limit's flake: job 5177, SIGKILLed by Grid Engine after 32 s
while another session disturbed the cluster, left srun exiting 0)."""

from __future__ import annotations

import shlex

import pytest

from conftest import use_site_config
from shim.gridengine import backends
from shim import proc, siteconf
from shim.store import state
from shim.__main__ import dispatch
from shim.gridengine.replay import ReplayBackend
from shim.proc import Result
from shim.runtime import steps


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    for k in ("SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_JOB_NUM_NODES", "SLURM_CPUS_PER_TASK"):
        monkeypatch.delenv(k, raising=False)
    use_site_config(monkeypatch, tmp_path)  # the unit-test site config, a private laid-out state dir
    backends.use(ReplayBackend(default=Result(("x",), 0, "", "")))
    yield
    siteconf.reset()
    backends.use(None)


def fake_qrsh(monkeypatch, token_data, rc):
    """qrsh as Grid Engine ran it: the far side took its launch file and wrote ``token_data``
    (None: it never started), then qrsh returned ``rc``."""

    class FakeProc:
        def __init__(self, argv, **kw):
            words = shlex.split(" ".join(argv[argv.index("-pty") + 2:]))
            payload = steps.read_payload(words[4], words[5])
            if token_data is not None:
                state.write_token(payload["state_dir"], payload["token"], token_data)

        def wait(self):
            return rc

        def poll(self):
            return rc

    monkeypatch.setattr(proc, "popen", FakeProc)


def test_a_job_killed_before_it_reported_is_no_success(monkeypatch):
    fake_qrsh(monkeypatch, {"job_id": 5177, "start": 1.0}, 0)
    assert dispatch("srun", ["-t", "1", "sleep", "300"]) == 1


def test_a_job_that_reported_keeps_its_exit_code(monkeypatch):
    fake_qrsh(monkeypatch, {"job_id": 5178, "start": 1.0, "rc": 143}, 0)
    assert dispatch("srun", ["-t", "1", "sleep", "300"]) == 143
    fake_qrsh(monkeypatch, {"job_id": 5179, "start": 1.0, "rc": 0}, 0)
    assert dispatch("srun", ["true"]) == 0


def test_qrshs_own_failure_is_kept(monkeypatch):
    fake_qrsh(monkeypatch, {"job_id": 5180, "start": 1.0}, 137)
    assert dispatch("srun", ["sleep", "300"]) == 137
