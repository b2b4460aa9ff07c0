"""The job's environment contract: the names of the variables every attempt runs with.

The platform sets them (``render.command.run_env``, ``render.rayjobs``,
``agent.records.podsync``, ``hub.serving.serving``, ``render.kuberay``) and the job reads them (the
in-job SDK, ``sdk.job.injob_env``; the serve driver; strays are found by them,
``agent.attempts.strays``). Each name is defined here once; this module imports nothing from
taugrid (an import-linter contract says so), so every layer may use it.

    TAU_RUN_ID          the run ID (the key of the run record)
    TAU_ATTEMPT         attempt number, an int starting at 1
    TAU_OUTPUT_DIR      where the attempt writes: its scratch (``agent.records.recordsync``)
    CHECKPOINT_PATH     where checkpoints go; default ``$TAU_OUTPUT_DIR/checkpoints``
    TAU_FENCING_TOKEN   this attempt's fencing token, an int (``sdk.job.injob_fence``)
    TAU_PARAMS          a sweep trial's parameter values, a JSON object
    TAU_LABEL_SELECTOR  the Ray node labels its own workers must have, a JSON object
"""

from __future__ import annotations

__all__ = [
    "ATTEMPT",
    "CHECKPOINT_PATH",
    "CPUS_PER_WORKER",
    "DEPLOYMENT",
    "DEV_CONFIG",
    "FENCING_TOKEN",
    "GPUS_PER_WORKER",
    "GPU_MODEL",
    "INPUTS",
    "INPUT_PREFIX",
    "LABEL_SELECTOR",
    "MODEL_PATH",
    "MODEL_RECORD",
    "OUTPUT_DIR",
    "PARAMS",
    "RESERVED",
    "RUN_ID",
    "SERVE_AUTOSCALING",
    "SERVE_CONFIG",
    "SERVE_PORT",
    "SERVE_REPLICAS",
    "TENSORBOARD",
    "WORKERS",
    "WORKSPACE",
]

RUN_ID = "TAU_RUN_ID"
ATTEMPT = "TAU_ATTEMPT"
OUTPUT_DIR = "TAU_OUTPUT_DIR"
CHECKPOINT_PATH = "CHECKPOINT_PATH"
FENCING_TOKEN = "TAU_FENCING_TOKEN"
"""Empty in a rendered submission; the agent fills in the attempt's token."""
WORKSPACE = "TAU_WORKSPACE"
WORKERS = "TAU_WORKERS"
GPUS_PER_WORKER = "TAU_GPUS_PER_WORKER"
CPUS_PER_WORKER = "TAU_CPUS_PER_WORKER"
GPU_MODEL = "TAU_GPU_MODEL"
PARAMS = "TAU_PARAMS"
"""A sweep trial's parameter values as a JSON object (``tau.params()``; the same values
are also appended to the entrypoint's arguments as ``--name=value``)."""
LABEL_SELECTOR = "TAU_LABEL_SELECTOR"
"""The Ray node labels the run's workers must have, a JSON object (``tau.label_selector()``):
the spot or on-demand node pools the hub placed it on, for a run that places its own
workers (Ray Train's ``ScalingConfig(label_selector=...)``); ``{}`` when any node will do."""
TENSORBOARD = "TAU_TENSORBOARD"
"""``1`` when tau.yaml asks for TensorBoard scalars (``metrics.tensorboard``): ``tau.log``
then also writes them under ``artifacts/tensorboard/``."""
INPUT_PREFIX = "TAU_INPUT_"
"""``TAU_INPUT_<NAME>``: where the region holds input dataset NAME."""
INPUTS = "TAU_INPUTS"
"""All input datasets' locations, a JSON object."""
DEV_CONFIG = "TAU_DEV_CONFIG"
"""An interactive session's orders, JSON (``hub.dev.sessions``; read by
``sdk.job.dev_session``): its name, the hub path Jupyter serves under, the idle limit."""
SERVE_CONFIG = "TAU_SERVE_CONFIG"
"""The serve driver's orders, JSON (``render.command.serve_config``)."""
SERVE_PORT = "TAU_SERVE_PORT"
SERVE_REPLICAS = "TAU_SERVE_REPLICAS"
SERVE_AUTOSCALING = "TAU_SERVE_AUTOSCALING"
DEPLOYMENT = "TAU_DEPLOYMENT"
MODEL_PATH = "TAU_MODEL_PATH"
"""Where a serving run's model is, as the app opens it."""
MODEL_RECORD = "TAU_MODEL_RECORD_PATH"
"""A serving run's model inside a run record, relative to the data root
(``<ws>/runs/<id>/...``); a pod's ``TAU_MODEL_PATH`` is it under the data mount."""

RESERVED = frozenset({RUN_ID, ATTEMPT, OUTPUT_DIR, FENCING_TOKEN, CHECKPOINT_PATH, PARAMS})
"""The names a tau.yaml's ``runtime.env`` may not set (``render.resolve`` refuses them)."""
