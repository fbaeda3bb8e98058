"""Slurm hostlist expressions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shim.hostlist import compress, count, expand


@pytest.mark.parametrize(
    "expr, hosts",
    [
        ("vm[1-3,5],other", ["vm1", "vm2", "vm3", "vm5", "other"]),
        ("vm", ["vm"]),
        ("n[01-03]", ["n01", "n02", "n03"]),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("a1,a2 b3\tc4", ["a1", "a2", "b3", "c4"]),
        ("rack[1-2]n[1-2]", ["rack1n1", "rack1n2", "rack2n1", "rack2n2"]),
        ("n[1-2]-ib", ["n1-ib", "n2-ib"]),
        ("[1-3]", ["1", "2", "3"]),
        ("n[3,1,1]", ["n3", "n1", "n1"]),
        ("", []),
        (",,", []),
    ],
)
def test_expand(expr, hosts):
    assert expand(expr) == hosts
    assert count(expr) == len(hosts)


@pytest.mark.parametrize("expr", ["n[3-1]", "n[a-b]", "n[1-", "n1-2]", "n[]", "n[1-2-3]", "n[1,,2]", "n[-1]"])
def test_expand_errors(expr):
    with pytest.raises(ValueError):
        expand(expr)


@pytest.mark.parametrize(
    "hosts, expr",
    [
        (["vm1", "vm2", "vm3"], "vm[1-3]"),
        (["vm1"], "vm1"),
        (["vm"], "vm"),
        (["n01", "n02", "n03", "n07"], "n[01-03,07]"),
        (["n9", "n10", "n11"], "n[9-11]"),
        (["n09", "n10"], "n[09-10]"),
        (["n1", "n3"], "n[1,3]"),
        (["vm3", "vm1", "vm2"], "vm[1-3]"),
        (["b2", "a1", "b1", "b1"], "b[1-2],a1"),
        (["vm1", "other", "vm2"], "vm[1-2],other"),
        (["n1", "n01", "n2"], "n[1,01,2]"),
        (["x", "x"], "x"),
        ([], ""),
    ],
)
def test_compress(hosts, expr):
    assert compress(hosts) == expr


@pytest.mark.parametrize(
    "hosts, expr",
    [
        (["vm3", "vm1", "vm2"], "vm[3,1-2]"),
        (["b2", "a1", "b1"], "b2,a1,b1"),
        (["vm1", "vm2", "other", "vm3"], "vm[1-2],other,vm3"),
        (["n1", "n1"], "n[1,1]"),
    ],
)
def test_compress_in_input_order(hosts, expr):
    assert compress(hosts, sort=False) == expr


HOST = st.builds(
    lambda prefix, num, pad: f"{prefix}{num:0{pad}d}" if num is not None else prefix or "h",
    st.sampled_from(["", "n", "vm", "node-", "r1n", "a.b"]),
    st.one_of(st.none(), st.integers(0, 1200)),
    st.integers(0, 4),
)


def _canonical(hosts: list[str]) -> list[str]:
    """What compress keeps: prefixes in order of appearance, numbers sorted, no duplicates."""
    import re

    groups: dict[tuple[bool, str], set] = {}
    for h in hosts:
        m = re.match(r"^(.*?)(\d+)$", h)
        key = (False, m.group(1)) if m else (True, h)
        groups.setdefault(key, set()).add((int(m.group(2)), len(m.group(2))) if m else None)
    out = []
    for (single, prefix), nums in groups.items():
        out.extend([prefix] if single else [f"{prefix}{n:0{w}d}" for n, w in sorted(nums)])
    return out


@given(st.lists(HOST, max_size=30))
def test_round_trip_in_input_order(hosts):
    assert expand(compress(hosts, sort=False)) == hosts


@given(st.lists(HOST, max_size=30))
def test_round_trip_sorted(hosts):
    assert expand(compress(hosts)) == _canonical(hosts)


@given(st.lists(HOST, max_size=30))
def test_compress_is_stable(hosts):
    once = compress(hosts)
    assert compress(expand(once)) == once
