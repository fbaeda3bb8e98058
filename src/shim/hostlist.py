"""Slurm host lists (placeholder until the full implementation lands)."""

import re


def expand(text: str) -> list[str]:
    out = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text):
        m = re.match(r"^(.*)\[([^\]]*)\](.*)$", part)
        if not m:
            out.append(part)
            continue
        pre, body, post = m.groups()
        for r in body.split(","):
            a, _, b = r.partition("-")
            w = len(a)
            for i in range(int(a), int(b or a) + 1):
                out.append(f"{pre}{str(i).zfill(w)}{post}")
    return out


def compress(hosts: list[str]) -> str:
    return ",".join(dict.fromkeys(hosts))
