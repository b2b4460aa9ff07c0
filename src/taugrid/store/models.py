"""The model registry (``tau model``): numbered versions of a named model per workspace.

Owns the ``model_versions`` table. A version records what a deployment would serve
(``source``: the run, its checkpoint or artifact, the model path, as
``hub.serving.serving`` resolves it) and its ``lineage`` (run, config hash, input datasets
with versions, the metric that chose it). Versions are numbered 1, 2, ... per
(workspace, name) and never change except for ``aliases``: an alias (``production``,
``staging``, ...) is on at most one version of a model; setting it moves it.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from taugrid.store import schema as t

__all__ = ["ModelStore"]

Row = dict[str, Any]
_T = t.model_versions


class ModelStore:
    """Repository over model versions."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def add(self, workspace: str, name: str, source: Row, lineage: Row, actor: str) -> Row:
        """A new version (the next number) of ``name``; returns its row."""
        with self.engine.begin() as c:
            q = sa.select(sa.func.max(_T.c.version)).where(
                (_T.c.workspace == workspace) & (_T.c.name == name)
            )
            version = int(c.execute(q).scalar() or 0) + 1
            row = {
                "id": f"{workspace}/{name}/{version}",
                "name": name,
                "workspace": workspace,
                "version": version,
                "source": source,
                "lineage": lineage,
                "aliases": [],
                "created_by": actor,
                "created_at": time.time(),
            }
            c.execute(_T.insert().values(**row))
        return row

    def versions(self, workspaces: list[str] | None, name: str | None = None) -> list[Row]:
        """Versions (of ``name``, or of every model) in ``workspaces``, oldest first."""
        q = sa.select(_T).order_by(_T.c.workspace, _T.c.name, _T.c.version)
        if workspaces is not None:
            q = q.where(_T.c.workspace.in_(workspaces))
        if name is not None:
            q = q.where(_T.c.name == name)
        with self.engine.connect() as c:
            return [dict(r) for r in c.execute(q).mappings()]

    def set_alias(self, workspace: str, name: str, version: int, alias: str) -> None:
        """Put ``alias`` on ``version``, taking it off any other version of the model."""
        with self.engine.begin() as c:
            rows = c.execute(
                sa.select(_T.c.id, _T.c.version, _T.c.aliases).where(
                    (_T.c.workspace == workspace) & (_T.c.name == name)
                )
            ).all()
            for rid, v, aliases in rows:
                new = [a for a in aliases if a != alias] + ([alias] if v == version else [])
                if new != aliases:
                    c.execute(_T.update().where(_T.c.id == rid).values(aliases=new))
