"""The leader lease and the replica registry of a replicated hub (PostgreSQL).

Owns the ``hub_leader`` and ``hub_replicas`` tables (migration 0006).

Vocabulary: a *replica* is one hub process; the *leader* is the one replica whose
lease on the ``scheduler`` row is unexpired; it alone runs the singletons (the
scheduling loop, lost-contact sweeps, result exports). The *epoch* is the fencing
number of a leadership: it grows by one each time the lease changes hands, never when
the holder renews, so "epoch 7" names one uninterrupted leadership.

Invariants: every time here is the *database's* clock (``clock_timestamp()`` on
PostgreSQL), never a replica's, so replicas with skewed clocks agree on expiry. Taking
the lease is one conditional ``UPDATE`` (``holder = me OR expires_at < now``): under
PostgreSQL's row lock two replicas racing for an expired lease cannot both win.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from typing import Any

import sqlalchemy as sa

from taugrid.store import schema as t

__all__ = ["ROLE", "LeaderStore", "Lease", "db_now"]

ROLE = "scheduler"
"""The lease row of the hub's singletons (one lease for all of them)."""

_REPLICA_FORGET_S = 3600.0  # a replica not seen for an hour leaves the registry


@dataclasses.dataclass(frozen=True)
class Lease:
    """The leader lease as stored: who holds it, since when, until when (DB clock)."""

    holder: str
    holder_url: str
    epoch: int
    acquired_at: float
    renewed_at: float
    expires_at: float


def db_now(conn: sa.Connection) -> float:
    """The database's clock in epoch seconds (the local clock on SQLite: one process)."""
    if conn.dialect.name == "postgresql":
        now = conn.execute(sa.text("SELECT EXTRACT(EPOCH FROM clock_timestamp())"))
        return float(now.scalar_one())
    return time.time()


class LeaderStore:
    """Repository over the lease row and the replica heartbeats."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def try_acquire(self, replica: str, url: str, lease_s: float) -> Lease | None:
        """Renew our lease or take an expired one; the lease we hold, or None."""
        lt = t.hub_leader.c
        with self.engine.begin() as c:
            now = db_now(c)
            ours = lt.holder == replica
            c.execute(
                t.hub_leader.update()
                .where(lt.name == ROLE, sa.or_(ours, lt.expires_at < now))
                .values(
                    holder=replica,
                    holder_url=url,
                    epoch=sa.case((ours, lt.epoch), else_=lt.epoch + 1),
                    acquired_at=sa.case((ours, lt.acquired_at), else_=now),
                    renewed_at=now,
                    expires_at=now + lease_s,
                )
            )
            lease = self._lease(c)
        return lease if lease is not None and lease.holder == replica else None

    def release(self, replica: str) -> None:
        """Give the lease up at once (a clean shutdown): a standby takes it next round."""
        lt = t.hub_leader.c
        with self.engine.begin() as c:
            c.execute(
                t.hub_leader.update()
                .where(lt.name == ROLE, lt.holder == replica)
                .values(expires_at=0.0)
            )

    def current(self) -> tuple[Lease | None, float]:
        """The lease row and the database's clock now."""
        with self.engine.connect() as c:
            return self._lease(c), db_now(c)

    def _lease(self, c: sa.Connection) -> Lease | None:
        row = c.execute(sa.select(t.hub_leader).where(t.hub_leader.c.name == ROLE)).first()
        if row is None:
            return None
        m = row._mapping
        return Lease(
            holder=m["holder"],
            holder_url=m["holder_url"],
            epoch=int(m["epoch"]),
            acquired_at=float(m["acquired_at"]),
            renewed_at=float(m["renewed_at"]),
            expires_at=float(m["expires_at"]),
        )

    def heartbeat(self, replica: str, url: str, started_at: float, revision: str) -> str:
        """Record that ``replica`` is alive; returns the schema revision the database has."""
        rt = t.hub_replicas.c
        with self.engine.begin() as c:
            now = db_now(c)
            values: dict[str, Any] = {
                "url": url,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started_at": started_at,
                "last_seen": now,
                "schema_revision": revision,
            }
            n = c.execute(t.hub_replicas.update().where(rt.id == replica).values(**values))
            if n.rowcount == 0:
                c.execute(t.hub_replicas.insert().values(id=replica, **values))
            c.execute(t.hub_replicas.delete().where(rt.last_seen < now - _REPLICA_FORGET_S))
            return str(c.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one())

    def replicas(self) -> list[dict[str, Any]]:
        """Every replica seen in the last hour, newest heartbeat first."""
        q = sa.select(t.hub_replicas).order_by(t.hub_replicas.c.last_seen.desc())
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q)]

    def history(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest takeovers (``hub_leader`` events: replica, url, epoch), oldest first."""
        et = t.events.c
        q = (
            sa.select(et.ts, et.payload)
            .where(et.kind == "hub_leader", et.run_id.is_(None))
            .order_by(et.id.desc())
            .limit(limit)
        )
        with self.engine.connect() as c:
            rows = [{"time": r.ts, **r.payload} for r in c.execute(q)]
        return rows[::-1]

    def remove(self, replica: str) -> None:
        """Drop a replica from the registry (its clean shutdown)."""
        with self.engine.begin() as c:
            c.execute(t.hub_replicas.delete().where(t.hub_replicas.c.id == replica))
