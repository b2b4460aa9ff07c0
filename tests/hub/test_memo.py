"""``Hub.memo``: values shared by requests for a while, dropped when work changes."""

from __future__ import annotations

import threading
from pathlib import Path

import sqlalchemy as sa

from taugrid.hub.core import context
from taugrid.store import db
from tests.hub import harness


def _hub(tmp_path: Path) -> tuple[sa.Engine, context.Hub]:
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    return engine, harness.make_hub(engine, tmp_path / "home")


def test_a_work_value_is_computed_again_after_notify(tmp_path: Path) -> None:
    engine, hub = _hub(tmp_path)
    calls: list[int] = []

    def value() -> int:
        calls.append(1)
        return len(calls)

    assert hub.memo("k", 60, value) == 1
    assert hub.memo("k", 60, value) == 1
    hub.notify("c1")
    assert hub.memo("k", 60, value) == 2
    engine.dispose()


def test_a_time_only_value_is_computed_by_one_caller_while_others_get_the_old_one(
    tmp_path: Path,
) -> None:
    engine, hub = _hub(tmp_path)
    assert hub.memo("t", 0.0, lambda: "old", work=False) == "old"
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        assert release.wait(10)
        return "new"

    got: list[str] = []
    t = threading.Thread(target=lambda: got.append(hub.memo("t", 0.0, slow, work=False)))
    t.start()
    assert started.wait(10)
    # Expired (ttl 0) and being computed: the old value, not a second computation.
    assert hub.memo("t", 0.0, lambda: "second", work=False) == "old"
    release.set()
    t.join(10)
    assert got == ["new"]
    engine.dispose()
