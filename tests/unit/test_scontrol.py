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
from shim import backends, records, siteconf, state
from shim.__main__ import dispatch
from shim.backends.replay import ReplayBackend
from shim.proc import Result

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
CASES = json.loads((SLURM_REF / "cases.json").read_text())
NOW = datetime(2026, 11, 30, 9, 20, 0).timestamp()


class Backend(ReplayBackend):
    """Answers every ``qstat -j <ids> -xml`` with the recorded detail document."""

    def run(self, tool, args, *, input=None, timeout=None):
        if tool == "qstat" and args and args[0] == "-j":
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


def scontrol(capsys, *argv, answers=None, qstat="live-qstat-u-all-r-xml.mixed.xml"):
    b = Backend()
    b.add("qstat", ["-u", "*", "-r", "-xml"], stdout=(SGE / qstat).read_text())
    b.add("qstat", ["-f", "-xml"], stdout=(SGE / "live-qstat-f-xml.xml").read_text())
    b.add("qhost", ["-xml"], stdout=(SGE / "live-qhost-xml.xml").read_text())
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
                     "JobId=110 ArrayJobId=110 ArrayTaskId=2 ArrayTaskThrottle=2 JobName=fx_arr",
                     "JobId=110 ArrayJobId=110 ArrayTaskId=1 ArrayTaskThrottle=2 JobName=fx_arr"]
    rc, out, err, _ = scontrol(capsys, "show", "job", "110_4")
    assert out.startswith("JobId=110 ArrayJobId=110 ArrayTaskId=4 ArrayTaskThrottle=2 JobName=fx_arr\n")
    assert "JobState=PENDING" in out


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
    os.utime(site / "users" / str(os.getuid()) / "events" / "300.x.end.json", (NOW - 5, NOW - 5))
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
    assert (rc, out, err, calls) == (0, "", "", [["qhold", "112"]])
    assert scontrol(capsys, "uhold", "110_4")[3] == [["qhold", "110.4"]]
    assert scontrol(capsys, "release", "112", "118")[3] == [["qrls", "112", "118"]]
    assert scontrol(capsys, "release", "fx_held")[3] == [["qrls", "112"]]  # by job name
    rc, out, err, calls = scontrol(capsys, "hold", "999999")
    ref = CASES["scontrol_hold_unknown"]
    assert (rc, out, err, calls) == (ref["rc"], ref["stdout"], ref["stderr"], [])


def test_release_of_another_users_job(capsys, monkeypatch):
    import shim.cli.scontrol as cli

    monkeypatch.setattr(cli, "_me", lambda: ("alice", 1001))
    rc, out, err, calls = scontrol(capsys, "release", "112")
    ref = CASES["scontrol_release_bob_other"]
    assert (rc, out, err, calls) == (ref["rc"], ref["stdout"], ref["stderr"].replace("120", "112"), [])


def test_suspend_resume_requeue(capsys, site):
    rc, out, err, calls = scontrol(capsys, "suspend", "105")
    assert (rc, err, calls) == (0, "", [["qmod", "-sj", "105"]])
    assert (site / "users" / str(os.getuid()) / "events" / "105.x.suspend.json").exists()
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
    assert calls == [["qalter", "-N", "sx_ojsw4ylnnzsca6a", "-q", "gpu", "-l", "h_rt=960", "112"]] or \
        calls[0][0] == "qalter"
    args = calls[0]
    assert args[args.index("-q") + 1] == "gpu" and args[args.index("-l") + 1] == "h_rt=960"
    rec = records.Reader(str(site)).submit(112, None)
    assert (rec["comment"], rec["name"], rec["partition"], rec["time"]) == ("new one", "renamed x", "gpu", 15)


def test_update_refuses_what_grid_engine_cannot_do(capsys):
    rc, out, err, calls = scontrol(capsys, "update", "JobId=112", "NumNodes=3")
    assert rc == 1 and calls == [] and "NumNodes".lower() in err.lower()
    rc, out, err, calls = scontrol(capsys, "update", "JobId=999999", "Comment=x")
    assert (rc, err) == (1, "slurm_update error: Invalid job id specified\n")


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
    copy = json.loads((site / "users" / "0" / "jobs" / "106.json").read_text())
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
        assert scontrol(capsys, "hold", "112")[3] == [["qhold", "112"]]
        assert scontrol(capsys, "release", "112")[3] == [["qrls", "112"]]
        rc, out, err, _ = scontrol(capsys, "show", "job", "888888")
        assert (rc, err) == (1, "slurm_load_jobs error: Invalid job id specified\n")
