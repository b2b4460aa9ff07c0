"""``tau serve ...``: deploy a trained run as a live endpoint; list, status, logs,
scale, update, delete. Talks to the hub only through ``taugrid.sdk.client.serving``.

``deploy``/``update``/``scale`` return once the hub has stored the change; ``--wait``
follows the deployment until it is Ready (exit 0) or Failed (exit 1).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from taugrid.cli import app, views
from taugrid.sdk.client import client as sdk_client
from taugrid.sdk.client import serving
from taugrid.sdk.local import embedded

__all__: list[str] = []

OptRun = Annotated[str, typer.Option("--from-run", help="The trained run (ID or name)")]
Model = Annotated[
    str | None, typer.Option("--model", help="A registered model: NAME@ALIAS, NAME@vN, NAME")
]
Checkpoint = Annotated[
    str | None, typer.Option("--checkpoint", help="latest, or a step: serve that checkpoint")
]
Artifact = Annotated[
    str | None, typer.Option("--artifact", help="Serve this file of the run's artifacts/")
]
Config = Annotated[
    str | None, typer.Option("-c", "--config", help="Serving tau.yaml (default: serve.yaml)")
]
Workspace = Annotated[str | None, typer.Option("--workspace", help="Override policy.workspace")]
Wait = Annotated[bool, typer.Option("--wait", "-w", help="Follow it until Ready or Failed")]
WaitTimeout = Annotated[float, typer.Option("--timeout", help="Seconds --wait waits at most")]
Regions = Annotated[
    str | None,
    typer.Option("--regions", help="Serve in each of these regions (a,b): one hub endpoint"),
]
_SETTLED = {"Ready", "Failed", "Deleted"}


def _client(start: bool = False) -> sdk_client.Client:
    return embedded.ensure_client(views.progress, start=start)


def _show(dep: dict[str, Any], output: str) -> None:
    if output == "json":
        views.emit_json(dep)
        return
    reps = dep["replicas"]
    src = dep["source"]
    what = (
        f"checkpoint {src['checkpoint']}"
        if src.get("checkpoint")
        else f"artifact {src.get('artifact') or 'artifacts/'}"
    )
    traffic = dep.get("traffic") or {}
    rows = [
        ("phase", f"{dep['phase']}  {dep['reason']}".rstrip()),
        ("endpoint", dep["endpoint"] or "-"),
        ("replicas", f"{reps['ready']} ready / {reps['desired']} desired"),
        (
            "serves",
            f"run {src['run']}, {what}" + (f" (model {src['model']})" if src.get("model") else ""),
        ),
        ("serving run", f"{dep['run_id']} ({dep['run_state']}) on {dep['cluster_id'] or '-'}"),
        ("gpus", f"{dep['gpus']} ({dep['gpus_per_replica']} per replica)"),
        ("requests/s", traffic.get("requests_per_s", "-")),
        ("latency p50/p99", _latency(traffic)),
    ]
    if dep["previous_run_id"]:
        rows.append(("replacing", dep["previous_run_id"]))
    rows.append(("hub endpoint", dep.get("hub_endpoint") or "-"))
    for r in dep.get("regions") or []:
        health = "healthy" if r["healthy"] else f"out: {r['phase']} {r['reason']}".rstrip()
        rtt = f", rtt {r['rtt_ms']} ms" if r.get("rtt_ms") is not None else ""
        rows.append((f"region {r['region']}", f"{r['endpoint'] or '-'}  {health}{rtt}"))
    views.console.print(views.table(("", ""), rows, title=f"deployment {dep['name']}"))


def _latency(traffic: dict[str, Any]) -> str:
    p50, p99 = traffic.get("p50_ms"), traffic.get("p99_ms")
    return f"{p50} ms / {p99} ms" if p50 is not None else "-"


def _follow(cli: sdk_client.Client, dep: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    deadline = time.time() + timeout_s
    with views.console.status(f"{dep['name']}: {dep['phase']}") as spinner:
        while dep["phase"] not in _SETTLED and time.time() < deadline:
            time.sleep(1.0)
            dep = serving.deployment(cli, dep["name"])
            spinner.update(f"{dep['name']}: {dep['phase']}  {dep['reason']}")
    return dep


def _finish(cli: sdk_client.Client, dep: dict[str, Any], wait: bool, t: float, out: str) -> None:
    if wait:
        dep = _follow(cli, dep, t)
    _show(dep, out)
    if wait and dep["phase"] != "Ready":
        raise typer.Exit(1)


@app.serve_app.command("deploy")
@views.guard
def deploy_cmd(
    name: str,
    from_run: OptRun = "",
    model: Model = None,
    checkpoint: Checkpoint = None,
    artifact: Artifact = None,
    config: Config = None,
    workspace: Workspace = None,
    regions: Regions = None,
    wait: Wait = False,
    timeout: WaitTimeout = 600.0,
    output: views.Output = "text",
) -> None:
    """Deploy a trained run's model as NAME (--from-run RUN, or --model NAME@ALIAS)."""
    cli = _client(start=True)
    dep = serving.deploy(
        cli,
        name,
        from_run,
        model=model,
        config=config,
        checkpoint=checkpoint,
        artifact=artifact,
        workspace=workspace,
        regions=[r.strip() for r in regions.split(",") if r.strip()] if regions else None,
    )
    _finish(cli, dep, wait, timeout, output)


@app.serve_app.command("update")
@views.guard
def update_cmd(
    name: str,
    from_run: OptRun = "",
    model: Model = None,
    checkpoint: Checkpoint = None,
    artifact: Artifact = None,
    config: Config = None,
    workspace: Workspace = None,
    wait: Wait = False,
    timeout: WaitTimeout = 600.0,
    output: views.Output = "text",
) -> None:
    """Serve another run or checkpoint as NAME (rolling: requests keep being answered)."""
    cli = _client()
    dep = serving.update(
        cli,
        name,
        from_run,
        model=model,
        config=config,
        checkpoint=checkpoint,
        artifact=artifact,
        workspace=workspace,
    )
    _finish(cli, dep, wait, timeout, output)


@app.serve_app.command("scale")
@views.guard
def scale_cmd(
    name: str,
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Replica count")],
    wait: Wait = False,
    timeout: WaitTimeout = 600.0,
    output: views.Output = "text",
) -> None:
    """Set NAME's replica count (admitted against the workspace's quota like a run)."""
    cli = _client()
    _finish(cli, serving.scale(cli, name, replicas), wait, timeout, output)


@app.serve_app.command("list")
@views.guard
def list_cmd(output: views.Output = "text") -> None:
    """Deployments of your workspaces."""
    deps = serving.deployments(_client())
    if output == "json":
        views.emit_json(deps)
        return
    rows = [
        (
            d["name"],
            d["workspace"],
            d["phase"],
            f"{d['replicas']['ready']}/{d['replicas']['desired']}",
            d["endpoint"],
            d["source"]["run"],
            views.age(d["updated_at"]),
        )
        for d in deps
    ]
    cols = ("NAME", "WORKSPACE", "PHASE", "READY", "ENDPOINT", "FROM RUN", "AGE")
    views.console.print(views.table(cols, rows))


@app.serve_app.command("status")
@views.guard
def status_cmd(name: str, output: views.Output = "text") -> None:
    """Phase, replicas, endpoint, what is served, requests/s and latency."""
    _show(serving.deployment(_client(), name), output)


@app.serve_app.command("logs")
@views.guard
def logs_cmd(name: str, tail: Annotated[int | None, typer.Option("--tail")] = None) -> None:
    """The serving run's driver log: deploys, import errors, takeovers, deletion."""
    chunk = serving.logs(_client(), name, tail=tail)
    views.err_console.print(f"[dim]serving run {chunk['run']}[/]")
    typer.echo(chunk["text"], nl=False)


@app.serve_app.command("delete")
@views.guard
def delete_cmd(name: str, output: views.Output = "text") -> None:
    """Stop serving NAME; its GPUs go back to the workspace's quota."""
    _show(serving.delete(_client(), name), output)
