"""One scheduling cycle: a pure function ``(snapshot, pending, policy) → decisions``.

Numbered phases, kueue ``schedule()`` style:

1. heads    — order pending runs: priority (high first), then submission time (FIFO).
2. snapshot — copy free capacity and quota usage into mutable working state; the
              caller's ``Snapshot`` is never mutated.
3. admit    — runs not yet admitted go through ``scheduling.admission`` (Kueue
              semantics: a ClusterQueue per team, cohorts with borrowing/lending
              limits, StrictFIFO/BestEffortFIFO, priority preemption and reclaim, fair
              sharing). A run that needs others preempted waits with ``preempt`` set;
              a run among those targets is not placed. Runs asking no GPUs need no quota.
4. place    — filter every cluster, score the survivors with the weights of the run's
              ``placement.objective`` preset (plus its communication mode's terms),
              pick the best.
5. reserve  — bind each worker to a node of the chosen cluster with the packer the
              openb simulator measures (``packing.live``; first fit where it does not
              apply) and deduct them from the working state, so later runs in this
              cycle see them as taken.
6. dispatch / 7. requeue — done by the caller (hub or simulator): it persists
              ``Decision``s, sends assignments, and on dispatch failure unreserves.

Deterministic: ties break on cluster ID. No clock, no I/O, no randomness.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import math
from collections.abc import Mapping

from taugrid.platform import models as pm
from taugrid.scheduling import admission as adm
from taugrid.scheduling import admission_model as am
from taugrid.scheduling import plugins, plugins_data, spanning
from taugrid.scheduling import snapshot as snap
from taugrid.scheduling.packing import live

__all__ = [
    "PLUGIN_ERROR",
    "ClusterVerdict",
    "Decision",
    "Outcome",
    "Policy",
    "default_policy",
    "first_fit",
    "policy_from",
    "reserve",
    "schedule",
    "take",
]


PLUGIN_ERROR = "error"  # ClusterVerdict.code of a cluster whose plugin raised
_NEVER = plugins.Code.UNSCHEDULABLE_AND_UNRESOLVABLE.value


class Outcome(enum.StrEnum):
    """What the cycle decided for one run."""

    PLACED = "placed"  # admitted (now or before) and assigned to a cluster
    ADMITTED = "admitted"  # quota reserved, no cluster fits yet
    WAITING_QUOTA = "waiting_quota"  # not admitted: quota used up (or: preempting others)
    NOT_YET = "not_yet"  # backoff: not before a later time


@dataclasses.dataclass(frozen=True)
class ClusterVerdict:
    """Why a cluster was kept or dropped, and its weighted score breakdown.

    ``code`` is the dropping filter's ``plugins.Code`` value (``success`` when kept), or
    ``PLUGIN_ERROR`` when a plugin raised: the cycle goes on without that cluster for
    that run, and ``reason`` names the plugin and its exception.
    """

    cluster_id: str
    region: str
    ok: bool
    reason: str
    scores: dict[str, float]
    total: float
    code: str = plugins.Code.SUCCESS.value
    capacity: str = snap.ON_DEMAND
    """The nodes it was judged for: spot or on-demand (a run of capacity any gets both)."""


@dataclasses.dataclass(frozen=True)
class Decision:
    """The cycle's answer for one pending run.

    ``flavor``: the GPU model whose quota the run is charged (set when admitted in this
    cycle); ``borrowed``: GPUs of it taken beyond the team's nominal, from the cohort.
    ``preempt``: with WAITING_QUOTA, the runs that must be evicted (reason ``Preempted``,
    ``preempt_reasons`` aligned with them) before this run can be admitted.
    ``objective`` and ``weights``: the preset and normalised weights its clusters were
    scored with (set when placement ran). ``nodes``: with PLACED, the node ID of each
    worker (phase 5, ``reserve``), which the agent pins. ``unresolvable``: with ADMITTED, every
    cluster dropped the run for good (``Code.UNSCHEDULABLE_AND_UNRESOLVABLE``: region
    not allowed, compliance not met, bigger than the cluster): waiting will not help.
    ``guests``: with PLACED, a spanning run's worker groups in other clusters, each
    ``(cluster ID, node of each worker)`` (``scheduling.spanning``); ``cluster_id`` and
    ``nodes`` are then the head's cluster and its workers.
    """

    run_id: str
    outcome: Outcome
    cluster_id: str | None
    reason: str
    verdicts: tuple[ClusterVerdict, ...] = ()
    preempt: tuple[str, ...] = ()
    preempt_reasons: tuple[str, ...] = ()
    borrowed: float = 0
    flavor: str | None = None
    objective: str = ""
    weights: dict[str, float] = dataclasses.field(default_factory=dict)
    unresolvable: bool = False
    nodes: tuple[str, ...] = ()
    guests: tuple[tuple[str, tuple[str, ...]], ...] = ()
    capacity: str = snap.ON_DEMAND
    """With PLACED: the capacity its nodes are (spot, on-demand; any for a span of both)."""


@dataclasses.dataclass(frozen=True)
class Policy:
    """Which plugins run and how scores are weighted (weights are normalised).

    ``weights`` is the preset of runs without a known objective; ``presets`` maps a
    ``placement.objective`` to its weights; ``modes`` adds weights per
    ``placement.communication`` (e.g. ``sync`` → ``interconnect``). All come from
    platform.yaml's ``scheduling`` section (``policy_from``). ``span_min_bps``: the link
    budget of spanning runs (``scheduling.spanning``; ``None``: runs never span).
    """

    filters: tuple[plugins.FilterPlugin, ...]
    scorers: tuple[plugins.ScorePlugin, ...]
    weights: dict[str, float]
    presets: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    modes: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    default_objective: str = pm.DEFAULT_OBJECTIVE
    span_min_bps: float | None = None
    capacities: Mapping[str, Mapping[str, float]] = dataclasses.field(
        default_factory=lambda: pm.CAPACITY_WEIGHTS
    )

    def normalised_weights(self) -> dict[str, float]:
        return self.weights_for(None, None)

    def weights_of(self, run: snap.PendingRun) -> dict[str, float]:
        """``run``'s normalised weights: objective, communication mode and capacity."""
        return self.weights_for(run.objective, run.communication, run.capacity)

    def objective_of(self, objective: str | None) -> str:
        """The preset a run with ``objective`` is scored by (the default when unknown)."""
        if objective is not None and objective in self.presets:
            return objective
        return self.default_objective

    def weights_for(
        self, objective: str | None, communication: str | None, capacity: str | None = None
    ) -> dict[str, float]:
        """Normalised weights of one run: its objective's preset plus its communication
        mode's and its capacity's terms."""
        raw = dict(self.presets.get(self.objective_of(objective), self.weights))
        added = (self.modes.get(communication or "", {}), self.capacities.get(capacity or "", {}))
        for terms in added:
            for name, w in terms.items():
                raw[name] = raw.get(name, 0.0) + w
        total = sum(raw.get(s.name, 0.0) for s in self.scorers) or 1.0
        return {s.name: raw.get(s.name, 0.0) / total for s in self.scorers}


def default_policy() -> Policy:
    """Built-in filters (+ move-vs-wait) and scores: data affinity, idle GPUs, cost.

    ``wait`` and ``warm`` are scored and shown by explain-placement but weigh 0 unless
    a preset gives them a weight. Weights: platform.yaml's defaults (``pm.Scheduling``).
    """
    return policy_from(pm.Scheduling())


def policy_from(spec: pm.Scheduling) -> Policy:
    """The built-in plugins weighted as platform.yaml's ``scheduling`` section says."""
    presets = {k: dict(v) for k, v in spec.presets.items()}
    return Policy(
        filters=(
            plugins.ReadyFilter(),
            plugins.RegionFilter(),
            plugins.ComplianceFilter(),
            plugins.GpuShareFilter(),
            plugins.CapacityFilter(),
            plugins.RelocationFilter(),
            plugins.FitFilter(),
            plugins_data.DataMoveFilter(),
        ),
        scorers=(
            plugins_data.DataAffinityScore(),
            plugins.IdleGpuScore(),
            plugins.CostScore(),
            plugins_data.ExpectedWaitScore(),
            plugins_data.WarmRuntimeScore(),
            plugins.InterconnectScore(),
            plugins_data.FinishTimeScore(),
        ),
        weights=dict(presets[spec.default_objective]),
        presets=presets,
        modes={k: dict(v) for k, v in spec.communication.items()},
        default_objective=spec.default_objective,
        span_min_bps=None if spec.span_min_mbit is None else spec.span_min_mbit * 1e6 / 8,
    )


@dataclasses.dataclass
class _Work:
    """A cycle's working state: clusters as reserved so far, and verdicts computed so far.

    ``verdicts[cluster_id][run.request]`` is reused by every later run with the same
    request until a reservation changes that cluster (which clears its entry).
    """

    clusters: dict[str, snap.ClusterView]
    policy: Policy
    weights: dict[tuple[str | None, str | None, str], dict[str, float]] = dataclasses.field(
        init=False
    )
    order: list[str] = dataclasses.field(init=False)
    verdicts: dict[str, dict[tuple[object, ...], ClusterVerdict]] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.weights = {}
        self.order = sorted(self.clusters)
        self.verdicts = {c: {} for c in self.order}

    def weights_of(self, run: snap.PendingRun) -> dict[str, float]:
        """``run``'s normalised weights (memoised per objective and communication)."""
        key = (run.objective, run.communication, run.capacity)
        if key not in self.weights:
            self.weights[key] = self.policy.weights_of(run)
        return self.weights[key]

    def verdicts_for(self, run: snap.PendingRun) -> tuple[ClusterVerdict, ...]:
        """Every cluster's verdict for ``run``, in cluster ID order (memoised); a run of
        capacity any is judged as spot and as on-demand on each cluster."""
        out, weights = [], self.weights_of(run)
        for one in _capacities(run):
            key = (one.request, run.capacity)  # an ``any`` run's weights are its own
            for cluster_id in self.order:
                memo = self.verdicts[cluster_id]
                v = memo.get(key)
                if v is None:
                    v = _verdict(one, self.clusters[cluster_id], self.policy, weights)
                    memo[key] = v
                out.append(v)
        return tuple(out)

    def keeps(self, run: snap.PendingRun, c: snap.ClusterView) -> bool:
        """Whether every filter but the whole-run ones keeps ``c`` (a span's member)."""
        skip = spanning.WHOLE_RUN_FILTERS
        return all(f.filter(run, c).ok for f in self.policy.filters if f.name not in skip)

    def reserve(self, run: snap.PendingRun, cluster_id: str) -> tuple[str, ...]:
        """Bind ``run``'s workers to nodes of the cluster (the packer, else first fit)."""
        view = self.clusters[cluster_id]
        nodes = live.bind(run, view) or first_fit(run, view)
        self.clusters[cluster_id] = take(run, view, nodes)
        self.verdicts[cluster_id] = {}
        return nodes


def _capacities(run: snap.PendingRun) -> tuple[snap.PendingRun, ...]:
    """``run`` as each capacity it may use: spot then on-demand for ``any``."""
    if run.capacity != snap.ANY:
        return (run,)
    return tuple(dataclasses.replace(run, capacity=c) for c in (snap.SPOT, snap.ON_DEMAND))


def _heads(pending: list[snap.PendingRun]) -> list[snap.PendingRun]:
    return sorted(pending, key=lambda r: (-r.priority, r.created_at, r.run_id))


def _cluster_queues(quotas: tuple[snap.QuotaView, ...]) -> tuple[am.ClusterQueue, ...]:
    """One ClusterQueue per team; its GPU flavors in the order the quotas are listed."""
    by_team: dict[str, list[snap.QuotaView]] = {}
    for q in quotas:
        by_team.setdefault(q.team, []).append(q)
    return tuple(
        am.ClusterQueue(
            team,
            (am.ResourceGroup(tuple(_flavor(q) for q in qs)),),
            qs[0].cohort,
            qs[0].strategy,
        )
        for team, qs in by_team.items()
    )


def _flavor(q: snap.QuotaView) -> am.FlavorQuotas:
    borrow, lend = (q.borrowing_limit, q.lending_limit) if q.cohort else (None, None)
    return am.FlavorQuotas(q.gpu_model, (am.ResourceQuota(am.GPU, q.nominal, borrow, lend),))


def _held(snapshot: snap.Snapshot, teams: set[str]) -> tuple[am.AdmittedWorkload, ...]:
    """Listed admitted runs (preemptible), plus the rest of ``used`` as pinned usage."""
    held, listed = [], dict.fromkeys(((q.team, q.gpu_model) for q in snapshot.quotas), 0.0)
    for a in snapshot.admitted:
        if a.gpus > 0 and (a.team, a.gpu_model) in listed:
            listed[(a.team, a.gpu_model)] += a.gpus
            usage = ((a.gpu_model, am.GPU, a.gpus),)
            held.append(am.AdmittedWorkload(a.run_id, a.team, a.priority, a.admitted_at, usage))
    for q in snapshot.quotas:
        rest = am.quantize(q.used - listed[(q.team, q.gpu_model)])
        if rest > 0 and q.team in teams:
            usage = ((q.gpu_model, am.GPU, rest),)
            pin = f"held:{q.team}:{q.gpu_model}"
            held.append(am.AdmittedWorkload(pin, q.team, 0, 0.0, usage, preemptible=False))
    return tuple(held)


def _workload(run: snap.PendingRun) -> am.Workload:
    allowed = ((am.GPU, run.gpu_model),) if run.gpu_model else ()
    return am.Workload(
        run.run_id, run.team, run.priority, run.created_at, ((am.GPU, run.total_gpus),), allowed
    )


def _admit(snapshot: snap.Snapshot, runs: list[snap.PendingRun]) -> _Admission:
    """Phase 3 for the runs that need quota now (one admission pass over all of them)."""
    cqs = _cluster_queues(snapshot.quotas)
    teams = {c.name for c in cqs}
    local = tuple(am.LocalQueue(t, t) for t in sorted(teams))
    state = am.State(cqs, local, _held(snapshot, teams))
    out = adm.admit(state, [_workload(r) for r in runs if r.team in teams])
    return _Admission(out.by_id(), {e.workload_id: e for e in out.evictions})


def _verdict(
    run: snap.PendingRun, c: snap.ClusterView, policy: Policy, weights: dict[str, float]
) -> ClusterVerdict:
    """Filter, then score ``c`` for ``run``; a plugin that raises drops only ``c``."""
    name, kind = "", run.capacity
    try:
        for f in policy.filters:
            name = f.name
            st = f.filter(run, c)
            if not st.ok:
                why = f"{f.name}: {st.reason}"
                code = st.code.value
                return ClusterVerdict(c.cluster_id, c.region, False, why, {}, 0.0, code, kind)
        # Zero-weight scorers cannot change the choice; skipping them keeps a cycle cheap.
        scores = {}
        for s in policy.scorers:
            if weights[s.name]:
                name = s.name
                scores[s.name] = min(100.0, max(0.0, s.score(run, c)))
    except Exception as exc:  # one plugin's bug must not abort the whole cycle
        why = f"plugin {name} failed: {type(exc).__name__}: {exc}"
        return ClusterVerdict(c.cluster_id, c.region, False, why, {}, 0.0, PLUGIN_ERROR, kind)
    total = round(sum(weights[n] * v for n, v in scores.items()), 3)
    return ClusterVerdict(c.cluster_id, c.region, True, "fits", scores, total, capacity=kind)


def reserve(run: snap.PendingRun, cluster: snap.ClusterView) -> snap.ClusterView:
    """``cluster`` with ``run``'s workers taken first fit, node by node in order.

    Workers that fit nowhere are left out (the hub also reserves attempts it has
    assigned but the agent has not reported yet, which may no longer fit).
    """
    return take(run, cluster, first_fit(run, cluster))


def first_fit(run: snap.PendingRun, cluster: snap.ClusterView) -> tuple[str, ...]:
    """The node of each worker that fits, filling nodes in order (may be fewer)."""
    shape, left, nodes = run.shape, run.workers, []
    for n in cluster.nodes:
        if left <= 0:
            break
        fit = snap.node_slots(n, shape)
        take_here = left if fit == math.inf else min(left, int(fit))
        nodes += [n.node_id] * take_here
        left -= take_here
    return tuple(nodes)


def take(
    run: snap.PendingRun, cluster: snap.ClusterView, nodes: tuple[str, ...]
) -> snap.ClusterView:
    """``cluster`` with one of ``run``'s workers deducted on each of ``nodes``."""
    count = collections.Counter(nodes)
    changed: dict[int, snap.NodeView] = {}
    for i, n in enumerate(cluster.nodes):
        k = count.get(n.node_id, 0)
        if k:
            changed[i] = dataclasses.replace(
                n,
                gpus_free=n.gpus_free - k * run.gpus_per_worker,
                cpus_free=n.cpus_free - k * run.cpus_per_worker,
                memory_free=n.memory_free - k * run.memory_per_worker,
            )
    return cluster.with_nodes(changed) if changed else cluster


def _place(run: snap.PendingRun, work: _Work) -> Decision:
    verdicts = work.verdicts_for(run)
    objective, weights = work.policy.objective_of(run.objective), work.weights_of(run)
    best: ClusterVerdict | None = None
    for v in verdicts:  # ties: the higher cluster ID, then on-demand over spot
        if v.ok and (best is None or _rank(v) > _rank(best)):
            best = v
    if best is None:
        span = _span(run, work)
        if isinstance(span, spanning.Span):
            return _place_span(run, work, span, verdicts)
        said = (
            f"{v.cluster_id}{' (spot)' * (v.capacity == snap.SPOT)}: {v.reason}" for v in verdicts
        )
        reasons = "; ".join(said) or "no clusters registered"
        if work.policy.span_min_bps is not None and run.communication in spanning.SPAN_MODES:
            reasons += f"; not spanning: {span}"
        return Decision(
            run.run_id,
            Outcome.ADMITTED,
            None,
            reasons,
            verdicts,
            objective=objective,
            weights=weights,
            unresolvable=bool(verdicts) and all(v.code == _NEVER for v in verdicts),
        )
    chosen = dataclasses.replace(run, capacity=best.capacity)
    nodes = work.reserve(chosen, best.cluster_id)
    why = f"best score {best.total:g}" + (" on spot" if best.capacity == snap.SPOT else "")
    return Decision(
        run.run_id,
        Outcome.PLACED,
        best.cluster_id,
        why,
        verdicts,
        objective=objective,
        weights=weights,
        nodes=nodes,
        capacity=best.capacity,
    )


def _rank(v: ClusterVerdict) -> tuple[float, str, bool]:
    return (v.total, v.cluster_id, v.capacity == snap.ON_DEMAND)


def _span(run: snap.PendingRun, work: _Work) -> spanning.Span | str:
    clusters = [work.clusters[c] for c in work.order]
    return spanning.plan(run, clusters, lambda c: work.keeps(run, c), work.policy.span_min_bps)


def _place_span(
    run: snap.PendingRun, work: _Work, span: spanning.Span, verdicts: tuple[ClusterVerdict, ...]
) -> Decision:
    """Phase 5 for a spanning run: each member binds its share of the workers."""
    bound = [
        (m.cluster_id, work.reserve(dataclasses.replace(run, workers=m.workers), m.cluster_id))
        for m in span.members
    ]
    head, nodes = bound[0]
    return Decision(
        run.run_id,
        Outcome.PLACED,
        head,
        span.reason,
        verdicts,
        objective=work.policy.objective_of(run.objective),
        weights=work.weights_of(run),
        nodes=nodes,
        guests=tuple(bound[1:]),
        capacity=run.capacity,
    )


@dataclasses.dataclass(frozen=True)
class _Admission:
    """Phase 3's answers, indexed: results by run ID, evictions by target ID."""

    results: dict[str, am.WorkloadResult]
    evicted: dict[str, am.Eviction]

    def why_evicted(self, run_id: str) -> str:
        e = self.evicted[run_id]
        return f"{e.reason}: {e.message}"


def _waiting(run: snap.PendingRun, r: am.WorkloadResult, admission: _Admission) -> Decision:
    """Not admitted; with ``preempt`` when it waits for those runs to be evicted."""
    return Decision(
        run.run_id,
        Outcome.WAITING_QUOTA,
        None,
        r.reason,
        preempt=r.preempt,
        preempt_reasons=tuple(admission.why_evicted(t) for t in r.preempt),
        flavor=dict(r.assignment).get(am.GPU),
    )


def _decide(run: snap.PendingRun, admission: _Admission, work: _Work) -> Decision:
    if run.run_id in admission.evicted:
        why = admission.why_evicted(run.run_id)
        return Decision(run.run_id, Outcome.WAITING_QUOTA, None, why)
    if run.admitted or run.total_gpus == 0:
        return _place(run, work)
    r = admission.results.get(run.run_id)
    if r is None:
        why = f"team {run.team} has no quota for {run.gpu_model or 'GPUs'}"
        return Decision(run.run_id, Outcome.WAITING_QUOTA, None, why)
    if r.status is not am.Status.ADMITTED:
        return _waiting(run, r, admission)
    d = _place(run, work)
    return dataclasses.replace(
        d, borrowed=r.borrowed_of(am.GPU), flavor=dict(r.assignment).get(am.GPU)
    )


def schedule(
    snapshot: snap.Snapshot, pending: list[snap.PendingRun], policy: Policy
) -> list[Decision]:
    """Run phases 1-5 over ``pending``; one ``Decision`` per run, in head order."""
    heads = _heads(pending)
    due = [r for r in heads if r.not_before <= snapshot.now]
    work = _Work({c.cluster_id: c for c in snapshot.clusters}, policy)
    admission = _admit(snapshot, [r for r in due if not r.admitted and r.total_gpus > 0])
    decisions = []
    for run in heads:
        if run.not_before > snapshot.now:
            decisions.append(Decision(run.run_id, Outcome.NOT_YET, None, "retry backoff"))
        else:
            decisions.append(_decide(run, admission, work))
    return decisions
