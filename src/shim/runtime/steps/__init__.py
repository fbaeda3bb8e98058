"""Job steps: how srun starts tasks inside an allocation, on Grid Engine.

Slurm runs a step by asking one slurmstepd per node to start that node's tasks. Here:

* srun plans the step: which hosts of the allocation (Grid Engine's PE_HOSTFILE) get which task
  ranks, by Slurm's block rule, and the environment every task gets (``SLURM_STEP_*``,
  ``SLURM_PROCID``, ...);
* the tasks of the host srun itself runs on, when srun runs inside the job (an sbatch script, or
  a job made by srun), are started by srun directly: no Grid Engine round trip;
* every other host gets one ``qrsh -inherit <host>`` that runs the host launcher
  (``launch.remote_main``) there, which starts that host's tasks. ``qrsh -inherit`` makes them part of
  the job: Grid Engine accounts for them and kills them with it. It needs the job's id in JOB_ID
  and SGE_TASK_ID, and a parallel environment with ``control_slaves TRUE``; it works from any
  host (that is how srun inside salloc, which runs outside the job, reaches the allocation).

The host launcher (``HostLaunch``) is the slurmstepd part: labels (``-l``), output files with
their patterns, stdin to every task, SLURM_TASK_PID, exec errors worded as slurmstepd's, signal
forwarding, exit statuses. Step ids count up per job in the user's private ``steps/<job>`` (a
counter file under an exclusive lock); each step leaves ``steps/<job>.<step>.json`` there. What
srun hands to a launcher on another host (the step's environment included) travels in a 0600 file
of the user's private ``srun/`` directory, never on a command line (``/proc/*/cmdline`` is
world-readable); the launcher reads it, checks it is its own, and removes it.

Modules: ``allocation`` (which job and hosts), ``plan`` (the request, the layout, environments and
file patterns), ``io`` (stdin, labels, the terminal), ``launch`` (one host's tasks, the far side of
qrsh, exit statuses), ``run`` (one step, start to end), ``job`` (salloc's holder, the job srun
makes). This package re-exports what srun and salloc use.

Imports only the standard library and light shim modules (it also runs on the far side of qrsh).
"""

from __future__ import annotations

from .allocation import Allocation, alloc_path, allocation_env, ancestor_job_env, find_allocation, hosts_from_ge_env, load_allocation, release_path, save_allocation, short_host
from .io import Broadcast, LabelPump, PtyRelay, get_winsize
from .job import descendants, hold_main, job_main, new_job_env, signal_tree
from .launch import KILL_WAIT, HostLaunch, boot_argv, drop_payload, from_rc, global_rc, outcome, quoted, read_payload, remote_main, status_name, summary_lines
from .plan import NO_VAL, StepError, StepRequest, expand_io, export_env, host_env, io_mode, layout, parse_multi_prog, plan_step, ranges, step_env, task_env, varies_per_task
from .run import StepResult, load_step, next_step_id, record_step, run_step

__all__ = [
    "Allocation", "alloc_path", "allocation_env", "ancestor_job_env", "find_allocation", "hosts_from_ge_env",
    "load_allocation", "release_path", "save_allocation", "short_host",
    "Broadcast", "LabelPump", "PtyRelay", "get_winsize",
    "descendants", "hold_main", "job_main", "new_job_env", "signal_tree",
    "KILL_WAIT", "HostLaunch", "boot_argv", "drop_payload", "from_rc", "global_rc", "outcome", "quoted", "read_payload",
    "remote_main", "status_name", "summary_lines",
    "NO_VAL", "StepError", "StepRequest", "expand_io", "export_env", "host_env", "io_mode", "layout", "parse_multi_prog",
    "plan_step", "ranges", "step_env", "task_env", "varies_per_task",
    "StepResult", "load_step", "next_step_id", "record_step", "run_step",
]
