"""What the agent adds to a run's pods at submission: the cluster's ``pods:`` settings
on every pod template and the node pools of the capacity the hub placed the run on
(``render.pods``, which also decides which Nodes are the region's
by the cluster's tolerations and node selector, and on host networking gives a run's Ray
nodes their addresses and ports), and podsync around a batch Job's command or a RayJob's
entrypoint with the record store's Secret (``backends.kube.kube_pods``). The real node
tier runs them end to end: ``tests/k8s/test_run_in_pods.py``,
``tests/k8s/test_rayjob_in_pods.py``."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import yaml

from taugrid.backends import base
from taugrid.backends.kube import kube_logs, kube_pods
from taugrid.backends.kube import kubernetes as kb
from taugrid.platform import models as pm
from taugrid.record import jobenv
from taugrid.render import kuberay, naming, resolve
from taugrid.render import pods as render_pods
from taugrid.spec import models as sm
from tests.render import render_builders as rb

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def _job() -> dict[str, Any]:
    container = {"name": "main", "command": ["python", "train.py"], "workingDir": "/data/x"}
    template = {
        "metadata": {"labels": {naming.LABEL_RUN_ID: "r-1"}},
        "spec": {"containers": [container], "volumes": [{"name": "data"}]},
    }
    return {"kind": "Job", "metadata": {"name": "r-1"}, "spec": {"template": template}}


def _pods(**kw: Any) -> pm.PodSettings:
    return pm.PodSettings.model_validate(kw)


def test_settings_reach_every_pod_template() -> None:
    job = _job()
    pods = _pods(host_network=True, tolerations=[TAINT], node_selector={"pool": "a3"})
    render_pods.settle(job, pods)
    (spec,) = render_pods.pod_specs(job)
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["tolerations"] == [{**TAINT, "operator": "Equal"}]
    assert spec["nodeSelector"] == {"pool": "a3"}


def test_default_settings_change_nothing() -> None:
    job = _job()
    render_pods.settle(job, pm.PodSettings())
    assert job == _job()


def test_a_job_is_wrapped_by_podsync_with_its_secret_and_scratch() -> None:
    job = _job()
    pod = base.PodAttempt(
        command=("python", "-m", "podsync"),
        env={"TAU_POD_ATTEMPT": "{}"},
        secret_env={"S3_KEY": "k"},
        root="/tau",
    )
    assert kube_pods.wraps(sm.WorkloadKind.JOB)
    assert kube_pods.wrap(job, pod)
    (spec,) = render_pods.pod_specs(job)
    (c,) = spec["containers"]
    assert c["command"] == ["python", "-m", "podsync", "--", "python", "train.py"]
    assert "workingDir" not in c  # the code comes from the record, not the data volume
    secret_ref = {"secretKeyRef": {"name": kube_pods.RECORDS_SECRET, "key": "S3_KEY"}}
    assert c["env"] == [
        {"name": "TAU_POD_ATTEMPT", "value": "{}"},
        {"name": "S3_KEY", "valueFrom": secret_ref},
    ]
    assert {"name": kube_pods.SCRATCH_VOLUME, "mountPath": "/tau"} in c["volumeMounts"]
    assert {"name": kube_pods.SCRATCH_VOLUME, "emptyDir": {}} in spec["volumes"]
    secret = kube_pods.records_secret("ml", {"S3_KEY": "k"})
    assert base64.b64decode(secret["data"]["S3_KEY"]) == b"k"


def _rendered(kind: str = "rayjob") -> dict[str, Any]:
    spec = resolve.resolve(
        rb.config(run={"entrypoint": "train.py", "workload_kind": kind}), rb.platform()
    )
    if kind == "raycluster":
        return kuberay.render_raycluster(spec, "r-1")
    return kuberay.render_rayjob(spec, "r-1")


def _service() -> dict[str, Any]:
    run = {"entrypoint": "serve_app.py", "workload_kind": "rayservice"}
    cfg = rb.config(run=run, serve={"import_path": "serve_app:app", "route_prefix": "/digits"})
    spec = resolve.resolve(cfg, rb.platform())
    model = {**spec.env, jobenv.MODEL_RECORD: "ml/runs/r-0/artifacts"}  # as the hub sets it
    return kuberay.render_rayservice(spec.model_copy(update={"env": model}), "r-1")


def _ray_groups(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]
    cluster = spec.get("rayClusterSpec") or spec.get("rayClusterConfig") or spec
    return [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]


def test_a_rayjob_runs_its_entrypoint_under_podsync_on_every_ray_node() -> None:
    obj = _rendered()
    pod = base.PodAttempt(
        command=("python", "-m", "podsync"),
        notice=("python", "-m", "podsync", "--notice"),
        env={"TAU_POD_ATTEMPT": "{}"},
        root="/tau",
    )
    assert kube_pods.wraps(sm.WorkloadKind.RAYJOB) and kube_pods.wrap(obj, pod)
    job = obj["spec"]
    assert job["entrypoint"] == "python -m podsync -- python train.py"
    runtime_env = yaml.safe_load(job["runtimeEnvYAML"])
    assert "working_dir" not in runtime_env and runtime_env["env_vars"]["TAU_RUN_ID"] == "r-1"
    for group in _ray_groups(obj):  # wherever Ray places the driver, it has the wrapper's
        spec = group["template"]["spec"]
        (c,) = spec["containers"]
        assert {"name": "TAU_POD_ATTEMPT", "value": "{}"} in c["env"]
        assert {"name": kube_pods.SCRATCH_VOLUME, "mountPath": "/tau"} in c["volumeMounts"]
        assert "command" not in c  # KubeRay's `ray start`
        assert spec["terminationGracePeriodSeconds"] == pod.grace_s
        # the driver's notice (the wrapper's SIGTERM) before the kubelet stops Ray
        assert c["lifecycle"]["preStop"]["exec"]["command"] == list(pod.notice)
    submitter = job["submitterPodTemplate"]["spec"]["containers"][0]
    assert "env" not in submitter and "volumeMounts" in submitter  # the data volume only
    assert all(m["name"] != kube_pods.SCRATCH_VOLUME for m in submitter["volumeMounts"])


def test_a_rayservices_ray_nodes_prepare_code_and_model_and_its_app_imports_from_there() -> None:
    obj = _service()
    pod = base.PodAttempt(
        command=("python", "-m", "podsync"),
        prepare=("python", "-m", "podsync", "--prepare"),
        env={"TAU_POD_ATTEMPT": "{}"},
        root="/tau",
        model_path="/tau/model/artifacts",
    )
    assert kube_pods.wraps(sm.WorkloadKind.RAYSERVICE) and kube_pods.wrap(obj, pod)
    for group in _ray_groups(obj):  # a replica may start on any node
        spec = group["template"]["spec"]
        (init,) = spec["initContainers"]
        (c,) = spec["containers"]
        assert init["command"] == ["python", "-m", "podsync", "--prepare"]
        assert init["image"] == c["image"]
        assert {"name": "TAU_POD_ATTEMPT", "value": "{}"} in init["env"]
        mount = {"name": kube_pods.SCRATCH_VOLUME, "mountPath": "/tau"}
        assert mount in init["volumeMounts"] and mount in c["volumeMounts"]
        model = [e["value"] for e in c["env"] if e["name"] == "TAU_MODEL_PATH"]
        assert model == ["/tau/model/artifacts"]  # not the data volume's path
    (app,) = yaml.safe_load(obj["spec"]["serveConfigV2"])["applications"]
    assert "working_dir" not in app["runtime_env"]
    env_vars = app["runtime_env"]["env_vars"]
    assert env_vars["PYTHONPATH"] == "/tau/code"
    assert env_vars["TAU_MODEL_PATH"] == "/tau/model/artifacts"


def test_a_rayservice_on_host_networking_serves_from_the_head_on_its_blocks_port() -> None:
    obj = _service()
    render_pods.settle(obj, _pods(host_network=True))
    head, _worker = _ray_groups(obj)
    (ray,) = head["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in ray["ports"]}
    assert ports["serve"] == ports["gcs-server"] + 3  # a host port of the run's block
    config = yaml.safe_load(obj["spec"]["serveConfigV2"])
    assert config["proxy_location"] == "HeadOnly"
    assert config["http_options"] == {"host": "0.0.0.0", "port": ports["serve"]}
    assert head["rayStartParams"]["num-cpus"] == "0"  # replicas run on the workers


def test_a_rayclusters_ray_nodes_import_the_runs_code_from_scratch() -> None:
    obj = _rendered("raycluster")
    pod = base.PodAttempt(command=("x",), prepare=("x", "--prepare"), env={}, root="/tau")
    assert kube_pods.wraps(sm.WorkloadKind.RAYCLUSTER) and kube_pods.wrap(obj, pod)
    for group in _ray_groups(obj):
        spec = group["template"]["spec"]
        assert [c["command"] for c in spec["initContainers"]] == [["x", "--prepare"]]
        (c,) = spec["containers"]
        assert {"name": "PYTHONPATH", "value": "/tau/code"} in c["env"]
        assert all(e["name"] != "TAU_MODEL_PATH" for e in c["env"])  # no model: not serving


def test_ray_nodes_on_host_networking_take_their_pods_address_and_free_ports() -> None:
    obj = _rendered()
    render_pods.settle(obj, _pods(host_network=True))
    head, worker = _ray_groups(obj)
    ip = f"${render_pods.POD_IP_ENV}"
    for group in (head, worker):
        params = group["rayStartParams"]
        assert params["node-ip-address"] == ip
        assert params["dashboard-agent-listen-port"] == "0"
        assert params["min-worker-port"] == params["max-worker-port"] == "0"
        (c,) = group["template"]["spec"]["containers"]
        pod_ip = {"fieldRef": {"fieldPath": "status.podIP"}}
        assert {"name": render_pods.POD_IP_ENV, "valueFrom": pod_ip} in c["env"]
    base_port, blocks, size = render_pods.HOST_PORTS
    gcs = int(head["rayStartParams"]["port"])
    assert base_port <= gcs < base_port + blocks * size and (gcs - base_port) % size == 0
    assert head["rayStartParams"]["dashboard-port"] == str(gcs + 1)
    assert head["rayStartParams"]["ray-client-server-port"] == str(gcs + 2)
    assert head["rayStartParams"]["dashboard-host"] == ip
    ports = {
        p["name"]: p["containerPort"] for p in head["template"]["spec"]["containers"][0]["ports"]
    }
    assert ports == {"gcs-server": gcs, "dashboard": gcs + 1, "client": gcs + 2, "metrics": gcs + 4}
    assert head["rayStartParams"]["metrics-export-port"] == str(gcs + 4)
    # Ready once Ray's dashboard answers for the GCS on its port, not when the container starts
    probe = head["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]
    assert probe == {"path": render_pods.HEAD_READY_PATH, "port": gcs + 1}
    # KubeRay declares a metrics port on every Ray container (8080 unless one is named)
    (w,) = worker["template"]["spec"]["containers"]
    assert w["ports"] == [{"name": "metrics", "containerPort": gcs + 5}]
    assert worker["rayStartParams"]["metrics-export-port"] == str(gcs + 5)
    again = _rendered()
    render_pods.settle(again, _pods(host_network=True))
    assert again == obj  # the same object, the same ports (a retry's head binds them again)


def test_ray_nodes_on_the_pod_network_keep_rays_defaults() -> None:
    obj = _rendered()
    render_pods.settle(obj, _pods(tolerations=[TAINT]))
    head, worker = _ray_groups(obj)
    assert head["rayStartParams"] == {"num-gpus": "0"}
    assert "node-ip-address" not in worker["rayStartParams"]


def test_tolerated_taints_and_selected_nodes() -> None:
    pods = _pods(tolerations=[TAINT], node_selector={"pool": "a3"})
    assert render_pods.tolerated(pods, TAINT)
    assert not render_pods.tolerated(pods, {**TAINT, "value": "cpu"})
    assert not render_pods.tolerated(pm.PodSettings(), TAINT)
    anything = _pods(tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert render_pods.tolerated(anything, {**TAINT, "effect": "NoExecute"})
    assert render_pods.selects(pods, {"metadata": {"labels": {"pool": "a3", "x": "y"}}})
    assert not render_pods.selects(pods, {"metadata": {"labels": {"pool": "b"}}})
    assert render_pods.selects(pm.PodSettings(), {"metadata": {}})


def _ray_job() -> dict[str, Any]:
    """A RayJob's shape as ``render.kuberay`` makes it: a CPU-only head, GPU workers."""

    def template(gpus: int) -> dict[str, Any]:
        limits = {"cpu": "1", **({naming.GPU_RESOURCE: gpus} if gpus else {})}
        container = {"name": "ray", "resources": {"limits": limits}}
        return {
            "metadata": {"labels": {naming.LABEL_RUN_ID: "r-1"}},
            "spec": {"containers": [container]},
        }

    cluster = {
        "headGroupSpec": {"template": template(0)},
        "workerGroupSpecs": [{"template": template(8)}],
    }
    return {"kind": "RayJob", "metadata": {"name": "r-1"}, "spec": {"rayClusterSpec": cluster}}


def _pool_terms(spec: dict[str, Any]) -> list[list[dict[str, Any]]]:
    required = (
        spec.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
    )
    return [t["matchExpressions"] for t in required.get("nodeSelectorTerms", [])]


def test_a_spot_placement_keeps_gpu_pods_on_spot_pools_and_the_head_anywhere() -> None:
    obj = _ray_job()
    render_pods.keep_to_capacity(obj, ["a100-spot", "h100-spot"], "spot")
    head, worker = render_pods.pod_specs(obj)
    assert _pool_terms(head) == []
    want = {"key": naming.POOL_LABEL, "operator": "In", "values": ["a100-spot", "h100-spot"]}
    assert _pool_terms(worker) == [[want]]


def test_an_on_demand_placement_keeps_every_pod_off_spot_pools() -> None:
    obj = _ray_job()
    render_pods.keep_to_capacity(obj, ["a100-spot"], "on-demand")
    want = {"key": naming.POOL_LABEL, "operator": "NotIn", "values": ["a100-spot"]}
    assert [_pool_terms(s) for s in render_pods.pod_specs(obj)] == [[[want]], [[want]]]


def test_a_pool_requirement_joins_each_existing_affinity_term() -> None:
    obj = _ray_job()
    (_, worker) = render_pods.pod_specs(obj)
    zone = {"key": "zone", "operator": "In", "values": ["a"]}
    rack = {"key": "rack", "operator": "In", "values": ["r1"]}
    terms = [{"matchExpressions": [zone]}, {"matchExpressions": [rack]}]
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    worker["affinity"] = {"nodeAffinity": required}
    render_pods.keep_to_capacity(obj, ["a100-spot"], "spot")
    pool = {"key": naming.POOL_LABEL, "operator": "In", "values": ["a100-spot"]}
    assert _pool_terms(worker) == [[zone, pool], [rack, pool]]


def test_no_spot_pools_or_no_single_capacity_leave_the_pods_alone() -> None:
    for pools, capacity in (([], "spot"), ([], "on-demand"), (["s"], "any"), (["s"], None)):
        obj = _ray_job()
        render_pods.keep_to_capacity(obj, pools, capacity)
        assert obj == _ray_job()


def test_a_deleted_pod_still_stores_outputs_until_its_grace_period_ends() -> None:
    """``KubernetesBackend.settling``: the agent holds a stopped attempt's end while a pod
    of it runs within its deletion's grace period (podsync stores the last metric lines)."""
    now = dt.datetime(2026, 12, 6, 7, 0, tzinfo=dt.UTC)

    def pod(phase: str, deletion: str | None) -> dict[str, Any]:
        return {"metadata": {"deletionTimestamp": deletion}, "status": {"phase": phase}}

    assert kb._still_running(pod("Running", None), now)
    assert kb._still_running(pod("Running", "2026-12-06T07:00:30Z"), now)
    assert not kb._still_running(pod("Running", "2026-12-06T06:59:59Z"), now)  # node gone?
    assert not kb._still_running(pod("Succeeded", "2026-12-06T07:00:30Z"), now)
    assert not kb._still_running(pod("Pending", None), now)


def _submitter(phase: str, created: str = "2026-12-06T06:59:00Z") -> dict[str, Any]:
    return {
        "metadata": {"name": f"sub-{created}", "creationTimestamp": created},
        "spec": {"containers": [{"name": "ray-job-submitter"}]},
        "status": {"phase": phase},
    }


def test_a_finished_rayjob_waits_for_its_submitter_to_print_the_last_lines() -> None:
    """KubeRay reads a failed Ray job's end from the dashboard while the submitter still
    prints the job's log (the traceback): the agent holds the end until a submitter has
    exited, at most ``SUBMITTER_GRACE_S`` after the RayJob's end."""
    now = dt.datetime(2026, 12, 6, 7, 0, tzinfo=dt.UTC)
    ended = {"status": {"endTime": "2026-12-06T06:59:50Z"}}
    assert kb._submitter_following(ended, [_submitter("Running")], now)
    assert not kb._submitter_following(ended, [_submitter("Failed")], now)
    retried = [_submitter("Failed"), _submitter("Running", "2026-12-06T06:59:55Z")]
    assert not kb._submitter_following(ended, retried, now)  # the first one is done
    long_ago = {"status": {"endTime": "2026-12-06T06:59:00Z"}}
    assert kb.SUBMITTER_GRACE_S < 60 and not kb._submitter_following(
        long_ago, [_submitter("Running")], now
    )


def test_the_driver_log_is_the_submitter_that_did_not_fail() -> None:
    """A submitter that could not reach the dashboard failed; the one its Job made again
    submitted the Ray job and follows it (CI). A crashed job's pod is read when no
    other is left."""
    failed, late = _submitter("Failed"), _submitter("Running", "2026-12-06T07:00:05Z")
    worker = {"metadata": {"name": "w"}, "spec": {"containers": [{"name": "ray-worker"}]}}
    assert kube_logs.driver_pod("RayJob", [worker, failed, late]) is late
    assert kube_logs.driver_pod("RayJob", [worker, late, _submitter("Running")]) is not late
    assert kube_logs.driver_pod("RayJob", [failed]) is failed
    assert kube_logs.driver_pod("RayJob", [worker]) is None


def test_another_driver_pods_log_follows_what_was_read() -> None:
    """The run's log is read by offset; when another submitter takes over, its log
    starts where the first one's ended, so none of its bytes are skipped."""
    backend = kb.KubernetesBackend.__new__(kb.KubernetesBackend)  # bookkeeping only
    backend._log_pods = {}
    assert backend._log_start("j", "sub-1", 0) == 0
    assert backend._log_start("j", "sub-1", 2048) == 0
    assert backend._log_start("j", "sub-2", 2048) == 2048  # sub-2's byte 0 is the run's 2048
    assert backend._log_start("j", "sub-2", 4096) == 2048


def test_a_crash_loop_says_how_its_container_last_exited() -> None:
    """The kubelet keeps the end of a failed container's log as its termination message
    (``terminationMessagePolicy: FallbackToLogsOnError`` on every container rendered)."""
    crashed = {"exitCode": 1, "reason": "Error", "message": "ValueError: no GPU\n"}
    status: dict[str, Any] = {
        "name": "ray-worker",
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}},
        "lastState": {"terminated": crashed},
        "restartCount": 1,
    }
    pod = {"metadata": {"namespace": "ml", "name": "p"}, "status": {"containerStatuses": [status]}}
    assert kb._stuck([pod]) == ""  # exited once (a busy node): the kubelet tries again
    status["restartCount"] = kb.CRASH_RESTARTS
    assert kb._stuck([pod]) == (
        "CrashLoopBackOff: back-off 20s (pod ml/p, container ray-worker); "
        "it exited with code 1 (Error): ValueError: no GPU"
    )
    status.pop("lastState")  # an image that cannot be pulled never exited
    assert kb._stuck([pod]) == "CrashLoopBackOff: back-off 20s (pod ml/p, container ray-worker)"


def test_a_secret_the_kubelet_has_not_read_yet_is_waited_for_a_missing_one_is_not() -> None:
    def pod(message: str) -> dict[str, Any]:
        waiting = {"reason": "CreateContainerConfigError", "message": message}
        status = {"name": "main", "state": {"waiting": waiting}}
        return {
            "metadata": {"namespace": "ml", "name": "p"},
            "status": {"containerStatuses": [status]},
        }

    busy = "failed to sync secret cache: timed out waiting for the condition"
    assert kb._stuck([pod(busy)]) == ""
    missing = 'secret "taugrid-records" not found'
    assert kb._stuck([pod(missing)]).startswith("CreateContainerConfigError: secret ")
