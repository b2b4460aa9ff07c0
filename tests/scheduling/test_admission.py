"""Admission core: hand-computed answers for quota, cohorts, order, preemption, fairness."""

from __future__ import annotations

import random

import pytest

from taugrid.platform import models as pm
from taugrid.scheduling import admission as adm
from taugrid.scheduling import admission_model as am
from tests.scheduling.admission_builders import GPU, cq, running, state, wl

S = am.Status


def _one(result: am.CycleResult, wid: str) -> am.WorkloadResult:
    return result.by_id()[wid]


def test_fits_in_nominal_is_admitted_without_borrowing() -> None:
    r = adm.admit(state([cq("a", {"A100": 8})], [running("r", "a", 4)]), [wl("x", "a", 4)])
    x = _one(r, "x")
    assert (x.status, x.cluster_queue, x.assignment, x.borrowed) == (
        S.ADMITTED,
        "a",
        ((GPU, "A100"),),
        (),
    )
    assert r.evictions == ()


def test_over_nominal_without_cohort_waits_with_numbers() -> None:
    r = adm.admit(state([cq("a", {"A100": 8})], [running("r", "a", 6)]), [wl("x", "a", 4)])
    x = _one(r, "x")
    assert x.status is S.WAITING
    assert "A100: requested 4, used 6/8 nominal, no cohort to borrow from" in x.reason


def test_never_fits_says_the_most_it_could_get() -> None:
    r = adm.admit(state([cq("a", {"A100": 8}, "c"), cq("b", {"A100": 2}, "c")]), [wl("x", "a", 11)])
    assert "requested 11 but at most 10 can ever be available" in _one(r, "x").reason


def test_borrows_unused_nominal_of_the_cohort() -> None:
    s = state([cq("a", {"A100": 8}, "c"), cq("b", {"A100": 8}, "c")], [running("r", "a", 8)])
    x = _one(adm.admit(s, [wl("x", "a", 4)]), "x")
    assert x.status is S.ADMITTED
    assert x.borrowed == (("A100", GPU, 4),) and x.borrowed_of(GPU) == 4


def test_borrowing_limit_caps_what_is_borrowed() -> None:
    s = state([cq("a", {"A100": (8, 2, None)}, "c"), cq("b", {"A100": 8}, "c")])
    r = adm.admit(s, [wl("x", "a", 8, t=1), wl("y", "a", 4, t=2), wl("z", "a", 2, t=3)])
    assert [_one(r, w).status for w in "xyz"] == [S.ADMITTED, S.WAITING, S.ADMITTED]
    assert _one(r, "z").borrowed == (("A100", GPU, 2),)
    assert "(borrowing limit 2)" in _one(r, "y").reason


def test_lending_limit_keeps_the_rest_of_nominal_home() -> None:
    s = state([cq("a", {"A100": 8}, "c"), cq("b", {"A100": (8, None, 3)}, "c")])
    r = adm.admit(s, [wl("x", "a", 8, t=1), wl("y", "a", 4, t=2), wl("z", "a", 3, t=3)])
    assert [_one(r, w).status for w in "xyz"] == [S.ADMITTED, S.WAITING, S.ADMITTED]
    # b's guaranteed 5 GPUs are still free for b.
    assert _one(adm.admit(s, [wl("x", "a", 11), wl("b5", "b", 5, t=1)]), "b5").status is (
        S.ADMITTED
    )


def test_flavors_are_tried_in_order_and_a_gpu_model_pins_one() -> None:
    s = state([cq("a", {"A100": 4, "H100": 8})])
    r = adm.admit(s, [wl("x", "a", 6), wl("y", "a", 4, t=1), wl("z", "a", 4, t=2, flavor="A100")])
    assert _one(r, "x").assignment == ((GPU, "H100"),)
    assert _one(r, "y").assignment == ((GPU, "A100"),)
    assert _one(r, "z").status is S.WAITING  # A100 is full, H100 not allowed
    assert "flavor A100" in _one(r, "z").reason


def test_priority_then_creation_order_within_a_queue() -> None:
    s = state([cq("a", {"A100": 4})])
    r = adm.admit(s, [wl("old", "a", 4, 0, t=1), wl("new-high", "a", 4, 10, t=5)])
    assert [x.workload_id for x in r.results] == ["new-high", "old"]
    assert _one(r, "new-high").status is S.ADMITTED and _one(r, "old").status is S.WAITING


def test_strict_fifo_head_blocks_best_effort_skips() -> None:
    for strict, expected in ((True, S.WAITING), (False, S.ADMITTED)):
        s = state([cq("a", {"A100": 8}, strict=strict)], [running("r", "a", 6)])
        r = adm.admit(s, [wl("head", "a", 4, t=1), wl("small", "a", 1, t=2)])
        assert _one(r, "head").status is S.WAITING
        assert _one(r, "small").status is expected
    assert "behind head in ClusterQueue a (StrictFIFO)" in _one(r := adm.admit(
        state([cq("a", {"A100": 8}, strict=True)], [running("r", "a", 6)]),
        [wl("head", "a", 4, t=1), wl("small", "a", 1, t=2)],
    ), "small").reason  # fmt: skip
    assert r.evictions == ()


def test_priority_preemption_takes_the_newest_lower_priority() -> None:
    s = state([cq("a", {"A100": 8})], [running("low1", "a", 4, t=1), running("low2", "a", 4, t=2)])
    r = adm.admit(s, [wl("high", "a", 4, priority=10)])
    assert _one(r, "high").status is S.PREEMPTING and _one(r, "high").preempt == ("low2",)
    (e,) = r.evictions
    assert (e.workload_id, e.reason, e.cause, e.preemptor) == (
        "low2",
        "Preempted",
        am.Cause.PRIORITY,
        "high",
    )


def test_equal_priority_is_never_preempted_within_a_queue() -> None:
    s = state([cq("a", {"A100": 8})], [running("peer", "a", 8, priority=5)])
    r = adm.admit(s, [wl("x", "a", 4, priority=5)])
    assert _one(r, "x").status is S.WAITING and r.evictions == ()
    assert "no workload may be preempted" in _one(r, "x").reason


def test_preemption_set_is_minimal_after_fill_back() -> None:
    # Greedy takes r-new (2) then r-old (6); r-new alone is not needed: put back.
    s = state(
        [cq("a", {"A100": 8})], [running("r-new", "a", 2, t=3), running("r-old", "a", 6, t=1)]
    )
    r = adm.admit(s, [wl("x", "a", 6, priority=1)])
    assert _one(r, "x").preempt == ("r-old",)


def test_reclaim_preempts_the_borrower_newest_first_any_priority() -> None:
    s = state(
        [cq("a", {"A100": 8}, "c"), cq("b", {"A100": 8}, "c")],
        [running("b1", "b", 8, priority=100, t=1), running("b2", "b", 8, priority=100, t=2)],
    )
    r = adm.admit(s, [wl("x", "a", 8)])
    assert _one(r, "x").preempt == ("b2",)
    assert r.evictions[0].cause is am.Cause.RECLAIM


def test_reclaim_lower_priority_policy_spares_higher_priority() -> None:
    lower = am.PreemptionPolicy(reclaim_within_cohort=am.Reclaim.LOWER_PRIORITY)
    s = state(
        [cq("a", {"A100": 8}, "c", preemption=lower), cq("b", {"A100": 8}, "c")],
        [running("b1", "b", 8, t=1), running("b2", "b", 8, priority=100, t=2)],
    )
    assert _one(adm.admit(s, [wl("x", "a", 8, priority=50)]), "x").preempt == ("b1",)


def test_no_reclaim_when_the_preemptor_would_borrow() -> None:
    s = state([cq("a", {"A100": 4}, "c"), cq("b", {"A100": 8}, "c")], [running("b1", "b", 12, t=1)])
    r = adm.admit(s, [wl("x", "a", 8)])
    assert _one(r, "x").status is S.WAITING and r.evictions == ()


def test_fair_sharing_admits_the_lower_share_borrower_first() -> None:
    # Pool 10 (only c lends); a already borrows 4. Both heads borrow 4; free is 6.
    s = state(
        [cq("a", {"A100": 0}, "k"), cq("b", {"A100": 0}, "k"), cq("c", {"A100": 10}, "k")],
        [running("a0", "a", 4)],
    )
    r = adm.admit(s, [wl("xa", "a", 4, t=1), wl("xb", "b", 4, t=2)])
    assert _one(r, "xb").status is S.ADMITTED and _one(r, "xa").status is S.WAITING


def test_reclaim_takes_from_the_highest_share_borrower_first() -> None:
    s = state(
        [cq("a", {"A100": 2}, "k"), cq("b", {"A100": 2}, "k"), cq("c", {"A100": 8}, "k")],
        [running("a1", "a", 4, t=1), running("b1", "b", 6, t=0)],
    )
    r = adm.admit(s, [wl("x", "c", 4)])  # 2 free in the cohort, 2 to reclaim
    assert _one(r, "x").preempt == ("b1",)  # b borrows 4 of 12, a borrows 2


def test_preemptor_reserves_the_room_it_frees() -> None:
    s = state([cq("a", {"A100": 8})], [running("low", "a", 8)])
    r = adm.admit(s, [wl("high", "a", 8, priority=9), wl("later", "a", 1, priority=0, t=5)])
    assert _one(r, "high").status is S.PREEMPTING and _one(r, "later").status is S.WAITING


def test_unknown_local_queue_waits() -> None:
    r = adm.admit(state([cq("a", {"A100": 8})]), [wl("x", "nope", 1)])
    assert _one(r, "x").status is S.WAITING and "LocalQueue nope" in _one(r, "x").reason


def test_duplicate_queue_or_workload_is_rejected() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        adm.admit(state([cq("a", {"A100": 1}), cq("a", {"A100": 1})]), [])
    with pytest.raises(ValueError, match="pending twice"):
        adm.admit(state([cq("a", {"A100": 1})]), [wl("x", "a", 1), wl("x", "a", 1)])


def test_same_answer_whatever_the_input_order() -> None:
    cqs = [cq(f"q{i}", {"A100": 4, "H100": 2}, f"c{i % 2}") for i in range(4)]
    pending = [wl(f"w{i}", f"q{i % 4}", 1 + i % 5, priority=i % 3, t=i % 7) for i in range(30)]
    first = adm.admit(state(cqs), pending)
    shuffled = pending[:]
    random.Random(7).shuffle(shuffled)
    assert adm.admit(state(cqs), shuffled) == first


def test_cluster_queue_of_team_mirrors_render() -> None:
    team = pm.TeamSpec(
        name="research",
        cohort="lab",
        quotas=[pm.Quota(gpu_model="A100-80G", nominal=8, borrowing_limit=4, lending_limit=2)],
        queueing_strategy=pm.QueueingStrategy.STRICT_FIFO,
        cpu_quota=1.5,
        memory_quota="1Gi",
    )
    q = adm.cluster_queue_of(team, cpu_memory=True)
    assert (q.name, q.cohort, q.strategy) == ("research", "lab", pm.QueueingStrategy.STRICT_FIFO)
    assert q.quotas() == {
        ("A100-80G", GPU): am.ResourceQuota(GPU, 8, 4, 2),
        (am.DEFAULT_FLAVOR, am.CPU): am.ResourceQuota(am.CPU, 1500),
        (am.DEFAULT_FLAVOR, am.MEMORY): am.ResourceQuota(am.MEMORY, 2**30),
    }
    alone = adm.cluster_queue_of(team.model_copy(update={"cohort": None}))
    assert alone.quotas() == {("A100-80G", GPU): am.ResourceQuota(GPU, 8)}


def test_cpu_and_memory_are_a_second_resource_group() -> None:
    team = pm.TeamSpec(name="t", quotas=[pm.Quota(gpu_model="A100", nominal=4)], cpu_quota=2)
    s = am.State((adm.cluster_queue_of(team, cpu_memory=True),), (am.LocalQueue("t", "t"),))
    heavy = am.Workload("x", "t", 0, 0.0, ((GPU, 1), (am.CPU, 3000)))
    light = am.Workload("y", "t", 0, 1.0, ((GPU, 1), (am.CPU, 2000), (am.MEMORY, 10)))
    r = adm.admit(s, [heavy, light])
    assert _one(r, "x").status is S.WAITING and "cpu of flavor default-flavor" in (
        _one(r, "x").reason
    )
    assert _one(r, "y").assignment == (
        (am.CPU, am.DEFAULT_FLAVOR),
        (am.MEMORY, am.DEFAULT_FLAVOR),
        (GPU, "A100"),
    )


def test_a_borrower_admitted_first_in_the_pass_gives_way_to_a_reclaim_of_own_quota() -> None:
    # Cohort of 4 (a: 3, b: 1), nothing running. a's head a0 needs 4 (it would borrow),
    # b's head (priority 1) needs 2 (borrows 1): b1 goes first, then a0 does not fit and
    # a1 (3, within a's nominal) could only preempt b1. Found by the starvation property:
    # b1 was admitted ahead of a1 every pass and preempted by it the next, for ever.
    s = state([cq("a", {"A100": 3}, "k"), cq("b", {"A100": 1}, "k")])
    r = adm.admit(s, [wl("a0", "a", 4), wl("a1", "a", 3, t=1), wl("b1", "b", 2, priority=1)])
    assert _one(r, "a1").status is S.ADMITTED and r.evictions == ()
    assert _one(r, "b1").status is S.WAITING and "gave back" in _one(r, "b1").reason
    assert _one(r, "a0").status is S.WAITING
