"""A run's checkpoints as its page shows them: the newest in full, the rest counted.

The record lists files (``checkpoints/step-00000120/state.npz`` …); a run that saves
often has hundreds, and listing every file of every checkpoint made the page thousands
of pixels tall. ``summary`` groups the listing into ``Checkpoint`` values (one per
folder under ``checkpoints/``, newest first by step, then name); the page shows the
newest one (step, when it was saved, size, links to its first ``FILES_SHOWN`` files)
and the others as one row each behind a collapsed ``<details>``.

When it was saved comes from the newest checkpoint's marker (``_CHECKPOINT.json``,
``created_at``), the one file read; a checkpoint without a marker was cut half-way
(its upload never committed) and is shown as incomplete.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from taugrid.record import layout
from taugrid.sdk.client import client

__all__ = ["FILES_SHOWN", "Checkpoint", "Checkpoints", "load", "summary"]

FILES_SHOWN = 20
_TOP = f"{layout.CHECKPOINTS_DIR}/"
_STEP = re.compile(r"(\d+)(?!.*\d)")  # the last number in the folder's name


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    name: str  # the folder under checkpoints/
    step: int | None
    files: list[dict[str, Any]]  # {"path", "size"}, the marker included
    complete: bool  # its marker is there
    saved_at: float | None = None  # from the marker, read for the newest only

    @property
    def size(self) -> int:
        return sum(int(f["size"]) for f in self.files)


@dataclasses.dataclass(frozen=True)
class Checkpoints:
    newest: Checkpoint | None
    older: list[Checkpoint]

    @property
    def count(self) -> int:
        return len(self.older) + (self.newest is not None)


def summary(files: Iterable[Mapping[str, Any]]) -> Checkpoints:
    """Group a ``checkpoints`` listing by folder; files at its top (``latest``) are not
    checkpoints."""
    folders: dict[str, list[dict[str, Any]]] = {}
    for f in files:
        rel = str(f["path"]).removeprefix(_TOP)
        name, sep, rest = rel.partition("/")
        if sep and rest:
            folders.setdefault(name, []).append({"path": str(f["path"]), "size": f["size"]})
    found = [_checkpoint(name, mine) for name, mine in folders.items()]
    found.sort(key=lambda c: (c.step if c.step is not None else -1, c.name), reverse=True)
    return Checkpoints(found[0] if found else None, found[1:])


def _checkpoint(name: str, files: list[dict[str, Any]]) -> Checkpoint:
    step = _STEP.search(name)
    complete = any(f["path"].endswith(f"/{layout.MARKER_FILE}") for f in files)
    files.sort(key=lambda f: (f["path"].endswith(f"/{layout.MARKER_FILE}"), f["path"]))
    return Checkpoint(name, int(step.group(1)) if step else None, files, complete)


def load(c: client.Client, ref: str) -> Checkpoints:
    """The run's checkpoints, with the newest one's save time from its marker."""
    found = summary(c.files(ref, layout.CHECKPOINTS_DIR))
    newest = found.newest
    if newest is None or not newest.complete:
        return found
    try:
        doc = json.loads(c.download(ref, f"{_TOP}{newest.name}/{layout.MARKER_FILE}"))
    except (client.ApiError, ValueError):  # gone meanwhile, or not a marker we know
        return found
    saved = doc.get("created_at") if isinstance(doc, dict) else None
    if isinstance(saved, int | float):
        newest = dataclasses.replace(newest, saved_at=float(saved))
    return Checkpoints(newest, found.older)
