"""A spanning run on Kubernetes (``kuberay.render_span``): the RayJob and a head Service
in the head's member cluster, a Kueue pod group of Ray workers joining that head in each
other member; every object validated against the upstream schemas."""

from __future__ import annotations

import json

import pytest

from taugrid import errors
from taugrid.render import kuberay, naming, resolve
from tests.render import crd_schemas
from tests.render import render_builders as rb

ASYNC = """
    schema_version: 1
    name: wide
    run:
      entrypoint: train.py
    compute:
      workers: 4
      gpus: 1
      gpu_model: A100-80G
      cpus: 4
      memory: 16Gi
    placement:
      communication: async
    """


def _span() -> dict[str, list[dict[str, object]]]:
    spec = resolve.resolve(rb.parse(ASYNC), rb.platform())
    return kuberay.render_span(spec, "run-1", [("east", 2), ("west", 1), ("north", 1)])


def test_head_member_gets_the_rayjob_sized_to_its_workers_and_a_head_service() -> None:
    objs = _span()
    assert list(objs) == ["east", "west", "north"]
    job, service = objs["east"]
    assert job["kind"] == "RayJob" and service["kind"] == "Service"
    groups = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]  # type: ignore[index]
    assert [g["replicas"] for g in groups] == [2]
    assert service["spec"]["clusterIP"] == "None"  # type: ignore[index]
    assert service["spec"]["selector"] == {  # type: ignore[index]
        naming.LABEL_RUN_ID: "run-1",
        "ray.io/node-type": "head",
    }


def test_every_other_member_gets_a_kueue_pod_group_joining_the_head() -> None:
    objs = _span()
    west, north = objs["west"], objs["north"]
    assert len(west) == 1 and len(north) == 1
    pod = west[0]
    meta = pod["metadata"]
    assert meta["labels"][kuberay.SPAN_GROUP_LABEL] == "run-1-west"  # type: ignore[index]
    assert meta["labels"][naming.QUEUE_LABEL]  # type: ignore[index]  # Kueue queues it
    assert meta["annotations"][kuberay.SPAN_COUNT_ANNOTATION] == "1"  # type: ignore[index]
    (container,) = pod["spec"]["containers"]  # type: ignore[index]
    head = "run-1-head.ws-nlp.svc.clusterset.local:6379"
    assert container["command"][:4] == ["ray", "start", "--block", f"--address={head}"]
    resources = json.loads(container["command"][-1].split("=", 1)[1])
    assert resources == {"accelerator_type:A100-80G": 1}
    assert container["resources"]["limits"][naming.GPU_RESOURCE] == 1
    assert pod["spec"]["restartPolicy"] == "Never"  # type: ignore[index]  # a lost worker shrinks


def test_every_span_object_validates_against_the_upstream_schemas() -> None:
    crd_schemas.require_crds()
    for objs in _span().values():
        for obj in objs:
            crd_schemas.validate(obj)


def test_sync_runs_and_members_that_do_not_add_up_are_refused() -> None:
    sync = resolve.resolve(rb.parse(ASYNC.replace("async", "sync")), rb.platform())
    with pytest.raises(errors.UserError, match="sync runs never span clusters"):
        kuberay.render_span(sync, "run-1", [("east", 2), ("west", 2)])
    spec = resolve.resolve(rb.parse(ASYNC), rb.platform())
    with pytest.raises(ValueError, match="add up to 4"):
        kuberay.render_span(spec, "run-1", [("east", 2), ("west", 1)])
