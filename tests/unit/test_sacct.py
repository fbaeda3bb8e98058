"""sacct against the reference: the jobs of the Slurm 22.05 capture (acct-jobids.json) rebuilt as
Grid Engine accounting records plus the shim's own records, then printed in the reference's
layouts. Rows Grid Engine cannot produce (srun steps 138.0/138.1) are left out of the comparison;
row order is compared separately (the shim orders by job id, Slurm by database index)."""

from __future__ import annotations

import calendar
import json
import os
import time

import pytest

from conftest import FIXTURES, SLURM_REF, use_site_config
from shim.gridengine import backends
from shim import siteconf
from shim.store import state
from shim.cli import sacct as cli
from shim.operations.accounting import query
from shim.operations.accounting.collect import collect
from shim.gridengine.replay import ReplayBackend
from shim.errors import ShimError
from shim.proc import Result
from shim.slurm.render import sacct as view

CASES = json.loads((SLURM_REF / "cases.json").read_text())
IDS = "135,136,137,138,139,140,141,142,143,144,145"
NOW = calendar.timegm((2026, 11, 30, 7, 52, 0, 0, 0, 0))  # shortly after the captured jobs ended


EMPTY_QUEUE = (FIXTURES / "gridengine" / "sge-8.1.9" / "live-qstat-u-all-r-xml.empty.xml").read_text()


def empty_queue(monkeypatch) -> ReplayBackend:
    """Grid Engine with nothing queued, injected as the process's backend: its qstat answers every
    question with the recorded empty listing (so neither a listing nor ``qstat -j`` finds a job)."""
    b = ReplayBackend({("qstat",): Result(("qstat",), 0, EMPTY_QUEUE, "")})
    monkeypatch.setattr(backends, "_override", b)
    return b


def ts(text: str) -> int:
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def acct_line(job, name, owner="root", group="root", q="debug", submit=0, start=0, end=0, failed=0, status=0,
              task=0, slots=1, utime=0.0, stime=0.0, maxrss=0, maxvmem=0, category="-q debug", pe="NONE") -> str:
    wall = end - start if start else 0
    return ":".join(str(x) for x in [
        q, "vm", group, owner, name, job, "sge", 0, submit, start, end, failed, status, wall,
        f"{utime:.6f}", f"{stime:.6f}", f"{maxrss:.6f}", 0, 0, 0, 0, 300, 0, 0, "0.000000", 16, 0, 0, 0, 2, 1,
        "NONE", "defaultdepartment", pe, slots, task, f"{utime + stime:.6f}", "0.000000", "0.000000", category,
        "0.000000", "NONE", f"{maxvmem:.6f}", 0, 0]) + "\n"


def _p_more_rows() -> dict[str, dict[str, str]]:
    text = CASES["sacct_P_more"]["stdout"].splitlines()
    head = text[0].split("|")
    return {r.split("|")[0]: dict(zip(head, r.split("|"))) for r in text[1:]}


P = _p_more_rows()
SUBMIT = ts("2026-11-30T07:48:11")


@pytest.fixture
def site(monkeypatch, tmp_path):
    use_site_config(monkeypatch, tmp_path)
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("SACCT_FORMAT", raising=False)
    monkeypatch.delenv("SLURM_TIME_FORMAT", raising=False)
    time.tzset()
    siteconf.reset()
    yield tmp_path
    siteconf.reset()
    time.tzset()


def _submit(cfg, job, name, *, ncpus=1, mem=None, time_limit=-1, partition="debug", user="root", uid=0,
            workdir="/srv/sref", gpus=0, licenses=None, array=None):
    state.record_submit(cfg, job, {
        "name": name, "partition": partition, "workdir": workdir, "ntasks": ncpus, "cpus_per_task": 1,
        "nodes": 1, "mem_mb": mem, "mem_per_cpu_mb": None, "default_mem_per_cpu": 100, "gpus": gpus,
        "time": time_limit, "account": "research", "qos": None, "comment": None, "array": array,
        "throttle": None, "licenses": licenses, "user": user, "uid": uid, "submit_time": SUBMIT + 0.4})


def _event(cfg, job, task, kind, data):
    """An event as the shim writes it (the tests run as root: root's own directory)."""
    name = f"{job}.{'x' if task is None else task}.{kind}.json"
    assert state.write_record(cfg, "events", job, name, data)
    path = state.record_file(cfg, "events", name)
    os.utime(path, (data["t"], data["t"]))  # written when it happened, as the shim writes them


@pytest.fixture
def reference_jobs(site, bob, monkeypatch):
    """The reference's accounting jobs 135-145 as this shim would have recorded them."""
    cfg = siteconf.get()
    lines = ["# Version: 8.1.9\n", "# \n", "# DO NOT MODIFY THIS FILE MANUALLY!\n", "# \n"]

    def run(job, name, key=None, status=0, failed=0, task=0, slots=1, q="debug", owner="root", **kw):
        row = P[key or str(job)]
        lines.append(acct_line(job, name, owner=owner, group=owner, q=q, submit=SUBMIT, start=ts(row["Start"]),
                               end=ts(row["End"]), failed=failed, status=status, task=task, slots=slots,
                               category=f"-q {q}", **kw))
        return ts(row["Start"]), ts(row["End"])

    _submit(cfg, 135, "timeout", time_limit=1)
    s, e = run(135, "timeout", status=137, utime=0.1, stime=0.033, maxrss=4792)
    _event(cfg, 135, None, "end", {"t": e, "exit": 0, "signal": 9, "state": "TIMEOUT", "node": "vm", "start": s})
    _submit(cfg, 136, "exit7")
    s, e = run(136, "exit7", status=7, utime=0.001)
    _event(cfg, 136, None, "end", {"t": e, "exit": 7, "signal": 0, "state": "FAILED", "node": "vm", "start": s})
    _submit(cfg, 137, "kill9")
    s, e = run(137, "kill9", status=137, utime=0.001)
    _event(cfg, 137, None, "end", {"t": e, "exit": 0, "signal": 9, "state": "FAILED", "node": "vm", "start": s})
    _submit(cfg, 138, "ok", ncpus=2)
    run(138, "ok", slots=2, utime=0.023)
    _submit(cfg, 139, "acctarr", array=[1, 2, 3])
    for t in (1, 2, 3):
        run(139, "acctarr", key=f"139_{t}", status=t, task=t, utime=0.001)
    _submit(cfg, 140, "gpuacct", partition="gpu", gpus=1, licenses="matlab:2")
    run(140, "gpuacct", q="gpu", utime=0.002)
    _submit(cfg, 141, "bobacct", user="bob", uid=1001, workdir="/home/bob/sref")
    run(141, "bobacct", owner="bob", utime=0.002)
    _submit(cfg, 142, "cancelpd")
    _event(cfg, 142, None, "cancel", {"t": ts(P["142"]["End"]), "uid": 0, "user": "root", "was": "PENDING",
                                      "reason": "JobHeldUser"})
    _submit(cfg, 143, "cancelr")
    s, e = run(143, "cancelr", status=137, failed=100, utime=0.049, maxrss=4784)
    _event(cfg, 143, None, "cancel", {"t": e, "uid": 0, "user": "root", "was": "RUNNING"})
    _event(cfg, 143, None, "end", {"t": e, "exit": 0, "signal": 9, "state": "CANCELLED", "node": "vm", "start": s})
    _submit(cfg, 144, "requeue")
    lines.append(acct_line(144, "requeue", submit=SUBMIT, start=ts("2026-11-30T07:48:41"),
                           end=ts("2026-11-30T07:48:43"), failed=25, status=137))
    _event(cfg, 144, None, "cancel", {"t": ts(P["144"]["End"]), "uid": 0, "user": "root", "was": "PENDING",
                                      "reason": "BeginTime"})
    _submit(cfg, 145, "faildir", workdir="/nonexistent/dir")
    s, e = run(145, "faildir")
    _event(cfg, 145, None, "end", {"t": e, "exit": 0, "signal": 0, "state": "FAILED", "reason": "JobLaunchFailure",
                                   "node": "vm", "start": s})
    path = site / "accounting"
    path.write_text("".join(lines))
    monkeypatch.setenv("SLURM_SHIM_ACCOUNTING", str(path))
    empty_queue(monkeypatch)
    monkeypatch.setattr(time, "time", lambda: NOW)
    return path


def run_sacct(argv, capsys, uid=0, user="root", env=None, monkeypatch=None):
    if monkeypatch is not None:
        monkeypatch.setattr(os, "getuid", lambda: uid)
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _case_argv(name):
    return CASES[name]["cmd"].split()[1:]


GE_CANNOT = ("138.0", "138.1")


def _expected(name):
    lines = CASES[name]["stdout"].splitlines()
    return [ln for ln in lines if not (ln.strip() and ln.replace("|", " ").split()[0] in GE_CANNOT)]


def _check_case(name, capsys, monkeypatch, header_lines=2, **kw):
    rc, out, err = run_sacct(_case_argv(name), capsys, monkeypatch=monkeypatch, **kw)
    assert rc == CASES[name]["rc"]
    exp = _expected(name)
    got = out.splitlines()
    assert got[:header_lines] == exp[:header_lines]
    assert sorted(got[header_lines:]) == sorted(exp[header_lines:])
    return got


# ---------------------------------------------------------------------------------------------
# golden layouts


@pytest.mark.parametrize("case", ["sacct_j", "sacct_j_X", "sacct_b", "sacct_array", "sacct_array_task",
                                  "sacct_requeue", "sacct_S_E", "sacct_unknown_job"])
def test_default_layouts_match_reference(case, reference_jobs, capsys, monkeypatch):
    _check_case(case, capsys, monkeypatch)


def test_no_header_layout(reference_jobs, capsys, monkeypatch):
    _check_case("sacct_n_X_brief", capsys, monkeypatch, header_lines=0)


@pytest.mark.parametrize("case", ["sacct_parsable", "sacct_parsable2"])
def test_parsable_layouts_match_reference(case, reference_jobs, capsys, monkeypatch):
    _check_case(case, capsys, monkeypatch, header_lines=1)


def test_parsable2_state_only(reference_jobs, capsys, monkeypatch):
    rc, out, _ = run_sacct(_case_argv("sacct_noheader_P_state"), capsys, monkeypatch=monkeypatch)
    assert (rc, out) == (0, CASES["sacct_noheader_P_state"]["stdout"])


def test_widths_and_justification(reference_jobs, capsys, monkeypatch):
    _check_case("sacct_widths", capsys, monkeypatch)


def test_sacct_format_environment(reference_jobs, capsys, monkeypatch):
    _check_case("sacct_format_env", capsys, monkeypatch, env={"SACCT_FORMAT": "JobID,State,ExitCode"})


def test_name_filter_today(reference_jobs, capsys, monkeypatch):
    _check_case("sacct_name", capsys, monkeypatch)


def test_long_layout_header(reference_jobs, capsys, monkeypatch):
    rc, out, _ = run_sacct(_case_argv("sacct_l"), capsys, monkeypatch=monkeypatch)
    assert out.splitlines()[:2] == CASES["sacct_l"]["stdout"].splitlines()[:2]
    assert out.splitlines()[2].startswith("138          138                  ok      debug ")


def test_duplicates_show_the_requeued_run(reference_jobs, capsys, monkeypatch):
    rc, out, _ = run_sacct(_case_argv("sacct_D_requeue"), capsys, monkeypatch=monkeypatch)
    exp = CASES["sacct_D_requeue"]["stdout"].splitlines()
    got = out.splitlines()
    assert got[:2] == exp[:2]
    assert got[2] == exp[2]  # 144 requeue REQUEUED 0:0 start end
    assert got[3].startswith(exp[3][:60])  # the batch step (its end is Slurm's KillWait later)
    assert got[4] == exp[4]  # 144 requeue CANCELLED+ 0:0 None end


def test_state_filter_window_is_an_instant(reference_jobs, capsys, monkeypatch):
    for case in ("sacct_s_CA", "sacct_s_TO_F"):
        rc, out, _ = run_sacct(_case_argv(case), capsys, monkeypatch=monkeypatch)
        assert (rc, out) == (0, CASES[case]["stdout"])


def test_state_filter_with_a_window(reference_jobs, capsys, monkeypatch):
    rc, out, _ = run_sacct(["-X", "-n", "-P", "-o", "JobID,State", "-s", "CA,TO", "-S", "07:00", "-E", "now"],
                           capsys, monkeypatch=monkeypatch)
    assert out.splitlines() == ["135|TIMEOUT", "142|CANCELLED by 0", "143|CANCELLED by 0", "144|CANCELLED by 0"]


def test_p_more_values(reference_jobs, capsys, monkeypatch):
    """Field by field against ``sacct -P -o <31 fields>``, where Grid Engine can know the value."""
    rc, out, _ = run_sacct(_case_argv("sacct_P_more"), capsys, monkeypatch=monkeypatch)
    lines = out.splitlines()
    head = lines[0].split("|")
    assert lines[0] == CASES["sacct_P_more"]["stdout"].splitlines()[0]
    got = {r.split("|")[0]: dict(zip(head, r.split("|"))) for r in lines[1:]}
    skip_always = {"JobIDRaw", "SubmitLine", "Priority", "TotalCPU"}
    killed_steps = {"135.batch", "143.batch"}  # Slurm's step ends KillWait after the job
    for jid, exp in P.items():
        if jid in GE_CANNOT:
            continue
        assert jid in got, jid
        for field, value in exp.items():
            if field in skip_always:
                continue
            if jid in killed_steps and field in ("Elapsed", "ElapsedRaw", "End", "CPUTime", "MaxRSS"):
                continue
            if jid == "138" and field == "DerivedExitCode":
                continue  # from srun step 138.1
            if jid == "144" and field == "Submit":
                continue  # Slurm resets the submit time on requeue
            if field == "MaxRSS" and jid not in ("135.batch", "143.batch"):
                continue
            assert got[jid][field] == value, (jid, field)
    assert got["135.batch"]["MaxRSS"] == "4792K"
    assert got["135"]["TotalCPU"] == "00:00.133"
    assert got["142"]["TotalCPU"] == "00:00:00"
    assert got["139_1"]["JobIDRaw"] == "139_1"  # (not the task's own id: render/sacct.Row.raw_text)


def test_order_is_by_job_then_task(reference_jobs, capsys, monkeypatch):
    rc, out, _ = run_sacct(["-X", "-n", "-P", "-o", "JobID", "-j", IDS], capsys, monkeypatch=monkeypatch)
    assert out.split() == ["135", "136", "137", "138", "139_1", "139_2", "139_3", "140", "141", "142", "143",
                           "144", "145"]


def test_the_live_part_asks_the_injected_backend(reference_jobs, capsys, monkeypatch):
    """The live source is the process's backend (here a recording): ended sbatch jobs ask it
    nothing; a time window lists the queue once; an id nothing here knows lists it too (a
    recorded transport is not asked ``qstat -j`` first: that only pays where calls overlap)."""
    b = backends._override
    rc, out, _ = run_sacct(["-X", "-n", "-P", "-o", "JobID,State", "-j", "135,136"], capsys, monkeypatch=monkeypatch)
    assert (rc, b.calls) == (0, [])
    run_sacct(["-X", "-n", "-a", "-S", "2026-11-30T00:00:00", "-E", "now"], capsys, monkeypatch=monkeypatch)
    assert [c for c, _ in b.calls] == [("qstat", "-u", "*", "-r", "-xml")]
    b.calls.clear()
    rc, out, _ = run_sacct(["-X", "-n", "-j", "4242"], capsys, monkeypatch=monkeypatch)
    assert (rc, out, [c for c, _ in b.calls]) == (0, "", [("qstat", "-u", "*", "-r", "-xml")])


# ---------------------------------------------------------------------------------------------
# users


@pytest.fixture
def bob(monkeypatch):
    """The reference's second user (uid 1001), whether or not this machine has one."""
    import grp
    import pwd

    real_nam, real_uid, real_grnam, real_grgid = pwd.getpwnam, pwd.getpwuid, grp.getgrnam, grp.getgrgid
    ent = pwd.struct_passwd(("bob", "x", 1001, 1001, "", "/home/bob", "/bin/sh"))
    gent = grp.struct_group(("bob", "x", 1001, []))
    monkeypatch.setattr(pwd, "getpwnam", lambda n: ent if n == "bob" else real_nam(n))
    monkeypatch.setattr(pwd, "getpwuid", lambda u: ent if u == 1001 else real_uid(u))
    monkeypatch.setattr(grp, "getgrnam", lambda n: gent if n == "bob" else real_grnam(n))
    monkeypatch.setattr(grp, "getgrgid", lambda g: gent if g == 1001 else real_grgid(g))


def test_plain_user_sees_own_jobs_by_default(reference_jobs, bob, capsys, monkeypatch):
    rc, out, _ = run_sacct(["-X", "-S", "00:00"], capsys, uid=1001, monkeypatch=monkeypatch)
    exp = CASES["sacct_as_bob"]["stdout"].splitlines()
    assert out.splitlines() == exp[:2] + [ln for ln in exp[2:] if ln.startswith("141 ")]


def test_user_filter(reference_jobs, bob, capsys, monkeypatch):
    rc, out, _ = run_sacct(["-u", "bob", "-X", "-S", "00:00"], capsys, monkeypatch=monkeypatch)
    exp = CASES["sacct_u_bob"]["stdout"].splitlines()
    assert out.splitlines() == exp[:2] + [ln for ln in exp[2:] if ln.startswith("141 ")]


def test_plain_user_sees_others_with_j(reference_jobs, bob, capsys, monkeypatch):
    rc, out, _ = run_sacct(_case_argv("sacct_as_bob_other_job"), capsys, uid=1001, monkeypatch=monkeypatch)
    assert out == CASES["sacct_as_bob_other_job"]["stdout"]


def test_unknown_user():
    with pytest.raises(ShimError) as e:
        query.resolve_users("nosuchuser_xyz")
    assert e.value.lines == ["Invalid user id: nosuchuser_xyz"]


# ---------------------------------------------------------------------------------------------
# errors and help


@pytest.mark.parametrize("case", ["sacct_bad_field", "sacct_bad_job", "sacct_bad_state"])
def test_errors_match_reference(case, site, monkeypatch):
    empty_queue(monkeypatch)
    with pytest.raises(ShimError) as e:
        cli.main(_case_argv(case))
    assert "\n".join(e.value.lines) + "\n" == CASES[case]["stderr"]
    assert e.value.code == CASES[case]["rc"]


def test_helpformat_matches_reference(capsys):
    assert cli.main(["-e"]) == 0
    assert capsys.readouterr().out == CASES["sacct_e"]["stdout"]


def test_version(capsys):
    cli.main(["-V"])
    assert capsys.readouterr().out == "slurm-wlm 22.05.8\n"


def test_unknown_option_exits_1():
    with pytest.raises(ShimError) as e:
        cli.main(["--bogus"])
    assert e.value.lines == ["sacct: unrecognized option '--bogus'"] and e.value.code == 1


def test_stray_arguments_are_an_error(site, monkeypatch):
    """snakemake passes ``| tail -1`` as arguments: Slurm fails (exit 1), so does the shim."""
    with pytest.raises(ShimError) as e:
        cli.main(["-nu", "root", "-o", "Account%256", "|", "tail"])
    assert e.value.lines[0] == "sacct: error: Unknown arguments:" and e.value.code == 1


def test_bad_time(site):
    with pytest.raises(ShimError) as e:
        cli.main(["-S", "notatime"])
    assert e.value.lines == ["Invalid time specification (pos=0): notatime"]


# ---------------------------------------------------------------------------------------------
# client invocations


def test_submitit_query(reference_jobs, capsys, monkeypatch):
    rc, out, _ = run_sacct(["-o", "JobID,State,NodeList", "--parsable2", "-j", "136", "-j", "142", "-j", "139"],
                           capsys, monkeypatch=monkeypatch)
    assert out.splitlines() == [
        "JobID|State|NodeList", "136|FAILED|vm", "136.batch|FAILED|vm", "139_1|FAILED|vm", "139_1.batch|FAILED|vm",
        "139_2|FAILED|vm", "139_2.batch|FAILED|vm", "139_3|FAILED|vm", "139_3.batch|FAILED|vm",
        "142|CANCELLED by 0|None assigned"]


def test_snakemake_query(reference_jobs, capsys, monkeypatch):
    rc, out, _ = run_sacct(["-X", "--parsable2", "--clusters", "all", "--noheader", "--format=JobIdRaw,State",
                            "--starttime", "2026-11-28T07:00", "--endtime", "now", "--name", "timeout,cancelpd,exit7"],
                           capsys, monkeypatch=monkeypatch)
    assert out.splitlines() == ["135|TIMEOUT", "136|FAILED", "142|CANCELLED by 0"]


def test_bare_allocations_probe_exits_0(reference_jobs, capsys, monkeypatch):
    rc, out, _ = run_sacct(["-X"], capsys, monkeypatch=monkeypatch)
    assert rc == 0 and out.startswith("JobID ")


def test_json_document(reference_jobs, capsys, monkeypatch):
    rc, out, _ = run_sacct(["--json", "-j", "136"], capsys, monkeypatch=monkeypatch)
    doc = json.loads(out)
    ref = json.loads(CASES["sacct_json"]["stdout"])
    assert doc["meta"] == ref["meta"]
    job = doc["jobs"][0]
    assert set(ref["jobs"][0]) <= set(job)
    assert (job["job_id"], job["name"], job["state"]["current"], job["partition"]) == (136, "exit7", "FAILED", "debug")
    assert [s["step"]["id"] for s in job["steps"]] == ["batch"]
    assert '"\\/srv\\/sref"' in out


def _nulls(v):
    """A JSON value with empty strings as None: Slurm's YAML writes both as ``!!null null``."""
    if isinstance(v, dict):
        return {k: _nulls(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_nulls(x) for x in v]
    return None if v == "" else v


def test_yaml_is_the_json_document_in_slurms_yaml(reference_jobs, capsys, monkeypatch):
    """sacct --yaml is what Slurm's one YAML serializer makes of the --json document, in the dialect
    of the captured squeue --yaml (render/yaml.py, shared with squeue): tagged YAML 1.1."""
    import yaml

    rc, out, _ = run_sacct(["--json", "-j", IDS], capsys, monkeypatch=monkeypatch)
    doc = json.loads(out)
    rc, out, _ = run_sacct(["--yaml", "-j", IDS], capsys, monkeypatch=monkeypatch)
    assert rc == 0 and out.startswith("%YAML 1.1\n--- !!map\n!!str meta: !!map\n") and out.endswith("\n...\n")
    assert yaml.safe_load(out) == _nulls(doc)
    assert out.splitlines()[:4] == CASES["squeue_yaml"]["stdout"].splitlines()[:4]  # the same serializer


# ---------------------------------------------------------------------------------------------
# units


def test_parse_fields_prefix_and_width():
    cols = view.parse_fields("jobid%20,jobn,State%-12,exit,all")
    assert [(c.field.name, c.width, c.right) for c in cols[:4]] == [
        ("JobID", 20, True), ("JobName", 10, True), ("State", 12, False), ("ExitCode", 8, True)]
    assert view.parse_fields("jobid")[0].right is False  # JobID's default width is left-justified
    assert len(cols) == 4 + len(view.FIELD_NAMES)
    with pytest.raises(view.FieldError):
        view.parse_fields("NoSuchField")


def test_time_texts():
    assert view.time_text(68) == "00:01:08"
    assert view.time_text(90061) == "1-01:01:01"
    assert view.cpu_text(0.133) == "00:00.133"
    assert view.cpu_text(0.0) == "00:00:00"
    assert view.cpu_text(3725.5) == "01:02:05"
    assert view.limit_text(None) == "Partition_Limit"
    assert view.limit_text(-1) == "UNLIMITED"
    assert view.limit_text(60) == "01:00:00"
    assert view.limit_text(2 * 1440) == "2-00:00:00"


def test_units():
    """Memory prints as Slurm's convert_num_unit (render/text.py, squeue's printer too)."""
    step = view.Row(job_id=1, step="batch", maxrss_kb=4792, maxvmem_kb=2 * 1024 * 1024)
    assert (view.GETTERS["MaxRSS"](step), view.GETTERS["MaxVMSize"](step)) == ("4792K", "2G")
    assert view.mem_mb_text(2048) == "2G"
    assert view.mem_mb_text(1536) == "1.50G"
    assert view.mem_mb_text(100) == "100M"
    assert view.tres_text(2, 3072.0, 1) == "billing=2,cpu=2,mem=3G,node=1"


def test_job_list_syntax():
    """-j is slurm_addto_step_list's: split at every comma, each item slurm_parse_step_str's (jobids.sacct_step):
    atoi leniency, no bracket lists (Slurm 22.05's sacct refuses 15_[1-3]), fatal messages naming the item."""
    sels = query.parse_jobs("12,13_2,14.batch,16x,17.0,18.extern,19+0")
    assert [(s.job, s.task, s.step) for s in sels] == [
        (12, None, None), (13, 2, None), (14, None, "batch"), (16, None, None), (17, None, "0"),
        (18, None, "extern"), (19, None, None)]
    for bad, line in (("abc", "Bad job/step specified: abc"), (" 12", "Bad job/step specified:  12"),
                      ("15_[1-3]", "Bad job array element specified: 15"),
                      ("15_[1-3,5]", "Bad job array element specified: 15"),
                      ("14.foo", "Bad step specified: 14")):
        with pytest.raises(ShimError) as e:
            query.parse_jobs(bad)
        assert (e.value.code, e.value.lines) == (1, [f"sacct: fatal: {line}"]), bad


def test_state_names():
    assert query.parse_states("cd,F,to,CANCELLED,oom") == {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED",
                                                         "OUT_OF_MEMORY"}
    with pytest.raises(ShimError) as e:
        query.parse_states("XX,CD")
    assert e.value.lines == ["sacct: fatal: unrecognized job state value XX"]


def test_states_are_slurms_one_table():
    """-s takes every state of model.SLURM_STATES, by long name or compact code, in ASCII case only
    (Slurm's job_state_num compares with strcasecmp: the dotless i of "pendıng" is no I)."""
    from shim.slurm.model import SLURM_STATES

    for s in SLURM_STATES:
        assert query.parse_states(f"{s.long.lower()},{s.compact}") == {s.long}
    assert query.ended_states() == {s.long for s in SLURM_STATES if s.ended}
    with pytest.raises(ShimError) as e:
        query.parse_states("pend\u0131ng")
    assert e.value.lines == ["sacct: fatal: unrecognized job state value 'pend\u0131ng'"]


def test_step_selection_shows_only_the_step(reference_jobs, capsys, monkeypatch):
    rc, out, _ = run_sacct(["-n", "-P", "-o", "JobID,State,ExitCode", "-j", "137.batch"], capsys,
                           monkeypatch=monkeypatch)
    assert out == "137.batch|CANCELLED|0:9\n"


def test_delimiter(reference_jobs, capsys, monkeypatch):
    rc, out, _ = run_sacct(["-n", "-p", "--delimiter=,", "-o", "JobID,State", "-X", "-j", "136"], capsys,
                           monkeypatch=monkeypatch)
    assert out == "136,FAILED,\n"


def _render_by_field(rows, cols, parsable=None, delimiter="|"):
    """The layout rules, spelled out one value at a time (the compiled layout must agree)."""
    out = []
    for r in rows:
        if parsable:
            line = delimiter.join(c.field.get(r, None) for c in cols)
            out.append(line + delimiter if parsable == "ending" else line)
            continue
        parts = []
        for c in cols:
            w, v = c.width, c.field.get(r, None)
            if c.field.name not in view.NUMERIC and len(v) > w:
                v = v[:w - 1] + "+" if w > 0 else ""
            parts.append((v.rjust(w) if c.right else v.ljust(w)) + " ")
        out.append("".join(parts))
    return out


@pytest.mark.parametrize("spec", ["jobid,jobname,partition,account,alloccpus,state,exitcode", "ALL",
                                  "jobid%3,jobname%0,state%-4,alloccpus%1,exitcode%-0,user%2,account%-1",
                                  "jobidraw%-30,nodelist%5,reqtres%-8,elapsed%2,cputimeraw%1,submit%4", ","])
@pytest.mark.parametrize("parsable", [None, "ending", "no_ending"])
def test_compiled_layout_matches_the_rules(spec, parsable, reference_jobs, monkeypatch):
    qy = query.build_query(cli.parse_args(["-j", IDS])[0], 0, "root")
    rows = [r for job, steps in collect(qy) for r in ([job] if job else []) + steps]
    rows.append(view.Row(job_id=7, name="a name longer than its column", partition=None, ncpus=123456789012))
    cols = view.parse_fields(spec)
    line = view.line_function(cols, parsable=parsable, delimiter="::")
    assert [line(r) for r in rows] == _render_by_field(rows, cols, parsable, "::")
    head = view.header_lines(cols, parsable=parsable, delimiter="::")
    assert view.render(rows, cols, parsable=parsable, delimiter="::").splitlines() == head + [line(r) for r in rows]


def test_dates_are_formatted_once_per_time_zone(monkeypatch):
    view.reset()
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    assert view.date_text(0) == "1970-01-01T00:00:00"
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    view.reset()
    assert view.date_text(0) == "1970-01-01T09:00:00"
    view.reset()
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


# ---------------------------------------------------------------------------------------------
# records another user planted (security review F-3, F-6; see test_squeue.plant_everything)


def test_planted_records_do_not_change_or_break_sacct(reference_jobs, site, capsys, monkeypatch):
    from test_squeue import ATTACKER, no_hang, plant, plant_everything

    argvs = [["-j", IDS, "-n", "-P", "-o", "JobID,State,ExitCode,User,NCPUS"], ["-a", "-n", "-P", "-o",
             "JobID,JobName,State,User", "-S", "2026-11-30"], ["-j", "888888", "-n", "-P"]]
    before = [run_sacct(a, capsys, monkeypatch=monkeypatch) for a in argvs]
    state_dir = site / "state"
    plant_everything(state_dir, ts(P["136"]["End"]), 136)
    end142 = ts(P["142"]["End"])
    plant(state_dir, "events", "142.x.end.json", json.dumps({"t": end142, "exit": 0, "state": "COMPLETED"}),
          mtime=end142)
    plant(state_dir, "jobs", "139.json", json.dumps({"array": [3, 2, 1], "name": "evil", "user": "root"}))
    with no_hang("sacct"):
        after = [run_sacct(a, capsys, monkeypatch=monkeypatch) for a in argvs]
    for (rc0, out0, err0), (rc1, out1, err1) in zip(before, after):
        mine = "".join(ln for ln in out1.splitlines(True) if f"|{ATTACKER}" not in ln)
        assert (rc1, mine, err1) == (rc0, out0, err0)
    assert "136|FAILED|7:0|root|1" in after[0][1]


def test_a_job_cancelled_by_its_dependency_check_is_cancelled(site, capsys, monkeypatch):
    """F-14: the wrapper ran (Grid Engine saw it exit 0) but cancelled the job before its script:
    CANCELLED, as squeue says, not COMPLETED 0:0."""
    cfg = siteconf.get()
    sub, start, end = SUBMIT, SUBMIT + 2, SUBMIT + 3
    (site / "accounting").write_text("# Version: 8.1.9\n" + acct_line(150, "depjob", submit=sub, start=start, end=end))
    monkeypatch.setenv("SLURM_SHIM_ACCOUNTING", str(site / "accounting"))
    empty_queue(monkeypatch)
    monkeypatch.setattr(time, "time", lambda: NOW)
    _submit(cfg, 150, "depjob")
    rc, out, _ = run_sacct(["-j", "150", "-n", "-P", "-o", "JobID,State,ExitCode"], capsys, monkeypatch=monkeypatch)
    assert out.splitlines()[0] == "150|COMPLETED|0:0"  # what Grid Engine alone says
    _event(cfg, 150, None, "cancel", {"t": start + 0.5, "uid": 0, "user": "root", "was": "PENDING",
                                      "reason": "DependencyNeverSatisfied"})
    rc, out, _ = run_sacct(["-j", "150", "-n", "-P", "-o", "JobID,State,ExitCode"], capsys, monkeypatch=monkeypatch)
    assert out.splitlines()[0] == "150|CANCELLED|0:0"


# ---------------------------------------------------------------------------------------------
# one rule for the shim's end and cancel events (sacct and squeue's recently ended jobs)


@pytest.mark.parametrize("end_state, cancel_after, expected", [
    ("FAILED", 10, "FAILED"),  # scancel of a job that had already failed changes nothing
    ("FAILED", -10, "CANCELLED"),  # cancelled, then its script failed: Slurm's job is CANCELLED
    ("COMPLETED", -10, "CANCELLED"),  # cancelled, and its script still exited 0
    ("COMPLETED", 10, "COMPLETED"),
    ("TIMEOUT", 10, "TIMEOUT"),
    ("OUT_OF_MEMORY", 10, "OUT_OF_MEMORY"),
    ("OUT_OF_MEMORY", -10, "CANCELLED"),
    ("CANCELLED", 10, "CANCELLED"),
])
def test_cancel_and_end_whichever_came_first(end_state, cancel_after, expected, site, capsys, monkeypatch):
    """Slurm's job is CANCELLED from the moment scancel reaches it; a cancel after the end changes
    nothing. sacct (from Grid Engine's record with the events, and from the events alone) and
    squeue's recently ended jobs (jobs.ended_record) follow the one rule, records.cancel_ended."""
    from shim.operations import jobs

    cfg = siteconf.get()
    start, end_t = SUBMIT + 2, SUBMIT + 60
    failed = end_state == "FAILED"
    end = {"t": end_t, "exit": 1 if failed else 0, "signal": 0, "state": end_state, "node": "vm", "start": start}
    cancel = {"t": end_t + cancel_after, "uid": 0, "user": "root", "was": "RUNNING", "node": "vm", "start": start}
    empty_queue(monkeypatch)
    monkeypatch.setattr(time, "time", lambda: NOW)
    _submit(cfg, 190, "raced")
    _event(cfg, 190, None, "end", end)
    _event(cfg, 190, None, "cancel", cancel)
    monkeypatch.setenv("SLURM_SHIM_ACCOUNTING", str(site / "accounting"))
    (site / "accounting").write_text("# Version: 8.1.9\n")
    argv = ["-X", "-n", "-P", "-o", "JobID,State", "-j", "190"]
    shown = f"190|{expected}{' by 0' if expected == 'CANCELLED' else ''}\n"
    rc, out, _ = run_sacct(argv, capsys, monkeypatch=monkeypatch)
    assert (rc, out) == (0, shown)  # the events alone (no accounting record yet)
    (site / "accounting").write_text("# Version: 8.1.9\n" + acct_line(
        190, "raced", submit=int(SUBMIT), start=int(start), end=int(end_t), status=1 if failed else 0))
    rc, out, _ = run_sacct(argv, capsys, monkeypatch=monkeypatch)
    assert (rc, out) == (0, shown)  # Grid Engine's record with the events
    rec = jobs.ended_record(cfg, 190, None, {(None, "end"): end, (None, "cancel"): cancel}, None, NOW, owner=0)
    assert rec.state == expected


def test_one_reading_of_sbatchs_memory_request(site):
    """records.memory_request, sacct's ReqMem (accounting.rows) and squeue's job detail read the
    submit record alike: --mem per node, else --mem-per-cpu, else the partition's DefMemPerCPU."""
    from shim.operations.accounting.rows import Lookups, _geometry
    from shim.store.records import Submitted, memory_request

    def memory_request_of(data):
        return memory_request(Submitted(data))  # (as records.Reader reads a record: cleaned)

    assert memory_request_of({"mem_mb": 4000, "mem_per_cpu_mb": 100, "default_mem_per_cpu": 50}) == (4000, False, False)
    assert memory_request_of({"mem_mb": None, "mem_per_cpu_mb": 100, "default_mem_per_cpu": 50}) == (100, True, False)
    assert memory_request_of({"mem_mb": 0, "default_mem_per_cpu": 50}) == (50, True, True)
    assert memory_request_of({"mem_mb": None}) is None
    ctx = Lookups(siteconf.get(), NOW)
    assert _geometry(ctx, Submitted({"nodes": 2, "mem_mb": 4000}), 8)[:2] == (2, 8000.0)  # per node
    assert _geometry(ctx, Submitted({"nodes": 2, "mem_per_cpu_mb": 100}), 8)[:2] == (2, 800.0)  # per CPU
    assert _geometry(ctx, Submitted({"nodes": 1, "default_mem_per_cpu": 50}), 4)[:2] == (1, 200.0)
    assert _geometry(ctx, Submitted({"nodes": 1}), 4)[:2] == (1, None)
    # a job without the shim's record: the request in its accounting category, read by the one
    # reader of Grid Engine's values (sge_types: 4G is 4 GiB, 4g 4e9 bytes), as squeue reads qstat's
    mc = ctx.cfg.memory.complex
    assert _geometry(ctx, None, 1, f"-q debug -l {mc}=4G")[1] == 4096.0
    assert round(_geometry(ctx, None, 1, f"-q debug -l {mc}=4g")[1]) == 3815
    assert _geometry(ctx, None, 1, f"-l {mc}=INFINITY")[1] is None
    from shim.operations import jobs
    from shim.slurm.model import JobRecord

    def squeue_memory(s, from_grid_engine=None):
        rec = JobRecord(job_id=5, min_memory_mb=from_grid_engine)
        rec.extra["submit"] = Submitted(s)
        rec = jobs.detail(rec, siteconf.get())
        return rec.min_memory_mb, rec.mem_per_cpu

    assert squeue_memory({"mem_mb": 4000, "mem_per_cpu_mb": 100}) == (4000, False)
    assert squeue_memory({"mem_per_cpu_mb": 100}, 700) == (100, True)  # the request beats Grid Engine's figure
    assert squeue_memory({"default_mem_per_cpu": 50}) == (50, True)
    assert squeue_memory({"default_mem_per_cpu": 50}, 700)[0] == 700  # the partition's default does not
    assert squeue_memory({"nodes": 1}, None)[0] is None


def test_a_cancel_for_a_dependency_shows_no_reason_once_ended(site, capsys, monkeypatch):
    """records.ended_reason, the one rule for sacct's rows and squeue's recently ended jobs: a job
    cancelled as DependencyNeverSatisfied shows Reason None; another recorded reason stays."""
    from shim.operations import jobs
    from shim.store.records import ended_reason

    assert (ended_reason("DependencyNeverSatisfied"), ended_reason("None"), ended_reason("Other")) == \
        ("None", "None", "Other")
    cfg = siteconf.get()
    monkeypatch.setenv("SLURM_SHIM_ACCOUNTING", str(site / "accounting"))
    (site / "accounting").write_text("# Version: 8.1.9\n")
    empty_queue(monkeypatch)
    monkeypatch.setattr(time, "time", lambda: NOW)
    for job, why in ((191, "DependencyNeverSatisfied"), (192, "Other")):
        _submit(cfg, job, "dep")
        cancel = {"t": SUBMIT + 5, "uid": 0, "user": "root", "was": "PENDING", "reason": why}
        _event(cfg, job, None, "cancel", cancel)
        rc, out, _ = run_sacct(["-X", "-n", "-P", "-o", "JobID,State,Reason", "-j", str(job)], capsys,
                               monkeypatch=monkeypatch)
        shown = "None" if job == 191 else "Other"
        assert (rc, out) == (0, f"{job}|CANCELLED by 0|{shown}\n")
        rec = jobs.ended_record(cfg, job, None, {(None, "cancel"): cancel}, None, NOW, owner=0)
        assert (rec.state, rec.reason) == ("CANCELLED", shown)


def test_queue_to_partition_is_squeues_rule(site):
    """sacct's partition of an accounting record's queue is squeue's (gridengine.qstat.QueueMap):
    a queue two partitions share is the first's, ``q@host`` its queue's, another queue its name."""
    from shim.operations.accounting.rows import Lookups
    from shim.gridengine.qstat import QueueMap

    cfg = siteconf.get()
    ctx, qmap = Lookups(cfg, NOW), QueueMap(cfg)
    queues = [p.queue for p in cfg.partitions.values()]
    for q in [*queues, *(f"{q}@vm" for q in queues), "other.q", "other.q@vm"]:
        assert ctx.partition_of(q) == qmap.partition(q)
    first = next(iter(cfg.partitions))
    assert ctx.partition_of(cfg.partitions[first].queue + "@vm") == first
    assert ctx.partition_of("other.q@vm") == "other.q"
    assert ctx.default_partition == cfg.default_partition


def test_array_tasks_cancelled_before_they_ran_are_one_row_with_the_throttle(site, capsys, monkeypatch):
    """Slurm keeps a throttled array that never started as one record, ``N_[1-3%2]`` (sacct's
    JobID prints array_task_str with its %max, as squeue shows it: jobs.pending_text); a task that
    ran is a row of its own."""
    cfg = siteconf.get()
    empty_queue(monkeypatch)
    monkeypatch.setattr(time, "time", lambda: NOW)
    (site / "accounting").write_text("# Version: 8.1.9\n")
    monkeypatch.setenv("SLURM_SHIM_ACCOUNTING", str(site / "accounting"))
    state.record_submit(cfg, 191, {"name": "thr", "partition": "debug", "ntasks": 1, "cpus_per_task": 1, "nodes": 1,
                                   "array": [1, 2, 3, 4], "throttle": 2, "user": "root", "uid": 0,
                                   "submit_time": SUBMIT})
    for task in (1, 2, 3):
        _event(cfg, 191, task, "cancel", {"t": SUBMIT + 5, "uid": 0, "user": "root", "was": "PENDING"})
    _event(cfg, 191, 4, "end", {"t": SUBMIT + 9, "exit": 0, "signal": 0, "state": "COMPLETED", "node": "vm",
                                "start": SUBMIT + 2})
    rc, out, _ = run_sacct(["-X", "-n", "-P", "-o", "JobID,State", "-j", "191"], capsys, monkeypatch=monkeypatch)
    assert (rc, out) == (0, "191_[1-3%2]|CANCELLED by 0\n191_4|COMPLETED\n")


def test_users_and_groups_have_one_lookup(site):
    """records.user_ids/group_of/group_id/primary_group are the one lookup of jobs.py and
    accounting/rows; an unknown gid prints each command's Slurm way: squeue %g and scontrol the
    number (squeue/print.c _print_job_group_name), sacct's Group nothing (sacct/print.c PRINT_GROUP)."""
    import grp
    import pwd

    from shim.operations import jobs
    from shim.store import records
    from shim.operations.accounting.rows import Lookups, _ident

    gid = next(g for g in range(60001, 70000) if not any(x.gr_gid == g for x in grp.getgrall()))
    uid = next(u for u in range(60001, 70000) if not any(x.pw_uid == u for x in pwd.getpwall()))
    assert records.group_of(gid) is None and jobs.group_name(gid) == str(gid)
    assert records.group_of(0) == jobs.group_name(0) == "root" and records.group_id("root") == 0
    assert records.user_ids("root") == (0, 0) and records.user_ids("no-such-user-x") == (None, None)
    assert records.primary_group(0) == "root" and records.primary_group(uid) is None
    ctx = Lookups(siteconf.get(), NOW)
    ident = _ident(ctx, 5, records.Submitted({"uid": uid}), "x", "", "", "", "")
    assert (ident["uid"], ident["group"], ident["gid"]) == (uid, "", None)
    ident = _ident(ctx, 5, None, "x", "root", "", "", "")
    assert (ident["user"], ident["uid"], ident["group"], ident["gid"]) == ("root", 0, "root", 0)
