"""Run limits the hub enforces on the live path: ``resilience.max_runtime``.

An attempt that has been running (since its ``started_at``) longer than its run's
``max_runtime_s`` is ended as Failed with kind ``timeout`` and revoked: the next sync
tells its agent to stop the Ray job, the run's quota is released at once, and its GPUs
when the agent reports the job gone. A timeout is not retried (``timeout`` is not a
``retry_on`` class), so the run ends Failed. Checked by the scheduler on every tick;
``now`` is passed in.
"""

from __future__ import annotations

import logging
from typing import Any

from taugrid.hub.core import context
from taugrid.hub.runs import attempts
from taugrid.lifecycle import states as st

__all__ = ["enforce_max_runtime"]

Row = dict[str, Any]

log = logging.getLogger(__name__)


def enforce_max_runtime(
    hub: context.Hub, now: float, live: list[tuple[Row, Row]] | None = None
) -> list[str]:
    """End every running attempt past its run's ``max_runtime``; returns their run IDs.
    ``live``: the unreleased attempts with their runs, when the caller read them."""
    ended = []
    running = sorted(  # one read for the fleet, in the order of clusters, then tokens
        (
            (a, run)
            for a, run in (hub.runs.unreleased_with_runs() if live is None else live)
            if a["state"] == st.AttemptState.RUNNING.value and a["started_at"] and not a["revoked"]
        ),
        key=lambda pair: (pair[0]["cluster_id"], pair[0]["token"]),
    )
    for a, run in running:
        limit = run["spec"].get("max_runtime_s")
        if not limit or now - a["started_at"] <= limit:
            continue
        message = (
            f"attempt {a['number']} ran longer than resilience.max_runtime "
            f"({_duration(limit)}); stopped"
        )
        log.info("run %s: %s", run["id"], message)
        attempts.end(
            hub, a, st.AttemptState.FAILED, message, kind=st.FailureKind.TIMEOUT, revoke=True
        )
        hub.notify(a["cluster_id"])
        ended.append(run["id"])
    return ended


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
