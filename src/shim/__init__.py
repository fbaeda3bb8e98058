"""slurm-shim: Slurm's command-line interface on top of Grid Engine."""

__version__ = "0.1.0"  # the package's version: pyproject.toml reads it from here (one place)
SLURM_VERSION = "22.05.8"  # the default release's (releases.DEFAULT); a site picks its own: releases.current()
