"""Man pages for sbatch, srun and salloc, generated from the option table, so that each option's
fate on Grid Engine is documented where the option is defined. ``python -m shim.slurm.render.manpage
sbatch > man/sbatch.1``; a test fails when a committed page drifts from the table."""

from __future__ import annotations

import sys

from ..options.spec import Arity, Fate
from ..options.table import OPTIONS

# Every page's (the hand-written ones carry the same text; tests/unit/test_manpages.py checks it)
DIAGNOSTICS = """.SH DIAGNOSTICS
With
.B SLURM_SHIM_DEBUG=1
in the environment, every Grid Engine command the shim runs is logged to standard error: its
argument list, how long it took and its exit code, so that a bug report can carry the exact
Grid Engine interaction."""

INTRO = {
    "sbatch": (
        "submit a batch script to Grid Engine, as Slurm's sbatch",
        "sbatch [OPTIONS...] [script [args...]]",
        "sbatch reads a batch script from a file, from standard input, or builds one with --wrap, reads its "
        "#SBATCH lines (from the top until the first line that is neither blank nor a comment), then the "
        "SBATCH_* input variables, then the command line (later sources win), and submits the job to Grid "
        "Engine with qsub. It prints \\fBSubmitted batch job\\fR \\fIN\\fR, N being Grid Engine's job id. "
        "Inside the job a wrapper sets the SLURM_* variables Slurm would set, writes slurm-%j.out (stderr "
        "merged) in the working directory, enforces the time limit with SIGTERM and then SIGKILL, and records "
        "the real exit code for sacct.",
    ),
    "srun": ("run parallel tasks, as Slurm's srun", "srun [OPTIONS...] executable [args...]",
             "srun launches tasks inside an allocation (an sbatch or salloc job) or creates one."),
    "salloc": ("obtain an allocation, as Slurm's salloc", "salloc [OPTIONS...] [command [args...]]",
               "salloc obtains an allocation from Grid Engine and runs a command (or a shell) in it."),
}

FATE_TEXT = {
    Fate.MAP: "Mapped to Grid Engine or honoured by the shim.",
    Fate.LOCAL: "Handled by the shim itself.",
    Fate.WARN: "Accepted and ignored with a warning: it changes nothing a user relies on here.",
    Fate.REFUSE: "Refused with an error (exit 1): Grid Engine cannot honour it.",
}


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace("-", "\\-")


def render(prog: str) -> str:
    title, synopsis, description = INTRO[prog]
    out = [
        f'.TH {prog.upper()} 1 "slurm-shim" "slurm-shim" "Slurm commands on Grid Engine"',
        ".SH NAME",
        f"{prog} \\- {_esc(title)}",
        ".SH SYNOPSIS",
        f".B {_esc(synopsis)}",
        ".SH DESCRIPTION",
        description,
        ".SH OPTIONS",
        "Every option of Slurm's " + prog + " is accepted with Slurm's spelling, abbreviation rules and "
        "arity. Each entry says what becomes of it on Grid Engine.",
    ]
    for s in OPTIONS:
        if prog not in s.commands:
            continue
        arg = {Arity.NONE: "", Arity.REQUIRED: "=\\fIvalue\\fR", Arity.OPTIONAL: "[=\\fIvalue\\fR]"}[s.arity]
        short = f"\\fB\\-{s.short}\\fR, " if s.short else ""
        out.append(".TP")
        out.append(f"{short}\\fB\\-\\-{_esc(s.long)}\\fR{arg}")
        text = _esc(s.help) if s.help else ""
        note = _esc(s.note).rstrip(".") + "." if s.note else ""
        out.append(f"{text}. {FATE_TEXT[s.fate]} {note}".rstrip())
        names = s.env.get(prog, ())
        if names:
            out.append(f"Input variable: {', '.join(names)}.")
    out += DIAGNOSTICS.split("\n")
    out += [
        ".SH SEE ALSO",
        "squeue(1), scancel(1), sacct(1), sinfo(1), scontrol(1), qsub(1)",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render(sys.argv[1] if len(sys.argv) > 1 else "sbatch"))
