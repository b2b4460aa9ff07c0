"""The embedded platform on this machine: start, check and stop the hub and its agent.

``tau up`` (and any command that needs a hub and finds none configured) starts two
daemons under ``$TAU_HOME``: the hub (``python -m taugrid.hub.daemon``, SQLite in WAL
mode, 127.0.0.1) and the agent of region ``local`` (``python -m taugrid.agent.daemon
--start-ray``), which starts a real Ray cluster on 127.0.0.2. Each daemon has a pid
file and a log under ``$TAU_HOME``; ``tau down`` stops the agent (which stops Ray),
then the hub. Progress is reported through a callback so the CLI can show it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from taugrid.sdk import client

__all__ = ["Daemon", "EmbeddedPlatform", "ensure_client"]

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class Daemon:
    """A background process with a pid file and a log under ``$TAU_HOME``."""

    name: str
    home: Path

    @property
    def pidfile(self) -> Path:
        return self.home / "run" / f"{self.name}.pid"

    @property
    def logfile(self) -> Path:
        return self.home / "logs" / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def start(self, argv: list[str], env: dict[str, str]) -> int:
        self.logfile.parent.mkdir(parents=True, exist_ok=True)
        self.pidfile.parent.mkdir(parents=True, exist_ok=True)
        with self.logfile.open("ab") as log:
            proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        self.pidfile.write_text(str(proc.pid))
        return proc.pid

    def stop(self, timeout_s: float = 30.0) -> bool:
        pid = self.pid()
        if pid is None:
            self.pidfile.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + timeout_s
        while time.time() < deadline and _alive(pid):
            time.sleep(0.2)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self.pidfile.unlink(missing_ok=True)
        return True


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class EmbeddedPlatform:
    """Hub + the ``local`` agent on this machine, rooted at ``home``."""

    def __init__(self, home: Path | None = None, port: int | None = None) -> None:
        self.home = home or client.tau_home()
        self.port = port or int(os.environ.get("TAU_HUB_PORT", "8787"))
        self.url = f"http://127.0.0.1:{self.port}"
        self.hub = Daemon("hub", self.home)
        self.agent = Daemon("agent-local", self.home)

    def _env(self) -> dict[str, str]:
        return {**os.environ, "TAU_HOME": str(self.home), "PYTHONUNBUFFERED": "1"}

    def up(self, progress: Progress = _quiet, timeout_s: float = 180.0) -> client.Client:
        """Start whatever is not running and wait until a cluster reports; idempotent."""
        deadline = time.time() + timeout_s
        if self.hub.pid() is not None and self.agent.pid() is not None:
            progress = _quiet  # already up: nothing to report
        if self.hub.pid() is None:
            progress(f"starting hub on {self.url} (log: {self.hub.logfile})")
            self.hub.start(
                [
                    sys.executable,
                    "-m",
                    "taugrid.hub.daemon",
                    "--home",
                    str(self.home),
                    "--port",
                    str(self.port),
                ],
                self._env(),
            )
        cli = self._wait_hub(deadline, progress)
        if self.agent.pid() is None:
            progress(
                f"starting agent and Ray cluster of region 'local' (log: {self.agent.logfile})"
            )
            argv = [
                sys.executable,
                "-m",
                "taugrid.agent.daemon",
                "--home",
                str(self.home),
                "--hub",
                self.url,
                "--cluster",
                "local",
                "--start-ray",
                "--ray-ip",
                os.environ.get("TAU_RAY_IP", "127.0.0.2"),
            ]
            self.agent.start(argv, self._env())
        self._wait_cluster(cli, deadline, progress)
        return cli

    def _wait_hub(self, deadline: float, progress: Progress) -> client.Client:
        creds = self.home / "credentials.json"
        while time.time() < deadline:
            cfg = client.HubConfig.discover() if creds.exists() else None
            if cfg is not None and cfg.url == self.url:
                cli = client.Client(cfg, timeout_s=10)
                try:
                    cli.health()
                    progress("hub is up")
                    return cli
                except client.HubUnreachable:
                    cli.close()
            if self.hub.pid() is None:
                raise client.HubUnreachable(self.url, f"the hub exited; see {self.hub.logfile}")
            time.sleep(0.3)
        raise client.HubUnreachable(self.url, f"hub did not answer in time; see {self.hub.logfile}")

    def _wait_cluster(self, cli: client.Client, deadline: float, progress: Progress) -> None:
        while time.time() < deadline:
            ready = [
                c for c in cli.clusters() if c["state"] == "ready" and c["report"].get("nodes")
            ]
            if ready:
                r = ready[0]["report"]
                kind = "emulated" if r.get("emulated_gpus") else "real"
                progress(
                    f"region local ready: {len(r['nodes'])} nodes, {r['gpu_free']:g}/"
                    f"{r['gpu_free'] + r['gpu_busy']:g} GPUs free ({kind} GPUs)"
                )
                return
            if self.agent.pid() is None:
                raise client.HubUnreachable(self.url, f"the agent exited; see {self.agent.logfile}")
            time.sleep(0.5)
        raise client.HubUnreachable(
            self.url, f"region local did not report in time; see {self.agent.logfile}"
        )

    def down(self, progress: Progress = _quiet) -> None:
        if self.agent.stop(timeout_s=60):
            progress("agent and its Ray cluster stopped")
        if self.hub.stop():
            progress("hub stopped")

    def status(self) -> dict[str, object]:
        return {
            "home": str(self.home),
            "url": self.url,
            "hub_pid": self.hub.pid(),
            "agent_pid": self.agent.pid(),
            "hub_log": str(self.hub.logfile),
            "agent_log": str(self.agent.logfile),
        }


def ensure_client(progress: Progress = _quiet) -> client.Client:
    """A client of the configured hub; starts the embedded platform when none is configured.

    A hub is configured by ``TAU_HUB_URL`` (+ ``TAU_TOKEN``) or by credentials that
    ``tau login`` saved for a hub other than this machine's embedded one.
    """
    cfg = client.HubConfig.discover()
    plat = EmbeddedPlatform()
    if os.environ.get("TAU_HUB_URL") or (cfg is not None and cfg.url.rstrip("/") != plat.url):
        if cfg is None:
            raise client.HubUnreachable(
                os.environ["TAU_HUB_URL"], "no token: set TAU_TOKEN or run `tau login`"
            )
        cli = client.Client(cfg)
        cli.health()
        return cli
    return plat.up(progress)
