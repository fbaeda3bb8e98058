"""Slurm's own PMI-2 client library against srun's PMI service, live (issue 17).

Debian's libpmi2-0-dev is Slurm 22.05.8's libpmi2 (contribs/pmi2), the client MPI libraries built
"--with-pmi=slurm" link. A small program compiled against it (PMI2_Init, PMI2_Job_GetId,
PMI2_KVS_Put/Fence/Get of every other rank's key, PMI2_Info_GetJobAttr, node attributes,
PMIX_Ring, PMI2_Finalize) runs through `srun --mpi=pmi2 -n 4` inside `sbatch -n 4`, through the
site's default plugin, and through srun's own allocation outside a job; PMI2_Abort ends the step
for isworld=TRUE only, as Slurm's plugin does; on the two-host cluster too (two_hosts: block and
cyclic, the other host's ranks through its relay). Runs on either cell (SLURM_SHIM_CELL)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import run, wait_until

pytestmark = pytest.mark.gridengine

HOST = os.uname().nodename.split(".")[0]
USER = "shimtester"
HEADER = Path("/usr/include/slurm/pmi2.h")
PROGRAM = r"""
#include <slurm/pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(call) do { int rc_ = (call); if (rc_ != PMI2_SUCCESS) { \
    fprintf(stderr, "pmi2hello: %s failed: %d\n", #call, rc_); return 2; } } while (0)

int main(int argc, char **argv) {
    int spawned, size, rank, appnum, found, len, i, pos, ranks;
    char jobid[256], key[64], value[1024], want[1024], attr[1024], left[1024], right[1024], host[256];
    const char *mode = argc > 1 ? argv[1] : "", *procid = getenv("SLURM_PROCID"), *localid = getenv("SLURM_LOCALID");
    gethostname(host, sizeof host);
    host[strcspn(host, ".")] = 0;
    CHECK(PMI2_Init(&spawned, &size, &rank, &appnum));
    CHECK(PMI2_Job_GetId(jobid, sizeof jobid));
    printf("rank %d of %d appnum %d spawned %d jobid %s procid %s host %s\n", rank, size, appnum, spawned, jobid,
           procid ? procid : "-", host);
    if (!strcmp(mode, "abort-world") && rank == 1) { fflush(stdout); sleep(1); PMI2_Abort(1, "rank 1 gives up"); }
    snprintf(key, sizeof key, "card-%d", rank);
    snprintf(value, sizeof value, "rank%d;at=%s", rank, host);
    CHECK(PMI2_KVS_Put(key, value));
    if (localid && !strcmp(localid, "0")) {
        snprintf(value, sizeof value, "%d", rank);
        CHECK(PMI2_Info_PutNodeAttr("leader", value));
    }
    CHECK(PMI2_KVS_Fence());
    for (i = 0; i < size; i++) {
        if (i == rank) continue;
        snprintf(key, sizeof key, "card-%d", i);
        CHECK(PMI2_KVS_Get(jobid, i, key, value, sizeof value, &len));
        snprintf(want, sizeof want, "rank%d;at=", i);
        if (strncmp(value, want, strlen(want)) != 0) {
            fprintf(stderr, "pmi2hello: rank %d got %s=%s\n", rank, key, value);
            return 3;
        }
        printf("rank %d sees %s\n", rank, value);
    }
    CHECK(PMI2_Info_GetJobAttr("PMI_process_mapping", attr, sizeof attr, &found));
    printf("rank %d mapping %s\n", rank, found ? attr : "-");
    CHECK(PMI2_Info_GetJobAttr("universeSize", attr, sizeof attr, &found));
    printf("rank %d universe %s\n", rank, found ? attr : "-");
    CHECK(PMI2_Info_GetNodeAttr("leader", attr, sizeof attr, &found, 0));
    printf("rank %d leader %s\n", rank, found ? attr : "-");
    snprintf(value, sizeof value, "ring%d", rank);
    CHECK(PMIX_Ring(value, &pos, &ranks, left, right, sizeof left));
    printf("rank %d ring %d of %d left %s right %s\n", rank, pos, ranks, left, right);
    fflush(stdout);
    if (!strcmp(mode, "abort-self") && rank == 1) PMI2_Abort(0, "rank 1 alone");
    CHECK(PMI2_Finalize());
    printf("rank %d done\n", rank);
    return 0;
}
"""


@pytest.fixture(scope="module")
def program():
    """pmi2hello, compiled with cc against Slurm's libpmi2, in a directory every user can read."""
    if not HEADER.exists() or not shutil.which("cc"):
        pytest.fail(f"{HEADER} or cc missing: scripts/setup installs libpmi2-0-dev (and cc with libmpich-dev)")
    d = Path(tempfile.mkdtemp(prefix="shim-pmi2-", dir="/tmp"))
    d.chmod(0o755)
    (d / "pmi2hello.c").write_text(PROGRAM)
    subprocess.run(["cc", "-Wall", "-o", str(d / "pmi2hello"), str(d / "pmi2hello.c"), "-lpmi2"], check=True,
                   timeout=120)
    (d / "pmi2hello").chmod(0o755)
    yield d / "pmi2hello"
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def submitdir(plain_user):
    """The submit directory of one test, under /tmp (pytest's own root is 0700 and is reset so
    whenever another pytest starts); every user may write there (the job's output)."""
    d = Path(tempfile.mkdtemp(prefix="shim-pmi2-submit-", dir="/tmp"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def hosts_of(text: str) -> dict[int, str]:
    """Each rank's host, as the rank itself printed it."""
    return {int(m[1]): m[2] for m in re.finditer(r"^rank (\d+) of \d+ .* host (\S+)$", text, re.M)}


def check_ranks(text: str, size: int, jobid: str, mapping: str, hosts: dict[int, str] | None = None) -> None:
    """Every rank of ``size`` got through every call: its rank and size, every other rank's card,
    the job attributes, its node's leader (its SLURM_LOCALID 0, the node's lowest rank) and its
    place in the ring with its neighbours (Slurm's ring: node by node, from rank 0's node)."""
    hosts = hosts or {r: HOST for r in range(size)}
    lines = text.splitlines()
    nodes = list(dict.fromkeys(hosts[r] for r in range(size)))  # node 0 is rank 0's
    ring = sorted(range(size), key=lambda r: (nodes.index(hosts[r]), r))
    for r in range(size):
        assert f"rank {r} of {size} appnum -1 spawned 0 jobid {jobid} procid {r} host {hosts[r]}" in lines, text
        seen = sorted(ln for ln in lines if ln.startswith(f"rank {r} sees "))
        assert seen == sorted(f"rank {r} sees rank{i};at={hosts[i]}" for i in range(size) if i != r), text
        assert f"rank {r} mapping {mapping}" in lines and f"rank {r} universe {size}" in lines, text
        leader = min(i for i in range(size) if hosts[i] == hosts[r])
        assert f"rank {r} leader {leader}" in lines, text
        at = ring.index(r)
        left, right = ring[(at - 1) % size], ring[(at + 1) % size]
        assert f"rank {r} ring {at} of {size} left ring{left} right ring{right}" in lines, text
        assert f"rank {r} done" in lines, text


def batch(script: str, submitdir: Path, *geometry: str, env: dict[str, str] | None = None,
          timeout: float = 240) -> tuple[int, str]:
    """Run a batch script as the plain user; its job id and output once it has printed END."""
    path = submitdir / "job.sh"
    path.write_text("#!/bin/bash\n" + script + "\necho END\n")
    path.chmod(0o755)
    cp = run("sbatch", "--parsable", *geometry, str(path), user=USER, cwd=submitdir, env=env)
    assert cp.returncode == 0, cp.stderr
    job = int(cp.stdout.strip().split(";")[0])
    out = submitdir / f"slurm-{job}.out"
    wait_until(lambda: out.exists() and "\nEND" in out.read_text(), timeout, f"END in {out}")
    return job, out.read_text()


def sections(text: str) -> dict[str, str]:
    return {part.partition("\n")[0]: part.partition("\n")[2] for part in text.split("== ")[1:]}


def test_libpmi2_in_a_batch_job(program, submitdir):
    job, out = batch(f"""
echo "== pmi2"; srun --mpi=pmi2 -n4 {program}; echo "rc=$?"
echo "== default"; srun -n4 {program}; echo "rc=$?"
echo "== self"; srun -n4 {program} abort-self; echo "rc=$?"
echo "== world"; s=$(date +%s); timeout 60 srun -n4 {program} abort-world; echo "rc=$? secs=$(($(date +%s)-s))"
""", submitdir, "-n4")
    got = sections(out)
    # --mpi=pmi2 and the site's MpiDefault (pmi2, as cluster up writes it): steps 0 and 1
    for step, name in enumerate(("pmi2", "default")):
        check_ranks(got[name], 4, f"{job}.{step}", "(vector,(0,1,4))")
        assert "rc=0" in got[name].splitlines(), out
    # PMI2_Abort(0): only that task ends (exit 0, as Slurm's libpmi2 exits with the flag); the step goes on
    self = got["self"].splitlines()
    assert "rc=0" in self and "Force Terminated" not in got["self"], out
    assert sorted(ln for ln in self if ln.endswith(" done")) == ["rank 0 done", "rank 2 done", "rank 3 done"], out
    # PMI2_Abort(1) of rank 1 before the fence: the step ends at once (SIGKILL to every task)
    m = re.search(r"rc=(\d+) secs=(\d+)", got["world"])
    assert m and m[1] == "137" and int(m[2]) < 30, out
    assert f"srun: Force Terminated StepId={job}.3" in got["world"], out


def test_libpmi2_through_sruns_own_allocation(program, submitdir):
    """srun outside a job: its new job, the step inside it, the PMI service in srun's job."""
    cp = run("srun", "--mpi=pmi2", "-n4", str(program), user=USER, cwd=submitdir, timeout=240)
    assert cp.returncode == 0, cp.stderr
    jobid = re.search(r"^rank 0 of 4 appnum -1 spawned 0 jobid (\d+\.0) ", cp.stdout, re.M)
    assert jobid, cp.stdout
    check_ranks(cp.stdout, 4, jobid[1], "(vector,(0,1,4))")


def test_libpmi2_on_two_hosts(program, submitdir, two_hosts):
    """sbatch -N2 -n4 on the two-host cluster: block and cyclic steps, ranks on both hosts reach
    srun's service through the other host's relay; the ring goes host by host, as Slurm's does."""
    job, out = batch(f"""
echo "== block"; srun --mpi=pmi2 -n4 {program}; echo "rc=$?"
echo "== cyclic"; srun --mpi=pmi2 -n4 -m cyclic {program}; echo "rc=$?"
""", submitdir, "-p", "twohost", "-N2", "-n4", env=two_hosts)
    got = sections(out)
    for step, (name, pairs, mapping) in enumerate((("block", ((0, 1), (2, 3)), "(vector,(0,2,2))"),
                                                   ("cyclic", ((0, 2), (1, 3)), "(vector,(0,2,1))"))):
        hosts = hosts_of(got[name])
        (a, b), (c, d) = pairs
        assert hosts[a] == hosts[b] != hosts[c] == hosts[d] and {hosts[a], hosts[c]} == {HOST, two_hosts.node}, out
        check_ranks(got[name], 4, f"{job}.{step}", mapping, hosts)
        assert "rc=0" in got[name].splitlines(), out
