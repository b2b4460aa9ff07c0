"""``tau run plan``: the recommended configuration of a pipeline, before submitting it.

Prints, per stage, the measured rate per replica and the chosen replicas and batch
size, then the GPUs needed, the bottleneck and the expected throughput; when no
configuration reaches the target, which stage limits it and by how much (exit 1).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from taugrid.cli import app, views
from taugrid.sdk.client import pipelines

__all__ = ["print_stage_status"]


@app.run_app.command("plan")
@views.guard
def plan_cmd(
    target: Annotated[
        str | None, typer.Argument(help="Directory with tau.yaml, or the file")
    ] = None,
    config: Annotated[str | None, typer.Option("-c", "--config", help="tau.yaml to use")] = None,
    throughput: Annotated[
        float | None, typer.Option("--target", help="items/s instead of target_throughput")
    ] = None,
    output: Annotated[str, typer.Option("-o", "--output", help="text or json")] = "text",
) -> None:
    """Measure each pipeline stage on a sample and recommend replicas and batch sizes."""
    doc = pipelines.plan(target, config, throughput)
    if output == "json":
        views.emit_json(doc)
    else:
        _print(doc)
    raise typer.Exit(0 if doc["reachable"] else 1)


def _print(doc: dict[str, Any]) -> None:
    rows = [
        [
            s["name"],
            f"{s['rate_per_replica']:.1f}",
            str(s["batch_size"]),
            str(s["replicas"]),
            f"{s['gpus_per_replica'] * s['replicas']:g}",
            f"{s['capacity']:.1f}",
            str(s["measured"]["dead"]),
        ]
        for s in doc["stages"]
    ]
    views.console.print(f"pipeline {doc['name']}: target {doc['target_throughput']:g} items/s")
    header = ["STAGE", "ITEMS/S/REPLICA", "BATCH", "REPLICAS", "GPUS", "CAPACITY", "FAILED"]
    views.console.print(views.table(header, rows))
    views.console.print(
        f"GPUs needed: {doc['gpus']:g}   CPUs: {doc['cpus']:g}   bottleneck: {doc['bottleneck']}"
        f"   expected throughput: {doc['expected_throughput']:.1f} items/s"
    )
    if doc["limit"] is not None:
        views.console.print(f"[red]target unreachable:[/] {doc['limit']['message']}")


def print_stage_status(status: dict[str, Any]) -> None:
    """The live per-stage lines under ``tau run status`` of a pipeline run."""
    views.console.print(
        f"pipeline (window {status['step']}): {status['throughput'] or 0:.1f} items/s "
        f"in, target {status['target'] or 0:g}"
    )
    rows = [
        [
            name,
            f"{v.get('items_per_s', 0):.1f}",
            f"{v.get('replicas', 0):g}",
            f"{v.get('batch_size', 0):g}",
            f"{v.get('dropped', 0):g}",
        ]
        for name, v in status["stages"].items()
    ]
    views.console.print(views.table(["STAGE", "ITEMS/S", "REPLICAS", "BATCH", "DROPPED"], rows))
