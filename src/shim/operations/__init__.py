"""What each command does, between its command line (cli/) and Grid Engine (gridengine/): submit
(sbatch, srun, salloc), cancel (scancel), control and show (scontrol), jobqueue (squeue), nodeinfo
(sinfo), policies (sprio, sshare, sacctmgr, sreport), accounting/ (sacct) and jobs (the job list
they share)."""
