"""The job wrapper's reading of Grid Engine's RSMAP grant (``SGE_HGR_<complex>``, set by OCS's
execd: exec_job.cc joins the granted ids with spaces; a hard request of a plain consumable gets its
amount, e.g. ``1.000000``)."""

from __future__ import annotations

import pytest

from shim.runtime.jobwrap import granted_gpus


@pytest.mark.parametrize("environ, count, want", [
    ({"SGE_HGR_gpu": "2 3"}, 2, [2, 3]),
    ({"SGE_HGR_gpu": "1"}, 1, [1]),
    ({}, 1, None),                                    # SGE 8.1.9: no grant, the shim's claims decide
    ({"SGE_HGR_gpu": "1.000000"}, 1, None),           # an INT consumable's hard request: an amount, not ids
    ({"SGE_HGR_gpu": "gpu0 gpu1"}, 2, None),          # a map of names, not device indices
    ({"SGE_HGR_gpu": "0"}, 2, None),                  # not the count the job asked for on this host
    ({"SGE_HGR_gpu": "1 1"}, 2, None),
    ({"SGE_HGR_other": "0"}, 1, None),                # another complex's grant
    ({"SGE_HGR_gpu": "0"}, 0, None),
])
def test_granted_ids(environ, count, want):
    assert granted_gpus(environ, count, "gpu") == want


def test_the_complex_is_the_sites(monkeypatch, tmp_path):
    from conftest import use_site_config

    use_site_config(monkeypatch, tmp_path)  # [gres.gpu] complex = "gpu" in the unit-test config
    assert granted_gpus({"SGE_HGR_gpu": "3"}, 1) == [3]
    assert granted_gpus({"SGE_HGR_gpumap": "3"}, 1) is None
