"""``tau dev ...``: interactive sessions (JupyterLab on the platform's GPUs, docs/dev.md):
up, list, open, exec, shell, stop. Talks to the hub only through ``taugrid.sdk.client.dev``.

``up`` returns once the hub has stored the session; ``--wait`` (the default) follows it
until JupyterLab answers, then prints the URL ``open`` would print.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from taugrid.cli import app, views
from taugrid.sdk.client import client as sdk_client
from taugrid.sdk.client import dev
from taugrid.sdk.local import embedded

__all__: list[str] = []

Workspace = Annotated[str | None, typer.Option("--workspace", "-w", help="The session's workspace")]


def _client(start: bool = False) -> sdk_client.Client:
    return embedded.ensure_client(views.progress, start=start)


def _line(s: dict[str, Any]) -> str:
    why = f" ({s['reason']})" if s.get("reason") else ""
    return f"session {s['workspace']}/{s['name']}: {s['state']}{why}  [run {s['run_id']}]"


@app.dev_app.command("up")
@views.guard
def up_cmd(
    name: str,
    workspace: Workspace = None,
    gpus: Annotated[float | None, typer.Option("--gpus", help="GPUs of the session")] = None,
    idle_minutes: Annotated[
        float | None,
        typer.Option("--idle-minutes", help="Autostop after this long idle (default 30)"),
    ] = None,
    config: Annotated[
        str | None, typer.Option("-c", "--config", help="tau.yaml: compute, runtime, code")
    ] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Wait for JupyterLab")] = True,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds --wait waits")] = 300.0,
    output: views.Output = "text",
) -> None:
    """Start interactive session NAME, or bring a stopped one back with its files."""
    cli = _client(start=True)
    s = dev.up(cli, name, workspace=workspace, gpus=gpus, idle_minutes=idle_minutes, config=config)
    if wait:
        s = dev.wait_running(cli, name, s["workspace"], timeout)
    if output == "json":
        views.emit_json(s)
        return
    views.console.print(views.plain(_line(s)))
    if s["state"] == "running":
        views.console.print(views.plain(f"open it with: tau dev open {name}"))
    elif wait:
        raise typer.Exit(1)


@app.dev_app.command("list")
@views.guard
def list_cmd(workspace: Workspace = None, output: views.Output = "text") -> None:
    """Interactive sessions, newest first."""
    rows = dev.sessions(_client(), workspace)
    if output == "json":
        views.emit_json(rows)
        return
    table = [
        (
            s["name"],
            s["workspace"],
            s["state"],
            s["gpus"],
            f"{s['idle_minutes']:g}m",
            s["run_id"],
            views.age(s["created_at"]),
            (s["reason"] or "")[:50],
        )
        for s in rows
    ]
    views.console.print(
        views.table(
            ["SESSION", "WORKSPACE", "STATE", "GPUS", "IDLE", "RUN", "AGE", "REASON"], table
        )
    )


@app.dev_app.command("stop")
@views.guard
def stop_cmd(name: str, workspace: Workspace = None, output: views.Output = "text") -> None:
    """Stop a session: its working directory is saved, its GPUs released."""
    s = dev.stop(_client(), name, workspace)
    if output == "json":
        views.emit_json(s)
        return
    views.console.print(views.plain(_line(s)))


@app.dev_app.command("open")
@views.guard
def open_cmd(
    name: str,
    workspace: Workspace = None,
    browser: Annotated[bool, typer.Option("--browser", help="Open it in a browser")] = False,
    output: views.Output = "text",
) -> None:
    """Print a URL that opens the session's JupyterLab (it signs the browser in once)."""
    url = dev.open_url(_client(), name, workspace)
    if output == "json":
        views.emit_json({"url": url})
        return
    print(url)
    if browser:
        import webbrowser

        webbrowser.open(url)


@app.dev_app.command(
    "exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
@views.guard
def exec_cmd(
    name: str,
    command: Annotated[list[str], typer.Argument(help="The command, after --")],
    workspace: Workspace = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds it may run")] = 3600.0,
) -> None:
    """Run a command in the session; its output, and its exit status as tau's."""

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    code, _ = dev.exec_command(_client(), name, command, workspace, write, timeout)
    raise typer.Exit(code)


@app.dev_app.command("shell")
@views.guard
def shell_cmd(name: str, workspace: Workspace = None) -> None:
    """An interactive terminal in the session (exit the shell to leave)."""
    dev.shell(_client(), name, workspace)
