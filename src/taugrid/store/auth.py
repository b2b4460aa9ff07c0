"""Bearer tokens (stored hashed) and the audit log.

Owns ``tokens`` and ``audit``. A token's secret is shown once, at creation; the store
keeps only its SHA-256. Roles: ``admin``; ``researcher`` with ``scope.workspaces``;
``agent`` with ``scope.cluster``. A revoked token fails ``lookup`` immediately.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any

import sqlalchemy as sa

from taugrid.store import schema as t

__all__ = ["AuthStore", "hash_token"]

Row = dict[str, Any]


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class AuthStore:
    """Repository over tokens and the audit log."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def create_token(self, name: str, role: str, scope: Row) -> tuple[str, Row]:
        """Create a token; returns (secret, row). The secret is not stored."""
        secret = f"tau_{secrets.token_urlsafe(32)}"
        row = {
            "id": secrets.token_hex(8),
            "hash": hash_token(secret),
            "name": name,
            "role": role,
            "scope": scope,
            "created_at": time.time(),
            "revoked_at": None,
        }
        with self.engine.begin() as c:
            c.execute(t.tokens.insert().values(**row))
        return secret, row

    def lookup(self, secret: str) -> Row | None:
        q = sa.select(t.tokens).where(
            t.tokens.c.hash == hash_token(secret), t.tokens.c.revoked_at.is_(None)
        )
        with self.engine.connect() as c:
            r = c.execute(q).first()
        return dict(r._mapping) if r else None

    def revoke(self, token_id: str) -> bool:
        with self.engine.begin() as c:
            n = c.execute(
                t.tokens.update()
                .where(t.tokens.c.id == token_id, t.tokens.c.revoked_at.is_(None))
                .values(revoked_at=time.time())
            ).rowcount
        return bool(n)

    def list_tokens(self) -> list[Row]:
        cols = [c for c in t.tokens.c if c.name != "hash"]
        with self.engine.connect() as c:
            return [
                dict(r._mapping)
                for r in c.execute(sa.select(*cols).order_by(t.tokens.c.created_at))
            ]

    def count(self, role: str) -> int:
        q = sa.select(sa.func.count()).select_from(t.tokens).where(t.tokens.c.role == role)
        with self.engine.connect() as c:
            return int(c.execute(q).scalar_one())

    def audit(self, actor: str, action: str, target: str, detail: Row) -> None:
        with self.engine.begin() as c:
            c.execute(
                t.audit.insert().values(
                    ts=time.time(), actor=actor, action=action, target=target, detail=detail
                )
            )

    def audit_log(self, limit: int = 200) -> list[Row]:
        q = sa.select(t.audit).order_by(t.audit.c.id.desc()).limit(limit)
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q)]
