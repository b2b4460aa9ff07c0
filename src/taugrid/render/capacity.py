"""Can a resolved workload ever run on this platform? (the capacity half of fail-closed).

Owns the checks that compare one worker and the whole workload with the node pools a
platform declares, within the run's allowed regions:

1. a GPU model must be declared in ``gpu_types`` and offered by some node pool;
2. one worker's GPUs, then CPUs and memory, must fit on one node of some pool;
3. the workload's total GPUs must not exceed what those pools have in total;

all counted on the pools of the run's ``resilience.capacity`` (spot pools within its
``max_price``; every pool for ``any``).

A worker asking a share of one GPU (``compute.gpus`` below 1) counts only the pools of
Ray clusters: Kubernetes hands out whole GPUs (the hub's ``GpuShareFilter`` agrees).

A platform that declares no node pools at all has unknown capacity; only check 1's
"declared" half applies then. Results are ``(field, message, hint)`` so that
``render.resolve`` can point the error at the value's source.
"""

from __future__ import annotations

from taugrid.platform import models as pm
from taugrid.render import runspec
from taugrid.spec import models as sm
from taugrid.spec import units

__all__ = ["Problem", "check", "pools_in"]

Problem = tuple[str, str, str]


def pools_in(
    platform: pm.Platform, regions: tuple[str, ...] = (), *, shares: bool = False
) -> list[pm.NodePool]:
    """Node pools of every cluster in ``regions`` (all regions when empty).

    ``shares``: only clusters that can share a GPU between workers (not Kubernetes).
    """
    return [
        pool
        for region in platform.regions
        if not regions or region.name in regions
        for cluster in region.clusters
        if not (shares and cluster.backend == "kubernetes")
        for pool in cluster.node_pools
    ]


def _gib(n: float) -> str:
    return f"{n / 2**30:g}Gi"


def _model(
    spec: runspec.RunSpec, platform: pm.Platform, pools: list[pm.NodePool]
) -> Problem | None:
    declared = sorted(g.name for g in platform.gpu_types)
    if spec.gpu_model is not None and spec.gpu_model not in declared:
        return (
            "gpu_model",
            f"GPU model '{spec.gpu_model}' is not offered by this platform",
            f"use one of {declared}" if declared else "this platform declares no GPU types",
        )
    if spec.gpus_per_worker > 0 and not declared:
        return (
            "gpus_per_worker",
            f"the run asks for {units.plural(spec.gpus_per_worker, 'GPU')} per worker, "
            "but this platform has no GPUs",
            "set compute.gpus: 0 or use a platform with GPUs",
        )
    if spec.gpu_model is not None and pools:
        offered = sorted({p.gpu_model for p in pools if p.gpu_model and p.gpus_per_node > 0})
        if spec.gpu_model not in offered:
            where = f" in regions {list(spec.allowed_regions)}" if spec.allowed_regions else ""
            return (
                "gpu_model",
                f"GPU model '{spec.gpu_model}' is not offered by any node pool{where}",
                f"use one of {offered}" if offered else "allow regions that have GPU node pools",
            )
    return None


def _fit(spec: runspec.RunSpec, pools: list[pm.NodePool]) -> Problem | None:
    gpu_pools = [
        p
        for p in pools
        if spec.gpus_per_worker == 0
        or (p.gpus_per_node > 0 and spec.gpu_model in (None, p.gpu_model))
    ]
    if not gpu_pools:
        return (
            "gpus_per_worker",
            f"the run asks for {units.plural(spec.gpus_per_worker, 'GPU')} per worker, "
            "but no node pool where it may run has GPUs",
            "set compute.gpus: 0 or allow regions with GPU node pools",
        )
    fitting = [p for p in gpu_pools if p.gpus_per_node >= spec.gpus_per_worker]
    if not fitting:
        biggest = max(gpu_pools, key=lambda p: p.gpus_per_node)
        return (
            "gpus_per_worker",
            f"gpus_per_worker {spec.gpus_per_worker} exceeds every node pool (the largest, "
            f"'{biggest.name}', has {biggest.gpus_per_node} GPUs per node)",
            f"use at most {biggest.gpus_per_node} GPUs per worker and more workers instead",
        )

    def memory(p: pm.NodePool) -> int:
        return units.parse_quantity_bytes(p.memory_per_node)

    sized = [
        p
        for p in fitting
        if p.cpus_per_node >= spec.cpus_per_worker and memory(p) >= spec.memory_per_worker_bytes
    ]
    if not sized:
        best = max(fitting, key=lambda p: (p.cpus_per_node, memory(p)))
        return (
            "cpus_per_worker"
            if best.cpus_per_node < spec.cpus_per_worker
            else "memory_per_worker_bytes",
            f"a worker needs {spec.cpus_per_worker:g} CPUs and "
            f"{_gib(spec.memory_per_worker_bytes)} memory, more than one node of any pool "
            f"with room for its GPUs (the largest, '{best.name}', has "
            f"{best.cpus_per_node:g} CPUs and {best.memory_per_node})",
            "lower compute.cpus / compute.memory per worker",
        )
    return None


def _total(spec: runspec.RunSpec, pools: list[pm.NodePool]) -> Problem | None:
    if spec.gpus_per_worker == 0:
        return None
    have = sum(p.gpus_per_node * p.nodes for p in pools if spec.gpu_model in (None, p.gpu_model))
    if spec.total_gpus > have:
        return (
            "workers",
            f"the run needs {spec.total_gpus} GPUs ({spec.workers} workers x "
            f"{spec.gpus_per_worker}), but the platform has only {have}"
            + (f" {spec.gpu_model}" if spec.gpu_model else "")
            + " GPUs where it may run",
            "use fewer workers or fewer GPUs per worker",
        )
    return None


def check(spec: runspec.RunSpec, platform: pm.Platform) -> Problem | None:
    """The first reason ``spec`` can never run on ``platform``, or ``None``."""
    pools = pools_in(platform, spec.allowed_regions)
    declared_any = bool(pools_in(platform))
    problem = _model(spec, platform, pools if declared_any else [])
    if problem is not None or not declared_any:
        return problem
    if not pools:
        return (
            "allowed_regions",
            f"regions {list(spec.allowed_regions)} have no node pools",
            "allow regions whose clusters declare node pools",
        )
    if spec.shared_gpu:
        pools = pools_in(platform, spec.allowed_regions, shares=True)
        if not pools:
            return (
                "gpus_per_worker",
                f"compute.gpus is {spec.gpus_per_worker:g}, a share of one GPU, but every "
                "cluster where the run may go is a Kubernetes cluster, which hands out whole "
                "GPUs only",
                "ask for a whole GPU (compute.gpus: 1), or allow a region with a Ray cluster",
            )
    chosen = _of_capacity(spec, pools)
    if isinstance(chosen, tuple):
        return chosen
    return _fit(spec, chosen) or _total(spec, chosen)


def _of_capacity(spec: runspec.RunSpec, pools: list[pm.NodePool]) -> list[pm.NodePool] | Problem:
    """The pools of the run's ``resilience.capacity`` (spot within its ``max_price``)."""
    if spec.capacity is sm.Capacity.ANY:
        return pools
    mine = [p for p in pools if p.capacity is spec.capacity]
    if not mine:
        other = "any" if spec.capacity is sm.Capacity.SPOT else "spot or any"
        return (
            "capacity",
            f"no {spec.capacity.value} node pool where the run may go",
            f"set resilience.capacity: {other}, or allow regions with {spec.capacity.value} pools",
        )
    cheap = [p for p in mine if spec.max_price is None or p.cost_per_gpu_hour <= spec.max_price]
    if not cheap:
        least = min(p.cost_per_gpu_hour for p in mine)
        return (
            "max_price",
            f"every spot pool where the run may go costs more than max_price "
            f"${spec.max_price:g}/GPU-hour (the cheapest: ${least:g})",
            f"raise resilience.max_price to at least {least:g}, or set capacity: any",
        )
    return cheap
