"""-v's lines of sbatch, srun and salloc as each release prints them: the defined options between two
separator lines, then what the release prints next (22.05's sbatch: its select plugins' lines;
fixtures/slurm-22.05/oracle-sbatch-verbose.json). The shim's own line, the qsub command a
submission runs, comes from -vv on: at -v the bytes are the release's (test_release_capture.py
replays each release's ``sbatch -v job.sh``)."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, release_setter, use_site_config
from release_capture import RELEASES, CaptureGridEngine, cases
from shim import siteconf
from shim.__main__ import dispatch
from shim.cli import common
from shim.gridengine import backends
from shim.slurm.options.sources import Options, apply
from shim.slurm.options.table import command_table


@pytest.fixture
def release(monkeypatch, tmp_path):
    """set(name): the unit-test site config with ``[slurm] release = name``; the working
    directory holds ``job.sh``."""
    use_site_config(monkeypatch, tmp_path)
    conf = tmp_path / "config.toml"
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "job.sh").write_text("#!/bin/bash\nsleep 1\n")
    monkeypatch.chdir(wd)

    set_release = release_setter(conf)

    yield set_release
    siteconf.reset()
    backends.use(None)


@pytest.mark.parametrize("name", RELEASES)
def test_sbatch_vv_adds_the_qsub_line_after_the_releases_lines(release, capsys, name):
    release(name)
    backends.use(CaptureGridEngine(5))
    assert dispatch("sbatch", ["-vv", "job.sh"]) == 0
    out, err = capsys.readouterr()
    want = cases(name)["sbatch_verbose"]["stderr"].replace("verbose             : 1", "verbose             : 2")
    assert out == "Submitted batch job 5\n"
    assert err.startswith(want)
    tail = err[len(want):]
    assert tail.startswith("sbatch: qsub -terse -q debug -N job.sh ") and tail.count("\n") == 1


@pytest.mark.parametrize("name", RELEASES)
@pytest.mark.parametrize("prog", ["srun", "salloc", "sbatch"])
def test_the_defined_options_are_between_two_separator_lines(release, capsys, name, prog):
    """srun's as each release printed it (srun_verbose's first lines; salloc and sbatch list theirs
    the same way); only 22.05's sbatch and salloc print more before their submission."""
    release(name)
    t = command_table(prog)
    o = Options()
    apply(o, t, [(next(s for s in t.specs if s.long == "verbose"), None)], "cli")
    common.print_defined_options(o, t, prog, ("cli",))
    srun_lines = "".join(cases(name)["srun_verbose"]["stderr"].splitlines(keepends=True)[:5])
    more = json.loads((FIXTURES / "slurm-22.05" / "oracle-sbatch-verbose.json").read_text())["cases"]["sbatch_v"]
    # 22.05's salloc prints the same select plugins' lines there (fixtures/slurm-22.05/oracle-messages.txt, V)
    extra = "".join(more["stderr"].splitlines(keepends=True)[5:]).replace("sbatch: ", f"{prog}: ") \
        if prog != "srun" and name == "22.05" else ""
    if prog == "salloc" and extra:
        asked = (FIXTURES / "slurm-22.05" / "oracle-messages.txt").read_text()
        assert "salloc: end of defined options\n" + extra + "salloc: Granted job allocation" in asked
    assert capsys.readouterr() == ("", srun_lines.replace("srun: ", f"{prog}: ") + extra)


# --- srun's and salloc's lines at -v, their Grid Engine command from -vv on ------------------------------

def asked(name: str, file: str, key: str) -> str:
    """The answer to ``### <key>: ...`` of a release's oracle file (fixtures/slurm-*/)."""
    import re

    text = (FIXTURES / f"slurm-{name}" / file).read_text()
    m = re.search(rf"^### {re.escape(key)}: [^\n]*\n(.*?)(?=^### )", text, re.S | re.M)
    assert m, (file, key)
    return m[1]


def as_run(lines: list[str], job: str, host: str) -> list[str]:
    """The captured lines with the shim's job id and host for the captured ones (vm)."""
    import re

    return [re.sub(r"\bvm\b", host, re.sub(rf"\b{job}\b", "7", ln)) for ln in lines]


def step_lines(capfd, name: str, job_mode: bool, argv: list[str]) -> tuple[int, list[str]]:
    """srun -v's lines of one step of job 7 on this host (run_step, no Grid Engine)."""
    import os

    from shim.runtime import steps
    from shim.runtime.steps import run as run_mod

    sdir = siteconf.get().cluster.state_dir
    host = steps.short_host()
    alloc = steps.Allocation(7, [(host, 1)], inside=True)
    req = steps.StepRequest(argv=argv, verbose=1)
    res = run_mod.run_step(req, alloc, base_env={"PATH": os.defpath, "SLURM_JOB_NODELIST": host},
                           state_dir=sdir, job_mode=job_mode)
    return res.rc, [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("srun: ")]


@pytest.mark.parametrize("name", RELEASES)
def test_srun_v_in_a_job_of_its_own_prints_the_releases_lines(release, capfd, name):
    """``srun -v true``: after the defined options, every line the release printed (srun_verbose),
    the job's id and node aside: 26.05's ``JobId=N returned by the controller``, 24.11's and
    26.05's ``Nodes vm are ready for job``, the job's nodes and CPUs, 22.05's ``launch/slurm:
    <function>:`` before the launch plugin's lines, each release's plugin line (26.05: none), the
    tasks started, their exit notification and ``Completed``."""
    import re

    from shim.runtime import steps

    release(name)
    rc, got = step_lines(capfd, name, True, ["true"])
    ref = cases(name)["srun_verbose"]["stderr"].splitlines()[5:]
    job = next(w for w in ref if w.startswith("srun: launching")).split("StepId=")[1].split(".")[0]
    assert rc == 0 and got == as_run(ref, job, steps.short_host())
    # asked again (with -J and -n1): the same lines, but for the job's id
    again = asked(name, "oracle-step-ends.txt", "N").split("srun: end of defined options\n", 1)[1]
    again = again.split("rc=", 1)[0].splitlines()
    assert [re.sub(r"\d+", "N", ln) for ln in again] == [re.sub(r"\d+", "N", ln) for ln in ref]


@pytest.mark.parametrize("name", RELEASES)
def test_srun_v_in_an_allocation_prints_the_releases_step_lines(release, capfd, name):
    """``salloc -n1 srun -v true``: the same lines without those about the job (asked of each
    release: oracle-messages.txt, V)."""
    from shim.runtime import steps

    release(name)
    rc, got = step_lines(capfd, name, False, ["true"])
    inside = asked(name, "oracle-messages.txt", "V").split("srun: end of defined options\n", 1)[1]
    ref = [ln for ln in inside.splitlines() if ln.startswith("srun: ")]
    job = ref[0].split("jobid ")[1].split(":")[0]
    assert rc == 0 and got == as_run(ref, job, steps.short_host())


@pytest.mark.parametrize("name", RELEASES)
def test_srun_v_tells_a_failed_tasks_status_before_its_error(release, capfd, name):
    """A task that exits 3: its notification says status 0x0300 (the wait status), and srun's
    error line follows in place of ``Completed``."""
    from shim.runtime import steps

    release(name)
    rc, got = step_lines(capfd, name, False, ["sh", "-c", "exit 3"])
    host = steps.short_host()
    fn = "" if name != "22.05" else "launch/slurm: _task_finish: "
    assert rc == 3 and got[-2:] == [
        f"srun: {fn}Received task exit notification for 1 task of StepId=7.0 (status=0x0300).",
        f"srun: error: {host}: task 0: Exited with exit code 3"]


def test_the_cpu_counts_always_say_their_repeat():
    from shim.runtime.steps.verbose import cpu_counts, wait_status

    assert (cpu_counts([1]), cpu_counts([2, 2, 1]), cpu_counts([])) == ("1(x1)", "2(x2),1(x1)", "")
    assert (wait_status(0, 0), wait_status(3, 0), wait_status(0, 15)) == (0, 0x300, 15)


@pytest.mark.parametrize("name", RELEASES)
def test_salloc_v_prints_the_releases_lines(release, capsys, monkeypatch, name):
    """``salloc -v -J y -n1 true``: the defined options, 22.05's select plugins' lines, 26.05's
    ``JobId=N returned by the controller``, the grant, 24.11's and 26.05's nodes ready line, the
    release, and 22.05's ``Job allocation N has been revoked.`` after it (asked of each release:
    oracle-step-ends.txt, N; 22.05's node was busy then, so its queue lines are left out)."""
    import re
    import threading

    from shim.operations import allocation, submit

    release(name)
    ge = CaptureGridEngine(5)
    ge.first_task_pe = lambda pes: None  # (the allocation's PE: qconf -sp's answer, not asked here)
    backends.use(ge)
    # Grid Engine's side only: submit.allocate runs, and prints its qsub line or not
    monkeypatch.setattr(submit, "queue", lambda *a, **k: 117)
    monkeypatch.setattr(allocation, "wait_granted", lambda *a, **k: {"hosts": [["vm", 1]], "env": {"SLURM_JOB_NODELIST": "vm"}})
    monkeypatch.setattr(allocation, "watching", lambda *a, **k: threading.Event())
    monkeypatch.setattr(allocation, "release", lambda cfg, j, rc: None)
    assert dispatch("salloc", ["-v", "-J", "y", "-n1", "true"]) == 0
    ref = asked(name, "oracle-step-ends.txt", "N").split("rc=0\n", 1)[1].split("rc=0\n", 1)[0]
    job = re.search(r"Granted job allocation (\d+)", ref)[1]
    ref = re.sub(rf"\b{job}\b", "117", "".join(ln for ln in ref.splitlines(keepends=True) if "waiting" not in ln
                                               and "allocated resources" not in ln and "Pending" not in ln))
    assert capsys.readouterr().err == ref  # (no qsub line at -v)
    assert dispatch("salloc", ["-vv", "-n1", "true"]) == 0
    assert [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("salloc: qsub ")] != []


def test_srun_prints_its_qrsh_line_from_vv_on(release, capsys, monkeypatch):
    """srun in a job of its own (submit.interactive_job, run for real up to qrsh, which this Grid
    Engine answers at once): its qrsh line from -vv on; -v prints the release's lines alone."""
    from shim.proc import Result

    class QrshAnswered(CaptureGridEngine):
        def scheduler(self):
            return Result(("qstat",), 0, "", "")

        def interactive(self, flags, **kw):
            self.calls.append((("qrsh", *flags), None))
            return 0, 0

    release("24.11")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    for argv, lines in ((["-v", "true"], 0), (["-vv", "true"], 1), (["true"], 0)):
        backends.use(QrshAnswered(5))
        dispatch("srun", argv)
        err = capsys.readouterr().err
        assert len([ln for ln in err.splitlines() if ln.startswith("srun: qrsh ")]) == lines, (argv, err)
