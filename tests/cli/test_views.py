"""``views.phase_tree``'s caption: a run whose job reports progress is running, not
stuck; a run held at any other phase names what it waits on and where to look."""

from __future__ import annotations

import time
from typing import Any

from taugrid.cli import views
from taugrid.lifecycle import phases as ph


def _run(active: ph.Phase, ts: float) -> dict[str, Any]:
    order = list(ph.Phase)
    rows = []
    for p in order:
        status = "done" if order.index(p) < order.index(active) else "pending"
        status = "active" if p is active else status
        source = "metrics" if p is active else "hub"
        look_at = ph.look_at(p, source)
        rows.append(
            {"phase": p.value, "status": status, "source": source, "reason": "", "ts": ts}
            | {"look_at": look_at}
        )
    return {"id": "r-1", "state": "running", "cluster_id": "local", "phases": rows}


def _caption(run: dict[str, Any]) -> str:
    return str(views.phase_tree(run).caption)


def test_a_job_reporting_progress_is_running_not_stuck() -> None:
    caption = _caption(_run(ph.Phase.PROGRESSING, time.time() - 3))
    assert caption.startswith("running: last progress ") and "s ago" in caption, caption
    assert "tau run logs" in caption and "waiting on" not in caption


def test_a_run_held_before_its_job_runs_names_what_it_waits_on() -> None:
    caption = _caption(_run(ph.Phase.SCHEDULED, time.time()))
    assert caption == f"waiting on Scheduled: look at {ph.COMPONENT_HINT[ph.Phase.SCHEDULED]}"
