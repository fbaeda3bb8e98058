"""render.help.options_help: the one builder of a --help listing from an option table (squeue,
sacct, sprio, sshare, sreport, sacctmgr, sbatch, srun and salloc; scancel and sinfo)."""

from __future__ import annotations

import pytest

from shim.slurm.options.spec import Arity, Fate, OptionSpec
from shim.slurm.render.help import options_help


def _rows():
    return (OptionSpec("all", "a", Arity.NONE, help="every user"),
            OptionSpec("accounts", None, help=""),  # an alias: never listed
            OptionSpec("format", "o", help="the layout"),
            OptionSpec("jobs", None, Arity.OPTIONAL, help="these jobs", fate=Fate.WARN))


def test_the_listing_lines():
    text = options_help(_rows(), "Usage: x [OPTIONS]", width=20, intro=("", "What x does.", ""),
                        tail=("", "More."))
    assert text == ("Usage: x [OPTIONS]\n\nWhat x does.\n\n"
                    "  -a, --all         every user\n"
                    "  -o, --format=valuethe layout\n"
                    "      --jobs[=value]these jobs\n"
                    "\nMore.\n")


def test_skip_and_describe():
    text = options_help(_rows(), "Usage: x", width=24, skip=lambda s: s.long == "all",
                        describe=lambda s: s.help.upper())
    assert text == "Usage: x\n  -o, --format=value    THE LAYOUT\n      --jobs[=value]    THESE JOBS\n"


@pytest.mark.parametrize("module, width", [("squeue", 36), ("sacct", 30), ("sprio", 32), ("sshare", 32),
                                           ("sreport", 32), ("sacctmgr", 32)])
def test_each_command_lists_every_documented_row_once(module, width):
    import importlib

    cli = importlib.import_module(f"shim.cli.{module}")
    text = cli.help_text() if hasattr(cli, "help_text") else cli.usage_text()
    lines = text.splitlines()
    rows = cli.release_table().specs if hasattr(cli, "release_table") else cli.OPTIONS  # (the site's release)
    for s in rows:
        if not s.help:
            continue
        flag = (f"  -{s.short}, " if s.short else "      ") + f"--{s.long}"
        hits = [x for x in lines if x.startswith(flag) and x.endswith(s.help)]
        assert len(hits) == 1, (module, s.long)
        assert hits[0].index(s.help) == max(width, len(hits[0]) - len(s.help)), (module, s.long)
