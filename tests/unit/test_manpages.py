"""The committed man pages of sbatch are generated from the option table and must not drift."""

from pathlib import Path

from shim.slurm.options.spec import Fate
from shim.slurm.options.table import OPTIONS
from shim.slurm.render import manpage

MAN = Path(__file__).resolve().parents[2] / "man"


def test_sbatch_man_page_is_current():
    assert (MAN / "sbatch.1").read_text() == manpage.render("sbatch"), \
        "regenerate: PYTHONPATH=src python -m shim.slurm.render.manpage sbatch > man/sbatch.1"


def test_every_sbatch_option_and_its_fate_is_documented():
    text = (MAN / "sbatch.1").read_text()
    for s in OPTIONS:
        if "sbatch" in s.commands:
            assert f"\\-\\-{s.long.replace('-', chr(92) + '-')}" in text
    assert manpage.FATE_TEXT[Fate.REFUSE] in text and manpage.FATE_TEXT[Fate.WARN] in text


def test_every_page_says_how_to_log_the_grid_engine_commands():
    """Issue 18's diagnostics: SLURM_SHIM_DEBUG=1 is documented on every command's page."""
    pages = sorted(MAN.glob("*.1"))
    assert len(pages) >= 12
    for page in pages:
        assert manpage.DIAGNOSTICS in page.read_text(), page.name
