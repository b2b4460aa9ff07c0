"""Headless Chromium for browser tests (the portal's, ``tau dev``'s): Debian's package at
/usr/bin/chromium (``.ci/run`` installs it), driven by Playwright; no browser is downloaded.

One Playwright per test process: its sync API refuses a second ``sync_playwright()`` while
one is open (the portal's session-long browser made ``tau dev``'s own fail in CI), so every
browser test takes the session's ``browser`` fixture (tests/conftest.py) from ``launch``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ARGS", "CHROMIUM", "launch"]

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def launch() -> Iterator[Any]:
    """A launched headless Chromium until the generator is closed; skips without one."""
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium: install Debian's chromium package (.ci/run does)")
    from playwright import sync_api  # a dev dependency: missing it is an error, not a skip

    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield b
        b.close()
