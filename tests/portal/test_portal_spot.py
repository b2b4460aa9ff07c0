"""Spot capacity in a real browser against a real hub (the cluster played over the agent
API, no Ray): the platform page prices the cluster's spot pool and marks its spot node,
and a spot run's saving against on demand is on its run page and the cost page."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.hub import agent_builders as ab
from tests.hub import test_spot_hub as spot
from tests.hub.harness import HubServer, platform_hub
from tests.portal.conftest import follow, login, shot


@pytest.fixture
def spot_lab(sqlite_engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    """One cluster with an on-demand pool ($3.00) and a spot pool ($0.90)."""
    with platform_hub(sqlite_engine, tmp_path, spot.PLATFORM) as server:
        ab.sync(server, "a", spot.REPORT)
        yield server


def _spot_run_that_ran(server: HubServer) -> str:
    """A capacity spot run placed, run for a second and succeeded (its GPU-hours priced)."""
    assignment, run = spot._placed(server, "cheap", "  capacity: spot\n")
    token = assignment["token"]
    ab.sync(server, "a", spot.REPORT, attempts=[{"token": token, "state": "running"}])
    time.sleep(1.0)
    done = {"token": token, "state": "succeeded", "released": True}
    ab.sync(server, "a", spot.REPORT, attempts=[done])
    return str(run["id"])


@pytest.mark.slow  # a hub and a browser, about 15 s
def test_the_spot_price_node_and_saving_are_shown(spot_lab: HubServer, page: Any) -> None:
    run_id = _spot_run_that_ran(spot_lab)
    login(page, spot_lab.url, spot_lab.admin_token)
    follow(page, "nav >> text=Platform")
    line = page.inner_text("p.spot")
    assert line.startswith("spot $0.90/GPU-hour") and "reclaims per node-hour" in line, line
    row = page.locator("tr", has_text="a-sp").first.inner_text()
    assert "spot" in row and "spot" not in page.locator("tr", has_text="a-od").first.inner_text()
    shot(page, "platform-spot")
    page.goto(f"{spot_lab.url}/ui/runs/{run_id}")
    assert "less than on demand" in page.inner_text("main")
    follow(page, "nav >> text=Cost")
    header = page.locator("table.cost thead th").all_inner_texts()
    (row_text,) = page.locator("table.cost tbody tr").all_inner_texts()
    saved = row_text.split("\t")[header.index("Spot saved")]
    assert saved == "<$0.01", row_text  # a second of one GPU: 2.1 $/GPU-h less, above 0
