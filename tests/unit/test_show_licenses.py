"""scontrol show licenses counts what running jobs hold from their records' -L as written; a 26.05
either-license request (a:1|b:2) names no one license, so it is passed over, never a crash."""
from __future__ import annotations

from types import SimpleNamespace

from shim.operations import show


def test_in_use_counts_plain_requests_and_passes_over_either_license_ones():
    cfg = SimpleNamespace(licenses={"matlab": SimpleNamespace(complex="matlab"),
                                    "ansys": SimpleNamespace(complex="ansys")})
    records = [SimpleNamespace(state="RUNNING", licenses="matlab:2,ansys"),
               SimpleNamespace(state="RUNNING", licenses="matlab:1|ansys:2"),
               SimpleNamespace(state="PENDING", licenses="matlab:3"),
               SimpleNamespace(state="SUSPENDED", licenses="matlab")]
    answer = SimpleNamespace(returncode=0, stdout="complex_values        matlab=3,ansys=4\n")
    s = SimpleNamespace(cfg=cfg, job_list=lambda: SimpleNamespace(records=records),
                        backend=lambda: SimpleNamespace(exec_host=lambda host: answer))
    assert show.licenses(s, []) == [("matlab", 3, 3), ("ansys", 4, 1)]
    assert show.licenses(s, ["ansys"]) == [("ansys", 4, 1)]
