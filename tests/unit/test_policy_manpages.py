"""Issue 20's commands (sprio, sshare, sacctmgr, sreport): each has a man page that names every
option of its table, and --help lists them."""

import importlib
from pathlib import Path

import pytest

MAN = Path(__file__).resolve().parents[2] / "man"
COMMANDS = ("sprio", "sshare", "sacctmgr", "sreport")


@pytest.mark.parametrize("prog", COMMANDS)
def test_man_page_names_every_option(prog):
    mod = importlib.import_module(f"shim.cli.{prog}")
    text = (MAN / f"{prog}.1").read_text()
    assert f"\n.TH {prog.upper()} 1 " in "\n" + text
    for spec in mod.OPTIONS:
        assert "\\-\\-" + spec.long.replace("-", "\\-") in text, spec.long
        if spec.short:
            assert f"\\fB\\-{spec.short}\\fR" in text, spec.short


@pytest.mark.parametrize("prog", COMMANDS)
def test_help_lists_every_documented_option(prog, capsys):
    mod = importlib.import_module(f"shim.cli.{prog}")
    assert mod.main(["--help"]) == 0
    out = capsys.readouterr().out
    for spec in mod.OPTIONS:
        if spec.help:
            assert f"--{spec.long}" in out


@pytest.mark.parametrize("prog", ["sshare", "sacctmgr", "sreport"])
def test_usage_is_help(prog, capsys):
    """--usage prints what --help prints, exit 0: Slurm 22.05 maps both to one case
    (src/sshare/sshare.c main: OPT_LONG_HELP and OPT_LONG_USAGE call _usage; src/sacctmgr/sacctmgr.c
    and src/sreport/sreport.c main: long_options "help" and "usage" are both 'h'). sprio's short
    --usage is tests/unit/test_sprio.py::test_help_usage_version."""
    mod = importlib.import_module(f"shim.cli.{prog}")
    assert mod.main(["--help"]) == 0
    helped = capsys.readouterr().out
    assert mod.main(["--usage"]) == 0
    assert capsys.readouterr().out == helped and helped.startswith(f"Usage: {prog} ")
