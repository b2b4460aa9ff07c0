"""Data-aware placement plugins: transfer-time data affinity, expected wait, expected
finish time, warm runtime, and the move-vs-wait rule. Pure: functions of ``(run, cluster)``
views only.

Vocabulary:
- *transfer estimate*: seconds to bring every input dataset of a run into a cluster's
  region, from the dataset sizes and the latest **measured** link throughput and RTT
  (``ClusterView.links``, from the agents' TCP probes — a payload, not ping). A dataset
  already in the region costs 0; otherwise the fastest source region holding a complete
  replica is used; datasets move one after another, so their times add up. A link never
  measured is assumed to carry ``default_bps``.
- *expected wait*: seconds until the cluster has the run's GPUs free, from what is free
  now and when running attempts are expected to give GPUs back
  (``ClusterView.releases``); counted in GPUs of the run's model, not per node.
- *expected finish time*: transfer estimate + expected wait + the run's declared run
  time over the cluster's GPU speed (``finish_time_s``): where the run is done soonest.
- *move vs wait*: a run whose data to move is at most ``threshold_bytes`` (default 5 GB)
  may move anywhere (the data score prices the transfer). A bigger one waits near its
  data unless moving is faster: it may go to a cluster without the data only when
  ``transfer estimate + expected wait there < expected wait near the data``
  (``PendingRun.wait_near_data_s``, computed with ``wait_near_data`` by the caller).

Scores are in [0, 100]: ``data`` and ``wait`` are ``100 * ref / (ref + seconds)`` (half
score at ``ref_s``), ``finish`` the same with ``ref`` the run's own run time, ``warm``
is 100 when the run's runtime is warm there (or it has none), else 0. A run without
datasets scores 100 on ``data`` everywhere, so the score never reorders clusters for it.
"""

from __future__ import annotations

import dataclasses
import math

from taugrid.scheduling import plugins
from taugrid.scheduling import snapshot as snap

__all__ = [
    "DEFAULT_BPS",
    "DEFAULT_RUNTIME_S",
    "MOVE_THRESHOLD_BYTES",
    "DataAffinityScore",
    "DataEstimate",
    "DataMoveFilter",
    "ExpectedWaitScore",
    "FinishTimeScore",
    "WarmRuntimeScore",
    "estimate",
    "expected_wait_s",
    "finish_time_s",
    "half_life_score",
    "transfer_time_s",
    "wait_near_data",
]

DEFAULT_BPS = 12.5e6
"""Bytes/s assumed for a link never measured (100 Mbit/s)."""
MOVE_THRESHOLD_BYTES = 5 * 10**9
DEFAULT_RUNTIME_S = 3600.0
"""Run time assumed for a run that declares none (as the hub's ``DEFAULT_RUN_S``)."""


def transfer_time_s(size_bytes: float, link: snap.LinkView | None, default_bps: float) -> float:
    """Seconds to move ``size_bytes`` over ``link``: one request round trip plus payload."""
    bps = link.throughput_bps if link is not None and link.throughput_bps > 0 else default_bps
    rtt = link.rtt_s if link is not None else 0.0
    return rtt + size_bytes / bps


@dataclasses.dataclass(frozen=True)
class DataEstimate:
    """What bringing a run's inputs to one cluster takes.

    ``moves`` has one ``(dataset, source region, seconds)`` per dataset not in the
    region; ``missing`` names datasets with no complete replica anywhere.
    """

    seconds: float
    bytes_to_move: int
    moves: tuple[tuple[str, str, float], ...] = ()
    missing: tuple[str, ...] = ()
    egress_cost: float = 0.0


def estimate(
    run: snap.PendingRun, cluster: snap.ClusterView, default_bps: float = DEFAULT_BPS
) -> DataEstimate:
    """The transfer estimate of ``run``'s datasets into ``cluster``'s region."""
    seconds, moved, cost = 0.0, 0, 0.0
    moves: list[tuple[str, str, float]] = []
    missing: list[str] = []
    for need in run.datasets:
        if cluster.region in need.regions:
            continue
        if not need.regions:
            missing.append(need.name)
            continue
        options = sorted(
            (transfer_time_s(need.size_bytes, cluster.link_from(src), default_bps), src)
            for src in need.regions
        )
        t, src = options[0]
        link = cluster.link_from(src)
        seconds += t
        moved += need.size_bytes
        cost += need.size_bytes / 1e9 * (link.egress_cost_per_gb if link else 0.0)
        moves.append((need.name, src, round(t, 3)))
    return DataEstimate(round(seconds, 3), moved, tuple(moves), tuple(missing), round(cost, 4))


def expected_wait_s(run: snap.PendingRun, cluster: snap.ClusterView) -> float:
    """Seconds until ``cluster`` has the run's GPUs free (``math.inf``: never)."""
    if plugins.fits(run, cluster):
        return 0.0
    total, free = cluster.gpus(run.gpu_model)
    if total < run.total_gpus:
        return math.inf
    for seconds, gpus in sorted(cluster.releases):
        free += gpus
        if free >= run.total_gpus:
            return max(0.0, seconds)
    return math.inf


def finish_time_s(
    run: snap.PendingRun, cluster: snap.ClusterView, default_bps: float = DEFAULT_BPS
) -> float:
    """Expected seconds until ``run`` finishes on ``cluster`` if sent there now.

    Transfer estimate + expected wait + declared run time (``DEFAULT_RUNTIME_S`` when
    none) over the cluster's GPU speed, stretched by the expected reclaims on spot nodes
    (``snapshot.spot_overhead``); ``math.inf`` when a dataset has no replica.
    """
    est = estimate(run, cluster, default_bps)
    if est.missing:
        return math.inf
    runtime = (run.runtime_s or DEFAULT_RUNTIME_S) / cluster.gpu_speed
    if run.capacity == snap.SPOT:
        runtime *= snap.spot_overhead(run, cluster)
    return est.seconds + expected_wait_s(run, cluster) + runtime


def wait_near_data(run: snap.PendingRun, clusters: tuple[snap.ClusterView, ...]) -> float | None:
    """Expected wait at the best ready cluster whose region holds all of ``run``'s data.

    None when no ready cluster holds it all (then moving is the only way to run).
    """
    near = [
        expected_wait_s(run, c)
        for c in clusters
        if c.ready and all(c.region in need.regions for need in run.datasets)
    ]
    return min(near) if near and run.datasets else None


def half_life_score(seconds: float, ref_s: float) -> float:
    """100 at 0 s, 50 at ``ref_s``, towards 0 as ``seconds`` grows (0 for inf)."""
    if math.isinf(seconds):
        return 0.0
    return 100.0 * ref_s / (ref_s + max(0.0, seconds))


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


@dataclasses.dataclass(frozen=True)
class DataMoveFilter:
    """Move-vs-wait: big datasets wait near their data unless moving is faster."""

    name: str = "data_move"
    threshold_bytes: int = MOVE_THRESHOLD_BYTES
    default_bps: float = DEFAULT_BPS

    def filter(self, run: snap.PendingRun, cluster: snap.ClusterView) -> plugins.Status:
        if not run.datasets:
            return plugins.OK
        est = estimate(run, cluster, self.default_bps)
        if est.missing:
            return plugins.Status(
                plugins.Code.UNSCHEDULABLE,
                f"dataset {', '.join(est.missing)} has no complete replica in any region",
            )
        if est.bytes_to_move <= self.threshold_bytes or run.wait_near_data_s is None:
            return plugins.OK
        here = expected_wait_s(run, cluster)
        if est.seconds + here < run.wait_near_data_s:
            return plugins.OK
        return plugins.Status(
            plugins.Code.UNSCHEDULABLE,
            f"{_gb(est.bytes_to_move)} to move is over the {_gb(self.threshold_bytes)} "
            f"threshold and moving (~{est.seconds:.0f} s + {here:.0f} s wait) is not faster "
            f"than waiting near the data (~{run.wait_near_data_s:.0f} s)",
        )


@dataclasses.dataclass(frozen=True)
class DataAffinityScore:
    """``100 * ref / (ref + transfer estimate)``: 100 where the data already is."""

    name: str = "data"
    ref_s: float = 60.0
    default_bps: float = DEFAULT_BPS

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        if not run.datasets:
            return 100.0
        return half_life_score(estimate(run, cluster, self.default_bps).seconds, self.ref_s)


@dataclasses.dataclass(frozen=True)
class ExpectedWaitScore:
    """``100 * ref / (ref + expected wait)``: 100 where the run fits now."""

    name: str = "wait"
    ref_s: float = 300.0

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        return half_life_score(expected_wait_s(run, cluster), self.ref_s)


@dataclasses.dataclass(frozen=True)
class FinishTimeScore:
    """``100 * R / (R + expected finish time)``, ``R`` the run's declared run time.

    Scale-free: 50 where the run starts now with its data in place on reference-speed
    GPUs, 67 on GPUs twice as fast, 29 at 0.4x; transfer and wait push it down in
    proportion to the run's length (an hour's copy costs a 10-minute run far more than
    a day-long one). Monotone in the finish time, so alone it picks the soonest finish.
    """

    name: str = "finish"
    default_bps: float = DEFAULT_BPS

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        runtime = run.runtime_s or DEFAULT_RUNTIME_S
        return half_life_score(finish_time_s(run, cluster, self.default_bps), runtime)


@dataclasses.dataclass(frozen=True)
class WarmRuntimeScore:
    """100 when the run's runtime environment is already prepared in the cluster."""

    name: str = "warm"

    def score(self, run: snap.PendingRun, cluster: snap.ClusterView) -> float:
        if run.runtime_key is None or run.runtime_key in cluster.warm_runtimes:
            return 100.0
        return 0.0
