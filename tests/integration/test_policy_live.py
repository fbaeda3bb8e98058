"""Issue 20 on the live cell: a quota that holds a job shows the mapped reason; sshare's usage grows
after a job runs; sprio ranks an urgent job first; sreport's bill equals the sum over sacct's rows.

Every policy object a test adds is its own (names carry a random tag), limited to projects of its
own or added where it changes no other job's scheduling (a share tree while weight_tickets_share
is 0), and removed in a finally block: the cell is left as it was found."""

from __future__ import annotations

import time
import uuid

import pytest

from conftest import SITE_CONFIG, run, wait_until

pytestmark = pytest.mark.gridengine


def qconf(*args: str, input: str | None = None) -> str:
    cp = run("qconf", *args, input=input)
    assert cp.returncode == 0, (args, cp.stdout, cp.stderr)
    return cp.stdout


def add_from_file(flag: str, text: str, tmp_path, name: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o644)
    qconf(flag, str(path))


@pytest.fixture
def tag() -> str:
    return "w2" + uuid.uuid4().hex[:6]


def test_a_quota_that_holds_a_job_shows_the_mapped_reason(tmp_path, tag, jobs):
    slots_prj, lic_prj = f"{tag}s", f"{tag}l"
    made: list[tuple[str, str]] = []
    try:
        for p in (slots_prj, lic_prj):
            add_from_file("-Aprj", f"name {p}\noticket 0\nfshare 0\nacl NONE\nxacl NONE\n", tmp_path, p)
            made.append(("-dprj", p))
        add_from_file("-Arqs", "{\n name %s_cpu\n enabled TRUE\n limit projects %s to slots=0\n}\n"
                      % (tag, slots_prj), tmp_path, "rqs1")
        made.append(("-drqs", f"{tag}_cpu"))
        add_from_file("-Arqs", "{\n name %s_seat\n enabled TRUE\n limit users {*} projects %s to anthropic_api=0\n}\n"
                      % (tag, lic_prj), tmp_path, "rqs2")
        made.append(("-drqs", f"{tag}_seat"))
        cpu = jobs.qsub("cpu", "-P", slots_prj, "-b", "y", "-o", "/dev/null", "-j", "y", "/bin/true")
        seat = jobs.qsub("seat", "-P", lic_prj, "-l", "anthropic_api=1", "-b", "y", "-o", "/dev/null", "-j", "y",
                         "/bin/true")

        def reasons():
            out = run("squeue", "-h", "-j", f"{cpu},{seat}", "-o", "%i %r").stdout.split()
            got = dict(zip(out[::2], out[1::2]))
            return got if got.get(cpu) == "AssocGrpCpuLimit" and got.get(seat) == "AssocGrpLicense" else None

        wait_until(reasons, 60, "squeue to show the quota reasons")
        assert "(AssocGrpCpuLimit)" in run("squeue", "-h", "-j", cpu).stdout  # %R of the default layout
        shown = run("scontrol", "show", "job", seat).stdout
        assert "JobState=PENDING Reason=AssocGrpLicense" in shown
    finally:
        jobs.cleanup()  # first: a project that jobs still name cannot be deleted
        jobs.ids.clear()
        for flag, name in reversed(made):
            run("qconf", flag, name)
    assert tag not in run("qconf", "-srqsl").stdout + run("qconf", "-sprjl").stdout


def _seats_free(name: str) -> int | None:
    """Grid Engine's own count of a global consumable's free seats (qstat -F: every queue
    instance shows the global host's value)."""
    import re

    m = re.search(rf'<resource name="{name}" type="gc">([0-9.]+)</resource>',
                  run("qstat", "-F", name, "-xml").stdout)
    return int(float(m.group(1))) if m else None


def test_seats_under_a_quota_are_counted_as_grid_engine_counts_them(tmp_path, tag):
    """sbatch -A team -L anthropic_api:1 twice, the team's project held to one seat by a quota:
    one job runs, the other waits with the quota's reason (squeue -L lists both). scontrol show
    licenses counts the seats the running jobs hold, as Grid Engine's consumable does, and not the
    one the quota holds back. Slurm: seats are taken when a job starts (src/slurmctld/licenses.c
    license_job_get) and scontrol prints the in-use and available counts (src/scontrol/info_lics.c
    _print_license_info); squeue -L keeps every job that asked for the license, whatever its state
    (src/squeue/print.c _filter_job, params.licenses_list)."""
    project = f"{tag}seat"
    conf = tmp_path / "config.toml"
    base = SITE_CONFIG.read_text()
    assert "\n[cluster]\n" in "\n" + base
    conf.write_text(base.replace("[cluster]\n", '[cluster]\nproject_from = "account"\n', 1))
    env = {"SLURM_SHIM_CONFIG": str(conf)}
    made: list[tuple[str, str]] = []
    ids: list[str] = []
    try:
        add_from_file("-Aprj", f"name {project}\noticket 0\nfshare 0\nacl NONE\nxacl NONE\n", tmp_path, "prj")
        made.append(("-dprj", project))
        add_from_file("-Arqs", f"{{\n name {tag}_one\n enabled TRUE\n limit projects {project} to anthropic_api=1\n}}\n",
                      tmp_path, "rqs")
        made.append(("-drqs", f"{tag}_one"))
        for _ in range(2):
            cp = run("sbatch", "--parsable", "-A", project, "-L", "anthropic_api:1", "-o", "/dev/null",
                     "--wrap", "sleep 300", env=env, cwd=tmp_path)
            assert cp.returncode == 0, cp.stderr
            ids.append(cp.stdout.strip())

        def split():
            out = run("squeue", "-h", "-L", "anthropic_api", "-o", "%i %t %r", env=env).stdout
            mine = sorted(ln.split()[1:] for ln in out.splitlines() if ln.split()[0] in ids)
            return mine if mine == [["PD", "AssocGrpLicense"], ["R", "None"]] else None

        wait_until(split, 90, "one job to run and the other to wait for the quota")
        row = run("scontrol", "show", "job", next(j for j in ids if "PD" in run(
            "squeue", "-h", "-j", j, "-o", "%t").stdout)).stdout
        assert "Reason=AssocGrpLicense" in row and "Licenses=anthropic_api:1" in row, row

        def counted():  # one look at scontrol between two equal looks at Grid Engine (other jobs may come and go)
            before = _seats_free("anthropic_api")
            text = run("scontrol", "-o", "show", "licenses", "anthropic_api", env=env).stdout
            return text if before is not None and before == _seats_free("anthropic_api") else None

        text = wait_until(counted, 60, "a steady seat count")
        fields = dict(kv.split("=", 1) for kv in text.split())
        total, used, free = int(fields["Total"]), int(fields["Used"]), int(fields["Free"])
        ge_free = _seats_free("anthropic_api")
        assert (fields["LicenseName"], free, used, total) == ("anthropic_api", ge_free, total - ge_free, 96), text
        assert used >= 1  # this test's running job holds one; the waiting one holds none
    finally:
        if ids:
            run("scancel", *ids)
            wait_until(lambda: not run("squeue", "-h", "-j", ",".join(ids)).stdout.strip(), 60, "the jobs to go")
        for flag, name in reversed(made):
            run("qconf", flag, name)
    assert tag not in run("qconf", "-srqsl").stdout + run("qconf", "-sprjl").stdout


def _weight_tickets_share() -> float:
    for line in qconf("-ssconf").splitlines():
        if line.startswith("weight_tickets_share"):
            return float(line.split()[1])
    return 0.0


def test_sshare_usage_grows_after_jobs_run(tmp_path, tag, plain_user, workdir):
    assert _weight_tickets_share() == 0, "a share tree would change scheduling on this cell"
    before_tree = run("qconf", "-sstree")
    had_tree = before_tree.returncode == 0 and "id=" in before_tree.stdout
    if had_tree:
        pytest.fail("the cell already has a share tree; this test adds its own and would replace it")
    tree = (f"id=0\nname=Root\ntype=0\nshares=1\nchildnodes=1\nid=1\nname={tag}team\ntype=0\nshares=10\n"
            f"childnodes=2\nid=2\nname={plain_user}\ntype=0\nshares=1\nchildnodes=NONE\n")
    try:
        add_from_file("-Astree", tree, tmp_path, "stree")

        def usage() -> int | None:
            cp = run("sshare", "-a", "-n", "-P", "-o", "Account,User,RawUsage", user=plain_user)
            for line in cp.stdout.splitlines():
                acct, user, raw = line.split("|")
                if user == plain_user and acct.strip() == f"{tag}team":
                    return int(raw)
            return None

        first = wait_until(lambda: usage() is not None and [usage()], 30, "sshare to show the user row")[0]
        cp = run("sbatch", "--parsable", "-o", "/dev/null", "--wrap",
                 "timeout 4 sh -c 'while :; do :; done' || true", user=plain_user, cwd=workdir)
        assert cp.returncode == 0, cp.stderr
        job = cp.stdout.strip()
        state = wait_until(lambda: (lambda st: st if st and st not in ("PENDING", "RUNNING") else None)(
            run("sacct", "-n", "-X", "-j", job, "-o", "State").stdout.strip()), 90, "the CPU job to end")
        assert state == "COMPLETED", run("sacct", "-j", job, "-o", "JobID,State,ExitCode,Reason").stdout
        grown = wait_until(lambda: (usage() or 0) >= first + 2 and usage(), 90, "sshare's RawUsage to grow")
        assert grown >= first + 2  # about 4 cpu seconds, decayed a little
        out = run("sshare", "-a", "-l").stdout
        assert f" {tag}team" in out and f"  {tag}team" in out  # the account, then its user one level deeper
    finally:
        run("qconf", "-dstree")
    assert run("qconf", "-sstree").returncode != 0 or "id=" not in run("qconf", "-sstree").stdout


def test_sprio_ranks_an_urgent_job_first(jobs):
    """Two jobs that cannot start (more matlab seats than exist, -w n); the operator gives one
    override tickets (qalter -ot), Grid Engine's lever for an urgent job: sprio puts it first by
    priority, its FAIRSHARE factor shows why. The two are submitted in one second: Grid Engine
    normalises urgency over the pending jobs, so a job one second older has all of it (its waiting
    time), and with cluster up's equal ticket and urgency weights the two would tie (CI, 7430551)."""
    import xml.etree.ElementTree as ET

    def submitted(job: str) -> str:
        """The job's submission time to the second (SGE: epoch seconds; OCS: ISO 8601, microseconds)."""
        ts = ET.fromstring(run("qstat", "-j", job, "-xml").stdout).findtext(".//JB_submission_time") or ""
        return ts if ts.isdigit() else ts[:19]

    for _attempt in range(5):
        plain = jobs.qsub("plain", "-w", "n", "-l", "matlab=4", "-b", "y", "-o", "/dev/null", "-j", "y", "/bin/true")
        urgent = jobs.qsub("urgent", "-w", "n", "-l", "matlab=4", "-b", "y", "-o", "/dev/null", "-j", "y", "/bin/true")
        if submitted(plain) == submitted(urgent) != "":
            break
        run("qdel", plain, urgent)
    else:
        pytest.fail("five pairs of qsub calls straddled a second each")
    assert run("qalter", "-ot", "1000", urgent).returncode == 0

    seen = []

    def ranked():
        out = run("sprio", "-h", "-j", f"{plain},{urgent}", "-S", "-Y", "-o", "%i %Y %F").stdout
        seen[:] = [out]
        rows = [ln.split() for ln in out.split("\n") if ln]
        return rows if len(rows) == 2 and rows[0][0] == urgent and int(rows[0][1]) > int(rows[1][1]) else None

    # (the scheduler hands out the override tickets on its next run: seconds, longer on a busy cell)
    try:
        rows = wait_until(ranked, 120, "sprio to rank the urgent job first")
    except pytest.fail.Exception:
        pri = run("qstat", "-pri", "-ext", "-u", "*").stdout
        pytest.fail(f"sprio never ranked {urgent} first; last sprio:\n{seen[0] if seen else ''}\nqstat -pri -ext:\n{pri}")
    assert int(rows[0][2]) > int(rows[1][2])  # the override tickets are in the fair-share factor
    assert run("sprio", "-h", "-j", plain, "-o", "%i").stdout.strip() == plain


def test_sreport_totals_equal_the_sum_over_sacct_rows(tag, plain_user, workdir):
    account = f"{tag}bill"
    ids = []
    for secs in (2, 3):
        cp = run("sbatch", "--parsable", "-A", account, "-c", "2", "-o", "/dev/null", "--wrap", f"sleep {secs}",
                 user=plain_user, cwd=workdir)
        assert cp.returncode == 0, cp.stderr
        ids.append(cp.stdout.strip())
    wait_until(lambda: run("sacct", "-n", "-X", "-j", ",".join(ids), "-o", "State").stdout.split() == [
        "COMPLETED", "COMPLETED"], 120, "both jobs to complete")
    # sacct reads a job's times from the shim's own end event until Grid Engine's accounting record
    # of it is written, whose times then win (a second apart at most; CI once saw sreport, a moment
    # later than sacct, count 12 CPU-seconds where sacct had 10): both read those records
    wait_until(lambda: all(run("qacct", "-j", j).returncode == 0 for j in ids), 120, "both accounting records")
    now = time.time()
    start = time.strftime("%Y-%m-%dT%H:00:00", time.localtime(now - 7200))
    end = time.strftime("%Y-%m-%dT%H:00:00", time.localtime(now + 7200))
    cp = run("sacct", "-a", "-n", "-X", "-P", "-A", account, "-S", start, "-E", end, "-o", "Account,User,CPUTimeRAW")
    rows = [ln.split("|") for ln in cp.stdout.splitlines()]
    assert len(rows) == 2 and all(r[0] == account and r[1] == plain_user for r in rows), cp.stdout
    want = sum(int(r[2]) for r in rows)
    assert want >= 2 * (2 + 3)  # two CPUs each
    cp = run("sreport", "-n", "-P", "-t", "seconds", "cluster", "AccountUtilizationByUser", f"start={start}",
             f"end={end}", f"accounts={account}", "format=Account,Login,Used")
    assert cp.returncode == 0, cp.stderr
    got = [ln.split("|") for ln in cp.stdout.splitlines()]
    assert [account, "", str(want)] in got and [account, plain_user, str(want)] in got
    cp = run("sreport", "-n", "-P", "-t", "seconds", "user", "TopUsage", f"start={start}", f"end={end}",
             f"accounts={account}", "format=Login,Account,Used")
    assert cp.stdout.splitlines() == [f"{plain_user}|{account}|{want}"]


def test_sacctmgr_lists_what_a_user_may_charge_and_changes_nothing(tmp_path, tag, plain_user):
    """The tools' question (sacctmgr -nP show assoc user=$USER format=account) on a project made with
    raw qconf: its access list's members are its users; a change through sacctmgr is refused, naming
    the qconf command that does it, and nothing is made."""
    team, project = f"{tag}list", f"{tag}proj"
    qconf("-au", plain_user, team)  # an access list with the plain user in it
    try:
        add_from_file("-Aprj", f"name {project}\noticket 0\nfshare 0\nacl {team}\nxacl NONE\n", tmp_path, "prj")
        try:
            cp = run("sacctmgr", "-nP", "show", "assoc", f"user={plain_user}", "format=account")
            assert cp.returncode == 0 and project in cp.stdout.split(), cp.stdout + cp.stderr
            cp = run("sacctmgr", "-nP", "show", "assoc", f"account={project}", "format=account,user")
            assert f"{project}|{plain_user}" in cp.stdout.splitlines(), cp.stdout
            cp = run("sacctmgr", "-i", "add", "account", f"{tag}new")
            assert cp.returncode == 1 and "qconf -aprj" in cp.stderr, cp.stderr
            assert f"{tag}new" not in run("qconf", "-sprjl").stdout
        finally:
            qconf("-dprj", project)
    finally:
        qconf("-dul", team)
