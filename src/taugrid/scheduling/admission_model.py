"""Values of the admission core: queues and quotas in, admissions and evictions out.

Owns the frozen inputs (``ClusterQueue`` with Kueue's resource groups → flavors →
per-resource quotas, ``LocalQueue``, ``Workload``, ``AdmittedWorkload``, ``State``) and
outputs (``WorkloadResult`` per pending workload, ``Eviction`` per preemption target,
``CycleResult``). Semantics live in ``scheduling.admission``'s docstring.

Vocabulary: a *flavor* is a GPU model (or ``default-flavor`` for cpu/memory); a
*flavor-resource* (``FR``) is a ``(flavor, resource)`` pair, the unit quota is kept in.
Amounts are integers (GPUs, milli-CPUs, bytes) so that quota arithmetic is exact.
"""

from __future__ import annotations

import dataclasses
import enum

from taugrid.platform import models as pm

__all__ = [
    "CPU",
    "DEFAULT_FLAVOR",
    "FR",
    "GPU",
    "MEMORY",
    "PREEMPTED",
    "AdmittedWorkload",
    "Amount",
    "Cause",
    "ClusterQueue",
    "CycleResult",
    "Eviction",
    "FlavorQuotas",
    "LocalQueue",
    "PreemptionPolicy",
    "Reclaim",
    "ResourceGroup",
    "ResourceQuota",
    "State",
    "Status",
    "WithinClusterQueue",
    "Workload",
    "WorkloadResult",
    "quantize",
]

GPU = "nvidia.com/gpu"
CPU = "cpu"
MEMORY = "memory"
DEFAULT_FLAVOR = "default-flavor"
PREEMPTED = "Preempted"

FR = tuple[str, str]
"""A flavor-resource: ``(flavor, resource)``, e.g. ``("A100-80G", "nvidia.com/gpu")``."""

Amount = float
"""A quantity of one resource. GPUs may be shares of one GPU (``compute.gpus: 0.5``), so
amounts are numbers, kept exact to a millionth by ``quantize`` (Kueue keeps milli-units)."""


def quantize(amount: float) -> float:
    """``amount`` rounded to a millionth: sums of shares (0.1 + 0.2) compare exactly."""
    return round(amount, 6)


@dataclasses.dataclass(frozen=True)
class ResourceQuota:
    """Quota of one resource in one flavor. ``None`` limits mean "no limit" (Kueue)."""

    resource: str
    nominal: Amount
    borrowing_limit: Amount | None = None
    lending_limit: Amount | None = None

    def __post_init__(self) -> None:
        for name in ("nominal", "borrowing_limit", "lending_limit"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{self.resource}: {name} must be >= 0, got {value}")

    @property
    def lendable(self) -> Amount:
        """How much of ``nominal`` other ClusterQueues of the cohort may use."""
        if self.lending_limit is None:
            return self.nominal
        return min(self.nominal, self.lending_limit)

    @property
    def guaranteed(self) -> Amount:
        """The part of ``nominal`` never lent: always available to its own queue."""
        return self.nominal - self.lendable


@dataclasses.dataclass(frozen=True)
class FlavorQuotas:
    """One flavor of a resource group with the quota of each covered resource."""

    flavor: str
    resources: tuple[ResourceQuota, ...]

    def quota(self, resource: str) -> ResourceQuota | None:
        return next((q for q in self.resources if q.resource == resource), None)


@dataclasses.dataclass(frozen=True)
class ResourceGroup:
    """Resources assigned together; flavors are tried in order (Kueue fungibility)."""

    flavors: tuple[FlavorQuotas, ...]

    @property
    def covered(self) -> frozenset[str]:
        return frozenset(q.resource for f in self.flavors for q in f.resources)


class WithinClusterQueue(enum.StrEnum):
    """``preemption.withinClusterQueue``: whom a workload may preempt in its own queue."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class Reclaim(enum.StrEnum):
    """``preemption.reclaimWithinCohort``: whom it may preempt in borrowing cohort peers."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


@dataclasses.dataclass(frozen=True)
class PreemptionPolicy:
    """Defaults match what ``render.kueue`` writes into every ClusterQueue."""

    within_cluster_queue: WithinClusterQueue = WithinClusterQueue.LOWER_PRIORITY
    reclaim_within_cohort: Reclaim = Reclaim.ANY


@dataclasses.dataclass(frozen=True)
class ClusterQueue:
    """A team's ClusterQueue: quotas, optional cohort, strategy, preemption, fair weight."""

    name: str
    resource_groups: tuple[ResourceGroup, ...]
    cohort: str | None = None
    strategy: pm.QueueingStrategy = pm.QueueingStrategy.BEST_EFFORT_FIFO
    preemption: PreemptionPolicy = PreemptionPolicy()
    fair_weight: float = 1.0

    def quotas(self) -> dict[FR, ResourceQuota]:
        return {
            (f.flavor, q.resource): q for g in self.resource_groups for f in g.flavors
            for q in f.resources
        }  # fmt: skip


@dataclasses.dataclass(frozen=True)
class LocalQueue:
    """A workspace's queue; workloads name it, it names its ClusterQueue."""

    name: str
    cluster_queue: str


@dataclasses.dataclass(frozen=True)
class Workload:
    """A pending workload: total requests per resource and its ordering keys.

    ``allowed_flavors`` holds ``(resource, flavor)`` pairs: a resource named there may
    only be given one of its listed flavors (a run's ``gpu_model``); others are free.
    """

    id: str
    queue: str
    priority: int
    created_at: float
    requests: tuple[tuple[str, Amount], ...]
    allowed_flavors: tuple[tuple[str, str], ...] = ()

    def allows(self, resource: str, flavor: str) -> bool:
        listed = [f for r, f in self.allowed_flavors if r == resource]
        return not listed or flavor in listed


@dataclasses.dataclass(frozen=True)
class AdmittedWorkload:
    """A workload holding quota. ``preemptible=False`` models usage nobody may evict."""

    id: str
    cluster_queue: str
    priority: int
    admitted_at: float
    usage: tuple[tuple[str, str, Amount], ...]  # (flavor, resource, amount)
    preemptible: bool = True


@dataclasses.dataclass(frozen=True)
class State:
    """Everything admission decides on; never mutated."""

    cluster_queues: tuple[ClusterQueue, ...]
    local_queues: tuple[LocalQueue, ...] = ()
    admitted: tuple[AdmittedWorkload, ...] = ()


class Status(enum.StrEnum):
    """Per pending workload: ADMITTED, PREEMPTING (admitted once its targets are gone),
    or WAITING (stays queued; ``reason`` says which quota)."""

    ADMITTED = "admitted"
    PREEMPTING = "preempting"
    WAITING = "waiting"


class Cause(enum.StrEnum):
    """Why a target is preempted: a higher priority in its queue, or quota reclaim."""

    PRIORITY = "InClusterQueue"
    RECLAIM = "InCohortReclamation"


@dataclasses.dataclass(frozen=True)
class WorkloadResult:
    """What admission decided for one pending workload.

    ``assignment`` is ``(resource, flavor)`` per requested resource; ``borrowed`` is
    ``(flavor, resource, amount)`` beyond the queue's nominal that this admission takes
    from the cohort; ``preempt`` lists target IDs when ``status`` is PREEMPTING.
    """

    workload_id: str
    cluster_queue: str
    status: Status
    reason: str
    assignment: tuple[tuple[str, str], ...] = ()
    borrowed: tuple[tuple[str, str, Amount], ...] = ()
    preempt: tuple[str, ...] = ()

    def borrowed_of(self, resource: str) -> Amount:
        return sum(a for _, r, a in self.borrowed if r == resource)


@dataclasses.dataclass(frozen=True)
class Eviction:
    """A preemption target: condition reason ``Preempted``, ``cause`` says why."""

    workload_id: str
    cluster_queue: str
    preemptor: str
    cause: Cause
    message: str
    reason: str = PREEMPTED


@dataclasses.dataclass(frozen=True)
class CycleResult:
    """Results in decision order, and the evictions the shell must carry out."""

    results: tuple[WorkloadResult, ...]
    evictions: tuple[Eviction, ...]

    def by_id(self) -> dict[str, WorkloadResult]:
        return {r.workload_id: r for r in self.results}
