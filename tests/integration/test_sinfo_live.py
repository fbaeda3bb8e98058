"""sinfo against the live Grid Engine: partitions debug (default) and gpu on this host."""

from __future__ import annotations

import re
import socket

import pytest

from conftest import run, wait_until

pytestmark = pytest.mark.gridengine

HOST = socket.gethostname().split(".")[0]


def test_default_layout():
    cp = run("sinfo")
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[0] == "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST"
    assert re.fullmatch(rf"debug\*       up   infinite      1 +(idle|mix|alloc|drain|drng|down\*?) {HOST}", lines[1])
    assert re.fullmatch(rf"gpu          up 2-00:00:00      1 +\S+ {HOST}", lines[2])


def test_default_partition_probe():
    """snakemake: ``sinfo -o %P``, the token with ``*`` is the default partition."""
    assert run("sinfo", "-o", "%P").stdout == "PARTITION\ndebug*\ngpu\n"


def test_running_job_makes_the_node_busy():
    cp = run("qsub", "-terse", "-q", "debug", "-N", "sinfo_busy", "-b", "y", "-o", "/dev/null", "-j", "y",
             "/bin/sleep", "120", cwd="/tmp")
    job = cp.stdout.strip()
    try:
        def busy():
            out = run("sinfo", "-h", "-N", "-o", "%P %t %C").stdout.split("\n")
            rows = [ln.split() for ln in out if ln]
            return rows if rows and all(r[1] in ("mix", "alloc") for r in rows) else None

        rows = wait_until(busy, 60, "the node to show a running job")
        assert [r[0] for r in rows] == ["debug*", "gpu"]  # one node, busy in both partitions
        a, i, o, t = (int(x) for x in rows[0][2].split("/"))
        assert a >= 1 and a + i + o == t
    finally:
        run("qdel", job)


def test_node_long_and_summary():
    cp = run("sinfo", "-N", "-l")
    lines = cp.stdout.splitlines()
    assert lines[1] == ("NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE "
                        "REASON              ")
    assert len(lines) == 4 and lines[2].startswith(f"{HOST:<9}      1    debug* ")
    cp = run("sinfo", "-s")
    assert cp.stdout.splitlines()[0] == "PARTITION AVAIL  TIMELIMIT   NODES(A/I/O/T) NODELIST"


def test_json_and_errors():
    import json

    doc = json.loads(run("sinfo", "--json").stdout)
    assert [n["name"] for n in doc["nodes"]] == [HOST]
    cp = run("sinfo", "-t", "bogus")
    assert cp.returncode == 1 and cp.stderr.startswith('sinfo: error: Bad state string: "bogus"')
