"""CI's time budget for the long scenarios: whether one still fits before the deadline.

`.ci/run` gives `make test-long` what is left of its budget as ``TAU_TEST_DEADLINE``
(epoch seconds). Each ``long`` scenario declares its expected duration on a 2-core
machine, ``pytest.mark.long(expect_s=N)``; one that would end past the deadline is
skipped with the reason, rather than pushing CI past its limit.
"""

from __future__ import annotations

from collections.abc import Mapping

DEFAULT_EXPECT_S = 600.0


def skip_reason(marker_kwargs: Mapping[str, object], deadline: str | None, now: float) -> str:
    """Why a long scenario must not start now ("" when it may, or when no deadline is set)."""
    if not deadline:
        return ""
    expect = marker_kwargs.get("expect_s", DEFAULT_EXPECT_S)
    expect_s = float(expect) if isinstance(expect, int | float) else DEFAULT_EXPECT_S
    left_s = float(deadline) - now
    if expect_s <= left_s:
        return ""
    return (
        f"CI time budget: this scenario takes about {expect_s:.0f} s and "
        f"{max(left_s, 0.0):.0f} s are left before TAU_TEST_DEADLINE"
    )
