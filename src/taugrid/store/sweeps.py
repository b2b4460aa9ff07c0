"""Persistence of sweeps: one ``sweeps`` row per sweep, one ``sweep_trials`` row per trial.

Owns those two tables. A trial row is written in the same transaction as nothing else:
the hub submits the trial's run first and then records it here, and a hub that crashed
in between finds the run by its name (``hub.runs.sweeps``) and records it then, so a trial is
never submitted twice.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from taugrid.store import schema as t

__all__ = ["SweepStore"]

Row = dict[str, Any]
_NO_CODE = tuple(c for c in t.sweeps.c if c.name != "code")


class SweepStore:
    """Sweeps and their trials in the hub's database."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def create(self, row: Row) -> None:
        with self.engine.begin() as c:
            c.execute(t.sweeps.insert().values(**row))

    def get(self, sweep_id: str, *, code: bool = False) -> Row | None:
        cols = tuple(t.sweeps.c) if code else _NO_CODE
        with self.engine.connect() as c:
            r = c.execute(sa.select(*cols).where(t.sweeps.c.id == sweep_id)).first()
        return dict(r._mapping) if r else None

    def listing(self, workspaces: list[str] | None, *, active_only: bool = False) -> list[Row]:
        """Sweeps of ``workspaces`` (None: all), newest first."""
        q = sa.select(*_NO_CODE).order_by(t.sweeps.c.created_at.desc())
        if workspaces is not None:
            q = q.where(t.sweeps.c.workspace.in_(workspaces))
        if active_only:
            q = q.where(t.sweeps.c.state == "running")
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q).all()]

    def update(self, sweep_id: str, **fields: Any) -> None:
        fields.setdefault("updated_at", time.time())
        with self.engine.begin() as c:
            c.execute(t.sweeps.update().where(t.sweeps.c.id == sweep_id).values(**fields))

    def add_trial(self, sweep_id: str, idx: int, run_id: str, params: dict[str, Any]) -> None:
        row = {"rung": 0, "stopped": None, "created_at": time.time()}
        with self.engine.begin() as c:
            c.execute(
                t.sweep_trials.insert().values(
                    sweep_id=sweep_id, idx=idx, run_id=run_id, params=params, **row
                )
            )

    def trials(self, sweep_id: str) -> list[Row]:
        """The sweep's trials by index."""
        with self.engine.connect() as c:
            rows = c.execute(
                sa.select(t.sweep_trials)
                .where(t.sweep_trials.c.sweep_id == sweep_id)
                .order_by(t.sweep_trials.c.idx)
            ).all()
        return [dict(r._mapping) for r in rows]

    def update_trial(self, sweep_id: str, idx: int, **fields: Any) -> None:
        where = (t.sweep_trials.c.sweep_id == sweep_id) & (t.sweep_trials.c.idx == idx)
        with self.engine.begin() as c:
            c.execute(t.sweep_trials.update().where(where).values(**fields))
