"""Files only their owner reads: secrets (tokens, credentials, recorded commands) and the
platform's state (the hub's database, run records).

``new_token`` makes a bearer token's secret (the hub stores only its hash). ``write``
creates or replaces a file with mode 0600 (and makes it 0600 if it existed);
``restrict`` sets the process's umask so that everything a daemon creates afterwards
(``hub.db``, run records, logs) is readable by its owner only. ``session_cookie`` and
``cookie_token`` stamp a bearer token with its sign-in time for a browser's session
cookie (``ISSUED.MAC.TOKEN``, the MAC keyed by the token: the portal's ``tau_session``,
an interactive session's ``tau_dev``). Imports nothing of taugrid: every layer may use it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path

__all__ = ["UMASK", "cookie_token", "new_token", "restrict", "session_cookie", "write"]

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


def _stamp(token: str, issued: int) -> str:
    return hmac.new(token.encode(), f"session:{issued}".encode(), hashlib.sha256).hexdigest()[:32]


def session_cookie(token: str, issued: float | None = None) -> str:
    """A session cookie's value for ``token`` signed in at ``issued`` (now)."""
    at = int(time.time() if issued is None else issued)
    return f"{at}.{_stamp(token, at)}.{token}"


def cookie_token(value: str, max_age_s: float) -> str | None:
    """The token of a session cookie's value; None when absent, altered or older than
    ``max_age_s``."""
    issued, _, rest = value.partition(".")
    mac, _, token = rest.partition(".")
    if (
        not token
        or not issued.isdigit()
        or not hmac.compare_digest(mac, _stamp(token, int(issued)))
    ):
        return None
    if time.time() - int(issued) > max_age_s:
        return None
    return token
