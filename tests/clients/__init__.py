"""Integration tests that drive real Slurm clients (submitit, dask-jobqueue, Snakemake) through the shim.

A package, so that its conftest.py is imported as clients.conftest and never shadows tests/conftest.py
(the other test directories import helpers with `from conftest import ...`)."""
