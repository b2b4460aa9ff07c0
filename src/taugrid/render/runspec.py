"""RunSpec: one workload, fully resolved against a platform, ready to render.

Owns the value that sits between ``render.resolve`` (which builds it) and the
renderers (``render.kuberay``, ``render.rayjobs``), and that the hub stores in the run
record (``run.json``: "resolved spec").

Invariants:
- Every field has a concrete value: nothing here is "unset" except where ``None`` is a
  meaning of its own (``gpu_model=None``: any GPU model; ``max_runtime_s=None``: no
  limit; ``checkpoint_path=None``: the run record's ``checkpoints/``).
- Sizes are numbers (bytes, seconds), not quantity strings.
- ``provenance`` maps every dotted field name to where its value came from:
  ``"tau.yaml:12"``, ``"profile gpu-small"``, ``"workspace default (default)"``,
  ``"workspace default"``, ``"platform"`` or ``"built-in default"``.
- ``config_hash`` is the sha256 of the canonical tau.yaml config and ``profile_hash``
  the sha256 of the canonical profile (of ``null`` when no profile applies): equal
  hashes mean equal inputs.

Wire version: the hub stores a RunSpec and sends it to agents, which may run an older
or newer release. ``spec_version`` is ``SPEC_VERSION`` of the release that resolved it.
Adding a field with a default keeps the version; changing a field's meaning, or removing
or renaming one, bumps it. A reader refuses a spec newer than it knows with an error that
says which component to upgrade (a spec without the field is version 1).
"""

from __future__ import annotations

from collections.abc import Mapping

import pydantic

from taugrid import errors
from taugrid.spec import models as spec_models
from taugrid.spec import units

__all__ = ["SPEC_VERSION", "RunSpec", "read"]

SPEC_VERSION = 1
"""The run spec wire version this release writes and reads (see the module docstring)."""


class RunSpec(pydantic.BaseModel):
    """A fully resolved workload (see the module docstring for the invariants)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    spec_version: int = pydantic.Field(default=SPEC_VERSION, ge=1)

    # what runs
    name: str
    workload_kind: spec_models.WorkloadKind
    entrypoint: str
    args: tuple[str, ...] = ()
    working_dir: str = "."
    excludes: tuple[str, ...] = ()
    launcher: spec_models.Launcher = spec_models.Launcher.PYTHON
    serve: spec_models.ServeSpec | None = None

    # sizing
    workers: int = pydantic.Field(ge=1)
    gpus_per_worker: float = pydantic.Field(ge=0)
    """Whole GPUs, or a share of one below 1 (workers share a GPU: ``shared_gpu``)."""
    gpu_model: str | None = None
    node_selector: dict[str, str] = pydantic.Field(
        default_factory=dict, description="Node labels of the GPU model (its gpu_types entry)."
    )
    cpus_per_worker: float = pydantic.Field(gt=0)
    memory_per_worker_bytes: int = pydantic.Field(gt=0)
    head_cpus: float = pydantic.Field(gt=0)
    head_memory_bytes: int = pydantic.Field(gt=0)

    # runtime
    image: str
    pip: tuple[str, ...] = ()
    env: dict[str, str] = pydantic.Field(default_factory=dict)
    secrets: tuple[spec_models.SecretRef, ...] = ()

    # accounting
    workspace: str
    team: str
    namespace: str
    queue: str
    priority: str | None = None
    priority_value: int = 0
    profile: str | None = None
    lane: str | None = None

    # placement
    allowed_regions: tuple[str, ...] = ()
    preferred_regions: tuple[str, ...] = ()
    communication: spec_models.Communication = spec_models.Communication.SYNC
    objective: spec_models.Objective = spec_models.Objective.BALANCED
    compliance: tuple[str, ...] = ()

    # data and storage
    inputs: tuple[spec_models.DataInput, ...] = ()
    outputs: tuple[spec_models.DataOutput, ...] = ()
    output_dir: str | None = None
    metrics_history: tuple[str, ...] = ()
    tensorboard: bool = False

    # resilience
    max_retries: int = pydantic.Field(default=0, ge=0)
    retry_on: tuple[spec_models.RetryOn, ...] = ()
    checkpoint_path: str | None = None
    max_runtime_s: float | None = None
    backoff: spec_models.Backoff = pydantic.Field(default_factory=spec_models.Backoff)
    stall_interval_s: float = 60.0
    stall_warn_after: int = 5
    stall_restart_after: int | None = None
    capacity: spec_models.Capacity = spec_models.Capacity.ON_DEMAND
    max_price: float | None = None
    max_restarts: int | None = None

    # provenance
    config_hash: str
    profile_hash: str
    provenance: dict[str, str] = pydantic.Field(default_factory=dict)

    _check_gpus = pydantic.field_validator("gpus_per_worker")(units.check_gpus)

    @pydantic.model_validator(mode="before")
    @classmethod
    def _known_version(cls, data: object) -> object:
        """Refuse a newer spec before its unknown fields make a less helpful error."""
        version = data.get("spec_version", 1) if isinstance(data, dict) else 1
        if isinstance(version, int) and version > SPEC_VERSION:
            raise ValueError(
                f"run spec version {version} is newer than this component reads "
                f"({SPEC_VERSION}); upgrade it (agent or hub) to the release that wrote the spec"
            )
        return data

    _gpus_out = pydantic.field_serializer("gpus_per_worker")(units.gpus_out)

    @property
    def total_gpus(self) -> float:
        """GPUs of the whole workload: ``workers x gpus_per_worker``."""
        return self.workers * self.gpus_per_worker

    @property
    def shared_gpu(self) -> bool:
        """Each worker takes a share of one GPU, which other workers may share."""
        return 0 < self.gpus_per_worker < 1

    @property
    def total_cpus(self) -> float:
        """CPUs of the workers (the head is not counted)."""
        return self.workers * self.cpus_per_worker

    def fields(self) -> dict[str, object]:
        """Every resolved field (``provenance`` excluded) as JSON-ready values, by name."""
        dumped = self.model_dump(mode="json", exclude={"provenance"})
        return dict(dumped)


def read(doc: Mapping[str, object]) -> RunSpec:
    """A RunSpec from its wire form (an assignment, a stored run), or a ``SystemFault``.

    A spec this release cannot read (newer version, damaged record) is a fault of the
    deployment, not of the user's tau.yaml, and the message says what to upgrade.
    """
    try:
        return RunSpec.model_validate(dict(doc))
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "spec"
        raise errors.SystemFault(
            f"cannot read the run spec ({where}: {first['msg']})",
            "run the hub and every agent at the same release",
        ) from exc
