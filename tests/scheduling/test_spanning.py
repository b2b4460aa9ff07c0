"""Spanning placement (``scheduling.spanning``): one Ray cluster across member clusters
for async/none runs that no one cluster holds now, when starting now beats waiting.

Each cluster here is one 8-GPU node in a region of its own name; a run of 2-GPU workers.
Answers are worked out by hand in each test's comment.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from taugrid.platform import models as pm
from taugrid.scheduling import cycle, spanning
from taugrid.scheduling import snapshot as snap
from tests.scheduling.test_placement_weights import cluster, place, run

MBIT = 1e6 / 8
SPAN = dataclasses.replace(cycle.default_policy(), span_min_bps=100 * MBIT)


def linked(c: snap.ClusterView, *peers: tuple[str, float]) -> snap.ClusterView:
    """``c`` with measured inbound links (peer region, Mbit/s), its agent able to span."""
    links = tuple(snap.LinkView(p, mbit * MBIT) for p, mbit in peers)
    return dataclasses.replace(c, links=links, spannable=True)


# a: 4 GPUs free (2 workers), b: 2 free (1 worker), c: 2 free (1 worker); a-b 1 Gbit/s,
# a-c 200 Mbit/s, b-c 50 Mbit/s; each measured both ways.
A = linked(cluster("a", free=4), ("b", 1000), ("c", 200))
B = linked(cluster("b", free=2), ("a", 1000), ("c", 50))
C = linked(cluster("c", free=2), ("a", 200), ("b", 50))


def async_run(workers: int = 4, **kw: object) -> snap.PendingRun:
    return run(workers, 2, communication="async", **kw)


def test_a_run_no_cluster_holds_spans_head_where_most_fit_then_fastest_links() -> None:
    # 4 workers: a holds 2 (head), then b (1 Gbit/s to a) and c (200 Mbit/s) one each.
    d = place(async_run(4), A, B, C, policy=SPAN)
    assert d.outcome is cycle.Outcome.PLACED
    assert (d.cluster_id, d.nodes) == ("a", ("a-n0", "a-n0"))
    assert d.guests == (("b", ("b-n0",)), ("c", ("c-n0",)))
    assert "head a (2 workers), worker groups b (1), c (1)" in d.reason
    # 3 workers: the head and b are enough; c is not used.
    assert place(async_run(3), A, B, C, policy=SPAN).guests == (("b", ("b-n0",)),)


def test_a_cluster_whose_agent_cannot_span_is_no_member() -> None:
    # b's agent does not run its own Ray cluster: c takes b's place.
    no_b = dataclasses.replace(B, spannable=False)
    assert place(async_run(3), A, no_b, C, policy=SPAN).guests == (("c", ("c-n0",)),)
    d = place(async_run(4), A, no_b, C, policy=SPAN)
    assert d.outcome is cycle.Outcome.ADMITTED and "spanning holds 3 of 4" in d.reason


def test_sync_runs_and_the_default_policy_never_span() -> None:
    d = place(run(4, 2, communication="sync"), A, B, C, policy=SPAN)
    assert d.outcome is cycle.Outcome.ADMITTED and not d.guests
    assert "not spanning" not in d.reason
    d = place(async_run(4), A, B, C)  # default: scheduling.span_min_mbit not set
    assert d.outcome is cycle.Outcome.ADMITTED and not d.guests


def test_a_link_under_the_budget_is_not_used_and_the_reason_says_so() -> None:
    # budget 300 Mbit/s: a-c (200) is out, so a + b hold 3 of 4.
    policy = dataclasses.replace(SPAN, span_min_bps=300 * MBIT)
    d = place(async_run(4), A, B, C, policy=policy)
    assert d.outcome is cycle.Outcome.ADMITTED
    assert "not spanning: spanning holds 3 of 4 workers" in d.reason
    assert "c: link to a 200 Mbit/s, under the 300 Mbit/s budget" in d.reason
    # a link never measured is never used either
    unmeasured = dataclasses.replace(C, links=())
    d = place(async_run(4), A, B, unmeasured, policy=SPAN)
    assert d.outcome is cycle.Outcome.PLACED  # c measured a->c only: min of one direction
    bare = dataclasses.replace(unmeasured, region="z")
    reason = spanning.plan(async_run(4), [A, B, bare], lambda c: True, SPAN.span_min_bps)
    assert isinstance(reason, str) and "c: link to a never measured" in reason


def test_it_waits_when_one_cluster_frees_the_room_before_the_data_would_arrive() -> None:
    # 8 GB in a only; b and c must fetch it: 8e9 / 125e6 = 64 s into b, 320 s into c.
    data = (snap.DataNeed("ds", 8 * 10**9, ("a",)),)
    soon = dataclasses.replace(A, releases=((100.0, 4.0),))  # a frees 4 GPUs in 100 s
    d = place(async_run(4, datasets=data), soon, B, C, policy=SPAN)
    assert d.outcome is cycle.Outcome.ADMITTED
    # a 1 h run (the default): spanning ends at 320 s + 1 h, a at 100 s + 1 h
    want = "finish in ~1.1 h (after ~320 s of data transfer, GPUs at 1x), not sooner than"
    assert f"{want} on one cluster (~1.0 h)" in d.reason
    later = dataclasses.replace(A, releases=((1000.0, 4.0),))
    d = place(async_run(4, datasets=data), later, B, C, policy=SPAN)
    assert d.outcome is cycle.Outcome.PLACED
    assert "finishes in ~1.1 h (after ~320 s of data transfer, GPUs at 1x) instead of ~1.3 h" in (
        d.reason
    )


def test_a_span_over_slower_gpus_must_still_finish_sooner() -> None:
    # c's GPUs run at 0.4x: a 1 h run would take 2.5 h spanning a + c, against 1 h
    # after a frees its GPUs in 100 s: it waits. With a 2 h wait, spanning wins.
    slow = dataclasses.replace(C, gpu_speed=0.4)
    a = dataclasses.replace(A, releases=((100.0, 4.0),))
    d = place(async_run(3), a, slow, policy=SPAN)
    assert d.outcome is cycle.Outcome.ADMITTED and "GPUs at 0.4x" in d.reason
    a = dataclasses.replace(A, releases=((7200.0, 4.0),))
    assert place(async_run(3), a, slow, policy=SPAN).guests == (("c", ("c-n0",)),)


def test_span_capacity_is_taken_so_the_next_run_in_the_cycle_sees_it_gone() -> None:
    first = async_run(4)
    second = dataclasses.replace(run(1, 2), run_id="s", created_at=1.0)  # 1 worker, any
    snapshot = snap.Snapshot(0.0, (A, B, C), ())
    d1, d2 = cycle.schedule(snapshot, [first, second], SPAN)
    assert d1.guests and d2.outcome is cycle.Outcome.ADMITTED  # every GPU is taken


def test_unreachable_regions_and_bad_budgets() -> None:
    other = dataclasses.replace(B, region="a")  # same region as the head: no link needed
    assert spanning.link_bps(A, other) == math.inf
    plan = spanning.plan(async_run(3), [A, other], lambda c: True, SPAN.span_min_bps)
    assert isinstance(plan, spanning.Span) and plan.members[1].workers == 1
    with pytest.raises(ValueError, match="greater than 0"):
        pm.Scheduling(span_min_mbit=0)
    assert cycle.policy_from(pm.Scheduling(span_min_mbit=80)).span_min_bps == 10e6


def test_no_span_when_one_cluster_has_room_but_a_whole_run_rule_dropped_it() -> None:
    # 40 GB in c only; a has room for all 2 workers but the move-vs-wait rule keeps the
    # run near its data (c frees its GPUs in 100 s): spanning must not get round that.
    data = (snap.DataNeed("ds", 40 * 10**9, ("c",)),)
    near = dataclasses.replace(C, releases=((100.0, 2.0),))
    r = async_run(2, datasets=data, wait_near_data_s=100.0)
    d = place(r, A, near, policy=SPAN)
    assert d.outcome is cycle.Outcome.ADMITTED and not d.guests
    assert "a has room for every worker; spanning is not needed" in d.reason
