"""Interactive sessions (``tau dev``): a JupyterLab server on a region's GPUs, as a run.

A session is a name in a workspace pointing at its *session run*: a run whose entrypoint
is ``python -m taugrid.sdk.job.dev_session`` (one worker, holding the session's GPUs) and
whose env carries ``TAU_DEV_CONFIG`` (``jobenv.DEV_CONFIG``: the name, the hub path Jupyter
serves under, the idle limit, the ``jupyter`` command). So a session is admitted against
the workspace's quota, placed, logged and released like any run, and ``tau run list``
shows it with kind ``dev`` (``kind``). The run is named after the session; the session
is the newest run of that name in the workspace that has ``TAU_DEV_CONFIG``.

- **up**: a new session run; or, when the session's run ended (autostopped, stopped,
  failed), the same run resumed (``runs.resume``: a new attempt from its latest
  checkpoint, which holds the working directory); or, while it is live, nothing.
- **stop**: cancels the run; the program saves the working directory on SIGTERM.
- **view**: what ``tau dev list`` shows; ``state`` is the program's (``dev/status.json``,
  ``record.layout.DEV_STATUS_FILE``) while the run lives, else how it ended. The
  Jupyter token in that file is read only by ``target`` (for ``hub.dev.proxy``) and is
  never in a view.

Session states::

    queued ──▶ starting ──▶ running ──▶ autostopped   (idle: saved, GPUs released)
                                  └───▶ stopped       (tau dev stop: saved)
                         any ──▶ failed               (Jupyter or the run failed)
"""

from __future__ import annotations

import json
from typing import Any

from taugrid import home
from taugrid import payloads as wire
from taugrid.errors import UserError
from taugrid.hub.core import context
from taugrid.hub.runs import runs
from taugrid.lifecycle import states as st
from taugrid.record import jobenv, layout
from taugrid.render import runspec
from taugrid.spec import models as sm

__all__ = [
    "DEFAULT_IDLE_MINUTES",
    "ENTRYPOINT",
    "find",
    "kind",
    "list_views",
    "path_of",
    "stop",
    "target",
    "up",
    "view",
]

ENTRYPOINT = "python -m taugrid.sdk.job.dev_session"
DEFAULT_IDLE_MINUTES = 30.0
_DEFAULT_YAML = """schema_version: 1
name: {name}
run:
  entrypoint: {entry}
compute:
  gpus: {gpus:g}
  workers: 1
  cpus: 1
  memory: 2Gi
"""


def kind(spec: dict[str, Any]) -> str:
    """A run's kind as ``tau run list`` shows it: ``dev`` for a session, else the
    workload kind (``rayjob``, ``rayservice``, ``pipeline``...)."""
    if jobenv.DEV_CONFIG in (spec.get("env") or {}):
        return "dev"
    return str(spec.get("workload_kind", "rayjob"))


def path_of(workspace: str, name: str) -> str:
    """The hub path a session's Jupyter serves under (its ``base_url``)."""
    return f"/v1/dev/{workspace}/{name}/"


def _config(run: dict[str, Any]) -> dict[str, Any]:
    raw = (run["spec"].get("env") or {}).get(jobenv.DEV_CONFIG)
    return json.loads(raw) if raw else {}


def find(hub: context.Hub, name: str, workspaces: list[str] | None) -> dict[str, Any] | None:
    """The session run ``name`` (newest run of that name with a session config), or None."""
    for run_id in hub.runs.ids_named(name, workspaces, limit=20):
        run = hub.runs.get_run(run_id)
        if run is not None and _config(run):
            return run
    return None


def _get(hub: context.Hub, name: str, workspaces: list[str] | None) -> dict[str, Any]:
    run = find(hub, name, workspaces)
    if run is None:
        raise runs.NotFound(
            f"no interactive session named '{name}'",
            f"list sessions with: tau dev list; start one with: tau dev up {name}",
        )
    return run


def _jupyter() -> str:
    found = home.jupyter_binary()
    if found is None:
        raise UserError(
            "JupyterLab, which interactive sessions run, is not installed on this platform",
            "install it with jupyter/build.sh (from PyPI into ~/.cache/taugrid/jupyter/), "
            f"or set {home.JUPYTER_ENV} to a `jupyter` command that has JupyterLab",
        )
    return str(found)


def up(
    hub: context.Hub, req: wire.DevUpRequest, workspaces: list[str] | None, actor: str
) -> dict[str, Any]:
    """Start session ``req.name``, or bring it back; returns its view."""
    sm.check_name("session", req.name)
    if req.workspace and workspaces is not None and req.workspace not in workspaces:
        raise UserError(f"you are not a member of workspace {req.workspace}", "")
    jupyter = _jupyter()
    scope = [req.workspace] if req.workspace else workspaces
    run = find(hub, req.name, scope)
    if run is not None and st.RunState(run["state"]) not in st.TERMINAL_RUN_STATES:
        return view(hub, run)
    if run is not None:
        return view(hub, runs.resume(hub, run, actor))
    submit = req.submit or wire.SubmitRequest(
        tau_yaml=_DEFAULT_YAML.format(name=req.name, entry=ENTRYPOINT, gpus=req.gpus or 0),
        filename="(tau dev up)",
        workspace=req.workspace,
    )
    if req.workspace and not submit.workspace:
        submit = submit.model_copy(update={"workspace": req.workspace})
    submit = runs.default_workspace(submit, workspaces)
    spec = runs.resolve_request(hub, submit)
    if workspaces is not None and spec.workspace not in workspaces:
        raise UserError(f"you are not a member of workspace {spec.workspace}", "")
    spec = _session_spec(hub, spec, req, jupyter)
    return view(hub, runs.submit(hub, submit, actor, spec=spec))


def _session_spec(
    hub: context.Hub, spec: runspec.RunSpec, req: wire.DevUpRequest, jupyter: str
) -> runspec.RunSpec:
    """The session run's spec: named after the session, one worker running the session
    program, never retried (a failed session is brought back by ``tau dev up``)."""
    idle = req.idle_minutes or DEFAULT_IDLE_MINUTES
    cfg = {
        "name": req.name,
        "workspace": spec.workspace,
        "base_url": path_of(spec.workspace, req.name),
        "idle_s": idle * 60.0,
        "jupyter": jupyter,
        "copy_code": req.submit is not None,
    }
    update: dict[str, Any] = {
        "name": req.name,
        "entrypoint": ENTRYPOINT,
        "args": (),
        "workers": 1,
        "launcher": sm.Launcher.PYTHON,
        "workload_kind": sm.WorkloadKind.RAYJOB,
        "serve": None,
        "retry_on": (),
        "max_retries": 0,
        "env": {**spec.env, jobenv.DEV_CONFIG: json.dumps(cfg, sort_keys=True)},
    }
    if req.gpus is not None:
        update["gpus_per_worker"] = req.gpus
    out = spec.model_copy(update=update)
    runs.check_capacity(hub, out)
    return out


def stop(hub: context.Hub, name: str, workspaces: list[str] | None, actor: str) -> dict[str, Any]:
    """Stop the session: its run is cancelled; the program saves on SIGTERM."""
    run = _get(hub, name, workspaces)
    return view(hub, runs.cancel(hub, run, f"session stopped by {actor}"))


def _status(hub: context.Hub, run: dict[str, Any]) -> dict[str, Any]:
    raw = runs.record_of(hub, run).read_bytes(layout.DEV_STATUS_FILE)
    try:
        doc = json.loads(raw) if raw else {}
    except ValueError:
        doc = {}
    return doc if isinstance(doc, dict) else {}


def _state(run: dict[str, Any], status: dict[str, Any]) -> tuple[str, str]:
    state = st.RunState(run["state"])
    told = str(status.get("state") or "")
    # a status file of an earlier attempt says nothing of this one
    if status and int(status.get("attempt") or 0) != int(run.get("attempts_used") or 0):
        told = ""
    if state not in st.TERMINAL_RUN_STATES:
        if state is st.RunState.RUNNING and told:
            return told, str(status.get("reason") or "")
        if state is st.RunState.CANCELLING:
            return "stopping", run["reason"]
        return ("starting" if state is st.RunState.RUNNING else "queued"), run["reason"]
    if told in ("autostopped", "stopped", "failed"):
        return told, str(status.get("reason") or run["reason"])
    if state is st.RunState.CANCELLED:
        return "stopped", run["reason"]
    return ("failed" if state is st.RunState.FAILED else "stopped"), run["reason"]


def view(hub: context.Hub, run: dict[str, Any]) -> dict[str, Any]:
    """What ``tau dev list`` shows of a session (never its Jupyter token)."""
    status = _status(hub, run)
    state, reason = _state(run, status)
    cfg = _config(run)
    return {
        "name": run["name"],
        "workspace": run["workspace"],
        "state": state,
        "reason": reason,
        "run_id": run["id"],
        "run_state": run["state"],
        "attempt": run.get("attempts_used"),
        "gpus": run["gpus"],
        "cluster_id": run["cluster_id"],
        "idle_minutes": float(cfg.get("idle_s", 0.0)) / 60.0,
        "path": path_of(run["workspace"], run["name"]),
        "last_activity": status.get("last_activity"),
        "checkpoint": status.get("checkpoint"),
        "created_at": run["created_at"],
        "updated_at": run["updated_at"],
    }


def list_views(hub: context.Hub, workspaces: list[str] | None) -> list[dict[str, Any]]:
    """Every session of ``workspaces`` (the newest run of each name), newest first."""
    ids = [r["id"] for r in hub.runs.list_runs(workspaces, None, 1000)]
    rows = hub.runs.get_runs(ids)
    seen: set[tuple[str, str]] = set()
    out: list[dict[str, Any]] = []
    for run_id in ids:
        run = rows.get(run_id)
        if run is None or not _config(run) or (run["workspace"], run["name"]) in seen:
            continue
        seen.add((run["workspace"], run["name"]))
        out.append(view(hub, run))
    return out


def target(hub: context.Hub, workspace: str, name: str) -> tuple[str, str] | str:
    """``(endpoint, token)`` of the session's Jupyter while it serves; else why not."""
    run = find(hub, name, [workspace])
    if run is None:
        return f"no interactive session {workspace}/{name}"
    status = _status(hub, run)
    state, reason = _state(run, status)
    if state != "running" or not status.get("endpoint") or not status.get("token"):
        return f"session {workspace}/{name} is {state}" + (f": {reason}" if reason else "")
    return str(status["endpoint"]), str(status["token"])
