"""tau.yaml placement settings the core acts on: objective presets, communication mode,
compliance domains, and score weights taken from platform.yaml's ``scheduling`` section.

Answers are worked out by hand in each test's comment.
"""

from __future__ import annotations

import dataclasses

import pydantic
import pytest

from taugrid.platform import models as pm
from taugrid.scheduling import cycle
from taugrid.scheduling import snapshot as snap


def cluster(
    cid: str,
    *,
    free: float = 8,
    cost: float = 1.0,
    gbps: float = 0.0,
    compliance: tuple[str, ...] = (),
    nodes: int = 1,
) -> snap.ClusterView:
    return snap.ClusterView(
        cid,
        cid,
        True,
        tuple(snap.NodeView(f"{cid}-n{i}", "A100", 8, free, 64, 512 * 2**30) for i in range(nodes)),
        cost_per_gpu_hour=cost,
        compliance=compliance,
        interconnect_gbps=gbps,
    )


def run(workers: int = 1, gpus: float = 2, **kw: object) -> snap.PendingRun:
    base = snap.PendingRun("r", "t", 0, 0.0, workers, gpus, 1, 1, "A100", admitted=True)
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def place(
    r: snap.PendingRun, *clusters: snap.ClusterView, policy: cycle.Policy | None = None
) -> cycle.Decision:
    (d,) = cycle.schedule(snap.Snapshot(0.0, clusters, ()), [r], policy or cycle.default_policy())
    return d


# "cheap": $1/h but only 2 of 8 GPUs free; "idle": $8/h with all 8 free.
CHEAP, IDLE = cluster("cheap", free=2, cost=1.0), cluster("idle", free=8, cost=8.0)


def test_objective_picks_its_preset_and_the_decision_names_it() -> None:
    # idle_gpu = 100 * free / (free + 2) (speed 1, 2 GPUs asked): cheap 50, idle 80.
    # cost-first (cost 0.6, data 0.2, idle 0.2): cheap = 0.6*90 + 0.2*100 + 0.2*50 = 84,
    # idle = 0.6*20 + 20 + 0.2*80 = 48 -> cheap.
    d = place(run(objective="cost"), CHEAP, IDLE)
    assert (d.cluster_id, d.objective) == ("cheap", "cost")
    assert d.weights["cost"] == pytest.approx(0.6)
    # utilisation-first (idle 0.4, wait 0.4, data 0.2): cheap = 20 + 40 + 20 = 80,
    # idle = 32 + 40 + 20 = 92 -> idle.
    d = place(run(objective="time"), CHEAP, IDLE)
    assert (d.cluster_id, d.objective) == ("idle", "time")
    assert d.weights["cost"] == 0.0 and d.weights["wait"] == pytest.approx(0.4)
    # no objective: the default preset (balanced, finish-first: finish 0.8 data 0.2)
    d = place(run(), CHEAP, IDLE)
    assert d.objective == "balanced" and d.weights["finish"] == pytest.approx(0.8)


def test_runs_with_different_objectives_in_one_cycle_get_their_own_weights() -> None:
    cheap_first = dataclasses.replace(run(objective="cost", gpus=1), run_id="a")
    idle_first = dataclasses.replace(run(objective="time", gpus=1), run_id="b", created_at=1.0)
    snapshot = snap.Snapshot(0.0, (CHEAP, IDLE), ())
    a, b = cycle.schedule(snapshot, [cheap_first, idle_first], cycle.default_policy())
    assert (a.cluster_id, b.cluster_id) == ("cheap", "idle")


def test_platform_weights_replace_the_built_in_preset() -> None:
    # platform.yaml says "cost" means idle GPUs only: then the idle cluster wins.
    spec = pm.Scheduling(presets={"cost": {"idle_gpu": 1.0}})
    d = place(run(objective="cost"), CHEAP, IDLE, policy=cycle.policy_from(spec))
    assert d.cluster_id == "idle" and d.weights["idle_gpu"] == 1.0
    assert spec.presets["time"] == pm.OBJECTIVE_PRESETS["time"]  # the others stay


@pytest.mark.parametrize(
    ("section", "why"),
    [
        ({"presets": {"fastest": {"cost": 1}}}, "unknown objective 'fastest'"),
        ({"presets": {"cost": {"price": 1}}}, "unknown score 'price'"),
        ({"presets": {"cost": {"cost": -1}}}, "weights must be >= 0"),
        ({"presets": {"cost": {"cost": 0}}}, "every weight is 0"),
        ({"communication": {"collective": {}}}, "unknown communication 'collective'"),
    ],
)
def test_bad_weights_in_platform_yaml_say_what_is_wrong(
    section: dict[str, object], why: str
) -> None:
    with pytest.raises(pydantic.ValidationError, match=why):
        pm.Scheduling.model_validate(section)


# "fast": InfiniBand-class 400 Gbit/s at $6/h; "slow": 10 Gbit/s Ethernet at $1/h.
FAST = cluster("fast", cost=6.0, gbps=400.0, nodes=2)
SLOW = cluster("slow", cost=1.0, gbps=10.0, nodes=2)


def test_sync_runs_prefer_the_fastest_interconnect_async_the_cheaper_capacity() -> None:
    # 2 workers x 8 GPUs: one per node. sync adds interconnect 0.2 to balanced (finish 0.8,
    # data 0.2; total 1.2). Same speed and data, so finish (50) and data (100) are equal:
    # fast = (40 + 20 + 0.2*80) / 1.2 = 63.3, slow = (40 + 20 + 0.2*9.09) / 1.2 = 51.5.
    d = place(run(workers=2, gpus=8, communication="sync"), FAST, SLOW)
    assert d.cluster_id == "fast"
    assert d.verdicts[0].scores["interconnect"] == pytest.approx(80.0)
    # async/none carry no interconnect term; cost-first (cost 0.6, data 0.2, idle 0.2,
    # idle 16/(16+16) = 50 on both): fast = 24 + 20 + 10 = 54, slow = 54 + 20 + 10 = 84.
    for mode in ("async", "none"):
        d = place(run(workers=2, gpus=8, communication=mode, objective="cost"), FAST, SLOW)
        assert d.cluster_id == "slow" and d.weights["interconnect"] == 0.0, mode
        totals = {v.cluster_id: v.total for v in d.verdicts}
        assert totals == {"fast": 54.0, "slow": 84.0}, mode


def test_sync_never_spans_clusters() -> None:
    # 2 workers x 8 GPUs; each cluster has one free 8-GPU node: together they would fit,
    # but a run is placed whole on one cluster, so it waits.
    one_each = (cluster("a", nodes=1), cluster("b", nodes=1))
    d = place(run(workers=2, gpus=8, communication="sync"), *one_each)
    assert d.outcome is cycle.Outcome.ADMITTED and d.cluster_id is None
    assert "never fits" in d.reason


def test_compliance_domains_filter_regions() -> None:
    eu = cluster("eu", cost=9.0, compliance=("gdpr", "iso27001"))
    us = cluster("us", cost=1.0)
    d = place(run(compliance=("gdpr",)), eu, us)
    assert d.cluster_id == "eu"
    why = {v.cluster_id: v.reason for v in d.verdicts}
    assert why["us"] == "compliance: region us does not meet compliance ['gdpr'] (it meets [])"
    d = place(run(compliance=("gdpr", "hipaa")), eu, us)
    assert d.cluster_id is None and "['hipaa']" in d.reason
    # no domains asked: cost-first picks the cheaper one
    assert place(run(objective="cost"), eu, us).cluster_id == "us"
