"""Checks of a platform's record stores, for ``tau platform validate`` (the CLI may not
open a store itself: it reaches lower layers only through the SDK).

``check_platform`` opens every object store platform.yaml names (``records`` and each
workspace's ``records``), once per distinct store, and proves it usable with
``RecordStore.check``: a missing bucket or refused credentials is a problem the platform
team must fix, reported with the store and the fix. Local directories are not touched
(validating must not create them; the hub does when it starts).
"""

from __future__ import annotations

from pathlib import Path

from taugrid.errors import TauError
from taugrid.platform import models as pm
from taugrid.record import s3

__all__ = ["check_platform"]


def check_platform(platform: pm.Platform) -> list[str]:
    """One line per unusable object store (``where: message (hint)``); empty when all work."""
    specs: dict[pm.RecordStoreSpec, list[str]] = {}
    specs.setdefault(platform.records, []).append("records")
    for ws in platform.workspaces:
        if ws.records is not None:
            specs.setdefault(ws.records, []).append(f"workspaces[{ws.name}].records")
    problems = []
    for spec, where in specs.items():
        if not spec.url or "://" not in spec.url or spec.url.startswith("file://"):
            continue
        try:
            s3.open_store(spec, Path(".")).check()
        except TauError as exc:
            hint = f" ({exc.hint})" if exc.hint else ""
            problems.append(f"{', '.join(where)}: {exc.message}{hint}")
    return problems
