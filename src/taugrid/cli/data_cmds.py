"""``tau data register|list|show|replicas|replicate``, ``tau region list`` and
``tau run explain-placement``.

Presentation only: every call goes through ``sdk.client.data`` (CLI → SDK → HTTP → hub).
Every listing takes ``-o json``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from taugrid.cli import app, views
from taugrid.sdk.client import data
from taugrid.sdk.local import embedded

__all__: list[str] = []

Workspace = Annotated[
    str | None, typer.Option("--workspace", help="workspace the dataset belongs to")
]
Doc = dict[str, Any]


def _size(n: float | None) -> str:
    if not n:
        return "0 B"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1000
    return f"{n:.1f} TB"


@app.data_app.command("register")
@views.guard
def register_cmd(
    name: str,
    region: Annotated[str, typer.Option("--region", help="region whose storage holds it")],
    path: Annotated[str, typer.Option("--path", help="directory under the region's data root")],
    version: Annotated[str, typer.Option("--version")] = "v1",
    workspace: Workspace = None,
    output: views.Output = "text",
) -> None:
    """Register NAME: files already under REGION's data root; its agent scans them."""
    cli = embedded.ensure_client(views.progress)
    row = data.register(cli, name, region, path, version, workspace)
    if output == "json":
        views.emit_json(row)
        return
    views.console.print(
        f"dataset {row['id']} registered in workspace {row['workspace']}, region {region} "
        f"({path}); its agent computes the manifest"
    )


@app.data_app.command("list")
@views.guard
def list_cmd(workspace: Workspace = None, output: views.Output = "text") -> None:
    """Datasets of your workspaces with size, state and the regions holding a replica."""
    rows = data.datasets(embedded.ensure_client(views.progress), workspace)
    if output == "json":
        views.emit_json(rows)
        return
    views.console.print(
        views.table(
            ["DATASET", "WORKSPACE", "STATE", "SIZE", "ORIGIN", "REPLICAS IN", "CREATED"],
            [
                (
                    d["id"],
                    d["workspace"],
                    d["state"],
                    _size(d["size_bytes"]),
                    d["origin_region"],
                    ", ".join(d["regions"]) or "-",
                    views.age(d["created_at"]) + " ago",
                )
                for d in rows
            ],
        )
    )


def _replica_rows(reps: list[Doc]) -> list[tuple[Any, ...]]:
    return [
        (r["region"], r["state"], _size(r["bytes_present"]), r["path"], views.age(r["updated_at"]))
        for r in reps
    ]


@app.data_app.command("show")
@views.guard
def show_cmd(name: str, output: views.Output = "text") -> None:
    """One dataset: manifest summary, replicas and transfers."""
    d = data.dataset(embedded.ensure_client(views.progress), name)
    if output == "json":
        views.emit_json(d)
        return
    views.console.print(
        f"[bold]{d['id']}[/]  {d['state']}  {_size(d['size_bytes'])} in {len(d['files'])} files"
        f"  sha256 {(d['sha256'] or '-')[:16]}  origin {d['origin_region']}"
        f"  workspace {d['workspace']}"
    )
    if d.get("error"):
        views.console.print(f"[red]error:[/] {d['error']}")
    views.console.print(
        views.table(["REGION", "STATE", "PRESENT", "PATH", "UPDATED"], _replica_rows(d["replicas"]))
    )
    if d["transfers"]:
        views.console.print(
            views.table(
                ["TRANSFER", "LINK", "STATE", "DONE", "RATE", "ESTIMATE", "ERROR"],
                [
                    (
                        t["id"],
                        f"{t['src_region']} → {t['dst_region']}",
                        t["state"],
                        f"{_size(t['bytes_done'])}/{_size(t['bytes_total'])}",
                        f"{t['rate_bps'] * 8 / 1e6:.1f} Mbit/s",
                        f"{t['estimate_s']:.1f} s" if t["estimate_s"] is not None else "-",
                        t["error"] or "",
                    )
                    for t in d["transfers"]
                ],
            )
        )


@app.data_app.command("replicas")
@views.guard
def replicas_cmd(name: str, output: views.Output = "text") -> None:
    """Replicas of NAME per region."""
    reps = data.replicas(embedded.ensure_client(views.progress), name)
    if output == "json":
        views.emit_json(reps)
        return
    views.console.print(
        views.table(["REGION", "STATE", "PRESENT", "PATH", "UPDATED"], _replica_rows(reps))
    )


@app.data_app.command("replicate")
@views.guard
def replicate_cmd(
    name: str,
    to: Annotated[str, typer.Option("--to", help="destination region")],
    source: Annotated[str | None, typer.Option("--from", help="source region")] = None,
    url: Annotated[
        str | None, typer.Option("--url", help="keep the copy in object storage (fsspec URL)")
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="show progress until done")] = False,
    output: views.Output = "text",
) -> None:
    """Copy NAME to another region (agent to agent, sha256-verified, resumable)."""
    cli = embedded.ensure_client(views.progress)
    t = data.replicate(cli, name, to, source, url)
    if wait:
        t = _wait(cli, t, quiet=output == "json")
    if output == "json":
        views.emit_json(t)
        return
    views.console.print(
        f"transfer {t['id']}: {t['dataset_id']} {t['src_region']} → {t['dst_region']} "
        f"{t['state']} (estimate {t['estimate_s']:.1f} s)"
    )
    if t["state"] == "done" and t.get("started_at") and t.get("ended_at"):
        views.console.print(f"  measured {t['rate_bps'] * 8 / 1e6:.1f} Mbit/s")


def _wait(cli: Any, t: Doc, quiet: bool) -> Doc:
    import rich.progress

    with rich.progress.Progress(
        *rich.progress.Progress.get_default_columns(),
        rich.progress.TransferSpeedColumn(),
        console=views.err_console,
        disable=quiet,
    ) as bar:
        task = bar.add_task(f"{t['src_region']} → {t['dst_region']}", total=t["bytes_total"])

        def show(row: Doc) -> None:
            bar.update(task, completed=row["bytes_done"], description=f"{row['state']}")

        return data.wait_transfer(cli, int(t["id"]), show)


@app.region_app.command("list")
@views.guard
def region_list(output: views.Output = "text") -> None:
    """Regions: GPUs free/busy by model, queue, health, heartbeat; the measured link matrix."""
    rows = data.regions(embedded.ensure_client(views.progress))
    if output == "json":
        views.emit_json(rows)
        return
    views.console.print(
        views.table(
            ["REGION", "CLUSTERS", "STATE", "GPU MODELS", "FREE/BUSY", "QUEUED", "HEARTBEAT"],
            [
                (
                    r["region"],
                    ",".join(r["clusters"]) or "-",
                    r["state"],
                    ", ".join(f"{m}:{n}" for m, n in r["gpu_models"].items()) or "-",
                    f"{r['gpu_free']:g}/{r['gpu_busy']:g}",
                    r["queued_jobs"],
                    views.age(r["last_heartbeat"]) + " ago" if r["last_heartbeat"] else "-",
                )
                for r in rows
            ],
        )
    )
    _matrix(rows)


def _matrix(rows: list[Doc]) -> None:
    names = [r["region"] for r in rows]
    cell: dict[tuple[str, str], str] = {}
    for r in rows:
        for ln in r["inbound"]:
            cell[(ln["src"], ln["dst"])] = (
                f"{ln['throughput_mbps']:.0f} Mbit/s {ln['rtt_ms']:.1f} ms"
                + (f" {ln['loss_pct']:g}% loss" if ln.get("loss_pct") else "")
                + (f" ({ln['utilisation']:.0%} used)" if ln["utilisation"] else "")
            )
    views.console.print(
        views.table(
            ["FROM \\ TO", *names],
            [(src, *(cell.get((src, dst), "-") for dst in names)) for src in names],
            title="measured links (TCP payload probes: throughput, RTT; UDP echo: loss)",
        )
    )


_PRESETS = {"balanced": " (finish-first)", "cost": " (cost-first)", "time": " (utilisation-first)"}


@app.run_app.command("explain-placement")
@views.guard
def explain_cmd(name: str, output: views.Output = "text") -> None:
    """Every cluster's filter verdict and score breakdown for run NAME."""
    doc = data.explain_placement(embedded.ensure_client(views.progress), name)
    if output == "json":
        views.emit_json(doc)
        return
    w = doc["weights"]
    views.console.print(
        f"run {doc['run']} ({doc['state']}): {doc['source']}; "
        f"chosen: {doc['cluster'] or 'none'} — {doc['reason']}"
    )
    preset = _PRESETS.get(doc.get("objective", ""), "")
    views.console.print(
        f"[dim]objective: {doc.get('objective', '-')}{preset}; weights: "
        + ", ".join(f"{k} {v:.2f}" for k, v in w.items() if v)
        + "[/]"
    )
    names = [n for n, v in w.items() if v]
    rows = []
    for v in doc["verdicts"]:
        est = doc.get("data", {}).get(v["cluster_id"], {})
        rows.append(
            (
                v["cluster_id"],
                v["region"],
                views.plain("ok", "green") if v["ok"] else views.plain("filtered", "red"),
                *(f"{v['scores'][n]:.1f}" if n in v["scores"] else "-" for n in names),
                f"{v['total']:.2f}" if v["ok"] else "-",
                f"{est['seconds']:.1f} s" if est.get("seconds") is not None else "-",
                "" if v["ok"] else v["reason"],
            )
        )
    cols = ["CLUSTER", "REGION", "FILTER", *(n.upper() for n in names), "TOTAL", "TRANSFER", "WHY"]
    views.console.print(views.table(cols, rows))
    if doc.get("nodes"):
        landed = views.node_ids(doc.get("landed") or [], ", ") or "not reported yet"
        bound = views.node_ids(doc["nodes"], ", ")
        views.console.print(f"workers bound to nodes: {bound}; landed on: {landed}")
    if doc.get("guests"):  # a span: one Ray cluster, its head in the chosen cluster
        groups = ", ".join(f"{g['cluster']} ({g['workers']} workers)" for g in doc["guests"])
        views.console.print(f"one Ray cluster across clusters; worker groups on: {groups}")
