"""Agents' lease renewals in batches (``hub.core.leases``) on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from typing import Any

import pytest
import sqlalchemy as sa

from taugrid.hub.core import leases
from taugrid.store import clusters
from taugrid.store import schema as t

LEASE_S = 30.0


def _expires(store: clusters.ClusterStore, cluster_id: str) -> float:
    row = store.get(cluster_id)
    assert row is not None
    return float(row["lease_expires"])


def test_without_a_flusher_every_renewal_is_written_at_once(engine: sa.Engine) -> None:
    store = clusters.ClusterStore(engine)
    store.upsert("c1", "r", 1.0, {})
    box = leases.Leases(store, LEASE_S)
    end = box.renew("c1", None, None)
    assert end > time.time() + LEASE_S - 5
    assert _expires(store, "c1") == end
    assert box.renew("nope", None, None) == 0.0


def test_noted_renewals_are_written_in_one_statement(engine: sa.Engine) -> None:
    store = clusters.ClusterStore(engine)
    for cid in ("c1", "c2"):
        store.upsert(cid, "r", 1.0, {})
    box = leases.Leases(store, LEASE_S, every_s=3600)  # batching on; flushed by hand here
    box.start()
    try:
        for cid in ("c1", "c2"):
            box.renew(cid, None, None)  # first seen: written at once, now known
        store.set_state("c2", "unknown")  # the leader declared lost contact meanwhile
        before = {cid: _expires(store, cid) for cid in ("c1", "c2")}
        time.sleep(0.01)
        noted_at = time.time()
        ends = {cid: box.renew(cid, None, None) for cid in ("c1", "c2")}
        assert {cid: _expires(store, cid) for cid in ends} == before  # noted, not written
        box.flush()
        for cid, end in ends.items():
            assert noted_at + LEASE_S <= _expires(store, cid) <= end  # never later than at once
        assert (store.get("c2") or {})["state"] == "ready"
        # A report, or a health state, is written at once as before.
        end = box.renew("c1", {"nodes": []}, "degraded")
        assert _expires(store, "c1") == end
        assert (store.get("c1") or {})["state"] == "degraded"
    finally:
        box.stop()


def test_the_flusher_writes_noted_renewals_by_itself(engine: sa.Engine) -> None:
    store = clusters.ClusterStore(engine)
    store.upsert("c1", "r", 1.0, {})
    box = leases.Leases(store, LEASE_S)
    box.start()
    try:
        box.renew("c1", None, None)
        before = _expires(store, "c1")
        time.sleep(0.01)
        end = box.renew("c1", None, None)
        deadline = time.monotonic() + 10
        while _expires(store, "c1") == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert before < _expires(store, "c1") <= end
    finally:
        box.stop()


@pytest.mark.parametrize("report", [None, {"nodes": []}], ids=["renewal", "idle-report"])
def test_a_cluster_gone_from_the_store_hears_not_registered(
    engine: sa.Engine, report: dict[str, Any] | None
) -> None:
    store = clusters.ClusterStore(engine)
    store.upsert("c1", "r", 1.0, {})
    box = leases.Leases(store, LEASE_S, every_s=3600)
    box.start()
    try:
        box.renew("c1", None, None)
        with engine.begin() as c:
            c.execute(t.clusters.delete().where(t.clusters.c.id == "c1"))
        assert box.renew("c1", report, None, urgent=False) > 0  # noted: the flush finds it gone
        box.flush()
        assert store.get("c1") is None  # a noted report does not bring it back
        assert box.renew("c1", report, None, urgent=False) == 0.0  # at once: not registered
    finally:
        box.stop()


def test_stop_writes_what_was_noted(engine: sa.Engine) -> None:
    store = clusters.ClusterStore(engine)
    store.upsert("c1", "r", 1.0, {})
    box = leases.Leases(store, LEASE_S, every_s=3600)  # only stop writes
    box.start()
    box.renew("c1", None, None)
    before = _expires(store, "c1")
    time.sleep(0.01)
    box.renew("c1", None, None)
    box.stop()
    assert _expires(store, "c1") > before


def test_a_report_with_nothing_new_is_noted_and_a_new_one_written_at_once(
    engine: sa.Engine,
) -> None:
    store = clusters.ClusterStore(engine)
    for cid in ("c1", "c2"):
        store.upsert(cid, "r", 1.0, {})
    box = leases.Leases(store, LEASE_S, every_s=3600)  # flushed by hand here
    box.start()
    try:
        for cid in ("c1", "c2"):
            box.renew(cid, None, None)  # first seen: written at once, now known
        store.set_state("c2", "unknown")
        before = _expires(store, "c1")
        time.sleep(0.01)
        end = box.renew("c1", {"nodes": [], "n": 1}, "ready", urgent=False)
        box.renew("c2", {"nodes": [], "n": 1}, None, urgent=False)
        assert (store.get("c1") or {})["report"] == {} and _expires(store, "c1") == before
        box.flush()  # both reports in one transaction
        c1, c2 = store.get("c1") or {}, store.get("c2") or {}
        assert c1["report"] == {"nodes": [], "n": 1} and before < c1["lease_expires"] <= end
        assert c2["report"] == {"nodes": [], "n": 1} and c2["state"] == "ready"
        # A newer report noted, then an urgent one written at once: the flush that
        # follows does not bring the older one back.
        box.renew("c1", {"nodes": [], "n": 2}, None, urgent=False)
        box.renew("c1", {"nodes": [], "n": 3}, "degraded")
        assert (store.get("c1") or {})["report"]["n"] == 3
        box.flush()
        c1 = store.get("c1") or {}
        assert c1["report"]["n"] == 3 and c1["state"] == "degraded"
    finally:
        box.stop()


def test_a_cluster_silent_for_half_a_lease_renews_at_once(engine: sa.Engine) -> None:
    """Back from a partition, its lease is written by its first sync, not by the next
    flush: the leader must not find it stale while it syncs again."""
    store = clusters.ClusterStore(engine)
    store.upsert("c1", "r", 1.0, {})
    box = leases.Leases(store, 0.4, every_s=3600)  # flushed by hand only
    box.start()
    try:
        box.renew("c1", None, None)  # first seen: written
        noted = box.renew("c1", None, None)  # at once after: noted
        assert _expires(store, "c1") < noted
        time.sleep(0.25)  # silent for more than half the lease
        end = box.renew("c1", None, None)
        assert _expires(store, "c1") == end
    finally:
        box.stop()
