"""Agents' lease renewals, written in batches.

Every agent sync renews its cluster's lease (``store.clusters``). One transaction per
sync was the largest single cost of an idle fleet's syncs on PostgreSQL (0.75 ms of wall
time and 0.4 ms of hub CPU each, against 0.01 ms per cluster in a batch;
docs/BENCHMARKS.md, "Hub load"). So while the hub app runs, a sync that carries no
report only notes its time here, and a flusher writes every noted renewal in one
statement every ``FLUSH_S`` (at most an eighth of the lease): the written lease counts
from the earliest noted sync, so it never ends later than one renewed at once would.

A report that says nothing new of capacity or health (``urgent`` false: an idle
cluster's periodic report, a hundred a second at 1,000 regions) is noted likewise, the
newest per cluster, and written by the same flush in one transaction. A report that
says something new, a cluster whose lease this replica has not written within half a
lease (first seen, or back from a partition or a restart: the leader must not find its
lease stale while it syncs again), and any sync while no flusher runs (a hub used
without its app) renew at once. A cluster the store no longer has is forgotten, so its
agent's next sync hears "not registered" (lease 0) and registers again.
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

_Report = tuple[float, dict[str, Any], str | None]
"""A noted report: the earliest sync it stands for, the report, the agent's health."""


class Leases:
    """The renewals this replica has noted but not yet written."""

    def __init__(
        self, store: clusters.ClusterStore, lease_s: float, every_s: float | None = None
    ) -> None:
        self.store, self.lease_s = store, lease_s
        self.every_s = min(FLUSH_S, lease_s / 8) if every_s is None else every_s
        self._lock = threading.Condition()
        self._flushing: set[str] = set()
        """Clusters whose noted report a flush is writing: a report of theirs written at
        once waits for it, so the older one never lands after the newer."""
        self._noted: dict[str, float] = {}
        self._reports: dict[str, _Report] = {}
        self._written: dict[str, float] = {}
        """When each cluster's lease was last written (the start it counts from)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def renew(
        self,
        cluster_id: str,
        report: dict[str, Any] | None,
        state: str | None,
        *,
        urgent: bool = True,
    ) -> float:
        """Renew ``cluster_id``'s lease; its new end, or 0 for a cluster not registered.

        A renewal with no report and no state, or with a report that is not ``urgent``,
        is noted and written by the next flush; any other is written at once."""
        now = time.time()
        with self._lock:
            # a cluster silent for half a lease (back from a partition, a restart) renews
            # at once: a lease the leader may be about to call lost is never left stale
            fresh = now - self._written.get(cluster_id, 0.0) < self.lease_s / 2
            batched = self._thread is not None and fresh
            if batched and report is None and state is None:
                self._noted.setdefault(cluster_id, now)
            elif batched and report is not None and not urgent:
                since = self._reports.get(cluster_id, (now,))[0]
                self._reports[cluster_id] = (since, report, state)
            else:
                batched = False
        if batched:
            return now + self.lease_s
        end = self._now(cluster_id, report, state)
        if end:
            with self._lock:
                self._written[cluster_id] = now
        return end

    def _now(self, cluster_id: str, report: dict[str, Any] | None, state: str | None) -> float:
        if report is not None:
            self.forget_report(cluster_id)  # written now: what was noted for it is older
        return self.store.renew(cluster_id, self.lease_s, report, state)

    def forget_report(self, cluster_id: str) -> None:
        """``cluster_id`` (re)registered: a report noted before is not written after it."""
        with self._lock:
            self._lock.wait_for(lambda: cluster_id not in self._flushing)
            self._reports.pop(cluster_id, None)

    def flush(self) -> None:
        """Write every noted renewal and report now (one statement each)."""
        with self._lock:
            noted, self._noted = self._noted, {}
            reports, self._reports = self._reports, {}
            self._flushing |= set(reports)
        try:
            found = self._write(noted, reports)
        except Exception:
            self._keep(noted, reports)
            raise
        finally:
            with self._lock:
                self._flushing -= set(reports)
                self._lock.notify_all()
        earliest = min(noted.values(), default=0.0)  # what renew_many counted from
        with self._lock:
            for cid in found:
                since = reports[cid][0] if cid in reports else earliest
                self._written[cid] = max(self._written.get(cid, 0.0), since)
            for cid in (set(noted) | set(reports)) - found:
                self._written.pop(cid, None)

    def _keep(self, noted: dict[str, float], reports: dict[str, _Report]) -> None:
        """Noted again after a failed write: written next round, the earliest sync counts."""
        with self._lock:
            for cid, at in noted.items():
                self._noted[cid] = min(at, self._noted.get(cid, at))
            for cid, rep in reports.items():
                self._reports.setdefault(cid, rep)  # a newer one noted meanwhile wins

    def _write(self, noted: dict[str, float], reports: dict[str, _Report]) -> set[str]:
        found: set[str] = set()
        if noted:
            found |= self.store.renew_many(noted, min(noted.values()), self.lease_s)
        if reports:
            rows = [(cid, since, rep, state) for cid, (since, rep, state) in reports.items()]
            found |= self.store.renew_reports(rows, self.lease_s)
        return found

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
