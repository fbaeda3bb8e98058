"""The shim's own records as unit tests plant them: a submit record and an event of a given age,
at a fixed ``NOW`` (tests freeze ``time.time`` to it), and the site those tests run in. Shared by
test_squeue, test_speed_paths and test_one_job."""

import json
import os
from datetime import datetime

from shim import siteconf
from shim.store import state

NOW = datetime(2026, 11, 30, 9, 20, 0).timestamp()


def submit(state_dir, job_id, **data):
    rec = {"name": "x", "partition": "debug", "user": "root", "uid": 0, "workdir": "/srv/x", "ntasks": 1,
           "cpus_per_task": 1, "nodes": 1, "time": -1, "submit_time": NOW - 600}
    rec.update(data)
    state.record_submit(str(state_dir), job_id, rec)


def event(state_dir, job_id, task, kind, age=10.0, **data):
    state.record_event(str(state_dir), job_id, task, kind, {**data, "t": NOW - age})  # (its time bucket: NOW - age)
    path = state.record_file(str(state_dir), "events", f"{job_id}.{'x' if task is None else task}.{kind}.json")
    os.utime(path, (NOW - age, NOW - age))


def captured_site(monkeypatch, tmp_path):
    """frozen_site for a test that replays captured Grid Engine answers (an autouse fixture yields
    from it): TZ=UTC (the captures' times are the capturing host's local time, UTC) and root as the
    caller; yields the state directory, then puts the time zone, the site and the backend back."""
    import time

    from shim.gridengine import backends
    from shim.operations import jobs

    state_dir = frozen_site(monkeypatch, tmp_path)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    monkeypatch.setattr(jobs, "own_name", lambda: "root")
    yield state_dir
    monkeypatch.undo()
    time.tzset()
    siteconf.reset()
    backends.use(None)


def frozen_site(monkeypatch, tmp_path):
    """The unit-test site config with a private state directory, no SQUEUE_*/SLURM_TIME_FORMAT
    from the caller's environment, and the clock frozen at NOW; returns the state directory."""
    import time

    from conftest import use_site_config

    use_site_config(monkeypatch, tmp_path)
    for var in list(os.environ):
        if var.startswith("SQUEUE_") or var == "SLURM_TIME_FORMAT":
            monkeypatch.delenv(var)
    monkeypatch.setattr(time, "time", lambda: NOW)
    siteconf.reset()
    return tmp_path / "state"
