"""Portal fixtures: a real hub (SQLite) and headless Chromium driven by Playwright.

Chromium is Debian's package at /usr/bin/chromium (``.ci/run`` installs it); no browser
is downloaded. Browser tests skip, saying why, only when that binary is absent.
Screenshots of the main views are written to docs/img/portal-*.png when
``TAU_PORTAL_SCREENSHOTS=1``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from taugrid.store import db
from tests.hub.harness import HubServer, make_hub

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "img"


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
    pg = ctx.new_page()
    pg.set_default_timeout(20_000)
    yield pg
    ctx.close()


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[sa.Engine]:
    eng = db.create_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    db.migrate(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def hub(sqlite_engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    server = HubServer(make_hub(sqlite_engine, tmp_path / "home")).start()
    yield server
    server.stop()


def login(page: Any, url: str, token: str) -> None:
    page.goto(f"{url}/ui/login")
    page.fill("#token", token)
    follow(page, "button[type=submit]")


def follow(page: Any, selector: str) -> None:
    """Click what ``selector`` names and wait until the page it leads to has loaded.

    Playwright's click returns once a navigation is committed, while the new page may
    still be parsing; ``locator.count()`` does not wait, so under load it counted the
    elements of a half-parsed page (CI at d190f2f: 0 of 2 chart lines)."""
    page.click(selector)
    page.wait_for_load_state("load")


def shot(page: Any, name: str) -> None:
    """Save a screenshot for docs/portal.md (only with TAU_PORTAL_SCREENSHOTS=1)."""
    if os.environ.get("TAU_PORTAL_SCREENSHOTS") == "1":
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"portal-{name}.png"), full_page=True)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field in the page"
    return found.group(1)
