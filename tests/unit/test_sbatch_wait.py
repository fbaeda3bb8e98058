"""sbatch --wait (operations/submit.wait_for): the answer comes from the job's end records in the
store; Grid Engine is asked whether the job still exists only at doubling intervals (QMASTER_ASKS),
and that question is shared by the user's waiters on a host (store/waits.py): one ``qstat -j`` of
all their jobs per QMASTER_SHARE seconds together, not one each (issue 29: a swarm's waiters).
The clock and the sleep are the test's own: nothing here waits. Grid Engine is a ReplayBackend
answering ``qstat -j ids`` in the shape a real one does (fixtures/gridengine/sge-8.1.9)."""

import fcntl
import json
import multiprocessing
import os
import time

import pytest

from conftest import FIXTURES, use_site_config
from shim import siteconf
from shim.gridengine import backends
from shim.gridengine.replay import ReplayBackend
from shim.operations import submit
from shim.proc import Result
from shim.slurm.request import SubmitRecord
from shim.store import state, waits

JOB = 4242
SGE = FIXTURES / "gridengine" / "sge-8.1.9"
FOUND = (SGE / "live-qstat-j-text.found.txt").read_text()  # qstat -j 29326,99999999 (29326 found)
GONE = (SGE / "live-qstat-j-text.gone.stderr.txt").read_text()  # qstat -j 99999998,99999999's stderr
SHARE = submit.QMASTER_SHARE


class Qmaster(ReplayBackend):
    """Grid Engine holding the jobs in ``have``: answers ``qstat -j id,...`` as the recorded ones
    (a block per job found; none found: rc 1, "Following jobs do not exist"), and keeps each
    question's (time, ids) in ``asked``."""

    def __init__(self):
        super().__init__()
        self.have = {JOB}
        self.asked: list[tuple[float, list[int]]] = []
        self.clock = None
        self.on_ask = None

    def run(self, tool, args, *, input=None, timeout=None):
        key = (tool, *args)
        self.calls.append((key, input))
        assert tool == "qstat" and args[0] == "-j" and len(args) == 2, key
        ids = [int(x) for x in args[1].split(",")]
        self.asked.append((self.clock.now if self.clock else None, ids))
        if self.on_ask:
            self.on_ask(ids)
        found = [i for i in ids if i in self.have]
        if not found:
            return Result(key, 1, "", GONE.replace("99999998, 99999999", ", ".join(map(str, ids))))
        return Result(key, 0, "".join(FOUND.replace("29326", str(i)) for i in found), "")

    def found(self, ids):
        owners = self.job_owners(ids)
        return None if owners is None else set(owners)


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
    cfg = siteconf.get()
    state.record_submit(cfg, JOB, {"name": "w"})  # (sbatch's record: the user's directory exists)
    yield cfg, qm
    siteconf.reset()


def record(tasks=None) -> SubmitRecord:
    return SubmitRecord.from_dict({"name": "w", "array": tasks, "sub": time.time() - 5})


def wait(cfg, qm, rec, on_sleep, job=JOB, clock=None):
    clock = clock or Clock(1000.0, lambda now: on_sleep(now - 1000.0))
    qm.clock = clock
    return submit.wait_for(job, rec, cfg, clock=clock, sleep=clock.sleep), clock.now - 1000.0


def host_dir(cfg):
    return os.path.join(state.user_dir(cfg, None), "waits", waits.host_name())


def registrations(cfg) -> list[str]:
    return sorted(n for n in os.listdir(host_dir(cfg)) if n[0].isdigit())


def times(qm):
    return [t - 1000.0 for t, _ids in qm.asked]


# ---------------------------------------------------------------------------------------------
# one waiter: the end record first, qmaster at doubling intervals


def test_a_job_that_ends_is_told_by_its_end_record_with_qmaster_asked_a_handful_of_times(site):
    cfg, qm = site
    ended = []

    def on_sleep(elapsed):
        if elapsed >= 600 and not ended:  # the job wrapper writes the end after 10 minutes
            ended.append(state.record_event(cfg, JOB, None, "end", {"exit": 3}))

    code, elapsed = wait(cfg, qm, record(), on_sleep)
    assert code == 3 and ended == [True]
    assert 600 <= elapsed <= 603  # read within a poll (<= 2 s) of the end
    # due at 2, 6, 14, 30, 62, 122, 182, ... s (6 s reads the answer of 2 s): about ten calls in ten
    # minutes, where one every 2 s was 300
    assert 8 <= len(qm.asked) <= 14
    gaps = [b - a for a, b in zip(times(qm), times(qm)[1:])]
    assert max(gaps) <= submit.QMASTER_ASKS[1] + 2
    assert times(qm)[0] >= submit.QMASTER_ASKS[0]
    assert all(ids == [JOB] for _t, ids in qm.asked)


def test_a_job_that_has_ended_returns_at_once_with_nothing_asked_nor_registered(site):
    cfg, qm = site
    state.record_event(cfg, JOB, None, "end", {"exit": 4})
    code, elapsed = wait(cfg, qm, record(), lambda elapsed: None)
    assert (code, elapsed, qm.asked) == (4, 0, [])
    assert not os.path.exists(os.path.join(state.user_dir(cfg, None), "waits"))


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
            qm.have = set()  # a raw qdel of the waiting job: nothing wrote its end

    code, elapsed = wait(cfg, qm, record(), on_sleep)
    assert code == 1
    assert times(qm)[-1] == pytest.approx(elapsed)
    assert 20 <= elapsed <= 20 + 16 + 2  # asked at 14, then at 30


def test_an_end_written_as_the_job_leaves_grid_engine_is_its_end(site):
    """The end record lands between the store's read and qmaster's answer that the job is gone."""
    cfg, qm = site

    def leave(ids):
        qm.have = set()
        state.record_event(cfg, JOB, None, "end", {"exit": 0, "signal": 9})

    qm.on_ask = leave
    code, elapsed = wait(cfg, qm, record(), lambda elapsed: None)
    assert code == 128 + 9 and len(qm.asked) == 1
    answer = json.loads(open(os.path.join(host_dir(cfg), waits.ANSWER)).read())
    assert (answer["asked"], answer["gone"]) == ([JOB], [JOB])  # the answer said gone; the end won


# ---------------------------------------------------------------------------------------------
# several waiters of one user: one question


def test_waiters_whose_asks_fall_due_together_cost_one_question_naming_all_their_jobs(site):
    cfg, qm = site
    qm.have = {JOB, 4243, 4244}
    clock = Clock(1000.0, lambda now: None)
    others = [waits.register(cfg, j, SHARE, clock, clock.sleep) for j in (4243, 4244)]
    heard = []

    def on_sleep(now):
        if now - 1000.0 >= 2.5 and not heard:  # just after the first waiter's ask at 2 s
            heard.extend(w.ask(qm.found) for w in others)
            state.record_event(cfg, JOB, None, "end", {"exit": 0})

    clock.on_sleep = on_sleep
    code, _ = wait(cfg, qm, record(), None, clock=clock)
    assert code == 0
    assert [ids for _t, ids in qm.asked] == [[JOB, 4243, 4244]]
    assert qm.calls[0][0] == ("qstat", "-j", "4242,4243,4244")
    assert heard == [(True, None), (True, None)]
    assert registrations(cfg) == sorted(f"{j}.{os.getpid()}" for j in (4243, 4244))  # the first one's gone
    for w in others:
        w.close()
    assert registrations(cfg) == []


def test_a_young_answer_is_reused_and_an_old_one_asked_again(site):
    cfg, qm = site
    qm.clock = clock = Clock(1000.0, lambda now: None)
    w = waits.register(cfg, JOB, SHARE, clock, clock.sleep)
    assert w.ask(qm.found) == (True, None) and len(qm.asked) == 1
    clock.now += SHARE - 0.1
    assert w.ask(qm.found) == (True, None) and len(qm.asked) == 1  # younger than the share period
    qm.have = set()
    clock.now += 0.1
    assert w.ask(qm.found) == (False, None) and len(qm.asked) == 2  # as old: asked again
    w.close()


def test_a_young_answer_that_did_not_ask_about_a_job_is_waited_out_not_asked_again(site):
    """A waiter that came after the last question waits until that answer is old, then one
    question names both: still one question per share period, whoever comes."""
    cfg, qm = site
    qm.have = {JOB, 4243}
    qm.clock = clock = Clock(1000.0, lambda now: None)
    first = waits.register(cfg, JOB, SHARE, clock, clock.sleep)
    assert first.ask(qm.found) == (True, None)
    clock.now += 1
    late = waits.register(cfg, 4243, SHARE, clock, clock.sleep)
    assert late.ask(qm.found) == (None, 1000.0 + SHARE) and len(qm.asked) == 1
    clock.now = 1000.0 + SHARE
    assert late.ask(qm.found) == (True, None)
    assert qm.asked[1] == (1000.0 + SHARE, [JOB, 4243])
    assert first.ask(qm.found) == (True, None) and len(qm.asked) == 2
    first.close(), late.close()


def test_a_job_another_waiters_answer_says_is_gone_without_an_end_is_1_with_no_question_of_its_own(site):
    cfg, qm = site
    qm.have = {4243}  # JOB was qdel'ed raw: no end record
    clock = Clock(1000.0, lambda now: None)
    other = waits.register(cfg, 4243, SHARE, clock, clock.sleep)
    heard = []

    def on_sleep(now):
        if now - 1000.0 >= 1.5 and not heard:  # the other waiter's ask, just before this one's at 2 s
            heard.append(other.ask(qm.found))

    clock.on_sleep = on_sleep
    code, elapsed = wait(cfg, qm, record(), None, clock=clock)
    assert code == 1 and 2 <= elapsed < 2 + 2
    assert heard == [(True, None)] and [ids for _t, ids in qm.asked] == [[JOB, 4243]]
    other.close()


def test_the_asker_holds_the_lock_while_it_asks(site):
    cfg, qm = site
    qm.clock = clock = Clock(1000.0, lambda now: None)
    w = waits.register(cfg, JOB, SHARE, clock, clock.sleep)
    tried = []

    def try_lock(ids):
        fd = os.open(os.path.join(host_dir(cfg), waits.LOCK), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            tried.append("got it")
        except BlockingIOError:
            tried.append("held")
        finally:
            os.close(fd)

    qm.on_ask = try_lock
    assert w.ask(qm.found) == (True, None)
    assert tried == ["held"]
    w.close()


def _hold_lock(path, conn):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    conn.send("held")
    conn.recv()  # until told to let go
    os.close(fd)
    conn.send("released")
    conn.recv()


def test_a_waiter_waits_for_another_process_holding_the_lock_then_reads_the_answer_it_wrote(site):
    cfg, qm = site
    qm.clock = clock = Clock(1000.0, lambda now: None)
    w = waits.register(cfg, JOB, SHARE, clock, clock.sleep)
    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe()
    child = ctx.Process(target=_hold_lock, args=(os.path.join(host_dir(cfg), waits.LOCK), there))
    child.start()
    try:
        assert here.recv() == "held"
        sleeps = []

        def on_sleep(now):
            sleeps.append(now)
            if len(sleeps) == 3:  # the holder answers (JOB gone) and lets go
                state.write_json(os.path.join(host_dir(cfg), waits.ANSWER),
                                 {"boot": waits.boot_id(), "at": now, "asked": [JOB], "gone": [JOB]}, 0o600)
                here.send("go")
                assert here.recv() == "released"

        clock.on_sleep = on_sleep
        assert w.ask(qm.found) == (False, None)
        assert len(sleeps) == 3 and qm.asked == []  # it waited, then took the holder's answer
        here.send("end")
    except BaseException:
        child.kill()  # (a failure here leaves the holder waiting to be told)
        raise
    finally:
        child.join()
    assert child.exitcode == 0
    w.close()


def test_a_lock_held_too_long_makes_the_waiter_ask_for_its_own_job(site):
    cfg, qm = site
    qm.have = {JOB, 4243}
    qm.clock = clock = Clock(1000.0, lambda now: None)
    other = waits.register(cfg, 4243, SHARE, clock, clock.sleep)
    w = waits.register(cfg, JOB, SHARE, clock, clock.sleep)
    fd = os.open(os.path.join(host_dir(cfg), waits.LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another open file description: a holder that hangs
    try:
        assert w.ask(qm.found) == (True, None)
    finally:
        os.close(fd)
    assert qm.asked == [(pytest.approx(1000.0 + waits.LOCK_WAIT, abs=0.5), [JOB])]
    assert not os.path.exists(os.path.join(host_dir(cfg), waits.ANSWER))  # no answer for the others
    w.close(), other.close()


# ---------------------------------------------------------------------------------------------
# registrations: removed on the way out, bounded when their waiter died


def test_the_registration_is_there_while_waiting_and_removed_on_return(site):
    cfg, qm = site
    seen = []

    def on_sleep(elapsed):
        seen.append(registrations(cfg))
        if elapsed >= 1:
            state.record_event(cfg, JOB, None, "end", {"exit": 0})

    assert wait(cfg, qm, record(), on_sleep)[0] == 0
    assert seen[0] == [f"{JOB}.{os.getpid()}"] and registrations(cfg) == []


def test_the_registration_is_removed_when_the_wait_ends_by_an_exception(site):
    cfg, qm = site

    class Interrupted(Exception):
        pass

    def on_sleep(elapsed):
        assert registrations(cfg) == [f"{JOB}.{os.getpid()}"]
        if elapsed >= 3:
            raise Interrupted  # (Ctrl-C, a failing read)

    with pytest.raises(Interrupted):
        wait(cfg, qm, record(), on_sleep)
    assert registrations(cfg) == [] and len(qm.asked) == 1


def _register_and_die(where, conn):
    w = waits.register(where, 4243, SHARE)
    conn.send(os.path.basename(w.path) if w else None)
    os._exit(0)  # killed: nothing removes the registration


def test_a_dead_waiters_registration_is_dropped_by_the_next_asker(site, tmp_path):
    cfg, qm = site
    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe()
    child = ctx.Process(target=_register_and_die, args=(cfg.cluster.state_dir, there))
    child.start()
    name = here.recv()
    child.join()
    assert name == f"4243.{child.pid}" and name in registrations(cfg)
    d = host_dir(cfg)
    mine = os.getpid()
    with open(f"/proc/{mine}/stat", "rb") as f:
        me = f.read().rpartition(b")")[2].split()[19].decode()
    for stale, text, age in ((f"4245.{mine}", "1", 0),  # this pid, another process's start time
                             (f"4246.{mine}", me, waits.HORIZON + 60)):  # this very process, beyond the horizon
        state.atomic_write(os.path.join(d, stale), text, 0o600)
        os.utime(os.path.join(d, stale), (time.time() - age,) * 2)
    qm.clock = clock = Clock(1000.0, lambda now: None)
    w = waits.register(cfg, JOB, SHARE, clock, clock.sleep)
    assert w.ask(qm.found) == (True, None)
    assert [ids for _t, ids in qm.asked] == [[JOB]]
    assert registrations(cfg) == [f"{JOB}.{mine}"]
    w.close()


# ---------------------------------------------------------------------------------------------
# an answer not to trust; no private directory


def _plant(path, how, data):
    text = json.dumps(data)
    if how == "own file":
        state.atomic_write(path, text, 0o600)
    elif how == "another uid's":
        state.atomic_write(path, text, 0o600)
        os.chown(path, 12345, 12345)
    elif how == "a symlink":
        state.atomic_write(path + ".real", text, 0o600)
        os.symlink(path + ".real", path)
    elif how == "oversized":
        state.atomic_write(path, text + " " * state.MAX_BYTES, 0o600)


@pytest.mark.parametrize("how", ["own file", "another uid's", "a symlink", "oversized"])
def test_an_answer_not_the_users_own_small_regular_file_is_not_trusted(site, how):
    cfg, qm = site
    qm.clock = clock = Clock(1000.0, lambda now: None)
    w = waits.register(cfg, JOB, SHARE, clock, clock.sleep)
    lie = {"boot": waits.boot_id(), "at": 1000.0, "asked": [JOB], "gone": [JOB]}  # "your job is gone"
    _plant(os.path.join(host_dir(cfg), waits.ANSWER), how, lie)
    got = w.ask(qm.found)
    if how == "own file":
        assert got == (False, None) and qm.asked == []  # (the user's own answer is believed)
    else:
        assert got == (True, None) and [ids for _t, ids in qm.asked] == [[JOB]]
        assert os.lstat(os.path.join(host_dir(cfg), waits.ANSWER)).st_uid == os.getuid()  # replaced, not followed
    w.close()


def test_an_answer_of_an_earlier_boot_is_not_this_ones(site):
    cfg, qm = site
    qm.clock = clock = Clock(1000.0, lambda now: None)
    w = waits.register(cfg, JOB, SHARE, clock, clock.sleep)
    _plant(os.path.join(host_dir(cfg), waits.ANSWER), "own file",
           {"boot": "an-earlier-boot", "at": 1000.0, "asked": [JOB], "gone": [JOB]})
    assert w.ask(qm.found) == (True, None) and len(qm.asked) == 1
    w.close()


@pytest.mark.parametrize("how", ["users/ not root's sticky directory", "waits/ open to others", "waits/ a symlink"])
def test_without_a_private_directory_each_waiter_asks_for_its_own_job(site, how, tmp_path):
    cfg, qm = site
    home = state.user_dir(cfg, None)
    users = os.path.dirname(home)
    if how.startswith("users/"):
        os.chmod(users, 0o777)  # anyone may write, and no sticky bit
    elif how.startswith("waits/ open"):
        os.mkdir(os.path.join(home, "waits"), 0o755)
    else:
        os.mkdir(tmp_path / "elsewhere", 0o700)
        os.symlink(tmp_path / "elsewhere", os.path.join(home, "waits"))
    clock = Clock(1000.0, lambda now: None)
    assert waits.register(cfg, JOB, SHARE, clock, clock.sleep) is None

    def on_sleep(elapsed):
        if elapsed >= 3:
            qm.have = set()

    qm.have = {JOB, 4243}
    code, elapsed = wait(cfg, qm, record(), on_sleep)
    assert code == 1 and 6 <= elapsed < 10  # gone, no end record: seen at its own ask due at 6 s (shared: 14 s)
    assert [c[0] for c in qm.calls] == [("qstat", "-j", "4242"), ("qstat", "-j", "4242")]  # 2 s, then 6 s: its own
    if how.endswith("symlink"):
        assert os.listdir(tmp_path / "elsewhere") == []
