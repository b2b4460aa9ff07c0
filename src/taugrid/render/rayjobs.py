"""RunSpec → a Ray Jobs API submission, for the embedded (local Ray) backend.

Owns ``RayJobSubmission``, the exact arguments of ``JobSubmissionClient.submit_job``,
and ``render_submission``. The backend only forwards the fields; the decisions
(entrypoint command, resources, environment) live here and in ``render.command``.

Invariants:
- ``submission_id`` is a pure function of ``(run_id, attempt)``: ``tau-<run>-a<n>``,
  so a retried submit of the same attempt is idempotent in Ray.
- ``runtime_env.env_vars`` holds ``TAU_RUN_ID``, ``TAU_ATTEMPT``, ``TAU_OUTPUT_DIR``
  (the run directory unless ``storage.output`` is set), ``CHECKPOINT_PATH``
  (``<run_dir>/checkpoints`` unless ``checkpoint_path`` is set) and the key
  ``TAU_FENCING_TOKEN`` with an empty value, which the caller fills in, as it does
  ``TAU_INPUT_<NAME>`` (``input_env``: where the region holds each input dataset).
- ``metadata`` values are strings (a Ray requirement).
"""

from __future__ import annotations

import json
import re

import pydantic

from taugrid.record import jobenv, layout
from taugrid.render import command, naming, runspec

__all__ = [
    "RayJobSubmission",
    "input_env",
    "render_submission",
    "submission_id",
]


class RayJobSubmission(pydantic.BaseModel):
    """Arguments of one ``JobSubmissionClient.submit_job`` call."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    submission_id: str
    entrypoint: str
    entrypoint_num_cpus: float = 0
    entrypoint_num_gpus: float = 0
    entrypoint_memory: int = 0
    entrypoint_resources: dict[str, float] = pydantic.Field(default_factory=dict)
    entrypoint_label_selector: dict[str, str] = pydantic.Field(default_factory=dict)
    runtime_env: dict[str, object] = pydantic.Field(default_factory=dict)
    metadata: dict[str, str] = pydantic.Field(default_factory=dict)

    def with_fencing_token(self, token: str) -> RayJobSubmission:
        """A copy whose ``TAU_FENCING_TOKEN`` env var is ``token``."""
        return self.with_env({jobenv.FENCING_TOKEN: token})

    def with_env(self, extra: dict[str, str]) -> RayJobSubmission:
        """A copy with ``extra`` added to its env vars (known only where it runs)."""
        current = self.runtime_env.get("env_vars")
        env = {**(dict(current) if isinstance(current, dict) else {}), **extra}
        return self.model_copy(update={"runtime_env": {**self.runtime_env, "env_vars": env}})


def input_env(inputs: dict[str, str], data_root: str | None) -> dict[str, str]:
    """``TAU_INPUT_<NAME>`` per input dataset (name upper-cased, non-alphanumerics as
    ``_``, version dropped) and ``TAU_INPUTS`` (JSON of them all): an absolute path
    under ``data_root`` for a replica on the region's storage, the URL for one in
    object storage."""
    paths = {
        name: loc if "://" in loc or data_root is None else f"{data_root.rstrip('/')}/{loc}"
        for name, loc in sorted(inputs.items())
    }
    env = {
        jobenv.INPUT_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", name.split("@")[0]).upper(): path
        for name, path in paths.items()
    }
    return {**env, jobenv.INPUTS: json.dumps(paths)} if paths else {}


def submission_id(run_id: str, attempt: int) -> str:
    """The deterministic Ray submission ID of one attempt of a run."""
    return f"tau-{run_id}-a{attempt}"


def render_submission(
    spec: runspec.RunSpec,
    run_id: str,
    *,
    attempt: int,
    run_dir: str,
    working_dir: str,
    nodes: tuple[str, ...] = (),
    selector: dict[str, str] | None = None,
) -> RayJobSubmission:
    """The Ray Jobs submission of attempt ``attempt`` of run ``run_id``.

    ``run_dir`` is the directory the job writes its outputs into: the attempt's scratch
    on the agent's machine (``agent.records.recordsync`` uploads it into the record store);
    ``working_dir`` the code directory or URI to ship as the job's working_dir;
    ``nodes`` the node ID of each worker as the hub bound them (``command.plan``);
    ``selector`` the node labels of the capacity it was placed on
    (``command.capacity_selector``): the entrypoint's when not pinned to a node, and
    ``TAU_LABEL_SELECTOR`` for the workers a Ray Train script places itself.
    """
    entry = command.plan(spec, nodes)
    ckpt = f"{run_dir.rstrip('/')}/{layout.CHECKPOINTS_DIR}"
    env = command.run_env(spec, run_id, run_dir=run_dir, checkpoint_default=ckpt)
    env = {**env, jobenv.ATTEMPT: str(attempt), jobenv.FENCING_TOKEN: ""}
    if selector:
        env[jobenv.LABEL_SELECTOR] = json.dumps(selector, sort_keys=True)
    if spec.serve is not None:  # the serve driver's orders (backends.serve_driver)
        env[jobenv.SERVE_CONFIG] = json.dumps(command.serve_config(spec))
    metadata = {
        naming.LABEL_RUN_ID: run_id,
        naming.LABEL_WORKSPACE: spec.workspace,
        naming.LABEL_NAME: spec.name,
        "taugrid.io/attempt": str(attempt),
        "taugrid.io/queue": spec.queue,
        naming.ANNOTATION_CONFIG_HASH: spec.config_hash,
        naming.ANNOTATION_PROFILE_HASH: spec.profile_hash,
    }
    return RayJobSubmission(
        submission_id=submission_id(run_id, attempt),
        entrypoint=entry.command,
        entrypoint_num_cpus=entry.num_cpus,
        entrypoint_num_gpus=entry.num_gpus,
        entrypoint_memory=entry.memory_bytes or 0,
        entrypoint_resources=entry.resources,
        entrypoint_label_selector=entry.label_selector or dict(selector or {}),
        runtime_env=command.runtime_env(spec, env, working_dir),
        metadata=metadata,
    )
