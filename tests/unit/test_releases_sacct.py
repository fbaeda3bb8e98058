"""sacct's and squeue's newer options and fields per Slurm release (issue 30): sacct --array,
--expand-patterns, --helpstate, --helpreason, --reason/-R, the fields SLUID, OriginalSLUID,
Exclusive, OverSubscribe and the other fields newer than 22.05, squeue --running-over and
--running-under, and what sacct shows of a job whose batch shell or srun step died of a TERM,
each compared with what real Slurm 24.11.5 and 26.05.5 answered (fixtures/slurm-*/oracle-sacct.json,
cases.json) and with real 22.05.8 (its capture and oracle-sacct.json)."""

from __future__ import annotations

import json
import shlex
import time
from types import SimpleNamespace

import pytest

from conftest import FIXTURES, release_setter, use_site_config
from shim import siteconf
from shim.__main__ import dispatch
from shim.gridengine import backends
from shim.gridengine.replay import ReplayBackend
from shim.proc import Result
from shim.slurm import releases
from shim.store import state
from test_sacct import EMPTY_QUEUE, NOW, SUBMIT, acct_line

NAMES = ("22.05", "24.11", "26.05")


def oracle(release: str) -> dict:
    return json.loads((FIXTURES / f"slurm-{release}" / "oracle-sacct.json").read_text())["cases"]


def cases(release: str) -> dict:
    return json.loads((FIXTURES / f"slurm-{release}" / "cases.json").read_text())


@pytest.fixture
def site(monkeypatch, tmp_path):
    """set(release): the unit-test site config with ``[slurm] release``, an empty queue, an empty
    accounting file and a fixed clock."""
    use_site_config(monkeypatch, tmp_path)
    conf = tmp_path / "config.toml"
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("SACCT_FORMAT", raising=False)
    time.tzset()
    (tmp_path / "accounting").write_text("# Version: 8.1.9\n")
    monkeypatch.setenv("SLURM_SHIM_ACCOUNTING", str(tmp_path / "accounting"))

    set_release = release_setter(conf)

    set_release.dir = tmp_path
    yield set_release
    siteconf.reset()
    backends.use(None)
    time.tzset()


def run(monkeypatch, capsys, cmd: str, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setattr(backends, "_override", ReplayBackend({("qstat",): Result(("qstat",), 0, EMPTY_QUEUE, "")}))
    monkeypatch.setattr(time, "time", lambda: NOW)
    rc = dispatch(cmd, list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def argv_of(case: dict) -> list[str]:
    """A case's command words (before a ``| head -1``), as bash read them."""
    return shlex.split(case["cmd"].split(" | ")[0])[1:]


def on_job(argv: list[str], job: str) -> list[str]:
    """``argv`` with -j naming ``job`` (the oracle's ids are its cluster's)."""
    i = argv.index("-j") + 1
    return argv[:i] + [job] + argv[i + 1:]


# --- the lists and the order they answer in ---------------------------------------------------------

@pytest.mark.parametrize("name", ["24.11", "26.05"])
@pytest.mark.parametrize("case", ["helpstate", "helpreason", "helpstate_then_bogus", "helpreason_and_helpstate",
                                  "helpformat_and_helpstate", "helpreason_helpformat", "helpformat_helpreason",
                                  "helpformat_bogus", "helpreason_bogus", "bogus"])
def test_sacct_lists_answer_as_the_release_did(site, monkeypatch, capsys, name, case):
    """24.11 reads the whole line (a bad option fails it) and the last list wins; 26.05 answers the
    first where it meets it."""
    site(name)
    c = oracle(name)[case]
    assert run(monkeypatch, capsys, "sacct", *argv_of(c)) == (c["rc"], c["stdout"], c["stderr"])


@pytest.mark.parametrize("name", NAMES)
def test_sacct_helpformat_is_the_releases(site, monkeypatch, capsys, name):
    site(name)
    c = cases(name)["help_sacct_helpformat"]
    assert run(monkeypatch, capsys, "sacct", "--helpformat") == (0, c["stdout"], "")


@pytest.mark.parametrize("name, case", [
    ("24.11", "help_helpstate"), ("24.11", "helpstate_help"), ("26.05", "help_helpstate"), ("26.05", "helpstate_help"),
    ("22.05", "help_helpformat"), ("22.05", "helpformat_help"), ("22.05", "usage_helpformat"),
    ("22.05", "version_help"), ("22.05", "help_version")])
def test_help_is_one_of_the_lists(site, monkeypatch, capsys, name, case):
    """--help (and 22.05's --usage) is one of the lists: the last asked wins (22.05, 24.11) or the
    first (26.05); -V answers where met, in every release (the oracle kept the first line alone:
    ``| head -1``)."""
    site(name)
    c = oracle(name)[case]
    rc, out, err = run(monkeypatch, capsys, "sacct", *argv_of(c))
    first = c["stdout"].splitlines()[0]
    if first.startswith("sacct ["):  # Slurm's help: ours is the shim's own
        assert (rc, out.startswith("Usage: sacct [OPTIONS]"), err) == (0, True, "")
    else:
        assert (rc, out.splitlines()[0], err) == (0, first, "")


# --- which options each release has -----------------------------------------------------------------

OPTION_WORDS = ["--array", "--expand-patterns", "--expand-pattern", "--expand-p", "--helpstate", "--helpreason",
                "--reason=None", "-R"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("word", OPTION_WORDS)
def test_an_option_the_release_lacks_is_its_unrecognized_option(site, monkeypatch, capsys, name, word):
    """As each release answered (oracle-sacct.json): 22.05 has none of the new ones (glibc's
    unrecognized option, as its sacct --bogus); --reason is every release's, its letter -R 26.05's
    alone (22.05 and 24.11: invalid option, whatever 22.05's man page says)."""
    site(name)
    argv = [word, "None"] if word == "-R" else [word]
    rc, out, err = run(monkeypatch, capsys, "sacct", *argv, "-X", "-n", "-P", "-o", "JobID")
    newer = word.split("=")[0] not in ("--reason", "-R")
    if name == "22.05" and newer:
        assert (rc, out, err) == (1, "", oracle("22.05")["bogus"]["stderr"].replace("--bogus", word))
    elif name != "26.05" and word == "-R":
        assert (rc, out, err) == (1, "", oracle(name)["reason_short"]["stderr"])
    else:
        lists = word in ("--helpstate", "--helpreason")  # (else the empty accounting file: no rows)
        assert (rc, out, err) == (0, oracle(name)[word[2:]]["stdout"] if lists else "", "")


# --- the fields -------------------------------------------------------------------------------------

def submit(cfg, job: int, *, asked: dict | None = None, sub: float = SUBMIT + 0.25, array=None) -> dict:
    rec = {"name": "pat", "partition": "debug", "workdir": "/tmp", "ntasks": 1, "cpus_per_task": 1, "nodes": 1,
           "account": "research", "user": "root", "uid": 0, "submit_time": sub, "sub": sub, "cluster": "cluster",
           "array": array}
    if asked is not None:
        rec["asked"] = asked
    state.record_submit(cfg, job, rec)
    return rec


def ended(site, job: int, *, status: int = 0) -> None:
    (site.dir / "accounting").write_text("# Version: 8.1.9\n" + acct_line(
        job, "pat", submit=SUBMIT, start=SUBMIT + 2, end=SUBMIT + 3, status=status))


def event(cfg, job: int, task, kind: str, data: dict) -> None:
    import os

    name = f"{job}.{'x' if task is None else task}.{kind}.json"
    assert state.write_record(cfg, "events", job, name, data)
    os.utime(state.record_file(cfg, "events", name), (data["t"], data["t"]))


@pytest.mark.parametrize("name", NAMES)
def test_sluid_and_the_26_05_fields(site, monkeypatch, capsys, name):
    """SLUID on the job's row and its steps' (24.11 on), the job's own: the SLURM_JOB_SLUID its job
    wrapper sets (jobenv.release_env); OriginalSLUID (the same: never requeued), Exclusive and
    OverSubscribe as asked (26.05; its steps' empty): the headers as each release printed them."""
    from shim.runtime.jobenv import release_env

    site(name)
    cfg = siteconf.get()
    rec = submit(cfg, 20, asked={"exclusive": "NODE"})
    ended(site, 20)
    sluid = release_env(rec, job_id=20, task=None, start=SUBMIT + 2, cpus_per_task=1)["SLURM_JOB_SLUID"]
    assert sluid == releases.sluid("cluster", int((SUBMIT + 0.25) * 1000), 20, None)
    asked = oracle("26.05")["fields_all"]
    argv = on_job(argv_of(asked), "20")
    rc, out, err = run(monkeypatch, capsys, "sacct", *argv)
    if name == "26.05":
        assert (rc, err) == (0, "")
        assert out.splitlines()[:2] == asked["stdout"].splitlines()[:2]
        rc, out, err = run(monkeypatch, capsys, "sacct", *on_job(argv_of(oracle("26.05")["fields_all_P"]), "20"))
        assert out == f"JobID|SLUID|OriginalSLUID|Exclusive|OverSubscribe\n20|{sluid}|{sluid}|NODE|NO\n" \
                      f"20.batch|{sluid}|{sluid}||\n"
        rc, out, err = run(monkeypatch, capsys, "sacct", "-j", "20", "--json")
        job = json.loads(out)["jobs"][0]  # the JSON's sluid is the same job's (its milliseconds too)
        assert (rc, job["sluid"], job["original_sluid"]) == (0, sluid, sluid)
    else:
        c = oracle("24.11")["fields_all"]
        bad = "SLUID" if name == "22.05" else "OriginalSLUID"
        assert (rc, out, err) == (c["rc"], "", c["stderr"].replace('"OriginalSLUID"', f'"{bad}"'))
    if name != "22.05":
        c = oracle(name)["fields_sluid_P"]
        rc, out, err = run(monkeypatch, capsys, "sacct", *on_job(argv_of(c), "20"))
        assert out == f"JobID|SLUID\n20|{sluid}\n20.batch|{sluid}\n"


@pytest.mark.parametrize("name", ["24.11", "26.05"])
def test_every_newer_field_has_the_releases_width_or_is_refused(site, monkeypatch, capsys, name):
    """Each field newer than 22.05 (and 22.05's Reserved, ResvCPU, ResvCPURAW, gone from 24.11):
    the release's header and dashes, or its Invalid field error."""
    site(name)
    cfg = siteconf.get()
    submit(cfg, 20)
    ended(site, 20)
    for case, c in oracle(name).items():
        if not case.startswith("width_"):
            continue
        rc, out, err = run(monkeypatch, capsys, "sacct", *on_job(argv_of(c), "20"))
        assert (rc, out.splitlines()[:2], err) == (c["rc"], c["stdout"].splitlines()[:2], c["stderr"]), case


@pytest.mark.parametrize("name", NAMES)
def test_22_05s_retired_fields_are_22_05s_alone(site, monkeypatch, capsys, name):
    site(name)
    rc, out, err = run(monkeypatch, capsys, "sacct", "-X", "-n", "-o", "Reserved")
    assert (rc, err) == ((0, "") if name == "22.05" else (1, 'sacct: error: Invalid field requested: "Reserved"\n'))


# --- --array ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["24.11", "26.05"])
def test_array_puts_each_task_of_an_array_that_never_ran_on_a_row(site, monkeypatch, capsys, name):
    """Without --array an array whose tasks never ran is one row, ``N_[1-4]``; with it, a row a task
    (oracle-sacct.json array_pending_off/on: held tasks; here tasks cancelled before they ran, the
    same one record in Slurm). Tasks that ran are rows of their own either way (array_off/on)."""
    site(name)
    cfg = siteconf.get()
    submit(cfg, 19, array=[1, 2, 3, 4])
    for task in (1, 2, 3, 4):
        event(cfg, 19, task, "cancel", {"t": SUBMIT + 5, "uid": 0, "user": "root", "was": "PENDING"})
    off, on = oracle(name)["array_pending_off"], oracle(name)["array_pending_on"]
    jid = argv_of(off)[argv_of(off).index("-j") + 1]
    _rc, out, _err = run(monkeypatch, capsys, "sacct", *on_job(argv_of(off), "19"))
    assert [line.split()[0] for line in out.splitlines()] == [
        line.split()[0].replace(jid, "19") for line in off["stdout"].splitlines()]
    _rc, out, _err = run(monkeypatch, capsys, "sacct", *on_job(argv_of(on), "19"))
    assert [line.split()[0] for line in out.splitlines()] == [
        line.split()[0].replace(jid, "19") for line in on["stdout"].splitlines()]
    assert all(line.split()[1].startswith("CANCELLED") for line in out.splitlines()[2:])


# --- squeue --running-over / --running-under ---------------------------------------------------------

@pytest.mark.parametrize("case", ["sq_over_bad", "sq_over_noarg", "sq_over_zero", "sq_under_zero"])
@pytest.mark.parametrize("name", ["24.11", "26.05"])
def test_running_over_and_under_are_26_05s_and_read_as_it_reads_them(site, monkeypatch, capsys, name, case):
    site(name)
    c = oracle(name)[case]
    assert run(monkeypatch, capsys, "squeue", *argv_of(c)) == (c["rc"], c["stdout"], c["stderr"])


def test_on_22_05_running_over_is_unrecognized(site, monkeypatch, capsys):
    site("22.05")
    bogus = cases("22.05")["squeue_bogus_option"]
    assert run(monkeypatch, capsys, "squeue", "--running-over=0:05") == (
        1, "", bogus["stderr"].replace("--bogus", "--running-over=0:05"))


@pytest.mark.parametrize("case", ["sq_over_5", "sq_under_5", "sq_over_1h", "sq_under_1h", "sq_over_t_all",
                                  "sq_over_under"])
def test_running_over_and_under_keep_the_running_jobs_26_05_kept(case):
    """The queue 26.05.5 was asked about (sq_listing: two running jobs 8 s and 2 s old, two pending)
    through jobqueue.running_for, with the times squeue read: the same jobs kept."""
    from shim.cli import squeue
    from shim.operations.jobqueue import running_for

    asked = oracle("26.05")
    listing = [line.split() for line in asked["sq_listing"]["stdout"].splitlines()[1:]]
    recs = [SimpleNamespace(job_id=int(i), state=st, extra={"run_seconds": int(m) * 60 + int(s)})
            for i, _n, st, (m, s) in ((i, n, st, t.split(":")) for i, n, st, t in listing)]
    words = argv_of(asked[case])
    over = next((squeue.running_time(w.split("=", 1)[1]) for w in words if w.startswith("--running-over=")), None)
    under = next((squeue.running_time(w.split("=", 1)[1]) for w in words if w.startswith("--running-under=")), None)
    kept = [r.job_id for r in running_for(recs, (over, under), NOW)]
    assert kept == [int(line.split()[0]) for line in asked[case]["stdout"].splitlines()[1:]]


# --- scancel TERM: what sacct shows of the job --------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case, exit_, signal", [
    ("term_b_nostep_sacct", 0, 15),  # scancel -b -s TERM: the batch shell died of it
    ("term_b_withstep_sacct", 0, 15),  # the same with an srun step running (its row: test_step_rows.py)
    ("term_plainstep_sacct", None, 0),  # --signal=TERM to the step: the script exits with srun's code
])
def test_a_jobs_rows_after_scancel_term_are_each_releases(site, monkeypatch, capsys, name, case, exit_, signal):
    """The job's and its batch step's State and ExitCode, from the end event the job wrapper writes
    (its script's exit code and signal), as each release printed them: the batch shell killed by
    TERM is FAILED 0:15 / CANCELLED 0:15 in every release (22.05's capture: job 134); a script that
    ends with srun's code is FAILED <code>:0 twice, that code being srun's: 15 on 22.05 and 24.11, 143
    on 26.05 (the wrapper's and srun's part: runtime/)."""
    site(name)
    cfg = siteconf.get()
    c = oracle(name).get(case) or oracle("24.11")[case]  # (22.05 was not asked term_b_nostep: 24.11's rows)
    rows = [line.split() for line in c["stdout"].splitlines()[2:]]
    job_row, batch_row = rows[0], rows[1]
    code = int(job_row[3].split(":")[0]) if exit_ is None else exit_
    submit(cfg, 30)
    ended(site, 30, status=(128 + signal) if signal else code)
    event(cfg, 30, None, "end", {"t": SUBMIT + 3, "exit": code, "signal": signal,
                                 "state": "FAILED", "node": "vm", "start": SUBMIT + 2})
    _rc, out, _err = run(monkeypatch, capsys, "sacct", "-j", "30", "-n", "-P", "-o", "JobID,State,ExitCode")
    assert out.splitlines() == [f"30|{job_row[2]}|{job_row[3]}", f"30.batch|{batch_row[2]}|{batch_row[3]}"]
    if name == "22.05" and case != "term_plainstep_sacct":  # (and the capture's job 134, the same)
        ref22 = [line.split() for line in cases("22.05")["sacct_default"]["stdout"].splitlines()
                 if line.startswith("134")]
        assert [r[-2:] for r in ref22[:2]] == [[job_row[2], job_row[3]], [batch_row[2], batch_row[3]]]
