"""getopt_long behaviour of sbatch/srun/salloc, with glibc's exact messages."""

from __future__ import annotations

import json

import pytest

from conftest import SLURM_REF
from shim.errors import ShimError
from shim.slurm.options import sources
from shim.slurm.options.getopt import Table, getopt
from shim.slurm.options.table import OPTIONS
from shim.slurm.options.table import every_table as command_table  # (every release's rows)

CASES = SLURM_REF / "cases.json"
SBATCH = Table("sbatch", OPTIONS)
SRUN = Table("srun", OPTIONS)
SALLOC = Table("salloc", OPTIONS)


def parse(argv, table=SBATCH, **kw):
    parsed, rest = getopt(table, argv, **kw)
    return [(spec.long, value) for spec, value in parsed], rest


def failure(argv, table=SBATCH, **kw) -> ShimError:
    with pytest.raises(ShimError) as info:
        getopt(table, argv, **kw)
    return info.value


def test_long_with_equals_and_separate_word():
    assert parse(["--time=10", "job.sh"]) == ([("time", "10")], ["job.sh"])
    assert parse(["--time", "10", "job.sh"]) == ([("time", "10")], ["job.sh"])
    assert parse(["--job-name="]) == ([("job-name", "")], [])


def test_short_glued_and_separate():
    assert parse(["-n2", "job.sh"]) == ([("ntasks", "2")], ["job.sh"])
    assert parse(["-n", "2", "job.sh"]) == ([("ntasks", "2")], ["job.sh"])


def test_required_value_may_start_with_a_dash():
    assert parse(["-J", "-x", "job.sh"]) == ([("job-name", "-x")], ["job.sh"])
    assert parse(["--output", "--weird"]) == ([("output", "--weird")], [])


def test_bundles():
    assert parse(["-HQv", "job.sh"]) == ([("hold", None), ("quiet", None), ("verbose", None)], ["job.sh"])
    assert parse(["-Hn2"]) == ([("hold", None), ("ntasks", "2")], [])
    assert parse(["-Hn", "2"]) == ([("hold", None), ("ntasks", "2")], [])
    assert parse(["-vvv"]) == ([("verbose", None)] * 3, [])


def test_unique_prefixes():
    assert parse(["--part=gpu", "job.sh"]) == ([("partition", "gpu")], ["job.sh"])
    assert parse(["--parti", "gpu"]) == ([("partition", "gpu")], [])
    assert parse(["--mail-u", "me"]) == ([("mail-user", "me")], [])


def test_exact_name_beats_longer_names():
    assert parse(["--mem=5"]) == ([("mem", "5")], [])
    assert parse(["--gpus=1"]) == ([("gpus", "1")], [])
    assert parse(["--wait"]) == ([("wait", None)], [])
    assert parse(["--cluster=c"]) == ([("cluster", "c")], [])


def test_ambiguous_prefix():
    err = failure(["--mem-p", "5"])
    assert err.lines == [
        "sbatch: option '--mem-p' is ambiguous; possibilities: '--mem-per-cpu' '--mem-per-gpu'",
        'Try "sbatch --help" for more information',
    ]
    assert err.code == 255


def test_ambiguous_prefix_echoes_the_value():
    err = failure(["--mem-p=5"])
    assert err.lines[0] == "sbatch: option '--mem-p=5' is ambiguous; possibilities: '--mem-per-cpu' '--mem-per-gpu'"


def test_ambiguity_lists_aliases_once():
    # --cpu_bind is the same option as --cpu-bind: glibc lists only the first of them
    err = failure(["--cpu"], SRUN)
    assert err.lines[0] == (
        "srun: option '--cpu' is ambiguous; possibilities: '--cpu-bind' '--cpu-freq' '--cpus-per-gpu' "
        "'--cpus-per-task'"
    )
    assert parse(["--cpu-b=none"], SRUN) == ([("cpu-bind", "none")], [])


def test_ambiguity_follows_slurms_option_order():
    err = failure(["--job=x"], command_table("srun"))
    assert err.lines[0] == "srun: option '--job=x' is ambiguous; possibilities: '--jobid' '--job-name'"
    assert parse(["--job", "x"], command_table("sbatch")) == ([("job-name", "x")], [])


def test_optional_argument_only_with_equals():
    assert parse(["--exclusive", "job.sh"]) == ([("exclusive", None)], ["job.sh"])
    assert parse(["--exclusive=user", "job.sh"]) == ([("exclusive", "user")], ["job.sh"])
    assert parse(["--nice", "5"]) == ([("nice", None)], ["5"])
    assert parse(["-I5", "true"], SRUN) == ([("immediate", "5")], ["true"])
    assert parse(["-I", "5"], SRUN) == ([("immediate", None)], ["5"])
    assert parse(["-k", "job.sh"]) == ([("no-kill", None)], ["job.sh"])


def test_double_dash_ends_options():
    assert parse(["-n", "2", "--", "job.sh", "-N", "3"]) == ([("ntasks", "2")], ["job.sh", "-N", "3"])
    assert parse(["--", "--time"]) == ([], ["--time"])
    assert parse(["-n", "2", "--", "-x"], stop_at_positional=False) == ([("ntasks", "2")], ["-x"])


def test_stops_at_first_positional():
    assert parse(["job.sh", "--time"]) == ([], ["job.sh", "--time"])
    assert parse(["-n2", "job.sh", "-n", "3", "--bogus"]) == ([("ntasks", "2")], ["job.sh", "-n", "3", "--bogus"])
    assert parse(["-N1", "hostname", "-f"], SRUN) == ([("nodes", "1")], ["hostname", "-f"])
    assert parse(["-"]) == ([], ["-"])


def test_directive_mode_keeps_going():
    assert parse(["-n", "2", "stray", "-N", "1"], stop_at_positional=False) == (
        [("ntasks", "2"), ("nodes", "1")], ["stray"],
    )


def test_unknown_long_option():
    err = failure(["--bogus", "job.sh"])
    assert err.lines == ["sbatch: unrecognized option '--bogus'", 'Try "sbatch --help" for more information']
    assert err.code == 255
    assert failure(["--bogus=1"]).lines[0] == "sbatch: unrecognized option '--bogus=1'"
    assert failure(["--bogus"], SRUN).lines == [
        "srun: unrecognized option '--bogus'", 'Try "srun --help" for more information',
    ]


def test_unknown_short_option():
    err = failure(["-Z", "job.sh"])
    assert err.lines == ["sbatch: invalid option -- 'Z'", 'Try "sbatch --help" for more information']
    assert err.code == 255
    assert failure(["-HZ"]).lines[0] == "sbatch: invalid option -- 'Z'"


def test_options_of_other_commands_are_unknown():
    assert failure(["--label"]).lines[0] == "sbatch: unrecognized option '--label'"
    assert failure(["-l"]).lines[0] == "sbatch: invalid option -- 'l'"
    assert failure(["--wrap=true"], SRUN).lines[0] == "srun: unrecognized option '--wrap=true'"


def test_missing_arguments():
    err = failure(["--time"])
    assert err.lines == ["sbatch: option '--time' requires an argument", 'Try "sbatch --help" for more information']
    assert failure(["--wc"]).lines[0] == "sbatch: option '--wckey' requires an argument"
    assert failure(["-t"]).lines[0] == "sbatch: option requires an argument -- 't'"


def test_flag_with_a_value():
    assert failure(["--hold=1"]).lines[0] == "sbatch: option '--hold' doesn't allow an argument"
    assert failure(["--hol=1"]).lines[0] == "sbatch: option '--hold' doesn't allow an argument"


def test_letter_meanings_per_command():
    assert parse(["-K", "cmd"], SRUN) == ([("kill-on-bad-exit", None)], ["cmd"])
    assert parse(["-K", "cmd"], SALLOC) == ([("kill-command", None)], ["cmd"])
    assert parse(["-W", "5", "cmd"], SRUN) == ([("wait", "5")], ["cmd"])
    assert parse(["-W", "job.sh"]) == ([("wait", None)], ["job.sh"])


# --- merged with the other sources ----------------------------------------------------------------


@pytest.fixture(scope="module")
def reference_cases() -> dict:
    if not CASES.exists():
        pytest.fail(f"reference capture {CASES} is missing (see {CASES.parent / 'README.md'})", pytrace=False)
    return json.loads(CASES.read_text())


def test_directive_bogus_reference_case(reference_cases):
    case = reference_cases["sbatch_directive_bogus"]
    with pytest.raises(ShimError) as info:
        sources.collect(SBATCH, ["withdirectives.sh"], script_words=["--bogus-directive"], environ={})
    assert "\n".join(info.value.lines) + "\n" == case["stderr"]
    assert info.value.code == case["rc"]


def test_missing_argument_after_the_script_is_the_scripts(reference_cases):
    case = reference_cases["sbatch_accepted_missing_optarg"]
    assert case["rc"] == 0
    opts = sources.collect(SBATCH, ["job.sh", "--time"], environ={})
    assert opts == {}


def test_precedence_script_env_cli():
    words = sources.directive_words("#!/bin/sh\n#SBATCH -n 2 -J fromscript\n#SBATCH --time=5\necho\n#SBATCH -N 9\n")
    assert words == ["-n", "2", "-J", "fromscript", "--time=5"]
    opts = sources.collect(SBATCH, ["-n", "4"], script_words=words, environ={"SBATCH_JOB_NAME": "fromenv"})
    assert (opts.ntasks, opts.job_name, opts.time, opts.nodes) == (4, "fromenv", 5, None)
    assert opts.source == {"ntasks": "cli", "job_name": "env", "time": "script"}


def test_counts_and_negations():
    opts = sources.collect(SBATCH, ["-vv", "--requeue", "--no-requeue", "-v"], environ={})
    assert opts.verbose == 3
    assert opts.requeue is False
    assert sources.collect(SBATCH, ["--no-requeue", "--requeue"], environ={}).requeue is True


def test_srun_inherits_the_job_geometry_from_the_environment():
    env = {"SLURM_NTASKS": "2", "SLURM_NPROCS": "7", "SLURM_JOB_NUM_NODES": "1", "SLURM_MEM_PER_CPU": "100",
           "SLURM_OPEN_MODE": "a", "SLURM_DISTRIBUTION": "cyclic", "SLURM_HINT": "nomultithread",
           "SLURM_EXPORT_ENV": "NONE", "SLURM_JOB_NAME": "envdump.sh"}
    opts = sources.collect(SRUN, ["-n1", "hostname"], environ=env)
    assert opts.ntasks == 1 and opts.source["ntasks"] == "cli"
    assert opts.nodes == (1, 1)
    assert opts.mem_per_cpu == 100
    assert opts.open_mode == "append"
    assert opts.distribution == "cyclic"
    assert opts.export == "NONE"  # (options/export.py reads the text)
    assert opts.job_name == "envdump.sh"
    assert sources.collect(SRUN, ["true"], environ=env).ntasks == 2


def test_environment_flags():
    assert sources.collect(SBATCH, [], environ={"SBATCH_WAIT": ""}).wait is True
    assert sources.collect(SBATCH, [], environ={"SBATCH_WAIT": "yes"}).wait is True
    assert sources.collect(SBATCH, [], environ={"SBATCH_WAIT": "0"}).wait is None
    assert sources.collect(SBATCH, [], environ={"SBATCH_EXCLUSIVE": ""}).exclusive == "exclusive"
    assert sources.collect(SBATCH, [], environ={"SBATCH_EXCLUSIVE": "user"}).exclusive == "user"


def test_bad_value_in_environment_fails_like_the_option():
    with pytest.raises(ShimError) as info:
        sources.collect(SBATCH, ["-t", "5"], environ={"SBATCH_TIMELIMIT": "abc"})
    assert info.value.lines == ["sbatch: error: Invalid --time specification"]
    assert info.value.code == 255
