"""Records stay compatible: sbatch, salloc and srun write the payloads, submit records and
private environment files they wrote before the typed request (fixtures/submit-records, captured
from the old code): the same keys with the same JSON values. Key order is not compared (no JSON
reader depends on it). What differs on purpose is listed in ADDED / CHANGED."""

from __future__ import annotations

import json
import re

import pytest

from conftest import use_site_config
from submit_golden import GOLDEN, SALLOC_CASES, SBATCH_CASES, SRUN_CASES, capture

WANT = json.loads(GOLDEN.read_text())
ADDED = {"version": 1,  # shim.slurm.request.VERSION: records (and the payloads they are made from) say their layout
         "ar": ""}  # the advance reservation submitted into ("" none: these cases have no --reservation)
JSON_FIELDS = ("payload", "record", "env_file", "req", "environ")


def _loaded(case: dict, command: str) -> dict:
    out = dict(case)
    for k in JSON_FIELDS:
        if isinstance(out.get(k), str):
            out[k] = json.loads(out[k])
    payload = out.get("payload")
    if isinstance(payload, dict) and isinstance(payload.get("script"), str):
        # salloc's holder: the bootstrap line names this installation's python and source
        # directory and the runtime's module layout (runtime/boot.py's business, tested there)
        payload["script"] = re.sub(r"(?m)^exec .*$", "exec <boot>", payload["script"])
    return out


def _without_added(obj: dict | None) -> dict | None:
    if not isinstance(obj, dict):
        return obj
    for k, v in ADDED.items():
        assert obj.get(k) == v, f"{k} missing or wrong"
    return {k: v for k, v in obj.items() if k not in ADDED}


@pytest.fixture(scope="module")
def got(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("golden")
    try:
        use_site_config(mp, tmp)
        return capture(tmp, mp)
    finally:
        mp.undo()
        from shim import siteconf

        siteconf.reset()


def _check(got_case: dict, want_case: dict, command: str) -> None:
    g, w = _loaded(got_case, command), _loaded(want_case, command)
    for k in ("payload", "record"):
        if k in g:
            g[k] = _without_added(g[k])
    if command == "srun":
        # the step request is the step launcher's input, not a record: new step options add to it
        g_req, w_req = g.pop("req"), w.pop("req")
        assert {k: g_req.get(k) for k in w_req} == w_req
    if command == "sbatch":
        # F-22 (issue 26): the script and its arguments moved from the payload (Grid Engine spools
        # it world-readable) to the job's private file; the payload carries that file's SHA-256
        assert re.fullmatch(r"[0-9a-f]{64}", g["payload"].pop("env_hash"))
        assert "script" not in g["payload"] and "args" not in g["payload"]
        w["env_file"].update(script=w["payload"].pop("script"), args=w["payload"].pop("args"))
        # issue 30: sbatch's command line as Slurm keeps it (SubmitLine; tests/unit/test_releases_submitline.py)
        for k in ("payload", "record"):
            assert g[k].pop("submit_line").startswith("sbatch")
    if command == "salloc" and w.get("record"):
        # salloc's record said export.vars {} (a dict); every record now lists names, as sbatch's did
        assert g["record"]["export"] == {"all": True, "vars": []}
        w["record"]["export"] = g["record"]["export"]
    assert g == w


@pytest.mark.parametrize("i", range(len(SBATCH_CASES)))
def test_sbatch_writes_what_it_wrote(got, i):
    _check(got["sbatch"][i], WANT["sbatch"][i], "sbatch")


@pytest.mark.parametrize("i", range(len(SALLOC_CASES)))
def test_salloc_writes_what_it_wrote(got, i):
    _check(got["salloc"][i], WANT["salloc"][i], "salloc")


@pytest.mark.parametrize("i", range(len(SRUN_CASES)))
def test_srun_writes_what_it_wrote(got, i):
    _check(got["srun"][i], WANT["srun"][i], "srun")


def test_a_record_reads_back_typed():
    from shim.slurm.request import SubmitRecord

    stored = json.loads(WANT["sbatch"][1]["record"])  # an old record: no version field
    rec = SubmitRecord.from_json(json.dumps(stored))
    assert rec.version == 1 and rec.ntasks == 4 and rec.cpus_per_task == 2 and rec.name == "named job"
    assert {k: v for k, v in rec.to_dict().items() if k != "version"} == {k: v for k, v in stored.items() if k != "t"}
    with pytest.raises(AttributeError):
        rec.ntasks = 5  # frozen
    assert rec.replace(ntasks=5).ntasks == 5 and rec.ntasks == 4


def test_a_stored_record_reads_typed_and_checked():
    """records.Submitted, what every reader of a stored record gets (records.Reader.submit): each
    field of SUBMIT_TYPES is the stored value when it passes its check, else MISSING; ``get`` and
    ``to_dict`` are the cleaned record key for key, keys that are no field included; a record that
    keeps nothing is false, as its empty dict was."""
    from shim.store import records
    from shim.slurm.request import MISSING

    stored = json.loads(WANT["sbatch"][1]["record"])  # (its times are "<time>": no time)
    rec = records.Submitted(stored)
    assert rec.ntasks == 4 and rec.cpus_per_task == 2 and rec.name == "named job" and rec.features is MISSING
    assert rec.t is MISSING and rec.stdout is MISSING and rec.get("stdout", "x") == "x"  # a null: not set
    kept = records.clean(stored, records.SUBMIT_TYPES)
    assert rec.to_dict() == kept and list(kept) == [k for k in stored if k in kept]  # (scontrol update writes it back)
    assert {k: getattr(rec, k) for k in records.SUBMITTED if getattr(rec, k) is not MISSING} == \
        {k: v for k, v in kept.items() if k in records.SUBMIT_TYPES}
    assert rec.get("export") == stored["export"] and rec.get("open_mode", "x") is None  # no field: as stored
    with pytest.raises(AttributeError):
        rec.ntasks = 5  # frozen
    with pytest.raises(AttributeError):
        rec.export  # noqa: B018  (no field: only by get, as stored)
    bad = records.Submitted({"ntasks": "4", "time": True, "mem_mb": float("nan"), "array": [1, -2], "name": None,
                             "uid": 2.0, "begin": "2026-12-01T00:00:00", "get": 1, "x": None})
    assert (bad.ntasks, bad.time, bad.mem_mb, bad.array, bad.name) == (MISSING,) * 5
    assert bad.uid == 2 and type(bad.uid) is int and bad.begin == records._begin("2026-12-01T00:00:00")
    assert bad.get("x", 7) is None and bad.get("get") == 1 and bad.get("ntasks", 0) == 0  # (get: still the method)
    assert bad.replace(ntasks=3, uid=MISSING).ntasks == 3 and "uid" not in bad.replace(uid=MISSING).to_dict()
    assert records.clean_submit(None) is None and not records.Submitted({}) and not records.NO_RECORD
    assert records.Submitted({"x": 1}) and records.Submitted({"name": 5}).name is MISSING
