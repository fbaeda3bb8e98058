"""Slurm hostlist expressions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shim.slurm.hostlist import MAX_HOSTS, MAX_RANGE, MAX_RANGES, HostlistError, compress, count, expand


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


# --- limits (security review F-11): counted before anything is built, with Slurm's messages ------


def test_one_range_is_capped_at_slurms_max_range():
    assert count(f"n[0-{MAX_RANGE - 1}]") == MAX_RANGE
    with pytest.raises(HostlistError, match=r"^_parse_single_range: Too many hosts in range `0-65536'$"):
        expand("n[0-65536]")


def test_a_bracket_is_capped_at_slurms_max_ranges():
    with pytest.raises(HostlistError, match="^_parse_range_list: Too many ranges, can't process entire list$"):
        expand("n[" + ",".join(["1"] * (MAX_RANGES + 1)) + "]")


@pytest.mark.parametrize("expr", [
    "n[" + ",".join(["0-65535"] * 300) + "]",  # one bracket, many full ranges
    ",".join(["n[0-65535]"] * 300),  # many tokens
    "a[0-65535]b[0-65535]c[0-65535]",  # brackets multiply
    "n[" + "0" * 3000 + "-65535]",  # few names, but each 3000 characters long
])
def test_the_total_is_refused_before_it_is_built(expr):
    with pytest.raises(HostlistError, match="^Too many hosts in hostlist: "):
        expand(expr)
    with pytest.raises(HostlistError):
        count(expr)


def test_up_to_the_cap_is_fine():
    expr = ",".join(f"{p}[0-65535]" for p in "abcd")
    assert count(expr) == MAX_HOSTS == 4 * MAX_RANGE
    with pytest.raises(HostlistError, match="^Too many hosts"):
        count(expr + ",e")


@pytest.mark.parametrize("expr", ["n[" + "9" * 5000 + "]", "n[1-" + "9" * 30 + "]"])
def test_huge_numbers_are_invalid_not_a_crash(expr):
    with pytest.raises(HostlistError, match="^Invalid hostlist: "):
        expand(expr)


@pytest.mark.parametrize("host", ["1" * 60000 + "x", "x" + "1" * 60000, "1" * 60000])
def test_long_digit_runs_are_plain_names(host):
    assert expand(host) == [host]
    assert compress([host]) == host
    assert compress([host, host], sort=False) == f"{host},{host}"


def test_a_numeric_suffix_is_the_trailing_ascii_digits_only():
    assert compress(["n1\n", "n2"]) == "n1\n,n2"  # no regex '$' before a newline
    assert compress(["n\u0661", "n\u0662"]) == "n\u0661,n\u0662"  # no non-ASCII digits
    assert compress(["n9", "n10", "n08", "n11"]) == "n[08,9-11]"  # Slurm's width rules, as before


def test_hostfile_is_slurms_read_hostfile():
    from shim.slurm.hostlist import hostfile

    assert hostfile("# rack 1\nn[1-2],x*3\n\nvm\\#2\n", "/f") == (["n1", "n2", "x", "x", "x", "vm#2"], "")
    assert hostfile("a\n\n-b\n", "/f") == (None, "Invalid hostfile /f contents on line 3")
    assert hostfile("# nothing\n", "/f") == (None, "Hostlist is empty!")
    assert hostfile("", "/f") == (None, "Hostlist is empty!")
