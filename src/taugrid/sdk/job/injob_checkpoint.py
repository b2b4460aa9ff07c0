"""Checkpoints of a run: staged per attempt, fence-checked, promoted atomically.

Layout under ``$CHECKPOINT_PATH`` (default ``$TAU_OUTPUT_DIR/checkpoints``)::

    .staging/attempt-<n>-<k>/   work in progress of attempt n (k-th staging dir)
    step-00000200/              a promoted checkpoint; complete iff it holds the marker
      _CHECKPOINT.json          step, attempt, run_id, rank, fencing_token, sha256 per file
    latest                      "step-00000200\\n": the highest complete step (for tools)

Invariants:
- A ``step-*`` directory appears in one ``rename`` with its marker already inside, so
  readers never see a half-written checkpoint; a crash while staging leaves the
  previous checkpoints and ``latest`` untouched (the staging dir is swept later).
- Promotion needs the fence (``injob_fence``): checked before the rename and again
  after it; if the second check fails the promotion is undone.
- ``latest`` only moves forward (steps are progress); ``latest_checkpoint`` does not
  trust it blindly: it returns the highest-step directory whose marker is valid.
- Staging dirs of earlier attempts are deleted when a later attempt asks for one:
  exactly one attempt is authoritative, and earlier ones can never commit.

The layout's names are ``record.layout``'s; the marker, the promotion and ``latest`` are
``record.checkpoints``' (the same code commits what the agent adopts); this module adds
the fence checks and the job's identity from the environment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from taugrid import errors
from taugrid.record import checkpoints, files, layout
from taugrid.sdk.job import injob_env, injob_fence

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "checkpoint",
    "checkpoint_dir",
    "checkpoint_info",
    "commit_checkpoint",
    "latest_checkpoint",
]

_counter = itertools.count()


class CheckpointError(errors.UserError):
    """A checkpoint call got something it cannot use (bad step, missing dir, no marker)."""


@dataclasses.dataclass(frozen=True)
class CheckpointInfo:
    """What a complete checkpoint's marker says about it."""

    path: Path
    step: int
    attempt: int
    run_id: str
    fencing_token: int | None
    created_at: float
    files: dict[str, str]


def checkpoint_dir() -> Path:
    """A fresh, empty staging directory for this attempt's next checkpoint."""
    staging = injob_env.checkpoint_root() / layout.STAGING_DIR
    staging.mkdir(parents=True, exist_ok=True)
    current = injob_env.attempt()
    _sweep_earlier_attempts(staging, current)
    while True:
        path = staging / layout.stage_name(current, next(_counter))
        try:
            path.mkdir()
        except FileExistsError:  # another rank or process took this k
            continue
        return path


def commit_checkpoint(path: str | os.PathLike[str], step: int) -> Path:
    """Promote ``path`` to ``step-<step>``; returns the promoted directory.

    ``path`` is normally a ``checkpoint_dir()``; any other directory is copied into
    staging first (the caller's copy is left alone). Raises ``FencedError`` when this
    attempt was revoked and ``CheckpointError`` for a bad step or path.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise CheckpointError(
            f"checkpoint step must be a non-negative int, got {step!r}",
            "pass the training step the checkpoint was taken at",
        )
    root = injob_env.checkpoint_root()
    staged = _into_staging(Path(path), root)
    digests = files.file_digests(staged, exclude=frozenset({layout.MARKER_FILE}), fsync=True)
    files.write_json_atomic(staged / layout.MARKER_FILE, _marker(step, digests))
    action = f"commit checkpoint step {step}"
    injob_fence.check_fence(action)
    target = root / layout.step_name(step)
    displaced = checkpoints.promote(staged, target)
    try:
        injob_fence.check_fence(action)
    except injob_fence.FencedError:
        _undo_promote(target, displaced)
        raise
    if displaced is not None:
        shutil.rmtree(displaced, ignore_errors=True)
    checkpoints.advance_latest(root, step)
    return target


@contextlib.contextmanager
def checkpoint(step: int) -> Iterator[Path]:
    """``with tau.checkpoint(step) as d:`` write files into ``d``; committed on exit.

    Only rank 0 commits: other ranks get a scratch dir that is discarded, so the same
    code runs on every worker. An exception inside the block discards the staging dir
    and propagates; nothing is committed.
    """
    staged = checkpoint_dir()
    try:
        yield staged
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    if injob_env.rank() != 0:
        shutil.rmtree(staged, ignore_errors=True)
        return
    commit_checkpoint(staged, step)


def latest_checkpoint() -> Path | None:
    """The highest-step complete checkpoint (valid marker present), or None."""
    root = injob_env.checkpoint_root()
    name = checkpoints.latest_name(root)
    return root / name if name is not None else None


def checkpoint_info(path: str | os.PathLike[str], *, verify: bool = False) -> CheckpointInfo:
    """Read a checkpoint's marker; with ``verify`` also re-hash every file."""
    ckpt = Path(path)
    marker = files.read_json(ckpt / layout.MARKER_FILE)
    if marker is None or not isinstance(marker.get("files"), dict):
        raise CheckpointError(
            f"{ckpt} is not a complete checkpoint (no valid {layout.MARKER_FILE})",
            "use tau.latest_checkpoint() to find the latest complete one",
        )
    digests = {str(k): str(v) for k, v in marker["files"].items()}
    if verify:
        actual = files.file_digests(ckpt, exclude=frozenset({layout.MARKER_FILE}))
        if actual != digests:
            bad = sorted(set(actual.items()) ^ set(digests.items()))
            raise CheckpointError(
                f"{ckpt} does not match its marker ({len(bad)} differing entries, "
                f"first: {bad[0][0]})",
                "the checkpoint was modified after commit; resume from an earlier one",
            )
    return CheckpointInfo(
        path=ckpt,
        step=int(marker["step"]),
        attempt=int(marker.get("attempt", 0)),
        run_id=str(marker.get("run_id", "")),
        fencing_token=marker.get("fencing_token"),
        created_at=float(marker.get("created_at", 0.0)),
        files=digests,
    )


def _marker(step: int, digests: dict[str, str]) -> dict[str, object]:
    return checkpoints.marker(
        step,
        digests,
        attempt=injob_env.attempt(),
        run_id=injob_env.run_id(),
        rank=injob_env.rank(),
        token=injob_env.fencing_token(),
    )


def _into_staging(path: Path, root: Path) -> Path:
    if not path.is_dir():
        raise CheckpointError(
            f"checkpoint path {path} is not a directory",
            "write the checkpoint into tau.checkpoint_dir() and commit that",
        )
    staging = (root / layout.STAGING_DIR).resolve()
    if path.resolve().parent == staging:
        return path
    fresh = checkpoint_dir()
    shutil.copytree(path, fresh, dirs_exist_ok=True, symlinks=True)
    return fresh


def _undo_promote(target: Path, displaced: Path | None) -> None:
    trash = target.parent / layout.STAGING_DIR / f"fenced-{target.name}-{uuid.uuid4().hex}"
    with contextlib.suppress(OSError):
        os.rename(target, trash)
        if displaced is not None:
            os.rename(displaced, target)
        files.fsync_dir(target.parent)
    shutil.rmtree(trash, ignore_errors=True)


def _sweep_earlier_attempts(staging: Path, current: int) -> None:
    for entry in staging.iterdir():
        attempt = layout.stage_attempt(entry.name)
        if attempt is not None and attempt < current:
            shutil.rmtree(entry, ignore_errors=True)
