"""Monitoring shipped with TauGrid: Prometheus alert rules, Grafana dashboards, and the
Prometheus/Grafana configuration that points them at a running platform.

Package data (read only through this package):
- ``rules/taugrid-alerts.yaml``: alert rules over the hub's ``/metrics`` (the seed's
  thresholds), with their ``promtool test rules`` unit tests beside them
  (``rules/taugrid-alerts.test.yaml``)
- ``dashboards/*.json``: Grafana dashboards (platform overview, a run, regions and links)
  in the provisioning format, on a ``datasource`` template variable

``setup.write`` (``tau admin metrics setup``) lays out a ready directory: a Prometheus
config scraping the hub with a bearer-token file, the rules, and Grafana provisioning.
Pure: nothing here talks to a hub or imports another TauGrid layer.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["RULE_FILES", "dashboards", "data_dir", "rule_test_files"]

RULE_FILES = ("taugrid-alerts.yaml",)


def data_dir() -> Path:
    """The directory of this package's data files."""
    return Path(str(resources.files(__name__)))


def rule_test_files() -> list[Path]:
    """The ``promtool test rules`` files shipped beside the rules."""
    return sorted((data_dir() / "rules").glob("*.test.yaml"))


def dashboards() -> dict[str, dict[str, Any]]:
    """``{file name: Grafana dashboard JSON}`` of every shipped dashboard."""
    return {
        p.name: dict(json.loads(p.read_text()))
        for p in sorted((data_dir() / "dashboards").glob("*.json"))
    }
