"""Security review 3, F-20 and F-27, replayed live as ``shimmallory`` against ``shimvictim`` and root.

F-20: Grid Engine's execd makes every job's TMPDIR as ``<tmpdir>/<job>.<task>.<queue>``, takes a
name that exists, chowns it to the job's owner and removes it as root at the end, following links.
The queues' tmpdir is root's own directory now, where mallory cannot make the name at all; the
old place (/tmp) means nothing any more; and a queue a site still keeps at /tmp gets no planted
TMPDIR into the job: the wrapper makes the job a private one. doctor fails such a queue, naming
the fix. F-27: a job's output file is not opened through a link mallory planted where she may
write. The kernel's link protections stay off (tests/security/conftest.py)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import uuid
from pathlib import Path

import pytest

from conftest import SITE_CONFIG, open_dir, run, wait_until
from security.conftest import MALLORY, VICTIM, as_user, mallory_python, uid
from shim.admin import cluster

pytestmark = pytest.mark.gridengine

BASE = cluster.TMPDIR_BASE
HOST = os.uname().nodename.split(".")[0]  # (Grid Engine's name of this host)
REPORT = ('echo "TMPDIR=$TMPDIR"; stat -c "stat=%U %a %F" "$TMPDIR"; echo "mine-$SLURM_JOB_ID" > "$TMPDIR/scratch"; '
          'cat "$TMPDIR/scratch"; ls -A "$TMPDIR"')


def submit(user: str | None, *argv: str, cwd: Path, env: dict | None = None) -> int:
    words = ["sbatch", "--parsable", *argv]
    cp = as_user(user, *words, cwd=cwd, env=env) if user else run(*words, cwd=cwd, env=env)
    assert cp.returncode == 0, cp.stderr
    return int(cp.stdout.strip().split(";")[0])


def release(user: str | None, job: int, env: dict | None = None) -> None:
    cp = as_user(user, "scontrol", "release", str(job), env=env) if user else run("scontrol", "release", str(job), env=env)
    assert cp.returncode == 0, cp.stderr


def ended(user: str | None, job: int, env: dict | None = None) -> str:
    """The job's State|ExitCode once sacct has its end, else ''."""
    argv = ("sacct", "-X", "-n", "-P", "-o", "State,ExitCode", "-j", str(job))
    cp = as_user(user, *argv, env=env) if user else run(*argv, env=env)
    line = cp.stdout.strip()
    return "" if not line or line.startswith(("PENDING", "RUNNING")) else line


def report(path: Path) -> dict[str, str]:
    text = path.read_text()
    return {"tmpdir": re.search(r"^TMPDIR=(.*)$", text, re.M).group(1),
            "stat": re.search(r"^stat=(.*)$", text, re.M).group(1), "text": text}


def plant(code: str) -> str:
    cp = mallory_python(code)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout


@pytest.fixture
def root_things():
    """What root owns and mallory aims at: a 0600 file, and a directory tree."""
    d = open_dir("rootthings", 0o755)
    secret = d / "precious"
    secret.write_text("root precious data\n")
    os.chmod(secret, 0o600)
    tree = d / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "canary").write_text("x")
    (tree / "sub" / "c2").write_text("y")
    return secret, tree


@pytest.fixture
def planted():
    """Names mallory planted in /tmp, removed afterwards (as root, without following them)."""
    names: list[Path] = []
    yield names
    for p in names:
        if p.is_symlink() or p.is_file():
            p.unlink(missing_ok=True)
        elif p.is_dir():
            shutil.rmtree(p, ignore_errors=True)


def test_the_queues_tmpdir_is_roots_alone_and_no_plant_reaches_root_or_the_victim(
        victim, mallory, workdir, root_things, planted):
    """The review's recipes, as mallory against held jobs of the victim and of root: at the
    predictable name under the queues' tmpdir she can make nothing (EACCES, link or directory);
    what she plants at the old place, /tmp/<job>.1.debug (a link to root's file, a link to root's
    tree, a 0777 directory), is never touched: root's file and tree stay root's and whole, and
    each job's TMPDIR is its owner's own directory under root's tmpdir."""
    tmpdir = cluster.host_values(cluster.parse_attrs(run("qconf", "-sq", "debug").stdout)["tmpdir"])[""]
    assert tmpdir == BASE and cluster.unsafe_dir(BASE) is None
    secret, tree = root_things
    jobs = {"victim-dir": submit(VICTIM, "-H", "-p", "debug", "-o", "%j.out", "--wrap", REPORT, cwd=workdir),
            "victim-link": submit(VICTIM, "-H", "-p", "debug", "-o", "%j.out", "--wrap", REPORT, cwd=workdir),
            "root": submit(None, "-H", "-p", "debug", "-o", "%j.out", "--wrap", REPORT, cwd=workdir)}
    aims = {"victim-dir": None, "victim-link": str(tree), "root": str(secret)}
    for what, job in jobs.items():
        name = f"{job}.1.debug"
        out = plant(f"""
import errno, os
for how in ("link", "dir"):
    try:
        os.symlink({str(secret)!r}, {BASE!r} + "/{name}") if how == "link" else os.mkdir({BASE!r} + "/{name}", 0o777)
        print(how, "made")
    except OSError as e:
        print(how, errno.errorcode[e.errno])
aim = {aims[what]!r}
if aim:
    os.symlink(aim, "/tmp/{name}")
else:
    os.mkdir("/tmp/{name}", 0o777)
    os.chmod("/tmp/{name}", 0o777)
""")
        planted.append(Path("/tmp") / name)
        assert out.split() == ["link", "EACCES", "dir", "EACCES"], out  # the plant is impossible there
    for what, job in jobs.items():
        release(None if what == "root" else VICTIM, job)
    for what, job in jobs.items():
        user = None if what == "root" else VICTIM
        assert wait_until(lambda: ended(user, job), 180, f"job {job} to end") == "COMPLETED|0:0"
        got = report(workdir / f"{job}.out")
        assert got["tmpdir"] == f"{BASE}/{job}.1.debug", got["text"]
        assert got["stat"] == f"{VICTIM if user else 'root'} 755 directory", got["text"]
        assert f"mine-{job}\nscratch\n" in got["text"]
    st = os.lstat(secret)
    assert (st.st_uid, stat.S_IMODE(st.st_mode), secret.read_text()) == (0, 0o600, "root precious data\n")
    st = os.lstat(tree)
    assert (st.st_uid, sorted(p.name for p in tree.rglob("*"))) == (0, ["c2", "canary", "sub"])
    dir_plant = Path("/tmp") / f"{jobs['victim-dir']}.1.debug"
    st = os.lstat(dir_plant)
    assert (st.st_uid, list(dir_plant.iterdir())) == (uid(MALLORY), [])  # not the victim's, nothing of hers in it


@pytest.fixture
def legacy_queue(victim):
    """A queue of this test's own on this host that keeps Grid Engine's default tmpdir /tmp (a site
    that has not run install), with a site config whose partition names it; removed afterwards."""
    name = f"shimtmp{uuid.uuid4().hex[:6]}"
    host = HOST
    attrs = cluster.parse_attrs(run("qconf", "-sq", "debug").stdout)
    attrs.update(qname=name, hostlist=host, slots="2", pe_list="NONE", tmpdir="/tmp")
    d = open_dir("legacyq", 0o755)
    (d / "queue").write_text(cluster.render_attrs(attrs))
    cp = run("qconf", "-Aq", str(d / "queue"))
    assert cp.returncode == 0, cp.stderr
    conf = d / "config.toml"
    conf.write_text(SITE_CONFIG.read_text() + f'\n[partitions.{name}]\nqueue = "{name}"\npe = "smp"\n'
                    'pe_multinode = "mpi"\n')
    os.chmod(conf, 0o644)
    try:
        def ready():
            states = cluster.parse_queue_states(run("qstat", "-f", "-q", name).stdout)
            return states.get(f"{name}@{host}") == ""
        wait_until(ready, 60, f"queue {name}@{host} to be ready")
        yield name, {"SLURM_SHIM_CONFIG": str(conf)}
    finally:  # (each test waits for its own jobs to end; qmaster lets the queue go once they have)
        wait_until(lambda: run("qconf", "-dq", name).returncode == 0 or name not in run("qconf", "-sql").stdout.split(),
                   60, f"queue {name} removed")


def test_a_queue_left_at_tmp_never_hands_the_job_a_planted_tmpdir(victim, mallory, workdir, legacy_queue, planted):
    """Where a queue still has tmpdir /tmp, mallory can make the job's name first: a 0777
    directory, or a link to a directory of hers. The victim's job then gets neither: the wrapper
    trusts a TMPDIR only as the job owner's real directory in one of root's, so the job runs with a
    private directory of its own (0700, the victim's, not under /tmp), and nothing it writes there
    reaches mallory; that directory is gone after the job."""
    name, env = legacy_queue
    hers = Path(mallory_python("import tempfile, os; d = tempfile.mkdtemp(dir='/tmp'); os.chmod(d, 0o777); "
                               "print(d)").stdout.strip())
    planted.append(hers)
    jobs = [submit(VICTIM, "-H", "-p", name, "-o", "%j.out", "--wrap", REPORT, cwd=workdir, env=env) for _ in range(2)]
    plant(f"import os\nos.mkdir('/tmp/{jobs[0]}.1.{name}', 0o777)\nos.chmod('/tmp/{jobs[0]}.1.{name}', 0o777)\n"
          f"os.symlink({str(hers)!r}, '/tmp/{jobs[1]}.1.{name}')\n")
    planted += [Path(f"/tmp/{j}.1.{name}") for j in jobs]
    for job in jobs:
        release(VICTIM, job, env)
    for job in jobs:
        assert wait_until(lambda: ended(VICTIM, job, env), 180, f"job {job} to end") == "COMPLETED|0:0"
        got = report(workdir / f"{job}.out")
        assert got["stat"] == f"{VICTIM} 700 directory", got["text"]
        assert not got["tmpdir"].startswith("/tmp/") and f"/tmp.{job}.1." in got["tmpdir"], got["text"]
        assert f"mine-{job}\nscratch\n" in got["text"]
        assert not os.path.lexists(got["tmpdir"])  # the wrapper's own: removed at the end
    assert list(hers.iterdir()) == []  # (execd chowned her directory through the link: the job never used it)


def test_doctor_fails_a_queue_whose_tmpdir_is_tmp_and_names_the_fix(legacy_queue):
    name, _env = legacy_queue
    cp = run("slurm-shim", "doctor", "--no-hosts", timeout=120)
    assert cp.returncode == 1, cp.stdout
    assert (f"FAIL  queue {name}: tmpdir /tmp: /tmp is writable by others (mode 1777): {cluster.TMPDIR_HARM}  -- "
            f"install -d -o root -g root -m 0755 {BASE} on every exec host; qconf -mattr queue tmpdir {BASE} "
            f"{name}\n") in cp.stdout
    assert f"ok    queue debug: tmpdir {BASE} is root's and only root can write in it\n" in cp.stdout


def test_an_output_file_is_not_written_through_a_planted_link(victim, mallory, shared_dir, workdir, root_things):
    """F-27: root submits from a sticky shared directory (as from /tmp), the victim from a project
    directory everyone may write; mallory links each job's slurm-%j.out to a file of its owner's.
    Neither job writes through her link: the launch fails, as Slurm's does when it cannot open
    the output file, and both files keep their text."""
    secret, _tree = root_things
    own = Path(as_user(VICTIM, "/usr/bin/python3", "-I", "-c", "import os, tempfile; d = tempfile.mkdtemp(dir="
                       f"{str(workdir)!r}); open(d + '/notes', 'w').write('victim notes\\n'); os.chmod(d, 0o755); "
                       "print(d + '/notes')").stdout.strip())
    root_job = submit(None, "-H", "--wrap", "echo JOB-OUTPUT-OVERWRITES", cwd=shared_dir)
    victim_job = submit(VICTIM, "-H", "--wrap", "echo JOB-OUTPUT-OVERWRITES", cwd=workdir)
    plant(f"import os\nos.symlink({str(secret)!r}, {str(shared_dir)!r} + '/slurm-{root_job}.out')\n"
          f"os.symlink({str(own)!r}, {str(workdir)!r} + '/slurm-{victim_job}.out')\n")
    release(None, root_job)
    release(VICTIM, victim_job)
    assert wait_until(lambda: ended(None, root_job), 180, f"job {root_job} to end").startswith("FAILED|")
    assert wait_until(lambda: ended(VICTIM, victim_job), 180, f"job {victim_job} to end").startswith("FAILED|")
    assert secret.read_text() == "root precious data\n" and own.read_text() == "victim notes\n"
    # (a link of the job owner's own, in the same directories, is followed as Slurm does)
    mine = submit(VICTIM, "-H", "-o", "mine.out", "--wrap", "echo MINE", cwd=workdir)
    as_user(VICTIM, "ln", "-s", str(own), str(workdir / "mine.out"))
    release(VICTIM, mine)
    assert wait_until(lambda: ended(VICTIM, mine), 180, f"job {mine} to end") == "COMPLETED|0:0"
    assert own.read_text() == "MINE\n"
