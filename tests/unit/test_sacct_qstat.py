"""sacct's live part against a stand-in qstat (a script in the site's bin_dir): which qstat calls a
question costs, and that what Grid Engine still runs or holds is shown.

A finished job needs no qstat; an array that sbatch did not submit (its size is only in qmaster)
or an id nothing here knows is asked about alone (``qstat -j``, started while the accounting file
is read), and only if Grid Engine still has it is the queue listed. A question over a time window
lists the queue, started before the file is read."""

from __future__ import annotations

import time

import pytest

from conftest import FIXTURES
from shim.gridengine import backends
from shim import siteconf
from shim.store import state as shim_state
from shim.cli import sacct as cli
from test_sacct import acct_line

NOW = time.time()
MIXED = (FIXTURES / "gridengine" / "sge-8.1.9" / "live-qstat-u-all-r-xml.mixed.xml").read_text()
EMPTY = (FIXTURES / "gridengine" / "sge-8.1.9" / "live-qstat-u-all-r-xml.empty.xml").read_text()

QSTAT = """#!/bin/sh
d='{d}'
echo "$*" >> "$d/calls"
[ -e "$d/hang" ] && sleep 10
if [ -e "$d/down" ]; then
  echo "error: commlib error: got select error (Connection refused)" >&2
  echo "unable to send message to qmaster using port 6444 on host \\"vm\\": got send error" >&2
  exit 1
fi
if [ "$1" = "-j" ]; then
  found=""
  for id in $(echo "$2" | tr ',' ' '); do
    if grep -qx "$id" "$d/live_ids" 2>/dev/null; then
      echo "=============================================================="
      echo "job_number:                 $id"
      found=1
    fi
  done
  if [ -z "$found" ]; then
    echo "Following jobs do not exist: " >&2
    echo "$2" >&2
    exit 1
  fi
  exit 0
fi
cat "$d/listing.xml"
"""


@pytest.fixture
def ge(tmp_path, monkeypatch):
    """A site whose qstat is the stand-in; returns a helper object."""
    conf_text = (FIXTURES / "site" / "config.toml").read_text().replace(
        "/tmp/slurm-shim-unit-state", str(tmp_path / "state"))
    conf_text = conf_text.replace('[gridengine]\n', f'[gridengine]\nbin_dir = "{tmp_path / "bin"}"\ntimeout = 2\n', 1)
    (tmp_path / "config.toml").write_text(conf_text)
    monkeypatch.setenv("SLURM_SHIM_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert shim_state.make_layout(str(tmp_path / "state")) == []  # as cluster up does
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("SACCT_FORMAT", raising=False)
    time.tzset()
    siteconf.reset()
    (tmp_path / "bin").mkdir()
    q = tmp_path / "bin" / "qstat"
    q.write_text(QSTAT.format(d=tmp_path))
    q.chmod(0o755)
    (tmp_path / "listing.xml").write_text(EMPTY)
    acct = tmp_path / "accounting"
    acct.write_text("# Version: 8.1.9\n")
    monkeypatch.setenv("SLURM_SHIM_ACCOUNTING", str(acct))
    assert backends._override is None  # nothing replaced: the real qstat transport is tested

    class GE:
        dir = tmp_path
        state = tmp_path / "state"

        def calls(self) -> list[str]:
            p = tmp_path / "calls"
            return p.read_text().splitlines() if p.exists() else []

        def live(self, *ids: int) -> None:
            (tmp_path / "live_ids").write_text("".join(f"{i}\n" for i in ids))

        def listing(self, xml: str) -> None:
            (tmp_path / "listing.xml").write_text(xml)

        def account(self, *lines: str) -> None:
            with open(acct, "a") as f:
                f.writelines(lines)

        def end(self, job: int, task: int | None = None, **kw) -> None:
            """The job wrapper's end event (the tests run as root: root's own directory)."""
            data = {"t": NOW - 80, "exit": 0, "signal": 0, "state": "COMPLETED", "node": "vm", "start": NOW - 90, **kw}
            assert shim_state.write_own(str(self.state), "events", f"{job}.{'x' if task is None else task}.end.json",
                                        data)

        def submit(self, job: int, **kw) -> None:
            rec = {"name": "x", "partition": "debug", "ntasks": 1, "cpus_per_task": 1, "nodes": 1,
                   "user": "root", "uid": 0, "submit_time": NOW - 100, **kw}
            assert shim_state.write_own(str(self.state), "jobs", f"{job}.json", rec)

    yield GE()
    siteconf.reset()
    time.tzset()


def unanswered(ge, capsys, *argv: str) -> list[str]:
    """sacct's rows while every qstat hangs: a question that needs no qstat answer is not held up
    (what it may have started on the chance is stopped), and nothing is reported."""
    (ge.dir / "hang").write_text("")
    rows, err = sacct(capsys, *argv)
    assert err == ""  # (a wait for the hung qstat would end in its timeout's error)
    (ge.dir / "hang").unlink()
    return rows


def sacct(capsys, *argv: str) -> tuple[list[str], str]:
    assert cli.main(["-n", "-P", "-o", "JobID,State", *argv]) == 0
    out = capsys.readouterr()
    return out.out.splitlines(), out.err


def ended(job: int, task: int = 0, **kw) -> str:
    return acct_line(job, "arr", submit=int(NOW) - 100, start=int(NOW) - 90, end=int(NOW) - 80, task=task, **kw)


def test_an_ended_sbatch_job_needs_no_qstat(ge, capsys):
    ge.submit(136)
    ge.account(ended(136))
    ge.end(136)
    assert unanswered(ge, capsys, "-j", "136") == ["136|COMPLETED", "136.batch|COMPLETED"]
    assert ge.calls() == []


def test_an_ended_sbatch_array_needs_no_qstat_but_an_unfinished_one_lists_the_queue(ge, capsys):
    ge.submit(140, array=[1, 2])
    ge.account(ended(140, 1), ended(140, 2))
    ge.end(140, 1)
    ge.end(140, 2)
    ge.submit(141, array=[1, 2])
    ge.account(ended(141, 1))
    ge.end(141, 1)
    assert unanswered(ge, capsys, "-X", "-j", "140") == ["140_1|COMPLETED", "140_2|COMPLETED"]
    assert ge.calls() == []
    assert sacct(capsys, "-X", "-j", "141")[0] == ["141_1|COMPLETED"]
    assert ge.calls() == ["-u * -r -xml"]


def test_a_running_sbatch_job_lists_the_queue_while_the_file_is_read(ge, capsys):
    """No end event yet: the listing is started at once, and asked for once."""
    ge.submit(105)
    ge.listing(MIXED)
    assert sacct(capsys, "-X", "-j", "105")[0] == ["105|RUNNING"]
    assert ge.calls() == ["-u * -r -xml"]


def test_an_sbatch_job_ended_without_an_end_event_needs_no_qstat_answer(ge, capsys):
    """(The wrapper killed with the job.) The listing started on the chance that it still runs is
    stopped: the record in the file settles it."""
    ge.submit(137)
    ge.account(ended(137, failed=100, status=137))
    ge.listing(MIXED)
    assert unanswered(ge, capsys, "-X", "-j", "137") == ["137|CANCELLED"]


def test_an_ended_grid_engine_job_needs_no_qstat(ge, capsys):
    ge.account(ended(150))
    assert unanswered(ge, capsys, "-X", "-j", "150") == ["150|COMPLETED"]


def test_a_grid_engine_array_is_asked_about_alone(ge, capsys):
    """Its tasks in the file may not be all of them: qstat -j says whether qmaster still has it."""
    ge.account(ended(119, 1), ended(119, 2))
    assert sacct(capsys, "-X", "-j", "119")[0] == ["119_1|COMPLETED", "119_2|COMPLETED"]
    assert ge.calls() == ["-j 119"]


def test_a_grid_engine_array_with_tasks_left_shows_them(ge, capsys):
    ge.account(ended(119, 5))
    ge.live(119)
    ge.listing(MIXED)
    rows, _ = sacct(capsys, "-X", "-j", "119")
    assert ge.calls() == ["-j 119", "-u * -r -xml"]
    assert rows[0].startswith("119_[1,3-4]|PENDING")
    assert "119_2|RUNNING" in rows and "119_5|COMPLETED" in rows


def test_an_unknown_id_is_asked_about_alone(ge, capsys):
    assert sacct(capsys, "-j", "4242")[0] == []
    assert ge.calls() == ["-j 4242"]
    ge.live(105)
    ge.listing(MIXED)
    assert sacct(capsys, "-X", "-j", "105")[0] == ["105|RUNNING"]
    assert ge.calls() == ["-j 4242", "-j 105", "-u * -r -xml"]


def test_a_rescheduled_job_may_run_again(ge, capsys):
    ge.submit(160)
    ge.account(ended(160, failed=25, status=137))
    sacct(capsys, "-X", "-j", "160")
    assert ge.calls() == ["-u * -r -xml"]


def test_a_time_window_lists_the_queue_once(ge, capsys):
    ge.account(ended(170))
    ge.listing(MIXED)
    rows, _ = sacct(capsys, "-X", "-a", "-S", "2000-01-01", "-E", "now")
    assert ge.calls() == ["-u * -r -xml"]
    assert "170|COMPLETED" in rows and "111|PENDING" in rows


def test_ended_states_only_need_no_qstat(ge, capsys):
    ge.account(ended(171))
    assert unanswered(ge, capsys, "-X", "-a", "-s", "CD", "-S", "2000-01-01", "-E", "now") == ["171|COMPLETED"]
    assert ge.calls() == []


def test_qmaster_down_shows_the_file_and_warns(ge, capsys):
    ge.account(ended(119, 1))
    (ge.dir / "down").write_text("")
    rows, err = sacct(capsys, "-X", "-j", "119")
    assert rows == ["119_1|COMPLETED"]
    assert err.startswith("slurm_load_jobs error: Unable to contact slurm controller (connect failure): ")
    assert ge.calls() == ["-j 119", "-u * -r -xml"]


def test_a_hung_qstat_is_given_up_after_the_timeout(ge, capsys):
    ge.account(ended(119, 1))
    (ge.dir / "hang").write_text("")
    rows, err = sacct(capsys, "-X", "-j", "119")
    assert rows == ["119_1|COMPLETED"]
    assert err == ("slurm_load_jobs error: Unable to contact slurm controller "
                   f"({ge.dir / 'bin' / 'qstat'}: no answer within 2 s)\n")


def test_probe_answers():
    from shim.gridengine.ops import parse_found_jobs

    assert parse_found_jobs(1, "", "Following jobs do not exist: \n3\n") == set()
    assert parse_found_jobs(0, "=====\njob_number:                 7\nexec_file: x\n", "") == {7}
    assert parse_found_jobs(0, "job_number:                 7\n=====\njob_number:  12 \n", "") == {7, 12}
    assert parse_found_jobs(1, "", "error: commlib error: got select error") is None
    assert parse_found_jobs(0, "", "") is None


def test_a_record_of_an_older_job_with_the_same_number_does_not_end_sbatchs_job(ge, capsys):
    """Grid Engine reinstalled, numbers reused: sbatch's job 180 is not the one the file has."""
    ge.submit(180)
    old = int(NOW) - 10 * 86400
    ge.account(acct_line(180, "old", submit=old, start=old + 10, end=old + 20))
    ge.listing(EMPTY)
    assert sacct(capsys, "-X", "-j", "180")[0] == ["180|COMPLETED"]
    assert ge.calls() == ["-u * -r -xml"]


def test_a_hung_listing_is_given_up_after_the_timeout(ge, capsys):
    ge.account(ended(172))
    (ge.dir / "hang").write_text("")
    rows, err = sacct(capsys, "-X", "-a", "-S", "2000-01-01", "-E", "now")
    assert rows == ["172|COMPLETED"]
    assert err == ("slurm_load_jobs error: Unable to contact slurm controller "
                   f"({ge.dir / 'bin' / 'qstat'}: no answer within 2 s)\n")
    assert ge.calls() == ["-u * -r -xml"]
