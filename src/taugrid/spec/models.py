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
- Field docstrings are the field descriptions (``use_attribute_docstrings``): they feed
  the JSON Schema, docs/tau-yaml.md and the loader's hints.
- Cross-field rules raise ``spec.errors.FieldError`` with the key they are about, so
  the loader can point at ``file:line:column`` of that key.
"""

from __future__ import annotations

import enum
import re
from typing import Annotated

import pydantic

from taugrid import errors as taugrid_errors
from taugrid.spec import errors, rules, units
from taugrid.spec import pipeline as spec_pipeline
from taugrid.spec import roles as spec_roles
from taugrid.spec import sweep as spec_sweep

__all__ = [
    "NAME_PATTERN",
    "SCHEMA_VERSION",
    "Autoscaling",
    "Backoff",
    "Capacity",
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
    "StallSpec",
    "StorageSpec",
    "TauConfig",
    "WorkloadKind",
]

SCHEMA_VERSION = 1
"""The current tau.yaml format; a file without ``schema_version`` is read as this one."""
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?$"
_ENV_RE = r"^[A-Za-z_][A-Za-z0-9_]*$"
_DATASET_RE = r"^[a-z0-9][-a-z0-9_.]*(@[A-Za-z0-9][-A-Za-z0-9_.]*)?$"

Name = Annotated[str, pydantic.StringConstraints(pattern=NAME_PATTERN)]
EnvName = Annotated[str, pydantic.StringConstraints(pattern=_ENV_RE)]


class _Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class WorkloadKind(enum.StrEnum):
    """What the workload is: a batch RayJob, a plain job, an interactive cluster, a service,
    or an elastic pipeline (a RayJob whose stages the platform sizes; see ``pipeline``)."""

    RAYJOB = "rayjob"
    JOB = "job"
    RAYCLUSTER = "raycluster"
    RAYSERVICE = "rayservice"
    PIPELINE = "pipeline"


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


class Capacity(enum.StrEnum):
    """What kind of capacity a run may use (``resilience.capacity``) or a node pool sells
    (platform.yaml ``node_pools[].capacity``; a pool is never ``any``)."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    """Cheaper, and the provider may reclaim it at any time (preemptible)."""
    ANY = "any"
    """Spot where that finishes the work cheaper after its expected reclaims, else on-demand."""


class RetryOn(enum.StrEnum):
    """Failure classes that consume a retry (``resilience.retry_on``)."""

    NODE_FAILURE = "node_failure"
    PREEMPTION = "preemption"
    LOST_CONTACT = "lost_contact"
    EXIT_NONZERO = "exit_nonzero"
    DATA_STAGING = "data_staging"
    STALL = "stall"


class RunSection(_Model):
    """``run``: what to execute and how the code is shipped."""

    entrypoint: str = pydantic.Field(
        min_length=1,
        description="A script path (train.py: run with python) or a command "
        "(python train.py, bash run.sh); args are appended to either.",
    )
    workload_kind: WorkloadKind = WorkloadKind.RAYJOB
    """rayjob (batch on a fresh Ray cluster), job, raycluster, rayservice or pipeline."""
    args: list[str] = pydantic.Field(default_factory=list)
    """Arguments passed to the entrypoint; quote numbers ("3") so they stay text."""
    working_dir: str = pydantic.Field(default=".", description="Directory shipped to the job.")
    excludes: list[str] = pydantic.Field(default_factory=list)
    """gitignore-style patterns under working_dir that are not shipped (e.g. data/, *.ckpt)."""

    @pydantic.model_validator(mode="after")
    def _check_paths(self) -> RunSection:
        if not self.working_dir.strip():
            raise errors.FieldError(
                "run.working_dir is empty", loc=("working_dir",), hint="use '.' for this directory"
            )
        for index, pattern in enumerate(self.excludes):
            rules.check_exclude(pattern, index)
        rules.check_entrypoint(self.entrypoint)
        return self


class HeadSpec(_Model):
    """``compute.head``: the CPU-only Ray head of a RayJob/RayCluster."""

    cpus: float | None = pydantic.Field(default=None, gt=0)
    """CPUs of the head node (default: the profile's)."""
    memory: str | None = None
    """Memory of the head node, e.g. 8Gi."""

    _check_memory = pydantic.field_validator("memory")(units.check_node_memory)


class ComputeSpec(_Model):
    """``compute``: workers and the resources of each worker."""

    workers: int | None = pydantic.Field(default=None, ge=1, le=4096)
    """Number of worker nodes (Ray workers / torchrun nodes)."""
    gpus: float | None = pydantic.Field(
        default=None,
        ge=0,
        le=16,
        description="GPUs per worker: a whole number, or a share of one GPU below 1 "
        "(0.25, 0.5: workers share a GPU; Ray regions only).",
    )
    gpu_model: str | None = pydantic.Field(default=None, min_length=1)
    """GPU model the workers need, as the platform names it (e.g. A100-80G)."""
    cpus: float | None = pydantic.Field(default=None, gt=0, description="CPUs per worker.")
    memory: str | None = pydantic.Field(default=None, description="Memory per worker, e.g. 64Gi.")
    head: HeadSpec = pydantic.Field(default_factory=HeadSpec)
    """The Ray head node (CPU only)."""

    _check_memory = pydantic.field_validator("memory")(units.check_node_memory)
    _check_gpus = pydantic.field_validator("gpus")(units.check_gpus)
    _gpus_out = pydantic.field_serializer("gpus")(units.gpus_out)

    @pydantic.model_validator(mode="after")
    def _gpu_model_needs_gpus(self) -> ComputeSpec:
        if self.gpu_model is not None and self.gpus == 0:
            raise errors.FieldError(
                f"compute.gpu_model is {self.gpu_model} but compute.gpus is 0",
                loc=("gpu_model",),
                hint="set gpus to 1 or more (or a share such as 0.5), or remove gpu_model",
            )
        return self


class SecretRef(_Model):
    """A secret exposed to the job as an environment variable."""

    name: Name
    """Name of the secret in the workspace."""
    key: str = pydantic.Field(min_length=1)
    """Key inside the secret."""
    env: EnvName
    """Environment variable the value is exposed as."""


class RuntimeSpec(_Model):
    """``runtime``: image and Ray runtime environment."""

    image: str | None = None
    """Container image of the pods on Kubernetes regions (default: Ray's image of this Ray
    version). Ray regions run jobs in their nodes' Python environment: without a
    Kubernetes region the submission is refused, and a run placed on a Ray region says
    the image is not used there."""
    pip: list[str] = pydantic.Field(default_factory=list)
    """pip requirements installed into the Ray runtime environment."""
    env: dict[EnvName, str] = pydantic.Field(default_factory=dict)
    """Environment variables; values are strings (quote numbers)."""
    secrets: list[SecretRef] = pydantic.Field(default_factory=list)
    """Workspace secrets exposed as environment variables (`tau secret set`; a missing
    one refuses the submission; docs/secrets.md)."""

    @pydantic.model_validator(mode="after")
    def _unique_env(self) -> RuntimeSpec:
        for index, secret in enumerate(self.secrets):
            if secret.env in self.env:
                raise errors.FieldError(
                    f"{secret.env} is set both in runtime.env and by a secret",
                    loc=("secrets", index, "env"),
                    hint="remove it from runtime.env or pick another env name",
                )
        twice = rules.first_duplicate(s.env for s in self.secrets)
        if twice is not None:
            raise errors.FieldError(
                f"two secrets set the same variable {self.secrets[twice].env}",
                loc=("secrets", twice, "env"),
                hint="give each secret its own env name",
            )
        return self


class PolicySpec(_Model):
    """``policy``: where the run is accounted (workspace, queue, team) and its priority."""

    workspace: Name | None = None
    """Workspace the run belongs to (default: your current workspace)."""
    queue: Name | None = None
    """Queue within the workspace (default: the workspace's)."""
    priority: str | None = None
    """Priority class declared by the platform (e.g. high, normal, low)."""
    profile: str | None = None
    """Workload profile of the platform to start from (resources, image, queue)."""
    team: Name | None = None
    """Team whose quota the run uses (default: the workspace's team)."""
    lane: str | None = None
    """Scheduling lane within the queue, when the platform defines lanes."""


class PlacementSpec(_Model):
    """``placement``: which regions may run it and how its workers communicate."""

    allowed_regions: list[str] = pydantic.Field(default_factory=list)
    """Regions the run may be placed in (empty: any region the workspace may use)."""
    preferred_regions: list[str] = pydantic.Field(default_factory=list)
    """Regions tried first, in order; must be among allowed_regions when that is set."""
    communication: Communication | None = None
    """sync (collectives, one region), async (may span regions) or none."""
    objective: Objective | None = None
    """Score weight preset: balanced (finish-first), cost (cost-first), time (utilisation-first)."""
    compliance: list[str] = pydantic.Field(default_factory=list)
    """Compliance domains every region it runs in must meet (e.g. gdpr; see platform.yaml)."""

    @pydantic.model_validator(mode="after")
    def _regions(self) -> PlacementSpec:
        for field in ("allowed_regions", "preferred_regions"):
            index = rules.first_duplicate(getattr(self, field))
            if index is not None:
                raise errors.FieldError(
                    f"placement.{field} lists {getattr(self, field)[index]} twice",
                    loc=(field, index),
                    hint="list each region once",
                )
        allowed = set(self.allowed_regions)
        for index, region in enumerate(self.preferred_regions):
            if allowed and region not in allowed:
                raise errors.FieldError(
                    f"preferred region {region} is not in placement.allowed_regions",
                    loc=("preferred_regions", index),
                    hint=f"add {region} to allowed_regions or remove it from preferred_regions",
                )
        return self


class DataInput(_Model):
    """An input dataset by registry name, optionally ``@version``, mounted read-only."""

    dataset: Annotated[str, pydantic.StringConstraints(pattern=_DATASET_RE)]
    """Registry dataset name, optionally with a version: imagenet or imagenet@v2."""
    mount: str | None = None
    """Where it is mounted in the job (default: /data/datasets/<name>)."""


class DataOutput(_Model):
    """A declared output: ``path`` relative to the run's artifacts directory."""

    name: Name
    """Name of the output (unique within the run)."""
    path: str = pydantic.Field(min_length=1)
    """Path relative to the run's artifacts directory."""
    required: bool = True
    """When true, the run fails its Artifacts phase if the output is missing."""


class DataSpec(_Model):
    """``data``: datasets in and declared outputs."""

    inputs: list[DataInput] = pydantic.Field(default_factory=list)
    """Datasets mounted read-only."""
    outputs: list[DataOutput] = pydantic.Field(default_factory=list)
    """Outputs the run must produce."""

    @pydantic.model_validator(mode="after")
    def _unique(self) -> DataSpec:
        index = rules.first_duplicate(o.name for o in self.outputs)
        if index is not None:
            raise errors.FieldError(
                f"two outputs are named {self.outputs[index].name}",
                loc=("outputs", index, "name"),
                hint="give each output its own name",
            )
        mounts = [i.mount for i in self.inputs if i.mount is not None]
        index = rules.first_duplicate(mounts)
        if index is not None:
            at = [n for n, i in enumerate(self.inputs) if i.mount is not None][index]
            raise errors.FieldError(
                f"two inputs are mounted at {mounts[index]}",
                loc=("inputs", at, "mount"),
                hint="mount each dataset at its own path",
            )
        return self


class StorageSpec(_Model):
    """``storage``: overrides of where outputs and checkpoints go (default: the run record)."""

    output: str | None = None
    """Where outputs go instead of the run record's artifacts/: a path, or an s3:// URL that
    receives the artifacts and a MANIFEST.json, verified, when the run succeeds."""
    checkpoint: str | None = None
    """Where checkpoints go instead of the run record's checkpoints/."""


class Backoff(_Model):
    """Delay between attempts: ``initial`` * ``multiplier``^n, capped at ``max``."""

    initial: str = "10s"
    """Delay before the first retry (a duration: 30s, 15m, 2h)."""
    max: str = "5m"
    """Longest delay between attempts."""
    multiplier: float = pydantic.Field(default=2.0, ge=1.0, le=10.0)
    """Factor the delay grows by after each attempt."""

    _check = pydantic.field_validator("initial", "max")(units.check_duration)

    @pydantic.model_validator(mode="after")
    def _initial_le_max(self) -> Backoff:
        if units.parse_duration(self.initial) > units.parse_duration(self.max):
            raise errors.FieldError(
                f"backoff initial {self.initial} is longer than backoff max {self.max}",
                loc=("initial",),
                hint="make initial at most max",
            )
        return self


class StallSpec(_Model):
    """``resilience.stall``: when a run that makes no progress is flagged and restarted.

    Progress is any metric line, heartbeat or log line. ``warn_after`` intervals
    without any make the Progressing phase a warning; ``restart_after`` intervals
    restart the attempt from its last checkpoint (a run without one fails instead).
    """

    interval: str = "60s"
    """How often a run is expected to show progress (a duration: 30s, 5m)."""
    warn_after: int = pydantic.Field(default=5, ge=1, le=10_000)
    """Intervals without progress before the Progressing phase warns."""
    restart_after: int | None = pydantic.Field(default=None, ge=1, le=10_000)
    """Intervals without progress before the attempt is restarted (default: never)."""

    _check = pydantic.field_validator("interval")(units.check_duration)

    @pydantic.model_validator(mode="after")
    def _order(self) -> StallSpec:
        if self.restart_after is not None and self.restart_after < self.warn_after:
            raise errors.FieldError(
                f"resilience.stall.restart_after ({self.restart_after}) is smaller than "
                f"warn_after ({self.warn_after})",
                loc=("restart_after",),
                hint="make restart_after at least warn_after",
            )
        return self


class ResilienceSpec(_Model):
    """``resilience``: retries, checkpoint location, runtime limit and stall detection."""

    max_retries: int | None = pydantic.Field(default=None, ge=0, le=100)
    """Attempts after the first (default: the profile's)."""
    retry_on: list[RetryOn] | None = None
    """Failure classes that consume a retry (default: all but exit_nonzero)."""
    checkpoint_path: str | None = None
    """Path the job checkpoints to (exported as CHECKPOINT_PATH)."""
    max_runtime: str | None = None
    """Wall-clock limit of one attempt (a duration: 90m, 12h, 2d)."""
    backoff: Backoff = pydantic.Field(default_factory=Backoff)
    """Delay between attempts."""
    stall: StallSpec = pydantic.Field(default_factory=StallSpec)
    """When a run that shows no progress is flagged and restarted."""
    capacity: Capacity = Capacity.ON_DEMAND
    """Spot (reclaimable, cheaper) or on-demand nodes, or ``any``: the hub weighs the spot
    price against the pool's reclaim rate (docs/spot.md)."""
    max_price: float | None = pydantic.Field(default=None, gt=0)
    """Most $/GPU-hour a spot pool may charge to take the run (capacity spot or any)."""
    max_restarts: int | None = pydantic.Field(default=None, ge=0, le=1000)
    """Restarts after spot reclaims (capacity spot or any; default: no limit). The next
    reclaim makes a capacity any run go on demand and fails a capacity spot run."""

    _check_runtime = pydantic.field_validator("max_runtime")(units.check_duration)

    @pydantic.model_validator(mode="after")
    def _retries(self) -> ResilienceSpec:
        for name in ("max_price", "max_restarts"):
            if getattr(self, name) is not None and self.capacity is Capacity.ON_DEMAND:
                raise errors.FieldError(
                    f"resilience.{name} applies to spot pools but capacity is on-demand",
                    loc=(name,),
                    hint=f"set capacity: spot (or any), or remove {name}",
                )
        if self.retry_on and self.max_retries == 0:
            raise errors.FieldError(
                "resilience.retry_on is set but max_retries is 0",
                loc=("retry_on",),
                hint="set max_retries to 1 or more, or remove retry_on",
            )
        return self


class MetricsSpec(_Model):
    """``metrics``: extra metric history files (JSONL) the job writes, and TensorBoard."""

    history: list[str] = pydantic.Field(default_factory=list)
    """JSONL files (relative to the working dir) with step/name/value metric events."""
    tensorboard: bool = False
    """Also write every ``tau.log`` value as a TensorBoard scalar into the run's
    ``artifacts/tensorboard/`` (``tau run get`` fetches it; ``tensorboard --logdir``)."""


class Autoscaling(_Model):
    """Ray Serve autoscaling bounds."""

    min_replicas: int = pydantic.Field(default=1, ge=0)
    """Fewest replicas (0 lets the service scale to zero)."""
    max_replicas: int = pydantic.Field(default=1, ge=1)
    """Most replicas."""
    target_ongoing_requests: float = pydantic.Field(default=2.0, gt=0)
    """Requests in flight per replica that autoscaling aims for."""

    @pydantic.model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.min_replicas > self.max_replicas:
            raise errors.FieldError(
                f"autoscaling min_replicas {self.min_replicas} is more than "
                f"max_replicas {self.max_replicas}",
                loc=("min_replicas",),
                hint="make min_replicas at most max_replicas",
            )
        return self


class ServeSpec(_Model):
    """``serve``: a Ray Serve application (``workload_kind: rayservice``)."""

    import_path: Annotated[str, pydantic.StringConstraints(pattern=r"^[\w.]+:[\w.]+$")]
    """The Serve application, as module:attribute (e.g. serve_app:app)."""
    replicas: int = pydantic.Field(default=1, ge=1)
    """Fixed number of replicas (leave out when using autoscaling)."""
    route_prefix: str = "/"
    """HTTP route the application is served under; starts with '/'."""
    autoscaling: Autoscaling | None = None
    """Autoscaling bounds instead of a fixed replica count."""

    @pydantic.model_validator(mode="after")
    def _replicas_or_autoscaling(self) -> ServeSpec:
        if not self.route_prefix.startswith("/"):
            raise errors.FieldError(
                f"serve.route_prefix '{self.route_prefix}' does not start with '/'",
                loc=("route_prefix",),
                hint=f"write '/{self.route_prefix}'",
            )
        if self.autoscaling is not None and "replicas" in self.model_fields_set:
            raise errors.FieldError(
                "serve.replicas and serve.autoscaling are both set",
                loc=("replicas",),
                hint="remove replicas; autoscaling decides the count between its bounds",
            )
        return self


class ExecutionSpec(_Model):
    """``execution``: the launcher that starts the entrypoint on the workers."""

    launcher: Launcher = Launcher.PYTHON
    """python (plain driver), torchrun or ray-train (a Ray script that places its own
    workers: Ray Train, or Ray Tune run by the script itself)."""

    @pydantic.field_validator("launcher", mode="before")
    @classmethod
    def _no_tune(cls, v: object) -> object:
        if v == "ray-tune":
            raise errors.FieldError(
                "launcher ray-tune was removed: it only meant a Ray script that places its "
                "own workers",
                loc=(),
                hint="use launcher: ray-train for a script that runs Ray Tune itself, or a "
                "sweep section and tau sweep submit (docs/sweeps.md)",
            )
        return v


class TauConfig(_Model):
    """A whole tau.yaml file (``schema_version: 1``)."""

    schema_version: int = pydantic.Field(
        default=SCHEMA_VERSION, description="Always 1 for this format."
    )
    name: Name
    """Name of the workload: lowercase letters, digits and '-', at most 53 characters."""
    run: RunSection
    """What to execute."""
    compute: ComputeSpec = pydantic.Field(default_factory=ComputeSpec)
    """Workers and their resources."""
    runtime: RuntimeSpec = pydantic.Field(default_factory=RuntimeSpec)
    """Image, pip packages, environment and secrets."""
    policy: PolicySpec = pydantic.Field(default_factory=PolicySpec)
    """Workspace, queue, team and priority."""
    placement: PlacementSpec = pydantic.Field(default_factory=PlacementSpec)
    """Allowed regions and how workers communicate."""
    data: DataSpec = pydantic.Field(default_factory=DataSpec)
    """Input datasets and declared outputs."""
    storage: StorageSpec = pydantic.Field(default_factory=StorageSpec)
    """Overrides of where outputs and checkpoints go."""
    resilience: ResilienceSpec = pydantic.Field(default_factory=ResilienceSpec)
    """Retries, checkpoints and runtime limit."""
    metrics: MetricsSpec = pydantic.Field(default_factory=MetricsSpec)
    """Extra metric history files."""
    serve: ServeSpec | None = None
    """The Ray Serve application (only with workload_kind: rayservice)."""
    execution: ExecutionSpec = pydantic.Field(default_factory=ExecutionSpec)
    """How the entrypoint is launched."""
    pipeline: spec_pipeline.PipelineSpec | None = None
    """Stages and target throughput (only with workload_kind: pipeline)."""
    roles: dict[Name, spec_roles.RoleSpec] = pydantic.Field(default_factory=dict)
    """Ray actor roles of a single-controller job (e.g. actor, critic, reward), by name."""
    sweep: spec_sweep.SweepSpec | None = None
    """A hyperparameter sweep: trials of this tau.yaml with other parameter values
    (``tau sweep submit``; ``tau run submit`` refuses it)."""

    @pydantic.field_validator("schema_version")
    @classmethod
    def _only_v1(cls, v: int) -> int:
        if v != SCHEMA_VERSION:
            raise ValueError(
                f"schema_version {v} is not supported; set schema_version: {SCHEMA_VERSION} "
                "(the current version), or leave it out"
            )
        return v

    @pydantic.model_validator(mode="after")
    def _kind_rules(self) -> TauConfig:
        kind = self.run.workload_kind
        if kind is WorkloadKind.RAYSERVICE:
            rules.check_service(self)
        elif self.serve is not None:
            raise errors.FieldError(
                f"'serve' is only valid with run.workload_kind: rayservice, not {kind}",
                loc=("serve",),
                hint="set run.workload_kind: rayservice, or remove the serve section",
            )
        rules.check_pipeline(self)
        rules.check_launcher(self)
        return self


def is_valid_name(value: str) -> bool:
    """True when ``value`` is a valid run/workspace name (DNS-1123 label, ≤ 53 chars)."""
    return re.match(NAME_PATTERN, value) is not None


def check_name(what: str, value: str) -> None:
    """Refuse ``value`` as the name of a ``what`` (a deployment, a model, a session) unless
    it is valid as a run's name is."""
    if not is_valid_name(value):
        raise taugrid_errors.UserError(
            f"{what} name '{value}' is not valid",
            "use lowercase letters, digits and '-' (at most 53 characters)",
        )
