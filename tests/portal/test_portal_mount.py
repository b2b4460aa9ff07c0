"""The hub daemon serves the portal under /ui through its extension hook; a hub restart
while a page is open: the page reconnects and catches up."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from taugrid.hub.server import app
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer, free_port, make_hub
from tests.portal.conftest import login


def _daemon(home: Path, port: int, **env: str) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable,
        "-m",
        "taugrid.hub.server.daemon",
        "--home",
        str(home),
        "--port",
        str(port),
    ]
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TAU_")}
    return subprocess.Popen(argv, env={**clean, **env}, stdout=subprocess.DEVNULL)


def _get(port: int, path: str, timeout: float = 60) -> httpx.Response:
    deadline = time.time() + timeout
    while True:
        try:
            return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=10)
        except httpx.HTTPError:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def test_hub_daemon_serves_the_portal_and_can_turn_it_off(tmp_path: Path) -> None:
    port = free_port()
    proc = _daemon(tmp_path / "home", port)
    try:
        r = _get(port, "/ui/login")
        assert r.status_code == 200 and 'name="token"' in r.text
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert _get(port, "/ui/static/portal.js").status_code == 200
        paths = _get(port, "/openapi.json").json()["paths"]
        assert not [p for p in paths if p.startswith("/ui")]  # not part of the API
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    port = free_port()
    proc = _daemon(tmp_path / "home2", port, TAU_HUB_EXTENSIONS="")
    try:
        assert _get(port, "/healthz").status_code == 200
        assert _get(port, "/ui/login").status_code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_missing_extension_is_skipped() -> None:
    import fastapi

    assert app.install_extensions(fastapi.FastAPI(), "taugrid.no_such_extension") == []


@pytest.mark.slow  # about 30 s: restarts the hub under a live page
def test_page_reconnects_after_hub_restart_and_catches_up(
    sqlite_engine: sa.Engine, tmp_path: Path, page: Any
) -> None:
    server = HubServer(make_hub(sqlite_engine, tmp_path / "home")).start()
    port = server.port
    with server.http() as admin:
        tb.ok(tb.submit(admin, name="before-restart"), 201)
    login(page, server.url, server.admin_token)
    page.wait_for_function("() => document.getElementById('live-status').textContent === 'live'")
    server.stop()
    page.wait_for_function(
        "() => document.getElementById('live-status').textContent.startsWith('reconnecting')"
    )
    server = HubServer(make_hub(sqlite_engine, tmp_path / "home"), port=port).start()
    try:
        with server.http() as admin:
            tb.ok(tb.submit(admin, name="after-restart"), 201)
        page.wait_for_function(
            "() => document.querySelector('table.runs').textContent.includes('after-restart')",
            timeout=60_000,
        )
        assert "before-restart" in page.inner_text("table.runs")
        assert page.url.endswith("/ui/runs")  # still signed in: the cookie outlives a restart
    finally:
        server.stop()
