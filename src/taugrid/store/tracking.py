"""Persistence of the MLflow bridge's progress: one ``tracking_mirrors`` row per run.

Owns the ``tracking_mirrors`` table: the MLflow run a TauGrid run is mirrored to, the
id of the last ``metrics`` row sent there, whether its end was sent (``done``) and the
last error. ``hub.runs.tracking`` reads what is left to send and advances the row only after
the server accepted it, so a hub that dies in between sends a batch again, which MLflow
stores once (it skips a metric it already has).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

import sqlalchemy as sa

from taugrid.lifecycle import states as st
from taugrid.store import schema as t

__all__ = ["TrackingStore"]

Row = dict[str, Any]

_TERMINAL = sorted(s.value for s in st.TERMINAL_RUN_STATES)


class TrackingStore:
    """Where each run's mirror to MLflow stands."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def pending(self, workspaces: Collection[str], limit: int) -> list[Row]:
        """Runs of ``workspaces`` with something left to send: metrics past their mirror's
        cursor, or an end not sent yet; oldest first. Each row has the run's ``id``,
        ``workspace``, ``name``, ``state``, ``created_at``, ``updated_at``, ``source`` and
        its mirror's ``mlflow_run_id``, ``metric_id``, ``error`` (None, 0, "" when none)."""
        m = t.tracking_mirrors
        cursor = sa.func.coalesce(m.c.metric_id, 0)
        newer = sa.exists().where(t.metrics.c.run_id == t.runs.c.id, t.metrics.c.id > cursor)
        q = (
            sa.select(
                *(t.runs.c[k] for k in ("id", "workspace", "name", "state", "source")),
                t.runs.c.created_at,
                t.runs.c.updated_at,
                m.c.mlflow_run_id,
                cursor.label("metric_id"),
                sa.func.coalesce(m.c.error, "").label("error"),
            )
            .select_from(t.runs.outerjoin(m, m.c.run_id == t.runs.c.id))
            .where(t.runs.c.workspace.in_(list(workspaces)))
            .where(sa.func.coalesce(m.c.done, False).is_(False))
            .where(newer | t.runs.c.state.in_(_TERMINAL))
            .order_by(t.runs.c.created_at)
            .limit(limit)
        )
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q)]

    def metrics_after(self, run_id: str, after_id: int, limit: int) -> list[Row]:
        """The run's metric rows with ids past ``after_id``, in order, at most ``limit``."""
        q = (
            sa.select(t.metrics)
            .where(t.metrics.c.run_id == run_id, t.metrics.c.id > after_id)
            .order_by(t.metrics.c.id)
            .limit(limit)
        )
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q)]

    def mirror(self, run_id: str) -> Row | None:
        with self.engine.connect() as c:
            found = c.execute(sa.select(t.tracking_mirrors).where(_is(run_id))).first()
        return dict(found._mapping) if found is not None else None

    def save(self, run_id: str, **values: Any) -> None:
        """Create or update the run's mirror row with ``values`` (mlflow_run_id,
        metric_id, done, error)."""
        row = {**values, "updated_at": time.time()}
        with self.engine.begin() as c:
            if c.execute(t.tracking_mirrors.update().where(_is(run_id)).values(**row)).rowcount:
                return
            defaults = {"metric_id": 0, "done": False, "error": ""}
            c.execute(t.tracking_mirrors.insert().values(run_id=run_id, **{**defaults, **row}))


def _is(run_id: str) -> sa.ColumnElement[bool]:
    return t.tracking_mirrors.c.run_id == run_id
