"""A ready monitoring directory for one platform: Prometheus config, rules, Grafana files.

``write(out, hub_url, token)`` lays out::

    out/prometheus.yml                      scrape config for the hub + rule_files
    out/hub.token                           the scrape token (mode 0600)
    out/rules/taugrid-alerts.yaml           the shipped alert rules
    out/grafana/provisioning/datasources/taugrid.yaml   Prometheus as a data source
    out/grafana/provisioning/dashboards/taugrid.yaml    a provider for out/grafana/dashboards
    out/grafana/dashboards/*.json           the shipped dashboards

Paths inside the files are absolute, so Prometheus and Grafana can run from anywhere:
``prometheus --config.file=out/prometheus.yml --storage.tsdb.path=out/data``.
"""

from __future__ import annotations

import dataclasses
import shutil
import urllib.parse
from pathlib import Path
from typing import Any

import yaml

from taugrid import errors, private
from taugrid import observability as obs

__all__ = ["JOB", "Layout", "prometheus_config", "write"]

JOB = "taugrid-hub"


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where ``write`` put each file."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "prometheus.yml"

    @property
    def token(self) -> Path:
        return self.root / "hub.token"

    @property
    def rules(self) -> list[Path]:
        return [self.root / "rules" / name for name in obs.RULE_FILES]

    @property
    def grafana(self) -> Path:
        return self.root / "grafana"


def prometheus_config(
    hub_url: str, token_file: Path, rule_files: list[Path], scrape_interval: str = "15s"
) -> dict[str, Any]:
    """A Prometheus config that scrapes the hub at ``hub_url`` with a bearer token file."""
    url = urllib.parse.urlsplit(hub_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise errors.UserError(
            f"the hub URL '{hub_url}' is not an http(s) URL",
            "target a hub with `tau context use NAME` or TAU_HUB_URL=http://HOST:PORT",
        )
    port = url.port or (443 if url.scheme == "https" else 80)
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    return {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [
            {
                "job_name": JOB,
                "scheme": url.scheme,
                "metrics_path": url.path.rstrip("/") + "/metrics",
                "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
                "static_configs": [{"targets": [f"{host}:{port}"]}],
            }
        ],
    }


def write(
    out: Path,
    hub_url: str,
    token: str,
    *,
    scrape_interval: str = "15s",
    prometheus_url: str = "http://127.0.0.1:9090",
) -> Layout:
    """Write the monitoring directory for the hub at ``hub_url`` (see the module doc)."""
    lay = Layout(out.expanduser().resolve())
    try:
        lay.root.mkdir(parents=True, exist_ok=True)
        private.write(lay.token, token + "\n")
        (lay.root / "rules").mkdir(exist_ok=True)
        for src, dst in zip(obs.RULE_FILES, lay.rules, strict=True):
            shutil.copyfile(obs.data_dir() / "rules" / src, dst)
        cfg = prometheus_config(hub_url, lay.token, lay.rules, scrape_interval)
        lay.config.write_text(_HEADER + yaml.safe_dump(cfg, sort_keys=False))
        _write_grafana(lay.grafana, prometheus_url)
    except OSError as exc:
        raise errors.UserError(
            f"cannot write the monitoring files to {lay.root}: {exc.strerror or exc}",
            "choose a writable directory with --dir",
        ) from None
    return lay


_HEADER = "# Written by `tau admin metrics setup`: Prometheus for a TauGrid platform.\n"


def _write_grafana(root: Path, prometheus_url: str) -> None:
    boards = root / "dashboards"
    sources = root / "provisioning" / "datasources"
    providers = root / "provisioning" / "dashboards"
    for d in (boards, sources, providers):
        d.mkdir(parents=True, exist_ok=True)
    for p in sorted((obs.data_dir() / "dashboards").glob("*.json")):
        shutil.copyfile(p, boards / p.name)
    source: dict[str, Any] = {"name": "TauGrid Prometheus", "type": "prometheus"}
    source |= {"uid": "taugrid-prometheus"}
    source |= {"access": "proxy", "url": prometheus_url, "isDefault": True}
    doc = {"apiVersion": 1, "datasources": [source]}
    (sources / "taugrid.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    provider: dict[str, Any] = {"name": "taugrid", "folder": "TauGrid", "type": "file"}
    provider |= {"allowUiUpdates": True, "options": {"path": str(boards)}}
    doc = {"apiVersion": 1, "providers": [provider]}
    (providers / "taugrid.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
