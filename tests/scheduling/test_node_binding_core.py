"""Node binding in the cycle: the packer (TauGrid's node score), not first fit.

Nodes of 4 GPUs; the typical workload is the fixed prior of whole-GPU tasks of 1, 2
and 4 GPUs, so the packer keeps whole nodes whole and fills partly used ones first.
"""

from __future__ import annotations

from taugrid.scheduling import cycle
from taugrid.scheduling import snapshot as snap
from taugrid.scheduling.packing import live


def _cluster(*free: float) -> snap.ClusterView:
    nodes = tuple(snap.NodeView(f"n{i}", "A100", 4, f, 16, 64 * 2**30) for i, f in enumerate(free))
    return snap.ClusterView("c", "c", True, nodes)


def _run(workers: int, gpus: int, name: str = "r") -> snap.PendingRun:
    return snap.PendingRun(name, "t", 0, 0.0, workers, gpus, 1, 2**30, "A100", admitted=True)


def _place(runs: list[snap.PendingRun], cluster: snap.ClusterView) -> list[cycle.Decision]:
    return cycle.schedule(snap.Snapshot(0.0, (cluster,), ()), runs, cycle.default_policy())


def test_a_pair_packs_on_one_node_and_a_whole_node_stays_for_four_gpus() -> None:
    # Before: the hub counted 2x2 on n0 while Ray spread it; now it binds both to n0,
    # and a 1x4 run placed in the same cycle gets n1 whole.
    pair, whole = _place([_run(2, 2, "pair"), _run(1, 4, "whole")], _cluster(4, 4))
    assert pair.nodes == ("n0", "n0") and whole.nodes == ("n1",)


def test_the_packer_fills_the_partly_used_node_where_first_fit_would_split_a_whole_one() -> None:
    c = _cluster(4, 2)
    run = _run(2, 2)
    assert cycle.first_fit(run, c) == ("n0", "n0")  # leaves 0 and 2: no room for 4 GPUs
    assert live.bind(run, c) == ("n1", "n0")  # leaves 2 and 0 ... the same GPUs free,
    # but first the 2-GPU hole is filled; with one worker the difference shows:
    assert live.bind(_run(1, 2), c) == ("n1",)  # keeps n0 whole for a 4-GPU task
    assert cycle.first_fit(_run(1, 2), c) == ("n0",)


def test_cpu_only_runs_and_unmodelled_nodes_fall_back_to_first_fit() -> None:
    assert live.bind(_run(1, 0), _cluster(4, 4)) is None
    big = snap.ClusterView("b", "b", True, (snap.NodeView("x", "A100", 16, 16, 64, 2**36),))
    assert live.bind(_run(1, 2), big) is None
    (d,) = _place([_run(1, 2)], big)
    assert d.nodes == ("x",)  # first fit
