"""Results export: a run's artifacts and a manifest to an object-store ``storage.output``.

A run whose ``storage.output`` (tau.yaml) is an object-store URL — or, when tau.yaml
sets none, whose workspace's ``defaults.output_root`` is one (then ``<root>/<run-id>``)
— has its results exported there: the job writes ``artifacts/`` into its record as
usual (``TAU_OUTPUT_DIR`` stays the record: a job cannot open a URL as a directory),
and when it succeeds the hub copies every artifact to ``<output>/<path>``, each one
verified by reading it back (sha256), then writes ``<output>/MANIFEST.json``
(``{"format": 1, "run_id", "files": [{path, size, sha256}], "artifacts": <the in-job
SDK's artifacts/MANIFEST.json entries>}``) — the manifest is the last object written,
so a reader that sees it sees every file it lists.

The output store uses the connection settings of the workspace's record store
(``records``: endpoint, region, credential variables) with the output URL.

Phase *Artifacts saved*: done once the manifest is written. When the store does not
answer, the run is still Completed but the phase stays active with the reason, and
``retry_pending`` (the hub's results thread, every ``RETRY_S``) tries again until it
works; the record's ``COMPLETE`` waits for it (``runs.finish_record``). A missing bucket
or refused credentials is refused at submit (``check``), before anything runs.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from taugrid.errors import TauError
from taugrid.hub.core import context
from taugrid.hub.runs import runs
from taugrid.lifecycle import phases as ph
from taugrid.lifecycle import states as st
from taugrid.record import layout, s3
from taugrid.record import store as recordstore
from taugrid.record.run import RunRecord

__all__ = ["RETRY_S", "check", "export", "output_url", "retry_pending", "waiting"]

RETRY_S = 10.0
_SOURCE = "object store"
"""The *Artifacts saved* phase's source while this module exports (or retries)."""


def output_url(hub: context.Hub, workspace: str, run_id: str, spec: dict[str, Any]) -> str | None:
    """The object-store URL a run's results go to, or None (they stay in the record)."""
    out = spec.get("output_dir")
    if out:
        return str(out).rstrip("/") if _is_url(str(out)) else None
    ws = hub.platform.workspace(workspace)
    root = ws.defaults.output_root if ws is not None else None
    return f"{root.rstrip('/')}/{run_id}" if root and _is_url(root) else None


def _is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _store(hub: context.Hub, workspace: str, url: str) -> recordstore.RecordStore:
    spec = hub.platform.records_for(workspace).model_copy(update={"url": url})
    return s3.cached_store(spec, hub.data_root)


def check(hub: context.Hub, workspace: str, spec: dict[str, Any]) -> None:
    """Refuse a submission whose object-store output is unusable (clear ``UserError``)."""
    url = output_url(hub, workspace, "check", spec)
    if url is not None:
        _store(hub, workspace, url).check()


def export(hub: context.Hub, run: dict[str, Any], url: str) -> int:
    """Copy ``artifacts/`` to ``url``, verified, then the manifest; returns the file count."""
    rec = runs.record_of(hub, run)
    out = _store(hub, run["workspace"], url)
    files = _copy_artifacts(rec, out)
    manifest = layout.MANIFEST_FILE
    injob = json.loads(rec.read_bytes(f"{layout.ARTIFACTS_DIR}/{manifest}") or b"{}")
    doc = {"format": 1, "run_id": run["id"], "files": files, "artifacts": injob.get("artifacts")}
    data = json.dumps(doc, indent=2, sort_keys=True).encode()
    out.write(manifest, data)
    if hashlib.sha256(out.read(manifest) or b"").digest() != hashlib.sha256(data).digest():
        raise recordstore.RecordStoreError(f"{url}/{manifest} reads back differently")
    return len(files)


def _copy_artifacts(rec: RunRecord, out: recordstore.RecordStore) -> list[dict[str, Any]]:
    """Every artifact but the in-job SDK's manifest (folded into ours), verified."""
    files = []
    with tempfile.TemporaryDirectory(prefix="tau-export-") as tmp:
        for f in rec.files(layout.ARTIFACTS_DIR):
            rel = f["path"].removeprefix(f"{layout.ARTIFACTS_DIR}/")
            if rel == layout.MANIFEST_FILE:
                continue
            local = rec.dir / f["path"] if rec.dir is not None else None
            if local is None or not local.is_file():
                local = Path(tmp) / "file"
                if not rec.store.get_file(rec.key(f["path"]), local):
                    continue
            digest = out.put_file(rel, local)
            files.append({"path": rel, "size": local.stat().st_size, "sha256": digest})
    return files


def save(hub: context.Hub, run: dict[str, Any], url: str) -> bool:
    """Export and set *Artifacts saved*: done, or active with the reason; True when done."""
    try:
        n = export(hub, run, url)
    except TauError as exc:
        reason = f"upload to {url} pending: {exc.message}; retried every {RETRY_S:g} s"
        _phase(hub, run["id"], ph.PhaseStatus.ACTIVE, reason)
        return False
    done = f"{n} file(s) and {layout.MANIFEST_FILE} in {url}"
    _phase(hub, run["id"], ph.PhaseStatus.DONE, done)
    return True


def _phase(hub: context.Hub, run_id: str, status: ph.PhaseStatus, reason: str) -> None:
    hub.runs.set_phase(
        run_id,
        ph.PhaseRecord(ph.Phase.ARTIFACTS_SAVED, status, _SOURCE, reason, time.time()),
    )


def waiting(hub: context.Hub) -> list[str]:
    """The succeeded runs whose export waits for the object store, found by their
    *Artifacts saved* phase (one indexed query), not by reading every succeeded run: a
    store of 100,000 runs costs the leader nothing here."""
    return hub.runs.in_phase(
        st.RunState.SUCCEEDED.value, ph.Phase.ARTIFACTS_SAVED, ph.PhaseStatus.ACTIVE, _SOURCE
    )


def retry_pending(hub: context.Hub) -> None:
    """Try every waiting export again; finish the run's record once saved."""
    for run_id in waiting(hub):
        run = hub.runs.get_run(run_id)
        if run is None:
            continue
        url = output_url(hub, run["workspace"], run["id"], run["spec"])
        if url is not None and save(hub, run, url):
            runs.finish_record(hub, run["id"])
