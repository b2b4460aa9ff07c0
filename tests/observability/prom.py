"""A real Prometheus server for tests: Debian's ``prometheus`` binary on a loopback
address other than 127.0.0.1, a free port, the caller's config, a temp data dir,
bounded waits, killed at teardown. Tests skip (with the reason) only when the binary
is absent; .ci/run installs it.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import procs
from tests.hub.harness import free_port

HOST = "127.0.0.61"


def binary(name: str) -> str:
    """The path of ``prometheus`` or ``promtool``; skips the test when it is absent."""
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if path is None:
        pytest.skip(
            f"{name} is not installed: apt-get install prometheus (Debian's package, "
            "which .ci/run installs) to run the Prometheus tests"
        )
    return path


class Prometheus:
    """A started server: ``query`` (instant PromQL), ``alerts`` and ``targets``."""

    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log = url, log
        self.http = httpx.Client(base_url=url, timeout=10)

    def api(self, path: str, **params: Any) -> Any:
        r = self.http.get(f"/api/v1/{path}", params=params)
        doc = r.json()
        assert doc.get("status") == "success", f"{path} {params}: {doc}"
        return doc["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.api("query", query=expr)["result"])

    def alerts(self) -> list[dict[str, Any]]:
        return list(self.api("alerts")["alerts"])

    def wait(self, what: str, ok: Any, timeout_s: float = 60.0) -> Any:
        """Poll ``ok()`` until it returns something truthy (bounded)."""
        deadline = time.time() + timeout_s
        while True:
            got = ok()
            if got:
                return got
            if time.time() > deadline:
                tail = self.log.read_text()[-3000:]
                raise AssertionError(f"Prometheus: {what} within {timeout_s:.0f} s\n{tail}")
            time.sleep(0.5)


@contextlib.contextmanager
def server(config: Path, workdir: Path) -> Iterator[Prometheus]:
    """Prometheus on ``config``; stopped (SIGTERM, then SIGKILL) at exit."""
    port = free_port(HOST)
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "prometheus.log"
    argv = [
        binary("prometheus"),
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address={HOST}:{port}",
        "--log.level=warn",
    ]
    with log.open("w") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT)
    prom = Prometheus(f"http://{HOST}:{port}", log)
    try:

        def ready() -> bool:
            assert proc.poll() is None, f"prometheus exited: {log.read_text()[-3000:]}"
            with contextlib.suppress(httpx.HTTPError):
                return prom.http.get("/-/ready").status_code == 200
            return False

        prom.wait("ready", ready, timeout_s=60)
        yield prom
    finally:
        prom.http.close()
        procs.stop(proc)
