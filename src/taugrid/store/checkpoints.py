"""Adopting checkpoints an attempt wrote but never committed (the hub's side of the layout).

The in-job SDK (``taugrid.sdk.injob_checkpoint``) commits ``step-<8 digits>/`` folders
holding ``_CHECKPOINT.json``; only those are seen by ``tau.latest_checkpoint()``.
Jobs that save the way frameworks do never commit: they write ``step-N/`` folders into
``tau.checkpoint_dir()`` (a ``.staging/attempt-<n>-<k>/`` folder) or straight into
``$CHECKPOINT_PATH``: HF Trainer ``checkpoint-500/``, Lightning
``epoch=3-step=1200.ckpt``, Ray Train ``checkpoint_000003/``, DeepSpeed
``global_step1200/``. When an attempt ends, the hub calls ``adopt`` on the checkpoint
root: every such checkpoint the attempt wrote becomes a committed ``step-*`` folder
(with a marker naming where it came from), so the next attempt resumes from it.

Rules:
- Only what the ending attempt wrote is considered: its own staging folders, and
  root-level (or one level down) framework checkpoints last modified between the
  attempt's creation and the moment the hub declared it ended. Anything modified
  after that moment came from a process that outlived its attempt and is not used.
- Staging folders are moved (they would be swept anyway); framework checkpoints at
  the root are copied (and hashed for the marker; the hub's handling of the ending
  report waits for it), so the framework's own resume still finds them in place.
- Ray Train V2 (``RunConfig(storage_path=$CHECKPOINT_PATH, name=N)``) keeps its run in
  ``N/``: timestamped ``checkpoint_<time>/`` folders and ``checkpoint_manager_snapshot.json``,
  from which it resumes by itself when it finds the folder again. Such a folder is
  committed whole, as ``step-<its report count>/N/`` with ``restore: N`` in the marker;
  ``restore_layout`` puts it back at ``N/`` in a retry's empty checkpoint root (another
  scratch, another region), so ``ray.train.get_checkpoint()`` returns its latest.
- A step that is already committed is left alone. What cannot be used (empty, no
  step in its name, written after the end) is returned with the reason, for the hub
  to report; nothing is deleted here.

The marker format, ``latest`` file and digest algorithm are the SDK's (the SDK sits
above the store in the layers and cannot be imported); tests pin them together.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from pathlib import Path

__all__ = [
    "TRAIN_V2_SNAPSHOT",
    "Adoption",
    "adopt",
    "checkpoint_root",
    "latest_listed",
    "latest_name",
    "restore_layout",
]

MARKER_FILE = "_CHECKPOINT.json"
LATEST_FILE = "latest"
STAGING_DIR = ".staging"
TRAIN_V2_SNAPSHOT = "checkpoint_manager_snapshot.json"
"""Ray Train V2's state file in its run folder (``<storage_path>/<RunConfig.name>/``)."""
_COMMITTED = re.compile(r"^step-(\d{8,})$")
_STAGE = re.compile(r"^attempt-(\d+)-\d+$")
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
    return Path(checkpoint_path) if checkpoint_path else run_dir / "checkpoints"


def latest_name(root: Path) -> str | None:
    """The highest committed step folder whose marker is valid (as the SDK decides)."""
    try:
        names = [p.name for p in root.iterdir()]
    except OSError:
        return None
    steps = sorted(((int(m[1]), n) for n in names if (m := _COMMITTED.match(n))), reverse=True)
    return next((n for s, n in steps if _marker_step(root / n) == s), None)


def latest_listed(paths: list[str]) -> str | None:
    """The highest ``step-*`` folder with a marker among ``paths`` (relative to the
    checkpoint root, as a record store lists them): its marker is uploaded last."""
    steps = [
        (int(m[1]), top)
        for p in paths
        if (top := p.partition("/")[0]) and p == f"{top}/{MARKER_FILE}"
        if (m := _COMMITTED.match(top))
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
        target = _commit(root, path, step, move, {"attempt": attempt, "run_id": run_id}, token)
        out.adopted.append((_rel(root, path), target.name))
    return out


def _staging_dirs(root: Path, attempt: int) -> list[Path]:
    return [
        p
        for p in _children(root / STAGING_DIR)
        if p.is_dir() and (m := _STAGE.match(p.name)) and int(m[1]) == attempt
    ]


def _root_candidates(root: Path) -> list[Path]:
    """Framework checkpoints at the root, or one folder down (Ray Train's run name)."""
    out = []
    for p in _children(root):
        committed = _COMMITTED.match(p.name) and _marker_step(p) is not None
        if p.name.startswith(".") or p.name == LATEST_FILE or committed:
            continue
        if _step_of(p.name) is not None or _train_v2_step(p) is not None:
            out.append(p)
        elif p.is_dir():
            out += [c for c in _children(p) if _step_of(c.name) is not None]
    return out


def _train_v2_step(path: Path) -> int | None:
    """A Ray Train V2 run folder's report count (None: not one, or nothing reported)."""
    try:
        doc = json.loads((path / TRAIN_V2_SNAPSHOT).read_text())
    except (OSError, ValueError):
        return None
    count = doc.get("current_report_index") if isinstance(doc, dict) else None
    if not isinstance(count, int) or not doc.get("checkpoint_results"):
        return None
    return count


def restore_layout(root: Path, name: str) -> str | None:
    """Put the run folder that committed step ``name`` holds back where its framework
    looks (``root/<folder>``), unless something is there already; the folder's name."""
    try:
        doc = json.loads((root / name / MARKER_FILE).read_text())
    except (OSError, ValueError):
        return None
    folder = doc.get("restore") if isinstance(doc, dict) else None
    if not isinstance(folder, str) or not folder or "/" in folder or folder.startswith("."):
        return None
    target, source = root / folder, root / name / folder
    if target.exists() or not source.is_dir():
        return None
    staged = root / STAGING_DIR / f"restore-{uuid.uuid4().hex}"
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
    if _marker_step(root / f"step-{step:08d}") == step:
        return ""
    if not _has_files(path):
        return "is empty"
    if _newest_mtime(path) > until:
        return "was written after its attempt was declared ended (a stray process)"
    return None


def _commit(
    root: Path, source: Path, step: int, move: bool, who: dict[str, object], token: int
) -> Path:
    staged = root / STAGING_DIR / f"adopt-{uuid.uuid4().hex}"
    restore = {}
    if source.is_dir() and (source / TRAIN_V2_SNAPSHOT).is_file():  # the run folder, whole
        shutil.copytree(source, staged / source.name, symlinks=True)
        restore = {"restore": source.name}
    elif move and source.is_dir():
        os.rename(source, staged)
    elif source.is_dir():
        shutil.copytree(source, staged, symlinks=True)
    else:
        staged.mkdir(parents=True)
        shutil.copy2(source, staged / source.name)
    files = {rel: _sha256(staged / rel) for rel in _files(staged) if rel != MARKER_FILE}
    marker = {
        "format": 1,
        "step": step,
        **who,
        "rank": 0,
        "fencing_token": token,
        "created_at": time.time(),
        "files": files,
        "tree_sha256": _tree(files),
        "adopted_from": _rel(root, source),
        **restore,
    }
    (staged / MARKER_FILE).write_text(json.dumps(marker, indent=2, sort_keys=True))
    target = root / f"step-{step:08d}"
    if target.exists():  # a folder without a valid marker: keep it aside, never delete
        os.rename(target, root / STAGING_DIR / f"replaced-{target.name}-{uuid.uuid4().hex}")
    os.rename(staged, target)
    _advance_latest(root, step)
    return target


def _advance_latest(root: Path, step: int) -> None:
    path = root / LATEST_FILE
    current = _COMMITTED.match(path.read_text().strip()) if path.exists() else None
    if current is not None and int(current[1]) > step:
        return
    tmp = root / f".{LATEST_FILE}.{uuid.uuid4().hex}"
    tmp.write_text(f"step-{step:08d}\n")
    os.replace(tmp, path)


def _marker_step(path: Path) -> int | None:
    try:
        doc = json.loads((path / MARKER_FILE).read_text())
    except (OSError, ValueError):
        return None
    step = doc.get("step") if isinstance(doc, dict) else None
    return step if isinstance(step, int) else None


def _children(path: Path) -> list[Path]:
    try:
        return sorted(path.iterdir())
    except OSError:
        return []


def _files(root: Path) -> list[str]:
    if root.is_file():
        return [root.name]
    out = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = Path(dirpath) / name
            if full.is_file() and not full.is_symlink():
                out.append(full.relative_to(root).as_posix())
    return sorted(out)


def _has_files(path: Path) -> bool:
    target = path.parent if path.is_file() else path
    return any((target / rel).stat().st_size > 0 for rel in _files(path))


def _newest_mtime(path: Path) -> float:
    base = path.parent if path.is_file() else path
    times = [(base / rel).stat().st_mtime for rel in _files(path)]
    return max(times, default=path.stat().st_mtime)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _tree(digests: dict[str, str]) -> str:
    outer = hashlib.sha256()
    for rel in sorted(digests):
        outer.update(f"{rel}\0{digests[rel]}\n".encode())
    return outer.hexdigest()


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()
