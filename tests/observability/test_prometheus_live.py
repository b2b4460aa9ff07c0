"""A real Prometheus scrapes a real hub with the files `tau admin metrics setup` wrote.

The hub (uvicorn, real SQLite/PostgreSQL store, real scheduler) holds the state of
tests.observability.scene: two regions played over HTTP by their agents, a link probe,
a running run with a metric, a node marked faulty. The console script writes the
Prometheus config (bearer-token file, shipped rules); Debian's ``prometheus`` runs it on
loopback. Then every shipped dashboard panel's query and every alert rule's query (its
expression without the threshold) must return series from the live server, and the
faulty node must raise ``TauNodeUnhealthy``.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from taugrid import observability
from tests.cli.test_contexts import tau
from tests.dataplane.test_data_api import PLATFORM
from tests.hub.harness import HubServer, make_hub
from tests.observability import prom, scene

# Grafana's variables, as a dashboard user who picks "All" would send them
_GRAFANA_VARS = {
    "$__rate_interval": "1m",
    "$__range": "5m",
    "$workspace": ".+",
    "$run_id": ".+",
    "$region": ".+",
}
_THRESHOLD = re.compile(r"^(?P<query>.+?)\s*(?P<op>[<>]=?|==|!=)\s*(?P<value>[0-9.]+)$", re.S)


pytestmark = pytest.mark.slow  # a real Prometheus server scraping for seconds


@pytest.fixture
def hub(engine: sa.Engine, tmp_path: Path) -> Iterator[HubServer]:
    (tmp_path / "platform.yaml").write_text(PLATFORM)
    # long leases: the agents played over HTTP sync once, and must not be lost meanwhile
    h = make_hub(engine, tmp_path / "home", tmp_path / "platform.yaml", lease_s=900, grace_s=900)
    server = HubServer(h).start()
    try:
        yield server
    finally:
        server.stop()


def _setup(hub: HubServer, tmp_path: Path) -> Path:
    env = {**os.environ, "TAU_HOME": str(tmp_path / "cli"), "COLUMNS": "200"}
    env |= {"TAU_HUB_URL": hub.url, "TAU_TOKEN": hub.admin_token}
    out = tau(
        env, "admin", "metrics", "setup", "--dir", str(tmp_path / "mon"), "--scrape-interval", "1s"
    )
    assert out.returncode == 0, out.stdout + out.stderr
    config = tmp_path / "mon" / "prometheus.yml"
    assert str(config) in out.stdout and "prometheus --config.file=" in out.stdout
    token = tmp_path / "mon" / "hub.token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert token.read_text().strip() != hub.admin_token  # a scrape-only token, not ours
    check = subprocess.run(
        [prom.binary("promtool"), "check", "config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    return config


def _panel_queries() -> list[tuple[str, str]]:
    out = []
    for name, board in observability.dashboards().items():
        for panel in board["panels"]:
            for target in panel["targets"]:
                expr = target["expr"]
                for var, value in _GRAFANA_VARS.items():
                    expr = expr.replace(var, value)
                assert "$" not in expr, f"{name}: a variable the test does not know: {expr}"
                out.append((f"{name}: {panel['title']}", expr))
    return out


def _rule_queries() -> list[tuple[str, str]]:
    out = []
    for rules in observability.RULE_FILES:
        doc = yaml.safe_load((observability.data_dir() / "rules" / rules).read_text())
        for group in doc["groups"]:
            for rule in group["rules"]:
                m = _THRESHOLD.match(rule["expr"].strip())
                assert m, f"{rule['alert']}: not '<query> <op> <threshold>': {rule['expr']}"
                out.append((rule["alert"], m["query"]))
    return out


def test_prometheus_scrapes_the_hub_and_every_panel_and_rule_has_series(
    hub: HubServer, tmp_path: Path
) -> None:
    s = scene.build(hub)
    config = _setup(hub, tmp_path)
    with prom.server(config, tmp_path / "prom") as p:
        up = lambda: p.query('up{job="taugrid-hub"} == 1')  # noqa: E731
        p.wait("the hub scraped (up == 1)", up)
        # enough samples for rate() over a minute, and rules evaluated a few times
        enough = lambda: p.query('count_over_time(up{job="taugrid-hub"}[1m]) >= 4')  # noqa: E731
        p.wait("4 scrapes", enough)
        empty = [
            f"{what}: {expr}"
            for what, expr in _panel_queries() + _rule_queries()
            if not p.query(expr)
        ]
        assert not empty, "queries without series:\n" + "\n".join(empty)
        age = p.query(f'tau_run_progress_age_seconds{{run_id="{s.run_id}"}}')
        assert age[0]["metric"]["region"] == s.region
        assert age[0]["metric"]["workspace"] == "default"

        def node_alert() -> list[dict[str, str]]:
            return [
                a["labels"]
                for a in p.alerts()
                if a["labels"]["alertname"] == "TauNodeUnhealthy"
                and a["state"] in ("pending", "firing")
            ]

        (labels,) = p.wait("TauNodeUnhealthy raised", node_alert)
        assert labels["node"] == s.faulty_node and labels["region"] == s.faulty_region
        assert labels["reason"] == "ecc"
