"""--export (sbatch, srun, salloc): which variables a job gets, read as Slurm reads the list.

Slurm (src/sbatch/sbatch.c, src/common/env.c: env_merge_filter, find_quote_token): the whole
value ALL, NONE or NIL (any case) means what it says; anything else is a comma-separated list in
which ALL (any case) adds the whole environment, NAME=value sets a value, and a NAME alone is
copied from the submission's environment when it is set there. A comma inside quotes does not
separate (single and double quotes are counted apart, so one kind may sit inside the other), an
item that begins and ends with the same quote loses those two quotes, quotes anywhere else stay
in the value, and an unterminated quote takes the rest of the text.
"""

from __future__ import annotations


def items(text: str) -> list[str]:
    """The list's items, as Slurm cuts them."""
    out: list[str] = []
    start, single, double = 0, False, False
    n = len(text)
    i = 0
    while start < n:
        ch = text[i] if i < n else ""
        if ch == "'":
            single = not single
        elif ch == '"':
            double = not double
        elif ch in (",", "") and not single and not double:
            tok = text[start:i]
            if len(tok) >= 2 and tok[0] == tok[-1] and tok[0] in "'\"":
                tok = tok[1:-1]
            out.append(tok)
            start = i + 1
        elif ch == "":  # an unterminated quote: Slurm takes the rest ("Improperly formed ...")
            out.append(text[start:])
            break
        i += 1
    return out


def mode(text: str | None, environ: dict[str, str]) -> dict:
    """--export's text -> {"all": bool, "vars": {name: value}}: what the job gets (no --export:
    everything)."""
    if text is None or text.upper() == "ALL":
        return {"all": True, "vars": {}}
    out: dict = {"all": False, "vars": {}}
    if text.upper() in ("NONE", "NIL"):
        return out
    for item in items(text):
        if item.upper() == "ALL":
            out["all"] = True
        elif "=" in item:
            name, _, value = item.partition("=")
            out["vars"][name] = value
        elif item in environ:
            out["vars"][item] = environ[item]
    return out
