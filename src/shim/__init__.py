"""slurm-shim: Slurm's command-line interface on top of Grid Engine."""

__version__ = "0.1.0"  # the package's version: pyproject.toml reads it from here (one place)
SLURM_VERSION = "22.05.8"  # 22.05's, which its OpenAPI v0.0.38 documents carry; a site's own: releases.current()
