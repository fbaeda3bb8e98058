"""Issue 29, "a big queue": ``scancel N`` and scontrol's job-control verbs make the named jobs'
records from one ``qstat -j <ids> -xml`` (gridengine/onejob.py, jobs.list_jobs' ``direct``), not
from their owner's whole listing, where that answer determines the records; the listing as
before where it does not (a task enrolled: running, suspended, in error, being deleted; an array;
an answer that does not read). ``squeue -j N`` and ``scontrol show job N``, which print the
priority and the reason, list as before, but for ``scontrol show job N`` of a job a hold list
holds (OCS 9: test_held_job_direct.py).

Exactness: for jobs captured both ways at the same moment (a job list row and a ``qstat -j``
element of the same job), the records the cancel and control code reads are equal between the
two paths, on SGE 8.1.9 and OCS 9.1.4 (fixtures/gridengine/sge-8.1.9/live-qstat-u-all-r-xml.mixed.xml
with live-qstat-j-xml.mixed.xml; fixtures/gridengine/ocs-9.1.4/qstat-r-all-users.xml with
qstat-j-held.xml, qstat-j.xml, qstat-j-array.xml: their READMEs say how they were captured)."""

from __future__ import annotations


import pytest

from conftest import FIXTURES
from listing_replay import ListingReplay
from shim import siteconf
from shim.__main__ import dispatch
from shim.gridengine import backends, onejob
from shim.operations import jobs
from shim_records import captured_site

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
OCS = FIXTURES / "gridengine" / "ocs-9.1.4"
WHOLE = ("qstat", "-u", "*", "-r", "-xml")
MINE = ("qstat", "-u", "root", "-r", "-xml")

# (listing, {ids asked: the qstat -j -xml answer}) per release, captured at one moment each
SGE_PAIR = (SGE / "live-qstat-u-all-r-xml.mixed.xml", SGE / "live-qstat-j-xml.mixed.xml")
OCS_DETAIL = {500018: OCS / "qstat-j.xml", 500019: OCS / "qstat-j-held.xml", 500020: OCS / "qstat-j-array.xml"}

# what scancel (operations/cancel.py) and scontrol's verbs (operations/control.py) read of a record
READ = ("job_id", "name", "user", "uid", "gid", "state", "partition", "queue", "num_cpus", "num_tasks", "nodes",
        "batch_host", "submit_time", "start_time", "time_limit", "gres", "licenses", "min_memory_mb",
        "mem_per_cpu", "array_task", "array_pending", "array_max_tasks", "is_array")
READ_EXTRA = ("submit_ts", "start_ts", "pending_indices", "predecessors", "ge_tasks", "ge_task", "ended",
              "stopped", "run_seconds")
READ_ROW = ("hard", "hard_queues", "pe", "pe_slots", "predecessors")


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    yield from captured_site(monkeypatch, tmp_path)


def backend(listing, details: dict[tuple[int, ...], str] | None = None, rc: int = 0) -> ListingReplay:
    """The recorded listing (and the narrower ones Grid Engine derives from it), and qstat -j
    -xml's recorded answer for the ids given."""
    b = ListingReplay()
    b.add(WHOLE[0], list(WHOLE[1:]), stdout=listing.read_text())
    for ids, text in (details or {}).items():
        b.add("qstat", ["-j", ",".join(map(str, ids)), "-xml"], stdout=text, rc=rc)
    b.add("qconf", ["-se", "global"], stdout=(SGE / "live-qconf-se-global.txt").read_text())
    for tool in ("qdel", "qhold", "qrls", "qmod"):
        b.add(tool, [], stdout="")
    return b


def seen(recs) -> list[tuple]:
    """The records as the cancel and control code read them."""
    out = []
    for r in recs:
        row = r.extra.get("ge_row") or {}
        out.append((tuple(getattr(r, f) for f in READ), tuple(r.extra.get(k) for k in READ_EXTRA),
                    tuple(row.get(k) or None for k in READ_ROW)))
    return out


def both(b, ids: set[int]):
    """list_jobs' records of ``ids`` the direct way and the listing's way, and the calls of each."""
    cfg = siteconf.get()
    b.calls.clear()
    fast = jobs.list_jobs(cfg, only=ids, reasons=False, quotas=False, ended=True, backend=b, direct=True)
    fast_calls = [c for c, _ in b.calls]
    b.calls.clear()
    slow = jobs.list_jobs(cfg, only=ids, reasons=False, quotas=False, ended=True, backend=b, direct=False)
    slow_calls = [c for c, _ in b.calls]
    return fast, fast_calls, slow, slow_calls


def detail_call(ids) -> tuple[str, ...]:
    return ("qstat", "-j", ",".join(map(str, sorted(ids))), "-xml")


# ---------------------------------------------------------------------------------------------
# the records are those of the listing


@pytest.mark.parametrize("ids", [{115}, {113}, {113, 115}])
def test_sge_pending_jobs_read_from_qstat_j_alone_are_the_listings_records(ids):
    """SGE 8.1.9: 115 waits (qw, -a an hour ahead), 113 waits for 105 (hqw: -hold_jid)."""
    listing, detail = SGE_PAIR
    b = backend(listing, {tuple(sorted(ids)): detail.read_text()})
    fast, fast_calls, slow, slow_calls = both(b, ids)
    assert fast_calls == [detail_call(ids)]  # one question, no listing
    assert MINE in slow_calls
    assert seen(fast.records) == seen(slow.records) and len(fast.records) == len(ids)
    assert fast.known == slow.known == ids
    assert [r.state for r in fast.records] == ["PENDING"] * len(ids)
    assert [r.ge_state for r in fast.records] == [r.ge_state for r in slow.records]  # (hqw of -hold_jid too)


def test_ocs_held_job_read_from_qstat_j_alone_is_the_listings_record():
    """OCS 9.1.4: 500019, held (-h: JB_ja_u_h_ids), -pe smp 2, h_rt and mem_free requested."""
    b = backend(OCS / "qstat-r-all-users.xml", {(500019,): OCS_DETAIL[500019].read_text()})
    fast, fast_calls, slow, slow_calls = both(b, {500019})
    assert fast_calls == [detail_call({500019})] and MINE in slow_calls
    assert seen(fast.records) == seen(slow.records)
    (r,) = fast.records
    assert (r.state, r.ge_state, r.reason, r.num_cpus, r.time_limit) == ("PENDING", "hqw", "JobHeldUser", 2, 10)
    assert (r.ge_state, r.reason) == (slow.records[0].ge_state, slow.records[0].reason)  # the hold list says it


def owners_listing(*users: str) -> tuple[str, ...]:
    return ("qstat", "-u", ",".join(users), "-r", "-xml")


@pytest.mark.parametrize("job,owner,why", [(105, "root", "running"), (106, "alice", "running, alice's"),
                                           (110, "root", "an array, two tasks running"),
                                           (114, "root", "Eqw: its task enrolled in error")])
def test_sge_jobs_with_a_task_enrolled_or_arrays_are_read_from_their_owners_listing(job, owner, why):
    """SGE 8.1.9's detail has no JAT_state, no granted queue, no hold lists: such jobs' records
    come from their owner's listing (whose: the detail says), the same as without ``direct``."""
    listing, detail = SGE_PAIR
    b = backend(listing, {(job,): detail.read_text()})
    fast, fast_calls, slow, slow_calls = both(b, {job})
    assert fast_calls == [detail_call({job}), owners_listing(owner)], why
    assert seen(fast.records) == seen(slow.records) and fast.records, why
    assert [(r.ge_state, r.reason) for r in fast.records] == [(r.ge_state, r.reason) for r in slow.records]


@pytest.mark.parametrize("job,owner", [(500018, "root"), (500020, "alice")])
def test_ocs_running_jobs_and_arrays_are_read_from_their_owners_listing(job, owner):
    b = backend(OCS / "qstat-r-all-users.xml", {(job,): OCS_DETAIL[job].read_text()})
    fast, fast_calls, slow, slow_calls = both(b, {job})
    assert fast_calls == [detail_call({job}), owners_listing(owner)]
    assert seen(fast.records) == seen(slow.records) and fast.records


def test_one_unreadable_job_among_the_named_lists_their_owners_jobs():
    listing, detail = SGE_PAIR
    b = backend(listing, {(105, 106, 115): detail.read_text()})
    fast, fast_calls, slow, slow_calls = both(b, {105, 106, 115})
    assert fast_calls == [detail_call({105, 106, 115}), owners_listing("alice", "root")]
    by_id = lambda recs: sorted(recs, key=lambda r: r.job_id)  # noqa: E731  (one listing, not two: jobs in its order)
    assert seen(by_id(fast.records)) == seen(by_id(slow.records)) and len(fast.records) == 3


def test_an_answer_that_does_not_account_for_every_id_lists_as_before():
    """SGE 8.1.9 leaves a missing id among found ones out (rc 0): not read; the listing as before."""
    listing, detail = SGE_PAIR
    b = backend(listing, {(111, 115): detail.read_text()})  # (111 waits: not in the detail recorded)
    fast, fast_calls, slow, slow_calls = both(b, {111, 115})
    assert fast_calls[0] == detail_call({111, 115}) and fast_calls[1:] == slow_calls
    assert seen(fast.records) == seen(slow.records) and len(fast.records) == 2


def test_a_job_grid_engine_does_not_know_is_unknown_as_in_the_listing():
    listing, _ = SGE_PAIR
    b = backend(listing, {(999999,): (SGE / "qstat-j-nonexistent-xml.xml").read_text()}, rc=1)
    fast, fast_calls, slow, slow_calls = both(b, {999999})
    assert fast_calls == [detail_call({999999})]
    assert fast.records == [] == slow.records and fast.known == slow.known == set()


# ---------------------------------------------------------------------------------------------
# the converter refuses what it cannot read whole


def test_the_converter_reads_only_whole_answers():
    text = (SGE / "live-qstat-j-xml.mixed.xml").read_text()
    assert onejob.rows(0, text, [115])[0]["state"] == "qw"
    assert onejob.rows(0, text, [115, 111]) is None  # 111 neither found nor named unknown
    assert onejob.rows(0, text[:-40], [115]) is None  # cut short: no document
    assert onejob.rows(0, text.replace("<messages>", "<other>").replace("</messages>", "</other>"), [115]) is None
    assert onejob.rows(2, text, [115]) is None  # qstat failed
    assert onejob.rows(0, "", [115]) is None
    gone = (SGE / "qstat-j-nonexistent-xml.xml").read_text()
    assert onejob.rows(1, gone, [999999]) == [] and onejob.rows(1, gone, [999999, 115]) is None
    assert onejob.rows(0, text.replace("<JB_type>64</JB_type>", "<JB_type>x</JB_type>"), [115]) is None
    held = (OCS / "qstat-j-held.xml").read_text()
    assert onejob.rows(0, held, [500019])[0]["state"] == "hqw"
    released = held.replace("JB_ja_u_h_ids", "JB_ja_n_h_ids")
    assert onejob.rows(0, released, [500019])[0]["state"] == "qw"
    # an OCS job whose id lists lack its task is no plain pending job
    assert onejob.rows(0, held.replace("<RN_min>1</RN_min>\n          <RN_max>1</RN_max>\n          <RN_step>1</RN_step>\n"
                                       "        </task_id_range>\n      </JB_ja_u_h_ids>",
                                       "<RN_min>2</RN_min>\n          <RN_max>2</RN_max>\n          <RN_step>1</RN_step>\n"
                                       "        </task_id_range>\n      </JB_ja_u_h_ids>"), [500019]) is None


# ---------------------------------------------------------------------------------------------
# which commands ask what


def run(capsys, b, cmd, *argv):
    backends.use(b)
    rc = dispatch(cmd, list(argv))
    out, err = capsys.readouterr()
    return (rc, out, err), [c for c, _ in b.calls]


def events(site) -> dict[str, str]:
    """The cancel events written (each once: the store hard-links them into time buckets), removed."""
    out = {p.name: p.read_text() for p in site.rglob("*.cancel.json")}
    for p in site.rglob("*.cancel.json"):
        p.unlink()
    return out


@pytest.mark.parametrize("argv", [["115"], ["113"], ["-v", "113", "115"], ["-t", "PD", "-n", "fx_dep", "113"],
                                  ["-p", "gpu", "-v", "115"]])
def test_scancel_of_waiting_jobs_asks_qstat_j_once_and_does_what_the_listing_did(capsys, monkeypatch, site, argv):
    listing, detail = SGE_PAIR
    ids = {int(a) for a in argv if a.isdigit()}
    fast, calls = run(capsys, backend(listing, {tuple(sorted(ids)): detail.read_text()}), "scancel", *argv)
    assert calls[0] == detail_call(ids) and all(c[0] != "qstat" for c in calls[1:]), calls
    made = events(site)
    monkeypatch.setattr(jobs, "DIRECT_COMMANDS", frozenset())  # as before: the owner's listing
    slow, slow_calls = run(capsys, backend(listing), "scancel", *argv)
    assert MINE in slow_calls and fast == slow
    assert [c for c in calls if c[0] != "qstat"] == [c for c in slow_calls if c[0] != "qstat"]
    assert made == events(site)


def test_scontrol_hold_and_release_of_a_waiting_job_ask_qstat_j_once(capsys):
    listing, detail = SGE_PAIR
    for verb, tool in (("hold", ("qhold", "-h", "o")), ("release", ("qrls", "-h", "uo")), ("uhold", ("qhold",))):
        out, calls = run(capsys, backend(listing, {(113,): detail.read_text()}), "scontrol", verb, "113")
        assert out[0] == 0 and calls == [detail_call({113}), (*tool, "113")], verb  # (root's: an operator hold)


def test_scontrol_suspend_of_a_waiting_job_says_it_is_pending_from_qstat_j(capsys):
    listing, detail = SGE_PAIR
    out, calls = run(capsys, backend(listing, {(115,): detail.read_text()}), "scontrol", "suspend", "115")
    assert out == (1, "", "Job is pending execution for job 115\n") and calls == [detail_call({115})]


def test_squeue_j_and_scontrol_show_job_still_list_a_job_no_hold_list_holds(capsys):
    """They print the priority and the reason, which qstat -j carries only for a held job (OCS 9's
    hold lists, and scontrol show job only: test_held_job_direct.py); 113 waits for 105
    (-hold_jid), on SGE 8.1.9: show job's detail, asked first, is not taken, and the owner's
    listing is read as before; squeue -j asks no detail."""
    listing, detail = SGE_PAIR
    out, calls = run(capsys, backend(listing, {(113,): detail.read_text()}), "squeue", "-j", "113")
    assert out[0] == 0 and calls[0] == MINE and detail_call({113}) not in calls  # (squeue -j: never the detail)
    out, calls = run(capsys, backend(listing, {(113,): detail.read_text()}), "scontrol", "show", "job", "113")
    assert out[0] == 0 and calls[:2] == [detail_call({113}), MINE] and "Priority=" in out[1]
    assert calls.count(detail_call({113})) == 1  # (the one detail serves the job's fields too)


def test_scancel_of_a_running_job_asks_qstat_j_then_lists_its_owners_jobs(capsys):
    listing, detail = SGE_PAIR
    out, calls = run(capsys, backend(listing, {(105,): detail.read_text()}), "scancel", "105")
    assert out == (0, "", "") and calls == [detail_call({105}), MINE, ("qdel", "105")]
    out, calls = run(capsys, backend(listing, {(106,): detail.read_text()}), "scancel", "106")  # alice's, by root
    assert out == (0, "", "") and calls == [detail_call({106}), owners_listing("alice"), ("qdel", "106")]


# ---------------------------------------------------------------------------------------------
# every state, captured both ways on each release (fixtures/gridengine/capture_onejob.py)


def captured(release: str) -> tuple[object, dict[int, str]]:
    """A release's onejob capture: its folder, and {job number: what it was} (onejob-INDEX.tsv)."""
    folder = FIXTURES / "gridengine" / release
    jobs_ = {}
    for line in (folder / "onejob-INDEX.tsv").read_text().splitlines():
        if line.startswith("# ") and "\t" in line:
            num, what = line[2:].split("\t", 1)
            jobs_[int(num)] = what
    return folder, jobs_


CAPTURES = [(rel, job, what) for rel in ("sge-8.1.9", "ocs-9.1.4") for job, what in captured(rel)[1].items()]


def capture_backend(folder) -> ListingReplay:
    """The capture's listing (all of its jobs are root's: ``-u root`` is the whole of it) and its
    detail, the answer to qstat -j about any of its jobs (the converter takes the asked ones only)."""
    b = ListingReplay()
    b.add(WHOLE[0], list(WHOLE[1:]), stdout=(folder / "onejob-qstat-u-root-r-xml.xml").read_text())
    b.answers_detail = (folder / "onejob-qstat-j-xml.xml").read_text()
    return b


@pytest.mark.parametrize("release,job,what", CAPTURES)
def test_every_captured_state_reads_as_the_listing_has_it(release, job, what):
    """Waiting and held jobs (no array) from qstat -j alone; running, suspended, Eqw, dr and the
    array from their owner's listing; the records the cancel and control code read are the
    listing's either way. The state letters and reasons too, but SGE 8.1.9's detail has no hold
    lists (nothing in it tells a held job: onejob-qstat-j-xml.xml): a job held by -h or qhold
    (user, operator, system) reads qw there, and the reason of a waiting job, which none of those
    callers reads or prints."""
    folder, _ = captured(release)
    b = capture_backend(folder)
    b.add("qstat", ["-j", str(job), "-xml"], stdout=b.answers_detail)
    fast, fast_calls, slow, slow_calls = both(b, {job})
    direct = what.startswith(("qw", "hqw"))
    assert fast_calls == ([detail_call({job})] if direct else [detail_call({job}), MINE]), what
    assert slow_calls[0] == MINE
    assert seen(fast.records) == seen(slow.records) and fast.records, what
    letters = [(r.ge_state, r.reason) for r in fast.records]
    if release == "sge-8.1.9" and what.startswith("hqw") and "hold_jid" not in what:
        assert [r.ge_state for r in fast.records] == ["qw"] and [r.ge_state for r in slow.records] == ["hqw"]
        assert [r.reason for r in slow.records] == ["JobHeldUser"] != [r.reason for r in fast.records]
    else:
        assert letters == [(r.ge_state, r.reason) for r in slow.records], what


def by_id(recs):
    return sorted(recs, key=lambda r: (r.job_id, r.array_task or 0))


@pytest.mark.parametrize("release", ["sge-8.1.9", "ocs-9.1.4"])
def test_all_the_captured_jobs_at_once(release):
    """All of them: an array among them, so their owner's listing; the waiting ones alone: qstat -j."""
    folder, jobs_ = captured(release)
    b = capture_backend(folder)
    pending = {j for j, what in jobs_.items() if what.startswith(("qw", "hqw"))}
    for ids in (jobs_, pending):
        b.add("qstat", ["-j", ",".join(map(str, sorted(ids))), "-xml"], stdout=b.answers_detail)
    fast, fast_calls, slow, slow_calls = both(b, set(jobs_))
    assert fast_calls == [detail_call(set(jobs_)), MINE]
    assert seen(fast.records) == seen(slow.records) and len(fast.records) > len(jobs_)  # (the array's rows)
    fast, fast_calls, slow, slow_calls = both(b, pending)
    assert fast_calls == [detail_call(pending)] and len(fast.records) == len(pending) == 6
    assert seen(by_id(fast.records)) == seen(by_id(slow.records))
