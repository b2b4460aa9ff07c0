"""The placement cycle's shortcuts give the answers of the plain computation.

The cycle reserves by arithmetic, carries memoised slot counts and GPU totals across
reservations and reuses verdicts between runs with the same request; each test checks
one shortcut against the answer computed from scratch.
"""

from __future__ import annotations

import dataclasses
import random

from taugrid.scheduling import cycle, plugins
from taugrid.scheduling import snapshot as snap


def node(i: int, free: float, model: str = "A100", cpus: float = 32) -> snap.NodeView:
    return snap.NodeView(f"n{i}", model, 8, free, cpus, 256)


def pending(i: int, workers: int, gpus: int, model: str | None = "A100") -> snap.PendingRun:
    return snap.PendingRun(
        f"r{i:03d}", "t", 0, float(i), workers, gpus, 8, 64, model, admitted=True
    )


def fresh(c: snap.ClusterView) -> snap.ClusterView:
    """The same cluster as a new object: nothing memoised."""
    return dataclasses.replace(c, nodes=tuple(c.nodes))


def test_reserve_takes_workers_first_fit_node_by_node() -> None:
    # 3 workers x 2 GPUs: n0 has 1 free (no room), n1 has 4 (two workers), n2 gets the third;
    # n3 (an H100 node) is never touched.
    c = snap.ClusterView(
        "c",
        "r",
        True,
        (node(0, 1), node(1, 4), node(2, 8), node(3, 8, "H100")),
        cost_per_gpu_hour=1,
    )
    after = cycle.reserve(pending(0, 3, 2), c)
    assert [n.gpus_free for n in after.nodes] == [1, 0, 6, 8]
    assert [n.cpus_free for n in after.nodes] == [32, 16, 24, 32]
    # CPUs bound a node too: n2's 32 CPUs hold four 8-CPU workers though 8 GPUs are free
    cpu_bound = cycle.reserve(pending(1, 9, 1), c)
    assert [n.gpus_free for n in cpu_bound.nodes] == [0, 0, 4, 8]


def test_reserve_leaves_out_workers_that_fit_nowhere() -> None:
    c = snap.ClusterView("c", "r", True, (node(0, 2),))
    after = cycle.reserve(pending(0, 2, 2), c)
    assert [n.gpus_free for n in after.nodes] == [0]
    assert cycle.reserve(pending(1, 1, 4), after) is after


def test_carried_counts_equal_counting_again() -> None:
    rng = random.Random(3)
    nodes = tuple(
        node(i, rng.choice([0, 2, 4, 8]), rng.choice(["A100", "H100"]), rng.choice([8, 32, 64]))
        for i in range(40)
    )
    view = snap.ClusterView("c", "r", True, nodes)
    runs = [
        pending(i, rng.choice([1, 2, 4]), rng.choice([1, 2, 4, 8]), rng.choice(["A100", None]))
        for i in range(60)
    ]
    for r in runs:  # warm every memo, then reserve: the new view carries them over
        for use_free in (True, False):
            view.slots(r.shape, use_free=use_free)
        view.gpus(r.gpu_model)
        view = cycle.reserve(r, view)
        plain = fresh(view)
        for other in runs:
            for use_free in (True, False):
                got = view.slots(other.shape, use_free=use_free)
                assert got == plain.slots(other.shape, use_free=use_free)
            assert view.gpus(other.gpu_model) == plain.gpus(other.gpu_model)
            assert plugins.fits(other, view) == plugins.fits(other, plain)


def test_memoised_cycle_decides_as_one_run_at_a_time() -> None:
    rng = random.Random(5)
    clusters = tuple(
        snap.ClusterView(
            f"c{k}",
            f"r{k}",
            True,
            tuple(node(i, rng.choice([0, 4, 8]), "A100" if k % 2 else "H100") for i in range(6)),
            cost_per_gpu_hour=rng.uniform(1, 5),
        )
        for k in range(5)
    )
    runs = [
        pending(i, rng.choice([1, 2]), rng.choice([1, 2, 4, 8]), rng.choice(["A100", "H100", None]))
        for i in range(80)
    ]
    policy = cycle.default_policy()
    together = cycle.schedule(snap.Snapshot(0.0, clusters, ()), runs, policy)
    state = {c.cluster_id: c for c in clusters}
    for r, d in zip(runs, together, strict=True):
        views = tuple(fresh(c) for c in state.values())
        (alone,) = cycle.schedule(snap.Snapshot(0.0, views, ()), [r], policy)
        assert alone == d
        if alone.cluster_id is not None:
            state[alone.cluster_id] = cycle.reserve(r, state[alone.cluster_id])
    assert {d.outcome for d in together} == {cycle.Outcome.PLACED, cycle.Outcome.ADMITTED}
