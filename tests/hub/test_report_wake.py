"""A state report runs a scheduling cycle at once only when it says something new of
capacity (``hub.agents.agents._report_changed``)."""

from __future__ import annotations

from pathlib import Path

from taugrid.hub.agents import agents
from taugrid.store import db
from tests.hub import harness


def test_only_a_report_with_new_capacity_wakes_the_scheduler(tmp_path: Path) -> None:
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    hub = harness.make_hub(engine, tmp_path / "home")
    node = {"node_id": "n1", "gpus_free": 4.0, "checked_at": 1.0}
    report = {"gpu_free": 4, "last_heartbeat": 1.0, "avg_gpu_usage": 0.1, "nodes": [node]}
    assert agents._report_changed(hub, "c1", report)  # the first one
    same = {**report, "last_heartbeat": 2.0, "avg_gpu_usage": 0.7, "probes": {"b": {"rtt": 1}}}
    same["nodes"] = [{**node, "checked_at": 2.0}]
    assert not agents._report_changed(hub, "c1", same)
    freed = {**same, "gpu_free": 3, "nodes": [{**node, "gpus_free": 3.0}]}
    assert agents._report_changed(hub, "c1", freed)
    assert agents._report_changed(hub, "c2", same)  # another cluster's first
    engine.dispose()
