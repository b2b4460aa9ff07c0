"""Named hub contexts (like kubectl's): which hub ``tau`` talks to without env variables.

Owns ``$TAU_HOME/contexts.json`` (mode 0600)::

    {"current": "lab", "previous": "local",
     "contexts": {"lab": {"hub_url": "http://127.0.0.1:41234",
                          "credentials": "/home/u/.tau/lab/hub/credentials.json"}}}

``local`` always exists and is never stored: the embedded platform of ``$TAU_HOME``
(``tau up``). Another context names a hub URL and the credentials file holding its
token (read when used, so a restarted hub's new token is picked up). ``tau lab up``
adds ``lab`` and makes it current; ``tau lab down`` removes it and goes back to the
context that was current before. ``TAU_HUB_URL``/``TAU_TOKEN`` override any context.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from taugrid import errors, private

__all__ = ["LOCAL", "Context", "Contexts"]

LOCAL = "local"
_FILE = "contexts.json"


class Context:
    """One named hub: its URL and the file that holds its token (None for ``local``)."""

    def __init__(self, name: str, hub_url: str | None, credentials: Path | None) -> None:
        self.name, self.hub_url, self.credentials = name, hub_url, credentials

    def token(self) -> str | None:
        if self.credentials is None or not self.credentials.exists():
            return None
        token = json.loads(self.credentials.read_text()).get("token")
        return str(token) if token else None


class Contexts:
    """The contexts of one ``$TAU_HOME``."""

    def __init__(self, home: Path) -> None:
        self.path = home / _FILE

    def _load(self) -> dict[str, Any]:
        if not self.path.exists():
            return {"current": LOCAL, "previous": None, "contexts": {}}
        try:
            doc = json.loads(self.path.read_text())
        except ValueError as exc:
            raise errors.UserError(
                f"{self.path} is not valid JSON ({exc})",
                f"fix it, or delete it to go back to the '{LOCAL}' context",
            ) from None
        doc.setdefault("contexts", {})
        return dict(doc)

    def _save(self, doc: dict[str, Any]) -> None:
        private.write(self.path, json.dumps(doc, indent=2))

    def current_name(self) -> str:
        name = self._load().get("current") or LOCAL
        return str(name)

    def get(self, name: str) -> Context:
        if name == LOCAL:
            return Context(LOCAL, None, None)
        entry = self._load()["contexts"].get(name)
        if entry is None:
            raise errors.UserError(
                f"no context named '{name}'", "see the contexts with: tau context list"
            )
        return Context(name, entry["hub_url"], Path(entry["credentials"]))

    def current(self) -> Context:
        return self.get(self.current_name())

    def names(self) -> list[str]:
        return [LOCAL, *sorted(self._load()["contexts"])]

    def use(self, name: str) -> None:
        """Make ``name`` current (the one it replaces becomes ``previous``)."""
        self.get(name)  # exists?
        doc = self._load()
        if doc.get("current", LOCAL) != name:
            doc["previous"], doc["current"] = doc.get("current", LOCAL), name
        self._save(doc)

    def add(self, name: str, hub_url: str, credentials: Path, *, use: bool = True) -> None:
        """Add (or replace) a context; with ``use`` make it current."""
        if name == LOCAL:
            raise errors.UserError(f"'{LOCAL}' is the embedded platform's context", "")
        doc = self._load()
        doc["contexts"][name] = {"hub_url": hub_url, "credentials": str(credentials)}
        self._save(doc)
        if use:
            self.use(name)

    def remove(self, name: str) -> str:
        """Forget ``name``; if it was current, go back to the previous one. Returns current."""
        doc = self._load()
        doc["contexts"].pop(name, None)
        if doc.get("current") == name:
            back = doc.get("previous")
            doc["current"] = back if back in doc["contexts"] or back == LOCAL else LOCAL
            doc["previous"] = None
        if doc.get("previous") == name:
            doc["previous"] = None
        self._save(doc)
        return str(doc["current"])
