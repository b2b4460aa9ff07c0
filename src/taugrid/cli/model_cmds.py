"""``tau model ...``: register a run's model, list and show versions, move aliases.

Talks to the hub only through ``taugrid.sdk.client.registry``. ``tau serve deploy --model
NAME@ALIAS`` serves a registered version.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from taugrid.cli import app, views
from taugrid.sdk.client import client as sdk_client
from taugrid.sdk.client import registry
from taugrid.sdk.local import embedded

__all__: list[str] = []


def _client() -> sdk_client.Client:
    return embedded.ensure_client(views.progress)


def _what(v: dict[str, Any]) -> str:
    src = v["source"]
    if src.get("checkpoint"):
        return f"checkpoint {src['checkpoint']}"
    return f"artifact {src.get('artifact') or 'artifacts/'}"


def _rows(versions: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            v["name"],
            f"v{v['version']}",
            ",".join(v["aliases"]) or "-",
            v["source"]["run"],
            _what(v),
            (v["lineage"].get("config_hash") or "")[:12],
            views.age(v["created_at"]),
        )
        for v in versions
    ]


_COLS = ("MODEL", "VERSION", "ALIASES", "RUN", "SERVES", "CONFIG", "AGE")


@app.model_app.command("register")
@views.guard
def register_cmd(
    name: str,
    from_run: Annotated[str, typer.Option("--from-run", help="The run (ID or name)")],
    checkpoint: Annotated[str | None, typer.Option("--checkpoint", help="latest or STEP")] = None,
    artifact: Annotated[str | None, typer.Option("--artifact", help="A file of artifacts/")] = None,
    best_by: Annotated[
        str | None,
        typer.Option("--best-by", help="[min:|max:]METRIC: the best run of that name"),
    ] = None,
    alias: Annotated[list[str] | None, typer.Option("--alias", help="e.g. staging")] = None,
    output: views.Output = "text",
) -> None:
    """Register a run's model as a new version of NAME."""
    v = registry.register(
        _client(),
        name,
        from_run,
        checkpoint=checkpoint,
        artifact=artifact,
        best_by=best_by,
        aliases=alias,
    )
    if output == "json":
        views.emit_json(v)
        return
    views.console.print(
        f"registered [bold]{v['name']}@v{v['version']}[/] from {v['source']['run']}"
    )


@app.model_app.command("list")
@views.guard
def list_cmd(output: views.Output = "text") -> None:
    """Every version of every model in your workspaces."""
    versions = registry.versions(_client())
    if output == "json":
        views.emit_json(versions)
        return
    views.console.print(views.table(_COLS, _rows(versions)))


@app.model_app.command("show")
@views.guard
def show_cmd(
    ref: Annotated[str, typer.Argument(help="NAME, NAME@ALIAS or NAME@vN")],
    output: views.Output = "text",
) -> None:
    """A model's versions, and what REF resolves to with its lineage."""
    doc = registry.show(_client(), ref)
    if output == "json":
        views.emit_json(doc)
        return
    views.console.print(views.table(_COLS, _rows(doc["versions"])))
    r = doc["resolved"]
    views.console.print(f"{ref} → v{r['version']}: {r['source']['model_path']}")
    views.console.print(f"lineage: {r['lineage']}")


@app.model_app.command("alias")
@views.guard
def alias_cmd(
    name: str, alias: str, version: Annotated[int, typer.Option("--version", min=1)]
) -> None:
    """Put ALIAS (production, staging, ...) on a version of NAME."""
    v = registry.set_alias(_client(), name, version, alias)
    views.console.print(f"{name}@{alias} → v{v['version']}")
