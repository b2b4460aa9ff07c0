"""Run and attempt states, and the transitions between them.

Run state machine (``RunState``)::

    QUEUED ──admit──▶ ADMITTED ──place──▶ PLACED ──agent starts──▶ RUNNING
       ▲                                    │                         │
       └──────── retry (new attempt) ◀──────┴──── attempt failed ◀────┤
                                                                      ├─▶ SUCCEEDED
    any non-terminal ──cancel──▶ CANCELLING ──attempt stopped──▶ CANCELLED
                                                                      └─▶ FAILED

SUCCEEDED, FAILED and CANCELLED are terminal. A run holds quota from ADMITTED until its
attempt is released (``runs.quota_held``), independent of its state.

Attempt state machine (``AttemptState``)::

    ASSIGNED ──agent submitted──▶ STARTING ──job running──▶ RUNNING ──▶ SUCCEEDED | FAILED
    ASSIGNED/STARTING/RUNNING ──stop or revoke──▶ STOPPED

``FailureKind`` classifies a failed attempt; ``resilience.retry_on`` names the kinds
that may consume a retry.
"""

from __future__ import annotations

import enum

__all__ = [
    "ACTIVE_ATTEMPT_STATES",
    "HUB_STOPPED",
    "TERMINAL_RUN_STATES",
    "AttemptState",
    "FailureKind",
    "RunState",
    "is_retryable",
]


class RunState(enum.StrEnum):
    """Where a run is in its life; see the module docstring for transitions."""

    QUEUED = "queued"
    ADMITTED = "admitted"
    PLACED = "placed"
    RUNNING = "running"
    CANCELLING = "cancelling"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_RUN_STATES = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED})


class AttemptState(enum.StrEnum):
    """Where one execution of a run is; see the module docstring."""

    ASSIGNED = "assigned"
    STARTING = "starting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"


ACTIVE_ATTEMPT_STATES = frozenset(
    {AttemptState.ASSIGNED, AttemptState.STARTING, AttemptState.RUNNING}
)


class FailureKind(enum.StrEnum):
    """Why an attempt failed; matches ``spec.models.RetryOn`` values where retryable."""

    NODE_FAILURE = "node_failure"
    PREEMPTION = "preemption"
    LOST_CONTACT = "lost_contact"
    EXIT_NONZERO = "exit_nonzero"
    SUBMIT_ERROR = "submit_error"
    RUNTIME_ENV = "runtime_env"  # its runtime (pip requirements) could not be prepared
    TIMEOUT = "timeout"
    DATA_STAGING = "data_staging"
    STALL = "stall"  # no progress for resilience.stall.restart_after intervals
    RELOCATION = "relocation"  # the hub moved the run to a cluster that meets its target
    RECLAIM = "reclaim"  # the provider takes a spot node back (a reclaim notice)


HUB_STOPPED = (FailureKind.PREEMPTION, FailureKind.RELOCATION, FailureKind.RECLAIM)
"""Kinds the hub sets on a running attempt to stop it; its run is requeued at once from
its latest checkpoint without using up a retry (``hub.runs.attempts``)."""
NOTICE_FILE = "NOTICE"
"""What the agent writes into the job's ``$TAU_OUTPUT_DIR`` when it will stop the attempt
after a grace: JSON ``{"token", "reason", "stop_at"}`` (``stop_at``: wall time), read by
``tau.preemption_notice()``, which ignores a notice of another attempt's token."""
RECLAIM_MARK = "reclaim"
"""The node mark a reclaim notice opens (``tau admin node mark --kind reclaim``, or an
agent's checker): attempts on the node are warned, then stopped (``hub.runs.attempts.reclaim``)."""


def is_retryable(kind: FailureKind, retry_on: list[str], retries_left: int) -> bool:
    """True when a failure of ``kind`` may consume one of ``retries_left`` retries."""
    return retries_left > 0 and kind.value in retry_on
