"""Builders for admission tests: ClusterQueues, workloads and states in one line each.

Quotas are given as ``{flavor: nominal}`` or ``{flavor: (nominal, borrowing_limit,
lending_limit)}`` for the GPU resource; every ClusterQueue gets a LocalQueue of the
same name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from taugrid.platform import models as pm
from taugrid.scheduling import admission_model as am

__all__ = ["GPU", "cq", "done", "running", "state", "wl"]

GPU = am.GPU
Limits = int | tuple[int, int | None, int | None]


def cq(
    name: str,
    quotas: Mapping[str, Limits],
    cohort: str | None = None,
    *,
    strict: bool = False,
    preemption: am.PreemptionPolicy | None = None,
    weight: float = 1.0,
) -> am.ClusterQueue:
    flavors = []
    for flavor, limits in quotas.items():
        nominal, borrow, lend = (limits, None, None) if isinstance(limits, int) else limits
        flavors.append(am.FlavorQuotas(flavor, (am.ResourceQuota(GPU, nominal, borrow, lend),)))
    strategy = pm.QueueingStrategy.STRICT_FIFO if strict else pm.QueueingStrategy.BEST_EFFORT_FIFO
    return am.ClusterQueue(
        name,
        (am.ResourceGroup(tuple(flavors)),),
        cohort,
        strategy,
        preemption or am.PreemptionPolicy(),
        weight,
    )


def wl(
    wid: str, queue: str, gpus: int, priority: int = 0, t: float = 0.0, flavor: str | None = None
) -> am.Workload:
    allowed = ((GPU, flavor),) if flavor else ()
    return am.Workload(wid, queue, priority, t, ((GPU, gpus),), allowed)


def running(
    wid: str, queue: str, gpus: float, priority: int = 0, t: float = 0.0, flavor: str = "A100"
) -> am.AdmittedWorkload:
    return am.AdmittedWorkload(wid, queue, priority, t, ((flavor, GPU, gpus),))


def state(cqs: Iterable[am.ClusterQueue], admitted: Iterable[am.AdmittedWorkload] = ()) -> am.State:
    cqs = tuple(cqs)
    return am.State(cqs, tuple(am.LocalQueue(c.name, c.name) for c in cqs), tuple(admitted))


def done(
    result: am.CycleResult, pending: Iterable[am.Workload], t: float
) -> list[am.AdmittedWorkload]:
    """The admitted workloads of ``result`` as running workloads admitted at ``t``."""
    by_id = {w.id: w for w in pending}
    out = []
    for r in result.results:
        if r.status is am.Status.ADMITTED:
            w = by_id[r.workload_id]
            usage = tuple((f, res, dict(w.requests)[res]) for res, f in r.assignment)
            out.append(am.AdmittedWorkload(w.id, r.cluster_queue, w.priority, t, usage))
    return out
