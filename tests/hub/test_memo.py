"""``Hub.memo``: values shared by requests for a while, dropped when work changes."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
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


def _in_flight(
    hub: context.Hub, key: str, value: str
) -> tuple[threading.Thread, threading.Event, list[str]]:
    """A thread computing ``key`` that blocks until the returned event is set; what it
    got lands in the list."""
    started, release = threading.Event(), threading.Event()
    got: list[str] = []

    def slow() -> str:
        started.set()
        assert release.wait(30)
        return value

    t = threading.Thread(target=lambda: got.append(hub.memo(key, 60, slow)))
    t.start()
    assert started.wait(10)
    return t, release, got


def test_callers_of_a_work_value_wait_for_the_one_computing_it(tmp_path: Path) -> None:
    """A sync arriving while another computes a work value takes that computation's value
    (one query, not one per caller)."""
    engine, hub = _hub(tmp_path)
    first, release, got = _in_flight(hub, "w", "first")
    joiner = threading.Thread(target=lambda: got.append(hub.memo("w", 60, lambda: "again")))
    joiner.start()
    release.set()
    for t in (first, joiner):
        t.join(30)
    assert got == ["first", "first"]
    engine.dispose()


def test_a_caller_that_saw_work_change_does_not_wait_for_an_older_computation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a ``notify``, a computation that started before it may miss that change:
    the next caller computes its own at once instead of waiting for it."""
    monkeypatch.setattr(context, "_JOIN_S", 600.0)  # waiting would outlast the join below
    engine, hub = _hub(tmp_path)
    first, release, got = _in_flight(hub, "w", "before")
    hub.notify("c1")
    own: list[str] = []
    after = threading.Thread(target=lambda: own.append(hub.memo("w", 60, lambda: "after")))
    after.start()
    after.join(30)
    done_alone = not after.is_alive()
    release.set()
    first.join(30)
    after.join(30)
    assert done_alone and own == ["after"] and got == ["before"]
    assert hub.memo("w", 60, lambda: "third") == "after"  # the newer value is kept
    engine.dispose()


def test_an_expired_platform_being_read_again_serves_the_old_one_and_a_change_is_never_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Hub.platform``: while one request reads an expired effective platform again,
    the others get the old one (they once all waited on its lock); a tenancy change made
    during that read is not overwritten by the read's older result."""
    engine, hub = _hub(tmp_path)
    old = hub.platform
    started, release = threading.Event(), threading.Event()
    real_apply = hub.tenancy.apply

    def slow_apply(base: Any) -> Any:
        started.set()
        assert release.wait(30)
        return real_apply(base)

    monkeypatch.setattr(hub.tenancy, "apply", slow_apply)
    monkeypatch.setattr(context, "PLATFORM_TTL_S", 0.0)
    reader = threading.Thread(target=lambda: hub.platform)
    reader.start()
    assert started.wait(10)
    assert hub.platform is old  # not waiting for the read in progress
    hub.platform_changed()  # e.g. a quota approved meanwhile
    release.set()
    reader.join(30)
    changed = old.model_copy()
    monkeypatch.setattr(hub.tenancy, "apply", lambda base: changed)
    monkeypatch.setattr(context, "PLATFORM_TTL_S", 600.0)  # a kept read would be fresh
    assert hub.platform is changed  # the read that began before the change was not kept
    engine.dispose()
