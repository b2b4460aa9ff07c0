"""``make install`` (the first step of ``make run``) tells the user what it does and lets
pip report its progress: it runs the real Makefile with a recording ``pip`` in place of
the virtualenv's (the seam), so nothing is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE_PIP = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/pip-calls"
case " $* " in *" -q "*|*" --quiet "*) exit 0;; esac  # like pip: quiet prints nothing
case "$*" in *"-e .[dev]"*) echo "Collecting ray (from taugrid)";; esac
"""


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_install_step_announces_itself_and_shows_pip_progress(tmp_path: Path) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("pip", "python"):
        (bin_dir / name).write_text(FAKE_PIP)
        (bin_dir / name).chmod(0o755)
    out = subprocess.run(
        ["make", "--no-print-directory", "install", f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "about 2 minutes" in out.stdout
    assert "Collecting ray" in out.stdout  # pip's own progress reaches the user
    (deps,) = [c for c in (bin_dir / "pip-calls").read_text().splitlines() if ".[dev]" in c]
    assert " -q" not in f" {deps}" and "--quiet" not in deps
    assert out.stdout.index("about 2 minutes") < out.stdout.index("Collecting ray")
