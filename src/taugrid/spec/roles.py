"""tau.yaml ``roles`` section: the Ray actors of a single-controller job and their resources.

Owns ``RoleSpec``. A single-controller job (RL post-training: rollout, critic, reward,
reference) runs one driver that owns the loop and starts each role as Ray actors;
``roles`` declares, per role name, what each actor of that role reserves and how Ray
restarts it. The job reads it through ``taugrid.sdk.job.roles`` (``actor_options``), so
the resources live in tau.yaml next to the rest of the run's sizing.
"""

from __future__ import annotations

import pydantic

__all__ = ["RoleSpec"]


class RoleSpec(pydantic.BaseModel):
    """One role: resources per actor and restart policy."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    cpus: float = pydantic.Field(default=1.0, ge=0, le=256)
    """CPUs per actor of this role."""
    gpus: float = pydantic.Field(default=0.0, ge=0, le=16)
    """GPUs per actor of this role (a fraction shares a GPU)."""
    replicas: int = pydantic.Field(default=1, ge=1, le=1024)
    """Actors of this role the driver starts."""
    max_restarts: int = pydantic.Field(default=3, ge=-1, le=1000)
    """Times Ray restarts an actor of this role that dies (-1: always, 0: never)."""
    max_task_retries: int = pydantic.Field(default=3, ge=-1, le=1000)
    """Times a call to an actor that died is retried on its restarted actor (-1: always)."""
