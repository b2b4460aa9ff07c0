"""Tenancy commands: ``tau workspace ...``, ``tau queue list``, ``tau login`` and
``tau admin quota | token | audit``.

Talks to the hub only through ``taugrid.sdk`` (``sdk.client.tenancy``). Every command has
``-o json``; the hub decides who may do what (researchers: their workspaces; admins:
everything), so a refused command prints the hub's reason and exits 2.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from taugrid.cli import app, views
from taugrid.sdk.client import client as sdk_client
from taugrid.sdk.client import tenancy as sdk
from taugrid.sdk.client import usage
from taugrid.sdk.local import embedded

__all__: list[str] = []


ws_quota_app = typer.Typer(help="A workspace's quota and quota requests.", no_args_is_help=True)
app.workspace_app.add_typer(ws_quota_app, name="quota")
admin_quota_app = typer.Typer(help="Approve or reject quota requests.", no_args_is_help=True)
app.admin_app.add_typer(admin_quota_app, name="quota")
token_app = typer.Typer(help="Bearer tokens: create, list, revoke.", no_args_is_help=True)
app.admin_app.add_typer(token_app, name="token")


def _client() -> sdk_client.Client:
    return embedded.ensure_client(views.progress)


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


# -- tau workspace -------------------------------------------------------------------
@app.workspace_app.command("create")
@views.guard
def ws_create(
    name: str,
    team: Annotated[str, typer.Option("--team", help="Team whose quota the workspace uses")],
    member: Annotated[list[str] | None, typer.Option("--member", help="User; repeatable")] = None,
    output: views.Output = "text",
) -> None:
    """Create a workspace (admin)."""
    ws = sdk.create_workspace(_client(), name, team, member or [])
    if output == "json":
        views.emit_json(ws)
        return
    views.console.print(f"workspace [bold]{ws['name']}[/] created (team {ws['team']})")


@app.workspace_app.command("list")
@views.guard
def ws_list(output: views.Output = "text") -> None:
    """Workspaces you can see (all of them for an admin)."""
    wss = sdk.workspaces(_client())
    if output == "json":
        views.emit_json(wss)
        return
    rows = [
        (
            w["name"],
            w["team"],
            w.get("namespace") or w["name"],
            w.get("queue") or w["name"],
            ", ".join(w["members"]) or "-",
        )
        for w in wss
    ]
    views.console.print(views.table(["WORKSPACE", "TEAM", "NAMESPACE", "QUEUE", "MEMBERS"], rows))


def _quota_table(quotas: list[dict[str, Any]]) -> Any:
    rows = [
        (
            q["gpu_model"],
            q.get("workspace_held", "-"),
            q["team_held"],
            q["nominal"],
            q["borrowing_limit"],
            q["lending_limit"],
        )
        for q in quotas
    ]
    cols = ["GPU MODEL", "HELD (WS)", "HELD (TEAM)", "NOMINAL", "BORROW LIMIT", "LEND LIMIT"]
    return views.table(cols, rows)


@app.workspace_app.command("status")
@views.guard
def ws_status(name: str, output: views.Output = "text") -> None:
    """A workspace's runs by state and the GPUs it holds against its team's quota."""
    doc = sdk.workspace_status(_client(), name)
    if output == "json":
        views.emit_json(doc)
        return
    ws = doc["workspace"]
    views.console.print(
        f"workspace [bold]{ws['name']}[/]  team: {doc['team']}  cohort: {doc['cohort'] or '-'}"
        f"  members: {', '.join(ws['members']) or '-'}"
    )
    runs = "  ".join(f"{s}: {n}" for s, n in sorted(doc["runs"].items())) or "no runs"
    views.console.print(f"runs: {runs}  (waiting: {doc['waiting']})")
    views.console.print(_quota_table(doc["quotas"]))
    cost, cur = doc["cost"], doc["cost"]["currency"]
    views.console.print(
        f"cost: {usage.money(cost['total'], cur)} (GPU {cost['gpu_hours']:.3f} h "
        f"{usage.money(cost['gpu_cost'], cur)}, egress {cost['egress_gb']:.2f} GB "
        f"{usage.money(cost['egress_cost'], cur)})  month to date: "
        f"{usage.money(cost['month_to_date'], cur)}"
        + (
            f"  spot saved {usage.money(cost['spot_saving'], cur)}"
            if cost.get("spot_saving")
            else ""
        )
    )


@app.workspace_app.command("members")
@views.guard
def ws_members(
    name: str,
    add: Annotated[list[str] | None, typer.Option("--add", help="User to add; repeatable")] = None,
    remove: Annotated[
        list[str] | None, typer.Option("--remove", help="User to remove; repeatable")
    ] = None,
    output: views.Output = "text",
) -> None:
    """Show a workspace's members; --add/--remove change them (admin)."""
    cli = _client()
    ws = (
        sdk.change_members(cli, name, add or [], remove or [])
        if add or remove
        else sdk.workspace(cli, name)
    )
    if output == "json":
        views.emit_json(ws["members"])
        return
    for m in ws["members"]:
        views.console.print(m)
    if not ws["members"]:
        views.console.print("[dim]no members[/]")


@ws_quota_app.command("show")
@views.guard
def quota_show(name: str, output: views.Output = "text") -> None:
    """The quota of the workspace's team, what is held, and the workspace's requests."""
    doc = sdk.quota(_client(), name)
    if output == "json":
        views.emit_json(doc)
        return
    views.console.print(
        f"workspace {doc['workspace']}  team: {doc['team']}  cohort: {doc['cohort'] or '-'}"
        f"  strategy: {doc['queueing_strategy']}"
    )
    views.console.print(_quota_table(doc["quotas"]))
    if doc["requests"]:
        views.console.print(_requests_table(doc["requests"]))


@ws_quota_app.command("request")
@views.guard
def quota_request(
    name: str,
    gpu_model: Annotated[str, typer.Option("--gpu-model", help="e.g. A100-80G")],
    gpus: Annotated[int, typer.Option("--gpus", help="The nominal quota you ask for")],
    reason: Annotated[str, typer.Option("--reason", help="Why (an admin reads it)")],
    output: views.Output = "text",
) -> None:
    """Ask for the team of workspace NAME to get a nominal quota of GPUS (an admin decides)."""
    row = sdk.request_quota(_client(), name, gpu_model, gpus, reason)
    if output == "json":
        views.emit_json(row)
        return
    views.console.print(
        f"quota request [bold]{row['id']}[/] filed: team {row['team']} {row['gpu_model']}"
        f" nominal {row['nominal']} (pending; an admin approves with:"
        f" tau admin quota approve {row['id']})"
    )


def _requests_table(rows: list[dict[str, Any]]) -> Any:
    return views.table(
        ["ID", "WORKSPACE", "TEAM", "GPU MODEL", "NOMINAL", "STATE", "BY", "DECIDED BY", "REASON"],
        [
            (
                r["id"],
                r["workspace"],
                r["team"],
                r["gpu_model"],
                r["nominal"],
                r["state"],
                r["requested_by"],
                r["decided_by"],
                (r["decision_reason"] or r["reason"])[:50],
            )
            for r in rows
        ],
    )


# -- tau admin quota -------------------------------------------------------------------
@admin_quota_app.command("list")
@views.guard
def admin_quota_list(
    state: Annotated[str | None, typer.Option("--state", help="pending|approved|rejected")] = None,
    output: views.Output = "text",
) -> None:
    """Quota requests (oldest first)."""
    rows = sdk.quota_requests(_client(), state)
    if output == "json":
        views.emit_json(rows)
        return
    views.console.print(_requests_table(rows))


@admin_quota_app.command("approve")
@views.guard
def admin_quota_approve(
    request_id: str,
    reason: Annotated[str, typer.Option("--reason")] = "",
    output: views.Output = "text",
) -> None:
    """Approve a quota request: the team's nominal quota becomes what it asked for."""
    row = sdk.approve_quota(_client(), request_id, reason)
    if output == "json":
        views.emit_json(row)
        return
    views.console.print(
        f"approved {row['id']}: team {row['team']} {row['gpu_model']} nominal"
        f" {row['previous_nominal']} → {row['nominal']}"
    )


@admin_quota_app.command("reject")
@views.guard
def admin_quota_reject(
    request_id: str,
    reason: Annotated[str, typer.Option("--reason", help="Told to the requester")],
    output: views.Output = "text",
) -> None:
    """Reject a quota request (with a reason)."""
    row = sdk.reject_quota(_client(), request_id, reason)
    if output == "json":
        views.emit_json(row)
        return
    views.console.print(f"rejected {row['id']}: {row['decision_reason']}")


# -- tau queue ---------------------------------------------------------------------
@app.queue_app.command("list")
@views.guard
def queue_list(
    workspace: Annotated[str | None, typer.Option("--workspace")] = None,
    output: views.Output = "text",
) -> None:
    """Waiting runs in queue order (priority, then age) with the reason each waits."""
    rows = sdk.queue(_client(), workspace)
    if output == "json":
        views.emit_json(rows)
        return
    if not rows:
        views.console.print("[dim]no runs waiting[/]")
        return
    cols = ["#", "TEAM #", "RUN", "WORKSPACE", "TEAM", "PRIO", "GPUS", "STATE", "WAITING", "REASON"]
    views.console.print(
        views.table(
            cols,
            [
                (
                    r["position"],
                    r["team_position"],
                    r["id"],
                    r["workspace"],
                    r["team"],
                    r["priority"],
                    f"{r['gpus']} {r['gpu_model'] or ''}".strip(),
                    r["state"],
                    views.age(r["created_at"]),
                    r["reason"],
                )
                for r in rows
            ],
        )
    )


# -- tau login, tau admin token | audit ------------------------------------------------
@app.app.command("login")
@views.guard
def login_cmd(
    hub: Annotated[
        str,
        typer.Option(
            "--hub", help="Hub URL, e.g. https://tau.example.com (replicas: comma-separated)"
        ),
    ],
    token: Annotated[str, typer.Option("--token", prompt=True, hide_input=True)],
    output: views.Output = "text",
) -> None:
    """Check a hub URL and token, then save them in $TAU_HOME/credentials.json (0600)."""
    path, me = sdk.login(hub, token)
    if output == "json":
        views.emit_json({"credentials": str(path), **me})
        return
    scope = me["scope"].get("workspaces") or me["scope"].get("cluster") or "all"
    views.console.print(f"logged in to {hub} as {me['name']} ({me['role']}; scope: {scope})")
    views.console.print(f"  credentials: {path}")


@token_app.command("create")
@views.guard
def token_create(
    role: Annotated[
        str, typer.Option("--role", help="admin | researcher | agent | metrics (scrape-only)")
    ],
    name: Annotated[str, typer.Option("--name", help="Who uses it (a user or an agent)")],
    workspace: Annotated[
        list[str] | None, typer.Option("--workspace", help="Researcher scope; repeatable")
    ] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Agent scope")] = None,
    output: views.Output = "text",
) -> None:
    """Create a token; its secret is printed once and never stored."""
    client = _client()
    row = sdk.create_token(client, name, role, workspace or [], cluster)
    if output == "json":
        views.emit_json(row)
        return
    views.console.print(f"token {row['id']} ({row['role']}, {row['name']}) created; secret:")
    views.console.print(row["secret"], soft_wrap=True)
    hint = f"tau login --hub {client.config.url} --token SECRET"
    views.err_console.print(f"[dim]shown once; use it with: {hint}[/]", soft_wrap=True)


@token_app.command("list")
@views.guard
def token_list(output: views.Output = "text") -> None:
    """Tokens (never their secrets)."""
    rows = sdk.list_tokens(_client())
    if output == "json":
        views.emit_json(rows)
        return
    cols = ["ID", "NAME", "ROLE", "SCOPE", "CREATED", "REVOKED"]
    data = [
        (
            r["id"],
            r["name"],
            r["role"],
            r["scope"] or "-",
            _when(r["created_at"]),
            _when(r["revoked_at"]),
        )
        for r in rows
    ]
    views.console.print(views.table(cols, data))


@token_app.command("revoke")
@views.guard
def token_revoke(token_id: str, output: views.Output = "text") -> None:
    """Revoke a token; its next request fails."""
    out = sdk.revoke_token(_client(), token_id)
    if output == "json":
        views.emit_json(out)
        return
    views.console.print(f"token {token_id} revoked")


@app.admin_app.command("audit")
@views.guard
def audit_cmd(
    limit: Annotated[int, typer.Option("--limit")] = 50,
    action: Annotated[str | None, typer.Option("--action", help="e.g. quota, token.create")] = None,
    output: views.Output = "text",
) -> None:
    """The audit log, newest first: every admin action and every quota change."""
    rows = sdk.audit(_client(), limit, action)
    if output == "json":
        views.emit_json(rows)
        return
    data = [
        (_when(r["ts"]), r["actor"], r["action"], r["target"], _detail(r["detail"])) for r in rows
    ]
    views.console.print(views.table(["TIME", "ACTOR", "ACTION", "TARGET", "DETAIL"], data))


def _detail(detail: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in detail.items() if v not in (None, "", [], {}))
