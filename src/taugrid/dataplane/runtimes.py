"""Runtime environments as cache keys: what "warm" means for a region.

A run's *runtime key* is a short digest of what preparing its environment costs: the
image and the pip requirements (env vars are free to set and are not part of it). An
agent reports the keys it has prepared (``StateReport.cached_runtimes``); placement
prefers regions where the key is warm (``scheduling.plugins_data.WarmRuntimeScore``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["runtime_key"]


def runtime_key(spec: Mapping[str, Any]) -> str | None:
    """The key of a resolved spec's runtime (None when there is nothing to prepare)."""
    pip = sorted(str(p) for p in spec.get("pip", ()) or ())
    if not pip:
        return None
    doc = json.dumps({"image": spec.get("image", ""), "pip": pip}, sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:16]
