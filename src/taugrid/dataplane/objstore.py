"""Object-storage replicas: a dataset replica may be an fsspec URL (``s3://bucket/prefix``,
``gs://``, ``memory://``, ...) instead of a directory under a region's data root.

Owns scanning such a replica into a manifest (``dataplane.manifest`` format: each file's
path relative to the URL, size and sha256) and copying it into a region's data root with
the same semantics as agent-to-agent transfers (``dataplane.transfer.copy``): each file
lands in a ``.part`` first; a retry re-hashes the part and reads the object from that
offset (a ranged GET on S3); a file is renamed into place only when its sha256 matches.
A copy *into* object storage (``upload``) goes through a local spool fetched that way,
then per file: an object already there with the manifest size is skipped (it was
verified before it was moved into place); otherwise it is written to ``<key>.part``,
read back and hashed, and moved to ``<key>`` only when its sha256 matches — so a retry
resumes file by file (object stores cannot append to a partial object).

``StorageOptions`` maps a protocol to the keyword arguments of its filesystem (for S3:
``endpoint_url``, ``key``, ``secret``, ...); the agent daemon takes them from
``--storage-option PROTOCOL.KEY=VALUE``. fsspec and its protocol drivers (s3fs) are
imported lazily, only when a URL replica is used. Driver errors (network, permission,
missing object) become ``transfer.TransferError`` with the driver's message.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from taugrid.dataplane import transfer

__all__ = ["StorageOptions", "fetch", "is_url", "scan", "upload"]

StorageOptions = dict[str, dict[str, Any]]
_BLOCK = 1 << 20


def is_url(path: str) -> bool:
    """True for ``protocol://...`` (a plain relative path lives under the data root)."""
    head, sep, _ = path.partition("://")
    return bool(sep) and head.replace("+", "").replace("-", "").isalnum()


def _fs(url: str, options: StorageOptions | None) -> tuple[Any, str]:
    import fsspec.core  # lazily: only agents with URL replicas need the drivers

    protocol = url.partition("://")[0]
    try:
        fs, root = fsspec.core.url_to_fs(url, **(options or {}).get(protocol, {}))
    except (ImportError, ValueError) as exc:
        raise transfer.TransferError(f"cannot open {url}: {exc}") from exc
    return fs, str(root).rstrip("/")


def scan(url: str, options: StorageOptions | None = None) -> list[dict[str, Any]]:
    """The manifest of every object under ``url`` (reads each object once for its sha256)."""
    fs, root = _fs(url, options)
    try:
        if fs.isfile(root):
            found = {root: fs.info(root)}
            base = root.rsplit("/", 1)[0]
        else:
            found, base = fs.find(root, detail=True), root
        files = []
        for path, info in sorted(found.items()):
            h = hashlib.sha256()
            with fs.open(path, "rb", block_size=_BLOCK) as fh:
                while block := fh.read(_BLOCK):
                    h.update(block)
            rel = path[len(base) :].lstrip("/")
            files.append({"path": rel, "size": int(info["size"]), "sha256": h.hexdigest()})
    except Exception as exc:  # any driver error: the scan reports it, never the traceback
        raise transfer.TransferError(f"scan of {url}: {exc}") from exc
    return files


def fetch(
    url: str,
    dataset_id: str,
    files: list[dict[str, Any]],
    dest: Path,
    *,
    options: StorageOptions | None = None,
    rate_limit_bps: float | None = None,
    on_progress: Callable[[int, float], None] | None = None,
    stop: threading.Event | None = None,
) -> transfer.Result:
    """Bring ``dest`` to exactly ``files`` from the objects under ``url``."""
    fs, root = _fs(url, options)

    def get(run: Any, path: str, part: Path, offset: int, h: Any) -> None:
        try:
            with fs.open(f"{root}/{path}", "rb", block_size=_BLOCK) as src:
                src.seek(offset)
                with part.open("ab") as out:
                    while block := src.read(_BLOCK):
                        out.write(block)
                        h.update(block)
                        run.tick(len(block))
        except transfer.TransferError:
            raise
        except Exception as exc:  # driver errors (botocore, aiohttp): retryable
            raise transfer.TransferError(f"read of {url}/{path}: {exc}") from exc

    return transfer.copy(
        dataset_id,
        files,
        dest,
        get,
        where=url,
        rate_limit_bps=rate_limit_bps,
        on_progress=on_progress,
        stop=stop,
    )


def upload(
    spool: Path, files: list[dict[str, Any]], url: str, options: StorageOptions | None = None
) -> None:
    """Copy the verified files under ``spool`` to ``url``, verifying each object."""
    fs, root = _fs(url, options)
    try:
        for f in files:
            key = f"{root}/{f['path']}"
            if fs.exists(key) and int(fs.size(key)) == int(f["size"]):
                continue
            part = key + ".part"
            fs.put_file(str(spool / f["path"]), part)
            h = hashlib.sha256()
            with fs.open(part, "rb", block_size=_BLOCK) as fh:
                while block := fh.read(_BLOCK):
                    h.update(block)
            if h.hexdigest() != f["sha256"]:
                fs.rm(part)
                raise transfer.IntegrityError(f"{url}/{f['path']}: sha256 mismatch after upload")
            fs.mv(part, key)
    except transfer.TransferError:
        raise
    except Exception as exc:  # driver errors (botocore, aiohttp): retryable
        raise transfer.TransferError(f"upload to {url}: {exc}") from exc
