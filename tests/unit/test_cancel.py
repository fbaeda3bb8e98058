"""shim/cancel.py on its own: the notes ``told`` and ``deliver`` give the command to print (in
Slurm's order, each with its exit status and whether -Q hides it), and the filter rules scancel
shares with squeue (jobqueue.py) or keeps apart from them, as Slurm's scancel.c does. The
command's whole output is test_scancel.py's."""

from __future__ import annotations

import os

from listing_replay import ListingReplay
from shim.gridengine import backends
from shim.operations import cancel, jobqueue, jobs
from shim import siteconf
from shim.operations.cancel import Filters, Note
from test_scancel import MIXED, scancel, shim_job, site  # noqa: F401 - site: test_scancel's autouse fixture


def selected(*ids: int, filters: Filters | None = None):
    b = ListingReplay()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=MIXED.read_text())
    backends.use(b)
    cfg = siteconf.get()
    targets = [cancel.Target(str(i), i) for i in ids]
    return cfg, cancel.select(cfg, targets, filters or Filters(), tell_ended=True)


def test_retry_line_comes_out_before_each_sleep_and_the_error_after_the_last(site):  # noqa: F811
    """scancel.c's _cancel_job_id: verbose "Job is in transitional state, retrying", then sleep
    5+i, MAX_CANCEL_RETRY times; then the job's error, exit 228. The running job is signalled at
    once; the caller sees each note as it happens (the sleep is injected)."""
    shim_job(site, 105)
    shim_job(site, 112)  # pending in the fixture
    cfg, sel = selected(105, 112)
    log: list = []
    for note in cancel.deliver(cfg, sel.plans, 10, verbose=True, strict=True, sleep=lambda s: log.append(s)):
        log.append(note)
    retry = Note("scancel: Job is in transitional state, retrying", 0, quiet_hides=False)
    expected: list = []
    for i in range(cancel.MAX_CANCEL_RETRY):
        expected += [retry, 5 + i]
    expected.append(Note("scancel: error: Kill job error on job id 112: Job can not be altered now, try again later",
                         cancel.NOT_NOW_RC))
    assert log == expected


def test_access_denied_is_said_first_and_nothing_is_slept(site, monkeypatch):  # noqa: F811
    shim_job(site, 105)
    cfg, sel = selected(105, 112)
    monkeypatch.setattr(os, "getuid", lambda: 4321)
    slept: list = []
    notes = list(cancel.deliver(cfg, sel.plans, 10, sleep=slept.append))
    assert notes == [Note(f"scancel: error: Kill job error on job id {j}: Access/permission denied",
                          cancel.ACCESS_DENIED_RC) for j in (105, 112)]
    assert slept == []


def test_told_says_what_slurm_says_before_acting(site):  # noqa: F811
    cfg, sel = selected(105, 999999)
    notes = cancel.told(sel, 10, batch=True, full=False, verbose=True, strict=True)
    assert notes == [Note("scancel: Signal 10 to batch job 105", quiet_hides=False),
                     Note("scancel: Signal 10 to batch job 999999", quiet_hides=False),
                     Note("scancel: error: Kill job error on job id 999999: Invalid job id specified", 1)]
    # without -s/-b an unknown id is said with -v only, and fails nothing
    assert cancel.told(sel, None, batch=False, full=False, verbose=False, strict=False) == []
    assert cancel.told(sel, None, batch=False, full=False, verbose=True, strict=False)[-1] == \
        Note("scancel: error: Kill job error on job id 999999: Invalid job id specified", 0)


def test_reservation_filter_keeps_the_jobs_of_that_reservation(capsys, monkeypatch):
    """scancel.c's _filter_job_records: -R keeps the jobs whose reservation is the one named, as
    squeue's -R (jobqueue.in_reservation). A job's reservation is its Grid Engine advance
    reservation (jobs.fill_reservations); scancel -R used to keep no job at all."""
    def fill(recs, cfg, *a, **kw):
        for r in recs:
            r.extra["reservation"] = "w7" if r.job_id == 106 else None

    monkeypatch.setattr(jobs, "fill_reservations", fill)
    assert scancel(capsys, "-R", "w7")[3] == [["qdel", "106"]]
    assert scancel(capsys, "-R", "w7", "-u", "root")[3] == []
    assert scancel(capsys, "-R", "other")[3] == []
    assert scancel(capsys, "--wckey", "w7")[3] == []  # no job has a wckey


def test_localhost_is_this_host_for_squeue_only(monkeypatch):
    """squeue/opts.c _map_node_name maps -w localhost to this host; scancel/opt.c hands -w to
    hostset_intersects as given."""
    monkeypatch.setattr(os, "uname", lambda: os.uname_result(("Linux", "vm.example", "", "", "")))
    assert jobqueue.hosts_named("localhost,n[1-2]", localhost=True) == {"localhost", "vm", "n1", "n2"}
    assert jobqueue.hosts_named("localhost", localhost=False) == {"localhost"}


def test_account_and_qos_compare_lowercased_with_squeues_defaults(monkeypatch):
    """Slurm lowercases -A's and -q's value (scancel/opt.c, squeue/opts.c xstrtolower); a job that
    names no QOS has "normal". One rule for both commands: jobqueue.account_of, qos_of."""
    class Rec:
        extra: dict = {}
        state, user, name, partition, nodes = "RUNNING", "alice", "x", "debug", ["vm"]

    monkeypatch.setattr(jobs, "detail", lambda rec, cfg: type("D", (), {"account": "Physics", "qos": None})())
    assert (jobqueue.account_of(Rec(), None), jobqueue.qos_of(Rec(), None)) == ("physics", "normal")
    assert Filters(account="PHYSICS", qos="Normal").keep(Rec(), None)
    assert not Filters(account="chem").keep(Rec(), None)
    # one value, compared whole (scancel.c xstrcmp): no list, as squeue's -A and -q take
    assert not Filters(account="PHYSICS,chem").keep(Rec(), None)
    assert not Filters(qos="normal,high").keep(Rec(), None)


def test_verbose_filters_name_each_job_record_or_say_none_matched(capsys):
    """scancel.c without ids: -v names each job record the filters chose (_build_jobid_str: one
    line a running array task, N_k, and one its pending tasks, N_[a-b]), and when they chose none says so with the filters given, in
    _filter_job_records' order, -A lowercased (exit status 0; -Q hides it). It said nothing."""
    rc, _out, err, calls = scancel(capsys, "-v", "-n", "fx_arr")
    assert (rc, calls) == (0, [["qdel", "110"]])
    assert err.splitlines() == ["scancel: Terminating job 110_1", "scancel: Terminating job 110_2",
                                "scancel: Terminating job 110_[3-5]"]  # (its pending tasks: one record)
    rc, _out, err, calls = scancel(capsys, "-v", "-n", "nosuch", "-A", "PHYS", "-u", "root", "-t", "PD")
    assert (rc, calls) == (0, [])
    assert err == ("scancel: error: No active jobs match ALL job filters, including: "
                   "account=phys job_name=nosuch state=PENDING user_name=root \n")
    assert scancel(capsys, "-v", "-Q", "-n", "nosuch")[2] == ""
    assert scancel(capsys, "-n", "nosuch")[2] == ""  # without -v: nothing
    assert cancel._record_label(jobs.JobRecord(job_id=7, extra={"pending_indices": [1, 2, 3, 7]})) == "7_[1-3,7]"
