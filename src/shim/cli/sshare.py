"""``sshare``: Grid Engine's share tree as Slurm's fair-share associations.

One ``qconf -sstree`` (the nodes and their shares) and one ``sge_share_mon -c 1 -i 1 -h`` (each
node's decayed usage and actual share). The tree's root is Slurm's ``root`` account, inner nodes
are accounts, leaves that are users are user associations of their parent account (README:
"sshare"):

- RawShares: the node's shares; NormShares: its part of the whole tree (sge_share_mon's total%);
- RawUsage: its decayed usage (Grid Engine's usage_weight_list units; cpu seconds when, as by
  default, only cpu is weighted), halved every ``halftime`` hours like Slurm's PriorityDecayHalfLife;
- NormUsage and EffectvUsage: its part of the tree's usage (actual_share);
- FairShare (users): 2^(-EffectvUsage/NormShares), Slurm's classic factor;
- LevelFS: the node's part of its siblings' shares over its part of their usage.

As Slurm, without ``-a`` or ``-u`` only the caller's own user rows are shown (every account row is).
"""

from __future__ import annotations

import sys

from ..operations import policies
from .. import siteconf
from ..errors import for_command
from ..slurm.options.getopt import Table
from ..slurm.options.sources import Options
from ..slurm.options.spec import Arity, OptionSpec
from . import common
from ..slurm.render import report
from ..slurm.render import sshare as view

PROG = "sshare"
N, R = Arity.NONE, Arity.REQUIRED


_o = common.own_options(PROG, R)


# sshare.c's long_options, in its order; -h is --noheader's twin
OPTIONS: tuple[OptionSpec, ...] = (
    _o("accounts", "A", help="only these accounts (share-tree nodes)"),
    _o("all", "a", N, help="every user, not only yourself"),
    _o("helpformat", "e", N, help="the field names for --format"),
    _o("long", "l", N, help="more fields"),
    _o("partition", "m", N, help="a Partition column (empty: shares are not per queue)"),
    _o("cluster", "M", dest="clusters", help=""),
    _o("clusters", None, help="accepted: one cluster"),
    _o("noheader", "n", N, help="no header"),
    _o("format", "o", help="fields to show (comma-separated, name%width)"),
    _o("parsable", "p", N, help="'|' after every field"),
    _o("parsable2", "P", N, help="'|' between fields"),
    _o("users", "u", help="only these users (-1: all)"),
    _o("Users", "U", N, dest="users_only", help="only user rows"),
    _o("verbose", "v", N, count=True, help="say what was asked"),
    _o("version", "V", N, help="print the version"),
    _o("help", None, N, help="show this help"),
    _o("usage", None, N, help="brief usage"),
    _o("noheader", "h", N, help=""),  # -h: the same option as -n
)
TABLE = Table(PROG, OPTIONS, error_code=1)


def usage_text() -> str:
    return report.help_text(PROG, OPTIONS, "Grid Engine's share tree as Slurm's fair-share associations: "
                            "shares, usage and fair-share factor.")


error = for_command(PROG)  # Slurm's "<prog>: error: ..." (errors.command_error)


def parse_args(argv: list[str]) -> tuple[Options, list[str]]:
    return common.command_line(TABLE, argv)


def main(argv: list[str]) -> int:
    from ..slurm import users as users_

    o, _positional = parse_args(argv)
    if o.help or o.usage:
        sys.stdout.write(usage_text())
        return 0
    if o.helpformat:
        names = [f[0] for f in view.FIELDS]
        sys.stdout.write("".join(f"{n:<17}" + ("\n" if (i + 1) % 5 == 0 else "") for i, n in enumerate(names)))
        sys.stdout.write("\n" if len(names) % 5 else "")
        return 0
    if o.version:
        return common.print_version()
    partition = bool(o.partition)
    try:
        if o.format:
            cols = view.parse_fields(o.format)
        else:
            spec = (view.LONG_PART if partition else view.LONG) if o.long else (
                view.DEFAULT_PART if partition else view.DEFAULT)
            cols = view.parse_fields(spec)
    except view.FieldError as e:
        raise error(f'Invalid field requested: "{e}"') from None
    all_users = bool(o.all) or o.users == "-1"
    users: set[str] | None = None
    if not all_users:
        if o.users:
            users = {u for u in o.users.split(",") if u}
        else:
            me = users_.own_name()
            users = {me} if me else set()
    accounts = {a.lower() for a in o.accounts.split(",") if a} if o.accounts else None
    if o.verbose:
        sys.stderr.write("Users requested:\n" + ("\t: all\n" if users is None else "".join(
            f"\t: {u}\n" for u in sorted(users))))
        sys.stderr.write("Accounts requested:\n" + ("\t: all\n" if accounts is None else "".join(
            f"\t: {a}\n" for a in sorted(accounts))))

    cfg = siteconf.get()
    from ..gridengine import backends

    nodes, no_usage = backends.get(cfg).share_usage()
    if no_usage is not None:
        sys.stderr.write(f"{PROG}: warning: sge_share_mon gave no usage: {no_usage}\n")
    rows = policies.select_shares(policies.shares(nodes, cfg.cluster.name), users, accounts,
                                  users_only=bool(o.users_only), partition=partition)
    parsable = report.NO_ENDING if o.parsable2 else report.ENDING if o.parsable else 0
    sys.stdout.write(view.render(rows, cols, parsable=parsable, header=not o.noheader))
    return 0
