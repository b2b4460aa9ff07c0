"""Multi-region scenarios: regions with GPU pools, datasets, links, prices and a job mix.

A ``Scenario`` is plain data, generated from a seed by ``generate`` (same seed and
parameters → equal scenario) or written by hand in tests. Vocabulary:

- *pool*: the nodes of one GPU model in one region; the simulator makes each pool one
  member cluster (``cluster_id`` ``<region>-<model>``), so its price is one number.
- *link* ``(src, dst)``: bytes/s a transfer from ``src`` into ``dst`` gets when alone on
  the link (concurrent transfers share it equally); *egress* ``(src, dst)``: $/GB
  ``src`` charges for data leaving towards ``dst``.
- *dataset*: a size and a home region holding the only replica at the start.
- *job*: submission time, ``workers x gpus_per_worker`` GPUs, an optional GPU model
  constraint, its true duration on A100s (``GPU_SPEED`` scales it per model), the
  runtime limit its user declared (``max_runtime``, an over-estimate — what the hub's
  expected-wait signal uses), an optional input dataset and a communication mode
  (``sync``: collectives, one region; ``async``: may tolerate cross-region latency;
  ``none``: independent workers).

The generator's shape (documented so the benchmark can quote it): 4 regions by default;
each offers 1-3 of A100/H100/L4 with 1-4 eight-GPU nodes per pool; inter-region links
log-uniform 0.5-10 Gbit/s per direction with egress $0.02-0.12/GB; datasets log-uniform
in three classes (small 1-20 GB, medium 50-500 GB, huge 1-4 TB; each times
``data_scale``), homes skewed to the first region ("data gravity"); jobs Poisson at an
offered load of ``load`` x capacity. ``link_gbps`` and ``data_scale`` make the
data-heavy family (slow links, bigger datasets), ``load`` the queue-heavy one.

Spot (``spot=True``; docs/spot.md): every pool gets a *spot twin* in its region (cluster
``<region>-<model>-spot``, as many nodes) at ``SPOT_DISCOUNT`` of its price, whose nodes
are reclaimed as a Poisson process of ``reclaims_per_hour`` per node (log-uniform in
``reclaims``) and come back ``NODE_RETURN_S`` later. The twins are drawn from their own
stream after everything else, so the rest of the scenario equals the one without them,
and jobs are offered at ``load`` of the on-demand capacity only (spot is room beyond it).
"""

from __future__ import annotations

import dataclasses
import enum
import math

import numpy as np

__all__ = [
    "GPU_PRICES",
    "GPU_SPEED",
    "NODE_RETURN_S",
    "SPOT_DISCOUNT",
    "Comm",
    "Dataset",
    "Job",
    "Pool",
    "Scenario",
    "generate",
]


class Comm(enum.StrEnum):
    """A job's communication mode (as ``spec.models.Communication``)."""

    SYNC = "sync"
    ASYNC = "async"
    NONE = "none"


GPU_PRICES = {"H100": (3.0, 4.5), "A100": (1.6, 2.6), "L4": (0.5, 0.9)}
"""$/GPU-hour range per model; each region draws its own price in the range."""
GPU_SPEED = {"H100": 2.0, "A100": 1.0, "L4": 0.4}
"""Work per second relative to an A100 (dense FP16 throughput, rounded): a job's
``duration`` is its run time on A100s; on a pool it takes ``duration / speed``."""
REGIONS = ("us-east", "us-west", "eu-west", "ap-south", "eu-north", "ap-east")
GB = 10**9
SPOT_DISCOUNT = (0.3, 0.5)
"""Spot price as a share of the on-demand price (public clouds: 50-70 % off)."""
NODE_RETURN_S = 1800.0
"""Seconds a reclaimed spot node stays gone before the provider has capacity again."""


@dataclasses.dataclass(frozen=True)
class Pool:
    region: str
    gpu_model: str
    nodes: int
    price: float
    """$ per GPU-hour."""
    gpus_per_node: int = 8
    spot: bool = False
    reclaims_per_hour: float = 0.0
    """Spot: reclaims per node-hour (a Poisson process per node)."""

    @property
    def cluster_id(self) -> str:
        return f"{self.region}-{self.gpu_model.lower()}" + ("-spot" if self.spot else "")

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def speed(self) -> float:
        return GPU_SPEED.get(self.gpu_model, 1.0)


@dataclasses.dataclass(frozen=True)
class Dataset:
    name: str
    size_bytes: int
    home: str


@dataclasses.dataclass(frozen=True)
class Job:
    job_id: str
    submit: float
    workers: int
    gpus_per_worker: int
    duration: float
    gpu_model: str | None = None
    dataset: str | None = None
    comm: Comm = Comm.NONE
    max_runtime: float = 0.0
    """Declared runtime limit in seconds (0: the true duration)."""
    capacity: str = "on-demand"
    """``resilience.capacity``: spot, on-demand or any."""

    @property
    def gpus(self) -> int:
        return self.workers * self.gpus_per_worker

    @property
    def declared(self) -> float:
        return self.max_runtime or self.duration


@dataclasses.dataclass(frozen=True)
class Scenario:
    regions: tuple[str, ...]
    pools: tuple[Pool, ...]
    datasets: tuple[Dataset, ...]
    bandwidth: tuple[tuple[str, str, float], ...]
    """(src, dst, bytes/s) for every ordered pair of distinct regions."""
    egress: tuple[tuple[str, str, float], ...]
    """(src, dst, $/GB) for every ordered pair of distinct regions."""
    jobs: tuple[Job, ...]
    seed: int = 0
    """Seeds the spot reclaims the simulator draws."""

    def link_bps(self) -> dict[tuple[str, str], float]:
        return {(s, d): v for s, d, v in self.bandwidth}

    def egress_per_gb(self) -> dict[tuple[str, str], float]:
        return {(s, d): v for s, d, v in self.egress}

    def dataset(self, name: str) -> Dataset:
        return next(d for d in self.datasets if d.name == name)

    @property
    def total_gpus(self) -> int:
        return sum(p.gpus for p in self.pools)


def _loguniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _pools(rng: np.random.Generator, regions: tuple[str, ...]) -> tuple[Pool, ...]:
    models = tuple(GPU_PRICES)
    pools = []
    for i, region in enumerate(regions):
        # Every model exists somewhere: region i always offers model i mod 3.
        offered = {models[i % len(models)]} | {m for m in models if rng.random() < 0.4}
        for m in models:
            if m in offered:
                lo, hi = GPU_PRICES[m]
                price = round(float(rng.uniform(lo, hi)), 2)
                pools.append(Pool(region, m, int(rng.integers(1, 5)), price))
    return tuple(pools)


def _links(
    rng: np.random.Generator, regions: tuple[str, ...], gbps: tuple[float, float]
) -> tuple[tuple[tuple[str, str, float], ...], tuple[tuple[str, str, float], ...]]:
    bw, eg = [], []
    for s in regions:
        for d in regions:
            if s != d:
                bw.append((s, d, round(_loguniform(rng, gbps[0] * 1e9, gbps[1] * 1e9) / 8)))
                eg.append((s, d, round(float(rng.uniform(0.02, 0.12)), 3)))
    return tuple(bw), tuple(eg)


def _datasets(
    rng: np.random.Generator, regions: tuple[str, ...], n: int, scale: float
) -> tuple[Dataset, ...]:
    classes = ((1 * GB, 20 * GB), (50 * GB, 500 * GB), (1000 * GB, 4000 * GB))
    out = []
    for i in range(n):
        lo, hi = (scale * b for b in classes[int(rng.choice(3, p=(0.5, 0.3, 0.2)))])
        weights = np.array([2.0 if j == 0 else 1.0 for j in range(len(regions))])
        home = regions[int(rng.choice(len(regions), p=weights / weights.sum()))]
        out.append(Dataset(f"ds{i:02d}", int(_loguniform(rng, lo, hi)), home))
    return tuple(out)


_SHAPES = (  # (workers, gpus per worker, comm, weight)
    (1, 1, Comm.NONE, 0.25),
    (1, 2, Comm.NONE, 0.1),
    (1, 4, Comm.ASYNC, 0.15),
    (1, 8, Comm.SYNC, 0.2),
    (2, 8, Comm.SYNC, 0.15),
    (4, 1, Comm.ASYNC, 0.1),
    (4, 8, Comm.SYNC, 0.05),
)


def _job(
    rng: np.random.Generator,
    i: int,
    submit: float,
    pools: tuple[Pool, ...],
    datasets: int,
    async_share: float = 0.0,
) -> Job | None:
    workers, per, comm, _ = _SHAPES[int(rng.choice(len(_SHAPES), p=[s[3] for s in _SHAPES]))]
    # No extra draw at a share of 0 or 1, so those scenarios keep the default stream.
    multi_sync = comm is Comm.SYNC and workers > 1 and async_share > 0
    if multi_sync and (async_share >= 1 or rng.random() < async_share):
        comm = Comm.ASYNC
    model = None
    if rng.random() < 0.6:
        model = str(rng.choice(sorted({p.gpu_model for p in pools})))
    fitting = [
        p for p in pools if (model is None or p.gpu_model == model) and p.gpus >= workers * per
    ]
    if not fitting:
        return None  # no pool could ever run it; drawn again by the caller
    ranks = np.arange(1, datasets + 1, dtype=float)
    zipf = (1 / ranks) / (1 / ranks).sum()
    dataset = f"ds{int(rng.choice(datasets, p=zipf)):02d}" if rng.random() < 0.8 else None
    duration = round(_loguniform(rng, 600, 8 * 3600))
    declared = round(duration * float(rng.uniform(1.0, 3.0)))
    return Job(
        f"j{i:04d}", round(submit, 3), workers, per, duration, model, dataset, comm, declared
    )


def generate(
    seed: int,
    *,
    regions: int = 4,
    jobs: int = 300,
    datasets: int = 16,
    load: float = 0.8,
    data_scale: float = 1.0,
    link_gbps: tuple[float, float] = (0.5, 10.0),
    async_share: float = 0.0,
    spot: bool = False,
    reclaims: tuple[float, float] = (0.02, 0.5),
) -> Scenario:
    """A random scenario; the same arguments always give an equal ``Scenario``.

    ``data_scale`` multiplies every dataset size class; ``link_gbps`` is the range links
    are drawn from (Gbit/s, log-uniform); ``async_share`` is the share of multi-worker
    jobs drawn as ``sync`` that are ``async`` instead (data-parallel without lockstep).
    """
    if not 2 <= regions <= len(REGIONS):
        raise ValueError(
            f"regions must be between 2 and {len(REGIONS)} (the generator names that many), "
            f"got {regions}"
        )
    rng = np.random.default_rng(seed)
    names = REGIONS[:regions]
    pools = _pools(rng, names)
    bw, eg = _links(rng, names, link_gbps)
    ds = _datasets(rng, names, datasets, data_scale)
    capacity = sum(p.gpus for p in pools)
    # Mean GPU-seconds per job of the shape mix and the log-uniform durations.
    mean_gpus = sum(w * g * p for w, g, _, p in _SHAPES)
    mean_duration = (8 * 3600 - 600) / math.log(8 * 3600 / 600)
    rate = load * capacity / (mean_gpus * mean_duration)
    out: list[Job] = []
    t = 0.0
    while len(out) < jobs:
        t += float(rng.exponential(1 / rate))
        job = _job(rng, len(out), t, pools, datasets, async_share)
        if job is not None:
            out.append(job)
    if spot:
        pools += _spot_twins(np.random.default_rng((seed, 1)), pools, reclaims)
    return Scenario(names, pools, ds, bw, eg, tuple(out), seed)


def _spot_twins(
    rng: np.random.Generator, pools: tuple[Pool, ...], reclaims: tuple[float, float]
) -> tuple[Pool, ...]:
    """A spot pool beside each pool: as many nodes, discounted, reclaimed at its own rate."""
    return tuple(
        dataclasses.replace(
            p,
            spot=True,
            price=round(p.price * float(rng.uniform(*SPOT_DISCOUNT)), 2),
            reclaims_per_hour=round(_loguniform(rng, *reclaims), 3),
        )
        for p in pools
    )
