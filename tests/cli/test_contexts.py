"""Which hub ``tau`` targets, through the real console script (no Ray needed).

Read-only commands never start the platform; a hub of another ``$TAU_HOME`` on a
pinned port is named as such; ``tau lab`` makes its hub the current context and
``tau lab down`` returns to the previous one (the lab's hub is started by the lab's
own code; its namespaces and Ray clusters need root and are not started here).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from taugrid.lab import lab, topology
from tests.cli import platform_env as pe
from tests.hub.harness import free_port

ROOT, TAU, tau = pe.ROOT, pe.TAU, pe.tau


def _env(home: Path) -> dict[str, str]:
    e = {**os.environ, "TAU_HOME": str(home), "COLUMNS": "200"}
    for k in ("TAU_HUB_URL", "TAU_TOKEN", "TAU_HUB_PORT"):
        e.pop(k, None)
    return e


def _taugrid_pids(home: Path) -> list[int]:
    """Processes whose command line names ``home`` (a hub or agent of it)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if str(home).encode() in argv and any(b"taugrid" in a for a in argv):
                out.append(int(entry.name))
    return out


@pytest.mark.parametrize(
    "args", [("run", "list"), ("cluster", "list"), ("region", "list"), ("run", "status", "x")]
)
def test_read_only_commands_do_not_start_the_platform(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    out = tau(_env(tmp_path), *args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "not running" in out.stderr and "tau up" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "run" / "hub.pid").exists() and not _taugrid_pids(tmp_path)


@pytest.mark.parametrize(
    ("var", "value"), [("TAU_RAY_GCS_PORT", "16961"), ("TAU_HUB_PORT", "eighty")]
)
def test_tau_up_names_a_port_variable_it_cannot_use(tmp_path: Path, var: str, value: str) -> None:
    env = {**_env(tmp_path), "TAU_RAY_IP": "127.0.0.57", var: value}
    try:
        out = tau(env, "up", timeout=240)
        assert out.returncode == 2, out.stdout + out.stderr
        assert f"{var}={value} is not a port" in out.stderr and "Traceback" not in out.stderr
        assert not _taugrid_pids(tmp_path)  # refused before anything started
    finally:
        tau(_env(tmp_path), "down", timeout=240)


@pytest.fixture
def foreign_hub(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """The hub daemon of another ``$TAU_HOME`` on a port of its own."""
    home, port = tmp_path / "other", free_port()
    argv = [
        sys.executable,
        "-m",
        "taugrid.hub.server.daemon",
        "--home",
        str(home),
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(
        argv, env=_env(home), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 60
        while not ((home / "credentials.json").exists() and _listening(port)):
            assert proc.poll() is None and time.monotonic() < deadline, "foreign hub not up"
            time.sleep(0.2)
        yield home, port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_a_pinned_port_held_by_another_platform_is_named(
    tmp_path: Path, foreign_hub: tuple[Path, int]
) -> None:
    _, port = foreign_hub
    home = tmp_path / "mine"
    out = tau({**_env(home), "TAU_HUB_PORT": str(port)}, "up")
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"127.0.0.1:{port}" in out.stderr and "another TAU_HOME" in out.stderr, out.stderr
    assert "unknown or revoked token" not in out.stderr and "Traceback" not in out.stderr
    assert not _taugrid_pids(home)


def test_a_foreign_hub_answering_on_our_url_is_named(
    tmp_path: Path, foreign_hub: tuple[Path, int]
) -> None:
    """Our credentials point at a port where another home's hub answers."""
    _, port = foreign_hub
    home = tmp_path / "mine"
    (home / "run").mkdir(parents=True)
    creds = {"hub_url": f"http://127.0.0.1:{port}", "token": "tau_not_the_foreign_hubs"}
    (home / "credentials.json").write_text(json.dumps(creds))
    (home / "run" / "ports.json").write_text(json.dumps({"hub_port": port}))
    # a hub of this home "runs" (say, one whose pid file survived): pid file of a live
    # process started with our home; it holds no port, the foreign hub does
    nap = "import time; time.sleep(60)"  # argv: -m taugrid.hub.server.daemon --home HOME
    argv = [sys.executable, "-c", nap, "taugrid.hub.server.daemon", "--home", str(home)]
    sleeper = subprocess.Popen(argv)
    try:
        (home / "run" / "hub.pid").write_text(str(sleeper.pid))
        out = tau(_env(home), "run", "list")
        assert out.returncode == 2, out.stdout + out.stderr
        assert "not the one of" in out.stderr and "another TauGrid platform" in out.stderr
        assert "unknown or revoked token" not in out.stderr
    finally:
        sleeper.kill()
        sleeper.wait()


def test_lab_context_is_current_until_lab_down(tmp_path: Path) -> None:
    env = _env(tmp_path)
    the_lab = lab.Lab(tmp_path / "lab", contexts_home=tmp_path)
    url = the_lab.start_hub(topology.load(None, 2))
    try:
        listed = json.loads(tau(env, "context", "list", "-o", "json").stdout)
        assert {r["name"]: r["current"] for r in listed} == {"local": False, "lab": True}
        clusters = tau(env, "cluster", "list", "-o", "json")
        assert clusters.returncode == 0, clusters.stderr  # the lab hub answers, no exports
        assert tau(env, "context", "use", "local").returncode == 0
        local = tau(env, "cluster", "list")
        assert local.returncode == 2 and "tau up" in local.stderr, local.stderr
        assert tau(env, "context", "use", "lab").returncode == 0
        again = tau(env, "cluster", "list", "-o", "json")
        assert again.returncode == 0 and again.stdout == clusters.stdout
        down = tau(env, "down")  # stops only the embedded platform (not running): says both
        assert down.returncode == 0 and "not running; nothing to stop" in down.stderr
        assert "context 'lab'" in down.stderr and "tau lab down" in down.stderr, down.stderr
        assert tau(env, "cluster", "list", "-o", "json").returncode == 0  # the lab still runs
    finally:
        the_lab.down()
    assert tau(env, "context", "current").stdout.strip() == "local"
    assert url and not _taugrid_pids(the_lab.hub_home)
    missing = tau(env, "context", "use", "lab")
    assert missing.returncode == 2 and "no context named 'lab'" in missing.stderr
