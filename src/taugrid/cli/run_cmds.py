"""``tau run ...``: submit, list, status, logs, metrics, get, cancel, resume, history.

Talks to the hub only through ``taugrid.sdk``. Every listing has ``-o json``; waiting
commands show live progress and return when the run reaches the awaited state.

A NAME is a run ID or a run name. A name several runs share means the newest of them:
read-only commands say on stderr which run they picked; ``cancel`` and ``resume`` refuse
and ask for the ID.

Submitting (``sdk.client.submit``: the tau.yaml loader and the command renderer) and live
views (``rich.live``) are imported where they are used: the read-only commands start
without them (docs/ARCHITECTURE.md, "CLI start-up").
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from taugrid import errors
from taugrid.cli import app, pipeline_cmds, views
from taugrid.sdk.client import client as sdk_client
from taugrid.sdk.client import pipelines, usage
from taugrid.sdk.local import embedded
from taugrid.spec import outputs

__all__: list[str] = []

_TERMINAL = {"succeeded", "failed", "cancelled"}


def _client(start: bool = False) -> sdk_client.Client:
    """The hub's client; only ``start`` (submitting) may start the embedded platform."""
    return embedded.ensure_client(views.progress, start=start)


def _pick(cli: sdk_client.Client, ref: str, *, exact: str | None = None) -> dict[str, Any]:
    """The run ``ref`` names; says which one when several share the name (or, for the
    command named by ``exact``, refuses and asks for the ID)."""
    run = cli.run(ref)
    same = [i for i in run.get("same_name", []) if i != run["id"]]
    if run["id"] == ref or not same:
        return run
    others = ", ".join(same[:5]) + (", ..." if len(same) > 5 else "")
    if exact:
        raise sdk_client.ApiError(
            409,
            f"{len(same) + 1} runs are named '{ref}': {run['id']} (newest), {others}",
            f"pass the run ID: tau run {exact} {run['id']}",
        )
    views.err_console.print(
        views.plain(
            f"note: {len(same) + 1} runs are named '{ref}'; using the newest, {run['id']} "
            f"({run['state']}); pass an ID for another: {others}",
            "dim",
        )
    )
    return run


def _released(run: dict[str, Any]) -> bool:
    return any(p["phase"] == "released" and p["status"] == "done" for p in run["phases"])


def _watch(
    cli: sdk_client.Client, ref: str, until: Any, timeout_s: float | None = None
) -> dict[str, Any]:
    import rich.live

    run = cli.run(ref)
    deadline = time.time() + timeout_s if timeout_s else None
    with rich.live.Live(views.phase_tree(run), console=views.console, refresh_per_second=2) as live:
        while not until(run) and (deadline is None or time.time() < deadline):
            time.sleep(1.0)
            run = cli.run(ref)
            live.update(views.phase_tree(run))
    views.console.print()
    return run


def _done(run: dict[str, Any]) -> bool:
    return run["state"] in _TERMINAL and _released(run)


@app.run_app.command("submit", hidden=True)
@views.guard
def submit_cmd(
    target: views.Target = None,
    config: views.ConfigFile = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Follow the run to the end")] = False,
    dry_run: Annotated[
        str | None, typer.Option("--dry-run", help="client: print what would be sent")
    ] = None,
    workspace: views.WorkspaceOverride = None,
    output: views.SubmitOutput = "text",
) -> None:
    """Submit a run: tau run [TARGET] [-c FILE] [--watch]."""
    from taugrid.sdk.client import submit

    prepared = submit.prepare(target, config)
    if dry_run is not None:
        from taugrid.cli import platform_cmds

        typer.echo(
            platform_cmds.dry_run_text(str(prepared.path), "json" if output == "json" else "yaml")
        )
        return
    cli = _client(start=True)
    run = cli.submit(
        prepared.text, str(prepared.path), prepared.code_zip, workspace, source=prepared.source
    )
    if output == "json" and not watch:
        views.emit_json(run)
        return
    views.console.print(f"submitted [bold]{run['id']}[/] to workspace {run['workspace']}")
    if not watch:
        views.console.print(f"  follow it: tau run status {run['id']} --watch")
        return
    final = _watch(cli, run["id"], _done)
    _summary(cli, final)
    raise typer.Exit(0 if final["state"] == "succeeded" else 1)


def _summary(cli: sdk_client.Client, run: dict[str, Any]) -> None:
    metrics = cli.metrics(run["id"])
    names = [m["name"] for m in metrics]
    chart = "loss" if "loss" in names else (names[0] if names else None)
    values = [m["value"] for m in metrics if m["name"] == chart]
    if values:
        views.console.print(
            f"{chart}  {views.sparkline(values)}  {values[0]:.4g} → {values[-1]:.4g}"
        )
    views.console.print(f"record: {run['record_dir']}")
    arts = [f["path"] for f in cli.files(run["id"], "artifacts")]
    if arts:
        views.console.print(
            f"artifacts: {', '.join(arts)}  (all: tau run get {run['id']} -d DIR; "
            f"one: --artifact NAME)"
        )


@app.run_app.command("list")
@views.guard
def list_cmd(
    workspace: Annotated[str | None, typer.Option("--workspace")] = None,
    state: Annotated[str | None, typer.Option("--state", help="e.g. running,queued")] = None,
    limit: int = 50,
    output: views.Output = "text",
) -> None:
    """List runs, newest first."""
    runs = _client().runs(workspace, state, limit)
    if output == "json":
        views.emit_json(runs)
        return
    rows = [
        (
            r["id"],
            r["workspace"],
            r.get("kind", ""),
            r["state"],
            r["gpus"],
            r["cluster_id"],
            views.age(r["created_at"]),
            r["reason"][:60],
        )
        for r in runs
    ]
    head = ["RUN", "WORKSPACE", "KIND", "STATE", "GPUS", "CLUSTER", "AGE", "REASON"]
    views.console.print(views.table(head, rows))


@app.run_app.command("status")
@views.guard
def status_cmd(
    name: str,
    watch: Annotated[bool, typer.Option("--watch", "-w")] = False,
    output: views.Output = "text",
) -> None:
    """Where a run is: the phase tree with source, reason and time of each phase."""
    cli = _client()
    run = _pick(cli, name)
    run = _watch(cli, run["id"], _done) if watch else run
    cost = usage.run_cost(cli, run["id"])
    stages = pipelines.stage_status(cli.metrics(run["id"]))
    if output == "json":
        views.emit_json({**run, "cost": cost, **({"pipeline": stages} if stages else {})})
        return
    if not watch:
        views.console.print(views.phase_tree(run))
    if run.get("source"):
        views.console.print(views.plain(views.source_line(run["source"])))
    for gap in run.get("gaps", []):
        views.console.print(views.plain(views.gap_line(gap)))
    views.console.print(_cost_line(cost))
    if stages is not None:
        pipeline_cmds.print_stage_status(stages)


def _cost_line(cost: dict[str, Any]) -> str:
    """``cost: $1.25 = 0.50 GPU-hours x $2.50 + egress 0.0 GB ($0.00)``."""
    cur = cost["currency"]
    prices = sorted({a["price_per_gpu_hour"] for a in cost["attempts"] if a["priced"]})
    at = "/".join(usage.money(p, cur) for p in prices) or "-"
    line = (
        f"cost: {usage.money(cost['total'], cur)} = {cost['gpu_hours']:.3f} GPU-hours x {at}"
        f" + egress {cost['egress_gb']:.2f} GB ({usage.money(cost['egress_cost'], cur)})"
    )
    if cost.get("spot_saving"):
        line += f"; on spot, {usage.money(cost['spot_saving'], cur)} less than on demand"
    if cost["unpriced_clusters"]:
        line += f"  (no price in platform.yaml for {', '.join(cost['unpriced_clusters'])})"
    return line


@app.run_app.command("logs")
@views.guard
def logs_cmd(
    name: str,
    follow: Annotated[bool, typer.Option("-f", "--follow")] = False,
    tail: Annotated[int | None, typer.Option("--tail")] = None,
    output: Annotated[
        str, typer.Option("-o", "--output", help="text, or json (one object per chunk)")
    ] = "text",
) -> None:
    """Driver and worker logs (kept after the Ray job is gone)."""
    cli = _client()
    ref = _pick(cli, name)["id"]
    chunk = cli.logs(ref, tail=tail)
    _emit_logs(ref, chunk, output)
    offset = chunk["offset"]
    while follow:
        run = cli.run(ref)
        chunk = cli.logs(ref, offset=offset)
        if chunk["text"]:
            _emit_logs(ref, chunk, output)
        offset = chunk["offset"]
        if run["state"] in _TERMINAL and not chunk["text"]:
            break
        time.sleep(1.0)


def _emit_logs(ref: str, chunk: dict[str, Any], output: str) -> None:
    if output == "json":  # JSON Lines: {"run", "text", "offset"} per chunk
        typer.echo(json.dumps({"run": ref, "text": chunk["text"], "offset": chunk["offset"]}))
    else:
        typer.echo(chunk["text"], nl=False)


@app.run_app.command("metrics")
@views.guard
def metrics_cmd(name: str, output: views.Output = "text") -> None:
    """Latest value of each metric with a sparkline of its history."""
    cli = _client()
    rows = cli.metrics(_pick(cli, name)["id"])
    if output == "json":
        views.emit_json(rows)
        return
    series: dict[str, list[dict[str, Any]]] = {}
    for m in rows:
        series.setdefault(m["name"], []).append(m)
    table = [
        (
            n,
            s[-1]["step"],
            f"{s[-1]['value']:.5g}",
            len(s),
            views.sparkline([x["value"] for x in s], 40),
        )
        for n, s in sorted(series.items())
    ]
    views.console.print(views.table(["METRIC", "STEP", "LATEST", "POINTS", "HISTORY"], table))


@app.run_app.command("get")
@views.guard
def get_cmd(
    name: str,
    artifact: Annotated[
        str | None,
        typer.Option("--artifact", help="An output's declared name, or an artifact file/dir"),
    ] = None,
    path: Annotated[
        str | None, typer.Option("--path", help="Any path inside the run record")
    ] = None,
    dest: Annotated[Path, typer.Option("-d", "--dest")] = Path("."),
    list_only: Annotated[bool, typer.Option("--list")] = False,
    output: views.Output = "text",
) -> None:
    """Fetch results: an artifact, any file of the record, or (default) all artifacts."""
    cli = _client()
    run = _pick(cli, name)
    ref = run["id"]
    if artifact:
        artifact = outputs.artifact_path((run.get("spec") or {}).get("outputs") or [], artifact)
    prefix = path or (f"artifacts/{artifact}" if artifact else "artifacts")
    files = [
        f
        for f in cli.files(ref)
        if f["path"] == prefix or f["path"].startswith(prefix.rstrip("/") + "/")
    ]
    if not (path or artifact):  # every artifact, into DEST itself; not lock/temp files
        files = [f for f in files if not any(p.startswith(".") for p in Path(f["path"]).parts)]
    if list_only or output == "json":
        views.emit_json(files) if output == "json" else views.console.print(
            views.table(["PATH", "BYTES"], [(f["path"], f["size"]) for f in files])
        )
        return
    if not files:
        raise sdk_client.ApiError(
            404, f"nothing at '{prefix}' in run {ref}", f"list files: tau run get {ref} --list"
        )
    base = Path(prefix) if not (path or artifact) else Path(prefix).parent
    for f in files:
        target = dest / Path(f["path"]).relative_to(base)
        _write(target, cli.download(ref, f["path"]))
        views.console.print(f"{f['path']} → {target}")


def _write(target: Path, data: bytes) -> None:
    """Write a fetched file; a destination that cannot take it is the user's to fix."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except OSError as exc:
        raise errors.UserError(
            f"cannot write {target}: {exc.strerror or exc}",
            "pass -d a directory you can write to (it is created if missing)",
        ) from exc


@app.run_app.command("cancel")
@views.guard
def cancel_cmd(
    name: str,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Return when quota and GPUs are released")
    ] = True,
    timeout: float = 120.0,
) -> None:
    """Cancel a run; by default returns when both release lines are done."""
    cli = _client()
    picked = _pick(cli, name, exact="cancel")
    if picked["state"] in _TERMINAL:
        views.console.print(f"{picked['id']}: already {picked['state']}; nothing to cancel")
        return
    run = cli.cancel(picked["id"])
    if wait and not _released(run):
        run = _watch(cli, run["id"], _released, timeout)
    views.console.print(
        f"{run['id']}: {run['state']}" + (" (quota and GPUs released)" if _released(run) else "")
    )


@app.run_app.command("resume")
@views.guard
def resume_cmd(name: str, watch: Annotated[bool, typer.Option("--watch", "-w")] = False) -> None:
    """Start a new attempt of a finished run from its latest checkpoint."""
    cli = _client()
    run = cli.resume(_pick(cli, name, exact="resume")["id"])
    views.console.print(
        f"{run['id']}: new attempt queued (resumes from {run.get('resume_from') or 'the start'})"
    )
    if watch:
        _summary(cli, _watch(cli, run["id"], _done))


@app.run_app.command("history")
@views.guard
def history_cmd(name: str, output: views.Output = "text") -> None:
    """Attempts and every lifecycle event of a run, in order."""
    cli = _client()
    run = _pick(cli, name)
    events = cli.events(run["id"])
    if output == "json":
        views.emit_json({"attempts": run["attempts"], "events": events})
        return
    views.console.print(
        views.table(
            [
                "ATTEMPT",
                "TOKEN",
                "CLUSTER",
                "STATE",
                "EXIT",
                "NODES",
                "LAST STEP",
                "CKPT STEP",
                "REASON",
            ],
            [
                (
                    a["number"],
                    a["token"],
                    a["cluster_id"],
                    a["state"],
                    a["exit_code"],
                    views.node_ids(a["nodes"]),
                    a["last_step"],
                    a["checkpoint_step"],
                    a.get("summary", a["reason"]) or "",
                )
                for a in run["attempts"]
            ],
        )
    )
    for e in events:
        when = time.strftime("%H:%M:%S", time.localtime(e["ts"]))
        line = views.plain(when, "dim") + views.plain(f" {e['kind']:<22} {_brief(e['payload'])}")
        views.console.print(line)


def _brief(payload: dict[str, Any]) -> str:
    """One event, whole: a pipe gets every field (a terminal wraps the line)."""
    if "phase" in payload:
        p = payload
        return f"{p['phase']} → {p['status']} ({p['source']}) {p['reason']}"
    return " ".join(f"{k}={_field(k, v)}" for k, v in payload.items() if v is not None)


def _field(key: str, value: Any) -> Any:
    """Times of day instead of epoch seconds; node IDs as short as elsewhere."""
    if (key.endswith("_at") or key == "not_before") and isinstance(value, float):
        return time.strftime("%H:%M:%S", time.localtime(value))
    if key == "nodes" and isinstance(value, list):
        return views.node_ids(value)
    return value
