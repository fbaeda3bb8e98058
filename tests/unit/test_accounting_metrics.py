"""A job's own metrics (gridengine/metrics.py): the lines a job appends to $SLURM_SHIM_METRICS, what
the epilog adds to the shepherd's usage file, and sacct's AdminComment from accounting.jsonl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, REPO, wait_until
from shim.admin import cluster_ocs
from shim.gridengine import metrics
from shim.gridengine import qacct

OCS = FIXTURES / "gridengine" / "ocs-9.1.4"


# ---------------------------------------------------------------------------------------------
# the job's lines


def test_lines_add_up_per_name():
    got, bad = metrics.parse(b"tokens_in=1200\ntool_calls=1\n\n# a comment\ntokens_in=300\n"
                             b"tool_calls=1\ncost.usd=0.25\n cost.usd = 0.17 \n")
    assert got == {"tokens_in": 1500.0, "tool_calls": 2.0, "cost.usd": pytest.approx(0.42)}
    assert metrics.value_text(got["cost.usd"]) == "0.42"
    assert bad == 0


@pytest.mark.parametrize("line", [
    "tokens", "=5", "1tokens=5", "tok ens=5", "tokens=", "tokens=five", "tokens=inf", "tokens=nan",
    "tokens=1_000", "tokens=0x10", "tok,ens=1", "tok|ens=1", "tokens=5=6", "a" * 65 + "=1", "tökens=1",
])
def test_a_line_that_is_not_name_equals_number_is_ignored(line):
    got, bad = metrics.parse(f"ok=1\n{line}\n".encode())
    assert (got, bad) == ({"ok": 1.0}, 1)


def test_numbers_are_plain_decimals():
    assert [metrics.number(t) for t in ("12", "-0.5", "+3", ".5", "1e6", "2.5E-3")] == [12, -0.5, 3, 0.5, 1e6, 0.0025]
    assert metrics.number("1e999") is None  # out of range is no number either


def test_names_past_the_limit_are_ignored():
    data = "".join(f"m{i}=1\n" for i in range(metrics.MAX_METRICS + 3)) + "m0=1\n"
    got, bad = metrics.parse(data.encode())
    assert len(got) == metrics.MAX_METRICS and got["m0"] == 2.0 and bad == 3


def test_values_print_as_slurm_users_read_them():
    assert [metrics.value_text(v) for v in (1200.0, 0.0, -3.0, 0.42, 1e20, 2.5e-7)] == [
        "1200", "0", "-3", "0.42", "1e+20", "2.5e-07"]
    assert metrics.usage_lines({"tokens_in": 1500.0, "cost.usd": 0.42}) == (
        "metric_tokens_in=1500\nmetric_cost.usd=0.42\n")


# ---------------------------------------------------------------------------------------------
# the epilog: the shepherd's spool directory, its config and usage file, the job's TMPDIR


def _job(tmp_path, lines: bytes | None, owner: str | None = None):
    """A spool directory as the execd makes it (config with tmpdir and job_owner, the usage file
    the shepherd wrote) and the job's TMPDIR, with the metrics file if ``lines``."""
    import pwd

    jobdir = tmp_path / "active_jobs" / "500100.1"
    tmpdir = tmp_path / "tmp" / "500100.1.debug"
    jobdir.mkdir(parents=True)
    tmpdir.mkdir(parents=True)
    owner = owner or pwd.getpwuid(os.getuid()).pw_name
    (jobdir / "config").write_text(f"job_owner={owner}\ntmpdir={tmpdir}\njob_id=500100\n")
    (jobdir / "usage").write_text("wait_status=0\nexit_status=0\nru_wallclock=1\n")
    if lines is not None:
        (tmpdir / metrics.FILE_NAME).write_bytes(lines)
    return jobdir, tmpdir


def test_the_epilog_appends_the_metrics_to_the_usage_file(tmp_path):
    jobdir, _ = _job(tmp_path, b"tokens_in=1200\ntool_calls=3\nbad line\ntokens_in=34\n")
    assert metrics.record(str(jobdir)) == "2 metrics, 1 lines ignored"
    assert (jobdir / "usage").read_text() == (
        "wait_status=0\nexit_status=0\nru_wallclock=1\nmetric_tokens_in=1234\nmetric_tool_calls=3\n")


def test_the_epilog_adds_nothing_without_metrics(tmp_path):
    jobdir, tmpdir = _job(tmp_path, None)
    before = (jobdir / "usage").read_text()
    assert metrics.record(str(jobdir)) == "no metrics"
    (tmpdir / metrics.FILE_NAME).write_bytes(b"# nothing\nnot a metric\n")
    assert metrics.record(str(jobdir)) == "no metrics (1 lines ignored)"
    assert (jobdir / "usage").read_text() == before


def test_the_epilog_reads_only_the_job_owners_own_small_regular_file(tmp_path):
    jobdir, tmpdir = _job(tmp_path, None)
    before = (jobdir / "usage").read_text()
    target = tmp_path / "elsewhere"
    target.write_text("stolen=1\n")
    (tmpdir / metrics.FILE_NAME).symlink_to(target)  # a link: never followed
    assert "ignored (not a regular file of" in metrics.record(str(jobdir))
    (tmpdir / metrics.FILE_NAME).unlink()
    os.mkfifo(tmpdir / metrics.FILE_NAME)  # a FIFO: never blocks
    assert "ignored" in metrics.record(str(jobdir))
    (tmpdir / metrics.FILE_NAME).unlink()
    (tmpdir / metrics.FILE_NAME).write_bytes(b"x=1\n" * (metrics.MAX_BYTES // 4 + 1))  # too large
    assert "ignored" in metrics.record(str(jobdir))
    if os.getuid() == 0:  # another user's file in the job's TMPDIR is not the job's
        os.chown(tmpdir / metrics.FILE_NAME, 65534, 65534)
        (tmpdir / metrics.FILE_NAME).write_bytes(b"x=1\n")
        assert "ignored" in metrics.record(str(jobdir))
    assert (jobdir / "usage").read_text() == before


def test_the_epilog_writes_only_into_grid_engines_usage_file(tmp_path):
    jobdir, _ = _job(tmp_path, b"x=1\n")
    (jobdir / "usage").unlink()
    assert metrics.record(str(jobdir)).startswith("no usage file")  # never made: the job never ran
    assert not (jobdir / "usage").exists()
    target = tmp_path / "target"
    target.write_text("")
    (jobdir / "usage").symlink_to(target)
    assert metrics.record(str(jobdir)).startswith("no usage file")  # a link is never followed
    assert target.read_text() == ""
    jobdir2, _ = _job(tmp_path / "b", b"x=1\n", owner="no-such-user-metrics")
    assert metrics.record(str(jobdir2)) == "no user no-such-user-metrics"


def test_the_shepherd_is_found_by_its_name_and_owner_only(tmp_path):
    """The spool directory is the working directory of the nearest root-owned ``sge_shepherd``
    ancestor, nothing of the environment; a process of another name is no shepherd."""
    jobdir, _ = _job(tmp_path, None)
    assert metrics.shepherd_dir() is None  # pytest has no shepherd among its ancestors
    fake = tmp_path / "sge_shepherd"
    fake.symlink_to("/bin/sleep")  # a process's name is what it was started as
    p = subprocess.Popen([str(fake), "30"], cwd=jobdir)
    other = subprocess.Popen(["/bin/sleep", "30"], cwd=jobdir)
    try:
        wait_until(lambda: (metrics._stat_fields(p.pid) or ("",))[0] == "sge_shepherd", 10, "the fake shepherd to start",
                   delay=0.01, cap=0.1)
        assert metrics.shepherd_dir(p.pid) == (str(jobdir) if os.getuid() == 0 else None)
        assert metrics.shepherd_dir(other.pid) is None
    finally:
        for q in (p, other):
            q.kill()
            q.wait()


def test_the_epilog_script_end_to_end_under_a_shepherd(tmp_path):
    """The script cluster up writes, started by a (fake, root's) shepherd in the spool directory:
    the metrics land in the usage file, the script exits 0; without a shepherd it changes nothing
    and exits 0 all the same."""
    jobdir, _ = _job(tmp_path, b"tokens_out=77\n")
    script = tmp_path / "slurm-shim-epilog"
    script.write_text(metrics.epilog_script(sys.executable, str(REPO / "src")))
    script.chmod(0o755)
    shepherd = tmp_path / "sge_shepherd"
    shepherd.symlink_to(sys.executable)
    run = f"import subprocess, sys; sys.exit(subprocess.call([{str(script)!r}]))"
    cp = subprocess.run([str(shepherd), "-I", "-c", run], cwd=jobdir, capture_output=True, text=True, timeout=60)
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", "")
    want = "metric_tokens_out=77\n" if os.getuid() == 0 else ""
    assert (jobdir / "usage").read_text().endswith("ru_wallclock=1\n" + want)
    cp = subprocess.run([str(script)], cwd=jobdir, capture_output=True, text=True, timeout=60)
    assert (cp.returncode, cp.stderr) == (0, "")
    assert (jobdir / "usage").read_text().count("metric_") == (1 if os.getuid() == 0 else 0)


def test_the_epilog_script_exits_0_when_the_shim_cannot_be_imported(tmp_path):
    script = tmp_path / "slurm-shim-epilog"
    text = metrics.epilog_script("/usr/bin/python3", str(tmp_path / "nowhere"))
    script.write_text(text)
    script.chmod(0o755)
    cp = subprocess.run([str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                        env={"PATH": "/usr/bin:/bin"})
    assert cp.returncode == 0
    assert cp.stderr.startswith("slurm-shim epilog: ModuleNotFoundError")
    with pytest.raises(ValueError):
        metrics.epilog_script("/opt/my python/bin/python", "/src")


# ---------------------------------------------------------------------------------------------
# the cell's configuration


def test_the_ocs_cell_asks_for_the_usage_pattern_but_names_the_epilog_nowhere():
    # OCS 9.1.4 fails every `qrsh -pty n` job (srun's) of a queue with an epilog: cluster up writes
    # the script, and a site names it on batch-only queues (cluster_ocs.py)
    conf = cluster_ocs.GLOBAL_CONF
    assert "usage_patterns=metrics:metric_*" in conf["reporting_params"].split()
    assert "epilog" not in conf
    assert cluster_ocs.epilog_conf(cluster_ocs.Cell()) == "root@/opt/ocs/default/common/slurm-shim-epilog"


def test_ensure_epilog_writes_once(tmp_path):
    c = cluster_ocs.Cell(root=str(tmp_path))
    os.makedirs(c.common)
    assert cluster_ocs.ensure_epilog(c) is True
    path = tmp_path / "default" / "common" / "slurm-shim-epilog"
    st = path.stat()
    assert oct(st.st_mode & 0o7777) == "0o755"
    assert path.read_text().startswith(f"#!{sys.executable} -I\n")
    assert cluster_ocs.ensure_epilog(c) is False  # unchanged: not rewritten
    path.write_text("#!/bin/sh\nexit 3\n")
    assert cluster_ocs.ensure_epilog(c) is True and "from shim.gridengine.metrics import epilog" in path.read_text()


# ---------------------------------------------------------------------------------------------
# reading them back


def test_usage_patterns_values_from_a_record():
    usage = {"rusage": {"ru_wallclock": 1}, "eusage": {"cpu": 0.1},
             "metrics": {"metric_tokens_in": 1200.0, "metric_cost.usd": 0.42, "cpu": 3.0},
             "gpu": {"nvidia_util": 87.5}, "bad,name": {"x": 1.0}, "odd": {"a=b": 1.0, "s": "text"}}
    assert metrics.from_usage(usage) == {"tokens_in": 1200.0, "cost.usd": 0.42, "metrics/cpu": 3.0,
                                         "gpu/nvidia_util": 87.5}
    assert metrics.text(metrics.from_usage(usage)) == (
        "cost.usd=0.42,gpu/nvidia_util=87.5,metrics/cpu=3,tokens_in=1200")
    assert metrics.from_usage({"rusage": {}, "eusage": {}}) is None
    assert metrics.text(None) == ""


def test_qacct_text_metric_lines():
    text = "=" * 62 + "\nqname        debug\njobnumber    500100\nmetric_tokens_in 1200.000\nmetric_x   oops\n"
    [r] = qacct.parse_qacct(text)
    assert r.metrics == {"tokens_in": 1200.0}


def test_colon_and_plain_jsonl_records_have_no_metrics():
    for r in qacct.scan((OCS / "accounting.jsonl").read_bytes()) + qacct.scan(
            (OCS / "accounting.colon").read_bytes()):
        assert r.metrics is None


# ---------------------------------------------------------------------------------------------
# recorded on the live OCS 9.1.4 cell (fixtures/gridengine/ocs-9.1.4/README.md)

METRICS_JSONL = OCS / "accounting-metrics.jsonl"
WANT = {"tokens_in": 1234.0, "tool_calls": 2.0, "cost_usd": 0.25}


def test_recorded_usage_pattern_values_are_the_jobs_metrics():
    recs = {r.job: r for r in qacct.scan(METRICS_JSONL.read_bytes())}
    assert sorted(recs) == [501446, 501454, 501455]
    assert recs[501446].metrics is None  # "metrics":{} (every job's record once the pattern is set)
    assert recs[501454].metrics == recs[501455].metrics == WANT
    assert (recs[501454].owner, recs[501455].owner) == ("root", "alice")
    raw = json.loads(METRICS_JSONL.read_text().splitlines()[2])["usage"]["metrics"]
    assert raw == {"metric_tokens_in": 1234.0, "metric_tool_calls": 2.0, "metric_cost_usd": 0.25}
    # OCS's qacct -j of the same job prints them too (metric_<name>, without the pattern's name)
    [t] = qacct.parse_qacct((OCS / "qacct-j-metrics.txt").read_text())
    assert (t.job, t.metrics) == (501455, WANT)


@pytest.fixture
def metrics_site(monkeypatch, tmp_path):
    """A site whose accounting.jsonl holds the recorded lines, nothing queued, as root."""
    import shutil

    from conftest import use_site_config
    from shim.gridengine import backends
    from shim import siteconf
    from shim.gridengine.replay import ReplayBackend
    from shim.proc import Result

    use_site_config(monkeypatch, tmp_path)
    for var in ("SACCT_FORMAT", "SLURM_TIME_FORMAT", qacct.ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    root = tmp_path / "sge"
    (root / "default" / "common").mkdir(parents=True)
    shutil.copy(METRICS_JSONL, root / "default" / "common" / "accounting.jsonl")
    conf = tmp_path / "config.toml"
    conf.write_text(conf.read_text().replace('sge_root = "/var/lib/gridengine"', f'sge_root = "{root}"'))
    siteconf.reset()
    empty = (FIXTURES / "gridengine" / "sge-8.1.9" / "live-qstat-u-all-r-xml.empty.xml").read_text()
    monkeypatch.setattr(backends, "_override", ReplayBackend({("qstat",): Result(("qstat",), 0, empty, "")}))
    monkeypatch.setattr(time, "time", lambda: 1796197700)
    monkeypatch.setattr(os, "getuid", lambda: 0)
    yield
    siteconf.reset()
    time.tzset()


def _sacct(capsys, *args: str) -> str:
    from shim.cli import sacct

    assert sacct.main(list(args)) == 0
    return capsys.readouterr().out


def test_sacct_shows_them_in_admin_comment(metrics_site, capsys):
    out = _sacct(capsys, "-j", "501446,501454,501455", "-P", "-o", "JobID,User,State,AdminComment")
    assert out.splitlines() == [
        "JobID|User|State|AdminComment",
        "501446|root|COMPLETED|",
        "501446.batch||COMPLETED|",
        "501454|root|COMPLETED|cost_usd=0.25,tokens_in=1234,tool_calls=2",
        "501454.batch||COMPLETED|",
        "501455|alice|COMPLETED|cost_usd=0.25,tokens_in=1234,tool_calls=2",
        "501455.batch||COMPLETED|",
    ]
    # parseable as a TRES string is: name=value pairs joined by commas
    pairs = dict(kv.split("=") for kv in out.splitlines()[3].split("|")[3].split(","))
    assert {k: float(v) for k, v in pairs.items()} == WANT
    # fixed width: cut to 15 with "+" as Slurm cuts text; %N widens it
    out = _sacct(capsys, "-j", "501454", "-X", "-n", "-o", "AdminComment,AdminComment%45")
    assert out.splitlines() == ["cost_usd=0.25,+ " + "cost_usd=0.25,tokens_in=1234,tool_calls=2".rjust(45) + " "]
    doc = json.loads(_sacct(capsys, "-j", "501454,501446", "--json"))
    assert [j["comment"]["administrator"] for j in doc["jobs"]] == [
        None, "cost_usd=0.25,tokens_in=1234,tool_calls=2"]
