"""The whole capture of each release, accounted for (issue 30's first Done-when): every case of
fixtures/slurm-<release>/cases.json and every env-*.txt beside it has one disposition in
fixtures/release-cases.json:

- ``replayed``: the named test compares the shim's exit code, stdout and stderr with the
  capture's (here: ``test_the_shim_prints_the_captured_bytes``, through release_capture.replay,
  whose one normalisation is the job id Grid Engine gives a submission; and
  ``test_squeue_layouts_on_the_releases_own_values``: squeue's stdout from the values the release
  printed for the same queue);
- ``uncontrolled``: the bytes are not the shim's, for the reason given.

There is no third kind: a case the shim controls and gets wrong is a bug to fix, not an entry
(session 15 fixed the last ones: a whole array's cancel, 24.11's refused sizes).
docs/release-cases.md lists the uncontrolled cases per release from the same table."""

from __future__ import annotations

import ast
import json

import pytest

from conftest import FIXTURES, REPO
from release_capture import RELEASES, SGE, cases, env_files, hosts, replay

TABLE = json.loads((FIXTURES / "release-cases.json").read_text())["releases"]
KINDS = ("replayed", "uncontrolled")
HERE = "test_release_capture.py::test_the_shim_prints_the_captured_bytes"
DOC = REPO / "docs" / "release-cases.md"
# what some cases need beyond the empty queue every case sees (release_capture.replay's keywords):
# Grid Engine's answers about the capture's node (debug's slots in use as the capture's node state
# implies) and its one license (Licenses=matlab:3, the global host's complex_values); the node's
# memory as the site says it (RealMemory=8000); qsub -w e's refusal of a request no queue can hold
_GLOBAL = (SGE / "config-qconf-se-global.txt").read_text().replace("anthropic_api=96,matlab=3", "matlab=3")
_NO_QUEUE = "Unable to run job: error: no suitable queues.\nExiting.\n"
SETUP = {**{name: {"answers": hosts(1)} for name in ("sinfo_N", "sinfo_default", "sinfo_h", "sinfo_o", "sinfo_p_gpu",
                                                      "sinfo_s")},
         "sinfo_idle_default": {"answers": hosts(0)}, "sinfo_R": {"answers": hosts(0)},
         "scontrol_show_licenses": {"answers": {("qconf", "-se", "global"): _GLOBAL}},
         "sbatch_err_too_much_mem": {"site": ("[partitions.debug]\n", "[partitions.debug]\nnode_memory_mb = 8000\n")},
         **{name: {"refuse": _NO_QUEUE} for name in ("sbatch_err_too_many_gpus", "sbatch_err_gpus_no_gpu_partition",
                                                       "sbatch_err_too_many_licenses")}}


def rows(kind: str, test: str | None = None) -> list[tuple[str, str]]:
    return [(r, name) for r in RELEASES for name, (k, what) in TABLE[r].items()
            if k == kind and (test is None or what == test)]


def test_the_table_covers_every_case_of_every_release_and_nothing_else():
    assert tuple(TABLE) == RELEASES
    for r in RELEASES:
        assert sorted(TABLE[r]) == sorted([*cases(r), *env_files(r)]), r


def test_each_disposition_is_one_of_two_with_its_test_or_reason():
    for r in RELEASES:
        for name, (kind, what) in TABLE[r].items():
            assert kind in KINDS, (r, name)
            assert what.strip() and "\n" not in what, (r, name)


def _test_source(ref: str) -> str:
    """The named test's source, its decorators included (``file::function`` in tests/unit)."""
    file, _, func = ref.partition("::")
    src = (REPO / "tests" / "unit" / file).read_text()
    for node in ast.parse(src).body:
        if isinstance(node, ast.FunctionDef) and node.name == func:
            return "\n".join([*(ast.get_source_segment(src, d) for d in node.decorator_list),
                              ast.get_source_segment(src, node)])
    raise AssertionError(f"no test {ref}")


def test_each_test_named_exists_and_names_what_it_replays():
    """An existing test named for a case names that case; this module's layout test has its format."""
    assert {name for r in RELEASES for name, (k, what) in TABLE[r].items() if what == LAYOUT_TEST} <= set(LAYOUTS)
    for r in RELEASES:
        for name, (kind, what) in TABLE[r].items():
            if kind != "replayed" or what in (HERE, LAYOUT_TEST):
                continue
            src = _test_source(what)
            assert f'"{name}"' in src or f"'{name}'" in src, (r, name, what)


@pytest.mark.parametrize("release, name", rows("replayed", HERE))
def test_the_shim_prints_the_captured_bytes(release, name, tmp_path, monkeypatch, capsys):
    case = cases(release)[name]
    assert case["user"] == "root"  # (the replay runs as root)
    got = replay(release, name, tmp_path, monkeypatch, capsys, **SETUP.get(name, {}))
    assert got == (case["rc"], case["stdout"], case["stderr"])


# --- squeue's layouts on the release's own values -------------------------------------------------

LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
NO_SLUID = LETTERS.replace("s", "")  # 24.11's %all has no %s (22.05's is empty, 26.05's the SLUID)
LAYOUTS = {  # case -> (format, header, long form)
    "squeue_default": (None, True, False), "squeue_h": (None, False, False), "squeue_l": ("long", True, False),
    "squeue_o_default_explicit": ("%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R", True, False),
    "squeue_o_brief": ("%i %j %T %M %l %D %R", True, False),
    "squeue_o_array_fields": ("%i|%A|%a|%F|%K|%j|%t|%T|%r|%R", True, False),
    "squeue_o_misc_fields": ("%i|%u|%U|%g|%a|%P|%q|%Q|%p|%C|%c|%m|%b|%W|%L|%l|%M|%S|%V|%e|%E|%Z|%o|%D|%N|%n|%y|%h|%k",
                             True, False),
    "squeue_env_format": ("%i %T %r", True, False), "squeue_noheader_ids": ("%i", False, False),
    "squeue_O": ("jobid,name,state,timeused,timelimit,numnodes,reasonlist", True, True),
    "squeue_O_widths": ("JobID:8,Name:.12,State:.10,Reason:20", True, True),
    "squeue_env_format2": ("JobID:10,State:12", True, True),
}
LAYOUT_TEST = "test_release_capture.py::test_squeue_layouts_on_the_releases_own_values"


@pytest.mark.parametrize("release, name", rows("replayed", LAYOUT_TEST))
def test_squeue_layouts_on_the_releases_own_values(release, name):
    """squeue's format engine and its fields' letters, names, headers, widths and cuts, fed the values
    the release printed for the same queue (its ``squeue -o %all`` capture: the job facts are the
    controller's), print what the release printed with this case's format (squeue -l: below its
    date line)."""
    from shim.slurm.render import fmt
    from shim.slurm.render import squeue as view

    capture = cases(release)
    letters = NO_SLUID if release == "24.11" else LETTERS
    values = [dict(zip(letters, line.split("|"))) for line in capture["squeue_o_all"]["stdout"].splitlines()[1:]]
    assert len(values) > 20 and all(len(v) == len(letters) for v in values)
    long_names = {"jobid": "A", "jobarrayid": "i", "name": "j", "state": "T", "timeused": "M", "timelimit": "l",
                  "numnodes": "D", "reasonlist": "R", "reason": "r", "arrayjobid": "F", "arraytaskid": "K"}
    fields = [fmt.FieldSpec(f.letter, f.name, f.header, lambda row, ctx, c=(f.letter or long_names[f.name.lower()]): row[c],
                            cut=f.cut)
              for f in view.SQUEUE_FIELDS if f.letter or f.name.lower() in long_names]
    registry = fmt.Registry(fields)
    spec, header, long_form = LAYOUTS[name]
    want = capture[name]["stdout"]
    if spec == "long":
        spec, want = view.LONG_FORMAT, want.split("\n", 1)[1]
    spec = spec or view.DEFAULT_FORMAT
    parsed = fmt.parse_long(spec, registry) if long_form else fmt.parse_percent(spec, registry, all_letters=LETTERS)
    assert "".join(line + "\n" for line in fmt.render(parsed, values, header=header)) == want


PART = "; what the shim controls there: "


def render_doc() -> str:
    """docs/release-cases.md, from the table."""
    lines = ["# The captures the shim does not replay",
             "",
             "Issue 30: for each Slurm release, every captured command (fixtures/slurm-<release>/cases.json)",
             "and job environment (env-*.txt) replayed through the shim. The table is",
             "fixtures/release-cases.json; tests/unit/test_release_capture.py replays the cases it marks",
             "`replayed` here (or names the test that does) and checks that this page is generated",
             "from it (`python -m pytest tests/unit/test_release_capture.py` prints nothing new:",
             "regenerate with `render_doc()`). A case the shim controls and gets wrong is a bug to fix:",
             "none is left.",
             ""]
    for r in RELEASES:
        count = {k: sum(1 for v in TABLE[r].values() if v[0] == k) for k in KINDS}
        lines += [f"## Slurm {r}", "",
                  f"{len(TABLE[r])} captures: {count['replayed']} replayed,"
                  f" {count['uncontrolled']} not the shim's.", ""]
        for kind, title in (("uncontrolled", "Not controlled by the shim"),):
            lines += [f"### {title}", ""]
            by_reason: dict[str, list[str]] = {}
            for name, (k, what) in TABLE[r].items():
                if k == kind:  # a reason's tail names the test of what the shim controls in that case
                    why, _, checked = what.partition(PART)
                    by_reason.setdefault(why, []).append(f"`{name}`" + (f" ({checked})" if checked else ""))
            if not by_reason:
                lines += ["None.", ""]
            for why, names in by_reason.items():
                lines += [f"- {why}: " + ", ".join(names), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def test_the_doc_is_the_table():
    assert DOC.read_text() == render_doc()
