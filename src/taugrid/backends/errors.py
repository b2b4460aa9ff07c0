"""The Ray boundary's exception hierarchy: every error a backend raises on purpose.

    taugrid.errors.TauError
    ├── UserError
    │   ├── JobNotFound              no job with that submission id on this cluster
    │   └── SubmissionRejected       Ray refused the submission (bad runtime_env,
    │       └── DuplicateSubmission  missing working_dir, ...) / the id is taken
    └── SystemFault
        ├── RayUnavailable           retryable=True: dashboard/GCS unreachable, timed out
        ├── RayRequestFailed         retryable=False: Ray answered with an unexpected error
        ├── LocalClusterError        retryable=False: a local Ray cluster would not start
        │                            or stop (``ray_local``)
        └── KubernetesUnavailable    retryable=True: the API server is unreachable
    (SubmissionRejected) └── KubernetesRejected: the API server refused an object

Every raise chains its cause (``raise X(...) from exc``) so the original Ray or HTTP
error stays in the traceback for logs, while callers branch on these classes only:
retry ``SystemFault`` with ``retryable``, report ``UserError`` to the user.
"""

from __future__ import annotations

from taugrid.errors import SystemFault, UserError

__all__ = [
    "DuplicateSubmission",
    "JobNotFound",
    "KubernetesRejected",
    "KubernetesUnavailable",
    "LocalClusterError",
    "RayRequestFailed",
    "RayUnavailable",
    "SubmissionRejected",
]


class JobNotFound(UserError):
    """The cluster knows no job with this submission id."""

    def __init__(self, job_id: str, address: str) -> None:
        super().__init__(
            f"no Ray job '{job_id}' on the cluster at {address}",
            hint="check the submission id; jobs are per cluster and vanish when it restarts",
        )
        self.job_id = job_id


class SubmissionRejected(UserError):
    """Ray refused a submission for a reason the submitter can fix."""


class DuplicateSubmission(SubmissionRejected):
    """A job with this submission id already exists (a retried submit may have landed)."""

    def __init__(self, job_id: str) -> None:
        super().__init__(
            f"a Ray job with submission id '{job_id}' already exists",
            hint="use status() on that id, or submit with a new id",
        )
        self.job_id = job_id


class RayUnavailable(SystemFault):
    """The Ray dashboard/GCS could not be reached or did not answer in time."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(
            message, hint or "is the Ray cluster up? retry in a few seconds", retryable=True
        )


class RayRequestFailed(SystemFault):
    """Ray answered, but with an error that retrying will not fix."""


class LocalClusterError(SystemFault):
    """A local Ray cluster could not be started, grown or stopped."""


class KubernetesUnavailable(SystemFault):
    """The Kubernetes API server could not be reached or did not answer in time."""

    def __init__(self, message: str) -> None:
        super().__init__(
            message,
            "is the API server up and the kubeconfig's server address right? retry shortly",
            retryable=True,
        )


class KubernetesRejected(SubmissionRejected):
    """The API server refused an object (invalid, forbidden, or refused by a webhook)."""
