"""CLI fixtures: a real hub server on the test's database (SQLite, and PostgreSQL where
configured), no Ray; the ``tau`` console script talks to it over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.hub.harness import HubServer, make_hub


@pytest.fixture
def server(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    s = HubServer(make_hub(engine, tmp_path / "hub-home")).start()
    yield s
    s.stop()
