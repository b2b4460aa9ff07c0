"""A job's outputs on its agent's machine, and their way into the run's record store.

A job never opens the hub's record. Each attempt writes into a scratch directory its
agent owns, ``<agent state_dir>/scratch/<run-id>/a<attempt>/`` (``TAU_OUTPUT_DIR``;
checkpoints in its ``checkpoints/`` unless tau.yaml sets ``checkpoint_path``, which the
job then manages itself), and ``RecordSync`` — one thread per attempt — copies it into
the record store (``record.store``; names and keys: ``record.layout``): the same code for
a local directory (the embedded platform) and an object store.

- ``stage``, before the job is submitted: the newest *complete* checkpoint of the run in
  the store (its marker uploaded, every file it lists there with the listed sha256),
  whichever region wrote it, is downloaded into scratch, where ``tau.latest_checkpoint()``
  finds it; so is ``metrics/metrics.jsonl`` (the record's file keeps every attempt).
- every ``UPLOAD_S`` while the job runs: the store's ``FENCE`` is read and mirrored into
  scratch (the in-job SDK then refuses the writes of a revoked attempt); while it holds
  this attempt's token, ``metrics/metrics.jsonl`` (when it grew), the ``LIVE_FILES``
  (when they changed: a Serve deployment's status) and the newest committed
  checkpoint not yet uploaded go to the store. A checkpoint's files go first, each
  verified by reading it back (sha256, checked against its marker), ``_CHECKPOINT.json``
  last, with the fence read before and after it: a checkpoint cut half-way has no marker
  in the store and is never offered; a fenced attempt's marker is refused, or deleted
  again when a newer attempt took the fence meanwhile (a fence moved only to
  ``NO_ATTEMPT``, revoked with no retry placed yet, keeps it: the checkpoint is whole,
  and the hub may already have chosen it as the retry's resume point).
- a store that does not answer: retried with backoff (``UPLOAD_S`` doubling up to
  ``BACKOFF_MAX_S``); the job keeps running and nothing is marked saved.
- ``finish``, once the job ended: framework checkpoints it never committed are adopted
  (``record.checkpoints.adopt``), then a last round, plus ``artifacts/`` (files, then
  ``MANIFEST.json``) when it succeeded; the tracker reports the end only after that
  round. When the store does not answer, the end is reported with ``pending`` (the
  reason: the hub keeps *Artifacts saved* active and ``COMPLETE`` unwritten); the round
  is retried while the hub lists the attempt in ``uploads`` — no fence then: the hub
  revoked the token when it accepted the success — and ``uploaded_late`` is reported.

Metric lag: a line is in the store at most ``UPLOAD_S`` plus one upload after ``tau.log``
returned, while the store answers (docs/BENCHMARKS.md). Logs reach the record through the
hub (the tracker's report), as before.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from taugrid import errors
from taugrid import payloads as wire
from taugrid.platform import models as pm
from taugrid.record import checkpoints, files, layout, s3
from taugrid.record import store as recordstore

__all__ = [
    "BACKOFF_MAX_S",
    "UPLOAD_S",
    "Fenced",
    "Mirror",
    "RecordSync",
    "for_assignment",
    "open_for",
    "scratch_dir",
]

log = logging.getLogger(__name__)

UPLOAD_S = 1.0
"""Pause between upload rounds while the store answers (the metric lag bound)."""
BACKOFF_MAX_S = 30.0
"""Longest pause between tries while the store does not answer."""
#: Small files a job rewrites while it runs and the hub reads from the record (a Serve
#: deployment's status, ``hub.serving.serving``; a session's, ``hub.dev.sessions``):
#: uploaded whenever they change.
LIVE_FILES = (layout.SERVE_STATUS_FILE, layout.DEV_STATUS_FILE)


class Fenced(errors.SystemFault):
    """The store's ``FENCE`` names another attempt (``fence``): this one may no longer
    upload."""

    def __init__(self, message: str, fence: int | None = None) -> None:
        super().__init__(message, "another attempt of the run is authoritative", retryable=False)
        self.fence = fence


def scratch_dir(state_dir: Path, a: wire.Assignment) -> Path:
    """The attempt's scratch directory under the agent's own root."""
    return state_dir / "scratch" / a.run_id / f"a{a.attempt}"


def open_for(a: wire.Assignment, endpoint: str | None) -> recordstore.RecordStore:
    """The record store the assignment names, reached through ``endpoint`` when given
    (how this region reaches an S3 store); credentials from this process's environment."""
    spec = pm.RecordStoreSpec.model_validate(a.records)
    if endpoint and spec.in_object_store:
        spec = spec.model_copy(update={"endpoint_url": endpoint})
    return s3.cached_store(spec, Path(spec.url or "."))


def for_assignment(a: wire.Assignment, state_dir: Path, endpoint: str | None) -> RecordSync | None:
    """The attempt's scratch and uploads; None when the hub named no record store."""
    if not a.records or not a.record_key:
        return None
    return RecordSync(a, scratch_dir(state_dir, a), open_for(a, endpoint))


class Mirror:
    """The agent's copy of what an attempt's pods store (``agent.records.podsync`` uploads from
    the pod): its metrics file and latest checkpoint name, pulled from the record store
    into a directory the tracker reads as it reads a Ray job's scratch."""

    def __init__(self, a: wire.Assignment, scratch: Path, store: recordstore.RecordStore) -> None:
        self.a, self.scratch, self.store = a, scratch, store
        self.error = ""

    def pull(self) -> None:
        """Fetch what changed; a store that does not answer leaves the copy as it is."""
        try:
            metrics = layout.METRICS_FILE
            self.store.get_file(f"{self.a.record_key}/{metrics}", self.scratch / metrics)
            latest = self.store.read(f"{self.a.record_key}/{_ckpt(layout.LATEST_FILE)}")
            if latest:
                (self.scratch / layout.CHECKPOINTS_DIR).mkdir(parents=True, exist_ok=True)
                (self.scratch / _ckpt(layout.LATEST_FILE)).write_bytes(latest)
            self.error = ""
        except (errors.TauError, OSError) as exc:
            self.error = str(exc)
            log.info("mirror of attempt %s: %s", self.a.token, self.error)


def _ckpt(*parts: str) -> str:
    """A path under the checkpoints folder (of the record, or of scratch)."""
    return "/".join((layout.CHECKPOINTS_DIR, *parts))


class RecordSync:
    """Uploads one attempt's scratch into its record (see the module docstring)."""

    def __init__(self, a: wire.Assignment, scratch: Path, store: recordstore.RecordStore) -> None:
        self.a, self.scratch, self.store = a, scratch, store
        self.key = a.record_key
        own_ckpt = not a.spec.get("checkpoint_path")
        self.ckpt_root: Path | None = scratch / layout.CHECKPOINTS_DIR if own_ckpt else None
        self.created = time.time()
        self.error = ""
        """The last failure (empty while uploads work)."""
        self.pending = ""
        """Why the final round did not store everything (reported with the end)."""
        self.uploaded_late = False
        self.adoption = checkpoints.Adoption()
        self.settled = threading.Event()
        """The final round is over (done, pending or fenced): the end may be reported."""
        self._final: bool | None = None
        self._adopted = False
        self._authorized = False
        self._done: set[str] = set()  # checkpoint step dirs and artifacts already stored
        self._metrics_size = -1  # bytes of metrics.jsonl in the store
        self._metrics_seen = -1  # size of the scratch file at the last look
        self._live_seen: dict[str, tuple[int, int]] = {}  # LIVE_FILES: (mtime_ns, size)
        self._fence_seen: int | None = None
        self.staged: str | None = None
        """The checkpoint ``stage`` put into scratch (``""``: none), once it staged."""
        self._wake, self._stop = threading.Event(), threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name=f"tau-upload-{a.token}", daemon=True
        )

    # -- driven by the agent ----------------------------------------------------------
    def stage(self) -> None:
        """Prepare scratch before the job starts (raises ``RecordStoreError``/``Fenced``)."""
        (self.scratch / layout.METRICS_FILE).parent.mkdir(parents=True, exist_ok=True)
        self._check_fence()
        metrics = self.scratch / layout.METRICS_FILE
        if not metrics.exists():
            self.store.get_file(self._k(layout.METRICS_FILE), metrics)
        self._metrics_size = metrics.stat().st_size if metrics.exists() else -1
        self.staged = ""
        if self.ckpt_root is not None:
            self._download_latest(self.ckpt_root)

    def start(self) -> None:
        if not self._thread.is_alive():
            self._thread.start()

    def finish(self, succeeded: bool) -> None:
        """The job ended: run the final round (once) in the upload thread."""
        if self._final is None:
            self._final = succeeded
            self.start()
            self._wake.set()

    def authorize(self) -> None:
        """The hub still wants this succeeded attempt's held-back uploads."""
        if self.pending and not self._authorized:
            self._authorized = True
            self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    # -- the thread -------------------------------------------------------------------
    def _loop(self) -> None:
        delay = UPLOAD_S
        while not self._stop.is_set():
            try:
                self._step()
                self.error, delay = "", UPLOAD_S
            except Fenced as exc:
                self.error = exc.message
                if self._final is not None:
                    self.settled.set()
                delay = BACKOFF_MAX_S
            except (errors.TauError, OSError) as exc:
                self.error = exc.message if isinstance(exc, errors.TauError) else str(exc)
                log.warning("uploads of attempt %s: %s", self.a.token, self.error)
                if self._final is not None and not self.settled.is_set():
                    self.pending = self.error
                    self.settled.set()
                delay = min(delay * 2, BACKOFF_MAX_S)
            self._wake.wait(delay)
            self._wake.clear()

    def _step(self) -> None:
        if self._final is None:
            self._round(fenced=True)
        elif not self.settled.is_set():
            if self.ckpt_root is not None and not self._adopted:
                self._adopted = True
                self.adoption = checkpoints.adopt(
                    self.ckpt_root,
                    attempt=self.a.attempt,
                    run_id=self.a.run_id,
                    token=self.a.token,
                    since=self.created,
                    until=time.time(),
                )
            self._round(fenced=True, artifacts=self._final)
            self.settled.set()
        elif self.pending and self._authorized:
            self._round(fenced=False, artifacts=self._final)
            self.pending, self.uploaded_late = "", True
        else:  # nothing left to upload: keep the scratch FENCE current (stray processes)
            with contextlib.suppress(Fenced):
                self._check_fence()

    def _round(self, *, fenced: bool, artifacts: bool = False) -> None:
        if fenced:
            self._check_fence()
        self._metrics()
        self._live()
        if self.ckpt_root is not None:
            self._checkpoint(self.ckpt_root, fenced)
        if artifacts:
            self._artifacts()

    # -- pieces -----------------------------------------------------------------------
    def _k(self, rel: str) -> str:
        return f"{self.key}/{rel}"

    def _check_fence(self) -> None:
        raw = self.store.read(self._k(layout.FENCE_FILE))
        try:
            fence = int(raw) if raw is not None else None
        except ValueError:
            fence = -1  # unreadable: fail closed, as the in-job SDK does
        if fence is not None and fence != self._fence_seen:
            self.scratch.mkdir(parents=True, exist_ok=True)
            tmp = self.scratch / ".FENCE.tmp"
            tmp.write_text(f"{fence}\n")
            os.replace(tmp, self.scratch / layout.FENCE_FILE)
            self._fence_seen = fence
        if fence is not None and fence != self.a.token:
            raise Fenced(
                f"attempt {self.a.attempt} of run {self.a.run_id} is fenced (its token "
                f"{self.a.token}, the record's {fence}): its uploads are refused",
                fence,
            )

    def _metrics(self) -> None:
        """Upload the whole lines of ``metrics.jsonl`` when it grew (a snapshot: the job
        appends while the upload runs, and the upload is verified by its sha256)."""
        path = self.scratch / layout.METRICS_FILE
        size = path.stat().st_size if path.exists() else -1
        if size <= 0 or size == self._metrics_seen:
            return
        data = path.read_bytes()
        end = data.rfind(b"\n") + 1
        self._metrics_seen = size
        if end == 0 or end == self._metrics_size:
            return
        snap = self.scratch / ".metrics.upload"
        snap.write_bytes(data[:end])
        self.store.put_file(self._k(layout.METRICS_FILE), snap)
        self._metrics_size = end

    def _live(self) -> None:
        """Upload each of ``LIVE_FILES`` that changed since the last look."""
        for rel in LIVE_FILES:
            path = self.scratch / rel
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            seen = (st.st_mtime_ns, st.st_size)
            if self._live_seen.get(rel) != seen:
                self.store.put_file(self._k(rel), path)
                self._live_seen[rel] = seen

    def _checkpoint(self, root: Path, fenced: bool) -> None:
        """Upload the newest committed checkpoint not stored yet (older ones are moot)."""
        name = checkpoints.latest_name(root)
        if name is None or name in self._done:
            return
        marker_path = root / name / layout.MARKER_FILE
        digests = json.loads(marker_path.read_text()).get("files", {})
        for rel, sha in sorted(digests.items()):
            got = self.store.put_file(self._k(_ckpt(name, rel)), root / name / rel)
            if got != sha:
                raise recordstore.RecordStoreError(
                    f"checkpoint {name}/{rel} does not match its marker (changed after commit)"
                )
        if fenced:
            self._check_fence()
        marker = self._k(_ckpt(name, layout.MARKER_FILE))
        self.store.put_file(marker, marker_path)  # the commit point: written last
        if fenced:
            try:
                self._check_fence()
            except Fenced as exc:
                # Revoked meanwhile, no attempt placed yet: the checkpoint is whole and
                # the hub may already have listed it as the retry's resume point, so it
                # stays. A newer attempt owns the record: it goes.
                if exc.fence != layout.NO_ATTEMPT:
                    self.store.delete(marker)
                raise
        self.store.write(self._k(_ckpt(layout.LATEST_FILE)), f"{name}\n".encode())
        self._done.add(name)

    def _artifacts(self) -> None:
        top = self.scratch / layout.ARTIFACTS_DIR
        if not top.is_dir():
            return
        rels = sorted(
            p.relative_to(top).as_posix()
            for p in top.rglob("*")
            if p.is_file() and not any(s.startswith(".") for s in p.relative_to(top).parts)
        )
        last = layout.MANIFEST_FILE
        for rel in [r for r in rels if r != last] + [r for r in rels if r == last]:
            key = f"{layout.ARTIFACTS_DIR}/{rel}"
            if key not in self._done:
                self.store.put_file(self._k(key), top / rel)
                self._done.add(key)

    def _download_latest(self, root: Path) -> None:
        """The newest complete checkpoint in the store into ``root`` (if any is)."""
        listed: dict[str, set[str]] = {}
        for rel, _size in self.store.list(self._k(layout.CHECKPOINTS_DIR)):
            top, _, rest = rel.partition("/")
            if layout.committed_step(top) is not None and rest:
                listed.setdefault(top, set()).add(rest)
        for name in sorted((n for n in listed if layout.MARKER_FILE in listed[n]), reverse=True):
            if (root / name / layout.MARKER_FILE).exists() or self._fetch(root, name, listed[name]):
                self._done.add(name)
                self.staged = name
                root.joinpath(layout.LATEST_FILE).write_text(f"{name}\n")
                checkpoints.restore_layout(root, name)  # a framework's run folder, in place
                return

    def _fetch(self, root: Path, name: str, present: set[str]) -> bool:
        doc: dict[str, Any] = json.loads(
            self.store.read(self._k(_ckpt(name, layout.MARKER_FILE))) or b"{}"
        )
        digests = doc.get("files")
        listed = (
            {f for f in digests if not recordstore.hidden(f)} if isinstance(digests, dict) else {""}
        )
        if not isinstance(digests, dict) or not listed <= present:
            log.warning(
                "checkpoint %s of %s is incomplete in the store; skipped", name, self.a.run_id
            )
            return False
        tmp = root / layout.STAGING_DIR / f"download-{name}"
        shutil.rmtree(tmp, ignore_errors=True)
        for rel, sha in digests.items():
            ok = self.store.get_file(self._k(_ckpt(name, rel)), tmp / rel)
            if not ok or files.file_sha256(tmp / rel) != sha:
                log.warning("checkpoint %s/%s does not match its marker; skipped", name, rel)
                shutil.rmtree(tmp, ignore_errors=True)
                return False
        self.store.get_file(self._k(_ckpt(name, layout.MARKER_FILE)), tmp / layout.MARKER_FILE)
        with contextlib.suppress(FileExistsError):
            os.rename(tmp, root / name)
        return True
