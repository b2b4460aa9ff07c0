"""``NvmlReader`` against pynvml's API shape (no GPU here: NVML itself is not loaded).

The fake is a copy of the real ``pynvml`` module (its constants, error classes and
structures) with only the device calls replaced, and each replaced name must exist in
the real module with the same parameters: a reader that calls NVML wrongly fails here.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

import pynvml  # type: ignore[import-untyped]
import pytest

from taugrid.health import checks, signals
from taugrid.health import conditions as cd


class _FakeNvml:
    """Two GPUs; GPU 1 has an Xid event pending, 3 uncorrected ECC errors and runs hot."""

    def __init__(self) -> None:
        self.events: list[tuple[int, int]] = [(1, 79)]
        self.inited = 0

    def module(self) -> types.ModuleType:
        mod = types.ModuleType("pynvml")
        mod.__dict__.update({k: v for k, v in vars(pynvml).items() if not k.startswith("nvml")})
        for name in (
            n for n in dir(pynvml) if n.startswith("nvml") and not callable(getattr(pynvml, n))
        ):
            setattr(mod, name, getattr(pynvml, name))  # constants such as nvmlEventType*
        for name, fn in self.calls().items():
            real = getattr(pynvml, name)  # the API has this call ...
            assert len(inspect.signature(fn).parameters) == len(  # ... with these parameters
                inspect.signature(real).parameters
            ), name
            setattr(mod, name, fn)
        return mod

    def calls(self) -> dict[str, Any]:
        mem = pynvml.c_nvmlMemory_t()
        mem.total, mem.used, mem.free = 80 << 30, 60 << 30, 20 << 30
        hot = pynvml.nvmlClocksThrottleReasonHwThermalSlowdown

        def wait(event_set: Any, timeoutms: int) -> Any:
            if not self.events:
                raise pynvml.NVMLError_Timeout()
            ev = pynvml.c_nvmlEventData_t()
            index, ev.eventData = self.events.pop(0)
            ev.device = None
            self.last_index = index
            return ev

        def ecc(handle: int, error_type: int, counter_type: int) -> int:
            assert error_type == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
            assert counter_type == pynvml.NVML_VOLATILE_ECC
            return 3 if handle == 1 else 0

        def threshold(handle: int, kind: int) -> int:
            raise pynvml.NVMLError_NotSupported()

        return {
            "nvmlInit": lambda: setattr(self, "inited", self.inited + 1),
            "nvmlDeviceGetCount": lambda: 2,
            "nvmlDeviceGetHandleByIndex": lambda index: index,
            "nvmlEventSetCreate": lambda: "events",
            "nvmlDeviceRegisterEvents": lambda handle, types_, event_set: None,
            "nvmlEventSetWait": wait,
            "nvmlDeviceGetIndex": lambda handle: self.last_index,
            "nvmlDeviceGetMemoryInfo": lambda handle, version=None: mem,
            "nvmlDeviceGetCurrentClocksThrottleReasons": lambda handle: hot if handle else 0,
            "nvmlDeviceGetTotalEccErrors": ecc,
            "nvmlDeviceGetTemperature": lambda handle, sensor: 95 if handle else 40,
            "nvmlDeviceGetTemperatureThreshold": threshold,
            "nvmlDeviceGetRetiredPagesPendingStatus": lambda handle: 0,
        }


def test_nvml_readings_become_failing_conditions() -> None:
    fake = _FakeNvml()
    reader = signals.NvmlReader(fake.module())
    gpus = reader.read()
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[1].xid == (79,) and gpus[0].xid == ()
    assert gpus[1].ecc_uncorrected == 3 and gpus[1].throttle == ("hw_thermal",)
    assert gpus[0].memory_used_fraction == 0.75
    conds = {
        c.type: c for c in checks.evaluate(signals.NodeSample(gpus=tuple(gpus)), checks.Limits())
    }
    assert conds["GpuXid"].status is cd.Status.FAILING and "Xid 79" in conds["GpuXid"].reason
    assert conds["GpuEcc"].kind == "ecc"
    assert conds["GpuTemperature"].status is cd.Status.FAILING  # 95 °C ≥ 90 (no NVML threshold)
    assert conds["GpuThrottle"].status is cd.Status.WARNING
    assert reader.read()[1].xid == () and fake.inited == 1  # events drained; init once


def test_nvml_failure_is_a_crash_not_healthy() -> None:
    fake = _FakeNvml()
    mod = fake.module()

    def broken(index: int) -> Any:
        raise pynvml.NVMLError_GpuIsLost()

    mod.nvmlDeviceGetHandleByIndex = broken  # type: ignore[attr-defined]
    with pytest.raises(signals.CheckerCrashed, match="NVML"):
        signals.NvmlReader(mod).read()


def test_real_pynvml_without_a_driver_is_a_crash() -> None:
    """This machine has no NVIDIA driver: the real library fails to load → unknown."""
    with pytest.raises(signals.CheckerCrashed, match="NVML"):
        signals.NvmlReader().read()
