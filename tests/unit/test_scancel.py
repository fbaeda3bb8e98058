"""scancel on recorded qstat output: which qdel/qmod calls it makes, the cancel events it writes, and
Slurm 22.05's messages and exit codes."""

from __future__ import annotations

import io
import json
import os
import time
from datetime import datetime

import pytest

from conftest import FIXTURES, SLURM_REF, use_site_config
from shim.gridengine import backends
from shim import siteconf
from shim.store import records, state
from shim.__main__ import dispatch
from listing_replay import ListingReplay

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
MIXED = SGE / "live-qstat-u-all-r-xml.mixed.xml"
CASES = json.loads((SLURM_REF / "cases.json").read_text())
NOW = datetime(2026, 11, 30, 9, 20, 0).timestamp()


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    use_site_config(monkeypatch, tmp_path)
    for var in list(os.environ):
        if var.startswith("SCANCEL_"):
            monkeypatch.delenv(var)
    monkeypatch.setattr(time, "time", lambda: NOW)
    siteconf.reset()
    yield tmp_path / "state"
    siteconf.reset()
    backends.use(None)


def scancel(capsys, *argv, qstat=MIXED, qdel="", qmod="", rc=0, monkey_sleep=None):
    b = ListingReplay()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=qstat.read_text() if hasattr(qstat, "read_text") else qstat)
    b.add("qdel", [], stdout=qdel, rc=rc)
    b.add("qmod", [], stdout=qmod, rc=rc)
    backends.use(b)
    rc = dispatch("scancel", list(argv))
    out, err = capsys.readouterr()
    calls = [list(k) for k, _ in b.calls if k[0] != "qstat"]
    return rc, out, err, calls


def events(state_dir) -> dict[str, dict]:
    d = state_dir / "users" / str(os.getuid()) / "records" / "events"  # the caller's own records (by id shard)
    return {p.name: json.loads(p.read_text()) for p in sorted(d.glob("[0-9]*/*.json"), key=lambda p: p.name)}


def same_as(case: str, rc, out, err):
    ref = CASES[case]
    assert (rc, out, err) == (ref["rc"], ref["stdout"], ref["stderr"])


def test_argument_errors_are_slurms(capsys):
    same_as("scancel_no_args", *scancel(capsys)[:3])
    same_as("scancel_bad_id", *scancel(capsys, "abc")[:3])
    same_as("scancel_u_unknown", *scancel(capsys, "-u", "nosuchuser")[:3])
    # scancel/opt.c _xlate_state_name: fprintf, no prefix, exit 1
    assert scancel(capsys, "-t", "DONE", "105") == (
        1, "", "Invalid job state specified: DONE\nValid job states are PENDING, RUNNING, and SUSPENDED\n", [])
    rc, out, err, _ = scancel(capsys, "-s", "NOSUCH", "105")
    assert (rc, err) == (1, "Unknown job signal: NOSUCH\n")  # Slurm 22.05's scancel/opt.c: no prefix
    for bad in ("WINCH", "0", "9x", "SIGKILLX"):  # sig_name2num: Slurm's own signal table, a whole number
        assert scancel(capsys, "-s", bad, "105")[:3] == (1, "", f"Unknown job signal: {bad}\n"), bad
    rc, out, err, _ = scancel(capsys, "--bogus")
    assert (rc, err) == (1, "scancel: unrecognized option '--bogus'\nTry \"scancel --help\" for more information\n")


def test_unknown_job_is_silent_unless_verbose_or_signalling(capsys):
    rc, out, err, calls = scancel(capsys, "999999")
    assert (rc, out, err, calls) == (0, "", "", [])
    same_as("scancel_unknown_verbose", *scancel(capsys, "-v", "999999")[:3])
    same_as("scancel_signal_unknown", *scancel(capsys, "-s", "USR1", "999999")[:3])
    same_as("scancel_batch_unknown", *scancel(capsys, "-b", "999999")[:3])
    rc, out, err, calls = scancel(capsys, "110_99")  # an array task that does not exist
    assert (rc, err, calls) == (0, "", [])


def test_cancel_pending_and_running_in_one_qdel(capsys, site):
    rc, out, err, calls = scancel(capsys, "112", "105", qdel="root has deleted job 112\n"
                                                            "root has registered the job 105 for deletion\n")
    assert (rc, out, err) == (0, "", "")
    assert calls == [["qdel", "112", "105"]]
    ev = events(site)
    assert ev["112.x.cancel.json"]["was"] == "PENDING" and ev["112.x.cancel.json"]["user"] == "root"
    assert ev["112.x.cancel.json"]["uid"] == os.getuid() and ev["112.x.cancel.json"]["t"] == NOW
    assert ev["105.x.cancel.json"]["was"] == "RUNNING" and ev["105.x.cancel.json"]["node"] == "vm"


def test_verbose_prints_terminating(capsys):
    rc, out, err, _ = scancel(capsys, "-v", "112", qdel="root has deleted job 112\n")
    assert (rc, out, err) == (0, "", "scancel: Terminating job 112\n")


def test_array_tasks_by_slurm_index(capsys, site):
    rc, _, err, calls = scancel(capsys, "110_4", "110_1")
    assert (rc, err, calls) == (0, "", [["qdel", "110.4", "110.1"]])
    assert {"110.4.cancel.json", "110.1.cancel.json"} <= set(events(site))
    assert events(site)["110.4.cancel.json"]["was"] == "PENDING"
    rc, _, _, calls = scancel(capsys, "110_[3-5]")
    assert calls == [["qdel", "110.3-5"]]


def test_a_tasks_own_id_is_echoed_as_typed(capsys, site):
    """A task named by its own job id (40000000110: task 4 of 110, jobids.task_job_id) is that task;
    scancel's lines name it as typed, as Slurm's scancel echoes the job id it was given
    (scancel.c _cancel_job_id prints opt.job_list's id, not the array's)."""
    rc, _, err, calls = scancel(capsys, "-v", "40000000110", qdel="")
    assert (rc, err, calls) == (0, "scancel: Terminating job 40000000110\n", [["qdel", "110.4"]])
    ref = CASES["scancel_unknown_verbose"]
    rc, out, err, _ = scancel(capsys, "-v", "40000999999")
    assert (rc, out, err) == (ref["rc"], ref["stdout"], ref["stderr"].replace("999999", "40000999999"))


def test_ids_are_read_by_the_one_grammar(capsys, site):
    """scancel's ids are jobids.scancel_ids' (Slurm's _xlate_job_step_ids): commas outside brackets
    separate ids, N_* and N+h are the whole job, trailing text, blanks inside a word and '%' in a
    bracket list are 'Invalid job id X' with the id as it stands (exit 1, nothing done)."""
    assert scancel(capsys, "112,105")[3] == [["qdel", "112", "105"]]
    assert scancel(capsys, "110_[1-2],112")[:4] == (1, "", "scancel: error: Invalid job id 110_[1-2],112\n", [])
    assert scancel(capsys, "110_*")[3] == [["qdel", "110"]]
    assert scancel(capsys, "112+0")[3] == [["qdel", "112"]]
    for bad, shown in (("105x", "105x"), ("112 105", "112 105"), ("110_[1-3%2]", "110_[1-3%2]"),
                       ("105,7y", "7y"), ("0", "0"), ("", "")):
        assert scancel(capsys, bad)[:4] == (1, "", f"scancel: error: Invalid job id {shown}\n", []), bad
    rc, _, err, calls = scancel(capsys, "-v", "110_[3-4]", qdel="")
    assert calls == [["qdel", "110.3-4"]] and "scancel: Terminating job 110_[3-4]\n" in err


def test_array_indices_map_to_grid_engine_task_numbers(capsys, site):
    state.record_submit(str(site), 110, {"name": "fx_arr", "array": [10, 20, 30, 40, 50], "throttle": 2})
    rc, _, err, calls = scancel(capsys, "110_40", "110_[20,50]")
    assert (rc, err) == (0, "")
    assert calls == [["qdel", "110.4", "110.2", "110.5"]]
    assert {"110.40.cancel.json", "110.20.cancel.json", "110.50.cancel.json"} <= set(events(site))


def test_array_index_map_is_only_the_owners(capsys, site):
    """F-3e: another user's record of the job does not map the victim's tasks (a reversed map
    would cancel the wrong one), whether or not the owner has a record."""
    from test_squeue import plant

    plant(site, "jobs", "110.json", json.dumps({"array": [50, 40, 30, 20, 10], "user": "root"}))
    assert scancel(capsys, "110_2")[3] == [["qdel", "110.2"]]  # no record of the owner's: as Grid Engine numbers
    state.record_submit(str(site), 110, {"name": "fx_arr", "array": [10, 20, 30, 40, 50], "throttle": 2})
    assert scancel(capsys, "110_40")[3] == [["qdel", "110.4"]]


def test_planted_records_never_crash_or_hang_scancel(capsys, site):
    from test_squeue import no_hang, plant_everything

    plant_everything(site, NOW, 105)
    with no_hang("scancel"):
        rc, _, err, calls = scancel(capsys, "-s", "CONT", "105")
        assert (rc, err, calls) == (0, "", [["qmod", "-usj", "105"]])
        rc, _, err, calls = scancel(capsys, "105", "888888")  # her invented job of the victim's is unknown
        assert (rc, calls) == (0, [["qdel", "105"]])
        rc, _, err, calls = scancel(capsys, "-v", "888888")
        assert "Invalid job id specified" in err


def test_a_record_that_cannot_be_written_is_a_warning(capsys, site):
    os.rename(site / "users", site / "users.off")  # a state directory nobody set up
    try:
        rc, _, err, calls = scancel(capsys, "105")
    finally:
        os.rename(site / "users.off", site / "users")
    assert (rc, calls) == (0, [["qdel", "105"]])
    assert err.startswith("scancel: warning: could not record the cancel of job 105 in ")


def test_whole_array_records_every_task(capsys, site):
    rc, _, _, calls = scancel(capsys, "110")
    assert calls == [["qdel", "110"]]
    assert sorted(n for n in events(site) if n.startswith("110.")) == \
        [f"110.{t}.cancel.json" for t in (1, 2, 3, 4, 5)]


def test_filters(capsys):
    assert scancel(capsys, "-u", "alice")[3] == [["qdel", "106"]]
    assert scancel(capsys, "-t", "PENDING", "-p", "gpu")[3] == [["qdel", "117"]]
    assert scancel(capsys, "-n", "fx_held")[3] == [["qdel", "112"]]
    assert scancel(capsys, "--name=fx_arr", "-t", "R")[3] == [["qdel", "110.1-2"]]
    assert scancel(capsys, "-w", "vm", "-p", "gpu")[3] == [["qdel", "108"]]
    assert scancel(capsys, "-t", "SUSPENDED")[3] == [["qdel", "107"]]
    assert scancel(capsys, "-u", "alice", "105")[3] == []  # an id outside the filter is left alone
    assert scancel(capsys, "-A", "nosuchaccount")[3] == []
    assert scancel(capsys, "-u", "0", "-t", "PD", "-p", "gpu")[3] == [["qdel", "117"]]  # a uid names its user
    # --me and -u set the one user: the later wins (opt.c), not both
    assert scancel(capsys, "--me", "-u", "alice", "-t", "PD", "-p", "gpu")[:4] == (0, "", "", [])
    assert scancel(capsys, "-u", "alice", "--me", "-t", "PD", "-p", "gpu")[3] == [["qdel", "117"]]


def test_a_nodelist_with_a_slash_is_a_hostfile(capsys, tmp_path):
    """scancel.c: -w naming a '/' is read with slurm_read_hostfile (comments, NAME*N, one
    hostlist a word); where it cannot be read, its error() line is said for each job it was
    tried on (it is tried again job by job) and the text itself is the host list."""
    hf = tmp_path / "hosts"
    hf.write_text("# the gpu box\nnosuch,vm*2\n")
    assert scancel(capsys, "-w", str(hf), "-p", "gpu") == (0, "", "", [["qdel", "108"]])
    hf.write_text("nosuch # only\n")
    assert scancel(capsys, "-w", str(hf), "-p", "gpu") == (0, "", "", [])
    hf.write_text("vm\n-x\n")
    rc, out, err, calls = scancel(capsys, "-w", str(hf), "-p", "gpu")
    # both of gpu's jobs (108 running, 117 pending) reach the -w test: one error line each
    assert (rc, out, calls) == (0, "", []) and err == f"scancel: error: Invalid hostfile {hf} contents on line 2\n" * 2
    rc, out, err, calls = scancel(capsys, "-w", str(tmp_path / "gone"), "-t", "PD", "-p", "gpu")
    assert (rc, out, calls) == (0, "", [])
    assert err == f"scancel: error: slurm_allocate_resources error opening file {tmp_path / 'gone'}, " \
                  "No such file or directory\n"
    assert scancel(capsys, "-Q", "-w", str(tmp_path / "gone"), "-p", "gpu")[:4] == (0, "", "", [])


def test_a_filter_value_is_compared_whole_not_split_on_commas(capsys):
    """Slurm 22.05's scancel takes one value for -n, -p, -A, -q (scancel/opt.c keeps optarg as
    given) and scancel.c's _filter_job_records compares it whole with xstrcmp: "a,b" is one name,
    the name of a job so named, and names no job called a or b (squeue's lists are its own)."""
    named = MIXED.read_text().replace("<JB_name>fx_held</JB_name>", "<JB_name>fx_a,fx_held</JB_name>")
    assert scancel(capsys, "-n", "fx_a,fx_held", qstat=named)[3] == [["qdel", "112"]]
    assert scancel(capsys, "-n", "fx_held", qstat=named)[3] == []
    assert scancel(capsys, "-n", "fx_a", qstat=named)[3] == []
    assert scancel(capsys, "-n", "fx_run1,fx_alice")[:4] == (0, "", "", [])
    assert scancel(capsys, "-p", "debug,gpu")[:4] == (0, "", "", [])
    assert scancel(capsys, "-p", "gpu", "-t", "PD")[3] == [["qdel", "117"]]
    assert scancel(capsys, "-n", "fx_gpu3", "-A", "root,other")[3] == []
    assert scancel(capsys, "-n", "fx_gpu3", "-q", "normal,high")[3] == []
    assert scancel(capsys, "-n", "fx_gpu3", "-q", "NORMAL")[3] == [["qdel", "117"]]  # lowercased (xstrtolower)


def test_an_empty_filter_value_matches_no_job(capsys, monkeypatch):
    """A value given empty is still given (opt.c's xstrdup("") is no NULL): it matches no job's
    name, partition, ...; it used to read as "not given" and so let every job through."""
    for opt in ("-n", "-p", "-A", "-q", "-w", "-R"):
        rc, out, err, calls = scancel(capsys, opt, "")
        assert (rc, out, err) == (0, "", "") and [c for c in calls if c[0] in ("qdel", "qmod")] == [], opt
    monkeypatch.setenv("SCANCEL_NAME", "")
    assert scancel(capsys)[:4] == (0, "", "", [])


def test_state_is_one_of_slurms_state_names(capsys, monkeypatch):
    """-t takes one state (opt.c _xlate_state_name: job_state_num, a long name or compact code in
    any case); a list is no state name: its error, no prefix, exit 1, nothing done. Any other
    job state Slurm names is taken and matches no job (_filter_job_records compares the job's
    base state, PENDING, RUNNING or SUSPENDED, with it)."""
    valid = "Valid job states are PENDING, RUNNING, and SUSPENDED\n"
    assert scancel(capsys, "-t", "PENDING,RUNNING") == (
        1, "", "Invalid job state specified: PENDING,RUNNING\n" + valid, [])
    assert scancel(capsys, "-t", "PD,R")[:3] == (1, "", "Invalid job state specified: PD,R\n" + valid)
    assert scancel(capsys, "-t", "pd", "-p", "gpu")[3] == [["qdel", "117"]]
    for other in ("COMPLETED", "CA", "stopped", "COMPLETING"):
        assert scancel(capsys, "-t", other)[:4] == (0, "", "", []), other
    # opt.c reads SCANCEL_STATE first (its own words), then each option in command-line order
    monkeypatch.setenv("SCANCEL_STATE", "PD,R")
    assert scancel(capsys, "-t", "R")[:3] == (1, "", "Unrecognized SCANCEL_STATE value: PD,R\n" + valid)
    monkeypatch.delenv("SCANCEL_STATE")
    assert scancel(capsys, "-t", "BAD", "-s", "NOSUCH")[:3] == (1, "", "Invalid job state specified: BAD\n" + valid)
    assert scancel(capsys, "-s", "NOSUCH", "-t", "BAD")[:3] == (1, "", "Unknown job signal: NOSUCH\n")
    assert scancel(capsys, "-t", "BAD", "--help")[0] == 1
    rc, out, _, _ = scancel(capsys, "--help", "-t", "BAD")
    assert rc == 0 and out.startswith("Usage: scancel [OPTIONS]")
    # opt.c's loop meets -t/-s/--help before getopt_long sees a bad option after them
    try_help = 'Try "scancel --help" for more information\n'
    assert scancel(capsys, "-t", "BAD", "--bogus") == (1, "", "Invalid job state specified: BAD\n" + valid, [])
    assert scancel(capsys, "-s", "NOSUCH", "-x") == (1, "", "Unknown job signal: NOSUCH\n", [])
    assert scancel(capsys, "--bogus", "-t", "BAD") == (
        1, "", "scancel: unrecognized option '--bogus'\n" + try_help, [])
    assert scancel(capsys, "-t", "R", "-x", "-t", "BAD") == (1, "", "scancel: invalid option -- 'x'\n" + try_help, [])
    usage = scancel(capsys, "--usage")
    assert usage[:3] == (0, usage[1], "") and usage[1].startswith("Usage: scancel [-A account]")
    assert scancel(capsys, "--usage", "--bogus") == usage
    monkeypatch.setenv("SCANCEL_STATE", "PD,R")  # (_opt_env runs before the command line is read)
    assert scancel(capsys, "--bogus")[:3] == (1, "", "Unrecognized SCANCEL_STATE value: PD,R\n" + valid)


def test_user_is_one_user_or_slurms_error(capsys, monkeypatch):
    """-u names one user (opt.c _opt_verify: uid_from_string, a name or a uid): "a,b" is no user
    name, "scancel: error: Invalid user name: a,b" (error(), exit 1), as for any unknown name
    (reference scancel_u_unknown). --me is the caller's uid in digits (opt.c "%u" of getuid()):
    a caller the user database does not know gets the same error with the uid."""
    assert scancel(capsys, "-u", "alice,root") == (1, "", "scancel: error: Invalid user name: alice,root\n", [])
    assert scancel(capsys, "-u", "root,alice", "-t", "PD") == (
        1, "", "scancel: error: Invalid user name: root,alice\n", [])
    monkeypatch.setattr(os, "getuid", lambda: 43219)  # no passwd entry
    assert scancel(capsys, "--me") == (1, "", "scancel: error: Invalid user name: 43219\n", [])
    assert scancel(capsys, "--me", "-u", "alice")[3] == [["qdel", "106"]]  # -u came later: --me is gone


def test_me_and_user_last_wins_over_the_environment(capsys, monkeypatch):
    """SCANCEL_USER is read before the command line (opt.c _opt_env): --me or -u on the command
    line replaces it, and of the two the later wins."""
    monkeypatch.setenv("SCANCEL_USER", "alice")
    assert scancel(capsys)[3] == [["qdel", "106"]]
    assert scancel(capsys, "--me", "-t", "PD", "-p", "gpu")[3] == [["qdel", "117"]]
    assert scancel(capsys, "-u", "root", "-t", "PD", "-p", "gpu")[3] == [["qdel", "117"]]
    assert scancel(capsys, "--me", "-u", "alice", "-t", "R", "-p", "debug")[3] == [["qdel", "106"]]


def test_permission_denied_is_210(capsys):
    denied = (SGE / "live-qdel-permission-denied.txt").read_text()
    rc, out, err, _ = scancel(capsys, "105", qdel=denied)
    ref = CASES["scancel_bob_on_root_job"]
    assert (rc, out, err) == (ref["rc"], "", ref["stderr"].replace("109", "105"))


def test_signals(capsys, site):
    rc, _, err, calls = scancel(capsys, "-s", "STOP", "105")
    assert (rc, err, calls) == (0, "", [["qmod", "-sj", "105"]])
    assert "105.x.suspend.json" in events(site)
    assert scancel(capsys, "--signal=CONT", "107")[3] == [["qmod", "-usj", "107"]]
    assert scancel(capsys, "-s", "9", "105")[3] == [["qdel", "105"]]
    assert scancel(capsys, "-b", "105")[3] == [["qdel", "105"]]  # -b without -s: SIGKILL to the batch shell ends it
    # a job not submitted through the shim has no wrapper to deliver what Grid Engine cannot
    rc, out, err, calls = scancel(capsys, "--signal=USR1", "105")
    assert rc == 1 and calls == [] and err.startswith("scancel: error: Kill job error on job id 105: ")
    assert "USR1" in err and signal_files(site) == []


def recorded_refusal(cmd: str, job: int) -> str:
    """Grid Engine's answer to ``cmd`` from fixtures/gridengine/sge-8.1.9/refusals.txt, for ``job``."""
    text = (SGE / "refusals.txt").read_text()
    block = text.split(f"### as shimmallory: {cmd}\n", 1)[1].split("### rc=", 1)[0]
    return block.replace("JOB", str(job))


def test_a_refused_stop_or_cont_is_denied_and_writes_no_event(capsys, site):
    """qmod's refusal ("you have no permission to modify job") was not recognised: scancel -s STOP
    on another user's job said nothing, exited 0 and wrote a suspend event."""
    for sig, cmd in (("STOP", "qmod -sj JOB"), ("CONT", "qmod -usj JOB")):
        rc, out, err, calls = scancel(capsys, "-s", sig, "105", qmod=recorded_refusal(cmd, 105), rc=1)
        assert (rc, out, err) == (210, "", "scancel: error: Kill job error on job id 105: Access/permission denied\n")
    assert events(site) == {}


def test_a_grid_engine_failure_naming_no_job_is_an_error_not_a_cancel(capsys, site):
    rc, out, err, calls = scancel(capsys, "105", qdel="error: commlib error: got select error (Connection refused)",
                                  rc=1)
    assert (rc, err) == (1, "scancel: error: Kill job error on job id 105: error: commlib error: got select error "
                            "(Connection refused)\n")
    assert events(site) == {}


def test_steps_are_not_jobs(capsys):
    rc, out, err, calls = scancel(capsys, "105.0")
    assert (rc, out, err, calls) == (0, "", "", [])


def test_ended_job(capsys, site):
    state.record_submit(str(site), 300, {"name": "done", "partition": "debug", "user": "root"})
    state.record_event(str(site), 300, None, "end", {"exit": 0, "signal": 0, "state": "COMPLETED", "node": "vm"})
    os.utime(state.record_file(str(site), "events", "300.x.end.json"), (NOW - 5, NOW - 5))
    rc, out, err, calls = scancel(capsys, "300")
    assert (rc, err, calls) == (0, "", [])
    rc, out, err, calls = scancel(capsys, "-v", "300")
    ref = CASES["scancel_done_verbose"]
    assert (rc, err) == (ref["rc"], ref["stderr"].replace("job 1", "job 300").replace("id 1:", "id 300:"))


def test_quiet_hides_errors(capsys):
    denied = (SGE / "live-qdel-permission-denied.txt").read_text()
    rc, out, err, _ = scancel(capsys, "-Q", "105", qdel=denied)
    assert (rc, err) == (210, "")


def test_interactive_asks_for_each_job(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("y\nn\n"))
    rc, out, err, calls = scancel(capsys, "-i", "112", "105")
    assert calls == [["qdel", "112"]]
    assert out == ("Cancel job_id=112 name=fx_held partition=debug [y/n]? "
                   "Cancel job_id=105 name=fx_run1 partition=debug [y/n]? ")


def test_many_jobs_take_few_qdel_calls(capsys, site):
    rows = "".join(f"""<job_list state="pending"><JB_job_number>{i}</JB_job_number><JAT_prio>0.5</JAT_prio>
<JB_name>many</JB_name><JB_owner>root</JB_owner><state>qw</state>
<JB_submission_time>2026-11-30T09:00:00</JB_submission_time><queue_name></queue_name><slots>1</slots>
<hard_req_queue>debug</hard_req_queue></job_list>
""" for i in range(1000, 2000))
    doc = f"<?xml version='1.0'?>\n<job_info><queue_info></queue_info><job_info>\n{rows}</job_info></job_info>\n"
    rc, out, err, calls = scancel(capsys, "-n", "many", qstat=doc)
    from shim.gridengine.ops import QDEL_BATCH

    assert rc == 0 and len(calls) == -(-1000 // QDEL_BATCH) == 2  # the backend's batches of ids
    assert sum(len(c) - 1 for c in calls) == 1000
    assert len(events(site)) == 1000


# ---------------------------------------------------------------------------------------------
# the signal channel (issue 15 part 6): scancel -s writes requests the job wrapper delivers


def signal_files(state_dir, uid: int | None = None) -> list[str]:
    d = state_dir / "users" / str(os.getuid() if uid is None else uid) / "signals"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


def shim_job(site, job: int = 105, **extra) -> None:
    """A submit record of the owner's (root, as the fixture's jobs): the job runs the shim's wrapper."""
    state.record_submit(str(site), job, {"name": "fx_run1", "user": "root", **extra})


def test_a_signal_signals_and_does_not_cancel(capsys, site):
    """Slurm's scancel.c (_cancel_job_id) sends -s's signal with slurm_kill_job2, and slurmctld's
    job_signal deallocates (cancels) a running job only for SIGKILL: -s TERM/INT/HUP/USR1 signal
    it, with no qdel and no cancel event. Without flags the request is for the steps
    (_signal_job: KILL_STEPS_ONLY)."""
    shim_job(site)
    for text, num in (("SIGTERM", 15), ("INT", 2), ("USR1", 10), ("12", 12), ("HUP", 1), ("34", 34)):
        rc, out, err, calls = scancel(capsys, "-s", text, "105")
        assert (rc, out, err, calls) == (0, "", "", []), text
    names = signal_files(site)
    assert len(names) == 6 and all(n.startswith("105.") for n in names)
    assert not any(n.endswith("cancel.json") for n in events(site))
    got = records.signal_requests(str(site), os.getuid(), "105", set())
    assert [r["sig"] for _, r in got] == [15, 2, 10, 12, 1, 34]  # oldest first
    r = got[0][1]
    assert (r["batch"], r["full"], r["owner"], r["uid"]) == (False, False, "root", os.getuid())
    raw = json.loads((site / "users" / str(os.getuid()) / "signals" / names[0]).read_text())
    assert set(raw) == {"t", "sig", "batch", "full", "owner", "uid", "user", "start"} and raw["t"] == NOW
    assert raw["start"] == datetime(2026, 11, 30, 9, 10, 19).timestamp()  # Grid Engine's start of job 105
    mode = (site / "users" / str(os.getuid()) / "signals").stat().st_mode & 0o777
    assert mode == 0o755 and ((site / "users" / str(os.getuid()) / "signals" / names[0]).stat().st_mode & 0o777) == 0o644


def test_batch_and_full_flags_travel_and_b_is_ignored_with_f(capsys, site):
    """scancel.1: -b signals only the batch shell; -f the batch shell and its children; -b with -f
    is -f (slurmstepd's _handle_signal_container: killpg for KILL_FULL_JOB, kill otherwise)."""
    shim_job(site)
    assert scancel(capsys, "-b", "-s", "USR1", "105")[:3] == (0, "", "")
    assert scancel(capsys, "--full", "-s", "USR2", "105")[:3] == (0, "", "")
    assert scancel(capsys, "-b", "-f", "-s", "TERM", "105")[:3] == (0, "", "")
    got = [(r["sig"], r["batch"], r["full"]) for _, r in records.signal_requests(str(site), None, "105", set())]
    assert got == [(10, True, False), (12, False, True), (15, False, True)]


def test_stop_and_cont_of_a_shim_job_are_requests_grid_engine_only_without_a_wrapper(capsys, site):
    """Slurm 22.05 signals the steps with STOP/TSTP/CONT (the batch shell keeps running), so a
    shim job gets a request, with or without -b; Grid Engine's qmod (the whole job) is left for
    jobs not submitted through the shim (test_signals). More in test_stopped.py."""
    shim_job(site)
    assert scancel(capsys, "-s", "STOP", "105")[:4] == (0, "", "", [])
    rc, out, err, calls = scancel(capsys, "-b", "-s", "STOP", "105")
    assert (rc, calls) == (0, []) and len(signal_files(site)) == 2
    assert "105.x.stop.json" in events(site) and "105.x.suspend.json" not in events(site)


def test_verbose_says_signal_n_to_kind_of_job(capsys, site):
    """scancel.c's verbose(): "Signal %u to %sjob %s" with "batch " or "full "."""
    shim_job(site)
    assert scancel(capsys, "-v", "-s", "USR1", "105")[2] == "scancel: Signal 10 to job 105\n"
    assert scancel(capsys, "-v", "-b", "-s", "USR1", "105")[2] == "scancel: Signal 10 to batch job 105\n"
    assert scancel(capsys, "-v", "-f", "-s", "2", "105")[2] == "scancel: Signal 2 to full job 105\n"


def test_array_tasks_get_one_request_each(capsys, site):
    state.record_submit(str(site), 110, {"name": "fx_arr", "user": "root"})
    rc, out, err, calls = scancel(capsys, "-s", "USR1", "110_1", "110_2", monkey_sleep=None)
    assert (rc, err, calls) == (0, "", [])
    assert sorted(n.split(".")[0] for n in signal_files(site)) == ["110_1", "110_2"]


def test_pending_job_is_retried_then_cannot_be_altered(capsys, site, monkeypatch):
    """slurmctld's job_signal: a signal other than KILL to a job that is not running is
    ESLURM_TRANSITION_STATE_NO_UPDATE; scancel.c's _cancel_job_id retries MAX_CANCEL_RETRY (10)
    times, sleeping 5+i s ("Job is in transitional state, retrying" with -v), then prints "Kill job
    error on job id N: Job can not be altered now, try again later" and exits with the error code
    (2020 & 0xFF = 228). Nothing is written."""
    shim_job(site, 112)
    slept: list[float] = []
    from shim.operations import cancel

    monkeypatch.setattr(cancel, "_sleep", slept.append)
    rc, out, err, calls = scancel(capsys, "-s", "USR1", "112")
    assert (rc, out, calls) == (228, "", [])
    assert err == "scancel: error: Kill job error on job id 112: Job can not be altered now, try again later\n"
    assert slept == [5 + i for i in range(10)]
    slept.clear()
    rc, out, err, calls = scancel(capsys, "-v", "-s", "USR1", "112")
    assert err.count("scancel: Job is in transitional state, retrying\n") == 10 and rc == 228
    assert err.startswith("scancel: Signal 10 to job 112\n")
    assert signal_files(site) == []
    # a suspended job is not running either (107 is suspended in the fixture)
    shim_job(site, 107)
    assert scancel(capsys, "-Q", "-s", "USR1", "107")[:3] == (228, "", "")


def test_batch_flag_on_a_job_without_a_batch_script(capsys, site):
    """job_signal: KILL_JOB_BATCH on a job without batch_flag (salloc, srun's own job) is
    ESLURM_JOB_SCRIPT_MISSING, "Job script not specified" (2009 & 0xFF = 217); -f sends nothing
    (slurmd's _kill_all_active_steps finds no batch step) and succeeds."""
    shim_job(site, interactive=True)
    rc, out, err, calls = scancel(capsys, "-b", "-s", "USR1", "105")
    assert (rc, err) == (217, "scancel: error: Kill job error on job id 105: Job script not specified\n")
    assert scancel(capsys, "-f", "-s", "USR1", "105")[:3] == (0, "", "") and signal_files(site) == []
    assert scancel(capsys, "-s", "USR1", "105")[:3] == (0, "", "") and len(signal_files(site)) == 1


def test_only_owner_or_root_may_signal(capsys, site, monkeypatch):
    """job_signal_id: ESLURM_ACCESS_DENIED unless the caller owns the job (or is an operator):
    Access/permission denied, exit 210, checked before the job's state; nothing is written."""
    shim_job(site)
    monkeypatch.setattr(os, "getuid", lambda: 4321)  # a plain user; the fixture's jobs are root's
    for job in ("105", "112"):
        rc, out, err, calls = scancel(capsys, "-s", "USR1", job)
        assert (rc, out, calls) == (210, "", [])
        assert err == f"scancel: error: Kill job error on job id {job}: Access/permission denied\n"
    monkeypatch.undo()
    assert not (site / "users" / "4321").exists() and signal_files(site) == []


def test_unknown_and_ended_jobs_keep_their_messages(capsys, site):
    same_as("scancel_signal_unknown", *scancel(capsys, "-s", "USR1", "999999")[:3])
    same_as("scancel_signal_unknown", *scancel(capsys, "-b", "-s", "USR1", "999999")[:3])


def plant_signal(site, uid: int, name: str, content, kind: str = "file") -> None:
    from test_squeue import plant

    plant(site, "signals", name, json.dumps(content) if isinstance(content, dict) else content, kind=kind, uid=uid)


def test_requests_of_others_are_ignored(site):
    """Only the owner's directory, and root's naming the owner, speak to a job: a request in
    another user's directory (even naming the victim), one in the owner's naming someone else,
    root's naming nobody, and anything that is not a small regular file are not requests."""
    victim, other = 4001, 4002
    req = {"t": NOW, "sig": 10, "batch": True, "full": False}
    plant_signal(site, other, "7.1.00000000.json", {**req, "owner": victim})           # mallory's, naming the victim
    plant_signal(site, victim, "7.2.00000000.json", {**req, "owner": other})            # not the owner's job
    plant_signal(site, victim, "7.3.00000000.json", "x" * 5000)                          # too big
    plant_signal(site, victim, "7.4.00000000.json", "[1, 2]")                            # not an object
    plant_signal(site, victim, "7.5.00000000.json", {**req, "sig": 0})                   # no signal
    plant_signal(site, victim, "7.6.00000000.json", {**req, "sig": 65})                  # beyond SIGRTMAX
    plant_signal(site, victim, "7.7.00000000.json", {**req, "batch": "yes"})             # wrong type
    plant_signal(site, victim, "7.8.00000000.json", "", kind="fifo")
    plant_signal(site, victim, "7.9.00000000.json", str(site / "users" / str(victim) / "signals" / "7.12.00000000.json"),
                 kind="symlink")  # to the owner's own request, planted below
    plant_signal(site, victim, "8.1.00000000.json", req)                                 # another job's
    plant_signal(site, victim, "7.x.00000000.json", req)                                 # not a request name
    root_dir = site / "users" / "0" / "signals"
    root_dir.mkdir(parents=True)
    (root_dir / "7.10.00000000.json").write_text(json.dumps(req))                       # root's, naming nobody
    assert records.signal_requests(str(site), victim, "7", set()) == []
    (root_dir / "7.11.00000000.json").write_text(json.dumps({**req, "owner": victim}))  # root's, naming the owner
    plant_signal(site, victim, "7.12.00000000.json", {**req, "owner": victim})           # the owner's own
    got = records.signal_requests(str(site), victim, "7", set())
    assert [tag for tag, _ in got] == ["0/7.11.00000000.json", f"{victim}/7.12.00000000.json"]


def test_request_of_an_older_job_with_the_same_id_is_ignored(site):
    """A request left by a wrapper that died is not for a later job that Grid Engine gave the same
    id: its submission (sub) or start stamp is another job's."""
    victim = 4001
    plant_signal(site, victim, "7.1.00000000.json", {"t": NOW, "sig": 10, "sub": NOW - 86400})
    plant_signal(site, victim, "7.2.00000000.json", {"t": NOW, "sig": 12, "sub": NOW - 10})
    plant_signal(site, victim, "7.3.00000000.json", {"t": NOW, "sig": 14, "start": NOW - 86400})
    plant_signal(site, victim, "7.4.00000000.json", {"t": NOW, "sig": 15, "start": NOW - 5})
    got = records.signal_requests(str(site), victim, "7", set(), NOW, NOW)
    assert [r["sig"] for _, r in got] == [12, 15]


def test_a_flood_costs_bounded_work_per_look_and_each_is_read_once(site):
    victim = 4001
    for i in range(state.SIGNAL_BATCH + 10):
        plant_signal(site, victim, f"7.{i:05d}.00000000.json", {"t": NOW, "sig": 10})
    seen: set[str] = set()
    assert len(records.signal_requests(str(site), victim, "7", seen)) == state.SIGNAL_BATCH
    assert len(records.signal_requests(str(site), victim, "7", seen)) == 10
    assert records.signal_requests(str(site), victim, "7", seen) == []


def test_a_step_does_not_take_requests_older_than_itself(site):
    victim = 4001
    plant_signal(site, victim, "7.1.00000000.json", {"t": NOW, "sig": 10})
    seen = state.seen_signals(str(site), victim, "7")
    plant_signal(site, victim, "7.2.00000000.json", {"t": NOW, "sig": 12})
    assert [r["sig"] for _, r in records.signal_requests(str(site), victim, "7", seen)] == [12]


def test_the_wrapper_drops_its_requests_at_the_end(capsys, site):
    shim_job(site)
    scancel(capsys, "-s", "USR1", "105")
    state.record_submit(str(site), 1050, {"name": "x", "user": "root"})
    assert len(signal_files(site)) == 1
    state.drop_signals(str(site), "1050")
    assert len(signal_files(site)) == 1  # another job's stays
    state.drop_signals(str(site), "105")
    assert signal_files(site) == []
