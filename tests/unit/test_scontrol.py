"""scontrol on recorded Grid Engine output: the job layout of Slurm 22.05 (compared line by line
with the reference's keys), host lists, config, partitions, nodes, and the job control verbs'
Grid Engine calls, messages and exit codes."""

from __future__ import annotations

import io
import json
import os
import re
import time
from datetime import datetime

import pytest

from conftest import FIXTURES, SLURM_REF, use_site_config
from shim.gridengine import backends, names
from shim.store import records, state
from shim import siteconf
from shim.__main__ import dispatch
from listing_replay import ListingReplay
from shim.proc import Result

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
CASES = json.loads((SLURM_REF / "cases.json").read_text())
NOW = datetime(2026, 11, 30, 9, 20, 0).timestamp()


class Backend(ListingReplay):
    """Answers every ``qstat -j <ids> -xml`` with the recorded detail document."""

    def run(self, tool, args, *, input=None, timeout=None):
        if tool == "qstat" and args and args[0] == "-j" and "-xml" in args:
            self.calls.append(((tool, *args), input))
            return Result((tool, *args), 0, (SGE / "live-qstat-j-xml.mixed.xml").read_text(), "")
        return super().run(tool, args, input=input, timeout=timeout)


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path):
    use_site_config(monkeypatch, tmp_path)
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    monkeypatch.setattr(time, "time", lambda: NOW)
    siteconf.reset()
    yield tmp_path / "state"
    siteconf.reset()
    backends.use(None)


def scontrol(capsys, *argv, answers=None, qstat="live-qstat-u-all-r-xml.mixed.xml", qhost="qhost-q-xml-debug-gpu.xml"):
    b = Backend()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=(SGE / qstat).read_text())
    b.add("qhost", ["-q", "-xml"], stdout=(SGE / qhost).read_text())  # hosts and queue instances, as sinfo reads them
    b.add("qconf", ["-se", "global"], stdout=(SGE / "live-qconf-se-global.txt").read_text())
    for tool, (rc, out) in (answers or {}).items():
        b.add(tool, [], stdout=out, rc=rc)
    for tool in ("qhold", "qrls", "qmod", "qalter"):
        if tool not in (answers or {}):
            b.add(tool, [], stdout="")
    backends.use(b)
    rc = dispatch("scontrol", list(argv))
    out, err = capsys.readouterr()
    calls = [list(k) for k, _ in b.calls if not (k[0] == "qstat")]
    return rc, out, err, calls


def keys(text: str) -> list[str]:
    """The keys of a key=value layout, in order (a job without memory says MinMemoryNode=0 where the
    reference's jobs had a per-CPU default: the same slot)."""
    return [k.replace("MinMemoryNode", "MinMemoryCPU") for k in re.findall(r"(?:^|\s)([A-Za-z_/:]+)=", text)]


# ---------------------------------------------------------------------------------------------
# show job


def test_running_job_layout_matches_slurms_keys(capsys):
    rc, out, err, _ = scontrol(capsys, "show", "job", "105")
    assert (rc, err) == (0, "")
    ref = CASES["scontrol_show_job_R1"]["stdout"]
    assert keys(out) == keys(ref)
    assert out.endswith("   Power=\n   \n\n") and ref.endswith("   Power=\n   \n\n")
    lines = out.splitlines()
    assert lines[0] == "JobId=105 JobName=fx_run1"
    assert "   JobState=RUNNING Reason=None Dependency=(null)" in lines
    assert "   RunTime=00:09:41 TimeLimit=01:00:00 TimeMin=N/A" in lines
    assert "   StartTime=2026-11-30T09:10:19 EndTime=2026-11-30T10:10:19 Deadline=N/A" in lines
    assert "   NodeList=vm" in lines and "   BatchHost=vm" in lines
    assert "   Command=/bin/sleep 600" in lines
    assert "   StdOut=/root/fx_run1.o105" in lines  # Grid Engine's default file, in $HOME


def test_pending_job_layout(capsys):
    rc, out, err, _ = scontrol(capsys, "show", "job", "113")
    ref = CASES["scontrol_show_job_DEP"]["stdout"]
    assert keys(out) == keys(ref)
    assert "   JobState=PENDING Reason=Dependency Dependency=afterany:105(unfulfilled)\n" in out
    assert "   NodeList=\n" in out and "BatchHost" not in out
    assert "EligibleTime=Unknown" in out and "StartTime=Unknown EndTime=Unknown" in out


def test_begin_time_from_grid_engines_detail(capsys):
    rc, out, err, _ = scontrol(capsys, "show", "job", "115")
    assert "Reason=BeginTime" in out
    assert re.search(r"StartTime=2026-11-30T10:\d\d:00 EndTime=Unknown", out)


def test_one_liner_and_details(capsys):
    rc, out, err, _ = scontrol(capsys, "-o", "show", "job", "105")
    ref = CASES["scontrol_show_job_o_R1"]["stdout"]
    assert out.count("\n") == 1 and out.endswith(" Power= \n") and keys(out) == keys(ref)
    rc, out, err, _ = scontrol(capsys, "show", "-d", "job", "108")
    assert "   DerivedExitCode=0:0\n" in out and "   TresPerNode=gres:gpu:1\n" in out
    assert "   JOB_GRES=gpu:1\n" in out
    rc, out2, err, _ = scontrol(capsys, "-d", "show", "job", "108")
    assert out2 == out


def test_array_records(capsys):
    rc, out, err, _ = scontrol(capsys, "show", "job", "110")
    heads = [ln for ln in out.splitlines() if ln.startswith("JobId=")]
    assert heads == ["JobId=110 ArrayJobId=110 ArrayTaskId=3-5 ArrayTaskThrottle=2 JobName=fx_arr",
                     "JobId=20000000110 ArrayJobId=110 ArrayTaskId=2 ArrayTaskThrottle=2 JobName=fx_arr",
                     "JobId=10000000110 ArrayJobId=110 ArrayTaskId=1 ArrayTaskThrottle=2 JobName=fx_arr"]
    rc, out, err, _ = scontrol(capsys, "show", "job", "110_4")
    assert out.startswith("JobId=40000000110 ArrayJobId=110 ArrayTaskId=4 ArrayTaskThrottle=2 JobName=fx_arr\n")
    assert "JobState=PENDING" in out


def test_show_job_reads_its_id_as_scontrol_print_job(capsys):
    """jobids.scontrol_job (src/scontrol/info_job.c scontrol_print_job): another character than
    digits, '_' and '+' is scontrol_print_job's error; an unknown job is slurm_load_jobs'; a task or
    hetjob component the job has not is 'Job X not found' on stdout, exit 1 (-Q: silent)."""
    for bad in ("110x", "110.batch", "110_[4]", "110,112"):
        assert scontrol(capsys, "show", "job", bad)[:3] == (1, "", "scontrol_print_job error: Invalid job id "
                                                                    "specified\n"), bad
    assert scontrol(capsys, "-Q", "show", "job", "110x")[:3] == (1, "", "")
    assert scontrol(capsys, "show", "job", "999999_1")[:3] == (1, "", "slurm_load_jobs error: Invalid job id "
                                                                      "specified\n")
    assert scontrol(capsys, "show", "job", "110_99")[:3] == (1, "Job 110_99 not found\n", "")
    assert scontrol(capsys, "show", "job", "110+0")[:3] == (1, "Job 110+0 not found\n", "")
    assert scontrol(capsys, "-Q", "show", "job", "110_99")[:3] == (1, "", "")
    assert scontrol(capsys, "show", "job", "0110_04")[1].startswith("JobId=40000000110 ArrayJobId=110 ArrayTaskId=4 ")


def test_shim_record_fields(capsys, site):
    state.record_submit(str(site), 105, {"name": "fx_run1", "partition": "debug", "user": "root", "workdir": "/srv/x",
                                         "stdout": "out-%j.txt", "comment": "hello world", "account": "research",
                                         "time": 60, "ntasks": 2, "cpus_per_task": 1, "nodes": 1,
                                         "mem_per_cpu_mb": 100, "submit_time": NOW - 700, "submit_host": "vm"})
    rc, out, err, calls = scontrol(capsys, "show", "job", "105")
    assert "   Priority=1073741824 Nice=0 Account=research QOS=normal\n" in out
    assert "   SubmitTime=2026-11-30T09:08:20 EligibleTime=2026-11-30T09:08:20\n" in out
    assert "   WorkDir=/srv/x\n   Comment=hello world\n   StdErr=/srv/x/out-105.txt\n" in out
    assert "   StdOut=/srv/x/out-105.txt\n" in out
    assert "MinMemoryCPU=100M" in out and "TRES=cpu=1,mem=100M,node=1,billing=1" in out
    assert not any(c[0] == "qstat" for c in calls)  # no Grid Engine detail needed for the shim's jobs


def test_unknown_job(capsys):
    rc, out, err, _ = scontrol(capsys, "show", "job", "999999")
    ref = CASES["scontrol_show_job_unknown"]
    assert (rc, out, err) == (ref["rc"], ref["stdout"], ref["stderr"])
    rc, out, err, _ = scontrol(capsys, "show", "job", "105", "--json")
    ref = CASES["scontrol_show_job_json"]
    assert (rc, out, err) == (ref["rc"], ref["stdout"], ref["stderr"])


def test_all_jobs_and_empty_queue(capsys):
    rc, out, err, _ = scontrol(capsys, "show", "jobs")
    assert sum(1 for ln in out.splitlines() if ln.startswith("JobId=")) == 18
    rc, out, err, _ = scontrol(capsys, "show", "job", qstat="live-qstat-u-all-r-xml.empty.xml")
    assert (rc, out) == (0, "No jobs in the system\n")


def test_ended_job_is_shown_for_min_job_age(capsys, site):
    state.record_submit(str(site), 300, {"name": "exit7", "partition": "debug", "user": "root", "workdir": "/srv"})
    state.record_event(str(site), 300, None, "end", {"exit": 7, "signal": 0, "state": "FAILED", "node": "vm",
                                                     "start": NOW - 30})
    os.utime(state.record_file(str(site), "events", "300.x.end.json"), (NOW - 5, NOW - 5))
    rc, out, err, _ = scontrol(capsys, "show", "job", "300")
    assert "   JobState=FAILED Reason=NonZeroExitCode Dependency=(null)\n" in out
    assert "ExitCode=7:0" in out and "   NodeList=vm\n" in out and "RunTime=00:00:30" in out


# ---------------------------------------------------------------------------------------------
# hostnames, config, partitions, nodes


def test_hostnames_and_hostlist(capsys, monkeypatch):
    rc, out, err, _ = scontrol(capsys, "show", "hostnames", "node[01-03],gpu7")
    assert out == "node01\nnode02\nnode03\ngpu7\n"
    monkeypatch.setenv("SLURM_JOB_NODELIST", "vm,a[1-2]")
    assert scontrol(capsys, "show", "hostnames")[1] == "vm\na1\na2\n"
    assert scontrol(capsys, "show", "hostname")[1] == "vm\na1\na2\n"
    assert scontrol(capsys, "show", "hostlist", "n1,n2,n3,n5")[1] == "n[1-3,5]\n"
    assert scontrol(capsys, "show", "hostlistsorted", "n3,n1,n2")[1] == "n[1-3]\n"
    monkeypatch.delenv("SLURM_JOB_NODELIST")
    rc, out, err, _ = scontrol(capsys, "show", "hostnames")
    assert rc == 1 and err


def test_config_has_what_clients_read(capsys):
    rc, out, err, _ = scontrol(capsys, "show", "config")
    assert rc == 0 and out.startswith("Configuration data as of ")
    lines = out.splitlines()
    for want in ("MinJobAge               = 300 sec", "MaxArraySize            = 1001",
                 "ClusterName             = cluster", "SLURM_VERSION           = 22.05.8",
                 "DefMemPerCPU            = 100"):
        assert want in lines
    ref = {ln.split("=")[0].rstrip() for ln in CASES["scontrol_show_config"]["stdout"].splitlines() if " = " in ln}
    ours = {ln.split("=")[0].rstrip() for ln in lines if " = " in ln}
    assert ours <= ref
    assert lines[-1].startswith("Slurmctld(primary) at ") and lines[-1].endswith(" is UP")


def test_partitions(capsys):
    rc, out, err, _ = scontrol(capsys, "show", "partition")
    ref = CASES["scontrol_show_partition"]["stdout"]
    assert keys(out) == keys(ref)
    assert "PartitionName=gpu\n" in out and "MaxTime=2-00:00:00" in out and "DefaultTime=01:00:00" in out
    assert "   AllocNodes=ALL Default=YES QoS=N/A\n" in out
    rc, out, err, _ = scontrol(capsys, "show", "partition", "gpu")
    assert out.startswith("PartitionName=gpu\n") and "debug" not in out


def test_nodes_and_licenses(capsys):
    rc, out, err, _ = scontrol(capsys, "show", "node")
    assert out.startswith("NodeName=vm Arch=x86_64 ") and "Partitions=debug,gpu " in out
    assert keys(out) == keys(CASES["scontrol_show_node"]["stdout"])
    rc, out, err, _ = scontrol(capsys, "show", "licenses")
    assert "LicenseName=matlab\n    Total=3 Used=3 Free=0 Reserved=0 Remote=no\n" in out


# ---------------------------------------------------------------------------------------------
# job control


def test_hold_release_calls_and_messages(capsys):
    rc, out, err, calls = scontrol(capsys, "hold", "112")
    assert (rc, out, err, calls) == (0, "", "", [["qhold", "-h", "o", "112"]])  # root's: an operator hold
    assert scontrol(capsys, "uhold", "110_4")[3] == [["qhold", "110.4"]]
    assert scontrol(capsys, "release", "112", "118")[3] == [["qrls", "-h", "uo", "112", "118"]]
    assert scontrol(capsys, "release", "JobName=fx_held")[3] == [["qrls", "-h", "uo", "112"]]  # by job name
    rc, out, err, calls = scontrol(capsys, "hold", "999999")
    ref = CASES["scontrol_hold_unknown"]
    assert (rc, out, err, calls) == (ref["rc"], ref["stdout"], ref["stderr"], [])


def test_job_control_reads_its_ids_as_update_job_c(capsys):
    """hold/release/suspend/resume/requeue read their ids with jobids.scontrol_job_list
    (_is_job_id/_next_job_id): commas and blanks outside brackets separate, N_a-b and N_[a-b]
    name tasks, [a-b] a range of jobs, JobId=/Job= may lead; Name=/JobName= (or a bare word that is
    no id list) is a job name; N+h names no job on Grid Engine."""
    from shim.slurm import jobids
    from shim.slurm.jobids import JobId

    assert jobids.scontrol_job_list("7_1-3,5 [8-9]_2") == [JobId(7, tasks=(1, 2, 3)), JobId(5), JobId(8, 2),
                                                           JobId(9, 2)]
    assert jobids.scontrol_job_list("7_[1-2,4]") == [JobId(7, tasks=(1, 2, 4))]
    assert [jobids.scontrol_job_list(t) for t in ("fx_held", "7-8", "7__1", "7_[1", "7++1")] == [None] * 5
    assert scontrol(capsys, "hold", "112,118")[3] == [["qhold", "-h", "o", "112", "118"]]
    assert scontrol(capsys, "hold", "112 118")[3] == [["qhold", "-h", "o", "112", "118"]]
    assert scontrol(capsys, "hold", "JobId=112")[3] == [["qhold", "-h", "o", "112"]]
    assert scontrol(capsys, "release", "Name=fx_held")[3] == [["qrls", "-h", "uo", "112"]]
    assert scontrol(capsys, "hold", "110_[1-2]")[3] == [["qhold", "-h", "o", "110.1-2"]]
    assert scontrol(capsys, "hold", "110_1-2")[3] == [["qhold", "-h", "o", "110.1-2"]]
    rc, out, err, calls = scontrol(capsys, "hold", "112+0")
    assert (rc, calls) == (1, []) and err.startswith("Invalid job id specified for job 112+0\n")


def test_release_of_another_users_job(capsys, monkeypatch):
    from shim.operations import control

    monkeypatch.setattr(control, "caller", lambda: ("alice", 1001))
    rc, out, err, calls = scontrol(capsys, "release", "112")
    ref = CASES["scontrol_release_bob_other"]
    assert (rc, out, err, calls) == (ref["rc"], ref["stdout"], ref["stderr"].replace("120", "112"), [])


def test_suspend_resume_requeue(capsys, site):
    rc, out, err, calls = scontrol(capsys, "suspend", "105")
    assert (rc, err, calls) == (0, "", [["qmod", "-sj", "105"]])
    assert os.path.exists(state.record_file(str(site), "events", "105.x.suspend.json"))
    assert scontrol(capsys, "resume", "107")[3] == [["qmod", "-usj", "107"]]
    rc, out, err, calls = scontrol(capsys, "resume", "105")
    assert rc == 1 and calls == []
    assert scontrol(capsys, "requeue", "105")[3] == [["qmod", "-rj", "105"]]
    assert scontrol(capsys, "requeuehold", "105")[3] == [["qmod", "-rj", "105"], ["qhold", "105"]]


def test_update_time_limit_keeps_other_requests(capsys, site):
    rc, out, err, calls = scontrol(capsys, "update", "jobid=117", "TimeLimit=00:30:00")
    assert (rc, out, err) == (0, "", "")
    assert calls == [["qalter", "-l", "gpu=3,h_rt=1800", "117"]]
    rc, out, err, calls = scontrol(capsys, "update", "JobId=126", "TimeLimit=abc")
    ref = CASES["scontrol_update_bad"]
    assert (rc, out, err, calls) == (ref["rc"], ref["stdout"], ref["stderr"], [])


def test_update_shim_job_changes_its_record(capsys, site):
    state.record_submit(str(site), 112, {"name": "fx_held", "partition": "debug", "comment": "old", "time": 10})
    rc, out, err, calls = scontrol(capsys, "update", "JobId=112", "Comment=new one", "JobName=renamed x",
                                   "Partition=gpu", "TimeLimit=+5")
    assert (rc, err) == (0, "")
    assert calls == [["qalter", "-N", names.encode("renamed x"), "-q", "gpu", "-l", "h_rt=960", "112"]]
    rec = records.Reader(str(site)).submit(112, None)
    assert (rec.comment, rec.name, rec.partition, rec.time) == ("new one", "renamed x", "gpu", 15)


def test_update_refuses_what_grid_engine_cannot_do(capsys):
    rc, out, err, calls = scontrol(capsys, "update", "JobId=112", "NumNodes=3")
    assert rc == 1 and calls == [] and "NumNodes".lower() in err.lower()
    rc, out, err, calls = scontrol(capsys, "update", "JobId=999999", "Comment=x")
    assert (rc, err) == (1, "Invalid job id specified for job 999999\n")  # update_job.c: "%s for job %s"


def test_version_and_interactive_commands(capsys, monkeypatch):
    assert scontrol(capsys, "--version")[1] == "slurm-wlm 22.05.8\n"
    assert scontrol(capsys, "version")[1] == "slurm-wlm 22.05.8\n"
    monkeypatch.setattr("sys.stdin", io.StringIO("oneliner\nshow job 105\nquit\n"))
    rc, out, err, _ = scontrol(capsys)
    assert out.count("\n") == 1 and out.startswith("JobId=105 JobName=fx_run1 UserId=")
    rc, out, err, _ = scontrol(capsys, "bogus")
    assert (rc, err) == (1, "invalid keyword: bogus\n")


def test_an_admins_update_of_a_users_job_is_read_as_roots(capsys, site):
    """Root's scontrol update writes root's own copy of the owner's record; readers take it for
    the owner's job because it is newer and names the owner."""
    import pwd

    from test_squeue import plant

    try:
        alice = pwd.getpwnam("alice").pw_uid
    except KeyError:
        pytest.skip("no user alice on this machine (the fixture's second user)")
    plant(site, "jobs", "106.json", json.dumps({"name": "fx_alice", "user": "alice", "comment": "hers",
                                                 "t": NOW - 100}), uid=alice)
    rc, out, err, _ = scontrol(capsys, "update", "JobId=106", "Comment=set by the admin")
    assert (rc, err) == (0, "")
    copy = json.loads(open(state.record_file(str(site), "jobs", "106.json", 0)).read())
    assert (copy["user"], copy["comment"], copy["t"]) == ("alice", "set by the admin", NOW)
    rc, out, err, _ = scontrol(capsys, "show", "job", "106")
    assert "   Comment=set by the admin\n" in out or " Comment=set by the admin" in out


def test_planted_records_never_crash_or_hang_scontrol(capsys, site):
    from test_squeue import no_hang, plant_everything

    plant_everything(site, NOW, 105)
    with no_hang("scontrol"):
        rc, out, err, _ = scontrol(capsys, "show", "job", "105")
        assert (rc, err) == (0, "") and "JobState=RUNNING" in out
        assert scontrol(capsys, "show", "job")[0] == 0
        assert scontrol(capsys, "hold", "112")[3] == [["qhold", "-h", "o", "112"]]
        assert scontrol(capsys, "release", "112")[3] == [["qrls", "-h", "uo", "112"]]
        rc, out, err, _ = scontrol(capsys, "show", "job", "888888")
        assert (rc, err) == (1, "slurm_load_jobs error: Invalid job id specified\n")


def test_update_start_time_uses_slurms_time_grammar(capsys, site):
    """StartTime takes Slurm's whole time grammar (shim.slurm.timespec.start_time, as Slurm's
    src/scontrol/update_job.c: parse_time(val, 0), a past time becomes now). Bad text prints
    parse_time's message and changes nothing for that key; with no other change, Slurm's
    'No changes specified' (rc 1)."""
    state.record_submit(str(site), 112, {"name": "fx_held", "partition": "debug", "time": 10})
    rc, out, err, calls = scontrol(capsys, "update", "JobId=112", "StartTime=tomorrow")
    assert (rc, err) == (0, "")
    assert calls == [["qalter", "-a", datetime(2026, 12, 1, 0, 0).strftime("%Y%m%d%H%M.%S"), "112"]]
    rc, out, err, calls = scontrol(capsys, "update", "JobId=112", "StartTime=2020-01-01")  # past: now
    assert calls == [["qalter", "-a", datetime.fromtimestamp(NOW).strftime("%Y%m%d%H%M.%S"), "112"]]
    rc, out, err, calls = scontrol(capsys, "update", "JobId=112", "StartTime=now+1h")  # 'h' is no unit
    assert (rc, err, calls) == (1, "Invalid time specification (pos=4): now+1h\nNo changes specified\n", [])
    rc, out, err, calls = scontrol(capsys, "update", "JobId=112", "StartTime=bogus", "Comment=x")
    assert (rc, err, calls) == (0, "Invalid time specification (pos=0): bogus\n", [])
    assert records.Reader(str(site)).submit(112, None).comment == "x"


def test_nice_follows_slurms_rule(capsys, monkeypatch):
    """One mapping (translate.qsub.nice_priority): a higher nice is a lower Grid Engine -p; a
    negative nice is for operators (Slurm's job_mgr.c: Access/permission denied in an update)."""
    from shim.operations import control

    rc, out, err, calls = scontrol(capsys, "update", "JobId=106", "Nice=-5")  # root: an operator
    assert (rc, err, calls) == (0, "", [["qalter", "-p", "5", "106"]])
    monkeypatch.setattr(control, "caller", lambda: ("alice", 1001))
    rc, out, err, calls = scontrol(capsys, "update", "JobId=106", "Nice=-5")
    assert (rc, err, calls) == (1, "Access/permission denied for job 106\n", [])
    rc, out, err, calls = scontrol(capsys, "update", "JobId=106", "Nice=5000")
    assert (rc, err, calls) == (0, "", [["qalter", "-p", "-1023", "106"]])
    from shim.gridengine.translate.qsub import nice_priority

    assert (nice_priority(10), nice_priority(-10), nice_priority(-10, privileged=True), nice_priority(-5000, True)) \
        == (-10, None, 10, 1024)


def test_grid_engines_refusals_of_the_control_verbs(capsys):
    """Each verb reads Grid Engine's recorded refusals (fixtures/gridengine/sge-8.1.9/refusals.txt)
    with the one classifier: qmod's "no permission to modify job" and qhold's "must be at least
    owner" are Access/permission denied, a vanished job is Slurm's Invalid job id."""
    from test_scancel import recorded_refusal

    denied_qmod = recorded_refusal("qmod -sj JOB", 105)
    rc, out, err, calls = scontrol(capsys, "suspend", "105", answers={"qmod": (1, denied_qmod)})
    assert (rc, err) == (1, "Access/permission denied for job 105\n")  # scontrol_suspend's, every release
    rc, out, err, calls = scontrol(capsys, "requeue", "105", answers={"qmod": (1, denied_qmod)})
    assert (rc, err) == (1, "Access/permission denied for job 105\n")  # scontrol_requeue's "%s for job %s"
    rc, out, err, calls = scontrol(capsys, "hold", "112", answers={"qhold": (18, recorded_refusal("qhold JOB", 112))})
    assert (rc, err) == (1, "slurm_suspend error: Access/permission denied\n")
    rc, out, err, calls = scontrol(capsys, "update", "JobId=112", "JobName=x",
                                   answers={"qalter": (1, recorded_refusal("qalter -N x JOB", 112))})
    assert (rc, err) == (1, "Access/permission denied for job 112\n")
    rc, out, err, calls = scontrol(capsys, "suspend", "105", answers={"qmod": (1, 'invalid queue or job "105"')})
    assert (rc, err) == (1, "Invalid job id specified for job 105\n")


def test_a_silent_qmaster_is_slurms_controller_error_for_nodes_and_partitions(capsys):
    b = Backend()
    b.add("qhost", ["-q", "-xml"], stdout="", rc=1, stderr="error: unable to contact qmaster\n")
    backends.use(b)
    assert dispatch("scontrol", ["show", "node"]) == 1
    assert capsys.readouterr().err == ("slurm_load_node error: Unable to contact slurm controller (connect failure): "
                                       "error: unable to contact qmaster\n")
    assert dispatch("scontrol", ["show", "partition"]) == 1
    assert capsys.readouterr().err.startswith("slurm_load_partitions error: Unable to contact slurm controller")
    assert [c[0] for c in b.calls] == [("qhost", "-q", "-xml")] * 2  # one call each, the one sinfo makes


def test_scontrols_views_read_nothing():
    """render/scontrol.py formats what the command gathered: no file, record, environment or Grid
    Engine access (imports under TYPE_CHECKING aside)."""
    import ast

    import shim.slurm.render.scontrol as view

    tree = ast.parse(open(view.__file__).read())
    guarded = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and getattr(node.test, "id", "") ==
               "TYPE_CHECKING" for n in ast.walk(node)}
    mods = {(n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and id(n) not in guarded}
    mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) and id(n) not in guarded for a in n.names}
    assert not {m for m in mods if m.lstrip(".").split(".")[0] in ("os", "state", "records", "backends", "siteconf",
                                                                   "proc", "pwd", "grp", "time")}, mods
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not names & {"open", "os", "Reader"}


def test_show_step_reads_its_id_as_scontrol_print_step(capsys):
    """jobids.scontrol_step (info_job.c scontrol_print_step: strtol, then _index or .step); the
    renderer gets the chosen jobs and reads no id."""
    rc, out, err, _ = scontrol(capsys, "show", "step")
    every = [ln.split()[0] for ln in out.splitlines() if ln.startswith("StepId=")]
    assert (rc, " ".join(every)) == (0, "StepId=105.batch StepId=106.batch StepId=107.batch StepId=108.batch "
                                        "StepId=109.batch StepId=110_1.batch StepId=110_2.batch StepId=119_2.batch")

    def shown(*argv):
        return [ln.split()[0] for ln in scontrol(capsys, "show", "step", *argv)[1].splitlines() if ln.startswith("StepId=")]

    for text in ("105", "105x", "105.batch", "105.0", "0105"):
        assert shown(text) == ["StepId=105.batch"], text
    assert shown("110") == ["StepId=110_1.batch", "StepId=110_2.batch"]
    assert shown("110_2") == ["StepId=110_2.batch"] and shown("110_4") == []  # (110_4 is pending)
    assert scontrol(capsys, "show", "step", "999999")[1] == "No job steps in the system\n"


def test_update_argv_of_every_field_through_translate_alter(capsys, site):
    """scontrol update's qalter argv and messages, as recorded before the mapping moved to
    translate.alter: every field in one update, and a Partition change of a running job (refused
    with Slurm's error, the rest still sent)."""
    state.record_submit(str(site), 112, {"name": "fx_held", "partition": "debug", "time": 10})
    rc, out, err, calls = scontrol(capsys, "update", "JobId=112", "Partition=debug", "Nice=3", "Account=acc",
                                   "JobName=n", "TimeLimit=5", "StartTime=tomorrow")
    assert (rc, err) == (0, "")
    assert calls == [["qalter", "-q", "debug", "-p", "-3", "-A", "acc", "-N", "n", "-l", "h_rt=360",
                      "-a", "202612010000.00", "112"]]
    rec = records.Reader(str(site)).submit(112, None)
    assert (rec.partition, rec.nice, rec.account, rec.name, rec.time, rec.begin) == \
        ("debug", 3, "acc", "n", 5, datetime(2026, 12, 1).timestamp())
    rc, out, err, calls = scontrol(capsys, "update", "JobId=105", "Partition=gpu", "JobName=zz")
    assert (rc, err, calls) == (1, "scontrol: error: Job is no longer pending execution for job 105\n",
                                [["qalter", "-N", "zz", "105"]])
    rc, out, err, calls = scontrol(capsys, "update", "JobId=105", "TimeLimit=+1:00:00")  # no shim record: h_rt only
    assert (rc, err, calls) == (0, "", [["qalter", "-l", "h_rt=7200", "105"]])
