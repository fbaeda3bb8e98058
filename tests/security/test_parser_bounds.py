"""F-11: parsers are bounded in time and memory. The review's recipes (a 3 KB host list of
million-host ranges, ``afterok:1_[0-20000000]``, a 60,000-digit host name) once took seconds and
gigabytes before failing; each must now be refused (or answered) at once with Slurm's message,
through the library and through the real commands under an address-space cap.

F-18: a job name from a raw ``qsub -N sx_<base32>`` never decodes into control characters, and the
text renderers escape whatever non-printable characters user-controlled fields hold.

F-30 (review 3): scancel -w's hostfile counts ``NAME*N`` before it repeats a name, and never
waits on a FIFO.

Only the tests marked gridengine need Grid Engine; the others run the commands' own parsing,
which refuses these inputs before any Grid Engine call."""

from __future__ import annotations

import os
import resource
import subprocess
import time
import tracemalloc

import pytest

from conftest import as_user_argv, command_dir, open_dir, shim_env
from security.conftest import VICTIM, as_user
from shim.slurm import hostlist
from shim.errors import ShimError
from shim.slurm.hostlist import HostlistError
from shim.slurm.options import values as v

CPU_BOUND = 1.0  # seconds of CPU per recipe
MEM_BOUND = 50 << 20  # bytes a recipe may allocate (tracemalloc peak)
AS_CAP = 256 << 20  # address space a command may map (a shim command needs about 40 MB)

MILLION = "0-999999"
X10 = "n[" + ",".join([MILLION] * 10) + "]"
X300 = "n[" + ",".join([MILLION] * 300) + "]"  # the review's "3 KB argument"
FULL_RANGES = "n[" + ",".join(["0-65535"] * 300) + "]"  # each range within Slurm's MAX_RANGE
DIGITS_X = "1" * 60000 + "x"


def _call(fn, args, kw):
    try:
        return fn(*args, **kw)
    except Exception as e:  # noqa: BLE001 - the caller checks which
        return e


def bounded(fn, *args, **kw):
    """fn(*args) -> its result or the exception it raised, asserting the CPU bound (a plain run)
    and the memory bound (a second run under tracemalloc, which would slow the first)."""
    t0 = time.process_time()
    _call(fn, args, kw)
    cpu = time.process_time() - t0
    assert cpu < CPU_BOUND, f"{getattr(fn, '__name__', fn)}: {cpu:.2f} s CPU"
    tracemalloc.start()
    try:
        result = _call(fn, args, kw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEM_BOUND, f"{getattr(fn, '__name__', fn)}: {peak / 2**20:.0f} MB"
    return result


def test_the_recipe_is_a_3kb_argument():
    assert len(X300) < 3 * 1024 and len(FULL_RANGES) < 3 * 1024


# --- library --------------------------------------------------------------------------------------


@pytest.mark.parametrize("expr", [X10, X300])
def test_million_host_ranges_are_refused_with_slurms_message(expr):
    e = bounded(hostlist.expand, expr)
    assert isinstance(e, HostlistError)
    assert str(e) == "_parse_single_range: Too many hosts in range `0-999999'"
    assert isinstance(bounded(hostlist.count, expr), HostlistError)


@pytest.mark.parametrize("expr", [
    FULL_RANGES,
    ",".join(["n[0-65535]"] * 300),
    " ".join(["n[0-65535]"] * 300),
    "a[0-65535]b[0-65535]c[0-65535]d[0-65535]",
    "n[" + "0" * 2900 + "-65535]",
])
def test_lists_within_slurms_range_limit_are_counted_before_they_are_built(expr):
    e = bounded(hostlist.expand, expr)
    assert isinstance(e, HostlistError) and str(e).startswith("Too many hosts in hostlist: "), e


def test_the_largest_list_accepted_stays_within_the_bounds():
    expr = ",".join(f"{p}[0-65535]" for p in "abcd")  # MAX_HOSTS names
    hosts = bounded(hostlist.expand, expr)
    assert len(hosts) == hostlist.MAX_HOSTS
    assert bounded(hostlist.compress, hosts) == expr


@pytest.mark.parametrize("host", [DIGITS_X, "x" + "1" * 60000, "1" * 60000])
def test_a_long_digit_run_is_linear_work(host):
    assert bounded(hostlist.expand, host) == [host]
    assert bounded(hostlist.compress, [host, host]) == host
    assert bounded(hostlist.compress, [host, host], sort=False) == f"{host},{host}"


@pytest.mark.parametrize("spec", ["afterok:1_[0-20000000]", "afterok:1_[0-99999999]", "afterok:1_[1001]",
                                  "afterok:1_[0-" + "9" * 5000 + "]"])
def test_dependency_task_ranges_stop_at_max_array_size(spec):
    e = bounded(v.dependency, spec, "sbatch")
    assert isinstance(e, ShimError)
    assert e.lines == ["sbatch: error: Batch job submission failed: Job dependency problem"] and e.code == 1


def test_dependency_task_ranges_follow_the_configured_max_array_size():
    assert v.dependency("afterok:1_[998-999]", "sbatch").terms == [("afterok", ["1_998", "1_999"])]
    assert bounded(v.dependency, "afterok:1_[0-4999]", "sbatch", max_array_size=5000).terms[0][1][-1] == "1_4999"
    assert isinstance(bounded(v.dependency, "afterok:1_[5000]", "sbatch", max_array_size=5000), ShimError)


def test_many_dependency_task_ranges_in_one_argument_are_capped():
    spec = "afterok:" + ":".join(["1_[0-1000]"] * 250)  # 250,250 ids from 3 KB
    assert len(spec) < 3 * 1024
    assert isinstance(bounded(v.dependency, spec, "sbatch"), ShimError)
    ok = "afterok:" + ":".join(f"{j}_[0-1000]" for j in range(1, 60))
    assert len(bounded(v.dependency, ok, "sbatch").terms[0][1]) == 59 * 1001


@pytest.mark.parametrize("text", ["0-99999999", "0-1000", ",".join(["0-1000"] * 400), "9" * 60000,
                                  "0-1000:" + "9" * 5000])
def test_array_specs_are_bounded(text):
    result = bounded(v.array_spec, text, "sbatch")
    assert isinstance(result, (tuple, ShimError))
    if isinstance(result, tuple):
        assert result[0] == list(range(1001))


def test_array_spec_takes_max_array_size():
    assert v.array_spec("4999", "sbatch", 5000) == ([4999], None)
    with pytest.raises(ShimError, match="Invalid job array specification"):
        v.array_spec("5000", "sbatch", 5000)


@pytest.mark.parametrize("fn, text", [
    (v.dependency, "afterok:1_[" + "0" * 5000 + "1]"),  # Python's digit limit counts leading zeros
    (lambda t, p: hostlist.expand(t), "n[" + "0" * 5000 + "-1]"),
    (v.dependency, "after:1_2+" + "0" * 5000 + "5"),  # a delay's digits too
    (v.time_limit, "9" * 60000),
    (v.begin_time, "now+" + "9" * 60000),
    (v.begin_time, " " * 100000 + "now"),
    (v.positive(opt="--ntasks"), "9" * 60000),
    (v.gres_spec, "gpu:" + "9" * 60000),
    (v.distribution, "plane=" + "9" * 60000),
    (v.dependency, "afterok:" + "1" * 60000),
    (v.dependency, "1" * 60000 + "_[1]"),
    (v.mem_mb, "9" * 60000),
])
def test_long_numbers_are_linear_work_and_never_a_crash(fn, text):
    result = bounded(fn, text, "sbatch")
    assert not isinstance(result, Exception) or isinstance(result, ShimError), repr(result)[:200]


# --- the real commands, under an address-space cap -----------------------------------------------


def capped(*argv: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run a shim command with RLIMIT_AS = AS_CAP (and a CPU-time backstop); (result, CPU seconds)."""

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (AS_CAP, AS_CAP))
        resource.setrlimit(resource.RLIMIT_CPU, (20, 20))

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cp = subprocess.run([str(command_dir() / argv[0]), *argv[1:]], capture_output=True, text=True,
                        env=shim_env(), cwd="/", timeout=60, preexec_fn=limits)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cp, cpu


RANGE_ERROR = "error: _parse_single_range: Too many hosts in range `0-999999'\n"
DEP_ERROR = "sbatch: error: Batch job submission failed: Job dependency problem\n"


@pytest.mark.parametrize("argv, stderr", [
    (("scontrol", "show", "hostnames", X10), "scontrol: " + RANGE_ERROR),
    (("scontrol", "show", "hostnames", X300), "scontrol: " + RANGE_ERROR),
    (("scontrol", "show", "hostlist", X300), "scontrol: " + RANGE_ERROR),
    (("squeue", "-w", X300), "squeue: " + RANGE_ERROR),
    (("sbatch", "--test-only", "-w", X300, "--wrap", "true"), "sbatch: " + RANGE_ERROR),
    (("sbatch", "--test-only", "-x", X300, "--wrap", "true"), "sbatch: " + RANGE_ERROR),
    (("sbatch", "--test-only", "--dependency=afterok:1_[0-20000000]", "--wrap", "true"), DEP_ERROR),
    (("sbatch", "--test-only", "--dependency=afterok:1_[0-99999999]", "--wrap", "true"), DEP_ERROR),
])
def test_commands_refuse_the_recipes_at_once(argv, stderr):
    cp, cpu = capped(*argv)
    assert (cp.returncode, cp.stderr, cp.stdout) == (1, stderr, "")
    assert cpu < CPU_BOUND, f"{cpu:.2f} s CPU"


@pytest.mark.parametrize("argv", [
    ("scontrol", "show", "hostnames", " ".join(["n[0-65535]"] * 200)),
    ("scontrol", "show", "hostlist", " ".join(["n[0-65535]"] * 200)),
    ("squeue", "-w", " ".join(["n[0-65535]"] * 200)),
    ("sbatch", "--test-only", "-w", FULL_RANGES, "--wrap", "true"),
])
def test_parts_between_blanks_share_one_cap(argv):
    cp, cpu = capped(*argv)
    assert cp.returncode == 1 and cp.stderr.startswith(f"{argv[0]}: error: Too many hosts in hostlist: "), \
        cp.stderr[:300]
    assert cpu < CPU_BOUND, f"{cpu:.2f} s CPU"


@pytest.mark.parametrize("verb", ["hostnames", "hostlist", "hostlistsorted"])
def test_a_60000_digit_host_name_is_instant(verb):
    cp, cpu = capped("scontrol", "show", verb, f"{DIGITS_X},x{'1' * 60000}")
    assert cp.returncode == 0, cp.stderr[:300]
    names_out = cp.stdout.split() if verb == "hostnames" else cp.stdout.strip().split(",")
    assert sorted(names_out) == sorted([DIGITS_X, "x" + "1" * 60000])
    assert cpu < CPU_BOUND, f"{cpu:.2f} s CPU"


@pytest.mark.parametrize("cmd", ["sbatch", "srun"])
def test_a_huge_node_count_is_refused_before_a_list_is_built(cmd):
    cp, cpu = capped(cmd, "--test-only", "-N", "99999999999", *(["--wrap", "true"] if cmd == "sbatch" else ["true"]))
    assert cp.returncode == 1 and "internal error" not in cp.stderr, cp.stderr
    assert cp.stderr.startswith(f"{cmd}: error: "), cp.stderr
    assert cpu < CPU_BOUND, f"{cpu:.2f} s CPU"


# --- F-30 (review 3): scancel -w's hostfile ---------------------------------------------------------

TOO_LONG = "Hostlist is too long for the allocate RPC!"
HOSTFILES = [  # (text, Slurm's error): NAME*N as slurm_read_hostfile reads N (glibc's atoi)
    ("node*300000000\n", TOO_LONG),  # the review's 15 bytes: 2.36 GB, then MemoryError
    ("node*" + "9" * 25 + "\n", "Hostlist is empty!"),  # atoi: LONG_MAX's low 32 bits, -1: no name
    ("node*" + "9" * 5000 + "\n", "Hostlist is empty!"),  # int() of it: ValueError (4300 digits)
    ("a,b*200000\nc*62144\n", TOO_LONG),  # 262,145 names: one past MAX_HOSTS, counted first
]


@pytest.mark.parametrize("text, why", HOSTFILES)
def test_a_hostfiles_repeat_count_is_bounded_before_it_expands(text, why):
    assert bounded(hostlist.hostfile, text, "/f") == (None, why)


def test_a_hostfile_at_max_hosts_is_read():
    hosts, why = bounded(hostlist.hostfile, f"a,b*{hostlist.MAX_HOSTS - 2}\nc\n", "/f")
    assert why == "" and len(hosts) == hostlist.MAX_HOSTS and hosts[-1] == "c"


@pytest.fixture
def held_job(victim):
    """A held job of the victim's: scancel -w reads the hostfile when it filters a job."""
    cp = as_user(VICTIM, "sbatch", "--parsable", "-H", "-o", "/dev/null", "--wrap", "true", cwd="/tmp")
    assert cp.returncode == 0, cp.stderr
    job = cp.stdout.strip().split(";")[0]
    yield job
    as_user(VICTIM, "scancel", job)


@pytest.mark.gridengine
@pytest.mark.parametrize("kind", ["15 bytes", "25 nines", "5000 digits", "fifo"])
def test_scancel_answers_every_hostfile_at_once(kind, held_job):
    """As the victim, her command in-process (no warm service) under the address-space cap: each
    hostfile is answered with Slurm's error at once and exit 0, as scancel.c goes on with the
    text as the list (it names no host: her held job stays). The FIFO has no writer: open()
    blocked on it for ever. Before: 2.36 GB and MemoryError, OverflowError, ValueError."""
    d = open_dir("hostfile", 0o755)
    path = d / "hosts"
    if kind == "fifo":
        os.mkfifo(path, 0o644)
        why = "Hostlist is empty!"
    else:
        text, why = HOSTFILES[["15 bytes", "25 nines", "5000 digits"].index(kind)]
        path.write_text(text)
        path.chmod(0o644)

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (AS_CAP, AS_CAP))
        resource.setrlimit(resource.RLIMIT_CPU, (20, 20))

    env = shim_env({"SLURM_SHIM_SERVICE": "0"})
    cp = subprocess.run(as_user_argv(VICTIM, env, ["env", "SLURM_SHIM_SERVICE=0", "scancel", "-w", str(path)]),
                        capture_output=True, text=True, env=env, cwd="/", timeout=60, preexec_fn=limits)
    # (said once for each of her jobs scancel looks at, as scancel.c reads the file job by job)
    assert (cp.returncode, set(cp.stderr.splitlines()), cp.stdout) == (0, {f"scancel: error: {why}"}, ""), \
        cp.stderr[-500:]
    assert as_user(VICTIM, "squeue", "-h", "-j", held_job, "-o", "%T").stdout.strip() == "PENDING"


# --- F-18: names and what the text renderers print -----------------------------------------------

EVIL = "\x1b[2J\x1b[31mPWNED\n   4242 debug fake alice R"


def _sx(text: str) -> str:
    """What a raw ``qsub -N`` can name a job: the shim's encoding of any text."""
    import base64

    return "sx_" + base64.b32encode(text.encode()).decode().rstrip("=").lower()


@pytest.mark.parametrize("text", [EVIL, "a\tb", "\x7f", "x\u202ey", "\x00", "line\r", "\u2028", "\x85"])
def test_names_never_decode_into_control_characters(text):
    from shim.gridengine import names

    assert names.encode(text) == _sx(text)  # sbatch -J would store it like this too
    assert names.decode(_sx(text)) == _sx(text)  # and it is shown as Grid Engine holds it
    assert names.decode(_sx(text)).isprintable()


@pytest.mark.parametrize("text", ["my job", "1st", "a/b:c@d*e", "π ≈ 3.14", "sx_x", "x" * 250, "日本語", " "])
def test_names_encode_makes_still_decode(text):
    from shim.gridengine import names

    assert names.decode(names.encode(text)) == text


@pytest.mark.parametrize("ge_name", [
    "sx_MFRGG",  # upper case: encode writes lower case
    "sx_mfrgg===",  # padding: encode strips it
    "sx_mfrgg",  # "abc" is a safe name: encode leaves it as it is
    "sx_mfrgh",  # non-zero spare bits: not what encode makes of any text
    "sx_0", "sx_7777777",
])
def test_only_what_encode_writes_decodes(ge_name):
    from shim.gridengine import names

    assert names.decode(ge_name) == ge_name


def test_the_shared_escape():
    from shim.slurm.render.fmt import printable

    assert printable("plain text, é, 日本, a\\x1b") == "plain text, é, 日本, a\\x1b"
    assert printable(EVIL) == "\\x1b[2J\\x1b[31mPWNED\\x0a   4242 debug fake alice R"
    assert printable("\t\r\x7f\x85\u2028\u202e\U000e0001") == "\\x09\\x0d\\x7f\\x85\\u2028\\u202e\\U000e0001"


def test_squeue_and_sinfo_lines_escape_every_value():
    from shim.slurm.model import JobRecord
    from shim.slurm.render import fmt
    from shim.slurm.render import squeue as view

    rec = JobRecord(job_id=7, name=EVIL, user="mallory", state="PENDING", reason="None", partition="debug",
                    comment="c\x1b]0;title\x07", work_dir="/w\nx")
    rec.extra["detailed"] = True  # the fields above are all there is (no submit record is read)
    ctx = view.Ctx(cfg=None)
    for spec in (view.DEFAULT_FORMAT, "%i|%j|%k|%Z", "%.200j"):
        f = fmt.parse_percent(spec, view.REGISTRY)
        for line in fmt.render_lines(f, [rec], ctx, header=False) + [fmt.render_row(f, rec, ctx)]:
            assert line.isprintable(), repr(line)
    f = fmt.parse_percent("%j|%k", view.REGISTRY)
    assert fmt.render_lines(f, [rec], ctx, header=False) == [fmt.printable(EVIL) + "|c\\x1b]0;title\\x07"]
    tab = fmt.parse_percent("%i\t%j", view.REGISTRY)  # the user's own format text is kept
    assert fmt.render_lines(tab, [rec], ctx, header=False)[0].startswith("7\t\\x1b[2J")


@pytest.mark.parametrize("parsable", [None, "ending", "no_ending"])
def test_sacct_lines_escape_every_value(parsable):
    from shim.slurm.render import sacct

    row = sacct.Row(job_id=7, name=EVIL, user="mallory", state="PENDING", workdir="/w\nx", comment="\x1b[H")
    text = sacct.render([row], sacct.parse_fields("JobID,JobName%80,WorkDir%20,Comment%20,User"),
                        parsable=parsable)
    lines = text.splitlines()
    assert len(lines) == (2 if parsable else 3) and all(ln.isprintable() for ln in lines), lines
    assert "\\x1b[2J\\x1b[31mPWNED\\x0a" in lines[-1]


@pytest.mark.gridengine
def test_a_raw_qsub_name_cannot_draw_on_another_users_terminal(jobs, mallory, victim):
    """Mallory names a job, by raw qsub, with the encoding of ESC[2J..., a newline and a fake row.
    The victim's squeue and scontrol show job print no ESC and no extra line."""
    from conftest import run, wait_until

    cp = run("qsub", "-terse", "-h", "-N", _sx(EVIL), "-b", "y", "/bin/true", user=mallory, cwd="/tmp")
    assert cp.returncode == 0, cp.stderr
    jid = cp.stdout.strip().split(".")[0]
    jobs.ids.append(jid)
    wait_until(lambda: jobs.ge(jid), 30, "mallory's held job in qstat")
    outputs = {
        "squeue -o": run("squeue", "-j", jid, "-o", "%i|%j|%u", user=victim, cwd="/tmp"),
        "squeue -O": run("squeue", "-j", jid, "-O", "JobID,Name:200", user=victim, cwd="/tmp"),
        "squeue": run("squeue", "-u", mallory, user=victim, cwd="/tmp"),
        "scontrol": run("scontrol", "show", "job", jid, user=victim, cwd="/tmp"),
        "scontrol -o": run("scontrol", "-o", "show", "job", jid, user=victim, cwd="/tmp"),
    }
    for what, out in outputs.items():
        assert out.returncode == 0, (what, out.stderr)
        assert "\x1b" not in out.stdout and "\r" not in out.stdout and "PWNED" not in out.stdout, (what, out.stdout)
    rows = outputs["squeue -o"].stdout.splitlines()
    assert rows == ["JOBID|NAME|USER", f"{jid}|{_sx(EVIL)}|{mallory}"]  # shown as Grid Engine holds it
    lines = outputs["squeue"].stdout.splitlines()  # mallory's jobs, one line each: no line of her making
    assert all(ln.split()[0].isdigit() for ln in lines[1:]), lines
    assert [ln.split()[0] for ln in lines].count(jid) == 1 and not any("fake" in ln for ln in lines), lines
    assert len(outputs["scontrol -o"].stdout.splitlines()) == 1
    assert f"JobName={_sx(EVIL)}" in outputs["scontrol"].stdout
