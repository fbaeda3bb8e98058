"""Bash completion, driven through a real interactive bash with pexpect: the script `slurm-shim
completion bash` prints (the one shipped as share/bash-completion/completions) completes options
from the option tables, partitions from the site config, the user's own job ids from squeue,
--format/-O field names, squeue -t states and slurm-shim's own subcommands (click).

Each TAB is followed by either a list of candidates (readline set to one per line, shown at once)
or an in-place completion, which the test reads back by turning the edited line into an echo."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pexpect
import pytest

from conftest import SITE_CONFIG, as_user_argv, run, shim_env, test_user, wait_until

pytestmark = [pytest.mark.interactive, pytest.mark.gridengine]

PROMPT = f"SHIMCOMP{os.getpid()}> "
TIMEOUT = 20
SITE = SITE_CONFIG  # (the selected cell's)


class Shell:
    def __init__(self, user: str | None, cwd: Path):
        env = shim_env({"PS1": PROMPT, "TERM": "dumb", "INPUTRC": "/dev/null", "HOME": str(cwd)})
        argv = ["bash", "--norc", "--noprofile", "-i"]
        if user:
            argv = as_user_argv(user, env, [f"PS1={PROMPT}", "TERM=dumb", "INPUTRC=/dev/null", f"HOME={cwd}",
                                            f"USER={user}", *argv])
        self.child = pexpect.spawn(argv[0], argv[1:], cwd=str(cwd), env=env, timeout=TIMEOUT, encoding="utf-8",
                                   dimensions=(40, 400))
        self.child.expect_exact(PROMPT)
        self.synced = 0
        for setting in ("show-all-if-ambiguous on", "completion-query-items 0", "page-completions off",
                        "completion-display-width 0", "bell-style none"):
            self.do(f"bind 'set {setting}'")
        # one line, so that a failure shows slurm-shim's own error too
        self.do("source <(slurm-shim completion bash); complete -p sbatch squeue slurm-shim >/dev/null || echo NOT'LOADED'")

    def do(self, line: str) -> str:
        self.child.sendline(line)
        self.child.expect_exact(PROMPT)
        out = self.child.before
        assert "NOTLOADED" not in out, out
        return out

    def completed(self, text: str) -> str:
        """The command line after typing text and one TAB."""
        self.child.send(text + "\t")
        self.child.send("\x01echo '[\x05]'\r")  # start of line, end of line: the line is echoed back
        self.child.expect(r"\r\n\[([^\r\n]*)\]\r\n")
        line = self.child.match.group(1)
        self.sync()
        return line

    def candidates(self, text: str) -> list[str]:
        """The candidates listed after typing text and one TAB (several of them)."""
        self.child.send(text + "\t")
        self.child.expect_exact(PROMPT)  # redisplayed after the list
        listing = [w.strip() for w in self.child.before.split("\r\n")[1:] if w.strip()]
        self.sync()
        return listing

    def sync(self) -> None:
        """Drop the typed line and wait until the shell has answered everything sent so far."""
        self.synced += 1
        self.child.sendcontrol("u")
        self.child.sendline(f"echo SY''NC{self.synced}")
        self.child.expect(rf"\r\nSYNC{self.synced}\r\n")
        self.child.expect_exact(PROMPT)

    def close(self) -> None:
        self.child.sendline("exit")
        self.child.expect(pexpect.EOF)
        self.child.close()


@pytest.fixture
def shell(workdir):
    sh = Shell(None, workdir)
    yield sh
    sh.close()


def test_options_come_from_the_option_tables(shell):
    assert shell.completed("sbatch --parti") == "sbatch --partition "
    assert shell.completed("srun --ntasks-per-n") == "srun --ntasks-per-node "
    assert shell.completed("sacct --starttim") == "sacct --starttime "
    assert shell.candidates("squeue --st") == ["--start", "--states", "--steps"]
    # an sbatch-only option is not offered to srun, nor srun's own to sbatch
    assert shell.completed("srun --wra") == "srun --wra"
    assert shell.completed("sbatch --multi-pro") == "sbatch --multi-pro"


def test_partitions_come_from_the_site_config(shell):
    parts = tomllib.loads(SITE.read_text())["partitions"]
    default = next(n for n, p in parts.items() if p.get("default"))
    expect = sorted(parts)
    assert len(expect) >= 2, "the CI site config has several partitions"
    assert sorted(shell.candidates("sbatch -p ")) == expect
    assert sorted(shell.candidates("squeue --partition=")) == expect
    assert sorted(shell.candidates(f"sinfo -p {default},")) == [f"{default},{n}" for n in expect]
    assert shell.completed(f"salloc --part={default[:-1]}") == f"salloc --part={default} "


def test_states_and_format_fields(shell):
    assert shell.completed("squeue -t PENDING,RUNN") == "squeue -t PENDING,RUNNING "
    assert shell.completed("squeue --states=out_") == "squeue --states=out_"  # states are Slurm's upper case
    assert shell.candidates("squeue -t COMPL") == ["COMPLETED", "COMPLETING"]
    assert shell.completed("squeue -O JobArr") == "squeue -O JobArrayID "
    assert shell.completed("squeue --Format=JobArrayID,Partit") == "squeue --Format=JobArrayID,Partition "
    assert shell.candidates("sacct --format=JobID,JobI") == ["JobID,JobID", "JobID,JobIDRaw"]
    assert shell.completed("sacct -s CANCEL") == "sacct -s CANCELLED "
    assert shell.completed("sbatch --mail-type=TIME_LIMIT_9") == "sbatch --mail-type=TIME_LIMIT_90 "


def test_positional_words(shell, workdir):
    (workdir / "job-script.sh").write_text("#!/bin/sh\ntrue\n")
    assert shell.completed("sbatch --wait job-scr") == "sbatch --wait job-script.sh "
    # after the script its own arguments: no sbatch options, files
    assert shell.completed("sbatch job-script.sh --parti") == "sbatch job-script.sh --parti"
    assert shell.completed("sbatch -p debug job-script.sh job-s") == "sbatch -p debug job-script.sh job-script.sh "
    assert "hostname" in shell.candidates("srun -n 1 hostnam")  # a command (hostname, hostnamectl)
    assert shell.completed("srun -n 1 hostname job-scr") == "srun -n 1 hostname job-script.sh "
    assert shell.completed("scontrol sh") == "scontrol show "
    assert "partition" in shell.candidates("scontrol show ")
    assert shell.completed("slurm-shim clu") == "slurm-shim cluster "
    assert shell.candidates("slurm-shim cluster ") == ["up", "down", "status"]
    assert shell.completed("slurm-shim completion ba") == "slurm-shim completion bash "
    assert shell.completed("slurm-shim completion z") == "slurm-shim completion zsh "
    assert shell.completed("slurm-shim explain --parti") == "slurm-shim explain --partition "  # sbatch's
    assert shell.completed("slurm-shim explain -N 2 job-scr") == "slurm-shim explain -N 2 job-script.sh "


def test_the_policy_commands(shell):
    """sprio, sshare, sacctmgr and sreport (issue 20): their own option tables and words."""
    parts = tomllib.loads(SITE.read_text())["partitions"]
    assert shell.completed("sprio --weig") == "sprio --weights "
    assert sorted(shell.candidates("sprio -p ")) == sorted(parts)
    assert shell.candidates("sshare --parsable") == ["--parsable", "--parsable2"]
    assert shell.completed("sacctmgr --readon") == "sacctmgr --readonly "
    assert shell.candidates("sacctmgr ") == ["list", "show"]  # (readline sorts)
    assert shell.completed("sacctmgr -n show asso") == "sacctmgr -n show association "
    assert shell.completed("sreport --time-f") == "sreport --time-format "
    assert shell.candidates("sreport cluster ") == ["AccountUtilizationByUser", "UserUtilizationByAccount"]
    assert shell.completed("sreport user T") == "sreport user TopUsage "


@pytest.fixture(scope="module")
def own_user() -> str:
    """A user of this module's own: the only jobs it has are the ones the test submits."""
    return test_user("shimcomp")


def test_job_ids_are_the_users_own(own_user, workdir, jobs):
    """The user's own held jobs (raw qsub: completion reads squeue, whoever submitted), never root's."""
    mine = sorted(jobs.qsub(f"comp{i}", "-h", "-b", "y", "/bin/true", user=own_user) for i in range(2))
    root_job = jobs.qsub("comproot", "-h", "-b", "y", "/bin/true")
    wait_until(lambda: all(j in run("squeue", "-h", "-o", "%i").stdout.split() for j in (*mine, root_job)), 30,
               "squeue to list the held jobs")
    sh = Shell(own_user, workdir)
    try:
        assert sh.candidates("scancel ") == mine  # not root's job
        assert sh.candidates("scontrol show job ") == mine
        assert sh.candidates("squeue -j ") == mine
        assert sh.candidates("sprio -j ") == mine
        assert sh.candidates("scontrol update JobId=") == mine
        assert sh.candidates(f"sacct -j {mine[0]},") == [f"{mine[0]},{j}" for j in mine]
        assert sh.completed(f"scontrol hold {mine[1]}") == f"scontrol hold {mine[1]} "
        assert sh.candidates("sbatch --dependency=afterok:") == mine  # after ':', a word break
        assert sh.candidates(f"srun -d afterok:{mine[0]},afterany:") == mine
        assert sh.completed("sbatch -d aftero") == "sbatch -d afterok:"  # no space: the ids follow
    finally:
        sh.close()
