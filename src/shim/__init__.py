"""slurm-shim: Slurm's command-line interface on top of Grid Engine."""

__version__ = "0.1.0"
