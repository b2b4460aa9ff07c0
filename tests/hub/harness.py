"""Hub test harness: a real hub served by uvicorn on 127.0.0.1 (a free port)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
import uvicorn

from taugrid import home as tau_home
from taugrid.hub.core import context
from taugrid.hub.server import app, daemon

TAU = shutil.which("tau") or str(Path(sys.executable).parent / "tau")
"""The ``tau`` console script of this environment."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class HubServer:
    """A hub app under uvicorn in a thread; ``stop`` shuts it down cleanly."""

    def __init__(self, hub: context.Hub, port: int | None = None) -> None:
        self.hub = hub
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        daemon.bootstrap_credentials(hub, self.url)
        creds = json.loads((hub.config.tau_home / "credentials.json").read_text())
        self.admin_token: str = creds["token"]
        self.app = app.create_app(hub)
        cfg = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            timeout_keep_alive=app.KEEP_ALIVE_S,
        )
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> HubServer:
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            if time.time() > deadline:
                raise TimeoutError("hub did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)

    def agent_token(self, cluster: str = "local") -> str:
        return tau_home.agent_token(self.hub.config.tau_home, cluster).read_text().strip()

    def tau(
        self,
        *args: str,
        token: str | None = None,
        stdin: str = "",
        cwd: Path | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """The real ``tau`` console script talking to this hub (admin unless ``token``;
        ``token=""``: no hub named), with a home of its own and wide output."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TAU_")}
        env.update(COLUMNS="200", TAU_HOME=str(self.hub.config.tau_home / "cli"))
        if token != "":
            env.update(TAU_HUB_URL=self.url, TAU_TOKEN=token or self.admin_token)
        return subprocess.run(
            [TAU, *args],
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=cwd,
        )

    def http(self, token: str | None = None) -> httpx.Client:
        tok = self.admin_token if token is None else token
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {tok}"}, timeout=30
        )


def make_hub(
    engine: sa.Engine, home: Path, platform_file: Path | None = None, **cfg: Any
) -> context.Hub:
    config = context.HubConfig(tau_home=home, cycle_s=0.2, platform_file=platform_file, **cfg)
    return context.Hub(config, engine=engine)


@contextlib.contextmanager
def platform_hub(
    engine: sa.Engine, tmp_path: Path, platform_yaml: str, **cfg: float
) -> Iterator[HubServer]:
    """A started hub server on ``platform_yaml`` (written to ``tmp_path``; ``cfg``: the
    hub's settings, e.g. ``grace_s``); stopped after."""
    (tmp_path / "platform.yaml").write_text(platform_yaml)
    server = HubServer(make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml", **cfg))
    server.start()
    try:
        yield server
    finally:
        server.stop()
