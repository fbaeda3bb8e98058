"""Security review 3, F-20, F-27 and F-32 off the cluster: which queue tmpdir doctor and install
accept, the kernel settings doctor names, the TMPDIR the job wrapper trusts (never through a link,
never one others could have made), output files opened where others may plant a name, and the
installation install --apply puts on every login's PATH. Real files and directories in tmp_path
(root's, as CI runs); the live attacks are tests/security/test_tmpdir_attacks.py."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import sys

import pytest

from shim.admin import cluster, install
from shim.cli import admin
from shim import config
from shim.store import state
from shim.runtime import jobwrap, outfile

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="owners are root's and another uid's (CI runs as root)")
OTHER = 54321  # a uid of nobody's: "another user"


def tree(base, mode=0o755, uid=0):
    base.mkdir(parents=True, exist_ok=True)
    os.chown(base, uid, 0)
    os.chmod(base, mode)
    return base


# --- the queue tmpdir: doctor and install --------------------------------------------------------------


@root_only
def test_a_tmpdir_counts_as_safe_only_where_root_alone_makes_names(tmp_path):
    top = tree(tmp_path / "top")  # (tmp_path: root's, 0700, under the sticky /tmp)
    assert cluster.unsafe_dir(str(top)) is None
    assert cluster.unsafe_dir(str(top / "not-yet")) is None  # execd makes it, as root
    assert cluster.unsafe_dir("/tmp") == "/tmp is writable by others (mode 1777)"
    assert cluster.unsafe_dir("/tmp/slurm-shim-test-none") == ("/tmp/slurm-shim-test-none does not exist, and "
                                                               "others can make it in /tmp")
    sticky = tree(tmp_path / "sticky", 0o1777)
    assert cluster.unsafe_dir(str(sticky)) == f"{sticky} is writable by others (mode 1777)"
    assert cluster.unsafe_dir(str(tree(sticky / "roots"))) is None  # nobody renames root's entry there
    assert cluster.unsafe_dir(str(tree(top / "group", 0o775))) == f"{top}/group is writable by others (mode 775)"
    assert cluster.unsafe_dir(str(tree(top / "hers", 0o755, OTHER))) == f"{top}/hers belongs to uid {OTHER}, not root"
    good = top / "link"
    good.symlink_to(top)
    assert cluster.unsafe_dir(str(good)) is None  # root's link: judged by its target
    bad = top / "herlink"
    bad.symlink_to(top)
    os.lchown(bad, OTHER, 0)
    assert cluster.unsafe_dir(str(bad / "x")) == f"{bad} is a link of uid {OTHER}"
    (top / "file").write_text("")
    assert cluster.unsafe_dir(str(top / "file")) == f"{top}/file is not a directory"
    assert cluster.unsafe_dir("relative") == "relative is not an absolute path"


def test_a_queue_tmpdir_with_host_overrides_is_read_per_host():
    assert cluster.host_values("/tmp") == {"": "/tmp"}
    assert cluster.host_values("/var/spool/slurm-shim-tmp,[node2=/var/spool/slurm-shim-tmp/node2]") == {
        "": "/var/spool/slurm-shim-tmp", "node2": "/var/spool/slurm-shim-tmp/node2"}
    assert cluster.host_values("/a, [h1 = /b],[h2=/c]") == {"": "/a", "h1": "/b", "h2": "/c"}


@root_only
def test_doctor_fails_a_queue_whose_tmpdir_others_can_write_and_names_the_fix(tmp_path):
    safe = tree(tmp_path / "safe")
    cfg = config.SiteConfig()
    facts = cluster.Facts(tmpdirs={"debug": "/tmp", "gpu": str(safe), "twohost": f"{safe},[node2=/tmp]"})
    found = [f for f in cluster.doctor_findings(cfg, facts, "site.toml") if "tmpdir" in f.what]
    assert [(f.level, f.what.split(":")[0]) for f in found] == [
        ("FAIL", "queue debug"), ("ok", "queue gpu"), ("ok", "queue twohost"), ("FAIL", "queue twohost@node2")]
    assert found[0].what == ("queue debug: tmpdir /tmp: /tmp is writable by others (mode 1777): anyone can plant "
                             "<tmpdir>/<job>.<task>.<queue>, which Grid Engine's execd chowns to the job's owner "
                             "and removes as root, following links")
    assert found[0].fix == ("install -d -o root -g root -m 0755 /var/spool/slurm-shim-tmp on every exec host; "
                            "qconf -mattr queue tmpdir /var/spool/slurm-shim-tmp debug")
    assert found[3].fix.endswith("qconf -mattr queue tmpdir /var/spool/slurm-shim-tmp/node2 twohost@node2")
    assert found[1].line() == f"ok    queue gpu: tmpdir {safe} is root's and only root can write in it"


def test_doctor_reads_every_queues_tmpdir_not_only_the_partitions():
    answers = {("-sql",): "debug\nother.q\n", ("-sq", "debug"): "qname debug\ntmpdir /var/spool/slurm-shim-tmp\n",
               ("-sq", "other.q"): "qname other.q\ntmpdir /tmp\n"}
    cfg = config.parse('[partitions.debug]\nqueue = "debug"\ndefault = true\n', "t")
    facts = cluster.gather_facts(cfg, lambda *args: answers.get(args, ""))
    assert facts.tmpdirs == {"debug": "/var/spool/slurm-shim-tmp", "other.q": "/tmp"}


def test_doctor_names_each_kernel_link_protection_that_is_off(tmp_path):
    fs = tmp_path / "fs"
    fs.mkdir()
    (fs / "protected_symlinks").write_text("0\n")
    (fs / "protected_regular").write_text("2\n")
    found = cluster.kernel_findings(str(tmp_path))
    assert [(f.level, f.what.split(":")[0] + ":" + f.what.split(":")[1]) for f in found] == [
        ("FAIL", "kernel: fs.protected_symlinks is 0"), ("ok", "kernel: fs.protected_regular is 2")]
    assert found[0].fix.startswith("sysctl -w fs.protected_symlinks=1") and "never changes it" in found[0].fix
    (fs / "protected_regular").write_text("0\n")
    assert [f.level for f in cluster.kernel_findings(str(tmp_path))] == ["FAIL", "FAIL"]
    (fs / "protected_symlinks").unlink()
    assert [f.what.split(" is ")[0] for f in cluster.kernel_findings(str(tmp_path))] == ["kernel: fs.protected_regular"]


@root_only
def test_the_host_check_job_fails_a_tmpdir_in_a_directory_others_can_write(tmp_path):
    import shim

    src = os.path.dirname(os.path.dirname(os.path.abspath(shim.__file__)))
    script = cluster.host_check_script(sys.executable, src, None, "").split("\n", 1)[1]
    sticky = tree(tmp_path / "sticky", 0o1777)
    roots = tree(tmp_path / "roots")

    def code(tmpdir):
        env = {"PATH": "/usr/bin:/bin", **({"TMPDIR": tmpdir} if tmpdir else {})}
        return subprocess.run(["/bin/sh", "-c", script], cwd="/", env=env, capture_output=True).returncode

    assert code(str(tree(roots / "5.1.debug"))) == 0
    assert code(str(tree(sticky / "5.1.debug"))) == 17
    assert code(None) == 0  # (no tmpdir at all: nothing to plant)
    assert "tmpdir" in cluster.HOST_PROBLEMS[17] and cluster.TMPDIR_BASE in cluster.HOST_FIXES[17]


@root_only
def test_cluster_up_makes_the_tmpdir_base_roots_and_never_reuses_someone_elses(tmp_path):
    base = tmp_path / "tmpbase"
    assert cluster.ensure_tmpdir_base(str(base)) is True
    st = os.lstat(base)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
    assert cluster.ensure_tmpdir_base(str(base)) is False
    os.chmod(base, 0o777)
    assert cluster.ensure_tmpdir_base(str(base)) is True and stat.S_IMODE(os.lstat(base).st_mode) == 0o755
    os.chown(base, OTHER, 0)
    with pytest.raises(cluster.ClusterError, match=f"is not a directory of root's \\(uid {OTHER}\\)"):
        cluster.ensure_tmpdir_base(str(base))
    assert cluster.queue("debug", 8)["tmpdir"] == cluster.TMPDIR_BASE == "/var/spool/slurm-shim-tmp"


# --- the job wrapper's TMPDIR ----------------------------------------------------------------------------


@root_only
def test_the_wrapper_trusts_tmpdir_only_as_its_own_real_directory_in_one_of_roots(tmp_path):
    base = tree(tmp_path / "base")
    job = tree(base / "7.1.debug", 0o755, OTHER)
    assert jobwrap._trusted_dir(str(job), OTHER) == str(job)
    assert jobwrap._trusted_dir(str(job), 0) is None  # not root's own
    os.chmod(job, 0o777)
    assert jobwrap._trusted_dir(str(job), OTHER) is None  # others may write it (mallory's mkdir -m 777)
    os.chmod(job, 0o700)
    link = base / "8.1.debug"
    link.symlink_to(job)
    os.lchown(link, 0, 0)
    assert jobwrap._trusted_dir(str(link), OTHER) is None  # a link, even root's, even to a good directory
    sticky = tree(tmp_path / "sticky", 0o1777)
    planted = tree(sticky / "9.1.debug", 0o700, OTHER)
    assert jobwrap._trusted_dir(str(planted), OTHER) is None  # /tmp-like parent: anyone could make the name
    theirs = tree(tmp_path / "theirs", 0o755, OTHER)
    assert jobwrap._trusted_dir(str(tree(theirs / "1.1.debug", 0o700, OTHER)), OTHER) is None
    assert jobwrap._trusted_dir("relative/dir", OTHER) is None


@root_only
def test_the_wrapper_makes_its_own_private_tmpdir_when_grid_engines_is_planted(tmp_path, monkeypatch):
    sd = tmp_path / "state"
    assert state.make_layout(str(sd)) == []
    sticky = tree(tmp_path / "sticky", 0o1777)
    planted = tree(sticky / "9.1.debug", 0o777)
    monkeypatch.setenv("TMPDIR", str(planted))
    d, made = jobwrap.job_tmpdir(str(sd), 9, None)
    st = os.lstat(d)
    assert made and stat.S_ISDIR(st.st_mode) and (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o700)
    assert os.path.dirname(d) == str(sd / "users" / "0" / "srun") and os.path.basename(d).startswith("tmp.9.1.")
    assert os.listdir(planted) == []
    monkeypatch.setenv("TMPDIR", str(planted.parent / "link"))
    (planted.parent / "link").symlink_to(tree(tree(tmp_path / "roots") / "x"))
    assert jobwrap.job_tmpdir(str(sd), 9, 2)[1] is True  # never through a link
    good = tree(tree(tmp_path / "tmpbase") / "10.1.debug", 0o755)
    monkeypatch.setenv("TMPDIR", str(good))
    assert jobwrap.job_tmpdir(str(sd), 10, None) == (str(good), False)  # Grid Engine's own: execd removes it
    monkeypatch.delenv("TMPDIR")
    monkeypatch.setenv("TMP", str(good))
    assert jobwrap.job_tmpdir(str(sd), 10, None) == (str(good), False)  # (root's jobs: Grid Engine's TMP only)
    monkeypatch.delenv("TMP")
    monkeypatch.setenv("TMPDIR", str(planted))
    assert jobwrap.job_tmpdir(str(tmp_path / "no-state"), 9, None) is None  # no private place: the launch fails


# --- output files (F-27) -----------------------------------------------------------------------------------


@root_only
def test_an_output_file_is_not_opened_through_a_link_planted_where_others_may_write(tmp_path):
    secret = tmp_path / "rootonly"
    secret.write_text("root's\n")
    os.chmod(secret, 0o600)
    shared = tree(tmp_path / "shared", 0o1777)
    planted = shared / "slurm-5.out"
    planted.symlink_to(secret)
    os.lchown(planted, OTHER, 0)  # mallory's link
    with pytest.raises(OSError) as e:
        outfile.open_output(str(planted), False)
    assert e.value.errno in (errno.ELOOP, errno.EACCES) and secret.read_text() == "root's\n"  # (O_NOFOLLOW's)
    with pytest.raises(OSError):
        outfile.open_output(str(planted), True)
    assert secret.read_text() == "root's\n"
    hers = shared / "slurm-6.out"
    hers.write_text("mallory reads this\n")
    os.chown(hers, OTHER, 0)
    with pytest.raises(PermissionError):
        outfile.open_output(str(hers), False)
    assert hers.read_text() == "mallory reads this\n"
    hard = shared / "slurm-7.out"
    os.link(secret, hard)
    with pytest.raises(PermissionError):
        outfile.open_output(str(hard), False)
    assert secret.read_text() == "root's\n"
    mine = shared / "slurm-8.out"
    mine.write_text("old\n")
    os.close(outfile.open_output(str(mine), False))
    assert mine.read_text() == ""  # the user's own file: truncated, as Slurm does
    fd = outfile.open_output(str(shared / "new.out"), False)
    os.write(fd, b"x")
    os.close(fd)
    assert (shared / "new.out").read_text() == "x"
    # a project directory the group shares (not sticky): a link is still refused, but a colleague's
    # file is written as Slurm writes it (she could replace it there anyway)
    project = tree(tmp_path / "project", 0o777)
    (project / "slurm-9.out").symlink_to(secret)
    os.lchown(project / "slurm-9.out", OTHER, 0)
    with pytest.raises(OSError):
        outfile.open_output(str(project / "slurm-9.out"), False)
    theirs = project / "slurm-10.out"
    theirs.write_text("old\n")
    os.chown(theirs, OTHER, 0)
    os.close(outfile.open_output(str(theirs), False))
    assert theirs.read_text() == "" and secret.read_text() == "root's\n"


@root_only
def test_an_output_file_keeps_slurms_behaviour_in_a_private_directory(tmp_path):
    own = tree(tmp_path / "own", 0o755)
    target = own / "real.out"
    target.write_text("old\n")
    (own / "slurm-5.out").symlink_to(target)  # the user's own link: followed, as Slurm does
    fd = outfile.open_output(str(own / "slurm-5.out"), False)
    os.write(fd, b"new\n")
    os.close(fd)
    assert target.read_text() == "new\n"
    fd = outfile.open_output(str(own / "slurm-5.out"), True)
    os.write(fd, b"more\n")
    os.close(fd)
    assert target.read_text() == "new\nmore\n"
    os.close(outfile.open_output("/dev/null", False))  # a device: opened, never truncated
    shared = tree(tmp_path / "shared", 0o1777)
    link = shared / "slurm-9.out"
    link.symlink_to(target)  # root's own link (the opener's) in the shared directory: followed
    os.close(outfile.open_output(str(link), True))
    assert target.read_text() == "new\nmore\n"


# --- install --apply's prefix (F-32) -----------------------------------------------------------------------


@root_only
def test_install_names_every_part_of_the_installation_that_is_not_roots_alone(tmp_path):
    prefix = tree(tmp_path / "venv")
    b = tree(prefix / "bin")
    py = b / "python3"
    py.write_text("")
    pkg = tree(prefix / "lib" / "shim")
    assert install.prefix_problems(str(prefix), str(py), str(pkg)) == []
    os.chmod(b, 0o775)
    assert install.prefix_problems(str(prefix), str(py), str(pkg)) == [
        f"{b} is writable by group or others (mode 775)"]
    os.chmod(b, 0o755)
    os.chown(pkg, OTHER, 0)
    assert install.prefix_problems(str(prefix), str(py), str(pkg)) == [f"{pkg} belongs to uid {OTHER}, not root"]
    os.chown(pkg, 0, 0)
    os.chown(py, OTHER, 0)
    assert install.prefix_problems(str(prefix), str(py), str(pkg)) == [f"{py} belongs to uid {OTHER}, not root"]
    os.chown(py, 0, 0)
    assert install.prefix_problems(str(prefix), "/tmp", str(pkg)) == ["/tmp is writable by group or others (mode 1777)"]
    # (above it, a sticky directory is fine: tmp_path is under /tmp)


def test_the_profile_snippet_quotes_the_prefix(tmp_path):
    prefix = str(tmp_path / "a b$(touch pwned)`touch pwned2`")
    snippet = tmp_path / "slurm-shim.sh"
    snippet.write_text(install.profile_text(prefix, "/etc/slurm-shim/config.toml"))
    out = subprocess.run(["/bin/sh", "-c", f'. "{snippet}"; . "{snippet}"; printf %s "$PATH|$MANPATH"'], cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True).stdout
    assert out == f"{prefix}/bin:/usr/bin:/bin|{prefix}/share/man:"  # once, literally
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


@root_only
def test_install_apply_refuses_an_installation_others_can_change_unless_forced(tmp_path, monkeypatch, capsys):
    from test_install import reference  # (its replay of the reference cluster)

    prefix = tree(tmp_path / "venv")
    tree(prefix / "bin", 0o777)
    replay = reference()
    monkeypatch.setattr(install, "backend_for", lambda cell: replay)
    monkeypatch.setattr(install, "shim_prefix", lambda: str(prefix))
    monkeypatch.setattr(cluster, "ensure_tmpdir_base", lambda path: True)
    argv = ["--apply", "--config", str(tmp_path / "config.toml"), "--state-dir", str(tmp_path / "state"),
            "--record", str(tmp_path / "record.json"), "--profile", str(tmp_path / "profile.sh")]
    assert admin.main(["install", *argv]) == 1
    err = capsys.readouterr().err
    assert err == (f"slurm-shim: error: refusing to put {prefix}/bin first on every login's PATH: {prefix}/bin is "
                   "writable by group or others (mode 777) (install the shim where only root can write, or "
                   "--apply --force)\n")
    assert replay.writes() == [] and not (tmp_path / "profile.sh").exists() and not (tmp_path / "record.json").exists()
    assert admin.main(["install", *argv, "--force"]) == 0
    out = capsys.readouterr().out
    assert f"warning  installation: {prefix}/bin is writable by group or others (mode 777)" in out
    assert f"PATH={prefix}/bin:$PATH" in (tmp_path / "profile.sh").read_text()
    assert "queue-tmpdir" in [e["kind"] for e in json.loads((tmp_path / "record.json").read_text())["created"]]
