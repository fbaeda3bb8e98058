"""Rules the batch wrapper and the step launcher share (one implementation each, in
shim.runtime.jobenv), and the runtime's records in state.py."""

from __future__ import annotations

import os

import pytest

from shim.store import state
from shim.runtime import jobenv, steps

BATCH = dict(job_id=42, task=None, name="job", user="alice", host="vm", array_job=False)
STEP = {"j": 42, "s": 3, "x": "job", "u": "alice"}


def test_unknown_letter_with_a_width_keeps_its_last_digit_in_both():
    """Slurm 22.05: ``_create_batch_fname``/``_batch_path_check`` (src/slurmd/common/fname.c) for a
    batch job and ``fname_create`` (src/srun/libsrun/fname.c) for srun both copy from the last
    width digit on when the letter is not theirs: ``%5q`` -> ``5q``, ``%12q`` -> ``2q``; without a
    width the ``%`` stays (``%q``). The shim's batch twin made ``%5q`` ``%q``, its step twin kept
    ``%5q``."""
    for pattern, want in (("o-%5q", "o-5q"), ("o-%12q", "o-2q"), ("o-%q", "o-%q"), ("o-%5", "o-5"),
                          ("o-%", "o-%"), ("o-%5%", "o-5%")):
        assert jobenv.expand_pattern(pattern, **BATCH) == want, pattern
        assert steps.expand_io(pattern, STEP) == want, pattern


def test_sacct_of_26_05_keeps_an_unknown_letter_and_its_width_as_written():
    """26.05's sacct --expand-patterns prints ``%5q`` as written where every other expansion
    (24.11's sacct, the job's files) keeps the last digit: the one expander's ``keep_unknown``
    (fixtures/slurm-26.05/oracle-sacct-stdio.json)."""
    from shim.slurm.patterns import expand

    for pattern, kept, dropped in (("o-%5q", "o-%5q", "o-5q"), ("o-%12", "o-%12", "o-2"), ("o-%q", "o-%q", "o-%q"),
                                   ("%4j-%%", "0042-%", "0042-%")):
        assert expand(pattern, {"j": 42}, keep_unknown=True) == kept, pattern
        assert expand(pattern, {"j": 42}) == dropped, pattern


def test_padding_numbers_only_and_at_most_ten():
    """Slurm pads with ``%0*u`` (numbers only: %N, %u, %x never), the width capped at MAX_WIDTH
    (10) in both parsers; %J pads the job id and adds ``.<step>`` for a step (srun's
    ``fname_create``), the job id alone for the batch step (``_batch_path_check``)."""
    assert jobenv.expand_pattern("%12j", **BATCH) == "0000000042"
    assert steps.expand_io("%12j", STEP) == "0000000042"
    assert jobenv.expand_pattern("%4J.%3s", **BATCH) == "0042.batch"
    assert steps.expand_io("%4J", STEP) == "0042.3"
    named = dict(STEP, x="123")
    assert steps.expand_io("%5x-%5u-%5N", named, host="7") == "123-alice-7"
    assert jobenv.expand_pattern("%5x-%5N", **dict(BATCH, name="123", host="7")) == "123-7"


def test_no_val_outside_an_array():
    assert jobenv.expand_pattern("%a", **BATCH) == str(jobenv.NO_VAL) == "4294967294"
    assert steps.expand_io("%a", STEP) == "4294967294"
    assert steps.NO_VAL is jobenv.NO_VAL
    assert jobenv.expand_pattern("%A_%3a", **dict(BATCH, task=5, array_job=True)) == "42_005"
    assert steps.expand_io("%A_%3a", dict(STEP, A="40", a="5")) == "40_005"


def test_pe_hosts(tmp_path):
    hf = tmp_path / "hostfile"
    hf.write_text("n1.example 2 all.q@n1 UNDEFINED\nlocalhost 1 all.q@localhost UNDEFINED\n")
    assert jobenv.pe_hosts({"PE_HOSTFILE": str(hf)}, "me") == [("n1", 2), ("me", 1)]
    assert jobenv.pe_hosts({"PE_HOSTFILE": str(tmp_path / "gone"), "NSLOTS": "3"}, "me") == [("me", 3)]
    assert jobenv.pe_hosts({"NSLOTS": "x"}, "me") == [("me", 1)]  # the wrapper raised ValueError here
    assert steps.hosts_from_ge_env is jobenv.pe_hosts


def test_keep_ge():
    ge = {"JOB_ID": "7", "SGE_TASK_ID": "undefined", "PE_HOSTFILE": "/h", "NSLOTS": "2", "REQUEST": "r",
          "TMPDIR": "/tmp/7.1.q", "TMP": "/tmp/7.1.q", "HOME": "/root", "PATH": "/ge/bin"}
    env = {"JOB_ID": "mine", "TMPDIR": "/mine", "TMP": "/mytmp", "PATH": "/bin"}
    jobenv.keep_ge(env, ge)
    assert env == {"JOB_ID": "mine", "TMPDIR": "/tmp/7.1.q", "TMP": "/mytmp", "PATH": "/bin", "SGE_TASK_ID": "undefined",
                   "PE_HOSTFILE": "/h", "NSLOTS": "2", "REQUEST": "r"}
    env = {"TMP": "/other-host"}  # a step's environment, made on another host: its TMP is this host's
    jobenv.keep_ge(env, ge, here=("TMPDIR", "TMP"))
    assert env["TMP"] == env["TMPDIR"] == "/tmp/7.1.q"
    env = {}
    jobenv.keep_ge(env, {})
    assert env == {"TMPDIR": "/tmp"}


@pytest.fixture
def sdir(tmp_path):
    """A state directory laid out as cluster up makes it (the tests run as root)."""
    d = tmp_path / "state"
    d.mkdir()
    assert state.make_layout(str(d)) == []
    return str(d)


def test_runtime_records_round_trip(sdir):
    assert state.write_allocation(sdir, "5", {"hosts": [["vm", 1]]})
    assert state.read_allocation(sdir, "5") == {"hosts": [["vm", 1]]}
    assert state.alloc_path(sdir, "5").endswith("/steps/5.alloc.json")
    assert state.release_path(sdir, "5").endswith("/steps/5.release")
    assert [state.next_step_id(sdir, "5_1", 1.0) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(OSError):
        state.next_step_id(sdir, "../5", 1.0)
    assert state.write_step(sdir, "5", 2, {"state": "RUNNING"}) and state.read_step(sdir, "5", 2) == {"state": "RUNNING"}
    name = state.status_name("5", 2, "vm")
    assert state.write_status(sdir, name, {"rc": 0}) and state.take_status(sdir, name) == {"rc": 0}
    assert state.take_status(sdir, name) is None  # taken once
    assert not state.write_status(sdir, "../x.status.json", {"rc": 0})
    launch = state.write_launch(sdir, "remote_main", {"a": 1})
    assert launch and os.stat(os.path.join(sdir, "users", str(os.getuid()), "srun", launch)).st_mode & 0o777 == 0o600
    assert state.take_launch(sdir, launch) == {"a": 1}
    with pytest.raises(ValueError):
        state.take_launch(sdir, launch)
    token = "ab" * 16
    assert state.write_token(sdir, token, {"job_id": 9}) and state.read_token(sdir, token) == {"job_id": 9}
    state.remove_token(sdir, token)
    assert state.read_token(sdir, token) is None
    assert not state.write_token(sdir, "../../x", {"job_id": 9})
    assert state.gpu_dir(sdir) == os.path.join(sdir, "gpus")
    os.chmod(os.path.join(sdir, "gpus"), 0o777)  # writable by all without the sticky bit: not trusted
    assert state.gpu_dir(sdir) is None


def test_env_file_only_from_the_users_own_env_dir(sdir, tmp_path):
    assert state.write_own(sdir, "env", "e1.json", {"environ": {"A": "1"}})
    path = os.path.join(state.own_dir(sdir, "env"), "e1.json")
    assert state.read_env_file(sdir, path) == {"environ": {"A": "1"}}
    elsewhere = tmp_path / "e1.json"
    elsewhere.write_text('{"environ": {"A": "2"}}')
    assert state.read_env_file(sdir, str(elsewhere)) is None
