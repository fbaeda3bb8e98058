"""The site configuration: one TOML file describing how Slurm concepts map onto this Grid Engine.

``$SLURM_SHIM_CONFIG``, else ``/etc/slurm-shim/config.toml``. Unknown keys and bad values are
errors naming the file and the key: a misspelt key would otherwise silently change translation.
"""

from __future__ import annotations

import os
import tomllib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import ShimError
from .siteconf import NS

DEFAULT_PATH = "/etc/slurm-shim/config.toml"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GridEngine(_Model):
    sge_root: str = "/var/lib/gridengine"
    sge_cell: str = "default"
    bin_dir: str = Field("", description="directory of qsub/qstat/...; empty means PATH")
    timeout: float = Field(5.0, gt=0, description="seconds a q* call may wait for qmaster before the command "
                           "fails with Slurm's 'Socket timed out' (Slurm's MessageTimeout); waiting for a job "
                           "(srun, salloc, sbatch --wait) is not one call and is not cut by it")


class Partition(_Model):
    queue: str
    pe: str = Field("smp", description="parallel environment for multi-slot jobs on one host")
    pe_multinode: str = Field("mpi", description="parallel environment for jobs over several hosts")
    default: bool = False
    max_time: str = "UNLIMITED"
    default_time: str | None = None
    nodes: list[str] = Field(default_factory=list, description="hosts; empty means ask Grid Engine")


class Memory(_Model):
    complex: str = "mem_free"
    scope: Literal["slot", "job", "host"] = "slot"
    default_per_cpu_mb: int = Field(0, ge=0, description="Slurm DefMemPerCPU; 0 for none")


class Consumable(_Model):
    complex: str
    scope: Literal["slot", "job", "host"] = "job"


class Cluster(_Model):
    name: str = "cluster"
    state_dir: str = "/var/spool/slurm-shim"
    min_job_age: int = Field(300, ge=0, description="seconds an ended job stays visible to squeue")
    max_array_size: int = Field(1001, gt=0)
    project_from: Literal["none", "qos", "wckey", "account"] = "none"


class Submit(_Model):
    method: Literal["qsub", "agent"] = "qsub"
    agent_idle_minutes: float = Field(10.0, gt=0, description="the submit agent exits after this long without requests")


class SiteConfig(_Model):
    cluster: Cluster = Cluster()
    gridengine: GridEngine = GridEngine()
    partitions: dict[str, Partition] = Field(default_factory=lambda: {"debug": Partition(queue="all.q", default=True)})
    memory: Memory = Memory()
    gres: dict[str, Consumable] = Field(default_factory=dict)
    licenses: dict[str, Consumable] = Field(default_factory=dict)
    features: dict[str, str] = Field(default_factory=dict, description="--constraint feature -> boolean complex")
    exclusive_complex: str = Field("", description="boolean complex that reserves a whole host (--exclusive)")
    submit: Submit = Submit()

    @model_validator(mode="after")
    def _one_default(self) -> "SiteConfig":
        defaults = [n for n, p in self.partitions.items() if p.default]
        if len(defaults) > 1:
            raise ValueError(f"more than one default partition: {', '.join(defaults)}")
        if not self.partitions:
            raise ValueError("no partitions")
        return self

    @property
    def default_partition(self) -> str:
        for name, p in self.partitions.items():
            if p.default:
                return name
        return next(iter(self.partitions))


def config_path() -> str:
    return os.environ.get("SLURM_SHIM_CONFIG") or DEFAULT_PATH


def parse(text: str, path: str) -> SiteConfig:
    """Validate TOML text; errors name the file and the dotted key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ShimError(f"slurm-shim: error: {path}: {e}") from e
    try:
        return SiteConfig.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            key = ".".join(str(p) for p in err["loc"]) or "(top level)"
            msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            lines.append(f"slurm-shim: error: {path}: {key}: {msg}")
        raise ShimError(*lines) from e


def load(path: str | None = None) -> SiteConfig:
    """The validated site config; a missing default file means built-in defaults."""
    p = path or config_path()
    try:
        with open(p, encoding="utf-8") as f:
            return parse(f.read(), p)
    except FileNotFoundError:
        if path is not None or "SLURM_SHIM_CONFIG" in os.environ:
            raise ShimError(f"slurm-shim: error: {p}: no such file") from None
        return SiteConfig()


def plain(cfg: SiteConfig) -> NS:
    """The config as plain attribute-dicts (what siteconf's cache holds)."""
    data = cfg.model_dump()
    data["default_partition"] = cfg.default_partition
    return NS.wrap(data)


def ge_env(cfg: SiteConfig) -> dict[str, str]:
    """The environment the q* commands need (SGE_ROOT/SGE_CELL) on top of ours."""
    env = dict(os.environ)
    env.setdefault("SGE_ROOT", cfg.gridengine.sge_root)
    env.setdefault("SGE_CELL", cfg.gridengine.sge_cell)
    return env
