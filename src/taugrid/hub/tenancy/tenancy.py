"""Tenancy operations of the hub: workspaces, members, quotas, quota requests, the queue
view, and bearer tokens with the audit log.

Owns the rules; ``hub.api.tenancy_api`` owns the HTTP surface and who may call what;
``store.tenancy`` and ``store.auth`` own persistence. Rules:

- A new workspace must make a valid platform together with everything that exists
  (its team exists, its namespace is not another workspace's, its default profile,
  priority and GPU model are declared) — checked by ``platform.models.Platform`` itself.
- A quota request names a declared GPU model and the nominal quota its team should
  have; approval sets that nominal for real (store transaction) and is audited with
  the previous value; rejection needs a reason. Only ``pending`` requests are decided.
- Every admin action and every quota change goes to the audit log
  (actor = the token's name); ``quota.change`` is written by the store in the
  approval's own transaction.
- After any change the hub's effective platform is invalidated
  (``context.Hub.platform_changed``), so resolve and the scheduler see it at once.

Vocabulary: *held* GPUs are those of runs whose quota is reserved (``quota_held``).
"""

from __future__ import annotations

from typing import Any

import pydantic

from taugrid import payloads as wire
from taugrid.errors import UserError
from taugrid.hub.core import context
from taugrid.hub.runs.runs import NotFound
from taugrid.hub.tenancy import cost
from taugrid.platform import models as pm
from taugrid.spec import errors as spec_errors

__all__ = [
    "change_members",
    "create_token",
    "create_workspace",
    "decide",
    "effective_platform",
    "list_requests",
    "queue",
    "quota",
    "request_quota",
    "revoke_token",
    "status",
    "teams",
    "visible_platform",
    "workspace",
]

Row = dict[str, Any]


def effective_platform(hub: context.Hub) -> pm.Platform:
    """platform.yaml with the store's teams, quotas and workspaces (cached by the hub)."""
    return hub.platform


def visible_platform(plat: pm.Platform, workspaces: list[str] | None) -> pm.Platform:
    """``plat`` as a caller who sees only ``workspaces`` (None: all) may read it: other
    workspaces (and their members) and teams without a visible workspace are left out."""
    if workspaces is None:
        return plat
    wss = [w for w in plat.workspaces if w.name in workspaces]
    teams = {w.team for w in wss}
    return plat.model_copy(
        update={
            "workspaces": wss,
            "teams": [t for t in plat.teams if t.name in teams],
            "default_workspace": plat.default_workspace
            if plat.default_workspace in workspaces
            else None,
        }
    )


def _invalid(exc: pydantic.ValidationError, what: str) -> UserError:
    err = exc.errors()[0]
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, spec_errors.FieldError):
        return UserError(f"{what}: {cause.message}", cause.hint)
    where = ".".join(str(x) for x in err["loc"]) or what
    return UserError(f"{what}: {where}: {err['msg']}", "fix the value and try again")


def workspace(hub: context.Hub, name: str) -> pm.WorkspaceSpec:
    ws = hub.platform.workspace(name)
    if ws is None:
        raise NotFound(f"no workspace '{name}'", "list workspaces with: tau workspace list")
    return ws


def create_workspace(hub: context.Hub, body: wire.WorkspaceCreate, actor: str) -> pm.WorkspaceSpec:
    """Create a workspace (validated against the whole platform) and audit it."""
    try:
        ws = pm.WorkspaceSpec.model_validate(body.model_dump())
    except pydantic.ValidationError as exc:
        raise _invalid(exc, f"workspace '{body.name}'") from exc
    plat = hub.platform
    if plat.workspace(ws.name) is not None:
        raise UserError(
            f"workspace '{ws.name}' already exists", f"see it with: tau workspace status {ws.name}"
        )
    doc = plat.model_dump(mode="json")
    doc["workspaces"].append(ws.model_dump(mode="json"))
    try:
        pm.Platform.model_validate(doc)
    except pydantic.ValidationError as exc:
        raise _invalid(exc, f"workspace '{ws.name}'") from exc
    if not hub.tenancy.create_workspace(ws):
        raise UserError(f"workspace '{ws.name}' already exists", "pick another name")
    hub.platform_changed()
    hub.auth.audit(actor, "workspace.create", ws.name, ws.model_dump(mode="json"))
    return ws


def change_members(
    hub: context.Hub, name: str, body: wire.MembersChange, actor: str
) -> pm.WorkspaceSpec:
    workspace(hub, name)
    if set(body.add) & set(body.remove):
        raise UserError(
            "the same user is both added and removed", "give each user to --add or to --remove"
        )
    hub.tenancy.change_members(name, body.add, body.remove)
    hub.platform_changed()
    hub.auth.audit(actor, "workspace.members", name, {"add": body.add, "remove": body.remove})
    return workspace(hub, name)


def _quota_rows(hub: context.Hub, team: pm.TeamSpec, ws_name: str | None) -> list[Row]:
    held = hub.tenancy.held_gpus()
    out = []
    for q in team.quotas:
        mine = [h for h in held if h["team"] == team.name and h["gpu_model"] == q.gpu_model]
        row = {
            "gpu_model": q.gpu_model,
            "nominal": q.nominal,
            "borrowing_limit": q.borrowing_limit,
            "lending_limit": q.lending_limit,
            "team_held": sum(h["gpus"] for h in mine),
        }
        if ws_name is not None:
            row["workspace_held"] = sum(h["gpus"] for h in mine if h["workspace"] == ws_name)
        out.append(row)
    return out


def _team(hub: context.Hub, name: str) -> pm.TeamSpec:
    team = hub.platform.team(name)
    if team is None:
        raise NotFound(f"no team '{name}'", "an admin declares teams in platform.yaml")
    return team


def status(hub: context.Hub, name: str) -> Row:
    """A workspace's spec, its runs by state, and GPUs held against its team's quota."""
    ws = workspace(hub, name)
    team = _team(hub, ws.team)
    return {
        "workspace": ws.model_dump(mode="json"),
        "team": team.name,
        "cohort": team.cohort,
        "runs": hub.tenancy.run_counts(ws.name),
        "quotas": _quota_rows(hub, team, ws.name),
        "waiting": len(hub.tenancy.waiting_runs([ws.name])),
        "cost": cost.workspace_cost(hub, ws.name),
    }


def teams(hub: context.Hub) -> list[Row]:
    """Each team's cohort and quotas with GPUs held and borrowed beyond the nominal."""
    out = []
    for team in hub.platform.teams:
        rows = _quota_rows(hub, team, None)
        for q in rows:
            q["borrowed"] = max(0, q["team_held"] - q["nominal"])
        out.append({"team": team.name, "cohort": team.cohort, "quotas": rows})
    return out


def quota(hub: context.Hub, name: str) -> Row:
    """The quota of a workspace's team with usage, and the workspace's quota requests."""
    ws = workspace(hub, name)
    team = _team(hub, ws.team)
    return {
        "workspace": ws.name,
        "team": team.name,
        "cohort": team.cohort,
        "queueing_strategy": team.queueing_strategy.value,
        "quotas": _quota_rows(hub, team, ws.name),
        "requests": hub.tenancy.list_requests(None, [ws.name]),
    }


def request_quota(hub: context.Hub, name: str, body: wire.QuotaRequestCreate, actor: str) -> Row:
    """File a quota request for the team of workspace ``name`` (audited)."""
    ws = workspace(hub, name)
    plat = hub.platform
    models = sorted(g.name for g in plat.gpu_types)
    if body.gpu_model not in models:
        raise UserError(f"unknown GPU model '{body.gpu_model}'", f"use one of {models}")
    spec = pm.QuotaRequestSpec(
        team=ws.team, gpu_model=body.gpu_model, nominal=body.gpus, reason=body.reason
    )
    row = hub.tenancy.create_request(ws.name, spec, actor)
    hub.auth.audit(actor, "quota.request", row["id"], _request_detail(row))
    return row


def _request_detail(row: Row) -> Row:
    keys = ("workspace", "team", "gpu_model", "nominal", "previous_nominal", "reason", "state")
    return {k: row[k] for k in keys}


def list_requests(hub: context.Hub, state: str | None, workspaces: list[str] | None) -> list[Row]:
    if state is not None and state not in {s.value for s in pm.QuotaRequestState}:
        raise UserError(
            f"unknown quota request state '{state}'",
            f"use one of {[s.value for s in pm.QuotaRequestState]}",
        )
    return hub.tenancy.list_requests(state, workspaces)


def decide(hub: context.Hub, request_id: str, approve: bool, actor: str, reason: str) -> Row:
    """Approve (sets the team's nominal quota) or reject a pending request; audited."""
    row = hub.tenancy.get_request(request_id)
    if row is None:
        raise NotFound(f"no quota request '{request_id}'", "list them with: tau admin quota list")
    if not approve and not reason.strip():
        raise UserError("a rejection needs a reason", "pass --reason TEXT")
    state = pm.QuotaRequestState.APPROVED if approve else pm.QuotaRequestState.REJECTED
    done = hub.tenancy.decide(request_id, state, actor, reason)
    if done is None:
        now = hub.tenancy.get_request(request_id) or row
        raise UserError(
            f"quota request {request_id} is already {now['state']} (by {now['decided_by']})",
            "only pending requests can be approved or rejected",
        )
    hub.platform_changed()
    action = "quota.approve" if approve else "quota.reject"
    hub.auth.audit(actor, action, request_id, _request_detail(done))
    return done


def queue(hub: context.Hub, workspaces: list[str] | None) -> list[Row]:
    """Waiting runs in queue order, with their position overall and in their team's queue."""
    out = []
    per_team: dict[str, int] = {}
    for i, r in enumerate(hub.tenancy.waiting_runs(workspaces), start=1):
        per_team[r["team"]] = per_team.get(r["team"], 0) + 1
        out.append({**r, "position": i, "team_position": per_team[r["team"]]})
    return out


# -- tokens ----------------------------------------------------------------------------
def _token_scope(hub: context.Hub, body: wire.TokenCreate) -> Row:
    plat = hub.platform
    if body.role == "admin":
        if body.workspaces or body.cluster:
            raise UserError("an admin token has no scope", "drop --workspace and --cluster")
        return {}
    if body.role == "agent":
        clusters = sorted(c.name for r in plat.regions for c in r.clusters)
        if body.cluster not in clusters or body.workspaces:
            raise UserError(
                f"an agent token needs exactly one cluster of the platform, got {body.cluster!r}",
                f"pass --cluster with one of {clusters} (and no --workspace)",
            )
        return {"cluster": body.cluster}
    if body.role == "metrics":  # scrape-only: /metrics and nothing else
        if body.workspaces or body.cluster:
            raise UserError("a metrics token has no scope", "drop --workspace and --cluster")
        return {}
    known = sorted(w.name for w in plat.workspaces)
    unknown = [w for w in body.workspaces if w not in known]
    if unknown or body.cluster:
        raise UserError(
            f"a researcher token is scoped to workspaces; unknown: {unknown or '-'}"
            + (", and --cluster is for agents" if body.cluster else ""),
            f"pass --workspace with some of {known}",
        )
    return {"workspaces": sorted(set(body.workspaces))}


def create_token(hub: context.Hub, body: wire.TokenCreate, actor: str) -> Row:
    """Create a token; the reply carries its secret (shown once, stored hashed)."""
    scope = _token_scope(hub, body)
    secret, row = hub.auth.create_token(body.name, body.role, scope)
    hub.auth.audit(
        actor, "token.create", row["id"], {"name": body.name, "role": body.role, "scope": scope}
    )
    return {**{k: v for k, v in row.items() if k != "hash"}, "secret": secret}


def revoke_token(hub: context.Hub, token_id: str, actor: str) -> Row:
    if not hub.auth.revoke(token_id):
        raise NotFound(f"no active token '{token_id}'", "list tokens with: tau admin token list")
    hub.auth.audit(actor, "token.revoke", token_id, {})
    return {"id": token_id, "revoked": True}
