"""What the hub does to a run's record the moment it declares an attempt ended.

Called by ``attempts.end`` for the run's current attempt, whatever ended it
(exit, node failure, lost contact, cancel, preemption, success):

1. ``revoke``, before the end is even recorded: ``FENCE`` becomes ``0`` (no attempt
   is authoritative) at once, not when the next attempt is placed, so a process that
   outlived its attempt (a driver on a node whose raylet died) can no longer commit
   checkpoints, save artifacts or log metrics: the in-job SDK refuses every write
   whose token differs from ``FENCE``.
2. ``adopt``: checkpoints the attempt wrote but never committed (framework layouts,
   ``step-N/`` folders in ``tau.checkpoint_dir()``) become committed ``step-*``
   folders (``record.checkpoints``), so the retry resumes from them.
3. ``report`` (after the run's next state is decided): every adopted checkpoint is an
   event; every checkpoint that cannot be used is an event and the reason of the
   Progressing phase, shown by ``tau run status`` and ``tau run history``.
"""

from __future__ import annotations

import time
from typing import Any

from taugrid.hub.core import context
from taugrid.hub.runs import runs
from taugrid.lifecycle import phases as ph
from taugrid.record import checkpoints, layout

__all__ = ["adopt", "report", "revoke"]


def revoke(hub: context.Hub, a: dict[str, Any]) -> float:
    """Set ``FENCE`` to ``layout.NO_ATTEMPT`` if ``a`` is its run's current attempt;
    returns when."""
    run = hub.runs.get_run(a["run_id"])
    if run is not None and run["current_token"] == a["token"]:
        runs.record_of(hub, run).set_fence(layout.NO_ATTEMPT)
    return time.time()


def adopt(
    hub: context.Hub, run: dict[str, Any], a: dict[str, Any], revoked_at: float
) -> checkpoints.Adoption:
    """Commit the checkpoints ``a`` wrote (up to ``revoked_at``) but never committed."""
    local = runs.record_of(hub, run).dir
    if local is None:  # an object store: only committed checkpoints are uploaded
        return checkpoints.Adoption()
    root = checkpoints.checkpoint_root(local, run["spec"].get("checkpoint_path"))
    try:
        return checkpoints.adopt(
            root,
            attempt=int(a["number"]),
            run_id=run["id"],
            token=int(a["token"]),
            since=float(a["created_at"]),
            until=revoked_at,
        )
    except OSError as exc:  # the checkpoint storage misbehaves: report, never crash a sync
        return checkpoints.Adoption(unusable=[(str(root), f"could not be read: {exc}")])


def report(
    hub: context.Hub, run_id: str, a: dict[str, Any], adoption: checkpoints.Adoption
) -> None:
    """Events for adopted and unusable checkpoints; unusable ones also in the phase."""
    for source, target in adoption.adopted:
        hub.runs.add_event(
            run_id,
            "checkpoint_adopted",
            {"attempt": a["number"], "from": source, "committed_as": target},
        )
    for source, why in adoption.unusable:
        hub.runs.add_event(
            run_id, "checkpoint_unusable", {"attempt": a["number"], "path": source, "why": why}
        )
    if adoption.unusable:
        listed = "; ".join(f"{src} {why}" for src, why in adoption.unusable[:3])
        hub.runs.set_phase(
            run_id,
            ph.PhaseRecord(
                ph.Phase.PROGRESSING,
                ph.PhaseStatus.WARNING,
                "checkpoints",
                f"attempt {a['number']}: checkpoint not usable: {listed}",
                time.time(),
            ),
            reset=True,
        )
