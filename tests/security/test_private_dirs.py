"""Review 3's squats, replayed (issue 26 item 2 and F-29): mallory makes the victim's names first.

F-21  ``users/<uid>`` made by mallory: the victim's records go to a ``users/<uid>@<random>`` of her
      own; sbatch, srun, salloc, squeue and sacct work as before, and no secret is readable
F-22  the script text and its arguments are in the job's private file, not in the spool
F-31  the private file goes when the job ends
F-35  doctor's ownership round trip
F-29  ``/tmp/slurm-shim-<uid>`` made by mallory: the victim's commands still get the warm service,
      in a directory nobody else can make (the C client and service_dir agree on it)

The state-directory cases use a fresh state directory of their own (a site config naming it), so
the victim's directory there does not exist until mallory makes it.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import re
import shutil
import signal
from pathlib import Path

import pytest

import conftest
from conftest import open_dir, run, test_user, wait_until
from security.conftest import MALLORY, VICTIM, as_user, mallory_python, uid

CMD_TIMEOUT = 60
SITE_CONFIG = Path(os.environ.get("SLURM_SHIM_CONFIG") or conftest.SITE_CONFIG)
SPOOLS = (f"{conftest.EXECD_SPOOL}/*/job_scripts/{{id}}", f"{conftest.QMASTER_SPOOL}/job_scripts/{{id}}")
NOBODY = 65534


# ---------------------------------------------------------------------------------------------
# the rule itself, in-process (root's own directory, squatted by nobody)


@pytest.fixture
def layout(tmp_path):
    from shim.store import state

    sdir = tmp_path / "state"
    assert state.make_layout(str(sdir)) == []
    return sdir


def test_a_squatted_users_dir_gives_the_user_a_directory_of_her_own(layout):
    from shim.store import state

    users = layout / "users"
    me = os.getuid()
    (users / str(me)).mkdir(mode=0o777)
    os.chown(users / str(me), NOBODY, NOBODY)  # the squat
    decoy = users / f"{me}@{'0' * 16}"  # sorts first, but is not the user's
    decoy.mkdir(mode=0o755)
    os.chown(decoy, NOBODY, NOBODY)
    env = state.own_dir(str(layout), "env")
    home = Path(env).parent
    assert re.fullmatch(rf"{me}@[0-9a-f]{{16}}", home.name) and home != decoy
    assert home.stat().st_uid == me and (home.stat().st_mode & 0o777) == 0o755
    assert (Path(env).stat().st_mode & 0o777) == 0o700
    assert state.user_dir(str(layout), me) == str(home)  # every reader takes the same one
    assert (me, str(home)) in list(state.user_dirs(str(layout)))
    assert not any(d == str(decoy) or d == str(users / str(me)) for _u, d in state.user_dirs(str(layout)))
    assert state.own_dir(str(layout), "jobs") == str(home / "jobs")  # and it stays the one
    path = state.write_private(str(layout), "env", "x.json", {"environ": {"A": "1"}})
    assert path == str(home / "env" / "x.json") and state.read_env_file(str(layout), path) == {"environ": {"A": "1"}}
    assert state.squatted_home(str(layout)) == (str(users / str(me)), str(home))


def test_two_first_uses_at_once_keep_the_first_by_name(layout):
    """Two hosts that each made a directory: every reader and writer takes the first by name."""
    from shim.store import state

    users = layout / "users"
    me = os.getuid()
    (users / str(me)).mkdir(mode=0o777)
    os.chown(users / str(me), NOBODY, NOBODY)
    for name in (f"{me}@{'b' * 16}", f"{me}@{'a' * 16}"):
        (users / name).mkdir(mode=0o755)
    assert state.user_dir(str(layout), me) == str(users / f"{me}@{'a' * 16}")
    assert state.own_dir(str(layout), "srun") == str(users / f"{me}@{'a' * 16}" / "srun")


def test_the_private_file_is_read_only_from_an_env_dir_of_the_users_own(layout, tmp_path):
    from shim.store import state

    users = layout / "users"
    me = os.getuid()
    path = state.write_private(str(layout), "env", "y.json", {"environ": {}})
    assert path == str(users / str(me) / "env" / "y.json")
    other = users / f"{me}@{'c' * 16}"  # a directory of someone else's, named for the user
    (other / "env").mkdir(parents=True)
    (other / "env" / "y.json").write_text("{}")
    for d in (other, other / "env", other / "env" / "y.json"):
        os.chown(d, NOBODY, NOBODY)
    assert state.read_env_file(str(layout), str(other / "env" / "y.json")) is None
    elsewhere = tmp_path / "env" / "y.json"
    elsewhere.parent.mkdir()
    shutil.copy(path, elsewhere)
    assert state.read_env_file(str(layout), str(elsewhere)) is None
    import hashlib

    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    assert state.read_env_file(str(layout), path, digest) == {"environ": {}}
    assert state.read_env_file(str(layout), path, "0" * 64) is None  # not the file the job was given


def test_an_array_s_private_file_goes_with_its_last_task(layout):
    from shim.store import state

    path = state.write_private(str(layout), "env", "z.json", {"environ": {}})
    state.atomic_write(path[:-5] + state.ENV_TASKS, "3", 0o600)
    for left in (2, 1):
        state.drop_env_file(str(layout), path, task=True)
        assert os.path.exists(path) and Path(path[:-5] + state.ENV_TASKS).read_text() == str(left)
    state.drop_env_file(str(layout), path, task=True)
    assert not os.path.exists(path) and not os.path.exists(path[:-5] + state.ENV_TASKS)


def test_prune_drops_the_private_files_of_jobs_grid_engine_no_longer_has(layout):
    from shim.store import state

    gone = state.write_private(str(layout), "env", "a" * 32 + ".json", {"environ": {}})
    kept = state.write_private(str(layout), "env", "b" * 32 + ".json", {"environ": {}})
    young = state.write_private(str(layout), "env", "c" * 32 + ".json", {"environ": {}})
    for p, job in ((gone, 11), (kept, 12), (young, 13)):
        state.atomic_write(p[:-5] + ".job", str(job), 0o600)
    old = os.lstat(gone).st_mtime - 3600
    for p in (gone, kept):
        os.utime(p, (old, old))
    asked = []

    def alive(ids):
        asked.append(ids)
        return {12}

    assert state.prune_env(str(layout), alive, now=old + 3600) == 1
    assert asked == [[11, 12]]  # the young one (a submission under way) is not asked about
    assert not os.path.exists(gone) and not os.path.exists(gone[:-5] + ".job")
    assert os.path.exists(kept) and os.path.exists(young)
    assert state.prune_env(str(layout), lambda ids: None, now=old + 3600) == 0  # no answer: nothing goes


def test_doctor_s_round_trip_sees_owners_that_are_not_kept(layout, monkeypatch):
    from shim.store import state

    assert state.ownership_problem(str(layout)) is None
    real = os.lstat

    class Squashed:
        def __init__(self, st):
            self.st = st

        def __getattr__(self, k):
            return NOBODY if k == "st_uid" else getattr(self.st, k)

    monkeypatch.setattr(os, "lstat", lambda p, *a, **k: Squashed(real(p, *a, **k)))  # what all_squash shows
    problem = state.ownership_problem(str(layout))
    assert problem and f"is owned by uid {NOBODY}" in problem and "refuse" in problem


def test_the_service_directory_s_fallback_is_the_users_own_and_fits_a_socket(monkeypatch):
    """F-29's rule (rundir._fallback_base, client.c's fallback_base): with /tmp/slurm-shim-<uid> and
    /run/user/<uid> taken away, $HOME/.cache/slurm-shim/run, 0700, in a home and .cache of the
    user's own that others cannot write; none where the socket's path would not fit, or the home
    is open to others."""
    import tempfile

    from shim.store import rundir as service

    real_private, real_owned = service._private, service._owned
    monkeypatch.setattr(service, "_private", lambda d, create: not d.startswith("/tmp/slurm-shim-") and real_private(d, create))
    monkeypatch.setattr(service, "_owned", lambda d, uid, follow=False: not d.startswith("/run/user/") and
                        real_owned(d, uid, follow))
    home = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="sq-home-"))
    try:
        home.chmod(0o755)
        assert service.service_dir({"HOME": str(home)}) == f"{home}/.cache/slurm-shim/run"
        for d in (home / ".cache" / "slurm-shim", home / ".cache" / "slurm-shim" / "run"):
            assert d.stat().st_mode & 0o777 == 0o700 and not d.is_symlink()
        long = home / ("h" * (service.SUN_PATH - len(str(home)) - 40))
        long.mkdir(mode=0o755)
        assert len(f"{long}/.cache/slurm-shim/run") + service.SOCKET_ROOM >= service.SUN_PATH
        assert service.service_dir({"HOME": str(long)}) is None  # (the client then runs in-process)
        home.chmod(0o777)
        assert service.service_dir({"HOME": str(home)}) is None
    finally:
        shutil.rmtree(home, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# F-21, F-22, F-31 live: mallory squats the victim's users/<uid> in a fresh state directory


@pytest.fixture
def squatted_cell(victim, mallory, tmp_path_factory):
    """A site config of its own whose fresh state directory mallory has squatted for the victim."""
    from shim.store import state

    d = open_dir("squat", 0o755)
    sdir = d / "state"
    assert state.make_layout(str(sdir)) == []
    conf = d / "config.toml"
    conf.write_text(re.sub(r'(?m)^state_dir\s*=.*$', f'state_dir = "{sdir}"', SITE_CONFIG.read_text()))
    conf.chmod(0o644)
    squat = str(sdir / "users" / str(uid(VICTIM)))
    cp = mallory_python(f"import os; os.mkdir({squat!r}); os.chmod({squat!r}, 0o777)")
    assert cp.returncode == 0, cp.stderr
    out = d / "out"
    out.mkdir()
    out.chmod(0o777)
    return {"dir": d, "state": sdir, "env": {"SLURM_SHIM_CONFIG": str(conf)}, "out": out}


def _leaks(paths: list[str], secrets: tuple[str, ...]) -> dict:
    """What mallory reads of these paths (files, and every file under directories), decoding the
    job scripts' base64 payloads too: {path: [secrets found]} of those that leak."""
    code = f"""
import base64, json, os, re
found = {{}}
def look(p):
    try:
        data = open(p, "rb").read()
    except OSError as e:
        found[p] = type(e).__name__
        return
    text = data.decode("latin-1")
    body = b"".join(ln for ln in data.split(b"\\n") if re.fullmatch(rb"[A-Za-z0-9+/=]+", ln))
    try:
        text += base64.b64decode(body).decode("latin-1")
    except Exception:
        pass
    found[p] = [s for s in {list(secrets)!r} if s in text]
for p in {paths!r}:
    if os.path.isdir(p):
        for top, dirs, files in os.walk(p):
            for f in files:
                look(os.path.join(top, f))
    else:
        look(p)
print(json.dumps(found))
"""
    cp = mallory_python(code)
    assert cp.returncode == 0, cp.stderr
    return json.loads(cp.stdout)


def test_a_squatted_directory_costs_the_victim_no_secret_and_no_record(squatted_cell):
    c = squatted_cell
    secrets = ("sq-env-hunter2", "sq-export-tok", "sq-script-pw", "sq-arg-secret")
    script = c["dir"] / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH -J squatted\nexport DB_PASSWORD=sq-script-pw\n"
                      'sleep 20\necho "M=$MYSECRET T=$API_TOKEN D=$DB_PASSWORD A=$1"\n')
    script.chmod(0o644)
    env = {**c["env"], "MYSECRET": "sq-env-hunter2"}
    cp = as_user(VICTIM, "sbatch", "--parsable", "--export=ALL,API_TOKEN=sq-export-tok", "-o", str(c["out"] / "o.out"),
                 str(script), "--token=sq-arg-secret", env=env, timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stderr) == (0, ""), cp.stderr
    job = int(cp.stdout.strip())
    try:
        users = c["state"] / "users"
        mine = [p for p in users.iterdir() if p.name.startswith(f"{uid(VICTIM)}@")]
        assert len(mine) == 1 and mine[0].stat().st_uid == uid(VICTIM)
        env_files = list((mine[0] / "env").glob("*.json"))
        assert len(env_files) == 1
        wait_until(lambda: any(glob.glob(SPOOLS[0].format(id=job))), 60, f"job {job}'s script in the execd spool")
        spooled = [p for pat in SPOOLS for p in glob.glob(pat.format(id=job))]
        found = _leaks([*spooled, str(c["state"]), str(env_files[0])], secrets)  # (env/ is 0700: named)
        assert {p: v for p, v in found.items() if isinstance(v, list) and v} == {}
        assert all(found[p] == [] for p in spooled)  # mallory read the spooled script: nothing secret in it
        assert found[str(env_files[0])] == "PermissionError"
        # the victim's records are read from her own directory: squeue names the job from its record
        cp = as_user(VICTIM, "squeue", "-h", "-j", str(job), "-o", "%j %u", env=c["env"], timeout=CMD_TIMEOUT)
        assert cp.stdout == f"squatted {VICTIM}\n", cp.stderr
        wait_until(lambda: "M=" in _text(c["out"] / "o.out"), 90, "the job's output")
        assert _text(c["out"] / "o.out") == "M=sq-env-hunter2 T=sq-export-tok D=sq-script-pw A=--token=sq-arg-secret\n"
        rec = mine[0] / "records"  # (store/layout.py: id shards)
        assert (rec / "jobs" / str(job // 100) / f"{job}.json").stat().st_uid == uid(VICTIM)  # in her own directory
        # F-31: the private file goes with the job
        wait_until(lambda: not env_files[0].exists(), 60, "the job's private file to go")
        assert (rec / "events" / str(job // 100) / f"{job}.x.end.json").exists()
        wait_until(lambda: "COMPLETED" in as_user(VICTIM, "sacct", "-j", str(job), "-X", "-n", "-P", "-o", "State",
                                                  env=c["env"], timeout=CMD_TIMEOUT).stdout, 60, "sacct's COMPLETED")
    finally:
        run("qdel", str(job))


def test_srun_and_salloc_work_in_a_squatted_state_directory(squatted_cell):
    c = squatted_cell
    cp = as_user(VICTIM, "srun", "-n1", "echo", "srun-ok", env=c["env"], timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stdout) == (0, "srun-ok\n"), cp.stderr
    cp = as_user(VICTIM, "salloc", "-Q", "-n1", "srun", "echo", "salloc-ok", env=c["env"], timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stdout) == (0, "salloc-ok\n"), cp.stderr
    mine = [p for p in (c["state"] / "users").iterdir() if p.name.startswith(f"{uid(VICTIM)}@")]
    assert len(mine) == 1 and list((mine[0] / "env").glob("*.json")) == []  # salloc's file went too
    doctor = as_user(VICTIM, "slurm-shim", "doctor", "--no-hosts", env=c["env"], timeout=120)
    assert re.search(rf"^warn  state dir: {re.escape(str(c['state']))}/users/{uid(VICTIM)} is not yours .*: your records "
                     rf"are in {re.escape(str(mine[0]))}  -- ", doctor.stdout, re.M), doctor.stdout
    assert re.search(r"^ok    state dir: a directory made in .* keeps its owner", doctor.stdout, re.M), doctor.stdout


def test_an_array_s_private_file_goes_with_its_last_task_live(squatted_cell):
    c = squatted_cell
    # held until the private file has been seen: the three echoes could all end before the listing
    cp = as_user(VICTIM, "sbatch", "--parsable", "-H", "-a", "1-3", "-o", str(c["out"] / "a.%a"), "--wrap",
                 'echo "M=$MYSECRET"', env={**c["env"], "MYSECRET": "sq-array"}, timeout=CMD_TIMEOUT)
    assert (cp.returncode, cp.stderr) == (0, ""), cp.stderr
    job = int(cp.stdout.strip())
    try:
        mine, = [p for p in (c["state"] / "users").iterdir() if p.name.startswith(f"{uid(VICTIM)}@")]
        names = sorted(p.suffix for p in (mine / "env").iterdir())
        assert names == [".job", ".json", ".tasks"], names
        cp = as_user(VICTIM, "scontrol", "release", str(job), env=c["env"], timeout=CMD_TIMEOUT)
        assert cp.returncode == 0, cp.stderr
        wait_until(lambda: all(_text(c["out"] / f"a.{i}") == "M=sq-array\n" for i in (1, 2, 3)), 90, "the tasks' output")
        wait_until(lambda: list((mine / "env").iterdir()) == [], 60, "the array's private file to go with its last task")
    finally:
        run("qdel", str(job))


def test_without_a_private_place_sbatch_refuses_and_submits_nothing(squatted_cell):
    """users/ itself not root's (a state directory nobody set up): no private file can be had, so
    nothing is submitted and the secret is nowhere."""
    c = squatted_cell
    users = c["state"] / "users"
    os.chown(users, NOBODY, NOBODY)
    before = _victims_jobs()
    cp = as_user(VICTIM, "sbatch", "--wrap", "echo x", env={**c["env"], "MYSECRET": "sq-refused"}, timeout=CMD_TIMEOUT)
    assert cp.returncode == 1 and cp.stdout == ""
    assert cp.stderr.startswith("sbatch: error: Batch job submission failed: no private directory of your own under ")
    # no job of the victim's that was not there before (one an earlier test qdel'ed may leave meanwhile)
    assert _victims_jobs() <= before


def _victims_jobs() -> set[str]:
    """The ids of the victim's jobs Grid Engine has (qstat's first column, below its two header lines)."""
    return {line.split()[0] for line in run("qstat", "-u", VICTIM).stdout.splitlines()[2:] if line.strip()}


def _text(p: Path) -> str:
    try:
        return p.read_text()
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------------
# F-29: mallory makes /tmp/slurm-shim-<uid> of a user before the user's first command

SQUATTED = "shimsquatted"


def _service_info(user: str, d: str):
    """(pid, requests served) of the user's warm service in ``d`` (asked as the user: the service
    answers its own user only), or None."""
    code = f"import json; from shim.service import server; print(json.dumps(server.info({d!r})))"
    cp = as_user(user, "/opt/slurm-shim/bin/python", "-I", "-c", code, timeout=CMD_TIMEOUT)
    return json.loads(cp.stdout) if cp.returncode == 0 and cp.stdout.strip() else None


def _stop_services(user: str) -> None:
    """The user's warm services (found by their own answer, stopped by pid) and their directories."""
    u = pwd.getpwnam(user)
    for top in (f"/tmp/slurm-shim-{u.pw_uid}", f"/run/user/{u.pw_uid}/slurm-shim", f"{u.pw_dir}/.cache/slurm-shim"):
        for sock in glob.glob(f"{top}/**/service.sock", recursive=True):
            got = _service_info(user, os.path.dirname(sock))
            if got:
                try:
                    os.kill(got[0], signal.SIGTERM)
                except ProcessLookupError:
                    pass
        shutil.rmtree(top, ignore_errors=True)  # (a service whose socket is removed leaves too)


@pytest.fixture
def squatted_user(mallory):
    name = test_user(SQUATTED)
    _stop_services(name)
    target = f"/tmp/slurm-shim-{uid(name)}"
    cp = mallory_python(f"import os; os.mkdir({target!r}, 0o700)")
    assert cp.returncode == 0, cp.stderr
    yield name
    _stop_services(name)
    shutil.rmtree(target, ignore_errors=True)


def test_a_squatted_service_directory_still_gets_the_warm_service(squatted_user):
    if not (conftest.command_dir() / "squeue").read_bytes().startswith(b"\x7fELF"):
        pytest.skip("the served commands are not the compiled client here")
    cp = as_user(squatted_user, "squeue", "-h", env={"SLURM_SHIM_DEBUG": "1"}, timeout=CMD_TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    assert f"/tmp/slurm-shim-{uid(squatted_user)} is not your own private directory" in cp.stderr
    code = "import json; from shim.store import rundir; print(json.dumps(rundir.service_dir()))"
    py = as_user(squatted_user, "/opt/slurm-shim/bin/python", "-I", "-c", code, timeout=CMD_TIMEOUT)
    where = json.loads(py.stdout)
    home = pwd.getpwnam(squatted_user).pw_dir
    assert where and where.startswith((f"/run/user/{uid(squatted_user)}/slurm-shim", f"{home}/.cache/slurm-shim/run"))
    # the client started the service where the Python side looks (the same rule in both)
    wait_until(lambda: _service_info(squatted_user, where), 60, f"the warm service in {where}")
    cp = as_user(squatted_user, "squeue", "-h", timeout=CMD_TIMEOUT)
    assert cp.returncode == 0, cp.stderr
    got = _service_info(squatted_user, where)
    assert got and got[1] >= 1  # it served the second squeue
    assert not os.path.exists(f"/tmp/slurm-shim-{uid(squatted_user)}/service.sock")
    doctor = as_user(squatted_user, "slurm-shim", "doctor", "--no-hosts", timeout=120)
    assert re.search(rf"^warn  /tmp/slurm-shim-{uid(squatted_user)} is not your own private directory .* uses "
                     rf"{re.escape(where)}", doctor.stdout, re.M), doctor.stdout
