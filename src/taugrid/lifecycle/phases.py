"""The nine phases of a run and how signals move them.

Documented in docs/ARCHITECTURE.md, "The nine phases".

Each phase has a ``PhaseStatus`` — ``pending | active | done | warning | failed |
skipped`` — plus the signal's source component, a reason and a timestamp. The hub
records a phase change whenever a real signal arrives (store write, admission,
placement, agent report, metrics, Ray job state, file checks, release lines); this
module only defines the vocabulary and the pure transition rule.

Invariant: a phase never goes back from ``done`` to ``pending``/``active`` within one
attempt; a new attempt resets the per-attempt phases (Scheduled … Released) to pending.
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = [
    "ATTEMPT_PHASES",
    "COMPONENT_HINT",
    "SOURCE_HINT",
    "Phase",
    "PhaseRecord",
    "PhaseStatus",
    "initial_phases",
    "look_at",
    "merge",
]


class Phase(enum.StrEnum):
    """The phases, in order."""

    SUBMITTED = "submitted"
    ADMITTED = "admitted"
    PLACED = "placed"
    SCHEDULED = "scheduled"
    GPU_HEALTHY = "gpu_healthy"
    PROGRESSING = "progressing"
    COMPLETED = "completed"
    ARTIFACTS_SAVED = "artifacts_saved"
    RELEASED = "released"


class PhaseStatus(enum.StrEnum):
    """The status of one phase."""

    PENDING = "pending"
    ACTIVE = "active"
    DONE = "done"
    WARNING = "warning"
    FAILED = "failed"
    SKIPPED = "skipped"


ATTEMPT_PHASES = (
    Phase.PLACED,
    Phase.SCHEDULED,
    Phase.GPU_HEALTHY,
    Phase.PROGRESSING,
    Phase.COMPLETED,
    Phase.ARTIFACTS_SAVED,
    Phase.RELEASED,
)

#: Which component to look at when a phase is stuck (shown by ``tau run status``).
COMPONENT_HINT: dict[Phase, str] = {
    Phase.SUBMITTED: "hub store",
    Phase.ADMITTED: "queue / quota (tau queue list)",
    Phase.PLACED: "hub scheduler (no region fits; tau cluster list)",
    Phase.SCHEDULED: "agent / Ray (workers not bound to nodes)",
    Phase.GPU_HEALTHY: "node health (tau cluster list; tau admin node ...)",
    Phase.PROGRESSING: "the job itself (tau run logs)",
    Phase.COMPLETED: "Ray job state (tau run logs)",
    Phase.ARTIFACTS_SAVED: "declared outputs (tau run get)",
    Phase.RELEASED: "agent (GPUs not freed) or hub (quota not released)",
}

SOURCE_HINT: dict[str, str] = {
    "data plane": "data plane: the dataset is being copied into the region (tau data show NAME)",
}
"""Where to look when a phase is held by a component other than its usual one."""


def look_at(phase: Phase, source: str) -> str:
    """The component to look at for ``phase`` reported by ``source``."""
    return SOURCE_HINT.get(source, COMPONENT_HINT[phase])


@dataclasses.dataclass(frozen=True)
class PhaseRecord:
    """One phase's current status with the signal that set it."""

    phase: Phase
    status: PhaseStatus
    source: str
    reason: str
    ts: float


def initial_phases(now: float) -> dict[Phase, PhaseRecord]:
    """Every phase pending, as of submission time."""
    return {p: PhaseRecord(p, PhaseStatus.PENDING, "hub", "", now) for p in Phase}


_RANK = {
    PhaseStatus.PENDING: 0,
    PhaseStatus.ACTIVE: 1,
    PhaseStatus.WARNING: 2,
    PhaseStatus.DONE: 3,
    PhaseStatus.SKIPPED: 3,
    PhaseStatus.FAILED: 3,
}


def merge(current: PhaseRecord | None, new: PhaseRecord, *, reset: bool = False) -> PhaseRecord:
    """The record to keep when ``new`` arrives: later statuses win unless ``reset``.

    A finished phase (done/failed/skipped) is only replaced by another finished status
    or by an explicit reset (a new attempt); a repeated identical status keeps the
    original timestamp so that phase times mean "since when".
    """
    if current is None or reset:
        return new
    if current.status == new.status and current.reason == new.reason:
        return current
    if _RANK[new.status] < _RANK[current.status]:
        return current
    return new
