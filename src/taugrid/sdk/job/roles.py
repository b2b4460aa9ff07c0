"""In-job access to tau.yaml's ``roles``: Ray actor options of each role of a job.

A single-controller driver starts its roles as Ray actors with the resources and
restart policy tau.yaml declares::

    from taugrid.sdk import roles
    critic = Critic.options(**roles.actor_options("critic")).remote()

``actor_options`` reads the tau.yaml in the job's working directory (the code TauGrid
shipped) and returns ``num_cpus``, ``num_gpus``, ``max_restarts`` and
``max_task_retries``. A role tau.yaml does not declare is a ``UserError`` that names
the roles it does declare.
"""

from __future__ import annotations

import functools
from typing import Any

from taugrid import errors
from taugrid.spec import load
from taugrid.spec import roles as spec_roles

__all__ = ["actor_options", "declared"]


@functools.cache
def declared(config: str = "tau.yaml") -> dict[str, spec_roles.RoleSpec]:
    """The roles tau.yaml at ``config`` declares, by name."""
    return dict(load.load_tau_yaml(config).roles)


def actor_options(role: str, config: str = "tau.yaml") -> dict[str, Any]:
    """Ray ``.options(...)`` for an actor of ``role`` (see the module docstring)."""
    roles = declared(config)
    spec = roles.get(role)
    if spec is None:
        raise errors.UserError(
            f"role {role!r} is not declared in {config} (roles: {sorted(roles) or 'none'})",
            f"add 'roles: {{{role}: {{cpus: 1, gpus: 0}}}}' to {config}",
        )
    return {
        "num_cpus": spec.cpus,
        "num_gpus": spec.gpus,
        "max_restarts": spec.max_restarts,
        "max_task_retries": spec.max_task_retries,
    }
