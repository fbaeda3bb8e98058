"""How sbatch finds a job whose submission it could not confirm (the daemon's answer was lost) when
the job already ran and left qstat: the job wrapper's records carry sbatch's clock ("sub"), and
``state.job_of_submission`` finds the job by it. sbatch's path hands that lookup to the DRMAA
submission (gridengine/submitter.py)."""

from __future__ import annotations

import os
import time

from conftest import use_site_config

from shim.gridengine import backends
from shim import siteconf
from shim.store import layout, state
from shim.operations import submit
from shim.gridengine import process, submitter


def test_the_wrappers_record_names_the_submission(monkeypatch, tmp_path):
    sdir = str(use_site_config(monkeypatch, tmp_path))
    sub = time.time()
    assert state.job_of_submission(sdir, sub, sub - 1) is None
    state.record_event(sdir, 4711, None, "start", {"node": "vm", "sub": sub - 5})  # another submission
    state.record_event(sdir, 4712, 3, "suspend", {"sub": sub})                     # not the wrapper's
    assert state.job_of_submission(sdir, sub, sub - 1) is None
    state.record_event(sdir, 4713, 2, "end", {"exit": 0, "sub": sub})
    assert state.job_of_submission(sdir, sub, sub - 1) == 4713


def test_an_old_record_is_not_this_submission(monkeypatch, tmp_path):
    sdir = str(use_site_config(monkeypatch, tmp_path))
    sub = time.time()
    state.record_event(sdir, 4714, None, "start", {"sub": sub})
    path = layout.id_path(state.user_dir(sdir, None), "events", 4714, "4714.x.start.json")
    os.utime(path, (sub - 3600, sub - 3600))  # written long before this submission: a reused clock?
    assert state.job_of_submission(sdir, sub, sub - 1) is None


def test_sbatch_hands_the_lookup_to_the_agent(monkeypatch, tmp_path):
    sdir = str(use_site_config(monkeypatch, tmp_path))
    cfg = siteconf.get()
    sub = time.time()
    got = []

    def agent_submit(argv, script, cfg, backend, seen=None, **kw):
        got.append(seen())
        state.record_event(sdir, 4715, None, "start", {"sub": sub})
        got.append(seen())
        return 4715

    monkeypatch.setattr(submitter, "submit", agent_submit)

    class GE(process.GridEngineBackend):
        def __init__(self, cfg):
            self.cfg = cfg

        def run(self, tool, args, *, input=None, timeout=None):
            raise AssertionError("no qsub: the agent submitted")

    class Agent:
        method = "agent"

    backends.use(GE(type("Cfg", (), {"submit": Agent})()))
    try:
        assert submit.queue("sbatch", submit.FAILED, ["-terse"], b"#!/bin/sh\n", cfg, {}, agent=True, sub=sub) == 4715
    finally:
        backends.use(None)
        siteconf.reset()
    assert got == [None, 4715]

