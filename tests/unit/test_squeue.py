"""squeue end to end on recorded ``qstat -u '*' -r -xml`` output (fixtures/gridengine/sge-8.1.9, see
its README), the unit-test site config and a frozen clock; messages and exit codes compared with
the real Slurm 22.05 captures."""

from __future__ import annotations

import contextlib
import json
import os

import pytest

from conftest import FIXTURES, REPO, SLURM_REF
from shim.gridengine import backends
from shim import siteconf
from shim.store import state
from shim.__main__ import dispatch
from listing_replay import ListingReplay

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
MIXED = SGE / "live-qstat-u-all-r-xml.mixed.xml"
DR = SGE / "live-qstat-u-all-r-xml.dr.xml"
RERUN = SGE / "live-qstat-u-all-r-xml.rerun.xml"
EMPTY = SGE / "live-qstat-u-all-r-xml.empty.xml"
CASES = json.loads((SLURM_REF / "cases.json").read_text())
from shim_records import NOW  # noqa: E402
from shim_records import frozen_site  # noqa: E402
from shim_records import event as event  # noqa: E402
from shim_records import submit as submit  # noqa: E402
HEADER = "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    yield frozen_site(monkeypatch, tmp_path)
    siteconf.reset()
    backends.use(None)


def squeue(capsys, fixture, *argv):
    b = ListingReplay()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=fixture.read_text())
    backends.use(b)
    rc = dispatch("squeue", list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def ok(capsys, fixture, *argv) -> str:
    rc, out, err = squeue(capsys, fixture, *argv)
    assert (rc, err) == (0, "")
    return out


# ---------------------------------------------------------------------------------------------
# views


def test_default_view_of_every_state(capsys):
    assert ok(capsys, MIXED) == HEADER + """\
               111     debug   fx_big     root PD       0:00      1 (Resources)
               114     debug   fx_eqw     root PD       0:00      1 (launch failed requeued held)
               116     debug  fx_licw     root PD       0:00      1 (Licenses)
         110_[3-5]     debug   fx_arr     root PD       0:00      1 (Priority)
               113     debug   fx_dep     root PD       0:00      1 (Dependency)
               115     debug fx_later     root PD       0:00      1 (Priority)
       119_[1,3-4]     debug  fx_arrh     root PD       0:00      1 (JobHeldUser)
               118     debug my job/1     root PD       0:00      1 (JobHeldUser)
               112     debug  fx_held     root PD       0:00      1 (JobHeldUser)
               105     debug  fx_run1     root  R       9:41      1 vm
               106     debug fx_alice    alice  R       9:41      1 vm
               109     debug  fx_lic3     root  R       9:41      1 vm
             110_1     debug   fx_arr     root  R       9:41      1 vm
             110_2     debug   fx_arr     root  R       9:41      1 vm
             119_2     debug  fx_arrh     root  R       9:37      1 vm
               107     debug  fx_susp     root  S       9:41      1 vm
               117       gpu  fx_gpu3     root PD       0:00      1 (Resources)
               108       gpu   fx_gpu     root  R       9:41      1 vm
"""


def test_long_view_has_a_date_line_and_cut_headers(capsys):
    out = ok(capsys, DR, "-l")
    lines = out.splitlines()
    assert lines[0] == "Mon Nov 30 09:20:00 2026"
    assert lines[1] == ("             JOBID PARTITION     NAME     USER    STATE       TIME TIME_LIMI  NODES "
                        "NODELIST(REASON)")
    assert "               105     debug  fx_run1     root  RUNNING       9:41   1:00:00      1 vm" in lines
    # qdel'd while running, not yet gone: COMPLETING, still on its node
    assert "               120       gpu fx_notif     root COMPLETI       9:34 UNLIMITED      1 vm" in lines
    # a single held task of an array stays in the array's pending record
    assert "           110_[5]     debug   fx_arr     root  PENDING       0:00 UNLIMITED      1 (JobHeldUser)" in lines


def test_noheader_and_ids_only(capsys):
    out = ok(capsys, MIXED, "-h", "-o", "%i")
    assert out.splitlines()[:4] == ["111", "114", "116", "110_[3-5]"]
    assert ok(capsys, MIXED, "--noheader", "-t", "S") == \
        "               107     debug  fx_susp     root  S       9:41      1 vm\n"


def test_restarted_job_is_pending_again(capsys):
    out = ok(capsys, RERUN, "-p", "gpu")
    assert "               121       gpu fx_rerun     root PD       0:00      1 (Priority)\n" in out


def test_empty_queue_prints_the_header(capsys):
    assert ok(capsys, EMPTY) == HEADER
    assert ok(capsys, EMPTY, "-h") == ""


def test_misc_fields(capsys):
    out = ok(capsys, MIXED, "-o", "%i|%A|%F|%K|%t|%r|%b|%W|%l|%C|%E|%Q|%p", "-t", "PD", "-p", "debug")
    assert out.splitlines()[:6] == [
        "JOBID|JOBID|ARRAY_JOB_ID|ARRAY_TASK_ID|ST|REASON|TRES_PER_NODE|LICENSES|TIME_LIMIT|CPUS|DEPENDENCY|"
        "PRIORITY|PRIORITY",
        "111|111|111|N/A|PD|Resources|N/A|(null)|UNLIMITED|64|(null)|3221225471|0.75000000000000",
        "114|114|114|N/A|PD|launch failed requeued held|N/A|(null)|UNLIMITED|1|(null)|1073741824|0.25000000000000",
        "116|116|116|N/A|PD|Licenses|N/A|matlab:1|UNLIMITED|1|(null)|1073741824|0.25000000000000",
        "110_[3-5]|110|110|3-5|PD|Priority|N/A|(null)|UNLIMITED|1|(null)|0|0.00000000000000",
        "113|113|113|N/A|PD|Dependency|N/A|(null)|UNLIMITED|1|afterany:105(unfulfilled)|0|0.00000000000000",
    ]
    assert "112|112|112|N/A|PD|JobHeldUser|N/A|(null)|UNLIMITED|1|(null)|0|0.00000000000000" in out.splitlines()
    gpu = ok(capsys, MIXED, "-h", "-o", "%i %b %l %L", "-p", "gpu")
    assert gpu == "117 gres:gpu:3 2:00:00 2:00:00\n108 gres:gpu:1 UNLIMITED UNLIMITED\n"


def test_format_all_has_every_field(capsys):
    lines = ok(capsys, MIXED, "-o", "%all").splitlines()
    assert lines[0] == CASES["squeue_o_all"]["stdout"].splitlines()[0]
    assert all(len(line.split("|")) == 52 for line in lines)


def test_long_format_fields_default_to_twenty_wide(capsys):
    out = ok(capsys, MIXED, "-O", "JobArrayID,StateCompact,Reason", "-t", "all", "-u", "alice")
    assert out == ("JOBID               ST                  REASON              \n"
                   "106                 R                   None                \n")
    out = ok(capsys, MIXED, "-O", "JobID:5,Name:.9,State:.8", "-j", "107")
    assert out == "JOBID     NAME   STATE\n107    fx_suspSUSPENDE\n"


def test_start_view(capsys):
    lines = ok(capsys, MIXED, "--start").splitlines()
    assert lines[0] == CASES["squeue_start"]["stdout"].splitlines()[0]
    assert lines[1] == "         110_[3-5]     debug   fx_arr     root PD                 N/A      1 (null)" \
                       "               (Priority)"
    assert all(" PD " in line for line in lines[1:])


def test_steps_show_the_batch_step_of_running_jobs(capsys):
    out = ok(capsys, MIXED, "-s", "-p", "gpu")
    assert out == ("         STEPID     NAME PARTITION     USER      TIME NODELIST\n"
                   "      108.batch    batch       gpu     root      9:41 vm\n")


# ---------------------------------------------------------------------------------------------
# filters


def test_state_filter_names_codes_and_lists(capsys):
    assert ok(capsys, MIXED, "-t", "S") == ok(capsys, MIXED, "--states=suspended")
    out = ok(capsys, MIXED, "-h", "-o", "%i", "-t", "r,s")
    assert out.split() == ["105", "106", "109", "110_1", "110_2", "119_2", "107", "108"]
    assert ok(capsys, MIXED, "-t", "all") == ok(capsys, MIXED)


def test_bad_state_is_slurms_error(capsys):
    rc, out, err = squeue(capsys, MIXED, "-t", "FOO")
    ref = CASES["squeue_t_bad"]
    assert (rc, out, err) == (ref["rc"], ref["stdout"], ref["stderr"])


def test_job_ids(capsys):
    out = ok(capsys, MIXED, "-j", "105,113")
    assert out == HEADER + ("               113     debug   fx_dep     root PD       0:00      1 (Dependency)\n"
                            "               105     debug  fx_run1     root  R       9:41      1 vm\n")
    assert ok(capsys, MIXED, "-j105") == ok(capsys, MIXED, "--jobs=105") == ok(capsys, MIXED, "--job", "105")
    out = ok(capsys, MIXED, "-j", "110")
    # one job named: the controller's answer about it alone, the array's newest record first
    # (jobqueue.one_job_order; the release captures' squeue -j <array>: 112_2 before 112_1)
    assert out.split("\n")[1:4] == ["         110_[3-5]     debug   fx_arr     root PD       0:00      1 (Priority)",
                                    "             110_2     debug   fx_arr     root  R       9:41      1 vm",
                                    "             110_1     debug   fx_arr     root  R       9:41      1 vm"]
    assert ok(capsys, MIXED, "-j", "110_4") == HEADER + \
        "             110_4     debug   fx_arr     root PD       0:00      1 (Priority)\n"
    assert ok(capsys, MIXED, "-h", "-j", "110_2") == "             110_2     debug   fx_arr     root  R       9:41      1 vm\n"


def test_unknown_and_bad_job_ids_as_slurm(capsys):
    for case, argv in (("squeue_j_unknown", ["-j", "999999"]), ("squeue_j_unknown_h", ["-h", "-j", "999999"]),
                       ("squeue_j_bad", ["-j", "abc"])):
        rc, out, err = squeue(capsys, MIXED, *argv)
        ref = CASES[case]
        assert (rc, out, err) == (ref["rc"], ref["stdout"], ref["stderr"])
    # one unknown id among known ones is no error
    rc, out, err = squeue(capsys, MIXED, "-j", "105,999999")
    assert (rc, err) == (0, "") and out.count("\n") == 2


def test_users(capsys):
    out = ok(capsys, MIXED, "-u", "alice")
    assert out == HEADER + "               106     debug fx_alice    alice  R       9:41      1 vm\n"
    assert ok(capsys, MIXED, "-u", "1001") == out
    assert ok(capsys, MIXED, "--user=alice,root").count("\n") == ok(capsys, MIXED).count("\n")
    rc, out, err = squeue(capsys, MIXED, "-u", "nosuchuser")
    ref = CASES["squeue_u_unknown"]
    assert (rc, out, err) == (ref["rc"], ref["stdout"], ref["stderr"])


def test_me_is_the_calling_user(capsys, monkeypatch):
    monkeypatch.setattr("shim.slurm.users.current", lambda: "alice")
    assert ok(capsys, MIXED, "--me") == ok(capsys, MIXED, "-u", "alice")
    # squeue/opts.c: -u and --me replace one user list, the later wins (they were joined)
    assert ok(capsys, MIXED, "-u", "root", "--me") == ok(capsys, MIXED, "-u", "alice")
    assert ok(capsys, MIXED, "--me", "-u", "root") == ok(capsys, MIXED, "-u", "root")
    assert ok(capsys, MIXED, "-u", "root") != ok(capsys, MIXED, "-u", "alice")
    monkeypatch.setenv("SQUEUE_USERS", "root")  # and either beats the input variable
    assert ok(capsys, MIXED, "--me") == ok(capsys, MIXED, "-u", "alice")


def test_partition_name_license_node_filters(capsys):
    assert ok(capsys, MIXED, "-p", "gpu").count("\n") == 3
    rc, out, err = squeue(capsys, MIXED, "-p", "nope")
    ref = CASES["squeue_p_unknown"]
    assert (rc, out, err) == (ref["rc"], ref["stdout"], ref["stderr"])
    assert ok(capsys, MIXED, "-h", "-o", "%i", "-n", "fx_run1,fx_held").split() == ["112", "105"]
    assert ok(capsys, MIXED, "-h", "-o", "%i", "--name=my job/1").split() == ["118"]
    assert ok(capsys, MIXED, "-h", "-o", "%i", "-L", "matlab").split() == ["116", "109"]
    assert ok(capsys, MIXED, "-h", "-o", "%i", "-w", "vm", "-p", "gpu").split() == ["108"]
    assert ok(capsys, MIXED, "-h", "-w", "othernode") == ""


def test_array_flag_expands_pending_ranges(capsys):
    out = ok(capsys, MIXED, "-r", "-h", "-o", "%i %t %r", "-n", "fx_arr")
    assert out == "110_3 PD Priority\n110_4 PD Priority\n110_5 PD Priority\n110_1 R None\n110_2 R None\n"


def test_sort_option(capsys):
    out = ok(capsys, MIXED, "-h", "-o", "%i", "-S", "i")
    assert out.split()[:6] == ["105", "106", "107", "108", "109", "110_1"]
    out = ok(capsys, MIXED, "-h", "-o", "%i", "-S", "-p,i")
    assert out.split()[0] == "111"
    assert ok(capsys, MIXED, "-h", "-o", "%i", "--sort=-i").split()[0] == "119_[1,3-4]"


def test_environment_formats_and_sort(capsys, monkeypatch):
    monkeypatch.setenv("SQUEUE_FORMAT", "%i %T %r")
    out = ok(capsys, MIXED, "-u", "alice")
    assert out == "JOBID STATE REASON\n106 RUNNING None\n"
    monkeypatch.setenv("SQUEUE_FORMAT2", "JobID:10,State:12")
    assert ok(capsys, MIXED, "-u", "alice") == "JOBID     STATE       \n106       RUNNING     \n"
    assert ok(capsys, MIXED, "-u", "alice", "-o", "%i") == "JOBID\n106\n"  # the command line wins
    monkeypatch.setenv("SQUEUE_SORT", "i")
    monkeypatch.delenv("SQUEUE_FORMAT2")
    assert ok(capsys, MIXED, "-h", "-t", "R").split("\n")[0] == "105 RUNNING None"
    monkeypatch.setenv("SQUEUE_USERS", "alice")
    assert ok(capsys, MIXED, "-h") == "106 RUNNING None\n"


@pytest.mark.parametrize("case, argv", [
    ("squeue_bogus_option", ["--bogus"]),
    ("version_squeue", ["--version"]),
    ("usage_squeue", ["--usage"]),
])
def test_option_errors_version_and_usage_are_slurms(capsys, case, argv):
    """Slurm's exact bytes: exit code, stdout and stderr of the real squeue 22.05."""
    ref = CASES[case]
    assert ref["cmd"] == "squeue " + " ".join(argv)
    assert squeue(capsys, MIXED, *argv) == (ref["rc"], ref["stdout"], ref["stderr"])


def test_cluster_option_prints_the_cluster_line(capsys):
    out = ok(capsys, EMPTY, "-M", "cluster")
    assert out == "CLUSTER: cluster\n" + HEADER


# ---------------------------------------------------------------------------------------------
# the shim's own records: array index maps, throttles, ended jobs


def test_array_indices_and_throttle_come_from_the_submit_record(capsys, site):
    submit(site, 110, name="fx_arr", array=[10, 20, 30, 40, 50], throttle=2, comment="hello", account="research",
           time=30, stdout="/srv/x/out-%A_%a.txt", licenses="matlab:1")
    out = ok(capsys, MIXED, "-n", "fx_arr", "-o", "%.14i %.2t %r %l %k %a %W %K")
    assert out == ("         JOBID ST REASON TIME_LIMIT COMMENT ACCOUNT LICENSES ARRAY_TASK_ID\n"
                   "110_[30,40,50% PD JobArrayTaskLimit 30:00 hello research matlab:1 30,40,50%2\n"
                   "        110_10  R None 30:00 hello research matlab:1 10\n"
                   "        110_20  R None 30:00 hello research matlab:1 20\n")
    assert ok(capsys, MIXED, "-h", "-r", "-n", "fx_arr", "-o", "%i").split() == \
        ["110_30", "110_40", "110_50", "110_10", "110_20"]
    assert ok(capsys, MIXED, "-h", "-j", "110_40", "-o", "%i %t") == "110_40 PD\n"
    out = ok(capsys, MIXED, "-h", "-n", "fx_arr", "-O", "STDOUT:25,WorkDir:10")
    assert out.splitlines()[0] == "/srv/x/out-%A_%a.txt     /srv/x    "


def test_begin_time_from_the_submit_record(capsys, site):
    submit(site, 115, name="fx_later", begin=NOW + 3600)
    out = ok(capsys, MIXED, "-h", "-j", "115", "-o", "%i %r %S")
    assert out == "115 BeginTime 2026-11-30T10:20:00\n"


def test_ended_jobs_stay_visible_for_min_job_age(capsys, site):
    submit(site, 200, name="okjob")
    event(site, 200, None, "start", node="vm", age=70)
    event(site, 200, None, "end", exit=0, signal=0, state="COMPLETED", node="vm", start=NOW - 70, age=10)
    submit(site, 201, name="failer")
    event(site, 201, None, "end", exit=3, signal=0, state="FAILED", node="vm", start=NOW - 20, age=15)
    submit(site, 202, name="cancelpd")
    event(site, 202, None, "cancel", uid=0, user="root", was="PENDING", age=5)
    submit(site, 203, name="timeout", time=1, partition="gpu")
    event(site, 203, None, "end", exit=0, signal=15, state="TIMEOUT", node="vm", start=NOW - 100, age=12)
    submit(site, 204, name="arr", array=[1, 2, 3, 4])
    event(site, 204, 3, "end", exit=0, signal=0, state="COMPLETED", node="vm", start=NOW - 40, age=30)
    for t in (1, 2, 4):
        event(site, 204, t, "cancel", uid=0, user="root", was="PENDING", age=3)
    submit(site, 205, name="running_then_cancelled")
    event(site, 205, None, "cancel", uid=0, user="root", was="RUNNING", node="vm", start=NOW - 50, age=8)
    submit(site, 206, name="ancient")
    event(site, 206, None, "end", exit=0, signal=0, state="COMPLETED", node="vm", start=NOW - 1000, age=400)

    out = ok(capsys, EMPTY, "-t", "all")
    assert out == HEADER + """\
               202     debug cancelpd     root CA       0:00      1 
             204_1     debug      arr     root CA       0:00      1 
               205     debug running_     root CA       0:42      1 vm
               200     debug    okjob     root CD       1:00      1 vm
             204_3     debug      arr     root CD       0:10      1 vm
               201     debug   failer     root  F       0:05      1 (NonZeroExitCode)
               203       gpu  timeout     root TO       1:28      1 (TimeLimit)
"""  # (the tasks cancelled before they ran: one record, by its first index, as Slurm keeps the array's)
    # -j names an ended job: known, but not shown without -t (Slurm: header, exit 0)
    assert ok(capsys, EMPTY, "-j", "200") == HEADER
    assert ok(capsys, EMPTY, "-j", "200", "-t", "all", "-h", "-o", "%i %T %r") == "200 COMPLETED None\n"
    assert ok(capsys, EMPTY, "-t", "CD,F", "-h", "-o", "%i").split() == ["200", "204_3", "201"]
    rc, out, err = squeue(capsys, EMPTY, "-j", "206")  # beyond MinJobAge: forgotten
    assert (rc, err) == (1, "slurm_load_jobs error: Invalid job id specified\n")


def test_json_has_slurms_shape(capsys):
    out = ok(capsys, MIXED, "--json")
    doc = json.loads(out)
    ref = json.loads(CASES["squeue_json"]["stdout"])
    assert doc["meta"] == ref["meta"] and doc["errors"] == []
    assert list(doc["jobs"][0]) == list(ref["jobs"][0])
    assert "\\/" in out or "/" not in out.replace("\\/", "")
    by_id = {(j["array_job_id"] or j["job_id"], j["array_task_id"]): j for j in doc["jobs"]}
    assert {j["job_id"] for j in doc["jobs"] if j["array_task_id"] == 1} == {10000000110}  # a task's own id
    assert by_id[(105, None)]["job_state"] == "RUNNING" and by_id[(105, None)]["nodes"] == "vm"
    assert by_id[(105, None)]["time_limit"] == 60
    assert by_id[(113, None)]["state_reason"] == "Dependency"
    assert by_id[(110, 1)]["array_job_id"] == 110
    # --json ignores the filters, as Slurm 22.05 does
    assert json.loads(ok(capsys, MIXED, "--json", "-j", "105"))["jobs"] == doc["jobs"]


def test_yaml(capsys):
    out = ok(capsys, MIXED, "--yaml", "-u", "alice")
    assert out.startswith("%YAML 1.1\n--- !!map\n!!str meta: !!map\n  !!str plugin: !!map\n")
    assert "  !!str job_id: !!int 106\n" in out


# ---------------------------------------------------------------------------------------------
# the real backend: qstat started at once and read while it runs


def fake_qstat(tmp_path, script: str) -> None:
    """A ``qstat`` in a directory the site config names as Grid Engine's bin_dir."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "qstat").write_text("#!/bin/sh\n" + script)
    (bindir / "qstat").chmod(0o755)
    conf = tmp_path / "config.toml"
    conf.write_text(conf.read_text().replace("[gridengine]\n", f'[gridengine]\nbin_dir = "{bindir}"\n', 1))
    siteconf.reset()
    backends.use(None)


def test_listing_streams_from_the_real_qstat(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_SHIM_REPLAY", raising=False)
    want = {argv: ok(capsys, MIXED, *argv) for argv in [(), ("-l",), ("-t", "all", "-o", "%all"), ("--json",)]}
    # the document in bursts, as a pipe delivers it
    fake_qstat(tmp_path, f'[ "$*" = "-u * -r -xml" ] || exit 9\nhead -c 2500 {MIXED}\nsleep 0.05\n'
                         f'tail -c +2501 {MIXED} | head -c 4000\nsleep 0.05\ntail -c +6501 {MIXED}\n')
    import gc

    for argv, text in want.items():
        assert dispatch("squeue", list(argv)) == 0
        assert capsys.readouterr() == (text, "")
        assert gc.isenabled()


def test_unreachable_qmaster_through_the_stream(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_SHIM_REPLAY", raising=False)
    fake_qstat(tmp_path, "echo 'error: commlib error: got select error (Connection refused)' >&2\n"
                         "echo 'error: unable to send message to qmaster using port 6444 on host \"vm\"' >&2\nexit 1\n")
    assert dispatch("squeue", []) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("slurm_load_jobs error: Unable to contact slurm controller (connect failure): "
                   "error: unable to send message to qmaster using port 6444 on host \"vm\"\n")
    # an option error still wins over the failing qstat, as before
    rc, out, err = squeue(capsys, MIXED, "--bogus")
    assert rc == 1 and "unrecognized option" in err.lower()


def test_qstat_starts_before_the_listing_code_is_imported(tmp_path):
    """squeue spawns qstat first, and imports records, its selection and order, renderers and the
    rest while it runs."""
    import subprocess
    import sys

    fake_qstat(tmp_path, f"cat {EMPTY}\n")
    siteconf.get()  # the validated config is cached (a cold cache imports the validator)
    driver = ("import sys, shim.proc as p\n"
              "real = p.stream\n"
              "def stream(*a, **k):\n"
              "    print(sorted(m for m in ('shim.operations.jobs', 'shim.operations.jobqueue', 'shim.slurm.model', 'shim.slurm.render.squeue',\n"
              "                             'shim.slurm.render.fmt', 'xml.etree.ElementTree', 'dataclasses')\n"
              "                 if m in sys.modules))\n"
              "    return real(*a, **k)\n"
              "p.stream = stream\n"
              "from shim.__main__ import dispatch\n"
              "sys.exit(dispatch('squeue', []))\n")
    env = {k: v for k, v in os.environ.items() if k != "SLURM_SHIM_REPLAY"}
    env["PYTHONPATH"] = str(REPO / "src")  # this checkout's package, not whichever is installed
    cp = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, env=env)
    assert (cp.returncode, cp.stderr) == (0, "")
    assert cp.stdout == "[]\n" + HEADER


def test_submit_records_of_a_long_listing_come_from_one_directory_listing(capsys, site, monkeypatch):
    from shim.operations import jobs

    job = ('<job_list state="pending"><JB_job_number>{n}</JB_job_number><JAT_prio>0.5</JAT_prio><JB_name>j{n}</JB_name>'
           '<JB_owner>root</JB_owner><state>qw</state><JB_submission_time>2026-11-30T09:00:00</JB_submission_time>'
           '<queue_name></queue_name><slots>1</slots></job_list>\n')
    doc = "<job_info><queue_info></queue_info><job_info>\n" + "".join(job.format(n=n) for n in range(1, 301)) + \
        "</job_info></job_info>\n"
    for n in range(1, 301, 7):
        submit(site, n, comment=f"c{n}")
    fixture = site.parent / "long.xml"
    fixture.write_text(doc)
    want = "".join(f"{n} {f'c{n}' if n % 7 == 1 else '(null)'}\n" for n in range(1, 301))
    opened = []
    real = state.read_json
    monkeypatch.setattr(state, "read_json", lambda path, uid=None: (
        opened.append(path) if "/jobs/" in path else None) or real(path, uid))
    assert ok(capsys, fixture, "-h", "-o", "%i %k", "-S", "i") == want
    assert len(opened) < 150  # a few misses, then only the jobs that have a record
    opened.clear()
    monkeypatch.setattr(jobs.SubmitRecords, "MISSES", 10 ** 6)  # never listed: one open per job
    assert ok(capsys, fixture, "-h", "-o", "%i %k", "-S", "i") == want
    assert len(opened) == 300


# ---------------------------------------------------------------------------------------------
# records another user planted (security review F-3, F-6): the tests run as root, and a
# directory of uid 4242 stands for the attacker's own (the only place she can write)

ATTACKER = 4242


def plant(state_dir, sub: str, name: str, content: bytes | str | None = None, *, kind: str = "file",
          mtime: float | None = None, uid: int = ATTACKER):
    """A file in ``uid``'s own record directory, owned by that uid, as that user could make it."""
    d = state_dir / "users" / str(uid)
    for x in (d, d / sub):
        x.mkdir(exist_ok=True)
        os.chown(x, uid, uid)
        x.chmod(0o755)
    p = d / sub / name
    if kind == "file":
        p.write_bytes(content.encode() if isinstance(content, str) else content or b"")
        os.chown(p, uid, uid)
    elif kind == "fifo":
        os.mkfifo(p)
        os.chown(p, uid, uid)
    elif kind == "symlink":
        os.symlink(content, p)
        os.lchown(p, uid, uid)
    if mtime is not None:
        os.utime(p, (mtime, mtime), follow_symlinks=False)
    return p


@contextlib.contextmanager
def no_hang(what: str, seconds: int = 20):
    """Fail (never hang) when the body takes longer than ``seconds``: a planted FIFO must not block."""
    import signal

    signal.signal(signal.SIGALRM, lambda *a: pytest.fail(f"{what} hung on a planted file"))
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)


def plant_everything(state_dir, now: float, victim_job: int, *, victim: str = "root"):
    """Every variant of F-3 and F-6 a user can make in her own directory (and in users/)."""
    far = now + 86400 * 365
    ev = lambda job, kind="end", task="x": f"{job}.{task}.{kind}.json"  # noqa: E731
    forged_end = json.dumps({"t": now - 5, "exit": 0, "signal": 0, "state": "COMPLETED", "node": "vm"})
    forged_cancel = json.dumps({"t": now - 5, "uid": 0, "user": "root", "was": "PENDING", "owner": victim})
    plant(state_dir, "events", ev(victim_job), forged_end, mtime=now - 5)  # a: the victim's job "ended"
    plant(state_dir, "events", ev(victim_job, "cancel"), forged_cancel, mtime=now - 5)  # b
    plant(state_dir, "events", ev(victim_job, "start"), "{}", mtime=now - 5)  # d
    plant(state_dir, "jobs", f"{victim_job}.json", json.dumps({"time": "x", "array": [50, 40, 30], "user": victim,
                                                               "name": "evil"}))  # c, e
    plant(state_dir, "events", ev(888888, "cancel"), json.dumps(  # f: a job of the victim's invented
        {"t": now - 5, "owner": victim, "user": victim, "name": "crypto-miner", "cpus": 64, "was": "RUNNING",
         "start": now - 86400, "node": "vm"}), mtime=now - 5)
    plant(state_dir, "events", "².x.end.json", "{}", mtime=far)  # F-6: a Unicode digit
    plant(state_dir, "events", ev(999997), "[]", mtime=far)  # not an object
    plant(state_dir, "events", ev(999998), kind="fifo", mtime=far)  # would block an open()
    target = state_dir.parent / "someone-elses.json"
    target.write_text(forged_end)
    plant(state_dir, "events", ev(999996), str(target), kind="symlink", mtime=now - 5)  # another's file by a link
    plant(state_dir, "events", ev(999995), b"{" + b" " * (2 << 20) + b"}", mtime=now - 5)  # huge
    plant(state_dir, "events", ev(999994), b"\xff\xfe{", mtime=now - 5)  # not UTF-8
    plant(state_dir, "events", ev(999993, "cancel"), json.dumps(  # her own job, every value of a wrong type
        {"t": now - 5, "exit": "y", "signal": float("nan"), "state": 5, "start": 1e308, "was": [], "cpus": "64",
         "name": {"a": 1}, "node": 7, "owner": str(ATTACKER), "sub": "x"}), mtime=now - 5)
    plant(state_dir, "events", ev(999992), json.dumps({"t": 1e300, "exit": 10 ** 40, "signal": -(10 ** 40),
                                                       "state": "COMPLETED\x1b[2J"}), mtime=now - 5)
    plant(state_dir, "events", ev(999991), json.dumps({"t": now}), mtime=far)  # "recent" forever
    plant(state_dir, "jobs", "².json", "{}")
    plant(state_dir, "jobs", "999993.json", json.dumps({"array": "x", "throttle": [], "time": "1",
                                                        "submit_time": "x", "begin": "soon", "ntasks": None,
                                                        "mem_mb": "lots", "name": 5}))
    plant(state_dir, "jobs", "999990.json", kind="fifo")
    users = state_dir / "users"
    (users / "²").mkdir(exist_ok=True)
    os.mkfifo(users / "12345")
    os.symlink("/tmp", users / "4343")
    (users / "4444").mkdir()  # a directory of a uid not its owner's (root made it): not trusted
    (users / "4444" / "events").mkdir()
    (users / "4444" / "events" / ev(victim_job)).write_text(forged_end)


def test_another_users_records_change_nothing(capsys, site):
    submit(site, 110, name="fx_arr", array=[10, 20, 30, 40, 50], throttle=2)
    before = {args: ok(capsys, MIXED, *args) for args in [(), ("-t", "all"), ("-j", "105,110,112", "-t", "all")]}
    plant_everything(site, NOW, 105)
    plant(site, "jobs", "110.json", json.dumps({"array": [50, 40, 30, 20, 10], "throttle": 5, "user": "root"}))
    plant(site, "events", "112.x.cancel.json", json.dumps({"t": NOW - 5, "owner": "root", "was": "PENDING"}),
          mtime=NOW - 5)
    for args, out in before.items():  # her own (invented) jobs aside, the listing is what it was
        assert "".join(ln for ln in ok(capsys, MIXED, *args).splitlines(True) if f" {ATTACKER} " not in ln) == out
    assert "888888" not in ok(capsys, MIXED, "-t", "all", "-u", "root")
    rc, out, err = squeue(capsys, MIXED, "-j", "888888", "-t", "all")
    assert (rc, err) == (1, "slurm_load_jobs error: Invalid job id specified\n")


def test_planted_files_never_crash_hang_or_persist(capsys, site):
    plant_everything(site, NOW, 105)
    with no_hang("a command"):
        out = ok(capsys, MIXED, "-t", "all", "-h", "-o", "%i|%u|%T|%C|%j")
        rows = {ln.split("|")[0]: ln for ln in out.splitlines()}
        # her own job with nonsense values: listed as hers, with the nonsense left out
        assert rows["999993"] == f"999993|{ATTACKER}|CANCELLED|1|"
        assert "999991" not in rows  # a future mtime is not "recent"
        assert not {"999994", "999995", "999996", "999997", "999998", "888888"} & set(rows)
        assert ok(capsys, MIXED, "-j", "105", "-h", "-o", "%i %T") == "105 RUNNING\n"


def test_an_admins_copy_counts_only_for_the_job_it_names(capsys, site):
    """Root's directory holds root's own jobs too: root's record of an older job 106 of root's
    is not alice's job 106, but root's scontrol-update copy of alice's record is."""
    import pwd

    try:
        alice = pwd.getpwnam("alice").pw_uid
    except KeyError:
        pytest.skip("no user alice on this machine (the fixture's second user)")
    submit(site, 106, comment="roots-old-job", user="root")
    assert ok(capsys, MIXED, "-j", "106", "-h", "-o", "%k") == "(null)\n"
    submit(site, 106, comment="admin-set", user="alice")
    assert ok(capsys, MIXED, "-j", "106", "-h", "-o", "%k") == "admin-set\n"
    plant(site, "jobs", "106.json", json.dumps({"comment": "her-own", "user": "alice", "t": 1.0}), uid=alice)
    assert ok(capsys, MIXED, "-j", "106", "-h", "-o", "%k") == "admin-set\n"  # root's copy is newer


def test_slurms_printers_have_one_home():
    """render/text.py: one function per Slurm printer, shared by squeue, sinfo (and sacct/scontrol)."""
    from shim.slurm.render import sacct as sacct_view
    from shim.slurm.render import squeue as view
    from shim.slurm.render import text

    # squeue's _print_secs (src/squeue/print.c) checks the range; sinfo's does not
    assert [text.print_secs(t) for t in (0, 59, 61, 3600, 90061)] == ["0:00", "0:59", "1:01", "1:00:00", "1-01:01:01"]
    assert text.print_secs(-1) == text.print_secs(366 * 86400) == "INVALID"
    assert text.print_secs(366 * 86400, check=False) == "366-00:00:00"
    # parse_time.c's secs2time_str / mins2time_str
    assert text.secs2time_str(59) == "00:00:59" and text.secs2time_str(90061) == "1-01:01:01"
    assert text.secs2time_str(-1) == text.mins2time_str(-1) == "UNLIMITED"
    assert text.secs2time_str(-5) == "INVALID"
    assert text.mins2time_str(61) == "01:01:00" and text.mins2time_str(2 * 1440) == "2-00:00:00"
    # convert_num_unit (exact: scaled while a multiple of 512); squeue's memory printer used to keep
    # 1536 as 1536M where Slurm's _print_pn_min_memory (and sacct's twin) print 1.50G
    assert view.mem_text(1536) == "1.50G" and view.mem_text(1536, convert=False) == "1536M"
    assert [view.mem_text(v) for v in (None, 0, 100, 1024, 2048, 1000)] == ["0", "0", "100M", "1G", "2G", "1000M"]
    for mb in (1, 100, 512, 1000, 1024, 1536, 2048, 3000, 4096, 10240, 1 << 20, 3 << 19):
        assert text.convert_num_unit(mb, text.UNIT_MEGA) == sacct_view.mem_mb_text(mb), mb
    assert text.convert_num_unit(4792, text.UNIT_KILO) == "4792K"
    assert text.version_json() == {"major": 22, "micro": 8, "minor": 5}


def test_one_slurm_state_table():
    """model.SLURM_STATES is the one state vocabulary (squeue -t, %t/%T, the default listing)."""
    from shim.operations import jobs
    from shim.slurm import model

    ref = CASES["squeue_t_bad"]["stderr"]
    assert f"Valid job states include: {model.state_list()}\n" in ref  # Slurm's own order
    assert model.state_named("pd").long == model.state_named("Pending").long == "PENDING"
    assert model.state_named("OOM") == model.SlurmState("OUT_OF_MEMORY", "OOM", True)
    assert model.state_named("PENDİNG") is None and model.state_named("nope") is None  # ASCII only
    assert model.STATE_CODES["COMPLETING"] == "CG" and len(model.STATE_CODES) == 24
    assert jobs.ACTIVE_STATES is model.ACTIVE_STATES
    assert "REVOKED" not in model.ACTIVE_STATES and "COMPLETING" in model.ACTIVE_STATES
    assert {s.long for s in model.SLURM_STATES if s.ended} == {
        "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
        "OUT_OF_MEMORY", "REVOKED"}


def test_job_ids_are_read_as_slurms_squeue_reads_them(capsys):
    """squeue -j splits at commas only and reads each id with strtol (src/squeue/opts.c
    _build_job_list, shim.slurm.jobids.squeue_jobs): '105x' and '105.batch' are job 105, '105 113' is
    job 105 alone (the shim split at blanks too); --steps wants a step (_build_step_list)."""
    one = ok(capsys, MIXED, "-j", "105")
    assert ok(capsys, MIXED, "-j", "105x") == ok(capsys, MIXED, "-j", "105.batch") == one
    assert ok(capsys, MIXED, "-j", "105 113") == one
    rc, out, err = squeue(capsys, MIXED, "--steps=105")
    assert (rc, out, err) == (1, "", "squeue: error: Invalid job_step id: 105.??\n")
    assert ok(capsys, MIXED, "-h", "--steps=105.0") == ok(capsys, MIXED, "-h", "-s", "-j", "105")


def test_the_renderer_reads_no_record(capsys, monkeypatch):
    """squeue fills the submit-record detail its format and sort need before it renders (review
    1.5): no getter calls jobs.detail (nor the name service for %g); the default format needs no
    detail, so none is read."""
    from shim.operations import jobs
    from shim.slurm.render import fmt

    full = ok(capsys, MIXED, "-o", "%all")
    sorted_by_limit = ok(capsys, MIXED, "-h", "-S", "l", "-o", "%i")
    calls: list[int] = []
    rendering = []
    real_detail, real_render = jobs.detail, fmt.render_lines

    def detail(rec, cfg):
        assert not rendering, "jobs.detail called while rendering"
        calls.append(rec.job_id)
        return real_detail(rec, cfg)

    def render_lines(*a, **k):
        rendering.append(True)
        try:
            return real_render(*a, **k)
        finally:
            rendering.pop()

    real_group = jobs.group_name

    def group_name(gid):
        assert not rendering, "jobs.group_name called while rendering"
        return real_group(gid)

    monkeypatch.setattr(jobs, "detail", detail)
    monkeypatch.setattr(jobs, "group_name", group_name)
    monkeypatch.setattr(fmt, "render_lines", render_lines)
    assert ok(capsys, MIXED, "-o", "%all") == full and calls
    assert ok(capsys, MIXED, "-h", "-S", "l", "-o", "%i") == sorted_by_limit
    calls.clear()
    ok(capsys, MIXED)
    ok(capsys, MIXED, "-o", "%i %j %T %M %R")
    assert calls == []
