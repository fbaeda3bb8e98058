"""The last of issue 30's "not yet per release" items, each against what the real release answered
(fixtures/slurm-*/oracle-rest.txt, asked of 22.05.8, 24.11.5 and 26.05.5; the captures' env-*.txt
and cases.json): the MPI launcher variables of a job and srun's --external-launcher step, -c
beyond a node taken (and pending) or refused, and sinfo's and scontrol show partition's fields."""

from __future__ import annotations

import re

import pytest

from conftest import FIXTURES, release_setter, use_site_config
from shim import siteconf
from shim.gridengine import backends
from shim.slurm import releases

NAMES = ("22.05", "24.11", "26.05")


def asked(release: str, key: str) -> str:
    """The output of one question of oracle-rest.txt: the lines after its ``### <key>: ...`` or
    ``-- <key>`` header, up to the next header."""
    text = (FIXTURES / f"slurm-{release}" / "oracle-rest.txt").read_text()
    body = "\n".join(part.split("\n", 1)[1] for part in text.split("\n## output (block ")[1:])
    lines = body.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith(f"### {key}:") or line == f"-- {key}"]
    assert len(heads) == 1, key
    rest = []
    for line in lines[heads[0] + 1:]:
        if line.startswith(("### ", "-- ")):
            break
        rest.append(line)
    return "\n".join(rest) + "\n"


@pytest.fixture
def site(monkeypatch, tmp_path):
    """set(release): the unit-test site config with ``[slurm] release``."""
    use_site_config(monkeypatch, tmp_path)
    conf = tmp_path / "config.toml"

    set_release = release_setter(conf)

    yield set_release
    siteconf.reset()
    backends.use(None)


# --- the MPI launcher variables ---------------------------------------------------------------------

LAUNCHER_RE = re.compile(r"^(HYDRA|I_MPI|OMPI_MCA|PRTE_MCA)")


def env_lines(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if LAUNCHER_RE.match(line))


@pytest.mark.parametrize("name", NAMES)
def test_a_job_gets_the_launcher_variables_its_release_sets(name):
    """--export=NONE (M2) and srun's own job (M3): every launcher variable the release sets, with
    its value; 22.05 sets none."""
    from shim.runtime import jobenv

    release = releases.get(name)
    ours = release.job_env(jobenv.launcher_env({}))
    for key in ("M2", "M3"):
        assert ours == env_lines(asked(name, key)), (name, key)
    assert bool(ours) == (name != "22.05")


@pytest.mark.parametrize("name", NAMES)
def test_a_launcher_the_submitter_chose_is_left_as_set(name):
    """M1: HYDRA_BOOTSTRAP=ssh and OMPI_MCA_plm_slurm_args=-x exported at submission stay, and
    HYDRA_LAUNCHER_EXTRA_ARGS is then not set; Intel MPI's and PRRTE's still are."""
    from shim.runtime import jobenv

    user = {"HYDRA_BOOTSTRAP": "ssh", "OMPI_MCA_plm_slurm_args": "-x"}
    job = releases.get(name).job_env(jobenv.launcher_env(user))
    assert {**user, **job} == env_lines(asked(name, "M1"))


@pytest.mark.parametrize("name", NAMES)
def test_the_batch_job_and_srun_jobs_get_them_through_batch_env(name):
    """batch_env (the job wrapper's and srun's own job's) with the job's exported environment."""
    from shim.runtime import jobenv

    rec = {"ntasks": 1, "name": "wrap", "partition": "debug"}
    kw = dict(job_id=7, task=None, hosts=[("vm", 1)], this_host="vm", user="root", uid=0, gid=0,
              release=releases.get(name))
    plain = jobenv.batch_env(rec, **kw)
    chosen = jobenv.batch_env(rec, environ={"HYDRA_BOOTSTRAP": "ssh", "OMPI_MCA_plm_slurm_args": "-x"}, **kw)
    assert {k: v for k, v in plain.items() if LAUNCHER_RE.match(k)} == env_lines(asked(name, "M2"))
    want = {k: v for k, v in env_lines(asked(name, "M1")).items() if k not in ("HYDRA_BOOTSTRAP", "OMPI_MCA_plm_slurm_args")}
    assert {k: v for k, v in chosen.items() if LAUNCHER_RE.match(k)} == want


def _srun_request(argv: list[str], env: dict[str, str]):
    from shim.cli import srun
    from shim.operations import submit

    _first, o, positional = submit.command_options(srun.table(), argv, env)
    return o, srun.request(o, positional, env)


@pytest.mark.parametrize("name", ("24.11", "26.05"))
def test_an_external_launcher_step_is_one_task_per_node_without_a_warning(site, name):
    """M4: in a job of 2 tasks, srun --external-launcher hostname ran one task (one node), and
    printed nothing but the task's output; -n still counts."""
    from shim.cli import srun
    from shim.slurm.options.sources import fates

    site(name)
    assert "vm\nrc=0\n" in asked(name, "M4")
    env = {"SLURM_NTASKS": "2", "SLURM_JOB_ID": "7"}
    o, req = _srun_request(["--external-launcher", "hostname"], env)
    assert req.ntasks is None  # (plan_step: one per node)
    assert [w for w in fates(o, srun.table(), "srun") if "external-launcher" in w] == []
    _o, req = _srun_request(["--external-launcher", "-n", "3", "hostname"], env)
    assert req.ntasks == 3
    _o, req = _srun_request(["hostname"], env)
    assert req.ntasks == 2


def test_22_05_has_no_external_launcher(site):
    from shim.errors import ShimError

    site("22.05")
    assert "srun: unrecognized option '--external-launcher'" in asked("22.05", "M4")
    with pytest.raises(ShimError, match="unrecognized option '--external-launcher'"):
        _srun_request(["--external-launcher", "hostname"], {})


# --- CPUs beyond a node ---------------------------------------------------------------------------

SIZES = ("sbatch -c 9", "sbatch -N 1 -n 9", "sbatch -c 9 -N 1")


@pytest.mark.parametrize("name", NAMES)
def test_cpus_beyond_a_node_are_taken_where_the_release_takes_them(site, name):
    """-c 9 and -N 1 -n 9 on the 8-CPU node: 22.05 and 26.05 took them and they pend
    (PartitionConfig), 24.11 refused them at submission. Where the release takes them the shim
    does not ask Grid Engine to verify (-w e would refuse): Grid Engine keeps the job waiting."""
    import io

    from shim.cli import sbatch
    from shim.gridengine.translate import qsub

    site(name)
    refused = {asked(name, q).startswith("rc=1 ") for q in SIZES}
    assert len(refused) == 1
    refused = refused.pop()
    assert qsub.cpus_refused_at_submit() == refused == (name == "24.11")
    if refused:  # (submit.check_fits refuses it first: test_releases_sizes.py)
        assert "Requested node configuration is not available" in asked(name, "sbatch -c 9")
        return
    reasons = asked(name, "squeue -h -o '%i|%T|%r|%C|%D'").splitlines()
    assert len(reasons) == 4 and all(r.split("|")[1:3] == ["PENDING", "PartitionConfig"] for r in reasons)
    for argv in (["-c", "9"], ["-N", "1", "-n", "9"], ["-c", "9", "-N", "1"]):
        _o, sub, _cfg = sbatch.prepare(argv, {}, stdin=io.StringIO("#!/bin/sh\ntrue\n"), cwd="/srv/x")
        assert "-w" not in sub.argv, (argv, sub.argv)
    # memory, GPUs and licenses beyond the cluster's are refused by every release (the captures'
    # sbatch_err_too_much_mem, sbatch_err_too_many_gpus, sbatch_err_too_many_licenses): -w e stays
    _o, sub, _cfg = sbatch.prepare(["-c", "9", "-L", "matlab:1"], {}, stdin=io.StringIO("#!/bin/sh\ntrue\n"),
                                   cwd="/srv/x")
    assert sub.argv[sub.argv.index("-w") + 1] == "e"


# --- sinfo and scontrol show partition -------------------------------------------------------------

SGE = FIXTURES / "gridengine" / "sge-8.1.9"


def cases(release: str) -> dict:
    import json

    return json.loads((FIXTURES / f"slurm-{release}" / "cases.json").read_text())


def sinfo_replay(used: int) -> None:
    """qhost -q -xml of the unit cell (host vm, queues debug and gpu), ``used`` slots of debug used."""
    from shim.gridengine.replay import ReplayBackend

    xml = (SGE / "qhost-q-xml-debug-gpu.xml").read_text()
    xml = re.sub(r"(<queuevalue qname='debug' name='slots_used'>)\d+(<)", rf"\g<1>{used}\2", xml)
    b = ReplayBackend()
    b.add("qhost", ["-q", "-xml"], xml)
    backends.use(b)


def sinfo(capsys, *argv: str) -> tuple[int, str, str]:
    from shim.__main__ import dispatch

    rc = dispatch("sinfo", list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("name", NAMES)
def test_sinfo_long_has_the_reservation_column_from_24_11(site, capsys, monkeypatch, name):
    """The captures' sinfo_l: 24.11 and 26.05 add RESERVATION (empty) before NODELIST. The rows
    are the capture's but for 24.11's 'mixed-' (PLANNED: its backfill scheduler's own plan)."""
    monkeypatch.delenv("SINFO_FORMAT", raising=False)
    site(name)
    sinfo_replay(used=1)
    rc, out, err = sinfo(capsys, "-l")
    exp = cases(name)["sinfo_l"]["stdout"].splitlines()
    got = out.splitlines()
    assert (rc, err, len(got[0])) == (0, "", len(exp[0]))  # (the first line is the date)
    assert got[1:] == [line.replace("mixed-", " mixed") for line in exp[1:]]
    assert ("RESERVATION" in got[1]) == (name != "22.05")


@pytest.mark.parametrize("name", NAMES)
def test_sinfo_reservation_field_is_24_11s(site, capsys, monkeypatch, name):
    """oracle-rest.txt S1, S2: %i and -O reservation (22.05: an invalid field, %i kept as text)."""
    monkeypatch.delenv("SINFO_FORMAT", raising=False)
    site(name)
    sinfo_replay(used=0)
    rc, out, err = sinfo(capsys, "-o", "%i|%P|%N")
    if name == "22.05":  # (22.05 also keeps the "%i" as text; the shim leaves it out)
        assert err == "Invalid node format specification: i\n" == asked(name, "S1").splitlines(True)[0]
        assert out == asked(name, "S1").split("\n", 1)[1].replace("%i|", "")
    else:
        assert out + err == asked(name, "S1")
    rc, out, err = sinfo(capsys, "-O", "reservation,partition")
    assert err + out == asked(name, "S2")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("key, argv", [("S5", ["--helpformat"]), ("S6", ["--helpFormat"]), ("S7", ["--helpstate"]),
                                       ("S3", ["-F"])])
def test_sinfo_lists_and_future_are_the_releases(site, capsys, monkeypatch, name, key, argv):
    """oracle-rest.txt S3, S5-S7: 24.11's and 26.05's lists (26.05's node states its own), -F the
    default listing (Grid Engine has no FUTURE node); 22.05: unrecognized (invalid) options."""
    monkeypatch.delenv("SINFO_FORMAT", raising=False)
    site(name)
    sinfo_replay(used=0)
    rc, out, err = sinfo(capsys, *argv)
    want = asked(name, key)
    assert want.endswith(f"rc={rc}\n")
    assert out + err == want[:-len(f"rc={rc}\n")]


@pytest.mark.parametrize("name", NAMES)
def test_scontrol_show_partition_lines_are_the_releases(name):
    """The captures' scontrol_show_partition: 24.11's ExclusiveTopo=NO and MaxCPUsPerSocket=UNLIMITED,
    26.05's Exclusive=NO in place of ExclusiveUser= and ExclusiveTopo= (the TRES line is the
    cluster's own: mem and gres/license totals Grid Engine does not tell)."""
    from types import SimpleNamespace

    from shim.slurm.render.scontrol import partition_text

    exp = cases(name)["scontrol_show_partition"]["stdout"].split("\n\n")[:2]
    for block, part in zip(exp, (SimpleNamespace(name="debug", default=True, default_time=None, max_time=-1),
                                 SimpleNamespace(name="gpu", default=False, default_time=60, max_time=2880))):
        got = partition_text(part, ["vm"], 8, False, release=releases.get(name)).splitlines()
        assert got[:-1] == block.splitlines()[:-1]


@pytest.mark.parametrize("name", NAMES)
def test_sallocs_command_gets_the_launcher_variables(site, name):
    """salloc's command: the launcher variables of the release's jobs (oracle-rest.txt M2), those
    of a launcher the caller chose left as set (M1)."""
    from shim.cli import salloc
    from shim.slurm.options import sources
    from shim.slurm.options.getopt import getopt

    site(name)
    t = salloc.table()
    cli, _ = getopt(t, ["-n1"])
    o = sources.collect(t, ["-n1"], environ={}, cli=cli)
    env = salloc.command_env({"HOME": "/root"}, {"env": {"SLURM_JOB_ID": "7"}}, o)
    assert {k: v for k, v in env.items() if LAUNCHER_RE.match(k)} == env_lines(asked(name, "M2"))
    user = {"HYDRA_BOOTSTRAP": "ssh", "OMPI_MCA_plm_slurm_args": "-x"}
    env = salloc.command_env(user, {"env": {"SLURM_JOB_ID": "7"}}, o)
    assert {k: v for k, v in env.items() if LAUNCHER_RE.match(k)} == env_lines(asked(name, "M1"))
