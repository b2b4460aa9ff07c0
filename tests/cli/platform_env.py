"""Builders for CLI tests on the embedded platform, through the real ``tau`` script.

``embedded_platform`` brings one platform up under a temporary ``$TAU_HOME`` (its own
hub port, Ray IP and Ray ports, so modules never share a platform) and, on the way out,
runs ``tau down`` and checks that no pid file and no Ray process of that IP is left.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.backends import backend_helpers as bh
from tests.hub.harness import free_port

__all__ = [
    "ROOT",
    "TAU",
    "copy_example",
    "embedded_platform",
    "home_env",
    "platform_fixture",
    "ray_left",
    "tau",
]

ROOT = Path(__file__).resolve().parents[2]
TAU = shutil.which("tau") or str(ROOT / ".venv" / "bin" / "tau")


def tau(
    env: dict[str, str], *args: str, cwd: Path = ROOT, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TAU, *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def home_env(home: Path, ip: str, columns: str = "200") -> dict[str, str]:
    """The environment of a platform rooted at ``home`` with Ray on ``ip``."""
    e = {
        **os.environ,
        "TAU_HOME": str(home),
        "TAU_HUB_PORT": str(free_port()),
        "TAU_RAY_IP": ip,
        "TAU_RAY_GCS_PORT": str(bh.free_port(ip, 6700, 6799)),
        "TAU_RAY_DASHBOARD_PORT": str(bh.free_port(ip, 8700, 8799)),
        "COLUMNS": columns,
    }
    for k in ("TAU_HUB_URL", "TAU_TOKEN"):
        e.pop(k, None)
    return e


def ray_left(ip: str) -> str:
    """Command lines of Ray processes still bound to exactly ``ip``."""
    pattern = f"node-ip-address={ip.replace('.', '[.]')}( |$)"
    return subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True).stdout


@contextlib.contextmanager
def embedded_platform(
    home: Path, ip: str, columns: str = "200", cwd: Path = ROOT
) -> Iterator[dict[str, str]]:
    """``tau up`` under ``home``; yields its environment; ``tau down`` leaves nothing."""
    e = home_env(home, ip, columns)
    up = tau(e, "up", cwd=cwd)
    if up.returncode != 0:  # what did start (the hub) goes too
        down = tau(e, "down", cwd=cwd)
        raise AssertionError(f"tau up failed: {up.stderr}{up.stdout}\ntau down: {down.stderr}")
    try:
        yield e
    finally:
        down = tau(e, "down", cwd=cwd)
        pids = [f.name for f in (home / "run").glob("*.pid")]
        assert down.returncode == 0 and not pids, down.stderr + str(pids)
        time.sleep(1)
        left = ray_left(ip)
        assert not left.strip(), f"Ray processes left behind: {left}"


def platform_fixture(ip: str) -> Any:
    """A module-scoped ``env`` fixture: one embedded platform on ``ip`` for the module
    (``env = pe.platform_fixture(IP)`` in the test module)."""

    @pytest.fixture(scope="module")
    def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
        home = tmp_path_factory.mktemp("tau-home")
        with embedded_platform(home, ip, cwd=home) as e:
            yield e

    return env


def copy_example(example: Path, dest: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """``example`` copied to ``dest`` with its tau.yaml changed by ``edit`` (in place)."""
    shutil.copytree(example, dest, ignore=shutil.ignore_patterns(".tau-local", "__pycache__"))
    doc = yaml.safe_load((dest / "tau.yaml").read_text())
    edit(doc)
    (dest / "tau.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return dest
