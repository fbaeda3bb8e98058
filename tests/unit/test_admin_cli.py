"""`slurm-shim` as one click group (issue 28): every word, --help and completion are click's; the
options reach admin/'s functions (commands.run_cluster, commands.run_doctor, install.run) as the
argparse parsers' did. And the site's Slurm release (issue 30): `cluster up --slurm-release` and
`install --slurm-release` write it into the site config, doctor names it. No cluster: the admin
functions are replaced by recorders, or run on recorded Grid Engine answers."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from shim import config
from shim.admin import cluster, cluster_ocs, commands, install
from shim.cli import admin
from shim.slurm import releases


def _tree(group: click.Group, path: tuple[str, ...] = ()):
    """Every command of the group, nested groups included, as its words."""
    for name, cmd in group.commands.items():
        yield (*path, name)
        if isinstance(cmd, click.Group):
            yield from _tree(cmd, (*path, name))


@pytest.fixture
def recorded(monkeypatch):
    """The calls cli/admin.py makes into admin/, each (function, arguments)."""
    calls: list[tuple] = []
    monkeypatch.setattr(commands, "run_cluster", lambda *a, **k: calls.append(("cluster", a, k)) or 0)
    monkeypatch.setattr(commands, "run_doctor", lambda **k: calls.append(("doctor", k)) or 0)
    monkeypatch.setattr(install, "run", lambda req: calls.append(("install", req)) or 0)
    return calls


def invoke(*words: str):
    return CliRunner().invoke(admin.cli, list(words), prog_name="slurm-shim", standalone_mode=False)


def test_every_command_has_clicks_help():
    words = list(_tree(admin.cli))
    assert words == [("cluster",), ("cluster", "up"), ("cluster", "down"), ("cluster", "status"), ("install",),
                     ("doctor",), ("explain",), ("completion",), ("help",)]
    for w in words:
        if w[0] in ("explain", "help"):  # (explain's --help is sbatch's: test_package; help prints the top's)
            continue
        for flag in ("--help", "-h"):
            result = CliRunner().invoke(admin.cli, [*w, flag], prog_name="slurm-shim")
            assert result.exit_code == 0, (w, result.output)
            assert result.output.startswith(f"Usage: slurm-shim {' '.join(w)} [OPTIONS]"), w


def test_cluster_words_reach_run_cluster(recorded):
    for words in (["up"], ["up", "--flavour", "ocs", "--source", "x.tar.gz"], ["up", "--slurm-release", "24.11"],
                  ["up", "--flavour=ocs", "--slurm-release=26.05"], ["down"], ["down", "--flavour", "ocs"],
                  ["status"], ["status", "--flavour", "debian"]):
        assert admin.main(["cluster", *words]) == 0, words
    assert recorded == [
        ("cluster", ("up", "debian", None, None), {}), ("cluster", ("up", "ocs", "x.tar.gz", None), {}),
        ("cluster", ("up", "debian", None, "24.11"), {}), ("cluster", ("up", "ocs", None, "26.05"), {}),
        ("cluster", ("down", "debian"), {}), ("cluster", ("down", "ocs"), {}),
        ("cluster", ("status", "debian"), {}), ("cluster", ("status", "debian"), {})]


def test_cluster_usage_errors_exit_2_and_run_nothing(recorded, capsys):
    assert admin.main(["cluster", "up", "--source", "x.tar.gz"]) == 2
    assert capsys.readouterr().err == "slurm-shim: error: --source is for --flavour ocs (Debian's cell comes from apt)\n"
    for words, said in ((["cluster", "down", "--source", "x"], "No such option '--source'"),
                        (["cluster", "status", "--slurm-release", "24.11"], "No such option '--slurm-release'"),
                        (["cluster", "up", "--flavour", "sge"], "'sge' is not one of 'debian', 'ocs'"),
                        (["cluster"], "Commands:"), (["cluster", "sideways"], "No such command 'sideways'"),
                        (["doctor", "--hosts"], "No such option '--hosts'")):
        assert admin.main(words) == 2, words
        assert said in capsys.readouterr().err, words
    assert recorded == []


def test_an_unknown_slurm_release_is_a_usage_error_naming_the_releases(recorded, capsys):
    for words in (["cluster", "up", "--slurm-release", "23.02"], ["cluster", "up", "--flavour", "ocs", "--slurm-release", "x"],
                  ["install", "--plan", "--slurm-release", "25.05"], ["install", "--plan", "--slurm-release", ""]):
        assert admin.main(words) == 2, words
        err = capsys.readouterr().err
        assert "Error: Invalid value for '--slurm-release': " in err and "is not a Slurm release the shim follows: " \
            "22.05, 24.11, 26.05 (a site on a release between two of them names the newest" in err, words
    assert recorded == []
    assert "(22.05|24.11|26.05)" in invoke("cluster", "up", "--help").output.replace("\n", " ").replace("  ", "")


def test_doctor_words_reach_run_doctor(recorded):
    assert admin.main(["doctor"]) == 0
    assert admin.main(["doctor", "--no-hosts"]) == 0
    assert recorded == [("doctor", {"hosts": True}), ("doctor", {"hosts": False})]


def test_install_options_fill_the_request_as_argparse_did(recorded):
    assert admin.main(["install", "--plan"]) == 0
    assert recorded.pop() == ("install", install.Request(plan=True))  # every default the Request's
    argv = ["--apply", "--json", "--force", "--config", "c.toml", "--state-dir", "/s", "--record", "r.json",
            "--profile", "p.sh", "--no-profile", "--queue", "a.q", "--queue=b.q", "--default", "b.q", "--cluster-name",
            "x", "--sge-root", "/opt/sge", "--sge-cell", "c1", "--bin-dir", "/b", "--qmaster-port", "9444",
            "--execd-port=9445", "--slurm-release", "24.11"]
    assert admin.main(["install", *argv]) == 0
    assert recorded.pop() == ("install", install.Request(
        apply=True, json=True, force=True, config="c.toml", state_dir="/s", record="r.json", profile="p.sh",
        no_profile=True, queue=["a.q", "b.q"], default="b.q", cluster_name="x", sge_root="/opt/sge", sge_cell="c1",
        bin_dir="/b", qmaster_port=9444, execd_port=9445, slurm_release="24.11"))
    assert admin.main(["install", "--uninstall", "--purge-state"]) == 0
    assert recorded.pop() == ("install", install.Request(uninstall=True, purge_state=True))


def test_install_help_names_the_defaults_install_uses():
    text = " ".join(invoke("install", "--help").output.split()).replace("- ", "-")
    for default in (install.STATE_DIR, install.RECORD, install.PROFILE, config.DEFAULT_PATH):
        assert default in text, default


def test_install_needs_exactly_one_mode(recorded, capsys):
    for words, said in (([], "one of --plan, --apply, --uninstall is required"),
                        (["--plan", "--apply"], "--apply: not allowed with --plan"),
                        (["--uninstall", "--plan"], "--uninstall: not allowed with --plan"),
                        (["--plan", "--qmaster-port", "x"], "Invalid value for '--qmaster-port': 'x' is not a valid integer")):
        assert admin.main(["install", *words]) == 2, words
        assert f"Error: {said}" in capsys.readouterr().err, words
    assert recorded == []


def test_clicks_completion_offers_the_admin_words(monkeypatch, capsys):
    def complete(line: str) -> list[str]:
        words = line.split(" ")
        monkeypatch.setenv("COMP_WORDS", line)
        monkeypatch.setenv("COMP_CWORD", str(len(words) - 1))
        monkeypatch.setenv("_SLURM_SHIM_COMPLETE", "bash_complete")
        with pytest.raises(SystemExit):
            admin.main(words[1:])
        return [x.split(",", 1)[1] for x in capsys.readouterr().out.splitlines()]

    assert complete("slurm-shim cluster ") == ["up", "down", "status"]  # (as they are defined)
    assert complete("slurm-shim cluster up --") == ["--flavour", "--source", "--slurm-release", "--help"]
    assert complete("slurm-shim cluster up --slurm-release ") == list(releases.NAMES)
    assert complete("slurm-shim cluster up --flavour ") == ["debian", "ocs"]
    assert "--no-hosts" in complete("slurm-shim doctor --")
    assert {"--plan", "--apply", "--uninstall", "--slurm-release", "--qmaster-port"} <= set(complete("slurm-shim install --"))


# --- the release written -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", releases.NAMES)
def test_cluster_ups_config_carries_the_release_asked(name):
    for text in (cluster.site_config_text(release=name), cluster_ocs.site_config_text(cluster_ocs.Cell(), name)):
        assert f'\n[slurm]\nrelease = "{name}"' in text
        cfg = config.parse(text, "up.toml")
        assert cfg.slurm.release == name and "release" in cfg.slurm.model_fields_set


def test_without_the_option_the_config_names_the_newest():
    """A new cell follows the newest release, and its config says so (an older one is named)."""
    for text in (cluster.site_config_text(), cluster_ocs.site_config_text(cluster_ocs.Cell())):
        assert '\n[slurm]\nrelease = "26.05"' in text
        cfg = config.parse(text, "up.toml")
        assert cfg.slurm.release == releases.DEFAULT == "26.05" and "release" in cfg.slurm.model_fields_set
    assert cluster.site_config_text(release=None) == cluster.site_config_text(release="26.05")


def test_cluster_up_again_keeps_the_release_its_config_names(tmp_path):
    """cluster up without --slurm-release on a cell whose config names a release keeps it (the
    test setup's 22.05 cell stays 22.05 when a test runs cluster up); no file, key or a release
    the shim does not follow: the newest."""
    path = tmp_path / "config.toml"
    assert cluster.kept_release(str(path)) is None
    path.write_text(cluster.site_config_text(release="22.05"))
    assert cluster.kept_release(str(path)) == "22.05"
    path.write_text(cluster.site_config_text().replace('release = "26.05"', 'release = "23.02"'))
    assert cluster.kept_release(str(path)) is None
    path.write_text("[slurm\n")
    assert cluster.kept_release(str(path)) is None


def test_cluster_up_hands_the_release_to_the_site_step(monkeypatch):
    """Debian's up writes the config text with the release; the OCS cell's up passes it on."""
    monkeypatch.delenv("SLURM_SHIM_CONFIG", raising=False)
    monkeypatch.setattr(cluster, "require_root", lambda *a: None)
    monkeypatch.setattr(cluster, "require_debian", lambda: None)
    monkeypatch.setattr(cluster, "this_host", lambda: "vm")
    for step in ("ensure_packages", "ensure_host_names", "ensure_qmaster", "ensure_execd", "wait_queues_ready"):
        monkeypatch.setattr(cluster, step, lambda *a: "stub")
    monkeypatch.setattr(cluster, "ensure_init_scripts", lambda: "stub")
    monkeypatch.setattr(cluster, "configure", lambda host: [])
    monkeypatch.setattr(cluster, "run_test_jobs", lambda *a: "stub")
    sites: list[tuple[str, str | None]] = []
    monkeypatch.setattr(install, "ensure_site", lambda path, text=None: sites.append((path, text)) or "stub")
    kept: list[str | None] = [None]  # what the config up wrote before names (none: the newest)
    monkeypatch.setattr(cluster, "kept_release", lambda path: kept[0] if path == config.DEFAULT_PATH else "24.11")
    assert commands.run_cluster("up", "debian", None, "24.11") == 0
    assert commands.run_cluster("up") == 0
    kept[0] = "22.05"
    assert commands.run_cluster("up") == 0
    assert commands.run_cluster("up", "debian", None, "26.05") == 0
    assert sites == [(config.DEFAULT_PATH, cluster.site_config_text(release="24.11")),
                     (config.DEFAULT_PATH, cluster.site_config_text(release="26.05")),
                     (config.DEFAULT_PATH, cluster.site_config_text(release="22.05")),
                     (config.DEFAULT_PATH, cluster.site_config_text(release="26.05"))]
    ocs: list[tuple] = []
    monkeypatch.setattr(cluster_ocs, "up", lambda source, release=None: ocs.append((source, release)) or 0)
    assert commands.run_cluster("up", "ocs", "t.tar.gz", "24.11") == 0
    assert ocs == [("t.tar.gz", "24.11")]


def test_install_plan_shows_the_release_in_the_drafted_config(tmp_path, monkeypatch, capsys):
    from test_install import reference  # (its replay of the reference cluster)

    monkeypatch.setattr(install, "backend_for", lambda cell: reference())
    monkeypatch.setattr(install, "site_failures", lambda prefix: [])
    argv = ["install", "--plan", "--config", str(tmp_path / "config.toml"), "--state-dir", str(tmp_path / "state"),
            "--no-profile", "--bin-dir", "/usr/lib/gridengine"]
    assert admin.main([*argv, "--slurm-release", "24.11"]) == 0
    out = capsys.readouterr().out
    assert '\n  [slurm]\n  release = "24.11"\n' in out
    assert admin.main(argv) == 0
    assert '\n  [slurm]\n  release = "26.05"\n' in capsys.readouterr().out  # (no option: the newest)
    drafted = install.draft(install.probe(reference()), install.Cell(), state_dir="/s", release="26.05").text
    assert config.parse(drafted, "d").slurm.release == "26.05"
    assert not (tmp_path / "config.toml").exists()  # (--plan writes nothing)


# --- doctor's line ------------------------------------------------------------------------------------


def _doctor(monkeypatch, capsys, path) -> tuple[int, list[str]]:
    """doctor on the site config at ``path``, Grid Engine and the host's checks left out."""
    monkeypatch.setenv("SLURM_SHIM_CONFIG", str(path))
    monkeypatch.setattr(cluster, "live_findings", lambda *a: [])
    monkeypatch.setattr(cluster, "read_state", lambda d: cluster.StateFacts())
    monkeypatch.setattr(cluster, "state_findings", lambda *a: [])
    monkeypatch.setattr(cluster, "private_findings", lambda d: [])
    monkeypatch.setattr(cluster, "kernel_findings", lambda: [])
    code = commands.run_doctor(hosts=False)
    return code, capsys.readouterr().out.splitlines()


def test_doctor_names_the_release_the_site_follows(tmp_path, monkeypatch, capsys):
    path = tmp_path / "config.toml"
    path.write_text(cluster.site_config_text(release="24.11"))
    assert _doctor(monkeypatch, capsys, path) == (0, [
        f"ok    site config {path} is valid",
        f"ok    slurm release 24.11: the commands follow Slurm 24.11.5 ([slurm] release in {path})"])
    path.write_text(cluster.site_config_text().replace('[slurm]\nrelease = "26.05"  # --slurm-release\n', ""))
    assert _doctor(monkeypatch, capsys, path)[1][1] == (
        f"ok    slurm release 26.05: the commands follow Slurm 26.05.5 (the default, the newest: {path} names no "
        "[slurm] release)")
    f = cluster.release_finding(config.SiteConfig(), None)
    assert f.line() == ("ok    slurm release 26.05: the commands follow Slurm 26.05.5 (the default, the newest: no "
                        "site config)")


def test_doctor_fails_an_unknown_release_naming_the_valid_ones_and_checks_the_rest(tmp_path, monkeypatch, capsys):
    path = tmp_path / "config.toml"
    path.write_text(cluster.site_config_text(release="24.11").replace('release = "24.11"', 'release = "23.02"', 1))
    with pytest.raises(Exception, match="is not one the shim follows"):  # what every command says of it
        config.load(str(path))
    checked: list[config.SiteConfig] = []
    code, out = _doctor(monkeypatch, capsys, path)
    assert code == 1
    assert out == [f"FAIL  slurm release: {path} names [slurm] release = '23.02', not a release the shim follows  -- "
                   "name one of 22.05, 24.11, 26.05 (a site on a release between two of them names the newest not "
                   "newer than its own: 23.02 and 23.11 are 22.05, 25.05 and 25.11 are 24.11)"]
    monkeypatch.setattr(cluster, "live_findings", lambda cfg, *a: checked.append(cfg) or [])
    commands.run_doctor(hosts=False)
    assert [c.partitions["gpu"].queue for c in checked] == ["gpu"]  # the rest of the config was still read
    # another error beside it: config.load's lines, every one, as before
    path.write_text(path.read_text().replace('max_array_size = 1001', 'max_array_size = "many"'))
    assert commands.run_doctor(hosts=False) == 1
    err = capsys.readouterr().err
    assert "slurm.release: Value error, release '23.02' is not one the shim follows" in err
    assert "cluster.max_array_size: " in err
