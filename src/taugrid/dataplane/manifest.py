"""Dataset manifests: every file of a replica with its size and sha256.

A manifest is ``[{"path", "size", "sha256"}]`` sorted by path (POSIX, relative to the
replica directory); its digest is the sha256 of its canonical JSON, so two replicas are
the same dataset exactly when their digests match. Partial files of an interrupted
transfer (``*.part``) are never part of a manifest.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["CHUNK", "PART_SUFFIX", "digest", "file_sha256", "scan", "total_size"]

CHUNK = 1 << 20
PART_SUFFIX = ".part"


def file_sha256(path: Path, h: Any = None) -> str:
    """sha256 of a file (feeding ``h`` when given, e.g. to resume hashing)."""
    h = h or hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(CHUNK):
            h.update(block)
    return str(h.hexdigest())


def scan(root: Path) -> list[dict[str, Any]]:
    """The manifest of the directory (or single file) ``root``."""
    if root.is_file():
        return [{"path": root.name, "size": root.stat().st_size, "sha256": file_sha256(root)}]
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != PART_SUFFIX)
    return [
        {"path": p.relative_to(root).as_posix(), "size": p.stat().st_size, "sha256": file_sha256(p)}
        for p in files
    ]


def digest(files: list[dict[str, Any]]) -> str:
    canon = json.dumps(files, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(canon).hexdigest()


def total_size(files: list[dict[str, Any]]) -> int:
    return sum(int(f["size"]) for f in files)
