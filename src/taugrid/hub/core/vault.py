"""Workspace secrets: sealed at rest with the platform's key, opened only to hand a run's
values to the agent that starts it.

- **Scopes**: a workspace's own secrets (its members and admins set them) and the
  platform's (``store.secrets.PLATFORM_SCOPE``, admins only), which every workspace can
  use; a workspace's secret shadows a platform secret of the same name.
- **Sealing**: AES-256-GCM, a fresh 96-bit nonce per write, the scope and name as
  associated data (a sealed value copied to another row does not open). The key is
  ``$TAU_SECRETS_KEY`` (32 bytes, URL-safe base64) or, when unset, ``secrets.key`` in the
  hub's home (created 0600 on first use). Replicas of one hub must share the key.
- **Where values go**: into the agent's assignment of an attempt that has not been
  submitted yet (``hub.agents.agents``), and from there into the job's environment. Never into
  the run's spec or record, an event, the audit log (key names only), a listing or a log.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from taugrid import errors, private
from taugrid import home as tau_home
from taugrid.spec import models as spec_models
from taugrid.store import secrets as store

__all__ = ["KEY_ENV", "KEY_FILE", "SecretMissing", "Vault"]

KEY_ENV = tau_home.SECRETS_KEY_ENV
KEY_FILE = "secrets.key"
_NONCE = 12


class SecretMissing(errors.UserError):
    """A run names a secret (or a key of one) that its workspace cannot use."""


class Vault:
    """Sealed secrets of every workspace and of the platform."""

    def __init__(self, store_: store.SecretStore, home: Path) -> None:
        self.store = store_
        self._home = home
        self._aead: AESGCM | None = None
        self._lock = threading.Lock()

    # -- the key ------------------------------------------------------------------------
    def _cipher(self) -> AESGCM:
        with self._lock:
            if self._aead is None:
                self._aead = AESGCM(_load_key(self._home))
            return self._aead

    def _seal(self, scope: str, name: str, data: dict[str, str]) -> bytes:
        nonce = os.urandom(_NONCE)
        plain = json.dumps(data, sort_keys=True).encode()
        return nonce + self._cipher().encrypt(nonce, plain, f"{scope}/{name}".encode())

    def _open(self, row: dict[str, Any]) -> dict[str, str]:
        sealed, aad = bytes(row["sealed"]), f"{row['scope']}/{row['name']}".encode()
        try:
            plain = self._cipher().decrypt(sealed[:_NONCE], sealed[_NONCE:], aad)
        except InvalidTag:
            raise errors.SystemFault(
                f"secret {row['name']} cannot be opened with this hub's key",
                f"every replica of the hub must have the same {KEY_ENV} (or {KEY_FILE}); "
                "if the key was lost, set the secret again (`tau secret set`)",
            ) from None
        values: dict[str, str] = json.loads(plain)
        return values

    # -- operations ---------------------------------------------------------------------
    def put(self, scope: str, name: str, data: dict[str, str], actor: str) -> dict[str, Any]:
        """Create or replace secret ``name`` of ``scope``; its metadata."""
        if not data:
            raise errors.UserError(
                f"secret {name} has no keys", "give at least one KEY=VALUE (`tau secret set`)"
            )
        return self.store.put(scope, name, list(data), self._seal(scope, name, data), actor)

    def listing(self, workspace: str | None) -> list[dict[str, Any]]:
        """Metadata of the platform's secrets and (when given) a workspace's."""
        return self.store.listing(_scopes(workspace))

    def delete(self, scope: str, name: str) -> None:
        if not self.store.delete(scope, name):
            raise SecretMissing(
                f"there is no secret {name} in {_scope_words(scope)}",
                "see which exist with `tau secret list`",
            )

    def check(self, workspace: str, refs: Sequence[spec_models.SecretRef]) -> None:
        """Refuse refs to a secret or key the workspace does not have (names only)."""
        problems = [p for p in (_problem(self._meta(workspace, r.name), r) for r in refs) if p]
        if problems:
            raise SecretMissing(
                "; ".join(problems),
                f"set it with `tau secret set NAME KEY=VALUE --workspace {workspace}` "
                "(an admin can set one for every workspace with --platform), or remove it "
                "from runtime.secrets",
            )

    def values(self, workspace: str, refs: Iterable[dict[str, Any]]) -> dict[str, str]:
        """``env name → value`` of a run's ``runtime.secrets``; raises ``SecretMissing``."""
        out: dict[str, str] = {}
        opened: dict[str, dict[str, str]] = {}
        for raw in refs:
            ref = spec_models.SecretRef.model_validate(raw)
            if ref.name not in opened:
                row = self.store.sealed(_scopes(workspace), ref.name)
                opened[ref.name] = self._open(row) if row is not None else {}
            if ref.key not in opened[ref.name]:
                raise SecretMissing(
                    f"secret {ref.name} (key {ref.key}) no longer exists in workspace {workspace}",
                    "set it again with `tau secret set` and resubmit the run",
                )
            out[ref.env] = opened[ref.name][ref.key]
        return out

    def _meta(self, workspace: str, name: str) -> dict[str, Any] | None:
        rows = {r["scope"]: r for r in self.store.listing(_scopes(workspace)) if r["name"] == name}
        return rows.get(workspace) or rows.get(store.PLATFORM_SCOPE)


def _scopes(workspace: str | None) -> list[str]:
    return [workspace, store.PLATFORM_SCOPE] if workspace else [store.PLATFORM_SCOPE]


def _scope_words(scope: str) -> str:
    return "the platform" if scope == store.PLATFORM_SCOPE else f"workspace {scope}"


def _problem(meta: dict[str, Any] | None, ref: spec_models.SecretRef) -> str:
    if meta is None:
        return f"runtime.secrets names secret {ref.name}, which does not exist"
    if ref.key not in meta["keys"]:
        return f"secret {ref.name} has no key {ref.key} (its keys: {', '.join(meta['keys'])})"
    return ""


def _load_key(home: Path) -> bytes:
    text = os.environ.get(KEY_ENV, "").strip()
    if not text:
        path = home / KEY_FILE
        if not path.exists():
            private.write(path, base64.urlsafe_b64encode(os.urandom(32)).decode() + "\n")
        text = path.read_text().strip()
    try:
        key = base64.urlsafe_b64decode(text)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != 32:
        raise errors.SystemFault(
            f"the secrets key ({KEY_ENV} or {home / KEY_FILE}) is not 32 bytes of URL-safe base64",
            'make one with `python -c "import base64, os; '
            'print(base64.urlsafe_b64encode(os.urandom(32)).decode())"`',
        )
    return key
