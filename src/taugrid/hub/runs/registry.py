"""The model registry (``tau model``): named, numbered model versions with aliases.

A version is a run's model — a checkpoint (``latest`` or a step), one artifact, or
its whole ``artifacts/`` folder — checked to exist when registered, with its lineage:
the run, its config hash, its input datasets (with versions) and, with ``--best-by``,
the metric that chose it. ``--best-by [min:|max:]METRIC`` registers, among the
finished runs sharing the given run's name, the one whose last logged ``METRIC`` is
best (max unless ``min:``). Aliases (``production``, ``staging``) move between
versions; ``tau serve deploy --model NAME@ALIAS`` (or ``NAME@v3``, or ``NAME``: the
newest) serves what a reference names (``source_for``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from taugrid import payloads as wire
from taugrid.errors import UserError
from taugrid.hub.core import context
from taugrid.hub.runs import runs
from taugrid.lifecycle import states as st
from taugrid.record import checkpoints, layout
from taugrid.record.run import RunRecord
from taugrid.spec import models as sm
from taugrid.spec import outputs
from taugrid.store import models as mstore

__all__ = [
    "model_source",
    "register",
    "resolve",
    "set_alias",
    "source_for",
    "stored_source",
    "versions",
]


def _store(hub: context.Hub) -> mstore.ModelStore:
    return mstore.ModelStore(hub.engine)


def model_source(
    hub: context.Hub, run: dict[str, Any], checkpoint: str | None, artifact: str | None
) -> dict[str, Any]:
    """Where a run's model is, checked to exist (the ``source`` document)."""
    if checkpoint is not None and artifact is not None:
        raise UserError("--checkpoint and --artifact are both given", "give one of them")
    record = runs.record_of(hub, run)
    local = record.dir
    if local is None:
        return stored_source(record, run, checkpoint, artifact)
    if checkpoint is not None:
        root = checkpoints.checkpoint_root(local, run["spec"].get("checkpoint_path"))
        have = sorted(p.name for p in root.glob("step-*")) if root.is_dir() else []
        done = checkpoints.latest_name(root)
        name = _chosen(
            run["id"], checkpoint, done, have, lambda n: (root / n / layout.MARKER_FILE).is_file()
        )
        return {**_where(run, local, root / name), "checkpoint": name}
    if artifact is not None:
        artifact = outputs.artifact_path(run["spec"].get("outputs") or [], artifact)
        path = local / layout.ARTIFACTS_DIR / artifact
        if ".." in Path(artifact).parts or not path.is_file():
            raise _no_artifact(run, artifact)
        return {**_where(run, local, path), "artifact": artifact}
    if not (local / layout.ARTIFACTS_DIR).is_dir():
        raise _no_artifacts(run)
    return {**_where(run, local, local / layout.ARTIFACTS_DIR), "artifact": None}


def stored_source(
    record: RunRecord, run: dict[str, Any], checkpoint: str | None, artifact: str | None
) -> dict[str, Any]:
    """Where a run's model is in a record kept in an object store, checked there:
    ``record_path`` is its key (a folder's prefix, or one file), ``model_path`` its URL
    for people, and ``stored`` says that whoever serves it fetches it first (a serving
    pod's init container: ``agent.records.podsync --prepare``)."""
    if checkpoint is not None:
        if run["spec"].get("checkpoint_path"):
            raise UserError(
                f"run {run['id']} kept its checkpoints at its own checkpoint_path, outside "
                "its record; a record in an object store serves what is inside it",
                "serve one of its artifacts (--artifact) or its artifacts/ folder",
            )
        listed = [f["path"].partition("/")[2] for f in record.files(layout.CHECKPOINTS_DIR)]
        have = sorted({p.partition("/")[0] for p in listed if p.startswith("step-")})
        done = checkpoints.latest_listed(listed)
        complete = {p.partition("/")[0] for p in listed if p.endswith(f"/{layout.MARKER_FILE}")}
        name = _chosen(run["id"], checkpoint, done, have, complete.__contains__)
        return {**_stored(run, record, f"{layout.CHECKPOINTS_DIR}/{name}"), "checkpoint": name}
    if artifact is not None:
        artifact = outputs.artifact_path(run["spec"].get("outputs") or [], artifact)
        rel = f"{layout.ARTIFACTS_DIR}/{artifact}"
        if ".." in Path(artifact).parts or not record.store.exists(record.key(rel)):
            raise _no_artifact(run, artifact)
        return {**_stored(run, record, rel), "artifact": artifact}
    if not record.files(layout.ARTIFACTS_DIR):
        raise _no_artifacts(run)
    return {**_stored(run, record, layout.ARTIFACTS_DIR), "artifact": None}


def _no_artifact(run: dict[str, Any], artifact: str) -> UserError:
    return UserError(
        f"run {run['id']} has no artifact '{artifact}'",
        f"list its artifacts with: tau run get {run['id']} --list",
    )


def _no_artifacts(run: dict[str, Any]) -> UserError:
    return UserError(
        f"run {run['id']} saved no artifacts (it is {run['state']})",
        "serve a finished run, or name a checkpoint with --checkpoint latest|STEP",
    )


def _stored(run: dict[str, Any], record: RunRecord, rel: str) -> dict[str, Any]:
    url = f"{record.location}/{rel}"
    return {"run": run["id"], "model_path": url, "record_path": record.key(rel), "stored": True}


def _where(run: dict[str, Any], record: Path, path: Path) -> dict[str, Any]:
    """The model's path as the hub sees it (``model_path``: a Ray region on this host's
    filesystem) and, inside the run's record, as the storage contract names it
    (``record_path``: ``<ws>/runs/<id>/...`` under a data root, what a pod mounts at
    ``/data``; None for a checkpoint_path outside the record)."""
    try:
        prefix = layout.record_prefix(run["workspace"], run["id"])
        inside: str | None = f"{prefix}/{path.relative_to(record)}"
    except ValueError:
        inside = None
    return {"run": run["id"], "model_path": str(path), "record_path": inside}


def _chosen(
    run_id: str, wanted: str, latest: str | None, have: list[str], complete: Callable[[str], bool]
) -> str:
    """The checkpoint ``wanted`` names (``latest`` or a step) among a run's checkpoint
    folders (``have``; ``latest``: the newest complete one, ``complete``: whether a
    folder's marker is there), on a disk or in a store's listing alike."""
    if wanted == "latest":
        if latest is None:
            raise UserError(f"run {run_id} has no complete checkpoint", "train it first")
        return latest
    if not wanted.isdigit():
        raise UserError(f"--checkpoint '{wanted}' is not 'latest' or a step number", "")
    name = layout.step_name(int(wanted))
    if name not in have or not complete(name):
        raise UserError(
            f"run {run_id} has no complete checkpoint at step {wanted}",
            f"its checkpoints: {', '.join(have) or 'none'}",
        )
    return name


def source_for(
    hub: context.Hub, req: wire.DeployRequest, workspaces: list[str] | None
) -> dict[str, Any]:
    """What a deploy serves: ``req.model``'s version, else the run's model."""
    if req.model:
        version = resolve(hub, req.model, workspaces)
        src = version["source"]
        run = runs.find(hub, src["run"], workspaces)
        out = model_source(hub, run, src.get("checkpoint"), src.get("artifact"))
        return {**out, "model": f"{version['name']}@v{version['version']}"}
    if not req.source_run:
        raise UserError("nothing to serve", "give --from-run RUN or --model NAME@ALIAS")
    run = runs.find(hub, req.source_run, workspaces)
    return model_source(hub, run, req.checkpoint, req.artifact)


def _best(
    hub: context.Hub, ref: str, spec: str, workspaces: list[str] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The finished run named like ``ref`` with the best last value of the metric."""
    goal, _, metric = spec.rpartition(":")
    goal = goal or "max"
    if goal not in ("min", "max") or not metric:
        raise UserError(f"--best-by '{spec}' is not [min:|max:]METRIC", "e.g. --best-by min:loss")
    name = runs.find(hub, ref, workspaces)["name"]
    scored = []
    for run_id in hub.runs.ids_named(name, workspaces, limit=1000):
        run = hub.runs.get_run(run_id)
        values = hub.runs.metrics(run_id, metric)
        if run and run["state"] == st.RunState.SUCCEEDED.value and values:
            scored.append((float(values[-1]["value"]), run))
    if not scored:
        raise UserError(
            f"no finished run named '{name}' logged metric '{metric}'",
            f"see what it logs: tau run metrics {ref}",
        )
    value, run = (max if goal == "max" else min)(scored, key=lambda vr: vr[0])
    return run, {"metric": metric, "goal": goal, "value": value, "candidates": len(scored)}


def register(
    hub: context.Hub, req: wire.ModelRegisterRequest, workspaces: list[str] | None, actor: str
) -> dict[str, Any]:
    """A new version of ``req.name`` from a run (or the best of its name's runs)."""
    sm.check_name("model", req.name)
    chosen: dict[str, Any] | None = None
    if req.best_by:
        run, chosen = _best(hub, req.from_run, req.best_by, workspaces)
    else:
        run = runs.find(hub, req.from_run, workspaces)
    source = model_source(hub, run, req.checkpoint, req.artifact)
    spec = run["spec"]
    lineage = {
        "run": run["id"],
        "run_state": run["state"],
        "config_hash": spec.get("config_hash"),
        "profile_hash": spec.get("profile_hash"),
        "datasets": [i["dataset"] for i in spec.get("inputs", [])],
        "chosen_by": chosen,
    }
    row = _store(hub).add(run["workspace"], req.name, source, lineage, actor)
    for alias in req.aliases:
        _store(hub).set_alias(run["workspace"], req.name, row["version"], alias)
    return resolve(hub, f"{req.name}@v{row['version']}", [run["workspace"]])


def versions(
    hub: context.Hub, workspaces: list[str] | None, name: str | None = None
) -> list[dict[str, Any]]:
    rows = _store(hub).versions(workspaces, name)
    if name is not None and not rows:
        raise runs.NotFound(f"no model named '{name}'", "list models with: tau model list")
    return rows


def resolve(hub: context.Hub, ref: str, workspaces: list[str] | None) -> dict[str, Any]:
    """The version ``NAME@ALIAS``, ``NAME@vN`` or ``NAME`` (the newest) names."""
    name, _, tag = ref.partition("@")
    rows = versions(hub, workspaces, name)
    if not tag:
        return rows[-1]
    for row in rows:
        if tag in row["aliases"] or tag == f"v{row['version']}":
            return row
    have = ", ".join(f"v{r['version']}" + "".join(f" @{a}" for a in r["aliases"]) for r in rows)
    raise runs.NotFound(f"model '{name}' has no version or alias '{tag}'", f"it has: {have}")


def set_alias(
    hub: context.Hub, name: str, version: int, alias: str, workspaces: list[str] | None
) -> dict[str, Any]:
    """Move ``alias`` to ``version`` of ``name``."""
    row = resolve(hub, f"{name}@v{version}", workspaces)
    if not sm.is_valid_name(alias) or (alias.startswith("v") and alias[1:].isdigit()):
        raise UserError(f"alias '{alias}' is not valid", "e.g. production or staging")
    _store(hub).set_alias(row["workspace"], name, version, alias)
    return resolve(hub, f"{name}@v{version}", [row["workspace"]])
