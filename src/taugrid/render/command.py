"""How a RunSpec's entrypoint is started, and the environment every run gets.

Owns three things both backends share (KubeRay objects and Ray Jobs submissions):

- ``user_command``: the researcher's command as argv. The entrypoint is either a script
  path (one word ending in ``.py``: ``train.py`` → ``python train.py ARGS``) or a
  command (``python train.py``, ``bash run.sh``: split with shell rules, ``run.args``
  appended). ``torchrun --nproc-per-node=G ...`` wraps either for the torchrun launcher;
- ``plan``: where the Ray Jobs entrypoint runs and what it reserves. One worker: the
  entrypoint itself takes the worker's resources (GPUs, CPUs, memory and, with a GPU
  model, a sliver of the ``accelerator_type:<model>`` resource). Several workers: the
  entrypoint is ``python -m taugrid.backends.programs.launch`` (a placement group, one process
  per worker) and the driver takes only ``DRIVER_CPUS``. Ray Train/Tune scripts place
  their own workers, so their driver is small too and they read the sizes from
  ``TAU_WORKERS``/``TAU_GPUS_PER_WORKER``/``TAU_CPUS_PER_WORKER``; so does a
  ``pipeline``'s driver, whose stages are Ray Data actor pools. A rayservice's
  entrypoint is ``python -m taugrid.backends.programs.serve_driver`` (small too: the Serve
  replicas take the resources), configured by ``TAU_SERVE_CONFIG`` (``serve_config``,
  set by ``render.rayjobs``). With the hub's node binding (``nodes``, one node ID per
  worker) the worker is pinned there: one worker by a label selector on Ray's
  ``ray.io/node-id`` node label, several by ``launch --nodes`` (one bundle label
  selector each); Ray Train/Tune, pipelines and Serve are not pinned: on a cluster with
  spot pools their driver gets ``capacity_selector`` (the pools of the capacity the hub
  placed the run on, by the ``taugrid.io/pool`` label), and their workers get it through
  ``TAU_LABEL_SELECTOR`` (``tau.label_selector()``);
- ``run_env``: ``TAU_RUN_ID``, ``TAU_OUTPUT_DIR``, ``CHECKPOINT_PATH``, sizes, then the
  researcher's ``runtime.env``.
"""

from __future__ import annotations

import dataclasses
import shlex

from taugrid.record import jobenv
from taugrid.render import naming, runspec
from taugrid.spec import models as sm
from taugrid.spec import workdir as spec_workdir

__all__ = [
    "ACCELERATOR_PREFIX",
    "DRIVER_CPUS",
    "LAUNCH_MODULE",
    "NODE_ID_LABEL",
    "RAYLET_REGISTER_S",
    "RAY_NODE_ENV",
    "SERVE_DRIVER_MODULE",
    "SERVE_PORT_DEFAULT",
    "EntrypointPlan",
    "accelerator_resource",
    "capacity_selector",
    "pinnable",
    "plan",
    "run_env",
    "runtime_env",
    "serve_config",
    "user_command",
]

LAUNCH_MODULE = "taugrid.backends.programs.launch"
NODE_ID_LABEL = "ray.io/node-id"  # Ray's built-in label of every node
RAYLET_REGISTER_S = 120
"""How long a Ray node TauGrid starts may take to register with its head: Ray gives a
raylet 30 s by default, and on a busy small node it exits after that (its message says
to raise this); a pod's head then crash-loops. Every wait for a started node allows it."""
RAY_NODE_ENV = {"RAY_raylet_start_wait_time_s": str(RAYLET_REGISTER_S)}
"""The environment of every Ray node TauGrid starts (on this machine or in a pod)."""
SERVE_DRIVER_MODULE = "taugrid.backends.programs.serve_driver"
SERVE_PORT_DEFAULT = 8000
"""Port of a cluster's Serve HTTP proxy unless the run's env sets ``TAU_SERVE_PORT``."""
DRIVER_CPUS = 0.1
ACCELERATOR_PREFIX = "accelerator_type:"
_ACCELERATOR_SLIVER = 0.001


@dataclasses.dataclass(frozen=True)
class EntrypointPlan:
    """The Ray Jobs entrypoint: its shell command and what it reserves."""

    argv: tuple[str, ...]
    num_cpus: float
    num_gpus: float
    memory_bytes: int | None
    resources: dict[str, float]
    driver_only: bool = False  # the entrypoint only coordinates; workers do the work
    label_selector: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def command(self) -> str:
        """``argv`` as one shell-quoted string (what Ray Jobs runs)."""
        return shlex.join(self.argv)


def accelerator_resource(gpu_model: str) -> str:
    """The Ray custom resource naming a GPU model: ``accelerator_type:A100-80G``."""
    return f"{ACCELERATOR_PREFIX}{gpu_model}"


def user_command(spec: runspec.RunSpec) -> list[str]:
    """The researcher's command for one worker, as argv."""
    script = spec_workdir.script_path(spec.entrypoint)  # the rule the local check uses
    is_script = script is not None
    program = [script] if script is not None else shlex.split(spec.entrypoint)
    if spec.launcher is sm.Launcher.TORCHRUN:
        nproc = max(spec.gpus_per_worker, 1)
        prefix = ["torchrun", f"--nproc-per-node={nproc}"]
        if spec.workers > 1:
            prefix.append(f"--nnodes={spec.workers}")
        if not is_script:
            prefix.append("--no-python")
        return [*prefix, *program, *spec.args]
    return [*(["python"] if is_script else []), *program, *spec.args]


def pinnable(spec: runspec.RunSpec) -> bool:
    """Whether TauGrid starts the run's workers itself (and so can pin them to nodes):
    not Ray Train scripts, pipelines or Serve apps, which place their own workers."""
    own = spec.launcher is sm.Launcher.RAY_TRAIN
    return not own and spec.workload_kind is not sm.WorkloadKind.PIPELINE and spec.serve is None


def plan(spec: runspec.RunSpec, nodes: tuple[str, ...] = ()) -> EntrypointPlan:
    """Where the entrypoint runs and what it reserves (see the module docstring).

    ``nodes``: the node ID of each worker, as the hub bound them (empty: Ray places them).
    """
    if spec.serve is not None:
        driver = ("python", "-m", SERVE_DRIVER_MODULE)
        return EntrypointPlan(driver, DRIVER_CPUS, 0, None, {}, driver_only=True)
    argv = user_command(spec)
    if not pinnable(spec):
        return EntrypointPlan(tuple(argv), DRIVER_CPUS, 0, None, {}, driver_only=True)
    if spec.workers == 1:
        resources = {}
        if spec.gpu_model and spec.gpus_per_worker > 0:
            resources = {accelerator_resource(spec.gpu_model): _ACCELERATOR_SLIVER}
        return EntrypointPlan(
            tuple(argv),
            spec.cpus_per_worker,
            spec.gpus_per_worker,
            spec.memory_per_worker_bytes,
            resources,
            label_selector={NODE_ID_LABEL: nodes[0]} if len(nodes) == 1 else {},
        )
    launch = [
        "python",
        "-m",
        LAUNCH_MODULE,
        "--workers",
        str(spec.workers),
        "--gpus-per-worker",
        str(spec.gpus_per_worker),
        "--cpus-per-worker",
        f"{spec.cpus_per_worker:g}",
    ]
    if spec.gpu_model and spec.gpus_per_worker > 0:
        launch += ["--accelerator", spec.gpu_model]
    if len(nodes) == spec.workers:
        launch += ["--nodes", ",".join(nodes)]
    return EntrypointPlan((*launch, "--", *argv), DRIVER_CPUS, 0, None, {}, driver_only=True)


def run_env(
    spec: runspec.RunSpec, run_id: str, *, run_dir: str, checkpoint_default: str
) -> dict[str, str]:
    """Environment of every process of a run; TauGrid's keys first, then ``runtime.env``."""
    env = {
        jobenv.RUN_ID: run_id,
        jobenv.WORKSPACE: spec.workspace,
        # an object-store output is filled by the hub from the record (hub.results)
        jobenv.OUTPUT_DIR: run_dir
        if not spec.output_dir or "://" in spec.output_dir
        else spec.output_dir,
        jobenv.CHECKPOINT_PATH: spec.checkpoint_path or checkpoint_default,
        jobenv.WORKERS: str(spec.workers),
        jobenv.GPUS_PER_WORKER: str(spec.gpus_per_worker),
        jobenv.CPUS_PER_WORKER: f"{spec.cpus_per_worker:g}",
    }
    if spec.gpu_model:
        env[jobenv.GPU_MODEL] = spec.gpu_model
    if spec.tensorboard:
        env[jobenv.TENSORBOARD] = "1"
    # resolve() rejects tau.yaml env that overrides TauGrid's reserved keys.
    return {**env, **spec.env}


def serve_config(spec: runspec.RunSpec) -> dict[str, object]:
    """What the serve driver deploys: the app named after the run, one replica per
    worker (or autoscaling between its bounds), each with a worker's GPUs and CPUs
    (and a sliver of the GPU model's resource, as a one-worker run's entrypoint)."""
    assert spec.serve is not None
    auto = spec.serve.autoscaling
    return {
        "app": spec.name,
        "import_path": spec.serve.import_path,
        "route_prefix": spec.serve.route_prefix,
        "num_replicas": spec.workers,
        "autoscaling": auto.model_dump(mode="json") if auto else None,
        "num_gpus": spec.gpus_per_worker,
        "num_cpus": spec.cpus_per_worker,
        "resources": {accelerator_resource(spec.gpu_model): _ACCELERATOR_SLIVER}
        if spec.gpu_model and spec.gpus_per_worker > 0
        else {},
        "port": int(spec.env.get(jobenv.SERVE_PORT, SERVE_PORT_DEFAULT)),
    }


def runtime_env(
    spec: runspec.RunSpec, env: dict[str, str], working_dir: str | None
) -> dict[str, object]:
    """A Ray ``runtime_env``: working_dir (with excludes), pip and env_vars."""
    out: dict[str, object] = {}
    if working_dir is not None:
        out["working_dir"] = working_dir
        if spec.excludes:
            out["excludes"] = list(spec.excludes)
    if spec.pip:
        out["pip"] = list(spec.pip)
    out["env_vars"] = dict(env)
    return out


def capacity_selector(spot_pools: tuple[str, ...], capacity: str | None) -> dict[str, str]:
    """The Ray label selector of the node pools of ``capacity`` on a cluster whose spot
    pools are ``spot_pools`` (a node without the pool label is on-demand): spot → in them,
    on-demand → not in them; empty without spot pools or a single capacity."""
    if not spot_pools or capacity not in (sm.Capacity.SPOT.value, sm.Capacity.ON_DEMAND.value):
        return {}
    op = "in" if capacity == sm.Capacity.SPOT.value else "!in"
    return {naming.POOL_LABEL: f"{op}({','.join(sorted(spot_pools))})"}
