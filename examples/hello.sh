#!/bin/bash
#SBATCH --job-name=hello-shim
#SBATCH --ntasks=2
#SBATCH --cpus-per-task=1
#SBATCH --mem=200M
#SBATCH --time=00:05:00
#SBATCH --licenses=anthropic_api:1

# An ordinary Slurm batch script: nothing here knows about Grid Engine.
echo "Hello from job $SLURM_JOB_ID ($SLURM_JOB_NAME) on $SLURMD_NODENAME"
echo "partition=$SLURM_JOB_PARTITION nodes=$SLURM_JOB_NODELIST ntasks=$SLURM_NTASKS cpus_per_task=$SLURM_CPUS_PER_TASK"
echo "submitted from $SLURM_SUBMIT_DIR, running in $(pwd)"
echo "arguments: $# ($*)"
sleep 2
echo "done"
