"""sprio on recorded Grid Engine priorities (fixtures/gridengine/sge-8.1.9/priority-*: four pending
jobs, one with -p -100, one of root with -p 500, one with -pe smp 2 and anthropic_api=1).

Layouts, headers and number forms follow Slurm 22.05's src/sprio/sprio.c (main: the default
formats, columns only for factors with a weight), src/sprio/print.c (_print_str, _print_int,
_print_norm, the -w row, "Unable to find jobs matching user/id(s) specified"), src/sprio/opts.c
(parse_format, the -o/-l conflict, invalid users and job ids) and src/sprio/sort.c."""

from pathlib import Path

import pytest

from policy_replay import replaying, run_command
from shim.gridengine import ops, policy
from shim.slurm.render import sprio as view

SGE = Path(__file__).resolve().parents[2] / "fixtures" / "gridengine" / "sge-8.1.9"
XML = (SGE / "priority-qstat-pri-ext-urg-r-xml.xml").read_text()
SCONF = (SGE / "priority-qconf-ssconf.txt").read_text()


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    with replaying(monkeypatch, tmp_path, [(ops.priorities(), XML), (ops.scheduler_config(), SCONF)]) as b:
        yield b


def run(capsys, *argv):
    return run_command(capsys, "sprio", *argv)


def test_recorded_priorities_are_read():
    jobs = {j.job: j for j in policy.parse_priorities(XML)}
    assert set(jobs) == {7441, 7442, 7443, 7444}
    big = jobs[7443]
    assert (big.prio, big.ntix, big.nurg, big.rrcontr, big.owner) == (0.75, 0.5, 1.0, 2000.0, "alice")
    assert jobs[7442].ppri == -100 and jobs[7444].ppri == 500 and jobs[7444].nppri == pytest.approx(0.74414)
    w = policy.parse_scheduler_config(SCONF)
    assert (w["weight_ticket"], w["weight_urgency"], w["weight_priority"]) == ("0.500000", "0.500000", "0.000000")
    from shim.operations import policies  # one reader of a weight for the -w row and the factors: junk is 0

    assert policies.weights({"weight_ticket": "x", "weight_urgency": "0.5"}) == \
        policies.weights({"weight_urgency": "0.5"})
    assert policies.priority_rows(None, [], {"weight_ticket": "x"}) == []


def test_default_layout_shows_weighted_factors_with_a_weight(capsys, recorded):
    rc, out, err = run(capsys)
    assert rc == 0 and err == ""
    lines = out.splitlines()
    # weight_priority is 0 on this cell: no QOS column; no ASSOC, PARTITION or TRES factor at all
    assert lines[0] == "          JOBID PARTITION   PRIORITY       SITE        AGE  FAIRSHARE    JOBSIZE"
    assert [ln.split()[0] for ln in lines[1:]] == ["7441", "7442", "7443", "7444"]  # job id order
    big = lines[3].split()
    # 0.75 of 2^32-1; fairshare 0.5*0.5; the urgency 0.5*1.0 split 2000:3 between resources and waiting
    assert big[2] == str(round(0.75 * 0xFFFFFFFF)) and big[5] == str(round(0.25 * 0xFFFFFFFF))
    assert int(big[4]) + int(big[6]) == pytest.approx(0.5 * 0xFFFFFFFF, abs=2)
    assert int(big[6]) == round(0.5 * 0xFFFFFFFF * 2000 / 2003)


def test_long_normalized_weights_and_sort(capsys, recorded):
    rc, out, _ = run(capsys, "-l")
    head = out.splitlines()[0].split()
    assert head == ["JOBID", "PARTITION", "USER", "PRIORITY", "SITE", "AGE", "ASSOC", "FAIRSHARE", "JOBSIZE",
                    "PARTITION", "QOS", "NICE", "TRES"]
    nice = {ln.split()[0]: ln.split()[11] for ln in out.splitlines()[1:]}
    assert nice == {"7441": "0", "7442": "100", "7443": "0", "7444": "-500"}  # Slurm's nice is -(-p)
    rc, out, _ = run(capsys, "-n", "-j", "7443")
    # %10y is "%16.14f" cut to 10; %10a/%10f/%10j are factor/weight as "%.7lf" (wtcontr 3 of 2003)
    assert out.splitlines()[1].split()[2:] == ["0.74999999", "0.0014978", "0.5000000", "0.9985022"]
    rc, out, _ = run(capsys, "-w")
    assert out.splitlines()[1].split() == ["Weights", "1", "2147483648", "2147483648", "2147483648"]
    rc, out, _ = run(capsys, "-S", "-Y", "-h", "-o", "%i")
    assert out.split()[0] == "7443"


def test_filters_and_slurms_messages(capsys, recorded):
    rc, out, err = run(capsys, "-u", "alice,nosuchuser", "-h", "-o", "%i|%u")
    assert (rc, out, err) == (0, "7443|alice\n", "sprio: error: Invalid user: nosuchuser\n")
    assert run(capsys, "-j", "99") == (0, "Unable to find jobs matching user/id(s) specified\n", "")
    assert run(capsys, "-j", "7441,7444", "-h", "-o", "%i")[1] == "7441\n7444\n"
    assert run(capsys, "-j", "-h", "-o", "%i", "7442")[1] == "7442\n"  # -j without a value takes the word after
    rc, out, err = run(capsys, "-l", "-o", "%i")
    assert rc == 1 and "mutually exclusive" in err
    rc, out, err = run(capsys, "-j", "x1")
    assert (rc, err) == (1, "sprio: error: Invalid job id: x1\n")
    # slurm_xlate_job_id (jobids.xlate_job_id): N_k is its job, N+h is job N + h, N.0 and N_k+h are 0
    assert run(capsys, "-j", "7443_2,7440+1", "-h", "-o", "%i")[1] == "7441\n7443\n"
    for bad in ("7441.0", "7441x", "7441_1+1", "0"):
        assert run(capsys, "-j", bad) == (1, "", f"sprio: error: Invalid job id: {bad}\n"), bad
    rc, out, err = run(capsys, "-o", "%i %Z")
    assert rc == 0 and err == "sprio: error: Invalid job format specification: Z\n"
    rc, out, err = run(capsys, "--bogus")
    assert rc == 1 and err == "sprio: unrecognized option '--bogus'\nTry \"sprio --help\" for more information\n"
    rc, out, err = run(capsys, "stray")
    assert rc == 1 and "Unrecognized option: stray" in err and out.startswith("Usage: sprio")


def test_help_usage_version(capsys):
    rc, out, _ = run(capsys, "--help")
    assert rc == 0 and "--weights" in out and "--norm" in out
    assert run(capsys, "--usage")[1].startswith("Usage: sprio [-j jid[s]]")
    assert run(capsys, "-V")[1].startswith("slurm 22.05")


def test_print_str_cuts_and_pads():
    assert view.pad("abcdef", 3, True) == "abc" and view.pad("ab", 4, True) == "  ab"
    assert view.pad("abcdef", 3, False) == "abc" and view.pad("ab", 4, False) == "ab  "
    fields = view.parse_format("x%.5i|%-3u%Q", [])
    assert fields[0].letter is None and fields[0].suffix == "x"
    assert [(f.letter, f.width, f.right, f.suffix) for f in fields[1:]] == [("i", 5, True, "|"), ("Q", 0, False, "")]


@pytest.mark.parametrize("prog", ["sprio", "sshare", "sacctmgr", "sreport"])
def test_policy_commands_share_one_preamble(capsys, recorded, prog):
    """cli/common's own_options/command_line/print_version serve all four: --version is Slurm's
    'slurm 22.05.x', an option of another command is getopt's error, exit 1."""
    from shim import SLURM_VERSION
    from shim.cli import common

    assert run_command(capsys, prog, "--version") == (0, f"slurm {SLURM_VERSION}\n", "")
    rc, out, err = run_command(capsys, prog, "--no-such-option")
    assert (rc, out) == (1, "") and err.startswith(f"{prog}: unrecognized option '--no-such-option'\n")
    row = common.own_options(prog)("long", "l", help="x")
    assert (row.long, row.short, row.commands, row.arity.name) == ("long", "l", frozenset({prog}), "REQUIRED")
