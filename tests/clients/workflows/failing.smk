# One rule succeeds, one fails (exit 3): snakemake must report the failed rule and stop.
rule all:
    input:
        "out/ok.txt",
        "out/bad.txt",


rule ok:
    output:
        "out/ok.txt",
    resources:
        slurm_partition="debug",
        mem_mb=100,
        runtime=3,
    shell:
        "echo fine > {output}"


rule bad:
    output:
        "out/bad.txt",
    resources:
        slurm_partition="debug",
        mem_mb=100,
        runtime=3,
    shell:
        "echo about to fail; exit 3"
