"""The package's own surface: one version, `slurm-shim` as a click CLI, and the files a wheel ships
beside its bin/ (man pages, bash completion) current and complete. The build and install themselves
are tests/package/test_wheel_install.py."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import shim
from shim.admin import completion
from shim.cli import admin

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("sbatch", "srun", "salloc", "squeue", "scancel", "scontrol", "sacct", "sinfo")
POLICY_COMMANDS = ("sprio", "sshare", "sacctmgr", "sreport")  # issue 20's commands
ALL_COMMANDS = COMMANDS + POLICY_COMMANDS


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_version_is_written_once():
    project = pyproject()["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert pyproject()["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "shim.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?(?:\.dev\d+)?", shim.__version__)
    hits = [p for p in (REPO / "src").rglob("*.py") if shim.__version__ in p.read_text() and p.name != "__init__.py"]
    assert hits == [], "the package version is spelled again outside shim/__init__.py"
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog and f"## [{shim.__version__}]" in changelog


def test_slurm_shim_version_names_the_slurm_it_follows(capsys):
    for flag in ("--version", "-V"):
        assert admin.main([flag]) == 0
        assert capsys.readouterr().out == f"slurm-shim {shim.__version__} (the commands follow Slurm {shim.SLURM_VERSION})\n"
    from shim.__main__ import dispatch

    assert dispatch("squeue", ["--version"]) == 0
    assert shim.SLURM_VERSION in capsys.readouterr().out  # the commands say the same Slurm version


def test_slurm_shim_help_lists_its_commands(capsys):
    assert admin.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: slurm-shim [OPTIONS] COMMAND [ARGS]...")
    listed = re.findall(r"^  (\w[\w-]*)  ", out.split("Commands:")[1], re.M)
    assert listed == ["cluster", "completion", "doctor", "explain", "install"]
    assert admin.main(["help"]) == 0 and capsys.readouterr().out == out  # as before click
    assert admin.main([]) == 2  # no command: the help, on stderr, as a usage error
    assert "Commands:" in capsys.readouterr().err
    assert admin.main(["sideways"]) == 2
    assert "No such command 'sideways'" in capsys.readouterr().err


def test_explain_keeps_sbatchs_parser(capsys, monkeypatch):
    """explain hands every word, --help included, to sbatch's parser (its usage errors are sbatch's);
    cluster, install and doctor are click's own (tests/unit/test_admin_cli.py)."""
    seen = []
    from shim.cli import explain

    monkeypatch.setattr(explain, "main", lambda argv: seen.append(argv) or 7)
    assert admin.main(["explain", "-N", "2", "job.sh"]) == 7
    assert admin.main(["explain", "--help"]) == 7
    assert seen == [["-N", "2", "job.sh"], ["--help"]]
    monkeypatch.undo()
    assert admin.main(["cluster", "sideways"]) == 2
    assert "No such command 'sideways'" in capsys.readouterr().err


def test_shipped_completion_is_current():
    shipped = {p.name: p.read_text() for p in (REPO / "completion").iterdir()}
    assert shipped == completion.files(), "regenerate: PYTHONPATH=src python -m shim.admin.completion write"


def test_completion_covers_every_option_of_every_command():
    text = completion.bash()
    for cmd in ALL_COMMANDS:
        m = re.search(rf"^_slurm_shim_{cmd}_opts='([^']*)'$", text, re.M)
        assert m, cmd
        offered = set(m.group(1).split())
        for spec in completion._specs(cmd):
            if spec.long:
                assert f"--{spec.long}" in offered, (cmd, spec.long)
            if spec.short:
                assert f"-{spec.short}" in offered, (cmd, spec.short)
    assert re.search(r"^complete -F _slurm_shim_complete " + " ".join(ALL_COMMANDS) + "$", text, re.M)
    assert "_SLURM_SHIM_COMPLETE=bash_complete" in text  # slurm-shim's own, from click
    assert "click" not in text.replace("click's", "")  # nothing of click's own text: stable across its versions
    cp = subprocess.run(["bash", "-n"], input=text, text=True, capture_output=True)
    assert cp.returncode == 0, cp.stderr


def test_the_wheel_ships_every_page_and_completion_file():
    data = pyproject()["tool"]["setuptools"]["data-files"]
    pages = {p.name for pattern in data["share/man/man1"] for p in REPO.glob(pattern)}
    assert pages == {f"{c}.1" for c in COMMANDS + POLICY_COMMANDS}
    comps = {p.name for pattern in data["share/bash-completion/completions"] for p in REPO.glob(pattern)}
    assert comps == {*ALL_COMMANDS, "slurm-shim"}
    zsh = {p.name for pattern in data["share/zsh/site-functions"] for p in REPO.glob(pattern)}
    assert zsh == {*(f"_{c}" for c in ALL_COMMANDS), "_slurm-shim", "_slurm_shim_values"}
    manifest = (REPO / "MANIFEST.in").read_text()
    assert "CHANGELOG.md" in manifest


def _zsh_option_words(text: str) -> set[str]:
    """The options an _arguments call of a generated _<cmd> offers (each spec's option word)."""
    return {m.group(1) for m in re.finditer(r"^    '(?:\([^)]*\))?\*?(--[\w-]+?(?=[=\[']|$)|-\w(?=[+\-\[']))",
                                           text, re.M)}


@pytest.mark.parametrize("cmd", ALL_COMMANDS)
def test_zsh_completion_covers_every_option(cmd):
    """_<cmd> is compinit's (#compdef <cmd>) and offers every option of the command's table, with
    getopt_long's argument forms: --opt= and -o+ take a value in the same word or the next,
    --opt=- and -o- (optional) only in the same word."""
    from shim.slurm.options.spec import Arity

    text = completion.zsh_files()[f"_{cmd}"]
    assert text.startswith(f"#compdef {cmd}\n")
    offered = _zsh_option_words(text)
    want = {f"--{s.long}" for s in completion._specs(cmd) if s.long} | {
        f"-{s.short}" for s in completion._specs(cmd) if s.short}
    assert offered == want
    for s in completion._specs(cmd):
        if s.long and s.arity is Arity.OPTIONAL:
            assert re.search(rf"'(?:\([^)]*\))?--{re.escape(s.long)}=-(\[|::)", text), (cmd, s.long)
        if s.long and s.arity is Arity.REQUIRED:
            assert re.search(rf"'(?:\([^)]*\))?--{re.escape(s.long)}=(\[|:)", text), (cmd, s.long)
    if cmd in completion.PLUS_MODE:  # options end at the script or command, as sbatch's getopt's '+'
        assert text.split("\n")[2].startswith("_arguments -s -S -A '-*' :")


def test_zsh_files_parse_and_the_sourced_script_defines_every_function():
    files = completion.zsh_files()
    assert files["_slurm_shim_values"].startswith("#autoload\n")
    assert files["_slurm-shim"].startswith("#compdef slurm-shim\n")
    for name, text in files.items():
        cp = subprocess.run(["zsh", "-n"], input=text, text=True, capture_output=True, timeout=30)
        assert cp.returncode == 0, (name, cp.stderr)
    script = completion.zsh()
    cp = subprocess.run(["zsh", "-f", "-c", 'autoload -Uz compinit && compinit -u -D && source "$1" && '
                         'print -l -- ${(k)_comps[(I)s*]} && whence -w _slurm_shim_values',
                         "zsh", "/dev/stdin"], input=script, text=True, capture_output=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.split()
    for cmd in (*ALL_COMMANDS, "slurm-shim"):
        assert cmd in lines, cmd
    assert "_slurm_shim_values:" in lines and "function" in lines


@pytest.mark.parametrize("argv, want", [
    (["completion", "partitions"], None),
    (["completion", "bash"], "complete -F _slurm_shim_complete"),
    (["completion", "zsh"], "compdef _sbatch sbatch"),
])
def test_completion_command(argv, want, tmp_path):
    src = str(REPO / "src")
    code = f"import sys; sys.path.insert(0, {src!r}); from shim.cli.admin import main; sys.exit(main(sys.argv[1:]))"
    conf = REPO / "fixtures" / "site" / "config.toml"
    env = {"PATH": "/usr/bin:/bin", "SLURM_SHIM_CONFIG": str(conf), "XDG_CACHE_HOME": str(tmp_path)}
    cp = subprocess.run([sys.executable, "-I", "-c", code, *argv], env=env, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    if want is None:
        parts = tomllib.loads(conf.read_text())["partitions"]
        default = [n for n, p in parts.items() if p.get("default")]
        assert cp.stdout.split() == default + [n for n in parts if n not in default]
    else:
        assert want in cp.stdout and cp.stdout == (completion.zsh() if argv[1] == "zsh" else completion.bash())


def test_completion_never_expands_a_candidate(tmp_path):
    """Candidates (partition names, squeue's output) are compared and copied, never expanded: no
    command substitution, no globbing (compgen -W would do both)."""
    (tmp_path / "a-file").write_text("")
    words = "$(touch pwned) `touch pwned2` * ?-file debug d*"
    script = ('source "$1"; _slurm_shim_cur=$2; _slurm_shim_list "$3"; printf "<%s>\\n" "${COMPREPLY[@]}"; '
              '_slurm_shim_cur=; _slurm_shim_words "$3"; printf "[%s]\\n" "${COMPREPLY[@]}"')
    cp = subprocess.run(["bash", "-c", script, "bash", str(REPO / "completion" / "slurm-shim"), "x,d", words],
                        cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == ["<x,debug>", "<x,d*>", *(f"[{w}]" for w in words.split())]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_the_readme_layout_is_the_code():
    """README's layout block (How it works) names every package and top-level module of src/shim,
    every module of each layer's folder, runtime/ and runtime/steps, and nothing that is not there."""
    text = (REPO / "README.md").read_text()
    block = text[text.index("```\nsrc/shim/\n"):]
    block = block[:block.index("\n```", 4)]
    src = REPO / "src" / "shim"
    named = set(re.findall(r"[\w/]+?(?:/|\.py)(?=[\s,:;)]|$)", block, re.M))
    top = {p.name + "/" for p in src.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    top |= {p.name for p in src.glob("*.py") if p.name != "__init__.py"}
    assert top <= named, sorted(top - named)
    for sub in ("gridengine", "gridengine/translate", "runtime", "slurm", "slurm/render", "slurm/options",
                "operations", "operations/accounting", "store", "service", "admin"):
        mods = {p.name for p in (src / sub).glob("*.py") if p.name != "__init__.py"}
        assert mods <= named, (sub, sorted(mods - named))
    steps = {p.stem for p in (src / "runtime" / "steps").glob("*.py") if p.name != "__init__.py"}
    line = block[block.index("steps/ srun's steps"):]
    assert all(re.search(rf"\b{s}\b", line) for s in steps), steps
    ghosts = {n for n in named if n.endswith(".py") and not any(src.rglob(n))}
    ghosts |= {n for n in named if n.endswith("/") and n != "src/shim/" and not (REPO / n).is_dir() and not any(
        p.is_dir() for p in src.rglob(n.rstrip("/").split("/")[-1]))}  # (completion/: the repository's)
    assert not ghosts, ghosts
