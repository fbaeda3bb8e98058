"""``sacctmgr``: Grid Engine's projects, share tree, users and quotas in Slurm's association terms.
Read-only: ``show``/``list`` of ``associations``, ``accounts``, ``users`` and ``qos``; every change
is refused with the ``qconf`` command that makes it.

- Accounts: the share tree's inner nodes (under Slurm's ``root``) and the Grid Engine projects
  (``qconf -sprjl``; ``sbatch -A`` charges a project where the site maps accounts to projects).
- Associations: ``root`` and the user root's under it (slurmdbd adds both with the cluster);
  each account; each user leaf of the share tree under its node; each Grid Engine user under
  each project its access lists (``acl``/``xacl``) let it use.
  Share: the node's shares (1 where the tree does not name the account). GrpTRES/MaxTRESPU: the
  enabled resource quota rules that name the project (``projects P`` / with ``users {*}``).
- Users: ``qconf -suserl``; Def Acct: the share-tree node above the user, else the user's
  ``default_project``; Admin: Administrator for Grid Engine managers, Operator for operators.
- QOS: ``normal``, and one per resource quota set (its rules without a project filter: GrpTRES
  for everyone's limits, MaxTRESPU for ``users {*}``).
"""

from __future__ import annotations

import sys

from ..operations import policies
from .. import siteconf
from ..errors import ShimError
from ..slurm.options.getopt import Table
from ..slurm.options.spec import Arity, OptionSpec
from . import common
from ..slurm.render import report
from ..slurm.render import sacctmgr as view

PROG = "sacctmgr"
N = Arity.NONE


_o = common.own_options(PROG, N)


# sacctmgr.c's long_options, in its order
OPTIONS: tuple[OptionSpec, ...] = (
    _o("help", "h", help="show this help"),
    _o("usage", None, dest="help", help="the same"),
    _o("immediate", "i", help="accepted (nothing is ever changed)"),
    _o("noheader", "n", help="no header"),
    _o("oneliner", "o", help="accepted"),
    _o("parsable", "p", help="'|' after every field"),
    _o("parsable2", "P", help="'|' between fields"),
    _o("quiet", "Q", help="no messages"),
    _o("readonly", "r", help="accepted (always read-only)"),
    _o("associations", "s", help="accepted"),
    _o("verbose", "v", count=True, help="verbosity"),
    _o("version", "V", help="print the version"),
)
TABLE = Table(PROG, OPTIONS, error_code=1)

WRITE_VERBS = ("add", "create", "modify", "update", "delete", "remove", "archive", "load", "dump", "reconfigure",
               "shutdown")
HOW = {
    "account": "projects: qconf -aprj / -mprj / -dprj NAME; share-tree nodes: qconf -mstree",
    "association": "share tree: qconf -mstree; who may use a project: its acl/xacl (qconf -mprj NAME); "
                   "limits: resource quota sets (qconf -arqs / -mrqs NAME)",
    "user": "Grid Engine users: qconf -auser / -muser / -duser NAME; managers and operators: qconf -am / -ao",
    "qos": "resource quota sets: qconf -arqs / -mrqs / -drqs NAME",
}
ENTITIES = (("accounts", 2, "account"), ("acct", 4, "account"), ("associations", 2, "association"),
            ("qos", 1, "qos"), ("users", 1, "user"))


def help_text() -> str:
    return report.help_text(PROG, OPTIONS, "Grid Engine's projects, share tree, users and quotas as Slurm's "
                            "accounts, associations, users and QOS (read-only).",
                            usage="[OPTIONS] show|list association|account|user|qos [CONDITIONS] [format=...]")


def entity_of(word: str) -> str | None:
    low = word.lower()
    for name, k, ent in ENTITIES:
        if name.startswith(low) and len(low) >= k:
            return ent
    return None


# --- conditions -----------------------------------------------------------------------------------

CONDITIONS = {"user": ("users", 1), "account": ("accounts", 2), "acct": ("accounts", 4), "cluster": ("clusters", 2),
              "name": ("names", 1), "parent": ("parents", 3), "partition": ("partitions", 4), "qos": ("qos", 1),
              "where": ("where", 5), "withassoc": ("withassoc", 5), "withcoord": ("withcoord", 5),
              "tree": ("tree", 4), "withdeleted": ("withdeleted", 5), "onlydefaults": ("onlydefaults", 2)}


def parse_conditions(words: list[str]) -> tuple[dict[str, set[str]], str | None, set[str]]:
    """``key=value`` conditions (any unique prefix, plural or not), ``format=``, and flag words."""
    conds: dict[str, set[str]] = {}
    fmt_parts: list[str] = []
    flags: set[str] = set()
    for w in words:
        key, eq, value = w.partition("=")
        low = key.lower()
        if eq and len(low) >= 1 and "format".startswith(low):
            fmt_parts.append(value)
            continue
        match = None
        for name, (dest, k) in CONDITIONS.items():
            if (name.startswith(low) or (name + "s").startswith(low)) and len(low) >= k:
                match = dest
                break
        if match is None:
            raise ShimError(f" Unknown condition: {w}", code=1)
        if not eq:
            flags.add(match)
            continue
        conds.setdefault(match, set()).update(x for x in value.split(",") if x)
    return conds, (",".join(fmt_parts) if fmt_parts else None), flags


def main(argv: list[str]) -> int:
    o, words = common.command_line(TABLE, argv)
    if common.answered(o, help_text, version="slurm"):
        return 0
    if not words:
        raise ShimError(f"{PROG}: error: slurm-shim's sacctmgr has no interactive mode: give a command, "
                        "e.g. sacctmgr show assoc", code=1)
    verb = words[0].lower()
    if len(verb) >= 3 and any(v.startswith(verb) for v in ("show", "list")):
        pass
    elif any(v.startswith(verb) and len(verb) >= (1 if v == "modify" else 3) for v in WRITE_VERBS):
        ent = entity_of(words[1]) if len(words) > 1 else None
        how = HOW.get(ent or "", "; ".join(HOW.values()))
        raise ShimError(f"{PROG}: error: {words[0]}: slurm-shim's sacctmgr is read-only; Grid Engine keeps this "
                        f"in its own configuration. Change it with qconf ({how})", code=1)
    else:
        raise ShimError(f"invalid keyword: {words[0]}", code=1)
    ent = entity_of(words[1]) if len(words) > 1 else None
    if ent is None:
        raise ShimError("No valid entity in list command",
                        'Input line must include "Account", "Association", "QOS" or "User" '
                        "(the entities slurm-shim's sacctmgr shows)", code=1)
    conds, fmt, _flags = parse_conditions(words[2:])
    default = {"association": view.ASSOC, "account": view.ACCOUNT, "user": view.USER, "qos": view.QOS}[ent]
    try:
        cols = view.fields(fmt or default)
    except view.FieldError as e:
        raise ShimError(f"Unknown field '{e}'", code=1) from None
    cfg = siteconf.get()
    from ..gridengine import backends

    w = policies.gather_world(cfg, backends.get(cfg), need_users=ent in ("association", "user"))
    rows = {"association": policies.assoc_rows, "account": policies.account_rows, "user": policies.user_rows,
            "qos": policies.qos_rows}[ent](w, conds, cols)
    parsable = report.NO_ENDING if o.parsable2 else report.ENDING if o.parsable else 0
    sys.stdout.write(report.print_fields(cols, rows, parsable=parsable, header=not o.noheader))
    return 0
