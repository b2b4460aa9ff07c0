"""What a user reads when a runtime cannot be built (no Ray needed)."""

from __future__ import annotations

from taugrid.agent.attempts import prewarm

PIP_NOT_FOUND = """Failed to set up runtime environment.
Traceback (most recent call last):
  File "ray/_private/runtime_env/agent/runtime_env_agent.py", line 563, in _create
RuntimeError: Failed to execute command: pip install termcolor==0.0.999 tabulate==0.9.0
ERROR: Could not find a version that satisfies the requirement termcolor==0.0.999
ERROR: No matching distribution found for termcolor==0.0.999
"""


def test_reason_names_the_requirement_and_pips_words_not_a_traceback() -> None:
    why = prewarm.failure_reason(
        ["termcolor==0.0.999", "tabulate==0.9.0"], "ab" * 20, PIP_NOT_FOUND
    )
    assert "'termcolor==0.0.999'" in why and "tabulate" not in why
    assert "No matching distribution found for termcolor==0.0.999" in why
    assert "fix runtime.pip in tau.yaml" in why and "Traceback" not in why
    assert "node abababababab" in why


def test_reason_without_pip_output_lists_every_requirement() -> None:
    why = prewarm.failure_reason(["x==1"], "n1", "worker died")
    assert "pip requirements ['x==1']" in why and "(worker died)" in why
