"""The one bootstrap of the in-job runtime (shim.runtime.boot): every far-side entry point it can
start exists, and the job scripts and command lines it builds run what they name."""

from __future__ import annotations

import importlib
import inspect
import shlex
import sys
import subprocess

import pytest

from shim import proc
from shim.runtime import boot


@pytest.mark.parametrize("entry", sorted(boot.ENTRIES))
def test_every_entry_point_imports(entry):
    """A rename or move of a far-side entry point fails here, not in a job on an execution host."""
    module, name = boot.ENTRIES[entry]
    fn = getattr(importlib.import_module(f"shim.{module}"), name)
    assert callable(fn)
    assert not [p for p in inspect.signature(fn).parameters.values() if p.default is p.empty], entry
    assert name == entry


@pytest.mark.parametrize("entry", sorted(boot.ENTRIES))
def test_every_entry_point_imports_in_an_isolated_interpreter(entry):
    """What the far side runs: the argv's own program, with the call replaced by a check that the
    name resolved (so nothing starts)."""
    words = boot.argv(entry)
    assert words[1:3] == ["-I", "-c"]
    module, name = boot.ENTRIES[entry]
    code = words[3].replace(f"; {name}()", f"; print(callable({name}))")
    assert code != words[3]
    out = subprocess.run([words[0], "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (0, "True\n", "")


def test_argv_is_shim_python_plus_words():
    assert boot.argv("remote_main", "/s", "f.json") == [*proc.shim_python("runtime.steps.launch", "remote_main"), "/s", "f.json"]
    with pytest.raises(KeyError):
        boot.argv("main")


def test_script_without_stdin():
    got = boot.script("hold_main", ["/var/spool/x y", "vm", "0"], comment="holds")
    words = [*proc.shim_python("runtime.steps.job", "hold_main"), "/var/spool/x y", "vm", "0"]
    assert got == ("#!/bin/sh\n# holds\nexec " + " ".join(shlex.quote(w) for w in words) + "\n").encode()


def test_script_stdin_goes_through_a_quoted_here_document(tmp_path):
    """sh hands the here-document to the entry point as it is: no $-expansion, no backquotes."""
    body = "QUJD$HOME`id`\nREVG"
    got = boot.script("run", comment="c", stdin=body).decode()
    exec_line = got.splitlines()[2]
    assert exec_line.endswith(" <<'__SLURM_SHIM_PAYLOAD__'")
    assert got.endswith("\n" + body + "\n__SLURM_SHIM_PAYLOAD__\n")
    # the same script with the interpreter replaced by cat: what reaches the entry point's stdin
    words = shlex.split(exec_line[len("exec "):-len(" <<'__SLURM_SHIM_PAYLOAD__'")])
    assert words == proc.shim_python("runtime.jobwrap", "run")
    script = tmp_path / "s.sh"
    script.write_text(got.replace(exec_line, "exec cat <<'__SLURM_SHIM_PAYLOAD__'"))
    out = subprocess.run(["/bin/sh", str(script)], capture_output=True, text=True, timeout=30)
    assert out.stdout == body + "\n"
    with pytest.raises(ValueError):
        boot.script("run", stdin="a\n__SLURM_SHIM_PAYLOAD__\nb")


def test_payload_round_trip_through_the_job_script(tmp_path):
    """What sbatch's job script carries reaches the wrapper's read intact, through sh."""
    payload = {"script": "#!/bin/sh\necho $HOME `id` '__SLURM_SHIM_PAYLOAD__'\n", "n": [1, 2], "x": "é" * 100}
    text = boot.payload_text(payload)
    assert all(len(line) <= 76 for line in text.splitlines()) and len(text.splitlines()) > 2
    got = boot.script("run", comment="c", stdin=text).decode()
    exec_line = got.splitlines()[2]
    script = tmp_path / "s.sh"
    script.write_text(got.replace(exec_line, "exec cat <<'__SLURM_SHIM_PAYLOAD__'"))
    out = subprocess.run(["/bin/sh", str(script)], capture_output=True, timeout=30)
    assert boot.payload_from(out.stdout) == payload
    with pytest.raises(ValueError):
        boot.payload_from(b"WzFd")  # [1]: not an object


def test_runtime_imports_only_the_standard_library_and_light_shim_modules():
    """The runtime starts in every job and step (fast start, ``python -I`` on execution hosts): at
    module level it imports the standard library and only these shim modules; anything heavier
    (backends, the site config) is imported inside the one function that needs it."""
    import ast
    from pathlib import Path

    light = {"proc", "store.state", "store.records", "slurm.hostlist", "slurm.jobids", "slurm.request", "slurm.patterns",
             "runtime"}
    root = Path(boot.__file__).parent
    stdlib = set(sys.stdlib_module_names)
    for path in sorted(root.rglob("*.py")):
        depth = len(path.relative_to(root).parts)  # runtime/x.py: 1, runtime/steps/x.py: 2
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
                assert all(n in stdlib for n in names), (path, names)
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0:
                    assert node.module.split(".")[0] in stdlib | {"__future__"}, (path, node.module)
                elif node.level > depth:  # from the shim package itself
                    mods = [f"{node.module}.{a.name}" if node.module else a.name for a in node.names]
                    assert all(any(m == x or m.startswith(x + ".") for x in light) for m in mods), (path, mods)
