"""``tau admin hub status``: the hub's replicas, the leader and its lease, the database;
``tau version``: this client's version and the hub's, and whether they can work together.

Talks to the hub only through ``taugrid.sdk`` (``GET /v1/admin/hub``). Ages are taken
against the database's clock, which the replicas' leases use too.
"""

from __future__ import annotations

from typing import Any

import typer

from taugrid.cli import app, views
from taugrid.sdk.local import embedded

__all__: list[str] = []

hub_app = typer.Typer(help="The hub's replicas and leader (HA).", no_args_is_help=True)
app.admin_app.add_typer(hub_app, name="hub")


def _ago(now: float, ts: float) -> str:
    return f"{max(0.0, now - ts):.1f}s ago"


@hub_app.command("status")
@views.guard
def hub_status(output: views.Output = "text") -> None:
    """Replicas (alive, which one leads), the leader's lease and epoch, the database."""
    cli = embedded.ensure_client(views.progress)
    doc: dict[str, Any] = cli.request("GET", "/v1/admin/hub")
    if output == "json":
        views.emit_json(doc)
        return
    dbase, lead = doc["database"], doc["leader"]
    now = float(dbase["time"])
    views.console.print(
        f"database: {dbase['url']} ({dbase['dialect']}, schema {dbase['schema_revision']})"
    )
    if doc["mode"] == "single":
        views.console.print("mode: single replica (SQLite: no leader election)")
    elif lead.get("replica") is None:
        views.console.print(f"leader: NONE (the last lease, epoch {lead['epoch']}, expired)")
    else:
        views.console.print(
            f"leader: {lead['replica']} at {lead['url']}, epoch {lead['epoch']}, "
            f"lease expires in {lead['expires_in_s']:.1f}s (renewed "
            f"{_ago(now, lead['renewed_at'])}, leading since {_ago(now, lead['acquired_at'])})"
        )
    rows = [
        (
            r["id"] + (" (this)" if r["self"] else ""),
            r["url"] or "-",
            f"{r['host']}:{r['pid']}",
            "yes" if r["alive"] else "no",
            "leader" if r["leader"] else "standby" if r["alive"] else "-",
            _ago(now, r["last_seen"]),
            r["schema_revision"],
        )
        for r in doc["replicas"]
    ]
    cols = ["REPLICA", "URL", "HOST:PID", "ALIVE", "ROLE", "LAST SEEN", "SCHEMA"]
    views.console.print(views.table(cols, rows))


@app.app.command("version")
@views.guard
def version_cmd(output: views.Output = "text") -> None:
    """This client's version and the hub's (refused, with the fix, when the hub is older
    than this client needs)."""
    from taugrid import version

    cli = embedded.ensure_client(views.progress)
    hub = cli.compatible_health()
    doc = {
        "client": version.package_version(),
        "hub": hub.get("version", "unknown"),
        "hub_url": cli.config.url,
        "hub_api_level": hub.get("api_level", 1),
        "client_needs_api_level": version.MIN_HUB_API_LEVEL,
    }
    if output == "json":
        views.emit_json(doc)
        return
    views.console.print(f"client {doc['client']}")
    views.console.print(
        f"hub    {doc['hub']} at {doc['hub_url']} (API level {doc['hub_api_level']})"
    )
