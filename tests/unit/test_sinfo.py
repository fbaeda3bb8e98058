"""sinfo on recorded Grid Engine output (qhost -q -xml of the local debug/gpu cluster), against
the layouts of the Slurm 22.05 reference (byte-exact headers and column widths)."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, SLURM_REF, use_site_config
from shim.gridengine import backends
from shim import siteconf
from shim.gridengine import qhost as Q
from shim.gridengine.replay import ReplayBackend
from shim.cli import sinfo as cli
from shim.errors import ShimError

SGE = FIXTURES / "gridengine" / "sge-8.1.9"
CASES = json.loads((SLURM_REF / "cases.json").read_text())
XML = (SGE / "qhost-q-xml-debug-gpu.xml").read_text()
XML_F = (SGE / "qhost-q-xml-F-gpu-debug-gpu.xml").read_text()
QCONF_SE = (SGE / "qhost-qconf-se-vm.txt").read_text()


def with_usage(xml: str, debug_used: int, gpu_used: int = 0, debug_state: str = "", gpu_state: str = "") -> str:
    import re

    def sub(q: str, used: int, st: str, text: str) -> str:
        text = re.sub(rf"(<queuevalue qname='{q}' name='slots_used'>)\d+(<)", rf"\g<1>{used}\2", text)
        return re.sub(rf"(<queuevalue qname='{q}' name='state_string'>)[^<]*(<)", rf"\g<1>{st}\2", text)

    return sub("gpu", gpu_used, gpu_state, sub("debug", debug_used, debug_state, xml))


@pytest.fixture
def site(monkeypatch, tmp_path):
    use_site_config(monkeypatch, tmp_path)
    monkeypatch.delenv("SINFO_FORMAT", raising=False)
    monkeypatch.delenv("SINFO_PARTITION", raising=False)
    siteconf.reset()
    yield
    siteconf.reset()
    backends.use(None)


def replay(xml: str = XML, used: int = 1, **kw) -> ReplayBackend:
    b = ReplayBackend()
    b.add("qhost", ["-q", "-xml"], with_usage(xml, used, **kw))
    b.add("qhost", ["-q", "-xml", "-F", "gpu"], with_usage(XML_F, used, **kw))
    b.add("qconf", ["-se", "vm"], QCONF_SE)
    backends.use(b)
    return b


def sinfo(argv, capsys):
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def argv_of(case):
    import shlex

    return shlex.split(CASES[case]["cmd"])[1:]


@pytest.mark.parametrize("case,used", [("sinfo_default", 1), ("sinfo_idle_default", 0), ("sinfo_h", 1),
                                       ("sinfo_p_gpu", 1), ("sinfo_o", 1), ("sinfo_s", 8), ("sinfo_N", 1),
                                       ("sinfo_R", 1)])
def test_layouts_match_reference(case, used, site, capsys):
    b = replay(used=used)
    rc, out, err = sinfo(argv_of(case), capsys)
    assert (rc, out, err) == (CASES[case]["rc"], CASES[case]["stdout"], "")
    assert [c[0] for c in b.calls] == [("qhost", "-q", "-xml")]  # one Grid Engine call


def test_long_layouts(site, capsys):
    replay(used=1)
    for case in ("sinfo_l", "sinfo_Nl"):
        rc, out, err = sinfo(argv_of(case), capsys)
        exp = CASES[case]["stdout"].splitlines()
        got = out.splitlines()
        assert len(got[0]) == len(exp[0])  # the date line
        assert got[1] == exp[1]  # header, byte for byte
        assert len(got) == len(exp)
    # -l partition rows are fully Grid Engine independent
    rc, out, _ = sinfo(["-l"], capsys)
    assert out.splitlines()[2:] == CASES["sinfo_l"]["stdout"].splitlines()[2:]
    rc, out, _ = sinfo(["-N", "-l"], capsys)
    row = out.splitlines()[2]
    ref = CASES["sinfo_Nl"]["stdout"].splitlines()[2]
    # same columns; S:C:T and MEMORY are this host's (1:2:1, 24064) where Slurm had its config (1:8:1, 8000)
    assert row[:41] == ref[:41] and row[-42:] == ref[-42:]


def test_long_format_fields(site, capsys):
    replay(used=7, gpu_used=0)
    rc, out, err = sinfo(argv_of("sinfo_O"), capsys)
    exp = CASES["sinfo_O"]
    assert err == exp["stderr"]  # "timelimit" is not a -O field
    assert out.splitlines()[0] == exp["stdout"].splitlines()[0]
    row = out.splitlines()[1]
    assert row.startswith("debug*              up                  1                   mixed               vm")
    assert "7/1/0/8             gpu:2               gpu:0" in row


def test_node_detail_format(site, capsys):
    replay(used=7)
    rc, out, err = sinfo(argv_of("sinfo_o_node_detail"), capsys)
    assert out.splitlines()[0] == CASES["sinfo_o_node_detail"]["stdout"].splitlines()[0]
    assert out.splitlines()[1].startswith("vm 8 24064 gpu:2 7/1/0/8 ")
    assert out.splitlines()[1].endswith(" mixed none")


def test_states_from_queue_instance_letters(site, capsys):
    replay(used=0, debug_state="d")
    rc, out, _ = sinfo(["-h", "-o", "%P %t %T %E"], capsys)
    assert out.splitlines() == ["debug* drain drained Disabled by admin", "gpu idle idle none"]
    replay(used=2, debug_state="d")
    rc, out, _ = sinfo(["-h", "-o", "%P %t"], capsys)
    assert out.splitlines() == ["debug* drng", "gpu mix"]
    replay(used=0, debug_state="u", gpu_state="u")
    rc, out, _ = sinfo(["-h", "-o", "%P %t %T"], capsys)
    assert out.splitlines() == ["debug* down* down*", "gpu down* down*"]
    replay(used=16)
    rc, out, _ = sinfo(["-h", "-o", "%P %t %C"], capsys)
    assert out.splitlines() == ["debug* alloc 8/0/0/8", "gpu alloc 8/0/0/8"]
    replay(used=0, debug_state="E")
    rc, out, _ = sinfo(["-R"], capsys)
    assert out.splitlines() == ["REASON               USER      TIMESTAMP           NODELIST",
                                "Queue instance in er Unknown   Unknown             vm"]


def test_state_filter(site, capsys):
    replay(used=0, debug_state="d")
    rc, out, _ = sinfo(["-h", "-t", "drain", "-o", "%P %t"], capsys)
    assert out.splitlines() == ["debug* drain"]
    rc, out, _ = sinfo(["-h", "-t", "idle", "-o", "%P %t"], capsys)
    assert out.splitlines() == ["debug* drain", "gpu idle"]
    with pytest.raises(ShimError) as e:
        sinfo(["-t", "bogus"], capsys)
    assert e.value.lines[0] == 'sinfo: error: Bad state string: "bogus"'


def test_snakemake_default_partition_probe(site, capsys):
    replay()
    rc, out, _ = sinfo(["-o", "%P"], capsys)
    assert out == "PARTITION\ndebug*\ngpu\n"


def test_bad_letter_is_reported_and_kept_going(site, capsys):
    replay()
    rc, out, err = sinfo(["-h", "-o", "%P %Q"], capsys)
    assert rc == 0 and err == "Invalid node format specification: Q\n"


def test_unknown_option(site):
    with pytest.raises(ShimError) as e:
        cli.main(["--bogus"])
    assert e.value.lines == ["sinfo: unrecognized option '--bogus'", 'Try "sinfo --help" for more information']


def test_json(site, capsys):
    replay(used=1)
    rc, out, _ = sinfo(["--json"], capsys)
    doc = json.loads(out)
    ref = json.loads(CASES["sinfo_json"]["stdout"])
    assert doc["meta"] == ref["meta"]
    [node] = doc["nodes"]
    assert set(ref["nodes"][0]) <= set(node)
    assert (node["name"], node["state"], node["partitions"], node["gres"], node["cpus"]) == (
        "vm", "mixed", ["debug", "gpu"], "gpu:2", 8)


def test_yaml(site, capsys):
    """--yaml: the --json document in Slurm's YAML, the dialect squeue's reference shows (it used to
    fail with an ImportError: render.sacct's old writer was gone)."""
    replay(used=1)
    rc, out, err = sinfo(["--yaml"], capsys)
    assert (rc, err) == (0, "")
    ref = CASES["squeue_yaml"]["stdout"]
    meta = ref[:ref.index("!!str errors:")]  # %YAML 1.1, --- !!map and the meta block: the same plugin
    assert out.startswith(meta) and out.endswith("\n...\n")
    assert "\n!!str nodes: !!seq\n- !!map\n  !!str architecture: !!str lx-amd64\n" in out
    assert "\n  !!str name: !!str vm\n" in out and "\n  !!str cpus: !!int 8\n" in out
    assert "\n  !!str partitions: !!seq\n  - !!str debug\n  - !!str gpu\n" in out


def test_qmaster_down(site):
    b = ReplayBackend()
    b.add("qhost", ["-q", "-xml"], "", rc=1, stderr="error: unable to contact qmaster")
    backends.use(b)
    with pytest.raises(ShimError) as e:
        cli.main([])
    assert e.value.lines[0].startswith("slurm_load_partitions: Unable to contact slurm controller")


# ---------------------------------------------------------------------------------------------
# parsers


def test_parse_qhost_xml_reference():
    hosts = Q.parse_qhost_xml((SGE / "qhost-q-j-xml.xml").read_text())
    [h] = hosts
    assert (h.name, h.ncpu, h.sockets, h.cores, h.threads, h.load) == ("vm", 2, 1, 2, 2, 0.34)
    assert h.mem_total_mb == 24064 and h.mem_used_mb == 353
    qi = h.queues["all.q"]
    assert (qi.slots_used, qi.slots_total, qi.state) == (4, 4, "")


def test_complex_values():
    assert Q.parse_complex_values(QCONF_SE)["gpu"] == "2"


def test_node_state_table():
    assert Q.node_state("", 0, 8)[0] == "idle"
    assert Q.node_state("", 3, 8)[0] == "mixed"
    assert Q.node_state("", 8, 8)[0] == "allocated"
    assert Q.node_state("d", 0, 8)[:2] == ("drained", "Disabled by admin")
    assert Q.node_state("d", 1, 8)[0] == "draining"
    assert Q.node_state("au", 0, 8) == ("down", "Not responding", False)
    assert Q.node_state("E", 0, 8)[0] == "drained"


@pytest.mark.parametrize("debug_state, gpu_state, used, node_state, sinfo_states", [
    ("", "", 0, "IDLE", {"debug": "idle", "gpu": "idle"}),
    ("d", "d", 0, "IDLE+DRAIN", {"debug": "drain", "gpu": "drain"}),     # qmod -d: Slurm's DRAIN, not DOWN
    ("d", "d", 1, "MIXED+DRAIN", {"debug": "drng", "gpu": "drng"}),      # jobs still running: draining
    ("d", "", 0, "IDLE", {"debug": "drain", "gpu": "idle"}),             # the host still takes gpu jobs
    ("E", "s", 0, "IDLE+DRAIN", {"debug": "drain", "gpu": "drain"}),
    ("au", "u", 0, "DOWN+NOT_RESPONDING", {"debug": "down*", "gpu": "down*"}),
])
def test_sinfo_and_scontrol_agree_on_a_queue_instances_state(debug_state, gpu_state, used, node_state, sinfo_states,
                                                            site, capsys):
    """One rule (gridengine.nodes.state over qhost.node_state) and one reader of qhost -q
    -xml: a disabled queue instance is DRAINED in sinfo and in scontrol show node alike (scontrol
    used to say DOWN), a partition stays UP while its nodes drain, DOWN when they are all down."""
    from shim.__main__ import dispatch

    replay(used=used, debug_state=debug_state, gpu_state=gpu_state)
    rc, out, err = sinfo(["-h", "-o", "%P %t"], capsys)
    assert (rc, err) == (0, "")
    assert dict(line.split() for line in out.splitlines()) == {("debug*" if p == "debug" else p): s
                                                                for p, s in sinfo_states.items()}
    assert dispatch("scontrol", ["show", "node", "vm"]) == 0
    out = capsys.readouterr().out
    assert f"   State={node_state} ThreadsPerCore=1 " in out
    assert ("   Reason=" in out) == (node_state != "IDLE")
    assert dispatch("scontrol", ["-o", "show", "partition"]) == 0
    out = capsys.readouterr().out
    assert [ln.split(" State=")[1].split()[0] for ln in out.splitlines()] == \
        ["DOWN" if node_state.startswith("DOWN") else "UP"] * 2
