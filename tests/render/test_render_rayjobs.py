"""render_submission(): the Ray Jobs submission of one attempt (embedded backend)."""

from __future__ import annotations

import json

from taugrid.record import jobenv
from taugrid.render import command, naming, rayjobs, resolve, runspec
from tests.render import render_builders as rb


def _spec(**groups: object) -> runspec.RunSpec:
    return resolve.resolve(rb.config(**groups), rb.platform())


def _submit(spec: runspec.RunSpec, attempt: int = 1) -> rayjobs.RayJobSubmission:
    return rayjobs.render_submission(
        spec, "run1", attempt=attempt, run_dir="/tau/data/nlp/runs/run1", working_dir="/src"
    )


def test_single_worker_entrypoint_takes_the_worker_resources() -> None:
    sub = _submit(_spec(run={"entrypoint": "train.py", "args": ["--lr", "0.1 x"]}))
    assert sub.entrypoint == "python train.py --lr '0.1 x'"
    assert (sub.entrypoint_num_gpus, sub.entrypoint_num_cpus) == (1, 8)
    assert sub.entrypoint_memory == 64 * 2**30
    assert sub.entrypoint_resources == {"accelerator_type:A100-80G": 0.001}


def test_environment_and_ids() -> None:
    sub = _submit(_spec(), attempt=3)
    env = sub.runtime_env["env_vars"]
    assert isinstance(env, dict)
    assert env["TAU_RUN_ID"] == "run1" and env["TAU_ATTEMPT"] == "3"
    assert env["TAU_OUTPUT_DIR"] == "/tau/data/nlp/runs/run1"
    assert env["CHECKPOINT_PATH"] == "/tau/data/nlp/runs/run1/checkpoints"
    assert env[jobenv.FENCING_TOKEN] == ""
    assert sub.submission_id == "tau-run1-a3" == rayjobs.submission_id("run1", 3)
    assert sub.runtime_env["working_dir"] == "/src"
    assert all(isinstance(v, str) for v in sub.metadata.values())
    fenced = sub.with_fencing_token("tok-7")
    assert fenced.runtime_env["env_vars"][jobenv.FENCING_TOKEN] == "tok-7"  # type: ignore[index]


def test_checkpoint_path_override() -> None:
    sub = _submit(_spec(resilience={"checkpoint_path": "/ckpt/x"}))
    assert sub.runtime_env["env_vars"]["CHECKPOINT_PATH"] == "/ckpt/x"  # type: ignore[index]


def test_object_store_output_leaves_the_job_writing_its_record() -> None:
    """``storage.output: s3://...`` is filled by the hub (hub.results): the job still
    writes into its record, never into a directory named like the URL."""
    sub = _submit(_spec(storage={"output": "s3://results/run1"}))
    assert sub.runtime_env["env_vars"]["TAU_OUTPUT_DIR"] == "/tau/data/nlp/runs/run1"  # type: ignore[index]
    local = _submit(_spec(storage={"output": "/mnt/out"}))
    assert local.runtime_env["env_vars"]["TAU_OUTPUT_DIR"] == "/mnt/out"  # type: ignore[index]


def test_the_job_writes_into_the_directory_the_agent_gives() -> None:
    """The agent passes the attempt's scratch (agent.recordsync), whatever the record store."""
    sub = rayjobs.render_submission(
        _spec(), "run1", attempt=2, run_dir="/agent/scratch/run1/a2", working_dir="/src"
    )
    env = sub.runtime_env["env_vars"]
    assert isinstance(env, dict)
    assert env["TAU_OUTPUT_DIR"] == "/agent/scratch/run1/a2"
    assert env["CHECKPOINT_PATH"] == "/agent/scratch/run1/a2/checkpoints"


def test_multi_worker_uses_the_launcher_with_a_small_driver() -> None:
    spec = _spec(policy={"workspace": "cv"}, compute={"workers": 2, "gpus": 4, "gpu_model": "H100"})
    sub = _submit(spec)
    assert sub.entrypoint == (
        "python -m taugrid.backends.programs.launch --workers 2 --gpus-per-worker 4 "
        "--cpus-per-worker 1 --accelerator H100 -- python train.py"
    )
    assert sub.entrypoint_num_gpus == 0 and 0 < sub.entrypoint_num_cpus < 1
    assert sub.entrypoint_resources == {}


def test_cpu_only_and_command_entrypoints() -> None:
    spec = _spec(policy={"workspace": "cv"}, run={"entrypoint": "bash run.sh", "args": ["a"]})
    sub = _submit(spec)
    assert sub.entrypoint == "bash run.sh a"
    assert sub.entrypoint_num_gpus == 0 and sub.entrypoint_resources == {}


def test_torchrun_and_ray_train_launchers() -> None:
    torch = _submit(_spec(execution={"launcher": "torchrun"}, compute={"workers": 1}))
    assert torch.entrypoint == "torchrun --nproc-per-node=1 train.py"
    train = _submit(_spec(execution={"launcher": "ray-train"}, compute={"workers": 2}))
    assert train.entrypoint == "python train.py" and train.entrypoint_num_gpus == 0
    assert train.runtime_env["env_vars"]["TAU_WORKERS"] == "2"  # type: ignore[index]


def test_input_env_names_each_dataset_and_keeps_urls() -> None:
    from taugrid.render import rayjobs as rj

    env = rj.input_env({"corpus": "datasets/corpus/v1", "web-2@v2": "s3://b/web"}, "/data/r1/")
    assert env["TAU_INPUT_CORPUS"] == "/data/r1/datasets/corpus/v1"
    assert env["TAU_INPUT_WEB_2"] == "s3://b/web"
    assert json.loads(env["TAU_INPUTS"]) == {
        "corpus": "/data/r1/datasets/corpus/v1",
        "web-2@v2": "s3://b/web",
    }
    assert rj.input_env({}, "/data") == {}


def test_rayservice_runs_the_serve_driver_and_its_replicas_take_the_gpus() -> None:
    spec = _spec(
        run={"entrypoint": "serve_app.py", "workload_kind": "rayservice"},
        serve={"import_path": "serve_app:app", "autoscaling": {"max_replicas": 3}},
    )
    sub = _submit(spec)
    assert sub.entrypoint == "python -m taugrid.backends.programs.serve_driver"
    assert (sub.entrypoint_num_gpus, sub.entrypoint_resources) == (0, {})
    cfg = json.loads(sub.runtime_env["env_vars"]["TAU_SERVE_CONFIG"])  # type: ignore[index]
    assert cfg["app"] == "train" and cfg["import_path"] == "serve_app:app"
    assert cfg["autoscaling"]["max_replicas"] == 3 and cfg["route_prefix"] == "/"
    assert (cfg["num_gpus"], cfg["num_cpus"], cfg["port"]) == (1, 8, 8000)
    assert cfg["resources"] == {"accelerator_type:A100-80G": 0.001}
    batch = _submit(_spec()).runtime_env["env_vars"]
    assert "TAU_SERVE_CONFIG" not in batch  # type: ignore[operator]


def test_a_capacity_selector_keeps_an_unpinned_entrypoint_and_its_workers_to_its_pools() -> None:
    spot = command.capacity_selector(("b-spot", "a-spot"), "spot")
    assert spot == {naming.POOL_LABEL: "in(a-spot,b-spot)"}
    assert command.capacity_selector(("a-spot",), "on-demand") == {naming.POOL_LABEL: "!in(a-spot)"}
    assert command.capacity_selector((), "spot") == {}  # no spot pools: any node
    assert command.capacity_selector(("a-spot",), "any") == {}  # a span of both
    train = _spec(execution={"launcher": "ray-train"}, compute={"workers": 2})
    sub = rayjobs.render_submission(
        train, "run1", attempt=1, run_dir="/d", working_dir="/src", selector=spot
    )
    assert sub.entrypoint_label_selector == spot
    assert json.loads(sub.runtime_env["env_vars"][jobenv.LABEL_SELECTOR]) == spot  # type: ignore[index]
    one = _spec(run={"entrypoint": "train.py"})
    pinned = rayjobs.render_submission(
        one, "run1", attempt=1, run_dir="/d", working_dir="/src", nodes=("n1",), selector=spot
    )
    assert pinned.entrypoint_label_selector == {command.NODE_ID_LABEL: "n1"}  # the hub's node
    assert jobenv.LABEL_SELECTOR not in _submit(one).runtime_env["env_vars"]  # type: ignore[operator]
