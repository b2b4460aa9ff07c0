"""The execution backend contract: one documented ABC and the values it speaks.

A ``Backend`` runs *submissions* (a command plus its runtime environment and the
resources its driver needs) on one cluster and reports on them. It owns no scheduling
decision: the hub has already chosen the cluster; the backend only executes, observes
and releases. Implementations declare what they can do in ``capabilities``; callers
check ``supports()`` before using an optional operation, which otherwise raises
``NotImplementedError``.

Vocabulary:

- *job id*: the submission id the caller chose (``Submission.submission_id``); a
  backend echoes it back from ``submit`` and accepts it everywhere else.
- *inventory*: a snapshot of the cluster's nodes with total/available logical
  resources; GPUs may be *emulated* (Ray logical resources, no device behind them).
- *released*: a terminal job holds nothing any more: no driver, actor, task or
  placement group of it is alive, so its GPUs can be handed to the next run.

``JobState`` state machine (the Ray Jobs API's, which every backend maps onto)::

    PENDING ──▶ RUNNING ──▶ SUCCEEDED
       │           ├──────▶ FAILED
       │           └──────▶ STOPPED
       ├──────────────────▶ FAILED    runtime env setup failed, driver could not start
       └──────────────────▶ STOPPED   stopped before it started

SUCCEEDED, FAILED and STOPPED are terminal: a job never leaves them. PENDING covers
"waiting for the driver's resources", which on a fixed-size cluster may be forever
when no node can ever hold them (see the backend's notes).
"""

from __future__ import annotations

import abc
import datetime as dt
import enum
import time
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import pydantic

from taugrid.spec import units

__all__ = [
    "Backend",
    "Capability",
    "ClusterInventory",
    "GpuCount",
    "JobPlacement",
    "JobState",
    "JobStatus",
    "LogChunk",
    "NodeInventory",
    "PhaseSignal",
    "PodAttempt",
    "Submission",
]


class Capability(enum.Enum):
    """Optional operations a backend may declare."""

    WORKING_DIR = "working_dir"  # runtime_env working_dir of a local dir is shipped
    PIP = "pip"  # runtime_env pip packages are installed for the job
    ENV_VARS = "env_vars"  # runtime_env env_vars reach the entrypoint
    ENTRYPOINT_RESOURCES = "entrypoint_resources"  # driver cpus/gpus/memory/custom honoured
    STOP = "stop"
    LOGS = "logs"
    INVENTORY = "inventory"
    JOB_NODES = "job_nodes"
    RELEASE_CHECK = "release_check"
    RUN_SPEC = "run_spec"  # submit_run: renders its own objects from the run's spec
    QUEUES = "queues"  # queue_usage: the cluster's own queues (Kueue) in state reports


class JobState(enum.Enum):
    """Where a job is; the state machine is drawn in the module docstring."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"

    @property
    def terminal(self) -> bool:
        """True for SUCCEEDED, FAILED and STOPPED, which are never left."""
        return self in _TERMINAL

    def can_become(self, other: JobState) -> bool:
        """Whether the state machine allows ``self → other`` (staying put is allowed)."""
        return other == self or other in _NEXT[self]


_TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED})
_NEXT: dict[JobState, frozenset[JobState]] = {
    JobState.PENDING: frozenset({JobState.RUNNING}) | _TERMINAL,
    JobState.RUNNING: _TERMINAL,
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.STOPPED: frozenset(),
}


class _Value(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class PodAttempt(_Value):
    """What an attempt's pods need to fetch their code and store their outputs
    themselves (``agent.records.podsync``, which wraps the run's command): the wrapper's argv,
    its environment, the values it reads from a Secret (the record store's credentials,
    by variable name) and where its scratch volume is mounted."""

    command: tuple[str, ...]
    env: dict[str, str]
    secret_env: dict[str, str] = pydantic.Field(default_factory=dict)
    root: str
    grace_s: int = pydantic.Field(
        default=30,
        ge=1,
        description="The pods' terminationGracePeriodSeconds: the wrapper's notice to the "
        "job and its final upload both fit in it.",
    )
    prepare: tuple[str, ...] = pydantic.Field(
        default=(),
        description="The wrapper's argv that only fetches the code (and a serving run's "
        "model) into the scratch volume: a serving pod's init container.",
    )
    notice: tuple[str, ...] = pydantic.Field(
        default=(),
        description="The wrapper's argv that gives the wrappers running in its container "
        "their notice and waits for them: the preStop hook of a Ray pod, where the "
        "wrapper is a Ray job's driver rather than the pod's main process.",
    )
    model_path: str | None = pydantic.Field(
        default=None,
        description="A serving run's model inside the scratch volume, where the wrapper's "
        "--prepare puts it from the record (TAU_MODEL_PATH in the pods).",
    )


class Submission(_Value):
    """What to run: the Ray Jobs submission, backend-neutral.

    ``taugrid.render.rayjobs.RayJobSubmission`` has the same field names; ``coerce``
    accepts it (or any object with ``model_dump()`` or a mapping) without importing it.
    """

    submission_id: str = pydantic.Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    entrypoint: str = pydantic.Field(min_length=1)
    entrypoint_num_cpus: float | None = pydantic.Field(default=None, ge=0)
    entrypoint_num_gpus: float | None = pydantic.Field(default=None, ge=0)
    entrypoint_memory: int | None = pydantic.Field(default=None, ge=0, description="bytes")
    entrypoint_resources: dict[str, float] = pydantic.Field(default_factory=dict)
    entrypoint_label_selector: dict[str, str] = pydantic.Field(default_factory=dict)
    runtime_env: dict[str, Any] = pydantic.Field(default_factory=dict)
    metadata: dict[str, str] = pydantic.Field(default_factory=dict)

    @pydantic.field_validator("entrypoint_memory", mode="before")
    @classmethod
    def _memory_quantity(cls, value: object) -> object:
        # Renderers may hand over "64Gi"; Ray wants bytes.
        if isinstance(value, str):
            return units.parse_quantity_bytes(value)
        return value

    @classmethod
    def coerce(cls, obj: object) -> Submission:
        """A ``Submission`` from itself, a pydantic model with the same fields, or a mapping.

        Unknown keys are dropped so a richer renderer model still fits; missing
        required ones fail validation with pydantic's message.
        """
        if isinstance(obj, Submission):
            return obj
        dump = getattr(obj, "model_dump", None)
        data: object = dump() if callable(dump) else obj
        if not isinstance(data, Mapping):
            raise TypeError(f"cannot make a Submission from {type(obj).__name__}")
        return cls.model_validate({k: v for k, v in data.items() if k in cls.model_fields})


class PhaseSignal(_Value):
    """What the cluster itself says about one of a run's phases (``lifecycle.phases``
    names and statuses), with the object that said it as ``source``."""

    phase: str
    status: str
    source: str
    reason: str = ""


class JobStatus(_Value):
    """One observation of a job."""

    job_id: str
    state: JobState
    message: str = ""
    exit_code: int | None = pydantic.Field(
        default=None, description="The entrypoint's exit code when known (0 on success)."
    )
    start_time: dt.datetime | None = None
    end_time: dt.datetime | None = None
    driver_node_id: str | None = None
    error_type: str | None = None
    signals: tuple[PhaseSignal, ...] = ()
    serve: dict[str, Any] | None = None
    """A serving run's Serve status of its app where the cluster reports it (Kubernetes:
    the RayService's status), shaped as ``backends.programs.serve_driver`` writes it; None where
    the run's own driver writes it (Ray regions)."""


class LogChunk(_Value):
    """Log text from ``offset`` (characters) on; read again from ``next_offset``."""

    text: str
    offset: int
    next_offset: int


class JobPlacement(_Value):
    """Which nodes a job's driver and its workers (actors, tasks) run on now."""

    job_id: str
    driver_node_id: str | None
    worker_node_ids: frozenset[str] = frozenset()

    @property
    def node_ids(self) -> frozenset[str]:
        """Every node the job touches."""
        driver = {self.driver_node_id} if self.driver_node_id else set()
        return self.worker_node_ids | driver


class NodeInventory(_Value):
    """One node: identity, liveness and logical resources (totals and what is free)."""

    node_id: str
    ip: str
    is_head: bool = False
    alive: bool
    state_message: str | None = None
    cpu_total: float = 0.0
    cpu_available: float = 0.0
    gpu_total: float = 0.0
    gpu_available: float = 0.0
    memory_total: int = pydantic.Field(default=0, description="bytes (Ray logical memory)")
    memory_available: int = 0
    accelerator: str | None = pydantic.Field(
        default=None, description="GPU model from the accelerator_type:<model> resource."
    )
    resources_total: dict[str, float] = pydantic.Field(default_factory=dict)
    resources_available: dict[str, float] = pydantic.Field(default_factory=dict)
    labels: dict[str, str] = pydantic.Field(default_factory=dict)
    reclaim: str | None = pydantic.Field(
        default=None,
        description="A reclaim notice the cluster shows for the node (a termination taint).",
    )

    @property
    def gpu_busy(self) -> float:
        """GPUs held by something on this node."""
        return max(self.gpu_total - self.gpu_available, 0.0)


class GpuCount(_Value):
    """GPUs of one model across the alive nodes."""

    total: float
    free: float

    @property
    def busy(self) -> float:
        """GPUs in use."""
        return max(self.total - self.free, 0.0)


class ClusterInventory(_Value):
    """A snapshot of a cluster; totals count alive nodes only (a dead node offers nothing)."""

    nodes: list[NodeInventory]
    emulated_gpus: bool = pydantic.Field(
        default=False, description="GPUs are Ray logical resources, not devices."
    )
    remote_nodes: bool = pydantic.Field(
        default=False,
        description="The nodes are machines the agent does not run on (Kubernetes): its "
        "health checker samples none of them (no disks, no NVML), only injected readings.",
    )
    taken_at: dt.datetime

    @property
    def alive_nodes(self) -> list[NodeInventory]:
        """Nodes that are up."""
        return [n for n in self.nodes if n.alive]

    @property
    def gpu_total(self) -> float:
        """GPUs on alive nodes."""
        return sum(n.gpu_total for n in self.alive_nodes)

    @property
    def gpu_free(self) -> float:
        """GPUs nobody holds."""
        return sum(n.gpu_available for n in self.alive_nodes)

    @property
    def gpu_busy(self) -> float:
        """GPUs in use."""
        return sum(n.gpu_busy for n in self.alive_nodes)

    @property
    def gpu_models(self) -> dict[str, GpuCount]:
        """GPU totals per model (nodes without a declared model count as "unknown")."""
        out: dict[str, GpuCount] = {}
        for n in self.alive_nodes:
            if n.gpu_total <= 0:
                continue
            key = n.accelerator or "unknown"
            prev = out.get(key, GpuCount(total=0.0, free=0.0))
            out[key] = GpuCount(total=prev.total + n.gpu_total, free=prev.free + n.gpu_available)
        return out

    @property
    def cpu_usage(self) -> float:
        """Fraction (0..1) of logical CPUs in use on alive nodes."""
        total = sum(n.cpu_total for n in self.alive_nodes)
        free = sum(n.cpu_available for n in self.alive_nodes)
        return (total - free) / total if total > 0 else 0.0

    @property
    def gpu_usage(self) -> float:
        """Fraction (0..1) of GPUs in use on alive nodes."""
        total = self.gpu_total
        return self.gpu_busy / total if total > 0 else 0.0


class Backend(abc.ABC):
    """Executes submissions on one cluster and observes them.

    Required: ``submit``, ``status``. Optional operations are listed in
    ``capabilities``; the defaults here raise ``NotImplementedError``. Errors follow
    ``taugrid.backends.errors``: ``UserError`` subclasses for what the caller can fix
    (unknown job, rejected submission), ``SystemFault`` with ``retryable`` otherwise.
    """

    name: ClassVar[str] = "abstract"
    capabilities: ClassVar[frozenset[Capability]] = frozenset()

    def supports(self, capability: Capability) -> bool:
        """Whether this backend implements ``capability``."""
        return capability in self.capabilities

    @abc.abstractmethod
    def submit(self, submission: Submission | Any) -> str:
        """Start a job; returns its job id (the submission id). Accepts ``Submission.coerce``
        inputs. Raises ``DuplicateSubmission`` when the id is already taken."""

    @abc.abstractmethod
    def status(self, job_id: str) -> JobStatus:
        """The job's current state, message, exit code and times."""

    def submit_run(
        self,
        spec: Mapping[str, Any],
        run_id: str,
        submission_id: str,
        pod: PodAttempt | None = None,
        secrets: Mapping[str, str] | None = None,
        capacity: str | None = None,
    ) -> str:
        """Start attempt ``submission_id`` of run ``run_id`` from its run spec (a
        ``render.runspec.RunSpec`` dump), rendering what the cluster needs
        (``Capability.RUN_SPEC``); with ``pod``, the run's pods fetch their code and
        store their outputs through it; ``secrets``: the values of its
        ``runtime.secrets`` by env name (kept where only its pods read them);
        ``capacity``: the hub's placement (spot, on-demand), which node pools its pods
        may use; returns the job id."""
        raise NotImplementedError(f"{self.name} backend takes submissions, not run specs")

    def pods_store_records(self, spec: Mapping[str, Any]) -> bool:
        """Whether a run of ``spec`` here stores its outputs from its own pods, given a
        ``PodAttempt`` at ``submit_run`` (else the agent's machine holds them)."""
        return False

    def queue_usage(self) -> list[dict[str, Any]]:
        """The cluster's own queues: usage and pending work (``Capability.QUEUES``)."""
        raise NotImplementedError(f"{self.name} backend has no queues of its own")

    def logs(self, job_id: str) -> str:
        """All of the job's driver log so far (``Capability.LOGS``)."""
        raise NotImplementedError(f"{self.name} backend cannot read logs")

    def read_logs(self, job_id: str, offset: int = 0) -> LogChunk:
        """Log text from ``offset`` on; poll with the returned ``next_offset``."""
        text = self.logs(job_id)
        return LogChunk(text=text[offset:], offset=offset, next_offset=max(len(text), offset))

    def tail_logs(
        self, job_id: str, *, poll_s: float = 0.5, timeout_s: float | None = None
    ) -> Iterator[str]:
        """Yield new log text until the job is terminal (and its log drained) or timeout."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        offset = 0
        while True:
            done = self.status(job_id).state.terminal
            chunk = self.read_logs(job_id, offset)
            offset = chunk.next_offset
            if chunk.text:
                yield chunk.text
            if done or (deadline is not None and time.monotonic() >= deadline):
                return
            time.sleep(poll_s)

    def stop(self, job_id: str) -> None:
        """Ask the job to stop; returns at once, ``status`` shows STOPPED later."""
        raise NotImplementedError(f"{self.name} backend cannot stop jobs")

    def inventory(self) -> ClusterInventory:
        """Nodes and their resources now (``Capability.INVENTORY``)."""
        raise NotImplementedError(f"{self.name} backend has no inventory")

    def job_nodes(self, job_id: str) -> JobPlacement:
        """Which nodes the job's driver and workers are on (``Capability.JOB_NODES``)."""
        raise NotImplementedError(f"{self.name} backend cannot place jobs on nodes")

    def settling(self, job_id: str) -> bool:
        """The job ended (``status`` is terminal) but a container of it may still be
        storing outputs, e.g. a deleted pod within its grace period; the agent reports
        the end once this is False. Backends whose end is final say False."""
        return False

    def release_check(self, job_id: str) -> bool:
        """True when the job is terminal and holds no resources any more."""
        raise NotImplementedError(f"{self.name} backend cannot check release")
