"""The site's admin tools behind ``slurm-shim``: the reference cells (cluster, cluster_ocs),
install and doctor, and shell completion."""
