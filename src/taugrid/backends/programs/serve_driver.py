"""The driver of a serving run (``workload_kind: rayservice``): runs one Ray Serve app.

Started by the agent as the run's Ray Jobs entrypoint (``python -m
taugrid.backends.programs.serve_driver``, see ``render.command.plan``), so a deployment is
admitted, placed, logged, stopped and released like any run, and the agent stays a
Jobs-API client. The driver reserves no GPU itself; the replicas do
(``ray_actor_options``), as many as the run was admitted for.

What it does, from ``TAU_SERVE_CONFIG`` (JSON written by ``render.command.serve_config``):

1. starts Serve on the cluster if it is not running: one HTTP proxy on the head node,
   bound to the head's address (never 0.0.0.0) and ``port``;
2. imports the application (``import_path``; an ``Application`` or a builder function
   taking no argument) — an import error ends the run as failed, with the error;
3. claims the application's name in Ray's internal KV (``taugrid-serve/<app>`` = run
   ID), then deploys it with the replica count or autoscaling and resources asked
   for. Deploying over a running app of the same name is Ray Serve's rolling update,
   which is how ``tau serve update`` and ``scale`` replace a serving run;
4. every second writes ``$TAU_OUTPUT_DIR/serve/status.json`` (Serve's status of the
   app, replica states, endpoint, and every ``TRAFFIC_EVERY`` polls requests/s and
   latency from the proxy's access log; the hub reads it for ``tau serve status``);
5. ends: failed (exit 1) when Serve reports ``DEPLOY_FAILED``; succeeded (exit 0) once
   another run has claimed the app and it is running again (it was replaced); on
   SIGTERM (``tau serve delete``: the run is cancelled) it deletes the app if it still
   owns it.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from taugrid.backends.programs import serve_traffic
from taugrid.record import jobenv, layout

__all__ = ["main"]

_KV_NAMESPACE = "taugrid"
POLL_S = 1.0
TRAFFIC_EVERY = 5
"""Polls between two reads of the proxy's access log (``backends.programs.serve_traffic``)."""
_NOT_A_STRAY = {"env_vars": {jobenv.FENCING_TOKEN: ""}}
"""Env of the actors Serve starts for this run (controller, proxy, replicas): they outlive
the run (an update's new run takes them over), so they must not carry the run's fencing
token, by which the agent finds an ended run's stray processes (``agent.attempts.strays``)."""


def _owner_key(app: str) -> bytes:
    return f"taugrid-serve/{app}".encode()


def _owner(app: str) -> str | None:
    from ray.experimental import internal_kv

    raw = internal_kv._internal_kv_get(_owner_key(app), namespace=_KV_NAMESPACE)
    return raw.decode() if raw else None


def _claim(app: str, run_id: str) -> None:
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(
        _owner_key(app), run_id.encode(), overwrite=True, namespace=_KV_NAMESPACE
    )


def _write_status(doc: dict[str, Any]) -> None:
    path = Path(os.environ.get(jobenv.OUTPUT_DIR, ".")) / layout.SERVE_STATUS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp")
    tmp.write_text(json.dumps({**doc, "updated_at": time.time()}))
    tmp.replace(path)


def _load(cfg: dict[str, Any]) -> Any:
    """The bound application with TauGrid's replica count and resources."""
    from ray import serve

    module_name, _, attr = cfg["import_path"].partition(":")
    sys.path.insert(0, os.getcwd())
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not isinstance(target, serve.Application) and callable(target):
        target = target()
    if not isinstance(target, serve.Application):
        raise TypeError(f"{cfg['import_path']} is not a Ray Serve application (Deployment.bind())")
    opts: dict[str, Any] = {
        "ray_actor_options": {
            "num_gpus": cfg["num_gpus"],
            "num_cpus": cfg["num_cpus"],
            "resources": cfg.get("resources") or {},
            "runtime_env": _NOT_A_STRAY,
        }
    }
    if cfg.get("autoscaling"):
        opts["autoscaling_config"] = cfg["autoscaling"]
        opts["num_replicas"] = "auto"
    else:
        opts["num_replicas"] = cfg["num_replicas"]
    return serve.Application(target._bound_deployment.options(**opts))


def _name(value: object) -> str:
    """An enum member's value, or the string Serve already gave."""
    return str(getattr(value, "value", value))


def _status_doc(app: str, endpoint: str, run_id: str) -> dict[str, Any]:
    from ray import serve

    st = serve.status().applications.get(app)
    doc: dict[str, Any] = {"app": app, "endpoint": endpoint, "run_id": run_id}
    doc["owner"] = _owner(app)
    if st is None:
        return {**doc, "status": "NOT_STARTED", "message": "", "deployments": {}}
    deployments = {
        name: {
            "status": _name(d.status),
            "message": d.message,
            "replicas": {_name(k): v for k, v in d.replica_states.items()},
        }
        for name, d in st.deployments.items()
    }
    return {
        **doc,
        "status": _name(st.status),
        "message": st.message,
        "deployments": deployments,
    }


def _start_serve(port: int) -> str:
    """Start Serve (head-only proxy on the head's address) and return ``host:port``."""
    import ray
    from ray import serve

    host = ray.get_runtime_context().gcs_address.rsplit(":", 1)[0]
    serve.start(
        proxy_location="HeadOnly",
        http_options={"host": host, "port": port},
        controller_options={"runtime_env": _NOT_A_STRAY},
    )
    return f"{host}:{port}"


def _deploy(cfg: dict[str, Any], app: Any) -> None:
    from ray import serve

    serve._run(app, _blocking=False, name=cfg["app"], route_prefix=cfg["route_prefix"])


def _watch(cfg: dict[str, Any], endpoint: str, run_id: str) -> int:
    """Write the status every second; the exit status once the run should end."""
    app = cfg["app"]
    head_ip = endpoint.split("//", 1)[1].rsplit(":", 1)[0]
    traffic: dict[str, Any] | None = None
    polls = 0
    while True:
        doc = _status_doc(app, endpoint, run_id)
        if polls % TRAFFIC_EVERY == 0:
            traffic = _traffic(head_ip, cfg["route_prefix"]) or traffic
        polls += 1
        _write_status({**doc, "traffic": traffic})
        if doc["owner"] != run_id:
            if doc["status"] == "RUNNING":
                print(f"serve: {app} was taken over by run {doc['owner']}; done", flush=True)
                return 0
        elif doc["status"] == "DEPLOY_FAILED":
            print(f"serve: {app} failed to deploy: {doc['message']}", file=sys.stderr, flush=True)
            return 1
        time.sleep(POLL_S)


def _traffic(head_ip: str, route: str) -> dict[str, Any] | None:
    """The app's requests/s and latency from the proxy log; None when it cannot be read."""
    try:
        lines = serve_traffic.proxy_log_lines(head_ip)
    except Exception as exc:  # the state API is best effort here: status must go on
        print(f"serve: traffic unknown ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None
    return serve_traffic.summarise(lines, route, time.time())


def _stop(app: str, run_id: str) -> None:
    from ray import serve

    if _owner(app) == run_id:
        serve.delete(app, _blocking=False)
        print(f"serve: deleted {app}", flush=True)


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(143)


def main() -> int:
    import ray

    cfg: dict[str, Any] = json.loads(os.environ[jobenv.SERVE_CONFIG])
    run_id = os.environ.get(jobenv.RUN_ID, "")
    ray.init(address="auto", logging_level=logging.WARNING)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        app = _load(cfg)
    except Exception as exc:  # the user's module: any error is the run's failure
        message = f"cannot import {cfg['import_path']}: {type(exc).__name__}: {exc}"
        _write_status({"app": cfg["app"], "status": "DEPLOY_FAILED", "message": message})
        print(f"serve: {message}", file=sys.stderr, flush=True)
        return 1
    address = _start_serve(int(cfg["port"]))
    endpoint = f"http://{address}{cfg['route_prefix']}"
    _claim(cfg["app"], run_id)
    _deploy(cfg, app)
    print(f"serve: deploying {cfg['app']} at {endpoint}", flush=True)
    code = 143
    try:
        code = _watch(cfg, endpoint, run_id)
    finally:
        if code != 0:
            _stop(cfg["app"], run_id)
    return code


if __name__ == "__main__":
    sys.exit(main())
