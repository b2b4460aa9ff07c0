"""``tau up | down``, ``tau cluster list`` and ``tau admin node fault|clear|list|history``.

Operate the embedded platform and read/mark the clusters of any hub (through the SDK).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from taugrid.cli import app, views
from taugrid.sdk.client import client, contexts
from taugrid.sdk.local import embedded

__all__: list[str] = []


@app.app.command("up")
@views.guard
def up_cmd(
    status: Annotated[bool, typer.Option("--status", help="Only report what runs")] = False,
    output: views.Output = "text",
) -> None:
    """Start the embedded platform (hub + region 'local' with a real Ray cluster)."""
    plat = embedded.EmbeddedPlatform()
    if not status:
        running = plat.hub.pid() is not None and plat.agent.pid() is not None
        plat.up(views.progress)
        if running:
            views.progress(f"the embedded platform of {plat.home} is already up; nothing to start")
    doc = plat.status()
    if output == "json":
        views.emit_json(doc)
    else:
        for k, v in doc.items():
            views.console.print(f"{k:>10}: {v if v is not None else 'not running'}")


@app.app.command("down")
@views.guard
def down_cmd() -> None:
    """Stop the embedded platform: the agent (and its Ray cluster), then the hub."""
    said: list[str] = []

    def progress(msg: str) -> None:
        said.append(msg)
        views.progress(msg)

    plat = embedded.EmbeddedPlatform()
    plat.down(progress)
    if not said:
        views.progress(f"the embedded platform of {plat.home} is not running; nothing to stop")
    current = contexts.Contexts(client.tau_home()).current_name()
    if current != contexts.LOCAL:  # e.g. a lab: `tau down` leaves it running
        views.progress(
            f"the current context '{current}' is not the embedded platform; it still runs"
        )
        views.progress("  (a lab stops with: tau lab down)")


@app.cluster_app.command("list")
@views.guard
def cluster_list(output: views.Output = "text") -> None:
    """Clusters: GPUs free/busy by model, queue, health, last heartbeat."""
    clusters = embedded.ensure_client(views.progress).clusters()
    if output == "json":
        views.emit_json(clusters)
        return
    rows = []
    for c in clusters:
        r = c["report"]
        models = ", ".join(f"{m}:{n}" for m, n in r.get("gpu_models", {}).items()) or "-"
        alive = sum(1 for n in r.get("nodes", []) if n.get("alive"))
        emu = " (emulated)" if r.get("emulated_gpus") else ""
        marks = c["faulty_nodes"]
        faulty = ", ".join(f"{views.node_id(m['node_id'])}:{m['kind']}" for m in marks) or "-"
        rows.append(
            (
                c["id"],
                c["region"],
                c["state"] + (f" ({r['health_reason']})" if r.get("health_reason") else ""),
                f"{alive}/{len(r.get('nodes', []))}",
                models + emu,
                _gpus(r),
                r.get("queued_jobs", 0),
                _spot(r),
                faulty,
                views.age(c["last_heartbeat"]) + " ago",
            )
        )
    cols = [
        "CLUSTER",
        "REGION",
        "STATE",
        "NODES",
        "GPU MODELS",
        "GPUS",
        "QUEUED",
        "SPOT",
        "FAULTY",
        "HEARTBEAT",
    ]
    views.console.print(views.table(cols, rows))
    for c in clusters:
        for n in c["report"].get("nodes", []):
            line = (
                f"  {c['id']} node {views.node_id(n['node_id'])} {n.get('ip')} "
                f"alive={n.get('alive')} "
                f"gpus {n.get('gpus_free'):g} free of {n.get('gpus_total'):g} "
                + ("spot " if n.get("spot") else "")
                + f"{n.get('fault') or n.get('problem') or ''}"
            )
            views.console.print(views.plain(line, "dim"))


def _spot(report: dict[str, Any]) -> str:
    """``$0.90/GPU-h, 0.05 reclaims/node-h (2 seen in 40.0 node-h)``: its cheapest spot
    pool and the rate placement uses, or ``-``."""
    price = report.get("spot_cost_per_gpu_hour")
    if price is None:
        return "-"
    seen = report.get("reclaims_observed") or {}
    count = sum(s["reclaims"] for s in seen.values())
    hours = sum(s["node_hours"] for s in seen.values())
    rate = f"{report.get('reclaims_per_hour', 0):.3g} reclaims/node-h"
    return f"${price:.2f}/GPU-h, {rate} ({count} seen in {hours:.1f} node-h)"


def _gpus(report: dict[str, Any]) -> str:
    """``8 free, 0 busy`` (+ ``, 4 faulty``): free + busy + faulty is every alive GPU."""
    text = f"{report.get('gpu_free', 0):g} free, {report.get('gpu_busy', 0):g} busy"
    faulty = report.get("gpu_faulty", 0)
    return text + (f", {faulty:g} faulty" if faulty else "")


node_app = typer.Typer(
    help="Mark nodes faulty or healthy (what a health checker does).", no_args_is_help=True
)
app.admin_app.add_typer(node_app, name="node")


@node_app.command("fault")
@views.guard
def node_fault(
    node: str,
    kind: Annotated[
        str,
        typer.Option(
            "--kind",
            help="ecc | xid | thermal | disk | memory | lost | gpu | cordon | reclaim "
            "(a spot reclaim notice: its runs are warned, then moved)",
        ),
    ] = "ecc",
    cluster: Annotated[str, typer.Option("--cluster")] = "local",
    reason: str = "",
) -> None:
    """Mark NODE faulty: no new work goes there; runs on it get a new attempt elsewhere."""
    cli = embedded.ensure_client(views.progress)
    full = _node_id(cli.clusters(), cluster, node)
    cli.mark_node(cluster, full, kind, reason)
    views.console.print(f"node {views.node_id(full)} of {cluster} marked faulty ({kind})")
    _await_report(cli, cluster, full, faulty=True)


@node_app.command("clear")
@views.guard
def node_clear(node: str, cluster: Annotated[str, typer.Option("--cluster")] = "local") -> None:
    """Clear the fault marks of NODE."""
    cli = embedded.ensure_client(views.progress)
    full = _node_id(cli.clusters(), cluster, node)
    cli.request(
        "POST",
        "/v1/admin/nodes/clear",
        json={"cluster_id": cluster, "node_id": full, "kind": "cordon"},
    )
    views.console.print(f"node {views.node_id(full)} of {cluster} cleared")
    _await_report(cli, cluster, full, faulty=False)


@node_app.command("list")
@views.guard
def node_list(output: views.Output = "text") -> None:
    """Every node with its health checks and its marks (who set them: admin, checker,
    log_monitor)."""
    cli = embedded.ensure_client(views.progress)
    nodes: list[dict[str, Any]] = cli.request("GET", "/v1/admin/nodes")
    if output == "json":
        views.emit_json(nodes)
        return
    rows = [
        (
            n["cluster"],
            views.node_id(n["node_id"]),
            n.get("ip") or "-",
            "yes" if n.get("alive") else "no",
            n.get("health", "unknown"),
            ", ".join(f"{m['kind']} ({m['source']})" for m in n["marks"]) or "-",
            "; ".join(f"{c['type']}: {c['reason']}" for c in n["conditions"] if c["status"] != "ok")
            or "-",
        )
        for n in nodes
    ]
    cols = ["CLUSTER", "NODE", "IP", "ALIVE", "HEALTH", "MARKS", "CONDITIONS"]
    views.console.print(views.table(cols, rows))


@node_app.command("history")
@views.guard
def node_history(
    node: str,
    cluster: Annotated[str, typer.Option("--cluster")] = "local",
    output: views.Output = "text",
) -> None:
    """Marks, clears and suspicions of NODE, oldest first, with who caused each."""
    cli = embedded.ensure_client(views.progress)
    full = _node_id(cli.clusters(), cluster, node)
    events: list[dict[str, Any]] = cli.request(
        "GET", f"/v1/admin/nodes/{full}/history", params={"cluster": cluster}
    )
    if output == "json":
        views.emit_json(events)
        return
    rows = [
        (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e["ts"])),
            e["event"].removeprefix("node_"),
            e.get("kind") or e.get("finding") or "-",
            e.get("source") or ("log_monitor" if e["event"] == "node_suspect" else "-"),
            e.get("reason") or e.get("line") or (f"run {e['run']}" if e.get("run") else ""),
        )
        for e in events
    ]
    views.console.print(views.table(["TIME", "EVENT", "KIND", "SOURCE", "DETAIL"], rows))


def _await_report(
    cli: client.Client, cluster: str, node: str, faulty: bool, timeout_s: float = 60.0
) -> None:
    """Return once the agent reports the mark applied, so that ``tau cluster list``
    agrees at once (GPUs faulty or free again); say so if it does not in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in cli.clusters():
            for n in c["report"].get("nodes", []) if c["id"] == cluster else []:
                if n["node_id"] == node and bool(n.get("fault")) == faulty:
                    return
        time.sleep(0.5)
    views.progress(f"the agent of {cluster} has not reported it yet; tau cluster list will show it")


def _node_id(clusters: list[dict[str, object]], cluster: str, prefix: str) -> str:
    """Accept a unique prefix of a node ID (IDs are long hex strings)."""
    from taugrid.errors import UserError

    for c in clusters:
        if c["id"] == cluster:
            report = c["report"]
            nodes = (
                [n["node_id"] for n in report.get("nodes", [])] if isinstance(report, dict) else []
            )
            hits = [n for n in nodes if n.startswith(prefix)]
            if len(hits) == 1:
                return str(hits[0])
            raise UserError(
                f"node '{prefix}' matches {len(hits)} nodes of {cluster}",
                "see node IDs with: tau cluster list",
            )
    raise UserError(f"no cluster '{cluster}'", "see clusters with: tau cluster list")
