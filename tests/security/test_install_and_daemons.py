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

from conftest import run, wait_until
from security.conftest import MALLORY, VICTIM, as_user, mallory_python, uid

pytestmark = pytest.mark.gridengine

SITE_CONFIG = Path("/etc/slurm-shim/config.toml")


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
    job (exit 5) writes nothing there; mallory's forged end record in it is not believed; sacct
    says FAILED 5:0; doctor names the squat."""
    from shim import cluster

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
for n in ("jobs", "events"):
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
p = os.path.join({str(sd)!r}, "users", "{v}", "events", "{job}.x.end.json")
json.dump({{"t": time.time(), "exit": 0, "signal": 0, "state": "COMPLETED"}}, open(p, "w"))
""")
    assert forged.returncode == 0, forged.stderr
    assert wait_until(lambda: sacct_state(VICTIM, job, conf), 120, f"job {job} to end") == "FAILED|5:0"
    assert sacct_state(MALLORY, job, conf) == "FAILED|5:0"  # and as anyone else sees it
    after = files_under(sd)
    new = {p: u for p, u in after.items() if p not in before}
    assert new == {f"users/{v}/events/{job}.x.end.json": uid(MALLORY)}  # only her own forgery
    assert os.listdir(loot) == []
    assert f"users/{v} belongs to uid {uid(MALLORY)}, not {v}" in doctor(conf, VICTIM)


def test_a_state_dir_mallory_made_first_is_reported_and_never_reused(victim, mallory, shared_dir, workdir, qdel_after):
    """F-15 on a site whose state directory's parent others can write: mallory makes the state
    directory herself, laid out as the shim's, before the admin installs. `cluster up` reports it
    and leaves it alone (no chown, no chmod); the victim's job still runs and nothing of it lands
    in her tree; doctor fails on it."""
    from shim import cluster

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
    job = submit_failing_job(conf, workdir, qdel_after)
    assert wait_until(lambda: sacct_state(VICTIM, job, conf), 120, f"job {job} to end") == "FAILED|5:0"
    assert files_under(sd) == before  # nothing of the victim's in mallory's directories
    out = doctor(conf)
    assert f"FAIL  state dir: {sd} is not a directory of root's" in out


def test_the_victims_records_go_to_her_own_directory_once_the_layout_is_root_s(victim, mallory, shared_dir, workdir,
                                                                             qdel_after):
    """The same site after the admin removed mallory's directory and ran the layout step: the
    victim's records are in users/<her uid>, hers and closed to others, and doctor is content."""
    from shim import cluster

    sd = shared_dir / "state"
    cluster.ensure_state_layout(str(sd))
    conf = fresh_site(shared_dir, sd)
    job = submit_failing_job(conf, workdir, qdel_after)
    assert wait_until(lambda: sacct_state(VICTIM, job, conf), 120, f"job {job} to end") == "FAILED|5:0"
    v = uid(VICTIM)
    mine = files_under(sd / "users" / str(v))
    assert f"jobs/{job}.json" in mine and f"events/{job}.x.end.json" in mine
    assert set(mine.values()) == {v}
    st = os.lstat(sd / "users" / str(v))
    assert st.st_uid == v and not st.st_mode & 0o022
    out = doctor(conf)
    assert "FAIL  state dir" not in out and f"ok    state dir {sd} is root's" in out
