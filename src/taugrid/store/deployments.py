"""Serving deployments (``tau serve``): one row per workspace and name.

Owns the ``deployments`` table. A deployment points at the *run* that serves it
(``run_id``: a ``workload_kind: rayservice`` run, admitted, placed and released like
any run); an update or scale makes a new run and keeps the old one in
``previous_run_id`` until the new one has taken the application over. ``state`` is
``active`` or ``deleted``; a deleted name can be deployed again (the row is replaced).
``source`` is the document of what is served: ``run`` (the training run),
``checkpoint`` or ``artifact``, ``model_path``.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from taugrid.store import schema as t

__all__ = ["ACTIVE", "DELETED", "DeploymentStore"]

Row = dict[str, Any]
ACTIVE = "active"
DELETED = "deleted"


def _key(workspace: str, name: str) -> str:
    return f"{workspace}/{name}"


class DeploymentStore:
    """Repository over deployments."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def get(self, workspace: str, name: str) -> Row | None:
        with self.engine.connect() as c:
            r = c.execute(t.deployments.select().where(t.deployments.c.id == _key(workspace, name)))
            row = r.mappings().first()
        return dict(row) if row else None

    def put(self, workspace: str, name: str, run_id: str, source: Row) -> None:
        """Create the deployment, or replace a deleted one of the same name."""
        now = time.time()
        values = {
            "name": name,
            "workspace": workspace,
            "state": ACTIVE,
            "run_id": run_id,
            "previous_run_id": None,
            "source": source,
            "created_at": now,
            "updated_at": now,
        }
        with self.engine.begin() as c:
            c.execute(t.deployments.delete().where(t.deployments.c.id == _key(workspace, name)))
            c.execute(t.deployments.insert().values(id=_key(workspace, name), **values))

    def update(self, workspace: str, name: str, **fields: Any) -> None:
        fields["updated_at"] = time.time()
        with self.engine.begin() as c:
            c.execute(
                t.deployments.update()
                .where(t.deployments.c.id == _key(workspace, name))
                .values(**fields)
            )

    def list(self, workspaces: list[str] | None) -> list[Row]:
        """Deployments of ``workspaces`` (None: all), deleted ones included, by name."""
        q = t.deployments.select().order_by(t.deployments.c.workspace, t.deployments.c.name)
        if workspaces is not None:
            q = q.where(t.deployments.c.workspace.in_(workspaces))
        with self.engine.connect() as c:
            return [dict(r) for r in c.execute(q).mappings()]
