"""Files only their owner reads: secrets (tokens, credentials, recorded commands) and the
platform's state (the hub's database, run records).

``new_token`` makes a bearer token's secret (the hub stores only its hash). ``write``
creates or replaces a file with mode 0600 (and makes it 0600 if it existed);
``restrict`` sets the process's umask so that everything a daemon creates afterwards
(``hub.db``, run records, logs) is readable by its owner only. Imports nothing of
taugrid: every layer may use it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["UMASK", "new_token", "restrict", "write"]

UMASK = 0o077
"""No group or other bits on anything a TauGrid daemon creates."""


def new_token() -> str:
    """A fresh bearer token secret: ``tau_`` and 43 URL-safe characters."""
    return f"tau_{secrets.token_urlsafe(32)}"


def write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (parents created), readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(path, 0o600)
    return path


def restrict() -> None:
    """From now on this process (and what it starts) creates private files only."""
    os.umask(UMASK)
