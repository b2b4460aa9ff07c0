"""Backend values and pure helpers, without a Ray cluster."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pydantic
import pytest

from taugrid.backends import base, errors
from taugrid.backends.programs import launch
from taugrid.backends.ray import ray_jobs, ray_state
from taugrid.errors import SystemFault, UserError
from tests.backends import backend_helpers as h

S = base.JobState


def test_state_machine_allows_only_documented_moves() -> None:
    assert S.PENDING.can_become(S.RUNNING)
    assert S.PENDING.can_become(S.FAILED) and S.PENDING.can_become(S.STOPPED)
    assert S.RUNNING.can_become(S.SUCCEEDED) and not S.RUNNING.can_become(S.PENDING)
    for terminal in (S.SUCCEEDED, S.FAILED, S.STOPPED):
        assert terminal.terminal
        assert all(not terminal.can_become(o) for o in S if o != terminal)
    assert not S.PENDING.terminal and not S.RUNNING.terminal


class _RenderedSubmission(pydantic.BaseModel):
    """Stands in for render.rayjobs.RayJobSubmission: same names, one extra field."""

    submission_id: str
    entrypoint: str
    entrypoint_num_gpus: float | None = None
    entrypoint_memory: str | None = None
    runtime_env: dict[str, object] = {}
    kueue_queue: str = "q"


def test_submission_coerces_duck_typed_models_and_quantities() -> None:
    sub = base.Submission.coerce(
        _RenderedSubmission(
            submission_id="run-1",
            entrypoint="python x.py",
            entrypoint_num_gpus=2,
            entrypoint_memory="1Gi",
            runtime_env={"env_vars": {"A": "1"}},
        )
    )
    assert sub.entrypoint_num_gpus == 2 and sub.entrypoint_memory == 2**30
    assert sub.runtime_env == {"env_vars": {"A": "1"}}
    assert base.Submission.coerce(sub) is sub
    assert base.Submission.coerce({"submission_id": "a", "entrypoint": "b"}).entrypoint == "b"
    with pytest.raises(pydantic.ValidationError):
        base.Submission.coerce({"submission_id": "bad id", "entrypoint": "x"})
    with pytest.raises(TypeError):
        base.Submission.coerce(42)


def _node(
    node_id: str, gpu_free: float, alive: bool = True, model: str = "A100-80G"
) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "node_ip": "127.0.0.9",
        "state": "ALIVE" if alive else "DEAD",
        "is_head_node": node_id == "a",
        "resources_total": {
            "CPU": 16.0,
            "GPU": 4.0,
            f"accelerator_type:{model}": 4.0,
            "memory": 2.0**37,
            "my_res": 2.0,
        },
    }


def test_inventory_from_dashboard_usage_maps_camel_case_names_back() -> None:
    rows = [_node("a", 4), _node("b", 4), _node("c", 4, alive=False)]
    usage = {
        "a": {"GPU": [3.0, 4.0], "CPU": [1.0, 16.0], "acceleratorType:A100-80G": [3.0, 4.0]},
        "b": {"myRes": [2.0, 2.0], "memory": [2.0**36, 2.0**37]},
    }
    inv = ray_state.build_inventory(rows, dashboard_usage=usage, emulated_gpus=True)
    a, b, c = inv.nodes
    assert a.is_head and a.gpu_available == 1 and a.gpu_busy == 3 and a.cpu_available == 15
    assert a.accelerator == "A100-80G"
    assert b.resources_available["my_res"] == 0 and b.memory_available == 2**36
    assert not c.alive and c.gpu_available == 0
    assert (inv.gpu_total, inv.gpu_free, inv.gpu_busy) == (8, 5, 3)
    assert inv.gpu_models == {"A100-80G": base.GpuCount(total=8, free=5)}
    assert inv.gpu_usage == pytest.approx(3 / 8)
    assert inv.cpu_usage == pytest.approx(1 / 32)
    assert inv.emulated_gpus and inv.taken_at.tzinfo is dt.UTC


def test_inventory_from_gcs_usage_uses_exact_names() -> None:
    usage = {"a": {"GPU": (2.0, 4.0), "my_res": (1.0, 2.0)}}
    inv = ray_state.build_inventory([_node("a", 4)], gcs_usage=usage)
    assert inv.nodes[0].gpu_available == 2 and inv.nodes[0].resources_available["my_res"] == 1


def test_camel_case_matches_the_dashboard() -> None:
    assert ray_state.camel_case("node:__internal_head__") == "node:InternalHead"
    assert ray_state.camel_case("object_store_memory") == "objectStoreMemory"


@pytest.mark.parametrize(
    ("details", "code"),
    [
        ({"driver_exit_code": 3, "status": "FAILED"}, 3),
        ({"status": "SUCCEEDED"}, 0),
        ({"status": "FAILED", "message": "Job entrypoint command failed with exit code 7"}, 7),
        ({"status": "STOPPED", "message": "Job was intentionally stopped."}, None),
    ],
)
def test_exit_code_from_job_details(details: dict[str, Any], code: int | None) -> None:
    assert ray_jobs.exit_code_from(details) == code


def test_error_hierarchy_separates_user_from_retryable() -> None:
    assert issubclass(errors.JobNotFound, UserError)
    assert issubclass(errors.DuplicateSubmission, errors.SubmissionRejected)
    assert errors.RayUnavailable("x").retryable
    assert isinstance(errors.RayRequestFailed("x"), SystemFault)
    assert not errors.RayRequestFailed("x").retryable


def test_unreachable_dashboard_is_a_retryable_fault() -> None:
    port = h.free_port("127.0.0.29", 8400, 8499)
    b = ray_jobs.RayBackend(f"127.0.0.29:{port}", timeout_s=2)
    with pytest.raises(errors.RayUnavailable) as info:
        b.status("anything")
    assert info.value.retryable and "127.0.0.29" in info.value.message
    with pytest.raises(errors.RayUnavailable):
        b.submit(h.submission("true"))
    b.close()


def test_missing_working_dir_is_rejected_before_contacting_ray(tmp_path: Path) -> None:
    b = ray_jobs.RayBackend("127.0.0.29:1")
    sub = h.submission("true", runtime_env={"working_dir": str(tmp_path / "nope")})
    with pytest.raises(errors.SubmissionRejected, match="does not exist"):
        b.submit(sub)


def test_launcher_arguments_bundle_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = launch.parse_args(
        [
            "--workers",
            "2",
            "--gpus-per-worker",
            "4",
            "--cpus-per-worker",
            "8",
            "--accelerator",
            "A100-80G",
            "--",
            "python",
            "train.py",
            "--lr",
            "1",
        ]
    )
    assert cfg.command == ("python", "train.py", "--lr", "1") and cfg.workers == 2
    assert launch.bundle(cfg) == {"CPU": 8, "GPU": 4, "accelerator_type:A100-80G": 0.001}
    monkeypatch.setenv("TAU_RUN_ID", "r1")
    monkeypatch.setenv("CHECKPOINT_PATH", "/data/ckpt")
    monkeypatch.setenv("UNRELATED", "x")
    env = launch.worker_env(1, 2, 0, 1, ("10.0.0.1", 29500))
    assert env["RANK"] == "1" and env["WORLD_SIZE"] == "2" and env["LOCAL_RANK"] == "0"
    assert env["TAU_WORKER_INDEX"] == "1" and env["MASTER_ADDR"] == "10.0.0.1"
    assert env["TAU_RUN_ID"] == "r1" and env["CHECKPOINT_PATH"] == "/data/ckpt"
    assert "UNRELATED" not in env and "PATH" not in env
    assert os.environ["UNRELATED"] == "x"


def test_launcher_requires_a_command() -> None:
    with pytest.raises(SystemExit):
        launch.parse_args(["--workers", "2"])
