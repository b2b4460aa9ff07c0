"""TauGrid's version and the hub API level clients and hubs agree on (``tau version``).

``API_LEVEL`` grows when the hub's API gains something a client relies on (level 2:
workspace secrets and run provenance); ``/healthz`` reports it. A client refuses a hub
below ``MIN_HUB_API_LEVEL`` with the fix instead of failing later on a missing route. A
hub from before levels existed reports none: level 1. Standard library only.
"""

from __future__ import annotations

import importlib.metadata

__all__ = ["API_LEVEL", "MIN_HUB_API_LEVEL", "package_version"]

API_LEVEL = 2
"""What this hub serves."""
MIN_HUB_API_LEVEL = 2
"""What this client needs of the hub it talks to."""


def package_version() -> str:
    """The installed ``taugrid`` distribution's version (``0+unknown`` when run from a
    source tree that is not installed)."""
    try:
        return importlib.metadata.version("taugrid")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
