"""Grid Engine's refusals, read once: which jobs it would not touch, and why, in three kinds.

Grid Engine answers qdel, qmod, qhold, qrls and qalter with one line per job or task. Slurm's
commands need to know only whether the caller may not act on a job (``DENIED``: Slurm's
"Access/permission denied"), whether the job is not there (``GONE``: "Invalid job id
specified"), or something else went wrong (``OTHER``: Grid Engine's own last line is shown).
"""

from __future__ import annotations

DENIED = "denied"
GONE = "gone"
OTHER = "other"

# Grid Engine's words, as recorded in fixtures/gridengine/sge-8.1.9/refusals.txt (SGE 8.1.9):
#   qdel:        alice - you do not have the necessary privileges to delete the job "5"
#   qmod:        alice - you have no permission to modify job "5"
#   qhold/qalter: denied: "alice" must be at least owner of job 5 to change job attributes
#   gone:        denied: job "5" does not exist / job "5" task "7" does not exist /
#                invalid queue or job "5" (qmod)
_DENIED = (r'privileges to \w+ the job(?:-array task)? "?(\d+)', r'must be (?:manager or owner|at least owner) of job "?(\d+)',
           r'no permission to modify job "?(\d+)')
_GONE = (r'job "?(\d+)"? does not exist', r'job "(\d+)" task "\d+" does not exist', r'invalid queue or job "?(\d+)')
_DENIED_WORDS = ("privilege", "must be", "no permission")
_GONE_WORDS = ("does not exist", "invalid queue or job")
_compiled: list | None = None


def _patterns() -> list:
    global _compiled
    if _compiled is None:
        import re

        _compiled = [(DENIED, [re.compile(p) for p in _DENIED]), (GONE, [re.compile(p) for p in _GONE])]
    return _compiled


def per_job(text: str) -> dict[int, str]:
    """Job id -> DENIED or GONE, for each job Grid Engine's answer names. A job both denied and
    gone (two tasks) counts as denied: the caller may not act on it."""
    out: dict[int, str] = {}
    if not any(w in text for w in _DENIED_WORDS + _GONE_WORDS):
        return out
    for line in text.splitlines():
        for kind, pats in _patterns():
            m = next((m for m in (p.search(line) for p in pats) if m), None)
            if m:
                job = int(m.group(1))
                if kind == DENIED or out.get(job) != DENIED:
                    out[job] = kind
                break
    return out


def kind(text: str) -> str | None:
    """The kind of a whole answer (one job's qalter, qhold or qmod): DENIED, GONE, OTHER for any
    other text, None for no text."""
    if any(w in text for w in _DENIED_WORDS):
        return DENIED
    if any(w in text for w in _GONE_WORDS):
        return GONE
    return OTHER if text.strip() else None


def last_line(text: str) -> str:
    """Grid Engine's own last word, for an OTHER refusal."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


# Slurm's error texts for the kinds (slurm_strerror of ESLURM_ACCESS_DENIED, ESLURM_INVALID_JOB_ID)
SLURM_ERRORS = {DENIED: "Access/permission denied", GONE: "Invalid job id specified"}


def slurm_error(kind_: str | None, text: str, fallback: str = "") -> str:
    """A refusal in Slurm's words: its error text for DENIED and GONE, else Grid Engine's own last
    line (or ``fallback`` when it said nothing)."""
    return SLURM_ERRORS.get(kind_ or OTHER) or last_line(text) or fallback
