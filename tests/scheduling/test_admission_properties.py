"""Property-based tests of the admission core (hypothesis).

Worlds: 1-4 ClusterQueues over two flavors, in up to two cohorts (or none), with random
nominal/borrowing/lending limits, strategies and preemption policies; a valid set of
running workloads (built against an independent limit checker, not the core's ledger)
and a random pending set. Properties: quota is never exceeded (per queue and per
cohort), lending limits hold, evictions are only of strictly lower priority in the
queue or of borrowers (reclaim), preemption sets are minimal, StrictFIFO blocks behind
its head, BestEffortFIFO starves nobody that fits alone, and the answer does not depend
on input order.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import random
from collections.abc import Iterable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from taugrid.platform import models as pm
from taugrid.scheduling import admission as adm
from taugrid.scheduling import admission_model as am
from tests.scheduling import admission_builders as b

S = am.Status
FLAVORS = ("A", "B")
World = tuple[list[am.ClusterQueue], list[am.AdmittedWorkload], list[am.Workload]]


def violations(cqs: Sequence[am.ClusterQueue], held: Iterable[am.AdmittedWorkload]) -> list[str]:
    """Every broken limit, computed from first principles (independent of the ledger)."""
    usage: collections.defaultdict[tuple[str, str, str], float] = collections.defaultdict(float)
    for w in held:
        for f, r, a in w.usage:
            usage[(w.cluster_queue, f, r)] += a
    quotas = {(c.name, *fr): q for c in cqs for fr, q in c.quotas().items()}
    out = [f"{k}: {u} without quota" for k, u in usage.items() if u > 0 and k not in quotas]
    cohort_of = {c.name: c.cohort for c in cqs}
    pools: dict[tuple[str, str, str], list[tuple[float, am.ResourceQuota]]] = {}
    for (name, f, r), q in quotas.items():
        u, cohort = usage[(name, f, r)], cohort_of[name]
        borrow = math.inf if q.borrowing_limit is None else q.borrowing_limit
        limit = q.nominal + (0 if cohort is None else borrow)
        if u > limit:
            out.append(f"{name} {f}: {u} > nominal+borrowing {limit}")
        if cohort is not None:
            pools.setdefault((cohort, f, r), []).append((u, q))
    for key, members in pools.items():
        if sum(u for u, _ in members) > sum(q.nominal for _, q in members):
            out.append(f"cohort {key}: usage above the sum of nominal quotas")
        lendable = [min(q.nominal, q.nominal if q.lending_limit is None else q.lending_limit)
                    for _, q in members]  # fmt: skip
        drawn = sum(
            max(0, u - (q.nominal - ln)) for (u, q), ln in zip(members, lendable, strict=True)
        )
        if drawn > sum(lendable):
            out.append(f"cohort {key}: a queue's non-lendable quota is used by others")
    return out


def _policies() -> st.SearchStrategy[am.PreemptionPolicy]:
    return st.builds(
        am.PreemptionPolicy, st.sampled_from(am.WithinClusterQueue), st.sampled_from(am.Reclaim)
    )


@st.composite
def _cqs(draw: st.DrawFn, crowded: bool) -> list[am.ClusterQueue]:
    """Random queues; ``crowded`` puts them all in one cohort (where reclaim happens)."""
    out = []
    for i in range(draw(st.integers(1, 4))):
        flavors = (
            ["A"]
            if crowded
            else draw(st.lists(st.sampled_from(FLAVORS), min_size=1, max_size=2, unique=True))
        )
        limit = st.none() | st.integers(0, 8)
        quotas: dict[str, b.Limits] = {
            f: (draw(st.integers(0, 8)), draw(limit), draw(limit)) for f in flavors
        }
        cohort = "k1" if crowded else draw(st.sampled_from([None, "k1", "k2"]))
        strict = draw(st.booleans())
        out.append(b.cq(f"q{i}", quotas, cohort, strict=strict, preemption=draw(_policies())))
    return out


@st.composite
def worlds(draw: st.DrawFn, max_pending: int = 8) -> World:
    crowded = draw(st.booleans())
    cqs = draw(_cqs(crowded))
    names = [c.name for c in cqs]
    held: list[am.AdmittedWorkload] = []
    for j in range(draw(st.integers(0, 20 if crowded else 10))):
        # q0 takes most running work, so that it borrows and peers may reclaim.
        q, f = draw(st.sampled_from(names[:1] * 3 + names)), draw(st.sampled_from(FLAVORS))
        w = b.running(f"r{j}", q, draw(st.integers(1, 6)), draw(st.integers(0, 3)), float(j), f)
        if not violations(cqs, [*held, w]):
            held.append(w)
    pending = [
        b.wl(
            f"p{j}",
            draw(st.sampled_from(names)),
            draw(st.integers(1, 4 if crowded else 8)),
            draw(st.integers(0, 3)),
            float(draw(st.integers(0, 20))),
            draw(st.none() | st.sampled_from(FLAVORS)),
        )
        for j in range(draw(st.integers(0, max_pending)))
    ]
    return cqs, held, pending


def _charged(result: am.CycleResult, pending: Sequence[am.Workload]) -> list[am.AdmittedWorkload]:
    """Admitted and preempting workloads as they will hold quota (preemptors included)."""
    by_id = {w.id: w for w in pending}
    out = []
    for r in result.results:
        if r.status in (S.ADMITTED, S.PREEMPTING):
            w = by_id[r.workload_id]
            usage = tuple((f, res, dict(w.requests)[res]) for res, f in r.assignment)
            out.append(am.AdmittedWorkload(w.id, r.cluster_queue, w.priority, 99.0, usage))
    return out


def _after(world: World, result: am.CycleResult) -> list[am.AdmittedWorkload]:
    _, held, pending = world
    gone = {e.workload_id for e in result.evictions}
    return [w for w in held if w.id not in gone] + _charged(result, pending)


@settings(max_examples=150, deadline=None)
@given(worlds())
def test_quota_borrowing_and_lending_limits_are_never_exceeded(world: World) -> None:
    cqs, held, pending = world
    result = adm.admit(b.state(cqs, held), pending)
    assert sorted(r.workload_id for r in result.results) == sorted(w.id for w in pending)
    assert violations(cqs, _after(world, result)) == []
    without_preemptors = [w for w in held if w.id not in {e.workload_id for e in result.evictions}]
    without_preemptors += _charged(
        am.CycleResult(tuple(r for r in result.results if r.status is S.ADMITTED), ()), pending
    )
    assert violations(cqs, without_preemptors) == []


@settings(max_examples=150, deadline=None)
@given(worlds())
def test_borrowed_amount_is_what_goes_beyond_nominal(world: World) -> None:
    cqs, held, pending = world
    result = adm.admit(b.state(cqs, held), pending)
    by_cq = {c.name: c for c in cqs}
    for r in result.results:
        for f, res, amount in r.borrowed:
            q = by_cq[r.cluster_queue].quotas()[(f, res)]
            assert by_cq[r.cluster_queue].cohort is not None and amount > 0
            assert q.borrowing_limit is None or amount <= q.borrowing_limit


@settings(max_examples=150, deadline=None)
@given(worlds())
def test_preemption_only_of_lower_priority_or_of_borrowers(world: World) -> None:
    cqs, held, pending = world
    result = adm.admit(b.state(cqs, held), pending)
    by_cq, victims = {c.name: c for c in cqs}, {w.id: w for w in held}
    usage: collections.defaultdict[tuple[str, str, str], float] = collections.defaultdict(float)
    # A reclaimed queue borrows when the target is chosen, counting what this very pass
    # admitted to it (an upper bound: evictions only lower it).
    for w in [*held, *_charged(result, pending)]:
        for f, r, a in w.usage:
            usage[(w.cluster_queue, f, r)] += a
    preemptors = {w.id: w for w in pending}
    for e in result.evictions:
        v, p = victims[e.workload_id], preemptors[e.preemptor]
        p_cq = result.by_id()[p.id].cluster_queue
        if e.cause is am.Cause.PRIORITY:
            assert v.cluster_queue == p_cq and v.priority < p.priority
        else:
            assert v.cluster_queue != p_cq
            assert by_cq[v.cluster_queue].cohort == by_cq[p_cq].cohort is not None
            quotas = by_cq[v.cluster_queue].quotas()
            assert any(
                usage[(v.cluster_queue, f, r)] > quotas[(f, r)].nominal for f, r, _ in v.usage
            )
    assert len({e.workload_id for e in result.evictions}) == len(result.evictions)


@settings(max_examples=150, deadline=None)
@given(worlds(max_pending=1))
def test_preemption_sets_are_minimal(world: World) -> None:
    cqs, held, pending = world
    result = adm.admit(b.state(cqs, held), pending)
    if not result.evictions:
        return
    after = _after(world, result)
    assert violations(cqs, after) == []
    for e in result.evictions:
        back = next(w for w in held if w.id == e.workload_id)
        assert violations(cqs, [*after, back]), f"{back.id} did not need to go"


@settings(max_examples=150, deadline=None)
@given(worlds())
def test_strict_fifo_admits_nothing_behind_a_waiting_workload(world: World) -> None:
    cqs, held, pending = world
    result = adm.admit(b.state(cqs, held), pending)
    strict = {c.name for c in cqs if c.strategy.value == "StrictFIFO"}
    order = {w.id: (-w.priority, w.created_at, w.id) for w in pending}
    for r in result.results:
        if r.cluster_queue not in strict or r.status is not S.WAITING:
            continue
        behind = [
            x for x in result.results
            if x.cluster_queue == r.cluster_queue and order[x.workload_id] > order[r.workload_id]
        ]  # fmt: skip
        assert all(x.status is S.WAITING for x in behind)


@settings(max_examples=100, deadline=None)
@given(worlds(), st.randoms(use_true_random=False))
def test_answer_does_not_depend_on_input_order(world: World, rnd: random.Random) -> None:
    cqs, held, pending = world
    first = adm.admit(b.state(cqs, held), pending)
    rnd.shuffle(pending)
    rnd.shuffle(held)
    again = adm.admit(b.state(cqs, held), pending)
    assert sorted(first.results, key=lambda r: r.workload_id) == sorted(
        again.results, key=lambda r: r.workload_id
    )
    assert set(first.evictions) == set(again.evictions)


def _fits_alone(w: am.Workload, cqs: Sequence[am.ClusterQueue]) -> bool:
    """Some allowed flavor of its queue holds it when nothing else runs."""
    ((res, amount),) = w.requests
    c = next(c for c in cqs if c.name == w.queue)
    return any(
        r == res
        and w.allows(r, f)
        and not violations(cqs, [b.running("x", c.name, amount, 0, 0, f)])
        for f, r in c.quotas()
    )


@settings(max_examples=100, deadline=None)
@given(worlds(max_pending=10), st.lists(st.integers(1, 3), min_size=10, max_size=10))
def test_best_effort_fifo_starves_nobody_that_fits_alone(world: World, lives: list[int]) -> None:
    """No arrivals; running work ends after 1-3 passes, evicted work is requeued; every
    workload that fits in an empty system is eventually admitted."""
    cqs = [_best_effort(c) for c in world[0]]
    held, pending = world[1], world[2]
    ends = {w.id: lives[i % len(lives)] for i, w in enumerate(held)}
    waiting, admitted_ever = list(pending), set()
    for step in range(10 * (len(pending) + len(held)) + 20):
        held = [w for w in held if ends[w.id] > step]
        if not waiting:
            break
        result = adm.admit(b.state(cqs, held), waiting)
        gone = {e.workload_id for e in result.evictions}
        requeued = [_requeue(w) for w in held if w.id in gone]
        new = b.done(result, waiting, float(step))
        for i, w in enumerate(new):
            ends[w.id] = step + 1 + lives[i % len(lives)]
        held = [w for w in held if w.id not in gone] + new
        admitted_ever |= {w.id for w in new}
        waiting = [w for w in waiting if w.id not in {n.id for n in new}] + requeued
    starved = [w.id for w in pending if _fits_alone(w, cqs) and w.id not in admitted_ever]
    assert starved == []


def _best_effort(c: am.ClusterQueue) -> am.ClusterQueue:
    return dataclasses.replace(c, strategy=pm.QueueingStrategy.BEST_EFFORT_FIFO)


def _requeue(w: am.AdmittedWorkload) -> am.Workload:
    ((f, r, a),) = w.usage
    return am.Workload(w.id, w.cluster_queue, w.priority, w.admitted_at, ((r, a),), ((r, f),))


@settings(max_examples=150, deadline=None)
@given(worlds(max_pending=1))
def test_nominal_quota_is_always_reclaimable(world: World) -> None:
    """A workload that keeps its queue within nominal never waits when the queue may
    reclaim from any peer and preempt lower priorities: its nominal is guaranteed."""
    cqs, held, pending = world
    if len(pending) != 1:
        return
    (w,) = pending
    c = next(c for c in cqs if c.name == w.queue)
    ((_, amount),) = w.requests
    if c.preemption.reclaim_within_cohort is not am.Reclaim.ANY or len(c.quotas()) != 1:
        return
    ((f, r), q), = c.quotas().items()  # fmt: skip
    used = sum(a for h in held if h.cluster_queue == c.name for _, _, a in h.usage)
    if not w.allows(r, f) or used + amount > q.nominal:
        return
    assert adm.admit(b.state(cqs, held), pending).results[0].status is not S.WAITING
