"""``tau admin metrics setup``: Prometheus (and Grafana) files for the running platform.

Talks to the hub only through ``taugrid.sdk`` (``sdk.client.monitoring``, imported by the
command: its YAML writer and package data are not needed to start ``tau``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from taugrid.cli import app, views
from taugrid.sdk.client import client as sdk_client
from taugrid.sdk.local import embedded

__all__: list[str] = []

metrics_app = typer.Typer(help="Prometheus metrics, alerts and dashboards.", no_args_is_help=True)
app.admin_app.add_typer(metrics_app, name="metrics")


@metrics_app.command("setup")
@views.guard
def metrics_setup(
    out: Annotated[
        Path | None,
        typer.Option("--dir", help="Where to write (default: $TAU_HOME/monitoring)"),
    ] = None,
    scrape_interval: Annotated[str, typer.Option("--scrape-interval")] = "15s",
    prometheus_url: Annotated[
        str, typer.Option("--prometheus-url", help="Prometheus as Grafana will reach it")
    ] = "http://127.0.0.1:9090",
) -> None:
    """Write a ready Prometheus config (hub scrape with a scrape-only token, alert rules)
    and Grafana provisioning for the platform this shell targets."""
    from taugrid.sdk.client import monitoring

    cli = embedded.ensure_client(views.progress)
    target = out if out is not None else sdk_client.tau_home() / "monitoring"
    lay = monitoring.setup(
        cli, target, scrape_interval=scrape_interval, prometheus_url=prometheus_url
    )
    views.console.print(
        f"wrote {lay.config} (scrapes {cli.config.url}/metrics with the token in "
        f"{lay.token}; rules in {lay.root / 'rules'}; Grafana in {lay.grafana})\n"
        f"run: prometheus --config.file={lay.config} --storage.tsdb.path={lay.root / 'data'}"
    )
