"""Record stores: where run records live, behind one interface, and the local one.

The record's layout: ``record.layout`` (docs/ARCHITECTURE.md, "The run record").

    RecordStore              keys are '/'-separated paths under the store's root,
    ├── LocalRecordStore     e.g. ``<ws>/runs/<run-id>/run.json``; a directory
    │                        (``$TAU_HOME/data`` in the embedded platform): the layout
    │                        on disk is exactly the run record's
    └── ObjectRecordStore    an fsspec URL (``s3://bucket/prefix``, ``memory://x``):
                             the same keys as objects under the prefix (``record.s3``)

Invariants, for both: ``write`` and ``put_file`` are atomic (a reader sees the old
content, nothing, or the whole new content: a temporary file renamed into place on
disk; one PUT on S3, which never shows a partial object); ``put_file`` returns the
sha256 it verified by reading the stored copy back; ``list`` never shows hidden
names (any path part starting with ``.``: temporaries, locks); a key never escapes
the root (``..``, absolute paths and NUL are refused with a ``UserError``).

Errors: ``RecordStoreError`` (a ``SystemFault``, retryable) when the store does not
answer or fails mid-operation; ``RecordStoreConfigError`` (a ``UserError``) when the
configuration is wrong — the bucket does not exist, the credentials are refused —
found by ``check`` (``tau platform validate`` and submit call it) with a message
saying which store and how to fix it.

Reaches no object store: ``record.s3`` opens a store from platform.yaml's ``records``.
"""

from __future__ import annotations

import abc
import os
from pathlib import Path

from taugrid.errors import SystemFault, UserError
from taugrid.record import files

__all__ = [
    "LocalRecordStore",
    "RecordStore",
    "RecordStoreConfigError",
    "RecordStoreError",
    "check_key",
    "hidden",
]


class RecordStoreError(SystemFault):
    """The record store did not answer or failed (retryable)."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message, hint, retryable=True)


class RecordStoreConfigError(UserError):
    """The record store's configuration is wrong: missing bucket, refused credentials."""


def check_key(key: str) -> str:
    """``key`` without leading '/' if it stays under the root, else UserError."""
    rel = key.lstrip("/")
    parts = rel.split("/")
    if "\x00" in rel or len(rel) > 4096 or any(len(p) > 255 for p in parts) or ".." in parts:
        raise UserError(
            f"'{key[:80]}' is not a path inside the run's record",
            "use a path relative to the run directory, as listed by: tau run get NAME --list",
        )
    return rel


class RecordStore(abc.ABC):
    """One place that holds run records; see the module docstring for the contract."""

    url: str
    """Where the store is, for messages (a directory or an fsspec URL)."""

    @abc.abstractmethod
    def write(self, key: str, data: bytes) -> None:
        """Replace ``key`` with ``data`` atomically."""

    @abc.abstractmethod
    def read(self, key: str) -> bytes | None:
        """The content of ``key``, or None when there is none."""

    @abc.abstractmethod
    def append(self, key: str, data: bytes) -> None:
        """Add ``data`` at the end of ``key`` (created when missing); one writer per key."""

    @abc.abstractmethod
    def exists(self, key: str) -> bool:
        """True when ``key`` is a stored file."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove ``key``; nothing happens when there is none."""

    @abc.abstractmethod
    def list(self, prefix: str) -> list[tuple[str, int]]:
        """``(path relative to prefix, size)`` of every visible file under ``prefix``."""

    @abc.abstractmethod
    def put_file(self, key: str, src: Path) -> str:
        """Store the file ``src`` at ``key`` atomically; returns its verified sha256."""

    @abc.abstractmethod
    def get_file(self, key: str, dest: Path) -> bool:
        """Copy ``key`` to ``dest`` (atomically there); False when there is no such key."""

    def local_path(self, key: str) -> Path | None:
        """The file holding ``key`` when the store is a local directory, else None."""
        return None

    @abc.abstractmethod
    def check(self) -> None:
        """Raise ``RecordStoreConfigError``/``RecordStoreError`` unless usable."""

    def read_text(self, key: str) -> str | None:
        data = self.read(key)
        return None if data is None else data.decode(errors="replace")


def hidden(rel: str) -> bool:
    """Whether ``list`` leaves ``rel`` out (a dot-named part: temporary files of uploads
    in flight; a framework's own dot-files are still stored and fetched by key)."""
    return any(part.startswith(".") for part in rel.split("/"))


class LocalRecordStore(RecordStore):
    """A directory: the embedded platform's ``$TAU_HOME/data`` (the run record's layout)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = str(root)

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def local_path(self, key: str) -> Path | None:
        return self._path(key)

    def write(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def read(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            return path.read_bytes() if path.is_file() else None
        except OSError:
            return None

    def append(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as fh:
            fh.write(data)

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def list(self, prefix: str) -> list[tuple[str, int]]:
        top = self._path(prefix)
        if not top.is_dir():
            return []
        base = top.resolve()
        out = []
        for p in sorted(top.rglob("*")):
            rel = p.relative_to(top).as_posix()
            # A link that leads out of the prefix is not listed (fetching it is refused).
            if p.is_file() and base in p.resolve().parents and not hidden(rel):
                out.append((rel, p.stat().st_size))
        return out

    def put_file(self, key: str, src: Path) -> str:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(src.read_bytes())
        digest = files.file_sha256(tmp)
        os.replace(tmp, path)
        return digest

    def get_file(self, key: str, dest: Path) -> bool:
        data = self.read(key)
        if data is None:
            return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
        return True

    def check(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RecordStoreConfigError(
                f"record store {self.root} cannot be created: {exc.strerror}",
                "point records.url (platform.yaml) or TAU_DATA_ROOT at a writable directory",
            ) from exc
