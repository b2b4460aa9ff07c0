"""Payloads of the data API (``hub.api.data_api``), its agent channel, and agent-to-agent HTTP.

Kept next to the data plane (rather than in ``taugrid.payloads``) because only the data
API, the agents' data sync and the SDK's data calls use them; the compatibility rules of
``taugrid.payloads`` apply (add optional fields; servers ignore unknown ones).

Agent channel: ``POST /v1/agents/{cluster}/data/sync`` carries ``DataSync`` (scan
results and transfer progress) and answers ``DataTasks`` (scans to do, transfers to run
with their bandwidth reservation, and the complete replicas the agent serves).
"""

from __future__ import annotations

from typing import Any

import pydantic

__all__ = [
    "DataSync",
    "DataTasks",
    "DatasetRegister",
    "ReplicateRequest",
    "ScanReport",
    "ScanTask",
    "ServedReplica",
    "TransferProgress",
    "TransferTask",
]

_NAME = r"^[a-z0-9][a-z0-9._-]{0,127}$"


class _Payload(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")


class DatasetRegister(_Payload):
    """``POST /v1/datasets``: a dataset whose files already sit in ``region``'s storage."""

    name: str = pydantic.Field(pattern=_NAME)
    version: str = pydantic.Field(default="v1", pattern=r"^[A-Za-z0-9._-]{1,31}$")
    region: str = pydantic.Field(min_length=1, max_length=64)
    path: str = pydantic.Field(
        min_length=1,
        max_length=4096,
        description="relative to the region's data root, or an fsspec URL (s3://bucket/prefix)",
    )
    workspace: str | None = pydantic.Field(
        default=None,
        max_length=64,
        description="owning workspace (default: the caller's only one, else the default)",
    )


class ReplicateRequest(_Payload):
    """``POST /v1/datasets/{id}/replicate``: copy to ``to_region`` (from the best source)."""

    to_region: str = pydantic.Field(min_length=1, max_length=64)
    from_region: str | None = pydantic.Field(default=None, max_length=64)
    to_url: str | None = pydantic.Field(
        default=None,
        max_length=4096,
        pattern=r"^[A-Za-z][A-Za-z0-9+.-]*://.+",
        description="keep the copy in object storage at this fsspec URL (default: the "
        "destination region's data root)",
    )


class ScanReport(_Payload):
    dataset_id: str
    files: list[dict[str, Any]] = pydantic.Field(default_factory=list)
    size_bytes: int = 0
    sha256: str = ""
    error: str | None = None


class TransferProgress(_Payload):
    transfer_id: int
    bytes_done: int
    rate_bps: float = 0.0
    finished: bool = False
    ok: bool = False
    error: str = ""


class DataSync(_Payload):
    scans: list[ScanReport] = pydantic.Field(default_factory=list)
    progress: list[TransferProgress] = pydantic.Field(default_factory=list)


class ScanTask(_Payload):
    dataset_id: str
    path: str


class TransferTask(_Payload):
    transfer_id: int
    dataset_id: str
    src_region: str
    dest_path: str
    files: list[dict[str, Any]]
    reserved_bps: float
    rate_limit_bps: float | None = None
    src_url: str | None = None  # the source replica is object storage: read it directly
    dest_url: str | None = None  # keep the copy in object storage (spooled under dest_path)


class ServedReplica(_Payload):
    dataset_id: str
    path: str


class DataTasks(_Payload):
    scans: list[ScanTask] = pydantic.Field(default_factory=list)
    transfers: list[TransferTask] = pydantic.Field(default_factory=list)
    serve: list[ServedReplica] = pydantic.Field(default_factory=list)
