"""Where a run's code came from, and which hub a client talks to, through the real
``tau`` console script and a real hub server (no Ray): ``tau run submit`` from a git
repository records its commit, branch and dirty flag, shown by ``tau run status`` (text
and ``-o json``) and the portal; ``tau version`` prints both versions and refuses a hub
older than the client needs (a hub from before API levels answers ``/healthz`` with no
level: a loopback server answering exactly that stands in for it)."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from pathlib import Path

from taugrid import version
from taugrid.portal import session
from taugrid.sdk.client import provenance
from tests.cli.test_secret_cli import tau
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@x", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return done.stdout.strip()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "train.py").write_text("print('hi')\n")
    (repo / "tau.yaml").write_text(tb.tau_yaml("prov"))
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    return repo


def test_git_source_reads_commit_branch_and_dirty(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    head = _git(repo, "rev-parse", "HEAD")
    assert provenance.git_source(repo) == {"commit": head, "branch": "main", "dirty": False}
    (repo / "train.py").write_text("print('changed')\n")
    assert provenance.git_source(repo) == {"commit": head, "branch": "main", "dirty": True}
    _git(repo, "stash", "-q")
    _git(repo, "checkout", "-q", "--detach")
    assert provenance.git_source(repo) == {"commit": head, "branch": None, "dirty": False}
    (tmp_path / "plain").mkdir()
    assert provenance.git_source(tmp_path / "plain") is None


def test_a_run_shows_the_commit_it_was_submitted_from(server: HubServer, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    head = _git(repo, "rev-parse", "HEAD")
    (repo / "notes.txt").write_text("untracked: the archive holds more than the commit\n")
    done = tau(server, "run", "submit", "-o", "json", cwd=repo)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["id"]
    shown = tau(server, "run", "status", run_id)
    assert f"source: {head[:12]} on main (uncommitted changes)" in shown.stdout, shown.stdout
    doc = json.loads(tau(server, "run", "status", run_id, "-o", "json").stdout)
    assert doc["source"] == {"commit": head, "branch": "main", "dirty": True}
    with server.http() as c:
        c.cookies.set(session.COOKIE, session.cookie_value(server.admin_token), path="/ui")
        page = c.get(f"/ui/runs/{run_id}").text
    assert f'title="{head}">{head[:12]}</code> on main (uncommitted changes)' in page


class _OldHub(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"ok": True, "time": 0.0}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_tau_version_prints_both_and_refuses_a_hub_too_old(server: HubServer) -> None:
    doc = json.loads(tau(server, "version", "-o", "json").stdout)
    assert doc["client"] == doc["hub"] == version.package_version()
    assert doc["hub_api_level"] == version.API_LEVEL
    old = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OldHub)
    threading.Thread(target=old.serve_forever, daemon=True).start()
    try:
        server_url = server.url
        server.url = f"http://127.0.0.1:{old.server_address[1]}"
        refused = tau(server, "version")
    finally:
        server.url = server_url
        old.shutdown()
        old.server_close()
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "API level 1" in refused.stderr and "pip install taugrid==" in refused.stderr
