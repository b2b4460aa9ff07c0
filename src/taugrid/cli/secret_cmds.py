"""``tau secret set | list | delete``: workspace secrets (and, for admins, the platform's).

Talks to the hub only through ``taugrid.sdk`` (``sdk.client.secrets``). Values are read from the
command line (``KEY=VALUE``) or standard input (``KEY=-``), sent once, and never printed:
listings show names, keys and who set them. Runs name them in ``runtime.secrets``.
"""

from __future__ import annotations

import sys
import time
from typing import Annotated

import typer

from taugrid.cli import app, views
from taugrid.sdk.client import client as sdk_client
from taugrid.sdk.client import secrets as sdk
from taugrid.sdk.local import embedded

__all__: list[str] = []

secret_app = typer.Typer(
    help="Secrets runs use (runtime.secrets): set, list, delete. Values are never shown.",
    no_args_is_help=True,
)
app.app.add_typer(secret_app, name="secret")

Workspace = Annotated[
    str | None, typer.Option("--workspace", help="workspace (default: your only one)")
]
Platform = Annotated[bool, typer.Option("--platform", help="a secret of every workspace (admins)")]


def _client() -> sdk_client.Client:
    return embedded.ensure_client(views.progress)


def _scope(c: sdk_client.Client, workspace: str | None, platform: bool) -> str | None:
    return None if platform else sdk.scope_of(c, workspace)


def _stdin(data: dict[str, str]) -> dict[str, str]:
    """Values given as ``-`` come from standard input (one secret value: all of it)."""
    wanted = [k for k, v in data.items() if v == "-"]
    if wanted:
        text = sys.stdin.read().rstrip("\n")
        data.update({k: text for k in wanted})
    return data


@secret_app.command("set")
@views.guard
def set_cmd(
    name: str,
    pairs: Annotated[list[str], typer.Argument(help="KEY=VALUE (KEY=- reads standard input)")],
    workspace: Workspace = None,
    platform: Platform = False,
    output: views.Output = "text",
) -> None:
    """Create or replace a secret; its values are sealed by the hub."""
    c = _client()
    scope = _scope(c, workspace, platform)
    row = sdk.put(c, scope, name, _stdin(sdk.parse_pairs(pairs)))
    if output == "json":
        views.emit_json(row.model_dump())
        return
    where = "the platform" if scope is None else f"workspace {scope}"
    views.console.print(f"secret [bold]{name}[/] set in {where} (keys: {', '.join(row.keys)})")


@secret_app.command("list")
@views.guard
def list_cmd(
    workspace: Workspace = None, platform: Platform = False, output: views.Output = "text"
) -> None:
    """Secrets a workspace's runs can use: its own and the platform's (never values)."""
    from taugrid.payloads import SECRETS_PLATFORM_SCOPE  # pydantic: not at CLI start

    c = _client()
    rows = sdk.listing(c, _scope(c, workspace, platform))
    if output == "json":
        views.emit_json([r.model_dump() for r in rows])
        return
    cols = ["NAME", "SCOPE", "KEYS", "UPDATED", "BY"]
    data = [
        (
            r.name,
            "platform" if r.scope == SECRETS_PLATFORM_SCOPE else r.scope,
            ", ".join(r.keys),
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.updated_at)),
            r.updated_by,
        )
        for r in rows
    ]
    views.console.print(views.table(cols, data))


@secret_app.command("delete")
@views.guard
def delete_cmd(
    name: str,
    workspace: Workspace = None,
    platform: Platform = False,
    output: views.Output = "text",
) -> None:
    """Delete a secret; queued runs that name it fail with the reason when they start."""
    c = _client()
    scope = _scope(c, workspace, platform)
    sdk.delete(c, scope, name)
    if output == "json":
        views.emit_json({"deleted": name, "workspace": scope})
        return
    views.console.print(f"secret {name} deleted")
