"""Files of a record on disk: atomic writes, durable renames, and the record's digests.

Used wherever a record (or an attempt's scratch) is written on a filesystem: the in-job
SDK (``sdk.injob_*``), checkpoint commit and adoption (``record.checkpoints``), the
agent's uploads (``agent.records.recordsync``) and the local record store (``record.store``).
The digests are the record's format: a checkpoint marker's ``files`` and
``tree_sha256``, an artifact manifest's ``sha256``. Imports nothing from taugrid.

Invariants:
- ``write_atomic`` never leaves a half-written file under the final name: it writes a
  sibling temporary file, fsyncs it, ``os.replace``\\ s it and fsyncs the directory.
- ``file_digests`` maps every regular file below a directory (relative POSIX path) to
  its sha256, in sorted order; ``tree_digest`` folds that map into one sha256, so two
  trees with the same files and contents have the same digest wherever they live.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "file_digests",
    "file_sha256",
    "fsync_dir",
    "read_json",
    "regular_files",
    "tree_digest",
    "write_atomic",
    "write_json_atomic",
]

_CHUNK = 1 << 20


def fsync_dir(path: Path) -> None:
    """Make a rename or create inside ``path`` durable (best effort on odd filesystems)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so readers see the old or the new file, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def write_json_atomic(path: Path, doc: Mapping[str, Any]) -> None:
    """``write_atomic`` of a JSON document (sorted keys, trailing newline)."""
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    write_atomic(path, text.encode())


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when it is missing, unreadable or not an object."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def file_sha256(path: Path, *, fsync: bool = False) -> str:
    """sha256 of one file; with ``fsync`` also flush it to stable storage."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
        if fsync:
            os.fsync(fh.fileno())
    return digest.hexdigest()


def file_digests(
    root: Path, *, exclude: frozenset[str] = frozenset(), fsync: bool = False
) -> dict[str, str]:
    """``{relative path: sha256}`` of every regular file below ``root`` (sorted)."""
    return {
        rel: file_sha256(root / rel, fsync=fsync)
        for rel in sorted(_walk_files(root))
        if rel not in exclude
    }


def tree_digest(digests: Mapping[str, str]) -> str:
    """One sha256 over a ``file_digests`` map (order independent)."""
    outer = hashlib.sha256()
    for rel in sorted(digests):
        outer.update(f"{rel}\0{digests[rel]}\n".encode())
    return outer.hexdigest()


def regular_files(root: Path) -> list[str]:
    """Every regular file below ``root`` (relative POSIX paths, sorted, links left out);
    ``[root.name]`` when ``root`` is itself a file."""
    return [root.name] if root.is_file() else sorted(_walk_files(root))


def _walk_files(root: Path) -> Iterator[str]:
    for dirpath, _dirs, files in os.walk(root):
        base = Path(dirpath)
        for name in files:
            full = base / name
            if full.is_file() and not full.is_symlink():
                yield full.relative_to(root).as_posix()
