"""The cycle reads its plugins' status codes and contains a plugin that raises.

- Every cluster dropping a run with ``UNSCHEDULABLE_AND_UNRESOLVABLE`` (region not
  allowed, bigger than any cluster) marks the decision ``unresolvable``: waiting will
  not help. One cluster that could take it later (``UNSCHEDULABLE``: busy now) clears it.
- A filter or scorer that raises drops only that cluster for that run, with the plugin
  and its exception in the verdict (code ``error``); the other clusters are still placed.
"""

from __future__ import annotations

import dataclasses

from taugrid.scheduling import cycle, plugins
from taugrid.scheduling import snapshot as snap
from tests.scheduling.test_placement_weights import cluster, place, run


def test_all_unresolvable_marks_the_decision() -> None:
    d = place(run(allowed_regions=("eu",)), cluster("us"), cluster("asia"))
    assert d.outcome is cycle.Outcome.ADMITTED and d.unresolvable
    assert {v.code for v in d.verdicts} == {plugins.Code.UNSCHEDULABLE_AND_UNRESOLVABLE.value}
    # 16 GPUs on one worker: larger than any 8-GPU node, now and later
    d = place(run(gpus=16), cluster("a"), cluster("b"))
    assert d.unresolvable and "never fits" in d.reason


def test_one_cluster_busy_now_keeps_the_run_waiting() -> None:
    # "eu" is allowed but busy (0 free): it may free up, so the run is not unresolvable.
    d = place(run(allowed_regions=("eu",)), cluster("us"), cluster("eu", free=0))
    assert d.outcome is cycle.Outcome.ADMITTED and not d.unresolvable
    codes = {v.cluster_id: v.code for v in d.verdicts}
    assert codes == {"eu": "unschedulable", "us": "unresolvable"}


@dataclasses.dataclass(frozen=True)
class _Broken:
    """A scorer with a bug on one cluster only."""

    name: str = "finish"

    def score(self, run: snap.PendingRun, c: snap.ClusterView) -> float:
        if c.cluster_id == "bad":
            raise ZeroDivisionError("division by zero")
        return 50.0


def test_a_raising_plugin_drops_only_its_cluster() -> None:
    base = cycle.default_policy()
    scorers = tuple(_Broken() if s.name == "finish" else s for s in base.scorers)
    policy = dataclasses.replace(base, scorers=scorers)
    # the default preset weighs "finish"; on "bad" that scorer raises, so "good" gets the run.
    d = place(run(), cluster("bad", cost=0.5), cluster("good", cost=5.0), policy=policy)
    assert d.outcome is cycle.Outcome.PLACED and d.cluster_id == "good"
    bad = next(v for v in d.verdicts if v.cluster_id == "bad")
    assert bad.code == cycle.PLUGIN_ERROR and not bad.ok
    assert bad.reason == "plugin finish failed: ZeroDivisionError: division by zero"


def test_a_gpu_share_goes_only_where_gpus_can_be_shared() -> None:
    # A worker asking half a GPU: the Kubernetes cluster hands out whole GPUs only, so the
    # Ray cluster takes it even though the Kubernetes one is cheaper and idler.
    k8s = dataclasses.replace(cluster("k8s", cost=0.1), whole_gpus=True)
    d = place(run(gpus=0.5), k8s, cluster("ray", free=1, cost=9.0))
    assert d.cluster_id == "ray"
    d = place(run(gpus=0.5), k8s)
    assert d.unresolvable and "whole GPUs only" in d.reason
    assert place(run(gpus=1), k8s).cluster_id == "k8s"  # whole GPUs still go there


def test_a_moved_run_never_goes_back_and_waits_for_the_cpus_it_asked_for() -> None:
    # cluster "a" has 64 free CPUs per node; the run (1 CPU per worker) asked for 80 more
    moved = run(relocation=snap.Relocation(("a",), cpus=80.0))
    d = place(moved, cluster("a"), cluster("b"))
    codes = {v.cluster_id: (v.code, v.reason) for v in d.verdicts}
    assert d.outcome is cycle.Outcome.ADMITTED and not d.unresolvable
    assert codes["a"][0] == "unresolvable" and "asked to move" in codes["a"][1]
    assert codes["b"] == (
        "unschedulable",
        "relocation: the run was moved to get 81 free CPUs; 64 are free here",
    )
    d = place(moved, cluster("a"), cluster("b", nodes=2))  # 128 free CPUs
    assert d.cluster_id == "b"
    # the move is part of the request: a run that asked nothing shares no verdict with it
    assert run().request != moved.request
