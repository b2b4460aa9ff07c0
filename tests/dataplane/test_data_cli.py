"""``tau data`` / ``tau region list`` / ``tau run explain-placement`` through the console
entry point against a real hub (``-o json`` and text)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from taugrid.cli import main as cli_main
from tests.dataplane import test_data_api as api
from tests.hub.harness import HubServer, make_hub


@pytest.fixture
def hub(tmp_path: Path) -> HubServer:
    (tmp_path / "platform.yaml").write_text(api.PLATFORM)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'hub.db'}")
    from taugrid.store import db

    db.migrate(engine)
    return HubServer(make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml"))


def test_data_commands(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.start()
    try:
        monkeypatch.setenv("TAU_HUB_URL", hub.url)
        monkeypatch.setenv("TAU_TOKEN", hub.admin_token)
        probes = {"a": {"throughput_mbps": 100.0, "rtt_ms": 1.5, "measured_at": 1.0}}
        api._agent(hub, "a", {})
        api._agent(hub, "b", probes)
        run = CliRunner().invoke
        app = cli_main.app
        r = run(app, ["data", "register", "corpus", "--region", "a", "--path", "corpus"])
        assert r.exit_code == 0, r.output
        files = [{"path": "x", "size": 5, "sha256": "0" * 64}]
        scan = {"dataset_id": "corpus@v1", "files": files, "size_bytes": 5, "sha256": "f" * 64}
        api._data_sync(hub, "a", {"scans": [scan]})
        r = run(app, ["data", "list", "-o", "json"])
        assert [d["id"] for d in json.loads(r.output)] == ["corpus@v1"]
        r = run(app, ["data", "list", "--workspace", "default"])
        assert "corpus@v1" in r.output and "default" in r.output, r.output
        r = run(app, ["data", "register", "x", "--region", "a", "--path", "x", "--workspace", "no"])
        assert r.exit_code != 0 and "no workspace 'no'" in r.output, r.output
        r = run(app, ["data", "replicate", "corpus", "--to", "b", "-o", "json"])
        assert json.loads(r.output)["state"] == "queued", r.output
        r = run(app, ["data", "show", "corpus"])
        assert "a → b" in r.output and "queued" in r.output
        r = run(app, ["data", "replicas", "corpus", "-o", "json"])
        assert {x["region"] for x in json.loads(r.output)} == {"a", "b"}
        r = run(app, ["region", "list"])
        assert r.exit_code == 0 and "100 Mbit/s 1.5 ms" in r.output, r.output
        r = run(app, ["data", "show", "nope"])
        assert r.exit_code == 2 and "no dataset 'nope'" in r.output
    finally:
        hub.stop()
