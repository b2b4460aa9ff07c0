"""From one node's sample to its conditions (``conditions.Condition``), with limits.

Which readings fail a node (and the mark kind they ask for):

- any Xid error → ``xid``; any volatile uncorrected ECC error or retired pages pending
  → ``ecc``; a GPU at or above its slowdown temperature (``Limits.max_temperature_c``
  where NVML gives none) → ``thermal``;
- a data or scratch root with less than ``Limits.min_disk_free_fraction`` free → ``disk``;
- less than ``Limits.min_memory_available_fraction`` of memory available → ``memory``;
- the Ray node not alive → ``lost``.

Clock throttling is a ``warning``; readings that were not taken give no condition.
"""

from __future__ import annotations

import dataclasses

from taugrid.health import conditions as cd
from taugrid.health import signals

__all__ = ["Limits", "evaluate"]

Cond = cd.Condition
S = cd.Status


@dataclasses.dataclass(frozen=True)
class Limits:
    min_disk_free_fraction: float = 0.03
    min_memory_available_fraction: float = 0.03
    max_temperature_c: float = 90.0


def evaluate(sample: signals.NodeSample, limits: Limits) -> list[cd.Condition]:
    """Every condition of the node (see the module docstring)."""
    out = [_ray(sample)]
    if sample.gpus:
        out += [_xid(sample), _ecc(sample), _temperature(sample, limits), _throttle(sample)]
        out.append(_gpu_memory(sample))
    if sample.disk_free_fraction:
        out.append(_disk(sample, limits))
    if sample.memory_available_fraction is not None:
        out.append(_memory(sample, limits))
    return out


def _ray(s: signals.NodeSample) -> cd.Condition:
    if s.ray_alive:
        return Cond("RayNode", S.OK)
    return Cond("RayNode", S.FAILING, "the Ray node is dead", kind="lost")


def _xid(s: signals.NodeSample) -> cd.Condition:
    bad = [f"GPU {g.index}: Xid {x}" for g in s.gpus for x in g.xid]
    if bad:
        return Cond("GpuXid", S.FAILING, "; ".join(bad), kind="xid")
    return Cond("GpuXid", S.OK)


def _ecc(s: signals.NodeSample) -> cd.Condition:
    bad = [
        f"GPU {g.index}: {g.ecc_uncorrected} uncorrected ECC error(s)"
        + (", retired pages pending" if g.retired_pages_pending else "")
        for g in s.gpus
        if g.ecc_uncorrected > 0 or g.retired_pages_pending
    ]
    if bad:
        return Cond("GpuEcc", S.FAILING, "; ".join(bad), kind="ecc")
    return Cond("GpuEcc", S.OK)


def _temperature(s: signals.NodeSample, limits: Limits) -> cd.Condition:
    hot = [
        f"GPU {g.index}: {g.temperature_c:g} °C ≥ {limit:g} °C"
        for g in s.gpus
        if g.temperature_c is not None
        and g.temperature_c >= (limit := g.slowdown_c or limits.max_temperature_c)
    ]
    if hot:
        return Cond("GpuTemperature", S.FAILING, "; ".join(hot), kind="thermal")
    return Cond("GpuTemperature", S.OK)


def _throttle(s: signals.NodeSample) -> cd.Condition:
    slow = [f"GPU {g.index}: {', '.join(g.throttle)}" for g in s.gpus if g.throttle]
    if slow:
        return Cond("GpuThrottle", S.WARNING, "clocks throttled: " + "; ".join(slow))
    return Cond("GpuThrottle", S.OK)


def _gpu_memory(s: signals.NodeSample) -> cd.Condition:
    used = [g.memory_used_fraction for g in s.gpus if g.memory_used_fraction is not None]
    return Cond("GpuMemory", S.OK, f"{max(used):.0%} in use (busiest GPU)" if used else "")


def _disk(s: signals.NodeSample, limits: Limits) -> cd.Condition:
    low = [
        f"{name} root {free:.1%} free (< {limits.min_disk_free_fraction:.0%})"
        for name, free in sorted(s.disk_free_fraction.items())
        if free < limits.min_disk_free_fraction
    ]
    if low:
        return Cond("DiskSpace", S.FAILING, "; ".join(low), kind="disk")
    return Cond("DiskSpace", S.OK)


def _memory(s: signals.NodeSample, limits: Limits) -> cd.Condition:
    free = s.memory_available_fraction or 0.0
    if free < limits.min_memory_available_fraction:
        why = f"{free:.1%} of memory available (< {limits.min_memory_available_fraction:.0%})"
        return Cond("MemoryPressure", S.FAILING, why, kind="memory")
    return Cond("MemoryPressure", S.OK)
