"""Tenancy persistence: teams with their GPU quotas, workspaces with their members, and
quota requests; plus the read-only views of the ``runs`` table that tenancy shows.

Owns ``teams``, ``team_quotas``, ``workspaces``, ``workspace_members`` and
``quota_requests``. Objects go in and come out as the ``platform.models`` the CRDs
use (``TeamSpec``, ``WorkspaceSpec``), so the hub, platform.yaml and the Kubernetes
operator share one shape.

Invariants:
- ``seed`` inserts every team/workspace of platform.yaml that the store lacks and
  refreshes those whose ``origin`` is still ``platform``; an object changed through the
  hub (``origin = api``) is never overwritten by platform.yaml again. Idempotent.
- ``decide`` moves a request out of ``pending`` exactly once (conditional UPDATE) and,
  when it approves, sets the team's nominal quota and appends the ``quota.change``
  audit row in the same transaction — so an approval, its quota change and its audit
  entry are one atomic fact (audit order is commit order), and a request cannot be
  decided twice even by concurrent admins.
- Quota order (``position``) is the order of ``TeamSpec.quotas`` (the first flavor is a
  team's default charge); a new flavor goes last.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from taugrid.platform import models as pm
from taugrid.store import schema as t

__all__ = ["ORIGIN_API", "ORIGIN_PLATFORM", "TenancyStore"]

Row = dict[str, Any]
ORIGIN_PLATFORM = "platform"
ORIGIN_API = "api"
_WAITING = ("queued", "admitted")


def _rows(result: sa.CursorResult[Any]) -> list[Row]:
    return [dict(r._mapping) for r in result]


def _team_rows(team: pm.TeamSpec, origin: str, now: float) -> tuple[Row, list[Row]]:
    spec = team.model_dump(mode="json", exclude={"name", "quotas"})
    quotas = [
        {
            "team": team.name,
            "gpu_model": q.gpu_model,
            "position": i,
            "nominal": q.nominal,
            "borrowing_limit": q.borrowing_limit,
            "lending_limit": q.lending_limit,
            "updated_at": now,
        }
        for i, q in enumerate(team.quotas)
    ]
    row = {"name": team.name, "spec": spec, "origin": origin, "created_at": now, "updated_at": now}
    return row, quotas


def _workspace_row(ws: pm.WorkspaceSpec, origin: str, now: float) -> Row:
    spec = ws.model_dump(mode="json", exclude={"name", "team", "members"})
    return {
        "name": ws.name,
        "team": ws.team,
        "spec": spec,
        "origin": origin,
        "created_at": now,
        "updated_at": now,
    }


class TenancyStore:
    """Repository over the tenancy tables (see the module docstring)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    # -- seeding ---------------------------------------------------------------------
    def seed(self, platform: pm.Platform) -> None:
        """Bring platform.yaml's teams and workspaces into the store (idempotent)."""
        for team in platform.teams:
            self._seed_one(t.teams, team.name, lambda c, tm=team: self._put_team(c, tm))
        for ws in platform.workspaces:
            self._seed_one(t.workspaces, ws.name, lambda c, w=ws: self._put_workspace(c, w))

    def _seed_one(self, table: sa.Table, name: str, put: Any) -> None:
        try:
            with self.engine.begin() as c:
                origin = c.execute(
                    sa.select(table.c.origin).where(table.c.name == name)
                ).scalar_one_or_none()
                if origin in (None, ORIGIN_PLATFORM):
                    put(c)
        except sa.exc.IntegrityError:
            pass  # another hub process seeded it at the same moment

    def _put_team(self, c: sa.Connection, team: pm.TeamSpec, origin: str = ORIGIN_PLATFORM) -> None:
        now = time.time()
        row, quotas = _team_rows(team, origin, now)
        c.execute(t.team_quotas.delete().where(t.team_quotas.c.team == team.name))
        c.execute(t.teams.delete().where(t.teams.c.name == team.name))
        c.execute(t.teams.insert().values(**row))
        if quotas:
            c.execute(t.team_quotas.insert(), quotas)

    def _put_workspace(
        self, c: sa.Connection, ws: pm.WorkspaceSpec, origin: str = ORIGIN_PLATFORM
    ) -> None:
        now = time.time()
        key = t.workspace_members.c.workspace == ws.name
        c.execute(t.workspace_members.delete().where(key))
        c.execute(t.workspaces.delete().where(t.workspaces.c.name == ws.name))
        c.execute(t.workspaces.insert().values(**_workspace_row(ws, origin, now)))
        members = [{"workspace": ws.name, "member": m, "added_at": now} for m in ws.members]
        if members:
            c.execute(t.workspace_members.insert(), members)

    # -- objects ---------------------------------------------------------------------
    def teams(self) -> list[pm.TeamSpec]:
        with self.engine.connect() as c:
            teams = _rows(c.execute(sa.select(t.teams).order_by(t.teams.c.name)))
            quotas = _rows(c.execute(sa.select(t.team_quotas).order_by(t.team_quotas.c.position)))
        out = []
        for row in teams:
            qs = [
                pm.Quota(
                    gpu_model=q["gpu_model"],
                    nominal=q["nominal"],
                    borrowing_limit=q["borrowing_limit"],
                    lending_limit=q["lending_limit"],
                )
                for q in quotas
                if q["team"] == row["name"]
            ]
            out.append(
                pm.TeamSpec.model_validate({**row["spec"], "name": row["name"], "quotas": qs})
            )
        return out

    def workspaces(self) -> list[pm.WorkspaceSpec]:
        with self.engine.connect() as c:
            wss = _rows(c.execute(sa.select(t.workspaces).order_by(t.workspaces.c.name)))
            members = _rows(
                c.execute(
                    sa.select(t.workspace_members).order_by(
                        t.workspace_members.c.added_at, t.workspace_members.c.member
                    )
                )
            )
        return [
            pm.WorkspaceSpec.model_validate(
                {
                    **row["spec"],
                    "name": row["name"],
                    "team": row["team"],
                    "members": [m["member"] for m in members if m["workspace"] == row["name"]],
                }
            )
            for row in wss
        ]

    def apply(self, platform: pm.Platform) -> pm.Platform:
        """``platform`` with the store's teams and workspaces in place of (or beside) its own."""
        teams = {tm.name: tm for tm in platform.teams}
        teams.update({tm.name: tm for tm in self.teams()})
        wss = {w.name: w for w in platform.workspaces}
        wss.update({w.name: w for w in self.workspaces()})
        return platform.model_copy(
            update={"teams": list(teams.values()), "workspaces": list(wss.values())}
        )

    def origin(self, workspace: str) -> str | None:
        q = sa.select(t.workspaces.c.origin).where(t.workspaces.c.name == workspace)
        with self.engine.connect() as c:
            return c.execute(q).scalar_one_or_none()

    def create_workspace(self, ws: pm.WorkspaceSpec) -> bool:
        """Insert a new workspace; False when the name is taken."""
        try:
            with self.engine.begin() as c:
                row = _workspace_row(ws, ORIGIN_API, time.time())
                c.execute(t.workspaces.insert().values(**row))
                now = time.time()
                for m in ws.members:
                    c.execute(
                        t.workspace_members.insert().values(
                            workspace=ws.name, member=m, added_at=now
                        )
                    )
        except sa.exc.IntegrityError:
            return False
        return True

    def change_members(self, workspace: str, add: Iterable[str], remove: Iterable[str]) -> None:
        """Add and remove members (adding a present member is a no-op)."""
        now = time.time()
        with self.engine.begin() as c:
            have = set(
                c.execute(
                    sa.select(t.workspace_members.c.member).where(
                        t.workspace_members.c.workspace == workspace
                    )
                ).scalars()
            )
            for m in dict.fromkeys(add):
                if m not in have:
                    c.execute(
                        t.workspace_members.insert().values(
                            workspace=workspace, member=m, added_at=now
                        )
                    )
            gone = [m for m in remove if m in have]
            if gone:
                c.execute(
                    t.workspace_members.delete().where(
                        t.workspace_members.c.workspace == workspace,
                        t.workspace_members.c.member.in_(gone),
                    )
                )
            c.execute(
                t.workspaces.update()
                .where(t.workspaces.c.name == workspace)
                .values(origin=ORIGIN_API, updated_at=now)
            )

    def memberships(self, member: str) -> list[str]:
        """Workspaces that list ``member``."""
        q = sa.select(t.workspace_members.c.workspace).where(t.workspace_members.c.member == member)
        with self.engine.connect() as c:
            return sorted(c.execute(q).scalars())

    # -- quota requests ----------------------------------------------------------------
    def create_request(self, workspace: str, req: pm.QuotaRequestSpec, requested_by: str) -> Row:
        row = {
            "id": f"qr-{secrets.token_hex(4)}",
            "workspace": workspace,
            "team": req.team,
            "gpu_model": req.gpu_model,
            "nominal": req.nominal,
            "previous_nominal": None,
            "reason": req.reason,
            "state": pm.QuotaRequestState.PENDING.value,
            "requested_by": requested_by,
            "decided_by": None,
            "decision_reason": None,
            "created_at": time.time(),
            "decided_at": None,
        }
        with self.engine.begin() as c:
            c.execute(t.quota_requests.insert().values(**row))
        return row

    def get_request(self, request_id: str) -> Row | None:
        q = sa.select(t.quota_requests).where(t.quota_requests.c.id == request_id)
        with self.engine.connect() as c:
            r = c.execute(q).first()
        return dict(r._mapping) if r else None

    def list_requests(
        self, state: str | None = None, workspaces: list[str] | None = None
    ) -> list[Row]:
        q = sa.select(t.quota_requests).order_by(t.quota_requests.c.created_at)
        if state:
            q = q.where(t.quota_requests.c.state == state)
        if workspaces is not None:
            q = q.where(t.quota_requests.c.workspace.in_(workspaces))
        with self.engine.connect() as c:
            return _rows(c.execute(q))

    def decide(
        self, request_id: str, state: pm.QuotaRequestState, actor: str, reason: str
    ) -> Row | None:
        """Approve or reject a pending request (approval sets the quota); None if not pending."""
        for attempt in range(3):
            try:
                return self._decide_once(request_id, state, actor, reason)
            except sa.exc.IntegrityError:
                if attempt == 2:  # a concurrent approval created the same quota row
                    raise
        return None

    def _decide_once(
        self, request_id: str, state: pm.QuotaRequestState, actor: str, reason: str
    ) -> Row | None:
        now = time.time()
        qr = t.quota_requests
        with self.engine.begin() as c:
            done = c.execute(
                qr.update()
                .where(qr.c.id == request_id, qr.c.state == pm.QuotaRequestState.PENDING.value)
                .values(state=state.value, decided_by=actor, decision_reason=reason, decided_at=now)
            ).rowcount
            if done != 1:
                return None
            row = dict(c.execute(sa.select(qr).where(qr.c.id == request_id)).one()._mapping)
            if state is pm.QuotaRequestState.APPROVED:
                prev = _set_nominal(c, row["team"], row["gpu_model"], row["nominal"], now)
                c.execute(qr.update().where(qr.c.id == request_id).values(previous_nominal=prev))
                row["previous_nominal"] = prev
                detail = {"gpu_model": row["gpu_model"], "from": prev, "to": row["nominal"]}
                c.execute(
                    t.audit.insert().values(
                        ts=now,
                        actor=actor,
                        action="quota.change",
                        target=row["team"],
                        detail={**detail, "request": request_id},
                    )
                )
        return row

    # -- views of runs -------------------------------------------------------------------
    def run_counts(self, workspace: str) -> dict[str, int]:
        q = (
            sa.select(t.runs.c.state, sa.func.count())
            .where(t.runs.c.workspace == workspace)
            .group_by(t.runs.c.state)
        )
        with self.engine.connect() as c:
            return {r[0]: int(r[1]) for r in c.execute(q)}

    def held_gpus(self) -> list[Row]:
        """GPUs held (quota not released) per workspace, team and GPU model."""
        cols = (t.runs.c.workspace, t.runs.c.team, t.runs.c.gpu_model)
        q = (
            sa.select(*cols, sa.func.sum(t.runs.c.gpus).label("gpus"))
            .where(t.runs.c.quota_held == sa.true())
            .group_by(*cols)
        )
        with self.engine.connect() as c:
            return [{**r, "gpus": round(float(r["gpus"] or 0), 6)} for r in _rows(c.execute(q))]

    def waiting_runs(self, workspaces: list[str] | None = None) -> list[Row]:
        """Runs waiting for admission or placement, in queue order (priority, then age)."""
        r = t.runs.c
        cols = (r.id, r.name, r.workspace, r.team, r.state, r.reason, r.priority)
        q = (
            sa.select(*cols, r.gpus, r.gpu_model, r.created_at, r.updated_at)
            .where(r.state.in_(_WAITING), r.cancel_requested.is_(False))
            .order_by(r.priority.desc(), r.created_at, r.id)
        )
        if workspaces is not None:
            q = q.where(r.workspace.in_(workspaces))
        with self.engine.connect() as c:
            return _rows(c.execute(q))


def _set_nominal(c: sa.Connection, team: str, gpu_model: str, nominal: int, now: float) -> int:
    """Set a team's nominal quota of one flavor; returns the previous nominal (0 if none)."""
    tq = t.team_quotas
    key = (tq.c.team == team) & (tq.c.gpu_model == gpu_model)
    # FOR UPDATE: concurrent approvals of one flavor serialize here (PostgreSQL), so the
    # previous value each records is the one it replaced.
    prev = c.execute(sa.select(tq.c.nominal).where(key).with_for_update()).scalar_one_or_none()
    if prev is None:
        pos = c.execute(sa.select(sa.func.max(tq.c.position)).where(tq.c.team == team)).scalar()
        c.execute(
            tq.insert().values(
                team=team,
                gpu_model=gpu_model,
                position=(pos + 1) if pos is not None else 0,
                nominal=nominal,
                updated_at=now,
            )
        )
    else:
        c.execute(tq.update().where(key).values(nominal=nominal, updated_at=now))
    c.execute(
        t.teams.update().where(t.teams.c.name == team).values(origin=ORIGIN_API, updated_at=now)
    )
    return int(prev or 0)
