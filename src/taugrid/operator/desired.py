"""What a TauTeam and a TauWorkspace should become on the cluster (pure, no I/O).

Reuses ``render.kueue`` for every object (one renderer per object kind) and adds what
the operator owns on top: owner references to the Tau object (so Kubernetes' garbage
collector deletes what a deleted TauWorkspace or TauTeam made) and the
``taugrid.io/workspace`` label on every workspace object. Approved quota requests are
overlaid on the team's quotas: the ClusterQueue's nominal quota of a GPU model is the
latest approved request's ``nominal`` (the team's own when none).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from taugrid.platform import crds
from taugrid.platform import models as pm
from taugrid.render import kueue, naming

__all__ = [
    "cluster_queue_name",
    "owner_reference",
    "team_objects",
    "with_approved",
    "workspace_objects",
]


def owner_reference(obj: Mapping[str, Any], controller: bool = True) -> dict[str, Any]:
    """An ownerReference to the Tau object ``obj`` (as read from the API server)."""
    meta = obj["metadata"]
    return {
        "apiVersion": crds.API_VERSION,
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
    }


def _owned(objs: list[dict[str, Any]], owners: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for obj in objs:
        obj["metadata"]["ownerReferences"] = owners
    return objs


def cluster_queue_name(team: str) -> str:
    """The ClusterQueue a team's workspaces queue into."""
    return naming.object_name(team, 63)


def with_approved(team: pm.TeamSpec, approved: Iterable[pm.QuotaRequestSpec]) -> pm.TeamSpec:
    """``team`` with each approved request's ``nominal`` for its GPU model (in order: a
    later request wins); a model the team had no quota for is added."""
    quotas = {q.gpu_model: q for q in team.quotas}
    for request in approved:
        if request.team != team.name:
            continue
        old = quotas.get(request.gpu_model)
        quotas[request.gpu_model] = (
            old.model_copy(update={"nominal": request.nominal})
            if old is not None
            else pm.Quota(gpu_model=request.gpu_model, nominal=request.nominal)
        )
    return team.model_copy(update={"quotas": list(quotas.values())})


def team_objects(
    team: pm.TeamSpec, owner: Mapping[str, Any], cohort_owners: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The team's Cohort (owned by every TauTeam naming it) and ClusterQueue."""
    objs: list[dict[str, Any]] = []
    if team.cohort is not None:
        refs = [owner_reference(o, controller=False) for o in cohort_owners]
        objs += _owned([kueue.cohort(team.cohort)], refs)
    objs += _owned([kueue.cluster_queue(team)], [owner_reference(owner)])
    return objs


def workspace_objects(
    ws: pm.WorkspaceSpec, team: pm.TeamSpec, owner: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, agent RoleBinding, data PVC, LocalQueue (the
    platform's renderer), then the members' Role and RoleBinding, all owned by the
    TauWorkspace and labelled with its name, in apply order."""
    objs = kueue.workspace_objects(ws, team) + kueue.member_access(ws)
    for obj in objs:
        obj["metadata"]["labels"][naming.LABEL_WORKSPACE] = ws.name
    return _owned(objs, [owner_reference(owner)])
