"""Failure reasons for people (``lifecycle.reasons``): texts as Ray and the agent produce them."""

from __future__ import annotations

import pytest

from taugrid.lifecycle import reasons

# What the agent reported for a submission to an unreachable Jobs API (the case).
SUBMIT = """submission failed: Ray Jobs API at http://127.0.0.2:8265 unreachable: \
Request failed with status code 500: Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/aiohttp/connector.py", line 1268, in _wrap_create
    sock = await aiohappyeyeballs.start_connection(
  File "/venv/lib/python3.11/site-packages/aiohappyeyeballs/impl.py", line 122, in start
    raise last_exc
  File "/venv/lib/python3.11/site-packages/aiohttp/connector.py", line 1291, in _create
    raise client_error(req.connection_key, exc) from exc
aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host 127.0.0.2:52365 \
ssl:default [Connect call failed ('127.0.0.2', 52365)]
"""

LOGS = """step 4 loss=0.91
Traceback (most recent call last):
  File "/tmp/ray/session/runtime_resources/working_dir/train.py", line 88, in <module>
    main()
  File "/tmp/ray/session/runtime_resources/working_dir/train.py", line 80, in main
    raise RuntimeError("failing at step 5 on purpose")
RuntimeError: failing at step 5 on purpose"""

# Ray's failed-job message carries the last logs; the agent appends its own tail.
EXIT = (
    "Job entrypoint command failed with exit code 3, last available logs "
    f"(truncated to 20,000 chars):\n{LOGS}\n\n{LOGS}"
)


def test_a_server_traceback_becomes_its_context_and_exception() -> None:
    why = reasons.summary("submit_error", SUBMIT)
    assert "\n" not in why and "File " not in why and "raise " not in why
    assert why.startswith(
        "submit_error: submission failed: Ray Jobs API at http://127.0.0.2:8265 unreachable"
    )
    assert "ClientConnectorError: Cannot connect to host 127.0.0.2:52365" in why
    assert "aiohttp.client_exceptions" not in why


def test_exit_nonzero_names_the_code_and_the_error_line_once() -> None:
    assert reasons.summary("exit_nonzero", EXIT, 3) == (
        "exit code 3: RuntimeError: failing at step 5 on purpose"
    )
    detail = reasons.detail(EXIT)
    assert detail.count("failing at step 5 on purpose") == 2  # the raise line + the error
    assert "last available logs" not in detail and detail.count("step 4 loss") == 1


# A Ray Train V2 driver whose rank 0 raised (Ray 2.60's output: colour codes, forwarded
# worker lines prefixed with the actor, deduplication notes).
TRAIN_V2 = (
    "ray.train.WorkerGroupError: Training failed due to worker errors:\n"
    "[Rank 0 Error Snippet]:\nTraceback (most recent call last):\n"
    '  File "/tmp/ray/working_dir/job.py", line 21, in loop\n'
    '    raise ValueError("loss is nan at step 7")\n'
    "ValueError: loss is nan at step 7\n"
    "\x1b[36m(TrainController pid=7809)\x1b[0m Traceback (most recent call last):"
    "\x1b[32m [repeated 2x across cluster] (Ray deduplicates logs by default.)\x1b[0m\n"
    '\x1b[36m(TrainController pid=7809)\x1b[0m     raise ValueError("loss is nan at step 7")'
    "\x1b[32m [repeated 2x across cluster]\x1b[0m\n"
    "\x1b[36m(RayTrainWorker pid=3523, ip=127.0.27.1)\x1b[0m ValueError: loss is nan at step 7"
    "\x1b[32m [repeated 2x across cluster]\x1b[0m\n"
)


def test_a_ray_train_failure_names_the_rank_and_the_users_error_without_rays_decoration() -> None:
    assert reasons.summary("exit_nonzero", TRAIN_V2, 1) == (
        "exit code 1: rank 0: ValueError: loss is nan at step 7"
    )
    assert "\x1b[" not in reasons.detail(TRAIN_V2)


@pytest.mark.parametrize(
    ("code", "phrase"),
    [
        (137, "exit code 137: killed (out of memory or a signal)"),
        (-9, "exit code -9: killed (out of memory or a signal)"),
        (143, "exit code 143 (killed by SIGTERM)"),
        (1, "exit code 1"),
    ],
)
def test_exit_codes_say_how_the_process_ended(code: int, phrase: str) -> None:
    assert reasons.exit_phrase(code) == phrase
    assert reasons.summary("exit_nonzero", "", code) == phrase


def test_one_line_messages_are_kept_as_they_are() -> None:
    msg = "attempt 1 ran longer than resilience.max_runtime (6s); stopped"
    assert reasons.summary("timeout", msg) == f"timeout: {msg}"
    assert reasons.summary("lost_contact", "") == "lost_contact"
    assert reasons.detail(msg) == msg
