"""Dataset registry, replicas per region and transfers (the data plane's durable state).

Owns the ``datasets``, ``dataset_replicas`` and ``transfers`` tables. State machines:

    dataset   scanning ──manifest──▶ ready          scanning ──scan error──▶ failed
    replica   scanning ─▶ complete (the origin);  queued ─▶ copying ─▶ complete | failed
    transfer  queued ──budget granted──▶ active ──▶ done | failed   (failed may be retried:
              a new transfer resumes from the bytes already on disk)

A dataset ID is ``name@version`` (unique across workspaces). A dataset belongs to one
workspace: ``workspaces`` arguments narrow reads to those (None: every workspace, for
admins and the hub itself). Only ``complete`` replicas count for placement.
Timestamps are epoch seconds.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from taugrid import errors
from taugrid.store import schema as t

__all__ = ["DataStore", "dataset_id"]

Row = dict[str, Any]
ACTIVE_TRANSFER = ("queued", "active")


def dataset_id(name: str, version: str = "v1") -> str:
    """``name@version``; a name may carry its version already (``imagenet@v2``)."""
    return name if "@" in name else f"{name}@{version}"


class DataStore:
    """Repository over datasets, replicas and transfers."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    # -- datasets ------------------------------------------------------------------
    def register(
        self, name: str, version: str, region: str, path: str, by: str, workspace: str
    ) -> Row:
        did, now = dataset_id(name, version), time.time()
        row: Row = {
            "id": did,
            "name": name,
            "version": version,
            "workspace": workspace,
            "state": "scanning",
            "origin_region": region,
            "size_bytes": 0,
            "sha256": None,
            "files": [],
            "error": None,
            "created_by": by,
            "created_at": now,
            "updated_at": now,
        }
        with self.engine.begin() as c:
            if c.execute(sa.select(t.datasets.c.id).where(t.datasets.c.id == did)).first():
                raise errors.UserError(
                    f"dataset {did} is already registered",
                    f"register a new version: tau data register {name} --version v2 ...",
                )
            c.execute(t.datasets.insert().values(**row))
            c.execute(t.dataset_replicas.insert().values(**_replica(did, region, "scanning", path)))
        return row

    def get(self, did: str, workspaces: list[str] | None = None) -> Row | None:
        q = sa.select(t.datasets).where(t.datasets.c.id == did)
        if workspaces is not None:
            q = q.where(t.datasets.c.workspace.in_(workspaces))
        with self.engine.connect() as c:
            r = c.execute(q).first()
        return dict(r._mapping) if r else None

    def all(self, workspaces: list[str] | None = None) -> list[Row]:
        q = sa.select(t.datasets).order_by(t.datasets.c.id)
        if workspaces is not None:
            q = q.where(t.datasets.c.workspace.in_(workspaces))
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q)]

    def set_manifest(
        self, did: str, region: str, files: list[Row], size: int, digest: str, error: str | None
    ) -> None:
        """The origin agent scanned the dataset: ready with its manifest (or failed)."""
        now = time.time()
        state = "failed" if error else "ready"
        with self.engine.begin() as c:
            c.execute(
                t.datasets.update()
                .where(t.datasets.c.id == did)
                .values(
                    state=state,
                    files=files,
                    size_bytes=size,
                    sha256=digest,
                    error=error,
                    updated_at=now,
                )
            )
            c.execute(
                t.dataset_replicas.update()
                .where(
                    t.dataset_replicas.c.dataset_id == did, t.dataset_replicas.c.region == region
                )
                .values(state="failed" if error else "complete", bytes_present=size, updated_at=now)
            )

    # -- replicas ------------------------------------------------------------------
    def replicas(self, did: str | None = None) -> list[Row]:
        q = sa.select(t.dataset_replicas).order_by(
            t.dataset_replicas.c.dataset_id, t.dataset_replicas.c.region
        )
        if did is not None:
            q = q.where(t.dataset_replicas.c.dataset_id == did)
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q)]

    def complete_regions(self) -> dict[str, tuple[str, ...]]:
        """Dataset ID → regions holding a complete replica."""
        out: dict[str, list[str]] = {}
        for r in self.replicas():
            if r["state"] == "complete":
                out.setdefault(r["dataset_id"], []).append(r["region"])
        return {k: tuple(v) for k, v in out.items()}

    def scans_for(self, region: str) -> list[Row]:
        """Origin replicas of ``region`` waiting for their agent's scan."""
        with self.engine.connect() as c:
            q = sa.select(t.dataset_replicas).where(
                t.dataset_replicas.c.region == region, t.dataset_replicas.c.state == "scanning"
            )
            return [dict(r._mapping) for r in c.execute(q)]

    # -- transfers -----------------------------------------------------------------
    def request_transfer(self, did: str, src: str, dst: str, path: str, by: str, est: float) -> Row:
        """Queue a copy of ``did`` from ``src`` to ``dst`` (idempotent while one is open)."""
        ds = self.get(did)
        assert ds is not None
        now = time.time()
        with self.engine.begin() as c:
            open_ = c.execute(
                sa.select(t.transfers).where(
                    t.transfers.c.dataset_id == did,
                    t.transfers.c.dst_region == dst,
                    t.transfers.c.state.in_(ACTIVE_TRANSFER),
                )
            ).first()
            if open_ is not None:
                return dict(open_._mapping)
            row: Row = {
                "dataset_id": did,
                "src_region": src,
                "dst_region": dst,
                "state": "queued",
                "bytes_total": ds["size_bytes"],
                "bytes_done": 0,
                "reserved_bps": 0.0,
                "rate_bps": 0.0,
                "estimate_s": est,
                "error": None,
                "created_by": by,
                "created_at": now,
                "started_at": None,
                "ended_at": None,
            }
            row["id"] = c.execute(t.transfers.insert().values(**row)).inserted_primary_key[0]  # type: ignore[index]
            key = (t.dataset_replicas.c.dataset_id == did, t.dataset_replicas.c.region == dst)
            again = t.dataset_replicas.update().where(*key).values(state="queued", path=path)
            if c.execute(again).rowcount:
                return row
            c.execute(t.dataset_replicas.insert().values(**_replica(did, dst, "queued", path)))
        return row

    def transfers(self, states: tuple[str, ...] | None = None, did: str | None = None) -> list[Row]:
        q = sa.select(t.transfers).order_by(t.transfers.c.id)
        if states:
            q = q.where(t.transfers.c.state.in_(states))
        if did:
            q = q.where(t.transfers.c.dataset_id == did)
        with self.engine.connect() as c:
            return [dict(r._mapping) for r in c.execute(q)]

    def get_transfer(self, tid: int) -> Row | None:
        with self.engine.connect() as c:
            r = c.execute(sa.select(t.transfers).where(t.transfers.c.id == tid)).first()
        return dict(r._mapping) if r else None

    def start_transfer(self, tid: int, reserved_bps: float) -> bool:
        """queued → active with its bandwidth reservation (False: someone else did it)."""
        with self.engine.begin() as c:
            n = c.execute(
                t.transfers.update()
                .where(t.transfers.c.id == tid, t.transfers.c.state == "queued")
                .values(state="active", reserved_bps=reserved_bps, started_at=time.time())
            ).rowcount
            if n:
                tr = c.execute(sa.select(t.transfers).where(t.transfers.c.id == tid)).one()
                _set_replica(c, tr.dataset_id, tr.dst_region, "copying", None)
        return bool(n)

    def progress(self, tid: int, bytes_done: int, rate_bps: float) -> None:
        with self.engine.begin() as c:
            c.execute(
                t.transfers.update()
                .where(t.transfers.c.id == tid, t.transfers.c.state == "active")
                .values(bytes_done=bytes_done, rate_bps=rate_bps)
            )

    def finish_transfer(self, tid: int, ok: bool, bytes_done: int, rate: float, err: str) -> None:
        """active → done (replica complete) or failed (replica failed, resumable)."""
        with self.engine.begin() as c:
            tr = c.execute(sa.select(t.transfers).where(t.transfers.c.id == tid)).first()
            if tr is None or tr.state != "active":
                return
            c.execute(
                t.transfers.update()
                .where(t.transfers.c.id == tid)
                .values(
                    state="done" if ok else "failed",
                    bytes_done=bytes_done,
                    rate_bps=rate,
                    error=err or None,
                    ended_at=time.time(),
                    reserved_bps=0.0,
                )
            )
            _set_replica(
                c, tr.dataset_id, tr.dst_region, "complete" if ok else "failed", bytes_done
            )


def _replica(did: str, region: str, state: str, path: str) -> Row:
    return {
        "dataset_id": did,
        "region": region,
        "state": state,
        "path": path,
        "bytes_present": 0,
        "updated_at": time.time(),
    }


def _set_replica(c: sa.Connection, did: str, region: str, state: str, size: int | None) -> None:
    values: Row = {"state": state, "updated_at": time.time()}
    if size is not None:
        values["bytes_present"] = size
    c.execute(
        t.dataset_replicas.update()
        .where(t.dataset_replicas.c.dataset_id == did, t.dataset_replicas.c.region == region)
        .values(**values)
    )
