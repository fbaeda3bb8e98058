"""The site configuration: one TOML file describing how Slurm concepts map onto this Grid Engine.

``$SLURM_SHIM_CONFIG``, else ``/etc/slurm-shim/config.toml``. Unknown keys and bad values are
errors naming the file and the key: a misspelt key would otherwise silently change translation.
"""

from __future__ import annotations

import os
import tomllib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ShimError
from .plain import NS

DEFAULT_PATH = "/etc/slurm-shim/config.toml"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GridEngine(_Model):
    sge_root: str = "/var/lib/gridengine"
    sge_cell: str = "default"
    bin_dir: str = Field("", description="directory of qsub/qstat/...; empty means PATH")
    timeout: float = Field(10.0, gt=0, description="seconds a q* call may wait for qmaster before the command "
                           "fails with Slurm's 'Socket timed out' (Slurm's MessageTimeout, whose default is 10 "
                           "too: a qmaster busy for a few seconds is waited for); waiting for a job "
                           "(srun, salloc, sbatch --wait) is not one call and is not cut by it")
    # The cell, named completely: with these set, a user's SGE_QMASTER_PORT/SGE_EXECD_PORT (or
    # /etc/services, which names one cell's ports) cannot send a command to another cell.
    qmaster_port: int = Field(0, ge=0, le=65535, description="sge_qmaster's port (SGE_QMASTER_PORT); "
                              "0 means Grid Engine's own lookup (the environment, else /etc/services)")
    execd_port: int = Field(0, ge=0, le=65535, description="sge_execd's port (SGE_EXECD_PORT); 0 as for qmaster_port")
    drmaa_library: str = Field("", description="the cell's libdrmaa.so (the per-user daemon's submissions load it); "
                               "empty means search ($DRMAA_LIBRARY_PATH, the distribution's, $SGE_ROOT/lib)")
    capabilities: dict[Literal["par", "binding", "btype", "sync", "retained_finished"], bool] = Field(
        default_factory=dict, description="pin what the installed Grid Engine offers where its -help cannot "
        "tell (gridengine/capabilities.py probes the rest)")


class Partition(_Model):
    queue: str
    pe: str = Field("smp", description="parallel environment for multi-slot jobs on one host")
    pe_multinode: str = Field("mpi", description="parallel environment for jobs over several hosts")
    default: bool = False
    max_time: str = "UNLIMITED"
    default_time: str | None = None
    nodes: list[str] = Field(default_factory=list, description="hosts; empty means ask Grid Engine")
    node_memory_mb: int = Field(0, ge=0, description="memory of the partition's largest node in MB (Slurm's "
                                "RealMemory): --mem beyond it is refused at once; 0: unknown, Grid Engine decides")


class Memory(_Model):
    complex: str = "mem_free"
    scope: Literal["slot", "job", "host"] = "slot"
    default_per_cpu_mb: int = Field(0, ge=0, description="Slurm DefMemPerCPU; 0 for none")


class GresType(_Model):
    """One type (model) of a generic resource, e.g. gpu ``a100``: either its own consumable
    (``complex``, which takes the count instead of the resource's complex) or, with the
    resource's ``select``, the value that complex must have on the host (default: the type's name)."""

    complex: str = ""
    value: str = ""


class Consumable(_Model):
    complex: str
    scope: Literal["slot", "job", "host"] = "job"
    select: str = Field("", description="host complex that names the type (model): a typed request asks "
                        "for <select>=<type's value> besides the count")
    types: dict[str, GresType] = Field(default_factory=dict, description="the types this cluster has "
                                       "(--gres=gpu:a100:2, --gpus=a100:2); any other type is refused")

    @model_validator(mode="after")
    def _type_targets(self) -> "Consumable":
        for name, t in self.types.items():
            if not self.select and not t.complex:
                raise ValueError(f"types.{name}: needs a complex (or the resource's select)")
        return self


class Cluster(_Model):
    name: str = "cluster"
    state_dir: str = "/var/spool/slurm-shim"
    min_job_age: int = Field(300, ge=0, description="seconds an ended job stays visible to squeue")
    max_array_size: int = Field(1001, gt=0)
    enforce_part_limits: Literal["NO", "ANY", "ALL"] = Field(
        "NO", description="Slurm's EnforcePartLimits: refuse at submission a job over its partitions' node "
        "count, time or memory limits (ANY: over those of every partition it names, ALL: of any); NO "
        "lets it wait")
    project_from: Literal["none", "qos", "wckey", "account"] = "none"
    mpi_default: Literal["none", "pmi2", "pmix"] = Field(
        "none", description="srun's MPI plugin when --mpi is not given (Slurm's MpiDefault): pmi2 serves "
        "PMI-1/PMI-2 to the tasks and runs Open MPI programs through mpirun; pmix does the same")


class Store(_Model):
    """What each user's records (``<state_dir>/users/<uid>/records/``, docs/store-scale.md) may
    hold: sbatch's hourly prune drops the oldest 10-minute buckets past either bound, never a
    record of a job Grid Engine still has or that a live job's --dependency names."""

    max_age_days: int = Field(90, gt=0, description="days of records kept (sacct's horizon for the shim's "
                              "details: names, partitions, cancels)")
    max_records: int = Field(5_000_000, gt=0, description="records (files: a submit record and an end event "
                             "a job, ~4 KB each) a user keeps, the newest: 90 days at up to ~27,000 jobs a day; "
                             "doctor warns from 90% on")


class Submit(_Model):
    method: Literal["qsub", "agent"] = "qsub"
    agent_idle_minutes: float = Field(10.0, gt=0, description="no longer read: the submit agent became the warm service's submissions (issue 28), which exit after service_idle_minutes; kept so that configs naming it load")
    service_idle_minutes: float = Field(10.0, gt=0, description="the warm per-user service (docs/service.md) exits "
                                        "after this long without requests")


class Slurm(_Model):
    release: Literal["22.05", "24.11", "26.05"] = Field(
        "26.05", description="the Slurm release the site comes from (default: the newest): the commands' --version, options and "
        "messages, and the job's environment follow it (releases.py); a release between two of these picks "
        "the newest of them not newer than it (23.02: 22.05, 25.05: 24.11)")

    @field_validator("release", mode="before")
    @classmethod
    def _known_release(cls, value):
        if value not in ("22.05", "24.11", "26.05"):
            raise ValueError(f"release {value!r} is not one the shim follows: 22.05, 24.11 or 26.05 (a site on "
                             "a release between two of them names the newest not newer than its own: 23.02 "
                             "and 23.11 are 22.05, 25.05 and 25.11 are 24.11)")
        return value


class SiteConfig(_Model):
    slurm: Slurm = Slurm()
    cluster: Cluster = Cluster()
    gridengine: GridEngine = GridEngine()
    partitions: dict[str, Partition] = Field(default_factory=lambda: {"debug": Partition(queue="all.q", default=True)})
    memory: Memory = Memory()
    gres: dict[str, Consumable] = Field(default_factory=dict)
    licenses: dict[str, Consumable] = Field(default_factory=dict)
    features: dict[str, str] = Field(default_factory=dict, description="--constraint feature -> boolean complex")
    exclusive_complex: str = Field("", description="boolean complex that reserves a whole host (--exclusive)")
    submit: Submit = Submit()
    store: Store = Store()
    reasons: dict[str, str] = Field(
        default_factory=dict, description="resource quota set (or 'set/rule', by number or name) -> the Slurm "
        "pending reason of the jobs it holds, over the built-in mapping (README: Quotas)")

    @model_validator(mode="after")
    def _reason_words(self) -> "SiteConfig":
        for key, value in self.reasons.items():
            if not value or not value.isascii() or not value.isalnum() or not value[0].isalpha():
                raise ValueError(f"reasons.{key}: {value!r} is not a Slurm reason word (letters and digits)")
        return self

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
