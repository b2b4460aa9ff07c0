"""The object-store record store (fsspec: ``s3://bucket/prefix``), and opening the store
platform.yaml's ``records`` names.

``ObjectRecordStore`` keeps the same keys as objects under its URL's prefix and keeps
``record.store``'s contract: ``write`` is one PUT (readers never see a partial object),
``put_file`` verifies by reading back, ``append`` is read-and-rewrite (one writer per
key: the hub's log appends). fsspec and its drivers are imported lazily, on first use.

``open_store`` builds a store from platform.yaml's ``records`` (or a workspace's): no
URL or a path is a ``LocalRecordStore``; credentials of an S3 store come from the
environment variables the spec names, never from the file. ``cached_store`` keeps one
instance per spec and data root in a process (connections reused).
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

from taugrid.errors import SystemFault, UserError
from taugrid.platform import models as pm
from taugrid.record import files
from taugrid.record.store import (
    LocalRecordStore,
    RecordStore,
    RecordStoreConfigError,
    RecordStoreError,
    check_key,
    hidden,
)

__all__ = ["ObjectRecordStore", "cached_store", "open_store"]

_BLOCK = 1 << 20


class ObjectRecordStore(RecordStore):
    """An fsspec URL (``s3://bucket/prefix``): the same keys as objects under the prefix."""

    def __init__(self, url: str, options: dict[str, Any] | None = None) -> None:
        self.url = url.rstrip("/")
        self._options = options or {}
        self._lock = threading.Lock()
        self._fs_root: tuple[Any, str] | None = None

    def _fs(self) -> tuple[Any, str]:
        with self._lock:
            if self._fs_root is None:
                import fsspec.core  # lazily: only object stores need the drivers

                try:
                    # Its own client, and no listings cache: other machines write the same
                    # prefix (agents, other regions), so a cached listing would go stale;
                    # fsspec's shared instances would also share one test's closed state.
                    options = {"skip_instance_cache": True, "use_listings_cache": False}
                    fs, root = fsspec.core.url_to_fs(self.url, **(options | self._options))
                except (ImportError, ValueError) as exc:
                    raise RecordStoreConfigError(
                        f"record store {self.url} cannot be opened: {exc}",
                        "use an s3:// URL in records.url (platform.yaml)",
                    ) from exc
                self._fs_root = (fs, str(root).rstrip("/"))
            return self._fs_root

    def _key(self, key: str) -> tuple[Any, str]:
        fs, root = self._fs()
        return fs, f"{root}/{check_key(key)}"

    def _fail(self, what: str, key: str, exc: BaseException) -> RecordStoreError:
        return RecordStoreError(
            f"record store {self.url}: {what} {key} failed: {type(exc).__name__}: {exc}",
            "check that the object store is reachable; the operation is retried",
        )

    def write(self, key: str, data: bytes) -> None:
        fs, path = self._key(key)
        try:
            fs.pipe_file(path, data)  # one PUT: readers never see a partial object
        except Exception as exc:  # any driver error (botocore, aiohttp)
            raise self._fail("write of", key, exc) from exc

    def read(self, key: str) -> bytes | None:
        fs, path = self._key(key)
        try:
            return bytes(fs.cat_file(path))
        except FileNotFoundError:
            return None
        except Exception as exc:  # any driver error
            raise self._fail("read of", key, exc) from exc

    def append(self, key: str, data: bytes) -> None:
        # Objects cannot be appended to: read and rewrite (one writer per key: the hub
        # for logs, so no update is lost; logs are streamed in chunks, so this stays small
        # next to the job's own I/O).
        self.write(key, (self.read(key) or b"") + data)

    def exists(self, key: str) -> bool:
        fs, path = self._key(key)
        try:
            fs.invalidate_cache(path)
            return bool(fs.isfile(path))
        except Exception as exc:  # any driver error
            raise self._fail("lookup of", key, exc) from exc

    def delete(self, key: str) -> None:
        fs, path = self._key(key)
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            pass
        except Exception as exc:  # any driver error
            raise self._fail("delete of", key, exc) from exc
        fs.invalidate_cache(path)

    def list(self, prefix: str) -> list[tuple[str, int]]:
        fs, root = self._fs()
        top = f"{root}/{check_key(prefix)}".rstrip("/")
        try:
            fs.invalidate_cache(top)
            found = fs.find(top, detail=True)
        except FileNotFoundError:
            return []
        except Exception as exc:  # any driver error
            raise self._fail("listing of", prefix, exc) from exc
        out = []
        for path, info in sorted(found.items()):
            rel = path[len(top) :].lstrip("/")
            if rel and info.get("type") != "directory" and not hidden(rel):
                out.append((rel, int(info["size"])))
        return out

    def put_file(self, key: str, src: Path) -> str:
        fs, path = self._key(key)
        want = files.file_sha256(src)
        try:
            fs.put_file(str(src), path)
            fs.invalidate_cache(path)
            h = hashlib.sha256()
            with fs.open(path, "rb", block_size=_BLOCK) as fh:
                while block := fh.read(_BLOCK):
                    h.update(block)
        except Exception as exc:  # any driver error
            raise self._fail("upload of", key, exc) from exc
        if h.hexdigest() != want:
            raise RecordStoreError(
                f"record store {self.url}: {key} reads back with a different sha256",
                "the upload is retried; if it persists, check the object store",
            )
        return want

    def get_file(self, key: str, dest: Path) -> bool:
        fs, path = self._key(key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.tmp")
        try:
            fs.get_file(path, str(tmp))
        except FileNotFoundError:
            return False
        except Exception as exc:  # any driver error
            raise self._fail("download of", key, exc) from exc
        os.replace(tmp, dest)
        return True

    def check(self) -> None:
        """HEAD the bucket, then write and delete a probe object: proves bucket and
        credentials (some S3 servers create a missing bucket on the first PUT)."""
        probe = f".tau-probe-{os.getpid()}-{threading.get_ident()}"
        try:
            fs, path = self._key(probe)
            if hasattr(fs, "call_s3"):  # s3fs: HeadBucket (404 → FileNotFoundError)
                fs.call_s3("head_bucket", Bucket=path.split("/")[0])
            fs.pipe_file(path, b"probe")
            fs.rm_file(path)
        except RecordStoreConfigError:
            raise
        except Exception as exc:  # classify the driver's answer
            raise _classify(self.url, exc) from exc


def _classify(url: str, exc: BaseException) -> UserError | SystemFault:
    text = f"{type(exc).__name__}: {exc}"
    low = text.lower()
    bucket = url.partition("://")[2].split("/")[0]
    if isinstance(exc, ConnectionError | TimeoutError) or "connect" in low:
        return RecordStoreError(
            f"record store {url} does not answer: {text[:300]}",
            "check records.endpoint_url and that the object store is running",
        )
    if isinstance(exc, FileNotFoundError) or "nosuchbucket" in low:
        return RecordStoreConfigError(
            f"record store {url}: bucket '{bucket}' does not exist",
            "create the bucket, or fix records.url in platform.yaml (or the workspace's)",
        )
    if isinstance(exc, PermissionError) or any(
        s in low for s in ("accessdenied", "invalidaccesskeyid", "signaturedoesnotmatch")
    ):
        return RecordStoreConfigError(
            f"record store {url}: the object store refused the credentials ({text[:200]})",
            "set the access key and secret in the environment variables named by "
            "records.access_key_env / records.secret_key_env (platform.yaml)",
        )
    return RecordStoreError(
        f"record store {url} does not answer: {text[:300]}",
        "check records.endpoint_url and that the object store is running",
    )


def open_store(spec: pm.RecordStoreSpec, data_root: Path) -> RecordStore:
    """The store ``spec`` describes; no URL means the local ``data_root``."""
    if not spec.url:
        return LocalRecordStore(data_root)
    if "://" not in spec.url or spec.url.startswith("file://"):
        return LocalRecordStore(Path(spec.url.removeprefix("file://")))
    options: dict[str, Any] = {}
    if spec.url.startswith("s3://"):
        client: dict[str, Any] = {}
        if spec.region:
            client["region_name"] = spec.region
        options = {
            "key": os.environ.get(spec.access_key_env) or None,
            "secret": os.environ.get(spec.secret_key_env) or None,
            "endpoint_url": spec.endpoint_url,
            "client_kwargs": client,
            # no retries inside botocore beyond a few: callers retry with backoff
            "config_kwargs": {"retries": {"max_attempts": 2}, "connect_timeout": 5},
        }
    return ObjectRecordStore(spec.url, options)


@functools.lru_cache(maxsize=64)
def cached_store(spec: pm.RecordStoreSpec, data_root: Path) -> RecordStore:
    """``open_store``, one instance per (spec, data root) per process (connections reused)."""
    return open_store(spec, data_root)
