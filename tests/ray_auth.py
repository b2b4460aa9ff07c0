"""Ray's token authentication inside a test process, scoped to a block.

A test that talks to a Ray cluster with token authentication sets ``RAY_AUTH_MODE=token``
and ``RAY_AUTH_TOKEN_PATH`` in its own process. Ray keeps process-wide copies of both:
RayConfig's auth mode (read from the environment when the config is initialised) and
the token loader's cache. Restoring the environment alone leaves Ray in token mode with
no token to find (the file went with the test's directory), and the next GCS client any
later test in the same pytest worker creates aborts the whole process in a ``RAY_CHECK``
(``authentication_token_loader.cc``: "Token authentication is enabled but Ray couldn't
find an authentication token"). That was the worker crash CI saw in the leader-kill and
elastic relocation tests (Dec 2026), which ran in a worker after a spanning or guest-node
test. ``token_env`` re-reads both on the way in and on the way out, in Ray's own order
(``ray._private.authentication_test_utils.reset_auth_token_state``: the config first,
so a gRPC thread still draining does not reload the token under the old mode).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["token_env"]

_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_TOKEN")


def _reread() -> None:
    from ray._private.authentication_test_utils import reset_auth_token_state

    reset_auth_token_state()


@contextlib.contextmanager
def token_env(token: Path) -> Iterator[None]:
    """This process presents ``token`` to Ray inside the block, and nothing after."""
    saved = {k: os.environ.get(k) for k in _VARS}
    os.environ.pop("RAY_AUTH_TOKEN", None)
    os.environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)})
    _reread()
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _reread()
