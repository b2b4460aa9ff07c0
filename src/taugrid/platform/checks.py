"""Cross-reference checks of a whole platform.yaml (run by ``Platform``'s validator).

Owns the invariants that span sections of platform.yaml:

- names are unique per kind (gpu_types, regions, clusters, priority_classes, profiles,
  teams, workspaces) and no two workspaces share a namespace;
- every node-pool GPU model, quota flavor, profile GPU model and workspace default GPU
  model is a declared ``gpu_types`` entry;
- every workspace's team, every profile's teams, regions and priority, and every
  workspace default profile/priority exist; ``default_workspace`` is a workspace.

Each failure is a ``spec.errors.FieldError`` whose ``loc`` is the offending key
(``teams[1].quotas[0].gpu_model``), so the loader reports it at ``file:line:col``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from taugrid.spec import errors

if TYPE_CHECKING:
    from taugrid.platform import models

__all__ = ["check_platform"]

Loc = tuple[str | int, ...]


def _unique(items: Iterable[tuple[Loc, str]], kind: str) -> None:
    seen: dict[str, Loc] = {}
    for loc, name in items:
        if name in seen:
            raise errors.FieldError(
                f"duplicate name '{name}' in {kind}",
                loc=loc,
                hint=f"give each of the {kind} its own name",
            )
        seen[name] = loc


def _known(value: str | None, known: set[str], loc: Loc, what: str, section: str) -> None:
    if value is not None and value not in known:
        raise errors.FieldError(
            f"unknown {what} '{value}'", loc=loc, hint=f"declare it in {section}: {sorted(known)}"
        )


def _names(platform: models.Platform) -> None:
    _unique(
        ((("gpu_types", i, "name"), g.name) for i, g in enumerate(platform.gpu_types)), "gpu_types"
    )
    _unique(((("regions", i, "name"), r.name) for i, r in enumerate(platform.regions)), "regions")
    clusters = (
        (("regions", i, "clusters", j, "name"), c.name)
        for i, r in enumerate(platform.regions)
        for j, c in enumerate(r.clusters)
    )
    _unique(clusters, "clusters")
    for key in ("priority_classes", "profiles", "teams", "workspaces"):
        items: Sequence[
            models.PriorityClass | models.ProfileSpec | models.TeamSpec | models.WorkspaceSpec
        ]
        items = getattr(platform, key)
        _unique((((key, i, "name"), x.name) for i, x in enumerate(items)), key)
    namespaces = (
        (("workspaces", i, "namespace"), w.effective_namespace)
        for i, w in enumerate(platform.workspaces)
    )
    _unique(namespaces, "workspace namespaces")


def _gpu_refs(platform: models.Platform, gpus: set[str]) -> None:
    for i, region in enumerate(platform.regions):
        for j, cluster in enumerate(region.clusters):
            for k, pool in enumerate(cluster.node_pools):
                loc = ("regions", i, "clusters", j, "node_pools", k, "gpu_model")
                _known(pool.gpu_model, gpus, loc, "gpu_model", "gpu_types")
    for i, team in enumerate(platform.teams):
        for j, quota in enumerate(team.quotas):
            _known(
                quota.gpu_model,
                gpus,
                ("teams", i, "quotas", j, "gpu_model"),
                "gpu_model",
                "gpu_types",
            )


def _profile_refs(
    platform: models.Platform, teams: set[str], prios: set[str], gpus: set[str]
) -> None:
    regions = {r.name for r in platform.regions}
    for i, prof in enumerate(platform.profiles):
        _known(prof.priority, prios, ("profiles", i, "priority"), "priority", "priority_classes")
        _known(prof.gpu_model, gpus, ("profiles", i, "gpu_model"), "gpu_model", "gpu_types")
        for j, team in enumerate(prof.teams):
            _known(team, teams, ("profiles", i, "teams", j), "team", "teams")
        for j, region in enumerate(prof.allowed_regions):
            _known(region, regions, ("profiles", i, "allowed_regions", j), "region", "regions")


def _workspace_refs(
    platform: models.Platform, teams: set[str], prios: set[str], gpus: set[str]
) -> None:
    profiles = {p.name for p in platform.profiles}
    for i, ws in enumerate(platform.workspaces):
        _known(ws.team, teams, ("workspaces", i, "team"), "team", "teams")
        d = ("workspaces", i, "defaults")
        _known(ws.defaults.profile, profiles, (*d, "profile"), "profile", "profiles")
        _known(ws.defaults.priority, prios, (*d, "priority"), "priority", "priority_classes")
        _known(ws.defaults.gpu_model, gpus, (*d, "gpu_model"), "gpu_model", "gpu_types")
    workspaces = {w.name for w in platform.workspaces}
    _known(
        platform.default_workspace, workspaces, ("default_workspace",), "workspace", "workspaces"
    )


def check_platform(platform: models.Platform) -> None:
    """Raise ``FieldError`` at the first broken invariant (see the module docstring)."""
    _names(platform)
    gpus = {g.name for g in platform.gpu_types}
    teams = {t.name for t in platform.teams}
    prios = {p.name for p in platform.priority_classes}
    _gpu_refs(platform, gpus)
    _profile_refs(platform, teams, prios, gpus)
    _workspace_refs(platform, teams, prios, gpus)
