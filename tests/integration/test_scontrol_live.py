"""scontrol against the live Grid Engine: show job/partition/node/config/hostnames, and hold,
release, suspend, resume, update on real jobs (raw qsub, deleted at the end)."""

from __future__ import annotations

import re

import pytest

from conftest import run, wait_until

pytestmark = pytest.mark.gridengine

SLEEP = ["-b", "y", "/bin/sleep"]




def scontrol(*argv: str, user: str | None = None, env=None):
    return run("scontrol", *argv, user=user, env=env)


def field(text: str, key: str) -> str:
    m = re.search(rf"(?:^|\s){re.escape(key)}=(\S*)", text)
    assert m, f"{key} not in {text!r}"
    return m.group(1)


def test_show_job_running_and_pending(jobs):
    runj = jobs.qsub("run", "-q", "gpu", "-l", "h_rt=3600", *SLEEP, "300")
    pend = jobs.qsub("pend", "-q", "debug", "-h", "-cwd", *SLEEP, "300")
    wait_until(lambda: jobs.ge(runj) == ["r"], 60, "running")
    cp = scontrol("show", "job", runj)
    assert cp.returncode == 0, cp.stderr
    out = cp.stdout
    assert out.startswith(f"JobId={runj} JobName={jobs.name('run')}\n   UserId=root(0) GroupId=root(0)")
    assert (field(out, "JobState"), field(out, "Partition"), field(out, "TimeLimit")) == ("RUNNING", "gpu", "01:00:00")
    assert field(out, "NodeList") == field(out, "BatchHost") != ""
    assert field(out, "Command") == "/bin/sleep" and out.endswith("   Power=\n   \n\n")
    out = scontrol("show", "job", pend).stdout
    assert (field(out, "JobState"), field(out, "Reason")) == ("PENDING", "JobHeldUser")
    assert field(out, "WorkDir") == "/tmp" and field(out, "StdOut") == f"/tmp/{jobs.name('pend')}.o{pend}"
    one = scontrol("-o", "show", "job", pend).stdout
    assert one.count("\n") == 1 and one.startswith(f"JobId={pend} ")
    cp = scontrol("show", "job", "999999")
    assert (cp.returncode, cp.stdout, cp.stderr) == (1, "", "slurm_load_jobs error: Invalid job id specified\n")


def test_hold_release_and_update(jobs):
    jid = jobs.qsub("hold", "-q", "debug", "-h", "-l", "h_rt=600", *SLEEP, "300")
    assert scontrol("release", jid).returncode == 0
    wait_until(lambda: jobs.ge(jid) and jobs.ge(jid)[0] in ("qw", "r", "t"), 30, "released")
    if jobs.ge(jid) == ["qw"]:
        assert scontrol("hold", jid).returncode == 0
    jid2 = jobs.qsub("upd", "-q", "debug", "-h", "-l", "h_rt=600", *SLEEP, "300")
    cp = scontrol("update", f"JobId={jid2}", "TimeLimit=00:30:00", "JobName=renamed")
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", "")
    out = run("squeue", "-h", "-j", jid2, "-o", "%j %l").stdout
    assert out == "renamed 30:00\n"
    cp = scontrol("update", f"JobId={jid2}", "TimeLimit=abc")
    assert (cp.returncode, cp.stderr) == (1, "scontrol: error: Invalid TimeLimit value\n")
    cp = scontrol("hold", "999999")
    assert (cp.returncode, cp.stderr) == (1, "Invalid job id specified for job 999999\n"
                                             "slurm_suspend error: Invalid job id specified\n")
    cp = scontrol("release", jid2, user="alice")
    assert (cp.returncode, cp.stderr) == (1, f"Invalid user id for job {jid2}\nslurm_suspend error: Invalid user id\n")


def test_roots_hold_is_an_admin_hold_its_owner_cannot_release(jobs, plain_user):
    """root's scontrol hold of a user's job is Grid Engine's operator hold: squeue and scontrol say
    JobHeldAdmin at priority 0 (to the owner too), the owner's release is refused and leaves it held,
    the owner's hold changes nothing, and root's release lifts it, as real 22.05.8, 24.11.5 and
    26.05.5 do (fixtures/slurm-*/oracle-hold.txt)."""
    jid = jobs.qsub("ahold", "-q", "debug", "-a", "203001010000", "-l", "h_rt=600", *SLEEP, "300", user=plain_user)
    cp = scontrol("hold", jid)
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", "")
    wait_until(lambda: jobs.ge(jid) == ["hqw"], 30, "held")
    assert run("squeue", "-h", "-j", jid, "-o", "%T|%r|%R|%Q").stdout == "PENDING|JobHeldAdmin|(JobHeldAdmin)|0\n"
    out = scontrol("show", "job", jid).stdout
    assert (field(out, "JobState"), field(out, "Reason"), field(out, "Priority")) == ("PENDING", "JobHeldAdmin", "0")
    assert run("squeue", "-h", "-j", jid, "-o", "%r", user=plain_user).stdout == "JobHeldAdmin\n"
    cp = scontrol("release", jid, user=plain_user)
    assert (cp.returncode, cp.stdout) == (1, "") and re.fullmatch(
        rf"Access/permission denied for job {jid}\nslurm_suspend error: ?Access/permission denied\n", cp.stderr), cp.stderr
    cp = scontrol("hold", jid, user=plain_user)
    assert (cp.returncode, cp.stderr) == (0, "")
    assert jobs.ge(jid) == ["hqw"]
    assert run("squeue", "-h", "-j", jid, "-o", "%r", user=plain_user).stdout == "JobHeldAdmin\n"
    cp = scontrol("release", jid)
    assert (cp.returncode, cp.stderr) == (0, "")
    wait_until(lambda: jobs.ge(jid) == ["qw"], 30, "both holds lifted by root's release")


def test_suspend_resume(jobs):
    jid = jobs.qsub("susp", "-q", "debug", *SLEEP, "300")
    wait_until(lambda: jobs.ge(jid) == ["r"], 60, "running")
    assert scontrol("suspend", jid).returncode == 0
    wait_until(lambda: jobs.ge(jid) == ["s"], 30, "suspended")
    assert field(scontrol("show", "job", jid).stdout, "JobState") == "SUSPENDED"
    assert scontrol("resume", jid).returncode == 0
    wait_until(lambda: jobs.ge(jid) == ["r"], 30, "resumed")


def test_hostnames_config_partitions_nodes():
    assert scontrol("show", "hostnames", "vm[1-3],x").stdout == "vm1\nvm2\nvm3\nx\n"
    assert scontrol("show", "hostnames", env={"SLURM_JOB_NODELIST": "n[01-02]"}).stdout == "n01\nn02\n"
    assert scontrol("show", "hostlist", "n1,n2,n3").stdout == "n[1-3]\n"
    cfg = scontrol("show", "config").stdout
    assert "MinJobAge               = 300 sec\n" in cfg and "MaxArraySize            = 1001\n" in cfg
    parts = scontrol("show", "partition").stdout
    assert parts.startswith("PartitionName=debug\n") and "PartitionName=gpu\n" in parts
    assert "Nodes=vm\n" in parts and "State=UP" in parts
    nodes = scontrol("show", "node").stdout
    # (the two-host tests' second execution host may be up for the session: it is listed too)
    mine = [b for b in nodes.split("\n\n") if b.startswith("NodeName=vm ")]
    assert len(mine) == 1 and "Partitions=debug,gpu " in mine[0], nodes
    assert scontrol("ping").stdout.endswith(" is UP\n")
