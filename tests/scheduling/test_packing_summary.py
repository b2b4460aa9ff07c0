"""The memoised cluster-level fit/idle plugins decide exactly like the stock ones."""

from __future__ import annotations

import random

from taugrid.scheduling import cycle
from taugrid.scheduling import snapshot as snap
from taugrid.scheduling.packing import summary


def build(seed: int) -> tuple[snap.Snapshot, list[snap.PendingRun]]:
    rng = random.Random(seed)
    clusters = tuple(
        snap.ClusterView(
            f"c{r}",
            f"r{r}",
            ready=r != 3,
            nodes=tuple(
                snap.NodeView(
                    f"c{r}n{i}",
                    rng.choice(["A", "B"]),
                    8,
                    rng.choice([0, 1, 4, 8]),
                    rng.choice([4, 32, 96]),
                    rng.choice([16, 512]),
                    healthy=i != 2,
                )
                for i in range(6)
            ),
            cost_per_gpu_hour=rng.uniform(1, 5),
        )
        for r in range(6)
    )
    pending = [
        snap.PendingRun(
            f"p{i}",
            "t",
            0,
            float(i),
            rng.choice([1, 2, 3]),
            rng.choice([0, 1, 2, 8]),
            rng.choice([1, 16]),
            rng.choice([8, 64]),
            rng.choice(["A", "B", None]),
            admitted=True,
        )
        for i in range(80)
    ]
    return snap.Snapshot(0.0, clusters, ()), pending


def test_fast_policy_places_like_the_default_policy() -> None:
    for seed in range(5):
        snapshot, pending = build(seed)
        stock = cycle.schedule(snapshot, pending, cycle.default_policy())
        fast = cycle.schedule(snapshot, pending, summary.fast_policy())
        assert [(d.run_id, d.outcome, d.cluster_id) for d in stock] == [
            (d.run_id, d.outcome, d.cluster_id) for d in fast
        ]
