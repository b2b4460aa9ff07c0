"""The in-job API: what a training script calls while it runs as a TauGrid run.

Users write ``import taugrid as tau`` and call::

    tau.log({"loss": 0.3, "acc": 0.91}, step=120)      # metrics/metrics.jsonl
    with tau.checkpoint(step=120) as d: save(d)        # checkpoints/step-00000120
    ckpt = tau.latest_checkpoint()                      # resume point or None
    tau.save_artifact("model.npz")                      # artifacts/ + MANIFEST.json
    tau.heartbeat(); tau.run_id(); tau.attempt(); tau.rank()
    notice = tau.preemption_notice()                    # spot reclaim: checkpoint now

This module owns metric logging and heartbeats and is the public face of the
``injob_*`` siblings: ``injob_env`` (environment), ``injob_fence`` (fencing),
``injob_checkpoint`` (checkpoints) and ``injob_artifacts`` (artifacts).

Metric record (one JSON object per line, one line per metric)::

    {"step": 120, "wall_time": 1718000000.1, "name": "loss", "value": 0.3,
     "attempt": 1, "rank": 0, "run_id": "r-..."}

Non-finite values are written as ``"value": null`` with ``"nonfinite": "nan"`` (or
``"inf"``/``"-inf"``) so the file stays strict JSON.

Invariants:
- Only rank 0 logs unless ``all_ranks=True``; other ranks return without I/O.
- ``log`` and ``heartbeat`` check the fence (``injob_fence``) first: a process whose
  attempt the hub has ended gets ``FencedError`` instead of writing.
- Each ``log`` call is one ``write(2)`` on an ``O_APPEND`` descriptor: lines from
  concurrent writers never interleave and the agent tailing the file sees whole lines
  as soon as the call returns.
- Only the standard library is imported: ``import taugrid`` stays light.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import taugrid
from taugrid.lifecycle import states
from taugrid.record import files, layout
from taugrid.sdk.job import (
    injob_artifacts,
    injob_checkpoint,
    injob_env,
    injob_fence,
    injob_tensorboard,
)

__all__ = list(taugrid.__all__)
"""The in-job API: listed once, at the package root (``import taugrid as tau``)."""

# Re-exports: the public surface lives here, the mechanics in the siblings.
ArtifactError = injob_artifacts.ArtifactError
CheckpointError = injob_checkpoint.CheckpointError
CheckpointInfo = injob_checkpoint.CheckpointInfo
FencedError = injob_fence.FencedError
InJobEnvError = injob_env.InJobEnvError
LocalRunWarning = injob_env.LocalRunWarning
attempt = injob_env.attempt
checkpoint = injob_checkpoint.checkpoint
checkpoint_dir = injob_checkpoint.checkpoint_dir
checkpoint_info = injob_checkpoint.checkpoint_info
commit_checkpoint = injob_checkpoint.commit_checkpoint
latest_checkpoint = injob_checkpoint.latest_checkpoint
output_dir = injob_env.output_dir
params = injob_env.params
label_selector = injob_env.label_selector
rank = injob_env.rank
run_id = injob_env.run_id
save_artifact = injob_artifacts.save_artifact
world_size = injob_env.world_size

_lock = threading.Lock()
_fds: dict[Path, int] = {}
_next_step = 0
_last_step: int | None = None


def log(metrics: Mapping[str, float], step: int | None = None, *, all_ranks: bool = False) -> None:
    """Append one metric line per entry of ``metrics`` to ``metrics/metrics.jsonl``.

    ``step`` defaults to one past the last step logged by this process (0 at first).
    Values must be numbers (ints, floats, numpy scalars); names non-empty strings.
    """
    if not all_ranks and injob_env.rank() != 0:
        return
    records = _records(metrics, _resolve_step(step))
    if not records:
        return
    data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
    injob_fence.check_fence("log metrics")
    path = injob_env.output_dir() / layout.METRICS_FILE
    with _lock:
        os.write(_fd_for(path), data)
    if injob_tensorboard.enabled():
        injob_tensorboard.write(records)


def heartbeat(step: int | None = None) -> None:
    """Tell the platform this worker is alive (``metrics/heartbeat-rank-<r>.json``).

    ``log`` already counts as progress; call this from long phases that log nothing
    (data loading, evaluation). Any rank may call it.
    """
    injob_fence.check_fence("write a heartbeat")
    worker = injob_env.rank()
    doc = {
        "run_id": injob_env.run_id(),
        "attempt": injob_env.attempt(),
        "rank": worker,
        "pid": os.getpid(),
        "wall_time": time.time(),
        "step": step if step is not None else _last_step,
    }
    path = injob_env.output_dir() / layout.heartbeat_file(worker)
    files.write_atomic(path, (json.dumps(doc, sort_keys=True) + "\n").encode())


def request_relocation(cpus: float, reason: str) -> None:
    """Ask the platform to move this run to a cluster with ``cpus`` free CPUs beyond the
    run's own workers, because the job cannot meet its goal where it is (``reason``).

    The hub moves it only when another cluster has that room now: it stops this attempt
    and starts the next there, from the latest checkpoint, without using up a retry;
    otherwise the run stays and its events say why (``relocation_declined``). Rank 0
    asks; one ask per attempt is acted on.
    """
    if injob_env.rank() != 0:
        return
    injob_fence.check_fence("ask for a relocation")
    doc = {
        "run_id": injob_env.run_id(),
        "attempt": injob_env.attempt(),
        "cpus": float(cpus),
        "reason": reason[:2000],
        "wall_time": time.time(),
    }
    path = injob_env.output_dir() / layout.RELOCATE_FILE
    files.write_atomic(path, (json.dumps(doc, sort_keys=True) + "\n").encode())


def _resolve_step(step: int | None) -> int:
    global _next_step, _last_step
    with _lock:
        if step is None:
            step = _next_step
        elif isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"tau.log step must be an int or None, got {step!r}")
        _next_step = step + 1
        _last_step = step
        return step


def _records(metrics: Mapping[str, float], step: int) -> list[dict[str, object]]:
    now = time.time()
    common = {
        "attempt": injob_env.attempt(),
        "rank": injob_env.rank(),
        "run_id": injob_env.run_id(),
    }
    out: list[dict[str, object]] = []
    for name, raw in metrics.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"tau.log metric names must be non-empty strings, got {name!r}")
        try:
            value = float(raw)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"tau.log metric {name!r} must be a number, got {raw!r}") from exc
        record: dict[str, object] = {"step": step, "wall_time": now, "name": name}
        if math.isfinite(value):
            record["value"] = value
        else:
            record["value"] = None
            record["nonfinite"] = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        record.update(common)
        out.append(record)
    return out


def _fd_for(path: Path) -> int:
    """An ``O_APPEND`` descriptor for ``path``, opened once per process (lock held)."""
    fd = _fds.get(path)
    if fd is not None and os.fstat(fd).st_nlink == 0:
        # The file was removed or rotated under us: start a new one rather than
        # appending to an inode nobody can read.
        os.close(fd)
        fd = None
    if fd is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        _fds[path] = fd
    return fd


@atexit.register
def _close_all() -> None:
    with _lock:
        for fd in _fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        _fds.clear()


class PreemptionNotice:
    """This attempt will be stopped at ``stop_at`` (wall time) for ``reason`` (a spot node
    being reclaimed): write a checkpoint now; the run resumes from it elsewhere."""

    def __init__(self, reason: str, stop_at: float) -> None:
        self.reason, self.stop_at = reason, stop_at

    @property
    def seconds_left(self) -> float:
        return max(0.0, self.stop_at - time.time())

    def __repr__(self) -> str:
        return f"PreemptionNotice({self.reason!r}, in {self.seconds_left:.0f}s)"


def preemption_notice() -> PreemptionNotice | None:
    """The notice of this attempt's coming stop, or None (cheap: poll it every step).

    The agent writes it when the hub stops the attempt with a grace (a spot reclaim:
    docs/spot.md), and a Kubernetes pod's main process when the pod gets its SIGTERM; the
    job is stopped ``seconds_left`` later whatever it does, and the run is placed again
    and resumes from its newest complete checkpoint.
    """
    try:
        doc = json.loads((injob_env.output_dir() / states.NOTICE_FILE).read_text())
        notice = PreemptionNotice(str(doc["reason"]), float(doc["stop_at"]))
        mine = injob_env.fencing_token()
    except (OSError, ValueError, KeyError, TypeError, injob_env.InJobEnvError):
        return None
    return notice if mine is None or doc.get("token") == mine else None
