"""Slurm's words: the commands' options and their grammars (options/), Slurm's job ids, host
lists, times and releases, the scheduler-neutral model, and the renderers of Slurm's output
(render/). Nothing here reads or writes a file or calls Grid Engine."""
