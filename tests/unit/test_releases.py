"""The Slurm release a site comes from (issue 30, releases.py): ``[slurm] release`` in the site
config, every command's --version, the job's environment and squeue's newer options, each
compared with what that real release printed (fixtures/slurm-22.05, slurm-24.11, slurm-26.05)."""

from __future__ import annotations

import json
import re

import pytest

from conftest import FIXTURES, release_setter, use_site_config
from shim.gridengine import backends
from shim import config, siteconf
from shim.slurm import releases
from shim.__main__ import dispatch
from shim.gridengine.replay import ReplayBackend
from shim.errors import ShimError

NAMES = ("22.05", "24.11", "26.05")


def cases(release: str) -> dict:
    return json.loads((FIXTURES / f"slurm-{release}" / "cases.json").read_text())


def oracle(release: str) -> dict:
    return json.loads((FIXTURES / f"slurm-{release}" / "oracle-squeue.json").read_text())["cases"]


@pytest.fixture
def site(monkeypatch, tmp_path):
    """set(release): the unit-test site config with ``[slurm] release`` (None: no such key)."""
    state_dir = use_site_config(monkeypatch, tmp_path)
    conf = tmp_path / "config.toml"

    set_release = release_setter(conf)

    set_release.state_dir = state_dir
    yield set_release
    siteconf.reset()
    backends.use(None)


def run(capsys, cmd: str, *argv: str) -> tuple[int, str, str]:
    backends.use(ReplayBackend())  # no answers: a command that asked Grid Engine would fail
    rc = dispatch(cmd, list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# --- the key -------------------------------------------------------------------------------------

def test_the_key_names_one_of_three_releases_and_defaults_to_the_newest():
    assert config.parse("", "c.toml").slurm.release == releases.DEFAULT == NAMES[-1] == "26.05"
    for name in NAMES:
        assert config.parse(f'[slurm]\nrelease = "{name}"\n', "c.toml").slurm.release == name


@pytest.mark.parametrize("text", ['"23.02"', '"24.11.5"', "24.11", '"latest"', '""'])
def test_any_other_release_is_a_config_error_that_says_the_rule(text):
    with pytest.raises(ShimError) as e:
        config.parse(f"[slurm]\nrelease = {text}\n", "c.toml")
    (line,) = e.value.lines
    assert line.startswith("slurm-shim: error: c.toml: slurm.release: ")
    assert "22.05, 24.11 or 26.05" in line and "23.02 and 23.11 are 22.05" in line


def test_an_unknown_key_in_the_section_is_refused():
    with pytest.raises(ShimError) as e:
        config.parse('[slurm]\nrelaese = "24.11"\n', "c.toml")
    assert e.value.lines == ["slurm-shim: error: c.toml: slurm.relaese: unknown key"]


@pytest.mark.parametrize("name", [None, *NAMES])
def test_the_configured_release_is_current(site, name):
    site(name)
    assert releases.current() is releases.get(name or "26.05")


def test_the_tables_vary_only_what_they_name():
    """A variable or option no release names is every release's; each named one is some release's
    and not another's."""
    r22, r24, r26 = (releases.get(n) for n in NAMES)
    assert r22.sets("SLURM_JOB_ID") and r24.sets("SLURM_JOB_ID") and r26.sets("SLURM_JOB_ID")
    assert r22.sets("SLURM_NODE_ALIASES") and not r24.sets("SLURM_NODE_ALIASES")
    assert not r22.sets("SLURM_JOB_END_TIME") and r24.sets("SLURM_JOB_END_TIME") and r26.sets("SLURM_JOB_END_TIME")
    assert not r24.sets("SLURM_JOB_SLUID") and r26.sets("SLURM_JOB_SLUID")
    assert r22.knows("squeue", "long") and r26.knows("squeue", "long")
    assert not r22.knows("squeue", "only-job-state") and r24.knows("squeue", "only-job-state")
    assert r22.knows("squeue", "array-unique") and not r24.knows("squeue", "array-unique")
    for var in releases.VARYING_ENV:
        assert len({r.sets(var) for r in (r22, r24, r26)}) == 2, var


# --- --version -----------------------------------------------------------------------------------

VERSION_CASES = ("sacct", "salloc", "sbatch", "scancel", "scontrol", "sinfo", "squeue", "srun")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("cmd", VERSION_CASES)
def test_every_commands_version_is_the_releases(site, capsys, name, cmd):
    site(name)
    case = cases(name)[f"version_{cmd}"]
    argv = case["cmd"].split()
    assert argv[0] == cmd
    assert run(capsys, cmd, *argv[1:]) == (case["rc"], case["stdout"], case["stderr"])


@pytest.mark.parametrize("name", NAMES)
def test_scontrols_version_command_and_the_policy_commands_follow_it(site, capsys, name):
    site(name)
    version = releases.get(name).version
    assert run(capsys, "scontrol", "version") == (0, f"slurm-wlm {version}\n", "")
    assert run(capsys, "sprio", "--version") == (0, f"slurm {version}\n", "")
    assert run(capsys, "sshare", "--version") == (0, f"slurm {version}\n", "")


# --- squeue --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", ["help_squeue_helpformat", "usage_squeue", "squeue_t_bad", "squeue_bogus_option"])
def test_squeue_answers_as_each_release(site, capsys, name, case):
    """--helpformat (22.05: unrecognized), --usage, -t's list of states, a bad option."""
    site(name)
    c = cases(name)[case]
    assert run(capsys, "squeue", *c["cmd"].split()[1:]) == (c["rc"], c["stdout"], c["stderr"])


@pytest.mark.parametrize("name", ["24.11", "26.05"])
@pytest.mark.parametrize("case", ["helpformat", "helpFormat", "helpstate", "helpformat_then_bogus",
                                  "bogus_then_helpformat", "array_unique", "only_job_state_s"])
def test_squeues_newer_options_as_the_release_asked(site, capsys, name, case):
    site(name)
    c = oracle(name)[case]
    assert run(capsys, "squeue", *c["cmd"].split()[1:]) == (c["rc"], c["stdout"], c["stderr"])


@pytest.mark.parametrize("option", ["--only-job-state", "--helpformat", "--helpFormat", "--helpstate"])
def test_on_22_05_the_newer_options_are_unrecognized(site, capsys, option):
    site("22.05")
    bogus = cases("22.05")["squeue_bogus_option"]
    assert run(capsys, "squeue", option) == (1, "", bogus["stderr"].replace("--bogus", option))


def test_the_help_lists_what_the_release_has(site, capsys):
    site("22.05")
    old = run(capsys, "squeue", "--help")[1]
    site("26.05")
    new = run(capsys, "squeue", "--help")[1]
    assert "--only-job-state" not in old and "--helpstate" not in old and "--array-unique" in old
    assert "--only-job-state" in new and "--array-unique" not in new
    tail = cases("26.05")["help_squeue"]["stdout"]
    assert new.endswith(tail[tail.index("\nHelp options:\n"):])


# --- squeue --only-job-state on the queue each release was asked about ------------------------------

def _at(hms: str):
    from datetime import datetime

    return datetime.fromisoformat(f"2026-12-07T{hms}")


def queue_as_listed(name: str):
    """The shim's records of the queue of ``oracle-squeue.json``'s ``listing`` case (squeue -t all
    -o '%A %i %F %K %T %j %u %P %V %S'): an array's running tasks under the array's id, its
    pending remainder as one record, as qstat's listing gives them."""
    from shim.slurm.model import JobRecord

    out = []
    lines = oracle(name)["listing"]["stdout"].splitlines()[1:]
    for line in lines:
        _rid, shown, array_job, task, state, job_name, user, part, submit, start = line.split()
        rec = JobRecord(int(array_job), state=state, name=job_name, user=user, partition=part,
                        submit_time=_at(submit[11:]), start_time=_at(start[11:]) if state != "PENDING" else None)
        if "[" in shown:  # a pending remainder, e.g. 4_[1-3]
            rec.array_pending = shown[shown.index("[") + 1:-1]
            lo, _, hi = rec.array_pending.partition("-")
            rec.extra["pending_indices"] = list(range(int(lo), int(hi or lo) + 1))
        elif task != "N/A":
            rec.array_task = int(task)
        out.append(rec)
    return out


@pytest.fixture
def queue(site, monkeypatch):
    """set(release): squeue reads the queue that release was asked about (no qstat runs)."""
    from shim.operations import jobqueue, jobs
    from shim.gridengine import backends

    def set_queue(name: str) -> None:
        site(name)
        recs = queue_as_listed(name)
        monkeypatch.setattr(backends, "start_qstat", lambda *a, **k: None)
        monkeypatch.setattr(jobqueue, "listing", lambda cfg, qy, **k: jobs.JobList(
            [r for r in recs if qy.states is None or r.state in qy.states], {r.job_id for r in recs}))

    return set_queue


ONLY_STATE_CASES = ["only_job_state", "only_job_state_r", "only_job_state_t_all", "only_job_state_t_R",
                    "only_job_state_h", "only_job_state_u_root", "only_job_state_u_bob", "only_job_state_j_3",
                    "only_job_state_j_4_2", "only_job_state_j_unknown", "only_job_state_p_debug",
                    "only_job_state_n", "only_job_state_A", "only_job_state_q", "only_job_state_w",
                    "only_job_state_o", "only_job_state_s"]


@pytest.mark.parametrize("name", ["24.11", "26.05"])
@pytest.mark.parametrize("case", ONLY_STATE_CASES)
def test_only_job_state_prints_what_the_release_printed(queue, capsys, name, case):
    """Its rows (ids and states alone, newest record first within a state), the filters that keep
    nothing on 24.11 and the ones 26.05 refuses, on the queue the release was asked about."""
    queue(name)
    c = oracle(name)[case]
    argv = c["cmd"].replace(" bob", " daemon").split()[1:]  # (another user that exists on this machine)
    assert run(capsys, "squeue", *argv) == (c["rc"], c["stdout"], c["stderr"])


def test_only_job_state_takes_the_long_listings_date_line_on_24_11(queue, capsys):
    queue("24.11")
    rc, out, err = run(capsys, "squeue", "--only-job-state", "-l")
    date, rest = out.split("\n", 1)
    assert re.fullmatch(r"\w{3} \w{3} \d\d \d\d:\d\d:\d\d \d{4}", date)
    assert (rc, rest, err) == (0, oracle("24.11")["only_job_state"]["stdout"], "")


# --- the job's environment ------------------------------------------------------------------------

SUBMIT_ARGS = json.loads((FIXTURES / "slurm-24.11" / "env-sbatch-submit-args.json").read_text())
ENV_CASES = sorted(c for c in SUBMIT_ARGS["cases"] if c != "export_file")  # (its file is not in the capture)
SLUID = re.compile(r"s[0-9A-HJKMNP-TV-Z]{13}")


def reference_env(release: str, case: str) -> dict[str, str]:
    text = (FIXTURES / f"slurm-{release}" / f"env-sbatch-{case}.txt").read_text()
    body = text.split("== env\n", 1)[1].split("== end", 1)[0]
    return dict(line.split("=", 1) for line in body.splitlines() if "=" in line)


@pytest.mark.parametrize("name, case", [(n, c) for n in NAMES for c in ENV_CASES
                                        if (FIXTURES / f"slurm-{n}" / f"env-sbatch-{c}.txt").exists()])
def test_the_batch_environment_varies_as_each_release(site, tmp_path, monkeypatch, name, case):
    """Each reference option set through sbatch's translation to the job's payload, and the
    payload through jobenv.batch_env with that job's start: every variable some release varies is
    set exactly where that release set it, with its value (the SLUID in its form)."""
    from shim.operations import submit
    from shim.runtime import jobenv

    site(name)
    conf = tmp_path / "config.toml"
    conf.write_text('exclusive_complex = "exclusive"\n' + conf.read_text())  # (--exclusive's host complex)
    siteconf.reset()
    backends.use(ReplayBackend())
    ref = reference_env(name, case)
    argv = [a.replace("/srv/sref", str(tmp_path)) for a in SUBMIT_ARGS["cases"][case].split()]
    monkeypatch.setattr(submit, "check_hosts", lambda *a: None)
    _o, sub, _cfg = submit.batch([*argv, "--wrap", "true"], dict(kv.split("=", 1) for kv in SUBMIT_ARGS["submit_env"]),
                                 cwd=str(tmp_path))
    payload = {**sub.record.to_dict(), "sub": 1796612425.741}
    start = int(ref.get("SLURM_JOB_START_TIME", "1796612426"))
    ours = jobenv.batch_env(payload, job_id=int(ref["SLURM_JOB_ID"]), task=None,
                            hosts=[("vm", int(ref["SLURM_CPUS_ON_NODE"]))], this_host="vm", user="root", uid=0,
                            gid=0, start=start, release=releases.get(name))
    varying = sorted(releases.VARYING_ENV)
    assert [v for v in varying if v in ours] == [v for v in varying if v in ref]
    for var in varying:
        if var in ref and var != "SLURM_JOB_SLUID":
            assert (var, ours[var]) == (var, ref[var])
    if "SLURM_JOB_SLUID" in ref:
        assert SLUID.fullmatch(ours["SLURM_JOB_SLUID"]) and SLUID.fullmatch(ref["SLURM_JOB_SLUID"])


def test_a_jobs_sluid_is_its_own():
    """One per job and array task, sortable by submission, in Slurm's 's' + 13 base-32 digits."""
    a = releases.sluid("cluster", 1796612425741, 222, None)
    assert SLUID.fullmatch(a)
    others = {releases.sluid("cluster", 1796612425741, 223, None), releases.sluid("cluster", 1796612425741, 222, 1),
              releases.sluid("cluster", 1796612425741, 222, 2), releases.sluid("other", 1796612425741, 222, None)}
    assert a not in others and len(others) == 4
    assert releases.sluid("cluster", 1796612425741, 222, None) < releases.sluid("cluster", 1796612426000, 100, None)


@pytest.mark.parametrize("limit, end", [(None, 1796612426 + 365 * 86400), (-1, 1796612426 + 365 * 86400),
                                        (10, 1796612426 + 600), (0, 1796612426)])
def test_the_end_time_is_the_start_plus_the_limit_or_a_year(limit, end):
    assert releases.end_time(1796612426, limit) == end


# --- sbatch's, srun's and salloc's options per release ------------------------------------------------

def _has_22_05() -> dict[str, set[str]]:
    """22.05.8's options per command, from its slurm_opt.c (fixtures/slurm-options)."""
    data = json.loads((FIXTURES / "slurm-options" / "slurm_opt-22.05.json").read_text())
    return {cmd: {o["name"] for o in data["options"] if cmd in o["commands"]} for cmd in ("sbatch", "srun", "salloc")}


def option_cases():
    """(release, command, option, argv, unrecognized stderr or None): every option some of the three
    releases lacks, as 24.11.5 and 26.05.5 answered it, and as 22.05.8's table says."""
    out = []
    asked = {n: json.loads((FIXTURES / f"slurm-{n}" / "oracle-options.json").read_text())["cases"]
             for n in ("24.11", "26.05")}
    has = _has_22_05()
    for cmd, options in asked["24.11"].items():
        for option, c in options.items():
            for name in NAMES:
                if name == "22.05":  # (getopt_long takes a prefix: 22.05's --extra is --extra-node-info)
                    known = any(n.startswith(option) for n in has[cmd])
                    err = None if known else (f"{cmd}: unrecognized option '{c['argv'][1]}'\n"
                                              f'Try "{cmd} --help" for more information\n')
                else:
                    got = asked[name][cmd][option]
                    err = got["stderr"] if "unrecognized option" in got["stderr"] else None
                out.append((name, cmd, option, c["argv"], err))
    return out


@pytest.mark.parametrize("name, cmd, option, argv, unrecognized", option_cases(),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_an_option_the_release_lacks_is_its_unrecognized_option(site, capsys, name, cmd, option, argv, unrecognized):
    site(name)
    rc, out, err = run(capsys, cmd, *argv[1:])
    if unrecognized is None:  # the release has it: the command line is read, --usage answers
        assert (rc, out.startswith(f"Usage: {cmd} "), err) == (0, True, "")
    else:
        assert (rc, out, err) == (255, "", unrecognized)


def test_every_option_that_varies_is_in_the_table_and_asked():
    """The release table names the options that vary, no more: each is a row of options/table.py,
    and the three releases' sets are those the facts give."""
    from shim.slurm.options.table import OPTIONS

    rows = {(cmd, o.long) for o in OPTIONS for cmd in o.commands}
    asked = json.loads((FIXTURES / "slurm-24.11" / "oracle-options.json").read_text())["cases"]
    for cmd in ("sbatch", "srun", "salloc"):
        assert {(cmd, n) for n in releases.VARYING_OPTIONS[cmd]} <= rows
        assert releases.VARYING_OPTIONS[cmd] == set(asked[cmd])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("step, cpus", [("step0.task0", None), ("step1_c2.task0", 2), ("step_gpu.task0", None)])
def test_a_steps_own_variables_vary_as_each_release(name, step, cpus):
    """srun's steps in a batch job (-n 2; -c 2; --gres=gpu:1): 24.11 and 26.05 add SLURMD_DEBUG=2,
    and SLURM_TRES_PER_TASK=cpu=N for a step given -c; 26.05 SLURM_JOB_GROUP."""
    from shim.runtime.steps import plan

    text = (FIXTURES / f"slurm-{name}" / f"env-srun-in-sbatch-{step}.txt").read_text()
    ref = dict(line.split("=", 1) for line in text.splitlines() if re.match(r"\w+=", line))
    ours = plan.release_step_env(cpus, releases.get(name), gid=ref["SLURM_JOB_GID"])
    for var in ("SLURMD_DEBUG", "SLURM_TRES_PER_TASK", "SLURM_JOB_GROUP"):
        assert (var, ours.get(var)) == (var, ref.get(var))


@pytest.mark.parametrize("name", ["24.11", "26.05"])
def test_26_05s_expediting_state_is_taken_and_matches_no_job(queue, capsys, name):
    """26.05 names a state 24.11 does not: squeue -t expediting lists no job there, and is 24.11's error."""
    queue(name)
    c = oracle(name)["t_expediting"]
    assert run(capsys, "squeue", *c["cmd"].split()[1:]) == (c["rc"], c["stdout"], c["stderr"])


def test_a_synopsis_amendment_names_lines_the_text_has_once():
    """A newer release's --usage is the older one with the lines it changed (releases._amend): a
    line that is not there, or is there twice, is an error, not a silent no-op."""
    text = "Usage: x [-a]\n        [-b]\n"
    assert releases._amend(text, {"        [-b]": ("        [-b] [-c]", "        [-d]")}) == \
        "Usage: x [-a]\n        [-b] [-c]\n        [-d]\n"
    assert releases._amend(text, {"Usage: x [-a]": ()}) == "        [-b]\n"
    for bad in ("        [-z]", "  [-b]"):
        with pytest.raises(ValueError):
            releases._amend(text, {bad: ()})
    with pytest.raises(ValueError):
        releases._amend("[-a]\n[-a]\n", {"[-a]": ()})
