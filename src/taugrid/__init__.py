"""TauGrid: run AI workloads across GPU clusters in several regions, on Ray.

The package root is the in-job API (``taugrid.sdk.job.injob``) that training scripts use
as ``import taugrid as tau``: ``tau.log``, ``tau.checkpoint``, ``tau.latest_checkpoint``,
``tau.save_artifact`` and friends.

Invariant: ``import taugrid`` stays light. The names below are resolved on first
attribute access (PEP 562), so importing any ``taugrid.*`` subpackage does not import
the SDK, and nothing here imports ray, fastapi or sqlalchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from taugrid.sdk.job.injob import (
        ArtifactError,
        CheckpointError,
        CheckpointInfo,
        FencedError,
        InJobEnvError,
        LocalRunWarning,
        PreemptionNotice,
        attempt,
        checkpoint,
        checkpoint_dir,
        checkpoint_info,
        commit_checkpoint,
        heartbeat,
        label_selector,
        latest_checkpoint,
        log,
        output_dir,
        params,
        preemption_notice,
        rank,
        request_relocation,
        run_id,
        save_artifact,
        world_size,
    )

__all__ = [
    "ArtifactError",
    "CheckpointError",
    "CheckpointInfo",
    "FencedError",
    "InJobEnvError",
    "LocalRunWarning",
    "PreemptionNotice",
    "attempt",
    "checkpoint",
    "checkpoint_dir",
    "checkpoint_info",
    "commit_checkpoint",
    "heartbeat",
    "label_selector",
    "latest_checkpoint",
    "log",
    "output_dir",
    "params",
    "preemption_notice",
    "rank",
    "request_relocation",
    "run_id",
    "save_artifact",
    "world_size",
]

_INJOB = "taugrid.sdk.job.injob"


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(importlib.import_module(_INJOB), name)
        globals()[name] = value  # later lookups skip this hook
        return value
    raise AttributeError(f"module 'taugrid' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
