"""Properties of sbatch's parsing and translation (hypothesis):
- one request written as command-line options, as #SBATCH lines or as SBATCH_* variables gives the
  same qsub argv, and the command line beats the environment, which beats the directives;
- no user text ever reaches a shell: job names, --wrap, --export values and paths travel as data."""

from __future__ import annotations

import base64
import io
import json
import re
import shlex

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from shim import siteconf
from shim.cli import sbatch

# options that have both a command-line form and an SBATCH_* variable, with value strategies
OPTS = {
    "--job-name": ("SBATCH_JOB_NAME", st.from_regex(r"[A-Za-z][A-Za-z0-9_.-]{0,15}", fullmatch=True)),
    "--partition": ("SBATCH_PARTITION", st.sampled_from(["debug", "gpu"])),
    "--time": ("SBATCH_TIMELIMIT", st.sampled_from(["5", "1:00:00", "2-00:00:00", "10:30", "UNLIMITED"])),
    "--mem": ("SBATCH_MEM_PER_NODE", st.sampled_from(["100", "2G", "512M", "1T"])),
    "--account": ("SBATCH_ACCOUNT", st.from_regex(r"[a-z]{1,8}", fullmatch=True)),
    "--gres": ("SBATCH_GRES", st.sampled_from(["gpu:1", "gpu:2"])),
    "--array": ("SBATCH_ARRAY_INX", st.sampled_from(["0-3", "1,5,9", "2-10:4%2"])),
    "--requeue": ("SBATCH_REQUEUE", st.just(None)),
}


@pytest.fixture(autouse=True)
def site(monkeypatch, tmp_path_factory):
    d = tmp_path_factory.mktemp("site")
    conf = d / "config.toml"
    conf.write_text((FIXTURES / "site" / "config.toml").read_text().replace("/tmp/slurm-shim-unit-state", str(d)))
    monkeypatch.setenv("SLURM_SHIM_CONFIG", str(conf))
    monkeypatch.setenv("XDG_CACHE_HOME", str(d / "cache"))
    siteconf.reset()
    yield
    siteconf.reset()


def argv_for(cli: list[str], env: dict[str, str], directives: list[str]) -> list[str]:
    script = "#!/bin/sh\n" + "".join(f"#SBATCH {d}\n" for d in directives) + "true\n"
    _o, sub, _cfg = sbatch.prepare(cli, env, stdin=io.StringIO(script), cwd="/srv")
    return sub.argv


def as_cli(opt: str, value: str | None) -> str:
    return opt if value is None else f"{opt}={value}"


requests = st.dictionaries(st.sampled_from(sorted(OPTS)), st.data(), min_size=1, max_size=5)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_one_request_three_ways_gives_one_argv(data):
    chosen = data.draw(st.lists(st.sampled_from(sorted(OPTS)), min_size=1, max_size=5, unique=True))
    values = {o: data.draw(OPTS[o][1]) for o in chosen}
    cli = [as_cli(o, v) for o, v in values.items()]
    env = {OPTS[o][0]: ("" if v is None else v) for o, v in values.items()}
    via_cli = argv_for(cli, {}, [])
    assert argv_for([], {}, cli) == via_cli
    assert argv_for([], env, []) == via_cli


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_command_line_beats_environment_beats_directives(data):
    opt = data.draw(st.sampled_from([o for o in OPTS if o != "--requeue"]))
    strategy = OPTS[opt][1]
    a, b, c = data.draw(strategy), data.draw(strategy), data.draw(strategy)
    var = OPTS[opt][0]
    assert argv_for([f"{opt}={a}"], {var: b}, [f"{opt}={c}"]) == argv_for([f"{opt}={a}"], {}, [])
    assert argv_for([], {var: b}, [f"{opt}={c}"]) == argv_for([f"{opt}={b}"], {}, [])


hostile = st.lists(st.sampled_from(list("ab $`'\"\\;|&()<>{}*?!#~\n\t%=,") + ["$(id)", "`id`", "${HOME}"]),
                   min_size=1, max_size=20).map("".join)


def _slurm_first_token(text: str) -> str:
    """The first item of an --export list as Slurm's find_quote_token (src/common/env.c) cuts it:
    a comma ends it only outside quotes (single and double quotes counted apart), and an item
    that begins and ends with the same quote loses those two quotes."""
    single = double = 0
    for i, ch in enumerate(text + "\0"):
        if ch == "'":
            single ^= 1
        elif ch == '"':
            double ^= 1
        elif ch in ",\0" and not single and not double:
            tok = text[:i]
            return tok[1:-1] if len(tok) >= 2 and tok[0] == tok[-1] and tok[0] in "'\"" else tok
    return text  # an unterminated quote: Slurm takes the rest ("Improperly formed environment variable")


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=hostile, wrap=hostile, value=hostile, path=hostile)
def test_no_user_text_reaches_a_shell(name, wrap, value, path):
    cli = ["-J", name, "-o", path, "--export", f"ALL,X={value}", "--wrap", wrap]
    try:
        _o, sub, _cfg = sbatch.prepare(cli, {}, stdin=io.StringIO(""), cwd="/srv")
    except sbatch.ShimError:
        return  # refused with a Slurm-style message: nothing submitted
    # 1. qsub gets an argument list; every word is exactly one argv entry, never re-split
    assert all(isinstance(a, str) for a in sub.argv)
    # 2. the wrapper Grid Engine runs is constant text plus a base64 payload: no user byte in it
    wrapper = sbatch.wrapper_script(sub.payload).decode()
    lines = wrapper.splitlines()
    body = lines[3:-1]
    assert all(re.fullmatch(r"[A-Za-z0-9+/=]+", line) for line in body)
    payload = json.loads(base64.b64decode("".join(body)))
    assert payload["name"] == name and payload["stdout"] == path
    assert payload["export"]["vars"].get("X") == _slurm_first_token(f"X={value}").partition("=")[2]
    assert base64.b64decode(payload["script"]).decode().endswith(f"\n{wrap}\n")
    head = "\n".join(lines[:3])
    for word in (name, wrap, value, path):
        if len(word) > 3 and word.strip():
            assert word not in head
    # 3. the wrapper's shell program itself parses to the same words whatever the input
    assert shlex.split(lines[2])[:2] == shlex.split(sbatch.wrapper_script({}).decode().splitlines()[2])[:2]
