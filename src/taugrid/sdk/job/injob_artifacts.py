"""Artifacts of a run: fence-checked copies into ``$TAU_OUTPUT_DIR/artifacts/``.

Layout::

    artifacts/
      <name>               a file or a directory tree
      MANIFEST.json        {"format": 1, "artifacts": {<name>: entry}}
      .manifest.lock       flock serialising manifest updates between ranks

A manifest entry holds ``kind`` (file|dir), ``sha256`` (of the file, or ``tree_digest``
of a dir), ``files`` (per-file sha256 for a dir), ``size``, ``attempt``,
``fencing_token``, ``rank`` and ``saved_at``.

Invariants:
- The copy lands in a hidden temporary sibling first and is renamed into place, so an
  artifact is never visible half-copied; saving a name again replaces it.
- The fence is checked before copying and again before the rename (a copy can take
  long enough for the attempt to be revoked meanwhile).
- The manifest is rewritten atomically under the lock; it lists exactly the artifacts
  saved through this API.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from taugrid import errors
from taugrid.record import files, layout
from taugrid.sdk.job import injob_env, injob_fence

__all__ = ["ArtifactError", "artifacts_dir", "save_artifact"]

_LOCK_FILE = ".manifest.lock"
_RESERVED = frozenset({layout.MANIFEST_FILE, _LOCK_FILE})


class ArtifactError(errors.UserError):
    """``save_artifact`` got a path or name it cannot use."""


def artifacts_dir() -> Path:
    """``<output_dir>/artifacts`` (created on demand)."""
    path = injob_env.output_dir() / layout.ARTIFACTS_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_artifact(path: str | os.PathLike[str], name: str | None = None) -> Path:
    """Copy a file or directory into the run's artifacts; returns where it landed."""
    source = Path(path)
    if not source.exists():
        raise ArtifactError(
            f"artifact {source} does not exist", "save the file first, then call save_artifact"
        )
    final_name = _check_name(name if name is not None else source.name)
    action = f"save artifact {final_name!r}"
    injob_fence.check_fence(action)
    root = artifacts_dir()
    tmp = root / f".tmp-{final_name}-{uuid.uuid4().hex}"
    try:
        entry = _copy(source, tmp)
        injob_fence.check_fence(action)
        target = root / final_name
        with _manifest_lock(root):
            _replace(tmp, target)
            _record(root, final_name, entry)
    finally:
        _remove(tmp)
    return target


def _check_name(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or name.startswith(".") or name in _RESERVED:
        raise ArtifactError(
            f"artifact name {name!r} is not allowed",
            "use a plain file name without '/', not starting with '.', "
            f"and not {sorted(_RESERVED)}",
        )
    return name


def _copy(source: Path, tmp: Path) -> dict[str, Any]:
    if source.is_dir():
        shutil.copytree(source, tmp, symlinks=False)
        digests = files.file_digests(tmp, fsync=True)
        size = sum((tmp / rel).stat().st_size for rel in digests)
        return {
            "kind": "dir",
            "sha256": files.tree_digest(digests),
            "files": digests,
            "size": size,
        }
    shutil.copyfile(source, tmp)
    return {
        "kind": "file",
        "sha256": files.file_sha256(tmp, fsync=True),
        "size": tmp.stat().st_size,
    }


def _replace(tmp: Path, target: Path) -> None:
    if target.is_dir() and not target.is_symlink():
        old = target.parent / f".old-{target.name}-{uuid.uuid4().hex}"
        os.rename(target, old)
        os.rename(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        # os.replace is atomic for a file target; a file cannot replace a dir and
        # vice versa, so a dir tmp over a file target goes through unlink first.
        if tmp.is_dir() and target.exists():
            target.unlink()
        os.replace(tmp, target)
    files.fsync_dir(target.parent)


def _record(root: Path, name: str, entry: dict[str, Any]) -> None:
    doc = files.read_json(root / layout.MANIFEST_FILE) or {}
    artifacts = doc.get("artifacts")
    if not isinstance(artifacts, dict):
        artifacts = {}
    artifacts[name] = {
        **entry,
        "attempt": injob_env.attempt(),
        "fencing_token": injob_env.fencing_token(),
        "rank": injob_env.rank(),
        "run_id": injob_env.run_id(),
        "saved_at": time.time(),
    }
    files.write_json_atomic(root / layout.MANIFEST_FILE, {"format": 1, "artifacts": artifacts})


@contextlib.contextmanager
def _manifest_lock(root: Path) -> Iterator[None]:
    with (root / _LOCK_FILE).open("a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
