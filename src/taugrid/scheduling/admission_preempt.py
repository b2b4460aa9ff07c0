"""Choosing preemption targets for one workload that fits only if others leave.

Owns Kueue's target search (``pkg/scheduler/preemption``), simplified to one pass:

1. Reclaim — allowed when the queue has a cohort, ``reclaim_within_cohort`` is not
   Never, and the preemptor's queue stays within its nominal quota after admission
   (a queue only reclaims what is its own). Candidates are preemptible workloads of
   *other* queues of the cohort that use a flavor-resource the preemptor needs, taken
   while their queue still borrows one of those flavor-resources; the queue with the
   highest dominant resource share gives first (fair sharing), and inside a queue the
   lowest priority, then the newest admission goes first. ``LowerPriority`` limits
   them to priorities strictly below the preemptor's.
2. Within the queue — when ``within_cluster_queue`` is LowerPriority: the queue's own
   workloads of strictly lower priority, lowest priority first, newest first.
3. Minimal set — targets are released one by one until the preemptor fits; then,
   in reverse order, each target but the last is put back if the preemptor still fits
   without evicting it (Kueue's "fill back").

Invariants: never a workload of equal or higher priority in the preemptor's own
queue; never a workload of a queue that is not borrowing (reclaim); never a workload
marked not preemptible; on failure the ledger is left exactly as found.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from taugrid.scheduling import admission_ledger as al
from taugrid.scheduling import admission_model as m

__all__ = ["Target", "find_targets", "may_reclaim", "usage_of"]

_Running = Mapping[str, Mapping[str, m.AdmittedWorkload]]
"""Admitted workloads by ClusterQueue, then by workload ID."""


@dataclasses.dataclass(frozen=True)
class Target:
    """A chosen victim and why (priority within its queue, or cohort reclaim)."""

    workload: m.AdmittedWorkload
    cause: m.Cause


def usage_of(w: m.AdmittedWorkload) -> list[tuple[m.FR, m.Amount]]:
    return [((f, r), a) for f, r, a in w.usage]


def _uses(w: m.AdmittedWorkload, frs: Mapping[m.FR, m.Amount]) -> bool:
    return any((f, r) in frs and a > 0 for f, r, a in w.usage)


def _order(w: m.AdmittedWorkload) -> tuple[int, float, str]:
    return (w.priority, -w.admitted_at, w.id)


def _own(
    wl: m.Workload, cq: str, needed: Mapping[m.FR, m.Amount], ledger: al.Ledger, running: _Running
) -> list[Target]:
    if ledger.cqs[cq].preemption.within_cluster_queue is m.WithinClusterQueue.NEVER:
        return []
    ws = [w for w in running.get(cq, {}).values() if w.priority < wl.priority]
    ws = [w for w in ws if w.preemptible and _uses(w, needed)]
    return [Target(w, m.Cause.PRIORITY) for w in sorted(ws, key=_order)]


def may_reclaim(cq: str, needed: Mapping[m.FR, m.Amount], ledger: al.Ledger) -> bool:
    queue = ledger.cqs[cq]
    if queue.cohort is None or queue.preemption.reclaim_within_cohort is m.Reclaim.NEVER:
        return False
    return all(ledger.used(cq, fr) + a <= ledger.nominal(cq, fr) for fr, a in needed.items())


def _peers(
    wl: m.Workload, cq: str, needed: Mapping[m.FR, m.Amount], ledger: al.Ledger, running: _Running
) -> dict[str, list[m.AdmittedWorkload]]:
    queue = ledger.cqs[cq]
    assert queue.cohort is not None
    lower_only = queue.preemption.reclaim_within_cohort is m.Reclaim.LOWER_PRIORITY
    peers: dict[str, list[m.AdmittedWorkload]] = {}
    for other in ledger.members[queue.cohort]:
        if other == cq:
            continue
        ws = [w for w in running.get(other, {}).values() if w.preemptible and _uses(w, needed)]
        if lower_only:
            ws = [w for w in ws if w.priority < wl.priority]
        if ws:
            peers[other] = sorted(ws, key=_order, reverse=True)  # pop() takes the first
    return peers


def _next_peer(
    peers: dict[str, list[m.AdmittedWorkload]], needed: Mapping[m.FR, m.Amount], ledger: al.Ledger
) -> Target | None:
    borrowing = [
        q for q, ws in peers.items() if ws and any(ledger.borrowing(q, fr) > 0 for fr in needed)
    ]
    if not borrowing:
        return None
    giver = max(borrowing, key=lambda q: (ledger.share(q), q))
    return Target(peers[giver].pop(), m.Cause.RECLAIM)


def _release(t: Target, ledger: al.Ledger, sign: int = -1) -> None:
    ledger.add(t.workload.cluster_queue, usage_of(t.workload), sign)


def _greedy(
    wl: m.Workload, cq: str, needed: Mapping[m.FR, m.Amount], ledger: al.Ledger, running: _Running
) -> list[Target] | None:
    targets: list[Target] = []
    if may_reclaim(cq, needed, ledger):
        peers = _peers(wl, cq, needed, ledger, running)
        while (t := _next_peer(peers, needed, ledger)) is not None:
            _release(t, ledger)
            targets.append(t)
            if ledger.fits(cq, needed):
                return targets
    for t in _own(wl, cq, needed, ledger, running):
        _release(t, ledger)
        targets.append(t)
        if ledger.fits(cq, needed):
            return targets
    for t in targets:
        _release(t, ledger, +1)
    return None


def _fill_back(
    targets: list[Target], cq: str, needed: Mapping[m.FR, m.Amount], ledger: al.Ledger
) -> list[Target]:
    kept = [targets[-1]]
    for t in reversed(targets[:-1]):
        _release(t, ledger, +1)
        if ledger.fits(cq, needed):
            continue  # not needed: it stays admitted
        _release(t, ledger)
        kept.append(t)
    return list(reversed(kept))


def find_targets(
    wl: m.Workload, cq: str, needed: Mapping[m.FR, m.Amount], ledger: al.Ledger, running: _Running
) -> list[Target] | None:
    """A minimal set of targets whose eviction lets ``wl`` fit ``needed`` in ``cq``.

    On success the targets' usage is already released from ``ledger``; on ``None``
    the ledger is unchanged. ``running`` maps queue → workload ID → admitted workload.
    """
    targets = _greedy(wl, cq, needed, ledger, running)
    if targets is None:
        return None
    return _fill_back(targets, cq, needed, ledger)
