"""Checkpoints in a record: how a step is committed, which one is the latest, and the
adoption of checkpoints an attempt wrote but never committed.

Commit (both the in-job SDK's ``commit_checkpoint``, which checks the fence around it,
and adoption below): the files are staged under ``.staging/``, the marker
(``marker``: ``_CHECKPOINT.json`` with the sha256 of every file) is written into the
staged folder, which ``promote`` renames to ``step-<8 digits>/`` in one step (a folder
already there is moved aside, never deleted here); ``advance_latest`` then moves
``latest`` forward. ``latest_name`` is the highest step whose marker is valid: readers
never trust ``latest`` blindly. Names and format: ``record.layout``, ``record.files``.

Adoption. Jobs that save the way frameworks do never commit: they write ``step-N/``
folders into ``tau.checkpoint_dir()`` (a ``.staging/attempt-<n>-<k>/`` folder) or
straight into ``$CHECKPOINT_PATH``: HF Trainer ``checkpoint-500/``, Lightning
``epoch=3-step=1200.ckpt``, Ray Train ``checkpoint_000003/``, DeepSpeed
``global_step1200/``. When an attempt ends, its agent (in scratch) or the hub (a record
directory a Kubernetes job wrote itself) calls ``adopt`` on the checkpoint root: every
such checkpoint the attempt wrote becomes a committed ``step-*`` folder (with a marker
naming where it came from), so the next attempt resumes from it.

Rules:
- Only what the ending attempt wrote is considered: its own staging folders, and
  root-level (or one level down) framework checkpoints last modified between the
  attempt's creation and the moment it was declared ended. Anything modified
  after that moment came from a process that outlived its attempt and is not used.
- Staging folders are moved (they would be swept anyway); framework checkpoints at
  the root are copied (and hashed for the marker; the handling of the ending report
  waits for it), so the framework's own resume still finds them in place.
- Ray Train V2 (``RunConfig(storage_path=$CHECKPOINT_PATH, name=N)``) keeps its run in
  ``N/``: timestamped ``checkpoint_<time>/`` folders and ``checkpoint_manager_snapshot.json``,
  from which it resumes by itself when it finds the folder again. Such a folder is
  committed whole, as ``step-<its report count>/N/`` with ``restore: N`` in the marker;
  ``restore_layout`` puts it back at ``N/`` in a retry's empty checkpoint root (another
  scratch, another region), so ``ray.train.get_checkpoint()`` returns its latest.
- A step that is already committed is left alone. What cannot be used (empty, no
  step in its name, written after the end) is returned with the reason, for the hub
  to report; nothing is deleted here.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import time
import uuid
from pathlib import Path

from taugrid.record import files, layout

__all__ = [
    "TRAIN_V2_SNAPSHOT",
    "Adoption",
    "adopt",
    "advance_latest",
    "checkpoint_root",
    "latest_listed",
    "latest_name",
    "marker",
    "promote",
    "restore_layout",
]

TRAIN_V2_SNAPSHOT = "checkpoint_manager_snapshot.json"
"""Ray Train V2's state file in its run folder (``<storage_path>/<RunConfig.name>/``)."""
_LAYOUTS = (
    re.compile(r"^step[-_]?(\d+)$"),  # step-200, step_200, step200
    re.compile(r"^checkpoint[-_](\d+)$"),  # HF Trainer checkpoint-500, Ray Train checkpoint_000003
    re.compile(r"^global_step(\d+)$"),  # DeepSpeed
    re.compile(r"^(?:.*[-_])?step=(\d+)(?:[-_][^/]*)?\.ckpt$"),  # Lightning epoch=3-step=1200.ckpt
)


@dataclasses.dataclass
class Adoption:
    """What ``adopt`` did: committed ``(source, step-dir)`` pairs, unusable ``(source, why)``."""

    adopted: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    unusable: list[tuple[str, str]] = dataclasses.field(default_factory=list)


def checkpoint_root(run_dir: Path, checkpoint_path: str | None) -> Path:
    """Where a run's checkpoints live: the spec's ``checkpoint_path`` or the record's."""
    return Path(checkpoint_path) if checkpoint_path else run_dir / layout.CHECKPOINTS_DIR


def marker(
    step: int, digests: dict[str, str], *, attempt: int, run_id: str, rank: int, token: int | None
) -> dict[str, object]:
    """The marker of a checkpoint of ``step`` whose files have ``digests`` (by path)."""
    return {
        "format": layout.MARKER_FORMAT,
        "step": step,
        "attempt": attempt,
        "run_id": run_id,
        "rank": rank,
        "fencing_token": token,
        "created_at": time.time(),
        "files": digests,
        "tree_sha256": files.tree_digest(digests),
    }


def promote(staged: Path, target: Path) -> Path | None:
    """Rename ``staged`` (marker inside) to ``target`` in one step; a folder already at
    ``target`` is moved aside into the staging folder first and returned."""
    displaced = None
    if target.exists():
        displaced = (
            target.parent / layout.STAGING_DIR / f"replaced-{target.name}-{uuid.uuid4().hex}"
        )
        os.rename(target, displaced)
    os.rename(staged, target)
    files.fsync_dir(target.parent)
    return displaced


def advance_latest(root: Path, step: int) -> None:
    """Point ``latest`` at ``step`` unless it names a higher one (it only moves forward)."""
    path = root / layout.LATEST_FILE
    current = layout.committed_step(path.read_text().strip()) if path.exists() else None
    if current is not None and current > step:
        return
    files.write_atomic(path, f"{layout.step_name(step)}\n".encode())


def latest_name(root: Path) -> str | None:
    """The highest committed step folder whose marker is valid."""
    try:
        names = [p.name for p in root.iterdir()]
    except OSError:
        return None
    steps = sorted(
        ((s, n) for n in names if (s := layout.committed_step(n)) is not None), reverse=True
    )
    return next((n for s, n in steps if _marker_step(root / n) == s), None)


def latest_listed(paths: list[str]) -> str | None:
    """The highest ``step-*`` folder with a marker among ``paths`` (relative to the
    checkpoint root, as a record store lists them): its marker is uploaded last."""
    steps = [
        (step, top)
        for p in paths
        if (top := p.partition("/")[0]) and p == f"{top}/{layout.MARKER_FILE}"
        if (step := layout.committed_step(top)) is not None
    ]
    return max(steps)[1] if steps else None


def adopt(
    root: Path, *, attempt: int, run_id: str, token: int, since: float, until: float
) -> Adoption:
    """Commit every usable uncommitted checkpoint that attempt ``attempt`` wrote."""
    out = Adoption()
    if not root.is_dir():
        return out
    found: list[tuple[int, Path, bool]] = []  # (step, path, move rather than copy)
    for path in _staging_dirs(root, attempt):
        inner = [(s, p) for p in _children(path) if (s := _step_of(p.name)) is not None]
        if not inner and _has_files(path):
            out.unusable.append((_rel(root, path), "has no step number in its name"))
        found += [(s, p, True) for s, p in inner]
    for path in _root_candidates(root):
        step = _step_of(path.name)
        step = _train_v2_step(path) if step is None else step
        if step is not None and _newest_mtime(path) >= since:
            found.append((step, path, False))
    for step, path, move in sorted(found, key=lambda f: f[0]):
        why = _unusable(root, path, step, until)
        if why == "":
            continue
        if why is not None:
            out.unusable.append((_rel(root, path), why))
            continue
        target = _commit(root, path, step, move, attempt=attempt, run_id=run_id, token=token)
        out.adopted.append((_rel(root, path), target.name))
    return out


def _staging_dirs(root: Path, attempt: int) -> list[Path]:
    return [
        p
        for p in _children(root / layout.STAGING_DIR)
        if p.is_dir() and layout.stage_attempt(p.name) == attempt
    ]


def _root_candidates(root: Path) -> list[Path]:
    """Framework checkpoints at the root, or one folder down (Ray Train's run name)."""
    out = []
    for p in _children(root):
        committed = layout.committed_step(p.name) is not None and _marker_step(p) is not None
        if p.name.startswith(".") or p.name == layout.LATEST_FILE or committed:
            continue
        if _step_of(p.name) is not None or _train_v2_step(p) is not None:
            out.append(p)
        elif p.is_dir():
            out += [c for c in _children(p) if _step_of(c.name) is not None]
    return out


def _train_v2_step(path: Path) -> int | None:
    """A Ray Train V2 run folder's report count (None: not one, or nothing reported)."""
    doc = files.read_json(path / TRAIN_V2_SNAPSHOT)
    count = doc.get("current_report_index") if doc is not None else None
    if doc is None or not isinstance(count, int) or not doc.get("checkpoint_results"):
        return None
    return count


def restore_layout(root: Path, name: str) -> str | None:
    """Put the run folder that committed step ``name`` holds back where its framework
    looks (``root/<folder>``), unless something is there already; the folder's name."""
    doc = files.read_json(root / name / layout.MARKER_FILE)
    folder = doc.get("restore") if doc is not None else None
    if not isinstance(folder, str) or not folder or "/" in folder or folder.startswith("."):
        return None
    target, source = root / folder, root / name / folder
    if target.exists() or not source.is_dir():
        return None
    staged = root / layout.STAGING_DIR / f"restore-{uuid.uuid4().hex}"
    shutil.copytree(source, staged, symlinks=True)
    os.rename(staged, target)
    return folder


def _step_of(name: str) -> int | None:
    for pattern in _LAYOUTS:
        m = pattern.match(name)
        if m:
            return int(m[1])
    return None


def _unusable(root: Path, path: Path, step: int, until: float) -> str | None:
    """Why ``path`` cannot be committed; ``""`` when that step is already committed."""
    if _marker_step(root / layout.step_name(step)) == step:
        return ""
    if not _has_files(path):
        return "is empty"
    if _newest_mtime(path) > until:
        return "was written after its attempt was declared ended (a stray process)"
    return None


def _commit(
    root: Path, source: Path, step: int, move: bool, *, attempt: int, run_id: str, token: int
) -> Path:
    staged = root / layout.STAGING_DIR / f"adopt-{uuid.uuid4().hex}"
    restore = _stage(source, staged, move)
    digests = files.file_digests(staged, exclude=frozenset({layout.MARKER_FILE}))
    doc = {
        **marker(step, digests, attempt=attempt, run_id=run_id, rank=0, token=token),
        "adopted_from": _rel(root, source),
        **restore,
    }
    files.write_json_atomic(staged / layout.MARKER_FILE, doc)
    target = root / layout.step_name(step)
    promote(staged, target)  # a folder without a valid marker is kept aside, never deleted
    advance_latest(root, step)
    return target


def _stage(source: Path, staged: Path, move: bool) -> dict[str, str]:
    """Put ``source`` at ``staged``; ``{"restore": name}`` for a Ray Train V2 run folder."""
    if source.is_dir() and (source / TRAIN_V2_SNAPSHOT).is_file():  # the run folder, whole
        shutil.copytree(source, staged / source.name, symlinks=True)
        return {"restore": source.name}
    if move and source.is_dir():
        os.rename(source, staged)
    elif source.is_dir():
        shutil.copytree(source, staged, symlinks=True)
    else:
        staged.mkdir(parents=True)
        shutil.copy2(source, staged / source.name)
    return {}


def _marker_step(path: Path) -> int | None:
    doc = files.read_json(path / layout.MARKER_FILE)
    step = doc.get("step") if doc is not None else None
    return step if isinstance(step, int) else None


def _children(path: Path) -> list[Path]:
    try:
        return sorted(path.iterdir())
    except OSError:
        return []


def _has_files(path: Path) -> bool:
    target = path.parent if path.is_file() else path
    return any((target / rel).stat().st_size > 0 for rel in files.regular_files(path))


def _newest_mtime(path: Path) -> float:
    base = path.parent if path.is_file() else path
    times = [(base / rel).stat().st_mtime for rel in files.regular_files(path)]
    return max(times, default=path.stat().st_mtime)


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()
