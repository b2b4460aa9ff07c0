"""One scheduling cycle: a pure function ``(snapshot, pending, policy) → decisions``.

Numbered phases, kueue ``schedule()`` style:

1. heads    — order pending runs: priority (high first), then submission time (FIFO).
2. snapshot — copy free capacity and quota usage into mutable working state; the
              caller's ``Snapshot`` is never mutated.
3. admit    — a run not yet admitted reserves quota of its team for its GPU model;
              without room it waits (BestEffortFIFO: later runs may still go).
4. place    — filter every cluster, score the survivors, pick the best.
5. reserve  — deduct the run's resources from the working state so later runs in this
              cycle see them as taken.
6. dispatch / 7. requeue — done by the caller (hub or simulator): it persists
              ``Decision``s, sends assignments, and on dispatch failure unreserves.

Deterministic: ties break on cluster ID. No clock, no I/O, no randomness.
"""

from __future__ import annotations

import dataclasses
import enum

from taugrid.scheduling import plugins, plugins_data
from taugrid.scheduling import snapshot as snap

__all__ = [
    "ClusterVerdict",
    "Decision",
    "Outcome",
    "Policy",
    "default_policy",
    "reserve",
    "schedule",
]


class Outcome(enum.StrEnum):
    """What the cycle decided for one run."""

    PLACED = "placed"  # admitted (now or before) and assigned to a cluster
    ADMITTED = "admitted"  # quota reserved, no cluster fits yet
    WAITING_QUOTA = "waiting_quota"  # not admitted: quota of its team is used up
    NOT_YET = "not_yet"  # backoff: not before a later time


@dataclasses.dataclass(frozen=True)
class ClusterVerdict:
    """Why a cluster was kept or dropped, and its weighted score breakdown."""

    cluster_id: str
    region: str
    ok: bool
    reason: str
    scores: dict[str, float]
    total: float


@dataclasses.dataclass(frozen=True)
class Decision:
    run_id: str
    outcome: Outcome
    cluster_id: str | None
    reason: str
    verdicts: tuple[ClusterVerdict, ...] = ()


@dataclasses.dataclass(frozen=True)
class Policy:
    """Which plugins run and how scores are weighted (weights are normalised)."""

    filters: tuple[plugins.FilterPlugin, ...]
    scorers: tuple[plugins.ScorePlugin, ...]
    weights: dict[str, float]

    def normalised_weights(self) -> dict[str, float]:
        total = sum(self.weights.get(s.name, 0.0) for s in self.scorers) or 1.0
        return {s.name: self.weights.get(s.name, 0.0) / total for s in self.scorers}


def default_policy() -> Policy:
    """Built-in filters (+ move-vs-wait) and scores: data affinity, idle GPUs, cost.

    ``wait`` and ``warm`` are scored and shown by explain-placement but weigh 0 unless
    a policy gives them a weight.
    """
    return Policy(
        filters=(
            plugins.ReadyFilter(),
            plugins.RegionFilter(),
            plugins.FitFilter(),
            plugins_data.DataMoveFilter(),
        ),
        scorers=(
            plugins_data.DataAffinityScore(),
            plugins.IdleGpuScore(),
            plugins.CostScore(),
            plugins_data.ExpectedWaitScore(),
            plugins_data.WarmRuntimeScore(),
        ),
        weights={"data": 0.5, "idle_gpu": 0.3, "cost": 0.2},
    )


@dataclasses.dataclass
class _Work:
    clusters: dict[str, snap.ClusterView]
    quota_left: dict[tuple[str, str], int]


def _heads(pending: list[snap.PendingRun]) -> list[snap.PendingRun]:
    return sorted(pending, key=lambda r: (-r.priority, r.created_at, r.run_id))


def _admit(run: snap.PendingRun, work: _Work) -> str | None:
    """Reserve quota; returns the GPU model charged, or None when there is no room."""
    if run.total_gpus == 0:
        return ""
    models = (
        [run.gpu_model] if run.gpu_model else sorted(m for t, m in work.quota_left if t == run.team)
    )
    for model in models:
        if work.quota_left.get((run.team, model), 0) >= run.total_gpus:
            work.quota_left[(run.team, model)] -= run.total_gpus
            return model
    return None


def _verdict(run: snap.PendingRun, c: snap.ClusterView, policy: Policy) -> ClusterVerdict:
    for f in policy.filters:
        st = f.filter(run, c)
        if not st.ok:
            return ClusterVerdict(c.cluster_id, c.region, False, f"{f.name}: {st.reason}", {}, 0.0)
    weights = policy.normalised_weights()
    scores = {s.name: min(100.0, max(0.0, s.score(run, c))) for s in policy.scorers}
    total = sum(weights[n] * v for n, v in scores.items())
    return ClusterVerdict(c.cluster_id, c.region, True, "fits", scores, round(total, 3))


def reserve(run: snap.PendingRun, cluster: snap.ClusterView) -> snap.ClusterView:
    nodes = list(cluster.nodes)
    for _ in range(run.workers):
        for i, n in enumerate(nodes):
            one = dataclasses.replace(run, workers=1)
            if plugins.fits(one, (n,)):
                nodes[i] = dataclasses.replace(
                    n,
                    gpus_free=n.gpus_free - run.gpus_per_worker,
                    cpus_free=n.cpus_free - run.cpus_per_worker,
                    memory_free=n.memory_free - run.memory_per_worker,
                )
                break
    return dataclasses.replace(cluster, nodes=tuple(nodes))


def _place(run: snap.PendingRun, work: _Work, policy: Policy) -> Decision:
    verdicts = tuple(
        _verdict(run, c, policy) for c in sorted(work.clusters.values(), key=lambda c: c.cluster_id)
    )
    ok = [v for v in verdicts if v.ok]
    if not ok:
        reasons = (
            "; ".join(f"{v.cluster_id}: {v.reason}" for v in verdicts) or "no clusters registered"
        )
        return Decision(run.run_id, Outcome.ADMITTED, None, reasons, verdicts)
    best = max(ok, key=lambda v: (v.total, v.cluster_id))
    work.clusters[best.cluster_id] = reserve(run, work.clusters[best.cluster_id])
    return Decision(
        run.run_id, Outcome.PLACED, best.cluster_id, f"best score {best.total:g}", verdicts
    )


def schedule(
    snapshot: snap.Snapshot, pending: list[snap.PendingRun], policy: Policy
) -> list[Decision]:
    """Run phases 1-5 over ``pending``; one ``Decision`` per run, in head order."""
    work = _Work(
        clusters={c.cluster_id: c for c in snapshot.clusters},
        quota_left={(q.team, q.gpu_model): q.nominal - q.used for q in snapshot.quotas},
    )
    decisions = []
    for run in _heads(pending):
        if run.not_before > snapshot.now:
            decisions.append(Decision(run.run_id, Outcome.NOT_YET, None, "retry backoff"))
            continue
        if not run.admitted and _admit(run, work) is None:
            decisions.append(
                Decision(
                    run.run_id,
                    Outcome.WAITING_QUOTA,
                    None,
                    f"team {run.team} quota for {run.gpu_model or 'GPUs'} is in use",
                )
            )
            continue
        decisions.append(_place(run, work, policy))
    return decisions
