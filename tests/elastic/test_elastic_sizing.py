"""elastic.sizing and elastic.controller: recommendations from cost models, the limiting
stage of an unreachable target, and the controller resizing toward the target when a
stage's measured cost changes (pure: no Ray)."""

from __future__ import annotations

import math

import pytest

from taugrid.elastic import controller, ray_exec, sizing


def _stage(name: str, fixed: float, per_item: float, **kw: float) -> sizing.StageProfile:
    return sizing.StageProfile(name=name, cost=sizing.CostModel(fixed, per_item), **kw)  # type: ignore[arg-type]


def test_fit_recovers_fixed_and_per_item_cost() -> None:
    samples = [(8, 0.1 + 8 * 0.002), (8, 0.1 + 8 * 0.002), (64, 0.1 + 64 * 0.002)]
    model = sizing.fit(samples)
    assert model.fixed_s == pytest.approx(0.1) and model.per_item_s == pytest.approx(0.002)
    one_size = sizing.fit([(10, 0.05), (10, 0.07)])
    assert one_size.fixed_s == 0 and one_size.per_item_s == pytest.approx(0.006)


def test_recommendation_sizes_each_stage_for_the_target() -> None:
    decode = _stage("decode", 0.0, 0.01, batch_min=4, batch_max=16)  # 100 items/s/replica
    embed = _stage("embed", 0.1, 0.002, batch_min=8, batch_max=64, gpus=1.0)
    keep_half = _stage("filter", 0.0, 0.001, selectivity=0.5)
    write = _stage("write", 0.0, 0.01)  # sees half the items: 150 items/s of demand
    rec = sizing.recommend([decode, embed, keep_half, write], 300)
    by = {s.name: s for s in rec.stages}
    assert by["decode"].replicas == 3 and by["decode"].batch_size == 4  # no fixed cost
    assert by["embed"].batch_size > 8  # a fixed cost per batch favours big batches
    assert by["embed"].replicas == math.ceil(300 / by["embed"].rate_per_replica)
    assert by["write"].replicas == 2 and by["write"].demand == pytest.approx(150)
    assert rec.reachable and rec.limit is None and rec.expected_throughput >= 300
    assert rec.gpus == by["embed"].replicas and rec.bottleneck in by


def test_an_unreachable_target_names_the_limiting_stage_and_the_shortfall() -> None:
    fast = _stage("decode", 0.0, 0.001, replicas_max=8)
    slow = _stage("embed", 0.0, 0.02, replicas_max=2, gpus=1.0)  # at most 2 x 50 items/s
    rec = sizing.recommend([fast, slow], 400)
    assert not rec.reachable and rec.limit is not None
    assert rec.limit.stage == "embed" and rec.limit.ceiling == pytest.approx(100)
    assert rec.limit.shortfall == pytest.approx(0.75)
    assert rec.limit.describe().startswith("stage embed limits the pipeline to 100.0 items/s")
    assert "75% short of the target 400" in rec.limit.describe()
    assert rec.bottleneck == "embed" and rec.expected_throughput == pytest.approx(100)


def test_a_filter_before_a_slow_stage_lowers_its_demand() -> None:
    keep_tenth = _stage("filter", 0.0, 0.0001, selectivity=0.1)
    slow = _stage("embed", 0.0, 0.02, replicas_max=2)
    rec = sizing.recommend([keep_tenth, slow], 400)  # embed sees 40 items/s: 1 replica
    assert rec.reachable and {s.name: s.replicas for s in rec.stages}["embed"] == 1


def test_controller_grows_a_stage_that_became_slower_and_shrinks_it_back() -> None:
    decode = _stage("decode", 0.0, 0.005, batch_min=4, batch_max=4, replicas_max=8)
    control = controller.Controller([decode], 400)  # 200 items/s per replica: 2
    assert control.current.stages[0].replicas == 2
    slower = controller.StageWindow(items_in=400, items_out=400, busy_s=400 * 0.02, batches=100)
    sizes = [control.observe({"decode": slower}).stages[0].replicas for _ in range(4)]
    assert sizes[0] > 2 and sizes[-1] == 8  # 50 items/s per replica: 8 (its most)
    faster = controller.StageWindow(items_in=400, items_out=400, busy_s=400 * 0.005, batches=100)
    back = [control.observe({"decode": faster}).stages[0].replicas for _ in range(10)]
    assert back[-1] == 2
    idle = control.observe({})  # no batches seen: the model stays as it was
    assert idle.stages[0].replicas == 2


def test_controller_learns_selectivity() -> None:
    keep = _stage("filter", 0.0, 0.0001)
    write = _stage("write", 0.0, 0.01, replicas_max=8)
    control = controller.Controller([keep, write], 400)
    assert control.current.stages[1].replicas == 4
    window = {
        "filter": controller.StageWindow(400, 100, 0.04, 10),
        "write": controller.StageWindow(100, 100, 1.0, 10),
    }
    for _ in range(10):
        rec = control.observe(window)
    assert rec.stages[1].replicas == 1 and control.profiles[0].selectivity < 0.3


def test_a_gpu_budget_caps_gpu_replicas_and_names_the_limit() -> None:
    embed = _stage("embed", 0.0, 0.01, gpus=1.0, replicas_max=8)  # 100 items/s per GPU
    score = _stage("score", 0.0, 0.005, gpus=0.5, replicas_max=8)  # 200 items/s per replica
    free = sizing.recommend([embed, score], 400)
    assert free.gpus == 4 + 2 * 0.5 and free.reachable
    capped = sizing.recommend([embed, score], 400, gpu_budget=4)
    assert capped.gpus <= 4 and not capped.reachable and capped.limit is not None
    assert capped.limit.stage == "embed" and capped.limit.gpu_budget == 4
    assert "all the run's 4 GPUs allow" in capped.limit.describe()
    roomy = sizing.recommend([embed, score], 400, gpu_budget=16)
    assert roomy == free


def test_a_cpu_budget_caps_the_pools_to_the_cluster_and_names_the_limit() -> None:
    """Replicas the cluster cannot hold would only wait for CPUs: the cluster's CPUs cap
    the pools, each time giving back the replica that lowers the bottleneck least."""
    decode = _stage("decode", 0.0, 0.02, replicas_max=8)  # 50 items/s per replica
    resize = _stage("resize", 0.0, 0.005, replicas_max=8)  # 200 items/s per replica
    free = sizing.recommend([decode, resize], 300)
    assert (free.cpus, free.reachable) == (6 + 2, True)
    capped = sizing.recommend([decode, resize], 300, cpu_budget=5)
    assert capped.cpus <= 5 and capped.limit is not None
    assert {c.name: c.replicas for c in capped.stages} == {"decode": 4, "resize": 1}
    assert capped.limit.stage == "decode" and capped.limit.cpu_budget == 5
    assert capped.limit.ceiling == 200
    assert "all the cluster's 5 CPUs allow" in capped.limit.describe()
    assert sizing.recommend([decode, resize], 300, cpu_budget=8) == free


def test_the_controller_sizes_within_the_clusters_cpus_window_after_window() -> None:
    decode = _stage("decode", 0.0, 0.02, batch_min=4, batch_max=4, replicas_max=8)
    control = controller.Controller([decode], 300, cpu_budget=3)
    assert control.current.stages[0].replicas == 3
    # the stage turns out twice as slow: it would want 12 replicas, still 3 fit
    control.observe({"decode": controller.StageWindow(400, 400, 16.0, 100)})
    assert control.current.stages[0].replicas == 3
    assert control.current.limit is not None and control.current.limit.cpu_budget == 3


def test_a_node_slow_for_a_stage_is_avoided_from_the_next_window() -> None:
    decode = _stage("decode", 0.0, 0.005, batch_min=4, batch_max=4, replicas_max=8)
    control = controller.Controller([decode], 400)
    # node c takes 4x the others' time per item: slow; b is within SLOW of a
    nodes = {"a": (200, 1.0), "b": (150, 1.2), "c": (50, 1.0)}
    window = controller.StageWindow(400, 400, 3.2, 40, nodes)
    control.observe({"decode": window})
    assert control.avoid == {"decode": frozenset({"c"})}
    # a later window on a and b alone keeps c avoided and adds nothing
    later = controller.StageWindow(400, 400, 2.2, 40, {"a": (200, 1.0), "b": (200, 1.2)})
    control.observe({"decode": later})
    assert control.avoid == {"decode": frozenset({"c"})}


def test_a_stage_on_one_node_is_never_judged() -> None:
    assert controller.slow_nodes({"a": (10, 100.0)}) == frozenset()
    assert controller.slow_nodes({"a": (10, 1.0), "b": (0, 0.0)}) == frozenset()
    # the median of the others, not their mean: one other slow node does not hide a third
    three = {"a": (100, 1.0), "b": (100, 1.1), "c": (100, 5.0)}
    assert controller.slow_nodes(three) == frozenset({"c"})


def test_actors_are_kept_off_avoided_nodes_by_rays_node_id_label() -> None:
    assert ray_exec.avoiding(()) == {}
    assert ray_exec.avoiding({"bb", "aa"}) == {"label_selector": {"ray.io/node-id": "!in(aa,bb)"}}


def test_a_pool_off_an_avoided_node_is_sized_to_what_the_other_nodes_hold() -> None:
    nodes = [
        {"NodeID": "head", "Alive": True, "Resources": {"CPU": 16.0, "GPU": 4.0}},
        {"NodeID": "slow", "Alive": True, "Resources": {"CPU": 16.0, "GPU": 4.0}},
        {"NodeID": "gone", "Alive": False, "Resources": {"CPU": 16.0}},
    ]
    assert ray_exec.fitting(nodes, 9, 0, {"slow"}) == 1  # 9 CPUs: one on the head
    assert ray_exec.fitting(nodes, 1, 1, {"slow"}) == 4  # the head's 4 GPUs
    assert ray_exec.fitting(nodes, 9, 0, ()) == 2
    assert ray_exec.fitting(nodes, 1, 0, {"head", "slow"}) == 0


def test_the_cpus_that_would_meet_the_target_are_wanted_only_when_cpus_alone_cap_it() -> None:
    decode = _stage("decode", 0.0, 0.05, cpus=1.0, replicas_max=8)  # 20 items/s/replica
    resize = _stage("resize", 0.0, 0.05, cpus=1.0, replicas_max=8)
    capped = controller.Controller([decode, resize], 60, cpu_budget=3)
    assert capped.current.limit is not None and capped.current.limit.cpu_budget == 3
    assert controller.cpus_wanted(capped) == 6  # 3 + 3 replicas of 1 CPU
    assert controller.cpus_wanted(controller.Controller([decode, resize], 60, cpu_budget=6)) is None
    # a stage's own bounds cap it anywhere: no cluster would help
    bounded = _stage("decode", 0.0, 0.05, cpus=1.0, replicas_max=2)
    assert (
        controller.cpus_wanted(controller.Controller([bounded, resize], 60, cpu_budget=3)) is None
    )
