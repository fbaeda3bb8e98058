"""The committed man pages of sbatch are generated from the option table and must not drift."""

from pathlib import Path

from shim.options.spec import Fate
from shim.options.table import OPTIONS
from shim.render import manpage

MAN = Path(__file__).resolve().parents[2] / "man"


def test_sbatch_man_page_is_current():
    assert (MAN / "sbatch.1").read_text() == manpage.render("sbatch"), \
        "regenerate: PYTHONPATH=src python -m shim.render.manpage sbatch > man/sbatch.1"


def test_every_sbatch_option_and_its_fate_is_documented():
    text = (MAN / "sbatch.1").read_text()
    for s in OPTIONS:
        if "sbatch" in s.commands:
            assert f"\\-\\-{s.long.replace('-', chr(92) + '-')}" in text
    assert manpage.FATE_TEXT[Fate.REFUSE] in text and manpage.FATE_TEXT[Fate.WARN] in text
