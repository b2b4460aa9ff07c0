"""The project's container image for the Kubernetes tier: the OCI archive that
``deploy/image/build.sh`` (``make image``) builds and caches, and the reference it
carries. ``.ci/run`` builds it beside the other tiers; a test that needs it and finds
none fails saying how to build it (a skipped image test would prove nothing)."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.cli import platform_env

__all__ = ["archive", "archive_path", "name"]

BUILD = platform_env.ROOT / "deploy" / "image" / "build.sh"


def archive_path() -> Path | None:
    """Where the archive for this tree's sources is, or None when it is not built."""
    out = subprocess.run([str(BUILD), "--print-archive"], capture_output=True, text=True)
    path = Path(out.stdout.strip())
    return path if out.returncode == 0 and path.is_file() else None


def archive() -> Path:
    """The archive built for this tree's sources; fails the test when it is not built."""
    path = archive_path()
    if path is None:
        pytest.fail("no project image built for this tree's sources; run `make image`")
    return path


def name(path: Path) -> str:
    """The image reference the archive carries (``io.containerd.image.name``)."""
    with tarfile.open(path) as tar:
        member = tar.extractfile("index.json")
        assert member is not None
        index = json.load(member)
    return str(index["manifests"][0]["annotations"]["io.containerd.image.name"])
