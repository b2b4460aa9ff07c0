"""Wire payloads of the hub's HTTP API: the one place their shapes are defined.

Used by the hub (server side), the agent (hub client) and the SDK (user client).
Compatibility rules (SkyPilot ``payloads.py`` style):
- Adding an optional field is compatible; removing or renaming one is not — bump
  ``API_VERSION`` and keep the old name readable for one release.
- Servers ignore unknown request fields (``extra="ignore"``) so newer clients keep
  working against older hubs; responses are built from these models only.
- Enumerated values travel as their string values.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pydantic

__all__ = [
    "API_VERSION",
    "SECRETS_PLATFORM_SCOPE",
    "AgentRegister",
    "AgentSync",
    "AgentSyncReply",
    "Assignment",
    "AttemptReport",
    "DataEndpoint",
    "DevUpRequest",
    "GuestOrder",
    "GuestStatus",
    "MembersChange",
    "NodeFault",
    "NodeReport",
    "PeerEndpoint",
    "PrepareHint",
    "QuotaDecision",
    "QuotaRequestCreate",
    "RelocationRequest",
    "RuntimeStatus",
    "SecretInfo",
    "SecretSet",
    "SourceInfo",
    "SpanJoin",
    "StateReport",
    "StopOrder",
    "SubmitRequest",
    "TokenCreate",
    "WorkspaceCreate",
]

API_VERSION = "v1"

Int32 = Annotated[int, pydantic.Field(ge=-(2**31), le=2**31 - 1)]  # an INTEGER column
Count32 = Annotated[int, pydantic.Field(ge=0, le=2**31 - 1)]
Offset = Annotated[int, pydantic.Field(ge=0, le=2**63 - 1)]  # a BIGINT column


class _Payload(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")


class SourceInfo(_Payload):
    """The git commit, branch and dirty flag of the code a run was submitted from."""

    commit: str = pydantic.Field(pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$")
    branch: str | None = pydantic.Field(default=None, max_length=255)
    dirty: bool = False


class SubmitRequest(_Payload):
    """``POST /v1/runs``: a tau.yaml as text plus the zipped working directory."""

    tau_yaml: str
    filename: str = "tau.yaml"
    workspace: str | None = None
    code_zip_b64: str | None = None
    dry_run: bool = False
    source: SourceInfo | None = pydantic.Field(
        default=None, description="Where the code came from (git), when the client knows."
    )


class DeployRequest(_Payload):
    """``POST /v1/serve`` (deploy) and ``POST /v1/serve/{name}/update``: serve a run.

    ``submit`` carries the serving tau.yaml (``workload_kind: rayservice``) and code;
    the model is the source run's ``checkpoint`` (``latest`` or a step), its
    ``artifact`` (a file under ``artifacts/``), or by default its whole ``artifacts/``.
    """

    name: str
    source_run: str = ""
    model: str | None = None
    """A registered model version instead of ``source_run``: NAME@ALIAS, NAME@vN, NAME."""
    checkpoint: str | None = None
    artifact: str | None = None
    submit: SubmitRequest
    regions: list[str] = pydantic.Field(default_factory=list)
    """Serve in each of these regions (a serving run pinned to each); the hub's endpoint
    routes to the nearest healthy one. Empty: one region, wherever the run is placed."""


class ModelRegisterRequest(_Payload):
    """``POST /v1/models``: a new version of ``name`` from a run's model."""

    name: str
    from_run: str
    checkpoint: str | None = None
    artifact: str | None = None
    best_by: str | None = None
    """``[min:|max:]METRIC``: the finished run of ``from_run``'s name with the best value."""
    aliases: list[str] = pydantic.Field(default_factory=list)


class AliasRequest(_Payload):
    """``POST /v1/models/{name}/aliases``: put ``alias`` on ``version``."""

    alias: str
    version: int = pydantic.Field(ge=1, le=2**31 - 1)


class DevUpRequest(_Payload):
    """``POST /v1/sessions``: start interactive session ``name``, or bring a stopped one
    back from its latest checkpoint (``hub.dev.sessions``). ``submit``: a tau.yaml (``tau
    dev up -c``) whose compute and runtime the session takes (its entrypoint is the
    session's); None: one worker, ``gpus`` GPUs, 1 CPU, 2 GiB."""

    name: str
    workspace: str | None = None
    submit: SubmitRequest | None = None
    gpus: float | None = pydantic.Field(default=None, ge=0)
    idle_minutes: float | None = pydantic.Field(default=None, gt=0)


class ScaleRequest(_Payload):
    """``POST /v1/serve/{name}/scale``: a fixed replica count (replaces autoscaling)."""

    replicas: int = pydantic.Field(ge=1, le=1000)


class NodeFault(_Payload):
    """``POST /v1/admin/nodes/fault|clear``: mark a node faulty (admin or health checker).

    ``source`` is who marks: an admin token always records ``admin``; an agent token
    (its own cluster only) records ``checker`` or ``log_monitor``. A clear with an
    agent token clears only marks of its ``source``.
    """

    cluster_id: str
    node_id: str
    kind: str = pydantic.Field(
        default="cordon",
        pattern=r"^(ecc|xid|thermal|disk|memory|lost|gpu|quarantine|cordon|reclaim)$",
    )
    reason: str = pydantic.Field(default="", max_length=2000)
    source: Literal["admin", "checker", "log_monitor"] = "admin"


class AgentRegister(_Payload):
    cluster_id: str
    region: str


class DataEndpoint(_Payload):
    """Where a region's probe and data servers listen (the hub tells its peers)."""

    addresses: list[str] = pydantic.Field(default_factory=list)
    probe_port: int = pydantic.Field(ge=1, le=65535)
    data_port: int = pydantic.Field(ge=1, le=65535)


class PeerEndpoint(DataEndpoint):
    """Another region's data plane as the hub announces it, with its egress price."""

    region: str
    egress_cost_per_gb: float = 0.0


class NodeReport(_Payload):
    """One node of a state report: the one definition the agent writes
    (``agent.nodes.health.node_rows``), the hub stores with the report, and the scheduling core
    and the simulator read (``scheduling.snapshot.cluster_from_report``).

    Extra fields are kept (``extra="allow"``): a backend may add what it knows of a node
    (for display); the core reads only the fields declared here.
    """

    model_config = pydantic.ConfigDict(extra="allow")

    node_id: str
    ip: str | None = None
    alive: bool = True
    gpu_model: str | None = None
    gpus_total: float = 0.0
    gpus_free: float = 0.0
    """0 on a node marked faulty (cordoned)."""
    cpus_free: float = 0.0
    memory_free: float = 0.0
    healthy: bool = True
    """False while the hub holds an open fault mark on the node."""
    fault: str | None = None
    """The open mark's kind (``xid``, ``ecc``, ...), if any."""
    problem: str | None = None
    """What the cluster itself says is wrong with the node (a Kubernetes node not Ready
    or tainted, naming the Node), if anything."""
    conditions: list[dict[str, Any]] = pydantic.Field(default_factory=list)
    """The node checker's conditions (``health.conditions``); empty before its first round."""
    health_check: str = "unknown"
    """The worst of ``conditions`` (``ok``, ``warning``, ``failed``, ``unknown``)."""
    pool: str | None = None
    """The platform.yaml node pool it belongs to (its ``taugrid.io/pool`` label), if known."""
    spot: bool = False
    """Set by the hub from the pool's ``capacity``: the provider may reclaim the node."""
    checked_at: float | None = None


class StateReport(_Payload):
    """A full state report, sent every report interval (docs/ARCHITECTURE.md, "The
    agent's state report")."""

    cluster_id: str
    gpu_nodes: int = 0
    gpu_busy: float = 0
    gpu_free: float = 0
    gpu_models: dict[str, int] = pydantic.Field(default_factory=dict)
    queued_jobs: int = 0
    avg_cpu_usage: float = 0.0
    avg_gpu_usage: float = 0.0
    gpu_utilization: float | None = pydantic.Field(
        default=None,
        ge=0,
        le=1,
        description="Mean device utilisation (0..1) measured through NVML; None where not "
        "measured (emulated GPUs): the hub then reports allocation, labelled as such.",
    )
    last_heartbeat: float = 0.0
    emulated_gpus: bool = False
    nodes: list[NodeReport] = pydantic.Field(default_factory=list)
    running_attempts: list[Count32] = pydantic.Field(default_factory=list)
    cached_datasets: list[str] = pydantic.Field(default_factory=list)
    cached_runtimes: list[str] = pydantic.Field(default_factory=list)
    probes: dict[str, dict[str, float]] = pydantic.Field(default_factory=dict)
    endpoint: DataEndpoint | None = None
    gpu_faulty: float = 0
    """GPUs of alive nodes marked faulty (cordoned): neither free nor busy."""
    health: Literal["ready", "degraded", "unavailable"] = "ready"
    """Whether the cluster can run jobs: degraded (some nodes down) still can."""
    health_reason: str = ""
    queues: list[dict[str, Any]] = pydantic.Field(default_factory=list)
    """The cluster's own queues (Kueue ClusterQueues: admitted, pending, GPUs reserved)."""
    spannable: bool = False
    """The agent can head a spanning run and lend nodes to one (``agent.attempts.guests``): its
    Ray cluster is its own (``--start-ray``), so it knows the join address and token."""


class RelocationRequest(_Payload):
    """A running job's ask to be moved (``tau.request_relocation``): the free CPUs a
    cluster needs, beyond the run's own workers, for the job to meet its target."""

    cpus: float = pydantic.Field(ge=0, le=1_000_000)
    reason: str = pydantic.Field(max_length=2000, pattern=r"^[^\x00]*$")


class AttemptReport(_Payload):
    """What an agent knows about one attempt since its last sync."""

    token: Count32
    state: str
    submission_id: str | None = None
    message: str = ""
    exit_code: Int32 | None = None
    failure_kind: str | None = None
    nodes: list[str] = pydantic.Field(default_factory=list)
    worker_nodes: list[str] = pydantic.Field(
        default_factory=list,
        description="Nodes holding the attempt's workers once seen (the driver's for one "
        "worker, the launcher's actors' for several); the hub compares them with its binding.",
    )
    log_chunk: str = ""
    log_from: Offset | None = pydantic.Field(
        default=None,
        description="Where ``log_chunk`` starts in the attempt's driver log (characters); the "
        "hub appends only what it has not stored yet, so a resent report adds nothing twice.",
    )
    metrics: list[dict[str, Any]] = pydantic.Field(default_factory=list)
    metric_ends: list[Offset] = pydantic.Field(
        default_factory=list,
        description="For each of ``metrics``, the byte offset in the attempt's metrics.jsonl "
        "where its line ends: the hub keeps only lines past what it has stored.",
    )
    metrics_to: Offset | None = pydantic.Field(
        default=None, description="How far the agent has read the metrics file (bytes)."
    )
    last_step: Count32 | None = None
    checkpoint_step: Count32 | None = None
    released: bool = False
    submission: dict[str, Any] | None = None
    staged_checkpoint: str | None = pydantic.Field(
        default=None,
        max_length=200,
        description="The checkpoint the agent staged before submitting (sent once, with "
        "``submission``; empty when there was none): the hub's ``resumed_from`` was its "
        "guess at placement, and a fenced attempt may have taken that checkpoint back since.",
    )
    progress_warning: str = pydantic.Field(default="", max_length=2000)
    """Set once when the attempt stops showing progress (``resilience.stall``)."""
    phases: list[dict[str, str]] = pydantic.Field(default_factory=list, max_length=20)
    uploads_pending: str = pydantic.Field(
        default="", max_length=2000, description="Why the outputs are not in the store yet."
    )
    uploaded: bool = pydantic.Field(
        default=False, description="The outputs held back by uploads_pending are now stored."
    )
    adopted: list[list[str]] = pydantic.Field(
        default_factory=list, max_length=100, description="(source, step dir) the agent adopted."
    )
    unusable: list[list[str]] = pydantic.Field(
        default_factory=list, max_length=100, description="(source, why) it could not adopt."
    )
    serve_status: dict[str, Any] | None = pydantic.Field(
        default=None,
        description="A serving run's Serve status of its app where the cluster reports it "
        "(Kubernetes: the RayService's status), sent when it changes; the hub keeps it as "
        "serve/status.json in the run's record, as a Ray region's serve driver writes it.",
    )
    """Phase signals the cluster itself gave (``lifecycle.phases`` names and statuses,
    ``source``: the object that said it, ``reason``), applied after the state's own."""
    relocate: RelocationRequest | None = pydantic.Field(
        default=None,
        description="The job asks the hub to move the run to a cluster with more room "
        "(``tau.request_relocation``); sent once per request.",
    )


# Agent text that the hub stores in JSON columns: no NUL (PostgreSQL cannot hold it).
_Text = Annotated[str, pydantic.StringConstraints(pattern=r"^[^\x00]*$", max_length=4000)]
_Text64 = Annotated[str, pydantic.StringConstraints(pattern=r"^[^\x00]*$", max_length=64)]
_Text80 = Annotated[str, pydantic.StringConstraints(pattern=r"^[^\x00]*$", max_length=80)]


class RuntimeStatus(_Payload):
    """A change in one runtime's preparation on the agent's cluster (``agent.attempts.prewarm``).

    ``state``: ``preparing`` → ``ready`` | ``failed``; ``run_ids``: the runs waiting
    for it (an assignment or a hub hint); ``seconds``: how long the preparation took.
    """

    key: _Text64
    state: str = pydantic.Field(pattern=r"^(preparing|ready|failed)$")
    pip: list[_Text] = pydantic.Field(default_factory=list, max_length=1000)
    run_ids: list[_Text80] = pydantic.Field(default_factory=list, max_length=1_000)
    nodes: list[_Text80] = pydantic.Field(default_factory=list, max_length=10_000)
    seconds: float | None = pydantic.Field(default=None, ge=0, le=1e9)
    message: _Text = ""


_Secret = Annotated[str, pydantic.StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,256}$")]


class SpanJoin(_Payload):
    """How guest nodes join a spanning attempt's Ray cluster: its head's agent sends it
    while the attempt is active; the hub relays it to the guest clusters' agents and keeps
    it in memory only (the Ray token is never stored)."""

    token: Count32
    address: str = pydantic.Field(pattern=r"^[A-Za-z0-9.:\[\]-]{1,300}$")
    """The head's GCS address (``ip:port``), what ``ray start --address`` takes."""
    auth_token: _Secret | None = None
    """The head cluster's Ray auth token; None when it runs without token auth."""


class GuestStatus(_Payload):
    """What a guest agent did with one guest order: its nodes ``starting``, ``joined``
    (every node registered with the head), or ``failed`` (``message`` says why)."""

    token: Count32
    state: str = pydantic.Field(pattern=r"^(starting|joined|failed)$")
    nodes: Count32 = 0
    message: _Text = ""


class AgentSync(_Payload):
    """``POST /v1/agents/{cluster}/sync``: lease renewal + attempt reports (+ full report)."""

    report: StateReport | None = None
    attempts: list[AttemptReport] = pydantic.Field(default_factory=list)
    runtimes: list[RuntimeStatus] = pydantic.Field(default_factory=list)
    known: list[Count32] = pydantic.Field(
        default_factory=list, description="Tokens the agent tracks."
    )
    wait_s: float = pydantic.Field(default=0.0, ge=0, le=30, description="Long-poll for new work.")
    joins: list[SpanJoin] = pydantic.Field(
        default_factory=list, max_length=1000, description="Spanning attempts this agent heads."
    )
    guests: list[GuestStatus] = pydantic.Field(
        default_factory=list, max_length=1000, description="Guest orders this agent holds."
    )


class Assignment(_Payload):
    """An attempt the agent must run (or keep running after an agent restart)."""

    token: int
    run_id: str
    attempt: int
    workspace: str
    spec: dict[str, Any]
    run_dir: str
    records: dict[str, Any] = pydantic.Field(
        default_factory=dict,
        description="The workspace's record store (platform.yaml records; a local store's "
        "url is its directory); credentials come from the agent's environment.",
    )
    record_key: str = pydantic.Field(default="", description="The run record's key prefix.")
    submission_id: str | None = None
    resumed_from: str | None = None
    log_offset: Offset | None = pydantic.Field(
        default=None,
        description="How much of the attempt's driver log the hub has stored (characters): "
        "a re-attaching agent reads on from there, so nothing is sent twice or skipped.",
    )
    metrics_offset: Offset | None = pydantic.Field(
        default=None, description="The same for its metrics.jsonl (bytes)."
    )
    inputs: dict[str, str] = pydantic.Field(
        default_factory=dict,
        description="Input dataset → its replica in the cluster's region: a path under the "
        "region's data root, or an object-store URL.",
    )
    nodes: list[str] = pydantic.Field(
        default_factory=list,
        description="The node ID each worker is bound to (the hub's packer); the agent pins "
        "the workers there. Empty: no binding (the backend places them).",
    )
    capacity: str | None = pydantic.Field(
        default=None,
        description="The capacity the hub placed the attempt on (spot, on-demand; any for "
        "a span of both; None before spot pools): a backend that places its own pods keeps "
        "them to the cluster's pools of that capacity.",
    )
    guests: dict[str, Count32] = pydantic.Field(
        default_factory=dict,
        description="A spanning attempt's guest clusters and the workers each holds: their "
        "nodes join this cluster's Ray cluster, so the agent sends its join address while "
        "the attempt is active.",
    )
    secrets: dict[str, str] = pydantic.Field(
        default_factory=dict,
        repr=False,
        description="The values of the run's runtime.secrets by env name, sent only until "
        "the attempt is submitted (hub.vault); the agent gives them to the job and keeps "
        "them nowhere.",
    )
    secrets_error: str = pydantic.Field(
        default="",
        description="Why the run's secrets cannot be given (deleted since submission): the "
        "agent fails the attempt with it instead of starting the job without them.",
    )


class GuestOrder(_Payload):
    """Nodes this cluster lends to a spanning attempt headed by another cluster: start
    them (``workers`` x the per-worker resources) and join them to the head's Ray cluster;
    stop them once the order is no longer listed. ``address`` is None until the head's
    agent has said where to join (the nodes already started stay)."""

    token: Count32
    run_id: str
    head_cluster: str
    workers: Count32
    gpus_per_worker: float = 0.0
    cpus_per_worker: float = 0.0
    memory_per_worker: int = 0
    gpu_model: str | None = None
    address: str | None = None
    auth_token: str | None = None


class StopOrder(_Payload):
    """Stop this attempt (cancelled, revoked or superseded) and report it released."""

    token: int
    submission_id: str | None = None
    grace_s: float = 0.0
    """Warn the job first (``tau.preemption_notice()``) and stop it this much later."""
    reason: str = ""
    """Why, for the job's notice (a spot reclaim)."""


class PrepareHint(_Payload):
    """Prepare this runtime now: queued runs that will likely run here need it."""

    key: str
    pip: list[str]
    run_ids: list[str] = pydantic.Field(default_factory=list)


class AgentSyncReply(_Payload):
    """The hub's answer: what to run, what to stop, which nodes are faulty."""

    lease_expires: float
    assignments: list[Assignment] = pydantic.Field(default_factory=list)
    stop: list[StopOrder] = pydantic.Field(default_factory=list)
    faulty_nodes: dict[str, str] = pydantic.Field(default_factory=dict)
    peers: list[PeerEndpoint] = pydantic.Field(
        default_factory=list, description="Other regions' data planes; with full reports."
    )
    prepare: list[PrepareHint] = pydantic.Field(default_factory=list)
    uploads: list[Count32] = pydantic.Field(
        default_factory=list,
        description="Ended attempts whose held-back uploads the hub still wants (succeeded).",
    )
    guests: list[GuestOrder] = pydantic.Field(
        default_factory=list,
        description="Every spanning attempt this cluster lends nodes to now (declarative).",
    )


# -- tenancy (hub.tenancy_api) ---------------------------------------------------------
# Lengths match the store's columns; names are validated again against the platform
# models (``platform.models``) by the hub, which reports the field that is wrong.

_USER = r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$"
_TEXT = r"^[^\x00]*$"  # free text without NUL (PostgreSQL text cannot hold it)
User = Annotated[str, pydantic.StringConstraints(pattern=_USER)]


class WorkspaceCreate(_Payload):
    """``POST /v1/workspaces`` (admin): a TauWorkspace spec."""

    name: str = pydantic.Field(min_length=1, max_length=63)
    team: str = pydantic.Field(min_length=1, max_length=63)
    members: list[User] = pydantic.Field(default_factory=list, max_length=1000)
    namespace: str | None = pydantic.Field(default=None, max_length=63)
    queue: str | None = pydantic.Field(default=None, max_length=63)
    defaults: dict[str, Any] = pydantic.Field(default_factory=dict)
    data: dict[str, Any] = pydantic.Field(default_factory=dict)


class MembersChange(_Payload):
    """``POST /v1/workspaces/{name}/members`` (admin): members to add and to remove."""

    add: list[User] = pydantic.Field(default_factory=list, max_length=1000)
    remove: list[User] = pydantic.Field(default_factory=list, max_length=1000)


class QuotaRequestCreate(_Payload):
    """``POST /v1/workspaces/{name}/quota-requests``: ask for a team's new nominal quota."""

    gpu_model: str = pydantic.Field(min_length=1, max_length=64)
    gpus: int = pydantic.Field(ge=0, le=1_000_000, description="the nominal quota asked for")
    reason: str = pydantic.Field(min_length=1, max_length=2000, pattern=_TEXT)


class QuotaDecision(_Payload):
    """``POST /v1/admin/quota-requests/{id}/approve|reject`` (admin)."""

    reason: str = pydantic.Field(default="", max_length=2000, pattern=_TEXT)


SECRETS_PLATFORM_SCOPE = "*"
"""The ``scope`` of a platform secret in secret listings (every workspace can use it; a
workspace's own secret of the same name takes precedence). Never a workspace's name."""


class SecretSet(_Payload):
    """``PUT /v1/workspaces/{ws}/secrets/{name}`` and ``PUT /v1/secrets/{name}`` (the
    platform's): the secret's keys and values, sealed by the hub (``hub.core.vault``)."""

    data: dict[
        Annotated[str, pydantic.StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,253}$")],
        Annotated[str, pydantic.StringConstraints(max_length=65536)],
    ] = pydantic.Field(min_length=1, max_length=100)


class SecretInfo(_Payload):
    """A secret as the hub shows it (``GET``/``PUT`` of ``/v1/workspaces/{ws}/secrets``
    and ``/v1/secrets``): its name, scope and key names, never a value."""

    scope: str
    """The workspace that owns it, or ``SECRETS_PLATFORM_SCOPE`` for every workspace's."""
    name: str
    keys: list[str]
    created_at: float
    updated_at: float
    updated_by: str


class TokenCreate(_Payload):
    """``POST /v1/admin/tokens`` (admin): a bearer token for a person or an agent."""

    name: User
    role: str = pydantic.Field(pattern=r"^(admin|researcher|agent|metrics)$")
    workspaces: list[str] = pydantic.Field(default_factory=list, max_length=1000)
    cluster: str | None = pydantic.Field(default=None, max_length=64)
