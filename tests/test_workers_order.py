"""The order parallel workers take test groups in (tests/workers.py): longest first, and
the groups that use a fixture the controller named late (weed's S3 server while CI still
builds it) after every other group, whatever their length."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests import workers


@dataclasses.dataclass
class _Item:
    """What ``workers.order`` reads of a collected test: its node id, fixtures, markers."""

    nodeid: str
    fixturenames: tuple[str, ...] = ()
    markers: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


ITEMS = [
    _Item("tests/a/test_quick.py::t"),
    _Item("tests/a/test_s3.py::t", ("weed_s3",), ("long",)),
    _Item("tests/a/test_ray.py::t", (), ("slow",)),
]


def _ordered(monkeypatch: pytest.MonkeyPatch, late: str) -> list[str]:
    monkeypatch.setenv(workers.LATE_ENV, late)
    items = list(ITEMS)
    groups = {workers.module_of(i.nodeid): workers.module_of(i.nodeid) for i in items}
    workers.order(items, groups, {})  # type: ignore[arg-type]
    return [i.nodeid.split("/")[-1].split(".")[0] for i in items]


def test_longest_groups_first_by_their_markers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _ordered(monkeypatch, "") == ["test_s3", "test_ray", "test_quick"]


def test_groups_of_a_late_fixture_go_last(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _ordered(monkeypatch, "weed_s3") == ["test_ray", "test_quick", "test_s3"]


def test_recorded_seconds_merge_into_the_file_as_it_is_now(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # CI's two tiers side by side: this run started with a snapshot of nothing, the other
    # tier wrote its groups since; this run's write keeps them
    durations = tmp_path / "test-durations.json"
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text("{}")
    monkeypatch.setattr(workers, "DURATIONS", durations)
    monkeypatch.setenv(workers.DURATIONS_ENV, str(snapshot))
    durations.write_text(json.dumps({"tests/unit/test_a.py": 300.0, "fixture:k": 5.0}))
    monkeypatch.setattr(workers, "_seconds", {"fixture:k": 1900.04})
    workers.write_recorded()
    assert json.loads(durations.read_text()) == {
        "fixture:k": 1900.0,
        "tests/unit/test_a.py": 300.0,
    }
