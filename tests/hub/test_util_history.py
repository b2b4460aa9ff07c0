"""The utilisation history: a region's first point at once, then every region from one
read of the clusters per ``SAMPLE_S`` (``hub.metrics.util_history``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from taugrid.hub.metrics import util_history
from taugrid.store import db
from tests.hub import harness


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_first_points_at_once_then_one_read_for_the_fleet_per_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    hub = harness.make_hub(engine, tmp_path / "home")
    hub.clusters.upsert("a1", "a", 30, {"gpu_busy": 1, "gpu_free": 3})
    hub.clusters.upsert("b1", "b", 30, {"gpu_busy": 2, "gpu_free": 2})
    hub.clusters.upsert("c1", "c", 30, {"gpu_busy": 0, "gpu_free": 0})  # no GPUs
    reads: list[str] = []
    real_all = hub.clusters.all

    def counted() -> list[dict[str, Any]]:
        reads.append("all")
        return real_all()

    monkeypatch.setattr(hub.clusters, "all", counted)
    clock = Clock()
    h = util_history.History(hub, clock)

    def points(region: str) -> list[float]:
        return [p["utilization"] for p in h.series()["regions"].get(region, [])]

    h.record("a")  # first report of a: sampled at once
    clock.now += 1
    h.record("b")
    clock.now += 1
    h.record("c")  # no GPUs: no point
    assert (points("a"), points("b"), points("c")) == ([0.25], [0.5], [])
    for _ in range(8):  # reports keep coming, more often than SAMPLE_S
        clock.now += 1
        h.record("a")
        h.record("b")
    # 1,002 .. 1,010: one fleet round at 1,003 (too soon after the first points) and
    # one at 1,008 that sampled both regions; every region from one read each.
    assert reads == ["all", "all"]
    assert (points("a"), points("b")) == ([0.25, 0.25], [0.5, 0.5])
    engine.dispose()
