"""The option table against the Slurm option surface (fixtures/slurm-options: every sbatch/srun/salloc
option of Slurm's own table, with its letter, argument form, commands and input variables)."""

from __future__ import annotations

import io
from collections import Counter

import pytest

from conftest import FIXTURES, use_site_config
from shim import siteconf
from shim.cli import sbatch
from shim.errors import ShimError
from shim.slurm.options import sources
from shim.slurm.options import values as v
from shim.slurm.options.getopt import Table, getopt
from shim.slurm.options.spec import Arity, Fate
from shim.slurm.options.table import GETOPT_ORDER, OPTIONS, spec
from shim.slurm.options.table import every_table as command_table  # (every release's rows: the table itself)

SURFACE = FIXTURES / "slurm-options"
COMMANDS = ("sbatch", "srun", "salloc")
GROUPS = {
    "geometry", "resources", "time", "io", "environment", "scheduling", "dependency", "notification",
    "placement", "accounting", "output", "interactive", "other",
}
ARITY = {"none": Arity.NONE, "required": Arity.REQUIRED, "optional": Arity.OPTIONAL}


def _doc_rows() -> list[dict]:
    """Rows of options.tsv: long, short, arity, commands, env vars ("-" is an empty cell)."""
    rows = []
    for line in (SURFACE / "options.tsv").read_text().splitlines():
        if line.startswith("#"):
            continue
        long_, short, arg, commands, env = line.split("\t")
        rows.append({
            "long": long_,
            "short": None if short == "-" else short,
            "arity": ARITY[arg],
            "commands": frozenset(commands.split(",")) - {"-"},
            "env": [] if env == "-" else env.split(","),
        })
    return rows


DOC_ROWS = _doc_rows()


def _row(long_: str, commands: frozenset[str]):
    """Our row for a doc row (two doc rows share --wait; the command sets tell them apart)."""
    matches = [o for o in OPTIONS if o.long == long_ and o.commands & commands]
    assert len(matches) == 1, f"--{long_} for {sorted(commands)}: {matches}"
    return matches[0]


def _commands_of(var: str) -> set[str]:
    """Which commands read an input variable, by Slurm's naming convention."""
    if var in ("SLURM_CLUSTERS", "SLURM_HINT"):  # read by all three
        return set(COMMANDS)
    if var.startswith("SBATCH_"):
        return {"sbatch"}
    if var.startswith("SALLOC_"):
        return {"salloc"}
    return {"srun"}


def test_doc_parsed():
    assert len(DOC_ROWS) >= 160, "the surface table could not be read"


def test_sorted_by_long_name():
    names = [o.long for o in OPTIONS]
    assert names == sorted(names)


def test_long_names_unique_per_command():
    for cmd in COMMANDS:
        counts = Counter(o.long for o in OPTIONS if cmd in o.commands)
        assert [n for n, c in counts.items() if c > 1] == [], cmd
    # only --wait has two rows (a flag for sbatch, seconds for srun), on disjoint commands
    twice = [n for n, c in Counter(o.long for o in OPTIONS).items() if c > 1]
    assert twice == ["wait"]


def test_short_letters_unique_per_command():
    for cmd in COMMANDS:
        counts = Counter(o.short for o in OPTIONS if cmd in o.commands and o.short)
        assert [s for s, c in counts.items() if c > 1] == [], cmd


@pytest.mark.parametrize("row", DOC_ROWS, ids=lambda r: f"{r['long']}-{'-'.join(sorted(r['commands']))}")
def test_every_doc_option_is_a_row(row):
    ours = _row(row["long"], row["commands"])
    assert ours.short == row["short"]
    assert ours.arity is row["arity"]
    # a superset: 22.05's commands count too (--uid/--gid on srun and salloc); test_option_arity checks
    # every row's commands against Slurm's own tables exactly
    assert row["commands"] <= ours.commands


@pytest.mark.parametrize("row", [r for r in DOC_ROWS if r["env"]], ids=lambda r: r["long"])
def test_every_doc_input_variable_is_bound(row):
    ours = _row(row["long"], row["commands"])
    for var in row["env"]:
        for cmd in _commands_of(var) & row["commands"]:
            assert var in ours.env.get(cmd, ()), f"{var} not bound for {cmd} --{row['long']}"


def test_doc_rows_name_commands():
    assert all(r["commands"] and r["commands"] <= set(COMMANDS) for r in DOC_ROWS)


def test_sbatch_input_variables_are_bound():
    wanted = set((SURFACE / "sbatch-env-vars.txt").read_text().split())
    assert len(wanted) >= 60
    wanted -= {"SBATCH_REQ_SWITCH", "SBATCH_WAIT4SWITCH"}  # set option fields that have no name
    bound = {var for o in OPTIONS for var in o.env.get("sbatch", ())}
    assert wanted - bound == set()


def test_variables_belong_to_their_command():
    for o in OPTIONS:
        for cmd, names in o.env.items():
            assert cmd in o.commands, o.long
            for var in names:
                assert cmd in _commands_of(var), f"{var} bound for {cmd} in --{o.long}"


def test_every_variable_sets_one_option_per_command():
    for cmd in COMMANDS:
        keys: dict[str, set[str]] = {}
        for o in OPTIONS:
            for var in o.env.get(cmd, ()):
                keys.setdefault(var, set()).add(o.key)
        assert {var: k for var, k in keys.items() if len(k) > 1} == {}, cmd


def test_every_row_is_documented():
    for o in OPTIONS:
        assert o.help and len(o.help) <= 72, o.long
        assert isinstance(o.fate, Fate), o.long
        assert o.group in GROUPS, o.long
        if o.fate in (Fate.WARN, Fate.REFUSE):
            assert o.note, f"--{o.long} is {o.fate.name} without a note"


def test_values_parse_only_options_with_values():
    for o in OPTIONS:
        if o.arity is Arity.NONE:
            assert o.parse is None, o.long
        if o.count:
            assert o.arity is Arity.NONE


def test_keys_other_code_reads():
    keys = {o.key for o in OPTIONS}
    for key in ("cpus_per_task", "job_name", "mem", "nodes", "ntasks", "output", "error", "partition",
                "time", "chdir", "parsable", "wrap", "help"):
        assert key in keys


def test_negative_options_share_their_key():
    assert spec("no-requeue", "sbatch").key == "requeue"
    assert spec("no-requeue", "sbatch").const is False
    assert spec("requeue", "sbatch").const is True
    assert spec("no-bell", "salloc").key == spec("bell", "salloc").key
    assert spec("no-bell", "salloc").const is False
    assert spec("cluster", "sbatch").key == "clusters"
    assert spec("tasks-per-node", "srun").key == "ntasks_per_node"
    assert spec("cpu_bind", "srun").key == spec("cpu-bind", "srun").key
    assert spec("pack-group", "srun").key == spec("het-group", "srun").key


def test_letter_collisions_between_commands():
    assert spec("kill-on-bad-exit", "srun").short == "K"
    assert spec("kill-command", "salloc").short == "K"
    assert Table("srun", OPTIONS).by_short["K"].long == "kill-on-bad-exit"
    assert Table("salloc", OPTIONS).by_short["K"].long == "kill-command"
    assert Table("sbatch", OPTIONS).by_short["W"].arity is Arity.NONE
    assert Table("srun", OPTIONS).by_short["W"].arity is Arity.REQUIRED


def test_fates():
    fate = {o.long: o.fate for o in OPTIONS}
    for name in ("chdir", "cpus-per-task", "ntasks", "nodes", "mem", "time", "partition", "array",
                 "dependency", "begin", "hold", "gres", "gpus", "licenses", "signal", "export"):
        assert fate[name] is Fate.MAP, name
    for name in ("help", "usage", "version", "verbose", "quiet", "parsable", "test-only", "wrap", "clusters"):
        assert fate[name] is Fate.LOCAL, name
    for name in ("bb", "bbf", "container", "het-group", "switches", "network", "mcs-label", "uid", "gid"):
        assert fate[name] is Fate.REFUSE, name
    for name in ("acctg-freq", "cpu-freq", "hint", "distribution", "mem-bind", "cpu-bind", "profile"):
        assert fate[name] is Fate.WARN, name


def test_input_variable_precedence():
    # the variable Slurm lets win comes first (it is processed last in Slurm's tables)
    assert spec("ntasks", "srun").env["srun"][0] == "SLURM_NTASKS"
    assert spec("export", "srun").env["srun"][0] == "SRUN_EXPORT_ENV"
    assert spec("output", "srun").env["srun"][0] == "SRUN_OUTPUT"
    assert spec("clusters", "sbatch").env["sbatch"][0] == "SLURM_CLUSTERS"
    assert spec("hint", "sbatch").env["sbatch"][0] == "SBATCH_HINT"
    assert spec("hint", "salloc").env["salloc"][0] == "SLURM_HINT"


def test_getopt_order_covers_the_table():
    assert sorted(GETOPT_ORDER) == sorted({o.long for o in OPTIONS})
    assert len(GETOPT_ORDER) == len(set(GETOPT_ORDER))
    table = command_table("srun")
    assert [s.long for s in table.specs][:3] == ["accel-bind", "account", "acctg-freq"]


def test_optional_defaults():
    assert spec("nice", "sbatch").const == 100
    assert spec("exclusive", "sbatch").const == "exclusive"
    assert spec("immediate", "srun").const == v.DEFAULT_IMMEDIATE
    assert spec("kill-command", "salloc").const == 15
    assert spec("kill-on-bad-exit", "srun").const == 1


# --- --get-user-env[=timeout][mode] ---------------------------------------------------------------


@pytest.mark.parametrize("word,value", [("--get-user-env", None), ("--get-user-env=L", "L"),
                                        ("--get-user-env=10S", "10S"), ("--get-user-env=", ""),
                                        ("--get-user-env=60", "60"), ("--get-user-env=5l", "5l")])
def test_get_user_env_takes_an_optional_value(word, value):
    for prog in ("sbatch", "salloc"):
        parsed, rest = getopt(command_table(prog), [word, "job.sh"])
        assert [(s.long, raw) for s, raw in parsed] == [("get-user-env", value)] and rest == ["job.sh"]
        o = sources.collect(command_table(prog), [word, "job.sh"], environ={}, cli=parsed)
        assert o.get_user_env == (True if value is None else value)


def test_get_user_env_value_is_attached_only():
    # optional: "--get-user-env L" leaves L as the script, as getopt_long does
    parsed, rest = getopt(command_table("sbatch"), ["--get-user-env", "L"])
    assert [(s.long, raw) for s, raw in parsed] == [("get-user-env", None)] and rest == ["L"]


@pytest.mark.parametrize("text", ["x", "10x", "?", " L", "-", "10 L", "\u0661L"])  # strtol: ASCII digits only
def test_get_user_env_bad_mode_is_slurms_error(text):
    with pytest.raises(ShimError) as info:
        v.get_user_env(text, "sbatch")
    assert (info.value.lines, info.value.code) == (["sbatch: error: Invalid --get-user-env specification"], 255)


def test_get_user_env_from_a_directive_and_the_environment(monkeypatch, tmp_path):
    use_site_config(monkeypatch, tmp_path)
    siteconf.reset()
    try:
        for script, environ in (("#!/bin/sh\n#SBATCH --get-user-env=L\ntrue\n", {}),
                                ("#!/bin/sh\n#SBATCH --get-user-env\ntrue\n", {}),
                                ("#!/bin/sh\ntrue\n", {"SBATCH_GET_USER_ENV": "1"})):
            _o, sub, _cfg = sbatch.prepare([], environ, stdin=io.StringIO(script), cwd="/srv/x")
            assert sub.payload["get_user_env"] is True, (script, environ)
        _o, sub, _cfg = sbatch.prepare([], {}, stdin=io.StringIO("#!/bin/sh\ntrue\n"), cwd="/srv/x")
        assert sub.payload["get_user_env"] is False
        with pytest.raises(ShimError) as info:
            sbatch.prepare([], {}, stdin=io.StringIO("#!/bin/sh\n#SBATCH --get-user-env=bogus\ntrue\n"), cwd="/srv/x")
        assert info.value.lines == ["sbatch: error: Invalid --get-user-env specification"]
    finally:
        siteconf.reset()
