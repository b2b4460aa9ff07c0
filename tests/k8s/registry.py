"""A local image registry for the Kubernetes tier: Debian's ``docker-registry`` (the
Distribution registry) on a loopback address, its storage in the test's directory.
``push`` puts an OCI archive there (``deploy/image/push.py``), so pods name the image by
reference and the real node pulls it over plain HTTP, as a cluster pulls from its own
registry. Started and stopped by the test; nothing listens beyond loopback."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml

from tests import procs
from tests.cli import platform_env
from tests.k8s.controlplane import free_port

__all__ = ["Registry", "missing"]

PUSH = platform_env.ROOT / "deploy" / "image" / "push.py"


def missing() -> list[str]:
    """Debian packages the registry needs and this machine lacks."""
    return [] if shutil.which("docker-registry") else ["docker-registry"]


@dataclass
class Registry:
    """``docker-registry`` on ``ip`` under ``workdir``; use it with ``with``."""

    ip: str
    workdir: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def host(self) -> str:
        """``ip:port``: how an image reference names this registry."""
        return f"{self.ip}:{self.port}"

    def __enter__(self) -> Registry:
        self.port = self.port or free_port(self.ip)
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "config.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "version": 0.1,
                    "log": {"level": "warn"},
                    "storage": {"filesystem": {"rootdirectory": str(self.workdir / "data")}},
                    "http": {"addr": self.host},
                }
            )
        )
        with (self.workdir / "registry.log").open("ab") as log:
            self.proc = subprocess.Popen(
                ["docker-registry", "serve", str(config)], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://{self.host}/v2/", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"docker-registry did not start: {self.log_tail()}")
            time.sleep(0.2)

    def __exit__(self, *exc: object) -> None:
        procs.stop(self.proc)
        shutil.rmtree(self.workdir / "data", ignore_errors=True)  # the images: GBs of disk

    def log_tail(self) -> str:
        return (self.workdir / "registry.log").read_text(errors="replace")[-2000:]

    def push(self, archive: Path, ref: str) -> str:
        """Pushes ``archive`` as ``ref`` (``repository:tag``); the reference pods use."""
        done = subprocess.run(
            [sys.executable, str(PUSH), str(archive), f"http://{self.host}", ref],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"push failed: {done.stderr}\n{self.log_tail()}"
        return f"{self.host}/{ref}"
