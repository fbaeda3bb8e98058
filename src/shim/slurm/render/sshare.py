"""sshare's output: Slurm 22.05's fields (src/sshare/process.c ``fields[]``: names, widths,
printers), default and long layouts for the fair-tree algorithm (Slurm's default since 19.05) and
the account tree's indentation (slurmdb_tree_name_get: one space per level; a user's row shows its
account's name one level deeper). Reads nothing; rows come from policies.shares."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a start; annotations are strings (gridengine/backends.py)
if TYPE_CHECKING:
    from typing import Any

from ...plain import record  # (dataclasses costs ~10 ms of a start)
from .report import Column, print_fields

# name, width (negative: left-justified), printer kind
FIELDS: tuple[tuple[str, int, str], ...] = (
    ("Account", -20, "str"), ("Cluster", 10, "str"), ("EffectvUsage", 13, "double"),
    ("FairShare", 10, "double"), ("GrpTRESMins", 30, "str"), ("GrpTRESRaw", 30, "str"), ("ID", 6, "uint"),
    ("LevelFS", 10, "double"), ("NormShares", 11, "double"), ("NormUsage", 11, "double"),
    ("Partition", 12, "str"), ("RawShares", 10, "uint"), ("RawUsage", 11, "uint"), ("TRESRunMins", 30, "str"),
    ("User", 10, "str"),
)
DEFAULT = "A,User,RawShares,NormShares,RawUsage,Eff,Fairshare"
DEFAULT_PART = "A,User,P,RawShares,NormShares,RawUsage,Eff,Fairshare"
LONG = "A,User,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,LevelFS,GrpTRESMins,TRESRunMins"
LONG_PART = "A,User,P,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,LevelFS,GrpTRESMins,TRESRunMins"


class FieldError(ValueError):
    pass


def parse_fields(spec: str) -> list[Column]:
    """process.c: comma-separated names, each matching the first field it is a case-insensitive
    prefix of, with an optional ``%width``."""
    out = []
    for item in [x for x in spec.split(",") if x]:
        name, _, width = item.partition("%")
        for fname, flen, kind in FIELDS:
            if fname.lower().startswith(name.lower()):
                n = int(width) if width.lstrip("-").isdigit() and int(width) else flen
                out.append(Column(fname, n, kind))
                break
        else:
            raise FieldError(item)
    return out


@record
class Share:
    """One association: an account (user "") or a user under its account."""

    account: str
    user: str
    depth: int  # the account's level: root 0
    raw_shares: int | None
    norm_shares: float | None
    raw_usage: float
    norm_usage: float
    effective: float
    fairshare: float | None  # users only under fair tree
    level_fs: float | None
    cluster: str = ""
    partition: str = ""


def account_text(s: Share) -> str:
    return " " * (s.depth + (1 if s.user else 0)) + s.account


def cells(s: Share, cols: list[Column]) -> list[Any]:
    values = {
        "Account": account_text(s), "Cluster": s.cluster, "EffectvUsage": s.effective, "FairShare": s.fairshare,
        "GrpTRESMins": "", "GrpTRESRaw": "", "ID": None, "LevelFS": s.level_fs, "NormShares": s.norm_shares,
        "NormUsage": s.norm_usage, "Partition": s.partition or None, "RawShares": s.raw_shares,
        "RawUsage": int(s.raw_usage), "TRESRunMins": "", "User": s.user or None,
    }
    return [values[c.name] for c in cols]


def render(shares: list[Share], cols: list[Column], *, parsable: int = 0, header: bool = True) -> str:
    return print_fields(cols, [cells(s, cols) for s in shares], parsable=parsable, header=header)
