#!/usr/bin/env python3
"""MPI start-up through srun against each family's own mpirun (issue 17), on the two-host cluster:
in one `sbatch -p twohost -N2 -n4` job, a 4-rank step and a 16-rank step (-O: four ranks a CPU) of
a hello + allreduce program built with Debian's MPICH and Open MPI, by srun and by mpirun, each
``--runs`` times (default 2), milliseconds from the launcher's start to its end. Prints a Markdown
table (median and every run) and writes bench/results-mpi.json.

    sudo /opt/slurm-shim/bin/python bench/mpi_startup.py            # ~2-15 min on 2 cores
    sudo /opt/slurm-shim/bin/python bench/mpi_startup.py --runs 3

Needs root, the live cluster (``slurm-shim cluster up``), mpicc/mpirun of both families (scripts/setup
installs them) and brings the second host up with scripts/multihost (and down again if it was
down). The job runs as the plain user ``shimtester`` (Open MPI's mpirun refuses root). Open MPI's own
TCP transport between the two hosts of one loaded machine sometimes fails ('failed to TCP connect
to a peer', whoever launched the ranks): such a run is reported as failed, not timed. What the
suite asserts of the same steps (every rank there, the 16-rank steps included) is in
tests/integration/test_mpi_live.py; this script only measures."""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
USER = "shimtester"
BIN = Path(os.environ.get("SLURM_SHIM_BIN", "/opt/slurm-shim/bin"))
SITE_CONFIG = Path("/etc/slurm-shim/config.toml")
FAMILIES = {"mpich": ("mpicc.mpich", "mpirun.mpich"), "openmpi": ("mpicc.openmpi", "mpirun.openmpi")}
HELLO = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, mine, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d sum %d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
"""
RANK = re.compile(r"^rank (\d+) of (\d+) sum (\d+)$", re.M)


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{BIN}:{e.get('PATH', '/usr/bin:/bin')}"
    e.setdefault("SGE_ROOT", "/var/lib/gridengine")
    e.setdefault("SGE_CELL", "default")
    return e


def twohost_config(d: Path) -> Path:
    """The site config with partition "twohost" and MpiDefault pmi2 (as tests/integration/conftest.py
    writes it for the suite)."""
    lines = [ln for ln in SITE_CONFIG.read_text().splitlines() if not ln.startswith("mpi_default")]
    at = lines.index("[cluster]") + 1
    lines[at:at] = ['mpi_default = "pmi2"']
    conf = d / "config.toml"
    conf.write_text("\n".join(lines) + '\n\n[partitions.twohost]\nqueue = "twohost"\npe = "smp"\npe_multinode = "mpi"\n')
    conf.chmod(0o644)
    return conf


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2, help="runs of each step (default 2)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results-mpi.json"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("mpi_startup: run as root (sudo): it starts the second host and runs the job as shimtester")
    if subprocess.run(["id", "-u", USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", USER], check=True)
    multihost = [str(REPO / "scripts" / "multihost")]
    # a test session may share the second host: hold its shared lock as the suite's fixture does
    # (tests/integration/conftest.py: two_hosts), and take the host down only if no one else holds it
    os.makedirs("/run/slurm-shim-multihost", mode=0o700, exist_ok=True)
    users = open("/run/slurm-shim-multihost/debian.users", "a")
    fcntl.flock(users, fcntl.LOCK_SH)
    was_up = subprocess.run([*multihost, "status"], capture_output=True, env=env()).returncode == 0
    subprocess.run([*multihost, "up"], check=True, capture_output=True, env=env())
    d = Path(tempfile.mkdtemp(prefix="shim-bench-mpi-", dir="/tmp"))
    try:
        d.chmod(0o777)
        conf = twohost_config(d)
        (d / "hello.c").write_text(HELLO)
        steps = []
        for family, (cc, launcher) in FAMILIES.items():
            hello = d / f"hello-{family}"
            subprocess.run([cc, "-o", str(hello), str(d / "hello.c")], check=True, timeout=120)
            hello.chmod(0o755)
            over = "--oversubscribe " if family == "openmpi" else ""
            steps += [(f"srun -n4, {family}", f"srun -n4 {hello}", 4),
                      (f"mpirun -n 4, {family}", f"{launcher} {over}-n 4 {hello}", 4),
                      (f"srun -O -n16, {family}", f"srun -O -n16 {hello}", 16),
                      (f"mpirun -n 16, {family}", f"{launcher} {over}-n 16 {hello}", 16)]
        script = d / "mpi.sh"
        script.write_text("#!/bin/bash\nexport OMPI_MCA_orte_base_help_aggregate=0\n" + "\n".join(
            f'echo "== {i}"; s=$(date +%s%N); timeout 60 {cmd} 2>&1; echo "rc=$? ms=$((($(date +%s%N)-s)/1000000))"'
            for _ in range(args.runs) for i, (_, cmd, _) in enumerate(steps)) + "\necho END\n")
        script.chmod(0o755)
        cp = subprocess.run(["runuser", "-u", USER, "--", "env", f"PATH={env()['PATH']}", f"SLURM_SHIM_CONFIG={conf}",
                             "sbatch", "--parsable", "-p", "twohost", "-N2", "-n4", str(script)],
                            capture_output=True, text=True, cwd=d, env=env(), timeout=60)
        if cp.returncode != 0:
            sys.exit(f"mpi_startup: sbatch failed: {cp.stderr}")
        out = d / f"slurm-{int(cp.stdout.strip())}.out"
        deadline = time.monotonic() + 60 * len(steps) * args.runs + 120
        while not (out.exists() and "\nEND" in out.read_text()):
            if time.monotonic() > deadline:
                sys.exit(f"mpi_startup: the job did not end in time ({out})")
            time.sleep(1)
        times: dict[str, list[int]] = {label: [] for label, _, _ in steps}
        failed: dict[str, int] = {label: 0 for label, _, _ in steps}
        for block in out.read_text().split("== ")[1:]:
            head, _, body = block.partition("\n")
            label, _, want = steps[int(head)]
            m = re.search(r"rc=(\d+) ms=(\d+)", body)
            if m and m[1] == "0" and sorted(int(r[0]) for r in RANK.findall(body)) == list(range(want)):
                times[label].append(int(m[2]))
            else:
                failed[label] += 1
        print(f"\nMPI start-up to the end of a hello + allreduce, ms ({args.runs} runs; median, then each run)\n")
        print("| step | median | runs | failed |\n|---|---|---|---|")
        for label, _, _ in steps:
            med = f"{statistics.median(times[label]):.0f}" if times[label] else "—"
            print(f"| {label} | {med} | {', '.join(map(str, times[label]))} | {failed[label]} |")
        Path(args.out).write_text(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                              "runs": args.runs, "ms": times, "failed": failed}, indent=1) + "\n")
        return 0
    finally:
        shutil.rmtree(d, ignore_errors=True)
        try:
            if not was_up:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
                subprocess.run([*multihost, "down"], capture_output=True, env=env())
        except BlockingIOError:
            pass  # (a test session uses it now: it takes it down)
        users.close()


if __name__ == "__main__":
    sys.exit(main())
