"""Raw health samples of one node, and the readers that take them.

Readers (one ``GpuReader`` protocol, two implementations):

- ``NvmlReader``: the node's GPUs through NVML (``nvidia-ml-py``'s ``pynvml``, imported
  lazily): pending Xid events (critical Xid event set, drained without waiting),
  volatile uncorrected ECC errors, temperature against the slowdown threshold, memory
  in use, retired pages pending, clock throttle reasons. It reads the GPUs of the host
  the agent runs on. **Untested on real hardware here** (no GPUs in CI): it is unit
  tested against pynvml's API shape only.
- ``injected`` (the documented fault-injection source, for emulated GPUs): a JSON file
  ``<state_dir>/health/nodes/<node-id or ip>.json`` per node, any subset of::

      {"xid": [79], "ecc_uncorrected": 2, "temperature_c": 97, "slowdown_c": 90,
       "gpu_memory_used_fraction": 0.5, "retired_pages_pending": true,
       "throttle": ["hw_thermal"], "disk_free_fraction": 0.01,
       "memory_available_fraction": 0.02, "crash": "text", "reclaim": "text"}

  Fields present override what was measured; ``crash`` makes the reader raise (a
  crashing checker); ``reclaim`` is a spot reclaim notice (what a cloud's metadata
  service announces), which the agent's checker turns into a ``reclaim`` mark at once.
  Absent file: nothing injected. A file that is not valid JSON is itself a crash
  (reported as ``unknown``, never ``ok``).

Host reads (``host_sample``): free space of the data and scratch roots
(``shutil.disk_usage``) and available memory (``/proc/meminfo``).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

__all__ = [
    "CheckerCrashed",
    "GpuReader",
    "GpuSample",
    "NodeSample",
    "NvmlReader",
    "host_sample",
    "injected",
]


class CheckerCrashed(Exception):
    """A reader could not take its sample: the node's health is unknown."""


@dataclasses.dataclass(frozen=True)
class GpuSample:
    index: int
    xid: tuple[int, ...] = ()
    ecc_uncorrected: int = 0
    temperature_c: float | None = None
    slowdown_c: float | None = None
    memory_used_fraction: float | None = None
    retired_pages_pending: bool = False
    throttle: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class NodeSample:
    """Everything the checks look at for one node; ``None``: not measured."""

    gpus: tuple[GpuSample, ...] = ()
    disk_free_fraction: dict[str, float] = dataclasses.field(default_factory=dict)
    memory_available_fraction: float | None = None
    ray_alive: bool = True
    source: str = "host"


class GpuReader(Protocol):
    def read(self) -> list[GpuSample]: ...


_THROTTLE = {
    "nvmlClocksThrottleReasonHwSlowdown": "hw_slowdown",
    "nvmlClocksThrottleReasonHwThermalSlowdown": "hw_thermal",
    "nvmlClocksThrottleReasonSwThermalSlowdown": "sw_thermal",
    "nvmlClocksThrottleReasonHwPowerBrakeSlowdown": "power_brake",
}


class NvmlReader:
    """The host's GPUs through NVML; every NVML error becomes ``CheckerCrashed``."""

    def __init__(self, module: ModuleType | None = None) -> None:
        self._nvml = module
        self._events: Any = None

    def _lib(self) -> ModuleType:
        if self._nvml is None:
            try:  # lazy: only where GPUs are
                self._nvml = importlib.import_module("pynvml")
            except ImportError as exc:
                raise CheckerCrashed("nvidia-ml-py (pynvml) is not installed") from exc
        return self._nvml

    def read(self) -> list[GpuSample]:
        nv = self._lib()
        try:
            if self._events is None:
                nv.nvmlInit()
                self._events = nv.nvmlEventSetCreate()
                for i in range(nv.nvmlDeviceGetCount()):
                    h = nv.nvmlDeviceGetHandleByIndex(i)
                    nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, self._events)
            xids = self._drain_xids(nv)
            return [self._device(nv, i, xids.get(i, ())) for i in range(nv.nvmlDeviceGetCount())]
        except nv.NVMLError as exc:
            raise CheckerCrashed(f"NVML: {exc}") from exc

    def _drain_xids(self, nv: ModuleType) -> dict[int, tuple[int, ...]]:
        """Critical Xid events that arrived since the last read (never blocks)."""
        out: dict[int, list[int]] = {}
        while True:
            try:
                ev = nv.nvmlEventSetWait(self._events, 0)
            except nv.NVMLError_Timeout:
                return {k: tuple(v) for k, v in out.items()}
            index = nv.nvmlDeviceGetIndex(ev.device) if hasattr(nv, "nvmlDeviceGetIndex") else 0
            out.setdefault(int(index), []).append(int(ev.eventData))

    def _device(self, nv: ModuleType, i: int, xid: tuple[int, ...]) -> GpuSample:
        h = nv.nvmlDeviceGetHandleByIndex(i)
        mem = nv.nvmlDeviceGetMemoryInfo(h)
        reasons = int(nv.nvmlDeviceGetCurrentClocksThrottleReasons(h))
        return GpuSample(
            index=i,
            xid=xid,
            ecc_uncorrected=_optional(
                nv,
                lambda: nv.nvmlDeviceGetTotalEccErrors(
                    h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC
                ),
                0,
            ),
            temperature_c=float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            slowdown_c=_optional(
                nv,
                lambda: float(
                    nv.nvmlDeviceGetTemperatureThreshold(h, nv.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
                ),
                None,
            ),
            memory_used_fraction=float(mem.used) / float(mem.total) if mem.total else None,
            retired_pages_pending=bool(
                _optional(nv, lambda: nv.nvmlDeviceGetRetiredPagesPendingStatus(h), 0)
            ),
            throttle=tuple(name for attr, name in _THROTTLE.items() if reasons & getattr(nv, attr)),
        )


def _optional(nv: ModuleType, read: Any, default: Any) -> Any:
    """A reading some devices do not support (ECC off, no threshold): ``default`` then."""
    try:
        return read()
    except nv.NVMLError_NotSupported:
        return default


def host_sample(roots: dict[str, Path]) -> NodeSample:
    """Free space of each named root and the host's available memory."""
    disks = {}
    for name, root in roots.items():
        usage = shutil.disk_usage(_existing(root))
        disks[name] = usage.free / usage.total if usage.total else 1.0
    return NodeSample(disk_free_fraction=disks, memory_available_fraction=_memory_available())


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _memory_available() -> float | None:
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        total = float(fields["MemTotal"].split()[0])
        return float(fields["MemAvailable"].split()[0]) / total
    except (OSError, KeyError, ValueError):
        return None


def injected(directory: Path, keys: list[str]) -> dict[str, Any] | None:
    """The fault-injection document of a node (first of ``keys`` with a file), if any."""
    for key in keys:
        path = directory / f"{key}.json"
        if not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CheckerCrashed(f"fault-injection file {path} is unreadable: {exc}") from exc
        if not isinstance(doc, dict):
            raise CheckerCrashed(f"fault-injection file {path} is not a JSON object")
        if doc.get("crash"):
            raise CheckerCrashed(str(doc["crash"]))
        return doc
    return None


def apply_injection(sample: NodeSample, doc: dict[str, Any], gpu_count: int) -> NodeSample:
    """``sample`` with the injected fields: GPU faults land on GPU 0 of ``gpu_count``."""
    gpus = list(sample.gpus) or [GpuSample(index=i) for i in range(gpu_count)]
    if gpus:
        g = gpus[0]
        gpus[0] = dataclasses.replace(
            g,
            xid=tuple(int(x) for x in doc.get("xid", g.xid)),
            ecc_uncorrected=int(doc.get("ecc_uncorrected", g.ecc_uncorrected)),
            temperature_c=doc.get("temperature_c", g.temperature_c),
            slowdown_c=doc.get("slowdown_c", g.slowdown_c),
            memory_used_fraction=doc.get("gpu_memory_used_fraction", g.memory_used_fraction),
            retired_pages_pending=bool(doc.get("retired_pages_pending", g.retired_pages_pending)),
            throttle=tuple(doc.get("throttle", g.throttle)),
        )
    disks = dict(sample.disk_free_fraction)
    free = doc.get("disk_free_fraction")
    if free is not None:
        disks = {name: float(free) for name in disks or {"data": 1.0}}
    mem = doc.get("memory_available_fraction", sample.memory_available_fraction)
    return dataclasses.replace(
        sample,
        gpus=tuple(gpus),
        disk_free_fraction=disks,
        memory_available_fraction=mem,
        source="injected",
    )
