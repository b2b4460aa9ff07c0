"""Hub fixtures: a real hub server per test (see harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.hub.harness import HubServer, make_hub


@pytest.fixture
def hub_server(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    server = HubServer(make_hub(engine, tmp_path / "home")).start()
    yield server
    server.stop()
