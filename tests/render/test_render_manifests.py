"""Golden files and schema validation of every object render/ produces.

Regenerate the golden files with ``TAU_UPDATE_GOLDEN=1 pytest tests/render``; review
the diff like code. Every object is also validated: custom resources against the
upstream CRD schemas (``crd_schemas``), core objects with kubernetes_validate.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

import pytest
import yaml

from taugrid.platform import crds
from taugrid.record import jobenv
from taugrid.render import kuberay, kueue, naming, plan, rayjobs, resolve
from tests.render import crd_schemas
from tests.render import render_builders as rb

GOLDEN = pathlib.Path(__file__).parent / "golden"
UPDATE = os.environ.get("TAU_UPDATE_GOLDEN") == "1"

SCENARIOS: dict[str, str] = {
    "rayjob_single": """
        schema_version: 1
        name: finetune
        run:
          entrypoint: train.py
          args: [--epochs, "3"]
          excludes: [data/]
        runtime:
          pip: [torch>=2.4]
          env: {WANDB_MODE: offline}
        resilience:
          max_runtime: 2h
        """,
    "rayjob_multi": """
        schema_version: 1
        name: pretrain
        run:
          entrypoint: train.py
        compute:
          workers: 4
          gpus: 8
          cpus: 64
          memory: 512Gi
          head: {cpus: 4, memory: 16Gi}
        runtime:
          image: ghcr.io/acme/train:1.2
          secrets:
            - {name: hf, key: token, env: HF_TOKEN}
        policy:
          workspace: nlp
          profile: ""
          priority: high
        resilience:
          checkpoint_path: /data/nlp/shared/ckpt
        """,
    "raycluster": """
        schema_version: 1
        name: notebook
        run:
          entrypoint: "sleep infinity"
          workload_kind: raycluster
        compute: {workers: 1, gpus: 1, gpu_model: L4, cpus: 4, memory: 16Gi}
        policy: {workspace: nlp, profile: interactive, lane: interactive}
        """,
    "rayservice": """
        schema_version: 1
        name: chat
        run:
          entrypoint: serve.py
          workload_kind: rayservice
        serve:
          import_path: serve:app
          route_prefix: /chat
          autoscaling: {min_replicas: 1, max_replicas: 4}
        compute: {workers: 2, gpus: 1, gpu_model: H100, cpus: 8, memory: 64Gi}
        policy: {workspace: cv, profile: h100-eu}
        """,
    "job": """
        schema_version: 1
        name: preprocess
        run:
          entrypoint: prep.py
          workload_kind: job
          args: [--shards, "8"]
        compute: {workers: 3, gpus: 0, cpus: 4, memory: 8Gi}
        policy: {workspace: cv}
        """,
}
RUN_ID = "r-20260101-abc123"


def _spec(name: str) -> Any:
    config = rb.parse(SCENARIOS[name])
    return resolve.resolve(config, rb.platform())


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"golden file {path} is missing; run with TAU_UPDATE_GOLDEN=1")
        path.write_text(text)
    assert text == path.read_text(), (
        f"{name} differs from its golden file; if intended, regenerate with TAU_UPDATE_GOLDEN=1"
    )


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_workload_manifests_match_golden(scenario: str) -> None:
    objs = plan.render_manifests(_spec(scenario), RUN_ID)
    _check_golden(f"{scenario}.yaml", plan.to_yaml(objs))


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_workload_manifests_validate_against_upstream_schemas(scenario: str) -> None:
    for obj in plan.render_manifests(_spec(scenario), RUN_ID):
        crd_schemas.validate(obj)


def _platform_objects() -> list[dict[str, Any]]:
    return kueue.render_platform(rb.platform()) + crds.platform_objects(rb.platform())


def test_platform_objects_match_golden() -> None:
    _check_golden("platform.yaml", plan.to_yaml(_platform_objects()))


def test_platform_objects_validate() -> None:
    for obj in kueue.render_platform(rb.platform()):
        crd_schemas.validate(obj)


def test_default_platform_objects_validate() -> None:
    from taugrid.platform import load

    for obj in kueue.render_platform(load.default_platform()):
        crd_schemas.validate(obj)


def test_kueue_objects_use_the_stored_version() -> None:
    for obj in kueue.render_platform(rb.platform()):
        group, _, version = obj["apiVersion"].rpartition("/")
        if group == "kueue.x-k8s.io":
            assert version == crd_schemas.storage_version(group, obj["kind"])


def test_borrowing_limits_only_with_a_cohort() -> None:
    # Kueue CEL rule (not evaluated by JSON Schema): borrowingLimit needs a cohort.
    for obj in kueue.render_platform(rb.platform()):
        if obj["kind"] != "ClusterQueue" or "cohortName" in obj["spec"]:
            continue
        for group in obj["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                assert all("borrowingLimit" not in r for r in flavor["resources"])
                assert len(flavor["resources"]) == len(group["coveredResources"])


def test_every_workspace_gets_its_objects() -> None:
    objs = kueue.render_platform(rb.platform())
    kinds = {(o["kind"], o["metadata"].get("namespace")) for o in objs}
    for ns in ("ws-nlp", "cv"):
        for kind in ("ServiceAccount", "RoleBinding", "PersistentVolumeClaim", "LocalQueue"):
            assert (kind, ns) in kinds
    queue = next(
        o for o in objs if o["kind"] == "LocalQueue" and o["metadata"]["name"] == "nlp-queue"
    )
    assert queue["spec"]["clusterQueue"] == "research"


def test_submission_matches_golden() -> None:
    spec = _spec("rayjob_multi")
    sub = rayjobs.render_submission(
        spec, RUN_ID, attempt=2, run_dir="/home/u/.tau/data/nlp/runs/x", working_dir="/tmp/code"
    )
    _check_golden("submission_multi.json", json.dumps(sub.model_dump(mode="json"), indent=2) + "\n")


def test_crd_definitions_are_valid_and_accept_platform_objects() -> None:
    import jsonschema

    for kind in crds.KINDS:
        definition = crds.crd_definition(kind)
        crd_schemas.validate_core(definition)
    for obj in crds.platform_objects(rb.platform()):
        schema = crds.crd_definition(obj["kind"])["spec"]["versions"][0]["schema"][
            "openAPIV3Schema"
        ]
        spec = {
            k: v for k, v in obj["spec"].items() if v is not None
        }  # nullable: JSON Schema lacks it
        jsonschema.Draft7Validator(schema["properties"]["spec"]).validate(_drop_nulls(spec))


def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def test_rayjob_details() -> None:
    spec = _spec("rayjob_single")
    job = kuberay.render_rayjob(spec, RUN_ID)
    labels = job["metadata"]["labels"]
    assert labels[naming.QUEUE_LABEL] == "nlp-queue"
    assert labels[naming.PRIORITY_LABEL] == "normal"
    assert labels[naming.LABEL_RUN_ID] == RUN_ID
    assert job["spec"]["suspend"] is True
    assert job["spec"]["activeDeadlineSeconds"] == 7200
    assert job["spec"]["entrypointNumGpus"] == 1
    assert json.loads(job["spec"]["entrypointResources"]) == {"accelerator_type:A100-80G": 0.001}
    runtime = yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    assert runtime["env_vars"]["CHECKPOINT_PATH"] == f"/data/nlp/runs/{RUN_ID}/checkpoints"
    assert runtime["working_dir"] == f"/data/nlp/runs/{RUN_ID}/code"
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert naming.GPU_RESOURCE not in head["resources"]["limits"]
    worker = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    pod = worker["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert pod["containers"][0]["resources"]["limits"][naming.GPU_RESOURCE] == 1
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "nlp-data"


def test_multi_worker_rayjob_uses_the_launcher_and_reserves_nothing_for_the_driver() -> None:
    job = kuberay.render_rayjob(_spec("rayjob_multi"), RUN_ID)["spec"]
    assert job["entrypoint"].startswith("python -m taugrid.backends.programs.launch --workers 4")
    assert "entrypointNumCpus" not in job and "entrypointNumGpus" not in job
    assert job["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] == 4
    env = job["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["env"]
    secret = next(e for e in env if e["name"] == "HF_TOKEN")
    # the run's own Secret, made by the agent from the hub's workspace secret hf/token
    ref = {"name": naming.secrets_name(RUN_ID), "key": "HF_TOKEN"}
    assert secret["valueFrom"]["secretKeyRef"] == ref


def test_rayservice_serve_config() -> None:
    service = kuberay.render_rayservice(_spec("rayservice"), RUN_ID)
    config = yaml.safe_load(service["spec"]["serveConfigV2"])
    app = config["applications"][0]
    assert app["import_path"] == "serve:app" and app["route_prefix"] == "/chat"
    assert app["runtime_env"]["env_vars"]["TAU_SERVE_REPLICAS"] == "1"
    assert service["metadata"]["labels"][naming.PRIORITY_LABEL] == "high"


def test_a_served_model_is_found_under_the_pods_data_mount() -> None:
    # the hub names the model inside the source run's record; pods mount the data root
    env = {jobenv.MODEL_RECORD: "cv/runs/r-src/artifacts/model.npz"}
    spec = _spec("rayservice").model_copy(update={"env": env})
    service = kuberay.render_rayservice(spec, RUN_ID)
    app = yaml.safe_load(service["spec"]["serveConfigV2"])["applications"][0]
    app_env = app["runtime_env"]["env_vars"]
    assert app_env["TAU_MODEL_PATH"] == "/data/cv/runs/r-src/artifacts/model.npz"
    assert jobenv.MODEL_RECORD not in app_env


def test_long_run_ids_make_valid_names() -> None:
    obj = kuberay.render_rayjob(_spec("rayjob_single"), "R" * 80)
    assert len(obj["metadata"]["name"]) <= naming.MAX_NAME
    assert len(obj["metadata"]["labels"][naming.LABEL_RUN_ID]) <= 63
    crd_schemas.validate(obj)


def test_to_json_is_a_list() -> None:
    doc = json.loads(plan.to_json(plan.render_manifests(_spec("job"), RUN_ID)))
    assert doc["kind"] == "List" and doc["items"][0]["kind"] == "Job"
