"""A recorded transport for the commands that ask about some jobs only (jobs.list_jobs' ``only``).

``ListingReplay`` answers, from a recorded whole listing (``qstat -u '*' -r -xml``), what Grid
Engine answers for the narrower questions: ``qstat -u U[,V] -r -xml`` is that document with the
``job_list`` elements of the other owners' jobs left out (qstat's ``-u`` selects whole jobs by
owner and changes nothing else of a row: fixtures/gridengine/sge-8.1.9/live-qstat-u-all-r-xml.*
against the per-user captures), and ``qstat -j <ids>`` (plain text) is a ``job_number:``/``owner:``
block per job found, in the form of the real answer (fixtures/.../live-qstat-j-text.found.txt), or
SGE 8.1.9's rc 1 and "Following jobs do not exist" when none is (live-qstat-j-text.gone.stderr.txt).
Every answer is kept in ``calls`` as ReplayBackend keeps it, so a test sees which questions were
asked. An answer recorded for the exact argv wins."""

from __future__ import annotations

import re

from shim.gridengine.replay import ReplayBackend
from shim.proc import Result

WHOLE = ("qstat", "-u", "*", "-r", "-xml")
_JOB = re.compile(r"[ \t]*<job_list\b.*?</job_list>\n", re.S)
_OWNER = re.compile(r"<JB_owner>([^<]*)</JB_owner>")
_NUMBER = re.compile(r"<JB_job_number>(\d+)</JB_job_number>")
RULE = "=" * 62


def owners_of(listing: str) -> dict[int, str]:
    """{job number: owner} of a listing's rows."""
    out: dict[int, str] = {}
    for m in _JOB.finditer(listing):
        num, owner = _NUMBER.search(m.group(0)), _OWNER.search(m.group(0))
        if num and owner:
            out[int(num.group(1))] = owner.group(1)
    return out


def only_users(listing: str, users: set[str]) -> str:
    """The listing with the rows of these owners' jobs only."""
    def keep(m: re.Match) -> str:
        owner = _OWNER.search(m.group(0))
        return m.group(0) if owner and owner.group(1) in users else ""

    return _JOB.sub(keep, listing)


def job_text(found: dict[int, str]) -> str:
    """``qstat -j <ids>``'s plain answer for the jobs found (the lines the shim reads, in qstat's layout)."""
    return "".join(f"{RULE}\njob_number:                 {j}\nexec_file:                  job_scripts/{j}\n"
                   f"owner:                      {o}\n" for j, o in sorted(found.items()))


class ListingReplay(ReplayBackend):
    def run(self, tool, args, *, input=None, timeout=None):
        key = (tool, *args)
        whole = self.answers.get(WHOLE)
        if key not in self.answers and whole is not None and tool == "qstat":
            a = list(args)
            if len(a) == 4 and a[0] == "-u" and a[2:] == ["-r", "-xml"] and "*" not in a[1].split(","):
                self.calls.append((key, input))
                return Result(key, whole.returncode, only_users(whole.stdout, set(a[1].split(","))), whole.stderr)
            if len(a) == 3 and a[0] == "-j" and a[2] == "-xml" and all(x.isdigit() for x in a[1].split(",")):
                # the detail is not in the listing: an empty answer, which jobs.list_jobs' one-job
                # reading (``direct``, gridengine/onejob.py) does not take; it lists as before
                self.calls.append((key, input))
                return Result(key, 0, "", "")
            if len(a) == 2 and a[0] == "-j" and all(x.isdigit() for x in a[1].split(",")):
                self.calls.append((key, input))
                owners = owners_of(whole.stdout)
                found = {int(x): owners[int(x)] for x in a[1].split(",") if int(x) in owners}
                if found:
                    return Result(key, 0, job_text(found), "")
                return Result(key, 1, "", "Following jobs do not exist: \n" + ", ".join(a[1].split(",")) + "\n")
        return super().run(tool, args, input=input, timeout=timeout)
