"""platform.yaml data model: what the platform team declares once.

Owns regions → clusters → node pools, workload profiles, workspaces, teams with
quotas per GPU model, priority classes and quota requests. The same models back the
Kubernetes CRDs (TauCluster, TauWorkspace, TauTeam, TauQuotaRequest): each CRD's
``spec`` is exactly the model named after it, so field names are camel-free,
stable and documented here.

Invariants checked by ``Platform`` itself (see ``platform.checks``): names are unique
per kind and workspaces do not share namespaces; every GPU model named anywhere is a
declared ``gpu_types`` entry; every team, region, profile and priority named by a
profile or a workspace exists. ``platform.crds`` renders these models as CRD objects.
"""

from __future__ import annotations

import enum
from typing import Annotated

import pydantic

from taugrid.platform import checks
from taugrid.spec import units
from taugrid.spec.models import Capacity

__all__ = [
    "ClusterSpec",
    "GpuType",
    "NodePool",
    "Platform",
    "PodSettings",
    "PriorityClass",
    "ProfileSpec",
    "QueueingStrategy",
    "Quota",
    "QuotaRequestSpec",
    "QuotaRequestState",
    "RecordStoreSpec",
    "RegionSpec",
    "Scheduling",
    "TeamSpec",
    "WorkspaceData",
    "WorkspaceDefaults",
    "WorkspaceSpec",
]

_NAME_RE = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
Name = Annotated[str, pydantic.StringConstraints(pattern=_NAME_RE)]


class _Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class GpuType(_Model):
    """A GPU model the platform offers (a Kueue ResourceFlavor)."""

    name: str = pydantic.Field(min_length=1, description="e.g. A100-80G")
    memory: str | None = None
    node_label: str = "nvidia.com/gpu.product"
    node_label_value: str | None = None
    speed: float = pydantic.Field(
        default=1.0,
        gt=0,
        description="Work one GPU does per hour relative to the platform's reference model "
        "(e.g. A100 1.0, H100 2.0, L4 0.4); placement prices GPUs per unit of work.",
    )

    _check_memory = pydantic.field_validator("memory")(units.check_quantity)


class NodePool(_Model):
    """A homogeneous set of nodes in one cluster."""

    name: Name
    gpu_model: str | None = None
    gpus_per_node: int = pydantic.Field(default=0, ge=0, le=16)
    cpus_per_node: float = pydantic.Field(default=8, gt=0)
    memory_per_node: str = "32Gi"
    nodes: int = pydantic.Field(default=1, ge=0)
    cost_per_gpu_hour: float = pydantic.Field(default=0.0, ge=0)
    capacity: Capacity = pydantic.Field(
        default=Capacity.ON_DEMAND,
        description="on-demand, or spot: cheaper nodes the provider may reclaim at any time "
        "(nodes carry the label taugrid.io/pool=<pool name>; docs/spot.md).",
    )
    reclaims_per_hour: float = pydantic.Field(
        default=0.0,
        ge=0,
        description="capacity spot: expected reclaims per node-hour, used until the hub has "
        "observed the pool (e.g. 0.05: one node in twenty is reclaimed per hour).",
    )

    _check_memory = pydantic.field_validator("memory_per_node")(units.check_quantity)

    @pydantic.model_validator(mode="after")
    def _gpu_pairs(self) -> NodePool:
        if self.gpus_per_node > 0 and self.gpu_model is None:
            raise ValueError(f"node pool '{self.name}' has GPUs but no gpu_model; set gpu_model")
        if self.capacity is Capacity.ANY:
            raise ValueError(
                f"node pool '{self.name}' has capacity any; a pool sells spot or on-demand"
            )
        if self.reclaims_per_hour and self.capacity is not Capacity.SPOT:
            raise ValueError(
                f"node pool '{self.name}' sets reclaims_per_hour but is not spot; "
                "set capacity: spot or remove reclaims_per_hour"
            )
        return self


class Toleration(_Model):
    """A Kubernetes toleration every pod of a run gets (a taint of dedicated nodes)."""

    key: str
    operator: str = pydantic.Field(default="Equal", pattern=r"^(Equal|Exists)$")
    value: str = ""
    effect: str = pydantic.Field(default="", pattern=r"^(NoSchedule|PreferNoSchedule|NoExecute|)$")


class PodSettings(_Model):
    """backend kubernetes: what every pod of a run gets besides the run's own shape."""

    host_network: bool = pydantic.Field(
        default=False,
        description="Pods use their node's network (clusters without a pod network, or "
        "RDMA fabrics that need the host's interfaces); one Ray cluster per node then.",
    )
    tolerations: list[Toleration] = pydantic.Field(
        default_factory=list, description="Taints of the nodes runs may use (dedicated pools)."
    )
    node_selector: dict[str, str] = pydantic.Field(
        default_factory=dict, description="Labels every run's pods select nodes by."
    )


class ClusterSpec(_Model):
    """A member cluster (TauCluster): a Ray cluster or a Kubernetes cluster with an agent."""

    name: Name
    backend: str = pydantic.Field(default="ray", pattern=r"^(ray|kubernetes)$")
    ray_address: str | None = None
    kubeconfig: str | None = pydantic.Field(
        default=None,
        description="backend kubernetes: the kubeconfig file of the cluster's API server "
        "(default: the agent's KUBECONFIG or ~/.kube/config).",
    )
    context: str | None = pydantic.Field(
        default=None, description="backend kubernetes: the kubeconfig context (default: current)."
    )
    pods: PodSettings = pydantic.Field(
        default_factory=PodSettings,
        description="backend kubernetes: network, tolerations and node selector of runs' pods.",
    )
    node_pools: list[NodePool] = pydantic.Field(default_factory=list)
    emulated_gpus: bool = pydantic.Field(
        default=False, description="GPUs are Ray logical resources, not devices."
    )
    interconnect_gbps: float = pydantic.Field(
        default=0.0,
        ge=0,
        description="Node-to-node bandwidth in Gbit/s (e.g. 400 for InfiniBand NDR, 25 for "
        "Ethernet; 0: not declared); multi-worker sync runs prefer the fastest.",
    )

    @property
    def spot_pools(self) -> tuple[str, ...]:
        """The names of its spot node pools, sorted (a node of no pool is on-demand)."""
        return tuple(sorted(p.name for p in self.node_pools if p.capacity is Capacity.SPOT))


class RegionSpec(_Model):
    """A region: clusters that share a data root and a network location."""

    name: Name
    clusters: list[ClusterSpec] = pydantic.Field(min_length=1)
    data_root: str | None = None
    egress_cost_per_gb: float = pydantic.Field(default=0.0, ge=0)
    compliance: list[str] = pydantic.Field(
        default_factory=list,
        description="Compliance domains the region meets (e.g. gdpr, hipaa); a run with "
        "placement.compliance goes only to regions meeting all of its domains.",
    )


class PriorityClass(_Model):
    """A WorkloadPriorityClass: higher ``value`` is admitted and kept first."""

    name: Name
    value: int
    description: str = ""


class ProfileSpec(_Model):
    """A workload profile: platform-owned sizing and placement that overrides tau.yaml."""

    name: Name
    description: str = ""
    teams: list[str] = pydantic.Field(default_factory=list, description="Empty: any team.")
    lanes: list[str] = pydantic.Field(default_factory=list, description="Empty: any lane.")
    gpus_per_worker: float | None = pydantic.Field(default=None, ge=0, le=16)
    _check_gpus = pydantic.field_validator("gpus_per_worker")(units.check_gpus)
    _gpus_out = pydantic.field_serializer("gpus_per_worker")(units.gpus_out)
    workers: int | None = pydantic.Field(default=None, ge=1)
    cpus_per_worker: float | None = pydantic.Field(default=None, gt=0)
    memory_per_worker: str | None = None
    gpu_model: str | None = None
    allowed_regions: list[str] = pydantic.Field(default_factory=list)
    queue: str | None = None
    priority: str | None = None

    _check_memory = pydantic.field_validator("memory_per_worker")(units.check_quantity)


class RecordStoreSpec(_Model):
    """``records``: where run records live, per platform or per workspace.

    The layout: docs/ARCHITECTURE.md, "The run record".

    No ``url``: the platform's data root (``$TAU_HOME/data`` embedded). A directory or
    ``file://`` path: that directory. ``s3://bucket/prefix``: an S3-compatible object
    store, the same layout under the prefix; its credentials are read from the named
    environment variables of each process that opens it (hub, agents), never from here.
    """

    url: str | None = None
    endpoint_url: str | None = pydantic.Field(
        default=None, description="S3 endpoint, e.g. http://127.0.0.1:8333 (None: AWS)."
    )
    region: str | None = None
    access_key_env: str = "AWS_ACCESS_KEY_ID"
    secret_key_env: str = "AWS_SECRET_ACCESS_KEY"

    @pydantic.field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v and "://" in v and not v.startswith(("s3://", "file://", "memory://")):
            raise ValueError(f"records.url {v!r}: use a directory, file://, or s3://bucket/prefix")
        if v and v.startswith("s3://") and not v[5:].split("/")[0]:
            raise ValueError(f"records.url {v!r} names no bucket; use s3://bucket/prefix")
        return v

    @property
    def in_object_store(self) -> bool:
        """Whether the records are in an object store (``s3://``), which processes on
        other machines (pods) reach, rather than in a directory of this one."""
        return (self.url or "").startswith("s3://")


class WorkspaceDefaults(_Model):
    """Values a workspace fills in when tau.yaml leaves them unset."""

    output_root: str | None = None
    priority: str | None = None
    profile: str | None = None
    ttl: str = "7d"
    gpu_model: str | None = None

    _check_ttl = pydantic.field_validator("ttl")(units.check_duration)


class WorkspaceData(_Model):
    """The workspace's shared data volume, mounted at ``/data`` (a PVC on Kubernetes)."""

    size: str = "100Gi"
    storage_class: str | None = None
    access_mode: str = pydantic.Field(
        default="ReadWriteMany", pattern=r"^(ReadWriteMany|ReadWriteOnce|ReadWriteOncePod)$"
    )

    _check_size = pydantic.field_validator("size")(units.check_quantity)


class WorkspaceTracking(_Model):
    """The tracking server a workspace's runs are mirrored to (``hub.runs.tracking``)."""

    mlflow_uri: str = pydantic.Field(
        pattern=r"^https?://\S+$",
        description="An MLflow tracking server's URL; the hub sends every run's metrics there.",
    )
    experiment: str | None = pydantic.Field(
        default=None, description="The MLflow experiment (default: taugrid/<workspace>)."
    )
    token_env: str | None = pydantic.Field(
        default=None,
        description="A variable of the hub's environment holding a bearer token for the server.",
    )


class WorkspaceSpec(_Model):
    """A workspace (TauWorkspace): a namespace, its queue and its members."""

    name: Name
    team: Name
    namespace: Name | None = None
    queue: Name | None = None
    members: list[str] = pydantic.Field(default_factory=list)
    defaults: WorkspaceDefaults = pydantic.Field(default_factory=WorkspaceDefaults)
    data: WorkspaceData = pydantic.Field(default_factory=WorkspaceData)
    records: RecordStoreSpec | None = pydantic.Field(
        default=None, description="This workspace's record store (None: the platform's)."
    )
    tracking: WorkspaceTracking | None = pydantic.Field(
        default=None, description="Mirror this workspace's runs to an MLflow server."
    )

    @property
    def effective_namespace(self) -> str:
        return self.namespace or self.name

    @property
    def effective_queue(self) -> str:
        return self.queue or self.name


class Quota(_Model):
    """Quota of one GPU model (flavor) for a team, Kueue ClusterQueue semantics."""

    gpu_model: str
    nominal: int = pydantic.Field(ge=0, description="GPUs guaranteed to the team.")
    borrowing_limit: int | None = pydantic.Field(default=None, ge=0)
    lending_limit: int | None = pydantic.Field(default=None, ge=0)


class QueueingStrategy(enum.StrEnum):
    """Kueue queueing strategies."""

    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class TeamSpec(_Model):
    """A team (TauTeam): a Kueue ClusterQueue with quotas per GPU model and a cohort."""

    name: Name
    cohort: Name | None = None
    quotas: list[Quota] = pydantic.Field(default_factory=list)
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    cpu_quota: float = pydantic.Field(default=1000, ge=0)
    memory_quota: str = "4Ti"

    _check_memory = pydantic.field_validator("memory_quota")(units.check_quantity)


class QuotaRequestState(enum.StrEnum):
    """pending → approved | rejected (terminal); only admins move it."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class QuotaRequestSpec(_Model):
    """A researcher's request for more quota (TauQuotaRequest spec)."""

    team: Name
    gpu_model: str
    nominal: int = pydantic.Field(ge=0)
    reason: str = pydantic.Field(min_length=1)


DEFAULT_OBJECTIVE = "balanced"
SCORES = ("data", "idle_gpu", "cost", "wait", "warm", "interconnect", "finish")
"""Names of the placement scores a weight may be given to (``scheduling.plugins*``)."""
OBJECTIVE_PRESETS: dict[str, dict[str, float]] = {
    # finish-first: expected finish time (transfer + wait + run time at the GPUs' speed)
    # plus data affinity; was the seed's data 0.5, idle_gpu 0.3, cost 0.2 (docs/multi-region.md)
    "balanced": {"finish": 0.8, "data": 0.2},
    "cost": {"cost": 0.6, "data": 0.2, "idle_gpu": 0.2},  # cost-first
    "time": {"idle_gpu": 0.4, "wait": 0.4, "data": 0.2},  # utilisation-first
}
"""Weights per ``placement.objective`` (tau.yaml), unless platform.yaml overrides them."""
COMMUNICATION_WEIGHTS: dict[str, dict[str, float]] = {"sync": {"interconnect": 0.2}}
"""Weights added per ``placement.communication``: only sync runs weigh the interconnect."""
CAPACITY_WEIGHTS: dict[str, dict[str, float]] = {"spot": {"cost": 0.5}, "any": {"cost": 0.5}}
"""Weights added per ``resilience.capacity``: a run that asks for spot asks for savings, so
the price after expected reclaims counts whatever its objective (docs/spot.md)."""


class Scheduling(_Model):
    """``scheduling``: placement score weights per objective and communication mode.

    Presets and modes named here replace the built-in ones of the same name; the others
    stay. Weights are relative (normalised to sum to 1 per run).
    """

    default_objective: str = pydantic.Field(
        default=DEFAULT_OBJECTIVE, pattern="^(" + "|".join(OBJECTIVE_PRESETS) + ")$"
    )
    presets: dict[str, dict[str, float]] = pydantic.Field(
        default_factory=dict, validate_default=True
    )
    communication: dict[str, dict[str, float]] = pydantic.Field(
        default_factory=dict, validate_default=True
    )
    span_min_mbit: float | None = pydantic.Field(default=None, gt=0)
    """Link budget of spanning runs: an async/none run that no one cluster holds may run
    as one Ray cluster across clusters whose links measure at least this (Mbit/s);
    unset: runs never span (docs/multi-region.md)."""

    @pydantic.field_validator("presets")
    @classmethod
    def _presets(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        return OBJECTIVE_PRESETS | _weights(v, set(OBJECTIVE_PRESETS), "objective")

    @pydantic.field_validator("communication")
    @classmethod
    def _modes(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        return COMMUNICATION_WEIGHTS | _weights(v, {"sync", "async", "none"}, "communication")


def _weights(
    v: dict[str, dict[str, float]], keys: set[str], what: str
) -> dict[str, dict[str, float]]:
    """``v`` when every key is a known ``what`` and every weight a known score, >= 0."""
    for key, weights in v.items():
        if key not in keys:
            raise ValueError(f"unknown {what} {key!r}; use one of {sorted(keys)}")
        for name, w in weights.items():
            if name not in SCORES:
                raise ValueError(f"{key}: unknown score {name!r}; scores: {list(SCORES)}")
            if w < 0:
                raise ValueError(f"{key}: weight of {name} is {w}; weights must be >= 0")
        if not any(weights.values()) and what == "objective":
            raise ValueError(f"{key}: every weight is 0; give at least one score a weight")
    return v


class Platform(_Model):
    """A whole platform.yaml (``schema_version: 1``)."""

    schema_version: int = 1
    gpu_types: list[GpuType] = pydantic.Field(default_factory=list)
    regions: list[RegionSpec] = pydantic.Field(default_factory=list)
    priority_classes: list[PriorityClass] = pydantic.Field(default_factory=list)
    profiles: list[ProfileSpec] = pydantic.Field(default_factory=list)
    teams: list[TeamSpec] = pydantic.Field(default_factory=list)
    workspaces: list[WorkspaceSpec] = pydantic.Field(default_factory=list)
    default_workspace: str | None = None
    scheduling: Scheduling = pydantic.Field(default_factory=Scheduling)
    records: RecordStoreSpec = pydantic.Field(default_factory=RecordStoreSpec)

    @pydantic.model_validator(mode="after")
    def _references(self) -> Platform:
        # platform.checks raises spec.errors.FieldError with the offending key's location,
        # so the loader reports file:line:col.
        checks.check_platform(self)
        return self

    def workspace(self, name: str) -> WorkspaceSpec | None:
        return next((w for w in self.workspaces if w.name == name), None)

    def records_for(self, workspace: str) -> RecordStoreSpec:
        """The record store of ``workspace``: its own ``records``, else the platform's."""
        ws = self.workspace(workspace)
        return ws.records if ws is not None and ws.records is not None else self.records

    def team(self, name: str) -> TeamSpec | None:
        return next((t for t in self.teams if t.name == name), None)

    def cluster(self, name: str) -> ClusterSpec | None:
        return next((c for r in self.regions for c in r.clusters if c.name == name), None)

    def profile(self, name: str) -> ProfileSpec | None:
        return next((p for p in self.profiles if p.name == name), None)

    def total_gpus(self, gpu_model: str | None = None) -> int:
        """GPUs declared across every region (of one model when given)."""
        return sum(
            p.gpus_per_node * p.nodes
            for r in self.regions
            for c in r.clusters
            for p in c.node_pools
            if gpu_model is None or p.gpu_model == gpu_model
        )
