"""zsh completion, driven through a real interactive zsh with pexpect: the ``_<cmd>`` functions of
``completion/`` (shipped as share/zsh/site-functions, found through fpath by compinit) and the one
script ``slurm-shim completion zsh`` prints complete options from the option tables, partitions from
the site config, fixed lists (states, fields, dependency kinds), the policy commands' words and
slurm-shim's own subcommands (click).

What zsh offers is read from compadd itself: the shell's compadd is wrapped by a function that
passes every call on to the builtin and appends the matches of each call to a file, one a line
(zsh's listing on the terminal is columns and descriptions). A TAB is followed by a synchronising
command, so the widget has finished before the file is read."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pexpect
import pytest

from conftest import SITE_CONFIG, as_user_argv, run, shim_env, test_user, wait_until

pytestmark = [pytest.mark.interactive, pytest.mark.gridengine]

REPO = Path(__file__).resolve().parents[2]
PROMPT = f"SHIMZSH{os.getpid()}> "
TIMEOUT = 20
SITE = SITE_CONFIG  # (the selected cell's)

# every compadd call's matches, appended to $SHIM_CANDS (calls that only ask zsh to match, -O/-A/-D,
# pass through); then the builtin adds them as usual
WRAPPER = ("compadd() { local -i e=${@[(i)--]}; if (( ${${@[1,e-1]}[(I)-[OAD]*]} )); then "
           "builtin compadd \"$@\"; return; fi; local -a __m; builtin compadd -O __m \"$@\"; "
           "(($#__m)) && print -rl -- \"${__m[@]}\" >> $SHIM_CANDS; builtin compadd \"$@\"; }")


class Zsh:
    def __init__(self, cwd: Path, load: str, user: str | None = None, path: str | None = None):
        self.cands = cwd / f"cands-{os.getpid()}"
        env = shim_env({"TERM": "dumb", "HOME": str(cwd), "SHIM_CANDS": str(self.cands)})
        if path:
            env["PATH"] = path
        argv = ["zsh", "-f", "-i"]
        if user:
            argv = as_user_argv(user, env, ["TERM=dumb", f"HOME={cwd}", f"SHIM_CANDS={self.cands}", f"USER={user}",
                                            *argv])
        self.child = pexpect.spawn(argv[0], argv[1:], cwd=str(cwd), env=env, timeout=TIMEOUT, encoding="utf-8",
                                   dimensions=(60, 400))
        self.synced = 0
        self.do(f"PS1={PROMPT[:3]!r}{PROMPT[3:]!r}; LISTMAX=100000; unsetopt beep")
        self.do(load + " && ((${+_comps[sbatch]} && ${+_comps[sreport]})) || print NOT''LOADED")
        self.do(WRAPPER)

    def do(self, line: str) -> str:
        self.child.sendline(line)
        self.child.expect_exact(PROMPT)
        out = self.child.before
        assert "NOTLOADED" not in out and "command not found" not in out, out
        return out

    def candidates(self, text: str) -> list[str]:
        """What zsh offers after typing text and one TAB (every match, in the order added)."""
        self.cands.write_text("")
        self.cands.chmod(0o666)  # the wrapper may run as another user
        self.child.send(text + "\t")
        self.sync()
        return self.cands.read_text().splitlines()

    def completed(self, text: str) -> str:
        """The command line after typing text and one TAB. zsh removes a suffix it added (the space
        after a word, the '=' after an option) when the next key inserts nothing: a letter is typed
        (and left out of the answer) before the line is echoed back."""
        self.child.send(text + "\tQ")
        self.child.send("\x01print -r -- '[\x05]'\r")  # start of line, end of line: echo the line back
        self.child.expect(r"\r\n\[([^\r\n]*)Q\]\r\n")
        line = self.child.match.group(1)
        self.child.expect_exact(PROMPT)
        return line

    def sync(self) -> None:
        self.synced += 1
        self.child.sendcontrol("u")
        self.child.sendline(f"print SY''NC{self.synced}")
        self.child.expect(rf"\r\nSYNC{self.synced}\r\n")
        self.child.expect_exact(PROMPT)

    def close(self) -> None:
        self.child.sendline("exit")
        self.child.expect(pexpect.EOF)
        self.child.close()


FPATH = f"fpath=({REPO / 'completion'} $fpath); autoload -Uz compinit; compinit -u -D"
SOURCED = "autoload -Uz compinit; compinit -u -D; source <(slurm-shim completion zsh)"


@pytest.fixture(params=["fpath", "sourced"])
def zsh(request, workdir):
    sh = Zsh(workdir, FPATH if request.param == "fpath" else SOURCED)
    yield sh
    sh.close()


def partitions() -> list[str]:
    parts = tomllib.loads(SITE.read_text())["partitions"]
    default = next(n for n, p in parts.items() if p.get("default"))
    return [default] + [n for n in parts if n != default]


def test_options_come_from_the_option_tables(zsh):
    assert zsh.completed("sbatch --parti") == "sbatch --partition="
    assert zsh.completed("srun --ntasks-per-n") == "srun --ntasks-per-node="
    assert zsh.completed("sacct --starttim") == "sacct --starttime="
    assert sorted(zsh.candidates("squeue --st")) == ["--start", "--states", "--steps"]
    assert zsh.candidates("srun --wra") == []  # sbatch's only
    assert zsh.candidates("sbatch --multi-pro") == []  # srun's only
    assert zsh.completed("sbatch --hold --test-o") == "sbatch --hold --test-only "
    for cmd, word, want in (("sprio", "--weig", "--weights"), ("sshare", "--parsable", "--parsable2"),
                            ("sacctmgr", "--readon", "--readonly"), ("sreport", "--time-f", "--time-format")):
        assert want in zsh.candidates(f"{cmd} {word}"), cmd
    # after the script or command, its own words: no more options of sbatch/srun
    assert zsh.candidates("sbatch job.sh --parti") == []


def test_partitions_come_from_the_site_config(zsh):
    expect = partitions()
    assert len(expect) >= 2, "the CI site config has several partitions"
    assert zsh.candidates("sbatch -p ") == expect
    assert zsh.candidates("squeue --partition=") == expect
    assert zsh.candidates(f"sinfo -p {expect[0]},") == expect  # the list's next item
    assert zsh.candidates("sprio -p ") == expect
    assert zsh.completed(f"salloc --partition={expect[0][:-1]}") == f"salloc --partition={expect[0]} "


def test_fixed_lists_and_the_policy_commands_words(zsh):
    assert zsh.completed("squeue -t PENDING,RUNN") == "squeue -t PENDING,RUNNING "
    assert sorted(zsh.candidates("squeue -t COMPL")) == ["COMPLETED", "COMPLETING"]
    assert zsh.completed("squeue -O JobArr") == "squeue -O JobArrayID "
    assert sorted(zsh.candidates("sacct --format=JobID,JobI")) == ["JobID", "JobIDRaw"]
    assert zsh.completed("sbatch --mail-type=TIME_LIMIT_9") == "sbatch --mail-type=TIME_LIMIT_90 "
    assert zsh.completed("sbatch -d aftero") == "sbatch -d afterok:"  # no space: the ids follow
    assert zsh.completed("scontrol sh") == "scontrol show "
    assert "partition" in zsh.candidates("scontrol show ")
    assert zsh.candidates("scontrol show partition ") == partitions()
    assert sorted(zsh.candidates("sacctmgr ")) == ["list", "show"]
    assert zsh.candidates("sacctmgr -n show ") == ["account", "association", "qos", "user"]
    assert zsh.candidates("sreport cluster ") == ["AccountUtilizationByUser", "UserUtilizationByAccount"]
    assert zsh.completed("sreport user T") == "sreport user TopUsage "
    assert zsh.completed("slurm-shim clu") == "slurm-shim cluster "
    assert zsh.candidates("slurm-shim completion ") == ["bash", "zsh", "partitions"]


def test_job_ids_are_the_users_own(own_user, workdir, jobs):
    """The user's own held jobs (raw qsub; completion reads squeue --me), never root's."""
    mine = sorted(jobs.qsub(f"zcomp{i}", "-h", "-b", "y", "/bin/true", user=own_user) for i in range(2))
    root_job = jobs.qsub("zcomproot", "-h", "-b", "y", "/bin/true")
    wait_until(lambda: all(j in run("squeue", "-h", "-o", "%i").stdout.split() for j in (*mine, root_job)), 30,
               "squeue to list the held jobs")
    sh = Zsh(workdir, FPATH, user=own_user)
    try:
        assert sorted(sh.candidates("scancel ")) == mine
        assert sorted(sh.candidates("scontrol hold ")) == mine
        assert sorted(sh.candidates("sprio -j ")) == mine
        assert sorted(sh.candidates("sbatch --dependency=afterok:")) == mine
        assert sorted(sh.candidates(f"srun -d afterok:{mine[0]}:")) == mine
        assert sorted(sh.candidates("scontrol update JobId=")) == mine
    finally:
        sh.close()


@pytest.fixture(scope="module")
def own_user() -> str:
    return test_user("shimzcomp", "-s", "/bin/sh")


def test_candidates_are_never_expanded(tmp_path, workdir):
    """A partition name is only compared and inserted quoted: no command substitution, no glob. The
    commands beside the one being completed answer (here a fake installation's slurm-shim)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text("#!/bin/sh\nexit 0\n")
    (fake / "slurm-shim").write_text("#!/bin/sh\nprintf '%s\\n' '$(touch pwned)' '`touch pwned2`' 'd*' debug\n")
    for f in fake.iterdir():
        f.chmod(0o755)
    play = tmp_path / "play"
    play.mkdir()
    (play / "dx").write_text("")
    sh = Zsh(play, FPATH, path=f"{fake}:/usr/bin:/bin")
    try:
        assert sh.candidates("sbatch -p ") == ["$(touch pwned)", "`touch pwned2`", "d*", "debug"]
        # inserted quoted, as the words they are
        assert sh.completed("sbatch -p \\$") == "sbatch -p \\$\\(touch\\ pwned\\) "
        assert sh.completed("sbatch -p \\`") == "sbatch -p \\`touch\\ pwned2\\` "
        assert sh.completed("sbatch -p d\\*") == "sbatch -p d\\* "
    finally:
        sh.close()
    assert sorted(p.name for p in play.iterdir() if not p.name.startswith("cands-")) == ["dx"]
