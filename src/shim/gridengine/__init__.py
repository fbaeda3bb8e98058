"""Grid Engine's words: the one backend every Grid Engine call goes through (backends, engine,
ops, process, the daemon's DRMAA submitter), the readers of qstat, qacct and qhost, Grid Engine's job names,
and translate/ (a Slurm request to qsub's and qalter's argv)."""
