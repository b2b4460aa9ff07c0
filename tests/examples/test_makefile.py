"""``make install`` (the first step of ``make run``) tells the user what it does, lets pip
report its progress and installs the runtime only; ``make install-dev`` (the first step
of ``make test``) adds the test toolchain. It runs the real Makefile with a recording
``pip`` in place of the virtualenv's (the seam), so nothing is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE_PIP = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/pip-calls"
case " $* " in *" -q "*|*" --quiet "*) exit 0;; esac  # like pip: quiet prints nothing
case "$*" in *"-e ."*) echo "Collecting ray (from taugrid)";; esac
"""

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _make(target: str, venv: Path) -> tuple[str, list[str]]:
    """``make TARGET`` with a recording pip: what it printed, and pip's installs of tau."""
    bin_dir = venv / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("pip", "python"):
        (bin_dir / name).write_text(FAKE_PIP)
        (bin_dir / name).chmod(0o755)
    out = subprocess.run(
        ["make", "--no-print-directory", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    calls = (bin_dir / "pip-calls").read_text().splitlines()
    return out.stdout, [c for c in calls if "-e ." in c]


def test_install_step_announces_itself_and_shows_pip_progress(tmp_path: Path) -> None:
    stdout, (deps,) = _make("install", tmp_path / "venv")
    assert "about 2 minutes" in stdout
    assert "Collecting ray" in stdout  # pip's own progress reaches the user
    assert " -q" not in f" {deps}" and "--quiet" not in deps
    assert stdout.index("about 2 minutes") < stdout.index("Collecting ray")


def test_make_run_installs_the_runtime_and_make_test_the_toolchain(tmp_path: Path) -> None:
    _, (runtime,) = _make("install", tmp_path / "run")
    assert runtime.endswith("-e .")  # no [dev]: no pytest, mypy, ruff, moto, playwright
    _, (dev,) = _make("install-dev", tmp_path / "dev")
    assert dev.endswith("-e .[dev]")
    text = (ROOT / "Makefile").read_text()
    assert "run: $(RUN_STAMP)" in text and "unit: $(STAMP)" in text


def test_make_test_runs_pytest_on_parallel_workers() -> None:
    """``make test`` = lint + unit + bench-quick, and unit really runs pytest (a Makefile
    edit once dropped ``PYTEST``'s definition and ``make test`` ran no test at all)."""
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", "test"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "pytest -q -n 2 --basetemp=/tmp/tau-pytest-unit" in out.stdout, out.stdout
    assert "ruff check" in out.stdout and "benchmarks.run_all --quick" in out.stdout
