"""`tau admin metrics setup` through the console script against a real hub: the scrape
token it creates reads /metrics and nothing else, a rerun revokes the previous one, and
a non-admin or a stopped platform get a clear refusal (exit 2, no traceback)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from taugrid import errors, observability
from taugrid.observability import setup
from tests.cli.test_contexts import tau
from tests.dataplane.test_data_api import PLATFORM
from tests.hub import tenancy_builders as tb
from tests.hub.harness import HubServer, platform_hub


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    with platform_hub(engine, tmp_path, PLATFORM) as server:
        yield server


def _env(tmp_path: Path, hub: HubServer | None, token: str | None) -> dict[str, str]:
    env = {**os.environ, "TAU_HOME": str(tmp_path / "cli"), "COLUMNS": "200"}
    for k in ("TAU_HUB_URL", "TAU_TOKEN", "TAU_HUB_PORT"):
        env.pop(k, None)
    if hub is not None and token is not None:
        env |= {"TAU_HUB_URL": hub.url, "TAU_TOKEN": token}
    return env


def test_setup_writes_a_config_whose_token_reads_metrics_only(
    hub: HubServer, tmp_path: Path
) -> None:
    env = _env(tmp_path, hub, hub.admin_token)
    first = tau(env, "admin", "metrics", "setup", "--dir", str(tmp_path / "mon"))
    assert first.returncode == 0, first.stdout + first.stderr
    old = (tmp_path / "mon" / "hub.token").read_text().strip()
    again = tau(env, "admin", "metrics", "setup", "--dir", str(tmp_path / "mon"))
    assert again.returncode == 0, again.stdout + again.stderr
    token = (tmp_path / "mon" / "hub.token").read_text().strip()
    cfg = yaml.safe_load((tmp_path / "mon" / "prometheus.yml").read_text())
    (job,) = cfg["scrape_configs"]
    assert job["static_configs"] == [{"targets": [f"127.0.0.1:{hub.port}"]}]
    assert job["authorization"]["credentials_file"] == str(tmp_path / "mon" / "hub.token")
    assert cfg["rule_files"] == [str(tmp_path / "mon" / "rules" / "taugrid-alerts.yaml")]
    boards = tmp_path / "mon" / "grafana" / "dashboards"
    assert sorted(p.name for p in boards.iterdir()) == [
        "platform-overview.json",
        "regions-links.json",
        "run.json",
    ]
    with hub.http() as admin:
        tb.ok(tb.submit(admin), 201)
    with hub.http(token) as c:
        assert c.get("/metrics").status_code == 200
        assert c.get("/v1/runs").status_code == 403  # scrape-only: it reads no run
        assert c.get("/v1/admin/tokens").status_code == 403
    with hub.http(old) as c:
        assert c.get("/metrics").status_code == 401  # the rerun revoked the previous one


def test_setup_needs_an_admin_and_a_running_platform(hub: HubServer, tmp_path: Path) -> None:
    researcher = tb.token(hub, "ada", workspaces=["default"])
    out = tau(_env(tmp_path, hub, researcher), "admin", "metrics", "setup")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "admin token" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "cli" / "monitoring").exists()
    out = tau(_env(tmp_path, None, None), "admin", "metrics", "setup")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "not running" in out.stderr and "Traceback" not in out.stderr


def test_the_scrape_config_follows_the_hub_url(tmp_path: Path) -> None:
    cfg = setup.prometheus_config("https://hub.example:8443/tau/", tmp_path / "t", [])
    (job,) = cfg["scrape_configs"]
    assert (job["scheme"], job["metrics_path"]) == ("https", "/tau/metrics")
    assert job["static_configs"] == [{"targets": ["hub.example:8443"]}]
    (job,) = setup.prometheus_config("http://[::1]", tmp_path / "t", [])["scrape_configs"]
    assert job["static_configs"] == [{"targets": ["[::1]:80"]}]
    with pytest.raises(errors.UserError, match="not an http"):
        setup.prometheus_config("unix:///run/hub.sock", tmp_path / "t", [])


def test_dashboards_are_grafana_provisioning_json() -> None:
    boards = observability.dashboards()
    assert sorted(b["uid"] for b in boards.values()) == [
        "taugrid-overview",
        "taugrid-regions",
        "taugrid-run",
    ]
    for name, board in boards.items():
        (ds,) = [v for v in board["templating"]["list"] if v["type"] == "datasource"]
        assert ds["name"] == "datasource" and ds["query"] == "prometheus", name
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids)) and board["panels"], name
        for p in board["panels"]:
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, name
            assert p["targets"] and all(t["expr"] for t in p["targets"]), (name, p["title"])
            assert set(p["gridPos"]) == {"h", "w", "x", "y"}, (name, p["title"])
