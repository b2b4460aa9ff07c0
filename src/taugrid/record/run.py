"""One run's record: ``<workspace>/runs/<run-id>/`` in a record store, and every write
the hub makes into it.

The keys are ``record.layout``'s (docs/ARCHITECTURE.md, "The run record"); the store
(``record.store.RecordStore``) is the data root directory in the embedded platform
(``<data_root>/<workspace>/runs/<run-id>/`` on disk, as always) or an object store.
Writes: ``run.json`` (rewritten as the run progresses), ``tau.yaml`` (as submitted),
``rendered/``, ``logs/`` (appended from agent log chunks), ``events.jsonl``
(append-only), ``FENCE`` (the authoritative attempt's fencing token, mirrored by the
agent for the in-job SDK's checks before it commits checkpoints or artifacts) and
``COMPLETE`` (written last). The job itself writes ``metrics/``, ``checkpoints/`` and
``artifacts/`` through ``taugrid.sdk.job.injob``, into scratch its agent uploads.

``resolve_inside`` is the only way to turn a user-supplied relative path into a file
of the record: it rejects anything that escapes the run directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from taugrid.errors import UserError
from taugrid.record import layout
from taugrid.record.store import RecordStore

__all__ = ["RunRecord", "resolve_inside"]


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


class RunRecord:
    """One run's record: keys ``<workspace>/runs/<run-id>/...`` of a record store."""

    def __init__(self, store: RecordStore, workspace: str, run_id: str) -> None:
        self.store = store
        self.prefix = layout.record_prefix(workspace, run_id)

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
            for sub in layout.SUBDIRS:
                (local / sub).mkdir(parents=True, exist_ok=True)
        self.store.write(self.key(layout.TAU_YAML), tau_yaml.encode())

    def write_json(self, name: str, doc: dict[str, Any]) -> None:
        text = json.dumps(doc, indent=2, sort_keys=True, default=str)
        self.store.write(self.key(name), text.encode())

    def write_rendered(self, name: str, text: str) -> None:
        self.write_bytes(f"{layout.RENDERED_DIR}/{name}", text.encode())

    def write_bytes(self, rel: str, data: bytes) -> None:
        self.store.write(self.key(rel), data)

    def read_bytes(self, rel: str) -> bytes | None:
        return self.store.read(self.key(rel))

    def write_events(self, events: list[dict[str, Any]]) -> None:
        """Rewrite ``events.jsonl`` (every lifecycle event, in order) from the store."""
        text = "".join(json.dumps(e, default=str) + "\n" for e in events)
        self.store.write(self.key(layout.EVENTS_FILE), text.encode())

    def append_log(self, name: str, chunk: str) -> None:
        self.store.append(self.key(f"{layout.LOGS_DIR}/{name}"), chunk.encode())

    def set_fence(self, token: int) -> None:
        self.store.write(self.key(layout.FENCE_FILE), str(token).encode())

    def complete(self) -> None:
        """``COMPLETE``: written last, when the record is whole."""
        self.store.write(self.key(layout.COMPLETE_FILE), b"")

    def reopen(self) -> None:
        """Remove ``COMPLETE`` (a resumed run's record is no longer whole)."""
        self.store.delete(self.key(layout.COMPLETE_FILE))

    def is_complete(self) -> bool:
        return self.store.exists(self.key(layout.COMPLETE_FILE))

    def read_log(self, name: str = layout.DRIVER_LOG) -> str:
        return self.store.read_text(self.key(f"{layout.LOGS_DIR}/{name}")) or ""

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
        key = self.key(f"{layout.ARTIFACTS_DIR}/{rel}")
        return self.store.exists(key) or bool(self.store.list(key))
