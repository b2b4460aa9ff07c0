"""Node conditions: one check's verdict on one node, as the state report carries it.

Vocabulary (node-problem-detector's shape): a condition has a ``type`` (``GpuXid``,
``GpuEcc``, ``GpuTemperature``, ``GpuMemory``, ``GpuThrottle``, ``DiskSpace``,
``MemoryPressure``, ``RayNode``, ``HealthChecker``), a ``status`` and a reason.

``Status``: ``ok`` (checked, fine) · ``warning`` (worth showing, never marks the node:
throttling) · ``failing`` (the node should take no work: counts towards a mark of
``kind``) · ``unknown`` (the check could not run — a crashing checker is *unknown*,
never ``ok``).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

__all__ = ["Condition", "Status", "worst"]


class Status(enum.StrEnum):
    OK = "ok"
    WARNING = "warning"
    FAILING = "failing"
    UNKNOWN = "unknown"


_RANK = {Status.OK: 0, Status.WARNING: 1, Status.UNKNOWN: 2, Status.FAILING: 3}


@dataclasses.dataclass(frozen=True)
class Condition:
    type: str
    status: Status
    reason: str = ""
    kind: str | None = None
    """The mark kind a failing condition asks for (``xid``, ``ecc``, ``disk``...)."""

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "status": self.status.value, "reason": self.reason}


def worst(conditions: list[Condition]) -> Status:
    """The node's overall status: failing > unknown > warning > ok (no checks: unknown)."""
    if not conditions:
        return Status.UNKNOWN
    return max((c.status for c in conditions), key=_RANK.__getitem__)
