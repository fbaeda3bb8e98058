"""What the releases do differently at submission (issue 30, releases.py's rules): 24.11 and
26.05 refuse afterok/afternotok on a job the controller does not know, where 22.05 took it; each
compared with the bytes that real release printed (fixtures/slurm-*/cases.json)."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, use_site_config, with_release
from shim import siteconf
from shim.__main__ import dispatch
from shim.errors import ShimError
from shim.gridengine import backends
from shim.gridengine.replay import ReplayBackend
from shim.operations import submit
from shim.slurm import releases

NAMES = ("22.05", "24.11", "26.05")
NOT_THERE = "Following jobs do not exist: \n999999\n"  # qstat -j's answer for an id it lacks


def cases(release: str) -> dict:
    return json.loads((FIXTURES / f"slurm-{release}" / "cases.json").read_text())


@pytest.fixture
def site(monkeypatch, tmp_path):
    """set(release): the unit-test site config with ``[slurm] release``; a backend that knows job
    4242 alone (``site.backend``: its calls)."""
    use_site_config(monkeypatch, tmp_path)
    conf = tmp_path / "config.toml"
    base = conf.read_text()
    backend = ReplayBackend()
    backend.add("qstat", ["-j", "999999"], rc=1, stderr=NOT_THERE)
    backend.add("qstat", ["-j", "4242"], stdout="job_number:                 4242\nowner: root\n")
    backend.add("qstat", ["-j", "4242,999999"], stdout="job_number:                 4242\nowner: root\n")

    def set_release(name: str) -> None:
        conf.write_text(with_release(base, name))
        siteconf.reset()
        backends.use(backend)

    set_release.backend = backend
    yield set_release
    siteconf.reset()
    backends.use(None)


def test_only_the_newer_releases_follow_the_rule():
    assert [releases.get(n).has(releases.KNOWN_DEPENDENCY) for n in NAMES] == [False, True, True]
    with pytest.raises(ValueError):
        releases.Release("x", "x", rules=("no-such-rule",))


@pytest.mark.parametrize("name", ["24.11", "26.05"])
def test_sbatch_refuses_afterok_on_an_unknown_job_as_the_release(site, capsys, tmp_path, monkeypatch, name):
    """``sbatch --dependency=afterok:999999 job.sh``: the reference's message and exit code, and
    nothing handed to Grid Engine (one qstat -j asked whether the job exists)."""
    site(name)
    (tmp_path / "job.sh").write_text("#!/bin/sh\ntrue\n")
    monkeypatch.chdir(tmp_path)
    case = cases(name)["sbatch_accepted_bad_dependency"]
    argv = case["cmd"].split()
    rc = dispatch("sbatch", argv[1:])
    out, err = capsys.readouterr()
    assert (rc, out, err) == (case["rc"], case["stdout"], case["stderr"])
    assert [k for k, _ in site.backend.calls] == [("qstat", "-j", "999999")]


def test_22_05_asks_nothing_and_takes_it(site):
    """22.05 accepted the same line (the job ran at once): no question, no refusal."""
    site("22.05")
    assert cases("22.05")["sbatch_accepted_bad_dependency"]["rc"] == 0
    cfg = siteconf.get()
    submit.check_dependency("sbatch", [("afterok", ["999999"])], cfg)
    assert site.backend.calls == []


@pytest.mark.parametrize("prog, lead", [("sbatch", "Batch job submission failed"),
                                        ("srun", "Unable to allocate resources"),
                                        ("salloc", "Job submit/allocate failed")])
@pytest.mark.parametrize("checks", [[("afterok", ["999999"])], [("afternotok", ["4242", "999999_3"])]])
def test_each_command_refuses_in_its_words(site, prog, lead, checks):
    site("26.05")
    with pytest.raises(ShimError) as e:
        submit.check_dependency(prog, checks, siteconf.get())
    assert (e.value.lines, e.value.code) == ([f"{prog}: error: {lead}: Job dependency problem"], 1)


def test_a_job_grid_engine_has_is_known(site):
    site("24.11")
    submit.check_dependency("sbatch", [("afterok", ["4242"]), ("afternotok", ["4242_2"])], siteconf.get())
    assert [k for k, _ in site.backend.calls] == [("qstat", "-j", "4242")]


def test_a_job_that_ended_within_min_job_age_is_known(site, monkeypatch):
    """Grid Engine forgets an ended job at once; slurmctld keeps it for MinJobAge: the shim's end
    and cancel records of that age speak for it."""
    from shim.operations import jobs

    site("24.11")
    asked = []

    def recent(cfg, now, max_age=None, only=None, **kw):
        asked.append(set(only))
        return {999999: {0: {(None, "end")}}}

    monkeypatch.setattr(jobs, "recent_events", recent)
    submit.check_dependency("sbatch", [("afterok", ["999999"])], siteconf.get())
    assert asked == [{999999}]


def test_nothing_is_refused_when_grid_engine_cannot_tell(site):
    site("26.05")
    site.backend.answers.clear()
    site.backend.add("qstat", ["-j", "999999"], rc=2, stderr="error: commlib error: got select error\n")
    submit.check_dependency("sbatch", [("afterok", ["999999"])], siteconf.get())
    submit.check_dependency("sbatch", [("afterok", ["1"])], siteconf.get(), known=lambda ids: None)
    with pytest.raises(ShimError):
        submit.check_dependency("sbatch", [("afterok", ["1"])], siteconf.get(), known=lambda ids: set())


def test_afterany_and_singleton_are_never_checked(site):
    """Slurm checks afterok/afternotok only (they need the job's outcome); the translation's
    checks hold those two alone."""
    site("24.11")
    submit.check_dependency("sbatch", [], siteconf.get())
    submit.check_dependency("sbatch", None, siteconf.get())
    assert site.backend.calls == []


# --- srun --async / --parsable -------------------------------------------------------------------------

def srun_oracle() -> dict:
    return json.loads((FIXTURES / "slurm-26.05" / "oracle-srun.json").read_text())["cases"]


@pytest.mark.parametrize("case", ["parsable", "async", "async_parsable", "async_pty", "immediate_async",
                                  "in_job_parsable"])
def test_srun_async_and_parsable_as_26_05(site, capsys, monkeypatch, case):
    """Outside a job and in one: each check that fails, in 26.05's order and words, exit 1;
    nothing asked of Grid Engine."""
    site("26.05")
    c = srun_oracle()[case]
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_JOBID", raising=False)
    if case.startswith("in_job_"):
        monkeypatch.setenv("SLURM_JOB_ID", "17")
    rc = dispatch("srun", c["cmd"].split()[1:])
    out, err = capsys.readouterr()
    assert (rc, out, err) == (c["rc"], c["stdout"], c["stderr"])
    assert site.backend.calls == []


def test_srun_async_in_a_job_is_refused_as_its_fate(site, capsys, monkeypatch):
    """In an allocation --async passes 26.05's checks; the shim's steps run in the foreground, so
    the option's fate refuses it (26.05.5 made no step on the reference cluster either:
    oracle-srun.json in_job_async_parsable)."""
    site("26.05")
    monkeypatch.setenv("SLURM_JOB_ID", "17")
    rc = dispatch("srun", ["--async", "--parsable", "hostname"])
    out, err = capsys.readouterr()
    assert (rc, out) == (1, "") and err.startswith("srun: error: --async") and "foreground" in err
    assert srun_oracle()["in_job_async_parsable"]["rc"] == 1


@pytest.mark.parametrize("name", ["22.05", "24.11"])
@pytest.mark.parametrize("option", ["--async", "--parsable"])
def test_srun_async_and_parsable_are_unrecognized_before_26_05(site, capsys, name, option):
    site(name)
    asked = json.loads((FIXTURES / "slurm-24.11" / "oracle-options.json").read_text())["cases"]["srun"]
    rc = dispatch("srun", [option, "true"])
    out, err = capsys.readouterr()
    assert (rc, out, err) == (255, "", asked[option[2:]]["stderr"])


# --- -L a:1|b:1, any one of them (26.05) ---------------------------------------------------------------

def license_oracle(name: str) -> dict:
    return json.loads((FIXTURES / f"slurm-{name}" / "oracle-licenses.json").read_text())["cases"]


def _either_cases():
    """(release, case) for every '|' form asked of 24.11 and 26.05; 22.05 takes 24.11's forms."""
    out = []
    for name in ("22.05", "24.11", "26.05"):
        for case in license_oracle("26.05" if name == "26.05" else "24.11"):
            if case.startswith(("sbatch_L_", "srun_L_", "salloc_L_")):
                out.append((name, case))
    return out


@pytest.mark.parametrize("name, case", _either_cases())
def test_either_license_as_each_release(site, capsys, monkeypatch, tmp_path, name, case):
    """Every form: 22.05 and 24.11 refuse each (22.05.8's slurmctld reads ``1|matlab:2`` as a
    count that is not a number, and a name with '|' as a license it does not have: the same
    "Invalid license specification" as its captured sbatch_err_unknown_license); 26.05 refuses an
    alternative that is no license or above its total (matlab:5 of 3) and '|' with ',', and takes
    the rest."""
    from shim.operations import submit as ops

    site(name)
    c = license_oracle("26.05" if name == "26.05" else "24.11")[case]
    if name == "22.05":
        assert cases("22.05")["sbatch_err_unknown_license"]["stderr"].endswith(": Invalid license specification\n")
    prog = c["cmd"].split()[0]
    monkeypatch.setattr(ops, "license_seats", lambda cfg, names: ({"matlab": 3}, {"matlab": 3}))  # all free
    monkeypatch.chdir(tmp_path)
    if c["rc"] == 0:  # taken: the translation asks Grid Engine for one of the alternatives
        o, sub, _cfg = ops.batch(["-H", "-L", c["licenses"], "--wrap", "true"], {}, cwd=str(tmp_path))
        resources = sub.argv[sub.argv.index("-l") + 1].split(",")
        assert [r for r in resources if r.startswith("matlab=")] == [f"matlab={c['licenses'].split('|')[0].partition(':')[2] or 1}"]
        assert sub.record.licenses == c["licenses"]  # Licenses=, %W and SLURM_JOB_LICENSES: as written
        return
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    argv = [prog, "-L", c["licenses"], *(["--wrap", "true"] if prog == "sbatch" else ["true"])]
    rc = dispatch(prog, argv[1:])
    out, err = capsys.readouterr()
    assert (rc, out, err) == (c["rc"], c["stdout"], c["stderr"])


@pytest.mark.parametrize("free, chosen", [
    ({"a": 1, "b": 5}, ("a", 1)),  # the first has its seats free
    ({"a": 0, "b": 5}, ("b", 2)),  # the first has none: the next with enough
    ({"a": 0, "b": 1}, ("a", 1)),  # none has enough: the first
    ({}, ("a", 1)),  # Grid Engine did not say: the first
    ({"a": None, "b": 2}, ("b", 2)),
])
def test_either_license_picks_the_first_with_free_seats_else_the_first(free, chosen):
    from shim.slurm.options.values import either_license

    assert either_license([("a", 1), ("b", 2)], free) == chosen


def test_the_free_seats_are_the_total_less_the_running_jobs(site, monkeypatch):
    """license_free: the global host's complex_values less what Grid Engine's running jobs hold
    (pending jobs hold nothing); {} when Grid Engine cannot say."""
    from shim.operations import jobs
    from shim.operations import submit as ops
    from shim.slurm.model import JobRecord

    site("26.05")
    site.backend.add("qconf", ["-se", "global"], stdout="hostname global\ncomplex_values matlab=3,anthropic_api=10\n")
    running = [JobRecord(1, state="RUNNING", licenses="matlab:2"), JobRecord(2, state="PENDING", licenses="matlab:1"),
               JobRecord(3, state="RUNNING", licenses="anthropic_api:4,matlab:1")]
    monkeypatch.setattr(jobs, "list_jobs", lambda cfg, **kw: jobs.JobList(running, {1, 2, 3}))
    assert ops.license_free(siteconf.get(), ["matlab", "anthropic_api", "nolic"]) == {"matlab": 0, "anthropic_api": 6}
    assert ops.license_seats(siteconf.get(), ["matlab"]) == ({"matlab": 0}, {"matlab": 3})

    def fails(cfg, **kw):
        raise OSError("qstat")

    monkeypatch.setattr(jobs, "list_jobs", fails)
    assert ops.license_free(siteconf.get(), ["matlab"]) == {}
