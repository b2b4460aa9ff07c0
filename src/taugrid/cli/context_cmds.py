"""``tau context list | use NAME | current``: which hub ``tau`` commands target.

Contexts live in ``$TAU_HOME/contexts.json`` (``sdk.client.contexts``): ``local`` is the
embedded platform (``tau up``); ``tau lab up`` adds ``lab`` and switches to it, ``tau
lab down`` switches back. ``TAU_HUB_URL``/``TAU_TOKEN`` override the current context.
"""

from __future__ import annotations

import os

from taugrid.cli import app, views
from taugrid.sdk.client import client, contexts

__all__: list[str] = []


def _store() -> contexts.Contexts:
    return contexts.Contexts(client.tau_home())


@app.context_app.command("list")
@views.guard
def context_list(output: views.Output = "text") -> None:
    """Every context; the current one is marked with *."""
    store = _store()
    current = store.current_name()
    rows = []
    for name in store.names():
        ctx = store.get(name)
        url = ctx.hub_url or f"embedded platform of {client.tau_home()} (tau up)"
        rows.append({"name": name, "current": name == current, "hub": url})
    if output == "json":
        views.emit_json(rows)
        return
    table = [("*" if r["current"] else "", r["name"], r["hub"]) for r in rows]
    views.console.print(views.table(["CURRENT", "NAME", "HUB"], table))
    if os.environ.get("TAU_HUB_URL"):
        views.err_console.print("[dim]note: TAU_HUB_URL is set and overrides the context[/]")


@app.context_app.command("use")
@views.guard
def context_use(name: str) -> None:
    """Make NAME the current context."""
    _store().use(name)
    views.console.print(f"now using context '{name}'")


@app.context_app.command("current")
@views.guard
def context_current() -> None:
    """Print the current context's name."""
    views.console.print(_store().current_name())
