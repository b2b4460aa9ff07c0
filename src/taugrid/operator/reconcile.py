"""One reconcile pass per Tau object: read what it names, apply what ``desired`` says.

Every object is written by server-side apply with field manager ``taugrid-operator``
and ``force``, so a pass is idempotent: it creates what is missing, puts back what a
hand edit changed (drift) and never makes a second copy (names are deterministic). Each
pass returns the object's new ``status`` (``phase`` Ready or Failed, ``message``, and
what it made); the caller writes it only when it differs.

Failures a user causes (a workspace naming a team that does not exist, a namespace of
another workspace) end as ``phase: Failed`` with what to fix, before anything is
applied: nothing is half-created. API server failures raise ``backends.errors`` for the
caller to retry.

Fault injection (tests): ``TAU_OPERATOR_FAULT_EXIT_AFTER`` = N makes the process exit
(status 70) right after the N-th object of a workspace pass is applied, as an operator
killed mid-reconcile would; ``N@WS`` only in workspace WS's pass (other workspaces on a
shared test cluster may be reconciled first).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pydantic

from taugrid.backends.kube import kube_api
from taugrid.operator import desired
from taugrid.platform import crds
from taugrid.platform import models as pm
from taugrid.render import naming

__all__ = ["FAULT_ENV", "FAULT_EXIT_CODE", "FIELD_MANAGER", "Reconciler"]

FIELD_MANAGER = "taugrid-operator"
FAULT_ENV = "TAU_OPERATOR_FAULT_EXIT_AFTER"
FAULT_EXIT_CODE = 70
Status = dict[str, Any]


def _plain(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A kopf body (or any mapping of mappings) as plain dicts and lists."""

    def conv(v: Any) -> Any:
        if isinstance(v, Mapping):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [conv(x) for x in v]
        return v

    out: dict[str, Any] = conv(obj)
    return out


def _failed(message: str, generation: int | None) -> Status:
    return {"phase": "Failed", "message": message, "observedGeneration": generation}


def _invalid(obj: Mapping[str, Any], exc: pydantic.ValidationError) -> str:
    where = "; ".join(
        f"spec.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
    )
    return f"{obj['kind']} {obj['metadata']['name']} is invalid: {where}; fix its spec"


_Spec = TypeVar("_Spec", bound=pydantic.BaseModel)
_Pass = Callable[["Reconciler", dict[str, Any], int | None, _Spec], Status]


def _validated(
    model: type[_Spec],
) -> Callable[[_Pass[_Spec]], Callable[[Reconciler, Mapping[str, Any]], Status]]:
    """A pass over a Tau object's body: the object as plain dicts, its generation and its
    spec as ``model``; an invalid spec ends as ``phase: Failed`` saying what to fix."""

    def wrap(fn: _Pass[_Spec]) -> Callable[[Reconciler, Mapping[str, Any]], Status]:
        @functools.wraps(fn)
        def run(self: Reconciler, body: Mapping[str, Any]) -> Status:
            obj = _plain(body)
            gen = obj["metadata"].get("generation")
            try:
                spec = crds.from_object(obj)
            except pydantic.ValidationError as exc:
                return _failed(_invalid(obj, exc), gen)
            assert isinstance(spec, model)
            return fn(self, obj, gen, spec)

        return run

    return wrap


class Reconciler:
    """Reconciles Tau objects on one API server."""

    def __init__(self, api: kube_api.KubeApi) -> None:
        self.api = api
        count, _, only = os.environ.get(FAULT_ENV, "").partition("@")
        self._exit_after = int(count) if count.isdigit() else None
        self._fault_ws = only or None  # N@WS: only workspace WS's pass

    # -- teams -----------------------------------------------------------------------

    def approved_requests(self, team: str) -> list[pm.QuotaRequestSpec]:
        """The team's approved TauQuotaRequests (every namespace), oldest first."""
        items = [
            r
            for r in self.api.list("TauQuotaRequest")
            if (r.get("status") or {}).get("state") == pm.QuotaRequestState.APPROVED.value
            and (r.get("spec") or {}).get("team") == team
        ]
        items.sort(
            key=lambda r: (r["metadata"].get("creationTimestamp", ""), r["metadata"]["name"])
        )
        out: list[pm.QuotaRequestSpec] = []
        for r in items:
            try:
                out.append(pm.QuotaRequestSpec.model_validate(r["spec"]))
            except pydantic.ValidationError:
                continue  # the CRD schema refuses these; an old object is skipped
        return out

    @_validated(pm.TeamSpec)
    def team(self, obj: dict[str, Any], gen: int | None, team: pm.TeamSpec) -> Status:
        """ClusterQueue (+ Cohort) of a TauTeam, with its approved requests applied."""
        approved = self.approved_requests(team.name)
        effective = desired.with_approved(team, approved)
        owners = [
            t
            for t in self.api.list("TauTeam")
            if (t.get("spec") or {}).get("cohort") == team.cohort
        ]
        for item in desired.team_objects(effective, obj, owners or [obj]):
            self.api.apply(item)
        quotas = ", ".join(f"{q.gpu_model} {q.nominal}" for q in effective.quotas) or "no GPUs"
        extra = f" ({len(approved)} approved request(s))" if approved else ""
        cq = desired.cluster_queue_name(team.name)
        return {
            "phase": "Ready",
            "message": f"ClusterQueue {cq}: {quotas}{extra}",
            "clusterQueue": cq,
            "observedGeneration": gen,
        }

    # -- workspaces ------------------------------------------------------------------

    def _blocker(self, ws: pm.WorkspaceSpec) -> str | None:
        """What stops the workspace from being made, before anything is applied."""
        ns = self.api.get("Namespace", ws.effective_namespace)
        holder = ((ns or {}).get("metadata", {}).get("labels") or {}).get(naming.LABEL_WORKSPACE)
        if ns is not None and holder != ws.name:
            who = f"workspace {holder}" if holder else "someone else (not TauGrid)"
            return (
                f"namespace {ws.effective_namespace} already exists and belongs to {who}; "
                "set spec.namespace to a free name"
            )
        return None

    @_validated(pm.WorkspaceSpec)
    def workspace(self, obj: dict[str, Any], gen: int | None, ws: pm.WorkspaceSpec) -> Status:
        """Namespace, accounts, RBAC, PVC and LocalQueue of a TauWorkspace."""
        team_obj = self.api.get("TauTeam", ws.team)
        if team_obj is None:
            return _failed(
                f"team {ws.team} does not exist: nothing was created; create the TauTeam "
                f"{ws.team} (kubectl get tauteams lists them) or set spec.team to one",
                gen,
            )
        blocker = self._blocker(ws)
        if blocker is not None:
            return _failed(blocker, gen)
        team_status = self._team_ready(team_obj)
        if team_status.get("phase") != "Ready":
            return _failed(
                f"team {ws.team} is not ready: {team_status.get('message')}; nothing was "
                f"created; fix the TauTeam {ws.team}",
                gen,
            )
        team = crds.from_object(team_obj)
        assert isinstance(team, pm.TeamSpec)
        for n, item in enumerate(desired.workspace_objects(ws, team, obj), start=1):
            self.api.apply(item)
            faulty = self._fault_ws in (None, ws.name)
            if self._exit_after is not None and faulty and n >= self._exit_after:
                os._exit(FAULT_EXIT_CODE)  # fault injection: killed mid-reconcile
        return {
            "phase": "Ready",
            "message": f"namespace {ws.effective_namespace} ready; {len(ws.members)} member(s)",
            "namespace": ws.effective_namespace,
            "queue": ws.effective_queue,
            "clusterQueue": desired.cluster_queue_name(team.name),
            "observedGeneration": gen,
        }

    def _team_ready(self, team_obj: dict[str, Any]) -> Status:
        """The team's status, its pass run first when it is not Ready yet: kopf handles a
        team and its workspace concurrently, and a workspace is Ready only once the
        ClusterQueue its LocalQueue names exists."""
        status: Status = dict(team_obj.get("status") or {})
        if status.get("phase") != "Ready":
            status = self.team(team_obj)
            self.write_status(team_obj, status)
        return status

    # -- quota requests and clusters -------------------------------------------------

    def quota_request(self, body: Mapping[str, Any]) -> Status | None:
        """Re-reconciles the team of an approved request; its status message says so
        (None: nothing to do, the request is pending or rejected)."""
        obj = _plain(body)
        status = obj.get("status") or {}
        if status.get("state") != pm.QuotaRequestState.APPROVED.value:
            return None
        team_name = (obj.get("spec") or {}).get("team", "")
        team_obj = self.api.get("TauTeam", team_name)
        if team_obj is None:
            return {"message": f"approved, but team {team_name} does not exist; not applied"}
        self.write_status(team_obj, self.team(team_obj))
        cq = desired.cluster_queue_name(team_name)
        spec = obj["spec"]
        return {"message": f"applied: ClusterQueue {cq} {spec['gpu_model']} {spec['nominal']}"}

    @_validated(pm.ClusterSpec)
    def cluster(self, obj: dict[str, Any], gen: int | None, cluster: pm.ClusterSpec) -> Status:
        """A TauCluster is checked against its model and recorded (no objects)."""
        pools = sum(p.nodes for p in cluster.node_pools)
        return {
            "phase": "Ready",
            "message": f"{cluster.backend} cluster, {pools} node(s) declared",
            "observedGeneration": gen,
        }

    # -- status ----------------------------------------------------------------------

    def write_status(self, obj: Mapping[str, Any], status: Status) -> bool:
        """Merges ``status`` into the object's status when it differs; True if written."""
        current = obj.get("status") or {}
        changed = {k: v for k, v in status.items() if current.get(k) != v}
        if not changed:
            return False
        meta = obj["metadata"]
        self.api.patch(
            obj["kind"],
            meta["name"],
            {"status": changed},
            namespace=meta.get("namespace"),
            subresource="status",
        )
        return True

    def resync(self) -> int:
        """One pass over every TauTeam, then every TauWorkspace (drift repair, and
        workspaces whose team appeared since); returns the objects whose status changed."""
        written = 0
        for kind, fn in (("TauTeam", self.team), ("TauWorkspace", self.workspace)):
            for obj in self.api.list(kind):
                if obj["metadata"].get("deletionTimestamp"):
                    continue
                written += self.write_status(obj, fn(obj))
        return written


def api(kubeconfig: str | None, context: str | None) -> kube_api.KubeApi:
    """The operator's API client (field manager ``taugrid-operator``)."""
    return kube_api.KubeApi(kubeconfig, context, field_manager=FIELD_MANAGER)
