"""Persistence of workspace secrets: one ``secrets`` row per (scope, name).

Owns the ``secrets`` table. Values arrive sealed (``hub.core.vault`` encrypts them with the
platform's key before they reach this module) and leave sealed; the key names are kept
beside them in the clear so that listings never need the key. ``scope`` is a
workspace's name or ``PLATFORM_SCOPE`` (a secret every workspace can use).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from taugrid import payloads
from taugrid.store import schema as t

__all__ = ["PLATFORM_SCOPE", "SecretStore"]

Row = dict[str, Any]
PLATFORM_SCOPE = payloads.SECRETS_PLATFORM_SCOPE

_META = tuple(
    t.secrets.c[name]
    for name in ("scope", "name", "keys", "created_at", "updated_at", "updated_by")
)


class SecretStore:
    """Sealed secrets in the hub's database."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def put(self, scope: str, name: str, keys: list[str], sealed: bytes, actor: str) -> Row:
        """Create or replace a secret; returns its metadata (never the sealed value)."""
        now = time.time()
        row = {"keys": sorted(keys), "sealed": sealed, "updated_at": now, "updated_by": actor}
        where = (t.secrets.c.scope == scope) & (t.secrets.c.name == name)
        with self.engine.begin() as c:
            if c.execute(t.secrets.update().where(where).values(**row)).rowcount == 0:
                c.execute(t.secrets.insert().values(scope=scope, name=name, created_at=now, **row))
            return dict(c.execute(sa.select(*_META).where(where)).one()._mapping)

    def sealed(self, scopes: Iterable[str], name: str) -> Row | None:
        """The secret ``name`` of the first of ``scopes`` that has one, sealed value too."""
        order = list(scopes)
        with self.engine.connect() as c:
            rows = c.execute(
                sa.select(t.secrets).where(t.secrets.c.scope.in_(order), t.secrets.c.name == name)
            ).all()
        found = {r.scope: dict(r._mapping) for r in rows}
        return next((found[s] for s in order if s in found), None)

    def listing(self, scopes: Iterable[str]) -> list[Row]:
        """Metadata of every secret in ``scopes``, by scope then name."""
        with self.engine.connect() as c:
            rows = c.execute(
                sa.select(*_META)
                .where(t.secrets.c.scope.in_(list(scopes)))
                .order_by(t.secrets.c.scope, t.secrets.c.name)
            ).all()
        return [dict(r._mapping) for r in rows]

    def delete(self, scope: str, name: str) -> bool:
        """Remove a secret; False when there was none."""
        where = (t.secrets.c.scope == scope) & (t.secrets.c.name == name)
        with self.engine.begin() as c:
            return bool(c.execute(t.secrets.delete().where(where)).rowcount)
