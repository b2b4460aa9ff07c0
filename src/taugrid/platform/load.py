"""Loading platform.yaml: a file (or the packaged default) → a validated ``Platform``.

Owns where a platform comes from:

- ``load_platform(path)``  a platform.yaml on disk;
- ``default_platform()``   the packaged ``default_local.yaml`` (the embedded platform:
  one region ``local``, 2 nodes x 4 emulated A100-80G);
- ``platform_from_env()``  ``$TAU_PLATFORM_FILE`` when set, else the default.

Invariant: these return a ``Platform`` or raise ``spec.errors.SpecError`` (a
``UserError``) listing every problem as ``file:line:col`` — the same loader and
messages as tau.yaml (``spec.load.load_model``).
"""

from __future__ import annotations

import functools
import importlib.resources
import os

from taugrid.platform import models
from taugrid.spec import load

__all__ = [
    "DEFAULT_RESOURCE",
    "ENV_VAR",
    "default_platform",
    "default_platform_text",
    "load_platform",
    "parse_platform",
    "platform_from_env",
]

ENV_VAR = "TAU_PLATFORM_FILE"
DEFAULT_RESOURCE = "default_local.yaml"


def parse_platform(text: str, filename: str = "platform.yaml") -> models.Platform:
    """Validate platform.yaml ``text`` (raises ``SpecError`` naming ``filename``)."""
    return load.load_model(text, filename, models.Platform)


def load_platform(path: str | os.PathLike[str]) -> models.Platform:
    """Load the platform.yaml at ``path`` (raises ``SpecError``)."""
    return load.load_file(path, models.Platform)


def default_platform_text() -> str:
    """The text of the packaged default platform.yaml."""
    return (
        importlib.resources.files("taugrid.platform").joinpath(DEFAULT_RESOURCE).read_text("utf-8")
    )


@functools.cache
def default_platform() -> models.Platform:
    """The packaged default platform (a frozen value, parsed once)."""
    return parse_platform(default_platform_text(), f"<packaged {DEFAULT_RESOURCE}>")


def platform_from_env(path: str | os.PathLike[str] | None = None) -> models.Platform:
    """``path`` if given, else ``$TAU_PLATFORM_FILE`` if set, else the packaged default."""
    chosen = path if path is not None else os.environ.get(ENV_VAR) or None
    return default_platform() if chosen is None else load_platform(chosen)
