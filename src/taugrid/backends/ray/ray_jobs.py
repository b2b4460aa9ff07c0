"""``RayBackend``: the ``Backend`` ABC over the Ray Jobs API of one Ray cluster.

Owns submitting, watching, stopping and accounting for Ray Jobs on a cluster whose
dashboard is at ``http://IP:PORT``. Submitting goes through
``ray.job_submission.JobSubmissionClient`` (it packages and uploads a local
``runtime_env.working_dir``); every read path (status, logs, stop, inventory,
placement, release) is plain HTTP with timeouts (``ray_http``), so a watcher stays
light and never becomes a Ray driver.

Semantics worth knowing:

- ``status().exit_code`` is Ray's ``driver_exit_code`` (the entrypoint's exit code),
  else parsed from the failure message, else 0 for SUCCEEDED.
- A job whose entrypoint resources no node can ever hold is *accepted* and stays
  PENDING with Ray's "waiting for resources" message — Ray itself fails it after
  ``RAY_JOB_START_TIMEOUT_SECONDS`` (15 min by default). ``infeasible()`` tells the
  caller up front, from the inventory, that no alive node is big enough.
- Errors follow ``taugrid.backends.errors``: an unreachable dashboard/GCS is a
  retryable ``RayUnavailable``; an unknown job id is ``JobNotFound`` (a ``UserError``).
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any, ClassVar

from taugrid import errors as tau_errors
from taugrid.backends import base, errors
from taugrid.backends.ray import ray_http, ray_state

__all__ = ["RayBackend", "exit_code_from"]

_EXIT_RE = re.compile(r"exit code (-?\d+)")


def exit_code_from(details: dict[str, Any]) -> int | None:
    """The entrypoint's exit code from Ray's JobDetails, when it can be known."""
    code = details.get("driver_exit_code")
    if code is not None:
        return int(code)
    if details.get("status") == "SUCCEEDED":
        return 0
    m = _EXIT_RE.search(details.get("message") or "")
    return int(m.group(1)) if m else None


def _time(ms: int | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC) if ms else None


def _absolute_working_dir(runtime_env: dict[str, Any]) -> dict[str, Any]:
    """Resolve a local working_dir against the caller's cwd, and check it exists."""
    wd = runtime_env.get("working_dir")
    if not isinstance(wd, str) or "://" in wd:
        return runtime_env
    path = Path(wd).expanduser().resolve()
    if not path.exists():
        raise errors.SubmissionRejected(
            f"runtime_env working_dir '{wd}' does not exist (resolved to {path})",
            hint="point working_dir at a directory or .zip that exists on the submitting host",
        )
    return {**runtime_env, "working_dir": str(path)}


class RayBackend(base.Backend):
    """Runs submissions as Ray Jobs on the cluster whose dashboard is ``address``.

    ``gcs_address`` (``IP:PORT``), when given, makes ``inventory()`` read per-node
    availability fresh from the GCS instead of the dashboard's ~5 s-old report.
    ``emulated_gpus`` is echoed into the inventory (Ray cannot tell).
    """

    name: ClassVar[str] = "ray"
    capabilities: ClassVar[frozenset[base.Capability]] = frozenset(base.Capability) - {
        base.Capability.RUN_SPEC,  # it takes Ray Jobs submissions
        base.Capability.QUEUES,  # Ray has no queues of its own
    }

    def __init__(
        self,
        address: str,
        *,
        gcs_address: str | None = None,
        emulated_gpus: bool = False,
        timeout_s: float = 10.0,
    ) -> None:
        self.address = ray_http.normalize_address(address)
        self.gcs_address = gcs_address
        self.emulated_gpus = emulated_gpus
        self._timeout_s = timeout_s
        self._dashboard = ray_http.DashboardClient(self.address, timeout_s=timeout_s)
        self._jobs_client: Any = None

    def close(self) -> None:
        """Release HTTP connections."""
        self._dashboard.close()

    def _client(self) -> Any:
        """The Jobs SDK client, created on first submit (it checks the dashboard)."""
        if self._jobs_client is None:
            self._dashboard.version()  # fail fast, with a timeout, if unreachable
            from ray.job_submission import JobSubmissionClient  # heavy: only to submit

            try:
                self._jobs_client = _timed(JobSubmissionClient)(
                    self.address, headers=ray_http.auth_headers()
                )
            except ConnectionError as exc:
                raise errors.RayUnavailable(f"Ray Jobs API at {self.address}: {exc}") from exc
        return self._jobs_client

    def submit(self, submission: base.Submission | Any) -> str:
        """Submit a Ray Job; returns the submission id."""
        sub = base.Submission.coerce(submission)
        runtime_env = _absolute_working_dir(dict(sub.runtime_env))
        client = self._client()
        try:
            return str(
                client.submit_job(
                    entrypoint=sub.entrypoint,
                    submission_id=sub.submission_id,
                    runtime_env=runtime_env or None,
                    metadata=dict(sub.metadata) or None,
                    entrypoint_num_cpus=sub.entrypoint_num_cpus,
                    entrypoint_num_gpus=sub.entrypoint_num_gpus,
                    entrypoint_memory=sub.entrypoint_memory,
                    entrypoint_resources=dict(sub.entrypoint_resources) or None,
                    entrypoint_label_selector=dict(sub.entrypoint_label_selector) or None,
                )
            )
        except Exception as exc:
            raise _submit_error(sub.submission_id, self.address, exc) from exc

    def status(self, job_id: str) -> base.JobStatus:
        """The job's state, message, exit code and times."""
        details = self._dashboard.job(job_id)
        return base.JobStatus(
            job_id=job_id,
            state=base.JobState(details["status"]),
            message=details.get("message") or "",
            exit_code=exit_code_from(details),
            start_time=_time(details.get("start_time")),
            end_time=_time(details.get("end_time")),
            driver_node_id=details.get("driver_node_id"),
            error_type=details.get("error_type"),
        )

    def logs(self, job_id: str) -> str:
        """The driver's log so far (entrypoint stdout/stderr plus forwarded worker logs)."""
        return self._dashboard.job_logs(job_id)

    def stop(self, job_id: str) -> None:
        """Ask Ray to stop the job (SIGTERM, then SIGKILL after Ray's grace period)."""
        self._dashboard.stop_job(job_id)

    def inventory(self) -> base.ClusterInventory:
        """All nodes (alive and dead) with totals and what is available now."""
        rows = self._dashboard.list_state("nodes", detail=True)
        if self.gcs_address:
            usage = ray_state.usage_from_gcs(self.gcs_address, self._timeout_s)
            return ray_state.build_inventory(
                rows, gcs_usage=usage, emulated_gpus=self.emulated_gpus
            )
        by_node = ray_state.usage_from_dashboard(self._dashboard)
        return ray_state.build_inventory(
            rows, dashboard_usage=by_node, emulated_gpus=self.emulated_gpus
        )

    def job_nodes(self, job_id: str) -> base.JobPlacement:
        """Driver node plus the nodes of the job's alive actors and running tasks."""
        return ray_state.job_placement(self._dashboard, job_id, self._dashboard.job(job_id))

    def release_check(self, job_id: str) -> bool:
        """True when the job is terminal and none of its driver/actors/tasks/PGs is alive."""
        details = self._dashboard.job(job_id)
        if not base.JobState(details["status"]).terminal:
            return False
        return ray_state.job_released(self._dashboard, job_id, details)

    def infeasible(self, submission: base.Submission | Any) -> str | None:
        """Why no alive node could ever hold the entrypoint's resources, or None."""
        sub = base.Submission.coerce(submission)
        need = dict(sub.entrypoint_resources)
        for key, value in (
            ("CPU", sub.entrypoint_num_cpus),
            ("GPU", sub.entrypoint_num_gpus),
            ("memory", sub.entrypoint_memory),
        ):
            if value:
                need[key] = float(value)
        if not need:
            return None
        for node in self.inventory().alive_nodes:
            if all(node.resources_total.get(k, 0.0) >= v for k, v in need.items()):
                return None
        return f"no alive node has {need} in total"


SUBMIT_TIMEOUT_S = (10.0, 120.0)
"""Connect and read timeouts of the Jobs SDK's requests (it sets none: a dashboard that
stops answering would hang the agent's loop for good). The read timeout covers uploading
a large working_dir."""


def _timed(cls: Any) -> Any:
    """``JobSubmissionClient`` whose every request has ``SUBMIT_TIMEOUT_S``."""

    class _Timed(cls):  # type: ignore[misc]
        def _do_request(self, *args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", SUBMIT_TIMEOUT_S)
            return super()._do_request(*args, **kwargs)

    return _Timed


def _submit_error(job_id: str, address: str, exc: Exception) -> Exception:
    """Map a Jobs SDK exception onto the Ray boundary hierarchy."""
    text = str(exc)
    if isinstance(exc, tau_errors.TauError):
        return exc
    if "already exists" in text:
        return errors.DuplicateSubmission(job_id)
    if isinstance(exc, ConnectionError | OSError) or "Connection" in type(exc).__name__:
        return errors.RayUnavailable(f"Ray Jobs API at {address} unreachable: {text}")
    if isinstance(exc, ValueError | TypeError) or "status code 400" in text:
        return errors.SubmissionRejected(
            f"Ray rejected submission '{job_id}': {text}",
            hint="check the entrypoint, runtime_env and resources of the submission",
        )
    return errors.RayRequestFailed(f"submitting '{job_id}' to {address} failed: {text}")
