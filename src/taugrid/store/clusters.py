"""Cluster registry and node marks: leases, the agents' latest state reports, cordons,
and what was seen of spot pools.

Owns the ``clusters``, ``node_marks`` and ``pool_stats`` tables. A cluster's lease is
renewed by every agent sync; ``lease_expires`` in the past means the hub has lost contact
(the hub turns that into the Unknown state, see ``hub.service``). Node marks are faults or
cordons set by an admin or a health checker; an open mark (``cleared_at IS NULL``) makes
the node unusable for placement.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

import sqlalchemy as sa

from taugrid.store import schema as t

__all__ = ["ClusterStore"]

Row = dict[str, Any]


def _ready_again() -> sa.ColumnElement[Any]:
    """The state a renewal leaves: a cluster that had lost contact is ``ready`` again."""
    col = t.clusters.c.state
    return sa.case((col == "unknown", "ready"), else_=col)


class ClusterStore:
    """Repository over clusters and node marks."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def upsert(self, cluster_id: str, region: str, lease_s: float, report: Row) -> None:
        now = time.time()
        values = {
            "region": region,
            "state": "ready",
            "last_heartbeat": now,
            "lease_expires": now + lease_s,
            "report": report,
        }
        with self.engine.begin() as c:
            n = c.execute(
                t.clusters.update().where(t.clusters.c.id == cluster_id).values(**values)
            ).rowcount
            if n == 0:
                c.execute(t.clusters.insert().values(id=cluster_id, registered_at=now, **values))

    def renew(
        self, cluster_id: str, lease_s: float, report: Row | None, state: str | None = None
    ) -> float:
        """Extend the lease; ``state`` (the agent's health) is kept when None, but a
        cluster that had lost contact (``unknown``) is ``ready`` again. The lease's new
        end, or 0 for a cluster that never registered."""
        now = time.time()
        values: Row = {
            "last_heartbeat": now,
            "lease_expires": now + lease_s,
            "state": state or _ready_again(),
        }
        if report is not None:
            values["report"] = report
        with self.engine.begin() as c:
            q = t.clusters.update().where(t.clusters.c.id == cluster_id).values(**values)
            found = c.execute(q).rowcount
        return float(values["lease_expires"]) if found else 0.0

    def renew_many(self, cluster_ids: Collection[str], since: float, lease_s: float) -> set[str]:
        """Extend the leases of ``cluster_ids`` in one statement, as ``renew`` does with no
        report and no state, counted from ``since`` (the earliest of their syncs); the ids
        that exist."""
        if not cluster_ids:
            return set()
        q = (
            t.clusters.update()
            .where(t.clusters.c.id.in_(sorted(cluster_ids)))
            .values(last_heartbeat=since, lease_expires=since + lease_s, state=_ready_again())
            .returning(t.clusters.c.id)
        )
        with self.engine.begin() as c:
            return {str(r[0]) for r in c.execute(q)}

    def renew_reports(
        self, rows: Sequence[tuple[str, float, Row, str | None]], lease_s: float
    ) -> set[str]:
        """``renew`` with a report for each ``(cluster, since, report, state)``, the lease
        counted from ``since``, in one transaction (one batch of statements); the ids
        that exist."""
        if not rows:
            return set()
        col = t.clusters.c
        q = (
            t.clusters.update()
            .where(col.id == sa.bindparam("b_id"))
            .values(
                last_heartbeat=sa.bindparam("b_since"),
                lease_expires=sa.bindparam("b_until"),
                report=sa.bindparam("b_report", type_=col.report.type),
                state=sa.func.coalesce(sa.bindparam("b_state", type_=sa.String), _ready_again()),
            )
        )
        params = [
            {
                "b_id": cid,
                "b_since": since,
                "b_until": since + lease_s,
                "b_report": report,
                "b_state": state,
            }
            for cid, since, report, state in rows
        ]
        ids = sorted({cid for cid, *_ in rows})
        with self.engine.begin() as c:
            c.execute(q, params)
            return {str(r[0]) for r in c.execute(sa.select(col.id).where(col.id.in_(ids)))}

    def set_state(self, cluster_id: str, state: str) -> None:
        with self.engine.begin() as c:
            c.execute(t.clusters.update().where(t.clusters.c.id == cluster_id).values(state=state))

    def get(self, cluster_id: str) -> Row | None:
        with self.engine.connect() as c:
            r = c.execute(sa.select(t.clusters).where(t.clusters.c.id == cluster_id)).first()
        return dict(r._mapping) if r else None

    def in_region(self, region: str) -> list[Row]:
        q = sa.select(t.clusters).where(t.clusters.c.region == region).order_by(t.clusters.c.id)
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q)]

    def all(self) -> list[Row]:
        with self.engine.connect() as c:
            return [
                dict(r._mapping) for r in c.execute(sa.select(t.clusters).order_by(t.clusters.c.id))
            ]

    def mark_node(
        self, cluster_id: str, node_id: str, kind: str, reason: str, source: str = "admin"
    ) -> Row:
        """Open a mark (``source``: admin, checker, log_monitor); the open mark of the
        same kind and source is returned instead of a second one."""
        with self.engine.begin() as c:
            same = c.execute(
                sa.select(t.node_marks).where(
                    t.node_marks.c.cluster_id == cluster_id,
                    t.node_marks.c.node_id == node_id,
                    t.node_marks.c.kind == kind,
                    t.node_marks.c.source == source,
                    t.node_marks.c.cleared_at.is_(None),
                )
            ).first()
            if same is not None:
                return dict(same._mapping)
            row = {
                "cluster_id": cluster_id,
                "node_id": node_id,
                "kind": kind,
                "reason": reason,
                "source": source,
                "marked_at": time.time(),
                "cleared_at": None,
            }
            row["id"] = c.execute(t.node_marks.insert().values(**row)).inserted_primary_key[0]  # type: ignore[index]
        return row

    def clear_node(self, cluster_id: str, node_id: str, source: str | None = None) -> int:
        """Clear the node's open marks (only those of ``source`` when given)."""
        where = [
            t.node_marks.c.cluster_id == cluster_id,
            t.node_marks.c.node_id == node_id,
            t.node_marks.c.cleared_at.is_(None),
        ]
        if source is not None:
            where.append(t.node_marks.c.source == source)
        with self.engine.begin() as c:
            return c.execute(
                t.node_marks.update().where(*where).values(cleared_at=time.time())
            ).rowcount

    def marks(self, cluster_id: str, node_id: str) -> list[Row]:
        """Every mark the node ever had, open or cleared, oldest first."""
        q = sa.select(t.node_marks).where(
            t.node_marks.c.cluster_id == cluster_id, t.node_marks.c.node_id == node_id
        )
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q.order_by(t.node_marks.c.id))]

    def clusters_with_open_marks(self) -> set[str]:
        """The clusters that have an open node mark (one query for the whole fleet)."""
        q = sa.select(t.node_marks.c.cluster_id).where(t.node_marks.c.cleared_at.is_(None))
        with self.engine.connect() as c:
            return {str(r[0]) for r in c.execute(q.distinct())}

    def open_marks(self, cluster_id: str | None = None) -> list[Row]:
        q = sa.select(t.node_marks).where(t.node_marks.c.cleared_at.is_(None))
        if cluster_id is not None:
            q = q.where(t.node_marks.c.cluster_id == cluster_id)
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q.order_by(t.node_marks.c.id))]

    # -- spot pools ---------------------------------------------------------------------
    def observe_pools(
        self, cluster_id: str, alive: dict[str, int], now: float, cap_s: float
    ) -> None:
        """Add ``alive[pool]`` nodes x the seconds since the pool was last seen (at most
        ``cap_s``: a gap in reports is not counted as seen) to each pool's node-seconds.
        One statement per pool: replicas that apply reports at once never count a gap twice."""
        p = t.pool_stats
        with self.engine.begin() as c:
            for pool, nodes in alive.items():
                gap = sa.literal(now) - p.c.seen_at
                step = sa.case((gap > cap_s, cap_s), else_=gap)
                done = c.execute(
                    sa.update(p)
                    .where(p.c.cluster_id == cluster_id, p.c.pool == pool, p.c.seen_at < now)
                    .values(node_seconds=p.c.node_seconds + nodes * step, seen_at=now)
                )
                if done.rowcount == 0 and not self._pool_row(c, cluster_id, pool):
                    row = {"cluster_id": cluster_id, "pool": pool, "node_seconds": 0.0}
                    c.execute(sa.insert(p).values(**row, reclaims=0, seen_at=now))

    def count_reclaim(self, cluster_id: str, pool: str, now: float) -> None:
        """One more reclaim of a node of ``pool``."""
        p = t.pool_stats
        with self.engine.begin() as c:
            if not self._pool_row(c, cluster_id, pool):
                row = {"cluster_id": cluster_id, "pool": pool, "node_seconds": 0.0}
                c.execute(sa.insert(p).values(**row, reclaims=0, seen_at=now))
            c.execute(
                sa.update(p)
                .where(p.c.cluster_id == cluster_id, p.c.pool == pool)
                .values(reclaims=p.c.reclaims + 1)
            )

    def pool_stats(self, cluster_id: str) -> dict[str, tuple[float, int]]:
        """Pool → (node-seconds seen alive, reclaims) of ``cluster_id``."""
        p = t.pool_stats
        with self.engine.connect() as c:
            rows = c.execute(sa.select(p).where(p.c.cluster_id == cluster_id)).all()
        return {r.pool: (float(r.node_seconds), int(r.reclaims)) for r in rows}

    @staticmethod
    def _pool_row(c: sa.Connection, cluster_id: str, pool: str) -> bool:
        p = t.pool_stats
        q = sa.select(p.c.pool).where(p.c.cluster_id == cluster_id, p.c.pool == pool)
        return c.execute(q).first() is not None
