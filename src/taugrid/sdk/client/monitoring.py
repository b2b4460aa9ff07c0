"""Monitoring a platform: a scrape-only token and the Prometheus/Grafana files for it.

``setup`` (``tau admin metrics setup``, admin only) revokes the previous scrape token
of the same name, creates a ``metrics`` token (scrape-only: it can read ``/metrics`` and nothing
else), checks that the hub serves ``/metrics`` with it, and
writes the monitoring directory (``taugrid.observability.setup``).
"""

from __future__ import annotations

from pathlib import Path

from taugrid.observability import setup as obs_setup
from taugrid.sdk.client import client, tenancy

__all__ = ["TOKEN_NAME", "scrape_token", "setup"]

TOKEN_NAME = "prometheus-scraper"


def scrape_token(c: client.Client, name: str = TOKEN_NAME) -> str:
    """A new scrape-only token named ``name`` (earlier ones of that name are revoked)."""
    for row in tenancy.list_tokens(c):
        if row["name"] == name and not row.get("revoked_at"):
            tenancy.revoke_token(c, row["id"])
    secret = str(tenancy.create_token(c, name, "metrics", [], None)["secret"])
    scraper = client.Client(client.HubConfig(c.config.url, secret, c.config.source), 30)
    try:
        scraper.request("GET", "/metrics")
    finally:
        scraper.close()
    return secret


def setup(
    c: client.Client,
    out: Path,
    *,
    scrape_interval: str = "15s",
    prometheus_url: str = "http://127.0.0.1:9090",
    token_name: str = TOKEN_NAME,
) -> obs_setup.Layout:
    """Write the monitoring directory ``out`` for the hub ``c`` talks to."""
    token = scrape_token(c, token_name)
    return obs_setup.write(
        out,
        c.config.url,
        token,
        scrape_interval=scrape_interval,
        prometheus_url=prometheus_url,
    )
