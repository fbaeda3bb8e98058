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
from shim import siteconf, state
from shim.cli import sacct as cli
from shim.errors import ShimError
from shim.render import sacct as view

CASES = json.loads((SLURM_REF / "cases.json").read_text())
IDS = "135,136,137,138,139,140,141,142,143,144,145"
NOW = calendar.timegm((2026, 11, 30, 7, 52, 0, 0, 0, 0))  # shortly after the captured jobs ended


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
    assert state.write_own(cfg, "events", name, data)
    path = state.own_path(cfg, "events", name)
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
    monkeypatch.setattr(cli, "_live", lambda cfg, backend: [])
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
    assert got["139_1"]["JobIDRaw"] == "139_1"


def test_order_is_by_job_then_task(reference_jobs, capsys, monkeypatch):
    rc, out, _ = run_sacct(["-X", "-n", "-P", "-o", "JobID", "-j", IDS], capsys, monkeypatch=monkeypatch)
    assert out.split() == ["135", "136", "137", "138", "139_1", "139_2", "139_3", "140", "141", "142", "143",
                           "144", "145"]


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
        cli.resolve_users("nosuchuser_xyz")
    assert e.value.lines == ["Invalid user id: nosuchuser_xyz"]


# ---------------------------------------------------------------------------------------------
# errors and help


@pytest.mark.parametrize("case", ["sacct_bad_field", "sacct_bad_job", "sacct_bad_state"])
def test_errors_match_reference(case, site, monkeypatch):
    monkeypatch.setattr(cli, "_live", lambda cfg, backend: [])
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


# ---------------------------------------------------------------------------------------------
# units


def test_parse_fields_prefix_and_width():
    cols = view.parse_fields("jobid%20,jobn,State%-12,exit,all")
    assert [(c.name, c.width) for c in cols[:4]] == [("JobID", 20), ("JobName", 10), ("State", -12), ("ExitCode", 8)]
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
    assert view.convert_units(4792, 1) == "4792K"
    assert view.convert_units(2048, 2) == "2G"
    assert view.convert_units(1536, 2) == "1.50G"
    assert view.convert_units(100, 2) == "100M"


def test_job_list_syntax():
    sels = cli.parse_jobs("12,13_2,14.batch,15_[1-3]")
    assert [(s.job, s.task, s.step) for s in sels] == [
        (12, None, None), (13, 2, None), (14, None, "batch"), (15, 1, None), (15, 2, None), (15, 3, None)]
    with pytest.raises(ShimError):
        cli.parse_jobs("abc")


def test_state_names():
    assert cli.parse_states("cd,F,to,CANCELLED,oom") == {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED",
                                                         "OUT_OF_MEMORY"}
    with pytest.raises(ShimError) as e:
        cli.parse_states("XX,CD")
    assert e.value.lines == ["sacct: fatal: unrecognized job state value XX"]


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
            line = delimiter.join(c.get(r) for c in cols)
            out.append(line + delimiter if parsable == "ending" else line)
            continue
        parts = []
        for c in cols:
            w, v = abs(c.width), c.get(r)
            if c.name not in view.NUMERIC and len(v) > w:
                v = v[:w - 1] + "+" if w > 0 else ""
            parts.append((v.ljust(w) if c.width < 0 else v.rjust(w)) + " ")
        out.append("".join(parts))
    return out


@pytest.mark.parametrize("spec", ["jobid,jobname,partition,account,alloccpus,state,exitcode", "ALL",
                                  "jobid%3,jobname%0,state%-4,alloccpus%1,exitcode%-0,user%2,account%-1",
                                  "jobidraw%-30,nodelist%5,reqtres%-8,elapsed%2,cputimeraw%1,submit%4", ","])
@pytest.mark.parametrize("parsable", [None, "ending", "no_ending"])
def test_compiled_layout_matches_the_rules(spec, parsable, reference_jobs, monkeypatch):
    qy = cli.build_query(cli.parse_args(["-j", IDS])[0], 0, "root")
    rows = [r for job, steps in cli.collect(qy) for r in ([job] if job else []) + steps]
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
    monkeypatch.setattr(cli, "_live", lambda cfg, backend: [])
    monkeypatch.setattr(time, "time", lambda: NOW)
    _submit(cfg, 150, "depjob")
    rc, out, _ = run_sacct(["-j", "150", "-n", "-P", "-o", "JobID,State,ExitCode"], capsys, monkeypatch=monkeypatch)
    assert out.splitlines()[0] == "150|COMPLETED|0:0"  # what Grid Engine alone says
    _event(cfg, 150, None, "cancel", {"t": start + 0.5, "uid": 0, "user": "root", "was": "PENDING",
                                      "reason": "DependencyNeverSatisfied"})
    rc, out, _ = run_sacct(["-j", "150", "-n", "-P", "-o", "JobID,State,ExitCode"], capsys, monkeypatch=monkeypatch)
    assert out.splitlines()[0] == "150|CANCELLED|0:0"
