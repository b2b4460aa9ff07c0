"""``tau sweep submit | list | status | cancel``: hyperparameter sweeps (``sweep`` in tau.yaml).

Talks to the hub only through ``taugrid.sdk`` (``sdk.client.sweeps``). ``status`` is the
leaderboard: every trial with its parameters, state and best value, best first;
``--watch`` follows it until the sweep ends. Every listing has ``-o json``.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from taugrid.cli import app, views
from taugrid.sdk.client import client as sdk_client
from taugrid.sdk.client import sweeps as sdk
from taugrid.sdk.local import embedded

__all__: list[str] = []

sweep_app = typer.Typer(
    help="Hyperparameter sweeps: trials of one tau.yaml (its sweep section), ranked by a metric.",
    no_args_is_help=True,
)
app.app.add_typer(sweep_app, name="sweep")
_WATCH_EVERY_S = 2.0


def _client(start: bool = False) -> sdk_client.Client:
    return embedded.ensure_client(views.progress, start=start)


@sweep_app.command("submit")
@views.guard
def submit_cmd(
    target: views.Target = None,
    config: views.ConfigFile = None,
    workspace: views.WorkspaceOverride = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the trials; submit nothing")
    ] = False,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Follow it to the end")] = False,
    output: views.Output = "text",
) -> None:
    """Submit a sweep: its trials are runs, at most sweep.parallel at a time."""
    c = _client(start=True)
    out = sdk.submit_sweep(c, target, config, workspace, dry_run=dry_run)
    if output == "json" and not watch:
        views.emit_json(out)
        return
    if dry_run:
        views.console.print(f"{out['budget']} trials; the first {len(out['trials'])}:")
        views.console.print(
            views.table(
                ["TRIAL", "PARAMETERS"], [(str(i), _params(p)) for i, p in enumerate(out["trials"])]
            )
        )
        return
    views.console.print(
        f"submitted sweep [bold]{out['id']}[/] ({out['reason']}) to workspace {out['workspace']}"
    )
    if not watch:
        views.console.print(f"  follow it: tau sweep status {out['id']} --watch")
        return
    final = _follow(c, out["id"])
    raise typer.Exit(0 if final["state"] == "succeeded" else 1)


@sweep_app.command("list")
@views.guard
def list_cmd(
    workspace: Annotated[
        str | None, typer.Option("--workspace", help="Only this workspace")
    ] = None,
    output: views.Output = "text",
) -> None:
    """Sweeps you can see, newest first."""
    rows = sdk.listing(_client(), workspace)
    if output == "json":
        views.emit_json(rows)
        return
    cols = ["ID", "WORKSPACE", "STATE", "CREATED", "REASON"]
    data = [
        (r["id"], r["workspace"], r["state"], _when(r["created_at"]), r["reason"]) for r in rows
    ]
    views.console.print(views.table(cols, data))


@sweep_app.command("status")
@views.guard
def status_cmd(
    ref: Annotated[str, typer.Argument(help="Sweep ID or name")],
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Follow it to the end")] = False,
    output: views.Output = "text",
) -> None:
    """The leaderboard: every trial, best first."""
    c = _client()
    if output == "json" and not watch:
        views.emit_json(sdk.status(c, ref))
        return
    sw = _follow(c, ref) if watch else sdk.status(c, ref)
    if not watch:
        views.console.print(_board(sw))


@sweep_app.command("cancel")
@views.guard
def cancel_cmd(
    ref: Annotated[str, typer.Argument(help="Sweep ID or name")],
    output: views.Output = "text",
) -> None:
    """Cancel every unfinished trial; no new one starts."""
    sw = sdk.cancel(_client(), ref)
    if output == "json":
        views.emit_json(sw)
        return
    views.console.print(f"sweep {sw['id']} {sw['state']}: {sw['reason']}")


def _follow(c: sdk_client.Client, ref: str) -> dict[str, Any]:
    import rich.live

    sw = sdk.status(c, ref)
    with rich.live.Live(_board(sw), console=views.console, refresh_per_second=1) as live:
        while sw["state"] == "running":
            time.sleep(_WATCH_EVERY_S)
            sw = sdk.status(c, ref)
            live.update(_board(sw))
    return sw


def _board(sw: dict[str, Any]) -> Any:
    import rich.console

    metric = sw["metric"]["name"] if sw.get("metric") else "-"
    head = (
        f"[bold]{sw['id']}[/] {sw['state']}: {sw['reason']}\n"
        f"  {sw['submitted']} of {sw['budget']} trials submitted; by state: "
        + ", ".join(f"{k} {v}" for k, v in sorted(sw["counts"].items()))
    )
    if sw.get("model"):
        m = sw["model"]
        head += (
            f"\n  model: {m['name']} v{m['version']} from {m['run']}"
            if "version" in m
            else f"\n  model: {m['error']}"
        )
    cols = ["#", "RUN", "STATE", f"BEST {metric}", "AT STEP", "LAST STEP", "PARAMETERS", "NOTE"]
    data = [
        (
            str(t["index"]),
            t["run_id"],
            t["state"],
            "-" if t["best"] is None else f"{t['best']:.4g}",
            "-" if t["best_step"] is None else str(t["best_step"]),
            "-" if t["last_step"] is None else str(t["last_step"]),
            _params(t["params"]),
            "stopped early" if t["stopped"] else "",
        )
        for t in sw["trials"]
    ]
    return rich.console.Group(head, views.table(cols, data))


def _params(p: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in p.items())


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
