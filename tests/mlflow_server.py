"""A real MLflow tracking server for tests: ``mlflow server`` on loopback, SQLite behind it.

``tracking/build.sh`` installs MLflow from PyPI into a virtual environment of its own
(cached under ``~/.cache/taugrid/mlflow/``; ``.ci/run`` starts that install early, and a
test that finds it missing runs it, waiting for one already under way). ``start`` returns
once ``/health`` answers (bounded wait); ``stop`` ends the server's process group and
reaps it, so nothing is left running; ``start`` again brings the same server back (same
port, same database), as a tracking server back from an outage.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.backends import backend_helpers as bh

IP = "127.0.21.1"
BUILD = Path(__file__).resolve().parents[1] / "tracking" / "build.sh"
START_TIMEOUT_S = 120.0
READ_S = 60.0
"""How long a read of the server may take: on a loaded CI machine a server just started
again answered its first search after more than 10 s (the catch-up test failed on it)."""


def mlflow_binary() -> Path:
    """The ``mlflow`` command, installed first when it is not there (about 45 s cold)."""
    out = subprocess.run(
        ["bash", str(BUILD)], check=True, capture_output=True, text=True, timeout=900
    )
    return Path(out.stdout.strip().splitlines()[-1])


class MlflowServer:
    """One MLflow tracking server on ``IP`` (see the module docstring)."""

    def __init__(self, workdir: Path) -> None:
        self.binary = mlflow_binary()
        self.workdir = workdir
        self.port = bh.free_port(IP, 21000, 21999)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{IP}:{self.port}"

    def start(self) -> MlflowServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = [
            str(self.binary),
            "server",
            *("--host", IP, "--port", str(self.port), "--workers", "1"),
            *("--backend-store-uri", f"sqlite:///{self.workdir / 'mlflow.db'}"),
            *("--default-artifact-root", str(self.workdir / "artifacts")),
            *("--allowed-hosts", f"{IP}:{self.port},{IP}"),
        ]
        with (self.workdir / "server.log").open("ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited; see {self.workdir / 'server.log'}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return self
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"mlflow server not up in {START_TIMEOUT_S:g} s")

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):  # its workers, if any outlived it
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc = None

    def api(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """A call of MLflow's REST API (GET without ``body``, POST with it)."""
        url = f"{self.url}/api/2.0/mlflow/{path}"
        if body is None:
            r = httpx.get(url, timeout=READ_S)
        else:
            r = httpx.post(url, json=body, timeout=READ_S)
        r.raise_for_status()
        doc: dict[str, Any] = r.json()
        return doc

    def runs(self, experiment: str) -> list[dict[str, Any]]:
        """Every run of the experiment called ``experiment`` ([] when there is none)."""
        r = httpx.get(
            f"{self.url}/api/2.0/mlflow/experiments/get-by-name",
            params={"experiment_name": experiment},
            timeout=READ_S,
        )
        if r.status_code == 404:
            return []
        r.raise_for_status()
        eid = r.json()["experiment"]["experiment_id"]
        found = self.api("runs/search", {"experiment_ids": [eid], "max_results": 1000})
        runs: list[dict[str, Any]] = found.get("runs") or []
        return runs

    def history(self, run_id: str, key: str) -> list[tuple[int, float]]:
        """``(step, value)`` of the metric ``key`` of MLflow run ``run_id``, by step."""
        r = httpx.get(
            f"{self.url}/api/2.0/mlflow/metrics/get-history",
            params={"run_id": run_id, "metric_key": key, "max_results": 25000},
            timeout=READ_S,
        )
        r.raise_for_status()
        points = r.json().get("metrics") or []
        return sorted((int(p.get("step", 0)), float(p["value"])) for p in points)


@contextlib.contextmanager
def mlflow_server(workdir: Path) -> Iterator[MlflowServer]:
    """A started server, stopped after."""
    server = MlflowServer(workdir).start()
    try:
        yield server
    finally:
        server.stop()
