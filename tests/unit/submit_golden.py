"""What a submission leaves behind, in bytes: the qsub (or qrsh) argv, the payload the job gets,
the submit record others read and the private environment file, for sbatch, salloc and srun,
with the few values that change from run to run (times, paths under the test's directory, the
host, the random file name) replaced by placeholders.

``fixtures/submit-records/golden.json`` holds these for the code as it was before the typed
request (commit 0891a51 and its working tree, 2026-12-02); test_submit_records compares the
code of today with it, so records jobs already have in the queue read the same. Regenerate only
on purpose: ``python tests/unit/submit_golden.py --write`` (then say why in the commit).
"""

from __future__ import annotations

import base64
import io
import json
import os
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE.parents[1] / "fixtures" / "submit-records" / "golden.json"
SCRIPT = "#!/bin/bash\n#SBATCH --job-name=fromdirective\n#SBATCH -t 10\necho hi\n"

SBATCH_CASES = [
    [],
    ["-n4", "-c2", "--mem=2G", "-t", "1:00:00", "-J", "named job"],
    ["--export=ALL,API_TOKEN=tok-123", "--open-mode=append", "-o", "out-%j.txt", "-e", "err-%j.txt"],
    ["--export=NONE"],
    ["--export=HOME,X=1"],
    ["--array=1-5%2", "--mem-per-cpu=300", "-N", "2", "--ntasks-per-node=2"],
    ["--dependency=afterok:5:6,afterany:7", "--nice=5", "--comment=hello", "-A", "proj"],
    ["--gres=gpu:2", "--gpus-per-task=1", "-n2", "--licenses=matlab:1", "--signal=B:USR1@60"],
    ["--wrap=echo wrapped", "--get-user-env", "--hold", "--requeue", "-p", "debug"],
    ["--begin=2030-01-01T10:00:00", "--chdir=/srv/elsewhere", "--input=/dev/null", "--qos=normal"],
]
SALLOC_CASES = [[], ["-n2", "--mem=100", "-J", "alloc"]]
SRUN_CASES = [["true"], ["-n2", "-c2", "--mem=100", "-J", "named", "echo", "a b"]]
ENVIRON = {"HOME": "/root", "PATH": "/usr/bin:/bin", "MYSECRET": "hunter2", "X": "from-env", "LANG": "C"}


def _payload_of(script: bytes) -> dict:
    body = script.decode().split("<<'__SLURM_SHIM_PAYLOAD__'\n", 1)[1].split("\n__SLURM_SHIM_PAYLOAD__", 1)[0]
    return json.loads(base64.b64decode(body.replace("\n", "")))


def _record(sdir: Path, job: int) -> Path:
    """The submit record sbatch/salloc wrote in the user's directory ``sdir`` (its id shard)."""
    from shim.store import layout

    return Path(layout.id_path(str(sdir), "jobs", job, f"{job}.json"))


def _read(path) -> str | None:
    try:
        return Path(path).read_text()
    except (OSError, TypeError):
        return None


class _Norm:
    def __init__(self, tmp: Path):
        self.tmp = str(tmp)
        self.host = os.uname().nodename.split(".")[0]

    def value(self, obj):
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if k in ("sub", "submit_time", "t") and isinstance(v, (int, float)):
                    v = "<time>"
                elif k == "env_file" and isinstance(v, str):
                    v = "<env_file>"
                elif k == "script" and isinstance(v, str):
                    v = self.script(v)
                else:
                    v = self.value(v)
                out[k] = v
            return out
        if isinstance(obj, list):
            return [self.value(v) for v in obj]
        if isinstance(obj, str):
            return obj.replace(self.tmp, "<tmp>").replace(self.host, "<host>")
        return obj

    def script(self, b64: str) -> str:
        text = base64.b64decode(b64).decode()  # salloc's holder names salloc's pid
        text = text.replace(self.tmp, "<tmp>").replace(self.host, "<host>").replace(f" {os.getpid()}", " <pid>")
        return "b64:" + text

    def text(self, s: str | None):
        """A JSON file's bytes: parsed, normalised, and dumped again with the key order kept."""
        if s is None:
            return None
        return json.dumps(self.value(json.loads(s)))


def capture(tmp: Path, monkeypatch) -> dict:
    """Every case's artefacts; the caller has pointed the shim at the unit-test site (tmp/state)."""
    from shim.gridengine import backends
    from shim import siteconf
    from shim.__main__ import dispatch
    from shim.gridengine.replay import ReplayBackend
    from shim.proc import Result

    norm = _Norm(tmp)
    work = tmp / "work"
    work.mkdir(exist_ok=True)
    monkeypatch.chdir(work)
    (work / "job.sh").write_text(SCRIPT)
    for k in list(os.environ):
        if k not in ("SLURM_SHIM_CONFIG", "XDG_CACHE_HOME"):
            monkeypatch.delenv(k)
    for k, v in ENVIRON.items():
        monkeypatch.setenv(k, v)
    old_umask = os.umask(0o022)
    uid = os.getuid()
    sdir = tmp / "state" / "users" / str(uid)
    out: dict = {"sbatch": [], "salloc": [], "srun": []}
    try:
        for i, argv in enumerate(SBATCH_CASES):
            job = 4000 + i
            b = ReplayBackend()
            b.add("qsub", [], stdout=f"{job}\n")
            b.add("qconf", ["-sel"], stdout="node1\n")
            backends.use(b)
            siteconf.reset()
            if not any(a.startswith("--wrap") for a in argv):
                argv = [*argv, "job.sh"]
            monkeypatch.setattr("sys.stdout", io.StringIO())
            monkeypatch.setattr("sys.stderr", io.StringIO())
            rc = dispatch("sbatch", list(argv))
            (call, script), = [c for c in b.calls if c[0][0] == "qsub" and c[0][1:] != ("-help",)]
            payload = _payload_of(script)
            out["sbatch"].append({
                "argv": argv, "rc": rc, "qsub": list(call[1:]),
                "payload": json.dumps(norm.value(payload)),
                "record": norm.text(_read(_record(sdir, job))),
                "env_file": norm.text(_read(payload.get("env_file"))),
            })
        from shim.cli import salloc
        from shim.slurm.options import sources
        from shim.slurm.options.getopt import getopt

        for i, argv in enumerate(SALLOC_CASES):
            job = 5000 + i
            b = ReplayBackend()
            b.add("qsub", [], stdout=f"{job}\n")
            b.add("qconf", ["-sp", "smp"], "pe_name smp\njob_is_first_task TRUE\n")
            b.add("qconf", ["-sp", "mpi"], "pe_name mpi\njob_is_first_task FALSE\n")
            backends.use(b)
            siteconf.reset()
            monkeypatch.setattr("sys.stderr", io.StringIO())
            t = salloc.table()
            cli, _pos = getopt(t, list(argv))
            o = sources.collect(t, argv, environ=dict(os.environ), cli=cli)
            job_id, payload = _allocate(o, dict(os.environ), siteconf.get())
            (call, script), = [c for c in b.calls if c[0][0] == "qsub" and c[0][1:] != ("-help",)]
            job_payload = _payload_of(script)
            out["salloc"].append({
                "argv": argv, "job": job_id, "qsub": list(call[1:]),
                "payload": json.dumps(norm.value(job_payload)),
                "record": norm.text(_read(_record(sdir, job))),
                "env_file": norm.text(_read(job_payload.get("env_file"))),
            })
        from shim.runtime import steps

        for argv in SRUN_CASES:
            b = ReplayBackend(default=Result(("x",), 0, "", ""))
            backends.use(b)
            siteconf.reset()
            seen: dict = {}

            class FakeProc:
                def __init__(self, argv, **kw):
                    words = shlex.split(" ".join(argv[argv.index("-pty") + 2:]))
                    seen["qrsh"] = argv[:argv.index("-pty") + 2]
                    seen["payload"] = steps.read_payload(words[4], words[5])

                def wait(self):
                    return 0

                def poll(self):
                    return 0

            monkeypatch.setattr("shim.proc.popen", FakeProc)
            monkeypatch.setattr("sys.stderr", io.StringIO())
            dispatch("srun", list(argv))
            p = seen["payload"]
            out["srun"].append({
                "argv": argv, "qrsh": [norm.value(w) for w in seen["qrsh"]],
                "record": json.dumps(norm.value(p["record"])),
                "req": json.dumps(norm.value(p["req"])),
                "environ": json.dumps(norm.value(p["environ"])),
                "keys": sorted(p),
            })
    finally:
        os.umask(old_umask)
        backends.use(None)
    return out


def _allocate(o, environ, cfg):
    """salloc's submission, wherever it lives today."""
    from shim.cli import salloc

    try:
        from shim.operations import submit
    except ImportError:  # before shim.operations.submit (when the golden file was made)
        return salloc.allocate(o, environ, cfg)
    try:
        from shim.operations.allocation import holder_script
    except ImportError:  # before shim.operations.allocation
        holder_script = salloc.holder_script
    job_id, rec = submit.allocate(o, environ, cfg, holder_script(cfg.cluster.state_dir, not o.no_shell))
    return job_id, rec.to_dict()


if __name__ == "__main__" and "--write" in sys.argv:
    import tempfile

    import pytest

    sys.path.insert(0, str(HERE.parent))
    from conftest import use_site_config

    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        use_site_config(mp, Path(d))
        data = capture(Path(d), mp)
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {GOLDEN}")
