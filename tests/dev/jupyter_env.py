"""The ``jupyter`` command of interactive sessions for tests and benchmarks.

``jupyter/build.sh`` installs JupyterLab from PyPI into a virtual environment of its own
(cached under ``~/.cache/taugrid/jupyter/``; ``.ci/run`` starts that install early, and a
caller that finds it missing runs it, waiting for one already under way).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["jupyter_binary"]

BUILD = Path(__file__).resolve().parents[2] / "jupyter" / "build.sh"


def jupyter_binary() -> str:
    """The ``jupyter`` command, installed first when it is not there (about 90 s cold)."""
    out = subprocess.run(
        ["bash", str(BUILD)], check=True, capture_output=True, text=True, timeout=900
    )
    return out.stdout.strip().splitlines()[-1]
