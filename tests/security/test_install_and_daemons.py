"""Install time and daemons, replayed live.

F-15  On a fresh site the first user to write made the shared record directories and owned them:
      mallory made ``jobs/`` and ``events/`` before anyone submitted, the victim's records went
      into her directories, and she replaced them. Now ``cluster up`` makes the layout as root
      (state.make_layout), an object someone else made is reported and never reused, and doctor
      reports squatted per-user directories. Each test uses a fresh state directory of its own
      (a copy of the site config, through SLURM_SHIM_CONFIG), never the shared one.
F-17  ``/etc/init.d/gridengine-master`` and ``gridengine-exec`` manage the daemons that
      ``cluster up`` starts: ``stop`` stops them, ``start`` starts no duplicate, and ``cluster
      up``/``down`` and the init scripts can be mixed (see the last test).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

import conftest
from conftest import run, wait_until
from security.conftest import MALLORY, VICTIM, as_user, mallory_python, uid

pytestmark = pytest.mark.gridengine

SITE_CONFIG = conftest.SITE_CONFIG  # the selected cell's (the F-17 test is Debian's cell's alone: conftest)
DEBIAN_SITE_CONFIG = Path("/etc/slurm-shim/config.toml")


def fresh_site(d: Path, state_dir: Path) -> Path:
    """A copy of the site config with its own state directory, submitting with qsub."""
    text = SITE_CONFIG.read_text()
    text = re.sub(r'(?m)^state_dir\s*=.*$', f'state_dir = "{state_dir}"', text)
    text = re.sub(r"(?ms)^\[submit\].*?(?=^\[|\Z)", "", text) + '\n[submit]\nmethod = "qsub"\n'
    conf = d / "config.toml"
    conf.write_text(text)
    conf.chmod(0o644)
    return conf


def files_under(root: Path) -> dict[str, int]:
    """Every path under root (links not followed) -> its owner's uid."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = os.lstat(p).st_uid
    return out


def sacct_state(user: str, job: int, conf: Path) -> str | None:
    cp = as_user(user, "sacct", "-X", "-n", "-P", "-o", "State,ExitCode", "-j", str(job),
                 env={"SLURM_SHIM_CONFIG": str(conf)})
    line = cp.stdout.strip()
    return line if line and not line.startswith(("PENDING", "RUNNING")) else None


def doctor(conf: Path, user: str | None = None) -> str:
    argv = ["slurm-shim", "doctor"]
    cp = as_user(user, *argv, env={"SLURM_SHIM_CONFIG": str(conf)}) if user else \
        run(*argv, env={"SLURM_SHIM_CONFIG": str(conf)})
    return cp.stdout


@pytest.fixture
def qdel_after():
    ids: list[int] = []
    yield ids
    if ids:
        run("qdel", *map(str, ids))


def submit_failing_job(conf: Path, workdir: Path, qdel_after: list[int]) -> int:
    cp = as_user(VICTIM, "sbatch", "--parsable", "-o", "/dev/null", "--wrap", "exit 5", cwd=workdir,
                 env={"SLURM_SHIM_CONFIG": str(conf)})
    assert cp.returncode == 0, cp.stderr  # bookkeeping never fails a submission Grid Engine took
    job = int(cp.stdout.strip().split(";")[0])
    qdel_after.append(job)
    return job


def test_mallorys_directories_in_a_laid_out_state_dir_get_none_of_the_victims_records(
        victim, mallory, shared_dir, workdir, qdel_after):
    """F-15 replayed after `cluster up`: before anyone has submitted, mallory makes the old
    shared directories (refused: the top is root's 0755) and squats the victim's own directory
    under users/ (1777), with world-writable jobs/ and events/ inside and a link. The victim's
    job (exit 5) writes nothing there: her records go to a users/<uid>@<suffix> of her own (F-21);
    mallory's forged end record in the squat is not believed; sacct says FAILED 5:0; doctor names
    the squat."""
    from shim.admin import cluster

    sd = shared_dir / "state"
    assert cluster.ensure_state_layout(str(sd)) == f"{sd} laid out"  # what cluster up does
    conf = fresh_site(shared_dir, sd)
    v = uid(VICTIM)
    loot = shared_dir / "loot"
    plant = mallory_python(f"""
import json, os
sd, v = {str(sd)!r}, {v}
refused = []
for n in ("jobs", "events", "steps", "srun"):
    try:
        os.mkdir(os.path.join(sd, n), 0o777)
    except PermissionError:
        refused.append(n)
os.mkdir({str(loot)!r}, 0o777)
d = os.path.join(sd, "users", str(v))
os.mkdir(d)
os.chmod(d, 0o777)
for n in ("jobs", "events", "records", "records/jobs", "records/events"):  # the old layout's and the new's
    os.mkdir(os.path.join(d, n))
    os.chmod(os.path.join(d, n), 0o777)
os.symlink({str(loot)!r}, os.path.join(d, "steps"))
print(json.dumps(refused))
""")
    assert plant.returncode == 0, plant.stderr
    assert plant.stdout.strip() == '["jobs", "events", "steps", "srun"]'
    before = files_under(sd)

    job = submit_failing_job(conf, workdir, qdel_after)
    forged = mallory_python(f"""
import json, os, time
s = os.path.join({str(sd)!r}, "users", "{v}", "records", "events", "{job // 100}")  # the job's id shard (store/layout.py)
os.mkdir(s)
p = os.path.join(s, "{job}.x.end.json")
json.dump({{"t": time.time(), "exit": 0, "signal": 0, "state": "COMPLETED"}}, open(p, "w"))
""")
    assert forged.returncode == 0, forged.stderr
    assert wait_until(lambda: sacct_state(VICTIM, job, conf), 120, f"job {job} to end") == "FAILED|5:0"
    assert sacct_state(MALLORY, job, conf) == "FAILED|5:0"  # and as anyone else sees it
    after = files_under(sd)
    new = {p: u for p, u in after.items() if p not in before}
    own = re.compile(rf"users/{v}@[0-9a-f]{{16}}(/.*)?")
    hers = {p: u for p, u in new.items() if own.fullmatch(p)}
    assert set(hers.values()) == {v}  # the victim's own directory beside the squat, all hers
    shard = job // 100
    assert {p.split("/", 2)[-1] for p in hers} >= {f"records/jobs/{shard}/{job}.json",
                                                    f"records/events/{shard}/{job}.x.end.json"}
    assert {p: u for p, u in new.items() if p not in hers} == {  # in the squat, only her own forgery
        f"users/{v}/records/events/{shard}": uid(MALLORY), f"users/{v}/records/events/{shard}/{job}.x.end.json": uid(MALLORY)}
    assert os.listdir(loot) == []
    assert f"users/{v} belongs to uid {uid(MALLORY)}, not {v}" in doctor(conf, VICTIM)


def test_a_state_dir_mallory_made_first_is_reported_and_never_reused(victim, mallory, shared_dir, workdir, qdel_after):
    """F-15 on a site whose state directory's parent others can write: mallory makes the state
    directory herself, laid out as the shim's, before the admin installs. `cluster up` reports it
    and leaves it alone (no chown, no chmod); the victim's sbatch finds no private place for her
    environment and script there, so it refuses with a clear message and submits nothing (F-21:
    never a secret where others can read it); nothing of hers lands in mallory's tree; doctor
    fails on it."""
    from shim.admin import cluster

    sd = shared_dir / "state"
    conf = fresh_site(shared_dir, sd)
    plant = mallory_python(f"""
import os
sd = {str(sd)!r}
os.mkdir(sd)
os.chmod(sd, 0o777)
for n in ("users", "gpus", "jobs", "events"):
    os.mkdir(os.path.join(sd, n))
    os.chmod(os.path.join(sd, n), 0o1777)
""")
    assert plant.returncode == 0, plant.stderr
    with pytest.raises(cluster.ClusterError, match=f"{sd} exists and is not a directory of root's"):
        cluster.ensure_state_layout(str(sd))
    st = os.lstat(sd)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (uid(MALLORY), 0o777)
    before = files_under(sd)
    cp = as_user(VICTIM, "sbatch", "--parsable", "-J", "f15mallory", "-o", "/dev/null", "--wrap", "exit 5",
                 cwd=workdir, env={"SLURM_SHIM_CONFIG": str(conf), "MYSECRET": "f15-secret"})
    assert cp.returncode == 1 and cp.stdout == ""
    assert cp.stderr.startswith("sbatch: error: Batch job submission failed: no private directory of your own "
                                f"under {sd}/users"), cp.stderr
    assert "f15mallory" not in run("qstat", "-u", VICTIM).stdout  # nothing submitted
    assert files_under(sd) == before  # nothing of the victim's in mallory's directories
    out = doctor(conf)
    assert f"FAIL  state dir: {sd} is not a directory of root's" in out


def test_the_victims_records_go_to_her_own_directory_once_the_layout_is_root_s(victim, mallory, shared_dir, workdir,
                                                                             qdel_after):
    """The same site after the admin removed mallory's directory and ran the layout step: the
    victim's records are in users/<her uid>, hers and closed to others, and doctor is content."""
    from shim.admin import cluster

    sd = shared_dir / "state"
    cluster.ensure_state_layout(str(sd))
    conf = fresh_site(shared_dir, sd)
    job = submit_failing_job(conf, workdir, qdel_after)
    assert wait_until(lambda: sacct_state(VICTIM, job, conf), 120, f"job {job} to end") == "FAILED|5:0"
    v = uid(VICTIM)
    mine = files_under(sd / "users" / str(v))
    assert f"records/jobs/{job // 100}/{job}.json" in mine and f"records/events/{job // 100}/{job}.x.end.json" in mine
    assert set(mine.values()) == {v}
    st = os.lstat(sd / "users" / str(v))
    assert st.st_uid == v and not st.st_mode & 0o022
    out = doctor(conf)
    assert "FAIL  state dir" not in out and f"ok    state dir {sd} is root's" in out


# ---------------------------------------------------------------------------------------------
# F-17: the init path. Stops and starts the shared cluster's daemons (other tests see a short
# outage); the cluster is always left as `cluster up` leaves it.

INIT_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}  # as service(8) runs them


def sge_procs(name: str) -> set[int]:
    """Live processes running Grid Engine's sge_<name> binary (whoever started them) for Debian's
    cell, on this host: scripts/multihost's second execd runs in a network namespace of its own,
    and test_install_live's raw cell runs the same binaries for its cell (SGE_CELL=raw in their
    environment)."""
    exe = f"/usr/lib/gridengine/sge_{name}"
    here = os.readlink("/proc/self/ns/net")
    out = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{d}/exe") != exe or os.readlink(f"/proc/{d}/ns/net") != here:
                continue
            env = dict(v.partition(b"=")[::2] for v in Path(f"/proc/{d}/environ").read_bytes().split(b"\0") if v)
            if env.get(b"SGE_CELL", b"default") != b"default":
                continue  # another cell's daemon
            st = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if st not in ("Z", "X"):
            out.add(int(d))
    return out


def init(script: str, action: str) -> None:
    import subprocess

    cp = subprocess.run([f"/etc/init.d/{script}", action], env=INIT_ENV, capture_output=True, timeout=90)
    assert cp.returncode == 0, (script, action, cp.stdout, cp.stderr)


def pidfile(name: str) -> int | None:
    try:
        return int(Path(f"/var/run/gridengine/{name}.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def one_each() -> tuple[int, int] | None:
    q, e = sge_procs("qmaster"), sge_procs("execd")
    return (q.pop(), e.pop()) if len(q) == len(e) == 1 else None


def slurm_shim(*argv: str) -> str:
    cp = run("slurm-shim", *argv, env={"SLURM_SHIM_CONFIG": str(DEBIAN_SITE_CONFIG)}, timeout=300)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    return cp.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="starts and stops the daemons")
def test_cluster_up_down_and_the_init_scripts_manage_one_set_of_daemons():
    """F-17: after `cluster up`, `/etc/init.d/gridengine-{master,exec} start` start nothing (no
    second qmaster), `stop` really stops both, `start` brings up one of each, which `cluster
    down` stops and `cluster up` starts again. Before the fix the master script's stop was a
    no-op (no pid file) and its start spawned a second sge_qmaster."""
    from shim.admin import cluster

    try:
        slurm_shim("cluster", "up")
        qm, ex = one_each() or pytest.fail(f"not one of each: {sge_procs('qmaster')}, {sge_procs('execd')}")
        assert (pidfile("qmaster"), pidfile("execd")) == (qm, ex)

        init("gridengine-master", "start")
        init("gridengine-exec", "start")
        assert (sge_procs("qmaster"), sge_procs("execd")) == ({qm}, {ex})  # nothing started twice

        init("gridengine-exec", "stop")
        init("gridengine-master", "stop")
        wait_until(lambda: not sge_procs("qmaster") and not sge_procs("execd"), 60, "the init scripts to stop both")
        assert (pidfile("qmaster"), pidfile("execd")) == (None, None)

        init("gridengine-master", "start")
        wait_until(cluster.qmaster_answers, 60, "the qmaster the init script started to answer")
        init("gridengine-exec", "start")
        qm2, ex2 = wait_until(one_each, 60, "one qmaster and one execd")
        wait_until(lambda: (pidfile("qmaster"), pidfile("execd")) == (qm2, ex2), 30,
                   "the daemons the init scripts started to write their pid files")
        init("gridengine-master", "start")
        init("gridengine-exec", "start")
        assert (sge_procs("qmaster"), sge_procs("execd")) == ({qm2}, {ex2})

        assert "cluster: down in" in slurm_shim("cluster", "down")  # it finds what the init scripts started
        wait_until(lambda: not sge_procs("qmaster") and not sge_procs("execd"), 60, "cluster down to stop both")
        out = slurm_shim("cluster", "up")
        assert re.search(r"^cluster: qmaster \.+ +[\d.]+ s  \(started\)$", out, re.M), out
        qm3, ex3 = one_each() or pytest.fail(f"not one of each: {sge_procs('qmaster')}, {sge_procs('execd')}")
        assert (pidfile("qmaster"), pidfile("execd")) == (qm3, ex3)
    finally:
        if not (one_each() and cluster.qmaster_answers()):
            run("slurm-shim", "cluster", "up", env={"SLURM_SHIM_CONFIG": str(DEBIAN_SITE_CONFIG)}, timeout=300)
        assert one_each(), "the cluster was not left with one qmaster and one execd"
