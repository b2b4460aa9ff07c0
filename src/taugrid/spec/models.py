"""tau.yaml data model: the researcher's description of one workload.

Owns the pydantic models of every tau.yaml group and their field-level rules. It
does not read files (see ``spec.load``) and knows nothing about platforms; merging
with workspace defaults and profiles happens in ``render.resolve``.

Invariants:
- Every model forbids unknown keys (the loader turns those into "did you mean").
- Models are frozen values; ``None`` means "not set here" so that resolution can
  tell a file value from a default (see ``render.resolve`` provenance).
- Quantities (``64Gi``) and durations (``2h``) are validated here and normalised by
  ``spec.units``.
"""

from __future__ import annotations

import enum
import re
from typing import Annotated

import pydantic

from taugrid.spec import units

__all__ = [
    "Autoscaling",
    "Backoff",
    "Communication",
    "ComputeSpec",
    "DataInput",
    "DataOutput",
    "DataSpec",
    "ExecutionSpec",
    "HeadSpec",
    "Launcher",
    "MetricsSpec",
    "Objective",
    "PlacementSpec",
    "PolicySpec",
    "ResilienceSpec",
    "RetryOn",
    "RunSection",
    "RuntimeSpec",
    "SecretRef",
    "ServeSpec",
    "StorageSpec",
    "TauConfig",
    "WorkloadKind",
]

_NAME_RE = r"^[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?$"
_ENV_RE = r"^[A-Za-z_][A-Za-z0-9_]*$"
_DATASET_RE = r"^[a-z0-9][-a-z0-9_.]*(@[A-Za-z0-9][-A-Za-z0-9_.]*)?$"

Name = Annotated[str, pydantic.StringConstraints(pattern=_NAME_RE)]
EnvName = Annotated[str, pydantic.StringConstraints(pattern=_ENV_RE)]


class _Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class WorkloadKind(enum.StrEnum):
    """What the workload is: a batch RayJob, a plain job, an interactive cluster, a service."""

    RAYJOB = "rayjob"
    JOB = "job"
    RAYCLUSTER = "raycluster"
    RAYSERVICE = "rayservice"


class Communication(enum.StrEnum):
    """How workers talk: ``sync`` (collectives; never spans regions), ``async``, ``none``."""

    SYNC = "sync"
    ASYNC = "async"
    NONE = "none"


class Objective(enum.StrEnum):
    """What placement optimises when regions tie on hard constraints."""

    BALANCED = "balanced"
    COST = "cost"
    TIME = "time"


class Launcher(enum.StrEnum):
    """How the entrypoint is started on the workers."""

    PYTHON = "python"
    TORCHRUN = "torchrun"
    RAY_TRAIN = "ray-train"
    RAY_TUNE = "ray-tune"


class RetryOn(enum.StrEnum):
    """Failure classes that consume a retry (``resilience.retry_on``)."""

    NODE_FAILURE = "node_failure"
    PREEMPTION = "preemption"
    LOST_CONTACT = "lost_contact"
    EXIT_NONZERO = "exit_nonzero"


class RunSection(_Model):
    """``run``: what to execute and how the code is shipped."""

    entrypoint: str = pydantic.Field(min_length=1, description="Script or command to run.")
    workload_kind: WorkloadKind = WorkloadKind.RAYJOB
    args: list[str] = pydantic.Field(default_factory=list)
    working_dir: str = pydantic.Field(default=".", description="Directory shipped to the job.")
    excludes: list[str] = pydantic.Field(default_factory=list)


class HeadSpec(_Model):
    """``compute.head``: the CPU-only Ray head of a RayJob/RayCluster."""

    cpus: float | None = pydantic.Field(default=None, gt=0)
    memory: str | None = None

    _check_memory = pydantic.field_validator("memory")(units.check_quantity)


class ComputeSpec(_Model):
    """``compute``: workers and the resources of each worker."""

    workers: int | None = pydantic.Field(default=None, ge=1, le=4096)
    gpus: int | None = pydantic.Field(default=None, ge=0, le=16, description="GPUs per worker.")
    gpu_model: str | None = pydantic.Field(default=None, min_length=1)
    cpus: float | None = pydantic.Field(default=None, gt=0, description="CPUs per worker.")
    memory: str | None = pydantic.Field(default=None, description="Memory per worker, e.g. 64Gi.")
    head: HeadSpec = pydantic.Field(default_factory=HeadSpec)

    _check_memory = pydantic.field_validator("memory")(units.check_quantity)


class SecretRef(_Model):
    """A secret exposed to the job as an environment variable."""

    name: Name
    key: str = pydantic.Field(min_length=1)
    env: EnvName


class RuntimeSpec(_Model):
    """``runtime``: image and Ray runtime environment."""

    image: str | None = None
    pip: list[str] = pydantic.Field(default_factory=list)
    env: dict[EnvName, str] = pydantic.Field(default_factory=dict)
    secrets: list[SecretRef] = pydantic.Field(default_factory=list)


class PolicySpec(_Model):
    """``policy``: where the run is accounted (workspace, queue, team) and its priority."""

    workspace: Name | None = None
    queue: Name | None = None
    priority: str | None = None
    profile: str | None = None
    team: Name | None = None
    lane: str | None = None


class PlacementSpec(_Model):
    """``placement``: which regions may run it and how its workers communicate."""

    allowed_regions: list[str] = pydantic.Field(default_factory=list)
    preferred_regions: list[str] = pydantic.Field(default_factory=list)
    communication: Communication | None = None
    objective: Objective | None = None


class DataInput(_Model):
    """An input dataset by registry name, optionally ``@version``, mounted read-only."""

    dataset: Annotated[str, pydantic.StringConstraints(pattern=_DATASET_RE)]
    mount: str | None = None


class DataOutput(_Model):
    """A declared output: ``path`` relative to the run's artifacts directory."""

    name: Name
    path: str = pydantic.Field(min_length=1)
    required: bool = True


class DataSpec(_Model):
    """``data``: datasets in and declared outputs."""

    inputs: list[DataInput] = pydantic.Field(default_factory=list)
    outputs: list[DataOutput] = pydantic.Field(default_factory=list)


class StorageSpec(_Model):
    """``storage``: overrides of where outputs and checkpoints go (default: the run record)."""

    output: str | None = None
    checkpoint: str | None = None


class Backoff(_Model):
    """Delay between attempts: ``initial`` * ``multiplier``^n, capped at ``max``."""

    initial: str = "10s"
    max: str = "5m"
    multiplier: float = pydantic.Field(default=2.0, ge=1.0, le=10.0)

    _check = pydantic.field_validator("initial", "max")(units.check_duration)


class ResilienceSpec(_Model):
    """``resilience``: retries, checkpoint location and runtime limit."""

    max_retries: int | None = pydantic.Field(default=None, ge=0, le=100)
    retry_on: list[RetryOn] | None = None
    checkpoint_path: str | None = None
    max_runtime: str | None = None
    backoff: Backoff = pydantic.Field(default_factory=Backoff)

    _check_runtime = pydantic.field_validator("max_runtime")(units.check_duration)


class MetricsSpec(_Model):
    """``metrics``: extra metric history files (JSONL) the job writes."""

    history: list[str] = pydantic.Field(default_factory=list)


class Autoscaling(_Model):
    """Ray Serve autoscaling bounds."""

    min_replicas: int = pydantic.Field(default=1, ge=0)
    max_replicas: int = pydantic.Field(default=1, ge=1)
    target_ongoing_requests: float = pydantic.Field(default=2.0, gt=0)


class ServeSpec(_Model):
    """``serve``: a Ray Serve application (``workload_kind: rayservice``)."""

    import_path: Annotated[str, pydantic.StringConstraints(pattern=r"^[\w.]+:[\w.]+$")]
    replicas: int = pydantic.Field(default=1, ge=1)
    route_prefix: str = "/"
    autoscaling: Autoscaling | None = None


class ExecutionSpec(_Model):
    """``execution``: the launcher that starts the entrypoint on the workers."""

    launcher: Launcher = Launcher.PYTHON


class TauConfig(_Model):
    """A whole tau.yaml file (``schema_version: 1``)."""

    schema_version: int = pydantic.Field(description="Always 1 for this format.")
    name: Name
    run: RunSection
    compute: ComputeSpec = pydantic.Field(default_factory=ComputeSpec)
    runtime: RuntimeSpec = pydantic.Field(default_factory=RuntimeSpec)
    policy: PolicySpec = pydantic.Field(default_factory=PolicySpec)
    placement: PlacementSpec = pydantic.Field(default_factory=PlacementSpec)
    data: DataSpec = pydantic.Field(default_factory=DataSpec)
    storage: StorageSpec = pydantic.Field(default_factory=StorageSpec)
    resilience: ResilienceSpec = pydantic.Field(default_factory=ResilienceSpec)
    metrics: MetricsSpec = pydantic.Field(default_factory=MetricsSpec)
    serve: ServeSpec | None = None
    execution: ExecutionSpec = pydantic.Field(default_factory=ExecutionSpec)

    @pydantic.field_validator("schema_version")
    @classmethod
    def _only_v1(cls, v: int) -> int:
        if v != 1:
            raise ValueError(f"schema_version {v} is not supported; set schema_version: 1")
        return v

    @pydantic.model_validator(mode="after")
    def _kind_rules(self) -> TauConfig:
        kind = self.run.workload_kind
        if kind is WorkloadKind.RAYSERVICE and self.serve is None:
            raise ValueError("workload_kind rayservice needs a 'serve' section with import_path")
        if self.serve is not None and kind is not WorkloadKind.RAYSERVICE:
            raise ValueError("'serve' is only valid with run.workload_kind: rayservice")
        return self


def is_valid_name(value: str) -> bool:
    """True when ``value`` is a valid run/workspace name (DNS-1123 label, ≤ 53 chars)."""
    return re.match(_NAME_RE, value) is not None
