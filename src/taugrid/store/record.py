"""The evidence record: ``<workspace>/runs/<run-id>/`` in a record store.

The layout is documented in docs/ARCHITECTURE.md, "The run record".

The store (``dataplane.recordstore``, seen here through the ``Store`` protocol) is the
data root directory in the embedded platform (``<data_root>/<workspace>/runs/<run-id>/``
on disk, as always) or an object store.
Owns the layout and every write the hub makes into it: ``run.json`` (rewritten as the
run progresses), ``tau.yaml`` (as submitted), ``rendered/``, ``logs/`` (appended from
agent log chunks), ``events.jsonl`` (append-only), ``FENCE`` (the authoritative
attempt's fencing token, read by the in-job SDK before it commits checkpoints or
artifacts) and ``COMPLETE`` (written last). The job itself writes ``metrics/``,
``checkpoints/`` and ``artifacts/`` through ``taugrid.sdk.injob``.

``resolve_inside`` is the only way to turn a user-supplied relative path into a file
of the record: it rejects anything that escapes the run directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from taugrid.errors import UserError

__all__ = ["CODE_ARCHIVE", "NO_ATTEMPT", "RunRecord", "Store", "resolve_inside"]

SUBDIRS = ("rendered", "logs", "metrics", "checkpoints", "artifacts")
CODE_ARCHIVE = "rendered/code.zip"
"""The run's code as submitted (a zip), which agents and pods unpack to run it."""
NO_ATTEMPT = 0
"""The ``FENCE`` value between attempts (an attempt ended, the next not placed yet):
tokens start at 1, so no attempt matches it."""


def resolve_inside(root: Path, rel: str) -> Path:
    """``root/rel`` if it stays inside ``root`` (after resolving links), else UserError."""
    if "\x00" in rel or len(rel) > 4096 or any(len(part) > 255 for part in rel.split("/")):
        # NUL and over-long names make the OS calls below raise instead of answering.
        raise UserError(
            "not a valid path in a run's record (NUL byte or over-long name)",
            "use a path relative to the run directory, as listed by: tau run get NAME --list",
        )
    base = root.resolve()
    target = (base / rel.lstrip("/")).resolve()
    if target != base and base not in target.parents:
        raise UserError(
            f"path '{rel}' is outside the run's record", "use a path relative to the run directory"
        )
    return target


class Store(Protocol):
    """What a record needs of its record store (``dataplane.recordstore.RecordStore``);
    every operation refuses keys that leave the store's root (``..``)."""

    url: str

    def write(self, key: str, data: bytes) -> None: ...
    def read(self, key: str) -> bytes | None: ...
    def read_text(self, key: str) -> str | None: ...
    def append(self, key: str, data: bytes) -> None: ...
    def exists(self, key: str) -> bool: ...
    def delete(self, key: str) -> None: ...
    def list(self, prefix: str) -> list[tuple[str, int]]: ...
    def get_file(self, key: str, dest: Path) -> bool: ...
    def local_path(self, key: str) -> Path | None: ...


class RunRecord:
    """One run's record: keys ``<workspace>/runs/<run-id>/...`` of a record store."""

    def __init__(self, store: Store, workspace: str, run_id: str) -> None:
        self.store = store
        self.prefix = f"{workspace}/runs/{run_id}"

    @property
    def dir(self) -> Path | None:
        """The record's directory when the store is a local directory, else None."""
        return self.store.local_path(self.prefix)

    @property
    def location(self) -> str:
        """Where the record is, for people: a directory or ``<store URL>/<prefix>``."""
        local = self.dir
        return str(local) if local is not None else f"{self.store.url}/{self.prefix}"

    def key(self, rel: str) -> str:
        """The store key of ``rel`` (the store refuses one that leaves the root)."""
        return f"{self.prefix}/{rel.lstrip('/')}"

    def create(self, tau_yaml: str) -> None:
        local = self.dir
        if local is not None:  # object stores have no empty directories
            for sub in SUBDIRS:
                (local / sub).mkdir(parents=True, exist_ok=True)
        self.store.write(self.key("tau.yaml"), tau_yaml.encode())

    def write_json(self, name: str, doc: dict[str, Any]) -> None:
        text = json.dumps(doc, indent=2, sort_keys=True, default=str)
        self.store.write(self.key(name), text.encode())

    def write_rendered(self, name: str, text: str) -> None:
        self.write_bytes(f"rendered/{name}", text.encode())

    def write_bytes(self, rel: str, data: bytes) -> None:
        self.store.write(self.key(rel), data)

    def read_bytes(self, rel: str) -> bytes | None:
        return self.store.read(self.key(rel))

    def write_events(self, events: list[dict[str, Any]]) -> None:
        """Rewrite ``events.jsonl`` (every lifecycle event, in order) from the store."""
        text = "".join(json.dumps(e, default=str) + "\n" for e in events)
        self.store.write(self.key("events.jsonl"), text.encode())

    def append_log(self, name: str, chunk: str) -> None:
        self.store.append(self.key(f"logs/{name}"), chunk.encode())

    def set_fence(self, token: int) -> None:
        self.store.write(self.key("FENCE"), str(token).encode())

    def complete(self) -> None:
        """``COMPLETE``: written last, when the record is whole."""
        self.store.write(self.key("COMPLETE"), b"")

    def reopen(self) -> None:
        """Remove ``COMPLETE`` (a resumed run's record is no longer whole)."""
        self.store.delete(self.key("COMPLETE"))

    def is_complete(self) -> bool:
        return self.store.exists(self.key("COMPLETE"))

    def read_log(self, name: str = "driver.log") -> str:
        return self.store.read_text(self.key(f"logs/{name}")) or ""

    def files(self, sub: str = "") -> list[dict[str, Any]]:
        """Files under the record (or a subdirectory), relative paths with sizes."""
        local = self.dir
        if local is not None and sub:
            resolve_inside(local, sub)  # refuse what escapes the record, as before
        top = self.key(sub).rstrip("/") if sub else self.prefix
        base = f"{sub.strip('/')}/" if sub.strip("/") else ""
        return [{"path": base + rel, "size": size} for rel, size in self.store.list(top)]

    def missing_outputs(self, outputs: list[dict[str, Any]]) -> list[str]:
        """Declared required outputs that do not exist under ``artifacts/``."""
        return [o["path"] for o in outputs if o.get("required", True) and not self._has(o["path"])]

    def _has(self, rel: str) -> bool:
        """A file, or a folder with at least one file, at ``artifacts/<rel>``."""
        key = self.key(f"artifacts/{rel}")
        return self.store.exists(key) or bool(self.store.list(key))
