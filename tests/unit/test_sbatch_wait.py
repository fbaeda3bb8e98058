"""sbatch --wait (operations/submit.wait_for): the answer comes from the job's end records in the
store; Grid Engine is asked whether the job still exists only at doubling intervals (QMASTER_ASKS),
so a swarm of waiting sbatch costs qmaster a few calls a second, not one per waiter every 2 s
(issue 29). The clock and the sleep are the test's own: nothing here waits."""

import time

import pytest

from conftest import use_site_config
from shim import siteconf
from shim.gridengine import backends
from shim.operations import submit
from shim.slurm.request import SubmitRecord
from shim.store import state

JOB = 4242


class Qmaster:
    """A backend that knows one job until ``gone`` and counts each time it is asked about it."""

    def __init__(self):
        self.asked: list[float] = []
        self.gone = False
        self.clock = None
        self.on_ask = None

    def exists(self, job):
        assert int(job) == JOB
        self.asked.append(self.clock.now)
        if self.on_ask:
            self.on_ask()
        return not self.gone


class Clock:
    def __init__(self, start: float, on_sleep):
        self.now = start
        self.on_sleep = on_sleep

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s
        self.on_sleep(self.now)


@pytest.fixture
def site(monkeypatch, tmp_path):
    use_site_config(monkeypatch, tmp_path)
    qm = Qmaster()
    monkeypatch.setattr(backends, "_override", qm)
    yield siteconf.get(), qm
    siteconf.reset()


def record(tasks=None) -> SubmitRecord:
    return SubmitRecord.from_dict({"name": "w", "array": tasks, "sub": time.time() - 5})


def wait(cfg, qm, rec, on_sleep):
    clock = Clock(1000.0, lambda now: on_sleep(now - 1000.0))
    qm.clock = clock
    return submit.wait_for(JOB, rec, cfg, clock=clock, sleep=clock.sleep), clock.now - 1000.0


def test_a_job_that_ends_is_told_by_its_end_record_with_qmaster_asked_a_handful_of_times(site):
    cfg, qm = site
    ended = []

    def on_sleep(elapsed):
        if elapsed >= 600 and not ended:  # the job wrapper writes the end after 10 minutes
            ended.append(state.record_event(cfg, JOB, None, "end", {"exit": 3}))

    code, elapsed = wait(cfg, qm, record(), on_sleep)
    assert code == 3 and ended == [True]
    assert 600 <= elapsed <= 603  # read within a poll (<= 2 s) of the end
    # 2, 6, 14, 30, 62, 122, 182, ... s: about ten calls in ten minutes, where one every 2 s was 300
    assert 8 <= len(qm.asked) <= 14
    gaps = [b - a for a, b in zip(qm.asked, qm.asked[1:])]
    assert max(gaps) <= submit.QMASTER_ASKS[1] + 2
    assert qm.asked[0] - 1000.0 >= submit.QMASTER_ASKS[0]


def test_every_task_of_an_array_must_end_and_the_highest_code_wins(site):
    cfg, qm = site

    def on_sleep(elapsed):
        if elapsed >= 5:
            state.record_event(cfg, JOB, 1, "end", {"exit": 2})
        if elapsed >= 40:
            state.record_event(cfg, JOB, 2, "end", {"exit": 7})

    code, elapsed = wait(cfg, qm, record([1, 2]), on_sleep)
    assert code == 7 and 40 <= elapsed <= 43


def test_a_job_gone_from_grid_engine_without_an_end_is_1_at_the_next_ask(site):
    cfg, qm = site

    def on_sleep(elapsed):
        if elapsed >= 20:
            qm.gone = True  # a raw qdel of the waiting job: nothing wrote its end

    code, elapsed = wait(cfg, qm, record(), on_sleep)
    assert code == 1
    assert qm.asked[-1] - 1000.0 == pytest.approx(elapsed)
    assert 20 <= elapsed <= 20 + 16 + 2  # asked at 14, then at 30


def test_an_end_written_as_the_job_leaves_grid_engine_is_its_end(site):
    """The end record lands between the store's read and qmaster's answer that the job is gone."""
    cfg, qm = site

    def leave():
        qm.gone = True
        state.record_event(cfg, JOB, None, "end", {"exit": 0, "signal": 9})

    qm.on_ask = leave
    code, elapsed = wait(cfg, qm, record(), lambda elapsed: None)
    assert code == 128 + 9 and len(qm.asked) == 1
