"""srun's lines at -v about its step, as each release prints them (slurm/releases.py), measured on
real 22.05.8, 24.11.5 and 26.05.5 (fixtures/slurm-*/cases.json ``srun_verbose``,
oracle-messages.txt V, oracle-step-ends.txt N): in a job of its own ``JobId=N returned by the
controller`` (26.05: JOB_ID_RETURNED) and ``Nodes vm are ready for job`` (24.11 on: NODES_READY);
then in every step ``jobid N: nodes(1):`vm', cpu counts: 1(x1)``, ``CpuBindType=(null type)``,
``launching StepId=N.0 on host vm, 1 tasks: 0``, the release's plugin line (texts ``srun
--verbose launch``: 22.05 route/default's, 24.11 topology/default's, 26.05 none), ``Node vm, 1
tasks started``, and at the end ``Received task exit notification for 1 task of StepId=N.0
(status=0x0000).`` and ``vm: task 0: Completed`` (a failed task's error line in its place). 22.05
prints the launch plugin's lines after ``launch/slurm: <function>: `` (24.11 on: LAUNCH_LINES_PLAIN).

Pure: the caller prints them (runtime/steps/run.py)."""

from __future__ import annotations

from typing import Mapping, Sequence

from .launch import summary_lines
from .plan import ranges

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ...slurm.releases import Release


def _launch(rel: Release, function: str, text: str) -> str:
    """A line of srun's launch plugin: 22.05 names the plugin and the function that logs it."""
    from ...slurm import releases

    return text if rel.has(releases.LAUNCH_LINES_PLAIN) else f"launch/slurm: {function}: {text}"


def start_lines(prog: str, rel: Release, *, job_id: int, step_id: int, nodes: str, cpu_counts: str,
                nnodes: int, layout: Sequence[tuple[str, int, Sequence[int]]], own_job: bool,
                cpu_bind: str | None = None) -> list[str]:
    """What srun -v prints before its tasks start: ``own_job`` for the job srun made for itself
    (the lines about that job first), ``nodes`` and ``cpu_counts`` the job's (SLURM_JOB_NODELIST;
    its CPUs per node: ``cpu_counts()``), ``layout`` the step's (host, slots, task ids) per host. The
    CpuBindType line is printed for a step without --cpu-bind (what it says with one was not
    measured)."""
    from ...slurm import releases

    lines = []
    if own_job and rel.has(releases.JOB_ID_RETURNED):
        lines.append(f"JobId={job_id} returned by the controller")
    if own_job and rel.has(releases.NODES_READY):
        lines.append(f"Nodes {nodes} are ready for job")
    lines.append(f"jobid {job_id}: nodes({nnodes}):`{nodes}', cpu counts: {cpu_counts}")
    if not cpu_bind:
        lines.append(_launch(rel, "launch_p_step_launch", "CpuBindType=(null type)"))
    lines += [f"launching StepId={job_id}.{step_id} on host {host}, {len(tids)} tasks: {ranges(list(tids))}"
              for host, _slots, tids in layout]
    lines += rel.texts.get("srun --verbose launch", "").splitlines()
    return [f"{prog}: {line}" for line in lines]


def cpu_counts(counts: Sequence[int]) -> str:
    """The job's CPUs per node as that line prints them: each run of equal counts ``N(xK)``, the
    repeat written even when it is 1 (``1(x1)``; SLURM_JOB_CPUS_PER_NODE would say ``1``)."""
    runs: list[list[int]] = []
    for n in counts:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    return ",".join(f"{n}(x{k})" for n, k in runs)


def started_lines(prog: str, rel: Release, layout: Sequence[tuple[str, int, Sequence[int]]]) -> list[str]:
    """``Node vm, 1 tasks started`` for each host of the step (``tasks`` whatever the count)."""
    return [f"{prog}: " + _launch(rel, "_task_start", f"Node {host}, {len(tids)} tasks started")
            for host, _slots, tids in layout]


def wait_status(code: int, sig: int) -> int:
    """The wait status srun is told (its ``status=0x....``): a signal's number, else the exit code
    in the second byte."""
    return sig & 0x7F if sig else (code & 0xFF) << 8


def end_lines(prog: str, rel: Release, host: str, label: str, statuses: Mapping[int, tuple[int, int]],
              signals: bool = True) -> list[str]:
    """srun's lines at -v as one host's tasks end (``label`` the step's ``N.s``): for each outcome
    (in the order of its first task) ``Received task exit notification for K task(s) of
    StepId=N.s (status=0x....).``, then ``host: task(s) R: Completed`` for tasks that ended well,
    else srun's error line (summary_lines: printed at every verbosity)."""
    groups: dict[int, list[int]] = {}
    for tid in sorted(statuses):
        groups.setdefault(wait_status(*statuses[tid]), []).append(tid)
    lines = []
    for status, tids in groups.items():
        many = "" if len(tids) == 1 else "s"
        lines.append(f"{prog}: " + _launch(rel, "_task_finish", f"Received task exit notification for {len(tids)} "
                                                                f"task{many} of StepId={label} (status=0x{status:04x})."))
        if status == 0:
            word = "task" if len(tids) == 1 else "tasks"
            lines.append(f"{prog}: " + _launch(rel, "_task_finish", f"{host}: {word} {ranges(tids)}: Completed"))
        else:
            lines += summary_lines(host, {t: statuses[t] for t in tids}, prog, signals=signals)
    return lines
