"""Known Ray and Kubernetes failure texts become one line each (``lifecycle.failure_shapes``).

The texts are built from the strings Ray 2.60 itself produces (``ray/exceptions.py``'s
``ActorDiedError``, the GCS's node-death and worker-death messages, the raylet's
memory monitor) and from the kubelet's and API server's; each becomes one line that
names what happened and where, without a tab, a line break, a frame or an object repr.
"""

from __future__ import annotations

import pytest

from taugrid.lifecycle import reasons

NODE = "3f2a9c01d4e5b6a7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7"
# The JobSupervisor actor's death when its node went away: ActorDiedError's dump.
SUPERVISOR_NODE_DIED = f"""Job supervisor actor died: \
The actor died unexpectedly before finishing this task.
\tclass_name: JobSupervisor
\tactor_id: 9b1c2d3e4f5a6b7c8d9e0f1a02000000
\tpid: 41187
\tname: _ray_internal_job_actor_tau-outage-1a2b3c-a1
\tnamespace: SUPERVISOR_ACTOR_RAY_NAMESPACE
\tip: 127.0.0.2
The actor died because its node has died. Node Id: {NODE}
\tthe actor's node was terminated unexpectedly: \
health check failed due to missing too many heartbeats"""

HEARTBEATS = (
    f"The node with node id: {NODE} and address: 127.0.0.3 and node name: 127.0.0.3 has "
    "been marked dead because the detector has missed too many heartbeats from it. This "
    "can happen when a \t(1) raylet crashes unexpectedly (OOM, etc.) \n\t(2) raylet has "
    "lagging heartbeats due to slow network or busy workload."
)

WORKER_DIED = """The actor died unexpectedly before finishing this task.
\tclass_name: RayTrainWorker
\tactor_id: 0a1b2c3d4e5f60718293a4b501000000
\tpid: 52210
\tip: 127.0.0.2
The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR \
Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. \
There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer \
due to high memory usage."""

TRAIN_TASK = """Training worker failed:
ray.exceptions.RayTaskError(RuntimeError): ray::_RayTrainWorker__execute.get_next() \
(pid=52210, ip=127.0.0.2, actor_id=0a1b2c3d4e5f60718293a4b501000000, \
repr=<ray.train._internal.worker_group.RayTrainWorker object at 0x7f3a2c1d9e50>)
  File "/tmp/ray/session/runtime_resources/working_dir/train.py", line 41, in train_loop
    raise RuntimeError("NaN loss at step 212")
RuntimeError: NaN loss at step 212"""

OOM = f"""ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.
Memory on the node (IP: 127.0.0.2, ID: {NODE}) where the task (task ID: ffff, \
name=JobSupervisor.__init__, pid=41187, memory used=6.10GB) was running was 7.60GB / 8.00GB \
(0.95), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: abc) \
because it was the most recently scheduled task."""

IMAGE = (
    'Back-off pulling image "127.0.0.9:5000/taugrid:nope": ImagePullBackOff: rpc error: '
    "code = NotFound desc = failed to pull and unpack image"
)

QUOTA = (
    'pods "tau-x-head" is forbidden: exceeded quota: gpu-quota, requested: '
    "requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=4, limited: "
    "requests.nvidia.com/gpu=4"
)


@pytest.mark.parametrize(
    ("text", "kind", "want"),
    [
        (
            SUPERVISOR_NODE_DIED,
            "node_failure",
            "node lost: node 3f2a9c01d4e5 (127.0.0.2): health check failed due to missing "
            "too many heartbeats",
        ),
        (
            HEARTBEATS,
            "node_failure",
            "node lost: node 3f2a9c01d4e5 (127.0.0.3) stopped sending heartbeats (its raylet "
            "crashed, was killed, or was too busy to answer)",
        ),
        (
            WORKER_DIED,
            "exit_nonzero",
            "worker exited: RayTrainWorker (pid 52210 on 127.0.0.2), SYSTEM_ERROR: Worker "
            "unexpectedly exits with a connection error code 2",
        ),
        (
            TRAIN_TASK,
            "exit_nonzero",
            "worker exited: RayTrainWorker (pid 52210 on 127.0.0.2): RuntimeError: NaN loss "
            "at step 212",
        ),
        (
            OOM,
            "exit_nonzero",
            "out of memory on node 3f2a9c01d4e5 (127.0.0.2): 7.60GB of 8.00GB used; Ray "
            "killed the worker (ask for more: compute.memory)",
        ),
        (
            IMAGE,
            "submit_error",
            "image pull failed (ImagePullBackOff): 127.0.0.9:5000/taugrid:nope: the node "
            "cannot pull it (check the image name and tag, and that the registry is "
            "reachable from the node)",
        ),
        (
            QUOTA,
            "submit_error",
            "quota exceeded: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=4, "
            "used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4",
        ),
    ],
)
def test_a_known_shape_is_one_line_for_people(text: str, kind: str, want: str) -> None:
    got = reasons.summary(kind, text)
    assert got == want
    assert "\t" not in got and "\n" not in got and "repr=" not in got and "object at" not in got


def test_an_unknown_text_keeps_the_exit_code_and_last_line() -> None:
    text = 'Traceback (most recent call last):\n  File "t.py", line 3\nValueError: bad lr'
    assert reasons.summary("exit_nonzero", text, 1) == "exit code 1: ValueError: bad lr"
