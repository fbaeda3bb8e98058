"""The in-job runtime: code that runs on execution hosts, inside jobs and steps.

Standard library and light shim modules only (``proc``, ``state``, ``records``, ``hostlist``), and
fast to start: every batch job, step and salloc holder starts here under ``python -I``.
"""
