"""How the agent tells a job lost with its node from a job whose code failed.

Pure: Ray's job status as its JobDetails give it (error type, exit code, message), no
cluster; the real raylet kill is ``tests/hub/test_fencing_ray.py``.
"""

from __future__ import annotations

import pytest

from taugrid.agent.attempts import tracker
from taugrid.backends import base


def _failed(error_type: str | None, exit_code: int | None, message: str = "") -> base.JobStatus:
    return base.JobStatus(
        job_id="j",
        state=base.JobState.FAILED,
        message=message,
        exit_code=exit_code,
        error_type=error_type,
    )


@pytest.mark.parametrize(
    "error_type", ["JOB_SUPERVISOR_ACTOR_DIED", "JOB_SUPERVISOR_ACTOR_UNKNOWN_FAILURE"]
)
def test_a_lost_supervisor_is_the_nodes_failure_whatever_its_message(error_type: str) -> None:
    # the message of the raylet kill CI saw named none of the node-death words
    status = _failed(error_type, None, "Unexpected error occurred: Running entrypoint")
    assert tracker._node_died(status, status.message)


def test_the_codes_own_exit_is_not_a_node_failure() -> None:
    status = _failed(
        "JOB_ENTRYPOINT_COMMAND_ERROR", 3, "Job entrypoint command failed with exit code 3"
    )
    assert not tracker._node_died(status, status.message)


def test_node_death_words_in_the_message_still_count() -> None:
    status = _failed(None, None, "The node with node id abc has died")
    assert tracker._node_died(status, status.message)
