"""The MLflow bridge: every run of a workspace that names a tracking server, mirrored there.

A workspace with ``tracking: {mlflow_uri, experiment, token_env}`` (platform.yaml) has
each of its runs mirrored to one MLflow run in that experiment (default
``taugrid/<workspace>``), created when the run first has a metric or ends: tagged
``taugrid.run_id``, ``taugrid.workspace`` and, when the code came from a git repository,
MLflow's own ``mlflow.source.git.commit``. Every metric line ``tau.log`` wrote (each
attempt's; the hub's ``metrics`` table is the source) goes there with its step and wall
time, and the run's end as FINISHED, FAILED or KILLED. The event ``tracking_linked``
gives the MLflow run's id and URL.

The hub sends, not the job: a job needs no MLflow package, no route to the server and no
token; a Kubernetes pod's metrics go the same way as a Ray job's. The leader replica
does it every ``EVERY_S`` (``hub.server.leader_loop``), at most ``RUNS_PER_ROUND`` runs a round,
``BATCH`` metrics a request (MLflow's limit). Progress is kept in the store
(``store.tracking``) and advanced only once the server accepted a batch: a server that is
down or refuses loses nothing (the error is kept on the mirror row and logged, the event
``tracking_error`` says it once), and the runs catch up when it answers again. A batch
sent twice (the hub died before saving its progress) is stored once: MLflow skips metrics
it already has. The MLflow run is found again by its tag before a new one is created.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Any

import httpx

from taugrid.hub.core import context
from taugrid.lifecycle import states as st
from taugrid.platform import models as pm

__all__ = ["BATCH", "EVERY_S", "RUNS_PER_ROUND", "MlflowClient", "TrackingError", "mirror_pending"]

EVERY_S = 2.0
BATCH = 1000
"""Metrics per ``runs/log-batch`` request: MLflow's limit."""
RUNS_PER_ROUND = 50
RUN_TAG = "taugrid.run_id"

log = logging.getLogger(__name__)

_STATUS = {
    st.RunState.SUCCEEDED.value: "FINISHED",
    st.RunState.FAILED.value: "FAILED",
    st.RunState.CANCELLED.value: "KILLED",
}


class TrackingError(Exception):
    """The tracking server did not answer (``unreachable``) or refused a request."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


class MlflowClient:
    """The few calls of MLflow's REST API (``/api/2.0/mlflow``) the bridge needs."""

    def __init__(self, uri: str, token: str | None = None, timeout_s: float = 10.0) -> None:
        self.uri = uri.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=f"{self.uri}/api/2.0/mlflow/", headers=headers, timeout=timeout_s
        )

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        try:
            r = self._http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise TrackingError(f"MLflow at {self.uri} did not answer: {exc}", True) from exc
        if r.status_code >= 400:
            raise TrackingError(
                f"MLflow at {self.uri} refused {path}: {r.status_code} {r.text[:300]}"
            )
        doc: dict[str, Any] = r.json() if r.content else {}
        return doc

    def experiment_id(self, name: str) -> str:
        """The experiment called ``name``, created when there is none."""
        try:
            found = self._call("GET", "experiments/get-by-name", params={"experiment_name": name})
            return str(found["experiment"]["experiment_id"])
        except TrackingError as exc:
            if "RESOURCE_DOES_NOT_EXIST" not in str(exc):
                raise
        return str(self._call("POST", "experiments/create", json={"name": name})["experiment_id"])

    def find_run(self, experiment_id: str, run_id: str) -> str | None:
        """The MLflow run tagged with TauGrid run ``run_id``, if one exists."""
        doc = self._call(
            "POST",
            "runs/search",
            json={
                "experiment_ids": [experiment_id],
                "filter": f"tags.`{RUN_TAG}` = '{run_id}'",
                "max_results": 1,
            },
        )
        runs = doc.get("runs") or []
        return str(runs[0]["info"]["run_id"]) if runs else None

    def create_run(
        self, experiment_id: str, name: str, start_s: float, tags: dict[str, str]
    ) -> str:
        doc = self._call(
            "POST",
            "runs/create",
            json={
                "experiment_id": experiment_id,
                "run_name": name,
                "start_time": int(start_s * 1000),
                "tags": [{"key": k, "value": v} for k, v in tags.items()],
            },
        )
        return str(doc["run"]["info"]["run_id"])

    def log_metrics(self, run_id: str, metrics: list[dict[str, Any]]) -> None:
        self._call("POST", "runs/log-batch", json={"run_id": run_id, "metrics": metrics})

    def end_run(self, run_id: str, status: str, end_s: float) -> None:
        body = {"run_id": run_id, "status": status, "end_time": int(end_s * 1000)}
        self._call("POST", "runs/update", json=body)


def mirror_pending(hub: context.Hub) -> None:
    """One round: send what is left to send of every tracked workspace's runs."""
    tracked = {ws.name: ws.tracking for ws in hub.platform.workspaces if ws.tracking}
    if not tracked:
        return
    clients: dict[str, MlflowClient] = {}
    down: set[str] = set()  # servers that did not answer this round: their runs wait
    try:
        for row in hub.tracking.pending(tracked, RUNS_PER_ROUND):
            cfg = tracked[row["workspace"]]
            if cfg is None or cfg.mlflow_uri in down:
                continue
            if cfg.mlflow_uri not in clients:
                clients[cfg.mlflow_uri] = _client(cfg)
            client = clients[cfg.mlflow_uri]
            try:
                _mirror_run(hub, client, cfg, row)
            except TrackingError as exc:
                _failed(hub, row, str(exc))
                if exc.unreachable:
                    down.add(cfg.mlflow_uri)
    finally:
        for client in clients.values():
            client.close()


def _client(cfg: pm.WorkspaceTracking) -> MlflowClient:
    return MlflowClient(cfg.mlflow_uri, os.environ.get(cfg.token_env) if cfg.token_env else None)


def _mirror_run(
    hub: context.Hub, client: MlflowClient, cfg: pm.WorkspaceTracking, row: dict[str, Any]
) -> None:
    run_id = row["id"]
    mlflow_run = row["mlflow_run_id"] or _open(hub, client, cfg, row)
    cursor = int(row["metric_id"])
    while batch := hub.tracking.metrics_after(run_id, cursor, BATCH):
        client.log_metrics(mlflow_run, [_metric(m) for m in batch])
        cursor = int(batch[-1]["id"])
        hub.tracking.save(run_id, metric_id=cursor, error="")
    if row["state"] in _STATUS:
        client.end_run(mlflow_run, _STATUS[row["state"]], float(row["updated_at"]))
        hub.tracking.save(run_id, done=True, error="")


def _open(
    hub: context.Hub, client: MlflowClient, cfg: pm.WorkspaceTracking, row: dict[str, Any]
) -> str:
    """The run's MLflow run: found by its tag (created before the hub saved it), else new."""
    experiment = client.experiment_id(cfg.experiment or f"taugrid/{row['workspace']}")
    found = client.find_run(experiment, row["id"])
    if found is None:
        tags = {
            RUN_TAG: row["id"],
            "taugrid.workspace": row["workspace"],
            "taugrid.name": row["name"],
        }
        commit = (row["source"] or {}).get("commit")
        if commit:
            tags["mlflow.source.git.commit"] = str(commit)
        found = client.create_run(experiment, row["id"], float(row["created_at"]), tags)
    hub.tracking.save(row["id"], mlflow_run_id=found, error="")
    url = f"{client.uri}/#/experiments/{experiment}/runs/{found}"
    hub.runs.add_event(row["id"], "tracking_linked", {"mlflow_run_id": found, "url": url})
    return found


def _metric(m: dict[str, Any]) -> dict[str, Any]:
    """A metric row as MLflow's API takes it (a NaN or infinity as protobuf's JSON names it)."""
    value = float(m["value"])
    shown: float | str = value if math.isfinite(value) else _NON_FINITE[str(value)]
    return {
        "key": m["name"],
        "value": shown,
        "timestamp": int(m["wall_time"] * 1000),
        "step": m["step"] or 0,
    }


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _failed(hub: context.Hub, row: dict[str, Any], why: str) -> None:
    """Keep the error on the mirror row; say it once (an event, a log line) per new error."""
    if why != row["error"]:
        log.warning("tracking of run %s: %s; retried every %g s", row["id"], why, EVERY_S)
        hub.runs.add_event(row["id"], "tracking_error", {"reason": why, "at": time.time()})
    hub.tracking.save(row["id"], error=why)
