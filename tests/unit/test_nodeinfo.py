"""shim.operations.nodeinfo: sinfo's gathering and rows without the command (issue 14), and the partition and
node rules scontrol's show views share with it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from shim.operations import nodeinfo
from shim.gridengine.qhost import Host, QueueInstance
from shim.gridengine.replay import ReplayBackend
from shim.errors import ShimError
from shim.slurm.render import sinfo as view
from shim.siteconf import NS

SRC = Path(nodeinfo.__file__).parent


def host(name: str, used: int = 0, total: int = 4, **queues: str) -> Host:
    """A host with an instance of each queue named (its state letters the value)."""
    return Host(name=name, arch="lx-amd64", ncpu=total, sockets=1, cores=total, threads=total, load=0.5,
                mem_total_mb=1000, mem_used_mb=200,
                queues={q: QueueInstance(q, name, slots_used=used, slots_total=total, state=st)
                        for q, st in queues.items()})


def config(**parts: dict) -> NS:
    return NS.wrap({"cluster": {"name": "c"}, "gres": {}, "partitions": parts,
                    "default_partition": next(iter(parts))})


CFG = config(all={"queue": "all.q"}, short={"queue": "all.q", "nodes": ["n3", "n1", "gone"], "max_time": "30"},
             gpu={"queue": "gpu.q", "default_time": "10", "max_time": "1-00:00:00"})
HOSTS = [host("n1", 1, **{"all.q": "", "gpu.q": "d"}), host("n2", 0, **{"all.q": "u"}),
         host("n3", 4, **{"all.q": ""}), host("n4", 0)]


def test_partitions_from_the_site_config():
    assert [(p.name, p.default, p.max_time, p.default_time) for p in nodeinfo.partitions(CFG)] == [
        ("all", True, -1, None), ("short", False, 30, None), ("gpu", False, 1440, 10)]


def test_a_partitions_nodes_one_rule():
    """partition_hosts (sinfo's order) and on_partition/host_partitions (a host's view) agree."""
    names = {n: [h.name for h in nodeinfo.partition_hosts(p, HOSTS)] for n, p in CFG.partitions.items()}
    assert names == {"all": ["n1", "n2", "n3"], "short": ["n3", "n1"], "gpu": ["n1"]}
    for n, p in CFG.partitions.items():
        assert {h.name for h in HOSTS if nodeinfo.on_partition(p, h)} == set(names[n])
    assert {h.name: nodeinfo.host_partitions(CFG, h) for h in HOSTS} == {
        "n1": ["all", "short", "gpu"], "n2": ["all"], "n3": ["all", "short"], "n4": []}


def test_node_cpus():
    assert nodeinfo.node_cpus(HOSTS[0]) == (4, 2)  # 1 slot used in each of its two queue instances
    assert nodeinfo.node_cpus(host("x", 9, **{"a": "", "b": ""})) == (4, 4)  # never more than it offers
    assert nodeinfo.node_cpus(HOSTS[3]) == (4, 0)  # no queue: its processors


def test_node_views_in_each_partition():
    views = nodeinfo.node_views(CFG, nodeinfo.partitions(CFG), HOSTS)
    assert [(v.partition, v.name, v.state, v.responding, v.cpus, v.cpus_alloc) for v in views] == [
        ("all", "n1", "mixed", True, 4, 2), ("all", "n2", "down", False, 4, 0), ("all", "n3", "allocated", True, 4, 4),
        ("short", "n3", "allocated", True, 4, 4), ("short", "n1", "mixed", True, 4, 2),
        ("gpu", "n1", "draining", True, 4, 2)]
    assert views[0].free_mem_mb == 800 and views[0].gres == ""


def test_state_words():
    views = nodeinfo.node_views(CFG, nodeinfo.partitions(CFG), HOSTS)

    def kept(text):
        tests = nodeinfo.parse_states(text)
        return [(v.partition, v.name) for v in views if any(t(v) for t in tests)]

    assert kept("drng") == kept("draining") == [("gpu", "n1")]
    assert kept("MIX") == [("all", "n1"), ("short", "n1"), ("gpu", "n1")]  # draining with CPUs free is mixed too
    assert kept("no_respond") == kept("down") == [("all", "n2")]
    assert len(kept("all")) == len(views)
    with pytest.raises(ShimError) as e:
        nodeinfo.parse_states("idle,,bogus")
    assert e.value.lines == ['sinfo: error: Bad state string: "bogus"',
                             f"sinfo: error: valid states: {nodeinfo.VALID_STATES}"]


def _qhost_xml(hosts: list[Host]) -> str:
    out = ["<?xml version='1.0'?>", "<qhost xmlns:xsd='http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/"
           "resources/schemas/qhost/qhost.xsd'>"]
    for h in hosts:
        out.append(f"<host name='{h.name}'><hostvalue name='arch_string'>{h.arch}</hostvalue>"
                   f"<hostvalue name='num_proc'>{h.ncpu}</hostvalue>")
        for q in h.queues.values():
            out.append(f"<queue name='{q.queue}'><queuevalue qname='{q.queue}' name='qtype_string'>BIP</queuevalue>"
                       f"<queuevalue qname='{q.queue}' name='slots_used'>{q.slots_used}</queuevalue>"
                       f"<queuevalue qname='{q.queue}' name='slots'>{q.slots_total}</queuevalue>"
                       f"<queuevalue qname='{q.queue}' name='slots_resv'>0</queuevalue>"
                       f"<queuevalue qname='{q.queue}' name='state_string'>{q.state}</queuevalue></queue>")
        out.append("</host>")
    return "\n".join(out + ["</qhost>"])


def test_gather_filters_after_one_query():
    b = ReplayBackend()
    b.add("qhost", ["-q", "-xml"], _qhost_xml(HOSTS))
    parts, views = nodeinfo.gather(CFG, b, partition_names=["all", "gpu"], nodes="n[1-2]", responding=True)
    assert [p.name for p in parts] == ["all", "gpu"]
    assert [(v.partition, v.name) for v in views] == [("all", "n1"), ("gpu", "n1")]
    assert [c[0] for c in b.calls] == [("qhost", "-q", "-xml")]
    parts, views = nodeinfo.gather(CFG, b, partition_names=[], dead=True)  # `-p ,`: no partition
    assert (parts, views) == ([], [])
    _, views = nodeinfo.gather(CFG, b, states=nodeinfo.parse_states("alloc"))
    assert [(v.partition, v.name) for v in views] == [("all", "n3"), ("short", "n3")]


def test_rows():
    parts = nodeinfo.partitions(CFG)
    views = nodeinfo.node_views(CFG, parts, HOSTS)

    def shape(rows):
        return [(r.part.name, [n.name for n in r.nodes]) for r in rows]

    assert shape(nodeinfo.build_rows(parts, views)) == [
        ("all", ["n1"]), ("all", ["n2"]), ("all", ["n3"]), ("short", ["n1"]), ("short", ["n3"]), ("gpu", ["n1"])]
    assert shape(nodeinfo.build_rows(parts, views, per_node=True)) == [
        ("all", ["n1"]), ("short", ["n1"]), ("gpu", ["n1"]), ("all", ["n2"]), ("all", ["n3"]), ("short", ["n3"])]
    assert shape(nodeinfo.build_rows(parts, views, reasons=True)) == [("all", ["n2"]), ("gpu", ["n1"])]
    assert shape(nodeinfo.build_rows(parts, views, summarize=True)) == [
        ("all", ["n1", "n2", "n3"]), ("short", ["n3", "n1"]), ("gpu", ["n1"])]
    only_n2 = [v for v in views if v.name == "n2"]
    assert shape(nodeinfo.build_rows(parts, only_n2, show_empty=False)) == [("all", ["n2"])]
    assert shape(nodeinfo.build_rows(parts, only_n2)) == [("all", ["n2"]), ("short", []), ("gpu", [])]
    assert list(nodeinfo.by_host(views)) == ["n1", "n2", "n3"]
    assert all(isinstance(r, view.SinfoRow) for r in nodeinfo.build_rows(parts, views))


def test_nodeinfo_is_no_command():
    """It imports nothing of the commands' package, prints nothing and stays light."""
    tree = ast.parse((SRC / "nodeinfo.py").read_text())
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mods.add("." * node.level + (node.module or ""))
            mods |= {a.name for a in node.names if node.module is None}
        elif isinstance(node, ast.Import):
            mods |= {a.name for a in node.names}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id != "print"
    assert not [m for m in mods if "cli" in m.lstrip(".").split(".")]
    assert not {"pydantic", "click", "tabulate", "subprocess", "sys"} & {m.split(".")[0] for m in mods}


def test_importing_nodeinfo_is_light():
    """show.py (on every scontrol's start) may import it for the partition and node rules: no
    dataclasses or typing until views are made."""
    import subprocess
    import sys

    code = ("import sys; sys.path.insert(0, sys.argv[1]); import shim.operations.nodeinfo; "
            "print(sorted(m for m in ('dataclasses', 'typing', 'inspect') if m in sys.modules))")
    cp = subprocess.run([sys.executable, "-I", "-c", code, str(SRC.parents[1])], capture_output=True, text=True,
                        timeout=60)
    assert (cp.returncode, cp.stdout) == (0, "[]\n"), cp.stderr


def test_scontrol_shows_the_partitions_and_nodes_sinfo_shows(monkeypatch):
    """scontrol show partition/node and sinfo count one set of nodes a partition (issue 14: the
    twins disagreed where a partition lists its nodes: scontrol named "gone", which Grid Engine has
    not, and gave n2, not listed, partition short's CPUs)."""
    from shim.operations import show

    monkeypatch.setattr(show, "_hosts", lambda s, prefix: list(HOSTS))
    s = NS.wrap({"cfg": CFG})
    parts = {part.name: (members, cpus) for part, members, cpus, _down in show.partitions(s, [])}
    views = nodeinfo.node_views(CFG, nodeinfo.partitions(CFG), HOSTS)
    assert parts == {name: ([v.name for v in views if v.partition == name],
                            sum(HOSTS[int(v.name[1]) - 1].queues[CFG.partitions[name].queue].slots_total
                                for v in views if v.partition == name)) for name in CFG.partitions}
    assert parts["short"] == (["n3", "n1"], 8)
    shown = {h.name: parts_of for h, _st, _cpus, _used, parts_of in show.nodes_shown(s, [])}
    assert shown == {h.name: sorted({v.partition for v in views if v.name == h.name}, key=list(CFG.partitions).index)
                     for h in HOSTS}


def test_scontrol_partition_times_are_sinfos():
    """DefaultTime/MaxTime from nodeinfo.partitions' minutes, as print_part prints them: a default
    time of UNLIMITED is UNLIMITED (it printed NONE, sinfo's "infinite"), one not set is NONE."""
    from shim.slurm.render.scontrol import partition_text

    cfg = config(a={"queue": "all.q", "default_time": "UNLIMITED"}, b={"queue": "all.q", "max_time": "90"})
    a, b = nodeinfo.partitions(cfg)
    assert "DefaultTime=UNLIMITED " in partition_text(a, [], 0, False)
    assert "MaxTime=UNLIMITED " in partition_text(a, [], 0, False)
    text = partition_text(b, ["n1"], 4, False)
    assert "DefaultTime=NONE " in text and "MaxTime=01:30:00 " in text and "Default=NO " in text
    assert text.startswith("PartitionName=b\n") and "Default=YES " in partition_text(a, [], 0, False)
