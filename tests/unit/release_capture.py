"""Replays one case of a release's capture (fixtures/slurm-<release>/cases.json) through the shim's
command, in-process, on the unit-test site config with ``[slurm] release`` set to that release.

Grid Engine is a ``ReplayBackend`` that holds no job, and its accounting file none (CaptureGridEngine: a command that asks it
anything else fails with an internal error, so a case replayed here is one the shim answers from
its own tables and an empty queue), except ``submit``: it returns the job id the release gave the same submission (the one named
normalisation, job ids: the controller numbers jobs), and ``exec_hosts``: the capture's one node
``vm``. The case runs in a directory holding the capture's ``job.sh`` (a shell script) and
``noshebang.sh`` (one without ``#!``) and
``withdirectives.sh`` (one whose ``#SBATCH`` line has an option no release has), with the case's stdin (none: empty)."""

from __future__ import annotations

import io
import json
import re
import shlex
import sys

from conftest import FIXTURES, use_site_config, with_release
from shim import siteconf
from shim.__main__ import dispatch
from shim.gridengine import backends
from shim.gridengine.engine import Refused
from shim.gridengine.replay import ReplayBackend
from shim.proc import Result

RELEASES = ("22.05", "24.11", "26.05")
_ID = re.compile(r"\d+")


def cases(release: str) -> dict:
    return json.loads((FIXTURES / f"slurm-{release}" / "cases.json").read_text())


def env_files(release: str) -> list[str]:
    """The release's captured job environments (env-*.txt; the submission arguments file is not one)."""
    return sorted(p.name for p in (FIXTURES / f"slurm-{release}").glob("env-*.txt"))


SGE = FIXTURES / "gridengine" / "sge-8.1.9"
EMPTY = (SGE / "live-qstat-u-all-r-xml.empty.xml").read_text()  # qstat -u '*' -r -xml with no job
UNKNOWN_XML = (SGE / "qstat-j-nonexistent-xml.xml").read_text()  # qstat -j 999999 -xml: no such job
UNKNOWN_NAME = "    <ST_name>999999</ST_name>\n"


class CaptureGridEngine(ReplayBackend):
    """A Grid Engine with no job: every listing (``qstat -u USERS -r -xml``) is SGE 8.1.9's empty
    one, ``qstat -j IDS`` is its rc 1 and "Following jobs do not exist" (that answer's form,
    live-qstat-j-text.gone.stderr.txt), ``qstat -j IDS -xml`` its ``unknown_jobs`` document naming
    each (qstat-j-nonexistent-xml.xml); nothing else is recorded. A submission gets the id the
    release gave it, or ``refuse``: qsub's refusal of it (rc 1, that text)."""

    def __init__(self, job_id: int, refuse: str | None = None):
        super().__init__()
        self.job_id, self.refuse = job_id, refuse

    def run(self, tool, args, *, input=None, timeout=None):
        a = list(args)
        if tool == "qstat" and len(a) == 4 and a[0] == "-u" and a[2:] == ["-r", "-xml"]:
            self.calls.append(((tool, *a), input))
            return Result((tool, *a), 0, EMPTY, "")
        if tool == "qstat" and len(a) == 2 and a[0] == "-j":
            self.calls.append(((tool, *a), input))
            return Result((tool, *a), 1, "", "Following jobs do not exist: \n" + ", ".join(a[1].split(",")) + "\n")
        if tool == "qstat" and len(a) == 3 and a[0] == "-j" and a[2] == "-xml":  # (rc 0: INDEX.tsv of that capture)
            self.calls.append(((tool, *a), input))
            return Result((tool, *a), 0, UNKNOWN_XML.replace(UNKNOWN_NAME, "".join(
                UNKNOWN_NAME.replace("999999", x) for x in a[1].split(","))), "")
        return super().run(tool, args, input=input, timeout=timeout)

    def submit(self, args, script, *, agent=False, seen=None) -> int:
        if self.refuse is not None:
            raise Refused(self.refuse, 1)
        return self.job_id

    def exec_hosts(self):
        return {"vm"}


def hosts(debug_used: int) -> dict[tuple[str, ...], str]:
    """Grid Engine's answers about the capture's one node ``vm`` (8 slots, 2 GPUs, queues debug and
    gpu: SGE 8.1.9's qhost of that cluster) with ``debug_used`` of debug's slots in use, as
    tests/unit/test_sinfo.py records them."""
    xml, xml_f = ((SGE / f).read_text() for f in ("qhost-q-xml-debug-gpu.xml", "qhost-q-xml-F-gpu-debug-gpu.xml"))
    used = re.compile(r"(<queuevalue qname='debug' name='slots_used'>)\d+(<)")
    state = re.compile(r"(<queuevalue qname='(?:debug|gpu)' name='state_string'>)[^<]*(<)")
    gpu = re.compile(r"(<queuevalue qname='gpu' name='slots_used'>)\d+(<)")

    def set_use(text: str) -> str:
        text = used.sub(rf"\g<1>{debug_used}\2", text)
        return state.sub(r"\1\2", gpu.sub(r"\g<1>0\2", text))

    return {("qhost", "-q", "-xml"): set_use(xml), ("qhost", "-q", "-xml", "-F", "gpu"): set_use(xml_f),
            ("qconf", "-se", "vm"): (SGE / "qhost-qconf-se-vm.txt").read_text()}


# the unit site's second license, which the captured cluster does not have (Licenses=matlab:3)
NOT_THE_CAPTURES = '\n[licenses.anthropic_api]\ncomplex = "anthropic_api"\n'


def replay(release: str, name: str, tmp_path, monkeypatch, capsys,
           answers: dict[tuple[str, ...], str] | None = None, site: tuple[str, str] | None = None,
           refuse: str | None = None, queue=None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the shim for this case of this release; ``answers``: more of
    Grid Engine's answers (argv -> stdout, rc 0); ``site``: (text, replacement) in the unit site
    config, to say what the captured cluster's slurm.conf says; ``refuse``: Grid Engine refuses the
    submission with this answer; ``queue``: a callable given the state directory that plants the
    captured queue's records there and returns the Grid Engine that holds that queue
    (release_listing.py), in place of the empty one. The site's licenses are the
    capture's: matlab."""
    case = cases(release)[name]
    state_dir = use_site_config(monkeypatch, tmp_path)
    conf = tmp_path / "config.toml"
    text = conf.read_text()
    assert NOT_THE_CAPTURES in text
    text = text.replace(NOT_THE_CAPTURES, "\n")
    if site:
        assert site[0] in text
        text = text.replace(*site)
    conf.write_text(with_release(text, release))
    siteconf.reset()
    # Grid Engine's accounting holds no job either (never the machine's own file: its history)
    accounting = tmp_path / "accounting"
    accounting.write_text("# Version: 8.1.9\n")
    monkeypatch.setenv("SLURM_SHIM_ACCOUNTING", str(accounting))
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "job.sh").write_text("#!/bin/bash\nsleep 1\n")
    (wd / "noshebang.sh").write_text("sleep 1\n")
    (wd / "withdirectives.sh").write_text("#!/bin/bash\n#SBATCH --bogus-directive\nsleep 1\n")
    monkeypatch.chdir(wd)
    stdin = case.get("stdin") or ""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    found = _ID.search(case["stdout"])
    backend = CaptureGridEngine(int(found.group(0)) if found else 1, refuse) if queue is None else queue(state_dir)
    for (tool, *args), text in (answers or {}).items():
        backend.add(tool, args, text)
    backends.use(backend)
    argv = shlex.split(case["cmd"])
    try:
        rc = dispatch(argv[0], argv[1:])
    finally:
        siteconf.reset()
        backends.use(None)
    out, err = capsys.readouterr()
    return rc, out, err
