"""Slurm's command-line options: one declarative table, a getopt_long-exact parser, and the sources
(argv, ``#SBATCH`` directives, input environment variables) merged with Slurm's precedence."""
