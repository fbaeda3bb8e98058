"""Every option's argument form and commands are Slurm's own (issue 15, item 1).

The facts are Slurm's option table, ``common_options[]`` in ``src/common/slurm_opt.c`` of
SchedMD/slurm: each ``slurm_cli_opt_t`` entry's ``.name``, ``.has_arg`` (getopt_long's
no_argument / required_argument / optional_argument), ``.val`` (the short letter) and the
``.set_func*`` members that ``slurm_option_table_create()`` uses to put an entry in the getopt table of
salloc, sbatch or srun. They were extracted by ``scripts/extract-slurm-options`` into
``fixtures/slurm-options/slurm_opt-{22.05,26.05,26.11-dev}.json`` (provenance in that directory's
README): 22.05.8, the version of the reference captures; 26.05.3, the newest release; and the
development head the option table was first drawn from (26.11.0-dev, which renamed --container-type
to --runtime).

The rule the table follows: a command accepts an option if any of the three versions accepts it there
(scripts are written for either), with the letter they all give it. Where the versions give one
option different argument forms, the row takes the form that accepts both spellings (OPTIONAL
accepts a bare ``--opt`` and ``--opt=value``), and VERSION_DIFFERENCES lists each such option with the
reason; the test fails if that list and the fixtures ever disagree.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import FIXTURES, REPO
from shim.cli import common
from shim.errors import ShimError
from shim.slurm.options import sources
from shim.slurm.options.getopt import Table, getopt
from shim.slurm.options.spec import Arity
from shim.slurm.options.table import GETOPT_ORDER, OPTIONS
from shim.slurm.options.table import every_table as command_table  # (every release's rows: the table itself)
from shim.slurm.render import help as help_render
from shim.slurm.render import manpage

SURFACE = FIXTURES / "slurm-options"
VERSIONS = ("22.05", "26.05", "26.11-dev")
COMMANDS = ("sbatch", "srun", "salloc")
ARITY = {"none": Arity.NONE, "required": Arity.REQUIRED, "optional": Arity.OPTIONAL}

# Options whose argument form differs between the versions, the forms per version (None: the option
# does not exist there for that command) and why the row's form accepts every version's spelling.
# Key: (command, option). Value: (forms by version, the row's arity, reason).
VERSION_DIFFERENCES = {
    ("sbatch", "get-user-env"): (
        ("optional", "none", "none"), Arity.OPTIONAL,
        "22.05 takes [=timeout][mode] (job templates write --get-user-env=L); 25.05 made it a flag. "
        "OPTIONAL accepts the bare flag and 22.05's value"),
    ("srun", "pty"): (
        ("none", "optional", "optional"), Arity.OPTIONAL,
        "a flag in 22.05, an optional value since 23.02; OPTIONAL accepts both"),
    ("sbatch", "requeue"): (
        ("none", "optional", "optional"), Arity.OPTIONAL,
        "a flag in 22.05, --requeue[=expedite] since 25.11; OPTIONAL accepts both"),
}


def _load(version: str) -> dict:
    return json.loads((SURFACE / f"slurm_opt-{version}.json").read_text())


FIXTURE = {ver: _load(ver) for ver in VERSIONS}


def _per_command(version: str) -> dict[str, dict[str, tuple[str | None, str]]]:
    """{command: {long name: (letter, has_arg)}} of one version (scron left out)."""
    out: dict[str, dict[str, tuple[str | None, str]]] = {cmd: {} for cmd in COMMANDS}
    for row in FIXTURE[version]["options"]:
        for cmd in row["commands"]:
            if cmd in out:
                assert row["name"] not in out[cmd], f"{version}: {cmd} --{row['name']} twice"
                out[cmd][row["name"]] = (row["short"], row["has_arg"])
    return out


SLURM = {ver: _per_command(ver) for ver in VERSIONS}


def _forms(cmd: str, name: str) -> tuple[str | None, ...]:
    return tuple(SLURM[ver][cmd].get(name, (None, None))[1] for ver in VERSIONS)


def _union(cmd: str) -> set[str]:
    return {name for ver in VERSIONS for name in SLURM[ver][cmd]}


PAIRS = sorted((cmd, name) for cmd in COMMANDS for name in _union(cmd))


def test_fixtures_are_slurms_table():
    """Each fixture says where it came from and holds a whole table (the options every command has)."""
    expected = {"22.05": ("slurm-22-05-8-1", "22.05.8"), "26.05": ("slurm-26-05-3-1", "26.05.3"),
                "26.11-dev": ("284c3b95f08a2dc2478499837b03355e1b9c5c75", "26.11.0")}
    for ver, (ref, version) in expected.items():
        prov = FIXTURE[ver]["provenance"]
        assert (prov["ref"], prov["version"], prov["file"]) == (ref, version, "src/common/slurm_opt.c")
        assert re.fullmatch(r"[0-9a-f]{40}", prov["commit"])
        assert FIXTURE[ver]["count"] == len(FIXTURE[ver]["options"]) >= 145
        for name in ("account", "nodes", "ntasks", "time", "partition", "dependency", "chdir"):
            for cmd in COMMANDS:
                assert name in SLURM[ver][cmd], (ver, cmd, name)
    # facts any reader of slurm_opt.c can check, one per kind of entry
    assert SLURM["22.05"]["sbatch"]["account"] == ("A", "required")
    assert SLURM["22.05"]["sbatch"]["wait"] == ("W", "none")  # slurm_opt_wait
    assert SLURM["22.05"]["srun"]["wait"] == ("W", "required")  # slurm_opt_wait_srun
    assert SLURM["22.05"]["sbatch"]["get-user-env"] == (None, "optional")
    assert "x11" in SLURM["22.05"]["srun"]  # named in a WITH_SLURM_X11 build
    assert "power" in SLURM["22.05"]["sbatch"] and "power" not in SLURM["26.05"]["sbatch"]
    assert "container-type" in SLURM["26.05"]["srun"] and "runtime" in SLURM["26.11-dev"]["srun"]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_each_command_accepts_what_some_slurm_version_accepts(cmd):
    """The long options of sbatch/srun/salloc are the union of the three versions' tables: nothing
    missing, nothing Slurm never had."""
    ours = set(Table(cmd, OPTIONS).by_long)
    assert sorted(_union(cmd) - ours) == [], "options Slurm has and the table lacks"
    assert sorted(ours - _union(cmd)) == [], "options the table has and no Slurm version does"


@pytest.mark.parametrize("cmd,name", PAIRS, ids=[f"{c}--{n}" for c, n in PAIRS])
def test_argument_form_and_letter(cmd, name):
    """has_arg and .val of the entry, for this command, in every version that has it."""
    ours = Table(cmd, OPTIONS).by_long[name]
    letters = {SLURM[ver][cmd][name][0] for ver in VERSIONS if name in SLURM[ver][cmd]}
    assert letters == {ours.short}, f"{cmd} --{name}: Slurm's letter(s) {letters}, ours {ours.short}"
    forms = _forms(cmd, name)
    present = {f for f in forms if f is not None}
    if len(present) == 1:
        assert (cmd, name) not in VERSION_DIFFERENCES, "listed as differing, but every version agrees"
        assert ours.arity is ARITY[present.pop()], f"{cmd} --{name}: Slurm {forms}, ours {ours.arity.name}"
    else:
        assert (cmd, name) in VERSION_DIFFERENCES, f"{cmd} --{name}: versions differ {forms}; list the choice"
        listed, arity, reason = VERSION_DIFFERENCES[(cmd, name)]
        assert listed == forms and reason
        assert ours.arity is arity
        # the chosen form accepts every version's spelling: a flag's and a value's
        if present == {"none", "optional"}:
            assert arity is Arity.OPTIONAL


def test_version_differences_are_current():
    """Every listed difference is still one (the list cannot outlive the fixtures)."""
    for (cmd, name), (forms, _arity, _reason) in VERSION_DIFFERENCES.items():
        assert _forms(cmd, name) == forms
        assert len({f for f in forms if f is not None}) > 1


def test_getopt_order_is_slurms():
    """glibc names an ambiguous prefix's candidates in the order of common_options[]; GETOPT_ORDER
    keeps that order for every version (options of one version only fall where that version has them)."""
    for ver in VERSIONS:
        names = list(dict.fromkeys(r["name"] for r in FIXTURE[ver]["options"]
                                   if set(r["commands"]) & set(COMMANDS)))
        assert [n for n in GETOPT_ORDER if n in names] == names, ver


# --- the rows that differ between versions accept both spellings -----------------------------------


@pytest.mark.parametrize("cmd,words,value", [
    ("sbatch", ["--requeue"], None), ("sbatch", ["--requeue=expedite"], "expedite"),
    ("srun", ["--pty"], None), ("srun", ["--pty=0"], "0"), ("srun", ["--pty="], ""),
    ("sbatch", ["--get-user-env"], None), ("sbatch", ["--get-user-env=L"], "L"),
    ("salloc", ["--get-user-env"], None),
])
def test_both_spellings_parse(cmd, words, value):
    parsed, rest = getopt(command_table(cmd), words + ["prog"])
    assert [(s.long, raw) for s, raw in parsed] == [(words[0][2:].partition("=")[0], value)]
    assert rest == ["prog"]


def test_optional_value_is_attached_only():
    """OPTIONAL, as getopt_long: '--requeue expedite' leaves 'expedite' as the script."""
    parsed, rest = getopt(command_table("sbatch"), ["--requeue", "job.sh"])
    assert [(s.long, raw) for s, raw in parsed] == [("requeue", None)] and rest == ["job.sh"]


# --- a flag in 22.05 with a value in newer releases: only the newer releases' values ---------------


def test_rows_with_later_values_are_the_flags_of_22_05():
    """Exactly the rows that are a flag in 22.05 and take an optional value in a newer release carry
    the newer releases' values (OptionSpec.later); any other value is 22.05's getopt error."""
    flagged = sorted((cmd, name) for (cmd, name), (forms, _a, _r) in VERSION_DIFFERENCES.items()
                     if forms[0] == "none" and "optional" in forms)
    assert flagged == [("sbatch", "requeue"), ("srun", "pty")]
    for cmd in COMMANDS:
        for s in Table(cmd, OPTIONS).specs:
            assert (s.later is not None) == ((cmd, s.long) in flagged), (cmd, s.long)


def _refused(cmd: str, argv: list[str], **kw) -> ShimError:
    with pytest.raises(ShimError) as info:
        sources.collect(command_table(cmd), argv, environ={}, **kw)
    return info.value


@pytest.mark.parametrize("words", [["--requeue=bogus"], ["--requeue=1"], ["--req=bogus"], ["--requeue=expedited"],
                                   ["--hold", "--requeue=no"]])
def test_requeue_with_a_value_no_version_takes_is_22_05s_getopt_error(words):
    """22.05's --requeue is no_argument: glibc's getopt_long refuses '--requeue=bogus' with the option's
    full name, and sbatch exits 255 as for any getopt error (fixtures/slurm-22.05 cases
    sbatch_err_unknown_option). Before, the value was kept and the job was made requeueable."""
    err = _refused("sbatch", words + ["job.sh"])
    assert err.lines == ["sbatch: option '--requeue' doesn't allow an argument",
                         'Try "sbatch --help" for more information']
    assert err.code == 255


def test_requeue_value_in_a_directive_is_refused_too():
    err = _refused("sbatch", ["job.sh"], script_words=sources.directive_words("#!/bin/sh\n#SBATCH --requeue=x\n"))
    assert err.lines[0] == "sbatch: option '--requeue' doesn't allow an argument" and err.code == 255


def test_requeue_getopt_error_comes_in_argv_order():
    """getopt_long stops at the first bad word: the value error comes before a later unknown option."""
    err = _refused("sbatch", ["--requeue=x", "--bogus", "job.sh"])
    assert err.lines[0] == "sbatch: option '--requeue' doesn't allow an argument"
    err = _refused("sbatch", ["--bogus", "--requeue=x", "job.sh"])
    assert err.lines[0] == "sbatch: unrecognized option '--bogus'"


@pytest.mark.parametrize("words", [["--requeue"], ["--requeue="], ["--requeue=expedite"], ["--requeue=EXPEDITE"],
                                   ["--no-requeue", "--requeue="]])
def test_requeue_spellings_of_every_version_requeue(words):
    """'--requeue=' and '--requeue=expedite' are 25.11's (arg_set_requeue: empty is the plain flag,
    expedite in any case): both make the job requeueable, as the bare flag (before, '--requeue=' stored
    an empty string, which read as --no-requeue)."""
    assert sources.collect(command_table("sbatch"), words + ["job.sh"], environ={}).requeue is True


@pytest.mark.parametrize("value,requeue", [
    ("", True), ("yes", True), ("YES", True), ("1", True), ("7", True), ("expedite", True),
    ("0", None), ("no", None), ("bogus", None),
])
def test_sbatch_requeue_variable_follows_22_05s_flag_rules(value, requeue):
    """22.05 reads SBATCH_REQUEUE as a flag's variable (slurm_process_option: empty, "yes" or a number
    other than 0 sets it, anything else resets it); expedite is the newer releases' value. Before,
    SBATCH_REQUEUE=0 made the job requeueable."""
    o = sources.collect(command_table("sbatch"), ["job.sh"], environ={"SBATCH_REQUEUE": value})
    assert o.requeue is requeue


@pytest.mark.parametrize("cmd", ["srun", "salloc"])
@pytest.mark.parametrize("opt", ["uid", "gid"])
def test_uid_gid_are_options_of_srun_and_salloc(cmd, opt):
    """22.05's srun and salloc take --uid/--gid (set_func in slurm_opt.c); the shim refuses them with
    its one-line error (exit 1), not getopt's 'unrecognized option' (exit 255)."""
    table = command_table(cmd)
    parsed, rest = getopt(table, [f"--{opt}", "1000", "hostname"])
    assert [(s.long, raw) for s, raw in parsed] == [(opt, "1000")] and rest == ["hostname"]
    o = sources.collect(table, [f"--{opt}", "1000", "hostname"], environ={}, cli=parsed)
    with pytest.raises(ShimError) as info:
        common.fates(o, table, cmd, ("cli",))
    assert info.value.code == 1
    assert info.value.lines[0].startswith(f"{cmd}: error: --{opt} is not supported on Grid Engine")


def test_container_type_is_refused_like_runtime():
    for cmd in COMMANDS:
        table = command_table(cmd)
        for opt in ("container-type", "runtime"):
            parsed, _rest = getopt(table, [f"--{opt}=runc", "x"])
            o = sources.collect(table, [f"--{opt}=runc", "x"], environ={}, cli=parsed)
            with pytest.raises(ShimError) as info:
                common.fates(o, table, cmd, ("cli",))
            assert info.value.code == 1 and f"--{opt} is not supported" in info.value.lines[0]


# --- man pages and --help show every row's form ----------------------------------------------------


def _synopsis(s, prog: str) -> str:
    """The man page's first line of an entry, as shim.slurm.render.manpage writes it."""
    arg = {Arity.NONE: "", Arity.REQUIRED: "=\\fIvalue\\fR", Arity.OPTIONAL: "[=\\fIvalue\\fR]"}[s.arity]
    short = f"\\fB\\-{s.short}\\fR, " if s.short else ""
    return f"{short}\\fB\\-\\-{s.long.replace('-', chr(92) + '-')}\\fR{arg}"


@pytest.mark.parametrize("prog", COMMANDS)
def test_man_page_option_entries_are_the_tables(prog):
    """man/<prog>.1's OPTIONS entries are exactly the generated ones (srun.1 and salloc.1 have
    hand-written prose around them; the entries themselves come from the table)."""
    def entries(text: str) -> list[str]:
        lines = text.split("\n")
        i = lines.index(".SH OPTIONS")
        j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith(".SH "))
        section = lines[i + 1:j]
        return section[section.index(".TP"):]
    page = (REPO / "man" / f"{prog}.1").read_text()
    assert entries(page) == entries(manpage.render(prog))
    for s in Table(prog, OPTIONS).specs:
        assert f".TP\n{_synopsis(s, prog)}\n" in page, s.long


@pytest.mark.parametrize("prog", COMMANDS)
def test_help_shows_every_rows_form(prog):
    text = help_render.help(prog, OPTIONS)
    for s in Table(prog, OPTIONS).specs:
        arg = {Arity.NONE: "", Arity.REQUIRED: "=value", Arity.OPTIONAL: "[=value]"}[s.arity]
        assert re.search(rf"(^|\s)--{re.escape(s.long)}{re.escape(arg)}\s", text, re.M), (prog, s.long)
