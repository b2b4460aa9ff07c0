"""What runs used, for pricing: attempts' GPU time and the bytes copied for their data.

Owns the two reads ``hub.tenancy.cost`` prices (no writes; the rows are the runs/attempts and
transfers tables as the hub and the data plane keep them):

- ``attempts``: every attempt that started (``started_at`` set) with its run's
  workspace, team, GPUs and GPU model, the cluster it ran on, and when it started and
  ended (``ended_at`` ``None`` while it holds its GPUs).
- ``transfers``: every cross-region copy a run's data staging requested (the hub files
  staging copies with the run's id as ``created_by``), with its source region and the
  bytes moved so far (a failed copy's bytes crossed the network too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from taugrid.store import schema as t

__all__ = ["attempts", "transfers"]

Row = dict[str, Any]


def attempts(
    engine: sa.Engine, workspaces: Sequence[str] | None = None, run_id: str | None = None
) -> list[Row]:
    """Started attempts with their run's workspace/team/GPUs (see the module docstring)."""
    a, r = t.attempts, t.runs
    q = (
        sa.select(
            a.c.run_id,
            a.c.number,
            a.c.cluster_id,
            a.c.state,
            a.c.started_at,
            a.c.ended_at,
            a.c.placement,
            r.c.workspace,
            r.c.team,
            r.c.gpus,
            r.c.gpu_model,
        )
        .join(r, r.c.id == a.c.run_id)
        .where(a.c.started_at.is_not(None))
        .order_by(a.c.run_id, a.c.number)
    )
    return _rows(engine, q, workspaces, run_id)


def transfers(
    engine: sa.Engine, workspaces: Sequence[str] | None = None, run_id: str | None = None
) -> list[Row]:
    """Staging copies requested by runs, with the run's workspace and team."""
    x, r = t.transfers, t.runs
    q = (
        sa.select(
            x.c.id,
            x.c.dataset_id,
            x.c.src_region,
            x.c.dst_region,
            x.c.state,
            x.c.bytes_done,
            x.c.created_at,
            x.c.ended_at,
            r.c.id.label("run_id"),
            r.c.workspace,
            r.c.team,
        )
        .join(r, r.c.id == x.c.created_by)
        .order_by(x.c.id)
    )
    return _rows(engine, q, workspaces, run_id)


def _rows(
    engine: sa.Engine, q: sa.Select[Any], workspaces: Sequence[str] | None, run_id: str | None
) -> list[Row]:
    """Run ``q`` (joined to ``runs``) narrowed to ``workspaces`` and ``run_id`` when given."""
    r = t.runs
    if workspaces is not None:
        q = q.where(r.c.workspace.in_(list(workspaces)))
    if run_id is not None:
        q = q.where(r.c.id == run_id)
    with engine.connect() as c:
        return [dict(row._mapping) for row in c.execute(q)]
