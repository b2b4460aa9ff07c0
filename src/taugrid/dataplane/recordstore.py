"""Record stores: where run records live, behind one interface.

The record's layout: docs/ARCHITECTURE.md, "The run record".

(Here rather than in ``store``, which is the hub's database: the CLI may reach this
module through the SDK to check a platform's stores, never the database.)

    RecordStore              keys are '/'-separated paths under the store's root,
    ├── LocalRecordStore     e.g. ``<ws>/runs/<run-id>/run.json``; a directory
    │                        (``$TAU_HOME/data`` in the embedded platform): the layout
    │                        on disk is exactly the run record's
    └── ObjectRecordStore    an fsspec URL (``s3://bucket/prefix``, ``memory://x``):
                             the same keys as objects under the prefix

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

``open_store`` builds a store from platform.yaml's ``records`` (or a workspace's);
credentials come from the environment variables the spec names, never from the file.
fsspec and its drivers are imported lazily, only for object stores.
"""

from __future__ import annotations

import abc
import functools
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

from taugrid.errors import SystemFault, UserError
from taugrid.platform import models as pm

__all__ = [
    "LocalRecordStore",
    "ObjectRecordStore",
    "RecordStore",
    "RecordStoreConfigError",
    "RecordStoreError",
    "cached_store",
    "check_key",
    "hidden",
    "open_store",
]

_BLOCK = 1 << 20


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


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


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
        digest = _sha256_file(tmp)
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
        want = _sha256_file(src)
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
