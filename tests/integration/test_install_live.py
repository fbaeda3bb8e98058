"""`slurm-shim install` on a cluster configuration `cluster up` did not make: a queue w5batch.q on
this host whose only PE, w5pe, spreads over hosts ($fill_up), made with raw qconf. --plan proposes a
working site config and the missing one-host PE; --apply (into scratch paths: never the real site
config, state dir or profile.d) makes sbatch, squeue and sacct work with it; a second --apply
changes nothing; --uninstall leaves Grid Engine's configuration as it was found, dump for dump.
The queue and PE are removed at the end whatever happens."""

from __future__ import annotations

import json
import os
import re
import stat
import xml.etree.ElementTree as ET

import pytest

from conftest import CELL, run, wait_until
from shim import cluster

pytestmark = pytest.mark.gridengine

QUEUE, PE = "w5batch.q", "w5pe"
HOST = cluster.this_host()


def qconf(*args: str) -> str:
    cp = run("qconf", *args)
    assert cp.returncode == 0, (args, cp.stdout, cp.stderr)
    return cp.stdout


def names(flag: str) -> list[str]:
    cp = run("qconf", flag)
    return cluster.parse_list(cp.stdout) if cp.returncode == 0 else []


def dumps() -> dict[str, str]:
    """What --uninstall must leave as it found: the queue, PE and complex lists, every queue and PE,
    and this exec host (where the exclusive complex would go)."""
    out = {f: run("qconf", f).stdout for f in ("-sql", "-spl", "-sc")}
    out |= {f"-sq {q}": qconf("-sq", q) for q in names("-sql")}
    out |= {f"-sp {p}": qconf("-sp", p) for p in names("-spl")}
    out[f"-se {HOST}"] = re.sub(r"(?ms)^load_values.*?^(?=\S)", "", qconf("-se", HOST))  # load changes anyway
    return out


def add(flag: str, attrs: dict[str, str], tmp_path, name: str) -> None:
    path = tmp_path / name
    path.write_text(cluster.render_attrs(attrs))
    qconf(flag, str(path))


@pytest.fixture
def site(tmp_path):
    """w5batch.q (2 slots on this host, PE w5pe only) and w5pe ($fill_up), removed afterwards with
    whatever install left of its own on them."""
    pes_before = set(names("-spl"))
    for leftover in (QUEUE,):  # an earlier run that died before its cleanup
        if leftover in names("-sql"):
            qconf("-dq", leftover)
    if PE in pes_before:
        qconf("-dp", PE)
        pes_before.discard(PE)
    pe = cluster.parallel_env(PE, "$fill_up", False) | {"slots": "8"}
    if CELL == "ocs":  # OCS 9 refuses SGE's qsort_args and requires its own PE attributes
        from shim import cluster_ocs

        pe = cluster_ocs.ocs_pe(pe)
    add("-Ap", pe, tmp_path, "pe")
    queue = cluster.queue(QUEUE, 2) | {"hostlist": HOST, "pe_list": PE, "seq_no": "50"}
    add("-Aq", queue, tmp_path, "queue")
    try:
        wait_until(lambda: cluster.parse_queue_states(run("qstat", "-f", "-q", QUEUE).stdout).get(f"{QUEUE}@{HOST}") == "",
                   60, f"{QUEUE}@{HOST} to be ready")
        yield
    finally:
        jobs = run("qstat", "-u", "*", "-q", QUEUE).stdout.splitlines()[2:]
        if jobs:
            run("qdel", "-f", *[line.split()[0] for line in jobs])
            wait_until(lambda: not run("qstat", "-u", "*", "-q", QUEUE).stdout.strip(), 60, "w5 jobs to go")
        if QUEUE in names("-sql"):
            qconf("-dq", QUEUE)
        for p in set(names("-spl")) - pes_before:
            qconf("-dp", p)


def install(*args: str, tmp_path) -> tuple[int, str, str]:
    scratch = ["--config", str(tmp_path / "config.toml"), "--state-dir", str(tmp_path / "state"),
               "--record", str(tmp_path / "record" / "install-record.json"), "--profile", str(tmp_path / "profile.sh")]
    cp = run("slurm-shim", "install", *args, *scratch, "--queue", QUEUE, timeout=120)
    return cp.returncode, cp.stdout, cp.stderr


def test_install_plans_applies_reapplies_and_uninstalls_on_a_raw_qconf_cluster(site, tmp_path):
    before = dumps()

    code, out, err = install("--plan", "--json", tmp_path=tmp_path)
    assert code == 0, err
    plan = json.loads(out)
    assert dumps() == before  # --plan changes nothing
    made = [(a["kind"], a["target"]) for a in plan["actions"] if a["state"] == "create"]
    assert made == [("pe", "shim_smp"), ("queue-pe", f"{QUEUE} shim_smp"), ("state-dir", str(tmp_path / "state")),
                    ("file", str(tmp_path / "profile.sh")), ("file", str(tmp_path / "config.toml"))]
    commands = {a["target"]: a["commands"] for a in plan["actions"]}
    assert commands[f"{QUEUE} shim_smp"] == [f"qconf -aattr queue pe_list shim_smp {QUEUE}"]
    assert re.search(r'\[partitions\.w5batch\]\nqueue = "w5batch\.q"\npe = "shim_smp"\npe_multinode = "w5pe"\n'
                     r"default = true\n", plan["config"])
    assert plan["probe"]["version"].startswith(("SGE", "OCS", "GCS"))

    code, out, err = install("--apply", tmp_path=tmp_path)
    assert code == 0, out + err
    assert "install: 5 change(s) made" in out
    assert (tmp_path / "config.toml").read_text() == plan["config"]
    record = tmp_path / "record" / "install-record.json"
    st = os.stat(record)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o644)
    assert "shim_smp" in cluster.parse_names(cluster.parse_attrs(qconf("-sq", QUEUE))["pe_list"])
    applied = dumps()

    # the installed config works: a two-CPU job in the new partition, seen by squeue and sacct
    env = {"SLURM_SHIM_CONFIG": str(tmp_path / "config.toml"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    cp = run("sbatch", "--parsable", "-n", "2", "-o", str(tmp_path / "out.txt"), "--wrap", "echo hello; sleep 2",
             env=env, cwd=str(tmp_path))
    assert cp.returncode == 0, cp.stderr
    job = cp.stdout.strip()
    detail = run("qstat", "-j", job, "-xml").stdout  # (the text's key differs: OCS's parallel_environment:)
    el = ET.fromstring(detail).find(".//djob_info/element")
    assert el is not None, detail
    assert (el.findtext("JB_pe"), el.findtext("JB_pe_range/ranges/RN_min"),
            el.findtext("JB_pe_range/ranges/RN_max")) == ("shim_smp", "2", "2"), detail
    seen = run("squeue", "-h", "-j", job, "-o", "%i %P %C", env=env).stdout.split()
    assert seen[:3] in ([job, "w5batch", "2"], []), seen  # [] only if it already ended
    wait_until(lambda: run("sacct", "-X", "-n", "-P", "-j", job, "-o", "JobID,Partition,State,AllocCPUS",
                           env=env).stdout.strip() == f"{job}|w5batch|COMPLETED|2", 120, "sacct to show the job done")
    assert (tmp_path / "out.txt").read_text() == "hello\n"

    record_text = record.read_text()
    code, out, err = install("--apply", tmp_path=tmp_path)
    assert code == 0, out + err
    assert out.startswith("install: nothing to change")
    assert record.read_text() == record_text and dumps() == applied

    # qmaster lets a PE go only once no job it knows refers to it: an ended job stays known a
    # moment after accounting has it (OCS keeps it until it is cleaned up)
    wait_until(lambda: run("qstat", "-j", job).returncode != 0, 60, "qmaster to forget the ended job")
    code, out, err = install("--uninstall", "--purge-state", tmp_path=tmp_path)
    assert code == 0, out + err
    assert dumps() == before
    for gone in ("config.toml", "profile.sh", "state", "record/install-record.json"):
        assert not (tmp_path / gone).exists(), gone


def test_doctor_checks_the_shim_on_every_execution_host_through_grid_engine(tmp_path):
    """One check job per exec host, through Grid Engine: this host passes with the real site config;
    a job whose interpreter is missing there comes back as Grid Engine's exit code 127 and doctor's
    fix; --no-hosts runs no job."""
    cp = run("slurm-shim", "doctor", timeout=120)
    assert re.search(rf"^ok    exec host {re.escape(HOST)}: slurm-shim \S+ from \S+, the site config and the state "
                     r"dir \S+ are there$", cp.stdout, re.M), cp.stdout
    from shim import config

    cfg = config.load("/etc/slurm-shim/config.toml")
    where = {"python": str(tmp_path / "python"), "prefix": str(tmp_path), "version": "x", "src": "/nowhere",
             "config": "(none)", "state_dir": cfg.cluster.state_dir}
    script = cluster.host_check_script(where["python"], "/nowhere", None, "")
    qsub = os.path.join(cfg.gridengine.bin_dir or "/usr/bin", "qsub")
    f = cluster.host_finding(HOST, qsub, cfg, script, where)
    assert (f.level, f.what, f.fix) == ("FAIL", f"exec host {HOST} has no interpreter {tmp_path}/python",
                                        f"install the shim at {tmp_path} on it (the same path as here), or share {tmp_path}")
    quick = run("slurm-shim", "doctor", "--no-hosts").stdout
    assert "ok    sge_qmaster answers" in quick and not re.search(r"^\S+ +exec host ", quick, re.M)


def test_doctor_checks_the_second_execution_host_too(two_hosts):
    """Every execution host Grid Engine knows gets its check job (qconf -sel): with the two-host
    tests' second host up, doctor says the shim is there too (same path: a shared filesystem)."""
    cp = run("slurm-shim", "doctor", timeout=180)
    for host in (HOST, two_hosts.node):
        assert re.search(rf"^ok    exec host {re.escape(host)}: slurm-shim \S+ from \S+, the site config and the "
                         r"state dir \S+ are there$", cp.stdout, re.M), cp.stdout
