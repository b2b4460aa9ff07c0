"""Serving deployments (``tau serve``): a trained run's model behind a Ray Serve endpoint.

A deployment is a name in a workspace pointing at a *serving run*: a run of the
serving tau.yaml (``workload_kind: rayservice``) whose driver
(``backends.programs.serve_driver``) deploys the app on the placed cluster's Ray Serve. So a
deployment is admitted against the workspace's quota (one worker per replica, the
replica's GPUs each: ``compute.gpus``), placed, logged and released like any run.

- **deploy**: the model (the source run's checkpoint, artifact or ``artifacts/``, or a
  registered model version: ``hub.runs.registry``) is found first, so a wrong name fails
  before anything starts; its path reaches the app as ``TAU_MODEL_PATH`` (a model in an
  object-store record is fetched by the serving pods: Kubernetes regions only). The app is
  named after the deployment and served under ``/<name>`` unless
  ``serve.route_prefix`` says otherwise.
- **update / scale**: a new serving run deploys the same app name; Ray Serve rolls the
  replicas over, and the old run's driver ends (succeeded, quota released) once the new
  one runs the app. Until then the old run is ``previous_run_id`` and both hold quota.
- **delete**: cancels the serving run(s); the driver deletes the app on SIGTERM.
- **regions** (``deploy --regions a,b``): one serving run per region, each pinned to
  its region (``allowed_regions``) and charged to the quota like any run; they are
  kept in ``source["regions"]`` (region → run ID; ``run_id`` is the first one's).
  ``region_views`` gives each region's phase, endpoint and health, which the hub's
  endpoint (``hub.serving.serve_router``) routes by.

Phases (``phase``), from the serving run and Ray Serve's status of the app
(``serve/status.json`` in the run's record, written by the driver in a Ray region, or
by the hub from the agent's report of the RayService's status on Kubernetes)::

    Deploying ──▶ Ready ◀──▶ Degraded        (UNHEALTHY)
        │           │  ▲
        │           ▼  │
        │        Updating                    (a new serving run is taking over)
        ▼
      Failed        (DEPLOY_FAILED, or the serving run failed/ended)
    Deleted         (tau serve delete)
"""

from __future__ import annotations

import base64
import json
from typing import Any

from taugrid import payloads as wire
from taugrid.errors import UserError
from taugrid.hub.core import context
from taugrid.hub.runs import registry, runs
from taugrid.lifecycle import states as st
from taugrid.record import jobenv, layout
from taugrid.render import runspec
from taugrid.spec import models as sm
from taugrid.store import deployments as dstore

__all__ = ["delete", "deploy", "find", "list_views", "region_views", "scale", "update", "view"]


def _store(hub: context.Hub) -> dstore.DeploymentStore:
    return dstore.DeploymentStore(hub.engine)


def find(hub: context.Hub, name: str, workspaces: list[str] | None) -> dict[str, Any]:
    """The active or deleted deployment ``name`` among ``workspaces`` (None: any)."""
    for dep in _store(hub).list(workspaces):
        if dep["name"] == name:
            return dep
    raise runs.NotFound(f"no deployment named '{name}'", "list deployments with: tau serve list")


def _serving_spec(
    hub: context.Hub,
    spec: runspec.RunSpec,
    name: str,
    source: dict[str, Any],
    replicas: int | None,
) -> runspec.RunSpec:
    """The serving run's spec: named after the deployment, one worker per replica."""
    if spec.serve is None:
        raise UserError(
            f"{spec.provenance.get('workload_kind', 'tau.yaml')}: tau serve needs a tau.yaml "
            f"with run.workload_kind: rayservice and a serve: section (got {spec.workload_kind})",
            "pass the serving config with -c (e.g. examples/quickstart/serve.yaml)",
        )
    serve = spec.serve
    if replicas is not None:
        serve = serve.model_copy(update={"replicas": replicas, "autoscaling": None})
    if serve.route_prefix == "/":
        serve = serve.model_copy(update={"route_prefix": f"/{name}"})
    workers = serve.autoscaling.max_replicas if serve.autoscaling else serve.replicas
    spec = _where_fetched(hub, spec, source)
    retry_on = tuple(r for r in spec.retry_on if r is not sm.RetryOn.EXIT_NONZERO)
    out = spec.model_copy(
        update={
            "name": name,
            "serve": serve,
            "workers": workers,
            "retry_on": retry_on,
            "max_retries": spec.max_retries if retry_on else 0,
            "env": {**spec.env, **_model_env(source), jobenv.DEPLOYMENT: name},
        }
    )
    runs.check_capacity(hub, out)
    return out


def _where_fetched(
    hub: context.Hub, spec: runspec.RunSpec, source: dict[str, Any]
) -> runspec.RunSpec:
    """A model in a record kept in an object store is fetched by the serving pods
    themselves (their init container: ``agent.records.podsync --prepare``), so such a
    deployment runs in Kubernetes regions only; refused when it may use none."""
    if not source.get("stored"):
        return spec
    kube = [
        r.name for r in hub.platform.regions if any(c.backend == "kubernetes" for c in r.clusters)
    ]
    allowed = tuple(r for r in spec.allowed_regions or kube if r in kube)
    if not allowed:
        raise UserError(
            f"the model of run {source['run']} is in an object store "
            f"({source['model_path']}); it is served from Kubernetes regions only (their "
            "pods fetch it), and this deployment may use none",
            "deploy to a Kubernetes region (--regions, or placement.regions in the serving "
            "tau.yaml), or serve a run whose workspace keeps its records in a directory",
        )
    return spec.model_copy(update={"allowed_regions": allowed})


def _model_env(source: dict[str, Any]) -> dict[str, str]:
    """``TAU_MODEL_PATH``, and where the model is under a data root (``render.kuberay``
    turns that into the pod's ``/data/...`` path)."""
    env = {jobenv.MODEL_PATH: str(source["model_path"])}
    if source.get("record_path"):
        env[jobenv.MODEL_RECORD] = str(source["record_path"])
    return env


def _start(
    hub: context.Hub,
    req: wire.DeployRequest,
    workspaces: list[str] | None,
    actor: str,
    replicas: int | None = None,
    region: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Resolve, check and submit a serving run; returns (run row, source document)."""
    sm.check_name("deployment", req.name)
    source = registry.source_for(hub, req, workspaces)
    submit = runs.default_workspace(req.submit, workspaces)
    spec = runs.resolve_request(hub, submit)
    if workspaces is not None and spec.workspace not in workspaces:
        raise UserError(f"you are not a member of workspace {spec.workspace}", "")
    if region is not None:
        spec = spec.model_copy(update={"allowed_regions": (region,), "preferred_regions": ()})
    spec = _serving_spec(hub, spec, req.name, source, replicas)
    row = runs.submit(hub, submit, actor, spec=spec)
    return row, {**source, "config_hash": spec.config_hash}


def deploy(
    hub: context.Hub, req: wire.DeployRequest, workspaces: list[str] | None, actor: str
) -> dict[str, Any]:
    """Create deployment ``req.name`` (refused while one of that name is serving)."""
    for dep in _store(hub).list(workspaces):
        if dep["name"] == req.name and dep["state"] == dstore.ACTIVE and _live(hub, dep):
            raise UserError(
                f"deployment '{req.name}' already exists (serving run {dep['run_id']})",
                f"replace what it serves with: tau serve update {req.name} --from-run RUN",
            )
    if req.regions:
        return _deploy_regions(hub, req, workspaces, actor)
    row, source = _start(hub, req, workspaces, actor)
    _store(hub).put(row["workspace"], req.name, row["id"], source)
    return view(hub, find(hub, req.name, [row["workspace"]]))


def _deploy_regions(
    hub: context.Hub, req: wire.DeployRequest, workspaces: list[str] | None, actor: str
) -> dict[str, Any]:
    """One serving run per region of ``req.regions``, each pinned there."""
    known = {c["region"] for c in hub.clusters.all()}
    unknown = [r for r in req.regions if r not in known]
    if unknown or len(set(req.regions)) != len(req.regions):
        raise UserError(
            f"--regions {','.join(req.regions)}: "
            + (f"no region named {', '.join(unknown)}" if unknown else "a region is repeated"),
            f"name each region once, among: {', '.join(sorted(known)) or '(none registered)'}",
        )
    started: dict[str, str] = {}
    source: dict[str, Any] = {}
    try:
        for region in req.regions:
            row, source = _start(hub, req, workspaces, actor, region=region)
            started[region] = row["id"]
    except BaseException:
        for run_id in started.values():
            _cancel(hub, run_id, "another region of the deployment was refused")
        raise
    first = started[req.regions[0]]
    ws = hub.runs.get_run(first)["workspace"]  # type: ignore[index]
    _store(hub).put(ws, req.name, first, {**source, "regions": started})
    return view(hub, find(hub, req.name, [ws]))


def _refuse_multi(dep: dict[str, Any], what: str) -> None:
    if dep["source"].get("regions"):
        raise UserError(
            f"deployment '{dep['name']}' serves in several regions; {what} of a multi-region "
            "deployment is not built yet",
            f"delete it and deploy again: tau serve delete {dep['name']}",
        )


def update(
    hub: context.Hub, req: wire.DeployRequest, workspaces: list[str] | None, actor: str
) -> dict[str, Any]:
    """Serve another run/checkpoint under the same name: a rolling replacement."""
    dep = _active(hub, req.name, workspaces)
    _refuse_multi(dep, "update")
    row, source = _start(hub, req, workspaces, actor)
    _replace(hub, dep, row["id"], source)
    return view(hub, find(hub, req.name, [dep["workspace"]]))


def scale(
    hub: context.Hub, name: str, replicas: int, workspaces: list[str] | None, actor: str
) -> dict[str, Any]:
    """A fixed replica count: a new serving run of the same code, config and model."""
    dep = _active(hub, name, workspaces)
    _refuse_multi(dep, "scale")
    run = hub.runs.get_run(dep["run_id"])
    assert run is not None
    code = runs.record_of(hub, run).read_bytes(layout.CODE_ARCHIVE) or b""
    submit = wire.SubmitRequest(
        tau_yaml=run["config_yaml"],
        workspace=run["workspace"],
        code_zip_b64=base64.b64encode(code).decode() if code else None,
    )
    spec = runs.resolve_request(hub, submit)
    spec = _serving_spec(hub, spec, name, dep["source"], replicas)
    row = runs.submit(hub, submit, actor, spec=spec)
    _replace(hub, dep, row["id"], dep["source"])
    return view(hub, find(hub, name, [dep["workspace"]]))


def _replace(hub: context.Hub, dep: dict[str, Any], run_id: str, source: dict[str, Any]) -> None:
    old = dep["previous_run_id"]
    if old is not None:  # an update still in flight: the newest wins
        _cancel(hub, dep["run_id"], "replaced by a newer update")
    _store(hub).update(
        dep["workspace"],
        dep["name"],
        run_id=run_id,
        previous_run_id=dep["run_id"] if old is None else old,
        source=source,
    )


def delete(hub: context.Hub, name: str, workspaces: list[str] | None, actor: str) -> dict[str, Any]:
    """Cancel the serving run(s); their quota is released as any cancelled run's."""
    dep = _active(hub, name, workspaces)
    for run_id in {dep["run_id"], dep["previous_run_id"], *_region_runs(dep).values()}:
        if run_id is not None:
            _cancel(hub, run_id, f"deployment deleted by {actor}")
    _store(hub).update(dep["workspace"], name, state=dstore.DELETED)
    return view(hub, find(hub, name, [dep["workspace"]]))


def _live(hub: context.Hub, dep: dict[str, Any]) -> bool:
    """Whether the deployment's serving run has not ended (a Failed one may be redeployed)."""
    run = hub.runs.get_run(dep["run_id"])
    return run is not None and st.RunState(run["state"]) not in st.TERMINAL_RUN_STATES


def _cancel(hub: context.Hub, run_id: str, why: str) -> None:
    run = hub.runs.get_run(run_id)
    if run is not None:
        runs.cancel(hub, run, why)


def _active(hub: context.Hub, name: str, workspaces: list[str] | None) -> dict[str, Any]:
    dep = find(hub, name, workspaces)
    if dep["state"] != dstore.ACTIVE:
        raise UserError(
            f"deployment '{name}' was deleted", f"deploy it again: tau serve deploy {name} ..."
        )
    return dep


def list_views(hub: context.Hub, workspaces: list[str] | None) -> list[dict[str, Any]]:
    return [view(hub, d) for d in _store(hub).list(workspaces)]


def _status(hub: context.Hub, run: dict[str, Any]) -> dict[str, Any]:
    raw = runs.record_of(hub, run).read_bytes(layout.SERVE_STATUS_FILE)
    try:
        doc = json.loads(raw) if raw else {}
    except ValueError:  # written atomically; a torn read is not expected, but harmless
        doc = {}
    return doc if isinstance(doc, dict) else {}


def view(hub: context.Hub, dep: dict[str, Any]) -> dict[str, Any]:
    """What ``tau serve status`` shows (see the module docstring for ``phase``)."""
    run = hub.runs.get_run(dep["run_id"])
    assert run is not None
    status = _status(hub, run)
    previous = _previous(hub, dep)
    phase, reason = _phase(dep, run, status, previous)
    spec = run["spec"]
    serve = spec.get("serve") or {}
    running = _running(status)
    out = {
        "name": dep["name"],
        "workspace": dep["workspace"],
        "phase": phase,
        "reason": reason,
        "endpoint": status.get("endpoint") if phase != "Deleted" else None,
        "run_id": dep["run_id"],
        "previous_run_id": previous["id"] if previous else None,
        "run_state": run["state"],
        "cluster_id": run["cluster_id"],
        "source": dep["source"],
        "replicas": {
            "ready": running,
            "desired": spec["workers"],
            "autoscaling": serve.get("autoscaling"),
        },
        "gpus_per_replica": spec["gpus_per_worker"],
        "gpus": run["gpus"],
        "serve_status": status.get("status"),
        "traffic": status.get("traffic"),
        "created_at": dep["created_at"],
        "updated_at": dep["updated_at"],
        "regions": region_views(hub, dep),
    }
    return _aggregate(out) if _region_runs(dep) else out


def _running(status: dict[str, Any]) -> int:
    """Replicas serving: Serve's RUNNING replicas, or what the cluster counted (Kubernetes
    reports a RayService's running workers, not Serve's replica states)."""
    if "ready_replicas" in status:
        return int(status["ready_replicas"])
    deps = status.get("deployments", {}).values()
    return sum(int(d.get("replicas", {}).get("RUNNING", 0)) for d in deps)


def _region_runs(dep: dict[str, Any]) -> dict[str, str]:
    regions: dict[str, str] = dep["source"].get("regions") or {}
    return regions


def _aggregate(out: dict[str, Any]) -> dict[str, Any]:
    """A multi-region deployment: Ready when every region is, Degraded while some are;
    its ``endpoint`` is the hub's (set by the API), the regions' are in ``regions``."""
    regions = out["regions"]
    ready = [r for r in regions if r["healthy"]]
    others = "; ".join(f"{r['region']}: {r['phase']} {r['reason']}".strip() for r in regions)
    if out["phase"] != "Deleted":
        if len(ready) == len(regions):
            out["phase"], out["reason"] = "Ready", ""
        elif ready:
            out["phase"], out["reason"] = "Degraded", others
        else:
            out["reason"] = others
    out["endpoint"] = None
    out["replicas"]["ready"] = sum(r["ready"] for r in regions)
    out["replicas"]["desired"] *= len(regions)
    out["gpus"] = sum(r["gpus"] for r in regions)
    return out


def region_views(hub: context.Hub, dep: dict[str, Any]) -> list[dict[str, Any]]:
    """Each region's serving run: phase, endpoint and whether the hub may route to it
    (the run is Ready or Degraded there and the region's agent holds its lease)."""
    out: list[dict[str, Any]] = []
    runs_ = _region_runs(dep) or {"": dep["run_id"]}
    if not _region_runs(dep) and dep["previous_run_id"]:  # an update: the old run serves
        runs_ = {"": dep["run_id"], " ": dep["previous_run_id"]}
    for region, run_id in runs_.items():
        run = hub.runs.get_run(run_id)
        if run is None:
            continue
        status = _status(hub, run)
        phase, reason = _phase(dep, run, status, None)
        cluster = hub.clusters.get(run["cluster_id"]) if run["cluster_id"] else None
        contact = cluster["state"] if cluster else "unplaced"
        lost = contact == "unknown"
        healthy = phase in ("Ready", "Degraded") and cluster is not None and not lost
        endpoint = status.get("endpoint") if phase != "Deleted" else None
        out.append(
            {
                "region": region.strip() or (cluster["region"] if cluster else None),
                "run_id": run_id,
                "run_state": run["state"],
                "phase": phase,
                "reason": f"region is {contact}" if lost else reason,
                "endpoint": endpoint,
                "healthy": healthy and bool(endpoint),
                "ready": _running(status),
                "gpus": run["gpus"],
            }
        )
    return out


def _previous(hub: context.Hub, dep: dict[str, Any]) -> dict[str, Any] | None:
    """The run being replaced while it is live; forgets it once it has ended."""
    if dep["previous_run_id"] is None:
        return None
    prev = hub.runs.get_run(dep["previous_run_id"])
    if prev is None or st.RunState(prev["state"]) in st.TERMINAL_RUN_STATES:
        _store(hub).update(dep["workspace"], dep["name"], previous_run_id=None)
        return None
    return prev


def _phase(
    dep: dict[str, Any],
    run: dict[str, Any],
    status: dict[str, Any],
    previous: dict[str, Any] | None,
) -> tuple[str, str]:
    state = st.RunState(run["state"])
    serve = status.get("status")
    message = str(status.get("message") or "")
    if dep["state"] == dstore.DELETED:
        live = state not in st.TERMINAL_RUN_STATES
        return "Deleted", "stopping the serving run" if live else "serving run stopped"
    if serve == "DEPLOY_FAILED" or state is st.RunState.FAILED:
        return "Failed", message or run["reason"]
    if state in st.TERMINAL_RUN_STATES:
        return "Failed", f"serving run {run['id']} ended ({state.value}): {run['reason']}"
    if state is not st.RunState.RUNNING or serve in (None, "NOT_STARTED"):
        return ("Updating" if previous else "Deploying"), message or run["reason"]
    if serve == "UNHEALTHY":
        return "Degraded", message
    if serve == "RUNNING":
        return ("Updating" if previous else "Ready"), message
    return ("Updating" if previous else "Deploying"), message or str(serve)
