"""This hub process as one replica of a replicated hub: leadership and database health.

Owns the replica's heartbeat thread. Every ``lease/3`` seconds it records the replica
in ``hub_replicas``, reads the database's schema revision and renews (leader) or tries
to take (standby) the leader lease (``store.leader``). From that it answers three
questions the rest of the hub asks:

- ``is_leader()``: run the singletons (the scheduling loop, result exports) now?
  True only until ``start of the last successful renewal + lease`` by the local
  monotonic clock. The renewal started before the database stamped the lease, so this
  ends no later than the lease does in the database: a replica that cannot reach the
  database stops leading *before* any standby may take over, even if its heartbeat is
  stuck in a network call.
- ``write_refusal()``: the reason this replica refuses writes, or None. A replica that
  has not reached the database for a lease period, and whose last heartbeat failed (or
  none completed for three lease periods: a connect that hangs), says so (503) rather
  than accept writes it cannot store; a heartbeat that is merely late (a loaded machine)
  refuses nothing. API reads and writes otherwise go to the database as usual.
- ``schema_error``: another replica migrated the database past this code's schema;
  this replica refuses to serve until it is upgraded.

Takeover bound: a standby tries every ``lease/3``; the lease of a leader killed just
after renewing expires ``lease`` later, so a new leader runs its first cycle within
``lease + lease/3 + cycle_s`` (13.8 s with the defaults 10 s and 0.5 s).

SQLite is the single-replica embedded default: there the replica is always the leader
and the heartbeat only keeps the registry row (``tau admin hub status``) fresh.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

from taugrid.hub.core import context
from taugrid.store import db, leader

__all__ = ["Replica"]

log = logging.getLogger(__name__)


class Replica:
    """This process's view of leadership and of its database; see the module docstring."""

    def __init__(self, hub: context.Hub, url: str = "") -> None:
        self.hub = hub
        self.id = uuid.uuid4().hex[:12]
        self.url = url
        self.lease_s = hub.config.leader_lease_s
        self.single = hub.engine.dialect.name != "postgresql"
        self.started_at = time.time()
        self.revision = db.head_revision()
        self.store = leader.LeaderStore(hub.engine)
        self.epoch = 0
        self.schema_error: str | None = None
        self._leader_until = float("inf") if self.single else 0.0
        self._db_ok_at = time.monotonic()
        self._db_failed_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tau-replica", daemon=True)

    def start(self) -> None:
        self.beat()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            if not self.single and self.is_leader():
                self.store.release(self.id)
            self.store.remove(self.id)
        except Exception:  # the database may be gone at shutdown; the lease just expires
            log.warning("replica %s could not deregister; its lease expires by itself", self.id)
        self._leader_until = 0.0

    def is_leader(self) -> bool:
        return self.schema_error is None and time.monotonic() < self._leader_until

    def write_refusal(self) -> str | None:
        """Why this replica refuses writes now, or None when it accepts them."""
        if self.schema_error is not None:
            return self.schema_error
        since = time.monotonic() - self._db_ok_at
        # a late heartbeat on a loaded machine is no outage: refuse once one failed, or
        # when none has completed for three lease periods (a connect that hangs)
        failing = self._db_failed_at > self._db_ok_at
        if since > self.lease_s and (failing or since > 3 * self.lease_s):
            return (
                f"this hub replica has not reached its database for {since:.0f} s; it "
                "refuses writes until the database answers again (nothing was stored)"
            )
        return None

    def beat(self) -> None:
        """One heartbeat: registry row, schema check, lease renewal or takeover."""
        started = time.monotonic()
        try:
            revision = self.store.heartbeat(self.id, self.url, self.started_at, self.revision)
            lease = None if self.single else self._renew()
        except Exception as exc:  # the database is unreachable: keep trying, lead no more
            self._db_failed_at = time.monotonic()
            log.warning("replica %s: database unreachable (%s)", self.id, exc)
            return
        self._db_ok_at = started
        if revision != self.revision:
            self._schema_changed(revision)
            return
        if self.single:
            return
        if lease is None:
            self._leader_until = 0.0
            return
        # 10 % margin: the local clock may run a little slow against the database's.
        self._leader_until = started + self.lease_s * 0.9
        if lease.epoch != self.epoch:
            self._took_over(lease)

    def _renew(self) -> leader.Lease | None:
        return self.store.try_acquire(self.id, self.url, self.lease_s)

    def _took_over(self, lease: leader.Lease) -> None:
        self.epoch = lease.epoch
        log.warning("replica %s (%s) is the leader, epoch %d", self.id, self.url, lease.epoch)
        self.hub.runs.add_event(
            None, "hub_leader", {"replica": self.id, "url": self.url, "epoch": lease.epoch}
        )
        self.hub.wake_scheduler()

    def _schema_changed(self, revision: str) -> None:
        if db.head_revision() == revision:
            return
        self.schema_error = db.too_new(revision).message
        self._leader_until = 0.0
        log.error("replica %s refuses to serve: %s", self.id, self.schema_error)

    def _loop(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            self.beat()

    def status(self) -> dict[str, Any]:
        """What ``GET /v1/admin/hub`` reports: every replica, the lease, the newest
        takeovers (``hub_leader`` events), the database."""
        lease, now = self.store.current()
        url = self.hub.engine.url
        replicas = [
            {
                **r,
                "alive": r["last_seen"] > now - 3 * self.lease_s,
                "leader": lease is not None and lease.holder == r["id"] and lease.expires_at > now,
                "self": r["id"] == self.id,
            }
            for r in self.store.replicas()
        ]
        return {
            "replica": self.id,
            "mode": "single" if self.single else "replicated",
            "leader": _lease_doc(lease, now, self.single, self.id),
            "replicas": replicas,
            "takeovers": self.store.history(),
            "database": {
                "dialect": url.get_backend_name(),
                "url": url.render_as_string(hide_password=True),
                "schema_revision": self.revision,
                "time": now,
            },
        }


def _lease_doc(lease: leader.Lease | None, now: float, single: bool, me: str) -> dict[str, Any]:
    if single:
        return {"replica": me, "epoch": 0, "expires_in_s": None, "note": "SQLite: one replica"}
    if lease is None or lease.expires_at <= now:
        return {"replica": None, "epoch": lease.epoch if lease else 0, "expires_in_s": None}
    return {
        "replica": lease.holder,
        "url": lease.holder_url,
        "epoch": lease.epoch,
        "acquired_at": lease.acquired_at,
        "renewed_at": lease.renewed_at,
        "expires_in_s": round(lease.expires_at - now, 3),
    }
