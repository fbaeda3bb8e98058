"""Why qmaster did not answer (issue 16; gridengine/diagnose.py): the line after Slurm's
"Socket timed out", from one qping of the cell's qmaster, asked once and only after a timeout."""

from __future__ import annotations

import os

import pytest

from shim.gridengine import backends, calls
from shim import config, proc
from shim.gridengine.process import GridEngineBackend
from shim.gridengine import diagnose
from shim.errors import BackendUnavailable


def test_the_line_for_a_qmaster_that_is_up_names_the_client_and_what_to_check():
    assert diagnose.explain(True, "h", 7444, "qstat", "/usr/lib/gridengine", "SGE 8.1.9", 5.0, "/etc/c.toml") == (
        "slurm-shim: the qmaster at h:7444 is up (qping answers), but qstat from /usr/lib/gridengine (SGE 8.1.9) "
        "got no answer in 5 s: a Grid Engine of another version than the client's, or a qmaster too busy to "
        "answer; check gridengine.bin_dir and gridengine.qmaster_port in /etc/c.toml")
    assert diagnose.explain(False, "h", 1, "qstat", "", "", 0.5, "c") == (
        "slurm-shim: no Grid Engine qmaster answers at h:1 (qping -info): is sge_qmaster running there? "
        "(gridengine.qmaster_port in c)")


@pytest.mark.parametrize("text, version", [("SGE 8.1.9\nusage: qstat ...", "SGE 8.1.9"),
                                           ("\nOCS 9.1.4\n", "OCS 9.1.4"), ("", ""), ("x" * 65, "")])
def test_the_clients_version_is_the_first_line_of_its_help(text, version):
    assert diagnose.client_version(text) == version


def test_the_master_host_is_act_qmasters_first_word_from_a_regular_file_only(tmp_path):
    common = tmp_path / "cell" / "common"
    common.mkdir(parents=True)
    assert diagnose.master_host(str(tmp_path), "cell") is None
    (common / "act_qmaster").write_text("qm.example.org\n")
    assert diagnose.master_host(str(tmp_path), "cell") == "qm.example.org"
    (common / "act_qmaster").unlink()
    os.symlink("/etc/hostname", common / "act_qmaster")  # never followed
    assert diagnose.master_host(str(tmp_path), "cell") is None
    (common / "act_qmaster").unlink()
    os.mkfifo(common / "act_qmaster")  # never opened for a read that would block
    assert diagnose.master_host(str(tmp_path), "cell") is None


def test_the_port_is_the_cells_then_the_service(monkeypatch):
    assert diagnose.qmaster_port({"SGE_QMASTER_PORT": "6444"}) == 6444
    import socket

    monkeypatch.setattr(socket, "getservbyname", lambda *a: 536)
    assert diagnose.qmaster_port({}) == 536


@pytest.fixture
def silent_cell(tmp_path, monkeypatch):
    """A cell whose qstat hangs and whose qping answers (a qmaster of another version)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "qstat").write_text('#!/bin/sh\n[ "$1" = -help ] && { echo "SGE 8.1.9"; exit 0; }\nexec sleep 30\n')
    (bin_dir / "qping").write_text('#!/bin/sh\necho "$@" >> "$(dirname "$0")/pinged"\necho "status:    0"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    (tmp_path / "default" / "common").mkdir(parents=True)
    (tmp_path / "default" / "common" / "act_qmaster").write_text("qm\n")
    cfg = config.parse(f'[gridengine]\nsge_root = "{tmp_path}"\nbin_dir = "{bin_dir}"\nqmaster_port = 7444\n'
                       'timeout = 0.3\n', "site.toml")
    monkeypatch.setattr(calls, "command", "squeue")
    monkeypatch.setattr(calls, "_why", None)
    monkeypatch.setenv("SLURM_SHIM_CONFIG", "/etc/site.toml")
    return GridEngineBackend(cfg), bin_dir


def test_a_timeout_is_followed_by_why_asked_once(silent_cell):
    b, bin_dir = silent_cell
    want = ["slurm_load_jobs error: Socket timed out on send/recv operation",
            f"slurm-shim: the qmaster at qm:7444 is up (qping answers), but qstat from {bin_dir} (SGE 8.1.9) got no "
            "answer in 0.3 s: a Grid Engine of another version than the client's, or a qmaster too busy to answer; "
            "check gridengine.bin_dir and gridengine.qmaster_port in /etc/site.toml"]
    for _ in range(2):  # the second call fails at once, with the same lines and no second qping
        with pytest.raises(BackendUnavailable) as e:
            b.run("qstat", ["-u", "*"])
        assert e.value.lines == want
    assert (bin_dir / "pinged").read_text() == "-info qm 7444 qmaster 1\n"
    assert backends.unreachable(e.value.__cause__, "squeue") == want  # (__main__'s rewording keeps it)


@pytest.mark.parametrize("qping", ["echo 'got select error: Connection refused' >&2\nexit 1", "exec sleep 30"])
def test_a_qping_that_gets_no_answer_says_no_qmaster_answers(silent_cell, qping):
    b, bin_dir = silent_cell
    (bin_dir / "qping").write_text(f"#!/bin/sh\n{qping}\n")
    with pytest.raises(BackendUnavailable) as e:
        b.run("qstat", [])
    assert e.value.lines[1] == ("slurm-shim: no Grid Engine qmaster answers at qm:7444 (qping -info): is "
                                "sge_qmaster running there? (gridengine.qmaster_port in /etc/site.toml)")


def test_without_qping_only_slurms_line_and_qacct_is_never_explained(silent_cell):
    b, bin_dir = silent_cell
    (bin_dir / "qping").unlink()
    with pytest.raises(BackendUnavailable) as e:
        b.run("qstat", [])
    assert e.value.lines == ["slurm_load_jobs error: Socket timed out on send/recv operation"]
    (bin_dir / "qacct").write_text("#!/bin/sh\nexec sleep 30\n")
    (bin_dir / "qacct").chmod(0o755)
    with pytest.raises(BackendUnavailable) as e:
        b.run("qacct", ["-j", "1"])
    assert e.value.lines == ["slurm_load_jobs error: Socket timed out on send/recv operation"]
    assert isinstance(e.value.__cause__, proc.Timeout)
