"""The format engine against real Slurm 22.05 layouts.

The reference's ``squeue -o %all`` capture holds every field's value for every job; feeding those
values through the engine with other formats must reproduce, byte for byte, what real squeue
printed for the same queue with those formats (widths, justification, cutting, separators).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SLURM_REF
from shim.slurm.render import fmt
from shim.slurm.render import squeue as view

CASES = json.loads((SLURM_REF / "cases.json").read_text())
ALL = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
LONG_TO_LETTER = {"jobid": "A", "jobarrayid": "i", "name": "j", "state": "T", "timeused": "M", "timelimit": "l",
                  "numnodes": "D", "reasonlist": "R", "reason": "r", "arrayjobid": "F", "arraytaskid": "K"}


def reference_rows() -> list[dict[str, str]]:
    lines = CASES["squeue_o_all"]["stdout"].splitlines()
    return [dict(zip(ALL, line.split("|"))) for line in lines[1:]]


def value_registry() -> fmt.Registry:
    """squeue's real letters, names and headers, with getters that read the captured values."""
    fields = []
    for f in view.SQUEUE_FIELDS:
        letter = f.letter or LONG_TO_LETTER.get(f.name.lower())
        if letter is None:
            continue
        fields.append(fmt.FieldSpec(f.letter, f.name, f.header, lambda row, ctx, c=letter: row[c], cut=f.cut))
    return fmt.Registry(fields)


def render_percent(spec: str, header: bool = True) -> str:
    f = fmt.parse_percent(spec, value_registry(), all_letters=ALL)
    return "".join(line + "\n" for line in fmt.render(f, reference_rows(), header=header))


def render_long(spec: str) -> str:
    f = fmt.parse_long(spec, value_registry())
    return "".join(line + "\n" for line in fmt.render(f, reference_rows()))


@pytest.mark.parametrize("case, spec", [
    ("squeue_default", view.DEFAULT_FORMAT),
    ("squeue_o_default_explicit", "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"),
    ("squeue_o_brief", "%i %j %T %M %l %D %R"),
    ("squeue_o_array_fields", "%i|%A|%a|%F|%K|%j|%t|%T|%r|%R"),
    ("squeue_o_misc_fields", "%i|%u|%U|%g|%a|%P|%q|%Q|%p|%C|%c|%m|%b|%W|%L|%l|%M|%S|%V|%e|%E|%Z|%o|%D|%N|%n|%y|%h|%k"),
    ("squeue_o_all", "%all"),
    ("squeue_env_format", "%i %T %r"),
])
def test_percent_layout_is_byte_exact(case, spec):
    assert render_percent(spec) == CASES[case]["stdout"]


def test_long_format_layout_without_its_date_line():
    expected = CASES["squeue_l"]["stdout"].split("\n", 1)[1]
    assert render_percent(view.LONG_FORMAT) == expected


def test_noheader():
    assert render_percent(view.DEFAULT_FORMAT, header=False) == CASES["squeue_h"]["stdout"]
    assert render_percent("%i", header=False) == CASES["squeue_noheader_ids"]["stdout"]


@pytest.mark.parametrize("case, spec", [
    ("squeue_O", "jobid,name,state,timeused,timelimit,numnodes,reasonlist"),
    ("squeue_O_widths", "JobID:8,Name:.12,State:.10,Reason:20"),
    ("squeue_env_format2", "JobID:10,State:12"),
])
def test_long_field_layout_is_byte_exact(case, spec):
    assert render_long(spec) == CASES[case]["stdout"]


def test_cell_cuts_and_pads():
    assert fmt.cell("1173_[0,2,4,6,8,10]", 18, True) == "1173_[0,2,4,6,8,10"
    assert fmt.cell("1-00:00:00", 9, True, cut=False) == "1-00:00:00"  # squeue -l %.9l
    assert fmt.cell("1-00:00:00", 9, False, cut=False) == "1-00:00:0"
    assert fmt.cell("ab", 5, True) == "   ab"
    assert fmt.cell("ab", 5, False) == "ab   "
    assert fmt.cell("abcdefgh", 3, False) == "abc"
    assert fmt.cell("natural", 0, True) == "natural"


def test_percent_parser_keeps_prefix_and_suffixes():
    reg = fmt.Registry([fmt.FieldSpec("i", "JobID", "JOBID", lambda r, c: r["i"]),
                        fmt.FieldSpec("j", "Name", "NAME", lambda r, c: r["j"])])
    f = fmt.parse_percent('"%.5i","%-j"', reg, errors=(errs := []))
    assert f.prefix == '"'
    assert [(c.field.letter, c.width, c.right) for c in f.columns] == [("i", 5, True)]
    assert errs == ["-"]
    f = fmt.parse_percent('"%i","%j"', reg)
    assert fmt.render_header(f) == '"JOBID","NAME"'
    assert fmt.render_row(f, {"i": "7", "j": "x"}) == '"7","x"'
    with pytest.raises(fmt.FormatError):
        fmt.parse_percent("%i %Z", reg)


def test_long_parser_defaults_to_twenty_and_reads_suffix():
    reg = fmt.Registry([fmt.FieldSpec("i", "JobID", "JOBID", lambda r, c: "1")])
    f = fmt.parse_long("jobid,JOBID:.4|,JobId:", reg)
    assert [(c.width, c.right, c.suffix) for c in f.columns] == [(20, False, ""), (4, True, "|"), (0, False, "")]
    assert fmt.render_header(f) == "JOBID" + " " * 15 + "JOBI|JOBID"


def test_sort_keys_parse_and_order():
    reg = fmt.Registry([fmt.FieldSpec("i", "JobID", "JOBID", lambda r, c: str(r[0]), key=lambda r, c: r[0]),
                        fmt.FieldSpec("p", "Priority", "PRIORITY", lambda r, c: str(r[1]), key=lambda r, c: r[1])])
    rows = [(3, 1), (1, 2), (2, 2)]
    assert fmt.sort_rows(rows, fmt.parse_sort("-p,i", reg)) == [(1, 2), (2, 2), (3, 1)]
    assert fmt.sort_rows(rows, fmt.parse_sort("+jobid", reg)) == [(1, 2), (2, 2), (3, 1)]
    with pytest.raises(fmt.FormatError):
        fmt.parse_sort("x", reg)


def test_every_letter_has_a_field_and_slurm_headers():
    headers = CASES["squeue_o_all"]["stdout"].splitlines()[0].split("|")
    assert [view.REGISTRY.letter(c).header for c in ALL] == headers


# ---------------------------------------------------------------------------------------------
# the compiled line function: the same text as render_row's cell by cell reading


def _reference_row(f: fmt.Format, row, ctx=None) -> str:
    return f.prefix + "".join(fmt.cell(fmt.printable(c.field.get(row, ctx)), c.width, c.right, c.field.cut)
                              + c.suffix for c in f.columns)


_TEXT = st.text(alphabet=st.sampled_from("ab {}'\"\\%|é漢\n\t"), max_size=12)


@settings(max_examples=300, deadline=None)
@given(prefix=_TEXT, cols=st.lists(st.tuples(st.integers(0, 14), st.booleans(), st.booleans(), _TEXT, _TEXT,
                                             st.booleans()), max_size=6))
def test_compiled_line_equals_cell_by_cell(prefix, cols):
    ns = {}
    columns = []
    row = {}
    for i, (width, right, cut, suffix, value, inline) in enumerate(cols):
        row[i] = value
        get = fmt.getter(f"r[{i}]", ns) if inline else (lambda r, c, i=i: r[i])
        columns.append(fmt.Column(fmt.FieldSpec("x", f"F{i}", "H", get, cut=cut), width, right, suffix))
    f = fmt.Format(columns, prefix)
    line = fmt.compile_row(f)
    assert line(row, None) == _reference_row(f, row) == fmt.render_row(f, row)
    assert list(fmt.render(f, [row], header=False)) == [_reference_row(f, row)]
    assert fmt.render_lines(f, [row, row]) == [fmt.render_header(f), _reference_row(f, row), _reference_row(f, row)]


def test_getters_inline_only_from_one_namespace():
    a, b = {"K": "a"}, {"K": "b"}
    cols = [fmt.Column(fmt.FieldSpec("x", "X", "X", fmt.getter("K + r", ns)), 0) for ns in (a, b)]
    line = fmt.compile_row(fmt.Format(cols, ""))
    assert line("!", None) == "a!b!"  # the second getter is called, not inlined with the first one's names
    assert fmt.getter("K + r", a)("?", None) == "a?"


def test_squeue_getters_inline_to_the_same_text():
    """Every squeue field, in every width and justification, renders the same compiled as cell by cell."""
    from datetime import datetime

    from shim.slurm.model import JobRecord

    class Cfg(dict):
        __getattr__ = dict.__getitem__

    rec = JobRecord(job_id=7, array_pending="3-5%2", name="a name", user="alice", state="PENDING",
                    reason="Priority", partition="gpu", submit_time=datetime(2026, 11, 30, 9), num_nodes=2)
    run = JobRecord(job_id=8, array_task=4, name="r", user="bob", state="RUNNING", partition="debug",
                    nodes=["vm", "vm2"], start_time=datetime(2026, 11, 30, 9), extra={"start_ts": 1.0})
    ctx = view.Ctx(Cfg(cluster=Cfg(name="c"), partitions={}), now=100.0)
    letters = "ijuPtTrRDAMN"
    for spec in (" ".join(f"%{c}" for c in letters), "|".join(f"%.5{c}" for c in letters),
                 "|".join(f"%3{c}x" for c in letters)):
        f = fmt.parse_percent(spec, view.REGISTRY)
        for r in (rec, run):
            assert fmt.compile_row(f)(r, ctx) == _reference_row(f, r, ctx)


# ---------------------------------------------------------------------------------------------
# sacct's column policy on the same engine: `+` truncation, numbers in full, prefix names


def _sacct_cell(text: str, width: int, right: bool, overflow: str) -> str:
    """sacct's rule spelled out (Slurm's print_fields: a longer text ends in '+', numbers are never cut)."""
    if overflow == fmt.PLUS and len(text) > width:
        text = text[:width - 1] + "+" if width else ""
    return text.rjust(width) if right else text.ljust(width)


@settings(max_examples=300, deadline=None)
@given(cols=st.lists(st.tuples(st.integers(0, 14), st.booleans(), st.sampled_from([fmt.PLUS, fmt.FULL]), _TEXT,
                               _TEXT, st.booleans()), max_size=6))
def test_plus_and_full_overflow_compile_as_spelled_out(cols):
    ns = {}
    columns, row, expected = [], {}, ""
    for i, (width, right, overflow, suffix, value, inline) in enumerate(cols):
        row[i] = value
        get = fmt.getter(f"r[{i}]", ns) if inline else (lambda r, c, i=i: r[i])
        columns.append(fmt.Column(fmt.FieldSpec(None, f"F{i}", "H", get), width, right, suffix, overflow))
        expected += _sacct_cell(fmt.printable(value), width, right, overflow) + suffix
    f = fmt.Format(columns)
    assert fmt.compile_row(f)(row) == fmt.render_row(f, row) == expected


def test_sacct_cells():
    col = fmt.Column(fmt.FieldSpec(None, "JobName", "JobName", lambda r, c: r), 5, True, " ", fmt.PLUS)
    assert fmt.column_cell(col, "abcdefgh") == "abcd+" and fmt.column_cell(col, "ab") == "   ab"
    col.width = 0
    assert fmt.column_cell(col, "abc") == ""  # width 0 prints nothing of a text
    num = fmt.Column(fmt.FieldSpec(None, "NCPUS", "NCPUS", lambda r, c: r, cut=False), 3, False, " ", fmt.FULL)
    assert fmt.column_cell(num, "123456") == "123456" and fmt.column_cell(num, "12") == "12 "


def test_sacct_field_names_take_the_first_a_prefix_names():
    from shim.slurm.render import sacct

    assert sacct.field_names("jobn,JOBID%-5,maxvm%0,all%3")[:3] == [("JobName", None), ("JobID", -5), ("MaxVMSize", 0)]
    assert sacct.field_names("all%3") == [(name, 3) for name in sacct.FIELD_NAMES]
    assert [f.name for f in sacct.REGISTRY.fields] == sacct.FIELD_NAMES  # the registry's order is --helpformat's
    with pytest.raises(sacct.FieldError):
        sacct.field_names("nosuch")


# ---------------------------------------------------------------------------------------------
# one YAML writer (render/yaml.py) for squeue and sacct


def test_yaml_writer_is_slurms_for_the_captured_document():
    """Real squeue's --json document, written by render/yaml.py, has real squeue's --yaml layout:
    line for line the same keys, indents and sequence items (the two captures were made at
    different moments, so values and their tags may differ; libyaml's folding of a plain scalar
    longer than its line, one continuation line in the capture, is not reproduced)."""
    import yaml as pyyaml

    from shim.slurm.render.yaml import document

    doc = json.loads(CASES["squeue_json"]["stdout"])
    mine = document(doc).splitlines()
    real = [x for x in CASES["squeue_yaml"]["stdout"].rstrip("\n").splitlines() if "!!" in x or x in ("...", "%YAML 1.1")]
    assert mine[:2] == real[:2] == ["%YAML 1.1", "--- !!map"] and mine[-1] == real[-1] == "..."
    assert [x.partition(": ")[0] for x in mine] == [x.partition(": ")[0] for x in real]
    assert pyyaml.safe_load("\n".join(mine)) == json.loads(json.dumps(doc), object_hook=lambda d: {
        k: (None if v == "" else v) for k, v in d.items()})


def test_yaml_writer_nests_sequences_and_escapes_text():
    from shim.slurm.render.yaml import document

    text = document({"a": [[1, "x"], [], {}], "b": "line\nnext", "c": 1.5, "d": True, "e": ""})
    assert text.splitlines() == ["%YAML 1.1", "--- !!map", "!!str a: !!seq", "- !!seq", "  - !!int 1",
                                 "  - !!str x", "- !!seq []", "- !!map {}", "!!str b: !!str line\\x0anext",
                                 "!!str c: !!float 1.500000", "!!str d: !!bool true", "!!str e: !!null null", "..."]
