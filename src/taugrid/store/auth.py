"""Bearer tokens (stored hashed) and the audit log.

Owns ``tokens`` and ``audit``. A token's secret is shown once, at creation; the store
keeps only its SHA-256. Roles: ``admin``; ``researcher`` with ``scope.workspaces``;
``agent`` with ``scope.cluster``. A revoked token fails ``lookup`` at once in the
process that revoked it and within ``LOOKUP_TTL_S`` in every other hub replica: a known
token's row is kept that long, so that a fleet's requests do not each read it anew.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from typing import Any

import sqlalchemy as sa

from taugrid import private
from taugrid.store import schema as t

__all__ = ["LOOKUP_TTL_S", "AuthStore", "hash_token"]

LOOKUP_TTL_S = 2.0

Row = dict[str, Any]


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class AuthStore:
    """Repository over tokens and the audit log."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self._known: dict[str, tuple[float, Row]] = {}
        """Token hash → (when read, row) of tokens found active (``LOOKUP_TTL_S``)."""
        self._known_lock = threading.Lock()
        self._revokes = 0
        """Counts revocations: a row read before one is not kept."""

    def create_token(
        self, name: str, role: str, scope: Row, secret: str | None = None
    ) -> tuple[str, Row]:
        """Create a token; returns (secret, row). The secret is not stored. ``secret``:
        one made elsewhere (``private.new_token``, e.g. by ``tau cluster install --with-hub``)
        instead of a new one."""
        secret = secret or private.new_token()
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

    def ever_created(self, secret: str) -> bool:
        """Whether a token with this secret was ever created, revoked ones included."""
        q = sa.select(t.tokens.c.id).where(t.tokens.c.hash == hash_token(secret))
        with self.engine.connect() as c:
            return c.execute(q).first() is not None

    def cached(self, secret: str) -> Row | None:
        """The token's row if a lookup within ``LOOKUP_TTL_S`` found it (no query)."""
        digest = hash_token(secret)
        with self._known_lock:
            hit = self._known.get(digest)
        if hit is not None and time.monotonic() - hit[0] < LOOKUP_TTL_S:
            return dict(hit[1])
        return None

    def lookup(self, secret: str) -> Row | None:
        digest, now = hash_token(secret), time.monotonic()
        with self._known_lock:
            hit, revokes = self._known.get(digest), self._revokes
        if hit is not None and now - hit[0] < LOOKUP_TTL_S:
            return dict(hit[1])
        q = sa.select(t.tokens).where(t.tokens.c.hash == digest, t.tokens.c.revoked_at.is_(None))
        with self.engine.connect() as c:
            r = c.execute(q).first()
        with self._known_lock:
            if r is None:
                self._known.pop(digest, None)
                return None
            if revokes == self._revokes:
                self._known[digest] = (now, dict(r._mapping))
        return dict(r._mapping)

    def revoke(self, token_id: str) -> bool:
        with self.engine.begin() as c:
            n = c.execute(
                t.tokens.update()
                .where(t.tokens.c.id == token_id, t.tokens.c.revoked_at.is_(None))
                .values(revoked_at=time.time())
            ).rowcount
        with self._known_lock:  # after the commit; a lookup that raced it keeps nothing
            self._known.clear()
            self._revokes += 1
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
