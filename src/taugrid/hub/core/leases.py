"""Agents' lease renewals, written in batches.

Every agent sync renews its cluster's lease (``store.clusters``). One transaction per
sync was the largest single cost of an idle fleet's syncs on PostgreSQL (0.75 ms of wall
time and 0.4 ms of hub CPU each, against 0.01 ms per cluster in a batch;
docs/BENCHMARKS.md, "Hub load"). So while the hub app runs, a sync that carries no
report only notes its time here, and a flusher writes every noted renewal in one
statement every ``FLUSH_S`` (at most an eighth of the lease): the written lease counts
from the earliest noted sync, so it never ends later than one renewed at once would.

A sync that carries a report (its state may change), a cluster not yet seen renewed by
this replica, and any sync while no flusher runs (a hub used without its app) renew at
once, as before. A cluster the store no longer has is forgotten, so its agent's next
sync hears "not registered" (lease 0) and registers again.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from taugrid.store import clusters

__all__ = ["FLUSH_S", "Leases"]

FLUSH_S = 0.25
"""How often noted renewals are written (seconds); at most ``lease_s / 8``."""

log = logging.getLogger(__name__)


class Leases:
    """The renewals this replica has noted but not yet written."""

    def __init__(
        self, store: clusters.ClusterStore, lease_s: float, every_s: float | None = None
    ) -> None:
        self.store, self.lease_s = store, lease_s
        self.every_s = min(FLUSH_S, lease_s / 8) if every_s is None else every_s
        self._lock = threading.Lock()
        self._noted: dict[str, float] = {}
        self._known: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def renew(self, cluster_id: str, report: dict[str, Any] | None, state: str | None) -> float:
        """Renew ``cluster_id``'s lease; its new end, or 0 for a cluster not registered."""
        now = time.time()
        with self._lock:
            batched = (
                self._thread is not None
                and report is None
                and state is None
                and cluster_id in self._known
            )
            if batched:
                self._noted.setdefault(cluster_id, now)
        if batched:
            return now + self.lease_s
        end = self.store.renew(cluster_id, self.lease_s, report, state)
        if end:
            with self._lock:
                self._known.add(cluster_id)
        return end

    def flush(self) -> None:
        """Write every noted renewal now (one statement)."""
        with self._lock:
            noted, self._noted = self._noted, {}
        if not noted:
            return
        try:
            found = self.store.renew_many(noted, min(noted.values()), self.lease_s)
        except Exception:
            with self._lock:  # written next round; the earliest sync still counts
                for cid, at in noted.items():
                    self._noted[cid] = min(at, self._noted.get(cid, at))
            raise
        if len(found) < len(noted):
            with self._lock:
                self._known -= set(noted) - found

    def start(self) -> None:
        with self._lock:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="tau-leases", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the flusher after one last flush; renewals are written at once again."""
        thread = self._thread
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout=30)
        with self._lock:
            self._thread = None
        self.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.flush()
            except Exception:  # the database may be away: kept and written next round
                log.exception("lease renewals not written; tried again in %g s", self.every_s)
