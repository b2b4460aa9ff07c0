"""A Ray Jobs API that stops answering a submission must not hang the agent or run a job twice.

Real hub, real agent loop, real Ray. The seam is the HTTP transport: a small reverse
proxy in front of Ray's dashboard forwards the first job submission to Ray and then
withholds Ray's answer (the request got through; the reply never comes back, as with a
dashboard stalled under load). The agent's request must time out, the agent must submit
again, and the deterministic submission ID must turn that second try into a re-attach:
the run succeeds and Ray holds exactly one job for its attempt.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from taugrid.agent import agent, hubclient
from taugrid.backends.ray import ray_jobs, ray_local
from taugrid.store import db
from tests.hub import region as rg
from tests.hub.harness import HubServer, make_hub

pytestmark = pytest.mark.ray

IP = "127.0.0.154"


class _StallOnce(http.server.ThreadingHTTPServer):
    """Forwards every request to ``target``; the first ``POST /api/jobs/`` reply is withheld."""

    daemon_threads = True

    def __init__(self, target: str) -> None:
        self.target, self.posts, self.release = target, 0, threading.Event()
        super().__init__((IP, 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://{IP}:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _StallOnce

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        with httpx.Client(timeout=60) as c:
            r = c.request(
                self.command, self.server.target + self.path, content=body, headers=headers
            )
        if self.command == "POST" and self.path.rstrip("/") == "/api/jobs":
            self.server.posts += 1
            if self.server.posts == 1:  # Ray has the job; its answer never arrives
                self.server.release.wait(60)
                self.close_connection = True
                return
        self.send_response(r.status_code)
        for k, v in r.headers.items():
            if k.lower() not in (
                "content-length",
                "transfer-encoding",
                "connection",
                "content-encoding",
            ):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(r.content)))
        self.end_headers()
        self.wfile.write(r.content)

    do_GET = do_POST = do_DELETE = do_PUT = _forward

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ray_local.LocalRayCluster]:
    c = rg.start_ray([IP], tmp_path / "ray")
    try:
        yield c
    finally:
        c.stop()


def test_a_submission_whose_reply_never_comes_is_retried_and_runs_once(
    tmp_path: Path,
    cluster: ray_local.LocalRayCluster,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ray_jobs, "SUBMIT_TIMEOUT_S", (5.0, 4.0))
    proxy = _StallOnce(cluster.dashboard_url)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    engine = db.open_engine(f"sqlite:///{tmp_path / 'hub.db'}")  # not about the database
    server = HubServer(make_hub(engine, tmp_path)).start()
    backend = ray_jobs.RayBackend(
        proxy.url, gcs_address=cluster.gcs_address, emulated_gpus=cluster.emulated
    )
    client = hubclient.HubClient(server.url, server.agent_token("local"), "local")
    cfg = agent.AgentConfig("local", "local", tmp_path / "agent", sync_s=0.3, report_s=1.0)
    stop = threading.Event()
    loop = threading.Thread(target=agent.Agent(cfg, backend, client).run, args=(stop,))
    loop.start()
    try:
        with server.http() as c:
            yaml = rg.quickstart_yaml("--steps 5 --checkpoint-every 5", retries=0)
            run = rg.submit_run(c, yaml)
            done = rg.wait_run(c, run["id"], rg.finished, timeout=240)
            assert done["state"] == "succeeded", done["reason"]
        assert proxy.posts == 2  # the first reply was withheld; the agent asked again
        jobs = httpx.get(f"{cluster.dashboard_url}/api/jobs/", headers=cluster.auth_headers())
        mine = [
            j for j in jobs.json() if (j.get("submission_id") or "").startswith(f"tau-{run['id']}")
        ]
        assert len(mine) == 1, [j["submission_id"] for j in mine]
    finally:
        proxy.release.set()
        stop.set()
        loop.join(timeout=30)
        client.close()
        backend.close()
        proxy.shutdown()
        server.stop()
        engine.dispose()
